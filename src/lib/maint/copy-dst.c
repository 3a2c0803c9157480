/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * DST of a copy as the copy writes it (copy.h). A local DST is a repository opened for writing, as
 * a backup opens it. A remote one (S3) is written through its backend, with what the store room
 * writes into a folder staged in a local spool: DST's index segments are fetched into a local
 * index/ and opened there (bv_index_open), so lookups answer for DST; a segment the index writes
 * there, and a pack the pack writer commits in the spool's packs/, is then put at DST (create-only)
 * and the pack's spool file dropped. Locks/write there is the backend's (this machine), the lease a
 * lease object with its heartbeat (backend-s3.c). The fetched segments stay in the backend's
 * directory on this machine, so the next copy fetches only the ones it lacks.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adopt.h"
#include "backend-s3.h"
#include "buf.h"
#include "copy-internal.h"
#include "fileio.h"
#include "heal.h"
#include "hex.h"
#include "lease.h"
#include "macro.h"

#define SEGMENT_MAX (4ull << 30)
#define PACK_MAX (1ull << 31)

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool name_known(const CopyDst *d, const char *name)
{
        return d->nsegs > 0 && bsearch(&name, d->segs, d->nsegs, sizeof(char *), name_cmp);
}

static int name_add(CopyDst *d, const char *name)
{
        if (BV_ARRAY_RESERVE(d->segs, d->segcap, d->nsegs + 1, 16) < 0)
                return -ENOMEM;
        if (!(d->segs[d->nsegs] = strdup(name)))
                return -ENOMEM;
        d->nsegs++;
        qsort(d->segs, d->nsegs, sizeof(char *), name_cmp);
        return 0;
}

int copy_writer_end(BvObjWriter *w, const char *name, int r)
{
        if (r < 0) {
                if (w)
                        bv_obj_writer_abort(w);
                return r;
        }
        r = bv_obj_writer_commit(w, name, BV_PUT_CREATE);
        return r == -EEXIST ? 0 : r;
}

/* A spool file into a writer of DST: the file's bytes, then commit under name. */
static int put_file(CopyDst *d, int dirfd, const char *path, BvObjKind kind, const char *name)
{
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        BvObjWriter *w = NULL;
        char buf[1 << 16];
        ssize_t n;
        if (fd < 0)
                return -errno;
        int r = bv_obj_writer_open(d->b, kind, &w);
        while (r >= 0 && (n = read(fd, buf, sizeof(buf))) != 0)
                r = n < 0 ? -errno : bv_write_all(bv_obj_writer_fd(w), buf, (size_t)n);
        r = copy_writer_end(w, name, r);
        return r;
}

/* fn on every entry of index/ that is not a segment DST has. */
static int each_unknown(CopyDst *d, int (*fn)(CopyDst *d, const struct dirent *de))
{
        DIR *dir;
        struct dirent *de;
        int r = bv_opendir_at(d->index_fd, ".", &dir);
        if (r < 0)
                return r;
        while (r >= 0 && (de = readdir(dir)))
                if (!name_known(d, de->d_name))
                        r = fn(d, de);
        closedir(dir);
        return r;
}

/* A segment the index wrote into index/ that DST does not have yet, put there. */
static int segment_put(CopyDst *d, const struct dirent *de)
{
        if (!bv_index_name_valid(de->d_name))
                return 0;
        int r = put_file(d, d->index_fd, de->d_name, BV_KIND_INDEX, de->d_name);
        return r < 0 ? r : name_add(d, de->d_name);
}

int copy_dst_flush(CopyDst *d)
{
        int r = bv_index_flush(d->x);
        return r < 0 || d->repo ? r : each_unknown(d, segment_put);
}

int copy_dst_pack_committed(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE])
{
        char name[64];
        if (d->repo)
                return 0;
        bv_pack_path(id, name);
        int r = put_file(d, d->packs_fd, name, BV_KIND_PACK, name);
        if (r >= 0)
                (void)unlinkat(d->packs_fd, name, 0);
        return r;
}

int copy_dst_pack_take(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE], uint64_t max, void **ret, uint64_t *ret_size)
{
        char name[64];
        size_t len;
        bv_pack_path(id, name);
        int r = bv_read_file(d->packs_fd, name, (size_t)max, ret, &len);
        if (r >= 0) {
                *ret_size = len;
                (void)unlinkat(d->packs_fd, name, 0);
        }
        return r;
}

/* ---- a remote DST ---- */

/* A segment DST lists: GET into index/, unless index/ (this machine's mirror of DST's segments)
 * holds it from an earlier copy: a segment's name is random and it is never rewritten, so one
 * of the size listed is the one listed. */
