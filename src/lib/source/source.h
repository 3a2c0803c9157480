/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Sources: a block device (size from BLKGETSIZE64), a regular file (raw VM image) or a
 * stream ("-" is stdin). Reads go through io_uring with a bounded queue of large reads,
 * O_DIRECT where the source allows it, and posix_fadvise(DONTNEED) behind the reader so a
 * backup does not evict the page cache. Holes of regular files are found with SEEK_DATA /
 * SEEK_HOLE and never read. Without io_uring the reader falls back to pread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "extent.h"

/* The kinds a snapshot records (by name: source_kinds in source.c, the one table of kinds). */
typedef enum {
        BV_SOURCE_FILE = 1,
        BV_SOURCE_BLOCKDEV = 2,
        BV_SOURCE_STREAM = 3,
        BV_SOURCE_NBD = 4, /* an NBD export, by URI (source-nbd.c) */
        BV_SOURCE_IMAGE = 5, /* a disk image file (qcow2, vmdk ...), read as its virtual disk (source-image.c) */
        BV_SOURCE_LIBVIRT = 6, /* a disk of a libvirt domain, read through its backup job (source-libvirt.c) */
} BvSourceKind;

/*
 * A disk of a running libvirt domain, exported by a pull-mode backup job that the caller began
 * (write/backup-libvirt.c, with src/lib/virt): what the snapshot records and where the export is.
 */
typedef struct BvSourceLibvirt {
        const char *domain, *uuid; /* the domain's name and UUID */
        const char *disk;          /* the disk's target ("vda"): the export's name */
        uint64_t disk_size;        /* its virtual size as libvirt reported it */
        const char *checkpoint;    /* the checkpoint the job created for it (NULL: none, a raw disk) */
        const char *incremental;   /* the checkpoint the export's dirty bitmap counts from (NULL: a full job) */
        const char *socket;        /* the job's NBD server; NULL for a shut-off domain's disk: */
        const char *image;         /* its image, read directly (a file or a block device) */
        const char *image_format;  /* as the domain's XML states it ("qcow2"; NULL: raw) */
} BvSourceLibvirt;

/* BvSourceOptions' defaults and limits (an NBD export's reads are at most 32 MiB). */
#define BV_SOURCE_READ_SIZE (1024u * 1024u)
#define BV_SOURCE_READ_SIZE_MAX (64u * 1024u * 1024u)
#define BV_SOURCE_QUEUE_DEPTH 8u
#define BV_SOURCE_FILE_QUEUE_DEPTH 16u /* a file or block device: 16 MiB in flight by default */
#define BV_SOURCE_QUEUE_DEPTH_MAX 256u

typedef struct BvSourceOptions {
        size_t read_size;     /* bytes per read; default 1 MiB; a multiple of 4096, at most 64 MiB */
        unsigned queue_depth; /* reads in flight; default 8 (16 for a file or block device), at most 256 */
        bool no_direct;       /* never O_DIRECT */
        bool no_uring;        /* force the pread path */
        const char *dirty_bitmap; /* NBD, or a qcow2 image's persistent bitmap: follow qemu's dirty
                                   * bitmap of this name (NULL: none) */
        const char *compare_with; /* a regular file: its previous version, a reflink copy (NULL: none) */
        const char *thin_delta;   /* thin_delta's XML: only its changed ranges are read (NULL: none) */
        /* A block that does not read (EIO) is delivered as zeroes and listed in the read stats,
         * instead of failing the read. */
        bool skip_unreadable;
        /* A disk image file (qcow2, vmdk ...) is read as the file it is, not as its virtual disk. */
        bool as_file;
        /* The image's format as the user states it ("qcow2" ...): the file must be one (its header
         * says so) and is read with its backing chain. NULL: probed from the header, and then read
         * as a virtual disk only when it references no other file (-ENOLINK naming it). */
        const char *image_format;
        /* The disk of a libvirt backup job that a libvirt:DOMAIN source reads (NULL: none, and such
         * a source does not open). */
        const BvSourceLibvirt *libvirt;
        /* Where a source that does not open says why in the words of the helper it ran (qemu-nbd's
         * message), "" when it has none; NULL: not asked. */
        char *error_detail;
        size_t error_detail_size;
} BvSourceOptions;

