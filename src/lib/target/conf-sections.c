/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-internal.h"

static const char *const kind_names[] = {
        [CONF_TARGET] = "target",
        [CONF_JOB] = "job",
        [CONF_EXPORT] = "export",
        [CONF_GLOBAL] = "global",
};

enum { T_UUID, T_KEY_FILE, T_REPOSITORY, T_MODE, T_POWER_OFF, T_LUKS, T_FS_OPTIONS, T_ON_SUCCESS, T_ON_FAILURE };
static const char *const target_keys[] = {
        "uuid", "key-file", "repository", "mode", "power-off", "luks", "fs-options", "on-success", "on-failure", NULL,
};

enum { G_ON_SUCCESS, G_ON_FAILURE, G_NOTIFY, G_METRICS };
static const char *const global_keys[] = { "on-success", "on-failure", "notify", "metrics", NULL };

enum { J_SOURCE, J_COMMAND, J_SNAPSHOT, J_TARGETS, J_SCHEDULE, J_KEEP_LAST, J_KEEP_HOURLY, J_KEEP_DAILY,
       J_KEEP_WEEKLY, J_KEEP_MONTHLY, J_KEEP_YEARLY, J_KEEP_WITHIN, J_PRE, J_POST, J_MAX_AGE, J_ON_SUCCESS,
       J_ON_FAILURE, J_USED_ONLY };
static const char *const job_keys[] = {
        "source", "command", "snapshot", "targets", "schedule", "keep-last", "keep-hourly", "keep-daily",
        "keep-weekly", "keep-monthly", "keep-yearly", "keep-within", "pre", "post", "max-age", "on-success",
        "on-failure", "used-only", NULL,
};

enum { E_REPOSITORY, E_SNAPSHOT, E_PASSPHRASE_FILE, E_KEY_FILE, E_CACHE };
static const char *const export_keys[] = {
        "repository", "snapshot", "passphrase-file", "key-file", "cache", NULL,
};

_Static_assert(ELEMENTSOF(job_keys) - 1 <= ELEMENTSOF(((ConfSection *)0)->seen), "ConfSection.seen is too small");

static const char *const *const kind_keys[] = {
        [CONF_TARGET] = target_keys,
        [CONF_JOB] = job_keys,
        [CONF_EXPORT] = export_keys,
        [CONF_GLOBAL] = global_keys,
};

/* Letters, digits, '.', '_' and '-', not starting with '.' or '-': names become parts of unit
 * names (blkvault-job@NAME.service) and file names. */
