/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Index compaction: a streaming k-way merge of every segment into one.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "hex.h"
#include "index-internal.h"
#include "macro.h"
#include "random.h"
#include "timeutil.h"

/* ---- compaction: a streaming k-way merge --------------------------------------------------- */

static bool cursor_less(const Cursor *a, const Cursor *b)
{
        int c = id_cmp(a->cur, b->cur);

        return c < 0 || (c == 0 && a->rank < b->rank);
}

static void heap_sift_down(Cursor **h, size_t n, size_t i)
{
        for (;;) {
                size_t l = 2 * i + 1, m = i;
                Cursor *tmp;

                if (l < n && cursor_less(h[l], h[m]))
                        m = l;
                if (l + 1 < n && cursor_less(h[l + 1], h[m]))
                        m = l + 1;
                if (m == i)
                        return;
                tmp = h[i];
                h[i] = h[m];
                h[m] = tmp;
                i = m;
        }
}

static int pack_cmp(const void *a, const void *b)
{
        return memcmp(a, b, IDX_PACK_SIZE);
}

static bool pack_dropped(const uint8_t (*drop)[IDX_PACK_SIZE], size_t ndrop, const uint8_t *id)
{
        return ndrop > 0 && bsearch(id, drop, ndrop, IDX_PACK_SIZE, pack_cmp);
}

/* The sorted union of the segments' pack tables (without the ndrop sorted packs of drop), and
 * each cursor's remapping into it (UINT32_MAX for a dropped pack). */
static int merge_packs(Cursor *cur, size_t k, const uint8_t (*drop)[IDX_PACK_SIZE], size_t ndrop,
                       uint8_t (**ret_packs)[IDX_PACK_SIZE], uint32_t *ret_n)
{
        _cleanup_free_ uint8_t(*packs)[IDX_PACK_SIZE] = NULL;
        uint64_t total = 0;
        size_t n = 0;

        for (size_t i = 0; i < k; i++)
                total += cur[i].seg->npacks;
        if (total >= UINT32_MAX)
                return -E2BIG;
        packs = malloc(MAX(total, (uint64_t)1) * IDX_PACK_SIZE);
        if (!packs)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                memcpy(packs[n], cur[i].seg->packs, (size_t)cur[i].seg->npacks * IDX_PACK_SIZE);
                n += cur[i].seg->npacks;
        }
        qsort(packs, n, IDX_PACK_SIZE, pack_cmp);
        total = n;
        n = 0;
        for (size_t i = 0; i < total; i++)
                if ((n == 0 || memcmp(packs[n - 1], packs[i], IDX_PACK_SIZE) != 0) &&
                    !pack_dropped(drop, ndrop, packs[i]))
                        memmove(packs[n++], packs[i], IDX_PACK_SIZE);

        for (size_t i = 0; i < k; i++) {
                const Segment *s = cur[i].seg;

                cur[i].remap = malloc(MAX(s->npacks, 1u) * sizeof(uint32_t));
                if (!cur[i].remap)
                        return -ENOMEM;
                for (uint32_t j = 0; j < s->npacks; j++) {
                        const uint8_t(*p)[IDX_PACK_SIZE] =
                                bsearch(s->packs + (size_t)j * IDX_PACK_SIZE, packs, n, IDX_PACK_SIZE, pack_cmp);
                        cur[i].remap[j] = p ? (uint32_t)(p - packs) : UINT32_MAX;
                }
        }
        *ret_packs = TAKE_PTR(packs);
        *ret_n = (uint32_t)n;
        return 0;
}

/* gc's compaction: entries located in one of the sorted packs go to the list instead. */
typedef struct MergeDrop {
        const uint8_t (*packs)[IDX_PACK_SIZE];
        size_t n;
        SegWriter list;
} MergeDrop;

static int merge_add(SegWriter *w, MergeDrop *drop, const Cursor *c, const uint8_t *e)
{
        uint32_t pack = c->remap[get_le32(e + E_PACK)];
        if (pack == UINT32_MAX) { /* a dropped pack's entry */
                const uint8_t *id = c->seg->packs + (size_t)get_le32(e + E_PACK) * IDX_PACK_SIZE;
                const uint8_t(*p)[IDX_PACK_SIZE] = bsearch(id, drop->packs, drop->n, IDX_PACK_SIZE, pack_cmp);
                return seg_writer_add(&drop->list, e, (uint32_t)(p - drop->packs), get_le32(e + E_OFFSET),
                                      get_le32(e + E_LENGTH), e[E_TYPE], e[E_MEMBER]);
        }
        return seg_writer_add(w, e, pack, get_le32(e + E_OFFSET), get_le32(e + E_LENGTH), e[E_TYPE], e[E_MEMBER]);
}

static int merge_run(Cursor *cur, size_t k, SegWriter *w, MergeDrop *drop)
{
        _cleanup_free_ Cursor **heap = calloc(k, sizeof(Cursor *));
        uint8_t last[BV_ID_SIZE];
        bool have_last = false;
        size_t n = 0;
        int r;

        if (!heap)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                r = cursor_advance(&cur[i]);
                if (r < 0)
                        return r;
                if (cur[i].cur)
                        heap[n++] = &cur[i];
        }
        for (size_t i = n / 2; i-- > 0;)
                heap_sift_down(heap, n, i);

        while (n > 0) {
                Cursor *c = heap[0];
                const uint8_t *e = c->cur;

                /* Equal ids pop newest first: the first one is kept. */
                if (!have_last || id_cmp(last, e) != 0) {
                        r = merge_add(w, drop, c, e);
                        if (r < 0)
                                return r;
                        memcpy(last, e, BV_ID_SIZE);
                        have_last = true;
                }
                r = cursor_advance(c);
                if (r < 0)
                        return r;
                if (!c->cur)
                        heap[0] = heap[--n];
                heap_sift_down(heap, n, 0);
        }
        return 0;
}

