/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkvault files: the filesystems no library reads in-process here (XFS, btrfs, FAT, and LVM's
 * logical volumes), through libguestfs: each snapshot is exported read-only by a private serve
 * (nbdkit, our child, on a socket in a 0700 directory), and one appliance (libguestfs's small VM,
 * whose kernel has the drivers) reads them all for the whole command. Under TCG it boots in
 * about a minute, so it is booted once, only when such a filesystem is opened, and says so.
 *
 * Every filesystem is mounted read-only at its own mountpoint ("/bvN"); paths are resolved here
 * component by component, symbolic links followed inside the filesystem, so that nothing in it
 * can name a file of another. A node is an index into this backend's table of paths, with the
 * lstat of each kept as a readdir fetched it (lstatnslist: one round trip a directory). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "guestfs-dl.h" /* libguestfs loaded on first use: every call goes through it */
#include "serve.h"
#include "timeutil.h"

#define MAX_DRIVES 4
#define READ_PIECE (2u << 20) /* under GUESTFS_MESSAGE_MAX (4 MiB) */

typedef struct Drive {
        FilesDisk *disk;
        ServeOptions serve;
        pid_t pid;
        char dev[64]; /* "/dev/sda" in the appliance */
} Drive;

typedef struct Appliance {
        guestfs_h *g;
        Drive drives[MAX_DRIVES];
        size_t n;
        bool launched, failed, alone; /* alone: holds a disk no other may join */
        unsigned mounts;
} Appliance;

static struct {
        const char *repo_path;
        const SecretArgs *sargs;
        const BvSecret *secret;
        Appliance apps[MAX_DRIVES];
        size_t n;
} G;

void files_guestfs_setup(const char *repo_path, const SecretArgs *sargs, const BvSecret *secret)
{
        G.repo_path = repo_path;
        G.sargs = sargs;
        G.secret = secret;
}

/* Whether one kernel cannot hold d beside another snapshot of the same disk: LVM would take the
 * physical volumes for duplicates, btrfs the filesystems for devices of one (same fsid). XFS
 * mounts a second copy with nouuid. */
static bool disk_alone(const FilesDisk *d)
{
        for (size_t i = 0; i < d->n_table; i++)
                if (files_is_lvm(d->parts[i].fstype) || (d->parts[i].fstype && strcmp(d->parts[i].fstype, "btrfs") == 0))
                        return true;
        return false;
}

/* The disks of a command (diff's two snapshots) share an appliance, one boot, but for two that
 * disk_alone says one kernel cannot hold together: then one appliance each. */
int files_guestfs_register(FilesDisk *d)
{
        bool alone = disk_alone(d);
        Appliance *a = NULL;

        for (size_t i = 0; i < G.n && !a; i++)
                if (!G.apps[i].launched && !G.apps[i].failed && G.apps[i].n < MAX_DRIVES && !(alone && G.apps[i].alone))
                        a = &G.apps[i];
        if (!a && G.n == ELEMENTSOF(G.apps)) {
                log_error("cannot read snapshot %.8s: too many snapshots for the libguestfs appliance", d->snap->id);
                return EXIT_ERROR;
        }
        if (!a)
                a = &G.apps[G.n++];
        a->alone |= alone;
        a->drives[a->n] = (Drive){ .disk = d, .pid = -1 };
        d->drive = (int)((size_t)(a - G.apps) * MAX_DRIVES + a->n++);
        return EXIT_OK;
}

static Appliance *app_of(const FilesDisk *d)
{
        return d->drive < 0 ? NULL : &G.apps[d->drive / MAX_DRIVES];
}

static Drive *drive_of(const FilesDisk *d)
{
        return &app_of(d)->drives[d->drive % MAX_DRIVES];
}

/* libguestfs's own words for its last error, without a trailing newline. */
static const char *app_error(Appliance *a)
{
        const char *e = a->g ? guestfs_last_error(a->g) : NULL;

        return e ? e : "unknown error";
}

