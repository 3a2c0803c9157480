/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who may change the configuration, as sshd and sudo see it: the appliance runs the commands of
 * its jobs (command, pre, post, on-success) as root, and its key files open the drives, so a file
 * that someone else can write is someone else's root shell. Every configuration file, the
 * directories that hold them, and every secret file the configuration names must be owned by
 * root (or by the user running blkvault, for a configuration of one's own) and writable by its
 * owner only; secret files also readable by their owner only, or by the group 'blkvault' (the
 * NBD export service runs as that user: see blkvault-nbd@.service). A file or directory that
 * fails is a mistake of the configuration, named with its mode or owner, like any other.
 */
#include <errno.h>
#include <grp.h>
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
 * unreadable by others (but group BV_SECRET_GROUP). */
static const char *owner_problem(const struct stat *st, bool secret, char *why, size_t size)
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
        else if (secret && ((mode & 0007) || ((mode & 0070) && !group_is_secret_group(st->st_gid))))
                snprintf(why, size, "secret file has mode %04o: readable by others than its owner (chmod 0400)",
                         mode);
        else
                return NULL;
        return why;
}

int conf_check_owner(BvConfig *c, const char *file, unsigned line, const char *path, bool secret)
{
        struct stat st;
        char why[160];
        if (stat(path, &st) < 0)
                return 0; /* a missing file is reported where it is read */
        if (!owner_problem(&st, secret, why, sizeof(why)))
                return 0;
        if (strcmp(file, path) == 0)
                return conf_error(c, file, line, "%s", why);
        return conf_error(c, file, line, "'%s': %s", path, why);
}

/* The secret files the sections name, at their sections' lines. */
static int check_secrets(BvConfig *c)
{
        int r = 0;
        for (size_t i = 0; r >= 0 && i < c->n_targets; i++)
                if (c->targets[i].key_file)
                        r = conf_check_owner(c, c->targets[i].where.file, c->targets[i].where.line,
                                             c->targets[i].key_file, true);
        for (size_t i = 0; r >= 0 && i < c->n_exports; i++) {
                const BvConfExport *e = &c->exports[i];
                const char *secret = e->key_file ? e->key_file : e->passphrase_file;
                if (secret)
                        r = conf_check_owner(c, e->where.file, e->where.line, secret, true);
        }
        return r;
}

int conf_check_owners(BvConfig *c)
{
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(c->dirs); i++)
                r = conf_check_owner(c, c->dirs[i], 0, c->dirs[i], false);
        for (size_t i = 0; r >= 0 && i < c->n_files; i++)
                r = conf_check_owner(c, c->files[i], 0, c->files[i], false);
        if (r >= 0)
                r = check_secrets(c);
        return r;
}
