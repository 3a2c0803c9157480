/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Messages for what a repository's open refused (a symbolic link or a foreign-typed entry) or
 * found damaged and left out (index segments, snapshot records), and for missing packs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fileio.h"
#include "hex.h"

const char *problem_refusal(const BvRepoProblem *p, char *buf, size_t size)
{
        const char *tail = "";

        if (p->mode == 0)
                return NULL;
        if (p->mode != S_IFLNK) {
                if (p->want_dir && p->mode != S_IFDIR)
                        tail = ", not a directory";
                else if (!p->want_dir && p->mode == S_IFDIR)
                        tail = ", not a regular file";
        }
        snprintf(buf, size, "%s%s", bv_file_type_name(p->mode), tail);
        return buf;
}

int report_open_problem(const char *path, const BvRepoProblem *p, int r)
{
        char what[96];

        if (!p->path[0])
                return -1;
        if (r == -EUCLEAN && strncmp(p->path, "index/", 6) == 0) {
                if (problem_refusal(p, what, sizeof(what)))
                        log_error("refusing to write to repository '%s': index segment '%s' is %s; the repository "
                                  "needs repair (see 'blkvault verify')",
                                  path, p->path, what);
                else
                        log_error("refusing to write to repository '%s': index segment '%s' does not read (%s); "
                                  "the repository needs repair (see 'blkvault verify')",
                                  path, p->path, strerror(-p->error));
                return EXIT_DAMAGE;
        }
        if (problem_refusal(p, what, sizeof(what))) {
                log_error("refusing '%s' in repository '%s': it is %s", p->path, path, what);
                return EXIT_ERROR;
        }
        if (r == -EBADMSG && strcmp(p->path, "config") == 0) {
                log_error("cannot open repository '%s': its config file is damaged (%s)", path, strerror(-r));
                return EXIT_DAMAGE;
        }
        if (r == -EBADMSG && strncmp(p->path, "keys/", 5) == 0) {
                log_error("cannot open repository '%s': key slot '%s' is damaged (%s): import a key export with "
                          "'blkvault key import %s FILE'",
                          path, p->path, strerror(-r), path);
                return EXIT_DAMAGE;
        }
        if (r == -ENOENT && strncmp(p->path, "keys/", 5) == 0) {
                log_error("cannot open repository '%s': it has no key slot (keys/ holds none): import a key export "
                          "with 'blkvault key import %s FILE'",
                          path, path);
                return EXIT_DAMAGE;
        }
        if (r == -EBADMSG && strcmp(p->path, "gc/epoch") == 0) {
                log_error("cannot open repository '%s': '%s' is damaged (%s)", path, p->path, strerror(-r));
                return EXIT_DAMAGE;
        }
        return -1;
}

void report_damage(BvRepo *repo, size_t *reported)
{
        const BvRepoProblem *list;
        size_t n;
        char what[96], why[160];

        bv_repo_damaged(repo, &list, &n);
        if (*reported > n) /* reloaded: met again */
                *reported = 0;
        for (; *reported < n; (*reported)++) {
                const BvRepoProblem *p = &list[*reported];

                if (problem_refusal(p, what, sizeof(what)))
                        snprintf(why, sizeof(why), "it is %s", what);
                else
                        snprintf(why, sizeof(why), "%s", strerror(-p->error));
                if (strncmp(p->path, "snapshots/", 10) == 0)
                        log_warning("skipping snapshot record %s: %s", p->path, why);
                else if (p->mode)
                        log_warning("index segment '%s' is %s: left out; what it locates cannot be read until the "
                                    "repository is repaired (see 'blkvault verify')",
                                    p->path, what);
                else
                        log_warning("index segment '%s' does not read (%s): left out; what it locates cannot be "
                                    "read until the repository is repaired (see 'blkvault verify')",
                                    p->path, why);
        }
}

void report_missing_packs(BvRepo *repo)
{
        const uint8_t(*ids)[BV_PACK_ID_SIZE];
        size_t n;

        bv_repo_missing_packs(repo, &ids, &n);
        for (size_t i = 0; i < n; i++) {
                char path[64];

                bv_pack_path(ids[i], path);
                log_warning("pack 'packs/%s' named by the index is missing: what it held is stored again", path);
        }
}
