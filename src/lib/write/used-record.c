/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "used-record.h"

/* A copy of s, NULL for "" (absent from the record); -ENOMEM. */
static int dup_opt(const char *s, char **ret)
{
        *ret = NULL;
        if (!s || !s[0])
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int bv_used_record(const BvFsUsedMap *m, BvSnapshotUsedOnly *ret)
{
        BvSnapshotUsedOnly u = {};
        int r = 0;

        *ret = u;
        if (!m)
                return 0;
        u.on = true;
        u.bytes_free = m->bytes_free;
        if (m->n_parts > 0 && !(u.parts = calloc(m->n_parts, sizeof(BvSnapshotUsedPart))))
                return -ENOMEM;
        for (; r >= 0 && u.n_parts < m->n_parts; u.n_parts++) {
                const BvFsUsedPart *p = &m->parts[u.n_parts];
                BvSnapshotUsedPart *q = &u.parts[u.n_parts];
                *q = (BvSnapshotUsedPart){ .number = p->number, .start = p->start, .size = p->size,
                                           .bytes_used = p->bytes_used, .bytes_free = p->bytes_free,
                                           .bytes_unknown = p->bytes_unknown };
                if ((r = dup_opt(p->fstype, &q->fstype)) < 0 || (r = dup_opt(p->label, &q->label)) < 0 ||
                    (r = dup_opt(p->reader, &q->reader)) < 0 || (r = dup_opt(p->why, &q->why)) < 0)
                        break;
        }
        if (r < 0) {
                u.n_parts++; /* the one that failed is freed with the others */
                bv_snapshot_used_only_done(&u);
                return r;
        }
        *ret = u;
        return 0;
}
