/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pack files (docs/FORMAT.md, "Packs"):
 *
 *   header[32]   "BLKVPACK" | version u32 (1) | flags u32 (0) | pack id[16]
 *   objects      encoded objects back to back, the first at offset 32
 *   pack index   a PACKINDEX object (id = pack id || 16 zero bytes) whose payload is
 *                count u32 | reserved u32 (0) | count * entry[48]
 *                entry = id[32] | offset u32 | length u32 | raw_length u32 | type u8 | 3 zero bytes
 *   footer[32]   index offset u64 | index length u32 | count u32 | version u32 (1) |
 *                check u32 (first 4 bytes of SHA-256 of the 20 bytes before) | "BLKVPEND"
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "hex.h"
#include "macro.h"
#include "pack.h"
#include "random.h"

#define PACK_MAGIC "BLKVPACK"
#define PACK_END_MAGIC "BLKVPEND"
#define PACK_VERSION 1
#define PACK_ENTRY_SIZE 48
#define PACK_INDEX_HEAD 8
#define PACK_MAX_ENTRIES ((BV_OBJECT_MAX_RAW - PACK_INDEX_HEAD) / PACK_ENTRY_SIZE)
#define PACK_MIN_OBJECT (BV_NONCE_SIZE + BV_OBJECT_HEADER_SIZE + BV_TAG_SIZE)
#define PACK_WRITE_BUFFER (1024u * 1024)
#define PACKSET_SLOTS 64

typedef struct PackFooter {
        uint64_t index_offset;
        uint32_t index_length;
        uint32_t count;
} PackFooter;

void bv_pack_path(const uint8_t pack_id[BV_PACK_ID_SIZE], char out[64])
{
        char hex[2 * BV_PACK_ID_SIZE + 1];

        bv_hex_encode(pack_id, BV_PACK_ID_SIZE, hex);
        snprintf(out, 64, "%.2s/%s.pack", hex, hex);
}

static void pack_index_id(const uint8_t pack_id[BV_PACK_ID_SIZE], uint8_t id[BV_ID_SIZE])
{
        memset(id, 0, BV_ID_SIZE);
        memcpy(id, pack_id, BV_PACK_ID_SIZE);
}

static void pack_header_build(uint8_t h[BV_PACK_HEADER_SIZE], const uint8_t pack_id[BV_PACK_ID_SIZE])
{
        memcpy(h, PACK_MAGIC, 8);
        put_le32(h + 8, PACK_VERSION);
        put_le32(h + 12, 0);
        memcpy(h + 16, pack_id, BV_PACK_ID_SIZE);
}

static int pack_header_check(const uint8_t h[BV_PACK_HEADER_SIZE], const uint8_t pack_id[BV_PACK_ID_SIZE])
{
        if (memcmp(h, PACK_MAGIC, 8) != 0)
                return -EBADMSG;
        if (get_le32(h + 8) != PACK_VERSION || get_le32(h + 12) != 0)
                return -EPROTONOSUPPORT;
        if (memcmp(h + 16, pack_id, BV_PACK_ID_SIZE) != 0)
                return -EBADMSG;
        return 0;
}

static uint32_t pack_footer_check(const uint8_t f[BV_PACK_FOOTER_SIZE])
{
        uint8_t digest[BV_HASH_SIZE];

        bv_sha256(f, 20, digest);
        return get_le32(digest);
}

static void pack_footer_build(uint8_t f[BV_PACK_FOOTER_SIZE], const PackFooter *pf)
{
        put_le64(f, pf->index_offset);
        put_le32(f + 8, pf->index_length);
        put_le32(f + 12, pf->count);
        put_le32(f + 16, PACK_VERSION);
        put_le32(f + 20, pack_footer_check(f));
        memcpy(f + 24, PACK_END_MAGIC, 8);
}

/* Validates a footer against the size of its file; the index object lies between the
 * objects and the footer. */
