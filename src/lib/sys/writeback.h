/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Writeback behind a writer. A file written through the page cache and fsynced at the end
 * stays dirty until then unless the kernel's background writeback starts first, which with
 * dirty_background_ratio 10% of a large memory is gigabytes later: the whole file then goes to
 * the disk in the final fsync, after all the work that produced it. A BvWriteback is a thread
 * that starts writeback (sync_file_range SYNC_FILE_RANGE_WRITE, which does not wait for it)
 * each time the writers report another step of bytes written, so that the disk writes while
 * they work and the final fsync finds little left. It is best effort: errors of the writeback
 * are left for the final fsync to report.
 */

#include <stdint.h>

typedef struct BvWriteback BvWriteback;

/* Starts the thread for fd, waking it every step bytes written (0: a default of 8 MiB). */
int bv_writeback_start(int fd, uint64_t step, BvWriteback **ret);
/* The writers wrote n more bytes (any thread). NULL: nothing. */
void bv_writeback_add(BvWriteback *wb, uint64_t n);
/* The number of times writeback was started. */
uint64_t bv_writeback_rounds(BvWriteback *wb);
/* Starts writeback of what was written since the last round, then stops and joins the thread
 * (the writeback it started goes on: fsync waits for it). NULL: nothing. */
void bv_writeback_free(BvWriteback *wb);