static int app_servers(Appliance *a)
{
        for (size_t i = 0; i < a->n; i++) {
                Drive *v = &a->drives[i];
                v->serve = (ServeOptions){ .uri_for = "libguestfs" };
                int r = serve_private_start(&v->serve, G.repo_path, G.sargs, G.secret, v->disk->snap->id, &v->pid);
                if (r != EXIT_OK)
                        return r;
        }
        return EXIT_OK;
}

static int app_drives(Appliance *a)
{
        for (size_t i = 0; i < a->n; i++) {
                char server[PATH_MAX + 32];
                char *servers[] = { server, NULL };
                snprintf(server, sizeof(server), "unix:%s", a->drives[i].serve.sock);
                if (guestfs_add_drive_opts(a->g, "", GUESTFS_ADD_DRIVE_OPTS_FORMAT, "raw",
                                           GUESTFS_ADD_DRIVE_OPTS_PROTOCOL, "nbd", GUESTFS_ADD_DRIVE_OPTS_SERVER,
                                           servers, GUESTFS_ADD_DRIVE_OPTS_READONLY, 1, -1) < 0) {
                        log_error("libguestfs refused snapshot %.8s: %s", a->drives[i].disk->snap->id, app_error(a));
                        return EXIT_ERROR;
                }
        }
        return EXIT_OK;
}

/* Boots d's appliance, once: why says what for ("the xfs filesystem of p2"). Reports; returns an
 * exit code. */
static int app_start(FilesDisk *d, const char *why)
{
        Appliance *a = app_of(d);
        int r;

        if (!a) {
                log_error("cannot read snapshot %.8s through libguestfs (internal: not registered)", d->snap->id);
                return EXIT_ERROR;
        }
        if (a->launched)
                return EXIT_OK;
        if (a->failed)
                return EXIT_ERROR;
        a->failed = true;
        r = guestfs_dl_open();
        if (r < 0)
                return log_error_errno(r, "cannot read snapshot %.8s through libguestfs", d->snap->id);
        r = app_servers(a);
        if (r != EXIT_OK)
                return r;
        a->g = guestfs_create();
        if (!a->g)
                return log_error_errno(-errno, "cannot create a libguestfs handle");
        guestfs_set_error_handler(a->g, NULL, NULL);
        if (!getenv("LIBGUESTFS_BACKEND") && guestfs_set_backend(a->g, "direct") < 0)
                log_warning("libguestfs: %s", app_error(a));
        r = app_drives(a);
        if (r != EXIT_OK)
                return r;
        log_info("starting the libguestfs appliance (a small virtual machine whose kernel reads XFS, btrfs, FAT and "
                 "LVM) for %s of snapshot %.8s: about a minute without KVM, once for this command", why,
                 d->snap->id);
        uint64_t t0 = bv_now_monotonic_ns();
        if (guestfs_launch(a->g) < 0) {
                const char *e = app_error(a);
                log_error("the libguestfs appliance did not start: %.*s (LIBGUESTFS_DEBUG=1 shows its boot)",
                          (int)strcspn(e, "\n"), e);
                return EXIT_ERROR;
        }
        log_info("the appliance started in %.1f s", (double)(bv_now_monotonic_ns() - t0) / 1e9);
        char **devs = guestfs_list_devices(a->g);
        for (size_t i = 0; devs && i < a->n && devs[i]; i++)
                snprintf(a->drives[i].dev, sizeof(a->drives[i].dev), "%s", devs[i]);
        for (size_t i = 0; devs && devs[i]; i++)
                free(devs[i]);
        free(devs);
        if (!a->drives[a->n - 1].dev[0]) {
                log_error("the libguestfs appliance does not see snapshot %.8s's disk", d->snap->id);
                return EXIT_ERROR;
        }
        a->launched = true;
        a->failed = false;
        return EXIT_OK;
}

