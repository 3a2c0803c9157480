/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Copying snapshots between related repositories (blkvault copy; docs/LIFECYCLE.md, "Copies"):
 * a drive to another (rotation), a drive to S3 and back. Related repositories share the
 * repository id and the master secret, hence every subkey: a chunk has the same id in both, so
 * what DST holds already is not sent again, and a pack travels as its bytes, never re-encrypted.
 *
 * copy-init.c makes DST related to SRC when it does not exist yet and opens it; copy.c copies:
 * it walks each wanted snapshot's map in SRC, looks every object up in DST's index, sends the
 * SRC packs whose every object DST lacks as they are and puts the wanted objects of the others
 * into new packs, records them in DST's index, then publishes the snapshot records. DST is opened
 * as a backup opens it (locks/write and a lease), and its commit is a backup's (heal.h), so a gc
 * at DST meanwhile loses nothing of it.
 */

#include <stdbool.h>
#include <stdint.h>

#include "repo.h"

typedef struct BvCopyOptions {
        /* Snapshots of SRC to copy, as bv_repo_find_snapshot names them (NULL or none: all). */
        const char *const *snapshots;
        size_t n_snapshots;
        uint64_t limit_upload;   /* bytes per second written to DST, 0: no limit */
        uint64_t limit_download; /* bytes per second read from SRC, 0: no limit */
        /* S3 Object Lock at DST (docs/LIFECYCLE.md, "Object Lock"; blkvault.conf(5)'s
         * object-lock = DURATION sets it): every object the copy puts is retained for this many
         * seconds from its put, and what DST's snapshots need (config, key slots, snapshot
         * records, index segments, the packs DST's index names) is extended to now + this when
         * less than half of it is left. 0: no Object Lock. DST must be s3:// in a bucket with
         * Object Lock enabled: bv_copy fails with -EOPNOTSUPP for a local DST, -ENOLCK for a
         * bucket without (bv_copy_check_object_lock says so before DST is created). */
        uint64_t object_lock_seconds;
        bool object_lock_governance; /* GOVERNANCE mode (whoever may bypass governance can lift it); default COMPLIANCE */
        /* Called after each snapshot record is published at DST (NULL: not called). */
        void (*published)(const BvSnapshot *s, void *userdata);
        void *published_userdata;
        bv_progress_fn progress; /* done/total: bytes of the SRC packs to go through; work: bytes sent */
        void *progress_userdata;
        /* Asked before each pack and each buffer sent: true stops the copy (-ECANCELED), nothing
         * more published, what was sent kept for the next copy. NULL: never. */
        bool (*cancelled)(void);
} BvCopyOptions;

typedef struct BvCopyStats {
        uint64_t snapshots_copied;  /* records published at DST */
        uint64_t snapshots_present; /* wanted, but DST had them already */
        uint64_t objects_sent;      /* index entries recorded at DST (chunks, group members, map nodes) */
        uint64_t objects_present;   /* objects the copied snapshots use that DST held already */
        uint64_t bytes_sent;        /* bytes of packs written to DST */
        uint64_t bytes_read;        /* bytes read from SRC's packs */
        uint64_t packs_whole;       /* SRC packs sent as they are */
        uint64_t packs_repacked;    /* SRC packs whose wanted objects went into new packs */
        uint64_t packs_written;     /* new packs written at DST for those */
        uint64_t packs_resumed;     /* packs an interrupted copy (or backup) left at DST, adopted */
        uint64_t bytes_resumed;
        uint64_t objects_retained;  /* objects whose Object Lock retention was extended */
        uint64_t requests;          /* S3 requests made (SRC and DST; 0 for local repositories) */
        double seconds;
        /* On failure: the object at fault, when one was ("packs/ab/ab12....pack"), else "". */
        char culprit[96];
        /* -EBADMSG: the object of the pack in culprit that does not authenticate or re-hash (what a
         * copy sends is checked first: nothing of it reached DST), at this offset. */
        uint64_t culprit_offset;
        bool culprit_has_offset;
} BvCopyStats;


/* DST as a copy writes it. */
typedef struct BvCopyDst BvCopyDst;
/* Opens dst for writing with src's keys, as a backup opens a repository: locks/write and a lease.
 * A directory is a repository opened for writing (bv_copy_dst_repo); a remote one (s3://) is
 * written through its backend. When dst holds no repository (missing, empty, or what an
 * interrupted creation by copy left: key slots and nothing else), it is made related to src
 * first: src's key slots as they are (dst_secret NULL: DST opens with every secret that opens
 * SRC), or the master secret sealed by dst_secret as keys/default (src opened with
 * BV_OPEN_KEYS), then src's config as it is, last; *ret_created tells whether it was.
 * -EXDEV: dst is a repository not related to src (another repository id); -ENOTEMPTY: dst holds
 * something that is not a repository; -EBADMSG: its config does not authenticate under src's
 * keys (the same id, another master secret: not related either, or damaged); -EBUSY: another
 * writer holds it; bv_repo_open's errors. A remote DST's failure is said in ret_problem's message. */
int bv_copy_open_dst(BvRepo *src, const char *dst, const BvSecret *dst_secret, bool wait, BvRepoProblem *ret_problem,
                     bool *ret_created, BvCopyDst **ret);
void bv_copy_dst_close(BvCopyDst *d);
/* What a remote DST's storage said of the last request that failed ("s3://BUCKET/KEY: HTTP 503
 * ..."), into buf; "" for a local one or when none failed. Returns buf. */
const char *bv_copy_dst_storage_error(BvCopyDst *d, char *buf, size_t len);
/* The repository of a local DST; NULL for a remote one. */
BvRepo *bv_copy_dst_repo(BvCopyDst *d);

/* Whether dst can take object_lock_seconds: 0 yes (an s3:// location whose bucket has Object Lock
 * enabled), -EOPNOTSUPP a local one, -ENOLCK a bucket without it; a remote failure is said in
 * errbuf (errlen bytes). Nothing is written. */
int bv_copy_check_object_lock(const char *dst, char *errbuf, size_t errlen);

/* Copies o's snapshots (every one of SRC by default) from src (opened for reading) to dst
 * (bv_copy_open_dst). A snapshot DST holds already (the same id) is skipped.
 * -EUCLEAN: SRC lacks an object one of its snapshots uses (culprit names the snapshot);
 * -EBADMSG: an object about to be sent is damaged at SRC (culprit and culprit_offset: the pack
 * and where in it; nothing is published);
 * -ENOENT: a snapshot named in o is not in SRC; -ECANCELED: o->cancelled said so; -ESTALE: a remote DST's gc/epoch moved since
 * the copy opened it (nothing more is published; run it again); the backends' errors otherwise. */
int bv_copy(BvRepo *src, BvCopyDst *dst, const BvCopyOptions *o, BvCopyStats *ret);
