/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whether a disk image found by probing is self-contained. A raw VM disk is written by its
 * guest: a guest that puts a qcow2 header naming a backing file (/etc/shadow) or an external
 * data file at sector 0, or a vmdk descriptor naming a FLAT extent, would have that host file
 * read into the backup if a probed image were opened with its references (qemu's format-probing
 * hole). So a probed image is read as a virtual disk only when it references no other file;
 * a format the user states (--image-format, image-format =) is trusted with its backing chain.
 *
 * A vmdk text descriptor always names its extents in other files: refused without running
 * anything. Any other format is asked of `qemu-img info --output=json -U -f FMT`, which reads
 * the image's header and reports backing-filename, qcow2's data-file and vmdk's extents; it
 * does not open a backing file, and what it reads goes to us, never into the backup.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "process.h" /* bv_wait_exit */
#include "source.h"

#define INFO_MAX (256u * 1024u)
#define DESCRIPTOR_MAX 4096
#define EXIT_NOEXEC 127

/* The first extent's file of a vmdk text descriptor ("RW 2048 FLAT "NAME" 0"), or "an extent". */
static void descriptor_extent(int fd, char *detail, size_t size)
{
        char d[DESCRIPTOR_MAX + 1];
        ssize_t n = pread(fd, d, DESCRIPTOR_MAX, 0);
        d[n > 0 ? n : 0] = '\0';
        snprintf(detail, size, "an extent in another file");
        for (char *l = d; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                char *q = strchr(l, '"'), *e = q ? strchr(q + 1, '"') : NULL;
                size_t eol = strcspn(l, "\n");
                if ((strncmp(l, "RW ", 3) == 0 || strncmp(l, "RDONLY ", 7) == 0 || strncmp(l, "NOACCESS ", 9) == 0) &&
                    q && e && (size_t)(e - l) < eol) {
                        snprintf(detail, size, "%.*s", (int)(e - q - 1), q + 1);
                        return;
                }
        }
}

