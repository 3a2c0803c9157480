/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stall.so: an LD_PRELOAD library that holds a program in the middle of writing, so that a test
 * can interrupt it at a known point without timing anything.
 *
 * Once $BV_STALL_AFTER bytes have been written with pwrite/pwrite64 (all files together), every
 * further pwrite first creates the file $BV_STALL_GATE.waiting (once) and then waits until the
 * file $BV_STALL_GATE exists. A test waits for the .waiting file, does what it tests (a signal,
 * say), and creates the gate to let the writes go on. With $BV_STALL_WRITE set, write(2) to
 * regular files counts and stalls too (a backup writes its packs with write); with $BV_STALL_READ,
 * pread/pread64 of regular files too (a copy to S3 reads a pack it sends whole into memory, and
 * writes nothing).
 */
/* Distinct pwrite and pwrite64 symbols: both are interposed. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gate.h"

static atomic_ullong written;

static void stall(size_t len)
{
        const char *after = getenv("BV_STALL_AFTER"), *gate = getenv("BV_STALL_GATE");
        static atomic_bool announced;

        if (!after || !gate || atomic_fetch_add(&written, len) < strtoull(after, NULL, 10))
                return;
        gate_wait(gate, !atomic_exchange(&announced, true));
}

#define REAL(name)                                                                                         \
        static ssize_t (*real_##name)(int, const void *, size_t, off_t);                                   \
        if (!real_##name)                                                                                  \
                real_##name = dlsym(RTLD_NEXT, #name)

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
        REAL(pwrite);
        stall(len);
        return real_pwrite(fd, buf, len, off);
}

ssize_t write(int fd, const void *buf, size_t len)
{
        static ssize_t (*real_write)(int, const void *, size_t);
        struct stat st;
        if (!real_write)
                real_write = dlsym(RTLD_NEXT, "write");
        if (getenv("BV_STALL_WRITE") && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                stall(len);
        return real_write(fd, buf, len);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
        REAL(pwrite64);
        stall(len);
        return real_pwrite64(fd, buf, len, off);
}

/* pread and pread64 of a regular file, with $BV_STALL_READ. */
static void stall_read(int fd, size_t len)
{
        struct stat st;
        if (getenv("BV_STALL_READ") && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                stall(len);
}

#define REAL_READ(name)                                                                                    \
        static ssize_t (*real_##name)(int, void *, size_t, off_t);                                         \
        if (!real_##name)                                                                                  \
                real_##name = dlsym(RTLD_NEXT, #name)

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
        REAL_READ(pread);
        stall_read(fd, len);
        return real_pread(fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
        REAL_READ(pread64);
        stall_read(fd, len);
        return real_pread64(fd, buf, len, off);
}
