/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "hex.h"
#include "restore.h"
#include "timeutil.h"

static const char usage_text[] =
        "Usage: blkvault restore REPO SNAPSHOT DEST [OPTIONS]\n"
        "       blkvault restore REPO SNAPSHOT --libvirt=DOMAIN[:TARGET] [OPTIONS]\n\n"
        "Restore SNAPSHOT (an id, a unique id prefix, a name for its newest snapshot, NAME@latest, or\n"
        "'latest' when all snapshots have one name) to DEST: a new file, written sparse, a block device\n"
        "at least as large as the image, or - for standard output.\n\n"
        "  --in-place               write into the existing disk image DEST (qcow2, raw ... as its\n"
        "                           header says) through qemu-nbd: it keeps its format, owner and\n"
        "                           inode; its virtual size must be the snapshot's\n"
        "  --libvirt=DOMAIN[:TARGET]  write into the disk TARGET of the shut-off libvirt domain, in\n"
        "                           place as --in-place (default: the snapshot's own disk, DOMAIN-TARGET,\n"
        "                           else the domain's only disk); a running domain is refused\n"
        "  --libvirt-uri=URI        libvirt's URI (default: $LIBVIRT_DEFAULT_URI, else qemu:///system)\n"
        "  --force                  replace an existing file (written beside it, renamed at the end),\n"
        "                           or overwrite a device that holds a filesystem, a LUKS container\n"
        "                           or a partition table (refused without it, naming what is there)\n"
        "  --skip-damaged           write damaged or missing data as zeroes and list those ranges (exit 4)\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              decoding threads (default: one per CPU)\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

static const char *damage_reason(const BvRestoreDamage *d)
{
        return d->error == -EBADMSG ? (d->map ? "map damaged" : "damaged") : (d->map ? "map missing" : "missing");
}

/* --skip-damaged: the ranges written as zeroes, one line each on stderr, and the exit status. */
static int report_damaged(const BvSnapshot *snap, const char *dest, const BvRestoreStats *stats, bool json)
{
        char a[32];
        if (stats->n_damaged == 0)
                return EXIT_OK;
        for (size_t i = 0; i < stats->n_damaged && !json; i++) {
                const BvRestoreDamage *d = &stats->damaged[i];
                fprintf(stderr, "zero-filled: offset %llu (0x%llx), length %llu: %s\n", (unsigned long long)d->offset,
                        (unsigned long long)d->offset, (unsigned long long)d->length, damage_reason(d));
        }
        log_error("snapshot %.8s restored to '%s' with %zu damaged or missing %s (%s) written as zeroes", snap->id,
                  dest, stats->n_damaged, stats->n_damaged == 1 ? "range" : "ranges",
                  format_bytes(stats->bytes_damaged, a));
        return EXIT_DAMAGE;
}

static struct json_object *json_damaged(const BvRestoreStats *stats)
{
        struct json_object *arr = json_object_new_array();
        for (size_t i = 0; arr && i < stats->n_damaged; i++)
                json_object_array_add(arr, BV_JSON_OBJECT({ "offset", json_object_new_uint64(stats->damaged[i].offset) },
                                                          { "length", json_object_new_uint64(stats->damaged[i].length) },
                                                          { "reason", json_object_new_string(damage_reason(&stats->damaged[i])) }));
        return arr;
}

/* The result line, or the JSON document with --json; then the damaged ranges. */
static int restore_report(const BvSnapshot *snap, const char *dest, const BvRestoreStats *stats, bool json)
{
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o =
                        BV_JSON_OBJECT({ "snapshot", json_object_new_string(snap->id) },
                                       { "size", json_object_new_uint64(stats->size) },
                                       { "bytes_written", json_object_new_uint64(stats->bytes_written) },
                                       { "bytes_zero", json_object_new_uint64(stats->bytes_zero) },
                                       { "seconds", json_object_new_double(stats->seconds) },
                                       { "map_nodes_prefetched", json_object_new_uint64(stats->map_prefetched) },
                                       { "map_fetches_at_once", json_object_new_uint64(stats->map_in_flight_max) },
                                       { "damaged", json_damaged(stats) });
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot print the result");
                json_print(o);
        } else {
                char a[32], b[32];
                log_info("restored snapshot %.8s to '%s': %s image, %s written, in %.1f s", snap->id, dest,
                         format_bytes(stats->size, a), format_bytes(stats->bytes_written, b), stats->seconds);
        }
        return report_damaged(snap, dest, stats, json);
}

/* Reports a restore stopped by a signal; returns 128 + the signal, as a shell would. */
static int report_interrupt(const BvSnapshot *snap, const char *dest, const BvRestoreStats *stats)
{
        char name[16];

        snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(interrupted) ? sigabbrev_np(interrupted) : "?");
        if (stats->device)
                log_error("restore to %s interrupted at offset %llu of %llu: the device holds a partial image",
                          dest, (unsigned long long)stats->written_below, (unsigned long long)stats->size);
        else
                log_error("restore of snapshot %.8s to '%s' interrupted by %s; nothing was left at '%s'", snap->id,
                          dest, name, dest);
        return 128 + interrupted;
}

