/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A running libvirt domain's disks, backed up through one pull-mode backup job (backup-libvirt.h).
 * The job freezes every disk at one instant and creates this run's checkpoint in the same call;
 * each disk is then read from the job's NBD export as a source of kind libvirt, whose pairing with
 * its parent goes by checkpoint (source-libvirt.c). The job's socket and scratch files live in
 * RUN_DIR under names made from the domain's UUID, so a run killed midway leaves them where the
 * next run of the same domain finds and removes them; those of a domain libvirt no longer has
 * are removed by the next run of any domain (bv_virt_stale_sweep).
 *
 * A shut-off domain has no job: each disk is read from its image (source-libvirt.c), a qcow2
 * incrementally when it still carries the persistent bitmap of its parent's checkpoint, and its
 * snapshot records that checkpoint again (libvirt 9.0 cannot create one for an inactive domain).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backup-libvirt.h"
#include "hex.h"
#include "macro.h"
#include "parent-map.h"
#include "random.h"
#include "timeutil.h"
#include "virt-tidy.h"

typedef struct Job {
        BvVirt *v;
        BvVirtDomain *d;
        BvVirtDisks disks;
        BvVirtBackupDisk *jd; /* one per disk of the job (backup or not) */
        size_t n_jd;
        char (*scratch)[PATH_MAX];
        char sock[PATH_MAX], dir[PATH_MAX];
        char mark[PATH_MAX]; /* exists while the guest may be frozen by us (BvVirtFreezeOptions.mark) */
        int lock; /* the domain's backup lock (bv_virt_job_lock), -1 before */
        bool begun, dir_made;
        bool offline; /* the domain is shut off: no job, its images are read */
        char prefix[48]; /* the repository's checkpoints' (bv_virt_checkpoint_prefix) */
} Job;

/* Ends the job (if begun) and removes its files: in every path. */
static void job_done(Job *j, BvLibvirtResult *res)
{
        int r = 0;

        if (j->begun)
                r = bv_virt_backup_end(j->d);
        if (j->dir_made || j->begun) {
                int q = bv_virt_job_files_remove(j->dir, j->sock);
                r = r < 0 ? r : q;
        }
        if (res && r < 0)
                res->cleanup_error = r;
        if (j->lock >= 0)
                close(j->lock);
        free(j->jd);
        free(j->scratch);
        bv_virt_disks_done(&j->disks);
        bv_virt_domain_close(j->d);
        bv_virt_close(j->v);
}

/* Whether k is backed up: listed in o->disks, or (none listed) a disk with a source that is not
 * shared with other domains (see plan_disks). */
static bool disk_selected(const BvVirtDisk *k, const BvLibvirtBackupOptions *o)
{
        if (o->n_disks == 0)
                return strcmp(k->device, "disk") == 0 && k->source && !k->shareable;
        for (size_t i = 0; i < o->n_disks; i++)
                if (strcmp(o->disks[i], k->target) == 0)
                        return true;
        return false;
}

/* The newest snapshot named name, or NULL. */
static const BvSnapshot *newest_named(BvSnapshot *const *list, size_t n, const char *name)
{
        for (size_t i = n; i > 0; i--)
                if (list[i - 1]->name && strcmp(list[i - 1]->name, name) == 0)
                        return list[i - 1];
        return NULL;
}

/* A shut-off domain: the checkpoint is usable only if the disk's image still carries its bitmap
 * (libvirt names it after the checkpoint), tracking writes. Else dk->incremental is cleared and
 * why is said. */
static void offline_bitmap(Job *j, const BvSnapshot *p, BvLibvirtDiskResult *dk)
{
        const BvVirtDisk *k = bv_virt_disks_find(&j->disks, dk->target);
        const char *ck = dk->incremental;
        char *why = dk->full_because, detail[256] = "";
        size_t size = sizeof(dk->full_because);
        int r = k && k->source ? bv_source_image_bitmap(k->source, ck, detail, sizeof(detail)) : 0;

        if (r == 1)
                return;
        if (r == 0)
                snprintf(why, size, "the image '%s' carries no bitmap '%s' (checkpoint of snapshot %.8s)",
                         k && k->source ? k->source : dk->target, ck, p->id);
        else if (r == -EUCLEAN)
                snprintf(why, size, "the bitmap '%s' of '%s' is marked in use (a QEMU that had it open stopped "
                         "without saving it), so it may miss writes", ck, k->source);
        else if (r == -ESTALE)
                snprintf(why, size, "the bitmap '%s' of '%s' is disabled (it tracks no writes)", ck, k->source);
        else
                snprintf(why, size, "cannot list the bitmaps of '%s': %s", k->source,
                         detail[0] ? detail : strerror(-r));
        dk->incremental[0] = 0;
}