static int fetch_segment(const BvObjEntry *e, void *userdata)
{
        CopyDst *d = userdata;
        _cleanup_free_ void *data = NULL;
        struct stat st;
        size_t len;
        if (!bv_index_name_valid(e->name))
                return 0;
        if (fstatat(d->index_fd, e->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size == e->size)
                return name_add(d, e->name);
        int r = bv_backend_get(d->b, BV_KIND_INDEX, e->name, SEGMENT_MAX, &data, &len);
        if (r >= 0)
                r = bv_write_file_shared(d->index_fd, e->name, data, len, false);
        return r < 0 ? r : name_add(d, e->name);
}

/* What the mirror holds that DST does not list (a gc there merged it away, or a copy killed
 * before its PUT wrote it) goes, so the index opened there is DST's. */
static int segment_drop(CopyDst *d, const struct dirent *de)
{
        if (de->d_type == DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                return 0;
        return unlinkat(d->index_fd, de->d_name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

/* index/: the mirror of DST's segments in the backend's directory on this machine (kept from one
 * copy to the next: only segments it lacks are fetched; locks/write, held, keeps it to this
 * copy), else in the spool. */
static int mirror_open(CopyDst *d)
{
        int dirfd = d->cache_fd = bv_backend_s3_cache_dirfd(d->b);
        if (dirfd >= 0 && (mkdirat(dirfd, "copy-index", 0700) == 0 || errno == EEXIST)) {
                d->index_fd = bv_open_dir_beneath(dirfd, "copy-index");
                if (d->index_fd >= 0)
                        return 0;
        }
        if (mkdirat(d->spool_fd, "index", 0700) < 0)
                return -errno;
        d->index_fd = bv_open_dir_beneath(d->spool_fd, "index");
        return d->index_fd < 0 ? d->index_fd : 0;
}

/* Whether the folders a and b are on one mount (a mount inside a spool, a bind mount of a folder
 * of the same filesystem too, is not the spool's). */
static bool same_mount(int a, int b)
{
        struct statx sa, sb;
        return statx(a, "", AT_EMPTY_PATH, STATX_MNT_ID, &sa) == 0 &&
               statx(b, "", AT_EMPTY_PATH, STATX_MNT_ID, &sb) == 0 &&
               (sa.stx_mask & sb.stx_mask & STATX_MNT_ID) && sa.stx_mnt_id == sb.stx_mnt_id;
}

/* Empties the folder dirfd (files and folders of files: the spool's index/ and packs/xx/), never
 * going into a filesystem mounted in it. */
static void empty_dir(int dirfd)
{
        DIR *dir;
        struct dirent *de;
        if (bv_opendir_at(dirfd, ".", &dir) < 0)
                return;
        while ((de = readdir(dir))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (unlinkat(dirfd, de->d_name, 0) < 0 && (errno == EISDIR || errno == EPERM)) {
                        int sub = bv_open_dir_beneath(dirfd, de->d_name);
                        if (sub >= 0) {
                                if (same_mount(dirfd, sub))
                                        empty_dir(sub);
                                close(sub);
                        }
                        (void)unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
                }
        }
        closedir(dir);
}

#define SPOOL_PREFIX "blkvault-copy-"

/* Whether name is a spool's: the prefix, then mkdtemp's six letters or digits (a folder whose
 * name only begins like one is someone else's). */
static bool spool_name(const char *name)
{
        size_t n = strlen(SPOOL_PREFIX);
        if (strncmp(name, SPOOL_PREFIX, n) != 0 || strlen(name) != n + 6)
                return false;
        for (const char *c = name + n; *c; c++)
                if (!isalnum((unsigned char)*c))
                        return false;
        return true;
}

/* The spool of a copy killed before it could remove it, in tmp: one whose lock nobody holds. Its
 * copy locks it before it makes packs/ in it, so an unlocked spool with packs/ is stale; an
 * unlocked one without may be a copy between mkdtemp and its lock, unless it is a minute old. */
static void spool_sweep_one(int tmpfd, const char *name)
{
        int fd = openat(tmpfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return;
        if (same_mount(tmpfd, fd) && fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            (faccessat(fd, "packs", F_OK, AT_SYMLINK_NOFOLLOW) == 0 || st.st_mtime + 60 < time(NULL))) {
                empty_dir(fd);
                (void)unlinkat(tmpfd, name, AT_REMOVEDIR);
        }
        close(fd);
}

/* Removes the stale spools of killed copies in tmp (every copy to a remote DST sweeps, so a kill
 * costs no space for longer than until the next copy). */
static void spool_sweep(const char *tmp)
{
        DIR *dir = opendir(tmp);
        struct dirent *de;
        if (!dir)
                return;
        while ((de = readdir(dir)))
                if (spool_name(de->d_name))
                        spool_sweep_one(dirfd(dir), de->d_name);
        closedir(dir);
}

/* The spool, locked for as long as this copy lives (its lock tells a later copy's sweep that it
 * is in use). */
static int spool_open(CopyDst *d)
{
        const char *tmp = getenv("TMPDIR");
        tmp = tmp && *tmp ? tmp : "/var/tmp";
        spool_sweep(tmp);
        if (asprintf(&d->spool, "%s/" SPOOL_PREFIX "XXXXXX", tmp) < 0)
                return -ENOMEM;
        if (!mkdtemp(d->spool))
                return -errno;
        d->spool_fd = open(d->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->spool_fd < 0 || flock(d->spool_fd, LOCK_EX) < 0 || mkdirat(d->spool_fd, "packs", 0700) < 0)
                return -errno;
        d->packs_fd = bv_open_dir_beneath(d->spool_fd, "packs");
        return d->packs_fd < 0 ? d->packs_fd : mirror_open(d);
}

static void spool_remove(CopyDst *d)
{
        if (d->spool_fd < 0)
                return;
        empty_dir(d->spool_fd);
        (void)rmdir(d->spool);
}

static int remote_open(CopyDst *d, bool wait, BvRepoProblem *problem)
{
        int r = bv_backend_lock(d->b, BV_LOCK_WRITE, wait);
        if (r < 0) {
                bv_repo_problem_note(problem, d->b, "locks/write", false, r);
                if (r == -EBUSY && problem)
                        (void)bv_backend_lock_holder(d->b, BV_LOCK_WRITE, problem->holder, sizeof(problem->holder));
                return r;
        }
        d->lock_fd = r;
        r = bv_lease_take(d->b, BV_LEASE_WRITE, &d->lease, &d->epoch, problem);
        if (r >= 0)
                r = spool_open(d);
        if (r >= 0)
                r = bv_backend_list(d->b, BV_KIND_INDEX, fetch_segment, d);
        if (r >= 0)
                r = each_unknown(d, segment_drop);
        if (r >= 0)
                r = bv_index_open(d->index_fd, &d->x);
        return r;
}

int copy_dst_reload(CopyDst *d)
{
        for (size_t i = 0; i < d->nsegs; i++)
                free(d->segs[i]);
        d->nsegs = 0;
        int r = bv_backend_list(d->b, BV_KIND_INDEX, fetch_segment, d);
        if (r >= 0)
                r = each_unknown(d, segment_drop);
        if (r < 0)
                return r;
        bv_index_free(TAKE_PTR(d->x));
        return bv_index_open(d->index_fd, &d->x);
}

int copy_dst_open(BvRepo *src, const char *location, const BvSecret *dst_secret, bool wait, BvRepoProblem *problem,
                  bool *ret_created, CopyDst **ret)
{
        CopyDst *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (CopyDst){ .lock_fd = -EBADF, .spool_fd = -EBADF, .index_fd = -EBADF, .packs_fd = -EBADF, .cache_fd = -EBADF,
                        .keyring = bv_repo_keyring(src), .config = *bv_repo_config(src) };
        BvRepoProblem none = {};
        if (!problem)
                problem = &none;
        int r = copy_prepare(src, location, dst_secret, &d->b, ret_created, problem->message, sizeof(problem->message));
        if (r >= 0 && bv_backend_is_local(d->b)) {
                bv_backend_close(TAKE_PTR(d->b));
                r = copy_open_local(src, location, wait, problem, &d->repo);
                if (r >= 0) {
                        d->b = bv_repo_backend(d->repo);
                        d->x = bv_repo_index(d->repo);
                        d->packs_fd = bv_repo_dirfd(d->repo, "packs");
                        d->config = *bv_repo_config(d->repo);
                }
        } else if (r >= 0)
                r = remote_open(d, wait, problem);
        if (r < 0) {
                if (d->b && !d->repo && !problem->message[0]) /* what the storage answered */
                        bv_backend_errmsg(d->b, problem->message, sizeof(problem->message));
                copy_dst_close(d);
                return r;
        }
        *ret = d;
        return 0;
}

void copy_dst_close(CopyDst *d)
{
        if (!d)
                return;
        if (d->repo)
                bv_repo_close(d->repo);
        else {
                bv_index_free(d->x);
                bv_lease_release(d->lease);
                safe_close(d->lock_fd);
                safe_close(d->index_fd);
                safe_close(d->packs_fd);
                safe_close(d->cache_fd);
                spool_remove(d);
                safe_close(d->spool_fd);
                bv_backend_close(d->b);
        }
        for (size_t i = 0; i < d->nsegs; i++)
                free(d->segs[i]);
        free(d->segs);
        free(d->condemned);
        free(d->spool);
        free(d);
}

/* ---- adoption: packs an interrupted copy left that no segment names ---- */

typedef struct Orphans {
        CopyDst *d;
        uint8_t (*named)[BV_PACK_ID_SIZE];
        size_t nnamed, named_cap;
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
} Orphans;

static int pack_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int on_named(const uint8_t id[BV_PACK_ID_SIZE], void *userdata)
{
        Orphans *o = userdata;
        if (BV_ARRAY_RESERVE(o->named, o->named_cap, o->nnamed + 1, 256) < 0)
                return -ENOMEM;
        memcpy(o->named[o->nnamed++], id, BV_PACK_ID_SIZE);
        return 0;
}

static int on_listed(const BvObjEntry *e, void *userdata)
{
        Orphans *o = userdata;
        uint8_t id[BV_PACK_ID_SIZE];
        const char *slash = strchr(e->name, '/');
        if (!slash || strlen(slash + 1) != 2 * BV_PACK_ID_SIZE + 5 || strcmp(slash + 1 + 2 * BV_PACK_ID_SIZE, ".pack") ||
            bv_hex_decode(strndupa(slash + 1, 2 * BV_PACK_ID_SIZE), id, sizeof(id)) < 0)
                return 0; /* not a pack's name */
        if (o->nnamed > 0 && bsearch(id, o->named, o->nnamed, BV_PACK_ID_SIZE, pack_cmp))
                return 0;
        if (BV_ARRAY_RESERVE(o->ids, o->cap, o->n + 1, 64) < 0)
                return -ENOMEM;
        memcpy(o->ids[o->n++], id, BV_PACK_ID_SIZE);
        return 0;
}

/* The packs of DST's condemned lists are no orphans: gc took them out of the index and keeps
 * the list while a pack is locked (docs/LIFECYCLE.md, "gc and Object Lock"); adopted, it would be
 * named again and the retention extension would keep it for ever. A list gone meanwhile was
 * finalized: its packs were deleted. */
static int on_condemned(const BvObjEntry *e, void *userdata)
{
        Orphans *o = userdata;
        BvIndexList *l;
        const uint8_t(*ids)[BV_PACK_ID_SIZE];
        if (!bv_index_name_valid(e->name))
                return 0;
        int r = bv_index_list_open_backend(o->d->b, e->name, &l);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        size_t n = bv_index_list_packs(l, &ids);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = on_named(ids[i], o);
        bv_index_list_free(l);
        return r;
}

/* An orphan's own index: from SRC when it is one of SRC's packs sent whole (the same bytes), else
 * from the pack at DST, read whole. One that does not read is left alone. */
static int adopt_one(CopyDst *d, BvRepo *src, BvObjectCodec *codec, const uint8_t id[BV_PACK_ID_SIZE],
                     uint64_t *packs, uint64_t *bytes)
{
        _cleanup_free_ BvPackEntry *e = NULL;
        _cleanup_free_ void *data = NULL;
        size_t n, len;
        char name[64];
        int r = bv_packset_read_index(bv_repo_packs(src), codec, id, &e, &n);
        if (r < 0) {
                bv_pack_path(id, name);
                r = bv_backend_get(d->b, BV_KIND_PACK, name, PACK_MAX, &data, &len);
                if (r >= 0)
                        r = bv_pack_parse_index(codec, id, data, len, &e, &n);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0 || n == 0)
                return 0;
        r = bv_index_add_pack(d->x, id, e, n);
        if (r < 0)
                return r;
        (*packs)++;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || e[i].offset != e[i - 1].offset)
                        *bytes += e[i].length;
        return 0;
}

/* A pack this copy found at DST on its PUT (412) is one an interrupted copy left, or one another
 * copy put meanwhile, or one a gc condemned. The last may be deleted by that list's finalize before
 * this copy's segment names it: the copy's lease (epoch E) holds back only the lists with W > E,
 * and every list with W <= E was put before gc/epoch reached E, so before this LIST (made after
 * the lease). A list finalized meanwhile deleted its packs before itself: the HEAD finds them gone.
 * A list condemned after the LIST waits for this copy's lease (docs/LIFECYCLE.md, "gc on S3"). */
int copy_dst_pack_reusable(CopyDst *d, const uint8_t id[BV_PACK_ID_SIZE])
{
        char name[64];
        if (d->repo)
                return 1;
        if (!d->condemned_listed) {
                Orphans o = { .d = d };
                int r = bv_backend_list(d->b, BV_KIND_CONDEMNED, on_condemned, &o);
                if (r < 0) {
                        free(o.named);
                        return r;
                }
                if (o.nnamed > 1)
                        qsort(o.named, o.nnamed, BV_PACK_ID_SIZE, pack_cmp);
                d->condemned = o.named, d->ncondemned = o.nnamed, d->condemned_listed = true;
        }
        if (d->ncondemned > 0 && bsearch(id, d->condemned, d->ncondemned, BV_PACK_ID_SIZE, pack_cmp))
                return 0;
        bv_pack_path(id, name);
        return bv_backend_exists(d->b, BV_KIND_PACK, name);
}

#define UNFINISHED "copy-unfinished"

int copy_dst_adopt(CopyDst *d, BvRepo *src, BvObjectCodec *codec, uint64_t *packs, uint64_t *bytes)
{
        if (d->repo)
                return bv_backup_adopt(d->repo, codec, packs, bytes);
        if (d->cache_fd >= 0) {
                bool unfinished = faccessat(d->cache_fd, UNFINISHED, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
                int k = bv_write_file_durable(d->cache_fd, UNFINISHED, "", 0, true);
                if (k >= 0 && !unfinished)
                        return 0;
        }
        Orphans o = { .d = d };
        int r = bv_index_packs(d->x, on_named, &o);
        if (r >= 0)
                r = bv_backend_list(d->b, BV_KIND_CONDEMNED, on_condemned, &o);
        if (r >= 0 && o.nnamed > 1)
                qsort(o.named, o.nnamed, BV_PACK_ID_SIZE, pack_cmp);
        if (r >= 0)
                r = bv_backend_list(d->b, BV_KIND_PACK, on_listed, &o);
        for (size_t i = 0; i < o.n && r >= 0; i++)
                r = adopt_one(d, src, codec, o.ids[i], packs, bytes);
        if (r >= 0 && o.n > 0)
                r = copy_dst_flush(d);
        free(o.named);
        free(o.ids);
        return r;
}

void copy_dst_done(CopyDst *d)
{
        if (!d->repo && d->cache_fd >= 0)
                (void)unlinkat(d->cache_fd, UNFINISHED, 0);
}

/* ---- publishing a record ---- */

int copy_dst_publish(CopyDst *d, BvObjectCodec *codec, const BvSnapshot *s, bool first)
{
        if (d->repo) {
                _cleanup_close_ int lock = bv_backend_lock(d->b, BV_LOCK_COMMIT, true);
                int r = lock < 0 ? lock : bv_backup_heal(d->repo, codec, s->root, s->height, s->size);
                return r < 0 ? r : bv_snapshot_save(d->b, codec, s);
        }
        /* A gc that moved gc/epoch since the lease may have condemned what this copy found there,
         * and deleted it if it took the lease for dead: nothing is published (docs/LIFECYCLE.md,
         * "gc on S3"). Checked before the first record, and only when the lease may look dead to
         * a gc: while it is fresh every list condemned since waits for it, so no pack is gone,
         * and copy_dst_settle, after the records, puts back into the index what such a condemn
         * dropped (as it does for one beside the records). */
        uint64_t epoch;
        if (!first || bv_lease_fresh(d->lease))
                return bv_snapshot_save(d->b, codec, s);
        int r = bv_gc_epoch_read(d->b, &epoch);
        if (r >= 0 && epoch != d->epoch)
                r = -ESTALE;
        return r < 0 ? r : bv_snapshot_save(d->b, codec, s);
}

int bv_copy_open_dst(BvRepo *src, const char *dst, const BvSecret *dst_secret, bool wait, BvRepoProblem *ret_problem,
                     bool *ret_created, BvCopyDst **ret)
{
        return copy_dst_open(src, dst, dst_secret, wait, ret_problem, ret_created, ret);
}

void bv_copy_dst_close(BvCopyDst *d)
{
        copy_dst_close(d);
}

const char *bv_copy_dst_storage_error(BvCopyDst *d, char *buf, size_t len)
{
        return bv_backend_errmsg(d->b, buf, len);
}

BvRepo *bv_copy_dst_repo(BvCopyDst *d)
{
        return d->repo;
}
