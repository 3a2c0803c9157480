/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkvault files: list, print, copy out, find and compare files of a snapshot without root, each
 * filesystem by the reader files-table.c names for its type: in-process through the read path
 * (libext2fs, libntfs-3g over bv_image_pread), or libguestfs's appliance over a private serve
 * socket (files-guestfs.c: XFS, btrfs, FAT, LVM logical volumes). */
#include <errno.h>
#include <json-c/json.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "files.h"

static const char usage_text[] =
        "Usage: blkvault files REPO SNAPSHOT COMMAND [ARG]... [OPTIONS]\n\n"
        "Read files of SNAPSHOT's filesystems as any user who can read REPO and has its secret: no\n"
        "device, no mount, no root. ext2, ext3, ext4 and NTFS are read in-process; XFS, btrfs, FAT\n"
        "(vfat) and LVM logical volumes through libguestfs, whose appliance (a small VM) boots once a\n"
        "command: about a minute without KVM. PATH is /etc/hosts on a disk with one filesystem, else\n"
        "p1:/etc/hosts (the partition's number), LABEL:/etc/hosts (a filesystem label or GPT partition\n"
        "name) or VG/LV:/etc/hosts (an LVM logical volume). On NTFS, PATH:NAME is the named data\n"
        "stream NAME of PATH.\n\n"
        "  ls [PATH]                list a directory (mode, owner, size, mtime, name, link target);\n"
        "                           without PATH on a partitioned disk: the partitions\n"
        "  cat PATH                 write a file to standard output\n"
        "  get PATH... DEST         copy files and directories (recursively) to DEST, keeping modes,\n"
        "                           times and symbolic links, and owners when run as root\n"
        "  find [PATH]              print every path below PATH (default: the root)\n"
        "  diff SNAPSHOT2 [PATH]    files added (+), removed (-), changed (M: content, m: metadata\n"
        "                           only, T: type) from SNAPSHOT to SNAPSHOT2\n\n"
        "  --name=GLOB              find: only names matching GLOB (as find -name)\n"
        "  --content                diff: compare the content of every regular file, not only those\n"
        "                           whose size, times or inode differ\n"
        "  --force                  get: replace existing files in DEST\n"
        "  --json                   ls, find: a JSON array of entries (name, path, type, size, mode,\n"
        "                           uid, gid, mtime), or of the partitions\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

static int dev_pread(void *userdata, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset)
{
        return bv_image_pread(userdata, buf, count, offset, ret_bad_offset);
}

int files_disk_open(BvRepo *repo, const char *spec, FilesDisk *d)
{
        int r = find_snapshot(repo, spec, &d->snap);

        d->drive = -1;
        if (r != EXIT_OK)
                return r;
        r = bv_image_open(repo, d->snap, NULL, &d->img);
        if (r < 0)
                return log_error_errno(r, "cannot open snapshot %.8s", d->snap->id);
        d->dev = (BvFilesDev){ .pread = dev_pread, .userdata = d->img, .size = bv_image_size(d->img) };
        r = bv_files_parts(&d->dev, &d->parts, &d->n_parts, &d->table);
        if (r == -EBADMSG && !d->parts)
                return log_error_errno(r, "cannot read the partition table of snapshot %.8s", d->snap->id);
        if (r < 0)
                return log_error_errno(r, "cannot read the partitions of snapshot %.8s", d->snap->id);
        d->n_table = d->n_parts;
        d->fs = calloc(d->n_parts ? d->n_parts : 1, sizeof(*d->fs));
        if (!d->fs)
                return log_error_errno(-ENOMEM, "cannot open snapshot %.8s", d->snap->id);
        /* a disk the appliance may read joins it now: diff's second one boots with the first */
        for (size_t i = 0; i < d->n_parts; i++) {
                const FilesBackend *b = files_backend(d->parts[i].fstype);
                if ((b && b->open) || files_is_lvm(d->parts[i].fstype))
                        return files_guestfs_register(d);
        }
        return EXIT_OK;
}

void files_disk_close(FilesDisk *d)
{
        for (size_t i = 0; d->fs && i < d->n_parts; i++)
                bv_fs_close(d->fs[i]);
        free(d->fs);
        free(d->parts);
        bv_image_free(d->img);
        *d = (FilesDisk){ .drive = -1 };
}

bool files_is_lvm(const char *fstype)
{
        return fstype && strcmp(fstype, "LVM2_member") == 0;
}

