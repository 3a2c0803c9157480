/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "sd-dl.h" /* libsystemd loaded on first use */
#include "drive.h"
#include "jobsource.h"
#include "run.h"
#include "state.h"

static const char usage_text[] =
        "Usage: blkvault target format DEVICE --name=NAME [--fs=ext4|xfs|btrfs] [--no-luks] [--yes]\n"
        "       blkvault target run DEVICE|NAME\n"
        "       blkvault target list\n\n"
        "format: register DEVICE as the backup drive NAME: a LUKS2 container (argon2id) opened by a\n"
        "new random key file (KEY-DIR/NAME.key, mode 0400), a filesystem, a repository sealed with\n"
        "the same key file, and the drive's [target NAME] section in conf.d/50-target-NAME.conf.\n"
        "A device that is in use is refused; one that holds a filesystem, a LUKS container or a\n"
        "partition table is refused unless --yes.\n"
        "run: back up every job of a registered drive to it and verify what was written, then unmount\n"
        "and lock it (a drive that is not registered is ignored, exit 0).\n"
        "list: the registered drives.\n\n"
        "  --name=NAME              the target's name (letters, digits, '.', '_', '-')\n"
        "  --fs=TYPE                ext4 (default), xfs or btrfs\n"
        "  --no-luks                no LUKS container (the filesystem's UUID names the drive)\n"
        "  --yes                    destroy what is on DEVICE\n"
        "  --key-dir=DIR            where the key file goes (default " BV_KEY_DIR ")\n"
        APPLIANCE_OPTIONS_HELP;

/* For tests only (argon2 under emulation is slow): fixed LUKS keyslot costs instead of the
 * benchmark, as "ITERATIONS,MEMORY_KIB". */
#define BV_TEST_LUKS_ARGON2_ENV "BLKVAULT_TEST_LUKS_ARGON2"

typedef struct FormatArgs {
        const char *device, *name, *fs, *key_dir, *config, *run_dir, *state_dir;
        bool luks, yes;
        const BvLuksCost *cost; /* NULL: benchmarked */
} FormatArgs;

/* $BLKVAULT_TEST_LUKS_ARGON2 into *cost (a->cost stays NULL when it is not set). */
static int parse_test_cost(FormatArgs *a, BvLuksCost *cost)
{
        const char *env = getenv(BV_TEST_LUKS_ARGON2_ENV);
        char *end;
        if (!env || !env[0])
                return EXIT_OK;
        errno = 0;
        unsigned long it = strtoul(env, &end, 10), mem = *end == ',' ? strtoul(end + 1, &end, 10) : 0;
        if (errno || *end || it == 0 || mem == 0 || it > UINT32_MAX || mem > UINT32_MAX || env[0] == '-') {
                log_error("%s must be ITERATIONS,MEMORY_KIB (e.g. 4,32768), not '%s'", BV_TEST_LUKS_ARGON2_ENV, env);
                return EXIT_USAGE;
        }
        *cost = (BvLuksCost){ .iterations = (uint32_t)it, .memory_kib = (uint32_t)mem };
        a->cost = cost;
        return EXIT_OK;
}

/* Refuses a device in use, or one with something on it unless --yes (then *ret_wipe: the caller
 * wipes it once the format can start). */