/*
 * The checkpoint the disk's export can count from: its parent's (the newest snapshot of its
 * name), when that parent is of this domain and disk and libvirt still has the checkpoint with a
 * bitmap of the disk. Otherwise "" and why in dk->full_because. 0, or -errno when libvirt fails.
 */
static int parent_checkpoint(Job *j, BvSnapshot *const *list, size_t n, BvLibvirtDiskResult *dk)
{
        const BvSnapshot *p = newest_named(list, n, dk->name);
        const BvSnapshotLibvirt *pl = p ? &p->source.libvirt : NULL;
        char *why = dk->full_because;
        size_t size = sizeof(dk->full_because);

        dk->incremental[0] = 0;
        if (!p)
                snprintf(why, size, "no earlier snapshot is named '%s'", dk->name);
        else if (p->source.kind != BV_SOURCE_LIBVIRT || !pl->domain || strcmp(pl->disk, dk->target) != 0)
                snprintf(why, size, "the last snapshot named '%s' (%.8s) is not of disk %s of a libvirt domain",
                         dk->name, p->id, dk->target);
        else if (!pl->uuid || strcmp(pl->uuid, bv_virt_domain_uuid(j->d)) != 0)
                snprintf(why, size, "snapshot %.8s is of another domain (UUID %s, now %s)", p->id,
                         pl->uuid ? pl->uuid : "unknown", bv_virt_domain_uuid(j->d));
        else if (!pl->checkpoint)
                snprintf(why, size, "snapshot %.8s recorded no checkpoint", p->id);
        else {
                int r = bv_virt_checkpoint_covers(j->d, pl->checkpoint, dk->target);
                if (r == -ENOENT)
                        snprintf(why, size, "checkpoint '%s', which snapshot %.8s recorded, no longer exists in "
                                 "libvirt", pl->checkpoint, p->id);
                else if (r < 0)
                        return r;
                else if (r == 0)
                        snprintf(why, size, "checkpoint '%s', which snapshot %.8s recorded, has no bitmap of %s",
                                 pl->checkpoint, p->id, dk->target);
                else {
                        snprintf(dk->incremental, sizeof(dk->incremental), "%s", pl->checkpoint);
                        why[0] = 0;
                        if (j->offline)
                                offline_bitmap(j, p, dk);
                }
        }
        return 0;
}

/* A new checkpoint's name: the repository's prefix, <UTC time>-<8 random hex>. */
static int checkpoint_name(const char *prefix, char *buf, size_t size)
{
        uint8_t rnd[4];
        char hex[9];
        time_t t = (time_t)(bv_now_realtime_ns() / 1000000000ull);
        struct tm tm;
        char when[32];
        int r = bv_random_bytes(rnd, sizeof(rnd));

        if (r < 0)
                return r;
        bv_hex_encode(rnd, sizeof(rnd), hex);
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
        snprintf(buf, size, "%s%s-%s", prefix, when, hex);
        return 0;
}

/* The snapshot name of disk target: o->name alone for one disk, NAME-TARGET for several,
 * DOMAIN-TARGET without a name. */
static int disk_name(const BvLibvirtBackupOptions *o, const char *domain, const char *target, size_t n_selected,
                     char *buf, size_t size)
{
        int len = o->name && n_selected == 1 ? snprintf(buf, size, "%s", o->name)
                                             : snprintf(buf, size, "%s-%s", o->name ? o->name : domain, target);

        return len < 0 || (size_t)len >= size ? -ENAMETOOLONG : 0;
}

