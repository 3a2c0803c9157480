/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "notify.h"

#define NOTIFY_PREFIX "notified-"

static int notify_read_at(int dfd, const char *name, BvNotified *ret)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = bv_read_file(dfd, name, 64 * 1024, (void **)&data, &len);
        if (r < 0)
                return r;
        BvNotified n = {};
        for (char *save = NULL, *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *v = strchr(l, '=');
                if (!v)
                        continue;
                *v++ = '\0';
                if (strcmp(l, "when") == 0)
                        n.when = strtoull(v, NULL, 10);
                else if (strcmp(l, "state") == 0)
                        n.failed = strcmp(v, "failed") == 0;
                else if (strcmp(l, "event") == 0)
                        snprintf(n.event, sizeof(n.event), "%s", v);
                else if (strcmp(l, "summary") == 0)
                        snprintf(n.summary, sizeof(n.summary), "%s", v);
        }
        *ret = n;
        return 0;
}

static int notify_name(const char *subject, char *buf, size_t size)
{
        int n = snprintf(buf, size, NOTIFY_PREFIX "%s", subject);
        return n < 0 || (size_t)n >= size || strchr(subject, '/') ? -EINVAL : 0;
}

int bv_notify_read(const char *dir, const char *subject, BvNotified *ret)
{
        char name[BV_NOTIFY_SUBJECT_MAX + 16];
        int r = notify_name(subject, name, sizeof(name));
        if (r < 0)
                return r;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return notify_read_at(dfd, name, ret);
}

int bv_notify_record(const char *dir, const char *subject, const BvNotified *n)
{
        char name[BV_NOTIFY_SUBJECT_MAX + 16], text[700];
        int r = notify_name(subject, name, sizeof(name));
        if (r < 0)
                return r;
        /* one line each: a summary never holds a newline of its own */
        int len = snprintf(text, sizeof(text), "when=%llu\nstate=%s\nevent=%s\nsummary=%.*s\n",
                           (unsigned long long)n->when, n->failed ? "failed" : "ok", n->event,
                           (int)strcspn(n->summary, "\n"), n->summary);
        if (len < 0 || (size_t)len >= sizeof(text))
                return -ENAMETOOLONG;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return bv_write_file_durable(dfd, name, text, (size_t)len, true);
}

int bv_notify_latest(const char *dir, char subject[BV_NOTIFY_SUBJECT_MAX], BvNotified *ret)
{
        DIR *d;
        int r = bv_opendir_at(AT_FDCWD, dir, &d);
        if (r < 0)
                return r;
        r = -ENOENT;
        for (struct dirent *e; (e = readdir(d));) {
                BvNotified n;
                size_t pl = strlen(NOTIFY_PREFIX);
                if (strncmp(e->d_name, NOTIFY_PREFIX, pl) != 0 || strlen(e->d_name + pl) >= BV_NOTIFY_SUBJECT_MAX ||
                    notify_read_at(dirfd(d), e->d_name, &n) < 0 || (r == 0 && n.when <= ret->when))
                        continue;
                *ret = n;
                snprintf(subject, BV_NOTIFY_SUBJECT_MAX, "%s", e->d_name + pl);
                r = 0;
        }
        closedir(d);
        return r;
}
