/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The S3 backend's local cache of whole objects (backend-s3-cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend-s3-cache.h"
#include "fileio.h"
#include "macro.h"

#define CACHE_DIR "objects"

int s3_cache_name(const char *etag, uint64_t size, char *ret, size_t len)
{
        size_t n = strlen(etag);

        if (n == 0 || n > 80 || strspn(etag, "0123456789abcdef-") != n)
                return -EINVAL;
        return snprintf(ret, len, "%s-%" PRIu64, etag, size) < (int)len ? 0 : -EINVAL;
}

static int objects_dir(int dirfd)
{
        if (mkdirat(dirfd, CACHE_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        return bv_open_dir_beneath(dirfd, CACHE_DIR);
}

int s3_cache_open(int dirfd, const char *name)
{
        _cleanup_close_ int dfd = objects_dir(dirfd);
        int fd;

        if (dfd < 0)
                return dfd;
        fd = bv_open_file_beneath(dfd, name, O_RDONLY);
        if (fd >= 0)
                (void)futimens(fd, NULL); /* used now: the last to go */
        return fd;
}

typedef struct CacheFile {
        char name[128];
        uint64_t size;
        struct timespec used;
} CacheFile;

static int by_use(const void *a, const void *b)
{
        const struct timespec *x = &((const CacheFile *)a)->used, *y = &((const CacheFile *)b)->used;

        if (x->tv_sec != y->tv_sec)
                return x->tv_sec < y->tv_sec ? -1 : 1;
        return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* Removes the least recently used files but keep while the total is over max. */
static int evict(int dfd, const char *keep, uint64_t max)
{
        _cleanup_free_ CacheFile *files = NULL;
        size_t n = 0, cap = 0;
        uint64_t total = 0;
        struct dirent *de;
        DIR *d;
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(files->name) ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        CacheFile *p = realloc(files, (cap = cap ? 2 * cap : 64) * sizeof(*p));
                        if (!p) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        files = p;
                }
                snprintf(files[n].name, sizeof(files[n].name), "%s", de->d_name);
                files[n].size = (uint64_t)st.st_size;
                files[n].used = st.st_mtim;
                total += files[n++].size;
        }
        closedir(d);
        qsort(files, n, sizeof(*files), by_use);
        for (size_t i = 0; i < n && total > max; i++) {
                if (strcmp(files[i].name, keep) == 0)
                        continue;
                if (unlinkat(dfd, files[i].name, 0) >= 0 || errno == ENOENT)
                        total -= files[i].size;
        }
        return 0;
}

int s3_cache_put(int dirfd, const char *name, const void *data, size_t len, uint64_t max)
{
        _cleanup_close_ int dfd = objects_dir(dirfd), fd = -EBADF;
        char path[64];
        int r;

        if (dfd < 0)
                return dfd;
        fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = bv_pwrite_all(fd, data, len, 0);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        /* another process may have stored the same object meanwhile: the same bytes */
        if (linkat(AT_FDCWD, path, dfd, name, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
                return -errno;
        (void)evict(dfd, name, max);
        return TAKE_FD(fd);
}