/* Fills res->disks with the disks to back up, their names and parents' checkpoints. */
static int plan_disks(Job *j, BvRepo *repo, const BvLibvirtBackupOptions *o, BvLibvirtResult *res)
{
        BvSnapshot *const *list;
        size_t n_list, n = 0;
        int r;

        for (size_t i = 0; i < o->n_disks; i++) {
                const BvVirtDisk *k = bv_virt_disks_find(&j->disks, o->disks[i]);
                snprintf(res->detail, sizeof(res->detail), "%s", o->disks[i]);
                if (!k)
                        return -ENXIO;
                if (strcmp(k->device, "disk") != 0) /* libvirt's job takes none: "no disks selected" */
                        return -EMEDIUMTYPE;
                if (!k->source)
                        return -ENOMEDIUM;
                if (k->shareable)
                        return -ETXTBSY;
                res->detail[0] = 0;
        }
        /* A <shareable/> disk is left out: libvirt's job cannot hold it at one instant (the
         * other domains write it past this QEMU's copy-before-write filter, and QEMU 7.2 refuses
         * the filter its lock: libvirt 9.0's libvirtd then crashed, tried here) */
        for (size_t i = 0; i < j->disks.n; i++) {
                const BvVirtDisk *k = &j->disks.v[i];
                size_t len = strlen(res->shared);
                if (k->shareable && k->source && strcmp(k->device, "disk") == 0 && o->n_disks == 0)
                        snprintf(res->shared + len, sizeof(res->shared) - len, "%s%s", len ? ", " : "", k->target);
        }
        for (size_t i = 0; i < j->disks.n; i++)
                n += disk_selected(&j->disks.v[i], o);
        if (n == 0)
                return -ENOMEDIUM;
        res->disks = calloc(n, sizeof(*res->disks));
        if (!res->disks)
                return -ENOMEM;
        r = bv_repo_snapshots(repo, &list, &n_list);
        for (size_t i = 0; r >= 0 && i < j->disks.n; i++) {
                const BvVirtDisk *k = &j->disks.v[i];
                if (!disk_selected(k, o))
                        continue;
                BvLibvirtDiskResult *dk = &res->disks[res->n_disks++];
                snprintf(dk->target, sizeof(dk->target), "%s", k->target);
                r = disk_name(o, res->domain, k->target, n, dk->name, sizeof(dk->name));
                if (r >= 0 && bv_snapshot_name_problem(dk->name)) {
                        snprintf(res->detail, sizeof(res->detail), "%s: %s", dk->name,
                                 bv_snapshot_name_problem(dk->name));
                        r = -EINVAL;
                }
                if (r >= 0)
                        r = parent_checkpoint(j, list, n_list, dk);
        }
        return r;
}

/* The job's disks: every disk of the domain with a source, those of res backed up, each qcow2
 * one of them tracked by the new checkpoint. Sets res->checkpoint ("" when none is tracked). */
static int plan_job(Job *j, BvLibvirtResult *res)
{
        bool any_checkpoint = false;

        j->jd = calloc(j->disks.n, sizeof(*j->jd));
        j->scratch = calloc(j->disks.n, sizeof(*j->scratch));
        if (!j->jd || !j->scratch)
                return -ENOMEM;
        for (size_t i = 0; i < j->disks.n; i++) {
                const BvVirtDisk *k = &j->disks.v[i];
                const BvLibvirtDiskResult *dk = NULL;
                if (strcmp(k->device, "disk") != 0 || !k->source) /* a <shareable/> one: backup='no' */
                        continue;
                for (size_t m = 0; m < res->n_disks; m++)
                        if (strcmp(res->disks[m].target, k->target) == 0)
                                dk = &res->disks[m];
                BvVirtBackupDisk *b = &j->jd[j->n_jd];
                if (snprintf(j->scratch[j->n_jd], PATH_MAX, "%s/%s.scratch", j->dir, k->target) >= PATH_MAX)
                        return -ENAMETOOLONG;
                *b = (BvVirtBackupDisk){ .target = k->target, .backup = dk != NULL, .scratch = j->scratch[j->n_jd],
                                         .incremental = dk && dk->incremental[0] ? dk->incremental : NULL,
                                         .checkpoint = dk && k->format && strcmp(k->format, "qcow2") == 0 };
                any_checkpoint |= b->checkpoint;
                j->n_jd++;
        }
        if (!any_checkpoint) {
                res->checkpoint[0] = 0;
                return 0;
        }
        return checkpoint_name(j->prefix, res->checkpoint, sizeof(res->checkpoint));
}

