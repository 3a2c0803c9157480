/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* NTFS through libntfs-3g with device operations over a BvFilesDev (ntfs-files.h); what a file
 * is (symbolic link, fifo...) and its stat as ntfs-3g's FUSE driver shows them is in
 * ntfs-node.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "ntfs-files.h"
#include "ntfs-node.h"

#define RUN_MAX (1u << 20) /* bytes read at once */
#define LINKS_MAX 40       /* symbolic links followed in one lookup */

/* --- the device: reads go to the BvFilesDev, writes are refused -------------------------------- */

static int d_open(struct ntfs_device *d, int flags)
{
        if ((flags & O_ACCMODE) != O_RDONLY) {
                errno = EROFS;
                return -1;
        }
        NDevSetOpen(d);
        NDevSetReadOnly(d);
        return 0;
}

static int d_close(struct ntfs_device *d)
{
        NDevClearOpen(d);
        return 0;
}

static s64 d_pread(struct ntfs_device *d, void *buf, s64 count, s64 offset)
{
        NtfsDisk *disk = d->d_private;
        int r;

        if (count < 0 || offset < 0) {
                errno = EINVAL;
                return -1;
        }
        if ((uint64_t)offset >= disk->size)
                return 0;
        count = (s64)MIN((uint64_t)count, disk->size - (uint64_t)offset);
        r = disk->dev->pread(disk->dev->userdata, buf, (size_t)count, disk->offset + (uint64_t)offset,
                             &disk->bad_offset);
        if (r < 0) {
                disk->error = r; /* what the library turns into EIO is told as it was */
                errno = -r;
                return -1;
        }
        return count;
}

static s64 d_seek(struct ntfs_device *d, s64 offset, int whence)
{
        NtfsDisk *disk = d->d_private;
        s64 base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (s64)disk->pos : (s64)disk->size;

        if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) {
                errno = EINVAL;
                return -1;
        }
        if (base + offset < 0) {
                errno = EINVAL;
                return -1;
        }
        disk->pos = (uint64_t)(base + offset);
        return (s64)disk->pos;
}

static s64 d_read(struct ntfs_device *d, void *buf, s64 count)
{
        NtfsDisk *disk = d->d_private;
        s64 n = d_pread(d, buf, count, (s64)disk->pos);

        if (n > 0)
                disk->pos += (uint64_t)n;
        return n;
}

static s64 d_write(struct ntfs_device *d _unused_, const void *buf _unused_, s64 count _unused_)
{
        errno = EROFS;
        return -1;
}

static s64 d_pwrite(struct ntfs_device *d _unused_, const void *buf _unused_, s64 count _unused_, s64 offset _unused_)
{
        errno = EROFS;
        return -1;
}

static int d_sync(struct ntfs_device *d _unused_)
{
        return 0;
}

static int d_stat(struct ntfs_device *d, struct stat *st)
{
        NtfsDisk *disk = d->d_private;

        memset(st, 0, sizeof(*st));
        st->st_mode = S_IFREG | 0400;
        st->st_size = (off_t)disk->size;
        return 0;
}

static int d_ioctl(struct ntfs_device *d, unsigned long request, void *argp)
{
        NtfsDisk *disk = d->d_private;

        if (request == BLKGETSIZE64) {
                *(uint64_t *)argp = disk->size;
                return 0;
        }
        if (request == BLKSSZGET) {
                *(int *)argp = 512;
                return 0;
        }
        errno = ENOTTY;
        return -1;
}

static struct ntfs_device_operations bv_ntfs_device_ops = {
        .open = d_open,
        .close = d_close,
        .seek = d_seek,
        .read = d_read,
        .write = d_write,
        .pread = d_pread,
        .pwrite = d_pwrite,
        .sync = d_sync,
        .stat = d_stat,
        .ioctl = d_ioctl,
};

/* --- errors -------------------------------------------------------------------------------------- */

/* libntfs-3g's messages: the first error since nt_begin kept for bv_fs_error_text (the cause:
 * "Record 0 has no FILE magic", where the last says "Failed to load $MFT"), nothing printed. */
static _Thread_local char lib_message[256];

