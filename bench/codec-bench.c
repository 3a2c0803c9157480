/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Single-thread throughput of the codec hot paths: chunk ids with 4 KiB prefixes over 64 KiB
 * chunks, one-shot ids, AES-256-GCM seal and open, zstd level 3 on text-like data. Rates are
 * bytes per second of the process's CPU time, not wall time: on a machine shared by other
 * builds the wall-clock rates move with the load (4-8x lower at a load of 30 on 2 cores). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aead.h"
#include "compress.h"
#include "keyring.h"
#include "macro.h"

#define CHUNK 65536
#define TOTAL ((size_t)512 << 20)

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void report(const char *what, size_t bytes, double secs)
{
        printf("%-40s %8.0f MB/s\n", what, (double)bytes / secs / 1e6);
}

int main(void)
{
        static uint8_t buf[CHUNK], out[CHUNK + 1024], ids[CHUNK / 4096][BV_ID_SIZE];
        uint8_t master[BV_MASTER_SIZE] = { 1 }, repo_id[BV_REPO_ID_SIZE] = { 2 }, nonce[BV_NONCE_SIZE] = {};
        uint8_t tag[BV_TAG_SIZE];
        BvKeyring *k = NULL;
        BvAead *a = NULL;
        BvZstd *z = NULL;
        size_t n, zbytes = 0;
        double t;

        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (uint8_t)("backup of a block device "[i % 25] ^ (i / 1000));
        if (bv_keyring_new(BV_CIPHER_AES256GCM, master, repo_id, &k) < 0 ||
            bv_aead_new(BV_CIPHER_AES256GCM, bv_keyring_data_key(k), &a) < 0 || bv_zstd_new(3, &z) < 0)
                return 1;

        t = now();
        for (size_t done = 0; done < TOTAL; done += CHUNK)
                bv_keyring_id_prefixes(k, BV_ID_CHUNK, buf, CHUNK, 4096, ids);
        report("id prefixes (64 KiB, step 4096)", TOTAL, now() - t);

        t = now();
        for (size_t done = 0; done < TOTAL; done += CHUNK)
                bv_keyring_id(k, BV_ID_CHUNK, buf, CHUNK, ids[0]);
        report("id one-shot (64 KiB)", TOTAL, now() - t);

        t = now();
        for (size_t done = 0; done < TOTAL; done += CHUNK) {
                nonce[0]++;
                if (bv_aead_seal(a, nonce, "aad", 3, buf, CHUNK, out, tag) < 0)
                        return 1;
        }
        report("aes-256-gcm seal (64 KiB)", TOTAL, now() - t);

        t = now();
        for (size_t done = 0; done < TOTAL / 4; done += CHUNK) {
                if (bv_zstd_compress(z, buf, CHUNK, out, CHUNK, &n) < 0)
                        return 1;
                zbytes += n;
        }
        report("zstd level 3 compress (64 KiB)", TOTAL / 4, now() - t);
        printf("(zstd ratio %.2f)\n", (double)(TOTAL / 4) / (double)zbytes);

        bv_zstd_free(z);
        bv_aead_free(a);
        bv_keyring_free(k);
        return 0;
}
