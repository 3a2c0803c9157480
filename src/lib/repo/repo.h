/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A repository (docs/FORMAT.md): a directory with
 *   config              plain JSON: format, version, id, algorithms, chunker; authenticated
 *   keys/default        the master secret sealed by a passphrase (scrypt) or key file (HKDF)
 *   packs/xx/<id>.pack   immutable pack files
 *   index/<id>.idx        index segments
 *   snapshots/<id>.snap  snapshot records (the commit points)
 *   locks/              flock files
 * This is the library's front door: the CLI, the nbdkit plugin and the integration tests
 * use these functions.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aead.h"
#include "backend.h"
#include "chunker.h"
#include "index.h"
#include "keyring.h"
#include "object.h"
#include "pack.h"
#include "snapshot.h"

/* Progress of a long operation (backup, restore, verify), reported by a callback. Work is what
 * costs time: bytes read (backup, verify) or written (restore); holes, zero ranges and extents
 * reused from a parent are covered without work, so a rate or ETA counts work only (rate.h). */
typedef struct BvProgress {
        uint64_t done;       /* bytes of the image covered so far */
        uint64_t total;      /* image size, UINT64_MAX if unknown (stream) */
        uint64_t work_done;  /* bytes of work done so far */
        uint64_t work_total; /* bytes of work in all, UINT64_MAX if unknown */
        uint64_t elapsed_ns;
} BvProgress;

typedef void (*bv_progress_fn)(const BvProgress *p, void *userdata);

/* How new data is compressed (docs/FORMAT.md, "config"). */
typedef enum BvCompressMode {
        BV_COMPRESS_LEVEL = 0, /* every object at zstd_level (0: none) */
        BV_COMPRESS_AUTO = 1,  /* data chosen group by group (bv_zstd_choose), metadata at zstd_level */
} BvCompressMode;

typedef struct BvRepoConfig {
        BvCipher cipher;
        BvChunkerParams chunker; /* kind and sizes; the key stays zero (bv_repo_chunker_params adds it) */
        BvCompressMode compress_mode; /* default BV_COMPRESS_AUTO */
        int zstd_level;        /* 0: no compression (in either mode); default 3 */
        uint32_t pack_target;  /* bytes; default 32 MiB */
} BvRepoConfig;

void bv_repo_config_default(BvRepoConfig *c);

/* Where the secret comes from: exactly one of passphrase / key_file / keyring for encrypted
 * repositories; none for unencrypted ones. */
typedef struct BvSecret {
        const char *passphrase; /* NUL-terminated */
        const char *key_file;   /* path; its whole content is the key material */
        /* The keys of this repository as another open of it holds them (bv_repo_keyring): reopens
         * it without the secret, which need not stay in memory. The config's MAC proves they are
         * this repository's (-EBADMSG otherwise); not with BV_OPEN_KEYS (-EINVAL). */
        const struct BvKeyring *keyring;
} BvSecret;

typedef enum {
        BV_OPEN_READ = 0,
        BV_OPEN_WRITE = 1 << 0,  /* take the writer lock (fails with -EBUSY if held) */
        BV_OPEN_WAIT = 1 << 1,   /* wait for the lock instead of failing */
        BV_OPEN_KEYS = 1 << 2,   /* keep the master secret for bv_repo_change_key and bv_repo_key_add;
                                  * without it, it is wiped as soon as the subkeys are derived */
        BV_OPEN_EXPORT = 1 << 3, /* a reader that serves a snapshot (its lease says so) */
        BV_OPEN_GC = 1 << 4,     /* garbage collection: locks/gc exclusively, no lease */
        BV_OPEN_REPAIR = 1 << 5, /* with BV_OPEN_WRITE: accept damaged index segments (repair) */
        /* a reader of the snapshot records only (list): of a remote repository, no lease (gc
         * deletes none of what it reads) and no index (bv_repo_index is NULL: nothing that reads
         * objects may be called), which save a request or more each; a local one opens as a
         * reader (nothing there costs a request, and what is damaged or foreign is named as by any
         * reader). Not with BV_OPEN_WRITE or BV_OPEN_GC (-EINVAL) */
        BV_OPEN_RECORDS = 1 << 6,
} BvOpenFlags;

typedef struct BvRepo BvRepo;

/* An entry of the repository that was refused or found damaged (docs/FORMAT.md, "Paths" and
 * "Damage"). Every path inside a repository is resolved beneath it and never through a symbolic
 * link, and every file read must be a regular file. */
