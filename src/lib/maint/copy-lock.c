/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * S3 Object Lock at a copy's DST (copy.h, object_lock_seconds; docs/LIFECYCLE.md, "Object
 * Lock"). Every object the copy puts carries retention until its put + D (the backend's put
 * options). What DST's snapshots need (the config, key slots, snapshot records, index segments
 * and every pack DST's index names) is extended to now + D by a pass that runs when the config's
 * retention, extended last by the pass before, has less than D/2 left: so each of them stays
 * locked at least D/2 past any copy, at one HEAD per copy and one request per object every D/2.
 * A pack that a gc at DST took out of the index is not extended and expires.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-s3.h"
#include "copy-internal.h"
#include "macro.h"

int bv_copy_check_object_lock(const char *dst, char *errbuf, size_t errlen)
{
        BvBackend *b = NULL;
        if (strncmp(dst, "s3://", 5) != 0)
                return -EOPNOTSUPP; /* a directory keeps no versions and no retention */
        int r = bv_backend_open_read(dst, 0, &b, errbuf, errlen);
        if (r >= 0) {
                r = bv_backend_s3_object_lock_enabled(b);
                if (r < 0)
                        bv_backend_errmsg(b, errbuf, errlen);
                else if (r == 0)
                        r = -ENOLCK;
        }
        bv_backend_close(b);
        return r < 0 ? r : 0;
}

int copy_lock_begin(CopyDst *d, const BvCopyOptions *o)
{
        if (o->object_lock_seconds == 0)
                return 0;
        if (o->object_lock_seconds > INT64_MAX / 4)
                return -EINVAL;
        int r = bv_backend_s3_object_lock_enabled(d->b);
        if (r == 0)
                return -ENOLCK;
        if (r < 0)
                return r;
        return bv_backend_s3_set_object_lock(d->b, (int64_t)o->object_lock_seconds,
                                             o->object_lock_governance ? BV_S3_LOCK_GOVERNANCE : BV_S3_LOCK_COMPLIANCE);
}

typedef struct Extend {
        CopyDst *d;
        BvObjKind kind;
        int64_t until;
        uint64_t n;
} Extend;

static int extend(Extend *x, BvObjKind kind, const char *name)
{
        int r = bv_backend_s3_extend_retention(x->d->b, kind, name, x->until);
        if (r >= 0)
                x->n++;
        return r;
}

static int on_listed(const BvObjEntry *e, void *userdata)
{
        Extend *x = userdata;
        if (x->kind == BV_KIND_INDEX && !bv_index_name_valid(e->name))
                return 0;
        if (x->kind == BV_KIND_KEY && !bv_key_slot_valid(e->name))
                return 0;
        return extend(x, x->kind, e->name);
}

static int on_pack(const uint8_t id[BV_PACK_ID_SIZE], void *userdata)
{
        char name[64];
        bv_pack_path(id, name);
        return extend(userdata, BV_KIND_PACK, name);
}

int copy_lock_extend(CopyDst *d, const BvCopyOptions *o, uint64_t *ret_extended, char *culprit, size_t culprit_len)
{
        int64_t now, until = 0, seconds = (int64_t)o->object_lock_seconds;
        static const BvObjKind listed[] = { BV_KIND_KEY, BV_KIND_SNAPSHOT, BV_KIND_INDEX };
        if (seconds == 0)
                return 0;
        int r = bv_backend_s3_retention(d->b, BV_KIND_CONFIG, NULL, &until);
        if (r < 0) {
                snprintf(culprit, culprit_len, "config");
                return r;
        }
        now = bv_backend_s3_now(d->b); /* the storage's clock, which keeps the retention */
        if (until >= now + seconds / 2)
                return 0; /* the last pass holds everything long enough */
        Extend x = { .d = d, .until = now + seconds };
        for (size_t i = 0; i < ELEMENTSOF(listed) && r >= 0; i++) {
                x.kind = listed[i];
                r = bv_backend_list(d->b, listed[i], on_listed, &x);
        }
        if (r >= 0)
                r = bv_index_packs(d->x, on_pack, &x);
        if (r >= 0) /* last: a pass cut short runs again next time */
                r = extend(&x, BV_KIND_CONFIG, NULL);
        *ret_extended += x.n;
        return r;
}
