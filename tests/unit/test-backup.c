/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The backup pipeline against real repositories: round trips through bv_restore, dedup of a
 * second run and of a small change, zero and sparse images, odd sizes, streams, the
 * boundary-resync rule on a concatenation, a full target (tmpfs) and SIGKILL at random times.
 */

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "backup.h"
#include "bvtest.h"
#include "chunker.h"
#include "chunks.h"
#include "image.h"
#include "info.h"
#include "keyring.h"
#include "macro.h"
#include "repo.h"
#include "restore.h"
#include "verify.h"

#define MiB (1024u * 1024)

static char *base;
static unsigned seq;

static char *tpath(const char *name)
{
        char *p;
        if (asprintf(&p, "%s/%s-%u", base, name, seq++) < 0)
                abort();
        return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        for (size_t done = 0; done < len;) {
                ssize_t n = write(fd, (const uint8_t *)data + done, len - done);
                ASSERT_TRUE(n > 0);
                done += (size_t)n;
        }
        ASSERT_EQ(close(fd), 0);
}

static uint8_t *read_file(const char *path, size_t *ret_len)
{
        struct stat st;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(fstat(fd, &st), 0);
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        ASSERT_TRUE(buf);
        for (size_t done = 0; done < (size_t)st.st_size;) {
                ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
                ASSERT_TRUE(n > 0);
                done += (size_t)n;
        }
        close(fd);
        *ret_len = (size_t)st.st_size;
        return buf;
}

static uint8_t *random_data(size_t len, uint64_t seed)
{
        uint8_t *p = malloc(len + 1);
        ASSERT_TRUE(p);
        bvtest_fill_random(p, len, seed);
        return p;
}

/* Text-like data: 16 letters, no repeats to dedup, about half of it compresses away. */
static uint8_t *text_data(size_t len, uint64_t seed)
{
        uint8_t *p = random_data(len, seed);
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)('a' + (p[i] & 15));
        return p;
}

static BvSecret secret_for(bool encrypted)
{
        static char *key_file;
        if (!encrypted)
                return (BvSecret){};
        if (!key_file) {
                uint8_t key[64];
                bvtest_fill_random(key, sizeof(key), 4242);
                key_file = tpath("keyfile");
                write_file(key_file, key, sizeof(key));
        }
        return (BvSecret){ .key_file = key_file };
}

static BvRepo *repo_new(const char *path, bool encrypted, uint32_t pack_target)
{
        BvRepoConfig cfg;
        BvSecret sec = secret_for(encrypted);
        BvRepo *r;

        bv_repo_config_default(&cfg);
        cfg.cipher = encrypted ? BV_CIPHER_AES256GCM : BV_CIPHER_NONE;
        if (pack_target)
                cfg.pack_target = pack_target;
        ASSERT_OK(bv_repo_init(path, &cfg, &sec));
        ASSERT_OK(bv_repo_open(path, &sec, BV_OPEN_WRITE, &r));
        return r;
}

static BvRepo *repo_reopen(BvRepo *r, bool encrypted)
{
        char *path = strdup(bv_repo_path(r));
        BvSecret sec = secret_for(encrypted);
        BvRepo *n;

        ASSERT_TRUE(path);
        bv_repo_close(r);
        ASSERT_OK(bv_repo_open(path, &sec, BV_OPEN_WRITE, &n));
        free(path);
        return n;
}

/* The repository caches its snapshot list: reload it to see the backups made since. */
static const BvSnapshot *find_snapshot(BvRepo *r, const char *spec)
{
        const BvSnapshot *snap;

        ASSERT_OK(bv_repo_reload(r));
        ASSERT_OK(bv_repo_find_snapshot(r, spec, &snap));
        return snap;
}

static void repo_done(BvRepo *r, const char *path)
{
        bv_repo_close(r);
        bvtest_rm_rf(path);
}

static void backup(BvRepo *r, const char *src, BvBackupStats *st)
{
        BvBackupOptions o = { .threads = 2 };
        ASSERT_OK(bv_backup_path(r, src, &o, st));
        ASSERT_EQ(strlen(st->snapshot_id), 2 * BV_SNAPSHOT_ID_SIZE);
}

/* Restores a snapshot and compares it with the expected bytes. */
static void restore_check(BvRepo *r, const char *snapshot_id, const void *expect, size_t len)
{
        const BvSnapshot *snap;
        BvRestoreStats rs;
        _cleanup_free_ char *dest = tpath("restore");
        size_t got_len;

        snap = find_snapshot(r, snapshot_id);
        ASSERT_EQ(snap->size, len);
        ASSERT_OK(bv_restore(r, snap, dest, NULL, &rs));
        ASSERT_EQ(rs.size, len);
        _cleanup_free_ uint8_t *got = read_file(dest, &got_len);
        ASSERT_EQ(got_len, len);
        ASSERT_MEMEQ(got, expect, len);
        unlink(dest);
}

