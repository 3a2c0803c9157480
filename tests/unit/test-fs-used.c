/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The used-block map's pieces that need no filesystem: free runs (shrunk to whole 4 KiB blocks,
 * short ones dropped) and partclone's ddrescue domain maps, well-formed and not.
 */
#include <string.h>

#include "bvtest.h"
#include "used.h"

TEST(add_free)
{
        BvFsUsedMap m = {};

        ASSERT_OK(bv_fs_used_add_free(&m, 100, 64 * 1024)); /* shrunk to [4096, 61440): too short */
        ASSERT_EQ(m.n_skip, 0);
        ASSERT_OK(bv_fs_used_add_free(&m, 1000, 200 * 1024));
        ASSERT_EQ(m.n_skip, 1);
        ASSERT_EQ(m.skip[0].offset, 4096);
        ASSERT_EQ(m.skip[0].length, ((1000 + 200 * 1024) & ~4095ull) - 4096);
        ASSERT_EQ(m.bytes_free, m.skip[0].length);
        bv_fs_used_map_done(&m);
}

static const char domain[] = "# Domain logfile created by unset_name v0.3.23\n"
                             "# Source: /dev/loop3\n"
                             "# Offset: 0x00000000\n"
                             "# current_pos  current_status\n"
                             "0x01000000     ?\n"
                             "#      pos        size  status\n"
                             "0x00000000  0x00006000  +\n"
                             "0x00006000  0x0000A000  ?\n"
                             "0x00010000  0x00100000  ?\n"
                             "0x00110000  0x00EF0000  +\n";

TEST(parse)
{
        BvFsUsedMap m = {};
        uint64_t covered = 0;

        ASSERT_OK(bv_fs_domain_parse(domain, strlen(domain), 1 << 20, 16 << 20, &m, &covered));
        ASSERT_EQ(covered, 16 << 20);
        /* 0x6000-0x10000 is 40 KiB: too short; the MiB after it is free, at the partition's offset */
        ASSERT_EQ(m.n_skip, 1);
        ASSERT_EQ(m.skip[0].offset, (1 << 20) + 0x10000);
        ASSERT_EQ(m.skip[0].length, 0x100000);
        bv_fs_used_map_done(&m);
}

static void refused_one(const char *text, uint64_t limit)
{
        BvFsUsedMap m = {};
        uint64_t covered = 7;

        ASSERT_ERROR(bv_fs_domain_parse(text, strlen(text), 0, limit, &m, &covered), EBADMSG);
        ASSERT_EQ(covered, 7); /* untouched */
        bv_fs_used_map_done(&m);
}

TEST(refused)
{
        refused_one("0x1000 ?\n0x0 0x1000 +\n0x2000 0x1000 ?\n", 1 << 20);     /* a gap */
        refused_one("0x1000 ?\n0x0 0x2000 +\n0x1000 0x1000 ?\n", 1 << 20);     /* an overlap */
        refused_one("0x1000 ?\n0x0 0x200000 ?\n", 1 << 20);                    /* past the partition */
        refused_one("0x1000 ?\n0x0 0x1000 -\n", 1 << 20);                      /* a status it does not give */
        refused_one("nonsense\n", 1 << 20);
        refused_one("0x1000 ?\n0x0 0x1000\n", 1 << 20);                        /* a field missing */
        char long_line[300];
        memset(long_line, '0', sizeof(long_line) - 1);
        long_line[sizeof(long_line) - 1] = '\0';
        refused_one(long_line, 1 << 20);
}

int main(void)
{
        RUN(add_free);
        RUN(parse);
        RUN(refused);
        return 0;
}