void files_guestfs_done(void)
{
        for (size_t i = 0; i < G.n; i++) {
                Appliance *a = &G.apps[i];
                if (a->g) {
                        (void)guestfs_shutdown(a->g);
                        guestfs_close(a->g);
                }
                for (size_t j = 0; j < a->n; j++)
                        if (a->drives[j].pid > 0)
                                serve_private_stop(&a->drives[j].serve, a->drives[j].pid);
        }
        G = (typeof(G)){};
}

typedef struct GfsFs {
        guestfs_h *g;
        char error[512]; /* libguestfs's words for the last error */
        char root[32];   /* its mountpoint in the appliance */
        char **paths;    /* node -> path inside the filesystem ("/", "/etc") */
        BvFsStat *stats;
        bool *have;      /* stats[node] is known */
        size_t n, cap;
} GfsFs;

static GfsFs *gfs_of(void *fs)
{
        return fs;
}

/* The last libguestfs error as -errno, kept in fs's words. An I/O error is the snapshot's: the
 * appliance's kernel read the export, whose plugin fails the read of a damaged or missing chunk
 * with EIO (serve's log names its offset); where, libguestfs does not say. */
static int gfs_err(GfsFs *f)
{
        int e = guestfs_last_errno(f->g);

        if (e == EIO) {
                snprintf(f->error, sizeof(f->error), "the appliance's read failed with an I/O error");
                return -EBADMSG;
        }
        snprintf(f->error, sizeof(f->error), "%s", app_error(&(Appliance){ .g = f->g }));
        if (e == ENOENT || e == ENOTDIR || e == ELOOP || e == EACCES || e == EISDIR || e == ENOMEM)
                return -e;
        return -EIO;
}

static char *gfs_full(GfsFs *f, const char *path)
{
        char *s;

        return asprintf(&s, "%s%s", f->root, strcmp(path, "/") == 0 ? "" : path) < 0 ? NULL : s;
}

static void stat_from(BvFsStat *st, const struct guestfs_statns *s)
{
        *st = (BvFsStat){ .ino = (uint64_t)s->st_ino, .mode = (uint32_t)s->st_mode, .uid = (uint32_t)s->st_uid,
                           .gid = (uint32_t)s->st_gid, .nlink = (uint32_t)s->st_nlink, .size = (uint64_t)s->st_size,
                           .atime = s->st_atime_sec, .mtime = s->st_mtime_sec, .ctime = s->st_ctime_sec,
                           .atime_ns = (uint32_t)s->st_atime_nsec, .mtime_ns = (uint32_t)s->st_mtime_nsec,
                           .ctime_ns = (uint32_t)s->st_ctime_nsec };
}

/* A node for path (taken), with its stat when st. */
static int node_add(GfsFs *f, char *path, const BvFsStat *st, uint64_t *ret)
{
        if (f->n == f->cap) {
                size_t cap = f->cap ? 2 * f->cap : 64;
                char **p = realloc(f->paths, cap * sizeof(*p));
                if (p)
                        f->paths = p;
                BvFsStat *s = p ? realloc(f->stats, cap * sizeof(*s)) : NULL;
                if (s)
                        f->stats = s;
                bool *h = s ? realloc(f->have, cap * sizeof(*h)) : NULL;
                if (!h) {
                        free(path);
                        return -ENOMEM;
                }
                f->have = h;
                f->cap = cap;
        }
        f->paths[f->n] = path;
        f->have[f->n] = st != NULL;
        if (st)
                f->stats[f->n] = *st;
        *ret = f->n++;
        return 0;
}

static int gfs_lstat(GfsFs *f, const char *path, BvFsStat *ret)
{
        _cleanup_free_ char *full = gfs_full(f, path);
        struct guestfs_statns *s = full ? guestfs_lstatns(f->g, full) : NULL;

        if (!full)
                return -ENOMEM;
        if (!s)
                return gfs_err(f);
        stat_from(ret, s);
        guestfs_free_statns(s);
        return 0;
}

static int gfs_readlink_path(GfsFs *f, const char *path, char **ret)
{
        _cleanup_free_ char *full = gfs_full(f, path);

        if (!full)
                return -ENOMEM;
        *ret = guestfs_readlink(f->g, full);
        return *ret ? 0 : gfs_err(f);
}

