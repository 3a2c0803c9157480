/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <json-c/json.h>
#include <stdio.h>

#include "cli.h"
#include "info.h"

static const char usage_text[] =
        "Usage: blkvault info REPO [OPTIONS]\n\n"
        "Show the repository's configuration, sizes, deduplication and compression.\n\n"
        "  --json                   print as JSON\n"
        "  --passphrase-file=FILE, --key-file=FILE\n"
        "  -h, --help\n";

int cmd_info(int argc, char **argv)
{
        SecretArgs sargs = {};
        const char *path;
        bool json;
        int r;

        r = parse_repo_json_args(argc, argv, usage_text, "info", &sargs, &json, &path);
        if (r >= 0)
                return r;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        BvRepoInfo info = {};
        r = bv_repo_info(repo, &info);
        const BvRepoConfig *cfg = bv_repo_config(repo);
        if (r < 0)
                return log_error_errno(r, "cannot collect information on '%s'", path);
        if (json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "id", json_object_new_string(bv_repo_id_hex(repo)));
                json_object_object_add(o, "encryption", json_object_new_string(bv_cipher_name(cfg->cipher)));
                json_object_object_add(o, "chunker", json_object_new_string(bv_chunker_kind_name(cfg->chunker)));
                json_object_object_add(o, "chunk_min", json_object_new_uint64(cfg->chunk_min));
                json_object_object_add(o, "chunk_avg", json_object_new_uint64(cfg->chunk_avg));
                json_object_object_add(o, "chunk_max", json_object_new_uint64(cfg->chunk_max));
                json_object_object_add(o, "compression_level", json_object_new_int(cfg->zstd_level));
                json_object_object_add(o, "snapshots", json_object_new_uint64(info.snapshots));
                json_object_object_add(o, "logical_bytes", json_object_new_uint64(info.logical_bytes));
                json_object_object_add(o, "data_bytes", json_object_new_uint64(info.data_bytes));
                json_object_object_add(o, "unique_bytes", json_object_new_uint64(info.unique_raw));
                json_object_object_add(o, "stored_bytes", json_object_new_uint64(info.stored_bytes));
                json_object_object_add(o, "chunks", json_object_new_uint64(info.chunks));
                json_object_object_add(o, "groups", json_object_new_uint64(info.groups));
                json_object_object_add(o, "grouped_chunks", json_object_new_uint64(info.grouped_chunks));
                json_object_object_add(o, "packs", json_object_new_uint64(info.packs));
                json_object_object_add(o, "index_segments", json_object_new_uint64(info.index_segments));
                json_object_object_add(o, "index_bytes", json_object_new_uint64(info.index_bytes));
                json_object_object_add(o, "dedup_ratio", json_object_new_double(info.dedup_ratio));
                json_object_object_add(o, "compression_ratio", json_object_new_double(info.compression_ratio));
                json_print(o);
                json_object_put(o);
        } else {
                char a[32], b[32], d[32], e[32], f[32];
                printf("repository   %s (%s)\n", bv_repo_path(repo), bv_repo_id_hex(repo));
                printf("encryption   %s\n", bv_cipher_name(cfg->cipher));
                printf("chunker      %s %u:%u:%u\n", bv_chunker_kind_name(cfg->chunker), cfg->chunk_min,
                       cfg->chunk_avg, cfg->chunk_max);
                if (cfg->zstd_level)
                        printf("compression  zstd level %d\n", cfg->zstd_level);
                else
                        printf("compression  none\n");
                printf("snapshots    %llu, %s of images, %s of data\n", (unsigned long long)info.snapshots,
                       format_bytes(info.logical_bytes, a), format_bytes(info.data_bytes, b));
                printf("stored       %s in %llu packs (%llu chunks, %s unique before compression)\n",
                       format_bytes(info.stored_bytes, d), (unsigned long long)info.packs,
                       (unsigned long long)info.chunks, format_bytes(info.unique_raw, e));
                if (info.groups)
                        printf("groups       %llu chunks compressed together in %llu groups\n",
                               (unsigned long long)info.grouped_chunks, (unsigned long long)info.groups);
                printf("index        %llu segments, %s\n", (unsigned long long)info.index_segments,
                       format_bytes(info.index_bytes, f));
                printf("ratios       dedup %.2fx, compression %.2fx\n", info.dedup_ratio, info.compression_ratio);
        }
        return EXIT_OK;
}
