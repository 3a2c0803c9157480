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

/* An image of SIZE bytes that a shell command made ($IMG is its path), and what probing it found. */
typedef struct {
        char *dir, *img;
        BvProbe o;
} ProbedImage;

static ProbedImage probe_made(uint64_t size, const char *setup)
{
        ProbedImage t = { .dir = bvtest_tmpdir() };

        t.img = make_image(t.dir, "disk.img", size);
        sh("IMG='%s'; %s", t.img, setup);
        ASSERT_OK(bv_source_probe(t.img, &t.o));
        return t;
}

static void probed_done(ProbedImage *t)
{
        bv_probe_done(&t->o);
        bvtest_rm_rf(t->dir);
        free(t->img);
        free(t->dir);
}

TEST(gpt_two_partitions)
{
        ProbedImage t = probe_made(64 * MIB, "printf 'label: gpt\\n,20MiB,L\\n,,L\\n' | sfdisk -q \"$IMG\" && "
                                             "mkfs.ext4 -F -q -L bvtest -E offset=1048576 \"$IMG\" 20M");
        const BvProbePartition *p;

        ASSERT_STREQ(t.o.pttype, "gpt");
        ASSERT_TRUE(t.o.ptuuid != NULL);
        ASSERT_TRUE(t.o.fstype == NULL);
        ASSERT_EQ(t.o.n_partitions, 2);

        p = &t.o.partitions[0];
        ASSERT_EQ(p->number, 1);
        ASSERT_EQ(p->start, 1 * MIB);
        ASSERT_EQ(p->size, 20 * MIB);
        ASSERT_STREQ(p->type, "0fc63daf-8483-4772-8e79-3d69d8477de4");
        ASSERT_TRUE(p->uuid != NULL);
        ASSERT_STREQ(p->fstype, "ext4");
        ASSERT_STREQ(p->label, "bvtest");
        ASSERT_EQ(strlen(p->fsuuid), 36);

        p = &t.o.partitions[1];
        ASSERT_EQ(p->number, 2);
        ASSERT_EQ(p->start, 21 * MIB);
        ASSERT_TRUE(p->fstype == NULL); /* nothing inside */
        ASSERT_TRUE(strcmp(p->uuid, t.o.partitions[0].uuid) != 0);
        probed_done(&t);
}

TEST(mbr_partition)
{
        ProbedImage t = probe_made(32 * MIB, "printf 'label: dos\\n,,83\\n' | sfdisk -q \"$IMG\"");

        ASSERT_STREQ(t.o.pttype, "dos");
        ASSERT_EQ(t.o.n_partitions, 1);
        ASSERT_STREQ(t.o.partitions[0].type, "0x83");
        ASSERT_EQ(t.o.partitions[0].start, 1 * MIB);
        probed_done(&t);
}

TEST(whole_disk_filesystem)
{
        ProbedImage t = probe_made(16 * MIB, "mkfs.ext4 -F -q -L whole \"$IMG\"");

        ASSERT_STREQ(t.o.fstype, "ext4");
        ASSERT_STREQ(t.o.label, "whole");
        ASSERT_EQ(strlen(t.o.uuid), 36);
        ASSERT_TRUE(t.o.pttype == NULL);
        ASSERT_EQ(t.o.n_partitions, 0);
        probed_done(&t);
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
