/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rewriting packs (docs/LIFECYCLE.md, condemn step 2): the live objects of a pack gc rewrites go
 * into new packs. An object is copied as it is stored (sealed objects carry nothing that depends
 * on their pack), except a compression group whose unused members hold more than max_unused of
 * its bytes: it is decoded, and only its live members travel, gathered with those of other such
 * groups into new groups by the recipe backups use (store/group-write.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gc-internal.h"
#include "group-write.h"
#include "macro.h"

typedef struct Rewrite {
        Gc *g;
        BvPackWriter *w;
        BvGroupEncoder *enc;
        BvGroupBuf buf; /* live members of partly unused groups, gathered */
} Rewrite;

static bool object_live(Gc *g, const uint8_t pack[BV_PACK_ID_SIZE], const BvPackEntry *e)
{
        BvLocation loc;
        uint64_t pos;
        return bv_index_lookup_position(g->index, e->id, &loc, &pos) == 0 && bit_test(g->bits, pos) &&
               memcmp(loc.pack_id, pack, BV_PACK_ID_SIZE) == 0 && loc.offset == e->offset;
}

static int copy_record(void *userdata, const uint8_t id[BV_PACK_ID_SIZE], const BvPackEntry *e, size_t n)
{
        return bv_index_add_pack(((Rewrite *)userdata)->g->index, id, e, n);
}

static int copy_commit(Rewrite *rw)
{
        return bv_pack_writer_commit_record(rw->w, copy_record, rw);
}

/* One encoded object (a group: its n members) into the new pack, committing it when full. */
static int put_object(void *userdata, BvObjectType type, const BvGroupMember *m, size_t n, const void *enc,
                      size_t len)
{
        Rewrite *rw = userdata;
        int r = bv_group_append(rw->w, type, m, n, enc, len);
        if (r == -EFBIG) {
                r = copy_commit(rw);
                if (r >= 0)
                        r = bv_group_append(rw->w, type, m, n, enc, len);
        }
        if (r < 0)
                return r;
        rw->g->st->bytes_copied += len;
        if (bv_pack_writer_size(rw->w) >= bv_repo_config(rw->g->repo)->pack_target)
                return copy_commit(rw);
        return 0;
}

/* An object as it is stored: its encoded bytes, its members as the pack's index lists them. */
static int copy_object(Rewrite *rw, const PackStat *p, const BvPackEntry *e, size_t n)
{
        BvGroupMember m[BV_GROUP_MAX_MEMBERS];
        if (n > BV_GROUP_MAX_MEMBERS)
                return -EBADMSG;
        for (size_t k = 0; k < n; k++) {
                memcpy(m[k].id, e[k].id, BV_ID_SIZE);
                m[k].length = e[k].raw_length;
        }
        _cleanup_free_ void *buf = malloc(e[0].length);
        if (!buf)
                return -ENOMEM;
        int r = bv_packset_read(bv_repo_packs(rw->g->repo), p->id, e[0].offset, buf, e[0].length);
        if (r < 0)
                return r;
        return put_object(rw, (BvObjectType)e[0].type, m, n, buf, e[0].length);
}

/* Encodes the gathered members as a group (or one chunk) into the new pack. */
static int gathered_flush(Rewrite *rw)
{
        if (rw->buf.n_members == 0)
                return 0;
        int r = bv_group_encode(rw->enc, &rw->buf, put_object, rw);
        bv_group_buf_clear(&rw->buf, BV_OBJ_CHUNK);
        return r;
}

/* The live members of a group (e: its n members, live[k] for each) join the gathered ones. Each
 * is checked against its chunk id as it is taken out, as a read does. */
static int regroup(Rewrite *rw, const PackStat *p, const BvPackEntry *e, size_t n, const bool *live)
{
        Gc *g = rw->g;
        _cleanup_free_ void *enc = malloc(e[0].length), *raw = NULL;
        size_t rawlen;
        if (!enc)
                return -ENOMEM;
        int r = bv_packset_read(bv_repo_packs(g->repo), p->id, e[0].offset, enc, e[0].length);
        if (r >= 0)
                r = bv_object_decode_alloc(g->codec, BV_OBJ_GROUP, bv_group_id, enc, e[0].length, &raw, &rawlen);
        for (size_t k = 0; k < n && r >= 0; k++) {
                size_t off, len;
                uint8_t id[BV_ID_SIZE];
                if (!live[k])
                        continue;
                r = bv_group_member(raw, rawlen, e[k].member, &off, &len);
                if (r < 0)
                        break;
                bv_keyring_id(bv_repo_keyring(g->repo), BV_ID_CHUNK, (uint8_t *)raw + off, len, id);
                if (memcmp(id, e[k].id, BV_ID_SIZE) != 0)
                        return -EBADMSG;
                if (!bv_group_buf_fits(&rw->buf, len))
                        r = gathered_flush(rw);
                if (r >= 0)
                        r = bv_group_buf_add(&rw->buf, e[k].id, (uint8_t *)raw + off, len);
        }
        if (r >= 0)
                g->st->groups_reencoded++;
        return r;
}

/* One object of a rewritten pack (e: a group's n members, else n = 1): left out when nothing in
 * it lives, re-encoded when it is a group with more than max_unused of its bytes unused, else
 * copied whole. */
static int rewrite_object(Rewrite *rw, const PackStat *p, const BvPackEntry *e, size_t n)
{
        bool live[BV_GROUP_MAX_MEMBERS];
        uint64_t raw = 0, dead = 0;
        size_t nlive = 0;
        if (n > BV_GROUP_MAX_MEMBERS)
                return -EBADMSG;
        for (size_t k = 0; k < n; k++) {
                live[k] = object_live(rw->g, p->id, &e[k]);
                nlive += live[k];
                raw += e[k].raw_length;
                dead += live[k] ? 0 : e[k].raw_length;
        }
        if (nlive == 0)
                return 0;
        if (e[0].type == BV_OBJ_GROUP && nlive < n && dead * 100 > raw * rw->g->max_unused)
                return regroup(rw, p, e, n, live);
        return copy_object(rw, p, e, n);
}

static int rewrite_pack(Rewrite *rw, const PackStat *p)
{
        _cleanup_free_ BvPackEntry *e = NULL;
        size_t n;
        int r = bv_packset_read_index(bv_repo_packs(rw->g->repo), rw->g->codec, p->id, &e, &n);
        for (size_t i = 0, j; i < n && r >= 0; i = j) {
                for (j = i + 1; e[i].type == BV_OBJ_GROUP && j < n && e[j].offset == e[i].offset; j++)
                        ;
                r = rewrite_object(rw, p, e + i, j - i);
        }
        return r;
}

int gc_rewrite_packs(Gc *g, const Packs *ps)
{
        Rewrite rw = { .g = g };
        if (g->st->packs_rewritten == 0)
                return 0;
        const BvRepoConfig *cfg = bv_repo_config(g->repo);
        int r = bv_repo_pack_writer_new(g->repo, g->codec, &rw.w);
        if (r >= 0)
                r = bv_group_encoder_new(bv_repo_keyring(g->repo), cfg->zstd_level, &rw.enc);
        bv_group_buf_clear(&rw.buf, BV_OBJ_CHUNK);
        for (size_t i = 0; i < ps->n && r >= 0; i++)
                if (ps->p[i].flags & PACK_REWRITE)
                        r = rewrite_pack(&rw, &ps->p[i]);
        if (r >= 0)
                r = gathered_flush(&rw);
        if (r >= 0)
                r = copy_commit(&rw);
        bv_group_buf_done(&rw.buf);
        bv_group_encoder_free(rw.enc);
        bv_pack_writer_free(rw.w);
        /* the copies' entries, durable before the index that drops the originals */
        return r < 0 ? r : bv_index_flush(g->index);
}