static int log_keep(const char *function _unused_, const char *file _unused_, int line _unused_, u32 level,
                    void *data _unused_, const char *format, va_list args)
{
        size_t n;

        if (!(level & (NTFS_LOG_LEVEL_ERROR | NTFS_LOG_LEVEL_PERROR | NTFS_LOG_LEVEL_CRITICAL)) || lib_message[0])
                return 0;
        vsnprintf(lib_message, sizeof(lib_message), format, args);
        n = strlen(lib_message);
        while (n > 0 && (lib_message[n - 1] == '\n' || lib_message[n - 1] == ' '))
                lib_message[--n] = 0;
        return (int)n;
}

void nt_begin(Ntfs *n)
{
        n->disk.error = 0;
        lib_message[0] = 0;
        errno = 0;
}

int nt_fail(Ntfs *n, int fallback)
{
        int e = errno ? errno : fallback;

        if (n->disk.error)
                return n->disk.error; /* the snapshot's damage, whatever the library made of it */
        if (lib_message[0] && n)
                snprintf(n->message, sizeof(n->message), "%s", lib_message);
        switch (e) {
        case ENOENT:
        case ENOTDIR:
        case ENOMEM:
        case EISDIR:
        case ELOOP:
        case EINVAL:
                return -e;
        case EOPNOTSUPP:
                return -EPROTONOSUPPORT;
        case EACCES: /* an encrypted file */
                return -EPROTONOSUPPORT;
        default:
                return -EIO;
        }
}

static const char *nt_open_error_text(void)
{
        return lib_message[0] ? lib_message : NULL;
}

/* --- the volume ---------------------------------------------------------------------------------- */

static int nt_open(const BvFilesDev *dev, uint64_t offset, uint64_t size, void **ret)
{
        struct ntfs_device *d;
        int r = ntfs_dl_open();

        if (r < 0)
                return r;
        Ntfs *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->disk = (NtfsDisk){ .dev = dev, .offset = offset, .size = size };
        ntfs_log_set_handler(log_keep);
        nt_begin(n);
        d = ntfs_device_alloc("snapshot", 0, &bv_ntfs_device_ops, &n->disk);
        if (!d) {
                free(n);
                return -ENOMEM;
        }
        n->vol = ntfs_device_mount(d, NTFS_MNT_RDONLY);
        if (!n->vol) {
                r = nt_fail(n, EIO);
                ntfs_device_free(d);
                free(n);
                return r == -EIO || r == -EINVAL ? -EMEDIUMTYPE : r;
        }
        /* as ntfs_mount() does: without its lookup cache, a case-sensitive lookup fails (EINVAL) */
        ntfs_create_lru_caches(n->vol);
        /* what ntfs-3g's driver shows by default: no $MFT and other system files, hidden ones too */
        ntfs_set_shown_files(n->vol, FALSE, TRUE, FALSE);
        *ret = n;
        return 0;
}

static void nt_close(void *fs)
{
        Ntfs *n = fs;

        if (!n)
                return;
        if (n->vol)
                ntfs_umount(n->vol, FALSE); /* frees the device too */
        for (size_t i = 0; i < n->n_streams; i++)
                free(n->streams[i].name);
        free(n->streams);
        free(n);
}

static bool nt_needs_recovery(const void *fs)
{
        const Ntfs *n = fs;

        return (le16_to_cpu(n->vol->flags) & le16_to_cpu(VOLUME_IS_DIRTY)) != 0;
}

static const char *nt_label(const void *fs)
{
        const Ntfs *n = fs;

        return n->vol->vol_name && n->vol->vol_name[0] ? n->vol->vol_name : NULL;
}

static uint64_t nt_bad_offset(const void *fs)
{
        const Ntfs *n = fs;

        return n->disk.bad_offset;
}

static const char *nt_error_text(const void *fs)
{
        const Ntfs *n = fs;

        return n->message[0] ? n->message : NULL;
}

/* --- paths --------------------------------------------------------------------------------------- */

/* The named stream "file:name" of path's last component, when no file has that name: an
 * inode number of its own (NTFS_STREAM_INO) that stat and read know. */
