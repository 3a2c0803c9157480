/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The repository: creation, opening (config, key, keyring, index, packs, lock), key changes
 * (the key files themselves: repokey.c), the snapshot list and the authenticated object read
 * every other module goes through.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <string.h>
#include <sys/stat.h>

#include "backend-s3.h"
#include "fileio.h"
#include "hex.h"
#include "lease.h"
#include "lock.h"
#include "macro.h"
#include "random.h"
#include "repo-internal.h"
#include "secmem.h"
#include "timeutil.h"

#define CONFIG_MAX (64u * 1024)

enum { DIR_PACKS, DIR_INDEX, DIR_SNAPSHOTS, DIR_TMP, DIR_COUNT };
static const char *const fd_names[DIR_COUNT] = {
        [DIR_PACKS] = "packs", [DIR_INDEX] = "index", [DIR_SNAPSHOTS] = "snapshots", [DIR_TMP] = "tmp",
};

struct BvRepo {
        char *path;
        BvBackend *backend;
        int dirfd; /* the local backend's directory (borrowed) */
        int fds[DIR_COUNT];
        int lock_fd;
        BvLease *lease;
        BvOpenFlags flags;
        BvRepoConfigFile cf;
        char id_hex[2 * BV_REPO_ID_SIZE + 1];
        uint8_t *master; /* bv_secure_alloc(BV_MASTER_SIZE): kept for key changes (BV_OPEN_KEYS only) */
        BvKeyring *keyring;
        BvIndex *index;
        BvPackSet *packs;

        pthread_mutex_t snap_lock; /* guards the list and the codec below */
        BvObjectCodec *snap_codec;
        BvSnapshot **snaps;
        size_t n_snaps;
        bool snaps_loaded;
        BvRepoProblem *damaged; /* under snap_lock */
        size_t n_damaged;
        uint8_t (*missing)[BV_PACK_ID_SIZE];
        size_t n_missing;
};

void bv_repo_config_default(BvRepoConfig *c)
{
        *c = (BvRepoConfig){
                .cipher = BV_CIPHER_AES256GCM,
                .chunker = { .kind = BV_CHUNKER_HYBRID, .min = BV_CHUNK_MIN_DEFAULT, .avg = BV_CHUNK_AVG_DEFAULT,
                             .max = BV_CHUNK_MAX_DEFAULT },
                .compress_mode = BV_COMPRESS_AUTO,
                .zstd_level = 3,
                .pack_target = BV_PACK_TARGET_DEFAULT,
        };
}

static int config_mac(const BvRepoConfigFile *f, const BvKeyring *k, uint8_t out[BV_HASH_SIZE])
{
        _cleanup_free_ char *text = NULL;
        int r = bv_repo_config_canonical(f, &text);
        if (r < 0)
                return r;
        return bv_hmac_sha256(bv_keyring_config_key(k), BV_KEY_SIZE, text, strlen(text), out);
}

