/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What a backup of a running domain leaves in libvirt, and how blkvault tidies it: a backup job
 * a dead run left active, checkpoints no snapshot needs any more, and whether a parent's
 * checkpoint still gives a true map. Only what is blkvault's is touched: a job whose NBD socket
 * is named by bv_virt_job_socket, checkpoints whose names start with the caller's prefix.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "virt.h"

/* The file name of every backup job's NBD socket starts so: "blkvault-PID-DOMAIN.sock". */
#define BV_VIRT_JOB_PREFIX "blkvault-"
/* Where libvirt's QEMU (user libvirt-qemu) can bind a socket (a private mktemp -d cannot). */
#define BV_VIRT_JOB_DIR "/var/lib/libvirt/qemu"

/* The socket path of this process's backup job of domain: dir/blkvault-PID-DOMAIN.sock.
 * -ENAMETOOLONG when it does not fit size. */
int bv_virt_job_socket(char *buf, size_t size, const char *dir, const char *domain);
/* The pid a socket path of bv_virt_job_socket names; 0 when the path is not one. */
pid_t bv_virt_job_pid(const char *socket);

/*
 * A backup job left on d by a run that died (killed, crashed): when d has an active backup job
 * whose socket is blkvault's and whose process is gone, it is aborted and its scratch files and
 * socket removed. Returns 1 (what, size bytes, names the socket), 0 when d has no backup job,
 * -EBUSY when the job is another tool's or a live blkvault's (what names its socket and pid):
 * that job is not touched. Other errors as bv_virt_take_error.
 */
int bv_virt_job_tidy(BvVirtDomain *d, char *what, size_t size);

/* Whether checkpoint name exists on d: 1 yes, 0 no, else as bv_virt_take_error. */
int bv_virt_checkpoint_exists(BvVirtDomain *d, const char *name);

/* Whether a libvirt error code at a backup's begin says its incremental checkpoint is lost:
 * gone (deleted, the domain undefined) or its bitmap missing or broken (an image replaced, QEMU
 * crashed). A full read is then the answer, not a failure. */
bool bv_virt_checkpoint_lost(int code);

/*
 * Deletes d's checkpoints whose names start with prefix, except those named in keep (n names).
 * Checkpoints of any other name are never touched. libvirt merges a deleted checkpoint's bitmap
 * into its parent, so the kept ones stay true. *ret_deleted (when not NULL) counts them.
 */
int bv_virt_checkpoints_prune(BvVirtDomain *d, const char *prefix, const char *const *keep, size_t n,
                              size_t *ret_deleted);
