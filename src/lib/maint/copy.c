/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Copying snapshots to a related repository (copy.h; docs/LIFECYCLE.md, "Copies").
 *
 * Mark: each wanted snapshot's map is walked in SRC (a subtree seen before is skipped, as gc's
 * mark does), and every object it uses that DST's index lacks sets a bit over SRC's index
 * positions. Send: each SRC pack holding such an object goes whole when every entry of its own
 * index is wanted (its bytes, the same keys: nothing is decoded or sealed again); otherwise the
 * wanted objects, as stored (a group with all its members), go into new packs. DST's index gets
 * a segment after every COPY_FLUSH_BYTES sent, and a killed copy's packs that no segment names
 * yet are adopted when the next copy opens DST (write/adopt.h), so nothing finished is sent
 * twice. Publish: the snapshot records last, each under locks/commit after heal.h's check, as a
 * backup commits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-s3.h"
#include "buf.h"
#include "copy-internal.h"
#include "fileio.h"
#include "group-write.h"
#include "macro.h"
#include "maptree.h"
#include "timeutil.h"

#define COPY_FLUSH_BYTES (1ull << 30) /* an index segment at DST after this much sent */
#define COPY_BUF (4u << 20)          /* a whole pack travels in pieces of this size */
#define INDEX_MAX_SEGMENTS 16u

/* A rate limit: sleeps so that bytes counted since the first stay at or below rate per second. */
typedef struct Pace {
        uint64_t rate, bytes, start_ns;
} Pace;

typedef struct PackIds {
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
} PackIds;

typedef struct Copy {
        BvRepo *src;
        CopyDst *d;
        BvIndex *sx, *dx;
        BvBackend *sb, *db;
        BvObjectCodec *scodec, *dcodec;
        const BvCopyOptions *o;
        BvCopyStats *st;
        const BvSnapshot **snaps; /* to publish, oldest first */
        size_t nsnaps;
        uint8_t *seen, *want; /* bits over SRC's index positions */
        PackIds packs;        /* SRC packs holding a wanted object (sorted, unique after the mark) */
        PackIds resend;       /* sent whole, found at DST, and not to count as sent (whole_done) */
        BvPackWriter *w;      /* new packs at DST */
        CopyUploads *uploads; /* packs in flight to a remote DST (NULL: a local one) */
        uint64_t unflushed;   /* bytes sent since DST's last index segment */
        Pace up, down;
        BvProgress pr;
        uint64_t start_ns;
        void *buf;
        size_t buf_size;
} Copy;

static inline bool bit_test(const uint8_t *b, uint64_t i)
{
        return b[i >> 3] & (1u << (i & 7));
}

