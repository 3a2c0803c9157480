/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf-internal.h"
#include "config.h"
#include "conf.h"
#include "fileio.h"
#include "schedule.h"
#include "source.h"

/* The state of one file's parse: the reader hands inih one line at a time and counts them, so
 * the handler knows the line of each key (Debian's inih has no line numbers in its handler). */
typedef struct Parse {
        BvConfig *c;
        const char *file;
        const char *text, *end;
        const char *pos;
        unsigned line;          /* of the line last handed out */
        unsigned header_line;   /* of the last line that started with '[' */
        unsigned section_line;  /* the header of the section being filled */
        ConfSection section;
        unsigned *headers;      /* the line of every section header, in order */
        size_t n_headers;
        int oom;
} Parse;

int conf_error(BvConfig *c, const char *file, unsigned line, const char *fmt, ...)
{
        va_list ap;
        char *m;

        va_start(ap, fmt);
        int n = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        BvConfError *e = reallocarray(c->errors, c->n_errors + 1, sizeof(*e));
        if (!e) {
                free(m);
                return -ENOMEM;
        }
        c->errors = e;
        e[c->n_errors++] = (BvConfError){ .file = file, .line = line, .message = m };
        return 0;
}

/* fgets for inih over the buffer: one line per call; a line that does not fit is reported and
 * handed out empty, so that inih's line count and ours stay in step. */
static char *conf_reader(char *str, int num, void *stream)
{
        Parse *p = stream;

        if (p->pos >= p->end)
                return NULL;
        const char *nl = memchr(p->pos, '\n', p->end - p->pos);
        const char *eol = nl ? nl : p->end;
        size_t len = eol - p->pos;
        p->line++;
        if (memchr(p->pos, '\0', len)) {
                if (conf_error(p->c, p->file, p->line, "line holds a NUL byte") < 0)
                        p->oom = -ENOMEM;
                len = 0;
        } else if (len > (size_t)num - 2) {
                if (conf_error(p->c, p->file, p->line, "line is longer than %d bytes", num - 2) < 0)
                        p->oom = -ENOMEM;
                len = 0;
        }
        memcpy(str, p->pos, len);
        str[len] = '\n';
        str[len + 1] = '\0';
        p->pos = nl ? nl + 1 : p->end;

        const char *s = str;
        while (*s == ' ' || *s == '\t')
                s++;
        if (*s == '[') {
                p->header_line = p->line;
                unsigned *h = reallocarray(p->headers, p->n_headers + 1, sizeof(*h));
                if (!h)
                        p->oom = -ENOMEM;
                else
                        (p->headers = h)[p->n_headers++] = p->line;
        }
        return str;
}

static int conf_handler(void *user, const char *section, const char *key, const char *value)
{
        Parse *p = user;
        int r;

        if (p->oom)
                return 1;
        if (p->section.kind == CONF_NONE || p->section_line != p->header_line) {
                /* a new section (possibly with the name of an earlier one) */
                p->section_line = p->header_line;
                r = conf_section_open(p->c, p->file, p->header_line, section, &p->section);
                if (r < 0) {
                        p->oom = r;
                        return 1;
                }
        }
        if (p->section.kind == CONF_INVALID && *section)
                return 1; /* reported once, at its header */
        r = conf_section_set(p->c, &p->section, p->file, p->line, key, value);
        if (r < 0)
                p->oom = r;
        return 1;
}