static int format_check_device(const FormatArgs *a, bool *ret_wipe)
{
        int fd = bv_drive_open_exclusive(a->device);
        if (fd == -EBUSY)
                return log_device_in_use(a->device, "refusing to format it");
        if (fd < 0)
                return log_error_errno(fd, "cannot open '%s'", a->device);
        close(fd);
        char what[128];
        int r = device_holds(a->device, what, sizeof(what));
        if (r < 0)
                return log_error_errno(r, "cannot probe '%s'", a->device);
        *ret_wipe = r > 0;
        if (*ret_wipe && !a->yes) {
                log_error("'%s' holds %s; refusing to format it (--yes destroys it)", a->device, what);
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

/* The filesystem on dev (the LUKS mapper device or the drive), then the repository inside. */
static int format_fs_and_repo(const FormatArgs *a, const char *dev, const char *key_file, const char *repo_rel,
                              char fs_uuid[40])
{
        char out[4096] = "", mnt[] = "/run/blkvault/format.XXXXXX", repo[4200];
        BvDriveProbe pr;
        BvRepoConfig cfg;

        int r = bv_drive_mkfs(dev, a->fs, a->name, out, sizeof(out));
        if (r != 0)
                return r < 0 ? log_error_errno(r, "cannot run mkfs.%s", a->fs) :
                               (log_error("mkfs.%s on '%s' failed (exit status %d): %s", a->fs, dev, r, out),
                                EXIT_ERROR);
        r = bv_drive_probe(dev, &pr);
        if (r < 0)
                return log_error_errno(r, "cannot probe the new filesystem on '%s'", dev);
        snprintf(fs_uuid, 40, "%s", pr.uuid);
        if (mkdir("/run/blkvault", 0755) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "cannot create '/run/blkvault'");
        if (!mkdtemp(mnt))
                return log_error_errno(-errno, "cannot create a mountpoint in /run/blkvault");
        r = bv_drive_mount(dev, a->fs, mnt, NULL, false);
        if (r < 0) {
                rmdir(mnt);
                return log_error_errno(r, "cannot mount the new %s filesystem of '%s'", a->fs, dev);
        }
        snprintf(repo, sizeof(repo), "%s/%s", mnt, repo_rel);
        bv_repo_config_default(&cfg);
        BvSecret secret = { .key_file = key_file };
        r = bv_repo_init(repo, &cfg, &secret);
        int u = umount2(mnt, 0) < 0 ? -errno : 0;
        rmdir(mnt);
        if (r < 0)
                return log_error_errno(r, "cannot create the repository on '%s'", dev);
        if (u < 0)
                return log_error_errno(u, "cannot unmount '%s'", mnt);
        return EXIT_OK;
}

static int format_luks(const FormatArgs *a, const char *key_file, char uuid[40], char fs_uuid[40])
{
        char mapper[256], name[128];
        int r = bv_luks_format(a->device, key_file, a->cost, uuid);
        if (r < 0)
                return log_error_errno(r, "cannot create a LUKS2 container on '%s'", a->device);
        snprintf(name, sizeof(name), "blkvault-format-%s", a->name);
        r = bv_luks_open(a->device, name, key_file, mapper, sizeof(mapper));
        if (r == -ENXIO) {
                /* bv_luks_available said yes a moment ago */
                log_error("cannot open the LUKS container on '%s': the kernel has no device-mapper (dm-crypt); "
                          "'%s' now holds that LUKS header: load dm_crypt, or format it without LUKS "
                          "(--no-luks --yes)", a->device, a->device);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot open the LUKS container on '%s'", a->device);
        int ec = format_fs_and_repo(a, mapper, key_file, BV_CONF_DEFAULT_REPOSITORY, fs_uuid);
        r = bv_luks_close(name);
        if (r < 0 && ec == EXIT_OK)
                return log_error_errno(r, "cannot close the LUKS container '%s'", name);
        return ec;
}

static int target_format(const FormatArgs *a)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        _cleanup_free_ char *key_file = NULL, *conf_file = NULL;
        char uuid[40] = "", fs_uuid[40] = "";
        bool must_exist;
        const char *main_path = bv_conf_main_path(a->config, &must_exist);

        int ec = load_config(a->config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        const BvConfTarget *old = bv_conf_target_by_name(conf, a->name);
        if (old) {
                log_error("target '%s' is already registered (%s:%u): give this drive another --name (to reuse the "
                          "name, remove that section and move the old drive's key file away)",
                          a->name, old->where.file, old->where.line);
                return EXIT_ERROR;
        }
        bool wipe = false;
        ec = format_check_device(a, &wipe);
        if (ec != EXIT_OK)
                return ec;
        /* Before anything is written: a LUKS header that cannot be opened would be left behind
         * (issue 21, finding 7), after a key derivation of seconds. */
        int r = a->luks ? bv_luks_available() : 0;
        if (r == -ENXIO) {
                log_error("this kernel has no dm-crypt (device-mapper's crypt target), which a LUKS drive needs: "
                          "load it (modprobe dm_crypt), or format '%s' without LUKS (--no-luks); nothing was "
                          "written", a->device);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot tell whether this kernel has dm-crypt");
        /* The key file before anything is destroyed: a format that cannot start leaves the drive as
         * it was. */
        r = bv_key_file_create(a->key_dir, a->name, &key_file);
        if (r == -EEXIST) {
                log_error("the key file '%s/%s.key' exists: it opens the drive once registered as %s; move it away "
                          "(keep it while that drive's backups matter) or give this drive another --name",
                          a->key_dir, a->name, a->name);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot create the key file '%s/%s.key'", a->key_dir, a->name);
        r = wipe ? bv_drive_wipe(a->device) : 0;
        if (r < 0) {
                unlink(key_file);
                return log_error_errno(r, "cannot wipe '%s'", a->device);
        }
        ec = a->luks ? format_luks(a, key_file, uuid, fs_uuid) :
                       format_fs_and_repo(a, a->device, key_file, BV_CONF_DEFAULT_REPOSITORY, fs_uuid);
        if (ec != EXIT_OK) {
                unlink(key_file);
                return ec;
        }
        BvConfTarget t = { .name = (char *)a->name, .uuid = a->luks ? uuid : fs_uuid, .key_file = key_file,
                           .repository = (char *)BV_CONF_DEFAULT_REPOSITORY, .luks = a->luks };
        r = bv_conf_write_target(main_path, &t, &conf_file);
        if (r < 0)
                return log_error_errno(r, "cannot register target '%s' in the configuration", a->name);
        printf("target '%s' on %s: %s%s, UUID %s, repository '%s', registered in %s\n", a->name, a->device,
               a->luks ? "LUKS2 with " : "", a->fs, t.uuid, t.repository, conf_file);
        printf("Keep a copy of the key file %s somewhere other than this machine and the drive:\n"
               "without it %s.\n",
               key_file, a->luks ? "neither the drive's LUKS container nor the repository on it can be opened" :
                                   "the repository on the drive cannot be opened");
        return EXIT_OK;
}

static int target_run(const FormatArgs *a, const char *what)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        _cleanup_free_ char *found = NULL;
        const BvConfTarget *t;
        const char *dev = what;

        int ec = load_config(a->config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        if (what[0] == '/') {
                BvDriveProbe pr;
                int r = bv_drive_probe(what, &pr);
                if (r < 0)
                        return log_error_errno(r, "cannot probe '%s'", what);
                t = pr.uuid[0] ? bv_conf_target_by_uuid(conf, pr.uuid) : NULL;
                if (!t) {
                        printf("debug: '%s' (UUID %s) is not a registered target, ignoring\n", what,
                               pr.uuid[0] ? pr.uuid : "none");
                        return EXIT_OK;
                }
        } else {
                t = bv_conf_target_by_name(conf, what);
                if (!t) {
                        log_error("no target '%s' in the configuration (see 'blkvault target list')", what);
                        return EXIT_ERROR;
                }
                if (!t->mistake && bv_drive_find_by_uuid(t->uuid, &found) < 0) {
                        log_error("target '%s' (UUID %s) is not attached", t->name, t->uuid);
                        return EXIT_ERROR;
                }
                dev = found ? found : "(unknown)";
        }
        BvTargetRun run;
        if (t->mistake) { /* nothing of a section with a mistake is trusted: reported as a failed run */
                log_error("target %s: %s", t->name, t->mistake);
                run = (BvTargetRun){ .target = t, .device = dev, .result = -EINVAL, .step = "configuration" };
                return report_run(&run, conf, a->state_dir);
        }
        sd_notifyf(false, "STATUS=target %s: running", t->name);
        ec = catch_interrupts(bv_job_cancel);
        if (ec != EXIT_OK)
                return ec;
        BvRunProgress bp;
        RunProgress rp;
        run_progress_init(&rp, &bp);
        bv_target_run_drive(conf, t, dev, NULL, a->run_dir, &bp, &run);
        run_progress_done(&rp);
        ec = report_run(&run, conf, a->state_dir);
        request_copies(&run, conf);
        bv_target_run_done(&run);
        return ec;
}

static int target_list(const char *config)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        int ec = load_config(config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        for (size_t i = 0; i < conf->n_targets; i++) {
                const BvConfTarget *t = &conf->targets[i];
                _cleanup_free_ char *dev = NULL;
                bool attached = t->uuid && bv_drive_find_by_uuid(t->uuid, &dev) >= 0;
                printf("%-16s %s %-12s %-7s %s%s%s%s\n", t->name, t->uuid ? t->uuid : "(no uuid)",
                       t->mode == BV_TARGET_RESTORE_ONLY ? "restore-only" : "backup", t->luks ? "luks" : "no-luks",
                       attached ? "attached" : "absent", attached ? " " : "", attached ? dev : "",
                       t->mistake ? " (skipped: its section has a mistake)" : "");
        }
        return EXIT_OK;
}

int cmd_target(int argc, char **argv)
{
        FormatArgs a = { .fs = "ext4", .key_dir = BV_KEY_DIR, .luks = true };
        BvLuksCost cost;
        const CliOption options[] = {
                CLI_STR("name", &a.name),       CLI_STR("fs", &a.fs),           CLI_UNSET("no-luks", &a.luks),
                CLI_FLAG("yes", &a.yes),        CLI_STR("key-dir", &a.key_dir), CLI_STR("config", &a.config),
                CLI_STR("run-dir", &a.run_dir), CLI_STR("state-dir", &a.state_dir), {},
        };
        static const CliKeyword keywords[] = {
                { "format", "DEVICE --name=NAME" }, { "run", "DEVICE|NAME" }, { "list", "" }, {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "target", .usage = usage_text, .options = options,
                            .keywords = keywords);
        const char *verb = argv[optind];
        if (strcmp(verb, "list") == 0)
                return target_list(a.config);
        if (strcmp(verb, "run") == 0)
                return target_run(&a, argv[optind + 1]);
        a.device = argv[optind + 1];
        if (!a.name) {
                log_error("target format needs --name=NAME");
                return EXIT_USAGE;
        }
        if (strcmp(a.fs, "ext4") != 0 && strcmp(a.fs, "xfs") != 0 && strcmp(a.fs, "btrfs") != 0) {
                log_error("unknown filesystem '%s' (ext4, xfs or btrfs)", a.fs);
                return EXIT_USAGE;
        }
        if (strspn(a.name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(a.name) ||
            !a.name[0] || a.name[0] == '.' || a.name[0] == '-' || strlen(a.name) > BV_CONF_NAME_MAX) {
                log_error("invalid target name '%s' (letters, digits, '.', '_' and '-', at most %d)", a.name,
                          BV_CONF_NAME_MAX);
                return EXIT_USAGE;
        }
        int ec = parse_test_cost(&a, &cost);
        return ec != EXIT_OK ? ec : target_format(&a);
}