int files_disk_all(FilesDisk *d)
{
        for (size_t i = 0; i < d->n_table; i++)
                if (files_is_lvm(d->parts[i].fstype))
                        return files_guestfs_list_lvs(d);
        return EXIT_OK;
}

const char *files_part_name(const FilesDisk *d, size_t i, char *buf, size_t size)
{
        const BvFilesPart *p = &d->parts[i];

        if (i >= d->n_table)
                snprintf(buf, size, "%s", p->partname);
        else if (p->number)
                snprintf(buf, size, "p%u", p->number);
        else
                snprintf(buf, size, "the disk");
        return buf;
}

/* Opens partition i's filesystem once; reports; returns an exit code. */
static int part_open(FilesDisk *d, size_t i)
{
        const BvFilesPart *p = &d->parts[i];
        const FilesBackend *b = files_backend(p->fstype);
        char name[96];
        int r;

        if (d->fs[i])
                return EXIT_OK;
        files_part_name(d, i, name, sizeof(name));
        if (files_is_lvm(p->fstype)) {
                log_error("%s of snapshot %.8s is an LVM physical volume: name one of its logical volumes, as "
                          "VG/LV:/path (see 'blkvault files REPO %.8s ls')", name, d->snap->id, d->snap->id);
                return EXIT_ERROR;
        }
        if (!b) {
                log_error("%s of snapshot %.8s holds %s%s: files reads %s (use 'blkvault mount' for others)", name,
                          d->snap->id, p->fstype ? p->fstype : "no filesystem known", p->fstype ? "" : " here",
                          files_backend_names());
                return EXIT_ERROR;
        }
        if (i >= d->n_table) /* a logical volume: only the appliance sees it */
                return files_guestfs_open(d, i, &d->fs[i]);
        if (b->open)
                return b->open(d, i, &d->fs[i]);
        r = bv_fs_open(b->ops, &d->dev, p->offset, p->size, &d->fs[i]);
        if (r == -EBADMSG || r == -EUCLEAN)
                return log_error_errno(r, "cannot open the %s filesystem of %s of snapshot %.8s", p->fstype, name,
                                       d->snap->id);
        if (r == -EMEDIUMTYPE) {
                const char *why = b->ops->open_error_text ? b->ops->open_error_text() : NULL;
                _cleanup_free_ char *ewhy = why ? escape_text(why, 200) : NULL;
                log_error("cannot open the %s filesystem of %s of snapshot %.8s: %s refused it%s%s", p->fstype, name,
                          d->snap->id, b->ops->library, ewhy ? ": " : "", ewhy ? ewhy : "");
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot open the %s filesystem of %s of snapshot %.8s", p->fstype, name,
                                       d->snap->id);
        if (bv_fs_needs_recovery(d->fs[i]))
                log_warning("the %s filesystem of %s was not cleanly unmounted when snapshot %.8s was taken: its "
                            "journal is not replayed, so its newest changes may be missing", p->fstype, name,
                            d->snap->id);
        return EXIT_OK;
}

/* The labels that only the filesystem's reader knows (NTFS keeps its label in an MFT record): each
 * such filesystem opened, quietly (one that does not open keeps no label). */
static void part_labels(FilesDisk *d)
{
        for (size_t i = 0; i < d->n_parts; i++) {
                BvFilesPart *p = &d->parts[i];
                const FilesBackend *b = files_backend(p->fstype);
                const char *label;

                if (i >= d->n_table || p->label[0] || !b || !b->ops || !b->ops->label)
                        continue;
                if (!d->fs[i] && bv_fs_open(b->ops, &d->dev, p->offset, p->size, &d->fs[i]) < 0)
                        continue;
                label = b->ops->label(bv_fs_impl(d->fs[i]));
                if (label)
                        snprintf(p->label, sizeof(p->label), "%s", label);
        }
}

static ssize_t part_match(FilesDisk *d, const char *spec, size_t len)
{
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < d->n_parts; i++) {
                        char name[96];
                        const BvFilesPart *p = &d->parts[i];
                        files_part_name(d, i, name, sizeof(name));
                        if ((strlen(name) == len && strncmp(name, spec, len) == 0) ||
                            (p->label[0] && strlen(p->label) == len && strncmp(p->label, spec, len) == 0) ||
                            (p->partname[0] && strlen(p->partname) == len && strncmp(p->partname, spec, len) == 0))
                                return (ssize_t)i;
                }
                /* a logical volume ("vg/lv"): the appliance lists them, once asked for one */
                if (pass > 0 || d->lvs_listed || !memchr(spec, '/', len) || files_disk_all(d) != EXIT_OK)
                        break;
        }
        return -1;
}

