/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Starting and supervising helper processes (nbdkit, nbdfuse, nbd-client, losetup, a passphrase
 * command), and their pid files. A process is only ever signalled after /proc says it still
 * runs the program it was started as, so a recycled pid is never hit.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

void bv_sleep_ms(unsigned ms);

/* Starts argv (searched in $PATH) with stdin on /dev/null and stderr appended to log_path (NULL:
 * ours); detach: also stdout on /dev/null, in a session of its own. The pid, or -errno. */
pid_t bv_spawn(char *const argv[], const char *log_path, bool detach);
/* Starts argv with its stdout on a pipe whose read end is *ret_fd. The pid, or -errno. */
pid_t bv_spawn_piped(char *const argv[], int *ret_fd);
/* Waits for a child: its exit status, 128 + the signal that killed it, or -errno. */
int bv_wait_exit(pid_t pid);
/* Runs argv to completion; its stdout goes into out (NUL-terminated, cut at the first newline)
 * when out is given. The exit status, or -errno when it could not run. */
int bv_run(char *const argv[], char *out, size_t out_size);
/* Is there an executable name in $PATH (or the usual directories when PATH is unset)? */
bool bv_have_command(const char *name);

/* Is pid alive and running the program comm? A zombie child of ours counts as gone. */
bool bv_process_is(pid_t pid, const char *comm);
/* Waits up to ms for pid to stop running comm; true when it did. */
bool bv_process_wait_gone(pid_t pid, const char *comm, unsigned ms);
/* Stops pid if it still runs comm: SIGTERM, then after ms SIGKILL. */
void bv_process_stop(pid_t pid, const char *comm, unsigned ms);

/* The pid a pid file names, or 0 when it is missing or unreadable. */
pid_t bv_pidfile_read(const char *path);
