/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thin_delta's XML into changed ranges. The fixtures in tests/unit/thin/ were made on the host,
 * without device-mapper: thin_restore -i meta.xml -o meta.bin, then thin_delta --snap1 1 --snap2 2
 * (delta.xml) and the same with --verbose (delta-verbose.xml). When thin_restore and thin_delta
 * are installed, the test makes them again from meta.xml and parses what they print now.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "thin-delta.h"

#define BLOCK (128u * 512)

/* meta.xml: device 1 maps blocks 0-15 and 32-35; device 2 shares 0-3 and 6-15, remaps 4-5,
 * no longer maps 32-35 and newly maps 40-42. */
static const BvByteRange expected[] = { { 4 * BLOCK, 2 * BLOCK }, { 32 * BLOCK, 4 * BLOCK }, { 40 * BLOCK, 3 * BLOCK } };

static void check_delta(const char *text)
{
        BvThinDelta d = {};

        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        ASSERT_EQ(d.block_bytes, BLOCK);
        ASSERT_EQ(d.left, 1);
        ASSERT_EQ(d.right, 2);
        ASSERT_EQ(d.data_blocks, 1024);
        ASSERT_EQ(d.blocks, 43); /* device 2's last block is 42 */
        ASSERT_EQ(d.n_changed, ELEMENTSOF(expected));
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                ASSERT_EQ(d.changed[i].offset, expected[i].offset);
                ASSERT_EQ(d.changed[i].length, expected[i].length);
        }
        bv_thin_delta_done(&d);
}

/* The file at path, NUL-terminated. */
static char *read_text(const char *path)
{
        void *data = NULL;
        size_t len;

        ASSERT_OK(bv_read_file(AT_FDCWD, path, 1 << 20, &data, &len));
        char *text = realloc(data, len + 1);
        ASSERT_TRUE(text != NULL);
        text[len] = 0;
        return text;
}

/* The file at SOURCE_ROOT/tests/unit/thin/name; NULL without SOURCE_ROOT. */
static char *fixture(const char *name)
{
        const char *root = getenv("SOURCE_ROOT");
        char path[4096];

        if (!root)
                return NULL;
        snprintf(path, sizeof(path), "%s/tests/unit/thin/%s", root, name);
        return read_text(path);
}

TEST(fixtures)
{
        _cleanup_free_ char *plain = fixture("delta.xml"), *verbose = fixture("delta-verbose.xml");

        if (!plain) {
                printf("skip - fixtures: SOURCE_ROOT unset\n");
                return;
        }
        check_delta(plain);
        check_delta(verbose);
}

/* thin_restore and thin_delta, run now on meta.xml: what they print parses to the same ranges. */
TEST(made_now)
{
        const char *root = getenv("SOURCE_ROOT");
        _cleanup_free_ char *dir = bvtest_tmpdir();
        char cmd[8192], path[4096];

        if (!root || system("command -v thin_restore >/dev/null && command -v thin_delta >/dev/null") != 0) {
                printf("skip - made_now: thin-provisioning-tools are not installed\n");
                return;
        }
        for (int verbose = 0; verbose <= 1; verbose++) {
                snprintf(path, sizeof(path), "%s/delta%d.xml", dir, verbose);
                snprintf(cmd, sizeof(cmd),
                         "truncate -s 8M '%s/meta.bin' && thin_restore -q -i '%s/tests/unit/thin/meta.xml' "
                         "-o '%s/meta.bin' && thin_delta %s --snap1 1 --snap2 2 '%s/meta.bin' >'%s'",
                         dir, root, dir, verbose ? "--verbose" : "", dir, path);
                ASSERT_EQ(system(cmd), 0);
                _cleanup_free_ char *text = read_text(path);
                check_delta(text);
        }
        bvtest_rm_rf(dir);
}

