/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Partition tables (GPT, MBR with logical partitions) and filesystem magics, read through a
 * BvFilesDev: what `blkvault files` needs to name a snapshot's filesystems. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "endian.h"
#include "files-parts.h"
#include "macro.h"

#define SECTOR 512u
#define GPT_MAX_ENTRIES 1024u
#define EBR_MAX 128u /* logical partitions followed before a chain is called a loop */

typedef struct PartList {
        BvFilesPart *v;
        size_t n;
} PartList;

static int dev_read(const BvFilesDev *dev, void *buf, size_t count, uint64_t offset)
{
        uint64_t bad;

        if (offset > dev->size || count > dev->size - offset)
                return -ERANGE;
        return dev->pread(dev->userdata, buf, count, offset, &bad);
}

/* Copies a label of at most len bytes (NUL-terminated or not, trailing spaces dropped). */
static void copy_label(char *dst, size_t size, const uint8_t *src, size_t len)
{
        size_t n = strnlen((const char *)src, len);

        while (n > 0 && src[n - 1] == ' ')
                n--;
        n = MIN(n, size - 1);
        memcpy(dst, src, n);
        dst[n] = 0;
}

bool bv_files_is_ext(const char *fstype)
{
        return fstype && strncmp(fstype, "ext", 3) == 0;
}

static const char *ext_kind(const uint8_t *sb)
{
        uint32_t compat = get_le32(sb + 92), incompat = get_le32(sb + 96), ro_compat = get_le32(sb + 100);

        /* extents, 64bit, flex_bg; huge_file, dir_nlink, extra_isize: what mkfs.ext4 adds to ext3 */
        if ((incompat & 0x2c0) || (ro_compat & 0x68))
                return "ext4";
        return compat & 0x4 ? "ext3" : "ext2"; /* has_journal */
}

int bv_files_probe_fs(const BvFilesDev *dev, uint64_t offset, uint64_t size, const char **ret_fstype, char *label,
                      size_t label_size)
{
        uint8_t b[4096];
        const char *type = NULL;
        int r;

        label[0] = 0;
        if (size < sizeof(b)) {
                *ret_fstype = NULL;
                return 0;
        }
        r = dev_read(dev, b, sizeof(b), offset);
        if (r < 0)
                return r;
        if (get_le16(b + 1024 + 56) == 0xEF53) {
                type = ext_kind(b + 1024);
                copy_label(label, label_size, b + 1024 + 120, 16);
        } else if (memcmp(b, "XFSB", 4) == 0) {
                type = "xfs";
                copy_label(label, label_size, b + 108, 12);
        } else if (memcmp(b + 3, "NTFS    ", 8) == 0) {
                type = "ntfs"; /* its label is in an MFT record: ntfs-3g's to read */
        } else if (memcmp(b + 0x52, "FAT32   ", 8) == 0 || memcmp(b + 0x36, "FAT1", 4) == 0) {
                type = "vfat";
                copy_label(label, label_size, b + (b[0x52] == 'F' ? 0x47 : 0x2b), 11);
                if (strcmp(label, "NO NAME") == 0)
                        label[0] = 0;
        } else if (memcmp(b + 512, "LABELONE", 8) == 0 && memcmp(b + 512 + 24, "LVM2 001", 8) == 0) {
                type = "LVM2_member"; /* its logical volumes: named by libguestfs */
        } else if (size >= 65536 + sizeof(b)) {
                r = dev_read(dev, b, sizeof(b), offset + 65536);
                if (r < 0)
                        return r;
                if (memcmp(b + 64, "_BHRfS_M", 8) == 0) {
                        type = "btrfs";
                        copy_label(label, label_size, b + 299, 256);
                }
        }
        *ret_fstype = type;
        return 0;
}

