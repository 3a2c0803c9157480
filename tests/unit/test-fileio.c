/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <sys/stat.h>

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
        RUN(secure_memory);
        return 0;
}