TEST(refused)
{
        static const char *const bad[] = {
                "",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"></superblock>",                       /* no diff */
                "<superblock nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\"></diff></superblock>",          /* no block size */
                "<superblock data_block_size=\"0\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\"/></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<different begin=\"4\" length=\"2\"/><same begin=\"0\" length=\"4\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<different begin=\"4\" length=\"0\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<moved begin=\"4\" length=\"2\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<range begin=\"4\" length=\"2\"/></diff></superblock>",                   /* range outside a group */
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<different><range begin=\"4\" length=\"2\"/></diff></superblock>",        /* group not closed */
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<different begin=\"18446744073709551615\" length=\"2\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                "<different begin=\"-4\" length=\"2\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">text</diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\"></diff>",  /* truncated */
                "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\"/></superblock><superblock>",
                /* the pool's size: absent, or less than the ranges use */
                "<superblock data_block_size=\"128\"><diff left=\"1\" right=\"2\">"
                "<different begin=\"4\" length=\"2\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"x\"><diff left=\"1\" right=\"2\"/></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"150\"><diff left=\"1\" right=\"2\">"
                "<right_only><range begin=\"40\" data_begin=\"149\" length=\"2\"/></right_only></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"150\"><diff left=\"1\" right=\"2\">"
                "<different><range begin=\"4\" left_data_begin=\"4\" right_data_begin=\"200\" length=\"2\"/>"
                "</different></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"150\"><diff left=\"1\" right=\"2\">"
                "<same><range begin=\"0\" data_begin=\"18446744073709551615\" length=\"2\"/></same></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"10\"><diff left=\"1\" right=\"2\">"
                "<same begin=\"0\" length=\"8\"/><right_only begin=\"8\" length=\"3\"/></diff></superblock>",
                "<superblock data_block_size=\"128\" nr_data_blocks=\"10\"><diff left=\"1\" right=\"2\">"
                "<same begin=\"0\" length=\"8\"/><left_only begin=\"8\" length=\"3\"/></diff></superblock>",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                BvThinDelta d = { .left = 77 };
                ASSERT_ERROR(bv_thin_delta_parse(bad[i], strlen(bad[i]), &d), EBADMSG);
                ASSERT_EQ(d.left, 77); /* untouched */
        }
}

TEST(nothing_changed)
{
        const char *text = "<?xml version=\"1.0\"?><!-- made by hand -->\n"
                           "<superblock uuid=\"\" time=\"1\" transaction=\"2\" data_block_size=\"256\" "
                           "nr_data_blocks=\"1024\">\n  <diff left=\"3\" right=\"4\">\n"
                           "    <same begin=\"0\" length=\"16\"/>\n  </diff>\n</superblock>\n";
        BvThinDelta d = {};

        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        ASSERT_EQ(d.block_bytes, 256 * 512);
        ASSERT_EQ(d.n_changed, 0);
        ASSERT_EQ(d.left, 3);
        bv_thin_delta_done(&d);
}

/* Each device maps at most the pool's blocks: exactly that many is fine. */
TEST(pool_full)
{
        const char *text = "<superblock data_block_size=\"128\" nr_data_blocks=\"10\"><diff left=\"1\" right=\"2\">"
                           "<same begin=\"0\" length=\"8\"/><left_only begin=\"8\" length=\"2\"/>"
                           "<right_only begin=\"10\" length=\"2\"/></diff></superblock>";
        BvThinDelta d = {};

        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        ASSERT_EQ(d.data_blocks, 10);
        ASSERT_EQ(d.blocks, 12);
        bv_thin_delta_done(&d);
}

/* thin_delta --metadata-snap prints nr_data_blocks="0" (the kernel wipes the space map roots in
 * the metadata snapshot): the pool's size is unknown, nothing to check against. */
TEST(pool_unknown)
{
        const char *text = "<superblock uuid=\"\" time=\"1\" transaction=\"2\" data_block_size=\"128\" nr_data_blocks=\"0\" "
                           "metadata_snap=\"1234\"><diff left=\"1\" right=\"2\">"
                           "<same><range begin=\"0\" data_begin=\"0\" length=\"8\"/></same>"
                           "<right_only><range begin=\"8\" data_begin=\"200\" length=\"3\"/></right_only></diff></superblock>";
        BvThinDelta d = {};

        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        ASSERT_EQ(d.data_blocks, 0);
        ASSERT_EQ(d.blocks, 11);
        ASSERT_EQ(d.n_changed, 1);
        bv_thin_delta_done(&d);
}

/* The bytes a source delivers as DATA, and checks that the rest is UNCHANGED. */
static uint64_t data_bytes(BvSource *s)
{
        BvExtent e;
        uint64_t data = 0, pos = 0;
        int r;

        while ((r = bv_source_next(s, &e)) > 0) {
                ASSERT_EQ(e.offset, pos);
                ASSERT_TRUE(e.kind == BV_EXTENT_DATA || e.kind == BV_EXTENT_UNCHANGED);
                if (e.kind == BV_EXTENT_DATA)
                        data += e.length;
                pos += e.length;
        }
        ASSERT_OK(r);
        ASSERT_EQ(pos, bv_source_size(s));
        return data;
}

/* A file of size bytes in dir, its path in *ret. */
static void make_device(const char *dir, uint64_t size, char **ret)
{
        free(*ret);
        ASSERT_TRUE(asprintf(ret, "%s/dev", dir) > 0);
        int fd = open(*ret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0 && ftruncate(fd, (off_t)size) == 0);
        close(fd);
}

/* A job's thin source: a parsed delta of the device read, or none (everything is read); the map
 * names carry the LV uuids. */
