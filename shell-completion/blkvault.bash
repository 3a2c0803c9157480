# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for blkvault(1). The commands and each command's options are read from
# 'blkvault --help' and 'blkvault help COMMAND', so they are never out of date; repositories,
# sources and files complete as paths. Snapshots are not completed: listing them may need the
# passphrase.

_blkvault_commands() {
    "$1" --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p'
}

# The long options of a command, each with its '=' when it takes a value.
_blkvault_options() {
    "$1" help "$2" 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*=\?' | sort -u
}

_blkvault() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion -n = || return
    else
        cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
    fi
    local prog=${words[0]} cmd= i
    for ((i = 1; i < cword; i++)); do
        [[ ${words[i]} == -* ]] && continue
        cmd=${words[i]}
        break
    done

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$(_blkvault_commands "$prog") help --help --version" -- "$cur"))
        return
    fi
    case $cmd in
        help)
            COMPREPLY=($(compgen -W "$(_blkvault_commands "$prog")" -- "$cur"))
            return ;;
    esac

    if [[ $cur == --*=* ]]; then
        local opt=${cur%%=*} val=${cur#*=} values=
        case $opt in
            --encryption) values="aes-256-gcm none" ;;
            --chunker) values="hybrid cdc fixed" ;;
            --compression) values="auto zstd none" ;;
            --fs) values="ext4 xfs btrfs" ;;
        esac
        if [[ -n $values ]]; then
            COMPREPLY=($(compgen -W "$values" -- "$val"))
        else
            COMPREPLY=($(compgen -f -- "$val"))
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_blkvault_options "$prog" "$cmd") -q -v -h" -- "$cur"))
        [[ ${COMPREPLY[0]-} == *= ]] && compopt -o nospace 2>/dev/null
        return
    fi
    # the first argument of key, target, job, remote and config is a subcommand (or help)
    local sub=
    case $cmd in
        key) sub="change export import add list remove help" ;;
        target) sub="format run list help" ;;
        job) sub="run help" ;;
        remote) sub="copy help" ;;
        config) sub="check help" ;;
    esac
    if [[ -n $sub ]]; then
        local n=0
        for ((i = i + 1; i < cword; i++)); do [[ ${words[i]} == -* ]] || n=$((n + 1)); done
        if ((n == 0)); then
            COMPREPLY=($(compgen -W "$sub" -- "$cur"))
            return
        fi
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _blkvault blkvault