/* Records a copy of name in c->files, which the entries and diagnostics of that file point to. */
static int conf_add_file(BvConfig *c, const char *name, const char **ret)
{
        _cleanup_free_ char *file = strdup(name);
        if (!file)
                return -ENOMEM;
        char **files = reallocarray(c->files, c->n_files + 1, sizeof(*files));
        if (!files)
                return -ENOMEM;
        c->files = files;
        struct stat *st = reallocarray(c->file_st, c->n_files + 1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        c->file_st = st;
        c->file_st[c->n_files] = (struct stat){};
        *ret = c->files[c->n_files++] = TAKE_PTR(file);
        return 0;
}

/* Each mistake of the file since error `from` marks the section it is in (the last header at or
 * before its line): a mistake costs that section. One on a header of its own (an unknown section,
 * a name defined twice) is in no section that was made. */
static int conf_mark_sections(BvConfig *c, const Parse *p, size_t from)
{
        for (size_t i = from; i < c->n_errors; i++) {
                const BvConfError *e = &c->errors[i];
                size_t k = p->n_headers;
                while (k > 0 && p->headers[k - 1] > e->line)
                        k--;
                char **m = e->file == p->file && e->line > 0 && k > 0 ?
                                   conf_section_mistake(c, p->file, p->headers[k - 1]) : NULL;
                if (m && conf_set_mistake(m, e) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int bv_conf_parse_text(BvConfig *c, const char *label, const char *text, size_t size)
{
        const char *file;
        size_t from = c->n_errors;
        int r = conf_add_file(c, label, &file);
        if (r < 0)
                return r;

        _cleanup_free_ unsigned *headers = NULL;
        Parse p = { .c = c, .file = file, .text = text, .end = text + size, .pos = text };
#if HAVE_INI_RUNTIME_OPTIONS
        /* An indented line is a key of its own, not the continuation of the previous value. */
        ini_allow_multiline = false;
#endif
        r = ini_parse_stream(conf_reader, &p, conf_handler, &p);
        headers = p.headers;
        if (p.oom)
                return p.oom;
        if (r > 0 && conf_error(c, file, (unsigned)r, "expected '[section]', 'key = value' or a comment") < 0)
                return -ENOMEM;
        if (r < 0)
                return -ENOMEM;
        return conf_mark_sections(c, &p, from);
}

/* Reads one file; a missing one is fine when optional. */
static int conf_load_file(BvConfig *c, const char *path, bool optional)
{
        _cleanup_free_ void *data = NULL;
        struct stat st = {};
        size_t len;

        /* the owner check looks at the file that was read: a path checked again later may name another */
        int r = bv_read_file_stat(AT_FDCWD, path, BV_CONF_FILE_MAX, &data, &len, &st);
        if (r == -ENOENT && optional)
                return 0;
        if (r < 0) {
                const char *file;
                int k = conf_add_file(c, path, &file);
                if (k < 0)
                        return k;
                if (r == -EFBIG)
                        return conf_error(c, file, 0, "larger than %d bytes", BV_CONF_FILE_MAX);
                if (r == -EBADFD)
                        return conf_error(c, file, 0, "not a regular file");
                return conf_error(c, file, 0, "cannot read: %s", strerror(-r));
        }
        size_t i = c->n_files;
        r = bv_conf_parse_text(c, path, data, len);
        if (r >= 0 && i < c->n_files)
                c->file_st[i] = st;
        return r;
}

static size_t conf_file_index(const BvConfig *c, const char *file)
{
        for (size_t i = 0; i < c->n_files; i++)
                if (c->files[i] == file)
                        return i;
        return c->n_files;
}

static bool conf_error_before(const BvConfig *c, const BvConfError *a, const BvConfError *b)
{
        size_t fa = conf_file_index(c, a->file), fb = conf_file_index(c, b->file);
        return fa < fb || (fa == fb && a->line < b->line);
}

void bv_conf_sort_errors(BvConfig *c)
{
        /* insertion sort: stable, and there are few */
        for (size_t i = 1; i < c->n_errors; i++) {
                BvConfError e = c->errors[i];
                size_t k = i;
                for (; k > 0 && conf_error_before(c, &e, &c->errors[k - 1]); k--)
                        c->errors[k] = c->errors[k - 1];
                c->errors[k] = e;
        }
}

int bv_conf_check_schedules(BvConfig *c)
{
        for (size_t i = 0; i < c->n_jobs; i++) {
                const BvConfJob *j = &c->jobs[i];
                _cleanup_free_ char *why = NULL;
                if (!j->schedule)
                        continue;
                int r = bv_schedule_check(j->schedule, NULL, &why);
                if (r == -EINVAL) {
                        r = conf_error(c, j->schedule_where.file, j->schedule_where.line,
                                       "[job %s]: invalid schedule '%s' (%s)", j->name, j->schedule,
                                       why ? why : "rejected by systemd-analyze calendar");
                        if (r >= 0)
                                r = conf_set_mistake(&c->jobs[i].mistake, &c->errors[c->n_errors - 1]);
                }
                if (r < 0)
                        return r;
        }
        bv_conf_sort_errors(c);
        return 0;
}

static int conf_filter(const struct dirent *d)
{
        size_t n = strlen(d->d_name);
        return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".conf") == 0;
}

static int conf_load_dropins(BvConfig *c, const char *dir)
{
        struct dirent **list = NULL;
        int n = scandir(dir, &list, conf_filter, alphasort);
        if (n < 0)
                return 0; /* no conf.d: nothing to add */
        int r = 0;
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL;
                if (r >= 0 && asprintf(&path, "%s/%s", dir, list[i]->d_name) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = conf_load_file(c, path, true);
                free(list[i]);
        }
        free(list);
        return r;
}

const char *bv_conf_main_path(const char *path, bool *ret_explicit)
{
        const char *env = getenv(BV_CONF_ENV);
        *ret_explicit = true;
        if (path)
                return path;
        if (env && *env)
                return env;
        *ret_explicit = false;
        return BV_CONF_DEFAULT_PATH;
}

int bv_conf_new(BvConfig **ret)
{
        BvConfig *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

int bv_conf_load(const char *main_path, bool must_exist, BvConfig **ret)
{
        _cleanup_(bv_conf_freep) BvConfig *c = NULL;

        int r = bv_conf_new(&c);
        if (r < 0)
                return r;
        r = conf_load_file(c, main_path, !must_exist);
        if (r < 0)
                return r;
        const char *slash = strrchr(main_path, '/');
        int n = slash ? (int)(slash - main_path) : 1;
        if (asprintf(&c->dirs[0], "%.*s", slash == main_path ? 1 : n, slash ? main_path : ".") < 0 ||
            asprintf(&c->dirs[1], "%.*s/conf.d", n, slash ? main_path : ".") < 0)
                return -ENOMEM;
        r = conf_load_dropins(c, c->dirs[1]);
        if (r < 0)
                return r;
        r = bv_conf_finish(c);
        if (r < 0)
                return r;
        r = conf_check_owners(c);
        if (r < 0)
                return r;
        bv_conf_sort_errors(c);
        *ret = TAKE_PTR(c);
        return 0;
}

static void conf_free_strv(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void bv_conf_free(BvConfig *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_targets; i++) {
                BvConfTarget *t = &c->targets[i];
                free(t->name), free(t->uuid), free(t->key_file), free(t->repository), free(t->fs_options);
                free(t->on_success), free(t->on_failure), free(t->mistake);
                conf_free_strv(t->copy_to, t->n_copy_to);
        }
        for (size_t i = 0; i < c->n_jobs; i++) {
                BvConfJob *j = &c->jobs[i];
                free(j->name), free(j->source), free(j->command), free(j->schedule), free(j->image_format), free(j->libvirt_uri);
                free(j->pre), free(j->post), free(j->on_success), free(j->on_failure), free(j->mistake);
                conf_free_strv(j->targets, j->n_targets);
                conf_free_strv(j->copy_to, j->n_copy_to);
                conf_free_strv(j->disks, j->n_disks);
        }
        for (size_t i = 0; i < c->n_exports; i++) {
                BvConfExport *e = &c->exports[i];
                free(e->name), free(e->repository), free(e->snapshot), free(e->passphrase_file);
                free(e->key_file), free(e->cache), free(e->mistake);
        }
        for (size_t i = 0; i < c->n_remotes; i++) {
                BvConfRemote *rm = &c->remotes[i];
                free(rm->name), free(rm->location), free(rm->credentials), free(rm->endpoint), free(rm->region);
                free(rm->mistake);
        }
        for (size_t i = 0; i < c->n_errors; i++)
                free(c->errors[i].message);
        free(c->targets);
        free(c->jobs);
        free(c->exports);
        free(c->remotes);
        free(c->errors);
        conf_free_strv(c->files, c->n_files);
        free(c->file_st);
        free(c->dirs[0]), free(c->dirs[1]);
        free(c->on_success), free(c->on_failure), free(c->notify), free(c->metrics);
        free(c);
}

/* The item of an array of configuration sections whose name (a char * at name_offset) is name. */
static const void *section_by_name(const void *items, size_t n, size_t size, size_t name_offset, const char *name)
{
        for (size_t i = 0; i < n; i++) {
                const char *item = (const char *)items + i * size;
                if (strcmp(*(char *const *)(item + name_offset), name) == 0)
                        return item;
        }
        return NULL;
}

const BvConfTarget *bv_conf_target_by_name(const BvConfig *c, const char *name)
{
        return section_by_name(c->targets, c->n_targets, sizeof(*c->targets), offsetof(BvConfTarget, name), name);
}

const BvConfTarget *bv_conf_target_by_uuid(const BvConfig *c, const char *uuid)
{
        for (size_t i = 0; i < c->n_targets; i++)
                if (c->targets[i].uuid && strcasecmp(c->targets[i].uuid, uuid) == 0)
                        return &c->targets[i];
        return NULL;
}

const BvConfJob *bv_conf_job_by_name(const BvConfig *c, const char *name)
{
        return section_by_name(c->jobs, c->n_jobs, sizeof(*c->jobs), offsetof(BvConfJob, name), name);
}

const BvConfExport *bv_conf_export_by_name(const BvConfig *c, const char *name)
{
        return section_by_name(c->exports, c->n_exports, sizeof(*c->exports), offsetof(BvConfExport, name), name);
}

const BvConfRemote *bv_conf_remote_by_name(const BvConfig *c, const char *name)
{
        return section_by_name(c->remotes, c->n_remotes, sizeof(*c->remotes), offsetof(BvConfRemote, name), name);
}

static bool names_hold(char *const *names, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], name) == 0)
                        return true;
        return false;
}

bool bv_conf_job_copies_to(const BvConfJob *j, const char *remote)
{
        return names_hold(j->copy_to, j->n_copy_to, remote);
}

bool bv_conf_target_copies_all(const BvConfTarget *t, const char *remote)
{
        return names_hold(t->copy_to, t->n_copy_to, remote);
}

bool bv_conf_target_copies_to(const BvConfig *c, const BvConfTarget *t, const char *remote)
{
        if (bv_conf_target_copies_all(t, remote))
                return true;
        for (size_t i = 0; i < c->n_jobs; i++)
                if (bv_conf_job_wants(&c->jobs[i], t->name) && bv_conf_job_copies_to(&c->jobs[i], remote))
                        return true;
        return false;
}

int bv_conf_remote_location(const BvConfRemote *r, const char *target, char **ret)
{
        return asprintf(ret, "%s%s%s", r->location, strcmp(r->location, "/") == 0 ? "" : "/", target) < 0 ? -ENOMEM : 0;
}

bool bv_conf_job_wants(const BvConfJob *j, const char *target)
{
        if (j->any_target)
                return true;
        for (size_t i = 0; i < j->n_targets; i++)
                if (strcmp(j->targets[i], target) == 0)
                        return true;
        return false;
}

static bool retention_set(const BvConfRetention *k)
{
        return k->last != BV_CONF_KEEP_UNSET || k->hourly != BV_CONF_KEEP_UNSET || k->daily != BV_CONF_KEEP_UNSET ||
               k->weekly != BV_CONF_KEEP_UNSET || k->monthly != BV_CONF_KEEP_UNSET ||
               k->yearly != BV_CONF_KEEP_UNSET || k->within > 0;
}

bool bv_conf_job_prunes(const BvConfJob *j)
{
        return retention_set(&j->keep);
}

bool bv_conf_remote_prunes(const BvConfRemote *r)
{
        return retention_set(&r->keep);
}

const char *bv_conf_job_command(const BvConfJob *j)
{
        if (j->command)
                return j->command;
        return j->source && strncmp(j->source, "command:", 8) == 0 ? j->source + 8 : NULL;
}

const char *bv_conf_job_libvirt(const BvConfJob *j)
{
        return j->source && bv_source_is_libvirt(j->source) ? j->source + strlen(BV_SOURCE_LIBVIRT_PREFIX) : NULL;
}

static const struct {
        const char *unit;
        uint64_t seconds;
} duration_units[] = {
        { "w", 7 * 86400 }, { "d", 86400 }, { "h", 3600 }, { "min", 60 }, { "s", 1 },
};

int bv_conf_parse_duration(const char *s, uint64_t *ret)
{
        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long n = strtoull(s, &end, 10);
        if (errno || n == 0 || n > 100000)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(duration_units); i++)
                if (strcmp(end, duration_units[i].unit) == 0) {
                        *ret = n * duration_units[i].seconds;
                        return 0;
                }
        return -EINVAL;
}

