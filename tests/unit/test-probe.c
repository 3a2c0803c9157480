/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <json-c/json.h>
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

static const char *get_str(struct json_object *o, const char *key)
{
        struct json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return NULL;
        return json_object_get_string(v);
}

static int64_t get_int(struct json_object *o, const char *key)
{
        struct json_object *v;
        ASSERT_TRUE(json_object_object_get_ex(o, key, &v));
        return json_object_get_int64(v);
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
        struct json_object *o = NULL, *parts, *p;

        sh("printf 'label: gpt\\n,20MiB,L\\n,,L\\n' | sfdisk -q '%s'", img);
        sh("mkfs.ext4 -F -q -L bvtest -E offset=1048576 '%s' 20M", img);

        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(get_str(o, "pttype"), "gpt");
        ASSERT_TRUE(get_str(o, "ptuuid") != NULL);
        ASSERT_TRUE(get_str(o, "fstype") == NULL);
        ASSERT_TRUE(json_object_object_get_ex(o, "partitions", &parts));
        ASSERT_EQ(json_object_array_length(parts), 2);

        p = json_object_array_get_idx(parts, 0);
        ASSERT_EQ(get_int(p, "number"), 1);
        ASSERT_EQ(get_int(p, "start"), 1 * MIB);
        ASSERT_EQ(get_int(p, "size"), 20 * MIB);
        ASSERT_STREQ(get_str(p, "type"), "0fc63daf-8483-4772-8e79-3d69d8477de4");
        ASSERT_TRUE(get_str(p, "uuid") != NULL);
        ASSERT_STREQ(get_str(p, "fstype"), "ext4");
        ASSERT_STREQ(get_str(p, "label"), "bvtest");
        ASSERT_EQ(strlen(get_str(p, "fsuuid")), 36);

        p = json_object_array_get_idx(parts, 1);
        ASSERT_EQ(get_int(p, "number"), 2);
        ASSERT_EQ(get_int(p, "start"), 21 * MIB);
        ASSERT_TRUE(get_str(p, "fstype") == NULL); /* nothing inside */
        ASSERT_TRUE(strcmp(get_str(p, "uuid"), get_str(json_object_array_get_idx(parts, 0), "uuid")) != 0);
        json_object_put(o);
        bvtest_rm_rf(dir);
}

TEST(mbr_partition)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "mbr.img", 32 * MIB);
        struct json_object *o = NULL, *parts, *p;

        sh("printf 'label: dos\\n,,83\\n' | sfdisk -q '%s'", img);
        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(get_str(o, "pttype"), "dos");
        ASSERT_TRUE(json_object_object_get_ex(o, "partitions", &parts));
        ASSERT_EQ(json_object_array_length(parts), 1);
        p = json_object_array_get_idx(parts, 0);
        ASSERT_STREQ(get_str(p, "type"), "0x83");
        ASSERT_EQ(get_int(p, "start"), 1 * MIB);
        json_object_put(o);
        bvtest_rm_rf(dir);
}

TEST(whole_disk_filesystem)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "fs.img", 16 * MIB);
        struct json_object *o = NULL;

        sh("mkfs.ext4 -F -q -L whole '%s'", img);
        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_STREQ(get_str(o, "fstype"), "ext4");
        ASSERT_STREQ(get_str(o, "label"), "whole");
        ASSERT_EQ(strlen(get_str(o, "uuid")), 36);
        ASSERT_TRUE(get_str(o, "pttype") == NULL);
        ASSERT_TRUE(!json_object_object_get_ex(o, "partitions", NULL));
        json_object_put(o);
        bvtest_rm_rf(dir);
}

TEST(unrecognised_content)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = make_image(dir, "random.img", 4 * MIB);
        _cleanup_free_ char *empty = make_image(dir, "empty.img", 0);
        _cleanup_free_ uint8_t *buf = malloc(4 * MIB);
        struct json_object *o = NULL;

        ASSERT_TRUE(buf != NULL);
        bvtest_fill_random(buf, 4 * MIB, 42);
        _cleanup_close_ int fd = open(img, O_WRONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_pwrite_all(fd, buf, 4 * MIB, 0));

        ASSERT_OK(bv_source_probe(img, &o));
        ASSERT_EQ(json_object_object_length(o), 0);
        json_object_put(o);

        o = NULL;
        ASSERT_OK(bv_source_probe(empty, &o));
        ASSERT_EQ(json_object_object_length(o), 0);
        json_object_put(o);
        bvtest_rm_rf(dir);
}

TEST(probe_errors)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *missing = NULL;
        struct json_object *o = NULL;

        ASSERT_TRUE(asprintf(&missing, "%s/missing", dir) >= 0);
        ASSERT_ERROR(bv_source_probe(missing, &o), ENOENT);
        ASSERT_ERROR(bv_source_probe(dir, &o), EISDIR);
        ASSERT_ERROR(bv_source_probe("/dev/null", &o), ENODEV);
        ASSERT_TRUE(o == NULL);
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
