/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "endian.h"
#include "group.h"

const uint8_t bv_group_id[BV_ID_SIZE] = { 0 };

void bv_group_put_trailer(uint8_t *out, const BvGroupMember *members, size_t count)
{
        for (size_t i = 0; i < count; i++)
                put_le32(out + 4 * i, members[i].length);
        put_le32(out + 4 * count, (uint32_t)count);
}

int bv_group_member(const void *raw, size_t len, unsigned k, size_t *ret_offset, size_t *ret_len)
{
        const uint8_t *p = raw;
        size_t count, data, offset = 0, at = 0, member = 0;

        if (!raw || len < 4)
                return -EBADMSG;
        count = get_le32(p + len - 4);
        if (count < 2 || count > BV_GROUP_MAX_MEMBERS || bv_group_trailer_size(count) > len)
                return -EBADMSG;
        data = len - bv_group_trailer_size(count);
        /* every length is checked, so that a group is either wholly well-formed or rejected */
        for (size_t i = 0; i < count; i++) {
                size_t l = get_le32(p + data + 4 * i);
                if (l == 0 || l > data - at)
                        return -EBADMSG;
                if (i == k) {
                        offset = at;
                        member = l;
                }
                at += l;
        }
        if (at != data || k >= count)
                return -EBADMSG;
        if (ret_offset)
                *ret_offset = offset;
        if (ret_len)
                *ret_len = member;
        return 0;
}
