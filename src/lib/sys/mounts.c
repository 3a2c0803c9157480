/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <dirent.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "mounts.h"
#include "process.h"

/* Undoes the octal escapes (\040 ...) of a mountinfo field in place. */
static void mountinfo_unescape(char *s)
{
        char *w = s;

        for (const char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] && r[3]) {
                        *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                        r += 3;
                } else
                        *w++ = *r;
        }
        *w = '\0';
}

bool bv_is_mountpoint(const char *path)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[8192], mp[PATH_MAX];

        if (!f)
                return false;
        while (fgets(line, sizeof(line), f)) {
                /* id parent major:minor root mountpoint ... */
                if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
                        continue;
                mountinfo_unescape(mp);
                if (strcmp(mp, path) == 0)
                        return true;
        }
        return false;
}

#define MAX_STACKED 256

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR, closedir)
#define _cleanup_closedir_ _cleanup_(closedirp)

typedef struct DevSet {
        dev_t devs[MAX_STACKED];
        char names[MAX_STACKED][64]; /* the kernel's name of each ("loop0p1", "dm-3") */
        size_t n;
} DevSet;

static void devset_add_sysfs(DevSet *set, const char *sysdir)
{
        char p[PATH_MAX], buf[64];
        unsigned maj, min;
        int fd;
        ssize_t n;

        if (set->n >= MAX_STACKED || snprintf(p, sizeof(p), "%s/dev", sysdir) >= (int)sizeof(p))
                return;
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        buf[n] = '\0';
        if (sscanf(buf, "%u:%u", &maj, &min) != 2)
                return;
        dev_t d = makedev(maj, min);
        for (size_t i = 0; i < set->n; i++)
                if (set->devs[i] == d)
                        return;
        const char *base = strrchr(sysdir, '/');
        snprintf(set->names[set->n], sizeof(set->names[0]), "%s", base ? base + 1 : sysdir);
        set->devs[set->n++] = d;
}

/* dev, then for each device in the set its partitions and its holders. */
static void devset_fill(DevSet *set, dev_t dev)
{
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(dev), minor(dev));
        char *real = realpath(p, NULL);
        if (real) {
                devset_add_sysfs(set, real);
                free(real);
        }
        if (set->n == 0) /* no sysfs entry (no /sys) or no dev file: take dev as it is */
                set->devs[set->n++] = dev;
        for (size_t i = 0; i < set->n; i++) {
                char dir[PATH_MAX];
                snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(set->devs[i]), minor(set->devs[i]));
                if (!realpath(p, dir))
                        continue;
                _cleanup_closedir_ DIR *d = opendir(dir);
                struct dirent *e;
                while (d && (e = readdir(d))) {
                        char sub[PATH_MAX], part[PATH_MAX];
                        struct stat st;
                        if (e->d_name[0] == '.' ||
                            snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) >= (int)sizeof(sub) ||
                            snprintf(part, sizeof(part), "%s/partition", sub) >= (int)sizeof(part))
                                continue;
                        if (stat(part, &st) == 0)
                                devset_add_sysfs(set, sub);
                }
                _cleanup_closedir_ DIR *h =
                        snprintf(p, sizeof(p), "%s/holders", dir) < (int)sizeof(p) ? opendir(p) : NULL;
                while (h && (e = readdir(h))) {
                        char sub[PATH_MAX];
                        if (e->d_name[0] != '.' &&
                            snprintf(sub, sizeof(sub), "/sys/class/block/%s", e->d_name) < (int)sizeof(sub))
                                devset_add_sysfs(set, sub);
                }
        }
}

/* The index in set of the device a mountinfo line's filesystem lives on, or -1. */
static ssize_t mount_device(const DevSet *set, unsigned maj, unsigned min, const char *source)
{
        struct stat st;
        dev_t d = makedev(maj, min);

        for (size_t i = 0; i < set->n; i++)
                if (set->devs[i] == d)
                        return (ssize_t)i;
        /* btrfs reports an anonymous device number: its source names the device */
        if (strncmp(source, "/dev/", 5) != 0 || stat(source, &st) < 0 || !S_ISBLK(st.st_mode))
                return -1;
        for (size_t i = 0; i < set->n; i++)
                if (set->devs[i] == st.st_rdev)
                        return (ssize_t)i;
        return -1;
}

/* The kernel's name of device i of set; without /sys, the name the mount's source resolves to
 * (/dev/mapper/x: "dm-3"). */
static void mount_device_name(const DevSet *set, size_t i, const char *source, char *buf, size_t size)
{
        _cleanup_free_ char *real = NULL;
        const char *name = set->names[i];

        if (!*name && strncmp(source, "/dev/", 5) == 0 && (real = realpath(source, NULL)))
                name = strrchr(real, '/') + 1;
        snprintf(buf, size, "%s", *name ? name : "?");
}

/* The first mount in the mountinfo file path of a device of set (read-write ones only when
 * rw_only): 1 with its mountpoint and its device's name, 0 when none, -errno. */
