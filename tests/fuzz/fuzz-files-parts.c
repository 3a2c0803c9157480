/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The partition tables and filesystem magics of a disk (src/lib/fs/files-parts.c), which
 * `blkvault files` reads from a snapshot of any disk: the input is the disk. Every partition
 * returned lies inside it and has a number the tables could give; a read past the end of the
 * disk never reaches the callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "files-parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
        const uint8_t *data;
        size_t size;
} Disk;

static int disk_pread(void *userdata, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset)
{
        const Disk *d = userdata;

        if (offset > d->size || count > d->size - offset) {
                *ret_bad_offset = offset;
                abort(); /* files-parts.c checks the bounds before reading */
        }
        memcpy(buf, d->data + offset, count);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        Disk d = { data, size };
        BvFilesDev dev = { .pread = disk_pread, .userdata = &d, .size = size };
        BvFilesPart *parts;
        size_t n;
        const char *table;

        if (bv_files_parts(&dev, &parts, &n, &table) < 0)
                return 0;
        /* a table may hold no partition (an empty GPT); "none" is the whole disk, one entry */
        if (strcmp(table, "none") == 0 && (n != 1 || parts[0].number != 0))
                abort();
        if (n == 0 && strcmp(table, "gpt") != 0 && strcmp(table, "dos") != 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                const BvFilesPart *p = &parts[i];
                if (p->offset > size || p->size > size - p->offset || strlen(p->label) >= sizeof(p->label) ||
                    strlen(p->partname) >= sizeof(p->partname))
                        abort();
                if (strcmp(table, "none") != 0 && (p->number == 0 || p->number > 1024 + 4))
                        abort();
        }
        free(parts);
        return 0;
}
