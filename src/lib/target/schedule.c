/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "schedule.h"

extern char **environ;

/* Runs systemd-analyze calendar SPEC with stdout and stderr into one buffer: its exit status,
 * or -errno. (To move onto the shared process helpers of src/lib/sys once they are in main.) */
static int run_analyze(const char *spec, char *out, size_t size)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawn_file_actions_adddup2(&fa, p[1], 2);
        char *argv[] = { (char *)"systemd-analyze", (char *)"calendar", (char *)spec, NULL };
        pid_t pid;
        int r = posix_spawnp(&pid, "systemd-analyze", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return -r;
        }
        ssize_t n = bv_read_all(p[0], out, size - 1);
        close(p[0]);
        out[n > 0 ? n : 0] = '\0';
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                return -ENOENT;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *line_after(const char *text, const char *label)
{
        const char *s = strstr(text, label);
        if (!s)
                return NULL;
        s += strlen(label);
        return strndup(s, strcspn(s, "\n"));
}

int bv_schedule_check(const char *spec, char **ret_next, char **ret_error)
{
        char out[4096];

        if (ret_next)
                *ret_next = NULL;
        if (ret_error)
                *ret_error = NULL;
        int r = run_analyze(spec, out, sizeof(out));
        if (r < 0)
                return r;
        if (r != 0) {
                if (ret_error)
                        *ret_error = strndup(out, strcspn(out, "\n"));
                return -EINVAL;
        }
        if (ret_next) {
                char *next = line_after(out, "Next elapse: ");
                if (next && strcmp(next, "never") == 0) {
                        free(next);
                        next = NULL;
                }
                *ret_next = next;
        }
        return 0;
}
