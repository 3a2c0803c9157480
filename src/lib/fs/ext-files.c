/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ext2/3/4 through libext2fs with an io_manager over a BvFilesDev (ext-files.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ext-files.h"
#include "ext2fs-dl.h" /* libext2fs loaded on first use: every call goes through it */
#include "macro.h"

#define RUN_MAX (1u << 20) /* bytes read from the disk at once */

/* What the io channel reads: the filesystem's range of the disk. */
typedef struct ExtDisk {
        const BvFilesDev *dev;
        uint64_t offset, size;
        uint64_t bad_offset;
} ExtDisk;

typedef struct BvExt {
        ext2_filsys fs;
        ExtDisk disk;
        errcode_t last;
} BvExt;

/* The disk the next channel opens: ext2fs_open2 passes only a name to the manager's open. */
static _Thread_local ExtDisk *pending_disk;
static struct struct_io_manager bv_io_manager;

static errcode_t ch_open(const char *name, int flags, io_channel *ret)
{
        io_channel ch;

        if (!pending_disk)
                return EXT2_ET_BAD_DEVICE_NAME;
        if (flags & IO_FLAG_RW)
                return EROFS;
        ch = calloc(1, sizeof(*ch));
        if (!ch)
                return ENOMEM;
        ch->name = strdup(name);
        if (!ch->name) {
                free(ch);
                return ENOMEM;
        }
        ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
        ch->manager = &bv_io_manager;
        ch->block_size = 1024;
        ch->refcount = 1;
        ch->private_data = pending_disk;
        *ret = ch;
        return 0;
}

static errcode_t ch_close(io_channel ch)
{
        if (--ch->refcount > 0)
                return 0;
        free(ch->name);
        free(ch);
        return 0;
}

static errcode_t ch_set_blksize(io_channel ch, int blksize)
{
        ch->block_size = blksize;
        return 0;
}

static errcode_t ch_read_blk64(io_channel ch, unsigned long long block, int count, void *data)
{
        ExtDisk *d = ch->private_data;
        uint64_t len = count < 0 ? (uint64_t)-(int64_t)count : (uint64_t)count * (uint64_t)ch->block_size;
        uint64_t off = (uint64_t)block * (uint64_t)ch->block_size;
        int r;

        if (off > d->size || len > d->size - off)
                return EXT2_ET_SHORT_READ;
        r = d->dev->pread(d->dev->userdata, data, len, d->offset + off, &d->bad_offset);
        return r < 0 ? (errcode_t)-r : 0;
}

static errcode_t ch_read_blk(io_channel ch, unsigned long block, int count, void *data)
{
        return ch_read_blk64(ch, block, count, data);
}

static errcode_t ch_write_blk64(io_channel ch _unused_, unsigned long long block _unused_, int count _unused_,
                                const void *data _unused_)
{
        return EROFS;
}

static errcode_t ch_write_blk(io_channel ch _unused_, unsigned long block _unused_, int count _unused_,
                              const void *data _unused_)
{
        return EROFS;
}

static errcode_t ch_write_byte(io_channel ch _unused_, unsigned long offset _unused_, int count _unused_,
                               const void *data _unused_)
{
        return EROFS;
}

static errcode_t ch_flush(io_channel ch _unused_)
{
        return 0;
}

static errcode_t ch_set_option(io_channel ch _unused_, const char *option _unused_, const char *arg _unused_)
{
        return EXT2_ET_INVALID_ARGUMENT;
}

static struct struct_io_manager bv_io_manager = {
        .magic = EXT2_ET_MAGIC_IO_MANAGER,
        .name = "blkvault snapshot I/O manager",
        .open = ch_open,
        .close = ch_close,
        .set_blksize = ch_set_blksize,
        .read_blk = ch_read_blk,
        .write_blk = ch_write_blk,
        .flush = ch_flush,
        .write_byte = ch_write_byte,
        .set_option = ch_set_option,
        .read_blk64 = ch_read_blk64,
        .write_blk64 = ch_write_blk64,
};

/* A libext2fs error code as -errno (errno values pass through: the channel returns them). */
static int ext_err(BvExt *e, errcode_t code)
{
        if (code == 0)
                return 0;
        e->last = code;
        if (code > 0 && code < 4096)
                return -(int)code;
        switch (code) {
        case EXT2_ET_FILE_NOT_FOUND:
                return -ENOENT;
        case EXT2_ET_NO_DIRECTORY:
                return -ENOTDIR;
        case EXT2_ET_SYMLINK_LOOP:
                return -ELOOP;
        case EXT2_ET_NO_MEMORY:
                return -ENOMEM;
        case EXT2_ET_UNSUPP_FEATURE:
        case EXT2_ET_RO_UNSUPP_FEATURE:
                return -EPROTONOSUPPORT;
        default:
                return -EIO;
        }
}

static int ext_open(const BvFilesDev *dev, uint64_t offset, uint64_t size, void **ret)
{
        errcode_t code;
        int r = ext2fs_dl_open();

        if (r < 0)
                return r;
        BvExt *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->disk = (ExtDisk){ .dev = dev, .offset = offset, .size = size };
        pending_disk = &e->disk;
        /* read-only (no EXT2_FLAG_RW); checksum errors are the caller's to see per file */
        code = ext2fs_open2("snapshot", NULL, EXT2_FLAG_64BITS, 0, 0, &bv_io_manager, &e->fs);
        pending_disk = NULL;
        if (code) {
                r = ext_err(e, code);
                free(e);
                return r == -EIO && code != EXT2_ET_SHORT_READ ? -EMEDIUMTYPE : r;
        }
        *ret = e;
        return 0;
}

static void ext_close(void *fs)
{
        BvExt *e = fs;

        if (!e)
                return;
        if (e->fs)
                ext2fs_close_free(&e->fs);
        free(e);
}

static bool ext_needs_recovery(const void *fs)
{
        const BvExt *e = fs;

        return ext2fs_has_feature_journal_needs_recovery(e->fs->super);
}

static uint64_t ext_bad_offset(const void *fs)
{
        const BvExt *e = fs;

        return e->disk.bad_offset;
}

static const char *ext_error_text(const void *fs)
{
        const BvExt *e = fs;

        return e->last >= 4096 ? error_message(e->last) : NULL;
}

static int ext_lookup(void *fs, const char *path, bool follow, uint64_t *ret_ino)
{
        BvExt *e = fs;
        ext2_ino_t ino;
        errcode_t code;

        path += strspn(path, "/");
        if (!*path) {
                *ret_ino = EXT2_ROOT_INO;
                return 0;
        }
        code = (follow ? ext2fs_namei_follow : ext2fs_namei)(e->fs, EXT2_ROOT_INO, EXT2_ROOT_INO, path, &ino);
        if (code)
                return ext_err(e, code);
        *ret_ino = ino;
        return 0;
}

static void time_of(uint32_t lo, uint32_t extra, bool has_extra, int64_t *sec, uint32_t *ns)
{
        *sec = (int64_t)(int32_t)lo;
        *ns = 0;
        if (has_extra) {
                *sec += (int64_t)(extra & 3) << 32; /* the epoch bits past 2038 */
                *ns = extra >> 2;
        }
}

static int read_inode(BvExt *e, uint64_t ino, struct ext2_inode_large *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (ino == 0 || ino > UINT32_MAX)
                return -ENOENT;
        return ext_err(e, ext2fs_read_inode_full(e->fs, (ext2_ino_t)ino, (struct ext2_inode *)ret, sizeof(*ret)));
}

static int ext_stat(void *fs, uint64_t ino, BvFsStat *ret)
{
        BvExt *e = fs;
        struct ext2_inode_large in;
        int r = read_inode(e, ino, &in);
        bool extra;

        if (r < 0)
                return r;
        extra = EXT2_INODE_SIZE(e->fs->super) > EXT2_GOOD_OLD_INODE_SIZE && in.i_extra_isize >= 16;
        *ret = (BvFsStat){ .ino = ino, .mode = in.i_mode, .uid = inode_uid(in), .gid = inode_gid(in),
                            .nlink = in.i_links_count, .size = EXT2_I_SIZE(&in) };
        time_of(in.i_atime, in.i_atime_extra, extra, &ret->atime, &ret->atime_ns);
        time_of(in.i_mtime, in.i_mtime_extra, extra, &ret->mtime, &ret->mtime_ns);
        time_of(in.i_ctime, in.i_ctime_extra, extra, &ret->ctime, &ret->ctime_ns);
        return 0;
}

/* Reads size bytes of ino's content with libext2fs's own file reader (inline data, symlinks). */
static int read_small(BvExt *e, uint64_t ino, void *buf, unsigned size)
{
        ext2_file_t f;
        unsigned got = 0;
        errcode_t code = ext2fs_file_open(e->fs, (ext2_ino_t)ino, 0, &f);

        if (code)
                return ext_err(e, code);
        code = ext2fs_file_read(f, buf, size, &got);
        ext2fs_file_close(f);
        if (code)
                return ext_err(e, code);
        return got == size ? 0 : -EBADMSG;
}

static int ext_readlink(void *fs, uint64_t ino, char **ret)
{
        BvExt *e = fs;
        struct ext2_inode_large in;
        char *t;
        int r = read_inode(e, ino, &in);

        if (r < 0)
                return r;
        if (!LINUX_S_ISLNK(in.i_mode))
                return -EINVAL;
        uint64_t size = EXT2_I_SIZE(&in);
        if (size == 0 || size >= 65536)
                return -EBADMSG;
        t = calloc(1, size + 1);
        if (!t)
                return -ENOMEM;
        if (ext2fs_is_fast_symlink((struct ext2_inode *)&in))
                memcpy(t, in.i_block, MIN(size, sizeof(in.i_block)));
        else {
                r = read_small(e, ino, t, (unsigned)size);
                if (r < 0) {
                        free(t);
                        return r;
                }
        }
        *ret = t;
        return 0;
}

typedef struct DirList {
        BvFsEntry *v;
        size_t n, alloc;
        int error;
} DirList;

static int dir_cb(struct ext2_dir_entry *de, int offset _unused_, int blocksize _unused_, char *buf _unused_,
                  void *priv)
{
        DirList *l = priv;
        int len = ext2fs_dirent_name_len(de);

        if ((len == 1 && de->name[0] == '.') || (len == 2 && de->name[0] == '.' && de->name[1] == '.'))
                return 0;
        if (l->n == l->alloc) {
                size_t a = l->alloc ? 2 * l->alloc : 64;
                BvFsEntry *v = realloc(l->v, a * sizeof(*v));
                if (!v) {
                        l->error = -ENOMEM;
                        return DIRENT_ABORT;
                }
                l->v = v;
                l->alloc = a;
        }
        l->v[l->n].name = strndup(de->name, (size_t)len);
        if (!l->v[l->n].name) {
                l->error = -ENOMEM;
                return DIRENT_ABORT;
        }
        l->v[l->n++].ino = de->inode;
        return 0;
}

static int ext_readdir(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n)
{
        BvExt *e = fs;
        DirList l = {};
        errcode_t code;
        int r;

        if (ino == 0 || ino > UINT32_MAX)
                return -ENOENT;
        code = ext2fs_dir_iterate(e->fs, (ext2_ino_t)ino, 0, NULL, dir_cb, &l);
        r = l.error ? l.error : ext_err(e, code);

        if (r < 0) {
                bv_fs_entries_free(l.v, l.n);
                return r;
        }
        bv_fs_entries_sort(l.v, l.n);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

/* The file being read, as runs of blocks: data contiguous on the disk, or holes, each handed to
 * the sink when the next one does not continue it. */
typedef struct Run {
        BvExt *e;
        BvFsSink sink;
        void *userdata;
        uint8_t *buf;
        uint64_t size, nblocks; /* of the file */
        uint32_t bs;
        uint64_t lblk, pblk, n; /* the run being gathered */
        bool hole;
        int error;
} Run;

static int run_flush(Run *run)
{
        BvExt *e = run->e;
        uint64_t off = run->lblk * run->bs, len, at;
        int r;

        if (!run->n)
                return 0;
        len = MIN(run->n * run->bs, run->size - off);
        run->n = 0;
        if (run->hole)
                return run->sink(NULL, len, off, run->userdata);
        at = run->pblk * run->bs;
        if (at > e->disk.size || len > e->disk.size - at)
                return -EBADMSG; /* a block map pointing past the filesystem */
        r = e->disk.dev->pread(e->disk.dev->userdata, run->buf, len, e->disk.offset + at, &e->disk.bad_offset);
        if (r < 0)
                return r;
        return run->sink(run->buf, len, off, run->userdata);
}

/* Adds count blocks from lblk (at pblk, or a hole); a gap before lblk is a hole. */
static int run_add(Run *run, uint64_t lblk, uint64_t pblk, uint64_t count, bool hole)
{
        uint64_t expected = run->lblk + run->n, max = RUN_MAX / run->bs;
        int r;

        if (lblk < expected)
                return -EBADMSG; /* blocks mapped twice */
        if (lblk >= run->nblocks)
                return 0; /* past the end (preallocated): not the file's */
        count = MIN(count, run->nblocks - lblk);
        if (lblk > expected) {
                r = run_add(run, expected, 0, lblk - expected, true);
                if (r < 0)
                        return r;
        }
        while (count) {
                bool joins = run->n && run->hole == hole && (hole || (run->pblk + run->n == pblk && run->n < max));
                if (!joins) {
                        r = run_flush(run);
                        if (r < 0)
                                return r;
                        run->lblk = lblk, run->pblk = pblk, run->hole = hole;
                }
                uint64_t take = hole ? count : MIN(count, max - run->n);
                run->n += take, lblk += take, count -= take;
                if (!hole)
                        pblk += take;
        }
        return 0;
}

static int read_extents(Run *run, uint64_t ino, struct ext2_inode_large *in)
{
        ext2_extent_handle_t h;
        struct ext2fs_extent ex;
        errcode_t code = ext2fs_extent_open2(run->e->fs, (ext2_ino_t)ino, (struct ext2_inode *)in, &h);
        int r = 0;

        if (code)
                return ext_err(run->e, code);
        for (int op = EXT2_EXTENT_ROOT; r >= 0; op = EXT2_EXTENT_NEXT) {
                code = ext2fs_extent_get(h, op, &ex);
                if (code) {
                        if (code != EXT2_ET_EXTENT_NO_NEXT)
                                r = ext_err(run->e, code);
                        break;
                }
                if (ex.e_flags & EXT2_EXTENT_FLAGS_LEAF)
                        r = run_add(run, ex.e_lblk, ex.e_pblk, ex.e_len, ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT);
        }
        ext2fs_extent_free(h);
        return r;
}

static int block_cb(ext2_filsys fs _unused_, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk _unused_,
                    int ref_offset _unused_, void *priv)
{
        Run *run = priv;

        if (blockcnt < 0)
                return 0;
        run->error = run_add(run, (uint64_t)blockcnt, *blocknr, 1, false);
        return run->error < 0 ? BLOCK_ABORT : 0;
}

static int read_inline(Run *run, uint64_t ino)
{
        _cleanup_free_ uint8_t *b = NULL;
        int r;

        if (run->size > 65536)
                return -EBADMSG;
        b = malloc(run->size);
        if (!b)
                return -ENOMEM;
        r = read_small(run->e, ino, b, (unsigned)run->size);
        return r < 0 ? r : run->sink(b, run->size, 0, run->userdata);
}

static int ext_read(void *fs, uint64_t ino, BvFsSink sink, void *userdata)
{
        BvExt *e = fs;
        struct ext2_inode_large in;
        _cleanup_free_ uint8_t *buf = NULL;
        Run run = { .e = e, .sink = sink, .userdata = userdata, .bs = e->fs->blocksize };
        int r = read_inode(e, ino, &in);

        if (r < 0)
                return r;
        if (!LINUX_S_ISREG(in.i_mode))
                return -EISDIR;
        run.size = EXT2_I_SIZE(&in);
        if (run.size == 0)
                return 0;
        if (in.i_flags & EXT4_INLINE_DATA_FL)
                return read_inline(&run, ino);
        run.nblocks = DIV_ROUND_UP(run.size, run.bs);
        buf = malloc(RUN_MAX);
        if (!buf)
                return -ENOMEM;
        run.buf = buf;
        if (in.i_flags & EXT4_EXTENTS_FL)
                r = read_extents(&run, ino, &in);
        else {
                errcode_t code = ext2fs_block_iterate3(e->fs, (ext2_ino_t)ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY, NULL,
                                                       block_cb, &run);
                r = run.error < 0 ? run.error : ext_err(e, code);
        }
        if (r >= 0 && run.lblk + run.n < run.nblocks) /* a hole at the end */
                r = run_add(&run, run.lblk + run.n, 0, run.nblocks - run.lblk - run.n, true);
        if (r >= 0)
                r = run_flush(&run);
        return r;
}

const BvFsOps bv_ext_fs_ops = {
        .library = "libext2fs",
        .open = ext_open,
        .close = ext_close,
        .needs_recovery = ext_needs_recovery,
        .bad_offset = ext_bad_offset,
        .error_text = ext_error_text,
        .lookup = ext_lookup,
        .stat = ext_stat,
        .readlink = ext_readlink,
        .readdir = ext_readdir,
        .read = ext_read,
};
