/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbdkit-blkvault-plugin: serves one snapshot of a blkvault repository as a read-only NBD
 * export, through the library's read path (bv_image_*). All connections share one open image
 * and its chunk cache; the repository is opened after nbdkit forks, holding an export lease
 * (or the shared gc lock where leases/ cannot be written) so garbage collection never removes
 * what is being served.
 *
 * Decoding is CPU work (authenticate, decompress), so at most `workers` threads decode at once,
 * twice the CPUs by default: nbdkit starts 16 threads per connection, and a client with
 * several connections would otherwise have dozens of decodes preempting each other (on two
 * cores that made a cold whole-image nbdcopy a third slower). The limit holds in the library's
 * read path around each decode only, so a thread that waits for the disk, or for another's
 * decode of a shared compression group, does not take a slot.
 *
 *   nbdkit --threads=1 blkvault repo=REPO snapshot=SNAPSHOT
 *                   [passphrase-file=FILE | passphrase-fd=N | key-file=FILE]
 *                   [cache=SIZE] [readahead=N] [workers=N]
 *
 * or BLKVAULT_PASSPHRASE in the environment. passphrase-fd=N is how blkvault serve and mount hand
 * over a passphrase: a pipe read once, in .after_fork, so that the passphrase is in neither the
 * command line nor the environment of the server (/proc/PID/environ keeps the environment nbdkit
 * was started with for the whole of its life, whatever unsetenv does).
 *
 * Run nbdkit with --threads=1 (one worker thread per connection; connections still run in
 * parallel): nbdkit 1.32 aborts ("raw_send_socket: Assertion `sock >= 0' failed") when a client
 * hangs up while several worker threads of its connection have replies to send, which nbdcopy
 * does after any error reply, and that kills the export for every client. Fixed upstream in
 * nbdkit 1.33.10 (commit 9d82aa4f, "server: Don't assert on send if client hangs up early").
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"
#include "image.h"
#include "macro.h"
#include "repo.h"
#include "passphrase.h"
#include "secmem.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static char *repo_path;
static char *snapshot_spec;
static char *passphrase_file;
static char *key_file;
static int passphrase_fd = -EBADF;
static BvImageOptions image_options = { .cache_bytes = 256u << 20, .readahead = 8 };
static unsigned n_workers; /* 0: twice the online CPUs */
static int64_t point_in_time; /* seconds since the epoch; 0: now */

static BvRepo *repo;
static BvImage *image;

static void blkvault_unload(void)
{
        if (image) {
                BvImageStats st;

                bv_image_stats(image, &st);
                nbdkit_debug("decoded %llu chunks and %llu compression groups", (unsigned long long)st.decodes,
                             (unsigned long long)st.group_decodes);
        }
        bv_image_free(image);
        bv_repo_close(repo);
        free(repo_path);
        free(snapshot_spec);
        free(passphrase_file);
        free(key_file);
        safe_close(passphrase_fd);
}

