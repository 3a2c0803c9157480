/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pending table of the index: the current batch's claimed and located entries, in RAM
 * until a flush writes them as a segment.
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

/* ---- the pending table: open addressing, linear probing, backward-shift deletion ---------- */

static size_t pending_home(const Pending *t, const uint8_t id[BV_ID_SIZE])
{
        return (size_t)(((unsigned __int128)get_le64(id) * t->cap) >> 64);
}

static size_t pending_next(const Pending *t, size_t i)
{
        return i + 1 == t->cap ? 0 : i + 1;
}

/* Grows by half: between 64 and 96 bytes per entry at a load of 1/2 to 3/4. */
size_t pending_grown(size_t cap)
{
        return cap < 1024 ? 1024 : cap + cap / 2;
}

/* Slots come straight from mmap: a flushed batch's table goes back to the system at once. */
static PendingSlot *pending_alloc(size_t cap)
{
        void *p = mmap(NULL, cap * sizeof(PendingSlot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        return p == MAP_FAILED ? NULL : p;
}

void pending_release(PendingSlot *slots, size_t cap)
{
        if (slots)
                (void)munmap(slots, cap * sizeof(PendingSlot));
}

PendingSlot *pending_find(const Pending *t, const uint8_t id[BV_ID_SIZE])
{
        if (t->cap == 0)
                return NULL;
        for (size_t i = pending_home(t, id);; i = pending_next(t, i)) {
                PendingSlot *sl = &t->slots[i];
                if (!sl->used)
                        return NULL;
                if (id_cmp(sl->id, id) == 0)
                        return sl;
        }
}

static void pending_put(Pending *t, const PendingSlot *src)
{
        size_t i = pending_home(t, src->id);

        while (t->slots[i].used)
                i = pending_next(t, i);
        t->slots[i] = *src;
        t->slots[i].used = 1;
        t->used++;
}

/* Rehashes the table into capacity cap (above its size). */
int pending_rebuild(Pending *t, size_t cap)
{
        PendingSlot *old = t->slots;
        size_t old_cap = t->cap;

        t->slots = pending_alloc(cap);
        if (!t->slots) {
                t->slots = old;
                return -ENOMEM;
        }
        t->cap = cap;
        t->used = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].used)
                        pending_put(t, &old[i]);
        pending_release(old, old_cap);
        return 0;
}

PendingSlot *pending_insert(Pending *t, const uint8_t id[BV_ID_SIZE])
{
        PendingSlot sl = { .pack = PENDING_CLAIMED };

        if ((t->used + 1) * 4 > t->cap * 3 && pending_rebuild(t, pending_grown(t->cap)) < 0)
                return NULL;
        memcpy(sl.id, id, BV_ID_SIZE);
        pending_put(t, &sl);
        return pending_find(t, id);
}

void pending_remove(Pending *t, PendingSlot *sl)
{
        size_t i = (size_t)(sl - t->slots), j = i;

        t->slots[i].used = 0;
        for (;;) {
                size_t k;

                j = pending_next(t, j);
                if (!t->slots[j].used)
                        break;
                k = pending_home(t, t->slots[j].id);
                /* The slot at j may move to the hole at i unless its home lies in (i, j]. */
                if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
                        t->slots[i] = t->slots[j];
                        t->slots[j].used = 0;
                        i = j;
                }
        }
        t->used--;
}

void pending_set_located(Pending *t, size_t n)
{
        __atomic_store_n(&t->located, n, __ATOMIC_RELEASE);
}

/* Forgets every located entry (they were flushed) and the pack list; claims stay. */
void pending_drop_located(Pending *t)
{
        size_t want = 1024;

        /* A removal may shift a later slot into i: look at i again before moving on. */
        for (size_t i = 0; i < t->cap;)
                if (t->slots[i].used && t->slots[i].pack != PENDING_CLAIMED)
                        pending_remove(t, &t->slots[i]);
                else
                        i++;
        while ((t->used + 1) * 4 > want * 3)
                want = pending_grown(want);
        if (t->cap > want)
                (void)pending_rebuild(t, want); /* only shrinks: keeping the big table is fine */
        t->npacks = 0;
        pending_set_located(t, 0);
}