/* Connects, finds the domain (running or not) and its disks. */
static int job_open(Job *j, const char *domain, const BvLibvirtBackupOptions *o, BvLibvirtResult *res)
{
        int r = bv_virt_connect(o->uri, &j->v, res->detail, sizeof(res->detail));

        snprintf(res->uri, sizeof(res->uri), "%s", bv_virt_uri_resolve(o->uri));
        res->not_connected = r < 0;
        if (r >= 0 && (r = bv_virt_domain_open(j->v, domain, &j->d)) < 0)
                snprintf(res->detail, sizeof(res->detail), "%s", bv_virt_error(j->v));
        if (r < 0)
                return r;
        snprintf(res->domain, sizeof(res->domain), "%s", bv_virt_domain_name(j->d));
        snprintf(res->uuid, sizeof(res->uuid), "%s", bv_virt_domain_uuid(j->d));
        r = bv_virt_domain_running(j->d);
        j->offline = r == 0;
        if (r >= 0)
                r = bv_virt_domain_disks(j->d, &j->disks);
        if (r < 0)
                snprintf(res->detail, sizeof(res->detail), "%s", bv_virt_error(j->v));
        return r;
}

/* The domain's lock, then what a run that died left: its job (ended), socket and scratch files. */
static int job_prepare(Job *j, BvLibvirtResult *res)
{
        int r = bv_virt_job_lock(j->d, &j->lock);

        if (r >= 0)
                r = bv_virt_job_tidy(j->d, res->ended_job, sizeof(res->ended_job));
        if (r < 0) {
                snprintf(res->detail, sizeof(res->detail), "%s", bv_virt_error(j->v));
                return r;
        }
        if (r == 0)
                res->ended_job[0] = 0;
        return bv_virt_job_files_remove(j->dir, j->sock);
}

/* The job's disks read whole instead of from a checkpoint libvirt refused (words: its reason). */
static bool drop_incrementals(Job *j, BvLibvirtResult *res, const char *words)
{
        bool any = false;

        for (size_t i = 0; i < j->n_jd; i++) {
                if (!j->jd[i].incremental)
                        continue;
                j->jd[i].incremental = NULL;
                any = true;
                for (size_t m = 0; m < res->n_disks; m++) {
                        BvLibvirtDiskResult *dk = &res->disks[m];
                        if (strcmp(dk->target, j->jd[i].target) != 0 || !dk->incremental[0])
                                continue;
                        snprintf(dk->full_because, sizeof(dk->full_because), "libvirt refused checkpoint '%.100s': %.500s",
                                 dk->incremental, words);
                        dk->incremental[0] = 0;
                }
        }
        return any;
}

/* A fresh scratch directory (and no socket) for the job's start. */
static int job_dir_fresh(Job *j)
{
        int r = bv_virt_job_files_remove(j->dir, j->sock);

        if (r < 0)
                return r;
        /* QEMU (libvirt-qemu) must reach the scratch files: 0711 whatever the umask (the units'
         * UMask=0077 made it 0700, and QEMU's blockdev-add was refused) */
        if (mkdir(j->dir, 0711) < 0 || chmod(j->dir, 0711) < 0)
                return -errno;
        j->dir_made = true;
        return 0;
}

typedef struct BeginCall {
        Job *j;
        BvLibvirtResult *res;
} BeginCall;

static int begin_try(Job *j, BvLibvirtResult *res)
{
        return bv_virt_backup_begin(j->d, j->sock, j->jd, j->n_jd, res->checkpoint[0] ? res->checkpoint : NULL);
}

/*
 * The job's start (virDomainBackupBegin with the new checkpoint), the instant of the backup,
 * between the freeze and the thaw. A checkpoint that passed parent_checkpoint can still be
 * refused here: its bitmap missing from an image replaced while the domain was off, or broken by
 * a QEMU that was killed (libvirt 9.0: VIR_ERR_CHECKPOINT_INCONSISTENT). Then every disk is read
 * whole, libvirt's words the reason, and the job begins again at once (still frozen).
 */