static int pack_footer_parse(const uint8_t f[BV_PACK_FOOTER_SIZE], uint64_t file_size, PackFooter *ret)
{
        PackFooter pf;

        if (memcmp(f + 24, PACK_END_MAGIC, 8) != 0)
                return -EBADMSG;
        if (get_le32(f + 16) != PACK_VERSION)
                return -EPROTONOSUPPORT;
        if (get_le32(f + 20) != pack_footer_check(f))
                return -EBADMSG;
        pf.index_offset = get_le64(f);
        pf.index_length = get_le32(f + 8);
        pf.count = get_le32(f + 12);
        if (pf.count == 0 || pf.count > PACK_MAX_ENTRIES)
                return -EBADMSG;
        if (pf.index_offset < BV_PACK_HEADER_SIZE || pf.index_offset > UINT32_MAX ||
            file_size < BV_PACK_HEADER_SIZE + BV_PACK_FOOTER_SIZE ||
            pf.index_offset + pf.index_length != file_size - BV_PACK_FOOTER_SIZE)
                return -EBADMSG;
        *ret = pf;
        return 0;
}

static void pack_entry_put(uint8_t *p, const BvPackEntry *e)
{
        memcpy(p, e->id, BV_ID_SIZE);
        put_le32(p + 32, e->offset);
        put_le32(p + 36, e->length);
        put_le32(p + 40, e->raw_length);
        p[44] = e->type;
        p[45] = e->member;
        memset(p + 46, 0, 2);
}

/* Whether entry e continues the group of entry prev: the same object, the next number. */
static bool entry_continues_group(const BvPackEntry *prev, const BvPackEntry *e)
{
        return prev && prev->type == BV_OBJ_GROUP && e->type == BV_OBJ_GROUP && e->member == prev->member + 1 &&
               e->offset == prev->offset && e->length == prev->length;
}

/* Whether the entry that ends an object is a group's member 0: a group needs two members. */
static bool group_of_one(const BvPackEntry *last)
{
        return last && last->type == BV_OBJ_GROUP && last->member == 0;
}

/* Parses and checks the entries of a decoded pack index: they must tile the object area
 * [header, index offset) exactly, in order, a group's members one after another with the
 * group's offset and length, numbered from 0, at least two of them. */
static int pack_entries_parse(const uint8_t *payload, size_t len, const PackFooter *pf, BvPackEntry **ret,
                              size_t *ret_count)
{
        _cleanup_free_ BvPackEntry *entries = NULL;
        const BvPackEntry *prev = NULL;
        uint64_t next = BV_PACK_HEADER_SIZE;

        if (len != PACK_INDEX_HEAD + (size_t)pf->count * PACK_ENTRY_SIZE || get_le32(payload) != pf->count ||
            get_le32(payload + 4) != 0)
                return -EBADMSG;
        entries = calloc(pf->count, sizeof(BvPackEntry));
        if (!entries)
                return -ENOMEM;
        for (uint32_t i = 0; i < pf->count; i++) {
                const uint8_t *p = payload + PACK_INDEX_HEAD + (size_t)i * PACK_ENTRY_SIZE;
                BvPackEntry *e = &entries[i];

                memcpy(e->id, p, BV_ID_SIZE);
                e->offset = get_le32(p + 32);
                e->length = get_le32(p + 36);
                e->raw_length = get_le32(p + 40);
                e->type = p[44];
                e->member = p[45];
                if (e->length < PACK_MIN_OBJECT || e->raw_length > BV_OBJECT_MAX_RAW || e->type < BV_OBJ_TYPE_MIN ||
                    e->type > BV_OBJ_TYPE_MAX || p[46] || p[47])
                        return -EBADMSG;
                if (!entry_continues_group(prev, e)) {
                        /* a new object, which ends the one before */
                        if (e->offset != next || e->member != 0 || group_of_one(prev))
                                return -EBADMSG;
                        next += e->length;
                }
                prev = e;
        }
        if (next != pf->index_offset || group_of_one(prev))
                return -EBADMSG;
        *ret = TAKE_PTR(entries);
        *ret_count = pf->count;
        return 0;
}

