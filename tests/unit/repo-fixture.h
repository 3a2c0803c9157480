/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A repository with real backups in it, for the read-path tests (image, restore, verify). */

#include <fcntl.h>
#include <sys/stat.h>

#include "backup.h"
#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "maptree.h"
#include "repo.h"

typedef struct RepoFixture {
        char *dir, *repo, *key;
        BvSecret secret;
} RepoFixture;

static inline char *fixture_path(const RepoFixture *f, const char *name)
{
        char *p;
        if (asprintf(&p, "%s/%s", f->dir, name) < 0)
                abort();
        return p;
}

/* An encrypted repository (key file) with small packs, so that a test image spans several. */
static inline RepoFixture fixture_repo(void)
{
        RepoFixture f = { .dir = bvtest_tmpdir() };
        BvRepoConfig c;
        uint8_t key[32];

        f.repo = fixture_path(&f, "repo");
        f.key = fixture_path(&f, "key");
        bvtest_fill_random(key, sizeof(key), 42);
        _cleanup_close_ int fd = open(f.key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_write_all(fd, key, sizeof(key)));
        f.secret = (BvSecret){ .key_file = f.key };
        bv_repo_config_default(&c);
        c.pack_target = 1024 * 1024;
        ASSERT_OK(bv_repo_init(f.repo, &c, &f.secret));
        return f;
}

static inline void fixture_free(RepoFixture *f)
{
        bvtest_rm_rf(f->dir);
        free(f->dir);
        free(f->repo);
        free(f->key);
}

/* Image contents by kind of region, 64 KiB each: 'r' random (each different), 'z' zeros, 'h' a
 * hole, 'd' the same random region every time (duplicates; put zeros or holes around it so that
 * chunk cuts fall at its edges). */
static inline char *fixture_image(const RepoFixture *f, const char *name, const char *layout, uint64_t seed)
{
        const size_t region = 64 * 1024;
        char *path = fixture_path(f, name);
        _cleanup_free_ uint8_t *buf = malloc(region), *first = malloc(region);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        size_t n = strlen(layout);

        ASSERT_TRUE(fd >= 0 && buf && first);
        bvtest_fill_random(first, region, seed);
        for (size_t i = 0; i < n; i++) {
                switch (layout[i]) {
                case 'r':
                        bvtest_fill_random(buf, region, seed * 1000 + i + 1);
                        break;
                case 'd':
                        memcpy(buf, first, region);
                        break;
                case 'z':
                        memset(buf, 0, region);
                        break;
                case 'h':
                        continue;
                default:
                        abort();
                }
                ASSERT_OK(bv_pwrite_all(fd, buf, region, (uint64_t)i * region));
        }
        ASSERT_TRUE(ftruncate(fd, (off_t)(n * region)) == 0);
        return path;
}

/* Backs up path into the repository; returns the snapshot id (malloc'd). */
static inline char *fixture_backup(const RepoFixture *f, const char *path)
{
        BvBackupOptions o = { .threads = 2 };
        BvBackupStats st;
        BvRepo *r = NULL;
        char *id;

        ASSERT_OK(bv_repo_open(f->repo, &f->secret, BV_OPEN_WRITE, &r));
        ASSERT_OK(bv_backup_path(r, path, &o, &st));
        bv_repo_close(r);
        id = strdup(st.snapshot_id);
        ASSERT_TRUE(id != NULL);
        return id;
}

static inline void *fixture_read_file(const char *path, size_t *ret_len)
{
        void *data = NULL;
        ASSERT_OK(bv_read_file(AT_FDCWD, path, 1u << 30, &data, ret_len));
        return data;
}

/* Map node fetch for a test's own map reader. */
typedef struct FixtureFetch {
        BvRepo *repo;
        BvObjectCodec *codec;
} FixtureFetch;

static inline int fixture_fetch(void *ud, const uint8_t id[BV_ID_SIZE], void **ret, size_t *ret_len)
{
        FixtureFetch *ff = ud;
        return bv_repo_read_object_alloc(ff->repo, ff->codec, BV_OBJ_MAP, id, ret, ret_len);
}

/* The image offset of the first data extent whose id is id, or UINT64_MAX. */
static inline uint64_t fixture_offset_of(BvRepo *r, const BvSnapshot *s, const uint8_t id[BV_ID_SIZE])
{
        FixtureFetch ff = { .repo = r };
        BvMapReader *m = NULL;
        uint64_t pos = 0, found = UINT64_MAX;

        ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &ff.codec));
        ASSERT_OK(bv_map_reader_new(s->root, s->height, s->size, fixture_fetch, &ff, 64, &m));
        while (pos < s->size) {
                BvMapExtent e;
                ASSERT_OK(bv_map_reader_lookup(m, pos, &e));
                if (e.kind == BV_EXTENT_DATA && memcmp(e.id, id, BV_ID_SIZE) == 0) {
                        found = e.offset;
                        break;
                }
                pos = e.offset + e.length;
        }
        bv_map_reader_free(m);
        bv_object_codec_free(ff.codec);
        return found;
}

typedef struct FixturePacks {
        uint8_t ids[64][BV_PACK_ID_SIZE];
        size_t n;
} FixturePacks;

static inline int fixture_pack_cb(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud)
{
        FixturePacks *p = ud;
        if (p->n < ELEMENTSOF(p->ids))
                memcpy(p->ids[p->n++], pack_id, BV_PACK_ID_SIZE);
        return 0;
}

/* A pack that holds a CHUNK object: its path (malloc'd) and that chunk's entry. */
static inline char *fixture_chunk_pack(const RepoFixture *f, BvRepo *r, BvPackEntry *ret_entry)
{
        FixturePacks p = {};
        BvObjectCodec *codec = NULL;
        char rel[64], *path = NULL;

        ASSERT_OK(bv_packset_list(bv_repo_packs(r), fixture_pack_cb, &p));
        ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &codec));
        for (size_t k = 0; k < p.n && !path; k++) {
                BvPackEntry *entries = NULL;
                size_t n = 0;

                ASSERT_OK(bv_packset_read_index(bv_repo_packs(r), codec, p.ids[k], &entries, &n));
                for (size_t i = 0; i < n; i++)
                        if (entries[i].type == BV_OBJ_CHUNK) {
                                *ret_entry = entries[i];
                                bv_pack_path(p.ids[k], rel);
                                if (asprintf(&path, "%s/packs/%s", f->repo, rel) < 0)
                                        abort();
                                break;
                        }
                free(entries);
        }
        bv_object_codec_free(codec);
        ASSERT_TRUE(path != NULL);
        return path;
}

static inline void fixture_flip_byte(const char *path, uint64_t offset)
{
        _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
        uint8_t b;

        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(bv_pread_all(fd, &b, 1, offset), 1);
        b ^= 0x40;
        ASSERT_OK(bv_pwrite_all(fd, &b, 1, offset));
}