static int mountinfo_find(const DevSet *set, const char *path, bool rw_only, char *ret_mountpoint,
                          size_t mountpoint_size, char *ret_device, size_t device_size)
{
        char line[8192], mp[PATH_MAX], opts[1024], source[PATH_MAX];
        unsigned maj, min;

        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                /* id parent major:minor root mountpoint options [optional...] - fstype source super */
                const char *dash = strstr(line, " - ");
                if (!dash || sscanf(line, "%*s %*s %u:%u %*s %4095s %1023s", &maj, &min, mp, opts) != 4 ||
                    sscanf(dash, " - %*s %4095s", source) != 1)
                        continue;
                mountinfo_unescape(source);
                ssize_t i = mount_device(set, maj, min, source);
                bool rw = strncmp(opts, "rw", 2) == 0 && (opts[2] == ',' || opts[2] == '\0');
                if (i < 0 || (rw_only && !rw))
                        continue;
                mountinfo_unescape(mp);
                snprintf(ret_mountpoint, mountpoint_size, "%s", mp);
                mount_device_name(set, (size_t)i, source, ret_device, device_size);
                return 1;
        }
        return 0;
}

int bv_blockdev_mounted_rw(dev_t dev, char *ret_mountpoint, size_t mountpoint_size, char *ret_device,
                           size_t device_size)
{
        _cleanup_free_ DevSet *set = calloc(1, sizeof(DevSet));

        if (!set)
                return -ENOMEM;
        devset_fill(set, dev);
        return mountinfo_find(set, "/proc/self/mountinfo", true, ret_mountpoint, mountpoint_size, ret_device,
                              device_size);
}

/* A device of set stacked on the others (device-mapper, md: neither the device nor one of its
 * partitions): its index, or -1. */
static ssize_t devset_stacked(const DevSet *set)
{
        char p[PATH_MAX];

        for (size_t i = 1; i < set->n; i++) {
                if (!set->names[i][0])
                        continue;
                snprintf(p, sizeof(p), "/sys/class/block/%s/partition", set->names[i]);
                if (access(p, F_OK) < 0)
                        return (ssize_t)i;
        }
        return -1;
}

/* The program pid runs ("?" when gone). */
static void process_comm(pid_t pid, char *buf, size_t size)
{
        char p[64];

        snprintf(p, sizeof(p), "/proc/%d/comm", (int)pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : bv_read_all(fd, buf, size - 1);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (!*buf)
                snprintf(buf, size, "?");
}

/* The next process of /proc (its pid, or 0 at the end). */
static pid_t proc_next(DIR *d)
{
        struct dirent *e;
        char *end;

        while ((e = readdir(d))) {
                long pid = strtol(e->d_name, &end, 10);
                if (!*end && pid > 0)
                        return (pid_t)pid;
        }
        return 0;
}

#define MAX_NAMESPACES 1024

/* A mount of a device of set in a mount namespace other than ours (each one looked at once,
 * through its first process in /proc): 1 with its mountpoint there, the device's name and that
 * process, else 0. */
static int mount_elsewhere(const DevSet *set, char *mp, size_t mp_size, char *name, size_t name_size,
                           pid_t *ret_pid)
{
        _cleanup_free_ ino_t *seen = calloc(MAX_NAMESPACES, sizeof(ino_t));
        struct stat self, st;
        size_t n = 0;
        char p[64];
        pid_t pid;

        if (!seen)
                return -ENOMEM;
        if (stat("/proc/self/ns/mnt", &self) < 0)
                return -errno;
        _cleanup_closedir_ DIR *d = opendir("/proc");
        if (!d)
                return -errno;
        while ((pid = proc_next(d)) > 0) {
                snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
                if (stat(p, &st) < 0 || st.st_ino == self.st_ino)
                        continue;
                size_t k = 0;
                while (k < n && seen[k] != st.st_ino)
                        k++;
                if (k < n)
                        continue;
                if (n < MAX_NAMESPACES)
                        seen[n++] = st.st_ino;
                snprintf(p, sizeof(p), "/proc/%d/mountinfo", (int)pid);
                if (mountinfo_find(set, p, false, mp, mp_size, name, name_size) > 0) {
                        *ret_pid = pid;
                        return 1;
                }
        }
        return 0;
}

/* A process other than ours with a device of set open: its pid, or 0. */
static pid_t process_opening(const DevSet *set)
{
        _cleanup_closedir_ DIR *d = opendir("/proc");
        char p[64], fdp[128];
        pid_t pid;

        while (d && (pid = proc_next(d)) > 0) {
                if (pid == getpid() || snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid) >= (int)sizeof(p))
                        continue;
                _cleanup_closedir_ DIR *fds = opendir(p);
                struct dirent *e;
                struct stat st;
                while (fds && (e = readdir(fds)))
                        if (e->d_name[0] != '.' &&
                            snprintf(fdp, sizeof(fdp), "%s/%s", p, e->d_name) < (int)sizeof(fdp) &&
                            stat(fdp, &st) == 0 && S_ISBLK(st.st_mode))
                                for (size_t i = 0; i < set->n; i++)
                                        if (st.st_rdev == set->devs[i])
                                                return pid;
        }
        return 0;
}

