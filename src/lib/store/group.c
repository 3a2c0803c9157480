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

int bv_group_parse(const void *raw, size_t len, size_t *ret_count, size_t *ret_data_len)
{
        const uint8_t *p = raw;
        size_t count, data, at = 0;

        if (!raw || len < 4)
                return -EBADMSG;
        count = get_le32(p + len - 4);
        if (count < 2 || count > BV_GROUP_MAX_MEMBERS || bv_group_trailer_size(count) > len)
                return -EBADMSG;
        data = len - bv_group_trailer_size(count);
        for (size_t i = 0; i < count; i++) {
                size_t l = get_le32(p + data + 4 * i);
                if (l == 0 || l > data - at)
                        return -EBADMSG;
                at += l;
        }
        if (at != data)
                return -EBADMSG;
        if (ret_count)
                *ret_count = count;
        if (ret_data_len)
                *ret_data_len = data;
        return 0;
}

int bv_group_member(const void *raw, size_t len, unsigned k, size_t *ret_offset, size_t *ret_len)
{
        const uint8_t *trailer;
        size_t count, data, offset = 0;
        int r;

        /* the whole trailer is checked, so that a group is either wholly well-formed or rejected */
        r = bv_group_parse(raw, len, &count, &data);
        if (r < 0)
                return r;
        if (k >= count)
                return -EBADMSG;
        trailer = (const uint8_t *)raw + data;
        for (size_t i = 0; i < k; i++)
                offset += get_le32(trailer + 4 * i);
        if (ret_offset)
                *ret_offset = offset;
        if (ret_len)
                *ret_len = get_le32(trailer + 4 * k);
        return 0;
}
