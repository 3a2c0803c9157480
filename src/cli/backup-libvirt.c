/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkvault backup REPO libvirt:DOMAIN: the messages and the JSON of a domain's backup (running or shut off). */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "backup-libvirt.h"
#include "cli.h"
#include "snapshot-json.h"

static struct json_object *disk_json(const BvLibvirtDiskResult *dk)
{
        const BvBackupStats *s = &dk->stats;
        bool ok = dk->error == 0;

        return BV_JSON_OBJECT({ "disk", json_object_new_string(dk->target) },
                              { "name", json_object_new_string(dk->name) },
                              { ok ? "snapshot" : NULL, ok ? json_object_new_string(s->snapshot_id) : NULL },
                              { ok ? "size" : NULL, ok ? json_object_new_uint64(s->size) : NULL },
                              { ok ? "stats" : NULL, ok ? bv_snapshot_stats_json(&s->counts) : NULL },
                              { BV_JSON_OPT_STRING("incremental_from", dk->incremental[0] ? dk->incremental : NULL) },
                              { s->changed_from[0] ? "changed_from" : NULL,
                                s->changed_from[0] ? json_object_new_string(s->changed_from) : NULL },
                              { s->changed_from[0] ? "bytes_from_parent" : NULL,
                                s->changed_from[0] ? json_object_new_uint64(s->bytes_parent) : NULL },
                              { s->changed_reason[0] ? "read_whole_because" : NULL,
                                s->changed_reason[0] ? json_object_new_string(s->changed_reason) : NULL },
                              { ok ? NULL : "error", ok ? NULL : json_object_new_string(strerror(-dk->error)) });
}

/* The freeze's members of the JSON result (added to o). */
static int freeze_json(struct json_object *o, const BvVirtFreeze *f)
{
        bool frozen = f->agent && !f->note[0];
        if (!f->agent && !f->note[0]) /* the job never came to its start */
                return 0;
        struct json_object *m[] = {
                json_object_new_string(frozen ? "frozen" : "crash"),
                frozen ? json_object_new_int(f->filesystems) : NULL,
                frozen ? json_object_new_double((double)(f->hold_ns / 100000) / 10) : NULL,
                frozen ? NULL : json_object_new_string(f->note),
                f->stale_thawed >= 0 ? json_object_new_int(f->stale_thawed) : NULL,
                f->thaw_error < 0 ? json_object_new_string(f->thaw_words[0] ? f->thaw_words : strerror(-f->thaw_error))
                                  : NULL,
                f->paused ? json_object_new_boolean(true) : NULL,
        };
        const char *k[] = {"consistency", "filesystems_frozen", "freeze_hold_ms", "crash_consistent_because",
                           "thawed_left_frozen", "thaw_failed", "paused"};
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(m); i++)
                if (m[i] && r == 0)
                        r = json_object_object_add(o, k[i], m[i]);
                else
                        json_object_put(m[i]);
        return r < 0 ? -ENOMEM : 0;
}

static int print_json(const BvLibvirtResult *res)
{
        _cleanup_(json_object_putp) struct json_object *disks = json_object_new_array();

        for (size_t i = 0; disks && i < res->n_disks; i++) {
                struct json_object *d = disk_json(&res->disks[i]);
                if (!d || json_object_array_add(disks, d) < 0) {
                        json_object_put(d);
                        return log_error_errno(-ENOMEM, "cannot print the result");
                }
        }
        _cleanup_(json_object_putp) struct json_object *o =
                disks ? BV_JSON_OBJECT({ "domain", json_object_new_string(res->domain) },
                                       { "uuid", json_object_new_string(res->uuid) },
                                       { BV_JSON_OPT_STRING("checkpoint", res->checkpoint[0] ? res->checkpoint : NULL) },
                                       { "shut_off", json_object_new_boolean(res->offline) },
                                       { BV_JSON_OPT_STRING("ended_job", res->ended_job[0] ? res->ended_job : NULL) },
                                       { BV_JSON_OPT_STRING("shared_disks_left_out",
                                                            res->shared[0] ? res->shared : NULL) },
                                       { "checkpoints_deleted", json_object_new_uint64(res->checkpoints_deleted) },
                                       { res->reconnected ? "libvirtd_reconnected" : NULL,
                                         res->reconnected ? json_object_new_boolean(true) : NULL },
                                       { "disks", json_object_get(disks) })
                      : NULL;
        if (!o || freeze_json(o, &res->freeze) < 0)
                return log_error_errno(-ENOMEM, "cannot print the result");
        json_print(o);
        return EXIT_OK;
}