static int pack_index_decode(BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE], const PackFooter *pf,
                             const void *obj, BvPackEntry **ret, size_t *ret_count)
{
        _cleanup_free_ uint8_t *payload = NULL;
        uint8_t id[BV_ID_SIZE];
        size_t cap = PACK_INDEX_HEAD + (size_t)pf->count * PACK_ENTRY_SIZE, len;
        int r;

        payload = malloc(cap);
        if (!payload)
                return -ENOMEM;
        pack_index_id(pack_id, id);
        r = bv_object_decode(codec, BV_OBJ_PACKINDEX, id, obj, pf->index_length, payload, cap, &len);
        if (r == -ENOBUFS)
                return -EBADMSG; /* authentic, but longer than the footer's count allows */
        if (r < 0)
                return r;
        return pack_entries_parse(payload, len, pf, ret, ret_count);
}

int bv_pack_parse_index(BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE], const void *pack,
                        size_t size, BvPackEntry **ret_entries, size_t *ret_count)
{
        const uint8_t *p = pack;
        PackFooter pf;
        int r;

        if (!codec || !pack_id || (!pack && size > 0) || !ret_entries || !ret_count)
                return -EINVAL;
        if (size < BV_PACK_HEADER_SIZE + BV_PACK_FOOTER_SIZE)
                return -EBADMSG;
        r = pack_header_check(p, pack_id);
        if (r < 0)
                return r;
        r = pack_footer_parse(p + size - BV_PACK_FOOTER_SIZE, size, &pf);
        if (r < 0)
                return r;
        return pack_index_decode(codec, pack_id, &pf, p + pf.index_offset, ret_entries, ret_count);
}

/* ---- writer ---- */

struct BvPackWriter {
        int packs_dirfd;     /* borrowed; -EBADF when writing through backend */
        BvBackend *backend;  /* borrowed: a remote repository's, written through its writers */
        BvObjWriter *ow;     /* the backend's writer of the pack being written */
        BvObjectCodec *codec;
        int fd; /* the temporary file of the pack being written, or -EBADF */
        char tmpname[64];
        uint8_t pack_id[BV_PACK_ID_SIZE];
        uint64_t size; /* bytes of the pack so far, buffered or written */
        uint8_t *buf;
        size_t buf_len;
        BvPackEntry *entries;
        size_t count, cap;
};

