/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mallocfail.so: an LD_PRELOAD library with a malloc-failure countdown. With
 * BV_MALLOC_FAIL_AT=N, the Nth call of malloc, calloc or realloc made directly by the program
 * itself (its own code: libblkvault and the CLI, not libc, json-c or zstd, whose callers see
 * their own errors) returns NULL with ENOMEM; every other call is passed on. The program must
 * then fail cleanly (an error message and exit status 1) and leave its repository as it was.
 * BV_MALLOC_COUNT=FILE writes the number of such calls made to FILE at exit, so a test knows
 * how far to count.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static uintptr_t prog_lo, prog_hi;
static long fail_at = -1, calls;
static int resolving;
static char bootstrap[4096]; /* calloc from dlsym while resolving */
static size_t boot_used;

static int find_program(struct dl_phdr_info *info, size_t size, void *data)
{
        (void)size, (void)data;
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
                        continue;
                uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
                if (!prog_lo || lo < prog_lo)
                        prog_lo = lo;
                if (hi > prog_hi)
                        prog_hi = hi;
        }
        return 1; /* the first object is the program */
}

static void report(void)
{
        const char *path = getenv("BV_MALLOC_COUNT");
        FILE *f = path ? fopen(path, "we") : NULL;
        if (f) {
                fprintf(f, "%ld\n", calls);
                fclose(f);
        }
}

static void init(void)
{
        if (real_malloc)
                return;
        resolving = 1;
        real_malloc = dlsym(RTLD_NEXT, "malloc");
        real_calloc = dlsym(RTLD_NEXT, "calloc");
        real_realloc = dlsym(RTLD_NEXT, "realloc");
        resolving = 0;
}

/* Counting starts here: a sanitizer runtime allocates before the environment can be read. */
__attribute__((constructor)) static void configure(void)
{
        init();
        dl_iterate_phdr(find_program, NULL);
        const char *s = getenv("BV_MALLOC_FAIL_AT");
        if (getenv("BV_MALLOC_COUNT"))
                atexit(report);
        __atomic_store_n(&fail_at, s ? atol(s) : 0, __ATOMIC_RELEASE);
}

/* 1 if this call, from caller, is the one to fail. */
static int should_fail(void *caller)
{
        uintptr_t c = (uintptr_t)caller;
        if (__atomic_load_n(&fail_at, __ATOMIC_ACQUIRE) < 0 || c < prog_lo || c >= prog_hi)
                return 0;
        long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
        if (fail_at > 0 && n == fail_at) {
                errno = ENOMEM;
                return 1;
        }
        return 0;
}

void *malloc(size_t n)
{
        init();
        return should_fail(__builtin_return_address(0)) ? NULL : real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
        if (resolving) { /* dlsym's own allocation, before the real calloc is known */
                size_t n = (a * b + 15) & ~(size_t)15;
                if (boot_used + n > sizeof(bootstrap))
                        return NULL;
                void *p = bootstrap + boot_used;
                boot_used += n;
                return p;
        }
        init();
        return should_fail(__builtin_return_address(0)) ? NULL : real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
        init();
        return should_fail(__builtin_return_address(0)) ? NULL : real_realloc(p, n);
}