/* Appends a range (extent.h) to a growing array (*cap entries allocated), merged with the last
 * one when it ends where this one starts. 0 or -ENOMEM. */
int bv_range_append(BvByteRange **v, size_t *n, size_t *cap, uint64_t offset, uint64_t length);

/* For source implementations: path opened read-only (O_CLOEXEC | O_NOCTTY | flags) and its stat
 * in *ret_st. The fd, or -errno: those of open and fstat, -EISDIR for a directory. */
struct stat;
int bv_source_open_fd(const char *path, int flags, struct stat *ret_st);

/* For source implementations: exactly len bytes of fd at offset. 0, the read's -errno, or
 * -ENODATA when the file ends sooner (it shrank under us). */
int bv_source_pread(int fd, void *buf, size_t len, uint64_t offset);

typedef struct BvSource BvSource;

/* What a changed-block source keeps for a whole read (bv_source_read_all): once whole is set
 * (before the first next()) it delivers everything, no UNCHANGED extents, and unchanged holds,
 * in order, the ranges its map calls unchanged. */
typedef struct BvWholeRead {
        bool whole;
        BvByteRange *unchanged;
        size_t n_unchanged, cap_unchanged;
} BvWholeRead;

/* What identifies a regular file's content without reading it (as restic compares it): equal
 * device, inode, size, mtime and ctime mean the content is what it was. Taken at open. */
typedef struct BvSourceIdentity {
        uint64_t dev, ino, size;
        uint64_t mtime_ns, ctime_ns; /* nanoseconds since the epoch */
} BvSourceIdentity;

/* How the bytes delivered so far were read: through the page cache (regions that were cached)
 * or with O_DIRECT (regions that were not). */
typedef struct BvSourceReadStats {
        uint64_t bytes_cached;
        uint64_t bytes_direct;
        uint64_t error_offset;        /* where the read that failed the source starts (a block) */
        unsigned reads_ahead_max;     /* the most DATA reads queued ahead of the consumer at once */
        const BvByteRange *unreadable; /* skip_unreadable: the blocks delivered as zeroes, merged; */
        size_t n_unreadable;           /* owned by the source */
} BvSourceReadStats;

/*
 * What a source does, for the backup. next() delivers the image in order, as bv_source_next
 * says; a changed-block source may also deliver BV_EXTENT_UNCHANGED extents (no data) for
 * ranges that hold what the parent snapshot holds, and must then have read_at(), with which
 * the backup reads the parts of such a range that it cannot take whole from the parent's map.
 * Optional members may be NULL.
 */
