/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <json-c/json.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "info.h"
#include "snapshot-json.h"

static const char usage_text[] =
        "Usage: blkvault info REPO [SNAPSHOT] [OPTIONS]\n\n"
        "Show the repository's configuration, sizes, deduplication and compression; with SNAPSHOT,\n"
        "describe that snapshot: source, host, content, sizes, the backup's counters, and how much of\n"
        "its data its parent (the previous snapshot of its name) holds too, and for a backup --used-only\n"
        "what each partition's map said (used, free not read, read whole).\n\n"
        "  --json                   print as JSON\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

/* A --used-only snapshot: what each partition's map said, as backup printed it. */
static void print_used_only(const BvSnapshotUsedOnly *u)
{
        char a[32], b[32], c[32], name[16];

        if (!u->on)
                return;
        printf("used-only    yes: %s free not read (holes in the snapshot, zeroes on restore)\n",
               format_bytes(u->bytes_free, a));
        for (size_t i = 0; i < u->n_parts; i++) {
                const BvSnapshotUsedPart *p = &u->parts[i];
                const char *fs = p->fstype ? p->fstype : "";
                snprintf(name, sizeof(name), p->number ? "p%u" : "disk", p->number);
                printf("  %s%s%s%s%s%s: ", name, fs[0] ? " " : "", fs, p->label ? " '" : "", p->label ? p->label : "",
                       p->label ? "'" : "");
                if (p->reader)
                        printf("%s used (read), %s free (not read), %s read whole (%s)\n",
                               format_bytes(p->bytes_used, a), format_bytes(p->bytes_free, b),
                               format_bytes(p->bytes_unknown, c), p->reader);
                else if (p->bytes_unknown == 0) /* an extended partition */
                        printf("%s\n", p->why ? p->why : "nothing read");
                else
                        printf("%s read whole because %s\n", format_bytes(p->bytes_unknown, a),
                               p->why ? p->why : "no reader mapped it");
        }
}

/* The previous snapshot of s's name, or NULL. */
static const BvSnapshot *parent_of(BvRepo *repo, const BvSnapshot *s)
{
        BvSnapshot *const *list;
        size_t n;
        const BvSnapshot *parent = NULL;
        if (bv_repo_snapshots(repo, &list, &n) < 0)
                return NULL;
        for (size_t i = 0; i < n && list[i] != s; i++)
                if (list[i]->name && s->name && strcmp(list[i]->name, s->name) == 0)
                        parent = list[i];
        return parent;
}

static int info_snapshot(BvRepo *repo, const char *spec, bool json)
{
        const BvSnapshot *s, *parent;
        int r = find_snapshot(repo, spec, &s);
        if (r != EXIT_OK)
                return r;
        parent = parent_of(repo, s);
        const BvSnapshotSource *src = &s->source;
        const BvSnapshotStats *st = &s->stats;
        uint64_t zero = st->bytes_zero + st->bytes_hole;
        uint64_t data = s->size > zero ? s->size - zero : 0, shared;
        r = bv_snapshot_shared_bytes(repo, s, parent, &shared);
        if (r < 0)
                return log_error_errno(r, "cannot compare snapshot %.8s with its parent", s->id);
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o = json_snapshot(s);
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot describe snapshot %.8s", s->id);
                json_object_object_add(o, "parent", parent ? json_object_new_string(parent->id) : NULL);
                json_object_object_add(o, "bytes_shared", json_object_new_uint64(shared));
                json_print(o);
                return EXIT_OK;
        }
        char when[64], content[256], a[32], b[32], c[32];
        format_time_local(s->time, when);
        describe_probe(src, content, sizeof(content));
        printf("snapshot     %s\n", s->id);
        printf("name         %s\n", s->name ? s->name : "");
        printf("time         %s\n", when);
        printf("host         %s\n", src->host ? src->host : "(not recorded)");
        printf("source       %s (%s)\n", src->abs_path ? src->abs_path : src->path ? src->path : "?",
               src->kind ? bv_source_kind_name(src->kind) : "?");
        if (src->stable_name)
                printf("device       %s\n", src->stable_name);
        if (src->image_format && src->has_identity)
                printf("image        %s image, %s virtual (the file: %s)\n", src->image_format,
                       format_bytes(s->size, a), format_bytes(src->identity.size, b));
        else if (src->image_format)
                printf("image        %s image, %s virtual\n", src->image_format, format_bytes(s->size, a));
        if (content[0])
                printf("content      %s\n", content);
        printf("size         %s image, %s data, %s zero or holes\n", format_bytes(s->size, a),
               format_bytes(data, b), format_bytes(zero, c));
        print_used_only(&s->used_only);
        printf("backup       %s new, %s stored, %llu chunks (%llu new), %.1f s\n", format_bytes(st->bytes_new, a),
               format_bytes(st->bytes_stored, b), (unsigned long long)st->chunks,
               (unsigned long long)st->chunks_new, st->seconds);
        if (parent)
                printf("parent       %.8s\n", parent->id);
        else
                printf("parent       (none: the first snapshot of its name)\n");
        if (parent)
                printf("shared       %s of %s data with its parent (%.0f%%)\n", format_bytes(shared, a),
                       format_bytes(st->bytes_data, b),
                       st->bytes_data ? 100.0 * (double)shared / (double)st->bytes_data : 0.0);
        else
                printf("shared       nothing (no parent)\n");
        print_unreadable(s, stdout, "unreadable   ");
        return EXIT_OK;
}

