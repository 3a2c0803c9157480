/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tidying what backups of running domains leave in libvirt (virt-tidy.h). A backup job outlives
 * the client that began it (libvirt keeps it, and its NBD export and scratch files, until it is
 * aborted, even across a libvirtd restart), so a run killed with -9 leaves one; the next run finds
 * it by its socket's name, and knows it is a dead run's by the domain's lock, which it holds.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "virt-internal.h"
#include "virt-tidy.h"

bool bv_virt_job_is_ours(const char *socket)
{
        const char *base = socket ? strrchr(socket, '/') : NULL;
        size_t len;

        base = base ? base + 1 : socket;
        if (!base)
                return false;
        len = strlen(base);
        return strncmp(base, BV_VIRT_JOB_PREFIX, strlen(BV_VIRT_JOB_PREFIX)) == 0 && len > strlen(".sock") &&
               strcmp(base + len - strlen(".sock"), ".sock") == 0;
}

/* Takes the backup lock of the domain with this UUID (path: its file) into *ret_fd, not waiting:
 * 0, -EBUSY when another run holds it, or -errno (opening it failed). */
static int uuid_lock(const char *uuid, char *path, size_t size, int *ret_fd)
{
        snprintf(path, size, BV_VIRT_LOCK_DIR "/blkvault-libvirt-%s.lock", uuid);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int bv_virt_job_lock(BvVirtDomain *d, int *ret_fd)
{
        char path[PATH_MAX];
        int r = uuid_lock(d->uuid, path, sizeof(path), ret_fd);

        if (r == -EBUSY)
                bv_virt_set_error(d->v, VIR_ERR_OPERATION_INVALID,
                                  "domain '%s' is being backed up by another blkvault run (it holds %s)", d->name,
                                  path);
        else if (r < 0)
                bv_virt_set_error(d->v, VIR_ERR_SYSTEM_ERROR, "cannot open the lock %s: %s", path, strerror(-r));
        return r;
}

/* Opens directory name (in dfd; not through a symbolic link with flag O_NOFOLLOW) for reading:
 * 1, 0 when there is none, or -errno. */
static int dir_open(int dfd, const char *name, int flag, DIR **ret)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flag);

        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        *ret = fdopendir(fd);
        if (!*ret) {
                int r = -errno;
                close(fd);
                return r;
        }
        return 1;
}

/* Removes directory name (in dfd) and the files in it (a job's scratch directory holds no
 * directories): 0 or the first -errno; a missing one is no error. */
