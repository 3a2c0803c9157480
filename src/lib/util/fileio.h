/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * File I/O with the one durability recipe of the project (docs/FORMAT.md, "Durability"):
 * write a temporary file in the target directory, fsync it, rename it into place (never over
 * an existing file unless asked), fsync the directory. Every fd is O_CLOEXEC.
 */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Full-length pread/pwrite, retrying on EINTR and short transfers. pread returns the bytes read
 * (less than len only at end of file); pwrite returns 0 or -errno (-ENOSPC when full). */
ssize_t bv_pread_all(int fd, void *buf, size_t len, uint64_t offset);
int bv_pwrite_all(int fd, const void *buf, size_t len, uint64_t offset);
ssize_t bv_read_all(int fd, void *buf, size_t len);
int bv_write_all(int fd, const void *buf, size_t len);

int bv_fsync_dir(int dirfd);

/* Creates dir (mode 0700) and its parents below dirfd if missing. */
int bv_mkdir_p(int dirfd, const char *path);

/* A repository shared with a group (docs/FORMAT.md, "Paths"): what is made in a folder its group
 * may read (S_IRGRP) gets group read too, whatever the umask; nothing else of the mode changes
 * (a folder made in a set-group-id folder keeps the bit and its group, as the kernel gives it).
 * bv_mkdirat_shared makes folder name in dirfd, 0700 or 0750 (-EEXIST if it exists);
 * bv_share_file makes the new file fd 0640 when dirfd is group-readable, else leaves it. */
int bv_mkdirat_shared(int dirfd, const char *name);
int bv_share_file(int dirfd, int fd);

/* Opens an anonymous temporary file in directory dirfd (O_TMPFILE where the filesystem has it,
 * otherwise a uniquely named ".tmp-*" file). ret_tmpname receives the name to pass to
 * bv_tmpfile_link (empty for O_TMPFILE). */
int bv_tmpfile_open(int dirfd, int *ret_fd, char ret_tmpname[64]);
/* The same, naming the fallback file <prefix><16 hex> (prefix at most 47 bytes). */
int bv_tmpfile_open_prefix(int dirfd, const char *prefix, int *ret_fd, char ret_tmpname[64]);

/* fsyncs fd, gives it the name `name` in dirfd (failing with -EEXIST if the name exists and
 * replace is false), and fsyncs the directory. On failure the temporary file is removed. */
int bv_tmpfile_link(int dirfd, int fd, const char *tmpname, const char *name, bool replace);

/* Removes a temporary file that will not be linked (no-op for O_TMPFILE). */
void bv_tmpfile_discard(int dirfd, const char *tmpname);
/* A named temporary file (the fallback of bv_tmpfile_open) is flock'ed by its writer until it is
 * linked or discarded. Deletes name in dirfd if it is a regular file no live writer holds: 1
 * (*ret_bytes: what it occupied), 0 when it is held, gone, not a regular file (never opened then) or
 * immutable (EPERM: left alone). */
int bv_tmpfile_reap(int dirfd, const char *name, uint64_t *ret_bytes);

/* The whole recipe for a small file: tmpfile, write, fsync, link, fsync dir. */
int bv_write_file_durable(int dirfd, const char *name, const void *data, size_t len, bool replace);
/* The same for a repository's file: group-readable when dirfd is (bv_share_file). */
int bv_write_file_shared(int dirfd, const char *name, const void *data, size_t len, bool replace);

/* Reads a whole file of at most max bytes (-EFBIG if larger) into a malloc'd buffer with a
 * trailing NUL (not counted in ret_len). */
int bv_read_file(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len);
/* The same, with the fstat of the file that was read: a check of its owner or mode then looks at
 * what was read, not at whatever the path names later. */
int bv_read_file_stat(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len, struct stat *ret_st);

/* Reads a small secret file (a passphrase, a key file) straight into bv_secure_alloc memory, never
 * through the ordinary heap. The buffer has MAX(file size + 1, min_size) bytes, *ret_size of them
 * (what to pass to bv_secure_free), with a NUL after the *ret_len bytes of data. strip_newline
 * drops one trailing newline; max applies to the file as it is on disk. Fails with -EFBIG if the
 * file is larger than max or grows while it is read, -EBADFD if it is not a regular file. */
int bv_read_secret_file(int dirfd, const char *path, size_t max, size_t min_size, bool strip_newline,
                        void **ret_data, size_t *ret_len, size_t *ret_size);

/* Reads a secret of at most max bytes from fd (a pipe, read to its end) straight into
 * bv_secure_alloc memory of max + 1 bytes (*ret_size), NUL-terminated after the *ret_len bytes
 * read; strip_newline drops one trailing newline. -EFBIG if more than max bytes come. The fd is
 * left open. */
int bv_read_secret_fd(int fd, size_t max, bool strip_newline, void **ret_data, size_t *ret_len,
                      size_t *ret_size);

/* Opens directory path below dirfd ("." for dirfd itself) for readdir, on an fd of its own
 * that closedir() closes. For the user's own paths: symbolic links are followed. */
int bv_opendir_at(int dirfd, const char *path, DIR **ret);
/* The same for a path inside a repository, resolved like bv_open_beneath. */
int bv_opendir_beneath(int dirfd, const char *path, DIR **ret);

/*
 * Paths inside a repository (docs/FORMAT.md, "Paths"): resolved beneath a directory fd and never
 * through a symbolic link, in any component: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), or
 * where the kernel lacks openat2 (ENOSYS) one component at a time with O_NOFOLLOW. An absolute
 * path or ".." fails with -EXDEV, a symbolic link with -ELOOP. O_CLOEXEC is always added.
 */
int bv_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* The component-at-a-time walk bv_open_beneath falls back to (exposed for the tests). */
int bv_open_beneath_walk(int dirfd, const char *path, int flags, mode_t mode);
/* A directory beneath dirfd, O_RDONLY: -ELOOP for a symbolic link, -ENOTDIR for another type. */
int bv_open_dir_beneath(int dirfd, const char *path);
/* A regular file beneath dirfd, opened with flags (O_RDONLY, O_RDWR; O_CREAT with mode 0600) and
 * checked with fstat before anything reads it: -EBADFD if it is not a regular file. It is opened
 * O_NONBLOCK so that a FIFO does not hang the open; the flag is cleared on the returned fd. */
int bv_open_file_beneath(int dirfd, const char *path, int flags);
/* bv_read_file for a path resolved beneath dirfd. */
int bv_read_file_beneath(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len);

/* For a message after one of the opens above failed: the first component of path (beneath dirfd,
 * not following links) that is a symbolic link or not a directory where one is needed, or the
 * entry itself if it is not what was wanted (a directory if want_dir, else a regular file).
 * Returns the length of that prefix of path and its type (S_IFMT bits) in *ret_mode; 0 if
 * nothing is amiss (any more); -errno if a component cannot be examined. */
int bv_beneath_culprit(int dirfd, const char *path, bool want_dir, mode_t *ret_mode);
/* "a symbolic link", "a FIFO", "a directory", ... for S_IFMT bits. */
const char *bv_file_type_name(mode_t mode);

/* Size of a regular file or block device (BLKGETSIZE64). */
int bv_fd_size(int fd, uint64_t *ret_size);