static int pack_writer_alloc(int packs_dirfd, BvBackend *backend, BvObjectCodec *codec, BvPackWriter **ret)
{
        BvPackWriter *w;

        if ((packs_dirfd < 0 && !backend) || !codec || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->buf = malloc(PACK_WRITE_BUFFER);
        if (!w->buf) {
                free(w);
                return -ENOMEM;
        }
        w->packs_dirfd = backend ? -EBADF : packs_dirfd;
        w->backend = backend;
        w->codec = codec;
        w->fd = -EBADF;
        *ret = w;
        return 0;
}

int bv_pack_writer_new(int packs_dirfd, BvObjectCodec *codec, BvPackWriter **ret)
{
        return pack_writer_alloc(packs_dirfd, NULL, codec, ret);
}

int bv_pack_writer_new_backend(BvBackend *b, BvObjectCodec *codec, BvPackWriter **ret)
{
        return b ? pack_writer_alloc(-EBADF, b, codec, ret) : -EINVAL;
}

/* Drops the pack being written: its temporary file and its entries. */
static void pack_writer_reset(BvPackWriter *w)
{
        if (w->ow) {
                bv_obj_writer_abort(w->ow); /* it owns the fd */
                w->ow = NULL;
                w->fd = -EBADF;
        }
        if (w->fd >= 0)
                bv_tmpfile_discard(w->packs_dirfd, w->tmpname);
        w->fd = safe_close(w->fd);
        w->tmpname[0] = '\0';
        w->size = 0;
        w->buf_len = 0;
        w->count = 0;
}

void bv_pack_writer_free(BvPackWriter *w)
{
        if (!w)
                return;
        pack_writer_reset(w);
        free(w->entries);
        free(w->buf);
        free(w);
}

uint64_t bv_pack_writer_size(const BvPackWriter *w)
{
        return w ? w->size : 0;
}

size_t bv_pack_writer_count(const BvPackWriter *w)
{
        return w ? w->count : 0;
}

static int pack_writer_flush(BvPackWriter *w)
{
        int r;

        if (w->buf_len == 0)
                return 0;
        r = bv_write_all(w->fd, w->buf, w->buf_len);
        if (r < 0)
                return r;
        w->buf_len = 0;
        return 0;
}

/* Appends bytes to the pack through the write buffer. */
static int pack_writer_put(BvPackWriter *w, const void *data, size_t len)
{
        int r;

        if (w->buf_len + len > PACK_WRITE_BUFFER) {
                r = pack_writer_flush(w);
                if (r < 0)
                        return r;
        }
        if (len >= PACK_WRITE_BUFFER)
                r = bv_write_all(w->fd, data, len);
        else {
                memcpy(w->buf + w->buf_len, data, len);
                w->buf_len += len;
                r = 0;
        }
        if (r < 0)
                return r;
        w->size += len;
        return 0;
}

/* Opens the temporary file of a new pack and writes its header. */
static int pack_writer_start(BvPackWriter *w)
{
        uint8_t header[BV_PACK_HEADER_SIZE];
        int r;

        r = bv_random_bytes(w->pack_id, BV_PACK_ID_SIZE);
        if (r < 0)
                return r;
        if (w->backend) {
                r = bv_obj_writer_open(w->backend, BV_KIND_PACK, &w->ow);
                if (r < 0)
                        return r;
                w->fd = bv_obj_writer_fd(w->ow);
        } else
                r = bv_tmpfile_open(w->packs_dirfd, &w->fd, w->tmpname);
        if (r < 0)
                return r;
        r = bv_share_file(w->packs_dirfd, w->fd); /* unlinked on failure with the writer */
        if (r < 0)
                return r;
        pack_header_build(header, w->pack_id);
        return pack_writer_put(w, header, sizeof(header));
}

/* Makes room for n more entries and writes the encoded object; returns its offset. */
static int64_t pack_writer_put_object(BvPackWriter *w, size_t n, const void *encoded, size_t len)
{
        uint64_t start = w->fd >= 0 ? w->size : BV_PACK_HEADER_SIZE;
        int r;

        if (len > UINT32_MAX - start || n > PACK_MAX_ENTRIES - w->count)
                return -EFBIG;
        r = BV_ARRAY_RESERVE(w->entries, w->cap, w->count + n, 1024);
        if (r < 0)
                return r;
        if (w->fd < 0) {
                r = pack_writer_start(w);
                if (r < 0)
                        goto fail_reset;
        }
        r = pack_writer_put(w, encoded, len);
        if (r < 0)
                goto fail_reset;
        return (int64_t)start;

fail_reset:
        pack_writer_reset(w);
        return r;
}

int bv_pack_writer_append(BvPackWriter *w, BvObjectType type, const uint8_t id[BV_ID_SIZE], uint32_t raw_length,
                          const void *encoded, size_t len)
{
        int64_t start;

        if (!w || !id || !encoded || len < PACK_MIN_OBJECT || type < BV_OBJ_TYPE_MIN || type > BV_OBJ_TYPE_MAX ||
            type == BV_OBJ_GROUP || raw_length > BV_OBJECT_MAX_RAW)
                return -EINVAL;
        start = pack_writer_put_object(w, 1, encoded, len);
        if (start < 0)
                return (int)start;
        w->entries[w->count++] = (BvPackEntry){
                .type = (uint8_t)type,
                .offset = (uint32_t)start,
                .length = (uint32_t)len,
                .raw_length = raw_length,
        };
        memcpy(w->entries[w->count - 1].id, id, BV_ID_SIZE);
        return 0;
}

int bv_pack_writer_append_group(BvPackWriter *w, const BvGroupMember *members, size_t count, const void *encoded,
                                size_t len)
{
        int64_t start;

        if (!w || !members || count < 2 || count > BV_GROUP_MAX_MEMBERS || !encoded || len < PACK_MIN_OBJECT)
                return -EINVAL;
        for (size_t i = 0; i < count; i++)
                if (members[i].length == 0 || members[i].length > BV_OBJECT_MAX_RAW)
                        return -EINVAL;
        start = pack_writer_put_object(w, count, encoded, len);
        if (start < 0)
                return (int)start;
        for (size_t i = 0; i < count; i++) {
                BvPackEntry *e = &w->entries[w->count++];
                *e = (BvPackEntry){
                        .type = BV_OBJ_GROUP,
                        .member = (uint8_t)i,
                        .offset = (uint32_t)start,
                        .length = (uint32_t)len,
                        .raw_length = members[i].length,
                };
                memcpy(e->id, members[i].id, BV_ID_SIZE);
        }
        return 0;
}

/* Writes the pack index object and the footer. */
static int pack_writer_finish(BvPackWriter *w)
{
        _cleanup_free_ uint8_t *payload = NULL, *obj = NULL;
        size_t plen = PACK_INDEX_HEAD + w->count * PACK_ENTRY_SIZE, olen;
        uint8_t id[BV_ID_SIZE], footer[BV_PACK_FOOTER_SIZE];
        PackFooter pf;
        int r;

        payload = malloc(plen);
        obj = malloc(bv_object_bound(plen));
        if (!payload || !obj)
                return -ENOMEM;
        put_le32(payload, (uint32_t)w->count);
        put_le32(payload + 4, 0);
        for (size_t i = 0; i < w->count; i++)
                pack_entry_put(payload + PACK_INDEX_HEAD + i * PACK_ENTRY_SIZE, &w->entries[i]);
        pack_index_id(w->pack_id, id);
        r = bv_object_encode(w->codec, BV_OBJ_PACKINDEX, id, payload, plen, obj, &olen);
        if (r < 0)
                return r;

        pf = (PackFooter){ .index_offset = w->size, .index_length = (uint32_t)olen, .count = (uint32_t)w->count };
        r = pack_writer_put(w, obj, olen);
        if (r < 0)
                return r;
        pack_footer_build(footer, &pf);
        r = pack_writer_put(w, footer, sizeof(footer));
        if (r < 0)
                return r;
        return pack_writer_flush(w);
}

/* Gives the finished temporary file its name packs/xx/<hex>.pack, durably. */
static int pack_writer_link(BvPackWriter *w)
{
        _cleanup_close_ int subfd = -EBADF;
        char path[64], sub[3];
        int r;

        bv_pack_path(w->pack_id, path);
        if (w->ow) { /* the backend puts it, create-only: a pack is never replaced */
                r = bv_obj_writer_commit(TAKE_PTR(w->ow), path, BV_PUT_CREATE);
                w->fd = -EBADF; /* the writer owned it */
                return r;
        }
        memcpy(sub, path, 2);
        sub[2] = '\0';
        r = bv_mkdirat_shared(w->packs_dirfd, sub);
        if (r >= 0) {
                r = bv_fsync_dir(w->packs_dirfd);
                if (r < 0)
                        return r;
        } else if (r != -EEXIST)
                return r;
        subfd = bv_open_dir_beneath(w->packs_dirfd, sub);
        if (subfd < 0)
                return subfd;

        r = bv_tmpfile_link(w->packs_dirfd, w->fd, w->tmpname, path, false);
        if (r < 0)
                return r;
        w->tmpname[0] = '\0'; /* linked: nothing to discard any more */
        return bv_fsync_dir(subfd);
}

int bv_pack_writer_commit(BvPackWriter *w, uint8_t ret_pack_id[BV_PACK_ID_SIZE], BvPackEntry **ret_entries,
                          size_t *ret_count)
{
        int r;

        if (!w || !ret_pack_id || !ret_entries || !ret_count)
                return -EINVAL;
        if (w->count == 0)
                return -ENODATA;

        r = pack_writer_finish(w);
        if (r >= 0)
                r = pack_writer_link(w);
        if (r < 0) {
                pack_writer_reset(w);
                return r;
        }

        memcpy(ret_pack_id, w->pack_id, BV_PACK_ID_SIZE);
        *ret_entries = TAKE_PTR(w->entries);
        *ret_count = w->count;
        w->cap = 0;
        w->fd = safe_close(w->fd);
        pack_writer_reset(w);
        return 0;
}

int bv_pack_writer_commit_record(BvPackWriter *w, bv_pack_record_fn record, void *userdata)
{
        uint8_t id[BV_PACK_ID_SIZE];
        _cleanup_free_ BvPackEntry *e = NULL;
        size_t n;
        int r = bv_pack_writer_commit(w, id, &e, &n);
        if (r == -ENODATA)
                return 0;
        return r < 0 ? r : record(userdata, id, e, n);
}

/* ---- reading ---- */

/* An open pack; its reads are watched for a stream to prefetch for (WILLNEED). */
typedef struct PackSlot {
        uint8_t pack_id[BV_PACK_ID_SIZE];
        BvObjReader *reader; /* NULL when the slot is free */
        unsigned users;      /* reads in progress: the slot is not evicted while > 0 */
        bool referenced;     /* clock bit */
        BvReadStream stream;
} PackSlot;

struct BvPackSet {
        BvBackend *backend; /* borrowed */
        pthread_mutex_t mutex;
        PackSlot slots[PACKSET_SLOTS];
        unsigned hand;
        bool exact; /* the reads were announced (bv_packset_advise): no stream prefetch */
};

int bv_packset_new(BvBackend *b, BvPackSet **ret)
{
        BvPackSet *p;

        if (!b || !ret)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->backend = b;
        pthread_mutex_init(&p->mutex, NULL);
        *ret = p;
        return 0;
}

void bv_packset_free(BvPackSet *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < PACKSET_SLOTS; i++)
                bv_obj_reader_close(p->slots[i].reader);
        pthread_mutex_destroy(&p->mutex);
        free(p);
}

