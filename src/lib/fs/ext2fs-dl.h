/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libext2fs and libcom_err, loaded on first use (util/dlib.h): only backup --used-only of ext2/3/4
 * and blkvault files read them. The room's ext2 files include libext2fs through this header: the
 * types come from libext2fs's headers (without their inline functions, which would call the
 * library by name), and each call ext2fs_X(...) goes through the pointer sym_ext2fs_X that
 * ext2fs_dl_open() fills. A function missing from the lists fails to link: add it to both.
 */

#define NO_INLINE_FUNCS /* every ext2fs_ function a plain extern: the redirection below covers it */
#include "foreign-headers-begin.h"
#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
#pragma GCC diagnostic pop

#include "dlib.h"

/* the functions (and unix_io_manager, a variable) of libext2fs.so.2 this room uses */
#define EXT2FS_DL_SYMBOLS(X) \
        X(ext2fs_block_iterate3) \
        X(ext2fs_blocks_count) \
        X(ext2fs_close_free) \
        X(ext2fs_dir_iterate) \
        X(ext2fs_dirent_name_len) \
        X(ext2fs_extent_free) \
        X(ext2fs_extent_get) \
        X(ext2fs_extent_open2) \
        X(ext2fs_file_close) \
        X(ext2fs_file_open) \
        X(ext2fs_file_read) \
        X(ext2fs_find_first_set_block_bitmap2) \
        X(ext2fs_find_first_zero_block_bitmap2) \
        X(ext2fs_is_fast_symlink) \
        X(ext2fs_namei) \
        X(ext2fs_namei_follow) \
        X(ext2fs_open2) \
        X(ext2fs_read_block_bitmap) \
        X(ext2fs_read_inode_full) \
        X(unix_io_manager)

EXT2FS_DL_SYMBOLS(BV_DL_DECLARE)
/* ... and of libcom_err.so.2 */
#define COM_ERR_DL_SYMBOLS(X) X(error_message)
COM_ERR_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libext2fs.so.2 and libcom_err.so.2 once: 0, or -ELIBACC with bv_dl_error() saying what is
 * missing. Called before the first ext2fs_open2 of each entry point. */
int ext2fs_dl_open(void);

#ifndef EXT2FS_DL_IMPL
#define ext2fs_block_iterate3 sym_ext2fs_block_iterate3
#define ext2fs_blocks_count sym_ext2fs_blocks_count
#define ext2fs_close_free sym_ext2fs_close_free
#define ext2fs_dir_iterate sym_ext2fs_dir_iterate
#define ext2fs_dirent_name_len sym_ext2fs_dirent_name_len
#define ext2fs_extent_free sym_ext2fs_extent_free
#define ext2fs_extent_get sym_ext2fs_extent_get
#define ext2fs_extent_open2 sym_ext2fs_extent_open2
#define ext2fs_file_close sym_ext2fs_file_close
#define ext2fs_file_open sym_ext2fs_file_open
#define ext2fs_file_read sym_ext2fs_file_read
#define ext2fs_find_first_set_block_bitmap2 sym_ext2fs_find_first_set_block_bitmap2
#define ext2fs_find_first_zero_block_bitmap2 sym_ext2fs_find_first_zero_block_bitmap2
#define ext2fs_is_fast_symlink sym_ext2fs_is_fast_symlink
#define ext2fs_namei sym_ext2fs_namei
#define ext2fs_namei_follow sym_ext2fs_namei_follow
#define ext2fs_open2 sym_ext2fs_open2
#define ext2fs_read_block_bitmap sym_ext2fs_read_block_bitmap
#define ext2fs_read_inode_full sym_ext2fs_read_inode_full
#define unix_io_manager (*sym_unix_io_manager)
#define error_message sym_error_message
#endif
