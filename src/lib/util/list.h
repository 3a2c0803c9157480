/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * An intrusive doubly linked list, for the LRU orders of the caches: the element holds a
 * BvLink, and bv_list_entry() finds the element from it. Not thread-safe: callers lock.
 */

#include <stddef.h>

typedef struct BvLink {
        struct BvLink *prev, *next;
} BvLink;

typedef struct BvList {
        BvLink *head, *tail;
} BvList;

/* The element holding link, which is not NULL. */
#define bv_list_entry(link, type, member) ((type *)((char *)(link) - offsetof(type, member)))

/* The same, NULL for NULL (the end of a walk). */
#define bv_list_entry_or_null(link, type, member)                                                  \
        ({                                                                                         \
                BvLink *_l = (link);                                                               \
                _l ? bv_list_entry(_l, type, member) : (type *)NULL;                               \
        })

static inline void bv_list_unlink(BvList *l, BvLink *e)
{
        if (e->prev)
                e->prev->next = e->next;
        else
                l->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                l->tail = e->prev;
        e->prev = e->next = NULL;
}

static inline void bv_list_push_front(BvList *l, BvLink *e)
{
        e->prev = NULL;
        e->next = l->head;
        if (l->head)
                l->head->prev = e;
        l->head = e;
        if (!l->tail)
                l->tail = e;
}

static inline void bv_list_push_back(BvList *l, BvLink *e)
{
        e->next = NULL;
        e->prev = l->tail;
        if (l->tail)
                l->tail->next = e;
        l->tail = e;
        if (!l->head)
                l->head = e;
}
