/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The backend seam (backend.h): object keys, and the local directory backend on a real
 * directory: durable create-only and replacing puts, gets, stat, listing (packs fanned out),
 * removal, ranged reads, spooled writers, leases, and what is refused (symbolic links). */
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "bvtest.h"
#include "macro.h"

static const char PACK[] = "ab/ab0123456789abcdef0123456789abcd.pack";
static const char SNAP[] = "00112233445566778899aabbccddeeff.snap";

TEST(keys)
{
        char key[BV_BACKEND_KEY_MAX];

        ASSERT_OK(bv_obj_key(BV_KIND_CONFIG, NULL, key));
        ASSERT_STREQ(key, "config");
        ASSERT_OK(bv_obj_key(BV_KIND_GC_EPOCH, "", key));
        ASSERT_STREQ(key, "gc/epoch");
        ASSERT_OK(bv_obj_key(BV_KIND_VERIFY_STATE, NULL, key));
        ASSERT_STREQ(key, "verify-state");
        ASSERT_OK(bv_obj_key(BV_KIND_PACK, PACK, key));
        ASSERT_STREQ(key, "packs/ab/ab0123456789abcdef0123456789abcd.pack");
        ASSERT_OK(bv_obj_key(BV_KIND_SNAPSHOT, SNAP, key));
        ASSERT_STREQ(key, "snapshots/00112233445566778899aabbccddeeff.snap");
        ASSERT_OK(bv_obj_key(BV_KIND_CONDEMNED, "0000000000000001.idx", key));
        ASSERT_STREQ(key, "gc/0000000000000001.idx");
        ASSERT_OK(bv_obj_key(BV_KIND_LOCK, "write", key));
        ASSERT_STREQ(key, "locks/write");
        /* names never climb out of their folder */
        ASSERT_ERROR(bv_obj_key(BV_KIND_SNAPSHOT, "../config", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_SNAPSHOT, "a/b", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_SNAPSHOT, "..", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_KEY, "", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_PACK, "abcd.pack", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_PACK, "../x.pack", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_CONFIG, "x", key), EINVAL);
        ASSERT_ERROR(bv_obj_key(BV_KIND_COUNT, "x", key), EINVAL);
        ASSERT_STREQ(bv_obj_kind_name(BV_KIND_CONDEMNED), "condemned list");
}

static BvBackend *create(BvTestDir *d)
{
        BvBackend *b;
        char *path;

        ASSERT_TRUE(asprintf(&path, "%s/repo", d->dir) > 0);
        ASSERT_OK(bv_backend_open(path, true, &b));
        ASSERT_TRUE(bv_backend_is_local(b));
        ASSERT_STREQ(bv_backend_location(b), path);
        free(path);
        return b;
}

TEST(create_refuses_nonempty)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d), *b2;
        char *path;
        struct stat st;

        ASSERT_TRUE(fstatat(d.dfd, "repo/snapshots", &st, 0) == 0 && S_ISDIR(st.st_mode));
        ASSERT_TRUE(asprintf(&path, "%s/repo", d.dir) > 0);
        ASSERT_ERROR(bv_backend_open(path, true, &b2), ENOTEMPTY);
        ASSERT_OK(bv_backend_put(b, BV_KIND_CONFIG, NULL, "{}", 2, BV_PUT_CREATE));
        ASSERT_ERROR(bv_backend_open(path, true, &b2), EEXIST);
        ASSERT_ERROR(bv_backend_open("s3://Not_A_Bucket/prefix", false, &b2), EINVAL);
        free(path);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