/* Merges every segment of x->segs into one new segment (with drop: without the entries of its
 * packs, which go to its list, finished first). Caller holds update_mutex. */
static int index_merge(BvIndex *x, MergeDrop *drop, uint64_t list_generation, Segment **ret_list, Segment **ret)
{
        const SegArray *in = x->segs;
        _cleanup_free_ Cursor *cur = calloc(in->n, sizeof(Cursor));
        _cleanup_free_ uint8_t(*packs)[IDX_PACK_SIZE] = NULL;
        uint64_t total = 0, generation = 0;
        uint32_t npacks = 0;
        SegWriter w = { .fd = -EBADF };
        SegDest dest;
        int r;

        if (!cur)
                return -ENOMEM;
        r = index_seg_dest(x, &dest);
        if (r < 0)
                return r;
        for (size_t i = 0; i < in->n; i++) {
                cur[i] = (Cursor){ .seg = in->s[i], .rank = (unsigned)i };
                total += in->s[i]->count;
                generation = MAX(generation, in->s[i]->generation);
                cur[i].buf = malloc(IDX_MERGE_BATCH * IDX_ENTRY_SIZE);
                if (!cur[i].buf) {
                        r = -ENOMEM;
                        goto free_cursors;
                }
        }
        r = merge_packs(cur, in->n, drop ? drop->packs : NULL, drop ? drop->n : 0, &packs, &npacks);
        if (r < 0)
                goto free_cursors;
        r = seg_writer_begin(&w, dest, total, (const uint8_t(*)[IDX_PACK_SIZE])packs, npacks);
        if (r < 0)
                goto free_cursors;
        r = merge_run(cur, in->n, &w, drop);
        if (r >= 0 && drop)
                r = seg_writer_finish(&drop->list, list_generation, ret_list);
        if (r < 0) {
                seg_writer_abort(&w);
                if (drop)
                        seg_writer_abort(&drop->list);
                goto free_cursors;
        }
        /* The newest input's generation: the merged segment stands where its inputs stood. */
        r = seg_writer_finish(&w, generation, ret);

free_cursors:
        for (size_t i = 0; i < in->n; i++) {
                free(cur[i].buf);
                free(cur[i].remap);
        }
        return r;
}

static int index_replace(BvIndex *x, Segment *merged);

int bv_index_compact(BvIndex *x, unsigned max_segments)
{
        Segment *merged = NULL;
        int r;

        BV_LOCK_GUARD(&x->update_mutex);
        if (x->segs->n <= max_segments || x->segs->n < 2)
                return 0;
        r = index_merge(x, NULL, 0, NULL, &merged);
        if (r < 0)
                return r;
        return index_replace(x, merged);
}

int bv_index_compact_drop(BvIndex *x, const uint8_t (*packs)[BV_PACK_ID_SIZE], size_t npacks, uint64_t list_max,
                          int list_dirfd, uint64_t list_generation, char ret_list_name[BV_INDEX_NAME_MAX])
{
        Segment *merged = NULL, *list = NULL;
        MergeDrop drop = { .packs = packs, .n = npacks };
        int r;

        if (npacks >= UINT32_MAX)
                return -E2BIG;
        SegDest dest = { .dirfd = list_dirfd, .kind = BV_KIND_CONDEMNED };
        if (list_dirfd < 0 && !(dest.backend = x->write_backend))
                return -EROFS;
        BV_LOCK_GUARD(&x->update_mutex);
        r = seg_writer_begin(&drop.list, dest, list_max, packs, (uint32_t)npacks);
        if (r < 0)
                return r;
        r = index_merge(x, &drop, list_generation, &list, &merged);
        if (r < 0) {
                seg_writer_abort(&drop.list);
                return r;
        }
        snprintf(ret_list_name, BV_INDEX_NAME_MAX, "%s", list->name);
        segment_free(list);
        return index_replace(x, merged);
}

/* Unlinks the inputs of a merge and publishes its output in their place. */
static int index_replace(BvIndex *x, Segment *merged)
{
        SegArray *a;
        int r = 0;

        a = segarray_new(1);
        if (!a) {
                segment_free(merged); /* the file stays: duplicates are harmless */
                return -ENOMEM;
        }
        a->s[0] = merged;

        /* Unlink the inputs, then publish: the merged segment is durable already, and lookups
         * that still use the inputs keep valid mappings until the publish unmaps them. */
        for (size_t i = 0; i < x->segs->n; i++) {
                int k = 0;
                if (x->write_backend)
                        k = bv_backend_remove(x->write_backend, BV_KIND_INDEX, x->segs->s[i]->name);
                else if (unlinkat(x->dirfd, x->segs->s[i]->name, 0) < 0)
                        k = negative_errno();
                if (k < 0 && k != -ENOENT && r == 0)
                        r = k;
        }
        index_publish(x, a);
        if (r < 0 || x->write_backend) /* a remote delete is durable when it returns */
                return r;
        return bv_fsync_dir(x->dirfd);
}