#define BV_REPO_PROBLEM_PATH 64
typedef struct BvRepoProblem {
        char path[BV_REPO_PROBLEM_PATH]; /* relative to the repository: "tmp", "locks/write", "index/<name>" */
        int error;     /* -ELOOP (symbolic link), -EBADFD/-ENOTDIR (type), -EBADMSG, -EIO, ... */
        uint32_t mode; /* S_IFMT bits of what path is, when it was refused for its type; else 0 */
        bool want_dir; /* what was wanted there: a directory, or a regular file */
        char holder[320]; /* -EBUSY on locks/write or locks/gc: who holds it ("pid N on HOST since
                           * TIME: COMMAND"), or "" when it did not say */
        char message[320]; /* a remote repository's: what the storage said of the request that
                            * failed ("s3://BUCKET/KEY: HTTP 403 ..."), or "" */
} BvRepoProblem;

/* Fills *p (if not NULL) for path (an object's key, bv_obj_key, or a folder of the repository
 * behind backend b) and error; for a refusal by type (-ELOOP, -EBADFD, -ENOTDIR, -EISDIR) names
 * the component at fault and what it is (for the rooms above that meet entries of their own:
 * gc/, leases/, verify-state). Returns error. */
int bv_repo_problem_note(BvRepoProblem *p, BvBackend *b, const char *path, bool want_dir, int error);

/* Creates a new repository at path (an empty or missing directory). */
int bv_repo_init(const char *path, const BvRepoConfig *cfg, const BvSecret *secret);

/* -ENOKEY: wrong passphrase/key, or none given for an encrypted repository; -EKEYREJECTED: a
 * passphrase or key file was given but the repository has no cipher (decided from the config
 * this open reads and uses, before anything is locked or written: such a repository would open
 * with any secret, so it is not the one the secret belongs to); -ENOENT named keys/default:
 * an encrypted repository without any key slot;
 * -EPROTONOSUPPORT: unknown format version; -EBADMSG: config fails authentication;
 * -ELOOP/-EBADFD/-ENOTDIR: an entry is a symbolic link or of the wrong type (refused).
 * Only path itself may be reached through symbolic links (it is the user's own path).
 * Reading opens with damaged index segments left out (bv_repo_damaged). Writing refuses them
 * with -EUCLEAN, and lists packs/: a pack the index names that is missing makes the writer
 * store what it held again (bv_repo_missing_packs). */
int bv_repo_open(const char *path, const BvSecret *secret, BvOpenFlags flags, BvRepo **ret);
/* The same; on failure *ret_problem (if not NULL) names the entry at fault, if one was (an
 * empty path otherwise). */
int bv_repo_open_report(const char *path, const BvSecret *secret, BvOpenFlags flags, BvRepoProblem *ret_problem,
                        BvRepo **ret);
/* The same for a repository as it was at time at (seconds since the epoch; 0: now): an S3
 * location with versioning, opened from the object versions current then (backend-s3.h,
 * bv_backend_s3_open_at), read-only (-EROFS for BV_OPEN_WRITE or BV_OPEN_GC); -EOPNOTSUPP for
 * a local directory, which keeps no versions. Where a remote repository fails, *ret_problem's
 * message says what the storage answered. gc (BV_OPEN_GC) writes a remote repository through its
 * backend (packs, index segments, condemned lists: bv_repo_pack_writer_new, bv_index_write_through);
 * a backup (BV_OPEN_WRITE) to a remote one is refused for now (-EROFS). */
int bv_repo_open_at(const char *path, int64_t at, const BvSecret *secret, BvOpenFlags flags,
                    BvRepoProblem *ret_problem, BvRepo **ret);
/* bv_repo_open_at in two steps, so that the caller can look at the config (bv_repo_config: whether
 * to ask for a secret) that the open then goes on with, read once: *ret is a repository with only
 * its config read (to close with bv_repo_close, or to open with bv_repo_open_started, which also
 * closes it on failure and sets *rp to NULL). */
int bv_repo_start_at(const char *path, int64_t at, BvOpenFlags flags, BvRepoProblem *ret_problem, BvRepo **ret);
int bv_repo_open_started(BvRepo **rp, const BvSecret *secret, BvRepoProblem *ret_problem);
/* Proves that the repository at path is the one secret (a passphrase or key file: -ENOKEY without)
 * opens: its config read once, a cipher (-EKEYREJECTED without), a key slot the secret opens and
 * the config's MAC under that key. Takes no lock and no lease and writes nothing: for a drive that
 * must show it is the registered one before anything is written anywhere. Errors as bv_repo_open. */
int bv_repo_prove(const char *path, const BvSecret *secret, BvRepoProblem *ret_problem);

