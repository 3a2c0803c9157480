/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * power-off = yes: once a drive is unmounted and locked, the disk that holds dev (dev itself, or
 * the disk of a partition) is powered off: `udisksctl power-off` when udisks is there, else
 * "1" into /sys/block/DISK/device/delete (the kernel syncs the cache, stops the disk and removes
 * it; a USB bridge then powers the port down). A loop device, which has no device to stop, is
 * detached instead (LOOP_CLR_FD). -EOPNOTSUPP for a disk that has neither (virtio, nvme without
 * a delete attribute).
 */

#include <stddef.h>

/* The whole disk's kernel name ("sdb" for /dev/sdb1) into disk. */
int bv_drive_whole_disk(const char *dev, char *disk, size_t size);
int bv_drive_power_off(const char *dev);
