/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s3-tool: drives the library's S3 client (src/lib/backend/s3.h) from the shell tests of
 * tests/s3/, one operation a run, against a real server:
 *
 *   s3-tool [OPTIONS] LOCATION open
 *   s3-tool [OPTIONS] LOCATION put KEY FILE          (bv_s3_put_fd)
 *   s3-tool [OPTIONS] LOCATION putmem KEY FILE       (bv_s3_put from memory)
 *   s3-tool [OPTIONS] LOCATION putmany PREFIX N      (N small objects PREFIX00000...: one process)
 *   s3-tool [OPTIONS] LOCATION get KEY               (to stdout)
 *   s3-tool [OPTIONS] LOCATION range KEY OFFSET LEN  (to stdout)
 *   s3-tool [OPTIONS] LOCATION head KEY
 *   s3-tool [OPTIONS] LOCATION list [PREFIX]         ("KEY SIZE" lines)
 *   s3-tool [OPTIONS] LOCATION versions [PREFIX]     ("KEY VERSION latest|old object|marker" lines)
 *   s3-tool [OPTIONS] LOCATION delete KEY
 *   s3-tool [OPTIONS] LOCATION retention KEY SECONDS (retain for SECONDS more)
 *
 * OPTIONS: --probe (probe conditional PUT at open; printed as conditional-put=yes|no),
 * --if-none-match, --retain=SECONDS, --governance, --version=ID, --threshold=BYTES,
 * --part=BYTES, --stats (requests and retries on stderr), --credentials=FILE.
 * A failure prints "s3-tool: MESSAGE [ERRNO-NAME]" and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "s3.h"

static struct {
        bool probe, if_none_match, governance, stats;
        int64_t retain;
        const char *version, *credentials;
        uint64_t threshold, part;
} arg;

static int fail(bv_s3 *s, const char *what, int r)
{
        char msg[1024] = "";

        if (s)
                bv_s3_errmsg(s, msg, sizeof(msg));
        fprintf(stderr, "s3-tool: %s%s%s [%s]\n", what, msg[0] ? ": " : "", msg, strerrorname_np(-r) ?: "?");
        return 1;
}

static int print_cb(const bv_s3_object *o, void *userdata)
{
        bool versions = *(bool *)userdata;

        if (versions)
                printf("%s %s %s %s\n", o->key, o->version_id ?: "-", o->is_latest ? "latest" : "old",
                       o->delete_marker ? "marker" : "object");
        else
                printf("%s %" PRIu64 "\n", o->key, o->size);
        return 0;
}

static int write_all(const void *p, size_t n)
{
        return fwrite(p, 1, n, stdout) == n ? 0 : -EIO;
}

static bv_s3_put_opts put_opts(void)
{
        return (bv_s3_put_opts){
                .if_none_match = arg.if_none_match,
                .retain_until = arg.retain > 0 ? (int64_t)time(NULL) + arg.retain : 0,
                .lock_mode = arg.governance ? BV_S3_LOCK_GOVERNANCE : BV_S3_LOCK_COMPLIANCE,
        };
}

static int cmd_put(bv_s3 *s, char **argv, bool mem)
{
        _cleanup_close_ int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        bv_s3_put_opts o = put_opts();
        struct stat st;
        int r;

        if (fd < 0 || fstat(fd, &st) < 0)
                return fail(NULL, argv[1], -errno);
        if (mem) {
                _cleanup_free_ uint8_t *buf = malloc((size_t)st.st_size + 1);
                if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
                        return fail(NULL, argv[1], -EIO);
                r = bv_s3_put(s, argv[0], buf, (size_t)st.st_size, &o);
        } else
                r = bv_s3_put_fd(s, argv[0], fd, 0, (uint64_t)st.st_size, &o);
        return r < 0 ? fail(s, "put", r) : 0;
}

static int cmd_head(bv_s3 *s, const char *key)
{
        bv_s3_object o = {};
        int r = bv_s3_head(s, key, arg.version, &o);

        if (r < 0)
                return fail(s, "head", r);
        printf("size=%" PRIu64 " etag=%s version=%s lock=%s retain-until=%" PRId64 "\n", o.size, o.etag,
               o.version_id ?: "-",
               o.lock_mode == BV_S3_LOCK_NONE ? "none" : o.lock_mode == BV_S3_LOCK_GOVERNANCE ? "governance" : "compliance",
               o.retain_until);
        bv_s3_object_done(&o);
        return 0;
}

