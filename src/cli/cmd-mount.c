/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault mount / umount: a snapshot's filesystem mounted read-only, without restoring it.
 *
 *   nbdkit (the plugin, read-only, on a unix socket in the state directory)
 *     └ nbd-client → /dev/nbdN        when the kernel has the nbd driver and nbd-client exists
 *     └ nbdfuse → DIR/fuse/image      otherwise (a FUSE file backed by the export)
 *         └ losetup -r -P → /dev/loopN[pM] → mount -o ro (+ noload / norecovery)
 *
 * Everything set up is recorded in /run/blkvault/mounts/<name>/state.json as it happens, so
 * umount (and a failed mount) can undo it step by step, each step tolerant of its resource
 * already being gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "mounts.h"
#include "process.h"
#include "source.h"

#define STATE_ROOT "/run/blkvault/mounts"
#define WAIT_READY_MS 60000
#define WAIT_GONE_MS 10000

typedef struct MountState {
        char dir[PATH_MAX];        /* the private state directory */
        char mountpoint[PATH_MAX];
        char repo[PATH_MAX];
        char snapshot[80];
        char socket[PATH_MAX];
        pid_t nbdkit_pid;
        char fuse_dir[PATH_MAX];   /* nbdfuse's mountpoint; the export is fuse_dir/image */
        pid_t fuse_pid;
        char nbd_device[64];
        char loop_device[64];
        char fs_device[80];
        char fstype[32];
        bool mounted;
} MountState;

static const char *const state_files[] = { "state.json", "nbd.sock",   "nbdkit.pid",
                                           "nbdkit.log", "nbdfuse.pid", "nbdfuse.log" };

/* Copies src into dst, cut to size (the fields hold paths the kernel limits anyway). */
static void copy_str(char *dst, size_t size, const char *src)
{
        size_t n = src ? MIN(strlen(src), size - 1) : 0;
        memcpy(dst, src ? src : "", n);
        dst[n] = '\0';
}

/* The state directory of a mountpoint: its absolute path escaped like systemd does ("/mnt/a b"
 * becomes "mnt-a\x20b"), so one mountpoint has exactly one directory. */
static void state_dir_for(const char *mountpoint, char *buf, size_t size)
{
        size_t n = (size_t)snprintf(buf, size, "%s/", STATE_ROOT);
        const char *p = mountpoint;
        while (*p == '/')
                p++;
        if (!*p)
                p = "-";
        for (; *p && n + 5 < size; p++) {
                unsigned char ch = (unsigned char)*p;
                if (ch == '/')
                        buf[n++] = '-';
                else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                         ch == '_' || (ch == '.' && p[-1] != '/' && p != mountpoint))
                        buf[n++] = (char)ch;
                else
                        n += (size_t)snprintf(buf + n, size - n, "\\x%02x", ch);
        }
        buf[n] = '\0';
}

