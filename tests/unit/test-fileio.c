/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "secmem.h"

TEST(durable_write_and_read)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        void *data = NULL;
        size_t len = 0;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_write_file_durable(dfd, "a", "hello", 5, false));
        ASSERT_OK(bv_read_file(dfd, "a", 100, &data, &len));
        ASSERT_EQ(len, 5);
        ASSERT_MEMEQ(data, "hello", 5);
        free(data);

        /* never overwrite unless asked */
        ASSERT_ERROR(bv_write_file_durable(dfd, "a", "world", 5, false), EEXIST);
        ASSERT_OK(bv_write_file_durable(dfd, "a", "world!", 6, true));
        ASSERT_OK(bv_read_file(dfd, "a", 100, &data, &len));
        ASSERT_EQ(len, 6);
        ASSERT_MEMEQ(data, "world!", 6);
        free(data);

        ASSERT_ERROR(bv_read_file(dfd, "a", 3, &data, &len), EFBIG);
        ASSERT_ERROR(bv_read_file(dfd, "missing", 3, &data, &len), ENOENT);

        /* no temporary file is left behind */
        ASSERT_OK(bv_mkdir_p(dfd, "x/y/z"));
        struct stat st;
        ASSERT_TRUE(fstatat(dfd, "x/y/z", &st, 0) == 0 && S_ISDIR(st.st_mode));
        bvtest_rm_rf(dir);
}

TEST(pread_short_at_eof)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(bv_write_file_durable(dfd, "f", "0123456789", 10, false));
        _cleanup_close_ int fd = openat(dfd, "f", O_RDONLY | O_CLOEXEC);
        char buf[16];
        ASSERT_EQ(bv_pread_all(fd, buf, 16, 4), 6);
        ASSERT_MEMEQ(buf, "456789", 6);
        uint64_t size;
        ASSERT_OK(bv_fd_size(fd, &size));
        ASSERT_EQ(size, 10);
        bvtest_rm_rf(dir);
}

TEST(opendir_at)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        unsigned seen = 0;
        DIR *d = NULL;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_write_file_durable(dfd, "f", "x", 1, false));
        ASSERT_OK(bv_mkdir_p(dfd, "sub"));
        ASSERT_OK(bv_opendir_at(dfd, ".", &d));
        while ((de = readdir(d)))
                seen += strcmp(de->d_name, "f") == 0 || strcmp(de->d_name, "sub") == 0;
        ASSERT_EQ(seen, 2);
        /* the DIR has an fd of its own: closing it leaves dfd open */
        closedir(d);
        ASSERT_TRUE(fcntl(dfd, F_GETFD) >= 0);

        d = NULL;
        ASSERT_ERROR(bv_opendir_at(dfd, "missing", &d), ENOENT);
        ASSERT_ERROR(bv_opendir_at(dfd, "f", &d), ENOTDIR);
        ASSERT_TRUE(d == NULL);
        bvtest_rm_rf(dir);
}

/* Repository paths resolve beneath their directory and never through a symbolic link, with
 * openat2 and with the component walk used where the kernel has no openat2. */
static void check_beneath(int (*open_fn)(int, const char *, int, mode_t), int dfd)
{
        int fd;

        fd = open_fn(dfd, "sub/f", O_RDONLY, 0);
        ASSERT_TRUE(fd >= 0);
        safe_close(fd);
        fd = open_fn(dfd, "sub", O_RDONLY | O_DIRECTORY, 0);
        ASSERT_TRUE(fd >= 0);
        safe_close(fd);
        fd = open_fn(dfd, "sub/new", O_RDWR | O_CREAT | O_EXCL, 0600);
        ASSERT_TRUE(fd >= 0);
        safe_close(fd);
        ASSERT_ERROR(open_fn(dfd, "link/f", O_RDONLY, 0), ELOOP);    /* a directory link on the way */
        ASSERT_ERROR(open_fn(dfd, "sub/flink", O_RDONLY, 0), ELOOP); /* the entry itself */
        ASSERT_ERROR(open_fn(dfd, "../f", O_RDONLY, 0), EXDEV);
        ASSERT_ERROR(open_fn(dfd, "sub/../../f", O_RDONLY, 0), EXDEV);
        ASSERT_ERROR(open_fn(dfd, "/etc/passwd", O_RDONLY, 0), EXDEV);
        ASSERT_ERROR(open_fn(dfd, "sub/f/x", O_RDONLY, 0), ENOTDIR);
        ASSERT_ERROR(open_fn(dfd, "missing/f", O_RDONLY, 0), ENOENT);
        /* O_CREAT through a symbolic link creates nothing outside */
        ASSERT_TRUE(open_fn(dfd, "link/created", O_RDWR | O_CREAT, 0600) < 0);
        ASSERT_TRUE(open_fn(dfd, "dangling", O_RDWR | O_CREAT, 0600) < 0);
}