static inline void bit_set(uint8_t *b, uint64_t i)
{
        b[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static int pack_id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static void pace(Pace *p, uint64_t n)
{
        if (p->rate == 0)
                return;
        uint64_t now = bv_now_monotonic_ns();
        if (p->start_ns == 0)
                p->start_ns = now;
        p->bytes += n;
        uint64_t due = p->start_ns + (uint64_t)((double)p->bytes * 1e9 / (double)p->rate);
        if (due > now) {
                struct timespec ts = { .tv_sec = (time_t)((due - now) / 1000000000u),
                                       .tv_nsec = (long)((due - now) % 1000000000u) };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
}

static void progress(Copy *c)
{
        if (!c->o->progress)
                return;
        c->pr.work_done = c->st->bytes_sent;
        c->pr.elapsed_ns = bv_now_monotonic_ns() - c->start_ns;
        c->o->progress(&c->pr, c->o->progress_userdata);
}

static bool cancelled(const Copy *c)
{
        return c->o->cancelled && c->o->cancelled();
}

static void culprit_pack(Copy *c, const uint8_t id[BV_PACK_ID_SIZE])
{
        char name[64], key[BV_BACKEND_KEY_MAX];
        bv_pack_path(id, name);
        if (bv_obj_key(BV_KIND_PACK, name, key) >= 0)
                snprintf(c->st->culprit, sizeof(c->st->culprit), "%s", key);
}

/* ---- which snapshots ---- */

typedef struct Names {
        char (*ids)[2 * BV_SNAPSHOT_ID_SIZE + 1];
        size_t n, cap;
} Names;

static int name_add(const BvObjEntry *e, void *userdata)
{
        Names *l = userdata;
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        if (!bv_snapshot_file_id(e->name, id))
                return 0; /* a protection mark, a temporary file */
        if (BV_ARRAY_RESERVE(l->ids, l->cap, l->n + 1, 64) < 0)
                return -ENOMEM;
        memcpy(l->ids[l->n++], id, sizeof(id));
        return 0;
}

static int id_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

static int pick_snapshots(Copy *c)
{
        BvSnapshot *const *list;
        size_t n;
        int r = bv_repo_snapshots(c->src, &list, &n);
        if (r < 0)
                return r;
        Names there = {};
        r = bv_backend_list(c->db, BV_KIND_SNAPSHOT, name_add, &there); /* one LIST, not a HEAD each */
        if (r < 0) {
                free(there.ids);
                return r;
        }
        if (there.n > 1)
                qsort(there.ids, there.n, sizeof(*there.ids), id_cmp);
        _cleanup_free_ char(*there_ids)[2 * BV_SNAPSHOT_ID_SIZE + 1] = there.ids;
        _cleanup_free_ bool *pick = calloc(n + 1, sizeof(bool));
        c->snaps = calloc(n + 1, sizeof(*c->snaps));
        if (!pick || !c->snaps)
                return -ENOMEM;
        for (size_t i = 0; i < c->o->n_snapshots; i++) {
                const BvSnapshot *s;
                r = bv_repo_find_snapshot(c->src, c->o->snapshots[i], &s);
                if (r < 0) {
                        snprintf(c->st->culprit, sizeof(c->st->culprit), "%s", c->o->snapshots[i]);
                        return r;
                }
                for (size_t j = 0; j < n; j++)
                        pick[j] |= list[j] == s;
        }
        for (size_t i = 0; i < n; i++) {
                if (c->o->n_snapshots > 0 && !pick[i])
                        continue;
                if (there.n > 0 && bsearch(list[i]->id, there_ids, there.n, sizeof(*there_ids), id_cmp))
                        c->st->snapshots_present++;
                else
                        c->snaps[c->nsnaps++] = list[i];
        }
        return 0;
}

/* ---- mark ---- */

static int packs_add(PackIds *p, const uint8_t id[BV_PACK_ID_SIZE])
{
        if (p->n > 0 && memcmp(p->ids[p->n - 1], id, BV_PACK_ID_SIZE) == 0)
                return 0; /* the common case: a snapshot's objects lie together */
        if (BV_ARRAY_RESERVE(p->ids, p->cap, p->n + 1, 256) < 0)
                return -ENOMEM;
        memcpy(p->ids[p->n++], id, BV_PACK_ID_SIZE);
        return 0;
}

static void packs_unique(PackIds *p)
{
        size_t k = 0;
        if (p->n > 1)
                qsort(p->ids, p->n, BV_PACK_ID_SIZE, pack_id_cmp);
        for (size_t i = 0; i < p->n; i++)
                if (k == 0 || memcmp(p->ids[k - 1], p->ids[i], BV_PACK_ID_SIZE) != 0)
                        memmove(p->ids[k++], p->ids[i], BV_PACK_ID_SIZE);
        p->n = k;
}

/* 1: seen before (a map node's subtree is then skipped), 0: marked now (bv_map_walk_ids). */
static int mark_id(void *userdata, const uint8_t id[BV_ID_SIZE])
{
        Copy *c = userdata;
        BvLocation loc, there;
        uint64_t pos;
        int r = bv_index_lookup_position(c->sx, id, &loc, &pos);
        if (r == -ENOENT)
                return -EUCLEAN; /* SRC's snapshot does not read: verify says what it lost */
        if (r < 0)
                return r;
        if (bit_test(c->seen, pos))
                return 1;
        bit_set(c->seen, pos);
        r = bv_index_lookup(c->dx, id, &there);
        if (r == 0) {
                c->st->objects_present++;
                return 0;
        }
        if (r != -ENOENT)
                return r;
        bit_set(c->want, pos);
        return packs_add(&c->packs, loc.pack_id);
}

static int mark_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Copy *c = userdata;
        return bv_repo_read_object_alloc(c->src, c->scodec, BV_OBJ_MAP, id, ret_node, ret_len);
}

static int mark(Copy *c)
{
        uint64_t bytes = bv_index_positions(c->sx) / 8 + 1;
        c->seen = calloc(bytes, 1);
        c->want = calloc(bytes, 1);
        if (!c->seen || !c->want)
                return -ENOMEM;
        for (size_t i = 0; i < c->nsnaps; i++) {
                const BvSnapshot *s = c->snaps[i];
                int r = bv_map_walk_ids(s->root, s->height, s->size, mark_fetch, c, mark_id, c);
                if (r < 0) {
                        snprintf(c->st->culprit, sizeof(c->st->culprit), "snapshots/%s.snap", s->id);
                        return r;
                }
        }
        packs_unique(&c->packs);
        return 0;
}

static int on_pack_size(const uint8_t id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        Copy *c = userdata;
        if (c->packs.n > 0 && bsearch(id, c->packs.ids, c->packs.n, BV_PACK_ID_SIZE, pack_id_cmp))
                c->pr.total += size;
        return 0;
}

/* ---- send ---- */

/* Whether entry e of SRC pack id is the winning location of an object DST lacks. */
static bool entry_wanted(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e)
{
        BvLocation loc;
        uint64_t pos;
        return bv_index_lookup_position(c->sx, e->id, &loc, &pos) == 0 && bit_test(c->want, pos) &&
               memcmp(loc.pack_id, id, BV_PACK_ID_SIZE) == 0 && loc.offset == e->offset && loc.member == e->member;
}

/* After a pack reached DST durably: its entries into DST's index, a segment once enough went. */
static int pack_sent(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n, uint64_t bytes)
{
        int r = bv_index_add_pack(c->dx, id, e, n);
        if (r < 0)
                return r;
        c->st->objects_sent += n;
        c->st->bytes_sent += bytes;
        c->unflushed += bytes;
        if (c->unflushed >= COPY_FLUSH_BYTES) {
                c->unflushed = 0;
                return copy_dst_flush(c->d);
        }
        return 0;
}

/* A SRC pack's bytes into fd (through c->buf), or into mem (fd < 0), in pieces, paced. */
static int send_reader(Copy *c, BvObjReader *rd, int fd, uint8_t *mem)
{
        uint64_t size = bv_obj_reader_size(rd);
        for (uint64_t off = 0; off < size;) {
                if (cancelled(c))
                        return -ECANCELED;
                size_t len = (size_t)MIN((uint64_t)COPY_BUF, size - off);
                void *buf = mem ? mem + off : c->buf;
                ssize_t got = bv_obj_reader_pread(rd, buf, len, off);
                if (got < 0)
                        return (int)got;
                if ((size_t)got != len)
                        return -EBADMSG; /* the pack ended early */
                c->st->bytes_read += len;
                pace(&c->down, len);
                int r = mem ? 0 : bv_write_all(fd, buf, len);
                if (r < 0)
                        return r;
                pace(&c->up, len);
                off += len;
                c->pr.done += len;
                c->pr.work_done = c->st->bytes_sent + off;
                progress(c);
        }
        return 0;
}

/* The bytes of a pack's objects (a group's once). */
static uint64_t entries_bytes(const BvPackEntry *e, size_t n)
{
        uint64_t bytes = 0;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || e[i].offset != e[i - 1].offset)
                        bytes += e[i].length;
        return bytes;
}

/* How the put of a whole SRC pack ended (r). Already there: an interrupted copy sent it and no
 * segment names it, or another copy did meanwhile (named by this copy's segment now), or a gc at
 * DST condemned it (sent again in a new pack). */
static int whole_done(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n, uint64_t size, int r)
{
        if (r == -EEXIST && (r = copy_dst_pack_reusable(c->d, id)) == 0)
                return packs_add(&c->resend, id); /* by send(), not from inside a put's end */
        if (r < 0) {
                culprit_pack(c, id);
                return r;
        }
        c->st->packs_whole++;
        return pack_sent(c, id, e, n, size);
}

/* A put in flight that ended (copy-upload.c): a whole SRC pack, or a new one. */
static int upload_done(void *userdata, const CopyUpload *u, int r)
{
        Copy *c = userdata;
        if (u->bad) { /* the check failed: nothing was put */
                c->st->culprit_offset = u->bad_offset;
                c->st->culprit_has_offset = true;
        }
        if (u->whole)
                return whole_done(c, u->id, u->e, u->n, u->size, r);
        /* a new pack's name is random: one there is this put's own, done by an attempt whose
         * answer came too late and met create-only by its retry (412), as put_file() takes it */
        if (r == -EEXIST)
                r = 0;
        if (r < 0) {
                culprit_pack(c, u->id);
                return r;
        }
        c->st->packs_written++;
        return pack_sent(c, u->id, u->e, u->n, entries_bytes(u->e, u->n));
}

/* An upload of n entries e (copied) for pack id; its bytes to come. */
static CopyUpload *upload_new(const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n, bool whole)
{
        CopyUpload *u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        *u = (CopyUpload){ .n = n, .whole = whole };
        memcpy(u->id, id, BV_PACK_ID_SIZE);
        if (!(u->e = malloc(n * sizeof(*e) + 1))) {
                free(u);
                return NULL;
        }
        memcpy(u->e, e, n * sizeof(*e));
        return u;
}

/* A whole SRC pack to a remote DST: read into memory, then checked there (what goes is the bytes
 * checked, with no spool file written and read back) and put by an upload thread while the next
 * packs are read. */
static int send_whole_mem(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n,
                          BvObjReader *rd)
{
        CopyUpload *u = upload_new(id, e, n, true);
        if (!u)
                return -ENOMEM;
        u->check = bv_repo_keyring(c->src);
        u->size = bv_obj_reader_size(rd);
        int r = copy_uploads_buf(c->uploads, u);
        if (r >= 0)
                r = send_reader(c, rd, -EBADF, u->data);
        if (r < 0) {
                copy_upload_free(u);
                return r;
        }
        return copy_uploads_submit(c->uploads, u, upload_done, c);
}

/* A pack whose every object DST lacks: its bytes, under its name. */
static int send_whole(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n)
{
        char name[64];
        BvObjReader *rd = NULL;
        BvObjWriter *w = NULL;
        bv_pack_path(id, name);
        int r = bv_obj_reader_open(c->sb, BV_KIND_PACK, name, &rd);
        if (r >= 0 && c->uploads && bv_obj_reader_size(rd) <= COPY_UPLOAD_PACK_MAX) {
                r = send_whole_mem(c, id, e, n, rd);
                bv_obj_reader_close(rd);
                return r;
        }
        if (r >= 0)
                r = bv_obj_writer_open(c->db, BV_KIND_PACK, &w);
        if (r >= 0)
                r = send_reader(c, rd, bv_obj_writer_fd(w), NULL);
        if (r >= 0) /* the bytes about to be committed, read back and checked */
                r = copy_check_pack_fd(c->scodec, bv_repo_keyring(c->src), bv_obj_writer_fd(w), e, n, c->buf,
                                       c->buf_size, &c->st->culprit_offset);
        if (r == -EBADMSG)
                c->st->culprit_has_offset = true;
        uint64_t size = rd ? bv_obj_reader_size(rd) : 0;
        if (r >= 0)
                r = bv_obj_writer_commit(w, name, BV_PUT_CREATE);
        else if (w)
                bv_obj_writer_abort(w);
        if (rd)
                bv_obj_reader_close(rd);
        return r < 0 && r != -EEXIST ? r : whole_done(c, id, e, n, size, r);
}

/* A new pack committed: at DST (a remote one gets it now), then recorded. */
static int pack_record(void *userdata, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n)
{
        Copy *c = userdata;
        if (c->uploads) { /* the spool file into memory, put by an upload thread */
                CopyUpload *u = upload_new(id, e, n, false);
                if (!u)
                        return -ENOMEM;
                int r = copy_dst_pack_take(c->d, id, COPY_UPLOAD_PACK_MAX, &u->data, &u->size);
                if (r >= 0)
                        return copy_uploads_submit(c->uploads, u, upload_done, c);
                copy_upload_free(u);
                if (r != -EFBIG)
                        return r;
        }
        int r = copy_dst_pack_committed(c->d, id);
        if (r < 0)
                return r;
        c->st->packs_written++;
        return pack_sent(c, id, e, n, entries_bytes(e, n));
}

static int writer_commit(Copy *c)
{
        return bv_pack_writer_commit_record(c->w, pack_record, c);
}

/* One object as stored (a group: its n members) into DST's new pack, committed when full. */
static int send_object(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n)
{
        BvGroupMember m[BV_GROUP_MAX_MEMBERS];
        if (n > BV_GROUP_MAX_MEMBERS)
                return -EBADMSG;
        for (size_t k = 0; k < n; k++) {
                memcpy(m[k].id, e[k].id, BV_ID_SIZE);
                m[k].length = e[k].raw_length;
        }
        int r = bv_packset_read(bv_repo_packs(c->src), id, e[0].offset, c->buf, e[0].length);
        if (r < 0)
                return r;
        c->st->bytes_read += e[0].length;
        pace(&c->down, e[0].length);
        r = copy_check_object(c->scodec, bv_repo_keyring(c->src), e, n, c->buf);
        if (r == -EBADMSG) {
                c->st->culprit_offset = e[0].offset;
                c->st->culprit_has_offset = true;
        }
        if (r < 0)
                return r;
        r = bv_group_append(c->w, (BvObjectType)e[0].type, m, n, c->buf, e[0].length);
        if (r == -EFBIG) {
                r = writer_commit(c);
                if (r >= 0)
                        r = bv_group_append(c->w, (BvObjectType)e[0].type, m, n, c->buf, e[0].length);
        }
        if (r < 0)
                return r;
        pace(&c->up, e[0].length);
        if (bv_pack_writer_size(c->w) >= c->d->config.pack_target)
                return writer_commit(c);
        return 0;
}

/* The wanted objects of a pack that does not go whole (a group goes with every member when one
 * of them is wanted). */
static int send_objects(Copy *c, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n,
                        const bool *wanted)
{
        int r = 0;
        if (!c->w)
                r = bv_pack_writer_new(c->d->packs_fd, c->dcodec, &c->w);
        for (size_t i = 0, j; i < n && r >= 0; i = j) {
                bool any = wanted[i];
                for (j = i + 1; e[i].type == BV_OBJ_GROUP && j < n && e[j].offset == e[i].offset; j++)
                        any |= wanted[j];
                if (any)
                        r = send_object(c, id, e + i, j - i);
        }
        if (r >= 0)
                c->st->packs_repacked++;
        return r;
}

/* The packs found at DST already that may not count as sent (copy_dst_pack_reusable: a condemned
 * list names it): their objects go in a new pack. */
static int send_again(Copy *c)
{
        int r = 0;
        while (r >= 0 && c->resend.n > 0) {
                _cleanup_free_ BvPackEntry *e = NULL;
                _cleanup_free_ bool *all = NULL;
                const uint8_t *id = c->resend.ids[--c->resend.n];
                size_t n;
                r = bv_packset_read_index(bv_repo_packs(c->src), c->scodec, id, &e, &n);
                if (r >= 0)
                        r = (all = malloc(n + 1)) ? 0 : -ENOMEM;
                if (r >= 0) {
                        memset(all, 1, n + 1);
                        r = send_objects(c, id, e, n, all);
                }
                if (r < 0)
                        culprit_pack(c, id);
        }
        return r;
}

static int send_pack(Copy *c, const uint8_t id[BV_PACK_ID_SIZE])
{
        _cleanup_free_ BvPackEntry *e = NULL;
        _cleanup_free_ bool *wanted = NULL;
        size_t n, nwanted = 0;
        uint64_t size = 0, before = c->pr.done;
        int r = bv_packset_read_index(bv_repo_packs(c->src), c->scodec, id, &e, &n);
        if (r < 0)
                return r;
        wanted = calloc(n + 1, sizeof(bool));
        if (!wanted)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                wanted[i] = entry_wanted(c, id, &e[i]);
                nwanted += wanted[i];
                if (i == 0 || e[i].offset != e[i - 1].offset)
                        size += e[i].length;
        }
        r = nwanted == n ? send_whole(c, id, e, n) : send_objects(c, id, e, n, wanted);
        c->pr.done = before + size;
        progress(c);
        return r;
}

