/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-internal.h"
#include "s3-conf.h"
#include "source.h"

static const char *const kind_names[] = {
        [CONF_TARGET] = "target",
        [CONF_JOB] = "job",
        [CONF_EXPORT] = "export",
        [CONF_REMOTE] = "remote",
        [CONF_GLOBAL] = "global",
};

enum { T_UUID, T_KEY_FILE, T_REPOSITORY, T_MODE, T_POWER_OFF, T_LUKS, T_FS_OPTIONS, T_ON_SUCCESS, T_ON_FAILURE,
       T_COPY_TO };
static const char *const target_keys[] = {
        "uuid", "key-file", "repository", "mode", "power-off", "luks", "fs-options", "on-success", "on-failure",
        "copy-to", NULL,
};

enum { G_ON_SUCCESS, G_ON_FAILURE, G_NOTIFY, G_METRICS };
static const char *const global_keys[] = { "on-success", "on-failure", "notify", "metrics", NULL };

enum { J_SOURCE, J_COMMAND, J_SNAPSHOT, J_TARGETS, J_SCHEDULE, J_KEEP_LAST, J_KEEP_HOURLY, J_KEEP_DAILY,
       J_KEEP_WEEKLY, J_KEEP_MONTHLY, J_KEEP_YEARLY, J_KEEP_WITHIN, J_PRE, J_POST, J_MAX_AGE, J_ON_SUCCESS,
       J_ON_FAILURE, J_USED_ONLY, J_COPY_TO, J_AS_FILE, J_IMAGE_FORMAT, J_LIBVIRT_URI, J_FREEZE, J_DISK };
static const char *const job_keys[] = {
        "source", "command", "snapshot", "targets", "schedule", "keep-last", "keep-hourly", "keep-daily",
        "keep-weekly", "keep-monthly", "keep-yearly", "keep-within", "pre", "post", "max-age", "on-success",
        "on-failure", "used-only", "copy-to", "as-file", "image-format", "libvirt-uri", "freeze", "disk", NULL,
};

enum { E_REPOSITORY, E_SNAPSHOT, E_PASSPHRASE_FILE, E_KEY_FILE, E_CACHE };
static const char *const export_keys[] = {
        "repository", "snapshot", "passphrase-file", "key-file", "cache", NULL,
};

/* keep-* first, in the order of job_keys' (set_keep) */
enum { R_KEEP_LAST, R_KEEP_HOURLY, R_KEEP_DAILY, R_KEEP_WEEKLY, R_KEEP_MONTHLY, R_KEEP_YEARLY, R_KEEP_WITHIN,
       R_LOCATION, R_CREDENTIALS, R_ENDPOINT, R_REGION, R_OBJECT_LOCK, R_LIMIT_UPLOAD, R_LIMIT_DOWNLOAD, R_MAX_AGE };
static const char *const remote_keys[] = {
        "keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly", "keep-within",
        "location", "credentials", "endpoint", "region", "object-lock", "limit-upload", "limit-download",
        "max-age", NULL,
};

_Static_assert(ELEMENTSOF(job_keys) - 1 <= ELEMENTSOF(((ConfSection *)0)->seen), "ConfSection.seen is too small");
_Static_assert(ELEMENTSOF(remote_keys) - 1 <= ELEMENTSOF(((ConfSection *)0)->seen), "ConfSection.seen is too small");

static const char *const *const kind_keys[] = {
        [CONF_TARGET] = target_keys,
        [CONF_JOB] = job_keys,
        [CONF_EXPORT] = export_keys,
        [CONF_REMOTE] = remote_keys,
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
        case CONF_REMOTE:
                return c->remotes[s->index].name;
        default: /* CONF_GLOBAL */
                return "";
        }
}

