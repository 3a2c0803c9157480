/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The S3 backend's local cache of whole objects (index segments and other objects read through
 * reader_fd): files in objects/ of the location's cache directory, named by the object's ETag
 * and size, so a copy is never stale (objects are never rewritten in place, and an ETag names
 * content). Bounded: beyond max bytes the least recently used files go. */

#include <stddef.h>
#include <stdint.h>

/* The cache file name for an object ("<etag>-<size>"), or -EINVAL for an ETag that is not
 * [0-9a-f-] (then the object is not cached). */
int s3_cache_name(const char *etag, uint64_t size, char *ret, size_t len);
/* An fd of the cached copy (its time of use refreshed), or -ENOENT. */
int s3_cache_open(int dirfd, const char *name);
/* Stores data as name and returns an fd of it; then removes least recently used files while the
 * cache holds more than max bytes (never the one just stored). */
int s3_cache_put(int dirfd, const char *name, const void *data, size_t len, uint64_t max);