static void report_disk(const BvLibvirtResult *res, const BvLibvirtDiskResult *dk)
{
        const BvBackupStats *s = &dk->stats;
        char a[32], b[32], c[32];

        if (dk->error == -EHOSTDOWN && res->stopped) {
                log_error("backup of disk %s of '%s' failed (nothing was published for it): the domain stopped "
                          "during the backup", dk->target, res->domain);
                return;
        }
        if (dk->error == -ECONNRESET && res->reconnected) {
                log_error("backup of disk %s of '%s' failed (nothing was published for it): the connection to "
                          "libvirtd was lost during the backup (libvirtd restarted?) and the job's export with it",
                          dk->target, res->domain);
                return;
        }
        if (dk->error < 0) {
                log_error("backup of disk %s of '%s' failed (nothing was published for it): %s", dk->target,
                          res->domain, strerror(-dk->error));
                return;
        }
        log_info("snapshot %.8s (%s): %s disk, %s read, %s new, in %.1f s", s->snapshot_id, dk->name,
                 format_bytes(s->size, a), format_bytes(s->counts.bytes_read, b), format_bytes(s->counts.bytes_new, c),
                 s->counts.seconds);
        if (s->changed_from[0])
                log_info("read only what changed since checkpoint '%s' (snapshot %.8s)", dk->incremental,
                         s->changed_from);
        else if (s->changed_reason[0])
                log_info("read disk %s whole: %s", dk->target, s->changed_reason);
        if (s->counts.bytes_map_wrong > 0)
                log_warning("libvirt's bitmap of %s was wrong: %llu bytes it called unchanged had changed (this "
                            "snapshot read them)", dk->target, (unsigned long long)s->counts.bytes_map_wrong);
}

/* How consistent the job's instant is: frozen through the guest agent (and for how long), or
 * crash-consistent and why (no_freeze: the setting that asked for no freeze, "--no-freeze" or a
 * job's "freeze = no"); a guest an earlier run left frozen; a thaw that failed. */
static void report_freeze(const BvLibvirtResult *res, bool json, const char *no_freeze)
{
        const BvVirtFreeze *f = &res->freeze;
        char word[4 * sizeof(res->domain) + 8];

        if (f->stale_thawed >= 0)
                log_warning("the filesystems of '%s' were frozen when this backup began (an earlier run did not "
                            "finish?): thawed them (%d)", res->domain, f->stale_thawed);
        if (f->thaw_error < 0)
                log_error("the filesystems of '%s' are still frozen: the thaw after the backup job's start failed "
                          "(%s); its programs cannot write to them until they are thawed: run 'virsh domfsthaw %s' "
                          "(the next backup thaws them too, even with --no-freeze)", res->domain,
                          f->thaw_words[0] ? f->thaw_words : strerror(-f->thaw_error),
                          shell_word(res->domain, word, sizeof(word)));
        if (f->paused) {
                if (!json)
                        log_info("note: domain '%s' is paused: no guest agent can freeze its filesystems, so the "
                                 "backup is crash-consistent, the disks as they were when it was paused (what the "
                                 "guest had not written out then is not in it)", res->domain);
        } else if (f->not_asked) {
                if (!json)
                        log_info("note: no freeze (%s): the backup of '%s' is crash-consistent", no_freeze,
                                 res->domain);
        } else if (f->agent && !f->note[0]) {
                if (!json)
                        log_info("froze %d filesystem%s of '%s' through its guest agent for the job's start: held "
                                 "%.0f ms", f->filesystems, f->filesystems == 1 ? "" : "s", res->domain,
                                 (double)f->hold_ns / 1e6);
        } else if (f->agent)
                log_warning("cannot freeze the filesystems of '%s' (%s): the backup is crash-consistent", res->domain,
                            f->note);
        else if (!json)
                log_info("note: no guest agent answers (%s): the backup of '%s' is crash-consistent (as after a power "
                         "cut)", f->note, res->domain);
}

void report_libvirt_freeze(const BvLibvirtResult *res, const char *job)
{
        char setting[300];

        snprintf(setting, sizeof(setting), "freeze = no in [job %s]", job);
        if (res->freeze.agent || res->freeze.note[0])
                report_freeze(res, false, setting);
}

