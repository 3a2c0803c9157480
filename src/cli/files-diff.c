/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkvault files REPO SNAP diff SNAP2 [PATH]: what changed in the files between two snapshots of
 * one disk. A regular file whose inode number, size, mtime and ctime are all the same is taken as
 * unchanged (the kernel moves ctime on every change of content; only a clock set back hides one)
 * unless --content; otherwise the two contents are hashed and compared. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "files.h"

typedef struct DiffCtx {
        FilesPath a, b;
        const FilesOptions *o;
        int ec;
        uint64_t added, removed, changed;
} DiffCtx;

static void diff_fail(DiffCtx *c, int ec)
{
        if (c->ec == EXIT_OK || ec == EXIT_DAMAGE)
                c->ec = ec;
}

static void diff_print(DiffCtx *c, char what, const char *path)
{
        _cleanup_free_ char *shown = files_display(c->b.prefix, path);

        printf("%c %s\n", what, shown ? shown : path);
        if (what == '+')
                c->added++;
        else if (what == '-')
                c->removed++;
        else
                c->changed++;
}

/* Everything below a directory only one side has, as added or removed. */
static void diff_subtree(DiffCtx *c, FilesPath *fp, uint64_t ino, const char *path, char what)
{
        BvFsStat st;
        BvFsEntry *ents;
        size_t n;
        int r = bv_fs_stat(fp->fs, ino, &st);

        diff_print(c, what, path);
        if (r < 0 || !S_ISDIR(st.mode)) {
                if (r < 0)
                        diff_fail(c, files_error(fp->fs, r, "read", fp->prefix, path));
                return;
        }
        r = bv_fs_readdir(fp->fs, ino, &ents, &n);
        if (r < 0) {
                diff_fail(c, files_error(fp->fs, r, "list", fp->prefix, path));
                return;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *sub = files_join(path, ents[i].name);
                if (sub)
                        diff_subtree(c, fp, ents[i].ino, sub, what);
        }
        bv_fs_entries_free(ents, n);
}

static int hash_sink(const void *buf, size_t len, uint64_t offset _unused_, void *userdata)
{
        static const uint8_t zero[65536];

        if (buf)
                return EVP_DigestUpdate(userdata, buf, len) ? 0 : -ENOMEM;
        for (size_t done = 0; done < len; done += sizeof(zero))
                if (!EVP_DigestUpdate(userdata, zero, MIN(sizeof(zero), len - done)))
                        return -ENOMEM;
        return 0;
}

/* SHA-256 of a file's content into md; an exit code. */
static int content_hash(FilesPath *fp, uint64_t ino, const char *path, uint8_t md[EVP_MAX_MD_SIZE])
{
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        int r = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? 0 : -ENOMEM;

        if (r >= 0)
                r = bv_fs_read(fp->fs, ino, hash_sink, ctx);
        if (r >= 0 && !EVP_DigestFinal_ex(ctx, md, NULL))
                r = -ENOMEM;
        EVP_MD_CTX_free(ctx);
        return r < 0 ? files_error(fp->fs, r, "read", fp->prefix, path) : EXIT_OK;
}

static bool same_times(const BvFsStat *x, const BvFsStat *y)
{
        return x->mtime == y->mtime && x->mtime_ns == y->mtime_ns;
}

/* M, m or 0 for two regular files. */
/* ia, ib: the readers' handles of the two files; x->ino, y->ino their inode numbers */
static char diff_regular(DiffCtx *c, uint64_t ia, uint64_t ib, const BvFsStat *x, const BvFsStat *y,
                         const char *path)
{
        bool meta = x->mode != y->mode || x->uid != y->uid || x->gid != y->gid || !same_times(x, y);
        uint8_t ha[EVP_MAX_MD_SIZE], hb[EVP_MAX_MD_SIZE];
        int r;

        if (x->size != y->size)
                return 'M';
        if (!c->o->content && x->ino == y->ino && !meta && x->ctime == y->ctime && x->ctime_ns == y->ctime_ns)
                return 0;
        r = content_hash(&c->a, ia, path, ha);
        if (r == EXIT_OK)
                r = content_hash(&c->b, ib, path, hb);
        if (r != EXIT_OK) {
                diff_fail(c, r);
                return 0;
        }
        return memcmp(ha, hb, 32) != 0 ? 'M' : meta ? 'm' : 0;
}

static void diff_dir(DiffCtx *c, uint64_t ia, uint64_t ib, const char *path);

