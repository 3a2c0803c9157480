/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "backup-libvirt.h"
#include "cli.h"
#include "gc.h"
#include "macro.h"
#include "mounts.h"
#include "snapshot-json.h"
#include "snapshot.h"
#include "used-source.h"

static const char usage_text[] =
        "Usage: blkvault backup REPO SOURCE [OPTIONS]\n\n"
        "Back up SOURCE (a block device, a raw image file, a disk image file (qcow2, vmdk, vdi, vhdx,\n"
        "qed, vpc: read as the virtual disk it holds, through qemu-nbd), - for stdin, or an NBD export:\n"
        "nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH) as a new snapshot; or the disks of a\n"
        "libvirt domain, libvirt:DOMAIN, each as a snapshot DOMAIN-TARGET, read incrementally from the\n"
        "checkpoint the last one recorded: a running domain's through one backup job (one instant for\n"
        "all), a shut-off one's from its images.\n\n"
        "  --name=NAME              snapshot name (default: the source's file name, or 'stdin'): at most\n"
        "                           255 bytes, no control characters, not 4 to 32 hex digits, not 'latest'\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              compression/encryption threads (default: one per CPU)\n"
        "  --no-direct              read through the page cache instead of O_DIRECT\n"
        "  --skip-unreadable        store blocks the source cannot read (EIO) as zeroes and list them\n"
        "                           in the snapshot, instead of failing\n"
        "  --force-read             read a file even if it is unchanged since its last snapshot\n"
        "  --full-read-every=N      read an unchanged file (or a whole NBD export) on every Nth backup\n"
        "  --dirty-bitmap=NAME      NBD or a qcow2 image: read only what qemu's dirty bitmap NAME marks\n"
        "                           dirty since the last snapshot of the same name (qemu-nbd -B NAME;\n"
        "                           a qcow2's persistent bitmap, qemu-img bitmap --add)\n"
        "  --compare-with=PATH      a file on btrfs or XFS: PATH is the version the last snapshot of the\n"
        "                           same name read, kept as a reflink copy (cp --reflink=always\n"
        "                           --preserve=timestamps) or in a btrfs snapshot: extents the two still\n"
        "                           share are not read\n"
        "  --thin-delta=FILE        an LVM thin snapshot: FILE is thin_delta's XML from the thin device\n"
        "                           the last snapshot of the same name read to SOURCE; only the ranges\n"
        "                           it marks changed are read\n"
        "  --used-only              read only the blocks the filesystems inside SOURCE use (ext2/3/4,\n"
        "                           XFS, btrfs, FAT, NTFS; partition tables and other filesystems are read\n"
        "                           whole); free blocks\n"
        "                           are stored as holes. Only for an image no process writes, or a device\n"
        "                           not mounted read-write; anything else is read whole, saying why\n"
        "  --as-file                a disk image file (qcow2 ...) is backed up as the file it is, not as\n"
        "                           the virtual disk it holds\n"
        "  --image-format=FMT       SOURCE is a FMT image (qcow2, vmdk ...) you trust: read as its virtual\n"
        "                           disk with its backing chain. A format only probed from the file's first\n"
        "                           bytes is read so only when the image references no other file\n"
        "  --disk=TARGET            libvirt: back up this disk (vda ...; repeat for several; default:\n"
        "                           every disk)\n"
        "  --libvirt-uri=URI        libvirt: connect to URI (default: $LIBVIRT_DEFAULT_URI, else\n"
        "                           qemu:///system)\n"
        "  --no-freeze              libvirt: do not freeze the guest's filesystems through its\n"
        "                           qemu-guest-agent while the job starts (crash-consistent)\n"
        "  --wait                   wait for another writer instead of failing\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

/* --used-only: what the source's map said, and why it was read whole ("" when it was not). */
typedef struct UsedOnly {
        bool on;
        BvFsUsedMap map;
        char why[256];
} UsedOnly;

static void used_only_done(UsedOnly *u)
{
        bv_fs_used_map_done(&u->map);
}

/* The new snapshot, its stats nested as list prints them, and how the source was read. Until
 * 0.3 the stats are also repeated at the top level, where earlier releases printed them. */
