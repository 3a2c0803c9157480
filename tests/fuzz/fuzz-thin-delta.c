/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thin_delta's XML. What parses must give changed ranges in order, not touching, not empty, on
 * whole blocks and without overflow.
 */
#include <stdlib.h>

#include "thin-delta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvThinDelta d;
        uint64_t end = 0;

        if (bv_thin_delta_parse((const char *)data, size, &d) < 0)
                return 0;
        if (d.block_bytes == 0 || d.block_bytes % 512 != 0)
                abort();
        for (size_t i = 0; i < d.n_changed; i++) {
                const BvByteRange *r = &d.changed[i];
                if (r->length == 0 || (i > 0 && r->offset <= end) || r->offset % d.block_bytes != 0 ||
                    r->length % d.block_bytes != 0 || r->offset + r->length < r->offset)
                        abort();
                end = r->offset + r->length;
        }
        bv_thin_delta_done(&d);
        return 0;
}
