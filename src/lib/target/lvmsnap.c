/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drive.h"
#include "fileio.h"
#include "lvmsnap.h"
#include "macro.h"
#include "thin-delta.h"

#define LV_NAME_SIZE 128         /* LVM's NAME_LEN: 127 characters */
#define LIST_MAX (256u * 1024)   /* lvs's listing of a volume group */
#define DELTA_MAX (64u << 20)    /* thin_delta's XML */

struct BvLvmSnap {
        char vg[128], pool[128];
        char *remove;                   /* VG/LV of the snapshot to remove at close, or NULL */
        bool thin, named;               /* a thin volume; with a kept base (its names fit) */
        bool has_base;                  /* the base existed at open */
        char base[LV_NAME_SIZE], fresh[LV_NAME_SIZE + 4]; /* LV names of the kept and the new snapshot */
        char reason[800]; /* room for the names in it */
};

typedef struct LvInfo {
        bool exists, has_id;
        uint64_t thin_id;
        char pool[128], origin[128], uuid[64];
} LvInfo;

static int run_lvm(char *const argv[], int *fail_status, char *out, size_t size)
{
        int r = bv_target_run(argv, out, size);
        if (r > 0)
                return *fail_status = r, -ECHILD;
        return r;
}

static int lvm_remove(const char *vg_lv, int *fail_status, char *out, size_t size)
{
        char *argv[] = { (char *)"lvremove", (char *)"--yes", (char *)vg_lv, NULL };
        return run_lvm(argv, fail_status, out, size);
}

/* lvs: the volume group, name, segment type and pool (thin volumes, else "") of the logical
 * volume at path. */
static int lvm_lookup(const char *path, BvLvmSnap *s, char lv[128], char type[32], int *fail_status, char *out,
                      size_t size)
{
        char *argv[] = { (char *)"lvs", (char *)"--noheadings", (char *)"-o",
                         (char *)"vg_name,lv_name,segtype,pool_lv", (char *)path, NULL };
        int r = bv_target_run(argv, out, size);
        if (r < 0)
                return r;
        if (r != 0 || sscanf(out, " %127s %127s %31s %127s", s->vg, lv, type, s->pool) < 3)
                return *fail_status = r, -ECHILD;
        return 0;
}

/* The snapshot for this run only, VG/blkvault-snap-JOB (one left by a run that died is removed
 * first): its device path in *ret_path. Thick volumes get 20% of the origin's size for the
 * changes written while it is read (an overflow invalidates the snapshot, whose reads then fail:
 * the backup fails, it is never inconsistent). */
static int snap_plain(BvLvmSnap *s, const char *lv, const char *job, char **ret_path, int *fail_status, char *out,
                      size_t size)
{
        _cleanup_free_ char *name = NULL, *snap = NULL, *dev = NULL;
        char target[300];
        struct stat st;
        int r;

        if (asprintf(&snap, "blkvault-snap-%s", job) < 0 || asprintf(&name, "%s/%s", s->vg, snap) < 0 ||
            asprintf(&dev, "/dev/%s/%s", s->vg, snap) < 0)
                return -ENOMEM;
        if (stat(dev, &st) >= 0 && (r = lvm_remove(name, fail_status, out, size)) < 0)
                return r;
        snprintf(target, sizeof(target), "%s/%s", s->vg, lv);
        char *thick_argv[] = { (char *)"lvcreate", (char *)"--snapshot", (char *)"--name", snap, (char *)"--extents",
                               (char *)"20%ORIGIN", target, NULL };
        char *thin_argv[] = { (char *)"lvcreate", (char *)"--snapshot", (char *)"--name", snap,
                              (char *)"--setactivationskip", (char *)"n", (char *)"--activate", (char *)"y", target, NULL };
        r = run_lvm(s->thin ? thin_argv : thick_argv, fail_status, out, size);
        if (r < 0)
                return r;
        s->remove = TAKE_PTR(name);
        *ret_path = TAKE_PTR(dev);
        return 0;
}

static void copy_field(char *dst, size_t size, const char *src)
{
        size_t n = strlen(src);
        while (n > 0 && src[n - 1] == ' ')
                n--;
        snprintf(dst, size, "%.*s", (int)n, src);
}

/* lvs of the volume group: the base and the new snapshot, if they exist. */
static int list_snapshots(BvLvmSnap *s, LvInfo *base, LvInfo *fresh, int *fail_status, char *out, size_t size)
{
        _cleanup_free_ char *buf = malloc(LIST_MAX);
        char *argv[] = { (char *)"lvs", (char *)"--noheadings", (char *)"--separator", (char *)"|", (char *)"-o",
                         (char *)"lv_name,pool_lv,thin_id,origin,lv_uuid", s->vg, NULL };
        char *save = NULL;

        if (!buf)
                return -ENOMEM;
        buf[0] = '\0';
        int r = bv_target_run(argv, buf, LIST_MAX);
        if (r != 0) {
                snprintf(out, size, "%s", buf);
                return r > 0 ? (*fail_status = r, -ECHILD) : r;
        }
        *base = *fresh = (LvInfo){};
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *f[5];
                size_t n = 0;
                for (char *p = line + strspn(line, " "); p && n < 5; n++) {
                        f[n] = p;
                        if ((p = strchr(p, '|')))
                                *p++ = '\0';
                }
                LvInfo *i = n < 5 ? NULL : strcmp(f[0], s->base) == 0 ? base : strcmp(f[0], s->fresh) == 0 ? fresh : NULL;
                if (!i)
                        continue;
                i->exists = true;
                copy_field(i->pool, sizeof(i->pool), f[1]);
                i->has_id = sscanf(f[2], "%" SCNu64, &i->thin_id) == 1;
                copy_field(i->origin, sizeof(i->origin), f[3]);
                copy_field(i->uuid, sizeof(i->uuid), f[4]);
        }
        return 0;
}

