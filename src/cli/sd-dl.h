/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libsystemd, loaded on first use (util/dlib.h): only the appliance's runs tell the journal and
 * the service manager how they went (sd_journal_send, sd_notifyf). The files that do include
 * libsystemd through this header: a call sd_notifyf(...) or sd_journal_send(...) loads the library
 * the first time and goes through the pointer sym_X. Without the library the call does nothing and
 * returns -ELIBACC; the first such call warns once, naming the library. A function missing from
 * the list fails to link (libsystemd is not linked): add it to both lists.
 */

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "dlib.h"

/* sd_journal_send is a macro of sd_journal_send_with_location */
#define SD_DL_SYMBOLS(X) \
        X(sd_journal_send_with_location) \
        X(sd_notifyf)

SD_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libsystemd.so.0 once: 0, or -ELIBACC (warned once, naming the library). */
int sd_dl_open(void);

#ifndef SD_DL_IMPL
#define sd_journal_send_with_location(...) (sd_dl_open() < 0 ? -ELIBACC : sym_sd_journal_send_with_location(__VA_ARGS__))
#define sd_notifyf(...) (sd_dl_open() < 0 ? -ELIBACC : sym_sd_notifyf(__VA_ARGS__))
#endif
