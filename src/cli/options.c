/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The option parser every subcommand shares: a table per command instead of a getopt loop each. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define OPTIONS_MAX 24
#define OPT_BASE 0x100 /* getopt values of the table's long-only options: OPT_BASE + index */

static const struct option secret_options[] = { SECRET_OPTIONS };
static const struct option common_options[] = { COMMON_OPTIONS };

static const CliOption *option_of(const CliCommand *cmd, int c)
{
        for (const CliOption *o = cmd->options; o && o->name; o++)
                if (c == (o->short_name ? o->short_name : OPT_BASE + (int)(o - cmd->options)))
                        return o;
        return NULL;
}

/* Fills getopt_long's tables from the command's; false if they do not fit. */
static bool build_tables(const CliCommand *cmd, struct option *longs, size_t max, char *shorts)
{
        size_t n = 0, ns = 0;

        longs[n++] = (struct option){ "help", no_argument, NULL, 'h' };
        shorts[ns++] = 'h';
        for (size_t i = 0; i < ELEMENTSOF(common_options); i++) {
                longs[n++] = common_options[i];
                shorts[ns++] = (char)common_options[i].val;
        }
        if (cmd->secret)
                for (size_t i = 0; i < ELEMENTSOF(secret_options); i++)
                        longs[n++] = secret_options[i];
        for (const CliOption *o = cmd->options; o && o->name; o++) {
                if (n + 1 >= max)
                        return false;
                longs[n++] = (struct option){ o->name, o->arg || o->parse ? required_argument : no_argument, NULL,
                                              o->short_name ? o->short_name : OPT_BASE + (int)(o - cmd->options) };
                if (o->short_name)
                        shorts[ns++] = o->short_name;
        }
        longs[n] = (struct option){};
        shorts[ns] = 0;
        return true;
}

/* $BLKVAULT_REPO stands for a REPO left out. After getopt_long the arguments are argv[optind..]:
 * REPO goes before them when there are fewer than the command needs, or, for a command with
 * optional arguments, when the first is not a directory (a command given all its arguments then
 * says what is wrong with its REPO, rather than that there is one too many). The new argv lives
 * until we exit. */
static void env_repo_insert(const CliCommand *cmd, int *argc, char ***argv)
{
        static char **env_argv;
        const char *repo = getenv("BLKVAULT_REPO");
        int n = *argc - optind;
        struct stat st;

        if (!cmd->repo || !repo || !*repo)
                return;
        if (n >= cmd->min_args &&
            (cmd->min_args == cmd->max_args || (stat((*argv)[optind], &st) == 0 && S_ISDIR(st.st_mode))))
                return;
        char **out = calloc((size_t)*argc + 2, sizeof(*out));
        if (!out)
                return; /* then REPO is missing, and the command says so */
        memcpy(out, *argv, sizeof(*out) * (size_t)optind);
        out[optind] = (char *)repo;
        memcpy(out + optind + 1, *argv + optind, sizeof(*out) * (size_t)n);
        free(env_argv);
        *argv = env_argv = out;
        (*argc)++;
}

int cli_parse(const CliCommand *cmd, int *argcp, char ***argvp)
{
        int argc = *argcp;
        char **argv = *argvp;
        struct option longs[OPTIONS_MAX + ELEMENTSOF(secret_options) + ELEMENTSOF(common_options) + 2];
        char shorts[OPTIONS_MAX + ELEMENTSOF(common_options) + 2];
        int c;

        if (!build_tables(cmd, longs, ELEMENTSOF(longs), shorts))
                return log_error_errno(-E2BIG, "too many options for '%s'", cmd->name);
        while ((c = getopt_long(argc, argv, shorts, longs, NULL)) >= 0) {
                const CliOption *o = option_of(cmd, c);

                if (c == 'h')
                        return print_usage(cmd->usage);
                if (verbosity_parse(c))
                        continue;
                if (cmd->secret && secret_args_parse(cmd->secret, c, optarg))
                        continue;
                if (!o)
                        return EXIT_USAGE; /* main says which (log_option_error) */
                if (o->set)
                        *o->set = true;
                else if (o->clear)
                        *o->clear = false;
                else if (o->arg)
                        *o->arg = optarg;
                else if (o->parse(optarg, o->ret) < 0)
                        return EXIT_USAGE;
        }
        env_repo_insert(cmd, argcp, argvp);
        int n = *argcp - optind;
        if (cmd->expected && (n < cmd->min_args || (cmd->max_args >= 0 && n > cmd->max_args))) {
                log_error("%s", cmd->expected);
                return EXIT_USAGE;
        }
        return -1;
}

int parse_unsigned_arg(const char *option, const char *arg, unsigned min, unsigned max, unsigned *ret)
{
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(arg, &end, 10);
        if (end == arg || *end || errno || arg[0] == '-' || v < min || v > max) {
                log_error("invalid %s '%s' (%u to %u)", option, arg, min, max);
                return -EINVAL;
        }
        *ret = (unsigned)v;
        return 0;
}

int parse_threads(const char *arg, void *ret)
{
        return parse_unsigned_arg("--threads", arg, 1, 256, ret);
}

int check_size_arg(const char *option, const char *arg)
{
        char *end;

        errno = 0;
        (void)strtoull(arg, &end, 10);
        if (end != arg && !errno && *end && strchr("kKmMgGtT", *end))
                end++;
        if (end == arg || errno || *end || arg[0] == '-' || arg[0] == '+') {
                log_error("invalid %s '%s' (a size such as 256M)", option, arg);
                return EXIT_USAGE;
        }
        return EXIT_OK;
}

int parse_cache_size(const char *arg, void *ret)
{
        if (check_size_arg("--cache", arg) != EXIT_OK)
                return -EINVAL;
        *(const char **)ret = arg;
        return 0;
}