static int lookup_stream(Ntfs *n, uint64_t dir, const char *comp, uint64_t *ret_ino)
{
        const char *colon = strchr(comp, ':');
        _cleanup_free_ char *file = NULL;
        ntfschar *uname = NULL;
        uint64_t ino;
        int r, len;

        if (!colon || colon == comp || !colon[1])
                return -ENOENT;
        file = strndup(comp, (size_t)(colon - comp));
        if (!file)
                return -ENOMEM;
        r = nt_child(n, dir, file, &ino);
        if (r < 0)
                return r;
        len = ntfs_mbstoucs(colon + 1, &uname);
        if (len <= 0)
                return -ENOENT;
        r = nt_stream_add(n, ino, uname, len, ret_ino);
        if (r < 0)
                free(uname);
        return r;
}

static int nt_lookup(void *fs, const char *path, bool follow, uint64_t *ret_ino)
{
        Ntfs *n = fs;
        _cleanup_free_ char *rest = strdup(path);
        uint64_t cur = FILE_root;
        unsigned links = 0;

        if (!rest)
                return -ENOMEM;
        for (;;) {
                char *p = rest + strspn(rest, "/"), *slash, *after;
                uint64_t child;
                bool last;
                int r;

                if (!*p) {
                        *ret_ino = cur;
                        return 0;
                }
                slash = strchr(p, '/');
                after = slash ? slash + 1 : p + strlen(p);
                if (slash)
                        *slash = 0;
                last = after[strspn(after, "/")] == 0;
                if (strcmp(p, ".") == 0)
                        r = 0, child = cur;
                else if (strcmp(p, "..") == 0)
                        r = nt_parent(n, cur, &child);
                else {
                        r = nt_child(n, cur, p, &child);
                        if (r == -ENOENT && last)
                                r = lookup_stream(n, cur, p, &child);
                }
                if (r < 0)
                        return r;
                if ((!last || follow) && nt_is_symlink(n, child)) {
                        _cleanup_free_ char *target = NULL;
                        char *next;
                        if (++links > LINKS_MAX)
                                return -ELOOP;
                        r = nt_readlink(n, child, &target);
                        if (r < 0)
                                return r;
                        if (asprintf(&next, "%s/%s", target, after) < 0)
                                return -ENOMEM;
                        free(rest);
                        rest = next;
                        if (target[0] == '/')
                                cur = FILE_root;
                        continue;
                }
                cur = child;
                memmove(rest, after, strlen(after) + 1);
        }
}

/* --- directories --------------------------------------------------------------------------------- */

typedef struct DirList {
        BvFsEntry *v;
        size_t n, alloc;
        int error;
} DirList;

static int dir_fill(void *priv, const ntfschar *name, const int name_len, const int name_type, const s64 pos _unused_,
                    const MFT_REF mref, const unsigned dt_type _unused_)
{
        DirList *l = priv;
        char *s = NULL;

        if (name_type == FILE_NAME_DOS)
                return 0; /* the 8.3 alias of a long name */
        if (ntfs_ucstombs(name, name_len, &s, 0) < 0) {
                l->error = -EBADMSG;
                return -1;
        }
        if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
                free(s);
                return 0;
        }
        if (l->n == l->alloc) {
                size_t a = l->alloc ? 2 * l->alloc : 64;
                BvFsEntry *v = realloc(l->v, a * sizeof(*v));
                if (!v) {
                        free(s);
                        l->error = -ENOMEM;
                        return -1;
                }
                l->v = v;
                l->alloc = a;
        }
        l->v[l->n++] = (BvFsEntry){ .name = s, .ino = MREF(mref) };
        return 0;
}