int bv_conf_parse_size(const char *s, uint64_t *ret)
{
        static const char units[] = "kKmMgGtT";
        const char *unit = NULL;
        unsigned shift = 0;
        char *end;

        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end) {
                unit = strchr(units, *end);
                if (!unit || end[1])
                        return -EINVAL;
                shift = 10 * (1 + (unsigned)(unit - units) / 2);
        }
        if (errno || v >> (63 - shift) != 0)
                return -ERANGE;
        *ret = (uint64_t)v << shift;
        return 0;
}

void bv_conf_format_duration(uint64_t seconds, char buf[32])
{
        for (size_t i = 0; i < ELEMENTSOF(duration_units); i++)
                if (seconds >= duration_units[i].seconds && seconds % duration_units[i].seconds == 0) {
                        snprintf(buf, 32, "%llu%s", (unsigned long long)(seconds / duration_units[i].seconds),
                                 duration_units[i].unit);
                        return;
                }
        snprintf(buf, 32, "%llus", (unsigned long long)seconds);
}

int bv_conf_write_target(const char *main_path, const BvConfTarget *t, char **ret_path)
{
        _cleanup_free_ char *dir = NULL, *text = NULL, *path = NULL;
        const char *slash = strrchr(main_path, '/');

        if (asprintf(&dir, "%.*s/conf.d", slash ? (int)(slash - main_path) : 1, slash ? main_path : ".") < 0)
                return -ENOMEM;
        int r = bv_mkdir_p(AT_FDCWD, dir);
        if (r < 0)
                return r;
        if (asprintf(&text,
                     "# Written by 'blkvault target format'.\n"
                     "[target %s]\n"
                     "uuid = %s\n"
                     "key-file = %s\n"
                     "repository = %s\n"
                     "mode = %s\n"
                     "luks = %s\n",
                     t->name, t->uuid, t->key_file, t->repository,
                     t->mode == BV_TARGET_RESTORE_ONLY ? "restore-only" : "backup", t->luks ? "yes" : "no") < 0)
                return -ENOMEM;
        if (asprintf(&path, "%s/50-target-%s.conf", dir, t->name) < 0)
                return -ENOMEM;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        r = bv_write_file_durable(dfd, path + strlen(dir) + 1, text, strlen(text), false);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}