static int send(Copy *c)
{
        int r = bv_packset_list(bv_repo_packs(c->src), on_pack_size, c);
        for (size_t i = 0; i < c->packs.n && r >= 0; i++) {
                r = cancelled(c) ? -ECANCELED : send_pack(c, c->packs.ids[i]);
                if (r < 0 && !c->st->culprit[0])
                        culprit_pack(c, c->packs.ids[i]);
                if (r >= 0)
                        r = send_again(c);
        }
        if (r >= 0 && c->w)
                r = writer_commit(c);
        while (r >= 0 && c->uploads && copy_uploads_pending(c->uploads) > 0) {
                r = copy_uploads_drain(c->uploads, upload_done, c);
                if (r >= 0)
                        r = send_again(c); /* what a put that ended found there */
                if (r >= 0 && c->w)
                        r = writer_commit(c);
        }
        if (r >= 0) { /* a repacked pack's index and unwanted objects were covered without being sent */
                c->pr.done = c->pr.total;
                progress(c);
        }
        if (r >= 0)
                r = copy_dst_flush(c->d); /* every pack sent is durable: the segment naming them */
        return r;
}

/* ---- publish ---- */

/* Compaction rewrites the index: never beside a gc (both take locks/gc); a busy lock skips it. */
static int compact(Copy *c)
{
        if (!c->d->repo)
                return 0; /* a remote DST's segments stay as they are */
        _cleanup_close_ int fd = bv_backend_lock(c->db, BV_LOCK_COMPACT, false);
        if (fd == -EBUSY)
                return 0;
        if (fd < 0)
                return fd;
        return bv_index_compact(c->dx, INDEX_MAX_SEGMENTS);
}