static int pack_open(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], BvObjReader **ret)
{
        char path[64];
        int r;

        bv_pack_path(pack_id, path);
        r = bv_obj_reader_open(p->backend, BV_KIND_PACK, path, ret);
        /* A pack that is not there, or is not a regular file beneath packs/ (a symbolic link, a
         * FIFO...), is not read: the repository needs repair. */
        if (r == -ENOENT || r == -ELOOP || r == -EBADFD || r == -ENOTDIR)
                return -EUCLEAN;
        return r;
}

/* Picks a slot to reuse with the clock algorithm; NULL if every slot is in use. */
static PackSlot *packset_victim(BvPackSet *p)
{
        for (unsigned n = 0; n < 2 * PACKSET_SLOTS; n++) {
                PackSlot *s = &p->slots[p->hand];

                p->hand = (p->hand + 1) % PACKSET_SLOTS;
                if (s->users > 0)
                        continue;
                if (s->reader && s->referenced) {
                        s->referenced = false;
                        continue;
                }
                return s;
        }
        return NULL;
}

/* Returns a slot holding the pack open, with one more user; or, when the cache is full of
 * busy slots, *ret_reader gets an uncached reader the caller closes. Caller holds p->mutex.
 * Opening a pack is a HEAD on S3: under the mutex, as a local open is; the reads are not. */
