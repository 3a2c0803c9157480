/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "compress.h"
#include "macro.h"

struct BvZstd {
        ZSTD_CCtx *cctx; /* level set at creation, or by bv_zstd_set_choice */
        ZSTD_DCtx *dctx;
        BvZstdChoice choice; /* the settings of cctx: BV_ZSTD_RAW while those of creation */
        int level;           /* of creation */
};

/* The settings of each choice (0: what the level gives). */
static const struct {
        int level, hash_log, chain_log;
} choice_params[] = {
        [BV_ZSTD_FAST] = { 1, 0, 0 },
        [BV_ZSTD_MID] = { 2, 15, 15 },
        [BV_ZSTD_STRONG] = { 3, 15, 14 },
};

#define ENTROPY_RAW 7.9
#define ENTROPY_MID 7.0
#define ENTROPY_STRONG 5.5

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
        z->level = level;
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

/* Byte counts of the sample: four tables filled in turn, so that runs of one byte value do not
 * wait on one counter. */
static size_t sample_histogram(const uint8_t *p, size_t len, uint32_t h[256])
{
        uint32_t t[4][256];
        size_t pieces = BV_ZSTD_SAMPLE_PIECES, piece = BV_ZSTD_SAMPLE_PIECE, n = 0;

        memset(t, 0, sizeof(t));
        if (len <= pieces * piece) {
                pieces = 1;
                piece = len;
        }
        for (size_t k = 0; k < pieces; k++) {
                /* evenly spread, the first at the start, the last at the end */
                const uint8_t *q = p + (pieces > 1 ? (len - piece) / (pieces - 1) * k : 0);
                size_t i = 0;
                for (; i + 4 <= piece; i += 4) {
                        t[0][q[i]]++;
                        t[1][q[i + 1]]++;
                        t[2][q[i + 2]]++;
                        t[3][q[i + 3]]++;
                }
                for (; i < piece; i++)
                        t[0][q[i]]++;
                n += piece;
        }
        for (unsigned v = 0; v < 256; v++)
                h[v] = t[0][v] + t[1][v] + t[2][v] + t[3][v];
        return n;
}

double bv_zstd_sample_entropy(const void *data, size_t len)
{
        uint32_t h[256];
        double sum = 0;
        size_t n;

        if (!data || len == 0)
                return 0;
        n = sample_histogram(data, len, h);
        /* H = log2(n) - sum(c log2 c) / n */
        for (unsigned v = 0; v < 256; v++)
                if (h[v] > 1)
                        sum += (double)h[v] * log2((double)h[v]);
        return log2((double)n) - sum / (double)n;
}

BvZstdChoice bv_zstd_choose(const void *data, size_t len)
{
        double e;

        if (!data || len == 0)
                return BV_ZSTD_RAW;
        e = bv_zstd_sample_entropy(data, len);
        if (e >= ENTROPY_RAW)
                return BV_ZSTD_RAW;
        if (e >= ENTROPY_MID)
                return BV_ZSTD_MID;
        if (e >= ENTROPY_STRONG)
                return BV_ZSTD_STRONG;
        return BV_ZSTD_FAST;
}

/* Sets level and the hash and chain logs (0: the level's own) of cctx. */
static int cctx_settings(BvZstd *z, int level, int hash_log, int chain_log)
{
        if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_hashLog, hash_log)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_chainLog, chain_log)))
                return -EINVAL;
        return 0;
}

int bv_zstd_set_choice(BvZstd *z, BvZstdChoice choice)
{
        if (!z || choice <= BV_ZSTD_RAW || choice > BV_ZSTD_STRONG)
                return -EINVAL;
        if (z->choice == choice)
                return 0;
        int r = cctx_settings(z, choice_params[choice].level, choice_params[choice].hash_log,
                              choice_params[choice].chain_log);
        if (r < 0)
                return r;
        z->choice = choice;
        return 0;
}

int bv_zstd_reset_choice(BvZstd *z)
{
        if (!z)
                return -EINVAL;
        if (z->choice == BV_ZSTD_RAW)
                return 0;
        int r = cctx_settings(z, z->level, 0, 0);
        if (r < 0)
                return r;
        z->choice = BV_ZSTD_RAW;
        return 0;
}
