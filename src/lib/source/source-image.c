/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Disk image files (qcow2, vmdk, vdi, vhdx, qed, vpc) read as the virtual disk they hold. The
 * format is told by the magic number at the head of the file, never by its name; a file without
 * one is raw and stays with source-file.c.
 *
 * qemu-nbd --read-only serves the image and the NBD source (source-nbd.c) reads it, so ranges
 * qemu reports as zero (holes, zero clusters, unallocated clusters of a whole backing chain) are
 * never read. qemu-nbd is socket-activated (LISTEN_FDS) on a listening socket bound in a private
 * mkdtemp directory; our client connects before the child starts, then the socket and the
 * directory are removed: from then on nothing is in the filesystem and no one else can connect.
 * It is not libnbd's nbd_connect_systemd_socket_activation, whose socket directory outlives a
 * killed caller. qemu-nbd runs in its own process group (a terminal's ^C reaches blkvault, which
 * then stops cleanly), dies with the thread that started it (PR_SET_PDEATHSIG), and exits by
 * itself when its only client goes away (it is not --persistent).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "source.h"

#define HEADER_SIZE 512
#define DETAIL_MAX 512
#define EXIT_NOEXEC 127

extern char **environ;

typedef struct ImageMagic {
        const char *format;
        size_t offset;
        const char *magic;
        size_t len;
} ImageMagic;

/* qemu's probes, for the formats a VM's disk is kept in. LUKS (qemu's "luks") is left out: a
 * raw image of an encrypted partition starts the same way and is read as it is. */
static const ImageMagic magics[] = {
        { "qcow2", 0, "QFI\xfb", 4 },       { "qed", 0, "QED\0", 4 },
        { "vmdk", 0, "KDMV", 4 },           { "vmdk", 0, "COWD", 4 },
        { "vmdk", 0, "# Disk DescriptorFile", 21 },
        { "vdi", 0x40, "\x7f\x10\xda\xbe", 4 }, { "vhdx", 0, "vhdxfile", 8 },
        { "vpc", 0, "conectix", 8 },
};

static const char *format_of(const uint8_t *h, size_t n)
{
        for (size_t i = 0; i < ELEMENTSOF(magics); i++) {
                const ImageMagic *m = &magics[i];
                if (m->offset + m->len > n || memcmp(h + m->offset, m->magic, m->len) != 0)
                        continue;
                /* QFI\xfb version 1 is the old qcow */
                if (strcmp(m->format, "qcow2") == 0 && n >= 8 && h[4] == 0 && h[5] == 0 && h[6] == 0 && h[7] == 1)
                        return "qcow";
                return m->format;
        }
        return NULL;
}

/* The format at the head of the open regular file fd: 1, 0 (none), or -errno. */
static int detect_fd(int fd, const char **ret_format)
{
        uint8_t h[HEADER_SIZE];
        ssize_t n = pread(fd, h, sizeof(h), 0);

        if (n < 0)
                return negative_errno();
        const char *f = format_of(h, (size_t)n);
        if (!f)
                return 0;
        *ret_format = f;
        return 1;
}

int bv_source_detect_image(const char *path, const char **ret_format)
{
        struct stat st;

        if (!path || strcmp(path, "-") == 0 || bv_source_is_nbd_uri(path) || stat(path, &st) < 0 ||
            !S_ISREG(st.st_mode))
                return 0;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return 0; /* the open of the file source says why */
        /* a head that does not read is no image: the file source reads it as bytes and names the
         * offset that fails (--skip-unreadable stores it as zeroes), as before images were told */
        return MAX(detect_fd(fd, ret_format), 0);
}

typedef struct ImageSource {
        BvSource *nbd;
        const char *format;
        BvSourceIdentity identity;
        pid_t pid;     /* qemu-nbd */
        int err_fd;    /* the read end of its stderr */
} ImageSource;