/* Checks dest before anything is written (returns an exit code). *ret_target is where to write:
 * dest, or with --force over an existing file a temporary beside it (named in temp). */
static int restore_prepare(const char *dest, const BvSnapshot *snap, bool force, bool json, char *temp, size_t size,
                           const char **ret_target)
{
        int r;

        *ret_target = dest;
        if (strcmp(dest, "-") == 0) {
                if (json) {
                        log_error("--json and the destination '-' would both use standard output");
                        return EXIT_USAGE;
                }
                return EXIT_OK;
        }
        bool replace;
        r = restore_check_dest(dest, snap, force, &replace);
        if (r != EXIT_OK)
                return r;
        if (replace) {
                r = restore_temp_name(dest, temp, size);
                if (r < 0)
                        return log_error_errno(r, "cannot pick a temporary name beside '%s'", dest);
                *ret_target = temp;
        }
        return EXIT_OK;
}

/* ": map node ID (where the index puts it)", the node a restore's walk stopped at. */
static void map_node_said(BvRepo *repo, const uint8_t id[BV_ID_SIZE], char *buf, size_t size)
{
        char hex[2 * BV_ID_SIZE + 1], pack[64];
        BvLocation loc;

        bv_hex_encode(id, BV_ID_SIZE, hex);
        if (bv_repo_locate(repo, id, &loc) < 0) {
                snprintf(buf, size, ": map node %s (not in the index)", hex);
                return;
        }
        bv_pack_path(loc.pack_id, pack);
        snprintf(buf, size, ": map node %s (%u bytes at offset %u of pack 'packs/%s')", hex, loc.length, loc.offset,
                 pack);
}

/* After a restore into target that returned r: reports a failure, or moves a temporary into place
 * at dest. Returns an exit code. */
static int restore_finish(BvRepo *repo, int r, const BvSnapshot *snap, const char *target, const char *dest,
                          const BvRestoreStats *stats)
{
        if (r == -ECANCELED && interrupted)
                return report_interrupt(snap, dest, stats);
        if (r == -EBADMSG || r == -EUCLEAN) {
                char said[STORAGE_SAID_MAX], node[256] = "";
                if (stats->bad_map)
                        map_node_said(repo, stats->bad_map_node, node, sizeof(node));
                log_error("restore of snapshot %.8s stopped: %s at image offset %llu (0x%llx)%s%s; '%s' %s", snap->id,
                          r == -EBADMSG ? "damaged data" : "missing data (the repository needs repair)",
                          (unsigned long long)stats->bad_offset, (unsigned long long)stats->bad_offset, node,
                          storage_said(repo, said, sizeof(said)), dest,
                          stats->device ? "holds a partial image" : "was not left behind as a file");
                return EXIT_DAMAGE;
        }
        if (r == -ENOTTY)
                return EXIT_USAGE;
        if (r >= 0 && target != dest && rename(target, dest) < 0) {
                r = -errno;
                (void)unlink(target);
        }
        if ((r == -ENOSPC || r == -EDQUOT) && strcmp(dest, "-") != 0) {
                /* the destination's filesystem, not the repository's: exit 8, not 6 */
                char a[32], b[32];
                log_error("the filesystem of '%s' is full: snapshot %.8s has %llu bytes (%s) of data (image %s); "
                          "free space there or restore elsewhere; nothing was left behind", dest, snap->id,
                          (unsigned long long)snap->stats.bytes_data, format_bytes(snap->stats.bytes_data, a),
                          format_bytes(snap->size, b));
                return EXIT_TOO_SMALL;
        }
        if (r < 0) {
                /* an S3 repository's storage says which object and what it answered */
                char said[STORAGE_SAID_MAX];
                return log_error_errno(r, "cannot restore snapshot %.8s to '%s'%s", snap->id, dest,
                                       storage_said(repo, said, sizeof(said)));
        }
        return EXIT_OK;
}

/* Where to restore: a new file or device (target: dest, or a temporary beside it), or an image
 * in place (format set). */
typedef struct Dest {
        const char *dest, *target, *format;
        char temp[4200], image[4200], image_format[32], what[4400];
} Dest;

static int in_place_prepare(const char *dest, bool force, const char **ret_format);

