/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Pack files (docs/FORMAT.md, "Packs"): immutable files of tens of MiB holding encoded
 * objects back to back, closed by an encrypted pack index (a PACKINDEX object listing every
 * object) and a fixed footer. Stored at packs/<first two hex digits>/<32 hex digits>.pack,
 * written with the durability recipe and never overwritten.
 */

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "group.h"
#include "keyring.h"
#include "object.h"

#define BV_PACK_ID_SIZE 16
#define BV_PACK_TARGET_DEFAULT (32u * 1024 * 1024)
#define BV_PACK_HEADER_SIZE 32
#define BV_PACK_FOOTER_SIZE 32

/* One object, or one member of a GROUP object: members share their group's offset and length
 * and are numbered from 0 (docs/FORMAT.md, "Packs"). */
typedef struct BvPackEntry {
        uint8_t id[BV_ID_SIZE];
        uint8_t type;        /* BvObjectType */
        uint8_t member;      /* the member's number in a GROUP, else 0 */
        uint32_t offset;     /* of the encoded object in the pack */
        uint32_t length;     /* encoded length */
        uint32_t raw_length; /* plaintext length (a member's own length) */
} BvPackEntry;

/* Writing: one writer thread owns a BvPackWriter. */
typedef struct BvPackWriter BvPackWriter;

/* packs_dirfd is the repository's packs/ directory; the codec seals the pack index. */
int bv_pack_writer_new(int packs_dirfd, BvObjectCodec *codec, BvPackWriter **ret);
/* The same through the writers of backend b (backend.h): a spool file, put create-only at
 * commit (a remote repository's packs). */
int bv_pack_writer_new_backend(BvBackend *b, BvObjectCodec *codec, BvPackWriter **ret);
void bv_pack_writer_free(BvPackWriter *w); /* discards an uncommitted pack */

/* -EFBIG when the object would end past 4 GiB or the pack index is full: commit, then append
 * again. A write error (-ENOSPC, -EIO) discards the pack being written. */
int bv_pack_writer_append(BvPackWriter *w, BvObjectType type, const uint8_t id[BV_ID_SIZE], uint32_t raw_length,
                          const void *encoded, size_t len);
/* Appends an encoded GROUP object holding count (2..BV_GROUP_MAX_MEMBERS) chunks; the same
 * errors as bv_pack_writer_append. */
int bv_pack_writer_append_group(BvPackWriter *w, const BvGroupMember *members, size_t count, const void *encoded,
                                size_t len);
uint64_t bv_pack_writer_size(const BvPackWriter *w);
size_t bv_pack_writer_count(const BvPackWriter *w); /* entries: objects and group members */

/* Writes the pack index and footer, fsyncs, links the file into place and fsyncs the
 * directory. ret_entries (malloc'd) lists what the pack holds. The writer is then empty and
 * may start the next pack. -ENODATA if nothing was appended. On failure the pack is discarded. */
int bv_pack_writer_commit(BvPackWriter *w, uint8_t ret_pack_id[BV_PACK_ID_SIZE], BvPackEntry **ret_entries,
                          size_t *ret_count);

/* bv_pack_writer_commit, then the caller's record step for what the pack holds (its index, a
 * copy's DST): nothing when no object was appended. The entries are the writer's (freed after
 * record returns). */
typedef int (*bv_pack_record_fn)(void *userdata, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *entries,
                                 size_t n);
int bv_pack_writer_commit_record(BvPackWriter *w, bv_pack_record_fn record, void *userdata);

/* Prefetch for reads that walk a pack: restore workers and NBD clients read it slightly out
 * of order from several threads, which the kernel's readahead takes for random reads.
 * BV_READ_STREAM_MIN reads in a row, each within BV_READ_STREAM_GAP of the one before, make a
 * stream, and a stream asks for the next BV_READ_PREFETCH bytes once it is within half of that
 * of what it asked for before. A read farther away starts over. */
#define BV_READ_PREFETCH (4u << 20)
#define BV_READ_STREAM_GAP (2u << 20)
#define BV_READ_STREAM_MIN 3u

typedef struct BvReadStream {
        unsigned streak;     /* reads in the stream after its first */
        uint64_t last_end;   /* where the previous read ended */
        uint64_t prefetched; /* asked for up to here */
} BvReadStream;

/* Records a read of [offset, end); returns the length of the range to prefetch (0: none) and
 * its start in *ret_from. end + BV_READ_PREFETCH must not overflow. */
uint64_t bv_read_stream_note(BvReadStream *s, uint64_t offset, uint64_t end, uint64_t *ret_from);

/* Reading: a thread-safe cache of open packs, each a reader of the backend (backend.h): the
 * local file, or ranged GETs of the S3 object. Reads of several threads go to the backend at
 * once (only opening a pack is serialised). */
typedef struct BvPackSet BvPackSet;

int bv_packset_new(BvBackend *b, BvPackSet **ret);
void bv_packset_free(BvPackSet *p);

/* Reads len bytes at offset of a pack. -EUCLEAN if the pack does not exist, -EBADMSG if it
 * ends before offset+len (truncated). */
int bv_packset_read(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t offset, void *buf, size_t len);

/* Announces a read of [offset, offset+len) of a pack that will come soon (the backend's
 * reader_advise: local POSIX_FADV_WILLNEED, which starts the read and returns), so that many
 * scattered reads are in flight at once instead of one after another. -EUCLEAN as
 * bv_packset_read when the pack is not there. */
int bv_packset_advise(BvPackSet *p, const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t offset, uint64_t len);
/* exact: the reader announces what it reads (bv_packset_advise), and reads that look like a
 * stream prefetch nothing more (a pass over scattered objects a few MiB apart would otherwise
 * read the packs whole); false again: the default. */
void bv_packset_set_exact(BvPackSet *p, bool exact);

/* Reads and authenticates a pack's own index (for verify and index rebuilds). */
int bv_packset_read_index(BvPackSet *p, BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE],
                          BvPackEntry **ret_entries, size_t *ret_count);

/* Parses and authenticates the index of a whole pack image held in memory (fuzzing, tools):
 * the same checks as bv_packset_read_index. */
int bv_pack_parse_index(BvObjectCodec *codec, const uint8_t pack_id[BV_PACK_ID_SIZE], const void *pack,
                        size_t size, BvPackEntry **ret_entries, size_t *ret_count);

/* Lists every pack id in the repository (the backend's listing of packs; callback per pack; a negative return stops the walk
 * and is returned). Returns the number of packs listed. */
int bv_packset_list(BvPackSet *p, int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud),
                    void *userdata);
/* The same, but an entry of packs/ named like a pack or a pack folder that is a symbolic link
 * (-ELOOP) or of another type (-EBADFD) stops the walk and is named in refused ("ab" or
 * "ab/<id>.pack"), where bv_packset_list skips it (never following it). */
int bv_packset_list_strict(BvPackSet *p,
                           int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud),
                           void *userdata, char refused[64]);

void bv_pack_path(const uint8_t pack_id[BV_PACK_ID_SIZE], char out[64]); /* "ab/ab12....pack" */