/* The failure of the run as a whole (before any disk was read). */
static int report_error(int r, const char *domain, const BvLibvirtResult *res)
{
        const char *d = res->detail;
        char word[4 * sizeof(res->domain) + 8];

        shell_word(domain, word, sizeof(word));
        if (res->not_connected) /* whatever libvirt's reason: the URI named, its words */
                return log_error_errno(r, "cannot connect to libvirt at '%s'%s%s", res->uri, d[0] ? ": " : "", d);
        switch (r) {
        case -ENXIO:
                log_error("domain '%s' has no disk '%s' (see virsh domblklist %s)", domain, d, word);
                return EXIT_USAGE;
        case -EMEDIUMTYPE:
                log_error("'%s' of domain '%s' is no disk (a CD-ROM or floppy: libvirt backs up none): leave it "
                          "out of --disk (virsh domblklist --details %s shows each device)", d, domain, word);
                return EXIT_USAGE;
        case -ETXTBSY:
                log_error("disk '%s' of domain '%s' is shared with other domains (<shareable/>): a backup job cannot "
                          "hold it at one instant (they write it past this domain's QEMU, which refuses the job its "
                          "lock): leave it out of --disk, and back its image up as a file or device while no domain "
                          "writes it", d, domain);
                return EXIT_USAGE;
        case -ENOMEDIUM:
                if (d[0])
                        log_error("disk '%s' of domain '%s' has no image file or block device (an empty drive, or a "
                                  "network disk, which blkvault does not back up): leave it out of --disk", d, domain);
                else
                        log_error("domain '%s' has no disk to back up: only CD-ROMs, empty drives or network disks "
                                  "(virsh domblklist --details %s shows each device)", domain, word);
                return EXIT_ERROR;
        case -EINVAL:
                if (d[0]) {
                        log_error("invalid snapshot name %s (choose one with --name)", d);
                        return EXIT_USAGE;
                }
                break;
        default:
                break;
        }
        if (res->reconnected)
                return log_error_errno(r, "backup of domain '%s' failed: %s (the connection to libvirtd was lost "
                                       "during it: libvirtd restarted?)", domain, d[0] ? d : strerror(-r));
        if (d[0])
                return log_error_errno(r, "backup of domain '%s' failed: %s", domain, d);
        return log_error_errno(r, "backup of domain '%s' failed", domain);
}

void report_libvirt_tidy(const BvLibvirtResult *res, const char *domain)
{
        if (res->ended_job[0])
                log_info("ended the backup job of '%s' that a run which died left (socket %s)", domain,
                           res->ended_job);
        if (res->shared[0])
                log_warning("not backed up: disk(s) %s of '%s', shared with other domains (<shareable/>): a backup "
                            "job cannot hold such a disk at one instant; back its image up as a file or device while "
                            "no domain writes it", res->shared, domain);
        if (res->reconnected)
                log_warning("the connection to libvirtd was lost during the backup of '%s' (libvirtd restarted?): "
                            "connected to it again to end the job", domain);
        if (res->checkpoints_deleted > 0)
                log_info("deleted %zu checkpoint(s) of '%s' that no snapshot needs any more", res->checkpoints_deleted,
                         domain);
        if (res->prune_error < 0)
                log_warning("cannot delete the checkpoints of '%s' that no snapshot needs: %s%s%s, ignoring", domain,
                            strerror(-res->prune_error), res->detail[0] ? ": " : "", res->detail);
        if (res->stale_removed > 0)
                log_info("removed %zu leftover(s) of domains libvirt no longer has from %s (scratch directories, "
                         "sockets, freeze marks of runs that died)", res->stale_removed, BV_LIBVIRT_RUN_DIR);
        if (res->stale_error < 0)
                log_warning("cannot remove what backups of domains libvirt no longer has left in %s: %s, ignoring",
                            BV_LIBVIRT_RUN_DIR, strerror(-res->stale_error));
        if (res->cleanup_error < 0)
                log_warning("cannot end the backup job of '%s' or remove its files: %s, ignoring (the next backup "
                            "removes them)", domain, strerror(-res->cleanup_error));
}

int backup_libvirt(BvRepo *repo, const char *source, BvLibvirtBackupOptions *o, bool json)
{
        const char *domain = source + strlen(BV_SOURCE_LIBVIRT_PREFIX);
        BvLibvirtResult res = {};
        int r = bv_backup_libvirt(repo, domain, o, &res), ec;

        if (res.freeze.agent || res.freeze.note[0])
                report_freeze(&res, json, "--no-freeze");
        if (r < 0 && res.n_disks == 0) {
                ec = report_error(r, domain, &res);
                bv_libvirt_result_done(&res);
                return ec;
        }
        if (r < 0 && res.disks[0].error == 0 && !res.disks[0].stats.snapshot_id[0]) /* the job did not begin */
                ec = report_error(r, domain, &res);
        else {
                if (res.offline && !json)
                        log_info("domain '%s' is shut off: its disks' images were read directly (libvirt cannot "
                                 "make a checkpoint of a shut-off domain: each snapshot keeps its parent's)",
                                 res.domain);
                for (size_t i = 0; !json && i < res.n_disks; i++)
                        report_disk(&res, &res.disks[i]);
                ec = json ? print_json(&res) : EXIT_OK;
                if (r < 0) /* a full repository says so, as every other backup does (blkvault(1)) */
                        ec = r == -ENOSPC || r == -EDQUOT ? EXIT_FULL : EXIT_ERROR;
        }
        report_libvirt_tidy(&res, domain);
        bv_libvirt_result_done(&res);
        return ec;
}