/* Where an entity of this kind and name was first defined, if it was. */
static const BvConfWhere *conf_find(const BvConfig *c, ConfKind kind, const char *name)
{
        const void *e = kind == CONF_TARGET ? (const void *)bv_conf_target_by_name(c, name) :
                        kind == CONF_JOB    ? (const void *)bv_conf_job_by_name(c, name) :
                        kind == CONF_REMOTE ? (const void *)bv_conf_remote_by_name(c, name) :
                                              (const void *)bv_conf_export_by_name(c, name);
        if (!e)
                return NULL;
        return kind == CONF_TARGET ? &((const BvConfTarget *)e)->where :
               kind == CONF_JOB    ? &((const BvConfJob *)e)->where :
               kind == CONF_REMOTE ? &((const BvConfRemote *)e)->where :
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
        } else if (kind == CONF_REMOTE) {
                BvConfRemote *a = reallocarray(c->remotes, c->n_remotes + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->remotes = a;
                a[c->n_remotes] = (BvConfRemote){ .name = name, .where = where,
                                                  .keep = { BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET,
                                                            BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, BV_CONF_KEEP_UNSET, 0 },
                                                  .max_age = BV_CONF_DEFAULT_MAX_AGE };
                *ret_index = c->n_remotes++;
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
        for (ConfKind k = CONF_TARGET; k <= CONF_REMOTE; k++)
                if (strlen(kind_names[k]) == klen && strncmp(header, kind_names[k], klen) == 0)
                        kind = k;
        if (kind == CONF_NONE || kind == CONF_GLOBAL)
                return conf_error(c, file, line,
                                  "unknown section [%s] (expected [global], [target NAME], [job NAME], "
                                  "[export NAME] or [remote NAME])",
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
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].where.file == file && c->remotes[i].where.line == line)
                        return &c->remotes[i].mistake;
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

static int set_copy_to(const Ctx *x, char ***v, size_t *n, BvConfWhere *where, const char *value);

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
        case T_COPY_TO:
                return set_copy_to(x, &t->copy_to, &t->n_copy_to, &t->copy_to_where, value);
        default:
                return set_string(x, value, &t->fs_options);
        }
}

/* Appends a copy of w to the NULL-terminated list *v of *n names. */
static int append_name(char ***v, size_t *n, const char *w)
{
        char **a = reallocarray(*v, *n + 2, sizeof(*a));
        if (!a)
                return -ENOMEM;
        *v = a;
        if (!(a[*n] = strdup(w)))
                return -ENOMEM;
        a[++*n] = NULL;
        return 0;
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
                int r = append_name(&j->targets, &j->n_targets, w);
                if (r < 0)
                        return r;
                named++;
        }
        if (any && named > 0)
                return conf_error(x->c, x->file, x->line, "'any' cannot be combined with target names");
        if (!any && named == 0)
                return conf_error(x->c, x->file, x->line, "targets names no target (a list of names, or any)");
        j->any_target = any;
        return 0;
}

/* A list of names (separated by commas or blanks) of key: each valid as `one`, at least one (else
 * "KEY names no NOUN (LIST)"). */
static int set_name_list(const Ctx *x, char ***v, size_t *n, const char *value, const char *key, const char *one,
                         const char *noun, const char *list)
{
        _cleanup_free_ char *copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        for (char *save = NULL, *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
                if (!conf_name_valid(w, strlen(w)))
                        return conf_error(x->c, x->file, x->line, "invalid %s '%s' in %s", one, w, key);
                for (size_t i = 0; i < *n; i++)
                        if (strcmp((*v)[i], w) == 0)
                                return conf_error(x->c, x->file, x->line, "%s names %s '%s' twice", key, one, w);
                int r = append_name(v, n, w);
                if (r < 0)
                        return r;
        }
        if (*n == 0)
                return conf_error(x->c, x->file, x->line, "%s names no %s (%s)", key, noun, list);
        return 0;
}

/* copy-to = NAME[, NAME...]: remotes, checked against the [remote] sections by the finish. */
static int set_copy_to(const Ctx *x, char ***v, size_t *n, BvConfWhere *where, const char *value)
{
        *where = (BvConfWhere){ x->file, x->line };
        return set_name_list(x, v, n, value, "copy-to", "remote name", "remote", "a list of [remote NAME] names");
}

/* disk = TARGET[, TARGET...]: the disks of a libvirt source (vda, sdb ...), as libvirt names them. */
static int set_disks(const Ctx *x, BvConfJob *j, const char *value)
{
        return set_name_list(x, &j->disks, &j->n_disks, value, "disk", "disk", "disk", "a list of targets such as vda");
}

/* keep-last ... keep-within, by their index from keep-last (0 to 6). */
static int set_keep(const Ctx *x, BvConfRetention *k, int i, const char *value)
{
        int *counts[] = { &k->last, &k->hourly, &k->daily, &k->weekly, &k->monthly, &k->yearly };
        if (i >= (int)ELEMENTSOF(counts))
                return set_duration(x, value, &k->within);
        return set_count(x, value, counts[i]);
}