/* What was met damaged and left out: index segments (at open and reload) and snapshot records
 * (when the snapshot list was loaded), in the order met. Owned by the repository. */
void bv_repo_damaged(BvRepo *r, const BvRepoProblem **ret, size_t *ret_count);
/* For a writer: the packs the index named that were missing at open (sorted). */
void bv_repo_missing_packs(BvRepo *r, const uint8_t (**ret)[BV_PACK_ID_SIZE], size_t *ret_count);
void bv_repo_close(BvRepo *r);

/* Reads the config without the key (to ask for a passphrase only when needed). */
int bv_repo_peek_config(const char *path, BvRepoConfig *ret);
int bv_repo_peek_config_report(const char *path, BvRepoConfig *ret, BvRepoProblem *ret_problem);
int bv_repo_peek_config_at(const char *path, int64_t at, BvRepoConfig *ret, BvRepoProblem *ret_problem);

const BvRepoConfig *bv_repo_config(const BvRepo *r);
const char *bv_repo_path(const BvRepo *r);
const char *bv_repo_id_hex(const BvRepo *r);

/* Re-seals the master secret under a new passphrase or key file (writer lock held). */
int bv_repo_change_key(BvRepo *r, const BvSecret *new_secret);

/*
 * Key slots: keys/<slot>, each the master secret sealed under its own passphrase or key file
 * (same format as keys/default; see docs/FORMAT.md). Opening tries "default" first, then the
 * others in name order. Slot names: 1..64 of [a-z0-9._-], not starting with '.' or '-'.
 * add: -EEXIST if the slot exists. remove: -ENOENT if missing, -EMLINK for the last slot.
 * export: the slot's file as it is (still sealed). import: checks that the key file parses and
 * belongs to the repository at path (-EXDEV otherwise) and writes it as a new slot, without
 * opening the repository (the point is to restore a lost key).
 */
#define BV_KEY_SLOT_MAX 64
bool bv_key_slot_valid(const char *slot);
int bv_repo_key_slots(BvRepo *r, char ***ret, size_t *ret_n);
void bv_key_slots_free(char **names, size_t n);
int bv_repo_key_add(BvRepo *r, const char *slot, const BvSecret *secret);
int bv_repo_key_remove(BvRepo *r, const char *slot);
int bv_repo_key_export(BvRepo *r, const char *slot, char **ret, size_t *ret_len);
/* The master secret sealed by secret as a key file's JSON (malloc'd), written nowhere: for a
 * related repository (blkvault copy). Needs BV_OPEN_KEYS (-EPERM) and a cipher (-EOPNOTSUPP). */
int bv_repo_key_seal_export(BvRepo *r, const BvSecret *secret, char **ret);
int bv_repo_key_import(const char *path, const char *slot, const char *json, size_t len);

/* Snapshots, oldest first. The list belongs to the repository until it is closed or reloaded. */
int bv_repo_snapshots(BvRepo *r, BvSnapshot *const **ret_list, size_t *ret_count);
int bv_repo_find_snapshot(BvRepo *r, const char *spec, const BvSnapshot **ret);

/* Internals shared by the layer's modules. */
BvIndex *bv_repo_index(BvRepo *r);
BvPackSet *bv_repo_packs(BvRepo *r);
const BvKeyring *bv_repo_keyring(BvRepo *r);
/* Where the repository's objects are kept (backend.h): every room names them through it. */
BvBackend *bv_repo_backend(BvRepo *r);
/* What a remote repository's storage said of the last request that failed ("s3://BUCKET/KEY:
 * HTTP 503 ..."), into buf (len bytes); "" for a local repository or when none failed. For the
 * CLI's one message when a read fails with a transport or storage error. Returns buf. */
const char *bv_repo_storage_error(BvRepo *r, char *buf, size_t len);
/* A directory fd of the repository: "packs", "index", "snapshots", "tmp", or "" (the top).
 * The fd belongs to the repository (do not close it); -ENOENT for another name. */
int bv_repo_dirfd(BvRepo *r, const char *sub);
/* A pack writer for r opened to write (or gc): into packs/ of a local repository, through the
 * backend's spooled writers for a remote one. -EROFS for a repository opened to read. */
int bv_repo_pack_writer_new(BvRepo *r, BvObjectCodec *codec, BvPackWriter **ret);
void bv_repo_chunker_params(const BvRepo *r, BvChunkerParams *ret);

/* The gc epoch of this open's lease (docs/LIFECYCLE.md, "Leases"); -ENOENT without a lease
 * (gc, a reader that could not write leases/). */
int bv_repo_lease_epoch(const BvRepo *r, uint64_t *ret);