/* path resolved from the root a component at a time: ".." never above the root, a symbolic link
 * read and its target resolved in this filesystem (an absolute one from its root). */
static int gfs_lookup(void *fs, const char *path, bool follow, uint64_t *ret)
{
        GfsFs *f = gfs_of(fs);
        _cleanup_free_ char *cur = strdup(""), *todo = strdup(path);
        BvFsStat st;
        unsigned links = 0;
        int r = cur && todo ? gfs_lstat(f, "/", &st) : -ENOMEM;

        while (r >= 0 && todo[0]) {
                char *rest = todo + strspn(todo, "/"), *end = rest + strcspn(rest, "/");
                size_t len = (size_t)(end - rest);
                bool last = end[strspn(end, "/")] == 0;
                if (len == 0)
                        break;
                if ((len == 1 && rest[0] == '.') || (len == 2 && strncmp(rest, "..", 2) == 0)) {
                        if (len == 2 && strrchr(cur, '/'))
                                *strrchr(cur, '/') = 0;
                        memmove(todo, end, strlen(end) + 1);
                        r = gfs_lstat(f, cur[0] ? cur : "/", &st);
                        continue;
                }
                if (!S_ISDIR(st.mode))
                        return -ENOTDIR;
                _cleanup_free_ char *next = NULL;
                if (asprintf(&next, "%s/%.*s", cur, (int)len, rest) < 0)
                        return -ENOMEM;
                r = gfs_lstat(f, next, &st);
                if (r < 0)
                        return r;
                memmove(todo, end, strlen(end) + 1);
                if (S_ISLNK(st.mode) && (!last || follow)) {
                        _cleanup_free_ char *target = NULL;
                        char *more;
                        if (++links > 40)
                                return -ELOOP;
                        r = gfs_readlink_path(f, next, &target);
                        if (r < 0)
                                return r;
                        if (asprintf(&more, "%s/%s", target, todo) < 0)
                                return -ENOMEM;
                        free(todo);
                        todo = more;
                        if (target[0] == '/')
                                cur[0] = 0;
                        r = gfs_lstat(f, cur[0] ? cur : "/", &st);
                        continue;
                }
                free(cur);
                cur = TAKE_PTR(next);
        }
        if (r < 0)
                return r;
        char *node = strdup(cur[0] ? cur : "/");
        return node ? node_add(f, node, &st, ret) : -ENOMEM;
}

static int gfs_stat(void *fs, uint64_t node, BvFsStat *ret)
{
        GfsFs *f = gfs_of(fs);

        if (!f->have[node]) {
                int r = gfs_lstat(f, f->paths[node], &f->stats[node]);
                if (r < 0)
                        return r;
                f->have[node] = true;
        }
        *ret = f->stats[node];
        return 0;
}

