/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What garbage collection needs of the index (docs/LIFECYCLE.md): positions of entries for its
 * mark bitmap, a walk of every entry in id order that tells the winning entry of each id, the
 * compaction that drops the entries of condemned packs into a condemned list (a segment file of
 * its own), and reading such lists back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endian.h"
#include "fileio.h"
#include "index-internal.h"
#include "macro.h"

struct BvIndexList {
        Segment *seg;
};

/* The position of entry 0 of segment i: the counts of the segments before it. */
static uint64_t seg_base(const SegArray *a, size_t i)
{
        uint64_t base = 0;
        for (size_t j = 0; j < i; j++)
                base += a->s[j]->count;
        return base;
}

uint64_t bv_index_positions(BvIndex *x)
{
        BV_LOCK_GUARD(&x->update_mutex);
        return seg_base(x->segs, x->segs->n);
}

int bv_index_lookup_position(BvIndex *x, const uint8_t id[BV_ID_SIZE], BvLocation *ret, uint64_t *ret_pos)
{
        uint64_t base = 0, entry;
        int r = -ENOENT;

        pthread_rwlock_rdlock(&x->seg_lock);
        for (size_t i = 0; i < x->segs->n && r == -ENOENT; i++) {
                r = segment_find(x->segs->s[i], id, false, ret, &entry);
                if (r == 0)
                        *ret_pos = base + entry;
                base += x->segs->s[i]->count;
        }
        pthread_rwlock_unlock(&x->seg_lock);
        return r;
}

int bv_index_walk(BvIndex *x, bv_index_walk_fn cb, void *userdata)
{
        BV_LOCK_GUARD(&x->update_mutex);
        const SegArray *in = x->segs;
        _cleanup_free_ Cursor *cur = calloc(MAX(in->n, (size_t)1), sizeof(Cursor));
        uint8_t last[BV_ID_SIZE];
        bool have_last = false;
        int r = 0;

        if (!cur)
                return -ENOMEM;
        for (size_t i = 0; i < in->n && r >= 0; i++) {
                cur[i] = (Cursor){ .seg = in->s[i], .rank = (unsigned)i };
                cur[i].buf = malloc(IDX_MERGE_BATCH * IDX_ENTRY_SIZE);
                r = cur[i].buf ? cursor_advance(&cur[i]) : -ENOMEM;
        }
        while (r >= 0) {
                Cursor *c = NULL; /* the smallest id, newest segment first: a walk of k cursors */
                for (size_t i = 0; i < in->n; i++)
                        if (cur[i].cur && (!c || id_cmp(cur[i].cur, c->cur) < 0))
                                c = &cur[i];
                if (!c)
                        break;
                BvLocation loc;
                bool winner = !have_last || id_cmp(last, c->cur) != 0;
                uint64_t pos = seg_base(in, c->rank) + c->next - c->nbuf + c->pos;
                segment_entry_location(c->seg, c->cur, &loc);
                memcpy(last, c->cur, BV_ID_SIZE);
                have_last = true;
                r = cb(c->cur, &loc, pos, winner, userdata);
                if (r >= 0)
                        r = cursor_advance(c);
        }
        for (size_t i = 0; i < in->n; i++)
                free(cur[i].buf);
        return r < 0 ? r : 0;
}

static int index_list_open(int dirfd, BvBackend *b, const char *name, BvIndexList **ret)
{
        if (!bv_index_name_valid(name))
                return -EINVAL;
        _cleanup_free_ BvIndexList *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        int r = b ? segment_open_backend(b, BV_KIND_CONDEMNED, name, &l->seg) : segment_open(dirfd, name, &l->seg);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int bv_index_list_open(int dirfd, const char *name, BvIndexList **ret)
{
        return index_list_open(dirfd, NULL, name, ret);
}

int bv_index_list_open_backend(BvBackend *b, const char *name, BvIndexList **ret)
{
        return index_list_open(-EBADF, b, name, ret);
}

void bv_index_list_free(BvIndexList *l)
{
        if (!l)
                return;
        segment_free(l->seg);
        free(l);
}

uint64_t bv_index_list_generation(const BvIndexList *l)
{
        return l->seg->generation;
}

uint64_t bv_index_list_count(const BvIndexList *l)
{
        return l->seg->count;
}

size_t bv_index_list_packs(const BvIndexList *l, const uint8_t (**ret)[BV_PACK_ID_SIZE])
{
        *ret = (const uint8_t(*)[BV_PACK_ID_SIZE])l->seg->packs;
        return l->seg->npacks;
}

int bv_index_list_entry(const BvIndexList *l, uint64_t i, uint8_t ret_id[BV_ID_SIZE], BvLocation *ret)
{
        const Segment *s = l->seg;
        if (i >= s->count)
                return -ERANGE;
        const uint8_t *e = s->entries + i * IDX_ENTRY_SIZE;
        if (get_le32(e + E_PACK) >= s->npacks)
                return -EBADMSG;
        memcpy(ret_id, e, BV_ID_SIZE);
        segment_entry_location(s, e, ret);
        return 0;
}

int bv_index_list_find(const BvIndexList *l, const uint8_t id[BV_ID_SIZE], BvLocation *ret, uint64_t *ret_entry)
{
        return segment_find(l->seg, id, false, ret, ret_entry);
}