TEST(put_get_stat_remove)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d);
        BvObjEntry e;
        char *data;
        size_t len;

        ASSERT_ERROR(bv_backend_get(b, BV_KIND_GC_EPOCH, NULL, 64, (void **)&data, &len), ENOENT);
        ASSERT_OK(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "1\n", 2, BV_PUT_CREATE)); /* makes gc/ */
        ASSERT_ERROR(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "2\n", 2, BV_PUT_CREATE), EEXIST);
        ASSERT_OK(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "3\n", 2, BV_PUT_REPLACE));
        ASSERT_OK(bv_backend_get(b, BV_KIND_GC_EPOCH, NULL, 64, (void **)&data, &len));
        ASSERT_EQ(len, 2u);
        ASSERT_STREQ(data, "3\n");
        free(data);
        ASSERT_ERROR(bv_backend_get(b, BV_KIND_GC_EPOCH, NULL, 1, (void **)&data, &len), EFBIG);
        ASSERT_OK(bv_backend_stat(b, BV_KIND_GC_EPOCH, NULL, &e));
        ASSERT_EQ(e.size, 2u);
        ASSERT_TRUE(e.type == S_IFREG && e.mtime_ns > 0);
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_GC_EPOCH, NULL), 1);
        ASSERT_OK(bv_backend_remove(b, BV_KIND_GC_EPOCH, NULL));
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_GC_EPOCH, NULL), 0);
        ASSERT_ERROR(bv_backend_remove(b, BV_KIND_GC_EPOCH, NULL), ENOENT);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

TEST(symlinks_refused)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d);
        BvObjEntry e;
        char *data;
        size_t len;
        mode_t mode;

        ASSERT_TRUE(symlinkat("/etc/passwd", d.dfd, "repo/verify-state") == 0);
        ASSERT_ERROR(bv_backend_get(b, BV_KIND_VERIFY_STATE, NULL, 1 << 20, (void **)&data, &len), ELOOP);
        ASSERT_ERROR(bv_backend_stat(b, BV_KIND_VERIFY_STATE, NULL, &e), ELOOP);
        ASSERT_TRUE(symlinkat("/tmp", d.dfd, "repo/gc") == 0);
        ASSERT_ERROR(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "1\n", 2, BV_PUT_CREATE), ELOOP);
        ASSERT_EQ(bv_backend_culprit(b, "gc/epoch", false, &mode), 2);
        ASSERT_TRUE(S_ISLNK(mode));
        ASSERT_TRUE(mkfifoat(d.dfd, "repo/config", 0600) == 0);
        ASSERT_ERROR(bv_backend_get(b, BV_KIND_CONFIG, NULL, 1 << 16, (void **)&data, &len), EBADFD);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

typedef struct Seen {
        char names[8][64];
        uint32_t types[8];
        int n;
} Seen;

static int seen(const BvObjEntry *e, void *userdata)
{
        Seen *s = userdata;

        ASSERT_TRUE(s->n < 8);
        snprintf(s->names[s->n], 64, "%s", e->name);
        s->types[s->n++] = e->type;
        return 0;
}

static int stop(const BvObjEntry *e, void *userdata)
{
        return -ECANCELED;
}

TEST(list_and_writers)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d);
        BvObjWriter *w;
        BvObjReader *r;
        Seen s = {};
        char buf[16];
        int fd;

        ASSERT_EQ(bv_backend_list(b, BV_KIND_LEASE, seen, &s), 0); /* leases/ not made yet */
        ASSERT_EQ(bv_backend_list(b, BV_KIND_PACK, seen, &s), 0);
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_PACK, &w));
        fd = bv_obj_writer_fd(w);
        ASSERT_TRUE(write(fd, "0123456789", 10) == 10);
        ASSERT_OK(bv_obj_writer_commit(w, PACK, BV_PUT_CREATE));
        /* a second commit of the same name is refused; its spool is dropped */
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_PACK, &w));
        ASSERT_ERROR(bv_obj_writer_commit(w, PACK, BV_PUT_CREATE), EEXIST);
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_PACK, &w));
        bv_obj_writer_abort(w);
        ASSERT_TRUE(mkdirat(d.dfd, "repo/packs/cd", 0700) == 0);
        ASSERT_TRUE(symlinkat("x", d.dfd, "repo/packs/cd/cd.pack") == 0);
        ASSERT_EQ(bv_backend_list(b, BV_KIND_PACK, seen, &s), 2); /* no temporary file left */
        ASSERT_EQ(s.n, 2);
        int i = strcmp(s.names[0], PACK) == 0 ? 0 : 1;
        ASSERT_STREQ(s.names[i], PACK);
        ASSERT_EQ(s.types[i], (uint32_t)S_IFREG);
        ASSERT_STREQ(s.names[1 - i], "cd/cd.pack");
        ASSERT_EQ(s.types[1 - i], (uint32_t)S_IFLNK);
        ASSERT_ERROR(bv_backend_list(b, BV_KIND_PACK, stop, NULL), ECANCELED);
        ASSERT_ERROR(bv_backend_list(b, BV_KIND_CONFIG, seen, &s), EINVAL);

        ASSERT_OK(bv_obj_reader_open(b, BV_KIND_PACK, PACK, &r));
        ASSERT_EQ(bv_obj_reader_size(r), 10u);
        bv_obj_reader_advise(r, 0, 10);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, 4, 3), 4);
        ASSERT_MEMEQ(buf, "3456", 4);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, 16, 8), 2); /* short only at the end */
        ASSERT_TRUE(bv_obj_reader_fd(r) >= 0);
        bv_obj_reader_close(r);
        ASSERT_ERROR(bv_obj_reader_open(b, BV_KIND_PACK, "cd/cd.pack", &r), ELOOP);
        ASSERT_ERROR(bv_obj_reader_open(b, BV_KIND_PACK, "ef/ef.pack", &r), ENOENT);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