static int nt_readdir(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n)
{
        Ntfs *n = fs;
        DirList l = {};
        ntfs_inode *ni;
        s64 pos = 0;
        int r;

        r = nt_open_dir(n, ino, &ni);
        if (r < 0)
                return r;
        nt_begin(n);
        r = ntfs_readdir(ni, &pos, &l, dir_fill) ? nt_fail(n, EIO) : 0;
        if (l.error)
                r = n->disk.error ? n->disk.error : l.error;
        ntfs_inode_close(ni);
        if (r < 0) {
                bv_fs_entries_free(l.v, l.n);
                return r;
        }
        bv_fs_entries_sort(l.v, l.n);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

/* --- content ------------------------------------------------------------------------------------- */

/* The run of na's runlist holding byte pos: its end (bytes) and whether it is a hole; 0 if the
 * runlist does not say (read through the library). */
static uint64_t run_at(ntfs_attr *na, uint64_t pos, bool *ret_hole)
{
        unsigned bits = na->ni->vol->cluster_size_bits;
        VCN vcn = (VCN)(pos >> bits);

        for (runlist_element *rl = na->rl; rl && rl->length; rl++)
                if (rl->vcn <= vcn && vcn < rl->vcn + rl->length) {
                        *ret_hole = rl->lcn == LCN_HOLE;
                        return (uint64_t)(rl->vcn + rl->length) << bits;
                }
        return 0;
}

/* Streams na's content to sink: holes of a sparse attribute as holes, the rest read by the library
 * (which decompresses). */
static int read_attr(Ntfs *n, ntfs_attr *na, BvFsSink sink, void *userdata)
{
        uint64_t size = (uint64_t)na->data_size, pos = 0;
        bool runs = NAttrNonResident(na) && NAttrSparse(na) && !NAttrCompressed(na) && !NAttrEncrypted(na);
        _cleanup_free_ uint8_t *buf = NULL;
        int r;

        if (NAttrEncrypted(na))
                return -EPROTONOSUPPORT;
        nt_begin(n);
        if (runs && ntfs_attr_map_whole_runlist(na) < 0)
                return nt_fail(n, EIO);
        buf = malloc(RUN_MAX);
        if (!buf)
                return -ENOMEM;
        while (pos < size) {
                uint64_t want = MIN((uint64_t)RUN_MAX, size - pos), end;
                bool hole = false;
                s64 got;

                end = runs ? run_at(na, pos, &hole) : 0;
                if (end > pos) {
                        end = MIN(end, size);
                        want = MIN(want, end - pos);
                        if (hole) {
                                r = sink(NULL, want, pos, userdata);
                                if (r < 0)
                                        return r;
                                pos += want;
                                continue;
                        }
                }
                nt_begin(n);
                got = ntfs_attr_pread(na, (s64)pos, (s64)want, buf);
                if (got <= 0)
                        return got < 0 ? nt_fail(n, EIO) : -EBADMSG;
                r = sink(buf, (size_t)got, pos, userdata);
                if (r < 0)
                        return r;
                pos += (uint64_t)got;
        }
        return 0;
}

static int nt_read(void *fs, uint64_t ino, BvFsSink sink, void *userdata)
{
        Ntfs *n = fs;
        BvFsStat st;
        ntfs_inode *ni;
        ntfs_attr *na;
        const NtfsStream *s = nt_stream_of(n, ino);
        int r = nt_stat(n, ino, &st);

        if (r < 0)
                return r;
        if (!S_ISREG(st.mode))
                return -EISDIR;
        r = nt_open_ino(n, s ? s->ino : ino, &ni);
        if (r < 0)
                return r;
        nt_begin(n);
        na = ntfs_attr_open(ni, AT_DATA, s ? s->name : AT_UNNAMED, s ? s->len : 0);
        if (!na)
                r = errno == ENOENT ? 0 : nt_fail(n, EIO); /* a file without data: empty */
        else {
                r = read_attr(n, na, sink, userdata);
                ntfs_attr_close(na);
        }
        ntfs_inode_close(ni);
        return r;
}

const BvFsOps bv_ntfs_fs_ops = {
        .library = "libntfs-3g",
        .modes_made_up = true,
        .open = nt_open,
        .close = nt_close,
        .needs_recovery = nt_needs_recovery,
        .bad_offset = nt_bad_offset,
        .error_text = nt_error_text,
        .lookup = nt_lookup,
        .stat = nt_stat,
        .readlink = nt_readlink,
        .readdir = nt_readdir,
        .read = nt_read,
        .open_error_text = nt_open_error_text,
        .label = nt_label,
        .streams = nt_streams,
};
