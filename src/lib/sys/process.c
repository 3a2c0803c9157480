/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "process.h"

void bv_sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/* In the child: exec argv, or say why not on stderr and exit 127. */
__attribute__((noreturn)) static void exec_or_die(char *const argv[])
{
        execvp(argv[0], argv);
        fprintf(stderr, "error: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
}

pid_t bv_spawn(char *const argv[], const char *log_path, bool detach)
{
        _cleanup_close_ int logfd = -EBADF;
        pid_t pid;

        if (log_path) {
                logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                if (logfd < 0)
                        return -errno;
        }
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, STDIN_FILENO);
                        if (detach)
                                dup2(null, STDOUT_FILENO);
                }
                if (logfd >= 0)
                        dup2(logfd, STDERR_FILENO);
                if (detach)
                        setsid();
                exec_or_die(argv);
        }
        return pid;
}

pid_t bv_spawn_piped(char *const argv[], int *ret_fd)
{
        int pipefd[2];
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return r;
        }
        if (pid == 0) {
                dup2(pipefd[1], STDOUT_FILENO);
                exec_or_die(argv);
        }
        safe_close(pipefd[1]);
        *ret_fd = pipefd[0];
        return pid;
}

int bv_wait_exit(pid_t pid)
{
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int bv_run(char *const argv[], char *out, size_t out_size)
{
        _cleanup_close_ int fd = -EBADF;
        pid_t pid;

        if (!out) {
                pid = fork();
                if (pid < 0)
                        return -errno;
                if (pid == 0)
                        exec_or_die(argv);
                return bv_wait_exit(pid);
        }
        pid = bv_spawn_piped(argv, &fd);
        if (pid < 0)
                return (int)pid;
        ssize_t n = bv_read_all(fd, out, out_size - 1);
        out[n > 0 ? n : 0] = '\0';
        out[strcspn(out, "\n")] = '\0';
        return bv_wait_exit(pid);
}

bool bv_have_command(const char *name)
{
        const char *path = getenv("PATH");
        char buf[PATH_MAX];

        if (!path)
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, ":");
                snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name);
                if (n > 0 && access(buf, X_OK) == 0)
                        return true;
                p += n + (p[n] == ':');
        }
        return false;
}

bool bv_process_is(pid_t pid, const char *comm)
{
        char path[64], buf[64] = "";

        if (pid <= 0)
                return false;
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || bv_read_all(fd, buf, sizeof(buf) - 1) <= 0)
                return false;
        if (strncmp(buf, comm, strlen(comm)) != 0)
                return false;
        /* a zombie child of ours counts as gone */
        (void)waitpid(pid, NULL, WNOHANG);
        return kill(pid, 0) == 0 && access(path, F_OK) == 0;
}

bool bv_process_wait_gone(pid_t pid, const char *comm, unsigned ms)
{
        for (unsigned t = 0; t < ms; t += 20) {
                if (!bv_process_is(pid, comm))
                        return true;
                bv_sleep_ms(20);
        }
        return !bv_process_is(pid, comm);
}

void bv_process_stop(pid_t pid, const char *comm, unsigned ms)
{
        if (!bv_process_is(pid, comm))
                return;
        (void)kill(pid, SIGTERM);
        if (!bv_process_wait_gone(pid, comm, ms)) {
                (void)kill(pid, SIGKILL);
                (void)bv_process_wait_gone(pid, comm, ms);
        }
}

pid_t bv_pidfile_read(const char *path)
{
        _cleanup_free_ char *text = NULL;
        size_t len;

        if (bv_read_file(AT_FDCWD, path, 64, (void **)&text, &len) < 0 || len == 0)
                return 0;
        return (pid_t)atoi(text);
}
