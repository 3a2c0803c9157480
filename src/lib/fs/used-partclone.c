/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Used blocks of XFS, btrfs, FAT and NTFS through Debian's partclone: `partclone.<fs> -D` maps
 * the filesystem's used blocks into a ddrescue domain map ("POS SIZE +" used, "?" free, hex)
 * without copying data. partclone reads a file or device from its start, so a partition inside a
 * disk or image is given to it as a read-only loop device over its range (losetup: root); a
 * filesystem on the whole source is given the source itself. The map is read back and its free
 * runs become the partition's.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "mounts.h"
#include "process.h"
#include "used.h"

#define DOMAIN_MAP_MAX (64u << 20)

int bv_fs_domain_parse(const char *text, size_t len, uint64_t base, uint64_t limit, BvFsUsedMap *map,
                       uint64_t *ret_covered)
{
        uint64_t covered = 0, pos_line = 0;
        bool status_seen = false;
        const char *p = text, *end = text + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                char line[128], st[8];
                unsigned long long pos, size;
                pos_line++;
                if (n >= sizeof(line))
                        return -EBADMSG;
                memcpy(line, p, n);
                line[n] = '\0';
                p += n + (nl ? 1 : 0);
                if (line[0] == '#' || line[strspn(line, " \t\r")] == '\0')
                        continue;
                if (!status_seen) { /* current_pos current_status */
                        if (sscanf(line, "%llx %7s", &pos, st) != 2)
                                return -EBADMSG;
                        status_seen = true;
                        continue;
                }
                if (sscanf(line, "%llx %llx %7s", &pos, &size, st) != 3 || pos != covered || size > limit - pos ||
                    (strcmp(st, "+") != 0 && strcmp(st, "?") != 0))
                        return -EBADMSG; /* in order, without gaps, inside the partition, + or ? */
                if (strcmp(st, "?") == 0) {
                        int r = bv_fs_used_add_free(map, base + pos, size);
                        if (r < 0)
                                return r;
                }
                covered = pos + size;
        }
        *ret_covered = covered;
        return 0;
}

/* partclone's name for libblkid's fstype, or NULL. */
static const char *partclone_tool(const char *fstype)
{
        static const char *const tools[][2] = {
                { "xfs", "partclone.xfs" }, { "btrfs", "partclone.btrfs" }, { "vfat", "partclone.fat" },
                { "ntfs", "partclone.ntfs" }, { "exfat", "partclone.exfat" },
        };
        for (size_t i = 0; fstype && i < ELEMENTSOF(tools); i++)
                if (strcmp(tools[i][0], fstype) == 0)
                        return tools[i][1];
        return NULL;
}

/* The last line of partclone's log with something in it, into why. */
static void log_tail(const char *log, const char *tool, int status, char *why, size_t why_size)
{
        _cleanup_free_ void *data = NULL;
        size_t len = 0;
        char last[128] = "";

        if (bv_read_file(AT_FDCWD, log, 1u << 20, &data, &len) >= 0 && len > 0) {
                char *s = data;
                s[len - 1] = '\0';
                for (char *line = strtok(s, "\r\n"); line; line = strtok(NULL, "\r\n"))
                        if (line[strspn(line, " ")])
                                snprintf(last, sizeof(last), "%s", line + strspn(line, " "));
        }
        snprintf(why, why_size, "%s failed (exit status %d)%s%s", tool, status, last[0] ? ": " : "", last);
}

/* XFS: is its log clean (xfs_logprint -t says "state: <CLEAN>")? A dirty log holds allocations
 * the free space btrees do not show yet. 1, 0 with why, or -errno. */
static int xfs_log_clean(const char *dev, char *why, size_t why_size)
{
        char *argv[] = { "xfs_logprint", "-t", (char *)dev, NULL };
        char buf[4096];
        int fd = -EBADF, clean = -1;
        size_t len = 0;

        pid_t pid = bv_spawn_piped(argv, &fd);
        if (pid < 0) {
                snprintf(why, why_size, "cannot run xfs_logprint to see whether its log is clean: %s",
                         strerror((int)-pid));
                return (int)pid;
        }
        while (len < sizeof(buf) - 1) { /* the state is in the first lines */
                ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
                buf[len] = '\0';
                if (strstr(buf, "state: <")) {
                        clean = strstr(buf, "state: <CLEAN>") != NULL;
                        break;
                }
        }
        safe_close(fd);
        kill(pid, SIGTERM); /* a dirty log's transactions are not needed */
        (void)bv_wait_exit(pid);
        if (clean != 1)
                snprintf(why, why_size, "%s", clean == 0 ? "its log needs recovery (not cleanly unmounted, or mounted)"
                                                         : "xfs_logprint did not say whether its log is clean");
        return clean == 1;
}

