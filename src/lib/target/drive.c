/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <blkid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/dm-ioctl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drive-dl.h" /* libcryptsetup loaded on first use: every call goes through it */
#include "drive.h"
#include "fileio.h"
#include "macro.h"
#include "secmem.h"

extern char **environ;

int bv_target_run(char *const argv[], char *out, size_t size)
{
        return bv_target_run_fd(argv, -EBADF, out, size);
}

int bv_target_run_fd(char *const argv[], int stdout_fd, char *out, size_t size)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, stdout_fd >= 0 ? stdout_fd : p[1], 1);
        posix_spawn_file_actions_adddup2(&fa, p[1], 2);
        pid_t pid;
        int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return r == ENOENT ? 127 : -r;
        }
        char sink[4096];
        for (size_t used = 0;;) {
                ssize_t n = out && used + 1 < size ? read(p[0], out + used, size - 1 - used) :
                                                     read(p[0], sink, sizeof(sink));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (out && used + 1 < size)
                        used += (size_t)n;
                if (out)
                        out[used] = '\0';
        }
        close(p[0]);
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void copy_value(blkid_probe pr, const char *name, char *dst, size_t size)
{
        const char *v;
        if (blkid_probe_lookup_value(pr, name, &v, NULL) == 0)
                snprintf(dst, size, "%s", v);
}

int bv_drive_probe(const char *dev, BvDriveProbe *ret)
{
        _cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        /* mkfs.xfs writes with O_DIRECT: drop cached pages of the device read before it ran */
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        blkid_probe pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0) {
                blkid_free_probe(pr);
                return -EIO;
        }
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_UUID);
        blkid_probe_enable_partitions(pr, 1);
        int r = blkid_do_safeprobe(pr);
        *ret = (BvDriveProbe){};
        if (r == 0) {
                copy_value(pr, "TYPE", ret->type, sizeof(ret->type));
                copy_value(pr, "UUID", ret->uuid, sizeof(ret->uuid));
                copy_value(pr, "PTTYPE", ret->pttype, sizeof(ret->pttype));
        }
        blkid_free_probe(pr);
        /* 1: nothing found; -2: ambiguous (several signatures): call it a filesystem */
        if (r == -2)
                snprintf(ret->type, sizeof(ret->type), "ambiguous");
        return r == -1 ? -EIO : 0;
}

int bv_drive_find_by_uuid(const char *uuid, char **ret_dev)
{
        DIR *d = opendir("/sys/class/block");
        if (!d)
                return -errno;
        int r = -ENODEV;
        for (struct dirent *e; r == -ENODEV && (e = readdir(d));) {
                char dev[300], size_path[300], size[32] = "";
                BvDriveProbe pr;
                if (e->d_name[0] == '.')
                        continue;
                /* a loop device with nothing attached has size 0 */
                snprintf(size_path, sizeof(size_path), "/sys/class/block/%s/size", e->d_name);
                _cleanup_close_ int fd = open(size_path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || read(fd, size, sizeof(size) - 1) <= 0 || strtoull(size, NULL, 10) == 0)
                        continue;
                snprintf(dev, sizeof(dev), "/dev/%s", e->d_name);
                if (bv_drive_probe(dev, &pr) >= 0 && strcasecmp(pr.uuid, uuid) == 0)
                        r = (*ret_dev = strdup(dev)) ? 0 : -ENOMEM;
        }
        closedir(d);
        return r;
}

