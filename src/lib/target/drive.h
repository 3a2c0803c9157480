/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A target drive: what is on it (libblkid), its LUKS2 container (libcryptsetup), its filesystem
 * (mkfs, mount with options for a USB drive) and its key file. Nothing here prints.
 *
 * Running mkfs and systemd-analyze (bv_target_run) is a small posix_spawn wrapper of this room
 * for now; it moves onto src/lib/sys's process helpers once that room is in main.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BV_KEY_DIR "/etc/blkvault/keys"
#define BV_KEY_FILE_BYTES 64

/* Runs argv (searched in $PATH) with stdin on /dev/null and stdout and stderr into out
 * (NUL-terminated, may be NULL): its exit status (127: not found), 128 + a signal, or -errno. */
int bv_target_run(char *const argv[], char *out, size_t size);
/* The same with stdout on stdout_fd (only stderr into out); stdout_fd < 0: as bv_target_run. */
int bv_target_run_fd(char *const argv[], int stdout_fd, char *out, size_t size);

typedef struct BvDriveProbe {
        char type[32];   /* filesystem or container type ("ext4", "crypto_LUKS"), or "" */
        char uuid[40];   /* its UUID, or "" */
        char pttype[16]; /* partition table type ("gpt", "dos"), or "" */
} BvDriveProbe;

/* What libblkid finds on dev: a filesystem, a LUKS container, a partition table. */
int bv_drive_probe(const char *dev, BvDriveProbe *ret);
/* The block device that holds a filesystem or container with this UUID (each block device in
 * /sys/class/block probed with libblkid: udev's by-uuid links may not exist); -ENODEV when none
 * is attached. */
int bv_drive_find_by_uuid(const char *uuid, char **ret_dev);
/* Opens dev exclusively (O_EXCL): -EBUSY when it is mounted or held by another device. */
int bv_drive_open_exclusive(const char *dev);
/* Erases every signature libblkid finds (filesystems, partition tables, LUKS headers). */
int bv_drive_wipe(const char *dev);

/* The mount options chosen for a USB target with fstype (noatime, and per filesystem). */
const char *bv_drive_mount_options(const char *fstype);
/* mkfs.FSTYPE with label on dev; -EPROTONOSUPPORT for a filesystem other than ext4, xfs and
 * btrfs, > 0: mkfs's exit status (its output in out). */
int bv_drive_mkfs(const char *dev, const char *fstype, const char *label, char *out, size_t size);
/* Whether fstype is one that target format makes (ext4, xfs, btrfs): a run mounts no other. */
bool bv_drive_mount_options_known(const char *fstype);
/* Mounts dev (fstype) on dir, nodev, nosuid, noexec, with bv_drive_mount_options and extra
 * (comma-separated, may be NULL); read-only when asked. */
int bv_drive_mount(const char *dev, const char *fstype, const char *dir, const char *extra, bool readonly);

/* Creates DIR/NAME.key (DIR created 0700 when missing) holding BV_KEY_FILE_BYTES random bytes,
 * mode 0400, never over an existing file (-EEXIST). */
int bv_key_file_create(const char *dir, const char *name, char **ret_path);

/* Fixed argon2id costs of a LUKS2 keyslot, instead of the benchmark (tests under emulation). */
typedef struct BvLuksCost {
        uint32_t iterations;
        uint32_t memory_kib;
} BvLuksCost;

/* Whether LUKS containers can be opened here: device-mapper with its crypt target (dm-crypt),
 * loaded with modprobe when it is not yet. 0, or -ENXIO when the kernel lacks either. */
int bv_luks_available(void);
/* LUKS2 with argon2id on dev, its only keyslot opened by the key file's content; its UUID into
 * ret_uuid. cost NULL: benchmarked to 2 s, up to 1 GiB and 4 threads; else exactly cost, 1 thread. */
int bv_luks_format(const char *dev, const char *key_file, const BvLuksCost *cost, char ret_uuid[40]);
/* Opens the container on dev as /dev/mapper/NAME (ret_path) with the key file. -ENXIO without
 * device-mapper in the kernel. */
int bv_luks_open(const char *dev, const char *name, const char *key_file, char *ret_path, size_t size);
int bv_luks_close(const char *name);
