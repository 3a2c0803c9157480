/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Reading a passphrase: from a file, the environment, a file descriptor, a command's standard
 * output, or a prompt on the terminal. Shared by the CLI and the nbdkit plugin. Every
 * passphrase lives in locked, wiped memory of BV_PASSPHRASE_BUF bytes (bv_passphrase_free), is
 * NUL-terminated, and has one trailing newline dropped where it was read from bytes. Nothing
 * here prints: the caller says what failed.
 */

#include <sys/types.h>

#include "macro.h"

#define BV_PASSPHRASE_MAX 1024 /* bytes, not counting the NUL */
#define BV_PASSPHRASE_BUF (BV_PASSPHRASE_MAX + 2)

/* -EFBIG when the file holds more than BV_PASSPHRASE_MAX bytes (its newline included), -EBADFD
 * when it is not a regular file, -ENOMEM without locked memory, else what open/read said. */
int bv_passphrase_from_file(const char *path, char **ret);
/* -ENOENT when the variable is unset, -E2BIG when it is longer than BV_PASSPHRASE_MAX. */
int bv_passphrase_from_env(const char *name, char **ret);
/* Reads fd to its end (the caller closes it): -EFBIG beyond BV_PASSPHRASE_MAX bytes. */
int bv_passphrase_from_fd(int fd, char **ret);
/* Runs '/bin/sh -c command' (stdin and stderr ours) and takes its standard output: -ECHILD when
 * it did not exit with status 0 (*ret_status: the exit status, or 128 + the signal). */
int bv_passphrase_from_command(const char *command, char **ret, int *ret_status);
/* Asks on /dev/tty with echo off: -ENOTTY without a terminal, -EIO at end of input. */
int bv_passphrase_prompt(const char *question, char **ret);

void bv_passphrase_free(char *p); /* accepts NULL */
DEFINE_TRIVIAL_CLEANUP_FUNC(char, bv_passphrase_free);