TEST(open_thin)
{
        _cleanup_free_ char *text = fixture("delta.xml"), *dir = bvtest_tmpdir(), *path = NULL;
        BvThinDelta d = {};
        BvSource *s = NULL;

        if (!text)
                return;
        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        make_device(dir, 48 * BLOCK, &path);
        ASSERT_EQ(bv_source_open_thin(path, 3, "U3", &d, "U1", NULL, &s), -EINVAL); /* not the delta's device */
        ASSERT_OK(bv_source_open_thin(path, 2, "U2", &d, "U1", NULL, &s));
        ASSERT_STREQ(bv_source_changed_map(s), "lvm-thin:2:U2");
        ASSERT_STREQ(bv_source_parent_map(s), "lvm-thin:1:U1");
        ASSERT_EQ(data_bytes(s), 9 * BLOCK);
        bv_source_free(s);
        /* read everything after all: asked before the first extent, refused once reading */
        ASSERT_OK(bv_source_open_thin(path, 2, "U2", &d, "U1", NULL, &s));
        ASSERT_OK(bv_source_read_all(s));
        ASSERT_EQ(data_bytes(s), 48 * BLOCK);
        ASSERT_EQ(bv_source_read_all(s), -EBUSY);
        bv_source_free(s);
        /* a plain file knows no unchanged ranges: there is nothing to read whole instead */
        ASSERT_OK(bv_source_open(path, NULL, &s));
        ASSERT_EQ(bv_source_read_all(s), -EOPNOTSUPP);
        bv_source_free(s);
        ASSERT_OK(bv_source_open_thin(path, 7, "U7", NULL, NULL, NULL, &s));
        ASSERT_STREQ(bv_source_changed_map(s), "lvm-thin:7:U7");
        ASSERT_STREQ(bv_source_parent_map(s), "lvm-thin:7:U7");
        ASSERT_EQ(data_bytes(s), 48 * BLOCK);
        bv_source_free(s);
        ASSERT_OK(bv_source_open_thin(path, 7, NULL, NULL, NULL, NULL, &s));
        ASSERT_STREQ(bv_source_changed_map(s), "lvm-thin:7");
        bv_source_free(s);
        bv_thin_delta_done(&d);
        bvtest_rm_rf(dir);
}

/* A delta that maps blocks past the device's end is of another device: refused, not clipped
 * into a stale snapshot. Blocks only the old device mapped may lie past it (a thin LV shrinks). */
TEST(does_not_fit)
{
        _cleanup_free_ char *text = fixture("delta.xml"), *dir = bvtest_tmpdir(), *path = NULL;
        const char *shrunk = "<superblock data_block_size=\"128\" nr_data_blocks=\"1024\"><diff left=\"1\" right=\"2\">"
                             "<same begin=\"0\" length=\"4\"/><different begin=\"4\" length=\"1\"/>"
                             "<left_only begin=\"5\" length=\"20\"/></diff></superblock>";
        BvThinDelta d = {};
        BvSource *s = NULL;

        if (!text)
                return;
        ASSERT_OK(bv_thin_delta_parse(text, strlen(text), &d));
        make_device(dir, 42 * BLOCK, &path); /* the delta maps block 42 */
        ASSERT_EQ(bv_source_open_thin(path, 2, NULL, &d, NULL, NULL, &s), -ERANGE);
        make_device(dir, 42 * BLOCK + 100, &path); /* not whole sectors */
        ASSERT_EQ(bv_source_open_thin(path, 2, NULL, &d, NULL, NULL, &s), -ERANGE);
        ASSERT_TRUE(s == NULL);
        make_device(dir, 42 * BLOCK + 512, &path); /* block 42 holds its last sector */
        ASSERT_OK(bv_source_open_thin(path, 2, NULL, &d, NULL, NULL, &s));
        ASSERT_EQ(data_bytes(s), 8 * BLOCK + 512);
        bv_source_free(s);
        bv_thin_delta_done(&d);

        ASSERT_OK(bv_thin_delta_parse(shrunk, strlen(shrunk), &d));
        make_device(dir, 8 * BLOCK, &path);
        ASSERT_OK(bv_source_open_thin(path, 2, NULL, &d, NULL, NULL, &s));
        ASSERT_EQ(data_bytes(s), 4 * BLOCK); /* block 4, and 5-7 that only the old device mapped */
        bv_source_free(s);
        bv_thin_delta_done(&d);
        bvtest_rm_rf(dir);
}

int main(void)
{
        RUN(fixtures);
        RUN(made_now);
        RUN(refused);
        RUN(nothing_changed);
        RUN(pool_full);
        RUN(pool_unknown);
        RUN(open_thin);
        RUN(does_not_fit);
        return 0;
}