static void progress_cb(const BvProgress *p, void *ud)
{
        BvProgress *last = ud;
        ASSERT_TRUE(p->done <= p->total);
        *last = *p;
}

/* 40 MiB of random data: round trip, a second run stores nothing, one changed 4 KiB block
 * stores about one chunk. */
static void random_roundtrip(bool encrypted)
{
        const size_t size = 40 * MiB;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("random");
        _cleanup_free_ uint8_t *data = random_data(size, encrypted ? 11 : 12);
        BvRepo *r = repo_new(rpath, encrypted, 0);
        BvBackupStats st, st2, st3;
        BvProgress last = {};
        BvBackupOptions o = { .progress = progress_cb, .progress_userdata = &last, .name = "disk" };

        write_file(src, data, size);
        ASSERT_OK(bv_backup_path(r, src, &o, &st));
        ASSERT_EQ(st.size, size);
        ASSERT_EQ(st.counts.bytes_read, size);
        ASSERT_EQ(st.counts.bytes_zero, 0);
        ASSERT_EQ(st.counts.bytes_hole, 0);
        ASSERT_EQ(st.counts.bytes_data, size);
        ASSERT_EQ(st.counts.bytes_new, size);
        ASSERT_EQ(st.counts.chunks, st.counts.chunks_new);
        ASSERT_TRUE(st.counts.chunks >= size / BV_CHUNK_MAX_DEFAULT);
        ASSERT_TRUE(st.counts.bytes_stored >= size); /* random data does not compress */
        ASSERT_TRUE(st.counts.packs >= 1);
        ASSERT_EQ(last.done, size);
        ASSERT_EQ(last.total, size);
        /* recorded as the run counted them (the run's seconds also count the commit) */
        BvSnapshotStats recorded = find_snapshot(r, st.snapshot_id)->stats;
        ASSERT_TRUE(recorded.seconds > 0 && recorded.seconds <= st.counts.seconds);
        recorded.seconds = st.counts.seconds;
        ASSERT_MEMEQ(&recorded, &st.counts, sizeof(recorded));
        ASSERT_EQ(find_snapshot(r, st.snapshot_id)->stats.bytes_new, size);
        ASSERT_STREQ(find_snapshot(r, st.snapshot_id)->name, "disk");

        r = repo_reopen(r, encrypted);
        restore_check(r, st.snapshot_id, data, size);

        backup(r, src, &st2);
        ASSERT_EQ(st2.counts.bytes_new, 0);
        ASSERT_EQ(st2.counts.chunks_new, 0);
        ASSERT_EQ(st2.counts.chunks, st.counts.chunks);
        ASSERT_TRUE(st2.counts.bytes_stored < 64 * 1024); /* at most a new root node */
        restore_check(r, st2.snapshot_id, data, size);

        bvtest_fill_random(data + 20 * MiB + 8 * 4096, 4096, 99);
        write_file(src, data, size);
        backup(r, src, &st3);
        printf("# one changed block in 40 MiB: %" PRIu64 " new bytes, %" PRIu64 " new chunks\n",
               st3.counts.bytes_new, st3.counts.chunks_new);
        ASSERT_TRUE(st3.counts.bytes_new > 0);
        ASSERT_TRUE(st3.counts.bytes_new < 512 * 1024);
        restore_check(r, st3.snapshot_id, data, size);
        ASSERT_TRUE(strncmp(find_snapshot(r, st3.snapshot_id)->name, "random-", 7) == 0);

        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        repo_done(r, rpath);
        unlink(src);
}

TEST(random_plain)
{
        random_roundtrip(false);
}

TEST(random_encrypted)
{
        random_roundtrip(true);
}

TEST(zeros)
{
        const size_t size = 16 * MiB;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("zeros");
        _cleanup_free_ uint8_t *data = calloc(1, size);
        BvRepo *r = repo_new(rpath, false, 0);
        BvBackupStats st;

        ASSERT_TRUE(data);
        write_file(src, data, size); /* written zeros: read, not holes */
        backup(r, src, &st);
        ASSERT_EQ(st.size, size);
        ASSERT_EQ(st.counts.bytes_zero + st.counts.bytes_hole, size);
        ASSERT_EQ(st.counts.bytes_new, 0);
        ASSERT_EQ(st.counts.chunks, 0);
        ASSERT_TRUE(st.counts.bytes_stored < 64 * 1024);
        restore_check(r, st.snapshot_id, data, size);
        repo_done(r, rpath);
        unlink(src);
}