/* Each record under locks/commit, after heal.h put back into DST's index what a gc there
 * condemned since this copy's lease (the objects it found at DST and did not send). */
static int publish(Copy *c)
{
        for (size_t i = 0; i < c->nsnaps; i++) {
                const BvSnapshot *s = c->snaps[i];
                int r = copy_dst_publish(c->d, c->dcodec, s, i == 0);
                if (r == -EEXIST) /* another copy published it meanwhile */
                        r = 0, c->st->snapshots_present++;
                else if (r >= 0) {
                        c->st->snapshots_copied++;
                        if (c->o->published)
                                c->o->published(s, c->o->published_userdata);
                }
                if (r < 0) {
                        snprintf(c->st->culprit, sizeof(c->st->culprit), "snapshots/%s.snap", s->id);
                        return r;
                }
        }
        return 0;
}

static void requests_add(BvBackend *b, uint64_t *n)
{
        bv_s3_stats s;
        if (bv_backend_s3_stats(b, &s) >= 0)
                *n += s.requests;
}

static int copy_run(Copy *c)
{
        uint64_t healed = 0;
        int r = c->d->repo && c->o->object_lock_seconds ? -EOPNOTSUPP : copy_lock_begin(c->d, c->o);
        if (r >= 0)
                r = copy_dst_adopt(c->d, c->src, c->dcodec, &c->st->packs_resumed, &c->st->bytes_resumed);
        if (r >= 0)
                r = pick_snapshots(c);
        if (r >= 0)
                r = mark(c);
        if (r >= 0)
                r = send(c);
        if (r >= 0)
                r = compact(c);
        if (r >= 0 && cancelled(c))
                r = -ECANCELED;
        if (r >= 0)
                r = publish(c);
        if (r >= 0) /* a gc elsewhere that condemned beside the records */
                r = copy_dst_settle(c->d, c->src, c->scodec, c->snaps, c->nsnaps, &healed);
        if (r >= 0)
                r = copy_lock_extend(c->d, c->o, &c->st->objects_retained, c->st->culprit, sizeof(c->st->culprit));
        if (r >= 0)
                copy_dst_done(c->d);
        return r;
}