int bv_qemu_nbd_stop(pid_t pid)
{
        int status = 0;

        if (pid <= 0)
                return 0;
        (void)kill(pid, SIGTERM);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return status;
}

static void image_free(ImageSource *s)
{
        if (!s)
                return;
        bv_source_free(s->nbd); /* closes the connection first */
        (void)bv_qemu_nbd_stop(s->pid);
        safe_close(s->err_fd);
        free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(ImageSource, image_free);

/* The environment for qemu-nbd: ours without blkvault's own variables (a passphrase never
 * reaches a child), with LISTEN_FDS=1 and room for LISTEN_PID, which the child fills in. */
static char **child_env(char *listen_pid)
{
        size_t n = 0, k = 0;

        while (environ[n])
                n++;
        char **env = calloc(n + 3, sizeof(char *));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (strncmp(environ[i], "BLKVAULT_", 9) != 0 && strncmp(environ[i], "LISTEN_", 7) != 0)
                        env[k++] = environ[i];
        env[k++] = (char *)"LISTEN_FDS=1";
        env[k++] = listen_pid;
        return env;
}

/* Writes v in decimal at p (async-signal-safe, for the child). */
static void put_decimal(char *p, unsigned long v)
{
        char d[24];
        size_t n = 0;

        do
                d[n++] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        while (n > 0)
                *p++ = d[--n];
        *p = '\0';
}

/* In the child (between fork and exec: async-signal-safe calls only): fd 3 the listening
 * socket, stderr the pipe, stdin and stdout /dev/null; dies with its parent. Never returns. */
static void child_exec(pid_t parent, int listen_fd, int err_fd, int null_fd, char *argv[], char **env,
                       char *listen_pid)
{
        (void)setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(EXIT_NOEXEC);
        if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0 ||
            dup2(listen_fd, 3) < 0)
                _exit(EXIT_NOEXEC);
        put_decimal(listen_pid + strlen("LISTEN_PID="), (unsigned long)getpid());
        sigset_t all;
        sigemptyset(&all);
        (void)sigprocmask(SIG_SETMASK, &all, NULL);
        execvpe(argv[0], argv, env);
        static const char msg[] = "qemu-nbd: cannot run it (is qemu-utils installed?)\n";
        (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(EXIT_NOEXEC);
}

/* A listening socket bound in a fresh private directory, and a client connected to it (waiting
 * in its backlog); the socket's name and the directory are gone when this returns. */
static int socket_pair_private(int *ret_listen, int *ret_client)
{
        const char *tmp = getenv("TMPDIR");
        char dir[PATH_MAX], path[PATH_MAX + 8];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r = 0;

        if (snprintf(dir, sizeof(dir), "%s/blkvault-qemu-XXXXXX", tmp && tmp[0] ? tmp : "/tmp") >= (int)sizeof(dir))
                return -ENAMETOOLONG;
        if (!mkdtemp(dir))
                return negative_errno();
        snprintf(path, sizeof(path), "%s/nbd", dir);
        _cleanup_close_ int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        _cleanup_close_ int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (strlen(path) >= sizeof(sa.sun_path))
                r = -ENAMETOOLONG;
        else
                memcpy(sa.sun_path, path, strlen(path) + 1);
        if (r == 0 && (l < 0 || c < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
                       connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0))
                r = negative_errno();
        (void)unlink(path);
        (void)rmdir(dir);
        if (r < 0)
                return r;
        *ret_listen = TAKE_FD(l);
        *ret_client = TAKE_FD(c);
        return 0;
}

/* path as qemu is given it: "./" keeps qemu from taking a relative name with a colon for a
 * protocol ("json:..."). NULL when out of memory. */
static char *qemu_file_name(const char *path)
{
        char *file;

        return asprintf(&file, "%s%s", path[0] == '/' ? "" : "./", path) < 0 ? NULL : file;
}

int bv_qemu_nbd_start(const char *path, const char *format, const char *bitmap, bool writable, int *ret_client,
                      int *ret_err)
{
        _cleanup_close_ int l = -EBADF, c = -EBADF, null_fd = -EBADF;
        int pipefd[2];
        char listen_pid[40] = "LISTEN_PID=", fmt[32];
        _cleanup_free_ char *file = NULL;
        int r;

        if (!path || !format || strlen(format) > 16 || (bitmap && (!bitmap[0] || strlen(bitmap) > 1023)))
                return -EINVAL;
        file = qemu_file_name(path);
        if (!file)
                return -ENOMEM;
        snprintf(fmt, sizeof(fmt), "--format=%s", format);
        /* writable: a restore's writes reach the image when its one client flushes and goes */
        char *argv[10] = { (char *)"qemu-nbd", fmt, (char *)"--shared=1" };
        size_t k = 3;
        if (!writable)
                argv[k++] = (char *)"--read-only";
        if (bitmap) {
                argv[k++] = (char *)"--bitmap";
                argv[k++] = (char *)bitmap;
        }
        argv[k++] = file;
        argv[k] = NULL;
        _cleanup_free_ char **env = child_env(listen_pid);
        if (!env)
                return -ENOMEM;
        r = socket_pair_private(&l, &c);
        if (r < 0)
                return r;
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0)
                return negative_errno();
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid == 0)
                child_exec(parent, l, pipefd[1], null_fd, argv, env, listen_pid);
        int e = errno;
        safe_close(pipefd[1]);
        if (pid < 0) {
                safe_close(pipefd[0]);
                return -e;
        }
        *ret_client = TAKE_FD(c);
        *ret_err = pipefd[0];
        return pid;
}

