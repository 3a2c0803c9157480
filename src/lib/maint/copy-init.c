/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * DST of a copy (copy.h): made related to SRC when it holds no repository, checked to be related
 * when it does, and opened with SRC's keys.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend-s3.h"
#include "copy-internal.h"
#include "fileio.h"
#include "hex.h"
#include "macro.h"

#define CONFIG_MAX (64u * 1024)
#define KEY_MAX (64u * 1024)

/* 0 and DST's repository id in hex, or -ENOENT when it has no config. */
static int config_id(BvBackend *b, char ret[2 * BV_REPO_ID_SIZE + 1])
{
        _cleanup_free_ char *json = NULL;
        BvRepoConfigFile f;
        size_t len;
        int r = bv_backend_get(b, BV_KIND_CONFIG, NULL, CONFIG_MAX, (void **)&json, &len);
        if (r < 0)
                return r;
        r = bv_repo_config_parse(json, len, &f);
        if (r < 0)
                return r;
        bv_hex_encode(f.id, sizeof(f.id), ret);
        return 0;
}

int copy_related(BvRepo *src, BvBackend *b)
{
        char id[2 * BV_REPO_ID_SIZE + 1];
        int r = config_id(b, id);
        if (r < 0)
                return r;
        return strcasecmp(id, bv_repo_id_hex(src)) == 0 ? 0 : -EXDEV;
}

typedef struct Found {
        size_t n;
        char first[BV_BACKEND_KEY_MAX];
        BvObjKind kind;
} Found;

static int count_entry(const BvObjEntry *e, void *userdata)
{
        Found *f = userdata;
        if (f->n++ == 0 && bv_obj_key(f->kind, e->name, f->first) < 0)
                snprintf(f->first, sizeof(f->first), "%s", e->name);
        return 0;
}

/* The top of a local directory: how many entries, -ENOTEMPTY for one that is not a folder of the
 * layout (the directory holds something else; its name in what). */
static int local_top(BvBackend *b, size_t *ret, char *what, size_t what_len)
{
        static const char *const layout[] = { "keys", "packs", "index", "snapshots", "locks", "tmp", "leases", "gc" };
        struct dirent *de;
        DIR *d;
        size_t n = 0;
        int r = bv_opendir_beneath(bv_backend_local_dirfd(b), ".", &d);
        if (r < 0)
                return r;
        while (r >= 0 && (de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                n++;
                r = -ENOTEMPTY;
                for (size_t i = 0; i < ELEMENTSOF(layout); i++)
                        if (strcmp(de->d_name, layout[i]) == 0)
                                r = 0;
                if (r < 0)
                        snprintf(what, what_len, "%s", de->d_name);
        }
        closedir(d);
        *ret = n;
        return r;
}

/* A location without a config: 1 nothing there (to be created), 0 what an interrupted creation
 * by copy left (the layout, key slots), -ENOTEMPTY anything else (the first thing found in what). */
static int dst_fresh(BvBackend *b, char *what, size_t what_len)
{
        static const BvObjKind data[] = { BV_KIND_PACK, BV_KIND_INDEX, BV_KIND_SNAPSHOT, BV_KIND_CONDEMNED };
        Found found = {}, keys = { .kind = BV_KIND_KEY };
        size_t top = 0;
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(data) && r >= 0 && found.n == 0; i++) {
                found.kind = data[i];
                r = bv_backend_list(b, data[i], count_entry, &found);
        }
        if (r >= 0 && found.n > 0) {
                snprintf(what, what_len, "%s", found.first);
                return -ENOTEMPTY;
        }
        if (r >= 0)
                r = bv_backend_list(b, BV_KIND_KEY, count_entry, &keys);
        if (r >= 0 && bv_backend_is_local(b))
                r = local_top(b, &top, what, what_len);
        else if (r >= 0) /* anything below the prefix but key slots: objects of someone else */
                r = bv_backend_s3_foreign(b, what, what_len);
        if (r < 0)
                return r;
        return bv_backend_is_local(b) ? top == 0 : keys.n == 0;
}

