/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * blkvault files: a snapshot's filesystems read in-process (cmd-files.c; get in files-get.c,
 * diff in files-diff.c). A FilesDisk is one snapshot opened for reading: its image, its
 * partitions, and each filesystem opened on first use by the reader files-table.c names for it.
 */

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "files-fs.h"
#include "files-parts.h"
#include "image.h"
#include "repo.h"

typedef struct FilesDisk {
        const BvSnapshot *snap;
        BvImage *img;
        BvFilesDev dev;
        BvFilesPart *parts;
        size_t n_parts;
        const char *table;
        BvFs **fs; /* per partition, opened on first use */
        size_t n_table;  /* parts[0..n_table) are the table's, the rest LVM logical volumes */
        bool lvs_listed; /* those were asked for */
        int drive;       /* its drive in the libguestfs appliance (files-guestfs.c), or -1 */
} FilesDisk;

/* A path of a snapshot resolved: its filesystem, the path inside it, and the name to show
 * ("p1:/etc/hosts" or "/etc/hosts" as given). */
typedef struct FilesPath {
        FilesDisk *disk;
        BvFs *fs;
        size_t part;
        const char *path;
        const char *prefix; /* "p1:" or "" */
} FilesPath;

/* A reader of a filesystem type (files-table.c). */
typedef struct FilesBackend {
        const char *fstype;
        const BvFsOps *ops; /* in-process, through the read path: bv_fs_open */
        /* else opened by the CLI itself: partition i of d (files-guestfs.c); reports */
        int (*open)(FilesDisk *d, size_t i, BvFs **ret);
} FilesBackend;

/* The reader of fstype, or NULL. */
const FilesBackend *files_backend(const char *fstype);
/* "ext2, ext3, ext4 and ntfs": what files reads. */
const char *files_backend_names(void);

/* type as the static name the table keeps, or NULL when files does not read it. */
const char *files_fstype_name(const char *type);
/* Whether fstype is an LVM physical volume's. */
bool files_is_lvm(const char *fstype);
/* Every filesystem of d known: the logical volumes of its LVM physical volumes listed (booting
 * the appliance when it has some); reports; returns an exit code. */
int files_disk_all(FilesDisk *d);
/* The name of partition i of d ("p1", "vg/lv", "the disk") into buf. */
const char *files_part_name(const FilesDisk *d, size_t i, char *buf, size_t size);

/* The libguestfs reader (files-guestfs.c) of XFS, btrfs, FAT and LVM logical volumes: each
 * snapshot exported by a private serve with the repository and secret given here, read by one
 * appliance (a small VM) booted once for the command, shared by the disks registered before
 * it boots (diff's two). files_guestfs_done stops it and the servers. All report; exit codes. */
void files_guestfs_setup(const char *repo_path, const SecretArgs *sargs, const BvSecret *secret);
int files_guestfs_register(FilesDisk *d);
int files_guestfs_open(FilesDisk *d, size_t i, BvFs **ret);
/* Appends the logical volumes of d's LVM physical volumes to d->parts. */
int files_guestfs_list_lvs(FilesDisk *d);
void files_guestfs_done(void);

/* Opens snapshot spec of repo and its partition table; reports; returns an exit code. */
int files_disk_open(BvRepo *repo, const char *spec, FilesDisk *d);
void files_disk_close(FilesDisk *d);
/* arg ("p1:/etc", "LABEL:/etc", "/etc" on a disk with one filesystem we read) into ret;
 * reports; returns an exit code. */
int files_resolve(FilesDisk *d, const char *arg, FilesPath *ret);
/* The error r met reading name in fs (what: "read", "list"...) said once, with the snapshot
 * offset of damaged data; returns the exit code. */
int files_error(BvFs *fs, int r, const char *what, const char *prefix, const char *path);
/* "prefix + path" escaped for a terminal (malloc'd; NULL if out of memory). */
char *files_display(const char *prefix, const char *path);
/* "/a/b" + "c" = "/a/b/c" (malloc'd). */
char *files_join(const char *dir, const char *name);

typedef struct FilesOptions {
        const char *name_glob; /* find --name */
        bool content;          /* diff --content */
        bool force;            /* get --force */
        bool json;             /* ls, find --json: entries gathered in json_out, printed at the end */
        struct json_object *json_out;
} FilesOptions;

/* files-json.c: one entry (a file, with target for a symbolic link) or partition appended to
 * arr; an exit code (out of memory: reported). */
struct json_object;
int files_json_entry(struct json_object *arr, const FilesPath *fp, const BvFsStat *st, const char *path,
                     const char *name, const char *target);
int files_json_part(struct json_object *arr, const BvFilesPart *p, const char *name, const char *label);
/* "file", "directory", "symlink", "fifo", "socket", "char-device", "block-device" (as --json names them). */
const char *files_type_name(uint32_t mode);

int files_get(FilesDisk *d, char **args, int n, const FilesOptions *o);
int files_diff(BvRepo *repo, FilesDisk *d, const char *spec2, const char *path, const FilesOptions *o);