static int blkvault_config(const char *key, const char *value)
{
        char **slot = NULL;
        if (strcmp(key, "repo") == 0)
                slot = &repo_path;
        else if (strcmp(key, "snapshot") == 0)
                slot = &snapshot_spec;
        else if (strcmp(key, "passphrase-file") == 0)
                slot = &passphrase_file;
        else if (strcmp(key, "key-file") == 0)
                slot = &key_file;
        else if (strcmp(key, "passphrase-fd") == 0) {
                int fd;
                if (nbdkit_parse_int("passphrase-fd", value, &fd) < 0)
                        return -1;
                if (fd < 3 || fcntl(fd, F_GETFD) < 0) {
                        nbdkit_error("passphrase-fd=%s is not an open file descriptor above 2", value);
                        return -1;
                }
                /* not passed on to what nbdkit or a filter may run */
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
                safe_close(passphrase_fd);
                passphrase_fd = fd;
                return 0;
        }
        else if (strcmp(key, "cache") == 0) {
                int64_t size = nbdkit_parse_size(value);
                if (size < 0)
                        return -1;
                /* the library would take 0 as "the default" (64M): say so instead */
                if (size == 0) {
                        nbdkit_error("invalid cache=%s (a size such as 256M: the cache cannot be turned off)",
                                     value);
                        return -1;
                }
                image_options.cache_bytes = (size_t)size;
                return 0;
        } else if (strcmp(key, "point-in-time") == 0) {
                if (nbdkit_parse_int64_t("point-in-time", value, &point_in_time) < 0)
                        return -1;
                if (point_in_time <= 0) {
                        nbdkit_error("point-in-time= must be seconds since the epoch, above 0");
                        return -1;
                }
                return 0;
        } else if (strcmp(key, "readahead") == 0)
                return nbdkit_parse_unsigned("readahead", value, &image_options.readahead);
        else if (strcmp(key, "workers") == 0) {
                if (nbdkit_parse_unsigned("workers", value, &n_workers) < 0)
                        return -1;
                if (n_workers == 0 || n_workers > 1024) {
                        nbdkit_error("workers= must be between 1 and 1024");
                        return -1;
                }
                return 0;
        } else {
                nbdkit_error("unknown parameter '%s'", key);
                return -1;
        }
        /* Paths are made absolute: nbdkit changes directory when it forks into the background. An
         * s3:// location is not a path. */
        free(*slot);
        *slot = slot == &snapshot_spec || (slot == &repo_path && strncmp(value, "s3://", 5) == 0)
                        ? strdup(value)
                        : nbdkit_realpath(value);
        return *slot ? 0 : -1;
}

static int blkvault_config_complete(void)
{
        if (!repo_path || !snapshot_spec) {
                nbdkit_error("repo= and snapshot= are required");
                return -1;
        }
        if (!!passphrase_file + !!key_file + (passphrase_fd >= 0) > 1) {
                nbdkit_error("passphrase-file=, passphrase-fd= and key-file= exclude each other");
                return -1;
        }
        /* Before the keys are read (after_fork): nbdkit dumps no core holding them. This makes the
         * whole nbdkit process undumpable, which is what an export of decrypted data wants. */
        int r = bv_secure_process();
        if (r < 0) {
                nbdkit_error("cannot keep keys out of core dumps: %s", strerror(-r));
                return -1;
        }
        return 0;
}

#define blkvault_config_help                                                                               \
        "repo=<DIR>            (required) the repository: a directory or s3://BUCKET[/PREFIX].\n"         \
        "point-in-time=<SECONDS> an S3 repository as it was then (seconds since the epoch).\n"           \
        "snapshot=<SNAPSHOT>   (required) id, unique id prefix, name or 'latest'.\n"                       \
        "passphrase-file=<FILE> the repository passphrase (or $BLKVAULT_PASSPHRASE).\n"                    \
        "passphrase-fd=<N>     read the passphrase from file descriptor N (a pipe) once.\n"              \
        "key-file=<FILE>       the repository key file.\n"                                                 \
        "cache=<SIZE>          decoded chunks and groups kept (default 256M; not 0).\n"                   \
        "readahead=<N>         chunks read ahead on sequential reads (default 8).\n"                      \
        "workers=<N>           threads decoding at once (default twice the CPUs)."

/* The passphrase: from the file or the pipe (one trailing newline dropped), or the environment. */
static int load_secret(BvSecret *secret)
{
        char *pass = NULL;
        int r;

        *secret = (BvSecret){ .key_file = key_file };
        if (key_file)
                return 0;
        if (passphrase_file)
                r = bv_passphrase_from_file(passphrase_file, &pass);
        else if (passphrase_fd >= 0) {
                r = bv_passphrase_from_fd(passphrase_fd, &pass);
                /* read once: the pipe is empty now */
                passphrase_fd = safe_close(passphrase_fd);
        } else {
                r = bv_passphrase_from_env("BLKVAULT_PASSPHRASE", &pass);
                if (r == -ENOENT)
                        return 0;
        }
        if (r == -ENOMEM)
                nbdkit_error("cannot allocate locked memory for the passphrase: %s", strerror(ENOMEM));
        else if (r < 0 && passphrase_file)
                nbdkit_error("cannot read passphrase file '%s': %s", passphrase_file, strerror(-r));
        else if (r == -E2BIG)
                nbdkit_error("the passphrase in $BLKVAULT_PASSPHRASE is longer than %d bytes", BV_PASSPHRASE_MAX);
        else if (r < 0)
                nbdkit_error("cannot read the passphrase from passphrase-fd=: %s", strerror(-r));
        if (r < 0)
                return -1;
        secret->passphrase = pass;
        return 0;
}

