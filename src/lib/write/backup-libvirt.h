/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Backups of a running libvirt domain (source libvirt:DOMAIN): one pull-mode backup job for all
 * its disks (one instant), each disk read from the job's NBD export into a snapshot of its own,
 * incrementally from the checkpoint its parent snapshot recorded.
 */

#include "agent.h"
#include "backup.h"
#include "virt.h"

/* Where the job's NBD socket and the directory of its scratch files go by default: QEMU runs as
 * libvirt-qemu, which must reach both (a private temporary directory is refused). */
#define BV_LIBVIRT_RUN_DIR "/var/lib/libvirt/qemu"

typedef struct BvLibvirtBackupOptions {
        const char *uri; /* NULL: LIBVIRT_DEFAULT_URI, else qemu:///system */
        /* the targets to back up ("vda"); none: every disk (device "disk") that has a source */
        const char *const *disks;
        size_t n_disks;
        /* Snapshot names: NULL gives DOMAIN-TARGET; a name stands for the disk when one is backed
         * up, and is NAME-TARGET for each when several are. */
        const char *name;
        const char *run_dir; /* NULL: BV_LIBVIRT_RUN_DIR */
        /* no freeze through the guest agent around the job's start: crash-consistent */
        bool no_freeze;
        /* each disk's backup: name, source.libvirt and read_whole_because are set per disk */
        BvBackupOptions backup;
} BvLibvirtBackupOptions;

typedef struct BvLibvirtDiskResult {
        char target[64];
        char name[256];          /* its snapshot's name */
        char incremental[128];   /* the checkpoint its export counted from ("": a full read) */
        char full_because[640];  /* a full read: why ("" when incremental) */
        BvBackupStats stats;
        int error;               /* 0, or why its backup failed (nothing published for it) */
        BvBackupKept kept;
} BvLibvirtDiskResult;

typedef struct BvLibvirtResult {
        char domain[256], uuid[40];
        char uri[256];        /* libvirt's URI (o->uri, else $LIBVIRT_DEFAULT_URI, else the default) */
        bool not_connected;   /* the connection to uri failed (detail: libvirt's words, if any) */
        char checkpoint[128]; /* the checkpoint the job created ("": none) */
        bool offline;         /* the domain was shut off: its disks' images were read, no job */
        BvLibvirtDiskResult *disks;
        size_t n_disks;
        char detail[BV_VIRT_ERROR_MAX]; /* libvirt's words when a libvirt call failed, or the culprit */
        int cleanup_error;              /* ending the job or removing its files failed (ignored) */
        char ended_job[256];            /* the socket of a job a run that died left, ended ("": none) */
        char shared[256];               /* the <shareable/> disks left out ("vdb, vdc"; "": none) */
        bool stopped;                   /* the domain stopped during the backup (disks failed -EHOSTDOWN) */
        bool reconnected;               /* libvirtd's connection was lost during the backup (restarted?)
                                         * and made again to end the job; a disk that failed then
                                         * failed -ECONNRESET */
        size_t checkpoints_deleted;     /* blkvault's checkpoints no snapshot needed any more */
        int prune_error;                /* deleting them failed (detail says why; ignored) */
        size_t stale_removed;           /* files of domains libvirt no longer has, removed from the
                                         * run directory (bv_virt_stale_sweep) */
        int stale_error;                /* removing them failed (ignored) */
        /* the guest agent's freeze around the job's start: whether it ran frozen (filesystems,
         * hold_ns), why not (note), a guest an earlier run left frozen (stale_thawed), a thaw that
         * failed (thaw_error; the guest may still be frozen) */
        BvVirtFreeze freeze;
} BvLibvirtResult;

/*
 * Backs up the disks of the domain (its name or UUID) into r, opened with BV_OPEN_WRITE (a
 * shut-off domain's disks from their images, without a job: see backup-libvirt.c):
 * connects, lists the disks, finds each disk's parent (the newest snapshot of its name) and the
 * checkpoint it recorded, begins one pull-mode backup job (with the guest's filesystems frozen
 * for that instant when its agent answers and o->no_freeze is not set: bv_virt_frozen_call,
 * ret->freeze) with a new checkpoint
 * ("blkvault-<time>-<random>") over the qcow2 disks, asking for each disk the changes since its
 * parent's checkpoint when libvirt still has it (else a full read, the reason in full_because),
 * then backs up each disk from the job's export, and ends the job and removes its socket and
 * scratch files in every case. Each disk's snapshot is published on its own (ret->disks[i].error
 * says which failed); the first failure is returned after all disks were tried. When every disk
 * was published but the thaw after the job's start failed (the guest may still be frozen),
 * ret->freeze.thaw_error is returned: a guest left frozen is no success.
 * Errors: those of bv_virt_connect (ret->not_connected set) and bv_virt_domain_open (detail
 * holds libvirt's words),
 * -ENXIO for a disk it does not have (named in detail), -EMEDIUMTYPE for one that is no disk
 * (a CD-ROM, a floppy: named in detail), -ENOMEDIUM for one without an image (an empty drive, a
 * network disk: named in detail) or when it has no disk to back up (detail ""), -ETXTBSY for a
 * disk shared with other domains (<shareable/>, named in detail: every disk is backed up by
 * default but those, listed in ret->shared), those of bv_virt_backup_begin (detail), -EINVAL for a
 * snapshot name bv_snapshot_name_problem refuses (detail), else a disk's backup's.
 */
int bv_backup_libvirt(BvRepo *r, const char *domain, const BvLibvirtBackupOptions *o, BvLibvirtResult *ret);
void bv_libvirt_result_done(BvLibvirtResult *res);
