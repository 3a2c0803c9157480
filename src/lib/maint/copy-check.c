/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a copy sends is checked first (copy-internal.h): each object is authenticated and
 * decoded under SRC's keys, a chunk or map node re-hashed to its id, a group's members each to
 * theirs, as a restore would read them. A pack that went bad at SRC (a flipped bit, a truncated
 * file) then stops the copy before it reaches DST, instead of travelling to the off-site copy
 * that is meant to replace it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy-internal.h"
#include "group.h"
#include "keyring.h"
#include "macro.h"

int copy_check_object(BvObjectCodec *codec, const BvKeyring *k, const BvPackEntry *e, size_t n, const void *enc)
{
        _cleanup_free_ uint8_t *raw = NULL;
        uint8_t id[BV_ID_SIZE];
        size_t len, off, mlen;
        BvObjectType type = (BvObjectType)e[0].type;
        int r = bv_object_decode_alloc(codec, type, type == BV_OBJ_GROUP ? bv_group_id : e[0].id, enc, e[0].length,
                                       (void **)&raw, &len);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG;
        if (type != BV_OBJ_GROUP)
                return n == 1 && len == e[0].raw_length ? 0 : -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                r = bv_group_member(raw, len, e[i].member, &off, &mlen);
                if (r < 0 || mlen != e[i].raw_length)
                        return -EBADMSG;
                bv_keyring_id(k, BV_ID_CHUNK, raw + off, mlen, id);
                if (memcmp(id, e[i].id, BV_ID_SIZE) != 0)
                        return -EBADMSG;
        }
        return 0;
}

/* Where a pack's object is: its encoded bytes, or -EBADMSG when the pack ends before it does. */
typedef int (*object_at_fn)(void *userdata, const BvPackEntry *e, const void **ret);

static int check_pack(BvObjectCodec *codec, const BvKeyring *k, const BvPackEntry *e, size_t n, object_at_fn at,
                      void *userdata, uint64_t *ret_offset)
{
        for (size_t i = 0, j; i < n; i = j) {
                const void *enc = NULL;
                for (j = i + 1; e[i].type == BV_OBJ_GROUP && j < n && e[j].offset == e[i].offset; j++)
                        ;
                *ret_offset = e[i].offset;
                int r = at(userdata, &e[i], &enc);
                if (r >= 0)
                        r = copy_check_object(codec, k, e + i, j - i, enc);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct FdPack {
        int fd;
        void *buf;
        size_t cap;
} FdPack;

static int fd_object_at(void *userdata, const BvPackEntry *e, const void **ret)
{
        FdPack *p = userdata;
        if (e->length > p->cap)
                return -EBADMSG;
        ssize_t got = pread(p->fd, p->buf, e->length, (off_t)e->offset);
        if (got < 0)
                return -errno;
        if ((size_t)got != e->length)
                return -EBADMSG; /* the pack ends before its object does */
        *ret = p->buf;
        return 0;
}

int copy_check_pack_fd(BvObjectCodec *codec, const BvKeyring *k, int fd, const BvPackEntry *e, size_t n,
                       void *buf, size_t cap, uint64_t *ret_offset)
{
        FdPack p = { .fd = fd, .buf = buf, .cap = cap };
        return check_pack(codec, k, e, n, fd_object_at, &p, ret_offset);
}

typedef struct MemPack {
        const uint8_t *data;
        uint64_t size;
} MemPack;

static int mem_object_at(void *userdata, const BvPackEntry *e, const void **ret)
{
        const MemPack *p = userdata;
        if (e->offset > p->size || e->length > p->size - e->offset)
                return -EBADMSG;
        *ret = p->data + e->offset;
        return 0;
}

int copy_check_pack_mem(BvObjectCodec *codec, const BvKeyring *k, const void *data, uint64_t size,
                        const BvPackEntry *e, size_t n, uint64_t *ret_offset)
{
        MemPack p = { .data = data, .size = size };
        return check_pack(codec, k, e, n, mem_object_at, &p, ret_offset);
}