static int copy_object(BvBackend *from, BvBackend *to, BvObjKind kind, const char *name, size_t max,
                       BvPutFlags flags)
{
        _cleanup_free_ void *data = NULL;
        size_t len;
        int r = bv_backend_get(from, kind, name, max, &data, &len);
        return r < 0 ? r : bv_backend_put(to, kind, name, data, len, flags);
}

typedef struct Slots {
        char **names;
        size_t n;
} Slots;

static int slot_add(const BvObjEntry *e, void *userdata)
{
        Slots *s = userdata;
        if (!bv_key_slot_valid(e->name))
                return 0; /* a temporary file */
        char **p = reallocarray(s->names, s->n + 1, sizeof(char *));
        if (!p)
                return -ENOMEM;
        s->names = p;
        s->names[s->n] = strdup(e->name);
        return s->names[s->n++] ? 0 : -ENOMEM;
}

/* The key slots of DST: src's as they are, or the master secret sealed by dst_secret. Replacing:
 * a location without a config is no repository, and what is there an interrupted creation left. */
static int write_keys(BvRepo *src, BvBackend *b, const BvSecret *dst_secret)
{
        if (bv_repo_config(src)->cipher == BV_CIPHER_NONE)
                return 0;
        if (dst_secret) {
                _cleanup_free_ char *json = NULL;
                int r = bv_repo_key_seal_export(src, dst_secret, &json);
                return r < 0 ? r : bv_backend_put(b, BV_KIND_KEY, "default", json, strlen(json), BV_PUT_REPLACE);
        }
        Slots s = {};
        int r = bv_backend_list(bv_repo_backend(src), BV_KIND_KEY, slot_add, &s);
        for (size_t i = 0; i < s.n && r >= 0; i++)
                r = copy_object(bv_repo_backend(src), b, BV_KIND_KEY, s.names[i], KEY_MAX, BV_PUT_REPLACE);
        for (size_t i = 0; i < s.n; i++)
                free(s.names[i]);
        free(s.names);
        return r;
}

int copy_prepare(BvRepo *src, const char *dst, const BvSecret *dst_secret, BvBackend **bp, bool *ret_created,
                 char *errbuf, size_t errlen)
{
        int r = bv_backend_open_read(dst, 0, bp, errbuf, errlen);
        if (r == -ENOENT)
                r = bv_backend_open(dst, true, bp); /* a directory that does not exist yet */
        else if (r >= 0) {
                r = copy_related(src, *bp);
                if (r != -ENOENT) {
                        if (r >= 0)
                                *ret_created = false;
                        return r;
                }
                r = dst_fresh(*bp, errbuf, errlen);
                /* another copy making the same DST got its config in meanwhile, and its objects */
                if (r == -ENOTEMPTY && copy_related(src, *bp) == 0) {
                        *ret_created = false;
                        return 0;
                }
                /* an empty directory gets its layout; below an S3 prefix there is none to make */
                if (r > 0 && bv_backend_is_local(*bp)) {
                        bv_backend_close(*bp);
                        *bp = NULL;
                        r = bv_backend_open(dst, true, bp);
                }
        }
        if (r < 0)
                return r;
        r = write_keys(src, *bp, dst_secret);
        if (r < 0)
                return r;
        /* the config last: a location without it is not a repository. Another copy that made
         * the same location at the same time put it first: one related to SRC is DST as well. */
        r = copy_object(bv_repo_backend(src), *bp, BV_KIND_CONFIG, NULL, CONFIG_MAX, BV_PUT_CREATE);
        if (r == -EEXIST) {
                r = copy_related(src, *bp);
                *ret_created = false;
                return r;
        }
        if (r < 0)
                return r;
        *ret_created = true;
        return 0;
}

int copy_open_local(BvRepo *src, const char *dst, bool wait, BvRepoProblem *ret_problem, BvRepo **ret)
{
        /* an unencrypted repository takes no secret (its keys are public) */
        BvSecret keys = { .keyring = bv_repo_keyring(src) };
        bool none = bv_repo_config(src)->cipher == BV_CIPHER_NONE;
        return bv_repo_open_report(dst, none ? NULL : &keys, BV_OPEN_WRITE | (wait ? BV_OPEN_WAIT : 0), ret_problem, ret);
}