/* Holes as the filesystem reports them: what the backup must never read. */
static uint64_t hole_bytes(const char *path, uint64_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t holes = 0;
        off_t pos = 0;

        ASSERT_TRUE(fd >= 0);
        while ((uint64_t)pos < size) {
                off_t data = lseek(fd, pos, SEEK_DATA);
                if (data < 0) {
                        holes += size - (uint64_t)pos;
                        break;
                }
                holes += (uint64_t)(data - pos);
                pos = lseek(fd, data, SEEK_HOLE);
                ASSERT_TRUE(pos >= 0);
        }
        close(fd);
        return holes;
}

TEST(sparse)
{
        const size_t size = 64 * MiB;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("sparse");
        _cleanup_free_ uint8_t *data = calloc(1, size);
        BvRepo *r = repo_new(rpath, true, 0);
        BvBackupStats st;
        int fd;

        ASSERT_TRUE(data);
        bvtest_fill_random(data, MiB, 1);
        bvtest_fill_random(data + 20 * MiB, 4 * MiB, 2);
        bvtest_fill_random(data + size - 4096, 4096, 3);
        fd = open(src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
        ASSERT_EQ(pwrite(fd, data, MiB, 0), (ssize_t)MiB);
        ASSERT_EQ(pwrite(fd, data + 20 * MiB, 4 * MiB, 20 * MiB), (ssize_t)(4 * MiB));
        ASSERT_EQ(pwrite(fd, data + size - 4096, 4096, (off_t)(size - 4096)), 4096);
        ASSERT_EQ(close(fd), 0);

        uint64_t holes = hole_bytes(src, size);
        ASSERT_TRUE(holes > 0);
        backup(r, src, &st);
        ASSERT_EQ(st.size, size);
        ASSERT_EQ(st.counts.bytes_hole, holes);
        ASSERT_EQ(st.counts.bytes_read, size - holes);
        ASSERT_EQ(st.counts.bytes_data, 5 * MiB + 4096);
        ASSERT_EQ(st.counts.bytes_new, 5 * MiB + 4096);
        restore_check(r, st.snapshot_id, data, size);
        repo_done(r, rpath);
        unlink(src);
}

TEST(odd_size_and_empty)
{
        const size_t size = 3 * MiB + 1234;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("odd"), *empty = tpath("empty");
        _cleanup_free_ uint8_t *data = random_data(size, 5);
        BvRepo *r = repo_new(rpath, true, 0);
        BvBackupStats st, st2;

        write_file(src, data, size);
        backup(r, src, &st);
        ASSERT_EQ(st.size, size);
        ASSERT_EQ(st.counts.bytes_new, size);
        restore_check(r, st.snapshot_id, data, size);
        backup(r, src, &st2);
        ASSERT_EQ(st2.counts.bytes_new, 0);
        restore_check(r, st2.snapshot_id, data, size);

        write_file(empty, "", 0);
        backup(r, empty, &st);
        ASSERT_EQ(st.size, 0);
        ASSERT_EQ(st.counts.chunks, 0);
        ASSERT_EQ(st.counts.bytes_read, 0);
        restore_check(r, st.snapshot_id, "", 0);

        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        repo_done(r, rpath);
        unlink(src);
        unlink(empty);
}

TEST(stdin_stream)
{
        const size_t size = 5 * MiB + 17;
        _cleanup_free_ char *rpath = tpath("repo");
        _cleanup_free_ uint8_t *data = random_data(size, 6);
        BvRepo *r = repo_new(rpath, true, 0);
        BvBackupStats st;
        int pipefd[2], saved_stdin;
        pid_t pid;

        ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                close(pipefd[0]);
                for (size_t done = 0; done < size;) {
                        ssize_t n = write(pipefd[1], data + done, size - done < 65536 ? size - done : 65536);
                        if (n <= 0)
                                _exit(1);
                        done += (size_t)n;
                }
                _exit(0);
        }
        close(pipefd[1]);
        saved_stdin = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        ASSERT_TRUE(saved_stdin >= 0);
        ASSERT_EQ(dup2(pipefd[0], STDIN_FILENO), STDIN_FILENO);
        close(pipefd[0]);

        backup(r, "-", &st);

        ASSERT_EQ(dup2(saved_stdin, STDIN_FILENO), STDIN_FILENO);
        close(saved_stdin);
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        ASSERT_EQ(st.size, size);
        ASSERT_EQ(st.counts.bytes_read, size);
        ASSERT_EQ(st.counts.bytes_new, size);
        ASSERT_STREQ(find_snapshot(r, st.snapshot_id)->name, "stdin");
        restore_check(r, st.snapshot_id, data, size);
        repo_done(r, rpath);
}