int bv_repo_config_check(const BvRepoConfig *c)
{
        BvChunkerParams p = c->chunker;

        if (!bv_cipher_name(c->cipher) || !bv_chunker_kind_name(c->chunker.kind))
                return -EINVAL;
        if (bv_chunker_params_check(&p) < 0)
                return -EINVAL;
        if (c->zstd_level < -7 || c->zstd_level > 19)
                return -EINVAL;
        if (c->compress_mode != BV_COMPRESS_LEVEL && c->compress_mode != BV_COMPRESS_AUTO)
                return -EINVAL;
        if (c->pack_target < 64u * 1024 || c->pack_target > 1024u * 1024 * 1024)
                return -EINVAL;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(BvKeyring, bv_keyring_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(BvBackend, bv_backend_close);

/* Prepares everything in memory first (so that a bad secret leaves nothing behind), then has
 * the backend make the layout at path (a directory that is missing or empty: -EEXIST if it
 * holds a config, -ENOTEMPTY if anything else) and writes keys/ and the config there. The
 * config goes last: a directory without it is not a repository. */
static int init_files(const char *path, const BvRepoConfig *cfg, const BvSecret *secret)
{
        _cleanup_(bv_keyring_freep) BvKeyring *k = NULL;
        _cleanup_(bv_backend_closep) BvBackend *b = NULL;
        _cleanup_free_ char *json = NULL;
        BvRepoConfigFile f = { .config = *cfg, .created = bv_now_realtime_ns() / 1000000000u };
        BvKeyFile kf;
        uint8_t *master;
        int r;

        r = bv_random_bytes(f.id, sizeof(f.id));
        if (r < 0)
                return r;
        master = bv_secure_alloc(BV_MASTER_SIZE);
        if (!master)
                return -ENOMEM;
        r = 0;
        if (cfg->cipher != BV_CIPHER_NONE) {
                r = bv_random_bytes(master, BV_MASTER_SIZE);
                if (r >= 0)
                        r = repo_key_seal(f.id, secret, master, &kf);
        }
        if (r >= 0)
                r = bv_keyring_new(cfg->cipher, master, f.id, &k);
        bv_secure_free(master, BV_MASTER_SIZE);
        if (r < 0)
                return r;
        r = config_mac(&f, k, f.mac);
        if (r < 0)
                return r;
        r = bv_repo_config_format(&f, &json);
        if (r < 0)
                return r;

        r = bv_backend_local_open(path, true, &b);
        if (r < 0)
                return r;
        if (cfg->cipher != BV_CIPHER_NONE) {
                r = repo_key_write(b, "default", &kf, false);
                if (r < 0)
                        return r;
        }
        return bv_backend_put(b, BV_KIND_CONFIG, NULL, json, strlen(json), BV_PUT_CREATE);
}

int bv_repo_init(const char *path, const BvRepoConfig *cfg, const BvSecret *secret)
{
        BvRepoConfig def;
        int r;

        if (!path)
                return -EINVAL;
        if (!cfg) {
                bv_repo_config_default(&def);
                cfg = &def;
        }
        r = bv_repo_config_check(cfg);
        if (r < 0)
                return r;
        if (cfg->cipher == BV_CIPHER_NONE && secret && (secret->passphrase || secret->key_file))
                return -EINVAL; /* a secret would protect nothing */
        if (cfg->cipher != BV_CIPHER_NONE) {
                r = repo_secret_check(secret); /* before the directory is created */
                if (r < 0)
                        return r;
        }
        return init_files(path, cfg, secret);
}

static int read_config(BvBackend *b, BvRepoConfigFile *ret)
{
        _cleanup_free_ char *json = NULL;
        size_t len;
        int r;

        r = bv_backend_get(b, BV_KIND_CONFIG, NULL, CONFIG_MAX, (void **)&json, &len);
        if (r == -EFBIG)
                return -EBADMSG;
        if (r < 0)
                return r;
        return bv_repo_config_parse(json, len, ret);
}

/* What the storage said of the last request that failed (a remote backend's), into problem. */
static void note_storage_message(BvRepoProblem *problem, BvBackend *b)
{
        if (problem && b && !bv_backend_is_local(b) && !problem->message[0])
                (void)bv_backend_errmsg(b, problem->message, sizeof(problem->message));
}

/* Opens the repository at path (for a directory the user's own path: the one place where
 * symbolic links are followed; s3://BUCKET[/PREFIX] as it was at time at when that is not 0) and
 * reads its config; what is wrong with the config is noted in problem, which may be NULL. */
static int open_repo_dir(const char *path, int64_t at, BvRepoProblem *problem, BvBackend **ret_backend,
                         BvRepoConfigFile *ret_config)
{
        _cleanup_(bv_backend_closep) BvBackend *b = NULL;
        int r;

        r = bv_backend_open_read(path, at, &b, problem ? problem->message : NULL,
                                 problem ? sizeof(problem->message) : 0);
        if (r < 0)
                return r;
        r = read_config(b, ret_config);
        if (r < 0) {
                (void)bv_repo_problem_note(problem, b, "config", false, r);
                note_storage_message(problem, b);
                return r;
        }
        *ret_backend = TAKE_PTR(b);
        return 0;
}

int bv_repo_peek_config_report(const char *path, BvRepoConfig *ret, BvRepoProblem *ret_problem)
{
        return bv_repo_peek_config_at(path, 0, ret, ret_problem);
}

int bv_repo_peek_config_at(const char *path, int64_t at, BvRepoConfig *ret, BvRepoProblem *ret_problem)
{
        _cleanup_(bv_backend_closep) BvBackend *b = NULL;
        BvRepoConfigFile f;
        int r;

        if (ret_problem)
                *ret_problem = (BvRepoProblem){};
        if (!path || !ret)
                return -EINVAL;
        r = open_repo_dir(path, at, ret_problem, &b, &f);
        if (r < 0)
                return r;
        *ret = f.config;
        return 0;
}

int bv_repo_peek_config(const char *path, BvRepoConfig *ret)
{
        return bv_repo_peek_config_report(path, ret, NULL);
}

static void free_snapshots(BvRepo *r)
{
        bv_snapshot_list_free(r->snaps, r->n_snaps);
        r->snaps = NULL;
        r->n_snaps = 0;
        r->snaps_loaded = false;
}

void bv_repo_close(BvRepo *r)
{
        if (!r)
                return;
        free_snapshots(r);
        bv_object_codec_free(r->snap_codec);
        bv_packset_free(r->packs);
        bv_index_free(r->index);
        bv_keyring_free(r->keyring);
        bv_secure_free(r->master, BV_MASTER_SIZE);
        for (size_t i = 0; i < DIR_COUNT; i++)
                safe_close(r->fds[i]);
        bv_lease_release(r->lease);
        safe_close(r->lock_fd);
        bv_backend_close(r->backend);
        pthread_mutex_destroy(&r->snap_lock);
        free(r->damaged);
        free(r->missing);
        free(r->path);
        free(r);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close);

/* Removes what an earlier writer left in tmp/ (nothing there is durable). */
static void empty_tmp(int tmp_fd)
{
        struct dirent *de;
        DIR *d;

        if (bv_opendir_beneath(tmp_fd, ".", &d) < 0)
                return;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        (void)unlinkat(tmp_fd, de->d_name, 0);
        closedir(d);
}

/* The master secret (secure memory) from the key slot the secret opens, and the keyring from it. */
static int open_master(BvRepo *r, const BvSecret *secret, BvRepoProblem *problem)
{
        int ret;

        r->master = bv_secure_alloc(BV_MASTER_SIZE);
        if (!r->master)
                return -ENOMEM;
        memset(r->master, 0, BV_MASTER_SIZE);
        if (r->cf.config.cipher != BV_CIPHER_NONE) {
                ret = repo_key_unseal(r->backend, r->cf.id, secret, r->master);
                if (ret < 0)
                        return bv_repo_problem_note(problem, r->backend, "keys/default", false, ret);
        }
        return bv_keyring_new(r->cf.config.cipher, r->master, r->cf.id, &r->keyring);
}

/* The keyring: a copy of the one the secret carries (a reopen), or derived from the master
 * secret; then the config's MAC is checked under it. The master secret is wiped at once unless
 * key changes were asked for (BV_OPEN_KEYS): the subkeys are all the repository needs, and the
 * fewer secrets a process holds the less a leak can cost. */
static int open_keys(BvRepo *r, const BvSecret *secret, BvRepoProblem *problem)
{
        uint8_t mac[BV_HASH_SIZE];
        int ret;

        if (secret && secret->keyring)
                ret = (r->flags & BV_OPEN_KEYS) ? -EINVAL : bv_keyring_dup(secret->keyring, &r->keyring);
        else
                ret = open_master(r, secret, problem);
        if (ret < 0)
                return ret;
        ret = config_mac(&r->cf, r->keyring, mac);
        if (ret < 0)
                return ret;
        if (CRYPTO_memcmp(mac, r->cf.mac, sizeof(mac)) != 0)
                return bv_repo_problem_note(problem, r->backend, "config", false, -EBADMSG);
        if (!(r->flags & BV_OPEN_KEYS)) {
                bv_secure_free(r->master, BV_MASTER_SIZE);
                r->master = NULL;
        }
        return 0;
}

static int open_stores(BvRepo *r, BvRepoProblem *problem)
{
        int ret;

        /* A local repository's folders, for what writes there (packs, index segments, tmp/); a
         * remote one is only read (repo_start refused writers), through the backend. */
        for (size_t i = 0; i < DIR_COUNT && r->dirfd >= 0; i++) {
                r->fds[i] = bv_open_dir_beneath(r->dirfd, fd_names[i]);
                if (r->fds[i] == -ENOENT)
                        return -EUCLEAN;
                if (r->fds[i] < 0)
                        return bv_repo_problem_note(problem, r->backend, fd_names[i], true, r->fds[i]);
        }
        ret = bv_index_open_backend(r->backend, r->fds[DIR_INDEX], &r->index);
        if (ret < 0)
                return ret;
        if (r->dirfd < 0 && (r->flags & (BV_OPEN_WRITE | BV_OPEN_GC))) {
                ret = bv_index_write_through(r->index);
                if (ret < 0)
                        return ret;
        }
        ret = bv_packset_new(r->backend, &r->packs);
        if (ret < 0)
                return ret;
        return bv_object_codec_new(r->keyring, r->cf.config.zstd_level, &r->snap_codec);
}

/* A reader opens with damaged index segments left out (what they locate then reads as missing:
 * -EUCLEAN). A writer refuses them: the objects only such a segment locates would be stored a
 * second time, a compaction would merge the segments it can read and drop the rest from its
 * view, and a later gc or repair that rebuilds from what it sees could delete the only copy of
 * what the damaged segment describes. Writing resumes once the index is repaired. A writer also
 * refuses what packs/ should not hold, and stores again what a missing pack held. */
static int open_checks(BvRepo *r, BvOpenFlags flags, BvRepoProblem *problem)
{
        int ret;

        ret = repo_index_damage(r->backend, r->index, &r->damaged, &r->n_damaged);
        if (ret < 0)
                return ret;
        if (!(flags & BV_OPEN_WRITE))
                return 0;
        if (r->n_damaged > 0 && !(flags & BV_OPEN_REPAIR)) {
                if (problem)
                        *problem = r->damaged[0];
                return -EUCLEAN;
        }
        return repo_check_packs(r->backend, r->index, r->packs, problem, &r->missing, &r->n_missing);
}

int bv_repo_open(const char *path, const BvSecret *secret, BvOpenFlags flags, BvRepo **ret)
{
        return bv_repo_open_report(path, secret, flags, NULL, ret);
}

/* A secret given for a repository without a cipher is refused (see repo_start). */
static int secret_fits(BvRepo *r, const BvSecret *secret, BvRepoProblem *problem)
{
        if (secret && (secret->passphrase || secret->key_file || secret->keyring) &&
            r->cf.config.cipher == BV_CIPHER_NONE)
                return bv_repo_problem_note(problem, r->backend, "config", false, -EKEYREJECTED);
        return 0;
}

/* A repository object with nothing open yet: only its directory and config, read once. A secret
 * given for a repository without a cipher is refused here, from the config this open goes on
 * with (not from an earlier peek, which a flaky or hostile drive can answer differently): such a
 * repository opens with any secret, so it proves nothing of the one who holds it. */
static int repo_start(const char *path, int64_t at, const BvSecret *secret, BvOpenFlags flags,
                      BvRepoProblem *problem, BvRepo **ret)
{
        _cleanup_(bv_repo_closep) BvRepo *r = NULL;
        int rr;

        if (problem)
                *problem = (BvRepoProblem){};
        if (!path || !ret || ((flags & BV_OPEN_RECORDS) && (flags & (BV_OPEN_WRITE | BV_OPEN_GC))))
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->dirfd = r->lock_fd = -EBADF;
        for (size_t i = 0; i < DIR_COUNT; i++)
                r->fds[i] = -EBADF;
        pthread_mutex_init(&r->snap_lock, NULL);
        r->flags = flags;
        r->path = strdup(path);
        if (!r->path)
                return -ENOMEM;

        rr = open_repo_dir(path, at, problem, &r->backend, &r->cf);
        if (rr < 0)
                return rr;
        /* A remote repository is written through its backend (packs, index segments, condemned
         * lists): prune and gc; a backup to one is not supported yet. */
        if (!bv_backend_is_local(r->backend) && (flags & BV_OPEN_WRITE))
                return -EROFS;
        r->dirfd = bv_backend_is_local(r->backend) ? bv_backend_local_dirfd(r->backend) : -EBADF;
        bv_hex_encode(r->cf.id, sizeof(r->cf.id), r->id_hex);
        rr = secret_fits(r, secret, problem);
        if (rr < 0)
                return rr;
        *ret = TAKE_PTR(r);
        return 0;
}

int bv_repo_start_at(const char *path, int64_t at, BvOpenFlags flags, BvRepoProblem *problem, BvRepo **ret)
{
        if (at < 0)
                return -EINVAL;
        return repo_start(path, at, NULL, flags, problem, ret);
}

int bv_repo_prove(const char *path, const BvSecret *secret, BvRepoProblem *problem)
{
        _cleanup_(bv_repo_closep) BvRepo *r = NULL;
        int rr;

        if (!secret || !(secret->passphrase || secret->key_file))
                return -ENOKEY;
        rr = repo_start(path, 0, secret, BV_OPEN_READ, problem, &r);
        return rr < 0 ? rr : open_keys(r, secret, problem);
}

int bv_repo_open_report(const char *path, const BvSecret *secret, BvOpenFlags flags, BvRepoProblem *problem,
                        BvRepo **ret)
{
        return bv_repo_open_at(path, 0, secret, flags, problem, ret);
}

static int repo_open(BvRepo *r, const BvSecret *secret, BvOpenFlags flags, BvRepoProblem *problem)
{
        int rr;

        if ((flags & BV_OPEN_RECORDS) && r->dirfd < 0) { /* the keys, then only what reads the records */
                rr = open_keys(r, secret, problem);
                return rr < 0 ? rr : bv_object_codec_new(r->keyring, r->cf.config.zstd_level, &r->snap_codec);
        }

        /* Lock before the (slow) key derivation, so a busy repository fails fast; the lease before
         * the index is opened (docs/LIFECYCLE.md, "Leases"). */
        rr = repo_open_lock(r->backend, flags, problem, &r->lock_fd, &r->lease);
        if (rr < 0)
                return rr;

        rr = open_keys(r, secret, problem);
        if (rr < 0)
                return rr;
        rr = open_stores(r, problem);
        if (rr < 0)
                return rr;
        rr = open_checks(r, flags, problem);
        if (rr < 0)
                return rr;
        /* tmp/ was opened beneath the repository: what is emptied is the repository's own. */
        if (flags & BV_OPEN_WRITE)
                empty_tmp(r->fds[DIR_TMP]);
        return 0;
}

int bv_repo_open_started(BvRepo **rp, const BvSecret *secret, BvRepoProblem *problem)
{
        _cleanup_(bv_repo_closep) BvRepo *r = TAKE_PTR(*rp);
        int rr;

        if (problem)
                *problem = (BvRepoProblem){};
        if (!r)
                return -EINVAL;
        rr = secret_fits(r, secret, problem);
        if (rr >= 0)
                rr = repo_open(r, secret, r->flags, problem);
        if (rr < 0) {
                note_storage_message(problem, r->backend);
                return rr;
        }
        *rp = TAKE_PTR(r);
        return 0;
}

int bv_repo_open_at(const char *path, int64_t at, const BvSecret *secret, BvOpenFlags flags,
                    BvRepoProblem *problem, BvRepo **ret)
{
        _cleanup_(bv_repo_closep) BvRepo *r = NULL;
        int rr;

        if (at < 0)
                return -EINVAL;
        rr = repo_start(path, at, secret, flags, problem, &r);
        if (rr >= 0)
                rr = repo_open(r, secret, flags, problem);
        if (rr < 0) {
                note_storage_message(problem, r ? r->backend : NULL);
                return rr;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

void bv_repo_damaged(BvRepo *r, const BvRepoProblem **ret, size_t *ret_count)
{
        BV_LOCK_GUARD(&r->snap_lock);
        *ret = r->damaged;
        *ret_count = r->n_damaged;
}

void bv_repo_missing_packs(BvRepo *r, const uint8_t (**ret)[BV_PACK_ID_SIZE], size_t *ret_count)
{
        *ret = (const uint8_t(*)[BV_PACK_ID_SIZE])r->missing;
        *ret_count = r->n_missing;
}

const BvRepoConfig *bv_repo_config(const BvRepo *r)
{
        return &r->cf.config;
}

const char *bv_repo_path(const BvRepo *r)
{
        return r->path;
}

const char *bv_repo_id_hex(const BvRepo *r)
{
        return r->id_hex;
}

int bv_repo_lease_epoch(const BvRepo *r, uint64_t *ret)
{
        if (!r->lease)
                return -ENOENT;
        *ret = bv_lease_epoch(r->lease);
        return 0;
}

BvIndex *bv_repo_index(BvRepo *r)
{
        return r->index;
}

BvPackSet *bv_repo_packs(BvRepo *r)
{
        return r->packs;
}

const BvKeyring *bv_repo_keyring(BvRepo *r)
{
        return r->keyring;
}

BvBackend *bv_repo_backend(BvRepo *r)
{
        return r->backend;
}

const char *bv_repo_storage_error(BvRepo *r, char *buf, size_t len)
{
        if (len > 0)
                buf[0] = '\0';
        return bv_backend_is_local(r->backend) ? buf : bv_backend_errmsg(r->backend, buf, len);
}

int bv_repo_pack_writer_new(BvRepo *r, BvObjectCodec *codec, BvPackWriter **ret)
{
        if (r->dirfd >= 0)
                return bv_pack_writer_new(r->fds[DIR_PACKS], codec, ret);
        if (!(r->flags & (BV_OPEN_WRITE | BV_OPEN_GC)))
                return -EROFS;
        return bv_pack_writer_new_backend(r->backend, codec, ret);
}

int bv_repo_dirfd(BvRepo *r, const char *sub)
{
        if (!sub || !*sub)
                return r->dirfd;
        for (size_t i = 0; i < DIR_COUNT; i++)
                if (strcmp(sub, fd_names[i]) == 0)
                        return r->fds[i];
        return -ENOENT;
}

void bv_repo_chunker_params(const BvRepo *r, BvChunkerParams *ret)
{
        const BvRepoConfig *c = &r->cf.config;

        *ret = c->chunker;
        memcpy(ret->key, bv_keyring_chunker_key(r->keyring), sizeof(ret->key));
}

/* The master secret sealed by secret, for a key change or a new slot: needs a repository opened
 * for writing with BV_OPEN_KEYS (else the master secret is already wiped) and encryption. */
static int seal_master(BvRepo *r, const BvSecret *secret, BvKeyFile *ret_kf)
{
        if (!(r->flags & BV_OPEN_WRITE))
                return -EPERM;
        if (r->cf.config.cipher == BV_CIPHER_NONE)
                return -EOPNOTSUPP;
        if (!r->master) /* opened without BV_OPEN_KEYS */
                return -EPERM;
        return repo_key_seal(r->cf.id, secret, r->master, ret_kf);
}

int bv_repo_change_key(BvRepo *r, const BvSecret *new_secret)
{
        BvKeyFile kf;
        int ret = r ? seal_master(r, new_secret, &kf) : -EINVAL;
        return ret < 0 ? ret : repo_key_write(r->backend, "default", &kf, true);
}

/* A snapshot record skipped by the list: kept as damage (the caller holds snap_lock). */
static void on_record_skipped(const char *file, int error, void *userdata)
{
        BvRepo *r = userdata;
        BvRepoProblem *p = reallocarray(r->damaged, r->n_damaged + 1, sizeof(*p));
        char path[BV_REPO_PROBLEM_PATH];

        if (!p)
                return; /* the record is skipped all the same, only not named */
        r->damaged = p;
        snprintf(path, sizeof(path), "snapshots/%.50s", file);
        (void)bv_repo_problem_note(&p[r->n_damaged++], r->backend, path, false, error);
}

static int load_snapshots(BvRepo *r)
{
        BvSnapshot **list = NULL;
        size_t n = 0;
        int ret;

        if (r->snaps_loaded)
                return 0;
        ret = bv_snapshot_list_report(r->backend, r->snap_codec, &list, &n, on_record_skipped, r);
        if (ret < 0)
                return ret;
        r->snaps = list;
        r->n_snaps = n;
        r->snaps_loaded = true;
        return 0;
}

int bv_repo_snapshots(BvRepo *r, BvSnapshot *const **ret_list, size_t *ret_count)
{
        BV_LOCK_GUARD(&r->snap_lock);
        int ret = load_snapshots(r);
        if (ret < 0)
                return ret;
        *ret_list = r->snaps;
        *ret_count = r->n_snaps;
        return 0;
}

int bv_repo_find_snapshot(BvRepo *r, const char *spec, const BvSnapshot **ret)
{
        BV_LOCK_GUARD(&r->snap_lock);
        int rr;

        if (!spec)
                return -EINVAL;
        rr = load_snapshots(r);
        if (rr < 0)
                return rr;
        return bv_snapshot_resolve(r->snaps, r->n_snaps, spec, ret);
}

int bv_repo_reload(BvRepo *r)
{
        int ret;

        BV_LOCK_GUARD(&r->snap_lock);
        free_snapshots(r);
        ret = bv_index_refresh(r->index);
        if (ret < 0)
                return ret;
        /* Damage is met again: the index's now, the records' when the list loads. */
        r->n_damaged = 0;
        return repo_index_damage(r->backend, r->index, &r->damaged, &r->n_damaged);
}

int bv_repo_read_encoded(BvRepo *r, BvObjectCodec *codec, const BvLocation *loc, void **ret)
{
        void *enc;
        int rr;

        if (loc->length == 0)
                return -EBADMSG;
        enc = bv_object_codec_input(codec, loc->length);
        if (!enc)
                return -ENOMEM;
        rr = bv_packset_read(r->packs, loc->pack_id, loc->offset, enc, loc->length);
        if (rr < 0)
                return rr;
        *ret = enc;
        return 0;
}

int bv_repo_advise(BvRepo *r, const BvLocation *loc)
{
        if (loc->length == 0)
                return -EBADMSG;
        return bv_packset_advise(r->packs, loc->pack_id, loc->offset, loc->length);
}

void bv_repo_set_exact_reads(BvRepo *r, bool exact)
{
        bv_packset_set_exact(r->packs, exact);
}

void bv_repo_advise_index(BvRepo *r, uint64_t max_bytes)
{
        bv_index_advise(r->index, max_bytes);
}

int bv_repo_locate(BvRepo *r, const uint8_t id[BV_ID_SIZE], BvLocation *ret)
{
        int rr = bv_index_lookup(r->index, id, ret);
        return rr == -ENOENT ? -EUCLEAN : rr; /* referenced but not indexed: the repository needs repair */
}

/* Where an object stored whole is, and its encoded bytes (in the codec's input buffer). */
static int read_encoded(BvRepo *r, BvObjectCodec *codec, BvObjectType type, const uint8_t id[BV_ID_SIZE],
                        void **ret, size_t *ret_len)
{
        BvLocation loc;
        int rr;

        rr = bv_repo_locate(r, id, &loc);
        if (rr < 0)
                return rr;
        if (loc.type != type)
                return -EBADMSG;
        rr = bv_repo_read_encoded(r, codec, &loc, ret);
        if (rr < 0)
                return rr;
        *ret_len = loc.length;
        return 0;
}

int bv_repo_read_object(BvRepo *r, BvObjectCodec *codec, BvObjectType type, const uint8_t id[BV_ID_SIZE],
                        void *buf, size_t out_cap, size_t *ret_len)
{
        void *enc;
        size_t len;
        int rr;

        if (!r || !codec || !id || !buf)
                return -EINVAL;
        rr = read_encoded(r, codec, type, id, &enc, &len);
        if (rr < 0)
                return rr;
        return bv_object_decode(codec, type, id, enc, len, buf, out_cap, ret_len);
}

int bv_repo_read_object_alloc(BvRepo *r, BvObjectCodec *codec, BvObjectType type, const uint8_t id[BV_ID_SIZE],
                              void **ret, size_t *ret_len)
{
        void *enc;
        size_t len;
        int rr;

        if (!r || !codec || !id || !ret || !ret_len)
                return -EINVAL;
        rr = read_encoded(r, codec, type, id, &enc, &len);
        if (rr < 0)
                return rr;
        return bv_object_decode_alloc(codec, type, id, enc, len, ret, ret_len);
}

int bv_repo_key_slots(BvRepo *r, char ***ret, size_t *ret_n)
{
        return repo_key_slots(r->backend, ret, ret_n);
}

int bv_repo_key_add(BvRepo *r, const char *slot, const BvSecret *secret)
{
        BvKeyFile kf;
        int ret = r && bv_key_slot_valid(slot) ? seal_master(r, secret, &kf) : -EINVAL;
        return ret < 0 ? ret : repo_key_write(r->backend, slot, &kf, false);
}

int bv_repo_key_remove(BvRepo *r, const char *slot)
{
        if (!bv_key_slot_valid(slot))
                return -EINVAL;
        if (!(r->flags & BV_OPEN_WRITE))
                return -EPERM;
        return repo_key_remove(r->backend, slot);
}

int bv_repo_key_export(BvRepo *r, const char *slot, char **ret, size_t *ret_len)
{
        if (!bv_key_slot_valid(slot))
                return -EINVAL;
        return repo_key_read(r->backend, slot, ret, ret_len);
}

int bv_repo_key_seal_export(BvRepo *r, const BvSecret *secret, char **ret)
{
        BvKeyFile kf;
        int ret_;

        if (!r)
                return -EINVAL;
        if (r->cf.config.cipher == BV_CIPHER_NONE)
                return -EOPNOTSUPP;
        if (!r->master) /* opened without BV_OPEN_KEYS */
                return -EPERM;
        ret_ = repo_key_seal(r->cf.id, secret, r->master, &kf);
        return ret_ < 0 ? ret_ : bv_repo_keyfile_format(&kf, ret);
}

int bv_repo_key_import(const char *path, const char *slot, const char *json, size_t len)
{
        _cleanup_(bv_backend_closep) BvBackend *b = NULL;
        BvRepoConfigFile f;
        BvKeyFile kf;
        int r;

        if (!bv_key_slot_valid(slot))
                return -EINVAL;
        r = open_repo_dir(path, 0, NULL, &b, &f);
        if (r < 0)
                return r;
        r = bv_repo_keyfile_parse(json, len, &kf);
        if (r < 0)
                return r;
        if (memcmp(kf.repository, f.id, BV_REPO_ID_SIZE) != 0)
                return -EXDEV; /* another repository's key */
        return repo_key_write(b, slot, &kf, false);
}
