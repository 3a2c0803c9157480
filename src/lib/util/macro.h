/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Small helpers every file uses: cleanup attributes, ownership transfer, sizes.
 *
 * Error convention of the whole library: functions return 0 (or a count) on success and a
 * negative errno on failure; output parameters are named ret_* and are left untouched on
 * failure. Domain errors have one meaning each (docs/FORMAT.md, "Error codes"):
 *   -EBADMSG          corrupt data, or an authentication tag that does not verify
 *   -ENOKEY           wrong or missing key / passphrase
 *   -EKEYREJECTED     a key / passphrase given for a repository without a cipher
 *   -EPROTONOSUPPORT  unknown format version or algorithm
 *   -EUCLEAN          the repository needs repair (an index points at nothing)
 *   -ENOSPC           the target is full
 *   -EBUSY            another writer holds the repository lock
 * No macro here hides a return.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _unused_ __attribute__((__unused__))
#define _pure_ __attribute__((__pure__))
#define _const_ __attribute__((__const__))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))
#define _printf_(a, b) __attribute__((__format__(printf, a, b)))
#define _warn_unused_result_ __attribute__((__warn_unused_result__))
#define _cleanup_(f) __attribute__((__cleanup__(f)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define DIV_ROUND_UP(x, y) (((x) + (y) - 1) / (y))
#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define IS_ALIGNED(x, a) (((x) & ((__typeof__(x))(a) - 1)) == 0)

#undef MIN
#undef MAX
#define MIN(a, b)                                                                                          \
        ({                                                                                                 \
                __typeof__(a) _a = (a);                                                                    \
                __typeof__(b) _b = (b);                                                                    \
                _a < _b ? _a : _b;                                                                         \
        })
#define MAX(a, b)                                                                                          \
        ({                                                                                                 \
                __typeof__(a) _a = (a);                                                                    \
                __typeof__(b) _b = (b);                                                                    \
                _a > _b ? _a : _b;                                                                         \
        })

/* Take ownership out of a cleanup variable: the variable becomes NULL / -EBADF. */
#define TAKE_PTR(p)                                                                                        \
        ({                                                                                                 \
                __typeof__(p) _p = (p);                                                                    \
                (p) = NULL;                                                                                \
                _p;                                                                                        \
        })
#define TAKE_FD(fd)                                                                                        \
        ({                                                                                                 \
                int _fd = (fd);                                                                            \
                (fd) = -EBADF;                                                                             \
                _fd;                                                                                       \
        })

static inline void freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

/* close() that keeps errno and accepts negative fds; returns -EBADF for assignment. */
/* *ret = a copy of s, NULL for NULL: 0, or -ENOMEM. */
static inline int bv_strdup_opt(const char *s, char **ret)
{
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

static inline int safe_close(int fd)
{
        if (fd >= 0) {
                int saved = errno;
                (void)close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd)
{
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Defines `static inline void funcp(type **p)` calling func(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                            \
        static inline void func##p(type **p)                                                               \
        {                                                                                                  \
                if (*p)                                                                                    \
                        func(*p);                                                                          \
        }

/* Scoped pthread mutex guard: `BV_LOCK_GUARD(&m);` holds m until the end of the scope. */
#include <pthread.h>
static inline void bv_mutex_unlockp(pthread_mutex_t **m)
{
        if (*m)
                pthread_mutex_unlock(*m);
}
#define BV_CONCAT_(a, b) a##b
#define BV_CONCAT(a, b) BV_CONCAT_(a, b)
#define BV_LOCK_GUARD(m)                                                                                   \
        _cleanup_(bv_mutex_unlockp) pthread_mutex_t *BV_CONCAT(_guard_, __LINE__) =                        \
                (pthread_mutex_lock(m), (m))

/* Zero a struct on the stack: `*p = (T){}` without repeating the type. */
#define zero(x) memset(&(x), 0, sizeof(x))

/* Map a libc -1/errno return to -errno. */
static inline int negative_errno(void)
{
        return errno > 0 ? -errno : -EIO;
}
