/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Private to copy.c, copy-dst.c and copy-init.c: DST as the copy writes it (copy-dst.c). */

#include <pthread.h>

#include "copy.h"
#include "lease.h"

typedef struct BvCopyDst CopyDst;

struct BvCopyDst {
        BvRepo *repo;        /* a local DST, opened for writing; NULL for a remote one */
        BvBackend *b;        /* DST's objects (the repository's backend when local) */
        BvIndex *x;          /* what DST holds; new entries go here */
        const BvKeyring *keyring;
        BvRepoConfig config;
        int packs_fd;        /* where new packs are written: packs/ of the repository, or the spool's */
        /* a remote DST only */
        int lock_fd;         /* locks/write (the backend's, on this machine) */
        BvLease *lease;
        uint64_t epoch;      /* the lease's */
        char *spool;         /* a local folder: index/ (DST's segments and new ones), packs/ */
        int spool_fd, index_fd;
        int cache_fd;        /* the backend's directory on this machine (-EBADF: none) */
        char **segs;         /* the segments DST has (sorted) */
        size_t nsegs, segcap;
        uint8_t (*condemned)[BV_PACK_ID_SIZE]; /* the packs of DST's condemned lists (sorted), */
        size_t ncondemned;   /* listed at the first pack found there (copy_dst_pack_reusable) */
        bool condemned_listed;
};

/* 0 when b holds src's repository (the same id), -EXDEV another one, -ENOENT none (copy-init.c). */
int copy_related(BvRepo *src, BvBackend *b);
/* Opens the backend of dst into *bp (the caller closes it, also after a failure) and, when dst
 * holds no repository, makes it related to src (bv_copy_open_dst). A remote location that does not open says why in errbuf. */
int copy_prepare(BvRepo *src, const char *dst, const BvSecret *dst_secret, BvBackend **bp, bool *ret_created,
                 char *errbuf, size_t errlen);
/* A local DST opened for writing with src's keys (copy-init.c). */
int copy_open_local(BvRepo *src, const char *dst, bool wait, BvRepoProblem *problem, BvRepo **ret);

/* After writing w's bytes (r: how that went): commits w as the create-only object name (one already
 * there under that name is the same: a pack is named by its id, a segment at random), or drops it. */
int copy_writer_end(BvObjWriter *w, const char *name, int r);

int copy_dst_open(BvRepo *src, const char *location, const BvSecret *dst_secret, bool wait, BvRepoProblem *problem,
                  bool *ret_created, CopyDst **ret);
void copy_dst_close(CopyDst *d);
/* Packs an interrupted copy (or backup) left at DST that no segment names, recorded. At a remote
 * DST only after a copy from this machine was interrupted (a mark in its cache directory, which
 * copy_dst_done clears): a LIST of every pack is a request per 1,000 of them, and a pack another
 * machine's interrupted copy left is only sent again (create-only: stored once). */
int copy_dst_adopt(CopyDst *d, BvRepo *src, BvObjectCodec *codec, uint64_t *packs, uint64_t *bytes);
/* Whether pack id, which a create-only PUT found at DST already, may count as sent: 1 yes; 0 when a
 * condemned list at DST names it (a gc may finalize that list before this copy's segment names
 * the pack: its objects must go in a new pack) or it is gone; <0 error. A local DST: always 1 (the
 * heal under locks/commit names it again before the record). */
int copy_dst_pack_reusable(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE]);
/* After a copy that completed: the next one need not look for what it left (copy_dst_adopt). */
void copy_dst_done(CopyDst *d);
/* After the pack writer committed pack id in packs_fd: a remote DST gets it. */
int copy_dst_pack_committed(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE]);
/* A new pack the pack writer committed in packs_fd, read into *ret (*ret_size bytes, at most max bytes: -EFBIG
 * beyond, the file left) and its spool file dropped (a remote DST). */
int copy_dst_pack_take(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE], uint64_t max, void **ret, uint64_t *ret_size);
/* A remote DST's index anew, as DST lists it now (the segments it lacks fetched, the ones gone
 * dropped): d->x is another. */
int copy_dst_reload(CopyDst *d);
/* After the records of snaps (n of them) are at a remote DST: a gc that condemned beside the copy
 * and missed them is waited for, and what it dropped from the index that they use is written back
 * (copy-settle.c; docs/LIFECYCLE.md, "A copy's commit against a condemn on another machine").
 * *ret_healed: the ids written back. Map nodes are read from src. */
int copy_dst_settle(CopyDst *d, BvRepo *src, BvObjectCodec *codec, const BvSnapshot *const *snaps, size_t n,
                    uint64_t *ret_healed);