static int state_path(const MountState *s, const char *name, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%s/%s", s->dir, name);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* An empty field is left out of the state file. */
static int json_add_string(struct json_object *o, const char *key, const char *value)
{
        return value[0] ? bv_json_add(o, key, json_object_new_string(value)) : 0;
}


static int state_save(const MountState *s)
{
        _cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
        int r;
        if (!o)
                return -ENOMEM;
        if ((r = json_add_string(o, "mountpoint", s->mountpoint)) < 0 ||
            (r = json_add_string(o, "repository", s->repo)) < 0 ||
            (r = json_add_string(o, "snapshot", s->snapshot)) < 0 ||
            (r = json_add_string(o, "socket", s->socket)) < 0 ||
            (r = bv_json_add(o, "nbdkit_pid", json_object_new_int64(s->nbdkit_pid))) < 0 ||
            (r = json_add_string(o, "fuse_dir", s->fuse_dir)) < 0 ||
            (r = bv_json_add(o, "nbdfuse_pid", json_object_new_int64(s->fuse_pid))) < 0 ||
            (r = json_add_string(o, "nbd_device", s->nbd_device)) < 0 ||
            (r = json_add_string(o, "loop_device", s->loop_device)) < 0 ||
            (r = json_add_string(o, "fs_device", s->fs_device)) < 0 ||
            (r = json_add_string(o, "fstype", s->fstype)) < 0 ||
            (r = bv_json_add(o, "mounted", json_object_new_boolean(s->mounted))) < 0)
                return r;
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        _cleanup_close_ int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return bv_write_file_durable(dfd, "state.json", text, strlen(text), true);
}

static void json_get_string(struct json_object *o, const char *key, char *dst, size_t size)
{
        struct json_object *v;
        if (json_object_object_get_ex(o, key, &v))
                copy_str(dst, size, json_object_get_string(v));
}

static pid_t json_get_pid(struct json_object *o, const char *key)
{
        struct json_object *v;
        return json_object_object_get_ex(o, key, &v) ? (pid_t)json_object_get_int64(v) : 0;
}

static int state_load(MountState *s)
{
        char path[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r = state_path(s, "state.json", path, sizeof(path));
        if (r < 0)
                return r;
        r = bv_read_file(AT_FDCWD, path, 1 << 20, (void **)&text, &len);
        if (r < 0)
                return r;
        _cleanup_(json_object_putp) struct json_object *o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        json_get_string(o, "mountpoint", s->mountpoint, sizeof(s->mountpoint));
        json_get_string(o, "repository", s->repo, sizeof(s->repo));
        json_get_string(o, "snapshot", s->snapshot, sizeof(s->snapshot));
        json_get_string(o, "socket", s->socket, sizeof(s->socket));
        json_get_string(o, "fuse_dir", s->fuse_dir, sizeof(s->fuse_dir));
        json_get_string(o, "nbd_device", s->nbd_device, sizeof(s->nbd_device));
        json_get_string(o, "loop_device", s->loop_device, sizeof(s->loop_device));
        json_get_string(o, "fs_device", s->fs_device, sizeof(s->fs_device));
        json_get_string(o, "fstype", s->fstype, sizeof(s->fstype));
        s->nbdkit_pid = json_get_pid(o, "nbdkit_pid");
        s->fuse_pid = json_get_pid(o, "nbdfuse_pid");
        struct json_object *m;
        s->mounted = json_object_object_get_ex(o, "mounted", &m) && json_object_get_boolean(m);
        return 0;
}

/* Copies a helper's log to our stderr, so its own words explain a failure. */
static void show_log(const MountState *s, const char *name)
{
        char path[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len;
        if (state_path(s, name, path, sizeof(path)) < 0 ||
            bv_read_file(AT_FDCWD, path, 1 << 16, (void **)&text, &len) < 0)
                return;
        if (len > 0)
                fprintf(stderr, "%s", text);
}

/* The loop device still backed by our export (not detached, nor reused by someone else)? */
static bool loop_is_ours(const MountState *s)
{
        char want[PATH_MAX + 16];

        if (s->nbd_device[0])
                copy_str(want, sizeof(want), s->nbd_device);
        else
                snprintf(want, sizeof(want), "%s/image", s->fuse_dir);
        return bv_loop_backed_by(s->loop_device, want);
}

/* Undoes whatever s records, newest first. Resources already gone are fine; returns the first
 * real failure (the state is then kept, so umount can be run again). */
static int teardown(MountState *s, bool verbose)
{
        int r;

        if (s->mountpoint[0] && s->mounted && bv_is_mountpoint(s->mountpoint)) {
                if (umount2(s->mountpoint, 0) < 0 && errno != EINVAL && errno != ENOENT) {
                        r = -errno;
                        if (r == -EBUSY)
                                log_error("cannot unmount '%s': it is busy (a process has a file open or its "
                                          "working directory there)", s->mountpoint);
                        else
                                log_error_errno(r, "cannot unmount '%s'", s->mountpoint);
                        return r;
                }
                if (verbose)
                        log_info("unmounted %s from '%s'", s->fs_device, s->mountpoint);
        }
        s->mounted = false;

        if (s->loop_device[0] && loop_is_ours(s)) {
                r = bv_loop_detach(s->loop_device);
                if (r < 0) {
                        log_error_errno(r, "cannot detach loop device %s", s->loop_device);
                        return r;
                }
                /* detaching completes when the last opener (also our fd) has closed it */
                for (unsigned t = 0; t < WAIT_GONE_MS && loop_is_ours(s); t += 20)
                        bv_sleep_ms(20);
                if (loop_is_ours(s)) {
                        log_error("loop device %s is still in use, cannot detach it", s->loop_device);
                        return -EBUSY;
                }
                if (verbose)
                        log_info("detached loop device %s", s->loop_device);
        }
        s->loop_device[0] = '\0';

        if (s->fuse_dir[0] && bv_is_mountpoint(s->fuse_dir)) {
                char *argv[] = { "fusermount3", "-u", "-q", s->fuse_dir, NULL };
                r = bv_run(argv, NULL, 0);
                if (r != 0 && bv_is_mountpoint(s->fuse_dir)) {
                        log_error("cannot unmount the nbdfuse mount '%s' (fusermount3 exited %d)", s->fuse_dir, r);
                        return -EBUSY;
                }
        }
        if (s->fuse_pid > 0 && !bv_process_wait_gone(s->fuse_pid, "nbdfuse", WAIT_GONE_MS))
                bv_process_stop(s->fuse_pid, "nbdfuse", WAIT_GONE_MS);
        s->fuse_pid = 0;

        if (s->nbd_device[0]) {
                char *argv[] = { "nbd-client", "-d", s->nbd_device, NULL };
                (void)bv_run(argv, NULL, 0);
                s->nbd_device[0] = '\0';
        }

        bv_process_stop(s->nbdkit_pid, "nbdkit", WAIT_GONE_MS);
        s->nbdkit_pid = 0;

        char path[PATH_MAX];
        for (size_t i = 0; i < ELEMENTSOF(state_files); i++)
                if (state_path(s, state_files[i], path, sizeof(path)) == 0)
                        (void)unlink(path);
        if (s->fuse_dir[0])
                (void)rmdir(s->fuse_dir);
        if (rmdir(s->dir) < 0 && errno != ENOENT) {
                r = -errno;
                log_error_errno(r, "cannot remove the state directory '%s'", s->dir);
                return r;
        }
        return 0;
}

/* Starts nbdkit detached on the state directory's socket and waits until the export answers. */
static int start_nbdkit(MountState *s, const SecretArgs *sargs, const BvSecret *secret, const char *cache)
{
        char pidfile[PATH_MAX], log[PATH_MAX];
        PluginArgs pa;
        char *args[32];
        size_t n = 0;
        int r;

        if ((r = state_path(s, "nbd.sock", s->socket, sizeof(s->socket))) < 0 ||
            (r = state_path(s, "nbdkit.pid", pidfile, sizeof(pidfile))) < 0 ||
            (r = state_path(s, "nbdkit.log", log, sizeof(log))) < 0)
                return log_error_errno(r, "state directory path too long");
        args[n++] = "nbdkit";
        args[n++] = "--log=stderr";
        args[n++] = "--pidfile";
        args[n++] = pidfile;
        args[n++] = "--unix";
        args[n++] = s->socket;
        args[n++] = "--readonly";
        args[n++] = (char *)nbdkit_threads_arg(&pa);
        r = plugin_args(&pa, s->repo, s->snapshot, cache, sargs, secret, args, &n);
        if (r != EXIT_OK)
                return r;
        args[n] = NULL;

        /* nbdkit forks into the background once its socket is bound; the first process exits. */
        pid_t pid = bv_spawn(args, log, true);
        plugin_args_done(&pa);
        if (pid < 0)
                return log_error_errno(pid, "cannot run nbdkit");
        r = bv_wait_exit(pid);
        if (r != 0) {
                show_log(s, "nbdkit.log");
                log_error("nbdkit failed to start (exit status %d)", r);
                return EXIT_ERROR;
        }
        for (unsigned t = 0; t < WAIT_READY_MS; t += 20) {
                if (s->nbdkit_pid <= 0)
                        s->nbdkit_pid = bv_pidfile_read(pidfile);
                if (s->nbdkit_pid > 0) {
                        if (!bv_process_is(s->nbdkit_pid, "nbdkit"))
                                break;
                        if (bv_nbd_export_answers(s->socket))
                                return state_save(s) < 0 ? EXIT_ERROR : EXIT_OK;
                }
                bv_sleep_ms(20);
        }
        show_log(s, "nbdkit.log");
        log_error("nbdkit did not start serving on '%s'", s->socket);
        return EXIT_ERROR;
}

/* The export as a local block device (nbd-client) or file (nbdfuse); returns its path in dev. */
static int attach_export(MountState *s, char *dev, size_t size)
{
        int r;
        if (bv_nbd_kernel_has() && bv_have_command("nbd-client")) {
                r = bv_nbd_find_free(s->nbd_device, sizeof(s->nbd_device));
                if (r < 0)
                        return log_error_errno(r, "no free /dev/nbdN device");
                char *argv[] = { "nbd-client", "-unix", s->socket, s->nbd_device, "-readonly", NULL };
                r = bv_run(argv, NULL, 0);
                if (r != 0) {
                        log_error("nbd-client could not attach '%s' to %s (exit status %d)", s->socket,
                                  s->nbd_device, r);
                        s->nbd_device[0] = '\0';
                        return EXIT_ERROR;
                }
                log_info("attached the export to %s (nbd-client)", s->nbd_device);
                copy_str(dev, size, s->nbd_device);
                return state_save(s) < 0 ? EXIT_ERROR : EXIT_OK;
        }

        char image[PATH_MAX + 16], pidfile[PATH_MAX], log[PATH_MAX];
        if ((r = state_path(s, "fuse", s->fuse_dir, sizeof(s->fuse_dir))) < 0 ||
            (r = state_path(s, "nbdfuse.pid", pidfile, sizeof(pidfile))) < 0 ||
            (r = state_path(s, "nbdfuse.log", log, sizeof(log))) < 0)
                return log_error_errno(r, "state directory path too long");
        if (mkdir(s->fuse_dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "cannot create '%s'", s->fuse_dir);
        snprintf(image, sizeof(image), "%s/image", s->fuse_dir);
        /* nbdfuse stays in the foreground: run it detached, in its own session. */
        char *argv[] = { "nbdfuse", "-r", "-P", pidfile, image, "--unix", s->socket, NULL };
        pid_t pid = bv_spawn(argv, log, true);
        if (pid < 0)
                return log_error_errno(pid, "cannot run nbdfuse");
        s->fuse_pid = pid;
        if (state_save(s) < 0)
                return EXIT_ERROR;
        for (unsigned t = 0; t < WAIT_READY_MS; t += 20) {
                if (waitpid(pid, NULL, WNOHANG) == pid) {
                        s->fuse_pid = 0;
                        break;
                }
                if (access(pidfile, F_OK) == 0 && access(image, R_OK) == 0) {
                        log_info("attached the export as %s (nbdfuse)", image);
                        copy_str(dev, size, image);
                        return EXIT_OK;
                }
                bv_sleep_ms(20);
        }
        show_log(s, "nbdfuse.log");
        log_error("nbdfuse did not make the export appear as '%s'", image);
        return EXIT_ERROR;
}

/* Picks the filesystem on the attached export: --partition=N, else the whole disk's, else the
 * first partition with a filesystem libblkid knows. Sets fstype and the byte range to loop. */
static int pick_filesystem(MountState *s, const char *dev, int *partition_io, uint64_t *ret_offset,
                           uint64_t *ret_size)
{
        int partition = *partition_io;
        _cleanup_(bv_probe_done) BvProbe probe = {};
        int r = bv_source_probe(dev, &probe);
        if (r < 0)
                return log_error_errno(r, "cannot probe '%s'", dev);
        size_t count = probe.n_partitions;

        if (partition <= 0 && probe.fstype) {
                copy_str(s->fstype, sizeof(s->fstype), probe.fstype);
                *ret_offset = *ret_size = 0;
                return EXIT_OK;
        }
        for (size_t i = 0; i < count; i++) {
                const BvProbePartition *p = &probe.partitions[i];
                int number = (int)p->number;
                if (partition > 0 ? number != partition : !p->fstype)
                        continue;
                if (!p->fstype) {
                        log_error("partition %d of snapshot %.8s holds no filesystem libblkid recognises",
                                  number, s->snapshot);
                        return EXIT_ERROR;
                }
                copy_str(s->fstype, sizeof(s->fstype), p->fstype);
                *ret_offset = p->start;
                *ret_size = p->size;
                *partition_io = number;
                return EXIT_OK;
        }
        if (partition > 0)
                log_error("snapshot %.8s has no partition %d (it has %zu partition%s)", s->snapshot, partition,
                          count, count == 1 ? "" : "s");
        else
                log_error("snapshot %.8s holds no filesystem libblkid recognises%s", s->snapshot,
                          count ? " on the whole disk or any partition" : "");
        return EXIT_ERROR;
}

static int mount_filesystem(MountState *s)
{
        int r = bv_mount_readonly(s->fs_device, s->mountpoint, s->fstype);
        if (r < 0)
                return log_error_errno(r, "cannot mount %s (%s) read-only on '%s'", s->fs_device, s->fstype,
                                       s->mountpoint);
        s->mounted = true;
        return state_save(s) < 0 ? EXIT_ERROR : EXIT_OK;
}

/* Sets up everything after the state directory exists; on failure the caller tears down. */
static int mount_steps(MountState *s, const SecretArgs *sargs, const BvSecret *secret, const char *cache,
                       int partition)
{
        char dev[PATH_MAX + 16], out[256];
        int r = start_nbdkit(s, sargs, secret, cache);
        if (r != EXIT_OK)
                return r;
        log_info("serving snapshot %.8s of '%s' on %s (nbdkit pid %d)", s->snapshot, s->repo, s->socket,
                 (int)s->nbdkit_pid);
        r = attach_export(s, dev, sizeof(dev));
        if (r != EXIT_OK)
                return r;
        /* One read-only loop device over the filesystem's byte range: this works also where the
         * kernel does not scan loop devices for partitions. */
        uint64_t offset = 0, size = 0;
        r = pick_filesystem(s, dev, &partition, &offset, &size);
        if (r != EXIT_OK)
                return r;
        r = bv_loop_attach_readonly(dev, offset, size, out, sizeof(out));
        if (r < 0)
                return log_error_errno(r, "cannot set up a loop device on '%s'", dev);
        if (r > 0) {
                log_error("losetup could not set up a loop device on '%s' (exit status %d)", dev, r);
                return EXIT_ERROR;
        }
        copy_str(s->loop_device, sizeof(s->loop_device), out);
        copy_str(s->fs_device, sizeof(s->fs_device), out);
        if (state_save(s) < 0)
                return EXIT_ERROR;
        if (size)
                log_info("loop device %s (read-only) on the partition at byte %" PRIu64 " of %s", s->loop_device,
                         offset, dev);
        else
                log_info("loop device %s (read-only) on %s", s->loop_device, dev);
        r = mount_filesystem(s);
        if (r != EXIT_OK)
                return r;
        char what[32] = "the whole disk";
        if (size)
                snprintf(what, sizeof(what), "partition %d", partition);
        log_info("mounted %s (%s) of snapshot %.8s read-only on '%s'; undo with 'blkvault umount %s'", what,
                 s->fstype, s->snapshot, s->mountpoint, s->mountpoint);
        return EXIT_OK;
}

static const char mount_usage[] =
        "Usage: blkvault mount REPO SNAPSHOT MOUNTPOINT [OPTIONS]\n\n"
        "Mount the filesystem of SNAPSHOT read-only on MOUNTPOINT without restoring it: nbdkit serves\n"
        "the snapshot, nbd-client (or nbdfuse) attaches it, a read-only loop device exposes its\n"
        "partitions. Undo with 'blkvault umount MOUNTPOINT'. Needs root.\n\n"
        "  --partition=N            mount partition N (default: the whole disk's filesystem, or the\n"
        "                           first partition holding a known filesystem)\n"
        "  --cache=SIZE             decoded chunk cache of the server (default 256M)\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

/* The absolute mountpoint (a directory, not mounted on yet), repository and state directory. */
static int mount_paths(MountState *s, const char *repo, const char *mountpoint)
{
        struct stat st;

        if (!realpath(mountpoint, s->mountpoint))
                return log_error_errno(-errno, "cannot use mountpoint '%s'", mountpoint);
        if (stat(s->mountpoint, &st) < 0 || !S_ISDIR(st.st_mode)) {
                log_error("mountpoint '%s' is not a directory", s->mountpoint);
                return EXIT_USAGE;
        }
        if (bv_is_mountpoint(s->mountpoint)) {
                log_error("'%s' is already a mountpoint", s->mountpoint);
                return EXIT_IN_USE;
        }
        /* an s3:// location is not a path */
        if (strncmp(repo, "s3://", 5) == 0)
                snprintf(s->repo, sizeof(s->repo), "%s", repo);
        else if (!realpath(repo, s->repo))
                return log_open_error(repo, -errno);
        state_dir_for(s->mountpoint, s->dir, sizeof(s->dir));
        return EXIT_OK;
}

static int parse_partition(const char *arg, void *ret)
{
        return parse_unsigned_arg("--partition", arg, 1, 4096, ret);
}

int cmd_mount(int argc, char **argv)
{
        SecretArgs sargs = {};
        const char *cache = NULL;
        unsigned partition = 0;
        const CliOption options[] = {
                CLI_PARSED("partition", parse_partition, &partition),
                CLI_PARSED("cache", parse_cache_size, &cache),
                POINT_IN_TIME_OPTION(&sargs), {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "mount", .usage = mount_usage, .options = options, .secret = &sargs,
                                        .args = "REPO SNAPSHOT MOUNTPOINT", .repo = true);
        int r;
        if (geteuid() != 0) {
                log_error("mount needs root (it sets up a loop device and mounts a filesystem): run it with sudo");
                return EXIT_PERM;
        }

        MountState s = {};
        r = mount_paths(&s, argv[optind], argv[optind + 2]);
        if (r != EXIT_OK)
                return r;

        /* the repository, the secret and the snapshot, checked with our own messages */
        _cleanup_(secret_done) BvSecret secret = {};
        r = check_export(s.repo, &sargs, argv[optind + 1], s.snapshot, &secret, NULL);
        if (r != EXIT_OK)
                return r;
        /* nbdkit gets the passphrase through a pipe, nbdfuse and the rest need none */
        secret_env_scrub();
        r = bv_mkdir_p(AT_FDCWD, STATE_ROOT);
        if (r < 0)
                return log_error_errno(r, "cannot create '%s'", STATE_ROOT);
        if (mkdir(s.dir, 0700) < 0) {
                r = -errno;
                if (r == -EEXIST) {
                        log_error("'%s' has a blkvault mount already (state in '%s'); run 'blkvault umount %s' "
                                  "first", s.mountpoint, s.dir, s.mountpoint);
                        return EXIT_IN_USE;
                }
                return log_error_errno(r, "cannot create the state directory '%s'", s.dir);
        }
        r = state_save(&s);
        if (r < 0) {
                (void)rmdir(s.dir);
                return log_error_errno(r, "cannot write the state file in '%s'", s.dir);
        }
        r = mount_steps(&s, &sargs, &secret, cache, (int)partition);
        if (r != EXIT_OK) {
                /* undo what was set up; teardown reports what it cannot undo */
                (void)teardown(&s, false);
                return r;
        }
        return EXIT_OK;
}

static const char umount_usage[] =
        "Usage: blkvault umount MOUNTPOINT\n\n"
        "Undo 'blkvault mount': unmount the filesystem, detach the loop device and the NBD\n"
        "attachment, stop the server and remove the state. Works also when the server died.\n\n"
        COMMON_OPTIONS_HELP;

int cmd_umount(int argc, char **argv)
{
        CLI_PARSE_OR_RETURN(argc, argv, .name = "umount", .usage = umount_usage, .args = "MOUNTPOINT");
        int r;
        if (geteuid() != 0) {
                log_error("umount needs root (it unmounts a filesystem and detaches a loop device): run it with sudo");
                return EXIT_PERM;
        }
        MountState s = {};
        const char *arg = argv[optind];
        if (!realpath(arg, s.mountpoint)) {
                if (arg[0] != '/')
                        return log_error_errno(-errno, "cannot use mountpoint '%s'", arg);
                copy_str(s.mountpoint, sizeof(s.mountpoint), arg);
        }
        state_dir_for(s.mountpoint, s.dir, sizeof(s.dir));
        if (access(s.dir, F_OK) < 0) {
                log_error("'%s' is not a blkvault mount (no state in '%s')", s.mountpoint, s.dir);
                return EXIT_ERROR;
        }
        r = state_load(&s);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "cannot read the state of '%s'", s.dir);
        r = teardown(&s, true);
        if (r < 0) {
                /* keep what is left recorded, so a second umount can finish the job */
                (void)state_save(&s);
                return exit_code_for(r);
        }
        log_info("removed the blkvault mount of '%s'", s.mountpoint);
        return EXIT_OK;
}