static int part_add(const BvFilesDev *dev, PartList *l, unsigned number, uint64_t offset, uint64_t size)
{
        BvFilesPart *v, *p;

        if (offset > dev->size || size > dev->size - offset)
                return -EBADMSG;
        v = realloc(l->v, (l->n + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        l->v = v;
        p = &v[l->n];
        *p = (BvFilesPart){ .number = number, .offset = offset, .size = size };
        int r = bv_files_probe_fs(dev, offset, size, &p->fstype, p->label, sizeof(p->label));
        if (r < 0)
                return r;
        l->n++;
        return 0;
}

/* A GPT name: UTF-16LE (72 bytes) into UTF-8. */
static void gpt_name(char *dst, size_t size, const uint8_t *src)
{
        size_t o = 0;

        for (size_t i = 0; i < 36; i++) {
                unsigned c = get_le16(src + 2 * i);
                if (c == 0)
                        break;
                if (c >= 0xd800 && c < 0xe000)
                        c = '?'; /* surrogates: not worth pairing for a label */
                if (c < 0x80 && o + 1 < size)
                        dst[o++] = (char)c;
                else if (c < 0x800 && o + 2 < size) {
                        dst[o++] = (char)(0xc0 | (c >> 6));
                        dst[o++] = (char)(0x80 | (c & 0x3f));
                } else if (c >= 0x800 && o + 3 < size) {
                        dst[o++] = (char)(0xe0 | (c >> 12));
                        dst[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
                        dst[o++] = (char)(0x80 | (c & 0x3f));
                }
        }
        dst[o] = 0;
}

static int parse_gpt(const BvFilesDev *dev, const uint8_t *hdr, unsigned sector, PartList *l)
{
        uint64_t entries_lba = get_le64(hdr + 72);
        uint32_t count = get_le32(hdr + 80), esize = get_le32(hdr + 84);
        _cleanup_free_ uint8_t *e = NULL;
        int r;

        if (count > GPT_MAX_ENTRIES || esize < 128 || esize > 4096 || esize % 8 ||
            entries_lba > dev->size / sector)
                return -EBADMSG;
        e = malloc((size_t)count * esize);
        if (!e)
                return -ENOMEM;
        r = dev_read(dev, e, (size_t)count * esize, entries_lba * sector);
        if (r < 0)
                return r == -ERANGE ? -EBADMSG : r;
        for (uint32_t i = 0; i < count; i++) {
                const uint8_t *p = e + (size_t)i * esize;
                static const uint8_t zero[16];
                uint64_t first = get_le64(p + 32), last = get_le64(p + 40);

                if (memcmp(p, zero, 16) == 0)
                        continue;
                if (last < first || last >= dev->size / sector)
                        return -EBADMSG;
                r = part_add(dev, l, i + 1, first * sector, (last - first + 1) * sector);
                if (r < 0)
                        return r;
                gpt_name(l->v[l->n - 1].partname, sizeof(l->v[0].partname), p + 56);
        }
        return 0;
}

static bool mbr_extended(uint8_t type)
{
        return type == 0x05 || type == 0x0f || type == 0x85;
}

/* The logical partitions: a chain of EBRs, each holding one partition (relative to itself) and
 * the next EBR (relative to the extended partition). */
static int parse_ebrs(const BvFilesDev *dev, uint64_t ext_start, PartList *l)
{
        uint64_t ebr = ext_start;
        unsigned number = 5;

        for (unsigned k = 0; k < EBR_MAX; k++) {
                uint8_t b[SECTOR];
                int r = dev_read(dev, b, sizeof(b), ebr * SECTOR);
                if (r < 0)
                        return r == -ERANGE ? -EBADMSG : r;
                if (get_le16(b + 510) != 0xaa55)
                        return -EBADMSG;
                const uint8_t *p = b + 446;
                if (p[4] && get_le32(p + 12)) {
                        r = part_add(dev, l, number++, (ebr + get_le32(p + 8)) * SECTOR,
                                     (uint64_t)get_le32(p + 12) * SECTOR);
                        if (r < 0)
                                return r;
                }
                p += 16;
                if (!mbr_extended(p[4]) || get_le32(p + 8) == 0)
                        return 0;
                ebr = ext_start + get_le32(p + 8);
        }
        return -EBADMSG; /* a loop */
}

/* 1 if b is an MBR with at least one partition, 0 if not one, or -errno. */
static int parse_mbr(const BvFilesDev *dev, const uint8_t *b, PartList *l)
{
        bool any = false;

        if (get_le16(b + 510) != 0xaa55)
                return 0;
        for (unsigned i = 0; i < 4; i++) {
                const uint8_t *p = b + 446 + 16 * i;
                if ((p[0] & 0x7f) != 0) /* status: 0x00 or 0x80, else a boot sector's code */
                        return 0;
                any = any || (p[4] && get_le32(p + 12));
        }
        if (!any)
                return 0;
        for (unsigned i = 0; i < 4; i++) {
                const uint8_t *p = b + 446 + 16 * i;
                uint64_t start = get_le32(p + 8), len = get_le32(p + 12);
                int r;

                if (!p[4] || !len)
                        continue;
                r = mbr_extended(p[4]) ? parse_ebrs(dev, start, l) : part_add(dev, l, i + 1, start * SECTOR, len * SECTOR);
                if (r < 0)
                        return r;
        }
        return 1;
}

int bv_files_parts(const BvFilesDev *dev, BvFilesPart **ret, size_t *ret_n, const char **ret_table)
{
        _cleanup_free_ uint8_t *b = NULL;
        PartList l = {};
        const char *table = "none";
        int r;

        if (dev->size < 2 * SECTOR)
                return -EBADMSG;
        b = malloc(8192);
        if (!b)
                return -ENOMEM;
        r = dev_read(dev, b, MIN(dev->size, (uint64_t)8192), 0);
        if (r < 0)
                return r;
        /* GPT: its header in sector 1 (512-byte sectors) or at 4096 (4 KiB ones) */
        if (memcmp(b + SECTOR, "EFI PART", 8) == 0 || (dev->size >= 8192 && memcmp(b + 4096, "EFI PART", 8) == 0)) {
                unsigned sector = memcmp(b + SECTOR, "EFI PART", 8) == 0 ? SECTOR : 4096;
                table = "gpt";
                r = parse_gpt(dev, b + sector, sector, &l);
        } else {
                const char *fs;
                char label[8];
                r = bv_files_probe_fs(dev, 0, dev->size, &fs, label, sizeof(label));
                /* a FAT or NTFS boot sector ends in 0x55aa as an MBR does: a filesystem first */
                if (r >= 0 && !fs) {
                        r = parse_mbr(dev, b, &l);
                        if (r > 0)
                                table = "dos";
                }
        }
        if (r >= 0 && strcmp(table, "none") == 0)
                r = part_add(dev, &l, 0, 0, dev->size);
        if (r < 0) {
                free(l.v);
                return r;
        }
        *ret = l.v;
        *ret_n = l.n;
        *ret_table = table;
        return 0;
}