static int packset_get_locked(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], PackSlot **ret_slot,
                              BvObjReader **ret_reader)
{
        BvObjReader *rd;
        PackSlot *s;
        int r;

        for (size_t i = 0; i < PACKSET_SLOTS; i++) {
                s = &p->slots[i];
                if (s->reader && memcmp(s->pack_id, pack_id, BV_PACK_ID_SIZE) == 0) {
                        s->users++;
                        s->referenced = true;
                        *ret_slot = s;
                        return 0;
                }
        }
        r = pack_open(p, pack_id, &rd);
        if (r < 0)
                return r;
        s = packset_victim(p);
        if (!s) {
                *ret_slot = NULL;
                *ret_reader = rd;
                return 0;
        }
        bv_obj_reader_close(s->reader);
        *s = (PackSlot){ .reader = rd, .users = 1, .referenced = true };
        memcpy(s->pack_id, pack_id, BV_PACK_ID_SIZE);
        *ret_slot = s;
        return 0;
}

static int packset_get(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], PackSlot **ret_slot,
                       BvObjReader **ret_reader)
{
        BV_LOCK_GUARD(&p->mutex);
        return packset_get_locked(p, pack_id, ret_slot, ret_reader);
}

uint64_t bv_read_stream_note(BvReadStream *s, uint64_t offset, uint64_t end, uint64_t *ret_from)
{
        bool near = offset <= s->last_end + BV_READ_STREAM_GAP && offset + BV_READ_STREAM_GAP >= s->last_end;

        if (near)
                s->streak++;
        else
                *s = (BvReadStream){ 0 }; /* a new stream: what was prefetched for the old one is no guide */
        s->last_end = end;
        if (s->streak + 1 < BV_READ_STREAM_MIN || s->prefetched >= end + BV_READ_PREFETCH / 2)
                return 0;
        *ret_from = MAX(s->prefetched, end);
        s->prefetched = end + BV_READ_PREFETCH;
        return s->prefetched - *ret_from;
}

