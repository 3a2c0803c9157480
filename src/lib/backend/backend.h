/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The storage backend: the one owner of a repository's layout (docs/ARCHITECTURE.md, "The
 * storage backend"; docs/FORMAT.md, "Objects and keys"). Every room above names objects by
 * kind and name and never builds a path: only this room turns (kind, name) into a place, the
 * same relative key everywhere ("snapshots/<id>.snap"): beneath the repository's directory for
 * the local backend, PREFIX/<key> in a bucket for S3.
 *
 * An implementation is a BvBackendOps table (libnbd nbdcopy's struct rw_ops style) and a
 * BvBackend that embeds it. Callers use the bv_backend_* wrappers below, never the ops
 * directly; an op an implementation lacks is NULL and its wrapper returns -EOPNOTSUPP.
 *
 * Errors (negative errno, one meaning each): -ENOENT no such object; -EEXIST a create-only
 * put met an existing object; -EBADFD/-ELOOP/-ENOTDIR an entry that is not what its kind must
 * be (local: a FIFO, a symbolic link; never followed); -EFBIG larger than the caller's max;
 * -EROFS/-EACCES not writable; -ENOSPC full; -EIO a transport or device error the backend
 * gave up on; -EOPNOTSUPP an operation this backend does not have (a flock on S3).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lock.h"

/* What an object is. Each kind has a folder (its key prefix) and a name syntax; the name is
 * the object's key below that folder, exactly as the local backend stores it. */
typedef enum BvObjKind {
        BV_KIND_CONFIG = 0,   /* "config"                     name "" (one object)       */
        BV_KIND_KEY,          /* "keys/<slot>"                name: the slot             */
        BV_KIND_PACK,         /* "packs/xx/<32 hex>.pack"     name "xx/<32 hex>.pack" (bv_pack_path) */
        BV_KIND_INDEX,        /* "index/<16 hex>.idx"         name "<16 hex>.idx"        */
        BV_KIND_SNAPSHOT,     /* "snapshots/<32 hex>.snap", "snapshots/<32 hex>.protect" */
        BV_KIND_LEASE,        /* "leases/<16 hex>.lease"      see the lease ops          */
        BV_KIND_CONDEMNED,    /* "gc/<16 hex>.idx"            gc's condemned lists       */
        BV_KIND_GC_EPOCH,     /* "gc/epoch"                   name "" (one object)       */
        BV_KIND_VERIFY_STATE, /* "verify-state"               name "" (one object)       */
        BV_KIND_LOCK,         /* "locks/<write|gc|commit>"    local to the machine: flock */
        BV_KIND_TMP,          /* "tmp/<name>"                 scratch, never durable, local only */
        BV_KIND_COUNT
} BvObjKind;

/* The longest key (kind folder + '/' + name) and the longest name. */
#define BV_BACKEND_KEY_MAX 96
#define BV_BACKEND_NAME_MAX 80

/* "snapshots", "gc", ... ("" for the top-level kinds config and verify-state). */
const char *bv_obj_kind_folder(BvObjKind kind);
/* A short word for messages: "pack", "index segment", "snapshot record", "condemned list". */
const char *bv_obj_kind_name(BvObjKind kind);
/* The object's key, relative to the repository ("gc/epoch", "packs/ab/ab12....pack"): the local
 * backend's path beneath the repository directory, the S3 backend's key below PREFIX/.
 * -EINVAL for a name that is empty where one is needed, has '/' or ".." where not allowed, or
 * is too long. */
int bv_obj_key(BvObjKind kind, const char *name, char ret[BV_BACKEND_KEY_MAX]);

typedef enum BvPutFlags {
        /* Create-only: -EEXIST if the object exists (local: link(2) of a synced temporary file,
         * never rename over; S3: If-None-Match: * where the store honours it, probed at open,
         * else a HEAD first, which is racy, and every kind that uses it is content-addressed or
         * carries a random name, so a lost race writes the same bytes or cannot happen). */
        BV_PUT_CREATE = 0,
        /* Replace an existing object (config of a key change, gc/epoch, verify-state). */
        BV_PUT_REPLACE = 1 << 0,
} BvPutFlags;

/* One entry met by a listing. */
typedef struct BvObjEntry {
        const char *name;  /* the name within its kind (as put takes it) */
        uint64_t size;     /* bytes */
        int64_t mtime_ns;  /* last modification (local: st_mtim; S3: Last-Modified), 0 if unknown */
        uint32_t type;     /* S_IFREG for an object; what else the local backend met under this
                            * kind's folder (S_IFLNK, S_IFIFO, S_IFDIR...): the caller refuses it
                            * or skips it, nothing is followed. S3 lists only S_IFREG. */
} BvObjEntry;

/* Return < 0 to stop the listing with that error. */
typedef int (*bv_obj_list_fn)(const BvObjEntry *e, void *userdata);

typedef struct BvBackend BvBackend;
typedef struct BvObjReader BvObjReader;
typedef struct BvObjWriter BvObjWriter;
typedef struct BvBackendLease BvBackendLease;

typedef struct BvBackendOps {
        const char *scheme; /* "file", "s3" */

        /* Creates the repository's layout at a location that holds nothing (-EEXIST if it
         * holds a config, -ENOTEMPTY if anything else): local makes the kind folders and
         * fsyncs them; S3 checks that nothing is below PREFIX/. */
        int (*create)(BvBackend *b);
        void (*close)(BvBackend *b);

        /* ---- whole objects ---- */
        /* Puts len bytes as (kind, name), durable when it returns: local is the recipe (temporary
         * file in the kind's folder, fsync, link or rename, fsync the folder); S3 one PUT
         * (multipart above the backend's part size) with Content-MD5/x-amz-content-sha256. */
        int (*put)(BvBackend *b, BvObjKind kind, const char *name, const void *data, size_t len, BvPutFlags flags);
        /* Reads the whole object, at most max bytes (-EFBIG beyond), into a malloc'd buffer with
         * a trailing NUL not counted in *ret_len. */
        int (*get)(BvBackend *b, BvObjKind kind, const char *name, size_t max, void **ret, size_t *ret_len);
        /* Size and modification time, without reading (local: fstatat beneath, no symlink
         * followed, -EBADFD for a non-regular entry; S3: HEAD). */
        int (*stat)(BvBackend *b, BvObjKind kind, const char *name, BvObjEntry *ret);
        /* Deletes; -ENOENT if absent. Durable when it returns (local: the folder is fsynced). */
        int (*remove)(BvBackend *b, BvObjKind kind, const char *name);
        /* Calls fn for every entry of kind in no particular order; for packs every xx/ folder is
         * walked (names "xx/<...>"). Local: readdir of the folder (a folder that is missing lists
         * nothing; one that is a symbolic link or not a directory is -ELOOP/-ENOTDIR). S3:
         * ListObjectsV2 of PREFIX/<folder>/ page by page (1,000 keys a request). Returns the
         * number of entries passed to fn. */
        int (*list)(BvBackend *b, BvObjKind kind, bv_obj_list_fn fn, void *userdata);

        /* ---- large objects: ranged reads ---- */
        /* A handle for reads at offsets of one object (packs, index segments). Local: the file,
         * opened beneath, checked to be regular. S3: HEAD for the size, then a ranged GET per
         * read (and the local cache below it). */
        int (*reader_open)(BvBackend *b, BvObjKind kind, const char *name, BvObjReader **ret);
        /* Reads up to len bytes at offset; returns the count (less only at the end). */
        ssize_t (*reader_pread)(BvObjReader *r, void *buf, size_t len, uint64_t offset);
        uint64_t (*reader_size)(BvObjReader *r);
        /* A hint that [offset, offset+len) will be read soon (local: POSIX_FADV_WILLNEED; S3: a
         * prefetch into the cache, or nothing). */
        void (*reader_advise)(BvObjReader *r, uint64_t offset, uint64_t len);
        /* An fd holding the whole object for mmap and pread (index segments): local the file
         * itself; S3 a file in the local cache, filled from one GET. The reader keeps it. */
        int (*reader_fd)(BvObjReader *r);
        void (*reader_close)(BvObjReader *r);

        /* ---- large objects: written through a local spool ---- */
        /* A writer is a local file the caller fills with write/pwrite (and may mmap): local a
         * temporary file in the kind's folder (O_TMPFILE or .tmp-*), S3 a file in the spool
         * directory. commit gives it its name durably (local: fsync, link, fsync the folders;
         * S3: PUT of the file, create-only) and frees the writer; abort drops it. */
        int (*writer_open)(BvBackend *b, BvObjKind kind, BvObjWriter **ret);
        int (*writer_fd)(BvObjWriter *w);
        int (*writer_commit)(BvObjWriter *w, const char *name, BvPutFlags flags);
        void (*writer_abort)(BvObjWriter *w);

        /* ---- locks: this machine only ---- */
        /* Takes a repository lock (lock.h: locks/write, locks/gc shared or exclusive,
         * locks/commit): an fd to close to release it; -EBUSY if !wait and it is taken. Local:
         * flock(2) on the file in the repository (lock.c). S3: flock on a file of the local
         * cache for this bucket and prefix, which serialises processes of this machine only;
         * what meets across machines is written down in docs/LIFECYCLE.md. */
        int (*lock)(BvBackend *b, BvLockKind kind, bool wait);
        /* Who holds a write or gc lock, as the holder recorded itself beside it (lock.h,
         * bv_lock_holder): both backends keep the lock files in a local directory (the
         * repository's, the cache's for this bucket and prefix), so both can name it. */
        int (*lock_holder)(BvBackend *b, BvLockKind kind, char *buf, size_t size);

        /* ---- leases: visible to every user of the repository, wherever it runs ---- */
        /* Puts body as leases/<16 random hex>.lease, visible only once it is held: local a file
         * locked with flock(LOCK_EX) before it is linked, held while the holder lives; S3 an
         * object the backend puts again every heartbeat interval, from a thread of its own,
         * while the holder lives. */
        int (*lease_take)(BvBackend *b, const void *body, size_t len, BvBackendLease **ret);
        /* Deletes the lease object (while still held), then drops what held it. */
        void (*lease_release)(BvBackendLease *l);
        /* Whether the holder of leases/<name> still lives: 1 yes (its body, at most max bytes,
         * in *ret_body, malloc'd, NUL-terminated, if ret_body is not NULL), 0 it ended (and with
         * reap the lease was removed) or the lease is gone, <0 error. Local: a non-blocking
         * flock attempt; S3: Last-Modified younger than the backend's grace (a few heartbeat
         * intervals). */
        int (*lease_alive)(BvBackend *b, const char *name, bool reap, size_t max, char **ret_body);

        /* ---- naming what is wrong ---- */
        /* After an op on key failed with error: the key's first component at fault (a symbolic
         * link, a foreign type) and its type; 0 when nothing is amiss. Local only; NULL on S3. */
        int (*culprit)(BvBackend *b, const char *key, bool want_dir, mode_t *ret_mode);
} BvBackendOps;

/* Implementations embed these first in their own structs (the wrappers find the ops there). */
struct BvBackend {
        const BvBackendOps *ops;
        char *location; /* what the user gave: a directory path, s3://bucket/prefix */
};
struct BvObjReader {
        BvBackend *backend;
};
struct BvObjWriter {
        BvBackend *backend;
};
struct BvBackendLease {
        BvBackend *backend;
        const char *name; /* leases/<name> (the implementation's) */
};

/* Opens location: "s3://BUCKET[/PREFIX]" (the S3 backend) or a directory path (the local one;
 * the one place where a symbolic link is followed, the user's own path). create: the location
 * is made or must hold nothing (ops->create). -EPROTONOSUPPORT for a scheme not built in. */
int bv_backend_open(const char *location, bool create, BvBackend **ret);
/* Opens an existing location to read (and, but at a point in time, write) it: as
 * bv_backend_open, and at a point in time at (seconds since the epoch; 0: now) for S3
 * (bv_backend_s3_open_at; -EOPNOTSUPP for a directory, which keeps no versions). A remote
 * location's failure is said in errbuf (errlen bytes; may be NULL), naming the endpoint,
 * bucket or key at fault. */
int bv_backend_open_read(const char *location, int64_t at, BvBackend **ret, char *errbuf, size_t errlen);
void bv_backend_close(BvBackend *b);
bool bv_backend_is_local(const BvBackend *b);
const char *bv_backend_location(const BvBackend *b);

/* The local backend (backend-local.c). */
int bv_backend_local_open(const char *path, bool create, BvBackend **ret);
/* The repository directory's fd of a local backend (-EOPNOTSUPP for another): for the few
 * operations that are about the directory itself (statvfs, the tests). */
int bv_backend_local_dirfd(BvBackend *b);

int bv_backend_put(BvBackend *b, BvObjKind kind, const char *name, const void *data, size_t len, BvPutFlags flags);
int bv_backend_get(BvBackend *b, BvObjKind kind, const char *name, size_t max, void **ret, size_t *ret_len);
int bv_backend_stat(BvBackend *b, BvObjKind kind, const char *name, BvObjEntry *ret);
/* 1 if (kind, name) exists as an object, 0 if not; <0 error (a foreign entry: -EBADFD...). */
int bv_backend_exists(BvBackend *b, BvObjKind kind, const char *name);
int bv_backend_remove(BvBackend *b, BvObjKind kind, const char *name);
int bv_backend_list(BvBackend *b, BvObjKind kind, bv_obj_list_fn fn, void *userdata);

int bv_obj_reader_open(BvBackend *b, BvObjKind kind, const char *name, BvObjReader **ret);
ssize_t bv_obj_reader_pread(BvObjReader *r, void *buf, size_t len, uint64_t offset);
uint64_t bv_obj_reader_size(BvObjReader *r);
void bv_obj_reader_advise(BvObjReader *r, uint64_t offset, uint64_t len);
int bv_obj_reader_fd(BvObjReader *r);
void bv_obj_reader_close(BvObjReader *r);

int bv_obj_writer_open(BvBackend *b, BvObjKind kind, BvObjWriter **ret);
int bv_obj_writer_fd(BvObjWriter *w);
int bv_obj_writer_commit(BvObjWriter *w, const char *name, BvPutFlags flags);
void bv_obj_writer_abort(BvObjWriter *w);

int bv_backend_lock(BvBackend *b, BvLockKind kind, bool wait);
int bv_backend_lock_holder(BvBackend *b, BvLockKind kind, char *buf, size_t size);

int bv_backend_lease_take(BvBackend *b, const void *body, size_t len, BvBackendLease **ret);
/* A new lease's name for the implementations' lease_take: 16 random lowercase hex digits and
 * ".lease" (the names repo/lease.c lists). */
#define BV_LEASE_NAME_SIZE 23
int bv_lease_name_new(char ret[BV_LEASE_NAME_SIZE]);
void bv_backend_lease_release(BvBackendLease *l);
int bv_backend_lease_alive(BvBackend *b, const char *name, bool reap, size_t max, char **ret_body);

int bv_backend_culprit(BvBackend *b, const char *key, bool want_dir, mode_t *ret_mode);
