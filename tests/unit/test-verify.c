/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "info.h"
#include "repo-fixture.h"
#include "verify-state.h"
#include "verify.h"

#define MAX_PROBLEMS 64
#define REGION (64 * 1024)
/* 27 regions: 17 random, 2 the same, 8 zeros or holes */
#define LAYOUT "rrrrzzhhzdzrrrrrrrrzdzrrrrr"

typedef struct SeenProblem {
        char snapshot[64];
        uint64_t offset;
        int error;
        char what[32];
        char detail[80];
} SeenProblem;

typedef struct Seen {
        size_t n;
        SeenProblem p[MAX_PROBLEMS];
} Seen;

static void on_problem(const BvVerifyProblem *p, void *ud)
{
        Seen *s = ud;
        if (s->n == MAX_PROBLEMS)
                return;
        snprintf(s->p[s->n].snapshot, sizeof(s->p[0].snapshot), "%s", p->snapshot_id ? p->snapshot_id : "");
        s->p[s->n].offset = p->offset;
        s->p[s->n].error = p->error;
        snprintf(s->p[s->n].what, sizeof(s->p[0].what), "%s", p->what);
        snprintf(s->p[s->n].detail, sizeof(s->p[0].detail), "%s", p->detail ? p->detail : "");
        s->n++;
}

/* Index of a problem of this kind and error, or -1. */
static int find_problem(const Seen *s, const char *what, int error, const char *snapshot)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->p[i].what, what) == 0 && s->p[i].error == error &&
                    (!snapshot || strcmp(s->p[i].snapshot, snapshot) == 0))
                        return (int)i;
        return -1;
}

/* The problem of this kind and error that must have been reported; returns it. */
static const SeenProblem *expect_problem(const Seen *s, const char *what, int error, const char *snapshot)
{
        int i = find_problem(s, what, error, snapshot);

        if (i < 0) {
                fprintf(stderr, "no '%s' problem (%s) of snapshot '%s' among the %zu reported\n", what,
                        strerror(-error), snapshot, s->n);
                abort();
        }
        return &s->p[i];
}

/* A pack's problem names it: its detail is the pack's path below packs/. */
static void expect_names_pack(const SeenProblem *p, const char *pack)
{
        size_t n = strlen(p->detail), m = strlen(pack);

        ASSERT_TRUE(n > 0 && n < m && pack[m - n - 1] == '/' && strcmp(pack + m - n, p->detail) == 0);
}

TEST(clean_repository_and_info)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", LAYOUT, 31);
        _cleanup_free_ char *id1 = fixture_backup(&f, src);
        _cleanup_free_ char *id2 = fixture_backup(&f, src);
        BvVerifyStats st;
        BvRepoInfo info;
        BvRepo *r = NULL;
        Seen seen = {};

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_verify(r, NULL, true, on_problem, &seen, &st));
        ASSERT_EQ(seen.n, 0);
        ASSERT_EQ(st.snapshots, 2);
        ASSERT_EQ(st.problems, 0);
        ASSERT_TRUE(st.chunks_checked > 0 && st.map_nodes >= 2 && st.packs >= 1);
        uint64_t checked = st.bytes_checked;
        ASSERT_OK(bv_verify(r, id1, false, on_problem, &seen, &st));
        ASSERT_EQ(st.snapshots, 1);
        ASSERT_ERROR(bv_verify(r, "nope", false, on_problem, &seen, &st), ENOENT);

        ASSERT_OK(bv_repo_info(r, &info));
        ASSERT_EQ(info.snapshots, 2);
        ASSERT_EQ(info.logical_bytes, 2 * 27 * REGION);
        ASSERT_EQ(info.data_bytes, 2 * 19 * REGION);
        ASSERT_TRUE(info.unique_raw >= 18 * REGION && info.unique_raw <= 19 * REGION);
        ASSERT_EQ(checked, info.unique_raw); /* each distinct chunk read once */
        ASSERT_TRUE(info.packs >= 1 && info.stored_bytes > info.unique_raw / 2);
        ASSERT_TRUE(info.chunks > 0 && info.index_segments >= 1);
        ASSERT_TRUE(info.dedup_ratio > 1.9);
        bv_repo_close(r);
        fixture_free(&f);
}

TEST(damaged_chunk_in_two_snapshots)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", "rrrrrrrrrrrrrrrrrrrr", 32);
        _cleanup_free_ char *id1 = fixture_backup(&f, src);
        _cleanup_free_ char *id2 = fixture_backup(&f, src);
        _cleanup_free_ char *pack = NULL;
        const BvSnapshot *snap;
        BvVerifyStats st;
        BvPackEntry e;
        BvRepo *r = NULL;
        Seen seen = {};
        uint64_t at;

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, id1, &snap));
        pack = fixture_chunk_pack(&f, r, &e);
        at = fixture_offset_of(r, snap, e.id);
        fixture_flip_byte(pack, e.offset + 20);

        /* structure alone does not read chunk data */
        ASSERT_OK(bv_verify(r, NULL, false, on_problem, &seen, &st));
        ASSERT_EQ(seen.n, 0);

        ASSERT_ERROR(bv_verify(r, NULL, true, on_problem, &seen, &st), EBADMSG);
        ASSERT_EQ(st.problems, 2);
        ASSERT_EQ(seen.n, 2);
        ASSERT_EQ(expect_problem(&seen, "chunk", -EBADMSG, id1)->offset, at);
        ASSERT_EQ(expect_problem(&seen, "chunk", -EBADMSG, id2)->offset, at);
        bv_repo_close(r);
        fixture_free(&f);
}

