/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What is on a device or image, as libblkid sees it: the partition table and its partitions,
 * the filesystem inside each partition (a second probe limited to the partition's range of
 * the same fd), or the whole-device filesystem. Recorded in snapshots and shown by `info`.
 */
#include <blkid/blkid.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "source.h"
#include "json-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct blkid_struct_probe, blkid_free_probe);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object, json_object_put);

/* libblkid returns -1 and does not always set errno. */
static int blkid_errno(void)
{
        return errno > 0 ? -errno : -EIO;
}

static int add_string(struct json_object *o, const char *key, const char *value)
{
        if (!value || !*value)
                return 0;
        return bv_json_add(o, key, json_object_new_string(value));
}

static int add_int(struct json_object *o, const char *key, int64_t value)
{
        return bv_json_add(o, key, json_object_new_int64(value));
}

/* Copies probe values into o under new names: pairs of (blkid name, json key). */
static int add_values(blkid_probe pr, struct json_object *o, const char *const *names, size_t n)
{
        for (size_t i = 0; i + 1 < n; i += 2) {
                const char *v = NULL;
                if (blkid_probe_lookup_value(pr, names[i], &v, NULL) < 0)
                        continue;
                int r = add_string(o, names[i + 1], v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The filesystem inside [offset, offset+size) of fd, as fstype/label/fsuuid of o. */
static int probe_partition_fs(int fd, uint64_t offset, uint64_t size, struct json_object *o)
{
        static const char *const names[] = { "TYPE", "fstype", "LABEL", "label", "UUID", "fsuuid" };
        _cleanup_(blkid_free_probep) struct blkid_struct_probe *pr = blkid_new_probe();

        if (!pr)
                return -ENOMEM;
        errno = 0;
        if (blkid_probe_set_device(pr, fd, (blkid_loff_t)offset, (blkid_loff_t)size) < 0)
                return blkid_errno();
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID);
        if (blkid_do_safeprobe(pr) != 0)
                return 0; /* nothing (1), ambivalent (-2) or unreadable: no filesystem to report */
        return add_values(pr, o, names, ELEMENTSOF(names));
}

static int add_partition(int fd, blkid_partition par, struct json_object *array)
{
        _cleanup_(json_object_putp) struct json_object *p = json_object_new_object();
        uint64_t start = (uint64_t)blkid_partition_get_start(par) * 512u;
        uint64_t size = (uint64_t)blkid_partition_get_size(par) * 512u;
        char mbr_type[16];
        int r;

        if (!p)
                return -ENOMEM;
        const char *type = blkid_partition_get_type_string(par);
        if (!type) {
                snprintf(mbr_type, sizeof(mbr_type), "0x%x", (unsigned)blkid_partition_get_type(par));
                type = mbr_type;
        }
        if ((r = add_int(p, "number", blkid_partition_get_partno(par))) < 0 ||
            (r = add_int(p, "start", (int64_t)start)) < 0 || (r = add_int(p, "size", (int64_t)size)) < 0 ||
            (r = add_string(p, "type", type)) < 0 ||
            (r = add_string(p, "uuid", blkid_partition_get_uuid(par))) < 0)
                return r;
        r = probe_partition_fs(fd, start, size, p);
        if (r < 0)
                return r;
        if (json_object_array_add(array, p) < 0)
                return -ENOMEM;
        TAKE_PTR(p);
        return 0;
}

static int add_partitions(int fd, blkid_probe pr, struct json_object *o)
{
        blkid_partlist ls = blkid_probe_get_partitions(pr);
        if (!ls)
                return 0;
        int n = blkid_partlist_numof_partitions(ls);
        if (n <= 0)
                return 0;

        _cleanup_(json_object_putp) struct json_object *array = json_object_new_array();
        if (!array)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                blkid_partition par = blkid_partlist_get_partition(ls, i);
                if (!par)
                        continue;
                int r = add_partition(fd, par, array);
                if (r < 0)
                        return r;
        }
        if (json_object_object_add(o, "partitions", array) < 0)
                return -ENOMEM;
        TAKE_PTR(array);
        return 0;
}

int bv_source_probe(const char *path, struct json_object **ret)
{
        static const char *const names[] = { "PTTYPE", "pttype", "PTUUID", "ptuuid",
                                             "TYPE",   "fstype", "LABEL",  "label", "UUID", "uuid" };
        struct stat st;
        int r;

        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
                return -ENODEV;

        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
        _cleanup_(blkid_free_probep) struct blkid_struct_probe *pr = blkid_new_probe();
        if (!o || !pr)
                return -ENOMEM;
        errno = 0;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0)
                return blkid_errno();
        blkid_probe_enable_partitions(pr, 1);
        blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS);
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID);

        errno = 0;
        r = blkid_do_safeprobe(pr);
        if (r == -1)
                return blkid_errno();
        if (r == 0) {
                r = add_values(pr, o, names, ELEMENTSOF(names));
                if (r < 0)
                        return r;
                if (json_object_object_get_ex(o, "pttype", NULL)) {
                        r = add_partitions(fd, pr, o);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(o);
        return 0;
}