/* What the repository left out as damaged (index segments at open, snapshot records while the
 * list loaded): named in the log as the CLI warns of them, since the export goes on without.
 * nbdkit has no warning level; nbdkit_debug would be shown only with -v. */
static void log_damage(void)
{
        const BvRepoProblem *list;
        size_t n;

        bv_repo_damaged(repo, &list, &n);
        for (size_t i = 0; i < n; i++) {
                const char *why = strerror(-list[i].error);

                if (strncmp(list[i].path, "snapshots/", 10) == 0)
                        nbdkit_error("skipping damaged snapshot record %s in '%s': %s (see 'blkvault verify')",
                                     list[i].path, repo_path, why);
                else
                        nbdkit_error("index segment '%s' in '%s' does not read (%s): left out; what it "
                                     "locates cannot be read (see 'blkvault verify')",
                                     list[i].path, repo_path, why);
        }
}

/* Opening the repository derives keys (scrypt) and may start reader threads: after fork. */
static int blkvault_after_fork(void)
{
        BvSecret secret;
        const BvSnapshot *snap;
        int r;

        if (load_secret(&secret) < 0)
                return -1;
        BvRepoProblem problem;
        r = bv_repo_open_at(repo_path, point_in_time, &secret, BV_OPEN_READ | BV_OPEN_EXPORT, &problem, &repo);
        bv_passphrase_free((char *)secret.passphrase);
        if (r == -ENOKEY) {
                nbdkit_error("cannot open repository '%s': wrong or missing passphrase or key", repo_path);
                return -1;
        }
        if (r == -EKEYREJECTED) {
                nbdkit_error("cannot open repository '%s': it is not encrypted, so it is not the one the "
                             "passphrase or key given belongs to",
                             repo_path);
                return -1;
        }
        if (r < 0) {
                nbdkit_error("cannot open repository '%s': %s%s%s", repo_path, strerror(-r),
                             problem.message[0] ? ": " : "", problem.message);
                return -1;
        }
        r = bv_repo_find_snapshot(repo, snapshot_spec, &snap);
        log_damage();
        if (r < 0) {
                nbdkit_error("snapshot '%s' in '%s': %s", snapshot_spec, repo_path,
                             r == -ENOENT ? "no such snapshot" : r == -ENOTUNIQ ? "ambiguous" : strerror(-r));
                return -1;
        }
        if (n_workers == 0) {
                long cpus = sysconf(_SC_NPROCESSORS_ONLN);
                n_workers = cpus < 1 ? 2 : cpus > 256 ? 512 : (unsigned)(2 * cpus);
        }
        image_options.max_decodes = n_workers;
        r = bv_image_open(repo, snap, &image_options, &image);
        if (r < 0) {
                nbdkit_error("cannot open snapshot %s: %s", snap->id, strerror(-r));
                return -1;
        }
        nbdkit_debug("serving snapshot %s (%s) of %s", snap->id, snap->name ? snap->name : "", repo_path);
        return 0;
}

static void *blkvault_open(int readonly)
{
        /* Every connection shares the image: the handle carries nothing of its own. */
        return image;
}

static int64_t blkvault_get_size(void *handle)
{
        return (int64_t)bv_image_size(image);
}

static int blkvault_can_write(void *handle)
{
        return 0;
}

static int blkvault_can_multi_conn(void *handle)
{
        return 1;
}

static int blkvault_can_extents(void *handle)
{
        return 1;
}

static int blkvault_can_cache(void *handle)
{
        return NBDKIT_CACHE_NATIVE;
}

static int blkvault_block_size(void *handle, uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
        *minimum = 1;
        *preferred = 4096;
        *maximum = 0xffffffff;
        return 0;
}

/* " (what an S3 repository's storage answered last)", "" otherwise: which object and its HTTP
 * status (a pack a gc deleted while this export was stopped past its lease's grace: 404). */
