/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * Leases and the gc epoch (docs/LIFECYCLE.md, "Leases"). Every process that uses a repository
 * (a backup, a restore, a verify, an NBD export) holds a lease: leases/<16 hex>.lease, a small
 * JSON file {"kind":...,"epoch":E,"pid":P,"snapshot":""} on which it holds flock(LOCK_EX) for as
 * long as it runs, made visible only once locked. E is gc/epoch as read before the lease became
 * visible, and the holder opens the index only after that. gc finalizes what it condemned for
 * epoch W only when every live lease has an epoch >= W, so nothing a holder may read goes away.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "repo.h"

typedef enum {
        BV_LEASE_READ = 0,
        BV_LEASE_WRITE,
        BV_LEASE_EXPORT,
        BV_LEASE_GC, /* a gc on a remote repository (docs/LIFECYCLE.md, "gc on S3"): not a reader */
} BvLeaseKind;

typedef struct BvLease BvLease;

/* Reads the epoch (0 when gc/epoch is absent). -EBADMSG if it is not a decimal number. */
int bv_gc_epoch_read(BvBackend *b, uint64_t *ret);
/* Writes gc/epoch durably (creating gc/). */
int bv_gc_epoch_write(BvBackend *b, uint64_t epoch);

/* Reads the epoch, then makes a held lease visible (bv_backend_lease_take: a flocked file here); its "snapshot" field is
 * left empty (reserved). *ret_epoch (if not NULL) gets the lease's epoch. -EROFS/-EACCES where
 * leases/ cannot be written (the caller falls back to the shared locks/gc). On failure
 * *ret_problem (if not NULL) names gc/epoch or leases/, whichever failed. */
int bv_lease_take(BvBackend *b, BvLeaseKind kind, BvLease **ret, uint64_t *ret_epoch,
                  BvRepoProblem *ret_problem);
/* The same with the epoch read already (before anything of the repository was read). */
int bv_lease_take_epoch(BvBackend *b, BvLeaseKind kind, uint64_t epoch, BvLease **ret, BvRepoProblem *ret_problem);
/* The epoch the lease was taken at. */
uint64_t bv_lease_epoch(const BvLease *l);
/* Whether a remote lease is surely still live to every gc (bv_backend_s3_lease_fresh: put less
 * than half the grace ago); false for a local one (which never needs the question) and NULL. */
bool bv_lease_fresh(const BvLease *l);
/* Unlinks the lease and drops its lock. NULL is a no-op. */
void bv_lease_release(BvLease *l);

/* gc on a remote repository, where locks/gc serialises this machine only: takes a lease of kind
 * "gc", then looks for another live one. -EBUSY (and *ret_problem names leases/<the other's name>,
 * and holder says "its lease 'leases/<name>' is live: <its body>") when another gc holds one: this
 * one's lease is dropped again. Two that start
 * at once may both step back; neither ever runs beside the other. */
int bv_gc_lease_take(BvBackend *b, BvLease **ret, BvRepoProblem *ret_problem);

/* The number of live gc leases (a remote repository's: docs/LIFECYCLE.md, "gc on S3"), none
 * reaped: a LIST of leases/ and a read of each but own (the caller's, or NULL). */
int bv_gc_leases_live(BvBackend *b, const BvLease *own, size_t *ret);

/* Tests every lease: one whose lock can be taken belongs to a holder that ended, and is
 * removed (reaped; without reap, as for a dry run, it is only counted).
 * *ret_min_epoch gets the lowest epoch of the live ones (UINT64_MAX when none
 * lives), *ret_max_epoch (if not NULL) the highest (0 when none lives), *ret_live their number (a gc's lease is none of these: gc reads no
 * index another gc could condemn from). A lease file that does not parse counts as live at epoch 0 (it
 * is being written, or is damaged: finalize waits). Returns the number reaped. A lease that is not a
 * regular file, or cannot be tested, fails the scan: *ret_problem (if not NULL) names it, or
 * leases/ when the directory is at fault. */
int bv_leases_scan(BvBackend *b, bool reap, uint64_t *ret_min_epoch, uint64_t *ret_max_epoch, size_t *ret_live,
                   BvRepoProblem *ret_problem);