TEST(open_beneath)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *out = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int ofd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        void *data = NULL;
        size_t len = 0;
        mode_t mode = 0;
        DIR *d;
        int fd;

        ASSERT_TRUE(dfd >= 0 && ofd >= 0);
        ASSERT_OK(mkdirat(dfd, "sub", 0700));
        ASSERT_OK(bv_write_file_durable(dfd, "sub/f", "x", 1, false));
        ASSERT_OK(bv_write_file_durable(ofd, "f", "outside", 7, false));
        ASSERT_OK(symlinkat(out, dfd, "link"));
        ASSERT_OK(symlinkat("f", dfd, "sub/flink"));
        ASSERT_OK(symlinkat("nowhere", dfd, "dangling"));
        ASSERT_OK(mkfifoat(dfd, "fifo", 0600));

        check_beneath(bv_open_beneath, dfd);
        ASSERT_OK(unlinkat(dfd, "sub/new", 0));
        check_beneath(bv_open_beneath_walk, dfd);
        ASSERT_TRUE(faccessat(ofd, "created", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
        ASSERT_TRUE(faccessat(dfd, "nowhere", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);

        /* directories and regular files: the type is checked, a FIFO does not hang */
        fd = bv_open_dir_beneath(dfd, "sub");
        ASSERT_TRUE(fd >= 0);
        safe_close(fd);
        ASSERT_ERROR(bv_open_dir_beneath(dfd, "link"), ELOOP);
        ASSERT_ERROR(bv_opendir_beneath(dfd, "link", &d), ELOOP);
        ASSERT_ERROR(bv_open_file_beneath(dfd, "fifo", O_RDONLY), EBADFD);
        ASSERT_ERROR(bv_open_file_beneath(dfd, "sub", O_RDONLY), EBADFD);
        ASSERT_ERROR(bv_read_file_beneath(dfd, "fifo", 100, &data, &len), EBADFD);
        ASSERT_ERROR(bv_read_file_beneath(dfd, "link/f", 100, &data, &len), ELOOP);
        ASSERT_ERROR(bv_read_file(dfd, "fifo", 100, &data, &len), EBADFD); /* user paths: no hang either */
        fd = bv_open_file_beneath(dfd, "sub/f", O_RDONLY);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
        safe_close(fd);
        ASSERT_OK(bv_read_file_beneath(dfd, "sub/f", 100, &data, &len));
        ASSERT_EQ(len, 1);
        free(data);

        /* naming the culprit for a message */
        ASSERT_EQ(bv_beneath_culprit(dfd, "link/f", false, &mode), 4);
        ASSERT_EQ(mode, S_IFLNK);
        ASSERT_EQ(bv_beneath_culprit(dfd, "sub/flink", false, &mode), 9);
        ASSERT_EQ(mode, S_IFLNK);
        ASSERT_EQ(bv_beneath_culprit(dfd, "fifo", false, &mode), 4);
        ASSERT_EQ(mode, S_IFIFO);
        ASSERT_EQ(bv_beneath_culprit(dfd, "sub/f", true, &mode), 5);
        ASSERT_EQ(mode, S_IFREG);
        ASSERT_EQ(bv_beneath_culprit(dfd, "sub/f", false, &mode), 0);
        ASSERT_ERROR(bv_beneath_culprit(dfd, "sub/missing", false, &mode), ENOENT);
        ASSERT_TRUE(strcmp(bv_file_type_name(S_IFIFO), "a FIFO") == 0);
        bvtest_rm_rf(dir);
        bvtest_rm_rf(out);
}

TEST(read_secret_file)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        size_t len = 0, size = 0;
        char *data = NULL;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_write_file_durable(dfd, "pass", "secret\n", 7, false));
        ASSERT_OK(bv_read_secret_file(dfd, "pass", 7, 0, true, (void **)&data, &len, &size));
        ASSERT_EQ(len, 6);
        ASSERT_STREQ(data, "secret");
        ASSERT_EQ(size, 8);
        bv_secure_free(data, size);

        /* kept as it is without strip_newline; min_size sets the least allocation */
        ASSERT_OK(bv_read_secret_file(dfd, "pass", 100, 4000, false, (void **)&data, &len, &size));
        ASSERT_EQ(len, 7);
        ASSERT_MEMEQ(data, "secret\n", 8);
        ASSERT_EQ(size, 4000);
        bv_secure_free(data, size);

        /* an empty file is an empty string */
        ASSERT_OK(bv_write_file_durable(dfd, "empty", "", 0, false));
        ASSERT_OK(bv_read_secret_file(dfd, "empty", 7, 0, true, (void **)&data, &len, &size));
        ASSERT_EQ(len, 0);
        ASSERT_STREQ(data, "");
        bv_secure_free(data, size);

        /* the limit applies to the file, newline included; outputs untouched on failure */
        data = NULL;
        len = size = 99;
        ASSERT_ERROR(bv_read_secret_file(dfd, "pass", 6, 0, true, (void **)&data, &len, &size), EFBIG);
        ASSERT_ERROR(bv_read_secret_file(dfd, "missing", 100, 0, true, (void **)&data, &len, &size), ENOENT);
        ASSERT_OK(bv_mkdir_p(dfd, "sub"));
        ASSERT_ERROR(bv_read_secret_file(dfd, "sub", 100, 0, true, (void **)&data, &len, &size), EBADFD);
        /* a file that grows after fstat: /proc files say size 0 and then have content */
        ASSERT_ERROR(bv_read_secret_file(AT_FDCWD, "/proc/self/status", 100, 0, false, (void **)&data, &len,
                                         &size),
                     EFBIG);
        ASSERT_TRUE(data == NULL);
        ASSERT_EQ(len, 99);
        ASSERT_EQ(size, 99);
        bvtest_rm_rf(dir);
}

