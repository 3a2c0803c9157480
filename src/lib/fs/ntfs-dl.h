/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libntfs-3g, loaded on first use (util/dlib.h): only blkvault files of an NTFS filesystem reads
 * it. The NTFS reader includes libntfs-3g's headers (the types) through this one (ntfs-node.h);
 * each call ntfs_X(...) then goes through the pointer sym_ntfs_X that ntfs_dl_open() fills. A
 * function missing from the lists fails to link (libntfs-3g is not linked): add it to both.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <sys/stat.h> /* before ntfs-3g's headers: else ntfstime.h defines struct timespec */

#include "foreign-headers-begin.h"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wredundant-decls"
#include <ntfs-3g/types.h>
#include <ntfs-3g/attrib.h>
#include <ntfs-3g/cache.h>
#include <ntfs-3g/device.h>
#include <ntfs-3g/dir.h>
#include <ntfs-3g/inode.h>
#include <ntfs-3g/layout.h>
#include <ntfs-3g/logging.h>
#include <ntfs-3g/reparse.h>
#include <ntfs-3g/unistr.h>
#include <ntfs-3g/volume.h>
#pragma GCC diagnostic pop

#include "dlib.h"

/* the functions (and AT_UNNAMED, NTFS_INDEX_I30: variables) of libntfs-3g.so.89 this room uses */
#define NTFS_DL_SYMBOLS(X) \
        X(AT_UNNAMED) \
        X(NAttrCompressed) \
        X(NAttrEncrypted) \
        X(NAttrSparse) \
        X(NTFS_INDEX_I30) \
        X(ntfs_attr_close) \
        X(ntfs_attr_exist) \
        X(ntfs_attr_get_search_ctx) \
        X(ntfs_attr_lookup) \
        X(ntfs_attr_map_whole_runlist) \
        X(ntfs_attr_open) \
        X(ntfs_attr_pread) \
        X(ntfs_attr_put_search_ctx) \
        X(ntfs_create_lru_caches) \
        X(ntfs_device_alloc) \
        X(ntfs_device_free) \
        X(ntfs_device_mount) \
        X(ntfs_dir_parent_inode) \
        X(ntfs_get_reparse_point) \
        X(ntfs_inode_close) \
        X(ntfs_inode_lookup_by_mbsname) \
        X(ntfs_inode_open) \
        X(ntfs_log_set_handler) \
        X(ntfs_make_symlink) \
        X(ntfs_mbstoucs) \
        X(ntfs_readdir) \
        X(ntfs_reparse_check_wsl) \
        X(ntfs_set_shown_files) \
        X(ntfs_ucstombs) \
        X(ntfs_umount)

NTFS_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libntfs-3g.so.89 once: 0, or -ELIBACC with bv_dl_error() saying what is missing. Called
 * before the first call of each entry point. */
int ntfs_dl_open(void);

#ifndef NTFS_DL_IMPL
#define AT_UNNAMED (*sym_AT_UNNAMED)
#define NAttrCompressed sym_NAttrCompressed
#define NAttrEncrypted sym_NAttrEncrypted
#define NAttrSparse sym_NAttrSparse
#define NTFS_INDEX_I30 (*sym_NTFS_INDEX_I30)
#define ntfs_attr_close sym_ntfs_attr_close
#define ntfs_attr_exist sym_ntfs_attr_exist
#define ntfs_attr_get_search_ctx sym_ntfs_attr_get_search_ctx
#define ntfs_attr_lookup sym_ntfs_attr_lookup
#define ntfs_attr_map_whole_runlist sym_ntfs_attr_map_whole_runlist
#define ntfs_attr_open sym_ntfs_attr_open
#define ntfs_attr_pread sym_ntfs_attr_pread
#define ntfs_attr_put_search_ctx sym_ntfs_attr_put_search_ctx
#define ntfs_create_lru_caches sym_ntfs_create_lru_caches
#define ntfs_device_alloc sym_ntfs_device_alloc
#define ntfs_device_free sym_ntfs_device_free
#define ntfs_device_mount sym_ntfs_device_mount
#define ntfs_dir_parent_inode sym_ntfs_dir_parent_inode
#define ntfs_get_reparse_point sym_ntfs_get_reparse_point
#define ntfs_inode_close sym_ntfs_inode_close
#define ntfs_inode_lookup_by_mbsname sym_ntfs_inode_lookup_by_mbsname
#define ntfs_inode_open sym_ntfs_inode_open
#define ntfs_log_set_handler sym_ntfs_log_set_handler
#define ntfs_make_symlink sym_ntfs_make_symlink
#define ntfs_mbstoucs sym_ntfs_mbstoucs
#define ntfs_readdir sym_ntfs_readdir
#define ntfs_reparse_check_wsl sym_ntfs_reparse_check_wsl
#define ntfs_set_shown_files sym_ntfs_set_shown_files
#define ntfs_ucstombs sym_ntfs_ucstombs
#define ntfs_umount sym_ntfs_umount
#endif
