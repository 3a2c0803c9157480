/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who may change the configuration, as sshd and sudo see it: the appliance runs the commands of
 * its jobs (command, pre, post, on-success) as root, and its key files open the drives, so a file
 * that someone else can write is someone else's root shell. Every configuration file, the
 * directories that hold them, and every secret file the configuration names must be owned by
 * root (or by the user running blkvault, for a configuration of one's own) and writable by its
 * owner only; secret files also readable by their owner only, or by the group 'blkvault' (the
 * NBD export service runs as that user: see blkvault-nbd@.service). A file or directory that
 * fails is a mistake of the configuration, named with its mode or owner. Such a file is not
 * trusted: each section it defines gets the mistake (so that none runs) and loses its commands
 * (a job with a mistake still counts as failed and would run its on-failure), and the commands
 * and the metrics path of a [global] section there are dropped (no textfile is written then); a directory's mistake is that of every file in it. A
 * secret file's mistake is the mistake of the section that names it.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf-internal.h"

#define BV_SECRET_GROUP "blkvault"

static bool owner_ok(uid_t uid)
{
        return uid == 0 || uid == geteuid();
}

static const char *user_name(uid_t uid, char buf[32])
{
        struct passwd pw, *res = NULL;
        char text[1024];
        if (getpwuid_r(uid, &pw, text, sizeof(text), &res) == 0 && res) {
                snprintf(buf, 32, "%s", pw.pw_name);
                return buf;
        }
        snprintf(buf, 32, "uid %u", (unsigned)uid);
        return buf;
}

static bool group_is_secret_group(gid_t gid)
{
        struct group gr, *res = NULL;
        char text[1024];
        return getgrgid_r(gid, &gr, text, sizeof(text), &res) == 0 && res &&
               strcmp(gr.gr_name, BV_SECRET_GROUP) == 0;
}

/* What is wrong with a file or directory of st (NULL when nothing), into why. secret: also
 * unreadable by others (but group BV_SECRET_GROUP, unless root_only: by its owner alone). */
static const char *owner_problem(const struct stat *st, bool secret, bool root_only, char *why, size_t size)
{
        char who[32];
        mode_t mode = st->st_mode & 07777;
        const char *what = S_ISDIR(st->st_mode) ? "directory" : "file";
        if (!owner_ok(st->st_uid))
                snprintf(why, size, "%s owned by %s, not root (chown root)", what, user_name(st->st_uid, who));
        else if (S_ISDIR(st->st_mode) && (mode & 0022) && !(mode & S_ISVTX))
                snprintf(why, size, "directory has mode %04o: writable by group or others (chmod go-w)", mode);
        else if (!S_ISDIR(st->st_mode) && (mode & 0022))
                snprintf(why, size, "file has mode %04o: writable by group or others (chmod go-w)", mode);
        else if (secret && root_only && (mode & 0077))
                snprintf(why, size, "secret file has mode %04o: readable by others than its owner (chmod 0600 or 0400)",
                         mode);
        else if (secret && ((mode & 0007) || ((mode & 0070) && !group_is_secret_group(st->st_gid))))
                snprintf(why, size, "secret file has mode %04o: readable by others than its owner (chmod 0600 or 0400; "
                                    "group read only for group " BV_SECRET_GROUP ")",
                         mode);
        else
                return NULL;
        return why;
}

/* What is wrong with the directory dir on the way to a secret file (NULL when nothing): one that
 * another user can change could swap the file between this check and its use. A sticky
 * directory (/tmp) is fine: only the owner of an entry may replace it, and the next step checks
 * that owner. */
static const char *dir_problem(const char *dir, char *why, size_t size)
{
        struct stat st;
        char who[32];
        if (lstat(dir, &st) < 0)
                return NULL; /* gone: the file's own check says so */
        mode_t mode = st.st_mode & 07777;
        if (S_ISLNK(st.st_mode)) {
                if (!owner_ok(st.st_uid))
                        snprintf(why, size, "it is reached through '%s', a symbolic link owned by %s, not root", dir,
                                 user_name(st.st_uid, who));
                else
                        return NULL;
        } else if (!owner_ok(st.st_uid))
                snprintf(why, size, "its directory '%s' is owned by %s, not root (chown root)", dir,
                         user_name(st.st_uid, who));
        else if ((mode & 0022) && !(mode & S_ISVTX))
                snprintf(why, size, "its directory '%s' has mode %04o: writable by group or others (chmod go-w)", dir,
                         mode);
        else
                return NULL;
        return why;
}

/* Every directory (and symbolic link) on the way to path, as written and as resolved. */
static const char *path_problem(const char *path, char *why, size_t size)
{
        _cleanup_free_ char *real = realpath(path, NULL);
        const char *ways[] = { path, real };

        for (size_t w = 0; w < ELEMENTSOF(ways); w++) {
                if (!ways[w] || ways[w][0] != '/')
                        continue;
                _cleanup_free_ char *p = strdup(ways[w]);
                if (!p)
                        return NULL;
                /* each prefix "/a", "/a/b", ... but the whole path (the file, checked by its caller) */
                for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                        *slash = '\0';
                        const char *bad = dir_problem(p, why, size);
                        *slash = '/';
                        if (bad)
                                return bad;
                }
                struct stat st;
                if (w == 0 && (dir_problem("/", why, size) ||
                               (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && dir_problem(path, why, size))))
                        return why;
        }
        return NULL;
}

const char *bv_conf_secret_problem(const char *path, char *why, size_t size)
{
        struct stat st;
        if (stat(path, &st) < 0)
                return NULL; /* its read says so */
        return owner_problem(&st, true, false, why, size);
}