static int begin_call(void *opaque)
{
        BeginCall *c = opaque;
        Job *j = c->j;
        int r = begin_try(j, c->res);

        if (r < 0 && bv_virt_checkpoint_lost(bv_virt_error_code(j->v))) {
                char words[BV_VIRT_ERROR_MAX];
                snprintf(words, sizeof(words), "%s", bv_virt_error(j->v));
                if (drop_incrementals(j, c->res, words)) {
                        r = job_dir_fresh(j);
                        if (r >= 0)
                                r = begin_try(j, c->res);
                }
        }
        if (r < 0 && !c->res->detail[0]) /* libvirt's words, before the thaw's can replace them */
                snprintf(c->res->detail, sizeof(c->res->detail), "%s", bv_virt_error(j->v));
        return r;
}

/*
 * Begins the job, its socket and scratch directory made fresh in run_dir, the guest's
 * filesystems frozen for exactly that call when its agent answers (unless o->no_freeze), thawed
 * whatever it returned (bv_virt_frozen_call; res->freeze says how it went).
 */
static int job_begin(Job *j, const BvLibvirtBackupOptions *o, BvLibvirtResult *res)
{
        int r = job_prepare(j, res);

        if (r >= 0)
                r = job_dir_fresh(j);
        if (r >= 0) {
                BeginCall c = {j, res};
                BvVirtFreezeOptions fo = {.no_freeze = o->no_freeze, .mark = j->mark};
                r = bv_virt_frozen_call(j->d, &fo, begin_call, &c, &res->freeze);
                res->reconnected = bv_virt_reconnects(j->v) > 0; /* by the thaw */
        }
        if (r < 0) {
                if (!res->detail[0]) /* a guest found frozen that would not thaw */
                        snprintf(res->detail, sizeof(res->detail), "%s", bv_virt_error(j->v));
                return r;
        }
        j->begun = true;
        return 0;
}

/* Whether s has the default name (DOMAIN-TARGET) of a name its domain no longer has (virsh
 * domrename): no backup chooses that name again by itself. */
static bool renamed_default(const BvSnapshot *s, const char *domain)
{
        const BvSnapshotLibvirt *l = &s->source.libvirt;
        size_t n = l->domain ? strlen(l->domain) : 0;

        return l->domain && s->name && l->disk && strcmp(l->domain, domain) != 0 &&
               strncmp(s->name, l->domain, n) == 0 && s->name[n] == '-' && strcmp(s->name + n + 1, l->disk) == 0;
}

/* Reads the maps of the incremental disks' parents ahead in a thread while libvirt begins the
 * job (the freeze and the job's start take a few hundred ms of libvirtd and QEMU): each disk's
 * backup then finds them in the page cache. Only a hint: a failure starts nothing. */
static BvParentWarm *warm_start(BvRepo *repo, const BvLibvirtResult *res)
{
        BvSnapshot *const *list;
        size_t n_list, n = 0;
        BvParentWarm *w = NULL;

        if (bv_repo_snapshots(repo, &list, &n_list) < 0)
                return NULL;
        _cleanup_free_ const BvSnapshot **parents = calloc(res->n_disks + 1, sizeof(*parents));
        for (size_t i = 0; parents && i < res->n_disks; i++)
                if (res->disks[i].incremental[0] && (parents[n] = newest_named(list, n_list, res->disks[i].name)))
                        n++;
        if (!parents || bv_parent_warm_start(repo, parents, n, &w) < 0)
                return NULL;
        return w;
}

/* After a run that published: deletes this repository's checkpoints of the domain that no next
 * backup counts from, keeping for each snapshot name of this domain the one its newest snapshot
 * recorded, while the domain still has that snapshot's disk (one unplugged would keep its last
 * checkpoint, and that checkpoint's bitmaps on every other disk, forever) and the name can still
 * come back (renamed_default). Others' checkpoints (another prefix: another tool's, or another
 * repository's) are never touched; one of before repositories had prefixes only when a snapshot
 * here recorded it. */
