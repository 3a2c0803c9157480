/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault files ls|find --json: an array of entries, each {"name", "path", "type", "size",
 * "mode", "uid", "gid", "mtime", "mtime_utc"} (and "target" for a symbolic link), or of
 * partitions for ls without PATH on a partitioned disk (docs/man/blkvault-json.7).
 */
#include <json-c/json.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"
#include "files.h"
#include "timeutil.h"

const char *files_type_name(uint32_t mode)
{
        switch (mode & S_IFMT) {
        case S_IFREG:
                return "file";
        case S_IFDIR:
                return "directory";
        case S_IFLNK:
                return "symlink";
        case S_IFIFO:
                return "fifo";
        case S_IFSOCK:
                return "socket";
        case S_IFCHR:
                return "char-device";
        case S_IFBLK:
                return "block-device";
        default:
                return "unknown";
        }
}

int files_json_entry(struct json_object *arr, const FilesPath *fp, const BvFsStat *st, const char *path,
                     const char *name, const char *target)
{
        _cleanup_free_ char *shown = files_display(fp->prefix, path);
        char when[32];

        bv_format_time_utc(st->mtime < 0 ? 0 : (uint64_t)st->mtime, when);
        struct json_object *o = BV_JSON_OBJECT({ "name", json_object_new_string(name) },
                                               { "path", json_object_new_string(shown ? shown : path) },
                                               { "type", json_object_new_string(files_type_name(st->mode)) },
                                               { "size", json_object_new_uint64(st->size) },
                                               { "mode", json_object_new_int((int32_t)(st->mode & 07777)) },
                                               { "uid", json_object_new_uint64(st->uid) },
                                               { "gid", json_object_new_uint64(st->gid) },
                                               { "mtime", json_object_new_int64(st->mtime) },
                                               { "mtime_utc", json_object_new_string(when) },
                                               { BV_JSON_OPT_STRING("target", target) });
        if (!o || json_object_array_add(arr, o) < 0) {
                json_object_put(o);
                return log_error_errno(-ENOMEM, "cannot list");
        }
        return EXIT_OK;
}

int files_json_part(struct json_object *arr, const BvFilesPart *p, const char *name, const char *label)
{
        struct json_object *o = BV_JSON_OBJECT({ "name", json_object_new_string(name) },
                                               { "number", json_object_new_uint64(p->number) },
                                               { BV_JSON_OPT_STRING("fstype", p->fstype) },
                                               { "size", json_object_new_uint64(p->size) },
                                               { "offset", json_object_new_uint64(p->offset) },
                                               { BV_JSON_OPT_STRING("label", label && label[0] ? label : NULL) });
        if (!o || json_object_array_add(arr, o) < 0) {
                json_object_put(o);
                return log_error_errno(-ENOMEM, "cannot list");
        }
        return EXIT_OK;
}