/* The device-mapper name of VG/LV with suffix: '-' doubled in both names, as LVM does. */
static void dm_name(const char *vg, const char *lv, const char *suffix, char *buf, size_t size)
{
        size_t at = 0;
        for (const char *p = vg; *p && at + 2 < size; p++)
                at += (size_t)snprintf(buf + at, size - at, *p == '-' ? "--" : "%c", *p);
        if (at + 1 < size)
                buf[at++] = '-';
        for (const char *p = lv; *p && at + 2 < size; p++)
                at += (size_t)snprintf(buf + at, size - at, *p == '-' ? "--" : "%c", *p);
        snprintf(buf + at, size - at, "%s", suffix);
}

/* thin_delta --metadata-snap of two thin devices, while the pool's metadata snapshot is reserved
 * (always released). 1 with the delta in *ret; 0 when there is none (why in s->reason); -ECHILD
 * when the metadata snapshot could not be released (dmsetup's output in out); -errno. */
static int metadata_delta(BvLvmSnap *s, uint64_t base_id, uint64_t new_id, BvThinDelta *ret, int *fail_status,
                          char *out, size_t size)
{
        char tpool[600], tmeta[620], b[24], n[24], err[512] = "", fdpath[64];
        char *reserve[] = { (char *)"dmsetup", (char *)"message", tpool, (char *)"0",
                            (char *)"reserve_metadata_snap", NULL };
        char *release[] = { (char *)"dmsetup", (char *)"message", tpool, (char *)"0",
                            (char *)"release_metadata_snap", NULL };
        char *delta[] = { (char *)"thin_delta", (char *)"--metadata-snap", (char *)"--snap1", b, (char *)"--snap2", n,
                          tmeta, NULL };
        _cleanup_free_ void *xml = NULL;
        size_t len;

        dm_name(s->vg, s->pool, "-tpool", tpool, sizeof(tpool));
        dm_name(s->vg, s->pool, "_tmeta", tmeta + 12, sizeof(tmeta) - 12);
        memcpy(tmeta, "/dev/mapper/", 12);
        snprintf(b, sizeof(b), "%" PRIu64, base_id);
        snprintf(n, sizeof(n), "%" PRIu64, new_id);
        int r = bv_target_run(reserve, err, sizeof(err));
        err[strcspn(err, "\n")] = '\0';
        if (r > 0)
                snprintf(s->reason, sizeof(s->reason), "cannot reserve the metadata snapshot of pool %s/%s: exit status %d (%s)",
                         s->vg, s->pool, r, err + strspn(err, " "));
        if (r != 0)
                return MIN(r, 0);
        _cleanup_close_ int fd = memfd_create("thin_delta", MFD_CLOEXEC);
        err[0] = '\0';
        int td = fd < 0 ? -errno : bv_target_run_fd(delta, fd, err, sizeof(err));
        r = run_lvm(release, fail_status, out, size);
        if (r < 0)
                return r; /* a held metadata snapshot is no state to leave unreported */
        err[strcspn(err, "\n")] = '\0';
        if (td == 127)
                snprintf(s->reason, sizeof(s->reason), "thin_delta is not installed (thin-provisioning-tools)");
        else if (td > 0)
                snprintf(s->reason, sizeof(s->reason), "thin_delta failed: exit status %d (%s)", td, err);
        if (td != 0)
                return MIN(td, 0);
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
        if ((r = bv_read_file(AT_FDCWD, fdpath, DELTA_MAX, &xml, &len)) < 0)
                return r;
        r = bv_thin_delta_parse(xml, len, ret);
        if (r >= 0 && (ret->left != base_id || ret->right != new_id)) {
                bv_thin_delta_done(ret);
                r = -EBADMSG;
        }
        if (r == -EBADMSG)
                snprintf(s->reason, sizeof(s->reason), "thin_delta's output is not a delta of thin devices %s and %s", b,
                         n);
        return r == -EBADMSG ? 0 : r < 0 ? r : 1;
}