static struct json_object *backup_json(const BvBackupStats *s, const char *name, const UsedOnly *u)
{
        _cleanup_(json_object_putp) struct json_object *stats = bv_snapshot_stats_json(&s->counts);
        _cleanup_(json_object_putp) struct json_object *o = NULL, *used = u->on ? json_used_only(&u->map, u->why) : NULL;

        if (!stats || (u->on && !used))
                return NULL;
        o = BV_JSON_OBJECT({ "snapshot", json_object_new_string(s->snapshot_id) },
                           { "name", json_object_new_string(name) },
                           { "size", json_object_new_uint64(s->size) },
                           { "stats", json_object_get(stats) },
                           { "io", json_object_new_string(s->used_uring ? "io_uring" : "pread") },
                           { "direct", json_object_new_boolean(s->used_direct) },
                           { s->reused_from[0] ? "reused_from" : NULL,
                             s->reused_from[0] ? json_object_new_string(s->reused_from) : NULL },
                           { s->changed_from[0] ? "changed_from" : NULL,
                             s->changed_from[0] ? json_object_new_string(s->changed_from) : NULL },
                           { s->changed_from[0] ? "bytes_from_parent" : NULL,
                             s->changed_from[0] ? json_object_new_uint64(s->bytes_parent) : NULL },
                           { s->changed_reason[0] ? "read_whole_because" : NULL,
                             s->changed_reason[0] ? json_object_new_string(s->changed_reason) : NULL },
                           { s->packs_resumed ? "resumed_packs" : NULL,
                             s->packs_resumed ? json_object_new_uint64(s->packs_resumed) : NULL },
                           { s->packs_resumed ? "resumed_bytes" : NULL,
                             s->packs_resumed ? json_object_new_uint64(s->bytes_resumed) : NULL },
                           { used ? "used_only" : NULL, used ? json_object_get(used) : NULL });
        if (!o || json_add_members(o, stats) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* The result line, or the JSON document with --json. */
static int backup_report(const BvBackupStats *stats, const char *name, const char *source, bool json,
                         const UsedOnly *u)
{
        const char *base = strrchr(source, '/');

        if (!name)
                name = strcmp(source, "-") == 0 ? "stdin" : base ? base + 1 : source;
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o = backup_json(stats, name, u);
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot print the result");
                json_print(o);
        } else {
                char a[32], b[32], d[32], e[32];
                log_info("snapshot %.8s: %s image, %s data, %s new, %s stored, in %.1f s", stats->snapshot_id,
                         format_bytes(stats->size, a), format_bytes(stats->counts.bytes_data, b),
                         format_bytes(stats->counts.bytes_new, d), format_bytes(stats->counts.bytes_stored, e),
                         stats->counts.seconds);
                if (stats->packs_resumed)
                        log_info("continued an interrupted backup: %llu packs it left (%s) were reused",
                                 (unsigned long long)stats->packs_resumed, format_bytes(stats->bytes_resumed, a));
                if (stats->reused_from[0])
                        log_info("unchanged since snapshot %.8s: not read (--force-read reads it)",
                                 stats->reused_from);
                if (stats->changed_from[0])
                        log_info("read only what changed since snapshot %.8s: %s", stats->changed_from,
                                 format_bytes(stats->counts.bytes_read, a));
        }
        if (u->on && !stats->reused_from[0])
                log_used_only(&u->map, u->why, source, json);
        if (stats->counts.bytes_map_wrong > 0)
                log_warning("the changed-block map was wrong: %llu bytes it called unchanged had changed (this "
                            "snapshot read them; do not trust the map: recreate the bitmap or the copy)",
                            (unsigned long long)stats->counts.bytes_map_wrong);
        return EXIT_OK;
}

/* A block device whose filesystem is mounted read-write changes while it is read: the image
 * may hold a filesystem that was never on the disk as a whole. Says so, and how to avoid it. */
static void warn_mounted_rw(const char *source)
{
        char mp[4096], dev[64];
        struct stat st;

        if (stat(source, &st) < 0 || !S_ISBLK(st.st_mode) ||
            bv_blockdev_mounted_rw(st.st_rdev, mp, sizeof(mp), dev, sizeof(dev)) <= 0)
                return;
        _cleanup_free_ char *shown = escape_text(mp, 0), *real = realpath(source, NULL);
        const char *base = real ? strrchr(real, '/') : NULL, *m = shown ? shown : mp;
        char what[128] = "";
        if (!base || strcmp(base + 1, dev) != 0) /* a partition or a device stacked on it */
                snprintf(what, sizeof(what), " holds /dev/%s, which", dev);
        log_warning("'%s'%s is mounted read-write on '%s': the image may be inconsistent (the filesystem "
                    "changes while it is read); back up an LVM or filesystem snapshot instead, or freeze it "
                    "for the backup (fsfreeze --freeze '%s', then fsfreeze --unfreeze '%s')",
                    source, what, m, m, m);
}

/* A path (not - nor an NBD URI) that does not exist: said before the repository is opened and a
 * passphrase asked for. */
static bool source_missing(const char *source)
{
        struct stat st;

        if (strcmp(source, "-") == 0 || bv_source_is_nbd_uri(source) || stat(source, &st) == 0)
                return false;
        return errno == ENOENT || errno == ENOTDIR;
}

/* --disk=TARGET, repeatable. */
typedef struct DiskArgs {
        const char *v[64];
        size_t n;
} DiskArgs;

static int parse_disk(const char *arg, void *ret)
{
        DiskArgs *d = ret;

        if (!arg[0] || d->n == ELEMENTSOF(d->v)) {
                log_error("--disk needs a disk's target (vda ...), at most %zu of them", ELEMENTSOF(d->v));
                return -EINVAL;
        }
        for (size_t i = 0; i < d->n; i++)
                if (strcmp(d->v[i], arg) == 0) {
                        log_error("--disk=%s is given twice (each disk is backed up once)", arg);
                        return -EINVAL;
                }
        d->v[d->n++] = arg;
        return 0;
}

static int parse_full_read_every(const char *arg, void *ret)
{
        return parse_unsigned_arg("--full-read-every", arg, 1, 1000000, ret);
}

static int backup_error(int r, const char *source, const BvBackupKept *kept)
{
        if (r == -EACCES || r == -EPERM) {
                log_error("cannot read '%s': %s (reading a block device needs root or the disk group)", source,
                          strerror(-r));
                return EXIT_PERM;
        }
        if (r == -ENOSPC && kept && kept->packs > 0) {
                char a[32];
                return log_error_errno(r, "backup of '%s' failed: the repository's target is full (earlier "
                                          "snapshots are intact; %s in %llu packs were kept for the next backup, "
                                          "'blkvault gc' deletes them)", source, format_bytes(kept->bytes, a),
                                       (unsigned long long)kept->packs);
        }
        if (r == -ENOSPC)
                return log_error_errno(r, "backup of '%s' failed: the repository's target is full "
                                          "(earlier snapshots are intact)", source);
        return log_error_errno(r, "backup of '%s' failed (nothing was published)", source);
}

/* Why the disk image source (of format, as stated or probed) did not open, in buf; how = "--as-file"
 * style (backup) or "as-file = yes" style (a job). False when r has no particular message. */
bool image_open_message(int r, const char *source, const char *format, const char *detail, bool job, char *buf,
                        size_t size)
{
        if (r == -ENOLINK)
                snprintf(buf, size, "refused to read '%s' as a %s image: it references another file, '%s'. Its format "
                                    "was only probed from its first bytes, which a VM's guest writes in a raw disk "
                                    "image, so a host file it names is never read: state the format if you trust "
                                    "the file (%s%s, its backing chain is read), or back up its bytes with %s",
                         source, format, detail, job ? "image-format = " : "--image-format=", format,
                         job ? "as-file = yes" : "--as-file");
        else if (r == -EMEDIUMTYPE)
                snprintf(buf, size, "'%s' is not a %s image: its header says %s (refused)", source, format, detail);
        else if (r == -EBUSY)
                snprintf(buf, size, "cannot read the %s image '%s': a running VM writes it (qemu-nbd: %s). A copy read "
                                    "now would be torn: back the VM up through its hypervisor (libvirt's backup, or "
                                    "--dirty-bitmap on its NBD export), or shut it down first", format, source, detail);
        else if (r == -ENOPKG)
                snprintf(buf, size, "cannot read the %s image '%s': qemu-nbd does not run (install qemu-utils), or "
                                    "back up the image file as it is with %s", format, source,
                         job ? "as-file = yes" : "--as-file");
        else if (r == -EBADMSG)
                snprintf(buf, size, "cannot read the %s image '%s': qemu cannot open it: %s (a corrupt or "
                                    "truncated image, or a missing backing file?)", format, source,
                         detail[0] ? detail : "no reason given");
        else
                return false;
        return true;
}

/* A disk image that did not open: nothing was read. */
static int image_error(int r, const char *source, const char *format, const char *detail)
{
        char m[2048];

        if (image_open_message(r, source, format, detail, false, m, sizeof(m))) {
                log_error("%s", m);
                return EXIT_ERROR;
        }
        return log_error_errno(r, "cannot read the %s image '%s'", format, source);
}

/* The source could not be opened: nothing was read. */
static int open_error(int r, const char *source, const BvSourceOptions *o)
{
        const char *format;

        if (r == -ENOMSG && !bv_source_is_nbd_uri(source)) {
                log_error("the qcow2 image '%s' carries no persistent bitmap '%s' (qemu-img info -U lists its "
                          "bitmaps; qemu-img bitmap --add makes one)", source, o->dirty_bitmap);
                return EXIT_ERROR;
        }
        if (!o->as_file && o->image_format)
                return image_error(r, source, o->image_format, o->error_detail ? o->error_detail : "");
        if (!o->as_file && bv_source_detect_image(source, &format) > 0)
                return image_error(r, source, format, o->error_detail ? o->error_detail : "");
        if (o->compare_with && r == -EOPNOTSUPP) {
                log_error("cannot compare '%s' with '%s': the filesystem cannot map their extents (FIEMAP; btrfs "
                          "and XFS can)", source, o->compare_with);
                return EXIT_ERROR;
        }
        if (o->compare_with && r == -EINVAL) {
                log_error("--compare-with needs SOURCE and PATH to be two regular files ('%s', '%s')", source,
                          o->compare_with);
                return EXIT_USAGE;
        }
        if (o->compare_with && r == -ENOENT)
                return log_error_errno(r, "cannot open '%s' or '%s'", source, o->compare_with);
        if (o->thin_delta && r == -EBADMSG) {
                log_error("'%s' is not thin_delta's output (thin_delta --snap1 OLD --snap2 NEW METADATA), or its "
                          "ranges disagree with its pool's nr_data_blocks", o->thin_delta);
                return EXIT_USAGE;
        }
        if (o->thin_delta && r == -ERANGE) {
                log_error("'%s' does not fit '%s': it maps blocks past the end of the device, or the device is not "
                          "whole 512-byte sectors (a delta of another device?); nothing was read", o->thin_delta, source);
                return EXIT_USAGE;
        }
        if (o->thin_delta && r == -EINVAL) {
                log_error("--thin-delta needs a block device or a file as SOURCE, and not --compare-with");
                return EXIT_USAGE;
        }
        if (!bv_source_is_nbd_uri(source))
                return backup_error(r, source, NULL);
        if (r == -ENOMSG) {
                log_error("the NBD server at '%s' exports no dirty bitmap '%s' (serve it with qemu-nbd -B %s, "
                          "or name it in block-export-add's bitmaps)", source, o->dirty_bitmap, o->dirty_bitmap);
                return EXIT_ERROR;
        }
        if (r == -EFBIG) {
                log_error("the NBD export '%s' claims more than 1 PiB: refused (block status answers 4 GiB at a "
                          "time, so walking it would take one request per 4 GiB of what it claims)", source);
                return EXIT_ERROR;
        }
        return log_error_errno(r, "cannot read the NBD export '%s' (is the server running?)", source);
}

/* A change map that was not used (the whole source was read instead), and what did not read. */
static void warn_read_everything(const BvBackupOptions *opts, const BvBackupStats *stats, const char *source)
{
        const BvSourceOptions *so = &opts->source;

        if (stats->changed_reason[0] && so->dirty_bitmap)
                log_warning("dirty bitmap '%s' not used, read everything: %s", so->dirty_bitmap,
                            stats->changed_reason);
        else if (stats->changed_reason[0] && so->thin_delta)
                log_warning("thin delta '%s' not used, read everything: %s", so->thin_delta, stats->changed_reason);
        else if (stats->changed_reason[0])
                log_warning("'%s' not compared with, read everything: %s", so->compare_with, stats->changed_reason);
        if (stats->other_read_from[0] && stats->other_read_used_only && !opts->used_only)
                log_info("note: '%s' is unchanged since snapshot %.8s, but that one was taken --used-only (without "
                         "its free blocks): read it whole", source, stats->other_read_from);
        else if (stats->other_read_from[0])
                log_info("note: '%s' is unchanged since snapshot %.8s, but that one was read %s: read it", source,
                         stats->other_read_from,
                         stats->other_read_used_only ? "with another used-block map" : "whole");
        if (stats->lost_from[0])
                log_warning("'%s' is unchanged, but its last snapshot %.8s lost chunks (see 'blkvault repair'): read "
                            "it again",
                            source, stats->lost_from);
        if (stats->ranges_unreadable) {
                char b[32];
                log_warning("%s of '%s' did not read (%llu ranges): stored as zeroes, listed by 'blkvault info'",
                            format_bytes(stats->bytes_unreadable, b), source,
                            (unsigned long long)stats->ranges_unreadable);
        }
}

static bool backup_interrupted(void)
{
        return interrupted != 0;
}

/* Opens the source and backs it up: bv_backup's result, or an exit code (> 0) once the source
 * did not open (reported). */
static int backup_once(BvRepo *repo, const char *source, BvBackupOptions *opts, bool json, UsedOnly *u,
                       BvBackupStats *ret)
{
        Progress progress;
        BvSource *src = NULL;

        progress_init(&progress, "backup", json);
        opts->progress = progress_update;
        opts->progress_userdata = &progress;
        char detail[512] = "";
        opts->source.error_detail = detail;
        opts->source.error_detail_size = sizeof(detail);
        int r = bv_source_open(source, &opts->source, &src);
        opts->source.error_detail = NULL;
        if (r < 0) {
                progress_done(&progress);
                opts->source.error_detail = detail;
                r = open_error(r, source, &opts->source);
                opts->source.error_detail = NULL;
                return r;
        }
        if (u->on) {
                bv_fs_used_map_done(&u->map);
                r = bv_fs_used_open(src, false, &u->map, &src, u->why, sizeof(u->why));
                if (r < 0) {
                        bv_source_free(src);
                        progress_done(&progress);
                        return log_error_errno(r, "cannot map the used blocks of '%s'", source);
                }
                opts->used_only = bv_fs_used_applied(&u->map, u->why);
        }
        if (bv_source_kind(src) == BV_SOURCE_BLOCKDEV)
                warn_mounted_rw(source);
        r = bv_backup(repo, src, opts, ret);
        bv_source_free(src);
        progress_done(&progress);
        return r;
}

/* A full target: collects garbage once (what failed and interrupted runs left, snapshots that
 * were forgotten) with *repo closed, whose lease would keep gc from deleting, then opens it
 * again, both with the keys *repo holds (the secret was dropped once it was open). Returns 1
 * when gc freed something (then try again), 0 when not, < 0 when the repository did not open
 * again (then *repo is NULL). */
static int collect_for_room(const char *path, BvRepo **repo, BvOpenFlags flags)
{
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st = {};
        BvRepo *g = NULL;
        BvKeyring *keys = NULL;
        char a[32];

        int q = bv_keyring_dup(bv_repo_keyring(*repo), &keys);
        if (q < 0)
                return q;
        /* an unencrypted repository takes no secret, nor keys in its place */
        const BvSecret secret = { .keyring = bv_keyring_cipher(keys) != BV_CIPHER_NONE ? keys : NULL };
        log_info("note: the target of '%s' is full: collecting garbage once, then backing up again", path);
        bv_repo_close(TAKE_PTR(*repo));
        int r = bv_repo_open(path, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &g);
        if (r >= 0)
                r = bv_gc(g, &o, &st);
        bv_repo_close(g);
        if (r < 0)
                log_warning("cannot collect garbage in '%s': %s, ignoring", path, strerror(-r));
        else
                log_info("gc deleted %llu packs, %s", (unsigned long long)st.packs_deleted,
                         format_bytes(st.bytes_deleted, a));
        q = bv_repo_open(path, &secret, flags, repo);
        bv_keyring_free(keys);
        if (q < 0)
                return q;
        return r >= 0 && st.bytes_deleted > 0;
}

/* A backup stopped by a signal: what it kept for the next one; 128 + the signal, as a shell. */
static int report_interrupt(const char *source, const BvBackupKept *kept)
{
        char why[256];

        describe_interrupt(kept->packs, kept->bytes, why, sizeof(why));
        log_error("backup of '%s' %s", source, why);
        return 128 + interrupted;
}

int cmd_backup(int argc, char **argv)
{
        SecretArgs sargs = {};
        BvBackupOptions opts = {};
        bool json = false, wait = false;
        _cleanup_(used_only_done) UsedOnly used = {};
        DiskArgs disks = {};
        const char *libvirt_uri = NULL;
        bool no_freeze = false;
        const CliOption options[] = {
                CLI_STR("name", &opts.name),
                CLI_FLAG("json", &json),
                CLI_PARSED("threads", parse_threads, &opts.threads),
                CLI_FLAG("no-direct", &opts.source.no_direct),
                CLI_FLAG("skip-unreadable", &opts.source.skip_unreadable),
                CLI_FLAG("force-read", &opts.force_read),
                CLI_PARSED("full-read-every", parse_full_read_every, &opts.full_read_every),
                CLI_STR("dirty-bitmap", &opts.source.dirty_bitmap),
                CLI_STR("compare-with", &opts.source.compare_with),
                CLI_STR("thin-delta", &opts.source.thin_delta),
                CLI_STR("image-format", &opts.source.image_format),
                CLI_FLAG("used-only", &used.on),
                CLI_FLAG("as-file", &opts.source.as_file),
                CLI_FLAG("wait", &wait),
                CLI_PARSED("disk", parse_disk, &disks),
                CLI_STR("libvirt-uri", &libvirt_uri),
                CLI_FLAG("no-freeze", &no_freeze),
                {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "backup", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO SOURCE", .repo = true);
        int r;
        const char *path = argv[optind], *source = argv[optind + 1];
        bool libvirt = bv_source_is_libvirt(source);
        if (libvirt_uri && !libvirt_uri[0]) { /* libvirt would take "" for its default */
                log_error("--libvirt-uri needs a URI (qemu:///system ...)");
                return EXIT_USAGE;
        }
        if (strcmp(source, BV_SOURCE_LIBVIRT_PREFIX) == 0) {
                log_error("source '%s' names no domain: write libvirt:DOMAIN (virsh list --all lists them)", source);
                return EXIT_USAGE;
        }
        if (!libvirt && (disks.n > 0 || libvirt_uri || no_freeze)) {
                log_error("--disk, --libvirt-uri and --no-freeze need a libvirt source (libvirt:DOMAIN)");
                return EXIT_USAGE;
        }
        if (libvirt && (opts.source.dirty_bitmap || opts.source.compare_with || opts.source.thin_delta ||
                        used.on || opts.source.as_file || opts.source.image_format || opts.source.skip_unreadable)) {
                log_error("libvirt:DOMAIN takes none of --dirty-bitmap, --compare-with, --thin-delta, --used-only, "
                          "--as-file, --image-format, --skip-unreadable");
                return EXIT_USAGE;
        }
        const char *bitmap_format = NULL;
        if (opts.source.dirty_bitmap && !bv_source_is_nbd_uri(source) &&
            (opts.source.as_file || bv_source_detect_image(source, &bitmap_format) <= 0 ||
             strcmp(bitmap_format, "qcow2") != 0)) {
                log_error("--dirty-bitmap needs an NBD source (nbd://HOST/EXPORT or nbd+unix:///EXPORT?socket=PATH) "
                          "or a qcow2 image that carries the persistent bitmap");
                return EXIT_USAGE;
        }
        if (opts.source.skip_unreadable && (opts.source.thin_delta || opts.source.compare_with)) {
                /* their sources fail on EIO: the option would be ignored */
                log_error("--skip-unreadable cannot be combined with --thin-delta or --compare-with (back up "
                          "without them to store unreadable blocks as zeroes)");
                return EXIT_USAGE;
        }
        const char *format = NULL;
        bool image = !opts.source.as_file && bv_source_detect_image(source, &format) > 0;
        if (opts.source.image_format && opts.source.as_file) {
                log_error("--image-format and --as-file contradict each other (read the virtual disk, or the file)");
                return EXIT_USAGE;
        }
        if (!opts.source.as_file && opts.source.image_format)
                image = true, format = opts.source.image_format;
        if (image && (opts.source.compare_with || opts.source.thin_delta)) {
                log_error("'%s' is a %s image: --%s maps the file's bytes, not its virtual disk's (add --as-file "
                          "to back up the image file as it is)", source, format,
                          opts.source.compare_with ? "compare-with" : "thin-delta");
                return EXIT_USAGE;
        }
        const char *name = opts.name ? opts.name : bv_backup_default_name(source);
        const char *problem = libvirt ? NULL : bv_snapshot_name_problem(name); /* libvirt: per disk */
        if (problem) {
                _cleanup_free_ char *shown = escape_text(name, 64);
                log_error("invalid snapshot name '%s'%s: %s", shown ? shown : "?",
                          opts.name ? "" : " (the source's file name: choose one with --name)", problem);
                return EXIT_USAGE;
        }
        if (!libvirt && source_missing(source)) {
                log_error("source '%s' does not exist", source);
                return EXIT_ERROR;
        }

        BvSecret secret = {};
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvOpenFlags flags = BV_OPEN_WRITE | (wait ? BV_OPEN_WAIT : 0);
        r = open_repo_secret(path, &sargs, flags, &repo, &secret);
        if (r != EXIT_OK)
                return r;
        secret_done(&secret); /* the open repository holds what it needs: drop the secret now */
        r = catch_interrupts(NULL);
        if (r != EXIT_OK)
                return r;
        opts.cancelled = backup_interrupted;
        BvBackupKept kept = {};
        opts.ret_kept = &kept;

        if (libvirt) {
                BvLibvirtBackupOptions lo = { .uri = libvirt_uri, .disks = disks.v, .n_disks = disks.n,
                                              .name = opts.name, .no_freeze = no_freeze, .backup = opts };
                r = backup_libvirt(repo, source, &lo, json);
                if (interrupted && r != EXIT_OK)
                        return 128 + interrupted;
                return r;
        }
        BvBackupStats stats = {};
        uint64_t error_offset = UINT64_MAX;
        opts.ret_error_offset = &error_offset;
        r = backup_once(repo, source, &opts, json, &used, &stats);
        if (r == -ENOSPC && strcmp(source, "-") != 0) {
                int q = collect_for_room(path, &repo, flags);
                if (q < 0)
                        return log_error_errno(q, "cannot open '%s' again after collecting garbage", path);
                if (q > 0)
                        r = backup_once(repo, source, &opts, json, &used, &stats);
        }
        if (r > 0)
                return r; /* the source did not open: reported */
        if (r == -ECANCELED && interrupted)
                return report_interrupt(source, &kept);
        if (r == -ESTALE && used.on)
                return log_error_errno(r, "backup of '%s' failed: it changed while its used blocks were read "
                                          "(another process wrote it; nothing was published)", source);
        if (r == -EIO && error_offset != UINT64_MAX)
                return log_error_errno(r, "backup of '%s' failed: cannot read it at offset %llu (0x%llx) "
                                          "(nothing was published; --skip-unreadable stores such blocks "
                                          "as zeroes)", source, (unsigned long long)error_offset,
                                       (unsigned long long)error_offset);
        if (r < 0)
                return backup_error(r, source, &kept);
        /* --compare-with and --thin-delta sources read with pread by design; an unchanged
         * file is not read at all: neither says anything about io_uring */
        if (!stats.used_uring && !json && !bv_source_is_nbd_uri(source) && !image && !opts.source.compare_with &&
            !opts.source.thin_delta && !used.on && stats.counts.bytes_read > 0)
                log_info("note: io_uring is unavailable, read with pread");
        warn_read_everything(&opts, &stats, source);
        return backup_report(&stats, opts.name, source, json, &used);
}