static bool conf_name_valid(const char *s, size_t n)
{
        if (n == 0 || n > BV_CONF_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

static const char *entity_name(const BvConfig *c, const ConfSection *s)
{
        switch (s->kind) {
        case CONF_TARGET:
                return c->targets[s->index].name;
        case CONF_JOB:
                return c->jobs[s->index].name;
        case CONF_EXPORT:
                return c->exports[s->index].name;
        case CONF_GLOBAL:
                return "";
        default:
                return NULL;
        }
}

/* Where an entity of this kind and name was first defined, if it was. */
static const BvConfWhere *conf_find(const BvConfig *c, ConfKind kind, const char *name)
{
        const void *e = kind == CONF_TARGET ? (const void *)bv_conf_target_by_name(c, name) :
                        kind == CONF_JOB    ? (const void *)bv_conf_job_by_name(c, name) :
                                              (const void *)bv_conf_export_by_name(c, name);
        if (!e)
                return NULL;
        return kind == CONF_TARGET ? &((const BvConfTarget *)e)->where :
               kind == CONF_JOB    ? &((const BvConfJob *)e)->where :
                                     &((const BvConfExport *)e)->where;
}

static int conf_add(BvConfig *c, ConfKind kind, char *name, BvConfWhere where, size_t *ret_index)
{
        if (kind == CONF_TARGET) {
                BvConfTarget *a = reallocarray(c->targets, c->n_targets + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->targets = a;
                a[c->n_targets] = (BvConfTarget){ .name = name, .where = where, .luks = true };
                *ret_index = c->n_targets++;
        } else if (kind == CONF_JOB) {
                BvConfJob *a = reallocarray(c->jobs, c->n_jobs + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->jobs = a;
                a[c->n_jobs] = (BvConfJob){ .name = name, .where = where, .any_target = true,
                                            .keep = { BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET,
                                                      BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, 0 },
                                            .max_age = BV_CONF_DEFAULT_MAX_AGE };
                *ret_index = c->n_jobs++;
        } else {
                BvConfExport *a = reallocarray(c->exports, c->n_exports + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->exports = a;
                a[c->n_exports] = (BvConfExport){ .name = name, .where = where };
                *ret_index = c->n_exports++;
        }
        return 0;
}

int conf_section_open(BvConfig *c, const char *file, unsigned line, const char *header, ConfSection *ret)
{
        *ret = (ConfSection){ .kind = CONF_INVALID };
        if (!*header)
                return 0; /* keys before any section: each is reported by conf_section_set */
        if (strcmp(header, "global") == 0) {
                if (c->global_where.file)
                        return conf_error(c, file, line, "[global] is defined twice (first at %s:%u)",
                                          c->global_where.file, c->global_where.line);
                c->global_where = (BvConfWhere){ file, line };
                *ret = (ConfSection){ .kind = CONF_GLOBAL };
                return 0;
        }
        size_t klen = strcspn(header, " \t");
        const char *name = header + klen + strspn(header + klen, " \t");
        ConfKind kind = CONF_NONE;
        for (ConfKind k = CONF_TARGET; k <= CONF_EXPORT; k++)
                if (strlen(kind_names[k]) == klen && strncmp(header, kind_names[k], klen) == 0)
                        kind = k;
        if (kind == CONF_NONE || kind == CONF_GLOBAL)
                return conf_error(c, file, line,
                                  "unknown section [%s] (expected [global], [target NAME], [job NAME] or "
                                  "[export NAME])",
                                  header);
        if (!*name)
                return conf_error(c, file, line, "[%s] needs a name, as in [%s NAME]", header, kind_names[kind]);
        if (!conf_name_valid(name, strlen(name)))
                return conf_error(c, file, line,
                                  "invalid name '%s' in [%s] (letters, digits, '.', '_' and '-', at most %d, "
                                  "not starting with '.' or '-')",
                                  name, header, BV_CONF_NAME_MAX);
        const BvConfWhere *first = conf_find(c, kind, name);
        if (first)
                return conf_error(c, file, line, "[%s %s] is defined twice (first at %s:%u)", kind_names[kind], name,
                                  first->file, first->line);
        char *n = strdup(name);
        if (!n)
                return -ENOMEM;
        size_t index;
        int r = conf_add(c, kind, n, (BvConfWhere){ file, line }, &index);
        if (r < 0) {
                free(n);
                return r;
        }
        *ret = (ConfSection){ .kind = kind, .index = index };
        return 0;
}

char **conf_section_mistake(BvConfig *c, const char *file, unsigned line)
{
        for (size_t i = 0; i < c->n_targets; i++)
                if (c->targets[i].where.file == file && c->targets[i].where.line == line)
                        return &c->targets[i].mistake;
        for (size_t i = 0; i < c->n_jobs; i++)
                if (c->jobs[i].where.file == file && c->jobs[i].where.line == line)
                        return &c->jobs[i].mistake;
        for (size_t i = 0; i < c->n_exports; i++)
                if (c->exports[i].where.file == file && c->exports[i].where.line == line)
                        return &c->exports[i].mistake;
        return NULL;
}

int conf_set_mistake(char **mistake, const BvConfError *e)
{
        if (*mistake)
                return 0;
        int n = e->line > 0 ? asprintf(mistake, "%s:%u: %s", e->file, e->line, e->message) :
                              asprintf(mistake, "%s: %s", e->file, e->message);
        if (n < 0) {
                *mistake = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* The value setters report a bad value at (file, line) and return 0; -ENOMEM only. */
typedef struct Ctx {
        BvConfig *c;
        const char *file;
        unsigned line;
        const char *key;
} Ctx;

static int set_string(const Ctx *x, const char *value, char **dest)
{
        char *s = strdup(value);
        if (!s)
                return -ENOMEM;
        free(*dest);
        *dest = s;
        return 0;
}

static int set_absolute(const Ctx *x, const char *value, char **dest)
{
        if (value[0] != '/')
                return conf_error(x->c, x->file, x->line, "%s must be an absolute path, not '%s'", x->key, value);
        return set_string(x, value, dest);
}

static int set_bool(const Ctx *x, const char *value, bool *dest)
{
        static const char *const yes[] = { "yes", "true", "on", "1" }, *const no[] = { "no", "false", "off", "0" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(value, yes[i]) == 0)
                        return *dest = true, 0;
                if (strcasecmp(value, no[i]) == 0)
                        return *dest = false, 0;
        }
        return conf_error(x->c, x->file, x->line, "invalid value '%s' for %s (expected yes or no)", value, x->key);
}

static int set_count(const Ctx *x, const char *value, int *dest)
{
        char *end;
        errno = 0;
        long n = strcmp(value, "-1") == 0 ? -1 : isdigit((unsigned char)value[0]) ? strtol(value, &end, 10) : -2;
        if (n < -1 || errno || (n >= 0 && *end) || n > 1000000)
                return conf_error(x->c, x->file, x->line,
                                  "invalid value '%s' for %s (expected a whole number from 0 to 1000000, or -1 for "
                                  "every one)",
                                  value, x->key);
        *dest = (int)n;
        return 0;
}

static int set_duration(const Ctx *x, const char *value, uint64_t *dest)
{
        if (bv_conf_parse_duration(value, dest) < 0)
                return conf_error(x->c, x->file, x->line,
                                  "invalid duration '%s' for %s (expected a number and a unit: s, min, h, d or w, "
                                  "as in 7d)",
                                  value, x->key);
        return 0;
}

static bool uuid_valid(const char *s)
{
        static const int groups[] = { 8, 4, 4, 4, 12 };
        for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
                for (int i = 0; i < groups[g]; i++, s++)
                        if (!isxdigit((unsigned char)*s))
                                return false;
                if (*s != (g + 1 < ELEMENTSOF(groups) ? '-' : '\0'))
                        return false;
                s++;
        }
        return true;
}

static int set_uuid(const Ctx *x, const char *value, char **dest)
{
        if (!uuid_valid(value))
                return conf_error(x->c, x->file, x->line,
                                  "invalid uuid '%s' (expected 8-4-4-4-12 hexadecimal digits)", value);
        int r = set_string(x, value, dest);
        for (char *p = *dest; r >= 0 && *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return r;
}

/* A relative path inside the target's filesystem, with no '..' and no empty component. */
static int set_inner_path(const Ctx *x, const char *value, char **dest)
{
        bool ok = value[0] != '/';
        for (const char *p = value; ok && *p;) {
                size_t n = strcspn(p, "/");
                ok = n > 0 && !(n == 2 && p[0] == '.' && p[1] == '.');
                p += n;
                if (*p == '/')
                        p++;
        }
        if (!ok)
                return conf_error(x->c, x->file, x->line,
                                  "repository must be a relative path inside the drive's filesystem, without "
                                  "'..', not '%s'",
                                  value);
        return set_string(x, value, dest);
}

static int set_target_key(const Ctx *x, BvConfTarget *t, int key, const char *value)
{
        switch (key) {
        case T_UUID:
                return set_uuid(x, value, &t->uuid);
        case T_KEY_FILE:
                t->key_file_where = (BvConfWhere){ x->file, x->line };
                return set_absolute(x, value, &t->key_file);
        case T_REPOSITORY:
                return set_inner_path(x, value, &t->repository);
        case T_MODE:
                if (strcmp(value, "backup") == 0 || strcmp(value, "restore-only") == 0) {
                        t->mode = value[0] == 'b' ? BV_TARGET_BACKUP : BV_TARGET_RESTORE_ONLY;
                        return 0;
                }
                return conf_error(x->c, x->file, x->line, "invalid mode '%s' (expected backup or restore-only)",
                                  value);
        case T_POWER_OFF:
                return set_bool(x, value, &t->power_off);
        case T_LUKS:
                return set_bool(x, value, &t->luks);
        case T_ON_SUCCESS:
                return set_string(x, value, &t->on_success);
        case T_ON_FAILURE:
                return set_string(x, value, &t->on_failure);
        default:
                return set_string(x, value, &t->fs_options);
        }
}

static int set_targets(const Ctx *x, BvConfJob *j, const char *value)
{
        _cleanup_free_ char *copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        bool any = false;
        size_t named = 0;
        j->targets_where = (BvConfWhere){ x->file, x->line };
        for (char *save = NULL, *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
                if (strcmp(w, "any") == 0) {
                        any = true;
                        continue;
                }
                if (!conf_name_valid(w, strlen(w)))
                        return conf_error(x->c, x->file, x->line, "invalid target name '%s' in targets", w);
                char **v = reallocarray(j->targets, j->n_targets + 2, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                j->targets = v;
                if (!(v[j->n_targets] = strdup(w)))
                        return -ENOMEM;
                v[++j->n_targets] = NULL;
                named++;
        }
        if (any && named > 0)
                return conf_error(x->c, x->file, x->line, "'any' cannot be combined with target names");
        if (!any && named == 0)
                return conf_error(x->c, x->file, x->line, "targets names no target (a list of names, or any)");
        j->any_target = any;
        return 0;
}

static int set_job_key(const Ctx *x, BvConfJob *j, int key, const char *value)
{
        int *counts[] = {
                [J_KEEP_LAST] = &j->keep.last,     [J_KEEP_HOURLY] = &j->keep.hourly,
                [J_KEEP_DAILY] = &j->keep.daily,   [J_KEEP_WEEKLY] = &j->keep.weekly,
                [J_KEEP_MONTHLY] = &j->keep.monthly, [J_KEEP_YEARLY] = &j->keep.yearly,
        };
        char **strings[] = {
                [J_COMMAND] = &j->command, [J_PRE] = &j->pre, [J_POST] = &j->post,
                [J_ON_SUCCESS] = &j->on_success, [J_ON_FAILURE] = &j->on_failure,
        };
        switch (key) {
        case J_SOURCE:
                if (strncmp(value, "command:", 8) == 0) {
                        if (!value[8 + strspn(value + 8, " \t")])
                                return conf_error(x->c, x->file, x->line, "source = command: names no command");
                        return set_string(x, value, &j->source);
                }
                return set_absolute(x, value, &j->source);
        case J_SNAPSHOT:
                return set_bool(x, value, &j->snapshot);
        case J_USED_ONLY:
                return set_bool(x, value, &j->used_only);
        case J_TARGETS:
                return set_targets(x, j, value);
        case J_SCHEDULE:
                j->schedule_where = (BvConfWhere){ x->file, x->line };
                return set_string(x, value, &j->schedule);
        case J_KEEP_LAST ... J_KEEP_YEARLY:
                return set_count(x, value, counts[key]);
        case J_KEEP_WITHIN:
                return set_duration(x, value, &j->keep.within);
        case J_MAX_AGE:
                return set_duration(x, value, &j->max_age);
        default:
                return set_string(x, value, strings[key]);
        }
}

/* An [export]'s cache: a size nbdkit takes, not 0 (the plugin's cache cannot be turned off). */
static int set_cache(const Ctx *x, const char *value, char **ret)
{
        uint64_t size;
        int r = bv_conf_parse_size(value, &size);

        if (r == -ERANGE)
                return conf_error(x->c, x->file, x->line,
                                  "invalid size '%s' for cache (too large: nbdkit takes less than 8E)", value);
        if (r < 0)
                return conf_error(x->c, x->file, x->line,
                                  "invalid size '%s' for cache (expected digits and an optional K, M, G or T)",
                                  value);
        if (size == 0)
                return conf_error(x->c, x->file, x->line,
                                  "invalid size '%s' for cache (a size such as 256M: the cache cannot be "
                                  "turned off)",
                                  value);
        return set_string(x, value, ret);
}

static int set_export_key(const Ctx *x, BvConfExport *e, int key, const char *value)
{
        switch (key) {
        case E_REPOSITORY:
                return set_absolute(x, value, &e->repository);
        case E_SNAPSHOT:
                return set_string(x, value, &e->snapshot);
        case E_PASSPHRASE_FILE:
                e->secret_where = (BvConfWhere){ x->file, x->line };
                return set_absolute(x, value, &e->passphrase_file);
        case E_KEY_FILE:
                e->secret_where = (BvConfWhere){ x->file, x->line };
                return set_absolute(x, value, &e->key_file);
        default:
                return set_cache(x, value, &e->cache);
        }
}

static int set_global_key(const Ctx *x, BvConfig *c, int key, const char *value)
{
        switch (key) {
        case G_ON_SUCCESS:
                return set_string(x, value, &c->on_success);
        case G_ON_FAILURE:
                return set_string(x, value, &c->on_failure);
        case G_NOTIFY:
                return set_string(x, value, &c->notify);
        default:
                c->no_metrics = strcasecmp(value, "no") == 0 || strcasecmp(value, "none") == 0 ||
                                strcasecmp(value, "off") == 0;
                if (c->no_metrics)
                        return 0;
                if (value[0] != '/')
                        return conf_error(x->c, x->file, x->line,
                                          "metrics must be an absolute path, or no to write no textfile, not '%s'",
                                          value);
                return set_string(x, value, &c->metrics);
        }
}

int conf_section_set(BvConfig *c, ConfSection *s, const char *file, unsigned line, const char *key,
                     const char *value)
{
        if (s->kind == CONF_INVALID)
                return conf_error(c, file, line, "'%s' is outside of any section", key);
        const char *kind = kind_names[s->kind], *name = entity_name(c, s), *sp = *name ? " " : "";
        int k = -1;
        for (int i = 0; kind_keys[s->kind][i]; i++)
                if (strcmp(kind_keys[s->kind][i], key) == 0)
                        k = i;
        if (k < 0)
                return conf_error(c, file, line, "unknown key '%s' in [%s%s%s]", key, kind, sp, name);
        if (s->seen[k])
                return conf_error(c, file, line, "'%s' is set twice in [%s%s%s] (first on line %u)", key, kind, sp,
                                  name, s->seen[k]);
        s->seen[k] = line;
        if (!*value)
                return conf_error(c, file, line, "'%s' has no value", key);
        Ctx x = { c, file, line, key };
        if (s->kind == CONF_TARGET)
                return set_target_key(&x, &c->targets[s->index], k, value);
        if (s->kind == CONF_JOB)
                return set_job_key(&x, &c->jobs[s->index], k, value);
        if (s->kind == CONF_GLOBAL)
                return set_global_key(&x, c, k, value);
        return set_export_key(&x, &c->exports[s->index], k, value);
}

static int finish_target(BvConfig *c, size_t i)
{
        BvConfTarget *t = &c->targets[i];
        const char *f = t->where.file;
        unsigned l = t->where.line;
        int r = 0;

        if (!t->uuid)
                r = conf_error(c, f, l, "[target %s] has no uuid", t->name);
        if (r >= 0 && !t->key_file)
                r = conf_error(c, f, l, "[target %s] has no key-file", t->name);
        if (r >= 0 && !t->repository && !(t->repository = strdup(BV_CONF_DEFAULT_REPOSITORY)))
                r = -ENOMEM;
        for (size_t k = 0; r >= 0 && t->uuid && k < i; k++)
                if (c->targets[k].uuid && strcmp(c->targets[k].uuid, t->uuid) == 0)
                        r = conf_error(c, f, l, "[target %s] has the same uuid as [target %s] (%s:%u)", t->name,
                                       c->targets[k].name, c->targets[k].where.file, c->targets[k].where.line);
        return r;
}

/* Some keep-* count is set, and every one set is 0 (keep-within is never 0). */
static bool keeps_nothing(const BvConfRetention *k)
{
        const int counts[] = { k->last, k->hourly, k->daily, k->weekly, k->monthly, k->yearly };
        bool set = false;
        for (size_t i = 0; i < ELEMENTSOF(counts); i++) {
                if (counts[i] != BV_CONF_KEEP_UNSET && counts[i] != 0)
                        return false;
                set |= counts[i] == 0;
        }
        return set && k->within == 0;
}

static int finish_job(BvConfig *c, BvConfJob *j)
{
        const char *f = j->where.file;
        unsigned l = j->where.line;
        int r = 0;

        if (!j->source && !j->command)
                r = conf_error(c, f, l, "[job %s] has no source (set source = PATH or command = COMMAND)", j->name);
        else if (j->source && j->command)
                r = conf_error(c, f, l, "[job %s] has both source and command (set one)", j->name);
        else if (bv_conf_job_command(j) && j->snapshot)
                r = conf_error(c, f, l, "[job %s]: snapshot = yes needs a source that is an LVM logical volume, "
                               "not a command", j->name);
        else if (bv_conf_job_command(j) && j->used_only)
                r = conf_error(c, f, l, "[job %s]: used-only = yes needs a source that is a device or an image "
                               "file, not a command (a stream cannot skip what it does not read)", j->name);
        if (r >= 0 && keeps_nothing(&j->keep))
                r = conf_error(c, f, l, "[job %s]: its keep-* rules keep nothing (all 0), so each run would forget "
                               "every snapshot: keep at least one, or set no keep-* to prune nothing", j->name);
        for (size_t i = 0; r >= 0 && i < j->n_targets; i++)
                if (!bv_conf_target_by_name(c, j->targets[i]))
                        r = conf_error(c, j->targets_where.file, j->targets_where.line,
                                       "[job %s]: unknown target '%s' (no [target %s])", j->name, j->targets[i],
                                       j->targets[i]);
        return r;
}

static int finish_export(BvConfig *c, BvConfExport *e)
{
        const char *f = e->where.file;
        unsigned l = e->where.line;
        int r = 0;

        if (!e->repository)
                r = conf_error(c, f, l, "[export %s] has no repository", e->name);
        else if (e->passphrase_file && e->key_file)
                r = conf_error(c, f, l, "[export %s] has both passphrase-file and key-file (set one)", e->name);
        if (r >= 0 && !e->snapshot && !(e->snapshot = strdup("latest")))
                r = -ENOMEM;
        return r;
}

/* A check across sections found a mistake in the section of *mistake since error `from`. */
static int finish_mark(BvConfig *c, size_t from, int r, char **mistake)
{
        return r >= 0 && c->n_errors > from ? conf_set_mistake(mistake, &c->errors[from]) : r;
}

int bv_conf_finish(BvConfig *c)
{
        int r = 0;
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_targets; i++, n = c->n_errors)
                r = finish_mark(c, n, finish_target(c, i), &c->targets[i].mistake);
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_jobs; i++, n = c->n_errors)
                r = finish_mark(c, n, finish_job(c, &c->jobs[i]), &c->jobs[i].mistake);
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_exports; i++, n = c->n_errors)
                r = finish_mark(c, n, finish_export(c, &c->exports[i]), &c->exports[i].mistake);
        bv_conf_sort_errors(c);
        return r;
}
