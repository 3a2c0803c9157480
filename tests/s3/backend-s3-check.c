/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The S3 backend (backend-s3.h) against a real server, run by test-s3-backend.sh (which starts
 * versitygw): argv[1] an empty location s3://BUCKET/PREFIX, argv[2] one whose bucket does not
 * exist, argv[3] an empty location in a bucket with Object Lock. Objects, listings, readers and
 * spooled writers, locks and leases, messages; Object Lock on every put, and the repository read
 * as it was at a point in time after every object was deleted. */
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "backend-s3.h"
#include "bvtest.h"
#include "macro.h"

static const char PACK1[] = "ab/ab0123456789abcdef0123456789abcd.pack";
static const char PACK2[] = "cd/cd0123456789abcdef0123456789abcd.pack";
static const char SNAP[] = "00112233445566778899aabbccddeeff.snap";

static int count_cb(const BvObjEntry *e, void *userdata)
{
        ASSERT_EQ(e->type, S_IFREG);
        ASSERT_TRUE(e->mtime_ns > 0);
        if (strchr(e->name, '/'))
                ASSERT_TRUE(strcmp(e->name, PACK1) == 0 || strcmp(e->name, PACK2) == 0);
        (*(int *)userdata)++;
        return 0;
}

static void check_objects(BvBackend *b, const char *location)
{
        char msg[1024], want[256];
        BvObjEntry e;
        void *data;
        size_t len;
        int n = 0;

        ASSERT_OK(bv_backend_put(b, BV_KIND_SNAPSHOT, SNAP, "record", 6, BV_PUT_CREATE));
        ASSERT_ERROR(bv_backend_put(b, BV_KIND_SNAPSHOT, SNAP, "other!", 6, BV_PUT_CREATE), EEXIST);
        ASSERT_OK(bv_backend_get(b, BV_KIND_SNAPSHOT, SNAP, 1024, &data, &len));
        ASSERT_EQ(len, 6);
        ASSERT_STREQ((char *)data, "record"); /* NUL-terminated */
        free(data);
        ASSERT_ERROR(bv_backend_get(b, BV_KIND_SNAPSHOT, SNAP, 3, &data, &len), EFBIG);
        ASSERT_OK(bv_backend_stat(b, BV_KIND_SNAPSHOT, SNAP, &e));
        ASSERT_EQ(e.size, 6);
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_SNAPSHOT, SNAP), 1);
        ASSERT_OK(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "1", 1, BV_PUT_REPLACE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, "2", 1, BV_PUT_REPLACE));
        ASSERT_OK(bv_backend_get(b, BV_KIND_GC_EPOCH, NULL, 16, &data, &len));
        ASSERT_EQ(len, 1);
        ASSERT_EQ(((char *)data)[0], '2');
        free(data);
        /* an empty object reads as an empty, terminated buffer */
        ASSERT_OK(bv_backend_put(b, BV_KIND_KEY, "slot0", "", 0, BV_PUT_CREATE));
        ASSERT_OK(bv_backend_get(b, BV_KIND_KEY, "slot0", 16, &data, &len));
        ASSERT_EQ(len, 0);
        ASSERT_EQ(((char *)data)[0], '\0');
        free(data);

        /* listings: packs fanned out, one folder level elsewhere */
        ASSERT_OK(bv_backend_put(b, BV_KIND_PACK, PACK1, "p1", 2, BV_PUT_CREATE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_PACK, PACK2, "p2", 2, BV_PUT_CREATE));
        ASSERT_EQ(bv_backend_list(b, BV_KIND_PACK, count_cb, &n), 2);
        ASSERT_EQ(n, 2);
        n = 0;
        ASSERT_EQ(bv_backend_list(b, BV_KIND_SNAPSHOT, count_cb, &n), 1);
        ASSERT_EQ(bv_backend_list(b, BV_KIND_INDEX, count_cb, &n), 0);

        /* removal; a missing object is -ENOENT with a message naming it */
        ASSERT_OK(bv_backend_remove(b, BV_KIND_SNAPSHOT, SNAP));
        ASSERT_EQ(bv_backend_exists(b, BV_KIND_SNAPSHOT, SNAP), 0);
        ASSERT_ERROR(bv_backend_get(b, BV_KIND_SNAPSHOT, SNAP, 1024, &data, &len), ENOENT);
        snprintf(want, sizeof(want), "%s/snapshots/%s: GET: HTTP 404 NoSuchKey", location, SNAP);
        ASSERT_TRUE(strstr(bv_backend_errmsg(b, msg, sizeof(msg)), want) != NULL);
}