static const char *storage_said(char *buf, size_t len)
{
        char said[320];

        bv_repo_storage_error(repo, said, sizeof(said));
        snprintf(buf, len, "%s%s%s", said[0] ? " (" : "", said, said[0] ? ")" : "");
        return buf;
}

static int read_range(void *buf, uint32_t count, uint64_t offset)
{
        uint64_t bad = 0;
        int r = bv_image_pread(image, buf, count, offset, &bad);
        if (r < 0) {
                char said[360];
                storage_said(said, sizeof(said));
                if (r == -EBADMSG || r == -EUCLEAN)
                        nbdkit_error("%s at image offset %llu (0x%llx) of snapshot '%s' in '%s'%s",
                                     r == -EBADMSG ? "damaged data" : "missing data (repository needs repair)",
                                     (unsigned long long)bad, (unsigned long long)bad, snapshot_spec, repo_path,
                                     said);
                else
                        nbdkit_error("read of %u bytes at %llu of snapshot '%s' in '%s': %s%s", count,
                                     (unsigned long long)offset, snapshot_spec, repo_path, strerror(-r), said);
                nbdkit_set_error(r == -EBADMSG || r == -EUCLEAN ? EIO : -r);
                return -1;
        }
        return 0;
}

static int blkvault_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
        return read_range(buf, count, offset);
}

/* NBD_CMD_CACHE: read into the chunk cache and drop the bytes. */
static int blkvault_cache(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
        _cleanup_free_ void *buf = malloc(MIN(count, 4u << 20));
        if (!buf) {
                nbdkit_set_error(ENOMEM);
                return -1;
        }
        while (count > 0) {
                uint32_t n = MIN(count, 4u << 20);
                if (read_range(buf, n, offset) < 0)
                        return -1;
                count -= n;
                offset += n;
        }
        return 0;
}

typedef struct ExtentsCtx {
        struct nbdkit_extents *extents;
        bool only_one;
        bool done;
} ExtentsCtx;

static int add_extent(BvExtentKind kind, uint64_t off, uint64_t len, void *userdata)
{
        ExtentsCtx *ctx = userdata;
        /* Zero blocks and holes are both unallocated in the repository: report them alike. */
        uint32_t type = kind == BV_EXTENT_DATA ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO;
        if (ctx->done)
                return 0;
        if (nbdkit_add_extent(ctx->extents, off, len, type) < 0)
                return -EIO;
        if (ctx->only_one)
                ctx->done = true;
        return 0;
}

static int blkvault_extents(void *handle, uint32_t count, uint64_t offset, uint32_t flags,
                            struct nbdkit_extents *extents)
{
        ExtentsCtx ctx = { .extents = extents, .only_one = flags & NBDKIT_FLAG_REQ_ONE };
        int r = bv_image_extents(image, offset, count, add_extent, &ctx);
        if (r < 0) {
                char said[360];
                nbdkit_error("extents at %llu of snapshot '%s' in '%s': %s%s", (unsigned long long)offset,
                             snapshot_spec, repo_path, strerror(-r), storage_said(said, sizeof(said)));
                nbdkit_set_error(r == -EBADMSG || r == -EUCLEAN ? EIO : -r);
                return -1;
        }
        return 0;
}

static struct nbdkit_plugin plugin = {
        .name = "blkvault",
        .longname = "blkvault snapshot export",
        .version = PACKAGE_VERSION,
        .description = "Serve a blkvault snapshot read-only over NBD",
        .unload = blkvault_unload,
        .config = blkvault_config,
        .config_complete = blkvault_config_complete,
        .config_help = blkvault_config_help,
        .magic_config_key = "snapshot",
        .after_fork = blkvault_after_fork,
        .open = blkvault_open,
        .get_size = blkvault_get_size,
        .can_write = blkvault_can_write,
        .can_multi_conn = blkvault_can_multi_conn,
        .can_extents = blkvault_can_extents,
        .can_cache = blkvault_can_cache,
        .block_size = blkvault_block_size,
        .pread = blkvault_pread,
        .cache = blkvault_cache,
        .extents = blkvault_extents,
        .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN(plugin)