/* A new thin snapshot and the delta from the base: the source reads what changed. */
static int thin_open(BvLvmSnap *s, const char *lv, const BvSourceOptions *opts, BvSource **ret_source,
                     int *fail_status, char *out, size_t size)
{
        char target[300], name[300], dev[300], id[128] = "", uuid[64];
        LvInfo base, fresh;
        BvThinDelta d = {};
        uint64_t new_id;
        int r;

        if ((r = list_snapshots(s, &base, &fresh, fail_status, out, size)) < 0)
                return r;
        snprintf(name, sizeof(name), "%s/%s", s->vg, s->fresh);
        if (fresh.exists && (r = lvm_remove(name, fail_status, out, size)) < 0)
                return r; /* left by a run that died */
        snprintf(target, sizeof(target), "%s/%s", s->vg, lv);
        char *create[] = { (char *)"lvcreate", (char *)"--snapshot", (char *)"--name", s->fresh,
                           (char *)"--setactivationskip", (char *)"n", (char *)"--activate", (char *)"y", target, NULL };
        char *lvs_id[] = { (char *)"lvs", (char *)"--noheadings", (char *)"-o", (char *)"thin_id,lv_uuid", name, NULL };
        if ((r = run_lvm(create, fail_status, out, size)) < 0)
                return r;
        if (!(s->remove = strdup(name)))
                return -ENOMEM;
        if ((r = run_lvm(lvs_id, fail_status, id, sizeof(id))) < 0 || sscanf(id, " %" SCNu64 " %63s", &new_id, uuid) != 2) {
                snprintf(out, size, "%s", id);
                return r < 0 ? r : (*fail_status = 0, -ECHILD);
        }
        s->has_base = base.exists;
        if (!base.exists)
                snprintf(s->reason, sizeof(s->reason), "no thin snapshot %s/%s is kept from an earlier backup to this drive",
                         s->vg, s->base);
        else if (!base.has_id || strcmp(base.pool, s->pool) != 0 || strcmp(base.origin, lv) != 0)
                snprintf(s->reason, sizeof(s->reason), "the kept snapshot %s/%s is not a thin snapshot of %s/%s", s->vg,
                         s->base, s->vg, lv);
        else if ((r = metadata_delta(s, base.thin_id, new_id, &d, fail_status, out, size)) < 0)
                return r;
        snprintf(dev, sizeof(dev), "/dev/%s/%s", s->vg, s->fresh);
        r = bv_source_open_thin(dev, new_id, uuid, s->reason[0] ? NULL : &d, base.uuid, opts, ret_source);
        bv_thin_delta_done(&d);
        return r;
}

int bv_lvm_snap_open(const char *path, const char *job, const char *target, const BvSourceOptions *opts,
                     BvLvmSnap **ret, BvSource **ret_source, int *fail_status, char *out, size_t size)
{
        BvLvmSnap *s = calloc(1, sizeof(*s));
        _cleanup_free_ char *dev = NULL;
        char lv[128], type[32];
        int status = 0;

        if (!s)
                return -ENOMEM;
        int r = lvm_lookup(path, s, lv, type, fail_status, out, size);
        if (r >= 0) {
                s->thin = strcmp(type, "thin") == 0;
                int nb = snprintf(s->base, sizeof(s->base), "blkvault-thin-%s+%s", job, target ?: "");
                int nf = snprintf(s->fresh, sizeof(s->fresh), "%s+new", s->base);
                s->named = s->thin && target && s->pool[0] && nb < LV_NAME_SIZE && nf < LV_NAME_SIZE;
                if (s->thin && !s->named)
                        snprintf(s->reason, sizeof(s->reason),
                                 "the names of job and drive are too long for a kept snapshot's (%d characters)",
                                 LV_NAME_SIZE - 1);
        }
        if (r >= 0 && s->named)
                r = thin_open(s, lv, opts, ret_source, fail_status, out, size);
        else if (r >= 0 && (r = snap_plain(s, lv, job, &dev, fail_status, out, size)) >= 0)
                r = bv_source_open(dev, opts, ret_source);
        if (r < 0) {
                bv_lvm_snap_close(s, false, &status, NULL, 0);
                return r;
        }
        *ret = s;
        return 0;
}

const char *bv_lvm_snap_reason(const BvLvmSnap *s)
{
        return s->reason;
}

bool bv_lvm_snap_thin(const BvLvmSnap *s)
{
        return s->thin;
}

/* The new snapshot becomes the base: the old one removed, the new one renamed. */
static int keep_fresh(BvLvmSnap *s, int *fail_status, char *out, size_t size)
{
        char base[300];
        char *rename[] = { (char *)"lvrename", s->vg, s->fresh, s->base, NULL };
        int r;

        snprintf(base, sizeof(base), "%s/%s", s->vg, s->base);
        if (s->has_base && (r = lvm_remove(base, fail_status, out, size)) < 0)
                return r;
        return run_lvm(rename, fail_status, out, size);
}

int bv_lvm_snap_close(BvLvmSnap *s, bool keep, int *fail_status, char *out, size_t size)
{
        char sink[1024];
        int r = 0;

        if (!s)
                return 0;
        if (!out)
                out = sink, size = sizeof(sink);
        if (s->remove && s->named && keep)
                r = keep_fresh(s, fail_status, out, size);
        else if (s->remove)
                r = lvm_remove(s->remove, fail_status, out, size);
        free(s->remove);
        free(s);
        return r;
}