/* Chunk ids of a splitting without the resync rule, to measure what the rule saves. */
typedef struct IdSet {
        uint8_t (*ids)[BV_ID_SIZE];
        size_t n, cap;
        const BvKeyring *keyring;
        bool collect;
        uint64_t missing_bytes;
} IdSet;

static int idset_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_ID_SIZE);
}

static int idset_cb(const BvExtent *e, void *userdata)
{
        IdSet *s = userdata;
        uint8_t id[BV_ID_SIZE];

        if (e->kind != BV_EXTENT_DATA)
                return 0;
        bv_keyring_id(s->keyring, BV_ID_CHUNK, e->data, (size_t)e->length, id);
        if (s->collect) {
                if (s->n == s->cap) {
                        s->cap = s->cap ? 2 * s->cap : 1024;
                        s->ids = reallocarray(s->ids, s->cap, BV_ID_SIZE);
                        ASSERT_TRUE(s->ids);
                }
                memcpy(s->ids[s->n++], id, BV_ID_SIZE);
        } else if (!bsearch(id, s->ids, s->n, BV_ID_SIZE, idset_cmp))
                s->missing_bytes += e->length;
        return 0;
}

static void idset_split(BvRepo *r, IdSet *s, const uint8_t *data, size_t len)
{
        BvChunkerParams p;
        BvSplitter *sp;

        bv_repo_chunker_params(r, &p);
        ASSERT_OK(bv_splitter_new(&p, &sp));
        ASSERT_OK(bv_splitter_feed(sp, 0, data, len, idset_cb, s));
        ASSERT_OK(bv_splitter_finish(sp, idset_cb, s));
        bv_splitter_free(sp);
}

/* The resync rule applied one chunk at a time, as the backup did before batches: chunks whose
 * id is in the set are stored; a new one whose longest proper 4 KiB-multiple prefix is in the
 * set is cut there. Counts what the backup must count (random data: no chunk repeats). */
typedef struct ResyncSim {
        const IdSet *stored;
        uint64_t chunks, bytes_new, restarts;
} ResyncSim;

static bool idset_has(const IdSet *s, const uint8_t id[BV_ID_SIZE])
{
        return bsearch(id, s->ids, s->n, BV_ID_SIZE, idset_cmp) != NULL;
}

static int resync_sim_cb(const BvExtent *e, void *userdata)
{
        ResyncSim *sim = userdata;
        size_t len = (size_t)e->length, n_ids = DIV_ROUND_UP(len, BV_BLOCK_SIZE);

        if (e->kind != BV_EXTENT_DATA)
                return 0;
        _cleanup_free_ uint8_t(*ids)[BV_ID_SIZE] = calloc(n_ids, BV_ID_SIZE);
        ASSERT_TRUE(ids);
        bv_keyring_id_prefixes(sim->stored->keyring, BV_ID_CHUNK, e->data, len, BV_BLOCK_SIZE, ids);
        sim->chunks++;
        if (idset_has(sim->stored, ids[n_ids - 1]))
                return 0;
        for (size_t j = n_ids - 1; j > 0; j--)
                if (j * BV_BLOCK_SIZE < len && idset_has(sim->stored, ids[j - 1])) {
                        sim->restarts++;
                        return (int)(j * BV_BLOCK_SIZE);
                }
        sim->bytes_new += len;
        return 0;
}

/* Four files backed up one by one, then their concatenation: the resync rule makes the cuts
 * after each file boundary fall where they fell in the file's own backup. */
