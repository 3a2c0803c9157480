/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Minimal assertions for unit tests: a failure prints where and what, then aborts. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ASSERT_TRUE(expr)                                                                                  \
        do {                                                                                               \
                if (!(expr)) {                                                                             \
                        fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #expr);       \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

#define ASSERT_EQ(a, b)                                                                                    \
        do {                                                                                               \
                long long _a = (long long)(a), _b = (long long)(b);                                        \
                if (_a != _b) {                                                                            \
                        fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a,  \
                                #b, _a, _b);                                                               \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

/* Asserts a 0/-errno call succeeded, printing the error. */
#define ASSERT_OK(expr)                                                                                    \
        do {                                                                                               \
                long long _r = (long long)(expr);                                                          \
                if (_r < 0) {                                                                              \
                        fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,               \
                                strerror((int)-_r));                                                       \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

/* Asserts a call failed with exactly this -errno. */
#define ASSERT_ERROR(expr, err)                                                                            \
        do {                                                                                               \
                long long _r = (long long)(expr);                                                          \
                if (_r != -(err)) {                                                                        \
                        fprintf(stderr, "%s:%d: %s returned %lld (%s), expected -%s\n", __FILE__,          \
                                __LINE__, #expr, _r, _r < 0 ? strerror((int)-_r) : "success", #err);       \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

#define ASSERT_MEMEQ(a, b, n) ASSERT_TRUE(memcmp((a), (b), (n)) == 0)
#define ASSERT_STREQ(a, b)                                                                                 \
        do {                                                                                               \
                const char *_a = (a), *_b = (b);                                                           \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                                   \
                        fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, _a ? _a : "(null)", \
                                _b ? _b : "(null)");                                                       \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

/* A test program runs named test functions in order and prints one line each. */
#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                                          \
        do {                                                                                               \
                test_##name();                                                                             \
                printf("ok - %s\n", #name);                                                                \
        } while (0)

/* Deterministic pseudo-random bytes for test data (xorshift64*). */
static inline void bvtest_fill_random(void *buf, size_t len, uint64_t seed)
{
        uint8_t *b = buf;
        uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < len; i++) {
                if ((i & 7) == 0) {
                        x ^= x >> 12;
                        x ^= x << 25;
                        x ^= x >> 27;
                }
                b[i] = (uint8_t)((x * 0x2545F4914F6CDD1Dull) >> (8 * (i & 7)));
        }
}

/* A fresh temporary directory (mkdtemp under $TMPDIR or /var/tmp); caller frees the string. */
static inline char *bvtest_tmpdir(void)
{
        const char *base = getenv("TMPDIR");
        char *p;
        if (!base)
                base = "/var/tmp";
        if (asprintf(&p, "%s/bvtest-XXXXXX", base) < 0)
                abort();
        if (!mkdtemp(p))
                abort();
        return p;
}

static inline void bvtest_rm_rf(const char *path)
{
        char *cmd;
        if (asprintf(&cmd, "rm -rf '%s'", path) < 0)
                abort();
        if (system(cmd) != 0)
                fprintf(stderr, "warning: could not remove %s, ignoring\n", path);
        free(cmd);
}

/* Attaches a loop device over FILE and returns its path (the caller frees it); NULL when not
 * root, where the caller skips visibly. As root a failing losetup fails the test: the test
 * machine runs as root, and a skip there would hide that the test did not run. */
static inline char *bvtest_loop_attach(const char *file)
{
        char *cmd, line[256] = "";
        FILE *p;

        if (geteuid() != 0)
                return NULL;
        if (asprintf(&cmd, "losetup --find --show '%s'", file) < 0)
                abort();
        p = popen(cmd, "re");
        ASSERT_TRUE(p != NULL);
        if (!fgets(line, sizeof(line), p))
                line[0] = '\0';
        if (pclose(p) != 0 || line[0] != '/') {
                fprintf(stderr, "'%s' failed\n", cmd);
                abort();
        }
        free(cmd);
        line[strcspn(line, "\n")] = '\0';
        return strdup(line);
}

/* A fresh temporary directory open as dfd (a repository's directory for the store tests);
 * bvtest_dir_done closes and removes it. */
typedef struct BvTestDir {
        char *dir;
        int dfd;
} BvTestDir;

static inline BvTestDir bvtest_dir_new(void)
{
        BvTestDir d = { .dir = bvtest_tmpdir() };

        d.dfd = open(d.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(d.dfd >= 0);
        return d;
}

static inline void bvtest_dir_done(BvTestDir *d)
{
        close(d->dfd);
        bvtest_rm_rf(d->dir);
        free(d->dir);
}