static void check_readers_writers(BvBackend *b)
{
        size_t size = (7u << 20) + 123;
        uint8_t *data = malloc(size), buf[100];
        BvObjWriter *w;
        BvObjReader *r;
        void *map;
        int fd;

        for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t)(i * 7 + (i >> 13));
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_INDEX, &w));
        fd = bv_obj_writer_fd(w);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, data, size), (ssize_t)size);
        ASSERT_OK(bv_obj_writer_commit(w, "0000000000000001.idx", BV_PUT_CREATE));
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_INDEX, &w));
        ASSERT_EQ(write(bv_obj_writer_fd(w), "x", 1), 1);
        ASSERT_ERROR(bv_obj_writer_commit(w, "0000000000000001.idx", BV_PUT_CREATE), EEXIST);
        ASSERT_OK(bv_obj_writer_open(b, BV_KIND_INDEX, &w));
        bv_obj_writer_abort(w);

        ASSERT_OK(bv_obj_reader_open(b, BV_KIND_INDEX, "0000000000000001.idx", &r));
        ASSERT_EQ(bv_obj_reader_size(r), size);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, sizeof(buf), 5000000), (ssize_t)sizeof(buf));
        ASSERT_MEMEQ(buf, data + 5000000, sizeof(buf));
        ASSERT_EQ(bv_obj_reader_pread(r, buf, sizeof(buf), size - 10), 10);
        ASSERT_MEMEQ(buf, data + size - 10, 10);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, sizeof(buf), size), 0);
        bv_obj_reader_advise(r, 0, 4096);
        fd = bv_obj_reader_fd(r);
        ASSERT_TRUE(fd >= 0);
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        ASSERT_TRUE(map != MAP_FAILED);
        ASSERT_MEMEQ(map, data, size);
        munmap(map, size);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, 4, 1), 4); /* from the fd now */
        ASSERT_MEMEQ(buf, data + 1, 4);
        bv_obj_reader_close(r);

        /* a second reader finds the whole object in the local cache: no request for it */
        bv_s3_stats before, after;
        ASSERT_OK(bv_obj_reader_open(b, BV_KIND_INDEX, "0000000000000001.idx", &r));
        ASSERT_OK(bv_backend_s3_stats(b, &before));
        fd = bv_obj_reader_fd(r);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_backend_s3_stats(b, &after));
        ASSERT_EQ(after.requests, before.requests);
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        ASSERT_TRUE(map != MAP_FAILED);
        ASSERT_MEMEQ(map, data, size);
        munmap(map, size);
        bv_obj_reader_close(r);
        /* the cache is bounded: storing a small object evicts the large one */
        setenv("BLKVAULT_S3_CACHE_MAX", "100", 1);
        ASSERT_OK(bv_backend_put(b, BV_KIND_INDEX, "0000000000000003.idx", data, 50, BV_PUT_CREATE));
        ASSERT_OK(bv_obj_reader_open(b, BV_KIND_INDEX, "0000000000000003.idx", &r));
        ASSERT_TRUE(bv_obj_reader_fd(r) >= 0);
        bv_obj_reader_close(r);
        unsetenv("BLKVAULT_S3_CACHE_MAX");
        ASSERT_ERROR(bv_obj_reader_open(b, BV_KIND_INDEX, "0000000000000002.idx", &r), ENOENT);
        free(data);
}

static int lease_cb(const BvObjEntry *e, void *userdata)
{
        snprintf(userdata, 64, "%s", e->name);
        return 0;
}

static void check_locks_leases(BvBackend *b)
{
        BvBackendLease *l;
        char name[64] = "";
        char *body, holder[320], expect[32];
        int fd;

        fd = bv_backend_lock(b, BV_LOCK_WRITE, false);
        ASSERT_TRUE(fd >= 0);
        ASSERT_ERROR(bv_backend_lock(b, BV_LOCK_WRITE, false), EBUSY);
        /* the one who finds it taken can name its holder: this process */
        snprintf(expect, sizeof(expect), "pid %d on ", (int)getpid());
        ASSERT_OK(bv_backend_lock_holder(b, BV_LOCK_WRITE, holder, sizeof(holder)));
        ASSERT_TRUE(strncmp(holder, expect, strlen(expect)) == 0);
        close(fd);
        fd = bv_backend_lock(b, BV_LOCK_WRITE, false);
        ASSERT_TRUE(fd >= 0);
        close(fd);

        ASSERT_OK(bv_backend_lease_take(b, "{\"pid\":1}", 9, &l));
        ASSERT_EQ(bv_backend_list(b, BV_KIND_LEASE, lease_cb, name), 1);
        ASSERT_EQ(bv_backend_lease_alive(b, name, true, 1024, &body), 1);
        ASSERT_STREQ(body, "{\"pid\":1}");
        free(body);
        bv_backend_lease_release(l);
        ASSERT_EQ(bv_backend_lease_alive(b, name, true, 1024, NULL), 0);
        ASSERT_EQ(bv_backend_list(b, BV_KIND_LEASE, lease_cb, name), 0);
}

static int snap_cb(const BvObjEntry *e, void *userdata)
{
        ASSERT_STREQ(e->name, SNAP);
        (*(int *)userdata)++;
        return 0;
}

static void sleep_past_second(void)
{
        time_t t0 = time(NULL);

        while (time(NULL) == t0)
                usleep(50000);
}

/* Writes, notes the time, writes more; then reads the repository back as it was at that time.
 * Only new keys are written after it: versitygw 1.8.0 reports the moment a version was
 * superseded (by a new version or a delete marker) as its Last-Modified, so an overwrite or a
 * DELETE after the time would hide the version current then from a reader that trusts
 * Last-Modified as S3 defines it (the time the version was written). */