static void packset_put(BvPackSet *p, PackSlot *s, BvObjReader *rd)
{
        if (!s) {
                bv_obj_reader_close(rd);
                return;
        }
        BV_LOCK_GUARD(&p->mutex);
        s->users--;
}

static int packset_pread(BvObjReader *rd, void *buf, size_t len, uint64_t offset)
{
        ssize_t n;

        if (offset > UINT64_MAX - len)
                return -EBADMSG;
        n = bv_obj_reader_pread(rd, buf, len, offset);
        if (n < 0)
                return (int)n;
        if ((size_t)n != len)
                return -EBADMSG;
        return 0;
}

int bv_packset_read(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t offset, void *buf, size_t len)
{
        BvObjReader *rd = NULL;
        uint64_t from, n = 0;
        PackSlot *s;
        int r;

        if (!p || !pack_id || (!buf && len > 0))
                return -EINVAL;
        {
                /* One lock round for the slot and the stream: every pack read comes here. */
                BV_LOCK_GUARD(&p->mutex);
                r = packset_get_locked(p, pack_id, &s, &rd);
                if (r < 0)
                        return r;
                if (s && !p->exact && offset <= UINT64_MAX - BV_READ_PREFETCH - len)
                        n = bv_read_stream_note(&s->stream, offset, offset + len, &from);
        }
        if (n > 0)
                bv_obj_reader_advise(s->reader, from, n);
        r = packset_pread(s ? s->reader : rd, buf, len, offset);
        packset_put(p, s, rd);
        return r;
}

int bv_packset_advise(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t offset, uint64_t len)
{
        BvObjReader *rd = NULL;
        PackSlot *s;
        int r;

        if (!p || !pack_id)
                return -EINVAL;
        r = packset_get(p, pack_id, &s, &rd);
        if (r < 0)
                return r;
        bv_obj_reader_advise(s ? s->reader : rd, offset, len);
        packset_put(p, s, rd);
        return 0;
}

void bv_packset_set_exact(BvPackSet *p, bool exact)
{
        BV_LOCK_GUARD(&p->mutex);
        p->exact = exact;
}

static int packset_read_index_from(BvObjReader *rd, BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE],
                                   BvPackEntry **ret_entries, size_t *ret_count)
{
        _cleanup_free_ uint8_t *obj = NULL;
        uint8_t header[BV_PACK_HEADER_SIZE], footer[BV_PACK_FOOTER_SIZE];
        uint64_t size = bv_obj_reader_size(rd);
        PackFooter pf;
        int r;

        if (size < BV_PACK_HEADER_SIZE + BV_PACK_FOOTER_SIZE)
                return -EBADMSG;
        r = packset_pread(rd, header, sizeof(header), 0);
        if (r < 0)
                return r;
        r = pack_header_check(header, pack_id);
        if (r < 0)
                return r;
        r = packset_pread(rd, footer, sizeof(footer), size - BV_PACK_FOOTER_SIZE);
        if (r < 0)
                return r;
        r = pack_footer_parse(footer, size, &pf);
        if (r < 0)
                return r;
        if (pf.index_length > bv_object_bound(BV_OBJECT_MAX_RAW))
                return -EBADMSG;
        obj = malloc(pf.index_length ? pf.index_length : 1);
        if (!obj)
                return -ENOMEM;
        r = packset_pread(rd, obj, pf.index_length, pf.index_offset);
        if (r < 0)
                return r;
        return pack_index_decode(codec, pack_id, &pf, obj, ret_entries, ret_count);
}

