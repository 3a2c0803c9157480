/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The appliance's configuration: /etc/blkvault/blkvault.conf and then the drop-ins
 * /etc/blkvault/conf.d/NAME.conf in name order, INI files (parsed with inih) with three kinds of
 * section:
 *
 *   [global]       on-success, on-failure: the commands of every run (unless a target has its own);
 *                  notify: the command told of each change (a failure, a recovery, an age alarm);
 *                  metrics: the Prometheus textfile (or no)
 *   [target NAME]  a registered drive: uuid, key-file, repository, mode, power-off, luks,
 *                  fs-options, on-success, on-failure
 *   [job NAME]     what to back up: source or command, snapshot, targets, schedule, keep-*,
 *                  pre, post, max-age, on-success, on-failure
 *   [export NAME]  an NBD export (blkvault-nbd@NAME.service): repository, snapshot,
 *                  passphrase-file or key-file, cache
 *   [remote NAME]  an off-site copy (blkvault-copy@NAME.service): location (s3://BUCKET[/PREFIX]
 *                  or a directory), credentials, endpoint, region, object-lock, limit-upload,
 *                  limit-download, keep-*, max-age; a job or target names it in copy-to
 *
 * Loading never stops at the first mistake: every one is recorded as a BvConfError with its
 * file and line, for `blkvault config check` to print as "FILE:LINE: MESSAGE". A mistake costs
 * only its section: the target, job or export that holds one keeps it in `mistake` (the first,
 * as "FILE:LINE: MESSAGE"), and the commands skip that section and report it while the others
 * run ([global] keeps the keys that were right). Nothing here
 * prints or runs a program; bv_conf_check_schedule (which runs systemd-analyze) is separate so
 * that the parser itself stays pure (and fuzzable).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "macro.h"

#define BV_CONF_DEFAULT_PATH "/etc/blkvault/blkvault.conf"
#define BV_CONF_ENV "BLKVAULT_CONFIG"
#define BV_CONF_NAME_MAX 64
#define BV_CONF_FILE_MAX (1024 * 1024)
#define BV_CONF_DEFAULT_MAX_AGE (7 * 86400ULL)
#define BV_CONF_DEFAULT_REPOSITORY "blkvault"
/* Where Debian's prometheus-node-exporter reads textfiles from. */
#define BV_CONF_DEFAULT_METRICS "/var/lib/prometheus/node-exporter/blkvault.prom"

typedef struct BvConfError {
        const char *file; /* one of BvConfig.files */
        unsigned line;    /* 0: about the file as a whole */
        char *message;
} BvConfError;

typedef enum BvTargetMode {
        BV_TARGET_BACKUP,
        BV_TARGET_RESTORE_ONLY,
} BvTargetMode;

/* Where a setting came from, for messages about it. */
typedef struct BvConfWhere {
        const char *file;
        unsigned line;
} BvConfWhere;

typedef struct BvConfTarget {
        char *name;
        BvConfWhere where;      /* its [target NAME] line */
        char *uuid;             /* lower case; of the LUKS container, or of the filesystem without LUKS */
        char *key_file;         /* opens the LUKS container and the repository */
        BvConfWhere key_file_where; /* its key-file line */
        char *repository;       /* relative path inside the filesystem */
        BvTargetMode mode;
        bool power_off;
        bool luks;              /* default yes */
        char *fs_options;       /* extra mount options, or NULL */
        char *on_success, *on_failure; /* after a run of the drive (else [global]'s) */
        char **copy_to;         /* the remotes its repository is copied to (every snapshot), NULL-terminated */
        size_t n_copy_to;
        BvConfWhere copy_to_where;
        char *mistake;          /* the section's first mistake ("FILE:LINE: MESSAGE"), or NULL */
} BvConfTarget;

/* Retention: a count of BV_CONF_KEEP_UNSET is "not set"; -1 keeps one of every period, as
 * prune's --keep-*=-1 (BvPolicy). */
#define BV_CONF_KEEP_UNSET (-2)
typedef struct BvConfRetention {
        int last, hourly, daily, weekly, monthly, yearly;
        uint64_t within; /* seconds, 0 = not set */
} BvConfRetention;