static int run(bv_s3 *s, int argc, char **argv)
{
        const char *cmd = argv[0];
        bool versions = strcmp(cmd, "versions") == 0;
        int r;

        if (strcmp(cmd, "open") == 0) {
                if (arg.probe)
                        printf("conditional-put=%s\n", bv_s3_conditional_put(s) ? "yes" : "no");
                return 0;
        }
        if ((strcmp(cmd, "put") == 0 || strcmp(cmd, "putmem") == 0) && argc == 3)
                return cmd_put(s, argv + 1, strcmp(cmd, "putmem") == 0);
        if (strcmp(cmd, "putmany") == 0 && argc == 3) {
                unsigned long n = strtoul(argv[2], NULL, 10);
                for (unsigned long i = 0; i < n; i++) {
                        char key[512];
                        snprintf(key, sizeof(key), "%s%05lu", argv[1], i);
                        r = bv_s3_put(s, key, key, strlen(key), NULL);
                        if (r < 0)
                                return fail(s, "putmany", r);
                }
                return 0;
        }
        if (strcmp(cmd, "get") == 0 && argc == 2) {
                void *data;
                size_t size;
                r = bv_s3_get(s, argv[1], arg.version, SIZE_MAX, &data, &size);
                if (r < 0)
                        return fail(s, "get", r);
                r = write_all(data, size);
                free(data);
                return r < 0 ? fail(NULL, "stdout", r) : 0;
        }
        if (strcmp(cmd, "range") == 0 && argc == 4) {
                size_t len = strtoull(argv[3], NULL, 10);
                _cleanup_free_ void *buf = malloc(len + 1);
                ssize_t n;
                if (!buf)
                        return fail(NULL, "range", -ENOMEM);
                n = bv_s3_get_range(s, argv[1], arg.version, strtoull(argv[2], NULL, 10), len, buf);
                if (n < 0)
                        return fail(s, "range", (int)n);
                return write_all(buf, (size_t)n) < 0 ? fail(NULL, "stdout", -EIO) : 0;
        }
        if (strcmp(cmd, "head") == 0 && argc == 2)
                return cmd_head(s, argv[1]);
        if ((strcmp(cmd, "list") == 0 || versions) && argc <= 2) {
                r = (versions ? bv_s3_list_versions : bv_s3_list)(s, argc == 2 ? argv[1] : "", print_cb, &versions);
                return r < 0 ? fail(s, cmd, r) : 0;
        }
        if (strcmp(cmd, "delete") == 0 && argc == 2) {
                r = bv_s3_delete(s, argv[1], arg.version);
                return r < 0 ? fail(s, "delete", r) : 0;
        }
        if (strcmp(cmd, "retention") == 0 && argc == 3) {
                r = bv_s3_set_retention(s, argv[1], arg.version,
                                        arg.governance ? BV_S3_LOCK_GOVERNANCE : BV_S3_LOCK_COMPLIANCE,
                                        (int64_t)time(NULL) + strtoll(argv[2], NULL, 10));
                return r < 0 ? fail(s, "retention", r) : 0;
        }
        fprintf(stderr, "s3-tool: bad command line (see tests/s3/s3-tool.c)\n");
        return 2;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "probe", no_argument, NULL, 'p' },         { "if-none-match", no_argument, NULL, 'i' },
                { "retain", required_argument, NULL, 'r' },  { "governance", no_argument, NULL, 'g' },
                { "version", required_argument, NULL, 'v' }, { "threshold", required_argument, NULL, 't' },
                { "part", required_argument, NULL, 'P' },    { "stats", no_argument, NULL, 's' },
                { "credentials", required_argument, NULL, 'c' }, {},
        };
        bv_s3_conf *conf = NULL;
        bv_s3 *s = NULL;
        char msg[1024] = "";
        int c, r;

        while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0) {
                switch (c) {
                case 'p': arg.probe = true; break;
                case 'i': arg.if_none_match = true; break;
                case 'r': arg.retain = strtoll(optarg, NULL, 10); break;
                case 'g': arg.governance = true; break;
                case 'v': arg.version = optarg; break;
                case 't': arg.threshold = strtoull(optarg, NULL, 10); break;
                case 'P': arg.part = strtoull(optarg, NULL, 10); break;
                case 's': arg.stats = true; break;
                case 'c': arg.credentials = optarg; break;
                default: return 2;
                }
        }
        if (argc - optind < 2) {
                fprintf(stderr, "usage: s3-tool [OPTIONS] LOCATION COMMAND [ARGS]\n");
                return 2;
        }
        r = bv_s3_conf_from_env(argv[optind], arg.credentials, &conf);
        if (r < 0)
                return fail(NULL, argv[optind], r);
        if (arg.threshold)
                conf->multipart_threshold = arg.threshold;
        if (arg.part)
                conf->part_size = arg.part;
        r = bv_s3_open(conf, arg.probe ? BV_S3_PROBE_CONDITIONAL : 0, &s, msg, sizeof(msg));
        bv_s3_conf_free(conf);
        if (r < 0) {
                fprintf(stderr, "s3-tool: open: %s [%s]\n", msg, strerrorname_np(-r) ?: "?");
                return 1;
        }
        r = run(s, argc - optind - 1, argv + optind + 1);
        if (arg.stats) {
                bv_s3_stats st;
                bv_s3_get_stats(s, &st);
                fprintf(stderr, "requests=%" PRIu64 " retries=%" PRIu64 " sent=%" PRIu64 " received=%" PRIu64 "\n",
                        st.requests, st.retries, st.bytes_sent, st.bytes_received);
        }
        bv_s3_free(s);
        return r;
}