static void diff_entry(DiffCtx *c, uint64_t ia, uint64_t ib, const char *path)
{
        BvFsStat x, y;
        int r = bv_fs_stat(c->a.fs, ia, &x);
        char what = 0;

        if (r < 0) {
                diff_fail(c, files_error(c->a.fs, r, "read", c->a.prefix, path));
                return;
        }
        r = bv_fs_stat(c->b.fs, ib, &y);
        if (r < 0) {
                diff_fail(c, files_error(c->b.fs, r, "read", c->b.prefix, path));
                return;
        }
        if ((x.mode & S_IFMT) != (y.mode & S_IFMT))
                what = 'T';
        else if (S_ISREG(x.mode))
                what = diff_regular(c, ia, ib, &x, &y, path);
        else if (S_ISLNK(x.mode)) {
                _cleanup_free_ char *ta = NULL, *tb = NULL;
                r = bv_fs_readlink(c->a.fs, ia, &ta);
                if (r >= 0)
                        r = bv_fs_readlink(c->b.fs, ib, &tb);
                if (r < 0)
                        diff_fail(c, files_error(c->b.fs, r, "read the link", c->b.prefix, path));
                else if (strcmp(ta, tb) != 0)
                        what = 'M';
        } else if (x.mode != y.mode || x.uid != y.uid || x.gid != y.gid)
                what = 'm';
        if (what)
                diff_print(c, what, path);
        if (S_ISDIR(x.mode) && S_ISDIR(y.mode))
                diff_dir(c, ia, ib, path);
}

static void diff_dir(DiffCtx *c, uint64_t ia, uint64_t ib, const char *path)
{
        BvFsEntry *ea = NULL, *eb = NULL;
        size_t na = 0, nb = 0, i = 0, j = 0;
        int r = bv_fs_readdir(c->a.fs, ia, &ea, &na);

        if (r < 0) {
                diff_fail(c, files_error(c->a.fs, r, "list", c->a.prefix, path));
                return;
        }
        r = bv_fs_readdir(c->b.fs, ib, &eb, &nb);
        if (r < 0) {
                bv_fs_entries_free(ea, na);
                diff_fail(c, files_error(c->b.fs, r, "list", c->b.prefix, path));
                return;
        }
        while (i < na || j < nb) {
                int cmp = i == na ? 1 : j == nb ? -1 : strcmp(ea[i].name, eb[j].name);
                _cleanup_free_ char *sub = files_join(path, cmp <= 0 ? ea[i].name : eb[j].name);
                if (!sub) {
                        diff_fail(c, log_error_errno(-ENOMEM, "cannot compare '%s'", path));
                        break;
                }
                if (cmp < 0)
                        diff_subtree(c, &c->a, ea[i++].ino, sub, '-');
                else if (cmp > 0)
                        diff_subtree(c, &c->b, eb[j++].ino, sub, '+');
                else
                        diff_entry(c, ea[i++].ino, eb[j++].ino, sub);
        }
        bv_fs_entries_free(ea, na);
        bv_fs_entries_free(eb, nb);
}

/* Compares arg in both snapshots. */
static int diff_arg(DiffCtx *c, FilesDisk *a, FilesDisk *b, const char *arg)
{
        uint64_t ia, ib;
        int ra, rb, r = files_resolve(a, arg, &c->a);

        if (r == EXIT_OK)
                r = files_resolve(b, arg, &c->b);
        if (r != EXIT_OK)
                return r;
        ra = bv_fs_lookup(c->a.fs, c->a.path, false, &ia);
        rb = bv_fs_lookup(c->b.fs, c->b.path, false, &ib);
        if (ra < 0 && ra != -ENOENT)
                return files_error(c->a.fs, ra, "read", c->a.prefix, c->a.path);
        if (rb < 0 && rb != -ENOENT)
                return files_error(c->b.fs, rb, "read", c->b.prefix, c->b.path);
        if (ra < 0 && rb < 0)
                return files_error(c->a.fs, ra, "compare", c->a.prefix, c->a.path);
        if (ra < 0)
                diff_subtree(c, &c->b, ib, c->b.path, '+');
        else if (rb < 0)
                diff_subtree(c, &c->a, ia, c->a.path, '-');
        else
                diff_entry(c, ia, ib, c->a.path);
        return EXIT_OK;
}

int files_diff(BvRepo *repo, FilesDisk *d, const char *spec2, const char *path, const FilesOptions *o)
{
        FilesDisk d2 = { .drive = -1 };
        DiffCtx c = { .o = o };
        int r = files_disk_open(repo, spec2, &d2);

        if (r == EXIT_OK && path)
                r = diff_arg(&c, d, &d2, path);
        else if (r == EXIT_OK) {
                /* every filesystem files reads: the disk's only one, or each partition (and LVM
                 * logical volume) by name */
                r = files_disk_all(d);
                for (size_t i = 0; i < d->n_parts && r == EXIT_OK; i++) {
                        char arg[128], name[96];
                        if (d->n_parts > 1 && !files_backend(d->parts[i].fstype))
                                continue;
                        snprintf(arg, sizeof(arg), "%s:/", files_part_name(d, i, name, sizeof(name)));
                        r = diff_arg(&c, d, &d2, d->n_parts > 1 ? arg : "/");
                }
        }
        char id2[16] = "";
        if (d2.snap)
                snprintf(id2, sizeof(id2), "%.8s", d2.snap->id);
        files_disk_close(&d2);
        if (r != EXIT_OK)
                return r;
        log_info("%llu added, %llu removed, %llu changed from snapshot %.8s to %s", (unsigned long long)c.added,
                 (unsigned long long)c.removed, (unsigned long long)c.changed, d->snap->id, id2);
        return c.ec;
}