/* The index's new entries as a durable segment at DST. */
int copy_dst_flush(CopyDst *d);
/* A snapshot record at DST: a local one's commit as a backup's (heal.h), under locks/commit; at a
 * remote one, the first of a copy after gc/epoch was found to be the lease's (-ESTALE else). */
int copy_dst_publish(CopyDst *d, BvObjectCodec *codec, const BvSnapshot *s, bool first);
/* Object Lock (copy-lock.c): checks the bucket and sets the retention of every later put;
 * after the records are published, extends what DST's snapshots need when due. */
int copy_lock_begin(CopyDst *d, const BvCopyOptions *o);
int copy_lock_extend(CopyDst *d, const BvCopyOptions *o, uint64_t *ret_extended, char *culprit, size_t culprit_len);
/* What a copy sends, checked (copy-check.c): the object whose n entries (a group: its members)
 * are e and whose encoded bytes are enc, decoded under codec and re-hashed under k; -EBADMSG
 * when it does not authenticate or is not what its entries say. */
int copy_check_object(BvObjectCodec *codec, const BvKeyring *k, const BvPackEntry *e, size_t n, const void *enc);
/* Every object of a pack (its entries e, in offset order) read from fd into buf (cap bytes) and
 * checked; on failure *ret_offset is the object's offset in the pack. */
int copy_check_pack_fd(BvObjectCodec *codec, const BvKeyring *k, int fd, const BvPackEntry *e, size_t n,
                       void *buf, size_t cap, uint64_t *ret_offset);

/* Packs in flight to a remote DST (copy-upload.c): at most COPY_UPLOADS_MAX puts at once (each
 * checking its pack first, in its own thread), and at most COPY_UPLOADS_BYTES of their bytes in
 * memory; a pack above COPY_UPLOAD_PACK_MAX is not held in memory (it goes from a spool file,
 * alone). */
#define COPY_UPLOADS_MAX 4
#define COPY_UPLOADS_BYTES (128ull << 20)
#define COPY_UPLOAD_PACK_MAX (64ull << 20)

typedef struct CopyUploads CopyUploads;

typedef struct CopyBuf {
        void *p;
        size_t cap;
} CopyBuf;

typedef struct CopyUpload {
        uint8_t id[BV_PACK_ID_SIZE];
        BvPackEntry *e; /* its index (owned) */
        size_t n;
        void *data;     /* its bytes (owned), checked: buf's, or malloc'd when buf is empty */
        CopyBuf buf;    /* from copy_uploads_buf */
        uint64_t size;
        bool whole;     /* one of SRC's packs under its own name; else a new one (repacked) */
        const BvKeyring *check; /* not NULL: every object checked under these keys before the PUT */
        uint64_t bad_offset;    /* where the check failed (bad: it did) */
        bool bad;
        /* the uploads' */
        CopyUploads *q;
        pthread_t thread;
        bool started, done;
        int r;
} CopyUpload;

/* Called in the copy's thread for each put that ended (r: how), the upload freed after it. */
typedef int (*copy_upload_done_fn)(void *userdata, const CopyUpload *u, int r);

int copy_uploads_new(BvBackend *b, CopyUploads **ret);
/* u->data: a buffer of at least u->size bytes, one a reaped put left when there is one (the
 * copy's thread only). */
int copy_uploads_buf(CopyUploads *q, CopyUpload *u);
/* Waits for every put under way without reaping them, then frees (after a failure). */
void copy_uploads_free(CopyUploads *q);
void copy_upload_free(CopyUpload *u);
/* Hands u (taken, also on failure) to a thread that puts it; first reaps ended puts while the
 * slots or the bytes are full. Returns the first failure of a reaped one's done. */
int copy_uploads_submit(CopyUploads *q, CopyUpload *u, copy_upload_done_fn done, void *userdata);
/* Reaps one put (waiting for it); every one (the first failure returned). */
int copy_uploads_reap(CopyUploads *q, copy_upload_done_fn done, void *userdata);
int copy_uploads_drain(CopyUploads *q, copy_upload_done_fn done, void *userdata);
/* Puts submitted and not reaped. */
size_t copy_uploads_pending(CopyUploads *q);
/* Every object of a pack of size bytes in memory (its entries e, in offset order) checked; on
 * failure *ret_offset is the object's offset in the pack. */
int copy_check_pack_mem(BvObjectCodec *codec, const BvKeyring *k, const void *data, uint64_t size,
                        const BvPackEntry *e, size_t n, uint64_t *ret_offset);