/* a pipe's whole content, as plugin_args hands the passphrase to the nbdkit plugin */
static void pipe_with(const char *text, int ret_fds[2])
{
        ASSERT_OK(pipe2(ret_fds, O_CLOEXEC));
        ASSERT_OK(bv_write_all(ret_fds[1], text, strlen(text)));
        safe_close(ret_fds[1]);
}

TEST(read_secret_fd)
{
        size_t len = 0, size = 0;
        char *data = NULL;
        int fds[2];

        pipe_with("secret\n", fds);
        ASSERT_OK(bv_read_secret_fd(fds[0], 7, true, (void **)&data, &len, &size));
        safe_close(fds[0]);
        ASSERT_EQ(len, 6);
        ASSERT_STREQ(data, "secret");
        ASSERT_EQ(size, 8);
        bv_secure_free(data, size);

        pipe_with("", fds);
        ASSERT_OK(bv_read_secret_fd(fds[0], 7, false, (void **)&data, &len, &size));
        safe_close(fds[0]);
        ASSERT_EQ(len, 0);
        ASSERT_STREQ(data, "");
        bv_secure_free(data, size);

        /* more than max bytes: refused, outputs untouched */
        data = NULL;
        len = size = 99;
        pipe_with("secret\n", fds);
        ASSERT_ERROR(bv_read_secret_fd(fds[0], 6, true, (void **)&data, &len, &size), EFBIG);
        safe_close(fds[0]);
        ASSERT_ERROR(bv_read_secret_fd(-1, 6, true, (void **)&data, &len, &size), EBADF);
        ASSERT_TRUE(data == NULL);
        ASSERT_EQ(len, 99);
        ASSERT_EQ(size, 99);
}

TEST(secure_memory)
{
        uint8_t *p = bv_secure_alloc(32);
        ASSERT_TRUE(p != NULL);
        memset(p, 0xaa, 32);
        bv_secure_free(p, 32);
        bv_secure_free(NULL, 32);
}

int main(void)
{
        RUN(durable_write_and_read);
        RUN(pread_short_at_eof);
        RUN(opendir_at);
        RUN(open_beneath);
        RUN(read_secret_file);
        RUN(read_secret_fd);
        RUN(secure_memory);
        return 0;
}
