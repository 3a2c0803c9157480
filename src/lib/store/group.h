/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Compression groups (docs/FORMAT.md, "Groups"). A backup stores consecutive new chunks as one
 * GROUP object compressed as a whole: zstd finds far more in 256 KiB than in each 64 KiB
 * chunk alone. The group's raw bytes are its members' bytes back to back, then a trailer:
 *
 *   length u32 LE of each member, in order || count u32 LE
 *
 * with 2 <= count <= BV_GROUP_MAX_MEMBERS and every length >= 1. Packs and the index name a
 * member by its group's location and its number; a member is checked against its own chunk
 * id when it is taken out.
 */

#include <stddef.h>
#include <stdint.h>

#include "keyring.h"

#define BV_GROUP_MAX_MEMBERS 255u

/* The id in a GROUP object's AAD: all zeros. */
extern const uint8_t bv_group_id[BV_ID_SIZE];

static inline size_t bv_group_trailer_size(size_t count)
{
        return 4 * count + 4;
}

/* A member of a group being written. */
typedef struct BvGroupMember {
        uint8_t id[BV_ID_SIZE];
        uint32_t length;
} BvGroupMember;

/* Writes the trailer of count members (count <= BV_GROUP_MAX_MEMBERS) at out. */
void bv_group_put_trailer(uint8_t *out, const BvGroupMember *members, size_t count);

/* Checks the trailer of a decoded group of len bytes: -EBADMSG for a count out of range, a
 * zero length or lengths that do not add up to the group. ret_count gets the number of members,
 * ret_data_len the length of their bytes (len without the trailer); either may be NULL. */
int bv_group_parse(const void *raw, size_t len, size_t *ret_count, size_t *ret_data_len);

/* Where member k lies in a decoded group of len bytes. -EBADMSG if the trailer is malformed
 * (a count out of range, a zero length, lengths that do not add up to the group) or k is not
 * below the count. */
int bv_group_member(const void *raw, size_t len, unsigned k, size_t *ret_offset, size_t *ret_len);
