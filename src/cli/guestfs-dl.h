/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libguestfs, loaded on first use (util/dlib.h): only blkvault files of XFS, btrfs, FAT or LVM
 * needs it, and it brings libvirt, GLib and ~60 libraries. files-guestfs.c includes it through
 * this header: the types from guestfs.h, each call guestfs_X(...) through the pointer
 * sym_guestfs_X that guestfs_dl_open() fills. A function missing from the list fails to link
 * (libguestfs is not linked): add it to both lists.
 */

#include <guestfs.h>

#include "dlib.h"

#define GUESTFS_DL_SYMBOLS(X) \
        X(guestfs_add_drive_opts) \
        X(guestfs_blockdev_getsize64) \
        X(guestfs_close) \
        X(guestfs_create) \
        X(guestfs_free_statns) \
        X(guestfs_free_statns_list) \
        X(guestfs_last_errno) \
        X(guestfs_last_error) \
        X(guestfs_launch) \
        X(guestfs_list_devices) \
        X(guestfs_ls) \
        X(guestfs_lstatns) \
        X(guestfs_lstatnslist) \
        X(guestfs_lvs) \
        X(guestfs_mkmountpoint) \
        X(guestfs_mount_options) \
        X(guestfs_mount_ro) \
        X(guestfs_pread) \
        X(guestfs_readlink) \
        X(guestfs_set_backend) \
        X(guestfs_set_error_handler) \
        X(guestfs_shutdown) \
        X(guestfs_vfs_label) \
        X(guestfs_vfs_type)

GUESTFS_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libguestfs.so.0 once: 0, or -ELIBACC with bv_dl_error() saying what is missing. */
int guestfs_dl_open(void);

#ifndef GUESTFS_DL_IMPL
#define guestfs_add_drive_opts sym_guestfs_add_drive_opts
#define guestfs_blockdev_getsize64 sym_guestfs_blockdev_getsize64
#define guestfs_close sym_guestfs_close
#define guestfs_create sym_guestfs_create
#define guestfs_free_statns sym_guestfs_free_statns
#define guestfs_free_statns_list sym_guestfs_free_statns_list
#define guestfs_last_errno sym_guestfs_last_errno
#define guestfs_last_error sym_guestfs_last_error
#define guestfs_launch sym_guestfs_launch
#define guestfs_list_devices sym_guestfs_list_devices
#define guestfs_ls sym_guestfs_ls
#define guestfs_lstatns sym_guestfs_lstatns
#define guestfs_lstatnslist sym_guestfs_lstatnslist
#define guestfs_lvs sym_guestfs_lvs
#define guestfs_mkmountpoint sym_guestfs_mkmountpoint
#define guestfs_mount_options sym_guestfs_mount_options
#define guestfs_mount_ro sym_guestfs_mount_ro
#define guestfs_pread sym_guestfs_pread
#define guestfs_readlink sym_guestfs_readlink
#define guestfs_set_backend sym_guestfs_set_backend
#define guestfs_set_error_handler sym_guestfs_set_error_handler
#define guestfs_shutdown sym_guestfs_shutdown
#define guestfs_vfs_label sym_guestfs_vfs_label
#define guestfs_vfs_type sym_guestfs_vfs_type
#endif
