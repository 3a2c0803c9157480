/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The option parser every subcommand shares: a table per command instead of a getopt loop each. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

/* How many arguments args names: *min the required words, *max those and the [optional] ones,
 * -1 after a WORD..., [WORD...] or [WORD]... */
static void count_args(const char *args, int *min, int *max)
{
        int required = 0, optional = 0;
        bool many = !args; /* none named: any number */

        for (const char *w = args ? args + strspn(args, " ") : ""; *w; w += strspn(w, " ")) {
                size_t len = strcspn(w, " ");
                if (*w == '[')
                        optional++;
                else if (*w != '-')
                        required++;
                many = many || memmem(w, len, "...", 3); /* WORD..., [WORD...], [WORD]... */
                w += len;
        }
        *min = required;
        *max = many ? -1 : required + optional;
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
        int n = *argc - optind, min, max;
        struct stat st;

        if (!cmd->repo || !repo || !*repo)
                return;
        count_args(cmd->args, &min, &max);
        if (n >= min && (min == max || (stat((*argv)[optind], &st) == 0 && S_ISDIR(st.st_mode))))
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

int usage_error(const char *command, const char *args)
{
        log_error("expected 'blkvault %s%s%s' (see 'blkvault help %s')", command, *args ? " " : "", args, command);
        return EXIT_USAGE;
}

/* Whether n arguments are as many as args names. */
static bool count_fits(const char *args, int n)
{
        int min, max;

        count_args(args, &min, &max);
        return n >= min && (max < 0 || n <= max);
}

static int keyword_usage_error(const char *command, const CliKeyword *k)
{
        char form[256];

        snprintf(form, sizeof(form), "%s%s%s", k->name, *k->args ? " " : "", k->args);
        return usage_error(command, form);
}

/* The first argument of a keyword command: "help", or one of its keywords with its arguments.
 * Returns -1 if the command goes on, else an exit code. */
static int check_keyword(const CliCommand *cmd, int argc, char **argv)
{
        const char *word = optind < argc ? argv[optind] : "";
        const CliKeyword *k = cmd->keywords;
        char list[256] = "";
        size_t used = 0;

        if (strcmp(word, "help") == 0)
                return print_usage(cmd->usage);
        for (; k->name; k++)
                if (strcmp(k->name, word) == 0)
                        return count_fits(k->args, argc - optind - 1) ? -1 : keyword_usage_error(cmd->name, k);
        if (!cmd->keywords[1].name) /* the only keyword: its whole form */
                return keyword_usage_error(cmd->name, cmd->keywords);
        for (k = cmd->keywords; k->name && used < sizeof(list); k++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", used ? "|" : "", k->name);
        if (used < sizeof(list))
                snprintf(list + used, sizeof(list) - used, " ...");
        return usage_error(cmd->name, list);
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
        if (cmd->keywords)
                return check_keyword(cmd, *argcp, *argvp);
        if (cmd->args && !count_fits(cmd->args, *argcp - optind))
                return usage_error(cmd->name, cmd->args);
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

int parse_cache_size(const char *arg, void *ret)
{
        uint64_t size;

        if (bv_conf_parse_size(arg, &size) < 0) {
                log_error("invalid --cache '%s' (a size such as 256M)", arg);
                return -EINVAL;
        }
        if (size == 0) {
                log_error("invalid --cache '%s' (a size such as 256M: the cache cannot be turned off)", arg);
                return -EINVAL;
        }
        *(const char **)ret = arg;
        return 0;
}

int parse_point_in_time(const char *arg, void *ret)
{
        struct tm tm = {};
        const char *end = NULL;
        char *e;
        int64_t t;

        if (arg[0] == '@') {
                errno = 0;
                long long v = strtoll(arg + 1, &e, 10);
                if (e != arg + 1 && !*e && errno == 0 && v > 0) {
                        *(int64_t *)ret = v;
                        return 0;
                }
        } else {
                const char *forms[] = { "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
                                        "%Y-%m-%d %H:%M", "%Y-%m-%d" };
                for (size_t i = 0; i < ELEMENTSOF(forms) && !(end && (!*end || strcmp(end, "Z") == 0)); i++) {
                        tm = (struct tm){};
                        end = strptime(arg, forms[i], &tm);
                }
                t = end && (!*end || strcmp(end, "Z") == 0) ? (int64_t)timegm(&tm) : -1;
                if (t > 0) {
                        *(int64_t *)ret = t;
                        return 0;
                }
        }
        log_error("invalid --point-in-time '%s' (a time in UTC such as 2026-11-27T10:00:00Z, or @SECONDS "
                  "since the epoch)", arg);
        return -EINVAL;
}