typedef struct BvConfJob {
        char *name;
        BvConfWhere where;
        char *source;           /* a block device, an image file, an LVM logical volume,
                                 * "command:CMD" or "libvirt:DOMAIN"; or NULL */
        char *libvirt_uri;      /* source libvirt:DOMAIN: the connection's URI (NULL: the default) */
        char **disks;           /* source libvirt:DOMAIN: the disks (targets: vda ...) it backs up,
                                 * NULL-terminated; none: every disk */
        size_t n_disks;
        bool no_freeze;         /* source libvirt:DOMAIN: freeze = no (no guest-agent freeze) */
        char *command;          /* or a command whose standard output is the image */
        bool snapshot;          /* source is an LVM logical volume to snapshot while it is read */
        bool used_only;         /* read only the blocks its filesystems use (fs/used-source.h) */
        bool as_file;           /* a disk image (qcow2 ...) is read as the file, not its virtual disk */
        char *image_format;     /* the source is an image of this format, trusted with its backing
                                 * chain (BvSourceOptions.image_format); NULL: probed */
        bool any_target;        /* targets = any (the default) */
        char **targets;         /* otherwise these names, NULL-terminated */
        size_t n_targets;
        BvConfWhere targets_where;
        char *schedule;         /* systemd calendar expression, or NULL */
        BvConfWhere schedule_where;
        BvConfRetention keep;
        char *pre, *post, *on_success, *on_failure;
        uint64_t max_age;       /* seconds */
        char **copy_to;         /* the remotes its snapshots are copied to after a run, NULL-terminated */
        size_t n_copy_to;
        BvConfWhere copy_to_where;
        char *mistake;          /* as BvConfTarget's */
} BvConfJob;

typedef struct BvConfExport {
        char *name;
        BvConfWhere where;
        char *repository;       /* absolute path */
        char *snapshot;         /* default "latest" */
        char *passphrase_file, *key_file;
        BvConfWhere secret_where; /* the line of the last of them */
        char *cache;            /* a size ("512M"), or NULL */
        char *mistake;          /* as BvConfTarget's */
} BvConfExport;

/* An off-site copy: the repository of each target that copies to it (copy-to on the target, or on
 * a job that runs there) goes to LOCATION/TARGET, a repository related to the drive's. */
typedef struct BvConfRemote {
        char *name;
        BvConfWhere where;
        char *location;         /* "s3://BUCKET[/PREFIX]" (no trailing '/'), or an absolute directory */
        BvConfWhere location_where;
        char *credentials;      /* an AWS shared credentials file (its [default] profile; root's only),
                                 * or NULL: the environment's AWS_* variables */
        BvConfWhere credentials_where;
        char *endpoint;         /* AWS_ENDPOINT_URL_S3 of the copy, or NULL */
        char *region;           /* AWS_REGION of the copy, or NULL */
        BvConfWhere s3_where;   /* the line of the last S3-only key (credentials, endpoint, region,
                                 * object-lock), 0 when none is set */
        uint64_t object_lock;   /* seconds of Object Lock retention, 0: none */
        BvConfWhere object_lock_where, keep_where; /* their lines (keep_where: the last keep-*) */
        uint64_t limit_upload, limit_download; /* bytes per second, 0: no limit */
        BvConfRetention keep;   /* retention at the remote (copy's prune), all unset: none */
        uint64_t max_age;       /* seconds: the age alarm of its last good copy */
        char *mistake;          /* as BvConfTarget's */
} BvConfRemote;

typedef struct BvConfig {
        char **files;           /* every file read, in order */
        size_t n_files;
        struct stat *file_st;   /* each file's fstat as it was read (st_mode 0: text not from a file):
                                 * its owner is checked on what was read, not on the path again */
        char *dirs[2];          /* the main file's directory and conf.d, checked for their owner
                                 * (bv_conf_load), which errors about them name */
        BvConfTarget *targets;
        size_t n_targets;
        BvConfJob *jobs;
        size_t n_jobs;
        BvConfExport *exports;
        size_t n_exports;
        BvConfRemote *remotes;
        size_t n_remotes;
        BvConfError *errors;
        size_t n_errors;
        BvConfWhere global_where; /* the [global] line, file NULL when there is none */
        char *on_success, *on_failure; /* [global] */
        char *notify;           /* [global]: run once per change of a job's or target's state */
        char *metrics;          /* [global]: the textfile's path, NULL for the default */
        bool no_metrics;        /* [global] metrics = no */
} BvConfig;

/* The main file to read: path if given, else $BLKVAULT_CONFIG if set, else the default. The
 * drop-in directory is conf.d beside it. *ret_explicit: whether it came from path or the
 * environment (then it must exist). */
const char *bv_conf_main_path(const char *path, bool *ret_explicit);

