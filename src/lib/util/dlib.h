/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Optional shared libraries loaded on first use. Most commands never touch libvirt, libguestfs,
 * libntfs-3g, libext2fs or libcryptsetup, yet linking them makes every start map and relocate
 * them and their dependencies (80 libraries, ~17 ms of CPU and every one read from disk when
 * the page cache is cold). The room that owns such a library keeps one seam, NAME-dl.c: a table
 * of the symbols it calls, resolved into function pointers sym_NAME the first time it needs them,
 * and a header that redirects the library's names to those pointers. The library's headers
 * still give the types; meson checks at build time that the library and its headers exist.
 */

#include <stddef.h>

/* One symbol to resolve: its name and where its address goes. */
typedef struct BvDlSym {
        const char *name;
        void **slot;
} BvDlSym;

/* The library state a seam keeps (zero-initialised, static). */
typedef struct BvDlLib {
        const char *soname;
        void *handle;
        int result; /* 0 not tried yet, 1 loaded, <0 the error it failed with */
} BvDlLib;

/* Declares the pointer for a library function NAME (use in the seam's header) ... */
#define BV_DL_DECLARE(name) extern __typeof__(name) *sym_##name;
/* ... defines it (in the seam's .c) ... */
#define BV_DL_DEFINE(name) __typeof__(name) *sym_##name;
/* ... and lists it in the seam's table. */
#define BV_DL_ENTRY(name) {#name, (void **)&sym_##name},

/*
 * Loads lib->soname with dlopen(RTLD_NOW | RTLD_GLOBAL) and resolves every symbol of syms into
 * its slot in the global scope, as the dynamic linker would (LD_PRELOAD interposes), once per
 * process (thread-safe; later calls return the first call's result). All or nothing: on a
 * missing library or symbol no slot is set. 0 on success, -ELIBACC when the library or a symbol
 * is missing; then bv_dl_error() says which ("cannot load libvirt.so.0: ...").
 */
int bv_dl_open(BvDlLib *lib, const BvDlSym *syms, size_t n);

/* The words of the last failed bv_dl_open in this process ("" when none failed). */
const char *bv_dl_error(void);
