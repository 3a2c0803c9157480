/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <zstd.h>
#include <zstd_errors.h>

#include "compress.h"
#include "macro.h"

struct BvZstd {
        ZSTD_CCtx *cctx; /* level set once at creation */
        ZSTD_DCtx *dctx;
};

void bv_zstd_free(BvZstd *z)
{
        if (!z)
                return;
        ZSTD_freeCCtx(z->cctx);
        ZSTD_freeDCtx(z->dctx);
        free(z);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvZstd, bv_zstd_free);

int bv_zstd_new(int level, BvZstd **ret)
{
        _cleanup_(bv_zstd_freep) BvZstd *z = NULL;

        if (!ret || level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
                return -EINVAL;
        z = calloc(1, sizeof(*z));
        if (!z)
                return -ENOMEM;
        z->cctx = ZSTD_createCCtx();
        z->dctx = ZSTD_createDCtx();
        if (!z->cctx || !z->dctx)
                return -ENOMEM;
        /* The content size goes into every frame header: decompression checks it. The AEAD tag
         * already protects the frame, so no zstd checksum. */
        if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 0)))
                return -EINVAL;
        *ret = TAKE_PTR(z);
        return 0;
}

int bv_zstd_compress(BvZstd *z, const void *src, size_t len, void *dst, size_t cap, size_t *ret_len)
{
        size_t n;

        if (!z || !ret_len || (!src && len > 0) || (!dst && cap > 0))
                return -EINVAL;
        n = ZSTD_compress2(z->cctx, dst, cap, src, len);
        if (ZSTD_isError(n)) {
                if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall)
                        return -E2BIG;
                return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
        }
        if (n >= cap)
                return -E2BIG;
        *ret_len = n;
        return 0;
}

int bv_zstd_decompress(BvZstd *z, const void *src, size_t len, void *dst, size_t expected_len)
{
        unsigned long long content;
        size_t n;

        if (!z || (!src && len > 0) || (!dst && expected_len > 0))
                return -EINVAL;
        /* Exactly one frame, covering all of src, that declares exactly expected_len bytes. */
        content = ZSTD_getFrameContentSize(src, len);
        if (content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR || content != expected_len)
                return -EBADMSG;
        n = ZSTD_findFrameCompressedSize(src, len);
        if (ZSTD_isError(n) || n != len)
                return -EBADMSG;
        n = ZSTD_decompressDCtx(z->dctx, dst, expected_len, src, len);
        if (ZSTD_isError(n)) {
                if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
                        return -ENOMEM;
                return -EBADMSG;
        }
        if (n != expected_len)
                return -EBADMSG;
        return 0;
}