static int gfs_readlink(void *fs, uint64_t node, char **ret)
{
        return gfs_readlink_path(gfs_of(fs), gfs_of(fs)->paths[node], ret);
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* names' lstats, a batch at a time (a reply is at most 4 MiB), into the new nodes of v. */
static int readdir_stats(GfsFs *f, const char *dir, const char *full, char **names, size_t n, BvFsEntry *v)
{
        for (size_t i = 0; i < n;) {
                size_t k = MIN(n - i, (size_t)4096);
                char *saved = names[i + k];
                names[i + k] = NULL;
                struct guestfs_statns_list *l = guestfs_lstatnslist(f->g, full, names + i);
                names[i + k] = saved;
                if (!l)
                        return gfs_err(f);
                for (size_t j = 0; j < k && j < l->len; j++, i++) {
                        BvFsStat st;
                        char *path = files_join(dir, names[i]);
                        stat_from(&st, &l->val[j]);
                        int r = path ? node_add(f, path, &st, &v[i].ino) : -ENOMEM;
                        if (r < 0) {
                                guestfs_free_statns_list(l);
                                return r;
                        }
                        v[i].name = names[i];
                        names[i] = NULL;
                }
                guestfs_free_statns_list(l);
        }
        return 0;
}

static int gfs_readdir(void *fs, uint64_t node, BvFsEntry **ret, size_t *ret_n)
{
        GfsFs *f = gfs_of(fs);
        _cleanup_free_ char *full = gfs_full(f, f->paths[node]);
        char **names = full ? guestfs_ls(f->g, full) : NULL;
        size_t n = 0;

        if (!full)
                return -ENOMEM;
        if (!names)
                return gfs_err(f);
        while (names[n])
                n++;
        qsort(names, n, sizeof(*names), name_cmp);
        BvFsEntry *v = calloc(n ? n : 1, sizeof(*v));
        int r = v ? readdir_stats(f, f->paths[node], full, names, n, v) : -ENOMEM;
        strv_free(names);
        if (r < 0) {
                bv_fs_entries_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

#define HOLE_BLOCK 65536u /* the zeros kept as holes: runs of whole blocks of this size */

static bool all_zero(const char *buf, size_t len)
{
        return len == 0 || (buf[0] == 0 && memcmp(buf, buf + 1, len - 1) == 0);
}

/* A piece read to sink, its runs of zero blocks as holes (buf NULL), as ext's reader gives them. */
static int sink_piece(BvFsSink sink, void *userdata, const char *buf, size_t len, uint64_t off)
{
        size_t start = 0;

        while (start < len) {
                size_t k = MIN(HOLE_BLOCK, len - start), end = start + k;
                bool zero = all_zero(buf + start, k);
                while (end < len && all_zero(buf + end, MIN(HOLE_BLOCK, len - end)) == zero)
                        end += MIN(HOLE_BLOCK, len - end);
                int r = sink(zero ? NULL : buf + start, end - start, off + start, userdata);
                if (r < 0)
                        return r;
                start = end;
        }
        return 0;
}

static int gfs_read(void *fs, uint64_t node, BvFsSink sink, void *userdata)
{
        GfsFs *f = gfs_of(fs);
        _cleanup_free_ char *full = gfs_full(f, f->paths[node]);

        if (!full)
                return -ENOMEM;
        for (uint64_t off = 0;;) {
                size_t got;
                char *buf = guestfs_pread(f->g, full, (int)READ_PIECE, (int64_t)off, &got);
                if (!buf)
                        return gfs_err(f);
                int r = sink_piece(sink, userdata, buf, got, off);
                free(buf);
                if (r < 0 || got == 0)
                        return r;
                off += got;
        }
}

static void gfs_close(void *fs)
{
        GfsFs *f = gfs_of(fs);

        for (size_t i = 0; i < f->n; i++)
                free(f->paths[i]);
        free(f->paths);
        free(f->stats);
        free(f->have);
        free(f);
}

static uint64_t gfs_bad_offset(const void *fs _unused_)
{
        return UINT64_MAX; /* libguestfs does not say where its kernel's read failed */
}

static const char *gfs_error_text(const void *fs)
{
        const GfsFs *f = fs;

        return f->error[0] ? f->error : NULL;
}

static const BvFsOps gfs_ops = {
        .library = "libguestfs",
        .bad_offset = gfs_bad_offset,
        .error_text = gfs_error_text,
        .lookup = gfs_lookup,
        .stat = gfs_stat,
        .readlink = gfs_readlink,
        .readdir = gfs_readdir,
        .read = gfs_read,
        .close = gfs_close,
};

/* The device of partition i of d in the appliance: "/dev/sdb2", the disk "/dev/sdb", or a
 * logical volume "/dev/vg/lv". */
static void part_device(FilesDisk *d, size_t i, char *buf, size_t size)
{
        const BvFilesPart *p = &d->parts[i];

        if (i >= d->n_table)
                snprintf(buf, size, "/dev/%s", p->partname);
        else if (p->number)
                snprintf(buf, size, "%s%u", drive_of(d)->dev, p->number);
        else
                snprintf(buf, size, "%s", drive_of(d)->dev);
}

int files_guestfs_open(FilesDisk *d, size_t i, BvFs **ret)
{
        const BvFilesPart *p = &d->parts[i];
        char name[96], why[160], dev[128];
        int r;

        files_part_name(d, i, name, sizeof(name));
        snprintf(why, sizeof(why), "the %s filesystem of %s", p->fstype, name);
        r = app_start(d, why);
        if (r != EXIT_OK)
                return r;
        Appliance *a = app_of(d);
        GfsFs *f = calloc(1, sizeof(*f));
        if (!f)
                return log_error_errno(-ENOMEM, "cannot open %s", why);
        f->g = a->g;
        snprintf(f->root, sizeof(f->root), "/bv%u", a->mounts++);
        part_device(d, i, dev, sizeof(dev));
        /* nouuid: diff's two snapshots of one XFS are two filesystems with one UUID */
        bool xfs = strcmp(p->fstype, "xfs") == 0;
        if (guestfs_mkmountpoint(a->g, f->root) < 0 ||
            (xfs ? guestfs_mount_options(a->g, "ro,nouuid", dev, f->root) : guestfs_mount_ro(a->g, dev, f->root)) < 0) {
                int e = guestfs_last_errno(a->g);
                log_error("cannot mount %s of snapshot %.8s in the appliance: %s", why, d->snap->id, app_error(a));
                free(f);
                return e == EIO ? EXIT_DAMAGE : EXIT_ERROR;
        }
        if (bv_fs_wrap(&gfs_ops, f, ret) < 0) {
                free(f);
                return log_error_errno(-ENOMEM, "cannot open %s", why);
        }
        return EXIT_OK;
}

/* Appends the logical volumes the appliance sees (all on d: it is its appliance's only disk with
 * LVM) to d->parts, named "vg/lv", with their filesystem and label. */
int files_guestfs_list_lvs(FilesDisk *d)
{
        if (d->lvs_listed)
                return EXIT_OK;
        int r = app_start(d, "the LVM logical volumes");
        if (r != EXIT_OK)
                return r;
        Appliance *a = app_of(d);
        if (!a) /* app_start found it: no path comes here without */
                return EXIT_ERROR;
        char **lvs = guestfs_lvs(a->g);
        size_t n = 0;
        if (!lvs) {
                log_error("cannot list the LVM logical volumes of snapshot %.8s: %s", d->snap->id, app_error(a));
                return EXIT_ERROR;
        }
        while (lvs[n])
                n++;
        BvFilesPart *parts = realloc(d->parts, (d->n_parts + n + 1) * sizeof(*parts));
        BvFs **fs = parts ? realloc(d->fs, (d->n_parts + n + 1) * sizeof(*fs)) : NULL;
        if (parts)
                d->parts = parts;
        if (fs)
                d->fs = fs;
        for (size_t i = 0; fs && i < n; i++) {
                BvFilesPart *p = &d->parts[d->n_parts];
                const char *lv = strncmp(lvs[i], "/dev/", 5) == 0 ? lvs[i] + 5 : lvs[i];
                *p = (BvFilesPart){ .fstype = NULL };
                snprintf(p->partname, sizeof(p->partname), "%s", lv);
                _cleanup_free_ char *type = guestfs_vfs_type(a->g, lvs[i]), *label = guestfs_vfs_label(a->g, lvs[i]);
                int64_t size = guestfs_blockdev_getsize64(a->g, lvs[i]);
                p->fstype = type ? files_fstype_name(type) : NULL;
                snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
                p->size = size > 0 ? (uint64_t)size : 0;
                d->fs[d->n_parts++] = NULL;
        }
        strv_free(lvs);
        if (!fs)
                return log_error_errno(-ENOMEM, "cannot list the LVM logical volumes of snapshot %.8s", d->snap->id);
        d->lvs_listed = true;
        return EXIT_OK;
}
