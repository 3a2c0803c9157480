/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Writing compression groups (store/group.h): the one recipe that backup and gc share to turn
 * new chunks into stored objects. A BvGroupBuf gathers consecutive new chunks (up to
 * BV_GROUP_TARGET_BYTES and BV_GROUP_TARGET_MEMBERS) or holds one object (a chunk or map node);
 * a BvGroupEncoder (one per thread) compresses, encrypts and pads it into one object, a GROUP when
 * it holds two members or more; a group that does not compress is handed on as its members, each
 * a raw CHUNK (grouping it would only make a random read decode more). bv_group_append puts an
 * encoded object into a pack.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "keyring.h"
#include "object.h"
#include "pack.h"

#define BV_GROUP_TARGET_BYTES (256u * 1024) /* raw bytes of a group's members */
#define BV_GROUP_TARGET_MEMBERS 64u

/* Objects being gathered: members' bytes back to back in data (room for a group's trailer after
 * them). type is the type of a lone member: BV_OBJ_CHUNK or BV_OBJ_MAP. */
typedef struct BvGroupBuf {
        BvObjectType type;
        BvGroupMember members[BV_GROUP_TARGET_MEMBERS];
        size_t n_members;
        size_t len, cap;
        uint8_t *data;
} BvGroupBuf;

/* Empties g for objects of type (its buffer is kept). */
void bv_group_buf_clear(BvGroupBuf *g, BvObjectType type);
/* Whether a member of len bytes may join g without passing the targets. */
bool bv_group_buf_fits(const BvGroupBuf *g, size_t len);
/* Appends a member (after bv_group_buf_fits said yes, or to an empty g). -ENOMEM leaves g as it was. */
int bv_group_buf_add(BvGroupBuf *g, const uint8_t id[BV_ID_SIZE], const void *data, size_t len);
/* Makes g hold the one object id of type (not grouped with others). -ENOMEM leaves g empty. */
int bv_group_buf_set(BvGroupBuf *g, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                     size_t len);
void bv_group_buf_done(BvGroupBuf *g); /* frees the buffer */

/* Receives each encoded object: type BV_OBJ_GROUP with its n members, or a CHUNK or MAP (n = 1).
 * A negative return stops bv_group_encode and is returned. */
typedef int (*BvGroupSink)(void *userdata, BvObjectType type, const BvGroupMember *members, size_t n,
                           const void *encoded, size_t len);

typedef struct BvGroupEncoder BvGroupEncoder;

/* zstd_level as bv_object_codec_new (0: raw). The keyring must outlive the encoder. */
int bv_group_encoder_new(const BvKeyring *k, int zstd_level, BvGroupEncoder **ret);
void bv_group_encoder_free(BvGroupEncoder *e);

/* --compression=auto (a repository's zstd_auto): from now on each chunk or group is stored raw
 * or compressed as bv_zstd_choose says for its bytes; map nodes keep the encoder's level. Does
 * nothing for an encoder of zstd_level 0. */
void bv_group_encoder_set_auto(BvGroupEncoder *e, bool on);

/* Encodes what g holds and passes it to sink; writes the trailer of a group into g's buffer. */
int bv_group_encode(BvGroupEncoder *e, BvGroupBuf *g, BvGroupSink sink, void *userdata);

/* Appends an encoded object of n members (a GROUP if type is BV_OBJ_GROUP) to w; the errors of
 * bv_pack_writer_append. */
int bv_group_append(BvPackWriter *w, BvObjectType type, const BvGroupMember *members, size_t n,
                    const void *encoded, size_t len);
