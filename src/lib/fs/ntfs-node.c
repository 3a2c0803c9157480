/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an NTFS file is and its stat, as ntfs-3g's FUSE driver (ntfs_fuse_getattr) shows them
 * without a user mapping; named streams (ntfs-node.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "ntfs-node.h"

#define PERMS 0777 /* what ntfs-3g shows without permissions, umask or a user mapping */
#define BAD_REPARSE "unsupported reparse tag 0x%08lx" /* ntfs-3g's text for a link it cannot read */

int nt_open_ino(Ntfs *n, uint64_t ino, ntfs_inode **ret)
{
        ntfs_inode *ni;

        if (ino & NT_STREAM_INO || ino > MFT_REF_MASK_CPU)
                return -ENOENT;
        nt_begin(n);
        ni = ntfs_inode_open(n->vol, (MFT_REF)ino);
        if (!ni)
                return nt_fail(n, EIO);
        *ret = ni;
        return 0;
}

int nt_open_dir(Ntfs *n, uint64_t ino, ntfs_inode **ret)
{
        int r = nt_open_ino(n, ino, ret);

        if (r >= 0 && !((*ret)->mrec->flags & MFT_RECORD_IS_DIRECTORY)) {
                ntfs_inode_close(*ret);
                return -ENOTDIR;
        }
        return r;
}

int nt_child(Ntfs *n, uint64_t dir, const char *name, uint64_t *ret_ino)
{
        ntfs_inode *ni;
        u64 mref;
        int r = nt_open_dir(n, dir, &ni);

        if (r < 0)
                return r;
        nt_begin(n);
        mref = ntfs_inode_lookup_by_mbsname(ni, name);
        r = mref == (u64)-1 ? nt_fail(n, ENOENT) : 0;
        ntfs_inode_close(ni);
        if (r < 0)
                return r;
        *ret_ino = MREF(mref);
        return 0;
}

int nt_parent(Ntfs *n, uint64_t ino, uint64_t *ret_ino)
{
        ntfs_inode *ni, *parent;
        int r;

        if (ino == FILE_root) {
                *ret_ino = ino;
                return 0;
        }
        r = nt_open_ino(n, ino, &ni);
        if (r < 0)
                return r;
        nt_begin(n);
        parent = ntfs_dir_parent_inode(ni);
        if (!parent)
                r = nt_fail(n, EIO);
        else {
                *ret_ino = parent->mft_no;
                ntfs_inode_close(parent);
        }
        ntfs_inode_close(ni);
        return r;
}

/* A reparse point: a symbolic link (junction, Windows or WSL link; one ntfs-3g cannot read is a
 * link to its text, as ntfs-3g shows it), or a WSL fifo, socket or device. */
static int reparse_type(Ntfs *n, ntfs_inode *ni, BvFsStat *st, char **ret_target)
{
        REPARSE_POINT *rp;
        char *target;
        le32 tag = 0;

        nt_begin(n);
        rp = ntfs_get_reparse_point(ni);
        if (!rp && n->disk.error)
                return n->disk.error;
        if (rp) {
                tag = rp->reparse_tag;
                if (ntfs_reparse_check_wsl(ni, rp) == 0) {
                        st->mode = tag == IO_REPARSE_TAG_AF_UNIX ? S_IFSOCK
                                   : tag == IO_REPARSE_TAG_LX_FIFO ? S_IFIFO
                                   : tag == IO_REPARSE_TAG_LX_CHR  ? S_IFCHR
                                   : tag == IO_REPARSE_TAG_LX_BLK  ? S_IFBLK
                                                                    : 0;
                }
                free(rp);
                if (st->mode)
                        return 0;
        }
        nt_begin(n);
        target = ntfs_make_symlink(ni, "");
        if (!target) {
                if (n->disk.error)
                        return n->disk.error;
                if (asprintf(&target, BAD_REPARSE, (long)le32_to_cpu(tag)) < 0)
                        return -ENOMEM;
        }
        st->mode = S_IFLNK | PERMS;
        st->size = strlen(target);
        if (ret_target)
                *ret_target = target;
        else
                free(target);
        return 0;
}

/* An Interix file (what ntfs-3g makes of ln -s, mkfifo, mknod): a system file whose data says. */
static int interix_type(Ntfs *n, ntfs_inode *ni, BvFsStat *st, char **ret_target)
{
        _cleanup_free_ INTX_FILE *intx = NULL;
        ntfs_attr *na;
        s64 size;

        nt_begin(n);
        na = ntfs_attr_open(ni, AT_DATA, AT_UNNAMED, 0);
        if (!na)
                return n->disk.error; /* no data: a plain file */
        size = na->data_size;
        if (!(ni->flags & FILE_ATTR_HIDDEN) && size <= 1)
                st->mode = size == 0 ? S_IFIFO : S_IFSOCK;
        if (size <= (s64)sizeof(INTX_FILE_TYPES) || size > (s64)(sizeof(INTX_FILE_TYPES) + sizeof(ntfschar) * PATH_MAX)) {
                ntfs_attr_close(na);
                return 0;
        }
        intx = malloc((size_t)size);
        if (!intx || ntfs_attr_pread(na, 0, size, intx) != size) {
                ntfs_attr_close(na);
                return intx ? nt_fail(n, EIO) : -ENOMEM;
        }
        ntfs_attr_close(na);
        if ((intx->magic == INTX_BLOCK_DEVICE || intx->magic == INTX_CHARACTER_DEVICE) &&
            size == (s64)offsetof(INTX_FILE, device_end))
                st->mode = intx->magic == INTX_BLOCK_DEVICE ? S_IFBLK : S_IFCHR;
        if (intx->magic == INTX_SYMBOLIC_LINK) {
                char *target = NULL;
                const ntfschar *u = (const ntfschar *)(const void *)((const uint8_t *)intx + offsetof(INTX_FILE, target));
                int len = ntfs_ucstombs(u, (int)((size_t)size - offsetof(INTX_FILE, target)) / 2, &target, 0);
                if (len < 0)
                        return -EBADMSG;
                st->mode = S_IFLNK;
                st->size = (uint64_t)len;
                if (ret_target)
                        *ret_target = target;
                else
                        free(target);
        }
        return 0;
}

/* st's type, mode and size for ni (and a symbolic link's target into *ret_target if asked). */
static int node_type(Ntfs *n, ntfs_inode *ni, BvFsStat *st, char **ret_target)
{
        int r;

        if (ni->flags & FILE_ATTR_REPARSE_POINT)
                return reparse_type(n, ni, st, ret_target);
        if (ni->mrec->flags & MFT_RECORD_IS_DIRECTORY) {
                ntfs_attr *na = ntfs_attr_open(ni, AT_INDEX_ALLOCATION, NTFS_INDEX_I30, 4);
                st->mode = S_IFDIR | PERMS;
                st->size = na ? (uint64_t)na->data_size : (uint64_t)ni->data_size;
                st->nlink = 1; /* as ntfs-3g: find(1) must not count subdirectories */
                if (na)
                        ntfs_attr_close(na);
                return 0;
        }
        st->mode = S_IFREG;
        st->size = (uint64_t)ni->data_size;
        if (ni->flags & FILE_ATTR_SYSTEM) {
                r = interix_type(n, ni, st, ret_target);
                if (r < 0)
                        return r;
        }
        st->mode |= PERMS;
        return 0;
}

static void set_time(sle64 t, int64_t *sec, uint32_t *ns)
{
        struct timespec ts = ntfs2timespec(t);

        *sec = ts.tv_sec;
        *ns = (uint32_t)ts.tv_nsec;
}

const NtfsStream *nt_stream_of(const Ntfs *n, uint64_t ino)
{
        uint64_t i = ino & ~NT_STREAM_INO;

        return (ino & NT_STREAM_INO) && i < n->n_streams ? &n->streams[i] : NULL;
}

int nt_stat(void *fs, uint64_t ino, BvFsStat *ret)
{
        Ntfs *n = fs;
        const NtfsStream *s = nt_stream_of(n, ino);
        BvFsStat st = { .ino = ino };
        ntfs_inode *ni;
        int r = nt_open_ino(n, s ? s->ino : ino, &ni);

        if (r < 0)
                return r;
        st.nlink = le16_to_cpu(ni->mrec->link_count);
        set_time(ni->last_access_time, &st.atime, &st.atime_ns);
        set_time(ni->last_data_change_time, &st.mtime, &st.mtime_ns);
        set_time(ni->last_mft_change_time, &st.ctime, &st.ctime_ns);
        if (s) {
                nt_begin(n);
                ntfs_attr *na = ntfs_attr_open(ni, AT_DATA, s->name, s->len);
                if (na) {
                        st.mode = S_IFREG | PERMS;
                        st.size = (uint64_t)na->data_size;
                        ntfs_attr_close(na);
                } else
                        r = nt_fail(n, ENOENT);
        } else
                r = node_type(n, ni, &st, NULL);
        ntfs_inode_close(ni);
        if (r >= 0)
                *ret = st;
        return r;
}

int nt_readlink(void *fs, uint64_t ino, char **ret)
{
        Ntfs *n = fs;
        BvFsStat st = {};
        char *target = NULL;
        ntfs_inode *ni;
        int r = nt_open_ino(n, ino, &ni);

        if (r < 0)
                return r;
        r = node_type(n, ni, &st, &target);
        ntfs_inode_close(ni);
        if (r >= 0 && !S_ISLNK(st.mode))
                r = -EINVAL;
        if (r < 0) {
                free(target);
                return r;
        }
        *ret = target;
        return 0;
}

bool nt_is_symlink(Ntfs *n, uint64_t ino)
{
        BvFsStat st;

        return nt_stat(n, ino, &st) >= 0 && S_ISLNK(st.mode);
}

/* Registers stream name (taken on success) of file ino: its inode number. */
static int stream_register(Ntfs *n, uint64_t ino, ntfschar *name, int len, uint64_t *ret_ino)
{
        NtfsStream *v;

        for (size_t i = 0; i < n->n_streams; i++)
                if (n->streams[i].ino == ino && n->streams[i].len == len &&
                    memcmp(n->streams[i].name, name, (size_t)len * sizeof(*name)) == 0) {
                        free(name);
                        *ret_ino = NT_STREAM_INO | i;
                        return 0;
                }
        v = realloc(n->streams, (n->n_streams + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        n->streams = v;
        v[n->n_streams] = (NtfsStream){ .ino = ino, .name = name, .len = len };
        *ret_ino = NT_STREAM_INO | n->n_streams++;
        return 0;
}

int nt_stream_add(Ntfs *n, uint64_t ino, ntfschar *name, int len, uint64_t *ret_ino)
{
        ntfs_inode *ni;
        bool exists;
        int r = nt_open_ino(n, ino, &ni);

        if (r < 0)
                return r;
        nt_begin(n);
        exists = ntfs_attr_exist(ni, AT_DATA, name, (u32)len);
        r = n->disk.error;
        ntfs_inode_close(ni);
        if (r < 0 || !exists)
                return r < 0 ? r : -ENOENT;
        return stream_register(n, ino, name, len, ret_ino);
}

/* Adds the stream of ctx's attribute to l (name and inode number); 0 or -errno. */
static int stream_entry(Ntfs *n, uint64_t ino, ntfs_attr_search_ctx *ctx, BvFsEntry **v, size_t *count)
{
        const ntfschar *uname = (const ntfschar *)(const void *)((const uint8_t *)ctx->attr +
                                                                 le16_to_cpu(ctx->attr->name_offset));
        int len = ctx->attr->name_length;
        ntfschar *copy = malloc((size_t)len * sizeof(*copy));
        BvFsEntry *grown = realloc(*v, (*count + 1) * sizeof(**v));
        char *name = NULL;
        uint64_t sino;
        int r;

        if (grown)
                *v = grown;
        if (!copy || !grown) {
                free(copy);
                return -ENOMEM;
        }
        memcpy(copy, uname, (size_t)len * sizeof(*copy));
        if (ntfs_ucstombs(uname, len, &name, 0) < 0) {
                free(copy);
                return -EBADMSG;
        }
        r = stream_register(n, ino, copy, len, &sino); /* not nt_stream_add: the inode is open */
        if (r < 0) {
                free(copy);
                free(name);
                return r;
        }
        (*v)[(*count)++] = (BvFsEntry){ .name = name, .ino = sino };
        return 0;
}

int nt_streams(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n)
{
        Ntfs *n = fs;
        BvFsEntry *v = NULL;
        size_t count = 0;
        ntfs_attr_search_ctx *ctx;
        ntfs_inode *ni;
        int r;

        if (ino & NT_STREAM_INO) { /* a stream has none */
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        r = nt_open_ino(n, ino, &ni);
        if (r < 0)
                return r;
        nt_begin(n);
        ctx = ntfs_attr_get_search_ctx(ni, NULL);
        if (!ctx)
                r = -ENOMEM;
        while (r >= 0 && !ntfs_attr_lookup(AT_DATA, NULL, 0, CASE_SENSITIVE, 0, NULL, 0, ctx))
                if (ctx->attr->name_length)
                        r = stream_entry(n, ino, ctx, &v, &count);
        if (r >= 0 && n->disk.error)
                r = n->disk.error; /* the lookup's end was damage, not the last attribute */
        if (ctx)
                ntfs_attr_put_search_ctx(ctx);
        ntfs_inode_close(ni);
        if (r < 0) {
                bv_fs_entries_free(v, count);
                return r;
        }
        bv_fs_entries_sort(v, count);
        *ret = v;
        *ret_n = count;
        return 0;
}