static int lease_name(const BvObjEntry *e, void *userdata)
{
        snprintf(userdata, 64, "%s", e->name);
        return 0;
}

TEST(leases)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d);
        BvBackendLease *l;
        char name[64] = "", *body;
        int fd;

        ASSERT_OK(bv_backend_lease_take(b, "{\"epoch\":7}\n", 12, &l));
        ASSERT_EQ(bv_backend_list(b, BV_KIND_LEASE, lease_name, name), 1);
        ASSERT_EQ(strlen(name), 22u);
        ASSERT_EQ(bv_backend_lease_alive(b, name, true, 4096, &body), 1);
        ASSERT_STREQ(body, "{\"epoch\":7}\n");
        free(body);
        bv_backend_lease_release(l);
        ASSERT_EQ(bv_backend_list(b, BV_KIND_LEASE, lease_name, name), 0);
        ASSERT_EQ(bv_backend_lease_alive(b, name, true, 4096, NULL), 0);

        /* a lease whose holder ended (nobody holds its flock) is dead, and reaped */
        ASSERT_OK(bv_backend_put(b, BV_KIND_LEASE, "0123456789abcdef.lease", "{}", 2, BV_PUT_CREATE));
        ASSERT_EQ(bv_backend_lease_alive(b, "0123456789abcdef.lease", false, 4096, NULL), 0);
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_LEASE, "0123456789abcdef.lease"), 1);
        fd = openat(d.dfd, "repo/leases/0123456789abcdef.lease", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0 && flock(fd, LOCK_EX) == 0);
        ASSERT_EQ(bv_backend_lease_alive(b, "0123456789abcdef.lease", true, 4096, NULL), 1);
        close(fd);
        ASSERT_EQ(bv_backend_lease_alive(b, "0123456789abcdef.lease", true, 4096, NULL), 0);
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_LEASE, "0123456789abcdef.lease"), 0);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

TEST(locks)
{
        BvTestDir d = bvtest_dir_new();
        BvBackend *b = create(&d);
        int a = bv_backend_lock(b, BV_LOCK_WRITE, false);
        char holder[320], expect[32];

        ASSERT_OK(a);
        ASSERT_ERROR(bv_backend_lock(b, BV_LOCK_WRITE, false), EBUSY);
        /* the one who finds it taken can name its holder: this process */
        snprintf(expect, sizeof(expect), "pid %d on ", (int)getpid());
        ASSERT_OK(bv_backend_lock_holder(b, BV_LOCK_WRITE, holder, sizeof(holder)));
        ASSERT_TRUE(strncmp(holder, expect, strlen(expect)) == 0);
        close(a);
        a = bv_backend_lock(b, BV_LOCK_WRITE, false);
        ASSERT_OK(a);
        close(a);
        bv_backend_close(b);
        bvtest_dir_done(&d);
}

int main(void)
{
        RUN(keys);
        RUN(create_refuses_nonempty);
        RUN(put_get_stat_remove);
        RUN(symlinks_refused);
        RUN(list_and_writers);
        RUN(leases);
        RUN(locks);
        return 0;
}
