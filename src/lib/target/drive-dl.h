/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libcryptsetup, loaded on first use (util/dlib.h): only a target's drive (LUKS format, open,
 * close) needs it, and it brings libdevmapper, libargon2, libgcrypt and more. drive.c includes it
 * through this header: the types from libcryptsetup.h, each call crypt_X(...) through the pointer
 * sym_crypt_X that drive_dl_open() fills. A function missing from the list fails to link
 * (libcryptsetup is not linked): add it to both lists.
 */

#include <libcryptsetup.h>

#include "dlib.h"

#define CRYPTSETUP_DL_SYMBOLS(X) \
        X(crypt_activate_by_passphrase) \
        X(crypt_deactivate) \
        X(crypt_format) \
        X(crypt_free) \
        X(crypt_get_uuid) \
        X(crypt_init) \
        X(crypt_init_by_name) \
        X(crypt_keyslot_add_by_volume_key) \
        X(crypt_load) \
        X(crypt_set_log_callback)

CRYPTSETUP_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libcryptsetup.so.12 once: 0, or -ELIBACC with bv_dl_error() saying what is missing. */
int drive_dl_open(void);

#ifndef CRYPTSETUP_DL_IMPL
#define crypt_activate_by_passphrase sym_crypt_activate_by_passphrase
#define crypt_deactivate sym_crypt_deactivate
#define crypt_format sym_crypt_format
#define crypt_free sym_crypt_free
#define crypt_get_uuid sym_crypt_get_uuid
#define crypt_init sym_crypt_init
#define crypt_init_by_name sym_crypt_init_by_name
#define crypt_keyslot_add_by_volume_key sym_crypt_keyslot_add_by_volume_key
#define crypt_load sym_crypt_load
#define crypt_set_log_callback sym_crypt_set_log_callback
#endif