/* Reads main_path (missing is fine unless must_exist) and then DIR/conf.d/ *.conf in name order,
 * where DIR is main_path's directory; validates the whole. Mistakes in the files are recorded in
 * errors (the call still returns 0); -errno only when memory runs out. Ownership is a mistake too
 * (as sshd and sudo see it): a file or directory of the configuration, or a secret file it names
 * (key-file, passphrase-file), that is not owned by root (or the user running this) or that others
 * can write, and a secret file that others can read (group 'blkvault' may, for the NBD export
 * service), each named with its owner or mode. */
int bv_conf_load(const char *main_path, bool must_exist, BvConfig **ret);

/* The pieces of bv_conf_load, for the fuzzer and the tests: an empty configuration, the text of
 * one file (label names it in errors; text need not be NUL-terminated), and the checks across
 * sections (required keys, known target names, unique uuids), once after the last file. */
int bv_conf_new(BvConfig **ret);
int bv_conf_parse_text(BvConfig *c, const char *label, const char *text, size_t size);
int bv_conf_finish(BvConfig *c);

/* Orders the errors by file (in the order read) and line. */
void bv_conf_sort_errors(BvConfig *c);

/* Checks every job's schedule with bv_schedule_check, adding an error for each one systemd
 * rejects (at its schedule line). -ENOENT without systemd-analyze (nothing is checked then). */
int bv_conf_check_schedules(BvConfig *c);

void bv_conf_free(BvConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(BvConfig, bv_conf_free);

const BvConfTarget *bv_conf_target_by_name(const BvConfig *c, const char *name);
const BvConfTarget *bv_conf_target_by_uuid(const BvConfig *c, const char *uuid);
const BvConfJob *bv_conf_job_by_name(const BvConfig *c, const char *name);
const BvConfExport *bv_conf_export_by_name(const BvConfig *c, const char *name);
const BvConfRemote *bv_conf_remote_by_name(const BvConfig *c, const char *name);
/* Is the repository of target t copied to remote r: copy-to on t, or on a job that runs on t? */
bool bv_conf_target_copies_to(const BvConfig *c, const BvConfTarget *t, const char *remote);
/* Every snapshot of t goes to remote r (copy-to on the target), not only those of jobs that name r? */
bool bv_conf_target_copies_all(const BvConfTarget *t, const char *remote);
/* Does the job name remote r in copy-to? */
bool bv_conf_job_copies_to(const BvConfJob *j, const char *remote);
/* Does the remote have a retention rule (any keep-*)? */
bool bv_conf_remote_prunes(const BvConfRemote *r);
/* The location of target t's copy at remote r: LOCATION/TARGET ("s3://b/p/usb1", "/srv/off/usb1"). */
int bv_conf_remote_location(const BvConfRemote *r, const char *target, char **ret);
/* Does job run on target? */
bool bv_conf_job_wants(const BvConfJob *j, const char *target);
/* Does the job have a retention rule (any keep-*): its runs prune and collect garbage? */
bool bv_conf_job_prunes(const BvConfJob *j);
/* The command of a job: command = CMD, or source = command:CMD; NULL for a path source. */
const char *bv_conf_job_command(const BvConfJob *j);
/* The domain of a job with source = libvirt:DOMAIN; NULL for any other source. */
const char *bv_conf_job_libvirt(const BvConfJob *j);
/* What is wrong with the secret file at path, as the configuration's key files are checked (owned
 * by root or the user running blkvault, writable and readable by its owner only, or readable by
 * the group 'blkvault'), into why ("secret file has mode 0644: ..."); NULL when nothing, or when
 * it does not stat (its read says why). */
const char *bv_conf_secret_problem(const char *path, char *why, size_t size);

/* Registers a target: writes its section to conf.d/50-target-NAME.conf beside main_path (durably,
 * never over an existing file: -EEXIST); the file's path in *ret_path. */
int bv_conf_write_target(const char *main_path, const BvConfTarget *t, char **ret_path);

/* A duration: a whole number and a unit (s, min, h, d, w; "7d", "12h"), into seconds. -EINVAL. */
int bv_conf_parse_duration(const char *s, uint64_t *ret);
/* A size as nbdkit takes one: a whole number and an optional unit (k, M, G, T, either case: powers
 * of 1024), into bytes; at most 2^63 - 1. -EINVAL, or -ERANGE when it is larger. 0 is a size. */
int bv_conf_parse_size(const char *s, uint64_t *ret);
/* Formats seconds as the largest unit that divides it ("7d", "90min"). */
void bv_conf_format_duration(uint64_t seconds, char buf[32]);