TEST(concatenation)
{
        const size_t part = 8 * MiB, size = 4 * part;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("part"), *cat = tpath("cat");
        _cleanup_free_ uint8_t *data = malloc(size);
        BvRepo *r = repo_new(rpath, true, 0);
        BvBackupStats st;
        IdSet set = { .keyring = bv_repo_keyring(r), .collect = true };

        ASSERT_TRUE(data);
        for (unsigned i = 0; i < 4; i++) {
                bvtest_fill_random(data + i * part, part, 100 + i);
                write_file(src, data + i * part, part);
                backup(r, src, &st);
                ASSERT_EQ(st.counts.bytes_new, part);
                idset_split(r, &set, data + i * part, part);
        }
        write_file(cat, data, size);
        backup(r, cat, &st);
        restore_check(r, st.snapshot_id, data, size);

        qsort(set.ids, set.n, BV_ID_SIZE, idset_cmp);
        set.collect = false;
        idset_split(r, &set, data, size);
        printf("# concatenation of 4 x 8 MiB: new bytes %" PRIu64 " (%.2f%%) with resync, %" PRIu64
               " (%.2f%%) without\n",
               st.counts.bytes_new, 100.0 * (double)st.counts.bytes_new / (double)size, set.missing_bytes,
               100.0 * (double)set.missing_bytes / (double)size);
        ASSERT_TRUE(st.counts.bytes_new < size / 100);
        ASSERT_TRUE(st.counts.bytes_new <= set.missing_bytes);

        /* the backup hashes chunks in batches on two cores and drops what it cut after a
         * resync: it must count what the rule applied one chunk at a time counts */
        ResyncSim sim = { .stored = &set };
        BvChunkerParams p;
        BvSplitter *sp;
        bv_repo_chunker_params(r, &p);
        ASSERT_OK(bv_splitter_new(&p, &sp));
        ASSERT_OK(bv_splitter_feed(sp, 0, data, size, resync_sim_cb, &sim));
        ASSERT_OK(bv_splitter_finish(sp, resync_sim_cb, &sim));
        bv_splitter_free(sp);
        printf("# concatenation: %" PRIu64 " chunks, %" PRIu64 " resyncs\n", sim.chunks, sim.restarts);
        ASSERT_EQ(st.counts.chunks, sim.chunks);
        ASSERT_EQ(st.counts.bytes_new, sim.bytes_new);

        repo_done(r, rpath);
        free(set.ids);
        unlink(src);
        unlink(cat);
}

/* A full target: a tmpfs of 24 MiB holds the repository. False if no tmpfs can be mounted here
 * (the caller skips visibly after running everything else). */
static bool test_enospc(void)
{
        _cleanup_free_ char *mnt = tpath("mnt"), *rpath = NULL, *ballast = NULL;
        _cleanup_free_ char *small = tpath("small"), *big = tpath("big");
        /* the big file compresses about half (text, stored in groups) and half not (random) */
        _cleanup_free_ uint8_t *small_data = random_data(MiB, 7), *big_data = random_data(64 * MiB, 8);
        _cleanup_free_ uint8_t *text = text_data(32 * MiB, 9);
        BvBackupStats st_small, st_big, st2;
        BvRepo *r;
        BvSnapshot *const *list;
        size_t n;

        ASSERT_EQ(mkdir(mnt, 0700), 0);
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=24m,mode=0700") < 0) {
                printf("# cannot mount a tmpfs on %s: %s\n", mnt, strerror(errno));
                rmdir(mnt);
                return false;
        }
        ASSERT_TRUE(asprintf(&rpath, "%s/repo", mnt) > 0);
        ASSERT_TRUE(asprintf(&ballast, "%s/ballast", mnt) > 0);
        r = repo_new(rpath, true, 4 * MiB); /* small packs: some are committed before the end */

        write_file(small, small_data, MiB);
        backup(r, small, &st_small);
        uint8_t *zeros = calloc(1, 4 * MiB);
        ASSERT_TRUE(zeros);
        write_file(ballast, zeros, 4 * MiB);
        free(zeros);

        memcpy(big_data, text, 32 * MiB);
        write_file(big, big_data, 64 * MiB);
        BvBackupOptions o = { .threads = 2 };
        ASSERT_ERROR(bv_backup_path(r, big, &o, &st_big), ENOSPC);
        ASSERT_OK(bv_repo_reload(r));
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 1);
        bv_repo_close(r);

        /* The repository opens, verifies, and the earlier snapshot restores. */
        BvSecret sec = secret_for(true);
        ASSERT_OK(bv_repo_open(rpath, &sec, BV_OPEN_WRITE, &r));
        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        restore_check(r, st_small.snapshot_id, small_data, MiB);

        /* After freeing space a new backup succeeds. */
        ASSERT_EQ(unlink(ballast), 0);
        bvtest_fill_random(small_data, MiB, 77);
        write_file(small, small_data, MiB);
        backup(r, small, &st2);
        restore_check(r, st2.snapshot_id, small_data, MiB);
        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        bv_repo_close(r);

        ASSERT_EQ(umount2(mnt, MNT_DETACH), 0);
        rmdir(mnt);
        unlink(small);
        unlink(big);
        return true;
}

/* ---- compression groups ---- */

typedef struct GroupCount {
        BvRepo *r;
        BvObjectCodec *codec;
        size_t chunks, groups, members;
        BvPackEntry first_group; /* member 0 of the first group seen */
        uint8_t first_pack[BV_PACK_ID_SIZE];
        uint8_t first_members[64][BV_ID_SIZE]; /* the ids of all of that group's members */
        size_t n_first_members;
} GroupCount;

