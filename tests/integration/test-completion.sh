#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion (issue 12): sourced into bash, with bash-completion's helpers and without,
# it completes the commands, every long option of a command (as the code's getopt tables have
# them, tests/cli-options.py), the values of --encryption and --chunker, the subcommands of
# key, and file names.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd python3
script=$SOURCE_ROOT/shell-completion/blkvault.bash
bashcomp=/usr/share/bash-completion/bash_completion
[ -r "$bashcomp" ] || die "bash-completion is not installed ($bashcomp): scripts/install-deps.sh installs it"
mkdir "$T/bin"
ln -s "$BLKVAULT" "$T/bin/blkvault"

# comp WITH_BASHCOMP WORD...: the completions of "blkvault WORD..." with the cursor at the end
comp() {
    local with=$1; shift
    PATH=$T/bin:$PATH bash --norc --noprofile -c '
        with=$1 bashcomp=$2 script=$3; shift 3
        [ "$with" = 1 ] && . "$bashcomp"
        . "$script"
        complete -p blkvault >/dev/null || exit 3
        COMP_WORDS=(blkvault "$@")
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        COMP_LINE="${COMP_WORDS[*]}"
        COMP_POINT=${#COMP_LINE}
        _blkvault blkvault "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$with" "$bashcomp" "$script" "$@"
}

commands=$(sed -n 's/^ *{ "\([a-z]*\)", cmd_[a-z]*, ".*/\1/p' "$SOURCE_ROOT/src/cli/main.c" | sort)
[ "$(echo "$commands" | wc -l)" -ge 15 ] || die "found too few commands in main.c"
python3 "$SOURCE_ROOT/tests/cli-options.py" "$SOURCE_ROOT" >"$T/options"
touch "$T/image.raw" "$T/image.qcow"

for with in 0 1; do
    # every command, and only commands (and help, --help, --version)
    assert_eq "$(comp $with "")" "$(printf '%s\n' $commands help --help --version | sort)" "commands (bash-completion $with)"
    assert_eq "$(comp $with ba)" "backup" "'ba' (bash-completion $with)"
    assert_eq "$(comp $with help ver)" "verify" "'help ver' (bash-completion $with)"
    # every long option of each command, with '=' when it takes a value
    for cmd in $commands; do
        comp $with "$cmd" -- >"$T/got"
        for opt in $(awk -v c="$cmd" '$1 == c {print $2}' "$T/options"); do
            grep -qxE -- "--$opt=?" "$T/got" || die "'blkvault $cmd --<TAB>' lacks --$opt (bash-completion $with): $(tr '\n' ' ' <"$T/got")"
        done
    done
    assert_eq "$(comp $with backup repo --thr)" "--threads=" "'backup --thr' (bash-completion $with)"
    assert_eq "$(comp $with key "")" "$(printf '%s\n' add change export help import list remove)" "key's subcommands (bash-completion $with)"
    assert_eq "$(comp $with restore "$T/repo" latest "$T/image.")" "$(printf '%s\n' "$T/image.qcow" "$T/image.raw")" \
        "file names (bash-completion $with)"
done
# with bash-completion the word holds the '=' and the value completes
assert_eq "$(comp 1 init "$T/r" --encryption=)" "$(printf '%s\n' aes-256-gcm none)" "--encryption= values"
assert_eq "$(comp 1 init "$T/r" --chunker=c)" "cdc" "--chunker= values"
assert_eq "$(comp 1 backup "$T/r" --passphrase-file="$T/image.r")" "$T/image.raw" "a file option's value"
echo ok