TEST(truncated_and_missing_packs)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr", 33);
        _cleanup_free_ char *id = fixture_backup(&f, src);
        _cleanup_free_ char *pack = NULL;
        BvVerifyStats st;
        BvPackEntry e;
        BvRepo *r = NULL;
        Seen seen = {};

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        pack = fixture_chunk_pack(&f, r, &e);
        ASSERT_TRUE(truncate(pack, (off_t)(e.offset + e.length / 2)) == 0);
        ASSERT_ERROR(bv_verify(r, NULL, false, on_problem, &seen, &st), EBADMSG);
        expect_names_pack(expect_problem(&seen, "pack", -EBADMSG, ""), pack);

        ASSERT_TRUE(unlink(pack) == 0);
        bv_repo_close(r);
        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        seen.n = 0;
        ASSERT_ERROR(bv_verify(r, NULL, true, on_problem, &seen, &st), EBADMSG);
        expect_names_pack(expect_problem(&seen, "pack", -EUCLEAN, ""), pack);
        /* and the data it held is reported where the snapshot uses it */
        ASSERT_TRUE(find_problem(&seen, "chunk", -EUCLEAN, id) >= 0 || find_problem(&seen, "map node", -EUCLEAN, id) >= 0);
        bv_repo_close(r);
        fixture_free(&f);
}

TEST(reload_sees_new_snapshots)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *a = fixture_image(&f, "a.img", "rrzr", 34), *b = fixture_image(&f, "b.img", "rhrr", 35);
        _cleanup_free_ char *id1 = fixture_backup(&f, a), *id2 = NULL;
        BvSnapshot *const *list;
        const BvSnapshot *snap;
        BvVerifyStats st;
        BvRepo *r = NULL;
        size_t n;

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 1);
        id2 = fixture_backup(&f, b);
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 1); /* the list is kept until reloaded */
        ASSERT_OK(bv_repo_reload(r));
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_OK(bv_repo_find_snapshot(r, id2, &snap));
        ASSERT_STREQ(snap->id, id2);
        /* and the new snapshot's objects are found through the refreshed index */
        ASSERT_OK(bv_verify(r, id2, true, NULL, NULL, &st));
        ASSERT_TRUE(st.chunks_checked > 0);
        bv_repo_close(r);
        fixture_free(&f);
}

/* verify-state: what is saved loads back sorted by id; the order due puts damaged packs first,
 * then never verified ones, then the oldest; anything malformed is -EBADMSG. */
static void test_verify_state_file(void)
{
        char dir[] = "/tmp/bv-vstate-XXXXXX";
        BvVerifyPackState in[3] = {}, *out = NULL;
        size_t n = 0;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        BvBackend *b;
        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_backend_open(dir, false, &b));
        ASSERT_OK(bv_verify_state_load(b, &out, &n)); /* no file: empty */
        ASSERT_EQ(n, 0);
        for (int i = 0; i < 3; i++)
                memset(in[i].id, 0x30 - 0x10 * i, BV_PACK_ID_SIZE);
        in[0].verified_ns = 5, in[1].verified_ns = 0, in[2].verified_ns = 7, in[2].bad = true;
        ASSERT_OK(bv_verify_state_save(b, in, 3));
        ASSERT_OK(bv_verify_state_load(b, &out, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(out[0].id[0], 0x10);
        ASSERT_TRUE(out[0].bad && out[0].verified_ns == 7);
        ASSERT_TRUE(bv_verify_state_find(out, n, in[0].id)->verified_ns == 5);
        bv_verify_state_sort_due(out, n);
        ASSERT_TRUE(out[0].bad && out[1].verified_ns == 0 && out[2].verified_ns == 5);
        free(out);
        static const char *const bad[] = {
                "garbage\n",
                "blkvault-verify-state 1\n0011 5 ok\n",
                "blkvault-verify-state 1\n00112233445566778899aabbccddeeff 5 maybe\n",
                "blkvault-verify-state 1\n00112233445566778899aabbccddeeff 5 ok", /* no newline */
                "blkvault-verify-state 1\n00112233445566778899aabbccddeeff 5 ok\n"
                "00112233445566778899aabbccddeeff 6 ok\n", /* twice */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ASSERT_OK(bv_write_file_durable(dfd, BV_VERIFY_STATE_FILE, bad[i], strlen(bad[i]), true));
                ASSERT_ERROR(bv_verify_state_load(b, &out, &n), EBADMSG);
        }
        unlinkat(dfd, BV_VERIFY_STATE_FILE, 0);
        bv_backend_close(b);
        close(dfd);
        rmdir(dir);
}

int main(void)
{
        RUN(verify_state_file);
        RUN(clean_repository_and_info);
        RUN(damaged_chunk_in_two_snapshots);
        RUN(truncated_and_missing_packs);
        RUN(reload_sees_new_snapshots);
        return 0;
}