static int prune_checkpoints(Job *j, BvRepo *repo, BvLibvirtResult *res)
{
        BvSnapshot *const *list;
        size_t n_list;
        int r = bv_repo_reload(repo);

        if (r >= 0)
                r = bv_repo_snapshots(repo, &list, &n_list);
        if (r < 0)
                return r;
        _cleanup_free_ const char **keep = calloc(n_list + 1, sizeof(*keep));
        _cleanup_free_ const char **legacy = calloc(n_list + 1, sizeof(*legacy));
        size_t n = 0, n_legacy = 0;
        if (!keep || !legacy)
                return -ENOMEM;
        keep[n++] = res->checkpoint;
        for (size_t i = 0; i < n_list; i++) {
                const BvSnapshot *s = list[i];
                const BvSnapshotLibvirt *l = &s->source.libvirt;
                if (s->source.kind != BV_SOURCE_LIBVIRT || !l->uuid || strcmp(l->uuid, res->uuid) != 0 || !l->checkpoint)
                        continue;
                if (newest_named(list, n_list, s->name) == s && l->disk && bv_virt_disks_find(&j->disks, l->disk) &&
                    !renamed_default(s, res->domain))
                        keep[n++] = l->checkpoint;
                else if (bv_virt_checkpoint_legacy(l->checkpoint))
                        legacy[n_legacy++] = l->checkpoint;
        }
        for (size_t i = 0; i < n_legacy; i++) /* a legacy one the newest of another name still needs */
                for (size_t k = 0; k < n; k++)
                        if (legacy[i] && strcmp(legacy[i], keep[k]) == 0)
                                legacy[i] = NULL;
        r = bv_virt_checkpoints_prune(j->d, j->prefix, keep, n, &res->checkpoints_deleted);
        if (r >= 0)
                r = bv_virt_checkpoints_delete(j->d, legacy, n_legacy, &res->checkpoints_deleted);
        if (r < 0)
                snprintf(res->detail, sizeof(res->detail), "%s", bv_virt_error(j->v));
        return r;
}

/* A connection libvirtd's restart closed under the job is made again (res->reconnected), so
 * that the job can still be ended, the domain asked about and the checkpoints pruned. */
static void job_reconnect(Job *j, BvLibvirtResult *res)
{
        if (!j->offline)
                (void)bv_virt_domain_reconnect(j->d);
        res->reconnected = bv_virt_reconnects(j->v) > 0;
}

/* After a disk's backup failed: whether because the domain stopped (shut off, destroyed, crashed)
 * under the job; then every disk not yet published fails so. */
static bool domain_stopped(Job *j, BvLibvirtResult *res, size_t from)
{
        job_reconnect(j, res);
        if (bv_virt_domain_running(j->d) != 0)
                return false;
        res->stopped = true;
        for (size_t i = from; i < res->n_disks; i++)
                res->disks[i].error = -EHOSTDOWN;
        return true;
}

/* Backs up one disk of the begun job. */
static int backup_disk(Job *j, BvRepo *repo, const BvLibvirtBackupOptions *o, BvLibvirtResult *res,
                       BvLibvirtDiskResult *dk)
{
        const BvVirtDisk *k = bv_virt_disks_find(&j->disks, dk->target);
        BvSourceLibvirt info = {
                .domain = res->domain, .uuid = res->uuid, .disk = dk->target, .disk_size = k->size,
                .checkpoint = NULL, .incremental = dk->incremental[0] ? dk->incremental : NULL, .socket = j->sock,
        };
        if (j->offline) { /* its image, and the parent's checkpoint kept */
                info.socket = NULL;
                info.image = k->source;
                info.image_format = k->format;
                info.checkpoint = info.incremental;
        }
        for (size_t i = 0; i < j->n_jd; i++)
                if (strcmp(j->jd[i].target, dk->target) == 0 && j->jd[i].checkpoint)
                        info.checkpoint = res->checkpoint;
        if (!j->offline && !info.checkpoint) /* libvirt tracks only qcow2 disks: this one never pairs */
                snprintf(dk->full_because, sizeof(dk->full_because),
                         "it is a %s image, of which libvirt keeps no checkpoint (no dirty bitmap): every backup "
                         "reads it whole (a qcow2 disk backs up incrementally)", k->format ? k->format : "non-qcow2");
        BvBackupOptions bo = o->backup;
        bo.name = dk->name;
        bo.source.libvirt = &info;
        bo.read_whole_because = info.incremental ? NULL : dk->full_because;
        bo.ret_kept = &dk->kept;
        char location[sizeof(BV_SOURCE_LIBVIRT_PREFIX) + sizeof(res->domain)];
        snprintf(location, sizeof(location), BV_SOURCE_LIBVIRT_PREFIX "%s", res->domain);
        BvSource *src = NULL;
        int r = bv_source_open(location, &bo.source, &src);
        if (r >= 0)
                r = bv_backup(repo, src, &bo, &dk->stats);
        bv_source_free(src);
        /* a disk read whole without a checkpoint (shut off, or not qcow2) is no changed-block source:
         * say why */
        if (r >= 0 && !info.incremental && !dk->stats.changed_reason[0])
                snprintf(dk->stats.changed_reason, sizeof(dk->stats.changed_reason), "%.*s",
                         (int)sizeof(dk->stats.changed_reason) - 1, dk->full_because);
        return r;
}