static void check_point_in_time(const char *location)
{
        static const char LATER[] = "ffeeddccbbaa99887766554433221100.snap";
        BvBackend *b, *p;
        BvObjReader *r;
        char msg[1024], buf[8];
        void *data;
        size_t len;
        time_t at;
        int n = 0;

        ASSERT_OK(bv_backend_s3_open(location, true, &b, msg, sizeof(msg)));
        ASSERT_ERROR(bv_backend_s3_set_object_lock(NULL, 600, BV_S3_LOCK_COMPLIANCE), EOPNOTSUPP);
        ASSERT_ERROR(bv_backend_s3_set_object_lock(b, -1, BV_S3_LOCK_COMPLIANCE), EINVAL);
        ASSERT_OK(bv_backend_s3_set_object_lock(b, 600, BV_S3_LOCK_COMPLIANCE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_CONFIG, NULL, "{}", 2, BV_PUT_CREATE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_PACK, PACK1, "pack-one", 8, BV_PUT_CREATE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_SNAPSHOT, SNAP, "record", 6, BV_PUT_CREATE));
        sleep_past_second();
        at = time(NULL);
        sleep_past_second();
        ASSERT_OK(bv_backend_put(b, BV_KIND_SNAPSHOT, LATER, "later", 5, BV_PUT_CREATE));
        ASSERT_OK(bv_backend_put(b, BV_KIND_PACK, PACK2, "pack-two", 8, BV_PUT_CREATE));
        bv_backend_close(b);

        ASSERT_ERROR(bv_backend_s3_open_at(location, 0, &p, msg, sizeof(msg)), EINVAL);
        ASSERT_OK(bv_backend_s3_open_at(location, at, &p, msg, sizeof(msg)));
        ASSERT_OK(bv_backend_get(p, BV_KIND_CONFIG, NULL, 16, &data, &len));
        ASSERT_STREQ((char *)data, "{}");
        free(data);
        ASSERT_EQ(bv_backend_list(p, BV_KIND_SNAPSHOT, snap_cb, &n), 1);
        ASSERT_EQ(n, 1);
        n = 0;
        ASSERT_EQ(bv_backend_list(p, BV_KIND_PACK, count_cb, &n), 1);
        ASSERT_EQ(bv_backend_exists(p, BV_KIND_SNAPSHOT, LATER), 0);
        ASSERT_ERROR(bv_backend_get(p, BV_KIND_SNAPSHOT, LATER, 16, &data, &len), ENOENT);
        ASSERT_TRUE(strstr(bv_backend_errmsg(p, msg, sizeof(msg)), "snapshots/ffeeddccbbaa99887766554433221100.snap: not there at ") != NULL);
        ASSERT_OK(bv_obj_reader_open(p, BV_KIND_PACK, PACK1, &r));
        ASSERT_EQ(bv_obj_reader_size(r), 8);
        ASSERT_EQ(bv_obj_reader_pread(r, buf, 3, 5), 3);
        ASSERT_MEMEQ(buf, "one", 3);
        bv_obj_reader_close(r);
        ASSERT_ERROR(bv_backend_put(p, BV_KIND_SNAPSHOT, SNAP, "x", 1, BV_PUT_CREATE), EROFS);
        ASSERT_ERROR(bv_backend_remove(p, BV_KIND_PACK, PACK1), EROFS);
        bv_backend_close(p);
        /* now: both snapshots */
        ASSERT_OK(bv_backend_s3_open_at(location, time(NULL) + 1, &p, msg, sizeof(msg)));
        n = 0;
        ASSERT_EQ(bv_backend_list(p, BV_KIND_SNAPSHOT, count_cb, &n), 2);
        bv_backend_close(p);
}

int main(int argc, char **argv)
{
        char msg[1024];
        BvBackend *b, *b2;

        ASSERT_TRUE(argc == 4);
        /* create on an empty location, then refused where a repository or anything else is */
        ASSERT_OK(bv_backend_s3_open(argv[1], true, &b, msg, sizeof(msg)));
        ASSERT_TRUE(!bv_backend_is_local(b));
        ASSERT_STREQ(bv_backend_location(b), argv[1]);
        ASSERT_OK(bv_backend_put(b, BV_KIND_CONFIG, NULL, "{}", 2, BV_PUT_CREATE));
        ASSERT_ERROR(bv_backend_s3_open(argv[1], true, &b2, msg, sizeof(msg)), EEXIST);
        ASSERT_TRUE(strstr(msg, "a repository is already there") != NULL);
        ASSERT_OK(bv_backend_open(argv[1], false, &b2));
        bv_backend_close(b2);
        /* argv[2]: a bucket that does not exist */
        ASSERT_ERROR(bv_backend_s3_open(argv[2], false, &b2, msg, sizeof(msg)), ENOENT);
        ASSERT_TRUE(strstr(msg, "HTTP 404 NoSuchBucket") != NULL);

        check_objects(b, argv[1]);
        check_readers_writers(b);
        check_locks_leases(b);
        bv_backend_close(b);
        check_point_in_time(argv[3]);
        printf("ok\n");
        return 0;
}
