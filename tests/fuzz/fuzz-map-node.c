/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Map tree nodes: bv_map_node_parse on the input, then a reader over a one-node tree whose
 * root is the input, looking up the first, last and some middle offsets, and a walk of it. Children of an
 * internal root are absent (the fetch fails), which the reader must report, not trip over.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "maptree.h"

typedef struct OneNode {
        uint8_t id[BV_ID_SIZE];
        const uint8_t *data;
        size_t len;
} OneNode;

static int one_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        const OneNode *o = userdata;
        void *copy;

        if (memcmp(id, o->id, BV_ID_SIZE) != 0)
                return -ENOENT;
        copy = malloc(o->len ? o->len : 1);
        if (!copy)
                return -ENOMEM;
        if (o->len)
                memcpy(copy, o->data, o->len);
        *ret_node = copy;
        *ret_len = o->len;
        return 0;
}

static int count_extent(void *userdata, const BvMapExtent *e)
{
        size_t *n = userdata;
        if (e->length == 0)
                abort();
        (*n)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        OneNode o = {.data = data, .len = size};
        BvMapReader *r = NULL;
        BvMapExtent e;
        unsigned level;
        size_t count;
        uint64_t length;

        if (bv_map_node_parse(data, size, &level, &count, &length) < 0)
                return 0;
        memset(o.id, 0xa5, sizeof(o.id));
        if (bv_map_reader_new(o.id, level + 1, length, one_fetch, &o, 2, &r) < 0)
                return 0;
        const uint64_t offsets[] = {0, length / 3, length / 2, length - 1, length};
        for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
                int k = bv_map_reader_lookup(r, offsets[i], &e);
                if (k >= 0 && (e.offset > offsets[i] || offsets[i] - e.offset >= e.length))
                        abort(); /* the extent must contain the offset */
                if (k >= 0 && level > 0)
                        abort(); /* an internal root's children do not exist */
                if (k < 0 && level == 0 && offsets[i] < length)
                        abort(); /* a leaf that parses answers every offset it covers */
                if (offsets[i] >= length && k != -ERANGE)
                        abort();
        }
        bv_map_reader_free(r);

        /* the walk agrees: a leaf yields its count of extents, an internal root a missing child */
        size_t extents = 0;
        int k = bv_map_walk(o.id, level + 1, length, one_fetch, &o, NULL, count_extent, &extents);
        if (level == 0 && (k < 0 || extents != count))
                abort();
        if (level > 0 && k >= 0)
                abort();
        return 0;
}