int bv_backup_libvirt(BvRepo *repo, const char *domain, const BvLibvirtBackupOptions *o, BvLibvirtResult *ret)
{
        Job j = { .lock = -1 };
        int r, first = 0;

        if (!repo || !domain || !o || !ret)
                return -EINVAL;
        *ret = (BvLibvirtResult){};
        const char *run = o->run_dir ? o->run_dir : BV_LIBVIRT_RUN_DIR;
        r = bv_virt_checkpoint_prefix(bv_repo_id_hex(repo), j.prefix, sizeof(j.prefix));
        if (r >= 0)
                r = job_open(&j, domain, o, ret);
        if (r >= 0 && (snprintf(j.dir, sizeof(j.dir), "%s/blkvault-%s.d", run, ret->uuid) >= (int)sizeof(j.dir) ||
                       snprintf(j.mark, sizeof(j.mark), "%s/blkvault-%s.frozen", run, ret->uuid) >=
                               (int)sizeof(j.mark) ||
                       snprintf(j.sock, sizeof(j.sock), "%s/blkvault-%s.sock", run, ret->uuid) >= 108))
                r = -ENAMETOOLONG; /* a unix socket's path has at most 107 bytes */
        if (r >= 0) /* what runs left of domains gone: none of theirs will tidy it (only a warning) */
                ret->stale_error = bv_virt_stale_sweep(j.v, run, &ret->stale_removed);
        if (r >= 0)
                r = plan_disks(&j, repo, o, ret);
        ret->offline = j.offline;
        if (r >= 0 && !j.offline)
                r = plan_job(&j, ret);
        if (r >= 0 && !j.offline) {
                BvParentWarm *warm = warm_start(repo, ret);
                r = job_begin(&j, o, ret);
                bv_parent_warm_join(warm);
        }
        bool published = false;
        for (size_t i = 0; r >= 0 && i < ret->n_disks; i++) {
                BvLibvirtDiskResult *dk = &ret->disks[i];
                dk->error = backup_disk(&j, repo, o, ret, dk);
                published |= dk->error == 0;
                if (dk->error < 0 && !j.offline && domain_stopped(&j, ret, i))
                        dk->error = -EHOSTDOWN;
                else if (dk->error < 0 && ret->reconnected) /* libvirtd restarted: its export went */
                        dk->error = -ECONNRESET;
                if (dk->error < 0 && first == 0)
                        first = dk->error;
                if (dk->error == -ECANCELED || ret->stopped)
                        break;
        }
        if (r >= 0)
                job_reconnect(&j, ret);
        if (published && ret->checkpoint[0] && bv_virt_backup_end(j.d) >= 0)
                ret->prune_error = prune_checkpoints(&j, repo, ret);
        job_done(&j, ret);
        if (r >= 0 && first == 0 && ret->freeze.thaw_error < 0) /* published, but the guest left frozen */
                first = ret->freeze.thaw_error;
        return r < 0 ? r : first;
}

void bv_libvirt_result_done(BvLibvirtResult *res)
{
        free(res->disks);
        *res = (BvLibvirtResult){};
}