/* The partition prefix of spec ("p2:/etc", a label, "vg/lv:/etc") of len bytes names: its index, or -1
 * (reported). */
static ssize_t part_find(FilesDisk *d, const char *spec, size_t len)
{
        ssize_t i = part_match(d, spec, len);

        if (i >= 0)
                return i;
        part_labels(d);
        i = part_match(d, spec, len);
        if (i >= 0)
                return i;
        _cleanup_free_ char *s = strndup(spec, len);
        _cleanup_free_ char *e = s ? escape_text(s, 64) : NULL, *path = escape_text(spec + len + 1, 64),
                           *whole = escape_text(spec, 80);
        if (d->n_parts == 1 && d->parts[0].number == 0) /* a filesystem on the whole disk */
                log_error("snapshot %.8s has no partition table: its %s%sfilesystem is the whole disk; name paths "
                          "without a partition, as %s (not %s)", d->snap->id, d->parts[0].fstype ?: "",
                          d->parts[0].fstype ? " " : "", path ? path : "?", whole ? whole : "?");
        else
                log_error("snapshot %.8s has no partition '%s' (see 'blkvault files REPO %.8s ls')", d->snap->id,
                          e ? e : "?", d->snap->id);
        return -1;
}

int files_resolve(FilesDisk *d, const char *arg, FilesPath *ret)
{
        const char *colon = arg[0] == '/' ? NULL : strchr(arg, ':');
        ssize_t idx = -1;
        int r;

        *ret = (FilesPath){ .disk = d, .path = arg, .prefix = "" };
        if (colon) {
                idx = part_find(d, arg, (size_t)(colon - arg));
                if (idx < 0)
                        return EXIT_ERROR;
                ret->path = colon + 1;
        } else {
                size_t readable = 0;
                for (size_t i = 0; i < d->n_parts; i++)
                        if (files_backend(d->parts[i].fstype) || files_is_lvm(d->parts[i].fstype)) {
                                readable++;
                                idx = (ssize_t)i;
                        }
                if (readable != 1 && d->n_parts != 1) {
                        log_error("snapshot %.8s holds %zu partitions: name one, as p1:%s (see 'blkvault files "
                                  "REPO %.8s ls')", d->snap->id, d->n_parts, arg, d->snap->id);
                        return EXIT_USAGE;
                }
                if (d->n_parts == 1)
                        idx = 0;
        }
        if (ret->path[0] != '/') {
                log_error("'%s': a path in the filesystem starts with '/'", arg);
                return EXIT_USAGE;
        }
        r = part_open(d, (size_t)idx);
        if (r != EXIT_OK)
                return r;
        ret->part = (size_t)idx;
        ret->fs = d->fs[idx];
        if (colon) {
                static _Thread_local char prefixes[4][120];
                static _Thread_local unsigned next;
                char *p = prefixes[next++ % ELEMENTSOF(prefixes)];
                snprintf(p, sizeof(prefixes[0]), "%.*s:", (int)MIN((size_t)(colon - arg), (size_t)110), arg);
                ret->prefix = p;
        }
        return EXIT_OK;
}

char *files_display(const char *prefix, const char *path)
{
        _cleanup_free_ char *s = NULL;

        if (asprintf(&s, "%s%s", prefix, path) < 0)
                return NULL;
        return escape_text(s, 0);
}