int bv_drive_open_exclusive(const char *dev)
{
        int fd = open(dev, O_RDWR | O_EXCL | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int bv_drive_wipe(const char *dev)
{
        _cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        blkid_probe pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        int r = blkid_probe_set_device(pr, fd, 0, 0);
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC);
        blkid_probe_enable_partitions(pr, 1);
        blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
        while (r == 0 && blkid_do_probe(pr) == 0)
                r = blkid_do_wipe(pr, 0);
        blkid_free_probe(pr);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        return r < 0 ? -EIO : 0;
}

const char *bv_drive_mount_options(const char *fstype)
{
        /* noatime: no write per read. ext4: errors remount read-only rather than go on; XFS:
         * no special option; btrfs: no compression (the repository is compressed already). */
        if (strcmp(fstype, "ext4") == 0)
                return "errors=remount-ro";
        return NULL;
}

bool bv_drive_mount_options_known(const char *fstype)
{
        return strcmp(fstype, "ext4") == 0 || strcmp(fstype, "xfs") == 0 || strcmp(fstype, "btrfs") == 0;
}

int bv_drive_mkfs(const char *dev, const char *fstype, const char *label, char *out, size_t size)
{
        char *ext4[] = { "mkfs.ext4", "-q", "-F", "-L", (char *)label, "-E", "lazy_itable_init=0,lazy_journal_init=0",
                         (char *)dev, NULL };
        char *xfs[] = { "mkfs.xfs", "-q", "-f", "-L", (char *)label, (char *)dev, NULL };
        char *btrfs[] = { "mkfs.btrfs", "-q", "-f", "-L", (char *)label, (char *)dev, NULL };
        char **argv = strcmp(fstype, "ext4") == 0 ? ext4 : strcmp(fstype, "xfs") == 0 ? xfs :
                      strcmp(fstype, "btrfs") == 0 ? btrfs : NULL;
        if (!argv)
                return -EPROTONOSUPPORT;
        return bv_target_run(argv, out, size);
}

int bv_drive_mount(const char *dev, const char *fstype, const char *dir, const char *extra, bool readonly)
{
        char data[512];
        const char *fs = bv_drive_mount_options(fstype);
        snprintf(data, sizeof(data), "%s%s%s", fs ? fs : "", fs && extra ? "," : "", extra ? extra : "");
        unsigned long flags = MS_NOATIME | MS_NODEV | MS_NOSUID | MS_NOEXEC | (readonly ? MS_RDONLY : 0);
        if (mount(dev, dir, fstype, flags, data[0] ? data : NULL) < 0)
                return -errno;
        return 0;
}

int bv_key_file_create(const char *dir, const char *name, char **ret_path)
{
        _cleanup_free_ char *path = NULL;
        uint8_t key[BV_KEY_FILE_BYTES];

        int r = bv_mkdir_p(AT_FDCWD, dir);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s.key", dir, name) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
        if (fd < 0)
                return -errno;
        if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
                r = -EIO;
        if (r >= 0)
                r = bv_write_all(fd, key, sizeof(key));
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        explicit_bzero(key, sizeof(key));
        if (r < 0) {
                unlink(path);
                return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* libcryptsetup logs to stderr by default: the library never prints. */
static void crypt_quiet(int level, const char *msg, void *usrptr)
{
}

/* The key file's content, in locked memory. */
static int read_key(const char *key_file, void **ret, size_t *ret_len, size_t *ret_size)
{
        return bv_read_secret_file(AT_FDCWD, key_file, 8192, 1, false, ret, ret_len, ret_size);
}

int bv_luks_format(const char *dev, const char *key_file, const BvLuksCost *cost, char ret_uuid[40])
{
        struct crypt_device *cd = NULL;
        void *key;
        size_t len, size;

        int r = drive_dl_open();
        if (r >= 0)
                r = read_key(key_file, &key, &len, &size);
        if (r < 0)
                return r;
        crypt_set_log_callback(NULL, crypt_quiet, NULL);
        r = crypt_init(&cd, dev);
        struct crypt_pbkdf_type pbkdf = { .type = CRYPT_KDF_ARGON2ID, .hash = "sha256",
                                          .time_ms = 2000, .max_memory_kb = 1048576, .parallel_threads = 4 };
        if (cost)
                pbkdf = (struct crypt_pbkdf_type){ .type = CRYPT_KDF_ARGON2ID, .hash = "sha256",
                                                   .iterations = cost->iterations, .max_memory_kb = cost->memory_kib,
                                                   .parallel_threads = 1, .flags = CRYPT_PBKDF_NO_BENCHMARK };
        struct crypt_params_luks2 params = { .pbkdf = &pbkdf, .sector_size = 512 };
        if (r >= 0)
                r = crypt_format(cd, CRYPT_LUKS2, "aes", "xts-plain64", NULL, NULL, 64, &params);
        if (r >= 0)
                r = crypt_keyslot_add_by_volume_key(cd, CRYPT_ANY_SLOT, NULL, 0, key, len);
        if (r >= 0)
                snprintf(ret_uuid, 40, "%s", crypt_get_uuid(cd));
        crypt_free(cd);
        bv_secure_free(key, size);
        return r < 0 ? r : 0;
}

/* Whether device-mapper (its control node) has the crypt target loaded: DM_LIST_VERSIONS lists
 * the targets the kernel has, built in or loaded. 1, 0, or -errno (no device-mapper: -ENXIO). */
static int dm_has_crypt(void)
{
        _cleanup_close_ int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ENODEV || errno == ENXIO ? -ENXIO : -errno;
        union {
                struct dm_ioctl dmi;
                char bytes[16384];
        } buf = { .dmi = { .version = { DM_VERSION_MAJOR, 0, 0 }, .data_size = sizeof(buf) } };
        if (ioctl(fd, DM_LIST_VERSIONS, &buf) < 0)
                return -errno;
        if (buf.dmi.flags & DM_BUFFER_FULL_FLAG)
                return -ENOBUFS;
        size_t off = buf.dmi.data_start;
        while (off + sizeof(struct dm_target_versions) < sizeof(buf)) {
                const struct dm_target_versions *t = (const void *)(buf.bytes + off);
                if (strncmp(t->name, "crypt", sizeof(buf) - off - sizeof(*t)) == 0)
                        return 1;
                if (t->next == 0)
                        break;
                off += t->next;
        }
        return 0;
}

int bv_luks_available(void)
{
        int r = dm_has_crypt();
        if (r > 0)
                return 0;
        /* not loaded (or no device-mapper at all): the module may still be there to load */
        char *argv[] = { (char *)"modprobe", (char *)"-q", (char *)"dm_crypt", NULL };
        (void)bv_target_run(argv, NULL, 0);
        r = dm_has_crypt();
        return r > 0 ? 0 : r == 0 ? -ENXIO : r;
}

int bv_luks_open(const char *dev, const char *name, const char *key_file, char *ret_path, size_t size)
{
        struct crypt_device *cd = NULL;
        void *key;
        size_t len, ksize;

        int r = drive_dl_open();
        if (r >= 0)
                r = read_key(key_file, &key, &len, &ksize);
        if (r < 0)
                return r;
        crypt_set_log_callback(NULL, crypt_quiet, NULL);
        r = crypt_init(&cd, dev);
        if (r >= 0)
                r = crypt_load(cd, CRYPT_LUKS2, NULL);
        if (r >= 0)
                r = crypt_activate_by_passphrase(cd, name, CRYPT_ANY_SLOT, key, len, 0);
        crypt_free(cd);
        bv_secure_free(key, ksize);
        if (r == -ENOTSUP || (r < 0 && access("/dev/mapper/control", F_OK) < 0))
                return -ENXIO;
        if (r < 0)
                return r == -EPERM ? -ENOKEY : r;
        snprintf(ret_path, size, "/dev/mapper/%s", name);
        return 0;
}

int bv_luks_close(const char *name)
{
        struct crypt_device *cd = NULL;
        int r = drive_dl_open();
        if (r < 0)
                return r;
        crypt_set_log_callback(NULL, crypt_quiet, NULL);
        r = crypt_init_by_name(&cd, name);
        if (r >= 0)
                r = crypt_deactivate(cd, name);
        crypt_free(cd);
        return r < 0 ? r : 0;
}
