/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "macro.h"
#include "secmem.h"

void bv_wipe(void *p, size_t size)
{
        if (!p)
                return;
        explicit_bzero(p, size);
}

/* A page-granular mapping keeps secrets off pages shared with ordinary heap data. mlock may
 * fail under RLIMIT_MEMLOCK; the secret is then still wiped and kept out of core dumps. */
void *bv_secure_alloc(size_t size)
{
        size_t len = ALIGN_UP(size ? size : 1, (size_t)4096);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return NULL;
        (void)mlock(p, len);
        (void)madvise(p, len, MADV_DONTDUMP);
        return p;
}

void bv_secure_free(void *p, size_t size)
{
        size_t len = ALIGN_UP(size ? size : 1, (size_t)4096);
        if (!p)
                return;
        bv_wipe(p, len);
        (void)munlock(p, len);
        (void)munmap(p, len);
}

int bv_secure_process(void)
{
        if (setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }) < 0)
                return negative_errno();
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return negative_errno();
        return 0;
}
