/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Mounts, loop devices and NBD devices: what `blkvault mount` sets up and tears down, and what
 * the appliance's targets will use. Nothing here prints.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Is path a mountpoint (listed in /proc/self/mountinfo)? Works on a FUSE mount whose daemon
 * died, where stat() fails with ENOTCONN. */
bool bv_is_mountpoint(const char *path);

/* Is a filesystem on the block device dev mounted read-write: dev itself, one of its partitions,
 * or a device stacked on them (device-mapper, md: the holders in /sys)? Each mount of such a
 * device is looked at (a read-only bind mount does not hide a read-write one). On 1 the
 * mountpoint goes to ret_mountpoint and the mounted device's name ("loop0p1") to ret_device;
 * 0 when none is, -errno when /proc/self/mountinfo cannot be read. */
int bv_blockdev_mounted_rw(dev_t dev, char *ret_mountpoint, size_t mountpoint_size, char *ret_device,
                           size_t device_size);

/* Who uses the block device dev, for the message when it cannot be opened exclusively (EBUSY):
 * a mount of it or of a partition here ("mounted on /mnt", "mounted on /mnt (its loop0p1)"), a
 * device stacked on it ("held by dm-3"), a mount only in another process's mount namespace, which
 * an umount here leaves in place ("mounted on /mnt in the mount namespace of process 533
 * (qemu-system-x86), not in this one"), or a process with it open ("open in process 42 (mkfs.xfs)").
 * 1 with that in buf, 0 when none is found, -errno. */
int bv_blockdev_user(dev_t dev, char *buf, size_t size);

/* Mounts dev (a filesystem of type fstype) read-only, nodev, nosuid on mountpoint; a dirty
 * journal is not replayed (ext3/ext4 noload, xfs norecovery). 0 or -errno. */
int bv_mount_readonly(const char *dev, const char *mountpoint, const char *fstype);

/* A read-only loop device over [offset, offset+size) of file (size 0: to its end), with
 * losetup; its path in ret_dev. 0, the exit status of losetup (> 0), or -errno. */
int bv_loop_attach_readonly(const char *file, uint64_t offset, uint64_t size, char *ret_dev, size_t dev_size);
/* Is the loop device dev (/dev/loopN) still backed by file? */
bool bv_loop_backed_by(const char *dev, const char *file);
/* Detaches the loop device (a device already detached is fine). 0 or -errno. */
int bv_loop_detach(const char *dev);

/* Does the NBD server on the Unix socket path answer with its greeting? */
bool bv_nbd_export_answers(const char *socket_path);
/* Has the kernel the nbd driver (loading it with modprobe where it can)? */
bool bv_nbd_kernel_has(void);
/* A free /dev/nbdN (one without a connected client) into buf; -ENODEV when there is none. */
int bv_nbd_find_free(char *buf, size_t size);