/* "mounted on MP", with the partition's name when the mount is of one (name is not set's first)
 * and where: "" here, else in whose namespace. */
static void describe_mount(const DevSet *set, const char *mp, const char *name, const char *where, char *buf,
                           size_t size)
{
        bool part = strcmp(name, set->names[0]) != 0;

        snprintf(buf, size, "mounted on %s%s%s%s%s", mp, part ? " (its " : "", part ? name : "", part ? ")" : "",
                 where);
}

int bv_blockdev_user(dev_t dev, char *buf, size_t size)
{
        _cleanup_free_ DevSet *set = calloc(1, sizeof(DevSet));
        char mp[PATH_MAX], name[64], comm[32], where[128];
        pid_t pid = 0;

        if (!set)
                return -ENOMEM;
        devset_fill(set, dev);
        int r = mountinfo_find(set, "/proc/self/mountinfo", false, mp, sizeof(mp), name, sizeof(name));
        if (r > 0)
                describe_mount(set, mp, name, "", buf, size);
        if (r != 0)
                return r;
        ssize_t i = devset_stacked(set);
        if (i > 0) {
                snprintf(buf, size, "held by %s", set->names[i]);
                return 1;
        }
        r = mount_elsewhere(set, mp, sizeof(mp), name, sizeof(name), &pid);
        if (r > 0) {
                process_comm(pid, comm, sizeof(comm));
                snprintf(where, sizeof(where), " in the mount namespace of process %d (%s), not in this one",
                         (int)pid, comm);
                describe_mount(set, mp, name, where, buf, size);
        }
        if (r != 0)
                return r;
        pid = process_opening(set);
        if (pid > 0) {
                process_comm(pid, comm, sizeof(comm));
                snprintf(buf, size, "open in process %d (%s)", (int)pid, comm);
                return 1;
        }
        return 0;
}

int bv_mount_readonly(const char *dev, const char *mountpoint, const char *fstype)
{
        const char *data = NULL;

        /* The device is read-only: a dirty journal must not be replayed. */
        if (strcmp(fstype, "ext4") == 0 || strcmp(fstype, "ext3") == 0)
                data = "noload";
        else if (strcmp(fstype, "xfs") == 0)
                data = "norecovery";
        if (mount(dev, mountpoint, fstype, MS_RDONLY | MS_NODEV | MS_NOSUID, data) < 0)
                return -errno;
        return 0;
}

int bv_loop_attach_readonly(const char *file, uint64_t offset, uint64_t size, char *ret_dev, size_t dev_size)
{
        char off_arg[32], size_arg[32], out[256];
        int r;

        snprintf(off_arg, sizeof(off_arg), "%" PRIu64, offset);
        snprintf(size_arg, sizeof(size_arg), "%" PRIu64, size);
        char *argv[] = { "losetup", "-r", "-f", "--show", "--offset", off_arg, size ? "--sizelimit" : (char *)file,
                         size ? size_arg : NULL, size ? (char *)file : NULL, NULL };
        r = bv_run(argv, out, sizeof(out));
        if (r != 0)
                return r;
        if (strncmp(out, "/dev/", 5) != 0 || strlen(out) >= dev_size)
                return -EBADMSG;
        strcpy(ret_dev, out);
        return 0;
}

bool bv_loop_backed_by(const char *dev, const char *file)
{
        const char *name = strrchr(dev, '/');
        char path[128], backing[PATH_MAX] = "";

        if (!name)
                return false;
        snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name + 1);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || bv_read_all(fd, backing, sizeof(backing) - 1) <= 0)
                return false;
        backing[strcspn(backing, "\n")] = '\0';
        return strcmp(backing, file) == 0;
}

int bv_loop_detach(const char *dev)
{
        _cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return errno == ENOENT || errno == ENXIO ? 0 : -errno;
        if (ioctl(fd, LOOP_CLR_FD, 0) < 0 && errno != ENXIO)
                return -errno;
        return 0;
}

bool bv_nbd_export_answers(const char *socket_path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char magic[8];

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return false;
        memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return false;
        return bv_read_all(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) && memcmp(magic, "NBDMAGIC", 8) == 0;
}

bool bv_nbd_kernel_has(void)
{
        char *argv[] = { "modprobe", "-q", "nbd", NULL };

        if (access("/sys/module/nbd", F_OK) == 0)
                return true;
        return bv_have_command("modprobe") && bv_run(argv, NULL, 0) == 0 && access("/sys/module/nbd", F_OK) == 0;
}

int bv_nbd_find_free(char *buf, size_t size)
{
        char path[64];

        for (int i = 0; i < 256; i++) {
                snprintf(path, sizeof(path), "/sys/block/nbd%d", i);
                if (access(path, F_OK) < 0)
                        break;
                snprintf(path, sizeof(path), "/sys/block/nbd%d/pid", i);
                if (access(path, F_OK) < 0) {
                        snprintf(buf, size, "/dev/nbd%d", i);
                        return 0;
                }
        }
        return -ENODEV;
}
