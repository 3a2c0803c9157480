/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Thin wrappers over the libvirt C API: a connection, a domain and its disks. libvirt's errors
 * become a negative errno (the table in virt.c) plus libvirt's own words, which the connection
 * keeps (bv_virt_error) for the caller to print: nothing here prints, and libvirt's default
 * handler, which writes every error to stderr, is replaced once by one that stays silent.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The connection's URI when none is given and LIBVIRT_DEFAULT_URI is unset. */
#define BV_VIRT_URI_DEFAULT "qemu:///system"
#define BV_VIRT_ERROR_MAX 512

typedef struct BvVirt BvVirt;
typedef struct BvVirtDomain BvVirtDomain;

/*
 * Connects to uri; NULL means LIBVIRT_DEFAULT_URI, else BV_VIRT_URI_DEFAULT. On failure libvirt's
 * words go to detail (size bytes, "" when it gave none). Errors: -ECONNREFUSED (no daemon
 * answers), -EACCES (refused), -EINVAL (a bad URI), -ENOMEM, -EIO (another libvirt error).
 */
int bv_virt_connect(const char *uri, BvVirt **ret, char *detail, size_t size);
/* The URI bv_virt_connect(uri) connects to: uri, else LIBVIRT_DEFAULT_URI, else the default. */
const char *bv_virt_uri_resolve(const char *uri);
void bv_virt_close(BvVirt *v);
/* The URI the connection was made to (as asked: the argument, the environment or the default). */
const char *bv_virt_uri(const BvVirt *v);
/* libvirt's words for the last call on v that failed ("" when it gave none). */
const char *bv_virt_error(const BvVirt *v);
/* libvirt's error number (virErrorNumber) for the last call on v that failed, 0 when none. */
int bv_virt_error_code(const BvVirt *v);

/* For the virt room: the errno for libvirt's last error on this thread, whose words are kept
 * in v (when not NULL). -EIO when libvirt recorded none. */
int bv_virt_take_error(BvVirt *v);

/* The domain named name (or by its UUID, when name is one). Errors: -ENOENT when there is none
 * (bv_virt_error says so), else as bv_virt_take_error. The domain keeps v; close it first. */
int bv_virt_domain_open(BvVirt *v, const char *name, BvVirtDomain **ret);
void bv_virt_domain_close(BvVirtDomain *d);
/*
 * When the connection of d is no longer alive (libvirtd restarted or stopped under it), opens a
 * new one to the same URI and finds the domain again by its UUID, in place: d and its BvVirt stay
 * valid (a connection shared with other domains must not be reconnected so). 0 when it was alive,
 * 1 when reconnected, -errno when libvirt cannot be reached again (bv_virt_error says why).
 */
int bv_virt_domain_reconnect(BvVirtDomain *d);
/* How often bv_virt_domain_reconnect made v's connection again (the thaw of agent.h tries it too). */
unsigned bv_virt_reconnects(const BvVirt *v);
const char *bv_virt_domain_name(const BvVirtDomain *d);
const char *bv_virt_domain_uuid(const BvVirtDomain *d); /* 36 characters */
BvVirt *bv_virt_domain_conn(const BvVirtDomain *d);
/* Whether it runs (or is paused): 1 yes, 0 shut off, -errno when libvirt cannot tell. */
int bv_virt_domain_running(BvVirtDomain *d);
/* Whether it is paused (virsh suspend, or stopped by QEMU on an I/O error): its vCPUs run no
 * code, its guest agent answers nothing. 1 yes, 0 no (running or shut off), -errno. */
int bv_virt_domain_paused(BvVirtDomain *d);
/* For the virt room: libvirt's virDomainPtr. */
void *bv_virt_domain_ptr(const BvVirtDomain *d);

