/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A copy's records against a gc on another machine (copy-internal.h, copy_dst_settle;
 * docs/LIFECYCLE.md, "A copy's commit against a condemn on another machine"). A gc on S3 puts its
 * gc lease before it lists snapshots/, and condemns only when that listing shows no record its mark
 * did not see; the copy puts its records, then lists leases/. So a condemn that missed a record
 * has its gc lease in that listing, or ended before it (and moved gc/epoch). The copy waits while
 * a gc lease lives, then reads gc/epoch (and, when it met a gc, the condemned lists): a condemn
 * since its lease dropped from the index what the records may use, into lists that wait for the
 * copy's lease (still held), so their packs are all there, and the records' maps are walked and
 * what the index lacks is written back from the lists, as a backup's heal does under
 * locks/commit (write/heal.h). The records then restore at once, before any further gc.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "copy-internal.h"
#include "heal.h"
#include "macro.h"

#define SETTLE_POLL_NS 500000000L /* between two looks at leases/ while a gc runs */

typedef struct Settle {
        BvRepo *src;
        BvObjectCodec *codec;
} Settle;

static int fetch_node(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Settle *s = userdata;
        return bv_repo_read_object_alloc(s->src, s->codec, BV_OBJ_MAP, id, ret_node, ret_len);
}

/* Until no gc lease lives (a killed gc's for its grace at most); *ret_met: one did. */
static int gc_wait(CopyDst *d, bool *ret_met)
{
        *ret_met = false;
        for (;;) {
                size_t live;
                int r = bv_gc_leases_live(d->b, d->lease, &live);
                if (r < 0 || live == 0)
                        return r;
                *ret_met = true;
                struct timespec ts = { .tv_nsec = SETTLE_POLL_NS };
                (void)nanosleep(&ts, NULL);
        }
}

static bool list_after(BvIndexList **lists, size_t n, uint64_t epoch)
{
        for (size_t i = 0; i < n; i++)
                if (bv_index_list_generation(lists[i]) > epoch)
                        return true;
        return false;
}

int copy_dst_settle(CopyDst *d, BvRepo *src, BvObjectCodec *codec, const BvSnapshot *const *snaps, size_t n,
                    uint64_t *ret_healed)
{
        BvIndexList **lists = NULL;
        size_t nlists = 0;
        uint64_t epoch;
        bool met;
        if (d->repo || n == 0)
                return 0; /* a local DST's records were healed under locks/commit */
        int r = gc_wait(d, &met);
        if (r >= 0)
                r = bv_gc_epoch_read(d->b, &epoch);
        /* the lists too when a gc ran: one killed between its new index and gc/epoch left the
         * epoch as it was */
        if (r >= 0 && (met || epoch != d->epoch))
                r = bv_condemned_lists_load_backend(d->b, &lists, &nlists);
        if (r >= 0 && (epoch != d->epoch || list_after(lists, nlists, d->epoch))) {
                Settle s = { .src = src, .codec = codec };
                r = copy_dst_reload(d); /* the index as that gc left it */
                for (size_t i = 0; i < n && r >= 0; i++) {
                        const BvSnapshot *sn = snaps[i];
                        r = bv_heal_map(d->x, lists, nlists, fetch_node, &s, sn->root, sn->height, sn->size);
                        if (r > 0)
                                *ret_healed += (uint64_t)r;
                }
                if (r >= 0)
                        r = copy_dst_flush(d); /* the segment the heal wrote, at DST */
        }
        bv_condemned_lists_free(lists, nlists);
        return MIN(r, 0);
}