void print_unreadable(const BvSnapshot *s, FILE *f, const char *prefix)
{
        for (size_t i = 0; i < s->n_unreadable; i++) {
                const BvByteRange *u = &s->unreadable[i];
                char b[32];
                fprintf(f, "%sbytes %llu-%llu (%s) did not read at backup: restored as zeroes\n", prefix,
                        (unsigned long long)u->offset, (unsigned long long)(u->offset + u->length - 1),
                        format_bytes(u->length, b));
        }
}

/* The repository's compression as its config names it: auto, zstd or none. */
static const char *compression_name(const BvRepoConfig *cfg)
{
        if (!cfg->zstd_level)
                return "none";
        return cfg->compress_mode == BV_COMPRESS_AUTO ? "auto" : "zstd";
}

int cmd_info(int argc, char **argv)
{
        SecretArgs sargs = {};
        bool json = false;
        const CliOption options[] = { CLI_FLAG("json", &json), POINT_IN_TIME_OPTION(&sargs), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "info", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO [SNAPSHOT]", .repo = true);
        int r;
        const char *path = argv[optind];
        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        if (optind + 2 == argc)
                return info_snapshot(repo, argv[optind + 1], json);
        BvRepoInfo info = {};
        r = bv_repo_info(repo, &info);
        const BvRepoConfig *cfg = bv_repo_config(repo);
        if (r < 0)
        {
                char said[STORAGE_SAID_MAX];
                return log_error_errno(r, "cannot collect information on '%s'%s", path,
                                       storage_said(repo, said, sizeof(said)));
        }
        if (json) {
                static const char *const aliases[] = { /* (old, new), until 0.3 */
                        "id", "repository", "logical_bytes", "bytes_logical", "data_bytes", "bytes_data",
                        "unique_bytes", "bytes_unique", "stored_bytes", "bytes_stored", "index_bytes", "bytes_index",
                };
                const BvChunkerParams *cp = &cfg->chunker;
                _cleanup_(json_object_putp) struct json_object *o = BV_JSON_OBJECT(
                        { "repository", json_object_new_string(bv_repo_id_hex(repo)) },
                        { "encryption", json_object_new_string(bv_cipher_name(cfg->cipher)) },
                        { "chunker", bv_chunker_params_json(cp) },
                        { "chunk_min", json_object_new_uint64(cp->min) }, /* aliases of chunker's, until 0.3 */
                        { "chunk_avg", json_object_new_uint64(cp->avg) },
                        { "chunk_max", json_object_new_uint64(cp->max) },
                        { "compression", json_object_new_string(compression_name(cfg)) },
                        { "compression_level", json_object_new_int(cfg->zstd_level) },
                        { "snapshots", json_object_new_uint64(info.snapshots) },
                        { "bytes_logical", json_object_new_uint64(info.logical_bytes) },
                        { "bytes_data", json_object_new_uint64(info.data_bytes) },
                        { "bytes_unique", json_object_new_uint64(info.unique_raw) },
                        { "bytes_stored", json_object_new_uint64(info.stored_bytes) },
                        { "chunks", json_object_new_uint64(info.chunks) },
                        { "groups", json_object_new_uint64(info.groups) },
                        { "grouped_chunks", json_object_new_uint64(info.grouped_chunks) },
                        { "packs", json_object_new_uint64(info.packs) },
                        { "index_segments", json_object_new_uint64(info.index_segments) },
                        { "bytes_index", json_object_new_uint64(info.index_bytes) },
                        { "dedup_ratio", json_object_new_double(info.dedup_ratio) },
                        { "compression_ratio", json_object_new_double(info.compression_ratio) });
                if (!o || json_add_aliases(o, aliases, ELEMENTSOF(aliases)) < 0)
                        return log_error_errno(-ENOMEM, "cannot print the information");
                json_print(o);
        } else {
                char a[32], b[32], d[32], e[32], f[32];
                printf("repository   %s (%s)\n", bv_repo_path(repo), bv_repo_id_hex(repo));
                printf("encryption   %s\n", bv_cipher_name(cfg->cipher));
                printf("chunker      %s %u:%u:%u\n", bv_chunker_kind_name(cfg->chunker.kind), cfg->chunker.min,
                       cfg->chunker.avg, cfg->chunker.max);
                if (cfg->compress_mode == BV_COMPRESS_AUTO && cfg->zstd_level)
                        printf("compression  auto (zstd level 1-3 or none, chosen for each group of new data)\n");
                else if (cfg->zstd_level)
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