static int set_job_key(const Ctx *x, BvConfJob *j, int key, const char *value)
{
        char **strings[] = {
                [J_COMMAND] = &j->command, [J_PRE] = &j->pre, [J_POST] = &j->post,
                [J_ON_SUCCESS] = &j->on_success, [J_ON_FAILURE] = &j->on_failure,
                [J_LIBVIRT_URI] = &j->libvirt_uri,
        };
        switch (key) {
        case J_SOURCE:
                if (strncmp(value, "command:", 8) == 0) {
                        if (!value[8 + strspn(value + 8, " \t")])
                                return conf_error(x->c, x->file, x->line, "source = command: names no command");
                        return set_string(x, value, &j->source);
                }
                if (strncmp(value, BV_SOURCE_LIBVIRT_PREFIX, strlen(BV_SOURCE_LIBVIRT_PREFIX)) == 0) {
                        if (!bv_source_is_libvirt(value))
                                return conf_error(x->c, x->file, x->line, "source = libvirt: names no domain");
                        return set_string(x, value, &j->source); /* a running domain's disks */
                }
                return set_absolute(x, value, &j->source);
        case J_SNAPSHOT:
                return set_bool(x, value, &j->snapshot);
        case J_USED_ONLY:
                return set_bool(x, value, &j->used_only);
        case J_AS_FILE:
                return set_bool(x, value, &j->as_file);
        case J_FREEZE: {
                bool freeze = true;
                int r = set_bool(x, value, &freeze);
                j->no_freeze = !freeze;
                return r;
        }
        case J_IMAGE_FORMAT:
                return set_string(x, value, &j->image_format);
        case J_TARGETS:
                return set_targets(x, j, value);
        case J_SCHEDULE:
                j->schedule_where = (BvConfWhere){ x->file, x->line };
                return set_string(x, value, &j->schedule);
        case J_KEEP_LAST ... J_KEEP_WITHIN:
                return set_keep(x, &j->keep, key - J_KEEP_LAST, value);
        case J_COPY_TO:
                return set_copy_to(x, &j->copy_to, &j->n_copy_to, &j->copy_to_where, value);
        case J_MAX_AGE:
                return set_duration(x, value, &j->max_age);
        case J_DISK:
                return set_disks(x, j, value);
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

/* A remote's location: s3://BUCKET[/PREFIX] as the S3 client takes it, or an absolute directory;
 * kept without a trailing '/'. */
static int set_location(const Ctx *x, BvConfRemote *rm, const char *value)
{
        _cleanup_free_ char *bucket = NULL, *prefix = NULL;
        rm->location_where = (BvConfWhere){ x->file, x->line };
        if (bv_s3_is_location(value)) {
                if (bv_s3_location_parse(value, &bucket, &prefix) < 0)
                        return conf_error(x->c, x->file, x->line,
                                          "invalid location '%s' (expected s3://BUCKET[/PREFIX], a bucket of 3 to "
                                          "63 of a-z, 0-9, '.' and '-', or an absolute directory)",
                                          value);
                free(rm->location);
                if (asprintf(&rm->location, "s3://%s%s%s", bucket, *prefix ? "/" : "", prefix) < 0)
                        return rm->location = NULL, -ENOMEM;
                return 0;
        }
        if (value[0] != '/' || strstr(value, "://"))
                return conf_error(x->c, x->file, x->line,
                                  "invalid location '%s' (expected s3://BUCKET[/PREFIX] or an absolute directory)",
                                  value);
        size_t n = strlen(value);
        while (n > 1 && value[n - 1] == '/')
                n--;
        free(rm->location);
        rm->location = strndup(value, n);
        return rm->location ? 0 : -ENOMEM;
}

/* http[s]://HOST[:PORT] and nothing after it but a '/'. */
static int set_endpoint(const Ctx *x, const char *value, char **dest)
{
        const char *host = strncmp(value, "https://", 8) == 0 ? value + 8 :
                           strncmp(value, "http://", 7) == 0  ? value + 7 : NULL;
        size_t n = host ? strcspn(host, "/") : 0;
        if (!host || n == 0 || strpbrk(value, "?# \t") || (host[n] && strcmp(host + n, "/") != 0))
                return conf_error(x->c, x->file, x->line,
                                  "invalid endpoint '%s' (expected http://HOST[:PORT] or https://HOST[:PORT])", value);
        return set_string(x, value, dest);
}

/* A rate in bytes per second as copy takes it (K, M, G suffixes), not 0. */
static int set_rate(const Ctx *x, const char *value, uint64_t *dest)
{
        if (bv_conf_parse_size(value, dest) < 0 || *dest == 0)
                return conf_error(x->c, x->file, x->line,
                                  "invalid rate '%s' for %s (bytes per second, with a K, M or G suffix: 20M)", value,
                                  x->key);
        return 0;
}

static int set_remote_key(const Ctx *x, BvConfRemote *rm, int key, const char *value)
{
        if (key >= R_CREDENTIALS && key <= R_OBJECT_LOCK)
                rm->s3_where = (BvConfWhere){ x->file, x->line };
        switch (key) {
        case R_KEEP_LAST ... R_KEEP_WITHIN:
                rm->keep_where = (BvConfWhere){ x->file, x->line };
                return set_keep(x, &rm->keep, key - R_KEEP_LAST, value);
        case R_LOCATION:
                return set_location(x, rm, value);
        case R_CREDENTIALS:
                rm->credentials_where = (BvConfWhere){ x->file, x->line };
                return set_absolute(x, value, &rm->credentials);
        case R_ENDPOINT:
                return set_endpoint(x, value, &rm->endpoint);
        case R_REGION:
                if (strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(value))
                        return conf_error(x->c, x->file, x->line,
                                          "invalid region '%s' (lower-case letters, digits and '-', as eu-central-1)",
                                          value);
                return set_string(x, value, &rm->region);
        case R_OBJECT_LOCK:
                rm->object_lock_where = (BvConfWhere){ x->file, x->line };
                return set_duration(x, value, &rm->object_lock);
        case R_LIMIT_UPLOAD:
                return set_rate(x, value, &rm->limit_upload);
        case R_LIMIT_DOWNLOAD:
                return set_rate(x, value, &rm->limit_download);
        default:
                return set_duration(x, value, &rm->max_age);
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
        if (s->kind == CONF_REMOTE)
                return set_remote_key(&x, &c->remotes[s->index], k, value);
        return set_export_key(&x, &c->exports[s->index], k, value);
}

/* Each name of a copy-to list is a [remote]: an error at its copy-to line for the first that is not. */
static int finish_copy_to(BvConfig *c, const char *kind, const char *name, char *const *copy_to, size_t n,
                          BvConfWhere where)
{
        for (size_t i = 0; i < n; i++)
                if (!bv_conf_remote_by_name(c, copy_to[i]))
                        return conf_error(c, where.file, where.line, "[%s %s]: unknown remote '%s' in copy-to (no [remote %s])",
                                          kind, name, copy_to[i], copy_to[i]);
        return 0;
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
        if (r >= 0)
                r = finish_copy_to(c, "target", t->name, t->copy_to, t->n_copy_to, t->copy_to_where);
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

/* The keys of a libvirt source only with one, and none that reads a path with it. */
static int finish_libvirt_job(BvConfig *c, BvConfJob *j)
{
        const char *f = j->where.file;
        unsigned l = j->where.line;

        if (!bv_conf_job_libvirt(j)) {
                if (j->disks || j->libvirt_uri)
                        return conf_error(c, f, l, "[job %s]: %s needs source = libvirt:DOMAIN", j->name,
                                          j->disks ? "disk" : "libvirt-uri");
                return 0;
        }
        if (j->snapshot || j->used_only || j->as_file || j->image_format)
                return conf_error(c, f, l, "[job %s]: source = libvirt: takes none of snapshot, used-only, as-file "
                                  "and image-format (libvirt exports each disk's virtual disk)", j->name);
        return 0;
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
        if (r >= 0)
                r = finish_libvirt_job(c, j);
        if (r >= 0 && keeps_nothing(&j->keep))
                r = conf_error(c, f, l, "[job %s]: its keep-* rules keep nothing (all 0), so each run would forget "
                               "every snapshot: keep at least one, or set no keep-* to prune nothing", j->name);
        for (size_t i = 0; r >= 0 && i < j->n_targets; i++)
                if (!bv_conf_target_by_name(c, j->targets[i]))
                        r = conf_error(c, j->targets_where.file, j->targets_where.line,
                                       "[job %s]: unknown target '%s' (no [target %s])", j->name, j->targets[i],
                                       j->targets[i]);
        if (r >= 0)
                r = finish_copy_to(c, "job", j->name, j->copy_to, j->n_copy_to, j->copy_to_where);
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

static int finish_remote(BvConfig *c, BvConfRemote *rm)
{
        const char *f = rm->where.file;
        unsigned l = rm->where.line;

        if (!rm->location) /* unless its location line was reported */
                return rm->location_where.file ? 0 :
                       conf_error(c, f, l, "[remote %s] has no location (s3://BUCKET[/PREFIX] or a directory)", rm->name);
        if (!bv_s3_is_location(rm->location) && rm->s3_where.file)
                return conf_error(c, rm->s3_where.file, rm->s3_where.line,
                                  "[remote %s]: credentials, endpoint, region and object-lock are for an s3:// "
                                  "location, not the directory '%s'",
                                  rm->name, rm->location);
        if (keeps_nothing(&rm->keep))
                return conf_error(c, f, l, "[remote %s]: its keep-* rules keep nothing (all 0), so each copy would "
                                  "forget every snapshot there: keep at least one, or set no keep-* to prune nothing",
                                  rm->name);
        return 0;
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
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_remotes; i++, n = c->n_errors)
                r = finish_mark(c, n, finish_remote(c, &c->remotes[i]), &c->remotes[i].mistake);
        bv_conf_sort_errors(c);
        return r;
}