static int group_count_cb(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud)
{
        GroupCount *g = ud;
        BvPackEntry *e;
        size_t n;

        ASSERT_OK(bv_packset_read_index(bv_repo_packs(g->r), g->codec, pack_id, &e, &n));
        for (size_t i = 0; i < n; i++) {
                if (e[i].type == BV_OBJ_CHUNK)
                        g->chunks++;
                if (e[i].type != BV_OBJ_GROUP)
                        continue;
                g->members++;
                ASSERT_TRUE(e[i].member < 64);
                if (e[i].member == 0 && g->groups++ == 0) {
                        g->first_group = e[i];
                        memcpy(g->first_pack, pack_id, BV_PACK_ID_SIZE);
                }
                if (g->groups == 1 && memcmp(g->first_pack, pack_id, BV_PACK_ID_SIZE) == 0 &&
                    e[i].offset == g->first_group.offset)
                        memcpy(g->first_members[g->n_first_members++], e[i].id, BV_ID_SIZE);
        }
        free(e);
        return 0;
}

static GroupCount group_count(BvRepo *r)
{
        GroupCount g = { .r = r };

        ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &g.codec));
        ASSERT_TRUE(bv_packset_list(bv_repo_packs(r), group_count_cb, &g) > 0);
        bv_object_codec_free(g.codec);
        return g;
}

static void count_problem(const BvVerifyProblem *p, void *ud)
{
        size_t *n = ud;
        ASSERT_EQ(p->error, -EBADMSG);
        ASSERT_STREQ(p->what, "chunk");
        (*n)++;
}

/* Compressible data is stored in groups, which restore, random reads and verify take apart
 * again, each group decoded once; incompressible data and an uncompressed repository store
 * single chunks; a damaged group fails every chunk in it, named by image offset. */