/* Is name the image file itself (vmdk's monolithic extent)? */
static bool same_file(const char *name, const char *file)
{
        struct stat a, b;

        return strcmp(name, file) == 0 ||
               (stat(name, &a) == 0 && stat(file, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

/* The file that qemu-img's info (json) names besides file itself: 1 with it in detail, 0. */
static int info_reference(struct json_object *info, const char *file, char *detail, size_t size)
{
        struct json_object *v = bv_json_member(info, "backing-filename", json_type_string), *data = NULL;
        struct json_object *fs = bv_json_member(info, "format-specific", json_type_object);

        if (!v && fs)
                data = bv_json_member(fs, "data", json_type_object);
        if (!v && data)
                v = bv_json_member(data, "data-file", json_type_string);
        struct json_object *extents = data ? bv_json_member(data, "extents", json_type_array) : NULL;
        for (size_t i = 0; !v && extents && i < json_object_array_length(extents); i++) {
                struct json_object *x = bv_json_member(json_object_array_get_idx(extents, i), "filename",
                                                       json_type_string);
                if (x && !same_file(json_object_get_string(x), file))
                        v = x;
        }
        if (!v)
                return 0;
        snprintf(detail, size, "%s", json_object_get_string(v));
        return 1;
}

/* Starts argv with stdout and stderr into the pipe *ret_fd, stdin /dev/null: its pid or -errno. */
static pid_t spawn_info(char *const argv[], int *ret_fd)
{
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid == 0) {
                int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(p[1], STDOUT_FILENO) < 0 ||
                    dup2(p[1], STDERR_FILENO) < 0)
                        _exit(EXIT_NOEXEC);
                execvp(argv[0], argv);
                _exit(EXIT_NOEXEC);
        }
        int e = errno;
        safe_close(p[1]);
        if (pid < 0) {
                safe_close(p[0]);
                return -e;
        }
        *ret_fd = p[0];
        return pid;
}

/* qemu-img's first line without "qemu-img: " and "Could not open 'PATH': ", in detail. */
static void info_error(char *text, char *detail, size_t size)
{
        const char *p = text, *q;

        text[strcspn(text, "\n")] = '\0';
        if (strncmp(p, "qemu-img: ", 10) == 0)
                p += 10;
        if (strncmp(p, "Could not open '", 16) == 0 && (q = strstr(p, "': ")))
                p = q + 3;
        snprintf(detail, size, "%s", p[0] ? p : "qemu-img info cannot read it");
}

/* qemu-img info --output=json -U -f format of file, parsed into *ret: 0, -ENOPKG, -EBADMSG
 * (refused: its words in detail), -errno. */
static int image_info(const char *file, const char *format, struct json_object **ret, char *detail, size_t size)
{
        char fmt[32];
        int out = -EBADF;

        snprintf(fmt, sizeof(fmt), "%s", format);
        char *const argv[] = { (char *)"qemu-img", (char *)"info", (char *)"--output=json", (char *)"-U",
                               (char *)"-f", fmt, (char *)file, NULL };
        pid_t pid = spawn_info(argv, &out);
        if (pid < 0)
                return pid;
        _cleanup_free_ char *text = malloc(INFO_MAX + 1);
        ssize_t n = text ? bv_read_all(out, text, INFO_MAX) : -ENOMEM;
        safe_close(out);
        int status = bv_wait_exit(pid);
        if (n < 0)
                return (int)n;
        text[n] = '\0';
        if (status == EXIT_NOEXEC)
                return -ENOPKG;
        if (status != 0) { /* refused: what is not understood is not read */
                info_error(text, detail, size);
                return -EBADMSG;
        }
        return bv_json_parse_object(text, (size_t)n, 16, ret);
}

int bv_source_image_references(int fd, const char *file, const char *format, char *detail, size_t size)
{
        struct json_object *info = NULL;
        int r;

        if (strcmp(format, "vmdk") == 0) {
                char h[21];
                if (pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) && memcmp(h, "# Disk DescriptorFile", 21) == 0) {
                        descriptor_extent(fd, detail, size);
                        return 1;
                }
        }
        r = image_info(file, format, &info, detail, size);
        if (r < 0)
                return r;
        r = info_reference(info, file, detail, size);
        json_object_put(info);
        return r;
}

/* Whether the flags array of a bitmap holds flag. */
static bool has_flag(struct json_object *flags, const char *flag)
{
        for (size_t i = 0; flags && i < json_object_array_length(flags); i++) {
                struct json_object *f = json_object_array_get_idx(flags, i);
                if (json_object_is_type(f, json_type_string) && strcmp(json_object_get_string(f), flag) == 0)
                        return true;
        }
        return false;
}

int bv_source_image_bitmap(const char *path, const char *name, char *detail, size_t size)
{
        struct json_object *info = NULL;
        _cleanup_free_ char *file = NULL;
        int r;

        if (!path || !name)
                return -EINVAL;
        if (asprintf(&file, "%s%s", path[0] == '/' ? "" : "./", path) < 0)
                return -ENOMEM;
        r = image_info(file, "qcow2", &info, detail, size);
        if (r < 0)
                return r;
        struct json_object *fs = bv_json_member(info, "format-specific", json_type_object);
        struct json_object *data = fs ? bv_json_member(fs, "data", json_type_object) : NULL;
        struct json_object *bitmaps = data ? bv_json_member(data, "bitmaps", json_type_array) : NULL;
        r = 0;
        for (size_t i = 0; bitmaps && i < json_object_array_length(bitmaps); i++) {
                struct json_object *b = json_object_array_get_idx(bitmaps, i);
                struct json_object *n = bv_json_member(b, "name", json_type_string);
                if (!n || strcmp(json_object_get_string(n), name) != 0)
                        continue;
                struct json_object *flags = bv_json_member(b, "flags", json_type_array);
                /* "in-use": a QEMU that had it open died, so it misses writes; without "auto" it
                 * is disabled and tracks nothing */
                r = has_flag(flags, "in-use") ? -EUCLEAN : has_flag(flags, "auto") ? 1 : -ESTALE;
                break;
        }
        json_object_put(info);
        return r;
}
