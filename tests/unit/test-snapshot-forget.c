/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bvtest.h"
#include "fileio.h"
#include "snapshot-forget.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID "00112233445566778899aabbccddeeff"

static bool present(int dirfd, const char *name)
{
        struct stat st;
        return fstatat(dirfd, name, &st, 0) == 0;
}

TEST(protect_and_forget)
{
        char *dir = bvtest_tmpdir(), *snaps;
        BvBackend *b;
        ASSERT_OK(bv_backend_open(dir, false, &b));
        ASSERT_TRUE(asprintf(&snaps, "%s/snapshots", dir) > 0);
        ASSERT_TRUE(mkdir(snaps, 0700) == 0);
        int dfd = open(snaps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);
        free(snaps);

        ASSERT_ERROR(bv_snapshot_protect(b, ID, true), ENOENT);
        ASSERT_ERROR(bv_snapshot_forget(b, ID, false), ENOENT);
        ASSERT_ERROR(bv_snapshot_forget(b, "0011", false), EINVAL);
        ASSERT_ERROR(bv_snapshot_is_protected(b, "../x"), EINVAL);
        ASSERT_OK(bv_write_file_durable(dfd, ID ".snap", "x", 1, false));

        ASSERT_EQ(bv_snapshot_is_protected(b, ID), 0);
        ASSERT_OK(bv_snapshot_protect(b, ID, true));
        ASSERT_OK(bv_snapshot_protect(b, ID, true)); /* idempotent */
        ASSERT_EQ(bv_snapshot_is_protected(b, ID), 1);
        ASSERT_ERROR(bv_snapshot_forget(b, ID, false), EPERM);
        ASSERT_TRUE(present(dfd, ID ".snap"));

        ASSERT_OK(bv_snapshot_protect(b, ID, false));
        ASSERT_EQ(bv_snapshot_is_protected(b, ID), 0);
        ASSERT_OK(bv_snapshot_protect(b, ID, true));
        ASSERT_OK(bv_snapshot_forget(b, ID, true));
        ASSERT_TRUE(!present(dfd, ID ".snap"));
        ASSERT_TRUE(!present(dfd, ID ".protect"));
        ASSERT_ERROR(bv_snapshot_forget(b, ID, true), ENOENT);

        close(dfd);
        bv_backend_close(b);
        bvtest_rm_rf(dir);
        free(dir);
}

int main(void)
{
        RUN(protect_and_forget);
        return 0;
}