TEST(groups)
{
        const size_t len = 8 * MiB;
        _cleanup_free_ char *path = tpath("groups"), *src = tpath("groups-src");
        _cleanup_free_ uint8_t *data = text_data(len, 77), *noise = random_data(len, 78);
        BvBackupStats st;
        BvVerifyStats vs;
        BvRepo *r = repo_new(path, true, 0);
        GroupCount g;

        write_file(src, data, len);
        backup(r, src, &st);
        ASSERT_TRUE(st.counts.bytes_stored < len * 6 / 10);
        g = group_count(r);
        ASSERT_TRUE(g.groups > 0);
        ASSERT_TRUE(g.members >= 2 * g.groups);
        ASSERT_EQ(g.members + g.chunks, st.counts.chunks_new);
        {
                BvRepoInfo info;

                ASSERT_OK(bv_repo_info(r, &info));
                ASSERT_EQ(info.groups, g.groups);
                ASSERT_EQ(info.grouped_chunks, g.members);
                ASSERT_EQ(info.unique_raw, len);
        }
        restore_check(r, st.snapshot_id, data, len);

        /* a whole pass over the image decodes each group once */
        {
                BvImageOptions o = { .cache_bytes = 64 * MiB, .readahead = 0 };
                _cleanup_free_ uint8_t *buf = malloc(len);
                const BvSnapshot *snap = find_snapshot(r, st.snapshot_id);
                BvImageStats is;
                BvImage *img;
                uint64_t bad = 0;

                ASSERT_TRUE(buf);
                ASSERT_OK(bv_image_open(r, snap, &o, &img));
                for (size_t off = 0; off < len; off += 12345)
                        ASSERT_OK(bv_image_pread(img, buf + off, MIN((size_t)12345, len - off), off, &bad));
                ASSERT_MEMEQ(buf, data, len);
                bv_image_stats(img, &is);
                ASSERT_EQ(is.decodes, st.counts.chunks_new);
                ASSERT_EQ(is.group_decodes, g.groups);
                /* groups read out whole are kept only up to a sixteenth of the group cache (an
                 * eighth of the cache), not all 8 MiB of them */
                ASSERT_TRUE(is.group_cached_bytes <= o.cache_bytes / 8 / 16);
                bv_image_free(img);
        }
        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, &vs));
        ASSERT_EQ(vs.chunks_checked, st.counts.chunks_new);
        ASSERT_EQ(vs.bytes_checked, len);

        /* one member read alone (no group cache) and through a cache: the same chunk; a
         * buffer too small, a map node's id and an id not stored are refused */
        {
                const size_t cap = 256 * 1024;
                _cleanup_free_ uint8_t *one = malloc(cap), *two = malloc(cap);
                const BvSnapshot *snap = find_snapshot(r, st.snapshot_id);
                uint8_t absent[BV_ID_SIZE] = { 0 }, id[BV_ID_SIZE];
                BvObjectCodec *codec;
                BvGroupCache *gc;
                size_t got, got2;

                ASSERT_TRUE(one && two);
                ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &codec));
                ASSERT_OK(bv_group_cache_new(1 << 20, 0, &gc));
                ASSERT_OK(bv_repo_read_chunk(r, codec, NULL, g.first_group.id, one, cap, &got));
                ASSERT_EQ(got, g.first_group.raw_length);
                bv_keyring_id(bv_repo_keyring(r), BV_ID_CHUNK, one, got, id);
                ASSERT_MEMEQ(id, g.first_group.id, BV_ID_SIZE);
                ASSERT_OK(bv_repo_read_chunk(r, codec, gc, g.first_group.id, two, cap, &got2));
                ASSERT_EQ(got2, got);
                ASSERT_MEMEQ(one, two, got);
                ASSERT_EQ(bv_group_cache_decodes(gc), 1);
                ASSERT_ERROR(bv_repo_read_chunk(r, codec, NULL, g.first_group.id, one, got - 1, &got2), ENOBUFS);
                ASSERT_ERROR(bv_repo_read_chunk(r, codec, gc, g.first_group.id, one, got - 1, &got2), ENOBUFS);
                ASSERT_ERROR(bv_repo_read_chunk(r, codec, gc, snap->root, one, cap, &got2), EBADMSG);
                ASSERT_ERROR(bv_repo_read_chunk(r, codec, gc, absent, one, cap, &got2), EUCLEAN);
                bv_group_cache_free(gc);

                /* a group read out whole: in a cache whose read-out share it exceeds, it goes at
                 * once (and is decoded again when read again); in a larger one it stays, and a
                 * read of it again finds it */
                ASSERT_TRUE(g.n_first_members >= 2);
                for (size_t big = 0; big < 2; big++) {
                        ASSERT_OK(bv_group_cache_new(big ? 8 << 20 : 1 << 20, 0, &gc));
                        for (size_t m = 0; m < g.n_first_members; m++)
                                ASSERT_OK(bv_repo_read_chunk(r, codec, gc, g.first_members[m], one, cap, &got));
                        ASSERT_EQ(bv_group_cache_decodes(gc), 1);
                        ASSERT_EQ(bv_group_cache_bytes(gc) > 0, big);
                        ASSERT_OK(bv_repo_read_chunk(r, codec, gc, g.first_members[0], one, cap, &got));
                        ASSERT_EQ(bv_group_cache_decodes(gc), big ? 1u : 2u);
                        bv_group_cache_free(gc);
                }
                bv_object_codec_free(codec);
        }

        /* damage inside the first group: every member fails, restore names an offset */
        {
                char rel[64], *pack;
                size_t problems = 0;
                BvRestoreStats rs;
                _cleanup_free_ char *dest = tpath("groups-restore");
                const BvSnapshot *snap = find_snapshot(r, st.snapshot_id);
                int fd;
                uint8_t b;

                bv_pack_path(g.first_pack, rel);
                ASSERT_TRUE(asprintf(&pack, "%s/packs/%s", path, rel) > 0);
                fd = open(pack, O_RDWR | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_EQ(pread(fd, &b, 1, g.first_group.offset + 40), 1);
                b ^= 0x20;
                ASSERT_EQ(pwrite(fd, &b, 1, g.first_group.offset + 40), 1);
                ASSERT_EQ(close(fd), 0);
                free(pack);

                ASSERT_ERROR(bv_verify(r, NULL, true, count_problem, &problems, &vs), EBADMSG);
                ASSERT_TRUE(problems >= 2);
                ASSERT_EQ(vs.chunks_checked + problems, st.counts.chunks_new);
                ASSERT_ERROR(bv_restore(r, snap, dest, NULL, &rs), EBADMSG);
                ASSERT_TRUE(rs.bad_offset < len);
                ASSERT_TRUE(access(dest, F_OK) < 0);
        }
        repo_done(r, path);

        /* incompressible data: single chunks, no group */
        {
                _cleanup_free_ char *p2 = tpath("groups-noise"), *src2 = tpath("groups-noise-src");
                BvRepo *r2 = repo_new(p2, true, 0);

                write_file(src2, noise, len);
                backup(r2, src2, &st);
                g = group_count(r2);
                ASSERT_EQ(g.groups, 0);
                restore_check(r2, st.snapshot_id, noise, len);
                ASSERT_OK(bv_verify(r2, NULL, true, NULL, NULL, NULL));
                repo_done(r2, p2);
                unlink(src2);
        }
        unlink(src);
}

