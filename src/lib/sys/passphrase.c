/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "passphrase.h"
#include "process.h"
#include "secmem.h"

void bv_passphrase_free(char *p)
{
        bv_secure_free(p, BV_PASSPHRASE_BUF);
}

static char *passphrase_alloc(void)
{
        return bv_secure_alloc(BV_PASSPHRASE_BUF);
}

int bv_passphrase_from_file(const char *path, char **ret)
{
        void *data;
        size_t len, size;
        int r;

        r = bv_read_secret_file(AT_FDCWD, path, BV_PASSPHRASE_MAX, BV_PASSPHRASE_BUF, true, &data, &len, &size);
        if (r < 0)
                return r;
        /* size is BV_PASSPHRASE_BUF: the file holds at most BV_PASSPHRASE_MAX bytes */
        *ret = data;
        return 0;
}

int bv_passphrase_from_env(const char *name, char **ret)
{
        const char *env = getenv(name);
        char *p;

        if (!env)
                return -ENOENT;
        if (strlen(env) > BV_PASSPHRASE_MAX)
                return -E2BIG;
        p = passphrase_alloc();
        if (!p)
                return -ENOMEM;
        strcpy(p, env);
        *ret = p;
        return 0;
}

int bv_passphrase_from_fd(int fd, char **ret)
{
        void *data;
        size_t len, size;
        char *p;
        int r;

        r = bv_read_secret_fd(fd, BV_PASSPHRASE_MAX, true, &data, &len, &size);
        if (r < 0)
                return r;
        /* into a buffer of the one passphrase size, so that bv_passphrase_free fits it */
        p = passphrase_alloc();
        if (p)
                memcpy(p, data, len + 1);
        bv_secure_free(data, size);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int bv_passphrase_from_command(const char *command, char **ret, int *ret_status)
{
        char *const argv[] = { "/bin/sh", "-c", (char *)command, NULL };
        _cleanup_close_ int out = -EBADF;
        char *p = NULL;
        pid_t pid;
        int r, status;

        pid = bv_spawn_piped(argv, &out);
        if (pid < 0)
                return (int)pid;
        r = bv_passphrase_from_fd(out, &p);
        out = safe_close(out);
        status = bv_wait_exit(pid);
        if (r >= 0 && status != 0) {
                if (ret_status)
                        *ret_status = status;
                r = -ECHILD;
        }
        if (r < 0) {
                bv_passphrase_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

int bv_passphrase_prompt(const char *question, char **ret)
{
        struct termios old, noecho;
        _cleanup_fclose_ FILE *tty = fopen("/dev/tty", "r+e");
        char *p;

        if (!tty)
                return -ENOTTY;
        p = passphrase_alloc();
        if (!p)
                return -ENOMEM;
        fprintf(tty, "%s", question);
        fflush(tty);
        bool restore = tcgetattr(fileno(tty), &old) == 0;
        if (restore) {
                noecho = old;
                noecho.c_lflag &= ~(tcflag_t)ECHO;
                tcsetattr(fileno(tty), TCSAFLUSH, &noecho);
        }
        char *ok = fgets(p, BV_PASSPHRASE_MAX + 2, tty);
        if (restore)
                tcsetattr(fileno(tty), TCSAFLUSH, &old);
        fprintf(tty, "\n");
        if (!ok) {
                bv_passphrase_free(p);
                return -EIO;
        }
        p[strcspn(p, "\n")] = '\0';
        *ret = p;
        return 0;
}
