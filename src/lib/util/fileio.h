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

/* The whole recipe for a small file: tmpfile, write, fsync, link, fsync dir. */
int bv_write_file_durable(int dirfd, const char *name, const void *data, size_t len, bool replace);

/* Reads a whole file of at most max bytes (-EFBIG if larger) into a malloc'd buffer with a
 * trailing NUL (not counted in ret_len). */
int bv_read_file(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len);

/* Reads a small secret file (a passphrase, a key file) straight into bv_secure_alloc memory, never
 * through the ordinary heap. The buffer has MAX(file size + 1, min_size) bytes, *ret_size of them
 * (what to pass to bv_secure_free), with a NUL after the *ret_len bytes of data. strip_newline
 * drops one trailing newline; max applies to the file as it is on disk. Fails with -EFBIG if the
 * file is larger than max or grows while it is read, -EBADFD if it is not a regular file. */
int bv_read_secret_file(int dirfd, const char *path, size_t max, size_t min_size, bool strip_newline,
                        void **ret_data, size_t *ret_len, size_t *ret_size);

/* Opens directory path below dirfd ("." for dirfd itself) for readdir, on an fd of its own
 * that closedir() closes. */
int bv_opendir_at(int dirfd, const char *path, DIR **ret);

/* Size of a regular file or block device (BLKGETSIZE64). */
int bv_fd_size(int fd, uint64_t *ret_size);