/* SIGKILL during a backup: the repository still opens, verifies and takes a new backup. */
TEST(sigkill)
{
        const size_t size = 48 * MiB;
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("kill");
        _cleanup_free_ uint8_t *data = random_data(size, 9), *text = text_data(size / 2, 10);
        BvRepo *r = repo_new(rpath, false, 2 * MiB);

        memcpy(data + size / 2, text, size / 2); /* the second half compresses: groups */
        BvBackupStats st;
        BvSecret sec = {};

        write_file(src, data, size / 8);
        backup(r, src, &st); /* an earlier snapshot that must survive */
        bv_repo_close(r);
        write_file(src, data, size);

        unsigned killed = 0;
        for (unsigned i = 0; i < 4; i++) {
                pid_t pid = fork();
                ASSERT_TRUE(pid >= 0);
                if (pid == 0) {
                        BvRepo *cr;
                        BvBackupStats cst;
                        if (bv_repo_open(rpath, &sec, BV_OPEN_WRITE | BV_OPEN_WAIT, &cr) < 0)
                                _exit(2);
                        _exit(bv_backup_path(cr, src, NULL, &cst) < 0 ? 1 : 0);
                }
                struct timespec ts = { .tv_nsec = (long)(50 + 150 * i) * 1000 * 1000 };
                nanosleep(&ts, NULL);
                kill(pid, SIGKILL);
                int status;
                ASSERT_EQ(waitpid(pid, &status, 0), pid);
                if (WIFSIGNALED(status))
                        killed++;
                else
                        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

                ASSERT_OK(bv_repo_open(rpath, &sec, BV_OPEN_WRITE, &r));
                ASSERT_OK(bv_verify(r, NULL, false, NULL, NULL, NULL));
                restore_check(r, st.snapshot_id, data, size / 8);
                bv_repo_close(r);
        }

        printf("# SIGKILL: %u of 4 backups killed mid-way\n", killed);
        ASSERT_TRUE(killed > 0);
        ASSERT_OK(bv_repo_open(rpath, &sec, BV_OPEN_WRITE, &r));
        BvBackupStats st2;
        backup(r, src, &st2);
        restore_check(r, st2.snapshot_id, data, size);
        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        repo_done(r, rpath);
        unlink(src);
}

TEST(errors)
{
        _cleanup_free_ char *rpath = tpath("repo");
        BvRepo *r = repo_new(rpath, false, 0);
        BvBackupStats st = { .counts.chunks = 12345 };

        ASSERT_ERROR(bv_backup_path(r, "/nonexistent/image", NULL, &st), ENOENT);
        ASSERT_EQ(st.counts.chunks, 12345); /* untouched on failure */
        ASSERT_ERROR(bv_backup_path(NULL, "-", NULL, &st), EINVAL);
        repo_done(r, rpath);
}

static unsigned count_snapshots(const char *rpath)
{
        _cleanup_free_ char *dir = NULL;
        unsigned n = 0;
        ASSERT_TRUE(asprintf(&dir, "%s/snapshots", rpath) > 0);
        DIR *d = opendir(dir);
        ASSERT_TRUE(d);
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

static bool stop;
static bool stop_asked(void)
{
        return stop;
}

/* A cancel callback that says stop (a signal, the drive pulled) stops the backup with -ECANCELED
 * and publishes nothing; the next backup completes. */
TEST(cancel)
{
        _cleanup_free_ char *rpath = tpath("repo"), *src = tpath("src");
        _cleanup_free_ uint8_t *data = random_data(3 * MiB, 77);
        BvRepo *r = repo_new(rpath, true, 0);
        BvBackupOptions o = { .name = "c", .cancelled = stop_asked };
        BvBackupStats st = { .counts.chunks = 12345 };

        write_file(src, data, 3 * MiB);
        stop = true;
        ASSERT_ERROR(bv_backup_path(r, src, &o, &st), ECANCELED);
        ASSERT_EQ(st.counts.chunks, 12345);
        ASSERT_EQ(count_snapshots(rpath), 0u);
        stop = false;
        ASSERT_OK(bv_backup_path(r, src, &o, &st));
        ASSERT_EQ(count_snapshots(rpath), 1u);
        restore_check(r, st.snapshot_id, data, 3 * MiB);
        ASSERT_OK(bv_verify(r, NULL, true, NULL, NULL, NULL));
        repo_done(r, rpath);
        unlink(src);
}

int main(void)
{
        base = bvtest_tmpdir();
        RUN(errors);
        RUN(cancel);
        RUN(random_plain);
        RUN(random_encrypted);
        RUN(zeros);
        RUN(sparse);
        RUN(odd_size_and_empty);
        RUN(stdin_stream);
        RUN(concatenation);
        RUN(groups);
        RUN(sigkill);
        bool enospc_ran = test_enospc();
        bvtest_rm_rf(base);
        free(base);
        if (!enospc_ran) {
                printf("skip - enospc: needs root to mount a tmpfs\n");
                return 77;
        }
        printf("ok - enospc\n");
        return 0;
}