int bv_packset_read_index(BvPackSet *p, BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE],
                          BvPackEntry **ret_entries, size_t *ret_count)
{
        BvObjReader *rd = NULL;
        PackSlot *s;
        int r;

        if (!p || !codec || !pack_id || !ret_entries || !ret_count)
                return -EINVAL;
        r = packset_get(p, pack_id, &s, &rd);
        if (r < 0)
                return r;
        r = packset_read_index_from(s ? s->reader : rd, codec, pack_id, ret_entries, ret_count);
        packset_put(p, s, rd);
        return r;
}

/* Parses "xx/<32 lowercase hex>.pack" whose folder xx is the id's first two digits: exactly the
 * names bv_pack_path gives. */
static bool pack_name_parse(const char *name, uint8_t pack_id[BV_PACK_ID_SIZE])
{
        char hex[2 * BV_PACK_ID_SIZE + 1], check[2 * BV_PACK_ID_SIZE + 1];
        const char *base = name + 3;

        if (strlen(name) != 3 + 2 * BV_PACK_ID_SIZE + 5 || name[2] != '/' ||
            strcmp(base + 2 * BV_PACK_ID_SIZE, ".pack") != 0 || strncmp(name, base, 2) != 0)
                return false;
        memcpy(hex, base, 2 * BV_PACK_ID_SIZE);
        hex[2 * BV_PACK_ID_SIZE] = '\0';
        if (bv_hex_decode(hex, pack_id, BV_PACK_ID_SIZE) < 0)
                return false;
        bv_hex_encode(pack_id, BV_PACK_ID_SIZE, check);
        return strcmp(check, hex) == 0;
}

/* A folder name of packs/: two lowercase hex digits. */
static bool pack_folder_name(const char *name)
{
        uint8_t b;
        char check[3];

        if (strlen(name) != 2 || bv_hex_decode(name, &b, 1) < 0)
                return false;
        bv_hex_encode(&b, 1, check);
        return strcmp(check, name) == 0;
}

typedef struct PackList {
        int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud);
        void *userdata;
        char *refused; /* NULL: skip foreign entries */
        int count;
} PackList;

/* An entry of the backend's listing of packs: "xx/<id>.pack" (S_IFREG for a pack), or what the
 * local backend met in packs/ that is not a folder ("xx"). A pack or pack folder that is not what
 * it should be is refused (named in refused, -ELOOP for a symbolic link, -EBADFD for another
 * type) when refused is not NULL, else skipped; other names are not the packs' and are ignored. */
static int pack_list_entry(const BvObjEntry *e, void *userdata)
{
        PackList *l = userdata;
        uint8_t id[BV_PACK_ID_SIZE];

        if (!pack_name_parse(e->name, id) && !pack_folder_name(e->name))
                return 0;
        if (e->type != S_IFREG || !strchr(e->name, '/')) {
                if (!l->refused)
                        return 0;
                snprintf(l->refused, 64, "%.48s", e->name); /* names are checked: 2 or 40 bytes */
                return e->type == S_IFLNK ? -ELOOP : -EBADFD;
        }
        l->count++;
        return l->cb(id, e->size, l->userdata);
}

int bv_packset_list_strict(BvPackSet *p,
                           int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud),
                           void *userdata, char refused[64])
{
        PackList l = { .cb = cb, .userdata = userdata, .refused = refused };
        int r;

        if (!p || !cb)
                return -EINVAL;
        r = bv_backend_list(p->backend, BV_KIND_PACK, pack_list_entry, &l);
        return r < 0 ? r : l.count;
}

int bv_packset_list(BvPackSet *p, int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud),
                    void *userdata)
{
        return bv_packset_list_strict(p, cb, userdata, NULL);
}

