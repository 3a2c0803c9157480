/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The operator's commands: a job's pre and post, the on-success and on-failure of a job, a target
 * or the whole configuration. Each runs as /bin/sh -c COMMAND with stdin on /dev/null, our stdout
 * and stderr, and our environment without the passphrase variables, plus vars ("NAME=value":
 * BLKVAULT_JOB, BLKVAULT_TARGET, BLKVAULT_RESULT, BLKVAULT_SUMMARY...).
 */

/* Runs command to its end: its exit status, 128 + the signal that killed it, or -errno. */
int bv_hook_run(const char *command, const char *const vars[]);
/* Starts command the same way, with its stdout on a pipe whose read end is *ret_fd (O_CLOEXEC),
 * as the leader of a new process group: the pid, or -errno. */
int bv_hook_spawn_piped(const char *command, const char *const vars[], int *ret_fd);