/* conf_check_owner, and for a secret that only root's copy reads (root_only) no group either. */
static int check_owner(BvConfig *c, const char *file, unsigned line, const char *path, bool secret, bool root_only)
{
        struct stat st;
        char why[PATH_MAX + 160];
        if (stat(path, &st) < 0)
                return 0; /* a missing file is reported where it is read */
        int r = 0;
        if (owner_problem(&st, secret, root_only, why, sizeof(why)))
                r = strcmp(file, path) == 0 ? conf_error(c, file, line, "%s", why) :
                                              conf_error(c, file, line, "'%s': %s", path, why);
        if (r < 0 || !secret || !path_problem(path, why, sizeof(why)))
                return r;
        return conf_error(c, file, line, "'%s': %s", path, why);
}

int conf_check_owner(BvConfig *c, const char *file, unsigned line, const char *path, bool secret)
{
        return check_owner(c, file, line, path, secret, false);
}

int conf_check_owner_st(BvConfig *c, const char *file, unsigned line, const char *path, const struct stat *st,
                        bool secret)
{
        char why[160];
        if (!owner_problem(st, secret, false, why, sizeof(why)))
                return 0;
        if (strcmp(file, path) == 0)
                return conf_error(c, file, line, "%s", why);
        return conf_error(c, file, line, "'%s': %s", path, why);
}

static void drop(char **s)
{
        free(*s);
        *s = NULL;
}

/* Every section of file gets the mistake errors[e] and loses what it would run. */
static int distrust_file(BvConfig *c, const char *file, size_t e)
{
        int r = 0;
        for (size_t i = 0; r >= 0 && i < c->n_targets; i++) {
                BvConfTarget *t = &c->targets[i];
                if (t->where.file != file)
                        continue;
                drop(&t->on_success), drop(&t->on_failure);
                r = conf_set_mistake(&t->mistake, &c->errors[e]);
        }
        for (size_t i = 0; r >= 0 && i < c->n_jobs; i++) {
                BvConfJob *j = &c->jobs[i];
                if (j->where.file != file)
                        continue;
                drop(&j->command), drop(&j->pre), drop(&j->post), drop(&j->on_success), drop(&j->on_failure);
                if (j->source && strncmp(j->source, "command:", 8) == 0)
                        drop(&j->source);
                r = conf_set_mistake(&j->mistake, &c->errors[e]);
        }
        for (size_t i = 0; r >= 0 && i < c->n_exports; i++)
                if (c->exports[i].where.file == file)
                        r = conf_set_mistake(&c->exports[i].mistake, &c->errors[e]);
        for (size_t i = 0; r >= 0 && i < c->n_remotes; i++)
                if (c->remotes[i].where.file == file)
                        r = conf_set_mistake(&c->remotes[i].mistake, &c->errors[e]);
        if (c->global_where.file == file) {
                /* metrics: a path root would write to */
                drop(&c->on_success), drop(&c->on_failure), drop(&c->notify), drop(&c->metrics);
                c->no_metrics = true;
        }
        return r;
}

/* The secret files the sections name: a mistake of the section that names one. */
static int check_secrets(BvConfig *c)
{
        int r = 0;
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_targets; i++, n = c->n_errors) {
                BvConfTarget *t = &c->targets[i];
                if (t->key_file) /* at its key-file line */
                        r = conf_check_owner(c, t->key_file_where.file, t->key_file_where.line, t->key_file, true);
                if (r >= 0 && c->n_errors > n)
                        r = conf_set_mistake(&t->mistake, &c->errors[n]);
        }
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_exports; i++, n = c->n_errors) {
                BvConfExport *e = &c->exports[i];
                const char *secret = e->key_file ? e->key_file : e->passphrase_file;
                if (secret)
                        r = conf_check_owner(c, e->secret_where.file, e->secret_where.line, secret, true);
                if (r >= 0 && c->n_errors > n)
                        r = conf_set_mistake(&e->mistake, &c->errors[n]);
        }
        for (size_t i = 0, n = c->n_errors; r >= 0 && i < c->n_remotes; i++, n = c->n_errors) {
                BvConfRemote *rm = &c->remotes[i];
                if (rm->credentials) /* S3 keys: only the copy, run as root, reads them */
                        r = check_owner(c, rm->credentials_where.file, rm->credentials_where.line, rm->credentials,
                                        true, true);
                if (r >= 0 && c->n_errors > n)
                        r = conf_set_mistake(&rm->mistake, &c->errors[n]);
        }
        return r;
}

static bool in_dir(const char *file, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(file, dir, n) == 0 && file[n] == '/';
}

int conf_check_owners(BvConfig *c)
{
        size_t dir_error[ELEMENTSOF(c->dirs)]; /* the mistake of each directory, or SIZE_MAX */
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(c->dirs); i++) {
                size_t n = c->n_errors;
                r = conf_check_owner(c, c->dirs[i], 0, c->dirs[i], false);
                dir_error[i] = c->n_errors > n ? n : SIZE_MAX;
        }
        for (size_t i = 0; r >= 0 && i < c->n_files; i++) {
                size_t n = c->n_errors;
                r = c->file_st[i].st_mode ? conf_check_owner_st(c, c->files[i], 0, c->files[i], &c->file_st[i], false) :
                                            conf_check_owner(c, c->files[i], 0, c->files[i], false);
                size_t e = c->n_errors > n ? n :
                           dir_error[1] != SIZE_MAX && in_dir(c->files[i], c->dirs[1]) ? dir_error[1] :
                                                                                         dir_error[0];
                if (r >= 0 && e != SIZE_MAX)
                        r = distrust_file(c, c->files[i], e);
        }
        return r >= 0 ? check_secrets(c) : r;
}