typedef struct BvSourceOps {
        int (*next)(void *impl, BvExtent *ret);
        int (*read_at)(void *impl, void *buf, size_t len, uint64_t offset); /* 0 or -errno */
        uint64_t (*size)(void *impl); /* UINT64_MAX until known (a stream before its end) */
        bool (*uses_uring)(void *impl);
        bool (*uses_direct)(void *impl);
        int (*identity)(void *impl, BvSourceIdentity *ret); /* regular files: 0, else -EOPNOTSUPP */
        /* A changed-block source whose map is relative to another file (its previous version):
         * that file's identity, which the parent snapshot must have recorded. */
        int (*base_identity)(void *impl, BvSourceIdentity *ret);
        void (*read_stats)(void *impl, BvSourceReadStats *ret);
        /* A changed-block source: the name of what tracks its changes (for example
         * "qemu:dirty-bitmap:NAME"), which the snapshot records; NULL for none. */
        const char *(*changed_map)(void *impl);
        /* The changed_map the parent snapshot must have recorded (NULL: changed_map itself): a
         * thin delta is from the device the parent read to the one read now. */
        const char *(*parent_map)(void *impl);
        /* A changed-block source's whole-read state, which bv_source_read_all sets when the
         * parent cannot be paired with the map and bv_source_unchanged_ranges reads. */
        BvWholeRead *(*whole_read)(void *impl);
        /* A changed-block source reading incrementally (no whole read): the ranges its map calls
         * changed, for the whole source, in order and merged, asked before the first next() so
         * that the backup can fetch what it will take from the parent ahead of the reads
         * (bv_source_changed_ranges). The array is the source's. */
        int (*changed_ranges)(void *impl, const BvByteRange **ret, size_t *ret_count);
        uint64_t (*work)(void *impl); /* see bv_source_work; NULL: unknown */
        /* A disk image read as its virtual disk: its format ("qcow2"); NULL for other sources. */
        const char *(*image_format)(void *impl);
        /* A libvirt domain's disk: what the snapshot records of it; NULL for other sources. */
        const BvSourceLibvirt *(*libvirt)(void *impl);
        void (*free)(void *impl);
} BvSourceOps;

/* A source of kind with the ops on impl (freed by bv_source_free with ops->free); path is what
 * the snapshot records. 0 or -ENOMEM (then impl is not freed). */
int bv_source_new(const BvSourceOps *ops, void *impl, BvSourceKind kind, const char *path, BvSource **ret);

/* The source at a location, opened by the implementation of its kind (the table in source.c):
 * an NBD URI with bv_source_open_nbd, anything else with bv_source_open_path. opts may be NULL
 * for the defaults. Errors: those of the implementation. */
int bv_source_open(const char *path, const BvSourceOptions *opts, BvSource **ret);
/* The file, block device or stream at path: path "-" is stdin (a stream), as is a named pipe;
 * opts->compare_with opens with bv_source_open_compare and opts->thin_delta with
 * bv_source_open_thin_delta. Errors: -ENOENT etc. from stat/open, -EISDIR for a directory,
 * -ENODEV for a character device or socket, -EINVAL for bad options. */
int bv_source_open_path(const char *path, const BvSourceOptions *opts, BvSource **ret);
void bv_source_free(BvSource *s);

BvSourceKind bv_source_kind(const BvSource *s);
const char *bv_source_kind_name(BvSourceKind k); /* "file", "blockdev", "stream", "nbd" */
int bv_source_kind_from_name(const char *name, BvSourceKind *ret); /* -EINVAL if unknown */
const char *bv_source_path(const BvSource *s);
/* Size in bytes; for a stream, UINT64_MAX until the end was reached. */
uint64_t bv_source_size(const BvSource *s);
bool bv_source_uses_uring(const BvSource *s);
bool bv_source_uses_direct(const BvSource *s);
/* The identity of a regular file as it was at open; -EOPNOTSUPP for other sources. */
int bv_source_identity(const BvSource *s, BvSourceIdentity *ret);
/* The bytes next() will read (deliver as DATA), as known at open, for a progress line's ETA:
 * a block device's size, a regular file's allocated bytes (its holes are never read; at most
 * its size); UINT64_MAX when unknown (a stream, a source that does not tell). */
uint64_t bv_source_work(const BvSource *s);
/* A disk image read as its virtual disk: its format ("qcow2", "vmdk" ...); NULL for others. */
const char *bv_source_image_format(const BvSource *s);
/* A libvirt domain's disk: its domain, disk and checkpoints; NULL for other sources. */
const BvSourceLibvirt *bv_source_libvirt(const BvSource *s);
/* Zeroes when the source does not tell. */
void bv_source_read_stats(const BvSource *s, BvSourceReadStats *ret);

/* A changed-block source's map name (NULL for other sources); bv_source_read_all makes it read
 * everything (-EOPNOTSUPP for other sources, -EBUSY once next() was called), after which
 * bv_source_unchanged_ranges gives what the map called unchanged (none for other sources). */