/* btrfs: a log tree (fsync'd data not yet in a commit) is replayed at mount; its blocks are not
 * in the committed extent tree partclone reads. 1 when the superblock has none, 0 with why. */
static int btrfs_no_log_tree(int fd, const BvFsPartition *p, char *why, size_t why_size)
{
        uint8_t sb[0x68];

        if (pread(fd, sb, sizeof(sb), (off_t)(p->start + 65536)) != (ssize_t)sizeof(sb) ||
            memcmp(sb + 0x40, "_BHRfS_M", 8) != 0) {
                snprintf(why, why_size, "cannot read its superblock");
                return 0;
        }
        for (size_t i = 0x60; i < 0x68; i++)
                if (sb[i]) {
                        snprintf(why, why_size, "its log tree needs replay (not cleanly unmounted, or mounted)");
                        return 0;
                }
        return 1;
}

/* Runs tool -D on dev into dir/map and reads it back. */
static int run_partclone(const char *tool, const char *dev, const char *dir, const BvFsPartition *p,
                         BvFsUsedMap *map, uint64_t *ret_covered, char *why, size_t why_size)
{
        char map_path[600], log_path[600];
        _cleanup_free_ void *text = NULL;
        size_t len;

        if (strcmp(p->fstype, "xfs") == 0) {
                int r = xfs_log_clean(dev, why, why_size);
                if (r <= 0)
                        return r < 0 ? r : -EOPNOTSUPP;
        }
        snprintf(map_path, sizeof(map_path), "%s/map", dir);
        snprintf(log_path, sizeof(log_path), "%s/log", dir);
        char *argv[] = { (char *)tool, "-D", "-q", "-s", (char *)dev, "-o", map_path, "-L", log_path, NULL };
        pid_t pid = bv_spawn(argv, log_path, true);
        if (pid < 0) {
                snprintf(why, why_size, "cannot run %s: %s", tool, strerror((int)-pid));
                return (int)pid;
        }
        int r = bv_wait_exit(pid);
        if (r != 0) {
                log_tail(log_path, tool, r, why, why_size);
                return r < 0 ? r : -EIO;
        }
        r = bv_read_file(AT_FDCWD, map_path, DOMAIN_MAP_MAX, &text, &len);
        if (r >= 0)
                r = bv_fs_domain_parse(text, len, p->start, p->size, map, ret_covered);
        if (r < 0)
                snprintf(why, why_size, "cannot read %s's domain map: %s", tool, strerror(-r));
        return r;
}

static void remove_dir(char *dir)
{
        char path[600];

        if (!dir[0])
                return;
        snprintf(path, sizeof(path), "%s/map", dir);
        (void)unlink(path);
        snprintf(path, sizeof(path), "%s/log", dir);
        (void)unlink(path);
        (void)rmdir(dir);
}

int bv_fs_used_partclone(int fd, const BvFsPartition *p, BvFsUsedMap *map, uint64_t *ret_covered, char *why,
                         size_t why_size)
{
        const char *tool = partclone_tool(p->fstype);
        char link[64], path[PATH_MAX], dev[64] = "";
        uint64_t size;
        int r;

        if (!tool || !bv_have_command(tool)) {
                snprintf(why, why_size, "%s is not installed (Debian's partclone)", tool ? tool : "partclone");
                return -EOPNOTSUPP;
        }
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n <= 0 || (r = bv_fd_size(fd, &size)) < 0) {
                snprintf(why, why_size, "cannot name the source for %s", tool);
                return -EOPNOTSUPP;
        }
        path[n] = '\0';
        if (strcmp(p->fstype, "btrfs") == 0 && !btrfs_no_log_tree(fd, p, why, why_size))
                return -EOPNOTSUPP;
        bool whole = p->start == 0 && p->size == size;
        if (!whole && geteuid() != 0) {
                snprintf(why, why_size, "%s reads a partition as a device of its own (a read-only loop "
                                        "device over its range: root)", tool);
                return -EOPNOTSUPP;
        }
        if (!whole && (r = bv_loop_attach_readonly(path, p->start, p->size, dev, sizeof(dev))) != 0) {
                snprintf(why, why_size, "cannot attach a read-only loop device over the partition (losetup: %s)",
                         r < 0 ? strerror(-r) : "failed");
                return r < 0 ? r : -EIO;
        }
        const char *tmp = getenv("TMPDIR");
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/blkvault-partclone.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                r = negative_errno();
                snprintf(why, why_size, "cannot make a directory for %s's map: %s", tool, strerror(-r));
                dir[0] = '\0';
        } else
                r = run_partclone(tool, whole ? path : dev, dir, p, map, ret_covered, why, why_size);
        remove_dir(dir);
        if (dev[0])
                (void)bv_loop_detach(dev);
        return r;
}
