/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Included right before a C library's own headers that our warnings reject (libext2fs, ntfs-3g):
 * saves the diagnostic state and silences what those headers trip. The includer may silence
 * more, then includes the library's headers and ends with `#pragma GCC diagnostic pop`.
 * (No include guard: each use pushes once.)
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