int bv_copy(BvRepo *src, BvCopyDst *dst, const BvCopyOptions *o, BvCopyStats *ret)
{
        BvCopyStats st = {};
        Copy c = {
                .src = src, .d = dst, .o = o, .st = &st,
                .sx = bv_repo_index(src), .dx = dst->x,
                .sb = bv_repo_backend(src), .db = dst->b,
                .up = { .rate = o->limit_upload }, .down = { .rate = o->limit_download },
                .pr = { .work_total = UINT64_MAX }, /* the work is what the packs to go through hold */
                .start_ns = bv_now_monotonic_ns(),
        };
        int r = bv_object_codec_new(bv_repo_keyring(src), 0, &c.scodec);
        if (r >= 0)
                r = bv_object_codec_new(dst->repo ? bv_repo_keyring(dst->repo) : dst->keyring, dst->config.zstd_level,
                                        &c.dcodec);
        if (r >= 0)
                c.buf_size = MAX(COPY_BUF, bv_object_bound(BV_OBJECT_MAX_RAW));
        if (r >= 0)
                r = (c.buf = malloc(c.buf_size)) ? 0 : -ENOMEM;
        if (r >= 0 && !dst->repo)
                r = copy_uploads_new(c.db, &c.uploads);
        if (r >= 0)
                r = copy_run(&c);
        copy_uploads_free(c.uploads);
        bv_pack_writer_free(c.w);
        free(c.buf);
        free(c.seen);
        free(c.want);
        free(c.packs.ids);
        free(c.resend.ids);
        free(c.snaps);
        bv_object_codec_free(c.scodec);
        bv_object_codec_free(c.dcodec);
        requests_add(c.sb, &st.requests);
        if (c.db != c.sb)
                requests_add(c.db, &st.requests);
        st.seconds = (double)(bv_now_monotonic_ns() - c.start_ns) / 1e9;
        *ret = st;
        return r;
}