const char *bv_source_changed_map(const BvSource *s);
/* What the parent must have recorded as its changed_map to be paired (see BvSourceOps). */
const char *bv_source_parent_map(const BvSource *s);
int bv_source_read_all(BvSource *s);
/* The whole-read state of a changed-block source, NULL for others: for a source that wraps
 * another (a job's) to hand on as its own whole_read. */
BvWholeRead *bv_source_whole_read(const BvSource *s);
void bv_source_unchanged_ranges(const BvSource *s, const BvByteRange **ret, size_t *ret_count);
/* The ranges a changed-block source reading incrementally will deliver as changed (everything
 * else comes as UNCHANGED), in order, merged, valid while s is; a hint to prefetch by, not a
 * promise (next() decides). -EOPNOTSUPP when the source cannot tell (other sources, a whole
 * read), else the source's -errno (NBD: its block status failed). */
int bv_source_changed_ranges(const BvSource *s, const BvByteRange **ret, size_t *ret_count);

/* The identity of the previous version a changed-block source compares with: -EOPNOTSUPP for
 * sources that compare with none. */
int bv_source_base_identity(const BvSource *s, BvSourceIdentity *ret);
void bv_source_identity_from_stat(const struct stat *st, BvSourceIdentity *ret);

/* The regular file at path, compared with compare_with, its previous version kept as a reflink
 * copy or in a btrfs snapshot: ranges where FIEMAP shows both files share their blocks are
 * delivered as UNCHANGED, the rest is read (holes are not). Errors: those of open, -EINVAL when
 * either is not a regular file or both are the same file, -EOPNOTSUPP when the filesystem has
 * no FIEMAP. opts may be NULL. */
int bv_source_open_compare(const char *path, const char *compare_with, const BvSourceOptions *opts, BvSource **ret);

/* The file or block device at path, read where the thin_delta XML at delta_path (thin_delta
 * --snap1 OLD --snap2 NEW, NEW being what path holds) says it changed; the rest is delivered as
 * UNCHANGED. Its changed_map is "lvm-thin:NEW", and the parent must have recorded "lvm-thin:OLD".
 * Errors: those of open and of reading delta_path, -EBADMSG when delta_path is not thin_delta's
 * output (or disagrees with itself: see bv_thin_delta_parse), -ERANGE when it does not fit path
 * (see bv_source_open_thin), -EINVAL for another kind of file. */
int bv_source_open_thin_delta(const char *path, const char *delta_path, const BvSourceOptions *opts,
                              BvSource **ret);

/* The largest NBD export read (1 PiB): block status answers 4 GiB at a time, so a walk of an
 * export takes one request per 4 GiB even where it holds nothing (262144 for 1 PiB). */
#define BV_SOURCE_NBD_SIZE_MAX (1ull << 50)

/* Whether path is an NBD URI (nbd://, nbds://, nbd+unix://, nbds+unix://, nbd+vsock://). */
bool bv_source_is_nbd_uri(const char *path);
/* The export at an NBD URI, read with libnbd: queue_depth reads in flight on one connection,
 * ranges the server reports as zero (base:allocation) never read, and with dirty_bitmap only the
 * ranges qemu's bitmap marks dirty read (the rest delivered as UNCHANGED). Errors: the
 * connection's errno (-ECONNREFUSED, -ENOENT ...), -EINVAL for a bad URI or options, -ENOMSG
 * when the server does not export the dirty bitmap, -EFBIG when the export claims more than
 * BV_SOURCE_NBD_SIZE_MAX bytes. */
int bv_source_open_nbd(const char *uri, const BvSourceOptions *opts, BvSource **ret);

/* The export over fd, a socket connected to an NBD server (owned by the source, closed on
 * failure too), as bv_source_open_nbd reads it; name is what bv_source_path says. */