/* One <disk> of a domain, as its XML says (the live XML when it runs). */
typedef struct BvVirtDisk {
        char *target;  /* "vda" */
        char *device;  /* "disk", "cdrom", "floppy", "lun" */
        char *type;    /* "file", "block", "network", "volume" ... */
        char *source;  /* the file or device path; NULL for a network disk or an empty drive */
        char *format;  /* <driver type=...>: "qcow2", "raw"; NULL when not stated */
        bool readonly; /* <readonly/> */
        bool shareable; /* <shareable/>: other domains may have it open and write it */
        uint64_t size; /* the virtual size in bytes (virDomainGetBlockInfo), 0 when unknown */
} BvVirtDisk;

typedef struct BvVirtDisks {
        BvVirtDisk *v;
        size_t n;
        bool running; /* the domain ran when the XML was taken */
} BvVirtDisks;

/* The domain's disks, in the order of its XML. Errors: as bv_virt_take_error, -EBADMSG when the
 * XML libvirt gave does not parse, -ENOMEM. */
int bv_virt_domain_disks(BvVirtDomain *d, BvVirtDisks *ret);
void bv_virt_disks_done(BvVirtDisks *disks);
/* The disk of target, or NULL. */
const BvVirtDisk *bv_virt_disks_find(const BvVirtDisks *disks, const char *target);

/* The prefix of the checkpoints blkvault makes: others' checkpoints are never touched. Each
 * repository's are "blkvault-<its id's first BV_VIRT_CHECKPOINT_REPO_HEX hex digits>-<UTC>-<random>"
 * (bv_virt_checkpoint_prefix), so that repositories backing up one domain (drives taken in turn)
 * delete only their own; those made before (2026-11), "blkvault-<UTC>-<random>", name no
 * repository (bv_virt_checkpoint_legacy). */
#define BV_VIRT_CHECKPOINT_PREFIX "blkvault-"
#define BV_VIRT_CHECKPOINT_REPO_HEX 16

/* The prefix of the checkpoints of the repository whose id is repo_id_hex (at least
 * BV_VIRT_CHECKPOINT_REPO_HEX hex digits): 0, or -EINVAL / -ENAMETOOLONG. */
int bv_virt_checkpoint_prefix(const char *repo_id_hex, char *buf, size_t size);
/* Whether name is blkvault's but names no repository (made before repositories had prefixes). */
bool bv_virt_checkpoint_legacy(const char *name);

/* One disk of a pull-mode backup job. */
typedef struct BvVirtBackupDisk {
        const char *target;      /* "vda" */
        bool backup;             /* exported (false: left out of the job and of the checkpoint) */
        const char *scratch;     /* the scratch file (QEMU's copy-before-write target) */
        const char *incremental; /* export the changes since this checkpoint too (NULL: none) */
        bool checkpoint;         /* the new checkpoint tracks it (a persistent bitmap: qcow2 only) */
} BvVirtBackupDisk;

/*
 * Starts a pull-mode backup job of the running domain d (virDomainBackupBegin): QEMU's NBD server
 * on the unix socket, one export per disk with backup set (named after its target), each frozen
 * at this instant; a disk with incremental also offers "qemu:dirty-bitmap:backup-TARGET", its
 * changes since that checkpoint. With checkpoint (a name), the same call creates that checkpoint
 * over the disks with checkpoint set, so the next job can ask for the changes since this one.
 * Errors: as bv_virt_take_error (-EBUSY: the domain is not running or runs another job; -ENOENT:
 * an incremental checkpoint that does not exist), -EINVAL for bad arguments.
 */
int bv_virt_backup_begin(BvVirtDomain *d, const char *socket, const BvVirtBackupDisk *disks, size_t n,
                         const char *checkpoint);
/* Ends the domain's backup job (virDomainAbortJob): 0, also when it runs none; -errno. */
int bv_virt_backup_end(BvVirtDomain *d);

/* Whether checkpoint name of d exists and tracks disk target with a bitmap: 1 yes, 0 it exists
 * but not for target, -ENOENT no such checkpoint; else as bv_virt_take_error. */
int bv_virt_checkpoint_covers(BvVirtDomain *d, const char *name, const char *target);
/* Deletes checkpoint name of d (its bitmaps too). -ENOENT when there is none. */
int bv_virt_checkpoint_delete(BvVirtDomain *d, const char *name);
