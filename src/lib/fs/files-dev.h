/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A disk the file readers (files-parts.c, ext-files.c) see only through a read callback: no fd,
 * no device. The CLI hands them a snapshot (bv_image_pread), a test a plain file. This room sits
 * below the read path, so it never calls it itself.
 */

#include <stddef.h>
#include <stdint.h>

typedef struct BvFilesDev {
        /* Reads count bytes at offset of the disk: 0, or -errno (-EBADMSG damaged data, -EUCLEAN a
         * missing pack: then *ret_bad_offset is the disk offset of the damaged piece). */
        int (*pread)(void *userdata, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset);
        void *userdata;
        uint64_t size; /* of the disk */
} BvFilesDev;