void bv_qemu_nbd_message(int err_fd, char *buf, size_t size)
{
        char m[DETAIL_MAX + 1];
        size_t n = 0;
        ssize_t k;

        while (n < DETAIL_MAX && ((k = read(err_fd, m + n, DETAIL_MAX - n)) > 0 || (k < 0 && errno == EINTR)))
                if (k > 0)
                        n += (size_t)k;
        m[n] = '\0';
        m[strcspn(m, "\n")] = '\0';
        const char *p = m, *q;
        if (strncmp(p, "qemu-nbd: ", 10) == 0)
                p += 10;
        if (strncmp(p, "Failed to blk_new_open '", 24) == 0 && (q = strstr(p, "': ")))
                p = q + 3;
        if (buf && size)
                snprintf(buf, size, "%s", p);
}

int bv_qemu_nbd_failed(pid_t pid, int err_fd, int r, char *detail, size_t size)
{
        char m[DETAIL_MAX + 1];

        (void)kill(pid, SIGKILL); /* it has exited, or hangs: its message is written either way */
        int status = bv_qemu_nbd_stop(pid);
        bv_qemu_nbd_message(err_fd, m, sizeof(m));
        if (detail && size)
                snprintf(detail, size, "%s", m);
        if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_NOEXEC)
                return -ENOPKG;
        if (strstr(m, "\"write\" lock"))
                return -EBUSY;
        if (strncmp(m, "Bitmap '", 8) == 0 && strstr(m, "not found"))
                return -ENOMSG;
        return m[0] ? -EBADMSG : r;
}

/* What the failed start of qemu-nbd (with r, the handshake's error) means. */
static int start_error(ImageSource *s, int r, char *detail, size_t size)
{
        pid_t pid = s->pid;

        s->pid = 0;
        return bv_qemu_nbd_failed(pid, s->err_fd, r, detail, size);
}

static int image_next(void *impl, BvExtent *ret)
{
        return bv_source_next(((ImageSource *)impl)->nbd, ret);
}

static int image_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        return bv_source_read_at(((ImageSource *)impl)->nbd, buf, len, offset);
}

static uint64_t image_size(void *impl)
{
        return bv_source_size(((ImageSource *)impl)->nbd);
}

static int image_identity(void *impl, BvSourceIdentity *ret)
{
        *ret = ((ImageSource *)impl)->identity;
        return 0;
}