char *files_join(const char *dir, const char *name)
{
        char *s;
        size_t n = strlen(dir);

        if (asprintf(&s, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
                return NULL;
        return s;
}

int files_error(BvFs *fs, int r, const char *what, const char *prefix, const char *path)
{
        _cleanup_free_ char *name = files_display(prefix, path);
        const char *text = fs ? bv_fs_error_text(fs) : NULL;

        if ((r == -EBADMSG || r == -EUCLEAN) && fs && bv_fs_bad_offset(fs) != UINT64_MAX)
                return log_error_errno(r, "cannot %s '%s': %s data at offset %llu of the snapshot", what,
                                       name ? name : path, r == -EBADMSG ? "damaged" : "missing",
                                       (unsigned long long)bv_fs_bad_offset(fs));
        if (r == -EBADMSG || r == -EUCLEAN) /* where, the reader cannot tell (libguestfs) */
                return log_error_errno(r, "cannot %s '%s': %s data in the snapshot%s%s%s", what, name ? name : path,
                                       r == -EBADMSG ? "damaged" : "missing", text ? " (" : "", text ? text : "",
                                       text ? ")" : "");
        if (r == -EIO && text) {
                log_error("cannot %s '%s': %s", what, name ? name : path, text);
                return EXIT_ERROR;
        }
        return log_error_errno(r, "cannot %s '%s'", what, name ? name : path);
}

static void mode_string(uint32_t mode, char out[11])
{
        static const char types[] = { [S_IFDIR >> 12] = 'd', [S_IFLNK >> 12] = 'l', [S_IFCHR >> 12] = 'c',
                                      [S_IFBLK >> 12] = 'b', [S_IFIFO >> 12] = 'p', [S_IFSOCK >> 12] = 's',
                                      [S_IFREG >> 12] = '-' };
        char t = types[(mode >> 12) & 0xf];

        out[0] = t ? t : '?';
        for (int i = 0; i < 9; i++)
                out[1 + i] = (mode & (0400u >> i)) ? "rwxrwxrwx"[i] : '-';
        if (mode & S_ISUID)
                out[3] = out[3] == 'x' ? 's' : 'S';
        if (mode & S_ISGID)
                out[6] = out[6] == 'x' ? 's' : 'S';
        if (mode & S_ISVTX)
                out[9] = out[9] == 'x' ? 't' : 'T';
        out[10] = 0;
}

/* One line of ls: mode, owner, group, size, mtime, name (and " -> target"); with --json an entry. */
static int ls_line(FilesPath *fp, uint64_t ino, const char *path, const char *shown, const FilesOptions *o)
{
        BvFsStat st;
        char mode[11], when[32];
        struct tm tm;
        time_t t;
        int r = bv_fs_stat(fp->fs, ino, &st);

        if (r < 0)
                return files_error(fp->fs, r, "read", fp->prefix, path);
        mode_string(st.mode, mode);
        t = (time_t)st.mtime;
        if (!localtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
                snprintf(when, sizeof(when), "@%lld", (long long)st.mtime);
        _cleanup_free_ char *name = escape_text(shown, 0), *target = NULL, *etarget = NULL;
        if (S_ISLNK(st.mode)) {
                r = bv_fs_readlink(fp->fs, ino, &target);
                if (r < 0)
                        return files_error(fp->fs, r, "read the link", fp->prefix, path);
                etarget = escape_text(target, 0);
        }
        if (o->json)
                return files_json_entry(o->json_out, fp, &st, path, shown, target);
        printf("%s %5u %5u %12llu %s %s%s%s\n", mode, st.uid, st.gid, (unsigned long long)st.size, when,
               name ? name : "?", etarget ? " -> " : "", etarget ? etarget : "");
        return EXIT_OK;
}

static int files_ls_parts(FilesDisk *d, const FilesOptions *o)
{
        int r = files_disk_all(d); /* with LVM: boots the appliance to name the logical volumes */

        part_labels(d);
        for (size_t i = 0; i < d->n_parts; i++) {
                const BvFilesPart *p = &d->parts[i];
                char name[96], size[32];
                files_part_name(d, i, name, sizeof(name));
                if (o->json) {
                        int e = files_json_part(o->json_out, p, name, p->label[0] ? p->label : p->partname);
                        if (e != EXIT_OK)
                                return e;
                        continue;
                }
                _cleanup_free_ char *label = escape_text(p->label[0] ? p->label : p->partname, 64);
                if (i < d->n_table)
                        printf("%-4s %-6s %10s  offset %-12llu %s\n", p->number ? name : "-",
                               p->fstype ? p->fstype : "?", format_bytes(p->size, size), (unsigned long long)p->offset,
                               label ? label : "");
                else /* a logical volume, inside its physical volume */
                        printf("%-4s %-6s %10s  lvm %s\n", name, p->fstype ? p->fstype : "?",
                               format_bytes(p->size, size), p->label[0] && label ? label : "");
        }
        return r;
}

/* "hosts" of "/etc/hosts"; "/" of "/". */
static const char *last_component(const char *path)
{
        const char *base = strrchr(path, '/');

        return base && base[1] ? base + 1 : path;
}

static int files_ls(FilesDisk *d, const char *arg, const FilesOptions *o)
{
        FilesPath fp;
        uint64_t ino;
        BvFsStat st;
        BvFsEntry *ents;
        size_t n;
        int r, ec = EXIT_OK;

        if (!arg && d->n_parts > 1)
                return files_ls_parts(d, o);
        r = files_resolve(d, arg ? arg : "/", &fp);
        if (r != EXIT_OK)
                return r;
        r = bv_fs_lookup(fp.fs, fp.path, false, &ino);
        if (r >= 0)
                r = bv_fs_stat(fp.fs, ino, &st);
        if (r < 0)
                return files_error(fp.fs, r, "list", fp.prefix, fp.path);
        if (!S_ISDIR(st.mode)) /* shown as given, as ls does; its name in --json is the last component */
                return ls_line(&fp, ino, fp.path, o->json ? last_component(fp.path) : fp.path, o);
        r = bv_fs_readdir(fp.fs, ino, &ents, &n);
        if (r < 0)
                return files_error(fp.fs, r, "list", fp.prefix, fp.path);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = files_join(fp.path, ents[i].name);
                r = path ? ls_line(&fp, ents[i].ino, path, ents[i].name, o) : log_error_errno(-ENOMEM, "cannot list");
                ec = ec == EXIT_OK ? r : ec;
        }
        bv_fs_entries_free(ents, n);
        return ec;
}

static int cat_sink(const void *buf, size_t len, uint64_t offset _unused_, void *userdata _unused_)
{
        static const uint8_t zero[65536];

        if (buf)
                return bv_write_all(STDOUT_FILENO, buf, len);
        for (size_t done = 0; done < len;) {
                size_t k = MIN(len - done, sizeof(zero));
                int r = bv_write_all(STDOUT_FILENO, zero, k);
                if (r < 0)
                        return r;
                done += k;
        }
        return 0;
}

static int files_cat(FilesDisk *d, const char *arg)
{
        FilesPath fp;
        BvFsStat st;
        uint64_t ino;
        int r = files_resolve(d, arg, &fp);

        if (r != EXIT_OK)
                return r;
        r = bv_fs_lookup(fp.fs, fp.path, true, &ino);
        if (r >= 0)
                r = bv_fs_read(fp.fs, ino, cat_sink, NULL);
        if (r == -EPIPE)
                return EXIT_ERROR;
        if (r == -EISDIR && bv_fs_stat(fp.fs, ino, &st) >= 0 && !S_ISDIR(st.mode)) {
                /* a fifo, socket or device: "Is a directory" would be wrong */
                _cleanup_free_ char *name = files_display(fp.prefix, fp.path);
                log_error("cannot print '%s': not a regular file (%s)", name ? name : fp.path, files_type_name(st.mode));
                return EXIT_ERROR;
        }
        if (r < 0)
                return files_error(fp.fs, r, r == -EISDIR ? "print" : "read", fp.prefix, fp.path);
        return EXIT_OK;
}

/* find: path, then (for a directory) everything below it, depth first in name order. */
static int find_walk(FilesPath *fp, uint64_t ino, const char *path, const char *name, const FilesOptions *o)
{
        BvFsStat st;
        BvFsEntry *ents;
        size_t n;
        int r = bv_fs_stat(fp->fs, ino, &st), ec = EXIT_OK;

        if (r < 0)
                return files_error(fp->fs, r, "read", fp->prefix, path);
        if ((!o->name_glob || fnmatch(o->name_glob, name, 0) == 0) && o->json) {
                _cleanup_free_ char *target = NULL;
                r = S_ISLNK(st.mode) ? bv_fs_readlink(fp->fs, ino, &target) : 0;
                if (r < 0)
                        return files_error(fp->fs, r, "read the link", fp->prefix, path);
                r = files_json_entry(o->json_out, fp, &st, path, name, target);
                if (r != EXIT_OK)
                        return r;
        } else if (!o->name_glob || fnmatch(o->name_glob, name, 0) == 0) {
                _cleanup_free_ char *shown = files_display(fp->prefix, path);
                printf("%s\n", shown ? shown : path);
        }
        if (!S_ISDIR(st.mode))
                return EXIT_OK;
        r = bv_fs_readdir(fp->fs, ino, &ents, &n);
        if (r < 0)
                return files_error(fp->fs, r, "list", fp->prefix, path);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *sub = files_join(path, ents[i].name);
                r = sub ? find_walk(fp, ents[i].ino, sub, ents[i].name, o) : log_error_errno(-ENOMEM, "cannot list");
                ec = ec == EXIT_OK ? r : ec;
        }
        bv_fs_entries_free(ents, n);
        return ec;
}

static int files_find(FilesDisk *d, const char *arg, const FilesOptions *o)
{
        FilesPath fp;
        uint64_t ino;
        int r = files_resolve(d, arg ? arg : "/", &fp);

        if (r != EXIT_OK)
                return r;
        r = bv_fs_lookup(fp.fs, fp.path, true, &ino);
        if (r < 0)
                return files_error(fp.fs, r, "find", fp.prefix, fp.path);
        return find_walk(&fp, ino, fp.path, last_component(fp.path), o);
}

/* Whether n arguments after the command fit it; else the usage error. */
static bool args_fit(const char *cmd, int n)
{
        static const struct {
                const char *name, *form;
                int min, max;
        } forms[] = {
                { "ls", "ls [PATH]", 0, 1 },         { "cat", "cat PATH", 1, 1 },
                { "get", "get PATH... DEST", 2, -1 }, { "find", "find [PATH]", 0, 1 },
                { "diff", "diff SNAPSHOT2 [PATH]", 1, 2 },
        };
        for (size_t i = 0; i < ELEMENTSOF(forms); i++)
                if (strcmp(cmd, forms[i].name) == 0) {
                        if (n >= forms[i].min && (forms[i].max < 0 || n <= forms[i].max))
                                return true;
                        char form[80];
                        snprintf(form, sizeof(form), "REPO SNAPSHOT %s", forms[i].form);
                        usage_error("files", form);
                        return false;
                }
        usage_error("files", "REPO SNAPSHOT ls|cat|get|find|diff ...");
        return false;
}

int cmd_files(int argc, char **argv)
{
        SecretArgs sargs = {};
        FilesOptions o = {};
        const CliOption options[] = {
                CLI_STR("name", &o.name_glob),
                CLI_FLAG("content", &o.content),
                CLI_FLAG("force", &o.force),
                CLI_FLAG("json", &o.json),
                POINT_IN_TIME_OPTION(&sargs),
                {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "files", .usage = usage_text, .options = options, .secret = &sargs,
                            .args = "REPO SNAPSHOT COMMAND [ARG]...", .repo = true);
        const char *path = argv[optind], *spec = argv[optind + 1], *cmd = argv[optind + 2];
        char **args = argv + optind + 3;
        int n = argc - optind - 3, r;

        if (!args_fit(cmd, n))
                return EXIT_USAGE;
        if (o.json && strcmp(cmd, "ls") != 0 && strcmp(cmd, "find") != 0) {
                log_error("--json is for ls and find, not %s", cmd);
                return EXIT_USAGE;
        }
        _cleanup_(json_object_putp) struct json_object *out = o.json ? json_object_new_array() : NULL;
        if (o.json && !out)
                return log_error_errno(-ENOMEM, "cannot list");
        o.json_out = out;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        _cleanup_(secret_done) BvSecret secret = {};
        r = open_repo_secret(path, &sargs, BV_OPEN_READ, &repo, &secret);
        if (r != EXIT_OK)
                return r;
        files_guestfs_setup(path, &sargs, &secret);
        FilesDisk d = { .drive = -1 };
        r = files_disk_open(repo, spec, &d);
        if (r == EXIT_OK) {
                if (strcmp(cmd, "ls") == 0)
                        r = files_ls(&d, n ? args[0] : NULL, &o);
                else if (strcmp(cmd, "cat") == 0)
                        r = files_cat(&d, args[0]);
                else if (strcmp(cmd, "get") == 0)
                        r = files_get(&d, args, n, &o);
                else if (strcmp(cmd, "find") == 0)
                        r = files_find(&d, n ? args[0] : NULL, &o);
                else
                        r = files_diff(repo, &d, args[0], n > 1 ? args[1] : NULL, &o);
        }
        if (out) /* what was listed, also when some of it was not (said on stderr) */
                json_print(out);
        if (fflush(stdout) != 0 && r == EXIT_OK)
                r = log_error_errno(-errno, "cannot write to standard output");
        files_disk_close(&d);
        files_guestfs_done();
        return r;
}