/* Where an object or chunk is stored: -EUCLEAN if the id is not indexed. */
int bv_repo_locate(BvRepo *r, const uint8_t id[BV_ID_SIZE], BvLocation *ret);
/* The encoded bytes at a location (loc->length of them), read into the codec's input buffer
 * (bv_object_codec_input): valid until the codec reads again. */
int bv_repo_read_encoded(BvRepo *r, BvObjectCodec *codec, const BvLocation *loc, void **ret);

/* Announces that the object at loc will be read soon: its read starts now, beside others
 * (bv_packset_advise). -EUCLEAN if its pack is not there. */
int bv_repo_advise(BvRepo *r, const BvLocation *loc);
/* exact: every read of a pack that follows was announced with bv_repo_advise, so reads that look
 * like a stream prefetch nothing more (bv_packset_set_exact); false: the default again. */
void bv_repo_set_exact_reads(BvRepo *r, bool exact);
/* Announces that lookups will touch much of the index: its segments are read ahead, when they
 * hold at most max_bytes in all (nothing otherwise: lookups then read what they touch). */
void bv_repo_advise_index(BvRepo *r, uint64_t max_bytes);

/* Reads and authenticates one object stored whole by id (index lookup, pack read, decode):
 * not a chunk, which may be stored in a group (bv_repo_read_chunk, chunks.h). buf has room
 * for out_cap bytes. Thread-safe given a per-thread codec. */
int bv_repo_read_object(BvRepo *r, BvObjectCodec *codec, BvObjectType type, const uint8_t id[BV_ID_SIZE],
                        void *buf, size_t out_cap, size_t *ret_len);
/* The same into a malloc'd buffer of the object's size. -EUCLEAN if the id is not indexed. */
int bv_repo_read_object_alloc(BvRepo *r, BvObjectCodec *codec, BvObjectType type, const uint8_t id[BV_ID_SIZE],
                              void **ret, size_t *ret_len);

/* Drops the snapshot list (pointers from bv_repo_snapshots/find become invalid) and picks up
 * index segments written since open; the next bv_repo_snapshots loads the list again. */
int bv_repo_reload(BvRepo *r);

/* The config and key files as parsed (docs/FORMAT.md, "Config and key files"); exposed for
 * the fuzzers and tests. */
typedef struct BvRepoConfigFile {
        BvRepoConfig config;
        uint8_t id[BV_REPO_ID_SIZE];
        uint64_t created;
        uint8_t mac[BV_HASH_SIZE];
} BvRepoConfigFile;

/* -EBADMSG: malformed, missing or invalid fields; -EPROTONOSUPPORT: unknown version or
 * algorithm. The MAC is not checked here. */
int bv_repo_config_parse(const char *json, size_t len, BvRepoConfigFile *ret);
/* The canonical text the config MAC is computed over (malloc'd, NUL-terminated). */
int bv_repo_config_canonical(const BvRepoConfigFile *f, char **ret);
/* The config file's JSON (malloc'd). */
int bv_repo_config_format(const BvRepoConfigFile *f, char **ret);
/* The checks repository open and init apply to a parsed config: known cipher and chunker,
 * chunker sizes (bv_chunker_params_check), compression level and pack size. -EINVAL if not. */
int bv_repo_config_check(const BvRepoConfig *c);

#define BV_KEYFILE_SALT_SIZE 32

typedef struct BvKeyFile {
        uint8_t repository[BV_REPO_ID_SIZE];
        bool scrypt;              /* kdf: scrypt of a passphrase, or hkdf-sha256 of a key file */
        uint32_t log2_n, r, p;    /* scrypt only */
        uint8_t salt[BV_KEYFILE_SALT_SIZE];
        uint8_t nonce[BV_NONCE_SIZE];
        uint8_t sealed[BV_MASTER_SIZE + BV_TAG_SIZE]; /* ciphertext || tag */
} BvKeyFile;

/* -EBADMSG: malformed or invalid fields; -EPROTONOSUPPORT: unknown version, kdf or cipher. */
int bv_repo_keyfile_parse(const char *json, size_t len, BvKeyFile *ret);
int bv_repo_keyfile_format(const BvKeyFile *kf, char **ret);
/* Opens the sealed master key with a passphrase (scrypt key files) or key material (hkdf key
 * files, at least the minimum key-file size), as repository open does after reading the
 * secret. -ENOKEY: the secret is missing or wrong; -EINVAL: scrypt parameters refused. */
int bv_repo_keyfile_open(const BvKeyFile *kf, const char *passphrase, const void *material, size_t material_len,
                         uint8_t master[BV_MASTER_SIZE]);
