/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Loading an optional library and its symbols on first use (dlib.h). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "dlib.h"
#include "macro.h"

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;
static char dl_error[512];

static int fail(const BvDlLib *lib, const char *what)
{
        const char *why = dlerror();

        snprintf(dl_error, sizeof(dl_error), "cannot load %s%s%s: %s", lib->soname, what ? " symbol " : "",
                 what ? what : "", why ? why : "unknown error");
        return -ELIBACC;
}

static int load(BvDlLib *lib, const BvDlSym *syms, size_t n)
{
        /* RTLD_GLOBAL and lookups in the global scope, as if the library were linked: a library
         * in LD_PRELOAD still interposes its functions (tests/fault/virtgate.so), and its
         * dlsym(RTLD_NEXT) finds the library's own */
        void *h = dlopen(lib->soname, RTLD_NOW | RTLD_GLOBAL);
        if (!h)
                return fail(lib, NULL);
        /* resolve all before setting any: a half-filled table is never seen */
        void **found = calloc(n ? n : 1, sizeof(*found));
        if (!found) {
                dlclose(h);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                dlerror();
                found[i] = dlsym(RTLD_DEFAULT, syms[i].name);
                if (!found[i]) {
                        int r = fail(lib, syms[i].name);
                        free(found);
                        dlclose(h);
                        return r;
                }
        }
        for (size_t i = 0; i < n; i++)
                *syms[i].slot = found[i];
        free(found);
        lib->handle = h; /* kept for the process's life, as the linker would */
        return 1;
}

int bv_dl_open(BvDlLib *lib, const BvDlSym *syms, size_t n)
{
        int r;

        pthread_mutex_lock(&dl_lock);
        r = lib->result;
        if (r == 0) {
                r = load(lib, syms, n);
                lib->result = r == -ENOMEM ? 0 : r; /* out of memory may pass: try again next time */
        }
        pthread_mutex_unlock(&dl_lock);
        return r < 0 ? r : 0;
}

const char *bv_dl_error(void)
{
        return dl_error;
}