static void image_read_stats(void *impl, BvSourceReadStats *ret)
{
        bv_source_read_stats(((ImageSource *)impl)->nbd, ret);
}

static const char *image_format(void *impl)
{
        return ((ImageSource *)impl)->format;
}

static void image_free_op(void *impl)
{
        image_free(impl);
}

static const char *image_changed_map(void *impl)
{
        return bv_source_changed_map(((ImageSource *)impl)->nbd);
}

static BvWholeRead *image_whole_read(void *impl)
{
        return bv_source_whole_read(((ImageSource *)impl)->nbd);
}

static int image_changed_ranges(void *impl, const BvByteRange **ret, size_t *ret_count)
{
        return bv_source_changed_ranges(((ImageSource *)impl)->nbd, ret, ret_count);
}

static const BvSourceOps image_ops = {
        .next = image_next, .read_at = image_read_at, .size = image_size, .identity = image_identity,
        .read_stats = image_read_stats, .image_format = image_format, .free = image_free_op,
        .changed_map = image_changed_map, .whole_read = image_whole_read,
        .changed_ranges = image_changed_ranges,
};

static void r_detail(const BvSourceOptions *o, const char *detail)
{
        if (o->error_detail && o->error_detail_size)
                snprintf(o->error_detail, o->error_detail_size, "%s", detail);
}

/* The stated format must be the header's; a probed one must reference no other file. */
static int check_format(int fd, const char *path, const char *found, const BvSourceOptions *o)
{
        char detail[DETAIL_MAX];
        _cleanup_free_ char *file = NULL;

        if (o->image_format && (!found || strcmp(found, o->image_format) != 0)) {
                snprintf(detail, sizeof(detail), "%s", found ? found : "raw");
                r_detail(o, detail);
                return -EMEDIUMTYPE;
        }
        if (!found)
                return -EINVAL; /* replaced by a raw file since it was recognised */
        if (o->image_format)
                return 0; /* trusted, with its backing chain */
        file = qemu_file_name(path);
        if (!file)
                return -ENOMEM;
        detail[0] = '\0';
        int r = bv_source_image_references(fd, file, found, detail, sizeof(detail));
        r_detail(o, detail);
        return r > 0 ? -ENOLINK : r;
}

int bv_source_open_image(const char *path, const BvSourceOptions *opts, BvSource **ret)
{
        BvSourceOptions o = opts ? *opts : (BvSourceOptions){};
        struct stat st;
        int r, client = -EBADF;

        if (!path || !ret || o.compare_with || o.thin_delta)
                return -EINVAL; /* they map a file's bytes, not a virtual disk's */
        if (o.error_detail && o.error_detail_size)
                o.error_detail[0] = '\0';
        _cleanup_close_ int fd = bv_source_open_fd(path, O_NONBLOCK, &st);
        if (fd < 0)
                return fd;
        _cleanup_(image_freep) ImageSource *s = calloc(1, sizeof(ImageSource));
        if (!s)
                return -ENOMEM;
        s->err_fd = -EBADF;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        r = detect_fd(fd, &s->format);
        if (r < 0)
                return r;
        r = check_format(fd, path, r > 0 ? s->format : NULL, &o);
        if (r < 0)
                return r;
        bv_source_identity_from_stat(&st, &s->identity);

        r = bv_qemu_nbd_start(path, s->format, o.dirty_bitmap, false, &client, &s->err_fd);
        if (r < 0)
                return r;
        s->pid = r;
        o.error_detail = NULL;
        r = bv_source_open_nbd_socket(client, path, &o, &s->nbd);
        if (r < 0)
                return start_error(s, r, opts ? opts->error_detail : NULL, opts ? opts->error_detail_size : 0);
        r = bv_source_new(&image_ops, s, BV_SOURCE_IMAGE, path, ret);
        if (r >= 0)
                TAKE_PTR(s);
        return r;
}