static int pick_dest(const char *libvirt, const char *uri, bool in_place, bool force, bool json, const BvSnapshot *snap,
                     Dest *d)
{
        int r;

        if (libvirt) {
                r = restore_libvirt_disk(libvirt, uri, snap, d->image, sizeof(d->image), d->image_format,
                                         sizeof(d->image_format), d->what, sizeof(d->what));
                if (r != EXIT_OK)
                        return r;
                log_info("restoring snapshot %.8s into %s, a %s image", snap->id, d->what, d->image_format);
                d->target = d->dest = d->image;
                d->format = d->image_format;
                return EXIT_OK;
        }
        if (in_place)
                return in_place_prepare(d->dest, force, &d->format);
        return restore_prepare(d->dest, snap, force, json, d->temp, sizeof(d->temp), &d->target);
}

/* --in-place: dest must be an existing image file (or device); its format in *ret_format. */
static int in_place_prepare(const char *dest, bool force, const char **ret_format)
{
        struct stat st;

        if (force) {
                log_error("--in-place writes into '%s' as it is: --force (which replaces a file) does not go with "
                          "it", dest);
                return EXIT_USAGE;
        }
        if (strcmp(dest, "-") == 0 || stat(dest, &st) < 0 || !S_ISREG(st.st_mode)) {
                log_error("--in-place needs an existing disk image file to write into ('%s' %s)", dest,
                          strcmp(dest, "-") == 0 ? "is standard output" : errno == ENOENT ? "does not exist"
                                                                                            : "is no regular file");
                return EXIT_USAGE;
        }
        int r = restore_image_format(dest, ret_format);
        if (r < 0)
                return log_error_errno(r, "cannot read the head of '%s'", dest);
        return EXIT_OK;
}

int cmd_restore(int argc, char **argv)
{
        SecretArgs sargs = {};
        BvRestoreOptions opts = {};
        bool json = false, force = false, in_place = false;
        const char *libvirt = NULL, *libvirt_uri = NULL;
        const CliOption options[] = {
                CLI_FLAG("json", &json),
                CLI_FLAG("in-place", &in_place),
                CLI_STR("libvirt", &libvirt),
                CLI_STR("libvirt-uri", &libvirt_uri),
                CLI_PARSED("threads", parse_threads, &opts.threads),
                CLI_FLAG("force", &force),
                CLI_FLAG("skip-damaged", &opts.skip_damaged),
                POINT_IN_TIME_OPTION(&sargs), {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "restore", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO SNAPSHOT [DEST]", .repo = true);
        int r;
        const char *path = argv[optind], *spec = argv[optind + 1], *dest = argv[optind + 2];
        if (!libvirt && !dest)
                return usage_error("restore", "REPO SNAPSHOT DEST");
        if (libvirt && (dest || in_place || force)) {
                log_error("--libvirt names where to restore: no DEST, --in-place or --force with it");
                return EXIT_USAGE;
        }
        if (libvirt_uri && !libvirt) {
                log_error("--libvirt-uri goes with --libvirt=DOMAIN");
                return EXIT_USAGE;
        }

        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        const BvSnapshot *snap;
        r = find_snapshot(repo, spec, &snap);
        if (r != EXIT_OK)
                return r;

        bool to_stdout = dest && strcmp(dest, "-") == 0;
        if (to_stdout && opts.skip_damaged) {
                log_error("--skip-damaged needs a file or device to restore to, not standard output");
                return EXIT_USAGE;
        }
        Dest d = { .dest = dest, .target = dest };
        r = pick_dest(libvirt, libvirt_uri, in_place, force, json, snap, &d);
        if (r != EXIT_OK)
                return r;
        dest = d.dest;
        const char *target = d.target, *format = d.format;

        Progress progress;
        progress_init(&progress, "restore", json);
        opts.progress = progress_update;
        opts.progress_userdata = &progress;
        opts.cancel = &interrupted;
        r = catch_interrupts(NULL);
        if (r != EXIT_OK)
                return r;
        BvRestoreStats stats = {};
        char detail[512] = "";
        if (to_stdout) {
                uint64_t start = bv_now_monotonic_ns();
                r = restore_to_stdout(repo, snap, &progress, &stats.bad_offset);
                /* a pipe gets every byte, holes too */
                stats = (BvRestoreStats){ .size = snap->size, .bytes_written = r >= 0 ? snap->size : 0,
                                          .seconds = (double)(bv_now_monotonic_ns() - start) / 1e9,
                                          .bad_offset = stats.bad_offset };
        } else if (format)
                r = bv_restore_image(repo, snap, dest, format, &opts, &stats, detail, sizeof(detail));
        else
                r = bv_restore(repo, snap, target, &opts, &stats);
        progress_done(&progress);
        _cleanup_free_ BvRestoreDamage *damaged = stats.damaged;
        int ec = r < 0 && format ? restore_image_failure(r, snap, dest, format, &stats, detail) : EXIT_OK;
        if (ec != EXIT_OK)
                return ec;
        r = restore_finish(repo, r, snap, target, dest, &stats);
        if (r != EXIT_OK)
                return r;
        return restore_report(snap, dest, &stats, json);
}
