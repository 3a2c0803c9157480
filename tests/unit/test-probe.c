/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>

#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "source.h"

#define MIB (1024u * 1024u)

_printf_(1, 2) static void sh(const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *cmd = NULL;
        va_start(ap, fmt);
        ASSERT_TRUE(vasprintf(&cmd, fmt, ap) >= 0);
        va_end(ap);
        if (system(cmd) != 0) {
                fprintf(stderr, "command failed: %s\n", cmd);
                abort();
        }
}

static bool have(const char *tool)
{
        _cleanup_free_ char *cmd = NULL;
        ASSERT_TRUE(asprintf(&cmd, "command -v %s >/dev/null 2>&1", tool) >= 0);
        return system(cmd) == 0;
}

static char *make_image(const char *dir, const char *name, uint64_t size)
{
        char *p;
        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) >= 0);
        _cleanup_close_ int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(ftruncate(fd, (off_t)size) == 0);
        return p;
}

TEST(gpt_two_partitions)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "gpt.img", 64 * MIB);
        BvProbe o = {};
        const BvProbePartition *p;

        sh("printf 'label: gpt\\n,20MiB,L\\n,,L\\n' | sfdisk -q '%s'", img);
        sh("mkfs.ext4 -F -q -L bvtest -E offset=1048576 '%s' 20M", img);

        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(o.pttype, "gpt");
        ASSERT_TRUE(o.ptuuid != NULL);
        ASSERT_TRUE(o.fstype == NULL);
        ASSERT_EQ(o.n_partitions, 2);

        p = &o.partitions[0];
        ASSERT_EQ(p->number, 1);
        ASSERT_EQ(p->start, 1 * MIB);
        ASSERT_EQ(p->size, 20 * MIB);
        ASSERT_STREQ(p->type, "0fc63daf-8483-4772-8e79-3d69d8477de4");
        ASSERT_TRUE(p->uuid != NULL);
        ASSERT_STREQ(p->fstype, "ext4");
        ASSERT_STREQ(p->label, "bvtest");
        ASSERT_EQ(strlen(p->fsuuid), 36);

        p = &o.partitions[1];
        ASSERT_EQ(p->number, 2);
        ASSERT_EQ(p->start, 21 * MIB);
        ASSERT_TRUE(p->fstype == NULL); /* nothing inside */
        ASSERT_TRUE(strcmp(p->uuid, o.partitions[0].uuid) != 0);
        bv_probe_done(&o);
        bvtest_rm_rf(dir);
}

TEST(mbr_partition)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "mbr.img", 32 * MIB);
        BvProbe o = {};
        const BvProbePartition *p;

        sh("printf 'label: dos\\n,,83\\n' | sfdisk -q '%s'", img);
        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(o.pttype, "dos");
        ASSERT_EQ(o.n_partitions, 1);
        p = &o.partitions[0];
        ASSERT_STREQ(p->type, "0x83");
        ASSERT_EQ(p->start, 1 * MIB);
        bv_probe_done(&o);
        bvtest_rm_rf(dir);
}

TEST(whole_disk_filesystem)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "fs.img", 16 * MIB);
        BvProbe o = {};

        sh("mkfs.ext4 -F -q -L whole '%s'", img);
        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(o.fstype, "ext4");
        ASSERT_STREQ(o.label, "whole");
        ASSERT_EQ(strlen(o.uuid), 36);
        ASSERT_TRUE(o.pttype == NULL);
        ASSERT_EQ(o.n_partitions, 0);
        bv_probe_done(&o);
        bvtest_rm_rf(dir);
}

TEST(unrecognised_content)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "random.img", 4 * MIB);
        _cleanup_free_ char *empty = make_image(dir, "empty.img", 0);
        _cleanup_free_ uint8_t *buf = malloc(4 * MIB);
        BvProbe o = {};

        ASSERT_TRUE(buf != NULL);
        bvtest_fill_random(buf, 4 * MIB, 42);
        _cleanup_close_ int fd = open(img, O_WRONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_pwrite_all(fd, buf, 4 * MIB, 0));

        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_TRUE(!o.pttype && !o.fstype && o.n_partitions == 0);
        bv_probe_done(&o);

        o = (BvProbe){};
        ASSERT_OK(bv_source_probe(empty, &o));
        ASSERT_TRUE(!o.pttype && !o.fstype && o.n_partitions == 0);
        bv_probe_done(&o);
        bvtest_rm_rf(dir);
}

TEST(probe_errors)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *missing = NULL;
        BvProbe o = {};

        ASSERT_TRUE(asprintf(&missing, "%s/missing", dir) >= 0);
        ASSERT_ERROR(bv_source_probe(missing, &o), ENOENT);
        ASSERT_ERROR(bv_source_probe(dir, &o), EISDIR);
        ASSERT_ERROR(bv_source_probe("/dev/null", &o), ENODEV);
        ASSERT_TRUE(!o.pttype && !o.partitions);
        bvtest_rm_rf(dir);
}

int main(void)
{
        RUN(unrecognised_content);
        RUN(probe_errors);
        if (!have("sfdisk") || !have("mkfs.ext4")) {
                fprintf(stderr, "SKIP: sfdisk or mkfs.ext4 is not installed\n");
                return 77;
        }
        RUN(gpt_two_partitions);
        RUN(mbr_partition);
        RUN(whole_disk_filesystem);
        return 0;
}