int bv_source_open_nbd_socket(int fd, const char *name, const BvSourceOptions *opts, BvSource **ret);

/* The disk image format (qemu-img's name: "qcow2", "qcow", "qed", "vmdk", "vdi", "vhdx", "vpc")
 * whose magic number heads the regular file at path, in *ret_format (static): 1, or 0 for
 * anything else (a raw image, a block device, a stream, an NBD URI, a path that does not open:
 * its open says why), or -errno when the file does not read. Never by the name's extension. */
int bv_source_detect_image(const char *path, const char **ret_format);
/* The disk image at path read as its virtual disk: qemu-nbd --read-only, started on a socket that
 * is never in the filesystem and killed with this process, serves it to the NBD source (so holes
 * and zero clusters, of a backing chain too, are never read). Its identity is the image file's.
 * With opts->dirty_bitmap (a qcow2's persistent bitmap) only what it marks dirty is read, as
 * bv_source_open_nbd does, and its changed_map is "qemu:dirty-bitmap:NAME".
 * Errors: those of open, -EINVAL with compare_with or thin_delta, -ENOMSG when the image has no
 * bitmap of that name, -EBUSY when a running QEMU
 * writes the image (it holds the write lock), -ENOPKG when qemu-nbd does not run, -EBADMSG when
 * qemu-nbd cannot open the image (a corrupt or truncated one, a missing backing file: see
 * opts->error_detail). A probed image (no opts->image_format) that references another file (a
 * backing file, a qcow2 data file, a vmdk extent) is refused with -ENOLINK, the file it names in
 * opts->error_detail; opts->image_format that is not the header's format: -EMEDIUMTYPE, the
 * header's format (or "raw") in opts->error_detail. */
int bv_source_open_image(const char *path, const BvSourceOptions *opts, BvSource **ret);
/* Starts qemu-nbd on the image at path of format (--read-only unless writable; bitmap: exports
 * the qcow2 persistent bitmap of that name as "qemu:dirty-bitmap:NAME"), socket-activated on a
 * socket that is never in the filesystem, in its own process group and killed with the calling
 * thread: its pid, with *ret_client a socket connected to it (to hand to libnbd) and *ret_err the
 * read end of its stderr. It exits by itself once that client goes. -EINVAL, -ENOMEM, -errno. */
int bv_qemu_nbd_start(const char *path, const char *format, const char *bitmap, bool writable, int *ret_client,
                      int *ret_err);
/* Stops qemu-nbd (SIGTERM; it exits by itself once its client is gone) and reaps it: its wait
 * status (0 for pid <= 0). */
int bv_qemu_nbd_stop(pid_t pid);
/* qemu-nbd's first line on stderr without "qemu-nbd: " and "Failed to blk_new_open 'PATH': ",
 * once it has exited (read until its stderr closes). */
void bv_qemu_nbd_message(int err_fd, char *buf, size_t size);
/* After qemu-nbd at pid did not serve (r: the handshake's error): kills and reaps it, puts its
 * message in detail and says what it means: -ENOPKG (it does not run), -EBUSY (a running QEMU
 * holds the image's write lock), -ENOMSG (no bitmap of that name), -EBADMSG (another message),
 * else r. err_fd stays open. */
int bv_qemu_nbd_failed(pid_t pid, int err_fd, int r, char *detail, size_t size);
/* For source-image.c: does the probed image (open as fd, named file for qemu-img) of format
 * reference another file? 1 with its name in detail, 0, -ENOPKG (no qemu-img), -EBADMSG (qemu-img
 * cannot read it, detail says so), -errno. */
int bv_source_image_references(int fd, const char *file, const char *format, char *detail, size_t size);

