/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks.h"
#include "macro.h"
#include "process.h"

extern char **environ;

/* Our environment without the passphrases (a child never sees a secret), then vars. */
static char **hook_env(const char *const vars[])
{
        size_t n = 0, v = 0, k = 0;
        while (environ[n])
                n++;
        while (vars && vars[v])
                v++;
        char **env = calloc(n + v + 1, sizeof(*env));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], "BLKVAULT_PASSPHRASE=", 20) != 0 &&
                    strncmp(environ[i], "BLKVAULT_NEW_PASSPHRASE=", 24) != 0)
                        env[k++] = environ[i];
        for (size_t i = 0; i < v; i++)
                env[k++] = (char *)vars[i];
        return env;
}

/* out_fd >= 0: the command's stdout, and it leads a process group of its own (for
 * bv_job_cancel to end the command with all its children). */
static int hook_spawn(const char *command, const char *const vars[], int out_fd)
{
        posix_spawnattr_t attr;
        char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)command, NULL };
        _cleanup_free_ char **env = hook_env(vars);
        posix_spawn_file_actions_t fa;
        pid_t pid;

        if (!env)
                return -ENOMEM;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawnattr_init(&attr);
        if (out_fd >= 0) {
                posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
                posix_spawnattr_setpgroup(&attr, 0);
                posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        }
        int r = posix_spawn(&pid, argv[0], &fa, &attr, argv, env);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return r != 0 ? -r : pid;
}

int bv_hook_run(const char *command, const char *const vars[])
{
        pid_t pid = hook_spawn(command, vars, -1);
        if (pid < 0)
                return pid;
        return bv_wait_exit(pid);
}

int bv_hook_spawn_piped(const char *command, const char *const vars[], int *ret_fd)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = hook_spawn(command, vars, p[1]);
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return pid;
        }
        *ret_fd = p[0];
        return pid;
}