static int flat_dir_remove(int dfd, const char *name)
{
        DIR *dp;
        int r = dir_open(dfd, name, O_NOFOLLOW, &dp);

        if (r <= 0)
                return r;
        r = 0;
        for (struct dirent *e; (e = readdir(dp));)
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
                    unlinkat(dirfd(dp), e->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        closedir(dp);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int bv_virt_job_files_remove(const char *dir, const char *sock)
{
        int r = flat_dir_remove(AT_FDCWD, dir);

        if (unlink(sock) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

/* Whether s (len bytes) is a UUID as libvirt writes it: lowercase hex, 8-4-4-4-12. */
static bool uuid_shaped(const char *s, size_t len)
{
        if (len != VIR_UUID_STRING_BUFLEN - 1)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (i == 8 || i == 13 || i == 18 || i == 23 ? c != '-' : !isxdigit(c) || isupper(c))
                        return false;
        }
        return true;
}

/* When name is one of blkvault's files of a domain in the run directory, BV_VIRT_JOB_PREFIX UUID
 * and a suffix of BV_VIRT_RUN_SUFFIXES, its UUID into uuid (and whether it is the scratch
 * directory): true. Any other name is not ours. */
static bool run_file(const char *name, char uuid[static VIR_UUID_STRING_BUFLEN], bool *ret_dir)
{
        static const char *const suffixes[] = { BV_VIRT_RUN_SUFFIXES };
        size_t p = strlen(BV_VIRT_JOB_PREFIX), u = VIR_UUID_STRING_BUFLEN - 1;

        if (strncmp(name, BV_VIRT_JOB_PREFIX, p) != 0 || strnlen(name, p + u + 1) < p + u ||
            !uuid_shaped(name + p, u))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (strcmp(name + p + u, suffixes[i]) == 0) {
                        memcpy(uuid, name + p, u);
                        uuid[u] = 0;
                        *ret_dir = strcmp(suffixes[i], ".d") == 0;
                        return true;
                }
        return false;
}

/* Whether v has a domain (running or not) of this UUID: 1 yes, 0 no, else as bv_virt_take_error. */
static int uuid_known(BvVirt *v, const char *uuid)
{
        virDomainPtr dom = virDomainLookupByUUIDString(v->conn, uuid);

        if (dom) {
                virDomainFree(dom);
                return 1;
        }
        int r = bv_virt_take_error(v);
        return r == -ENOENT ? 0 : r;
}

/* Removes run file name (in dfd) of the domain uuid, which libvirt no longer has, unless a run
 * holds its lock: 1 removed, 0 left (a run's), -errno. */
static int stale_remove(int dfd, const char *name, const char *uuid, bool dir)
{
        char path[PATH_MAX];
        int fd = -EBADF, r = uuid_lock(uuid, path, sizeof(path), &fd);

        if (r < 0)
                return r == -EBUSY ? 0 : r;
        if (dir)
                r = flat_dir_remove(dfd, name);
        else if (unlinkat(dfd, name, 0) < 0)
                r = errno == ENOENT ? 0 : -errno;
        close(fd);
        return r < 0 ? r : 1;
}

/* Whether v is the local system instance of libvirt's QEMU driver, whose domains the run directory
 * serves: another (a session, a test driver, another host) knows none of them. */
static bool local_system(const BvVirt *v)
{
        static const char *const uris[] = { "qemu:///system", "qemu+unix:///system" };

        for (size_t i = 0; i < ELEMENTSOF(uris); i++) {
                size_t n = strlen(uris[i]);
                if (strncmp(v->uri, uris[i], n) == 0 && (v->uri[n] == 0 || v->uri[n] == '?'))
                        return true;
        }
        return false;
}

int bv_virt_stale_sweep(BvVirt *v, const char *run_dir, size_t *ret_removed)
{
        DIR *dp;
        size_t removed = 0;

        if (ret_removed)
                *ret_removed = 0;
        if (!local_system(v))
                return 0;
        int r = dir_open(AT_FDCWD, run_dir, 0, &dp);
        if (r <= 0)
                return r;
        r = 0;
        for (struct dirent *e; (e = readdir(dp));) {
                char uuid[VIR_UUID_STRING_BUFLEN];
                bool dir;
                if (!run_file(e->d_name, uuid, &dir))
                        continue;
                int q = uuid_known(v, uuid);
                if (q == 0) {
                        q = stale_remove(dirfd(dp), e->d_name, uuid, dir);
                        removed += q > 0;
                }
                if (q < 0 && r == 0)
                        r = q;
        }
        closedir(dp);
        if (ret_removed)
                *ret_removed = removed;
        return r;
}

/* Whether d runs a backup job now: 1 yes, 0 no (none, or a job of another kind). */
static int backup_job_active(BvVirtDomain *d)
{
        virTypedParameterPtr params = NULL;
        int nparams = 0, type = VIR_DOMAIN_JOB_NONE, op = 0;

        if (virDomainGetJobStats(d->dom, &type, &params, &nparams, 0) < 0)
                return bv_virt_take_error(d->v);
        if (type != VIR_DOMAIN_JOB_NONE &&
            virTypedParamsGetInt(params, nparams, VIR_DOMAIN_JOB_OPERATION, &op) < 0)
                op = 0;
        virTypedParamsFree(params, nparams);
        return type != VIR_DOMAIN_JOB_NONE && op == VIR_DOMAIN_JOB_OPERATION_BACKUP;
}

typedef struct JobFiles {
        char *socket;
        char **scratch;
        size_t n_scratch;
} JobFiles;

static void job_files_done(JobFiles *f)
{
        free(f->socket);
        for (size_t i = 0; i < f->n_scratch; i++)
                free(f->scratch[i]);
        free(f->scratch);
        *f = (JobFiles){};
}

static xmlNode *element(xmlNode *n, const char *name)
{
        for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
                if (c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, name) == 0)
                        return c;
        return NULL;
}

static int add_prop(xmlNode *n, const char *name, char **ret)
{
        xmlChar *a = n ? xmlGetProp(n, (const xmlChar *)name) : NULL;

        if (!a)
                return 0;
        *ret = strdup((const char *)a);
        xmlFree(a);
        return *ret ? 1 : -ENOMEM;
}

/* The unix socket and the scratch files of a <domainbackup> XML. */
static int job_files_parse(const char *xml, JobFiles *f)
{
        xmlDoc *doc = xmlReadMemory(xml, (int)strlen(xml), "backup.xml", NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
        int r = root ? 0 : -EBADMSG;

        if (r >= 0)
                r = add_prop(element(root, "server"), "socket", &f->socket);
        xmlNode *disks = r >= 0 ? element(root, "disks") : NULL;
        for (xmlNode *c = disks ? disks->children : NULL; c && r >= 0; c = c->next) {
                if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "disk") != 0)
                        continue;
                char **more = realloc(f->scratch, (f->n_scratch + 1) * sizeof(*more));
                if (!more) {
                        r = -ENOMEM;
                        break;
                }
                f->scratch = more;
                f->scratch[f->n_scratch] = NULL;
                r = add_prop(element(c, "scratch"), "file", &f->scratch[f->n_scratch]);
                if (r > 0)
                        f->n_scratch++;
        }
        xmlFreeDoc(doc);
        return r < 0 ? r : 0;
}

/* Ends the dead run's job and removes what libvirt did not (it removes the scratch files it
 * made when the job ends; after a libvirtd restart it may not know them any more). */
static int job_end(BvVirtDomain *d, const JobFiles *f)
{
        if (virDomainAbortJob(d->dom) < 0) {
                int r = bv_virt_take_error(d->v);
                if (r != -EBUSY) /* -EBUSY: no job any more, it ended meanwhile */
                        return r;
        }
        for (size_t i = 0; i < f->n_scratch; i++)
                if (unlink(f->scratch[i]) < 0 && errno != ENOENT)
                        return -errno;
        if (unlink(f->socket) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int bv_virt_job_tidy(BvVirtDomain *d, char *what, size_t size)
{
        JobFiles f = {};
        int r = backup_job_active(d);

        if (what && size)
                what[0] = 0;
        if (r <= 0)
                return r;
        _cleanup_free_ char *xml = virDomainBackupGetXMLDesc(d->dom, 0);
        if (!xml) {
                r = bv_virt_take_error(d->v);
                return r == -ENOENT ? 0 : r; /* ended since */
        }
        r = job_files_parse(xml, &f);
        if (r >= 0 && what && size)
                snprintf(what, size, "%s", f.socket ? f.socket : "no unix socket");
        if (r >= 0 && !bv_virt_job_is_ours(f.socket)) {
                bv_virt_set_error(d->v, VIR_ERR_OPERATION_INVALID,
                                  "domain '%s' runs a backup job that is not blkvault's (socket %s): not touched",
                                  d->name, f.socket ? f.socket : "none");
                r = -EBUSY;
        } else if (r >= 0) {
                r = job_end(d, &f);
                if (r >= 0)
                        r = 1;
        }
        job_files_done(&f);
        return r;
}

int bv_virt_checkpoint_exists(BvVirtDomain *d, const char *name)
{
        virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(d->dom, name, 0);

        if (cp) {
                virDomainCheckpointFree(cp);
                return 1;
        }
        int r = bv_virt_take_error(d->v);
        return r == -ENOENT ? 0 : r;
}

bool bv_virt_checkpoint_lost(int code)
{
        return code == VIR_ERR_NO_DOMAIN_CHECKPOINT || code == VIR_ERR_CHECKPOINT_INCONSISTENT;
}

static bool kept(const char *name, const char *const *keep, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (keep[i] && strcmp(keep[i], name) == 0)
                        return true;
        return false;
}

/* Deletes one checkpoint and its bitmaps. A checkpoint begun by a job whose QEMU was stopped under
 * it has no bitmap in the image (libvirt 9.0: "internal error: bitmap ... not found in backing
 * chain"): its metadata goes alone. */
static int checkpoint_delete(BvVirtDomain *d, virDomainCheckpointPtr cp)
{
        if (virDomainCheckpointDelete(cp, 0) >= 0)
                return 0;
        virErrorPtr e = virGetLastError();
        if (!e || e->code != VIR_ERR_INTERNAL_ERROR || !e->message || !strstr(e->message, "not found"))
                return bv_virt_take_error(d->v);
        virResetLastError();
        return virDomainCheckpointDelete(cp, VIR_DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY) < 0 ? bv_virt_take_error(d->v)
                                                                                           : 0;
}

/* Whether tail (a name after the prefix) is what blkvault puts there: <UTC time>-<8 random hex>,
 * 20261127T230459Z-902c38e5. A name that only begins like ours (blkvault-mine, made by hand or
 * by another tool) is not ours to delete. */
static bool our_tail(const char *tail)
{
        static const char shape[] = "ddddddddTddddddZ-hhhhhhhh";

        for (size_t i = 0; i < sizeof(shape) - 1; i++) {
                unsigned char c = (unsigned char)tail[i];
                if (shape[i] == 'd' ? !isdigit(c)
                    : shape[i] == 'h' ? !isxdigit(c) || isupper(c)
                                      : c != (unsigned char)shape[i])
                        return false;
        }
        return tail[sizeof(shape) - 1] == 0;
}

int bv_virt_checkpoints_prune(BvVirtDomain *d, const char *prefix, const char *const *keep, size_t n,
                              size_t *ret_deleted)
{
        virDomainCheckpointPtr *cps = NULL;
        size_t deleted = 0;
        int r = 0;

        if (!prefix || !prefix[0])
                return -EINVAL; /* an empty prefix would be everyone's */
        int count = virDomainListAllCheckpoints(d->dom, &cps, 0);
        if (count < 0)
                return bv_virt_take_error(d->v);
        for (int i = 0; i < count; i++) {
                const char *name = virDomainCheckpointGetName(cps[i]);
                if (name && strncmp(name, prefix, strlen(prefix)) == 0 && our_tail(name + strlen(prefix)) &&
                    !kept(name, keep, n)) {
                        int q = checkpoint_delete(d, cps[i]);
                        if (q < 0 && r >= 0)
                                r = q;
                        deleted += q >= 0;
                }
                virDomainCheckpointFree(cps[i]);
        }
        free(cps);
        if (ret_deleted)
                *ret_deleted = deleted;
        return r;
}

int bv_virt_checkpoints_delete(BvVirtDomain *d, const char *const *names, size_t n, size_t *ret_deleted)
{
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                if (!names[i])
                        continue;
                virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(d->dom, names[i], 0);
                int q = cp ? checkpoint_delete(d, cp) : bv_virt_take_error(d->v);
                if (cp)
                        virDomainCheckpointFree(cp);
                if (q == -ENOENT)
                        continue;
                if (q < 0 && r >= 0)
                        r = q;
                if (q >= 0 && ret_deleted)
                        (*ret_deleted)++;
        }
        return r;
}

int bv_virt_checkpoint_prefix(const char *repo_id_hex, char *buf, size_t size)
{
        size_t len = repo_id_hex ? strspn(repo_id_hex, "0123456789abcdef") : 0;

        if (len < BV_VIRT_CHECKPOINT_REPO_HEX)
                return -EINVAL;
        int n = snprintf(buf, size, BV_VIRT_CHECKPOINT_PREFIX "%.*s-", BV_VIRT_CHECKPOINT_REPO_HEX, repo_id_hex);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

bool bv_virt_checkpoint_legacy(const char *name)
{
        size_t p = strlen(BV_VIRT_CHECKPOINT_PREFIX);

        if (!name || strncmp(name, BV_VIRT_CHECKPOINT_PREFIX, p) != 0)
                return false;
        name += p;
        for (size_t i = 0; i < BV_VIRT_CHECKPOINT_REPO_HEX; i++)
                if (!isxdigit((unsigned char)name[i]) || isupper((unsigned char)name[i]))
                        return true;
        return name[BV_VIRT_CHECKPOINT_REPO_HEX] != '-';
}