/* What names a libvirt domain as a source: "libvirt:DOMAIN". */
#define BV_SOURCE_LIBVIRT_PREFIX "libvirt:"
/* Whether location is "libvirt:DOMAIN" (or "libvirt:DOMAIN/TARGET", as a disk's snapshot records it). */
bool bv_source_is_libvirt(const char *location);
/* The disk opts->libvirt names, of the job it describes, read from its NBD export
 * (nbd+unix:///TARGET?socket=SOCKET) by bv_source_open_nbd: with opts->libvirt->incremental only
 * what the bitmap "backup-TARGET" marks dirty, the rest delivered as UNCHANGED. Its path is
 * "libvirt:DOMAIN/TARGET", its changed_map "libvirt-checkpoint:NEW" (the checkpoint this job
 * created; none for a disk without one) and the parent it pairs with must have recorded
 * "libvirt-checkpoint:OLD" (the incremental one): the bitmap means "changed since checkpoint OLD",
 * which that parent's job created. A shut-off domain's disk (no socket, its image) is read
 * directly: a qcow2 (or another qemu-img format) through bv_source_open_image, with incremental
 * only what the image's persistent bitmap of that checkpoint marks dirty; a raw one with
 * bv_source_open_path. Errors: -EINVAL without opts->libvirt or for a location that is not its
 * domain's, else those of bv_source_open_nbd, bv_source_open_image or bv_source_open_path. */
int bv_source_open_libvirt(const char *location, const BvSourceOptions *opts, BvSource **ret);

/* Whether the qcow2 image at path carries the persistent dirty bitmap name (qemu-img info -U):
 * 1 when it does and it tracks writes, 0 when it has none of that name, -EUCLEAN when it is
 * marked in use (a QEMU that had it open died: it misses writes), -ESTALE when it is disabled,
 * -ENOPKG (no qemu-img), -EBADMSG (qemu-img cannot read the image: its words in detail), -errno. */
int bv_source_image_bitmap(const char *path, const char *name, char *detail, size_t size);

/* Reads len bytes at offset: -EOPNOTSUPP for a source that cannot (a stream). */
int bv_source_read_at(BvSource *s, void *buf, size_t len, uint64_t offset);

/* Next extent in image order: DATA (data valid until the next call) or HOLE (or UNCHANGED, from
 * a changed-block source). Extents are
 * contiguous from 0 to the size; DATA extents hold at most read_size bytes; HOLE extents (regular
 * files only) are coalesced and never read. Returns 1 with *ret filled, 0 at the end, or -errno:
 * the read's errno (-EIO ...), or -ENODATA when the source ends before the size it had at open
 * (it shrank under us). Errors are sticky. */
int bv_source_next(BvSource *s, BvExtent *ret);

/* What libblkid finds on a device or image. Strings are NULL when unknown. */
typedef struct BvProbePartition {
        uint32_t number;
        uint64_t start, size; /* bytes */
        char *type;           /* GPT type GUID, or the MBR type as "0x83" */
        char *uuid;           /* the partition's own UUID */
        char *fstype, *label, *fsuuid; /* the filesystem inside it */
} BvProbePartition;

typedef struct BvProbe {
        char *pttype, *ptuuid;         /* partition table */
        char *fstype, *label, *uuid;   /* a filesystem on the whole device */
        BvProbePartition *partitions;
        size_t n_partitions;
} BvProbe;

/* Fills *ret (zeroed first; bv_probe_done() frees it). Never fails on unrecognised content
 * (an empty probe). */
int bv_source_probe(const char *path, BvProbe *ret);
/* The same on an open file or block device (read-only is enough); *ret must be zeroed, and is
 * partly filled on failure (bv_probe_done() frees it either way). 0 or -errno. */
int bv_source_probe_fd(int fd, BvProbe *ret);
void bv_probe_done(BvProbe *p);

/* A block device's stable name: its first link in /dev/disk/by-id, else by-uuid, else by-partuuid
 * (for example "/dev/disk/by-id/ata-WDC_WD40EFRX_WD-1234"). -ENOTBLK for anything but a block
 * device, -ENOENT when udev gave it no such name. */
int bv_source_stable_name(const char *path, char *buf, size_t size);
