/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A repository's key files, keys/<slot> (docs/FORMAT.md): each seals the master secret under a
 * key derived from one secret, a passphrase (scrypt) or a key file's contents (HKDF). Sealing,
 * unsealing with whichever slot a secret opens, and the slots' reading, writing and removal.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "kdf.h"
#include "macro.h"
#include "random.h"
#include "repo-internal.h"
#include "secmem.h"

#define KEYFILE_MAX (64u * 1024)
#define SECRET_FILE_MAX (64u * 1024)
#define SECRET_FILE_MIN 16u
#define KEY_AAD_PREFIX "blkvault-key-v1"
#define KEY_FILE_INFO "blkvault v1 key-file"

/* The secret material of a key file, in locked memory. */
typedef struct SecretFile {
        uint8_t *data;
        size_t len, cap;
} SecretFile;

static void secret_file_done(SecretFile *s)
{
        bv_secure_free(s->data, s->cap);
        *s = (SecretFile){};
}

static int secret_file_read(const char *path, SecretFile *ret)
{
        SecretFile s = {};
        int r = bv_read_secret_file(AT_FDCWD, path, SECRET_FILE_MAX, 0, false, (void **)&s.data, &s.len, &s.cap);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

/* The key-encryption key from a passphrase (scrypt key files) or key material (hkdf ones). */
static int derive_kek_from(const BvKeyFile *kf, const char *passphrase, const void *material, size_t material_len,
                           uint8_t kek[BV_KEY_SIZE])
{
        if (kf->scrypt) {
                if (!passphrase)
                        return -ENOKEY;
                return bv_scrypt(passphrase, strlen(passphrase), kf->salt, sizeof(kf->salt), kf->log2_n, kf->r,
                                 kf->p, kek, BV_KEY_SIZE);
        }
        if (!material || material_len < SECRET_FILE_MIN)
                return -ENOKEY;
        return bv_hkdf_sha256(material, material_len, kf->salt, sizeof(kf->salt), KEY_FILE_INFO, kek, BV_KEY_SIZE);
}

/* The same from a secret: the passphrase, or the key file's contents read here. */
static int derive_kek(const BvKeyFile *kf, const BvSecret *secret, uint8_t kek[BV_KEY_SIZE])
{
        SecretFile sf = {};
        int r;

        if (!secret)
                return -ENOKEY;
        if (kf->scrypt || !secret->key_file)
                return derive_kek_from(kf, secret->passphrase, NULL, 0, kek);
        r = secret_file_read(secret->key_file, &sf);
        if (r < 0)
                return r;
        r = derive_kek_from(kf, NULL, sf.data, sf.len, kek);
        secret_file_done(&sf);
        return r;
}

static void key_aad(const uint8_t repo_id[BV_REPO_ID_SIZE], uint8_t aad[sizeof(KEY_AAD_PREFIX) - 1 + BV_REPO_ID_SIZE])
{
        memcpy(aad, KEY_AAD_PREFIX, sizeof(KEY_AAD_PREFIX) - 1);
        memcpy(aad + sizeof(KEY_AAD_PREFIX) - 1, repo_id, BV_REPO_ID_SIZE);
}

/* AES-256-GCM under kek, in either direction. */
static int key_crypt(bool seal, const uint8_t kek[BV_KEY_SIZE], const uint8_t repo_id[BV_REPO_ID_SIZE],
                     const uint8_t nonce[BV_NONCE_SIZE], const uint8_t *in, uint8_t *out, uint8_t *tag)
{
        uint8_t aad[sizeof(KEY_AAD_PREFIX) - 1 + BV_REPO_ID_SIZE];
        BvAead *a = NULL;
        int r;

        key_aad(repo_id, aad);
        r = bv_aead_new(BV_CIPHER_AES256GCM, kek, &a);
        if (r < 0)
                return r;
        if (seal)
                r = bv_aead_seal(a, nonce, aad, sizeof(aad), in, BV_MASTER_SIZE, out, tag);
        else
                r = bv_aead_open(a, nonce, aad, sizeof(aad), in, BV_MASTER_SIZE, out, tag);
        bv_aead_free(a);
        return r;
}

/* A secret to seal the key with: exactly one of a passphrase and a key file. */
int repo_secret_check(const BvSecret *secret)
{
        if (!secret || (!secret->passphrase && !secret->key_file))
                return -ENOKEY;
        if (secret->passphrase && secret->key_file)
                return -EINVAL;
        return 0;
}

/* Seals master under a fresh salt and nonce into kf. */
int repo_key_seal(const uint8_t repo_id[BV_REPO_ID_SIZE], const BvSecret *secret, const uint8_t *master,
                  BvKeyFile *ret)
{
        BvKeyFile kf = {};
        uint8_t *kek;
        int r;

        r = repo_secret_check(secret);
        if (r < 0)
                return r;
        memcpy(kf.repository, repo_id, BV_REPO_ID_SIZE);
        if (secret->passphrase) {
                kf.scrypt = true;
                kf.log2_n = BV_SCRYPT_DEFAULT_LOG2_N;
                kf.r = BV_SCRYPT_DEFAULT_R;
                kf.p = BV_SCRYPT_DEFAULT_P;
        }
        r = bv_random_bytes(kf.salt, sizeof(kf.salt));
        if (r < 0)
                return r;
        r = bv_random_bytes(kf.nonce, sizeof(kf.nonce));
        if (r < 0)
                return r;

        kek = bv_secure_alloc(BV_KEY_SIZE);
        if (!kek)
                return -ENOMEM;
        r = derive_kek(&kf, secret, kek);
        if (r == -ENOKEY && !kf.scrypt)
                r = -EINVAL; /* a key file too short to be a key */
        if (r >= 0)
                r = key_crypt(true, kek, repo_id, kf.nonce, master, kf.sealed, kf.sealed + BV_MASTER_SIZE);
        bv_secure_free(kek, BV_KEY_SIZE);
        if (r < 0)
                return r;
        *ret = kf;
        return 0;
}

int bv_repo_keyfile_open(const BvKeyFile *kf, const char *passphrase, const void *material, size_t material_len,
                         uint8_t master[BV_MASTER_SIZE])
{
        uint8_t *kek = bv_secure_alloc(BV_KEY_SIZE);
        BvKeyFile c = *kf; /* key_crypt takes the tag writable (it writes it when sealing) */
        int r;

        if (!kek)
                return -ENOMEM;
        r = derive_kek_from(kf, passphrase, material, material_len, kek);
        if (r >= 0)
                r = key_crypt(false, kek, c.repository, c.nonce, c.sealed, master, c.sealed + BV_MASTER_SIZE);
        bv_secure_free(kek, BV_KEY_SIZE);
        return r == -EBADMSG ? -ENOKEY : r;
}

int repo_key_read(BvBackend *b, const char *slot, char **ret, size_t *ret_len)
{
        return bv_backend_get(b, BV_KIND_KEY, slot, KEYFILE_MAX, (void **)ret, ret_len);
}

int repo_key_write(BvBackend *b, const char *slot, const BvKeyFile *kf, bool replace)
{
        _cleanup_free_ char *json = NULL;
        int r = bv_repo_keyfile_format(kf, &json);
        if (r < 0)
                return r;
        return bv_backend_put(b, BV_KIND_KEY, slot, json, strlen(json), replace ? BV_PUT_REPLACE : BV_PUT_CREATE);
}

/* Opens keys/<slot> with the secret into master (secure memory of BV_MASTER_SIZE). A key file's
 * material is read at the first slot that needs it and kept in *sf for the others. */
static int keyslot_unseal(BvBackend *b, const char *slot, const uint8_t repo_id[BV_REPO_ID_SIZE],
                          const BvSecret *secret, SecretFile *sf, uint8_t *master)
{
        _cleanup_free_ char *json = NULL;
        BvKeyFile kf;
        size_t len;
        int r;

        if (!secret || (!secret->passphrase && !secret->key_file))
                return -ENOKEY;
        r = repo_key_read(b, slot, &json, &len);
        if (r == -ENOENT)
                return -ENOKEY;
        if (r < 0)
                return r;
        r = bv_repo_keyfile_parse(json, len, &kf);
        if (r < 0)
                return r;
        if (memcmp(kf.repository, repo_id, BV_REPO_ID_SIZE) != 0)
                return -ENOKEY; /* the key of another repository */
        if (!kf.scrypt && secret->key_file && !sf->data) {
                r = secret_file_read(secret->key_file, sf);
                if (r < 0)
                        return r;
        }
        return bv_repo_keyfile_open(&kf, secret->passphrase, sf->data, sf->len, master);
}

void bv_key_slots_free(char **names, size_t n)
{
        for (size_t i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
}

bool bv_key_slot_valid(const char *slot)
{
        size_t n = strlen(slot);
        if (n == 0 || n > BV_KEY_SLOT_MAX || slot[0] == '.' || slot[0] == '-')
                return false;
        return strspn(slot, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == n;
}

typedef struct SlotList {
        char **names;
        size_t n;
} SlotList;

static int slot_entry(const BvObjEntry *e, void *userdata)
{
        SlotList *l = userdata;
        char **nn;

        if (!bv_key_slot_valid(e->name) || strchr(e->name, '~'))
                return 0;
        nn = realloc(l->names, (l->n + 2) * sizeof(*l->names));
        if (!nn)
                return -ENOMEM;
        l->names = nn;
        l->names[l->n] = strdup(e->name);
        if (!l->names[l->n])
                return -ENOMEM;
        l->n++;
        return 0;
}

/* The key slots in keys/, sorted, "default" first. */
int repo_key_slots(BvBackend *b, char ***ret, size_t *ret_n)
{
        SlotList l = {};
        char **names;
        size_t n;
        int r = bv_backend_list(b, BV_KIND_KEY, slot_entry, &l);
        if (r < 0) {
                bv_key_slots_free(l.names, l.n);
                return r;
        }
        names = l.names;
        n = l.n;
        for (size_t i = 1; i < n; i++) /* insertion sort, "default" first */
                for (size_t j = i; j > 0; j--) {
                        bool dflt = strcmp(names[j], "default") == 0 && strcmp(names[j - 1], "default") != 0;
                        if (!dflt && (strcmp(names[j - 1], "default") == 0 || strcmp(names[j - 1], names[j]) <= 0))
                                break;
                        char *t = names[j];
                        names[j] = names[j - 1];
                        names[j - 1] = t;
                }
        *ret = names;
        *ret_n = n;
        return 0;
}

/* Tries every key slot: the secret opens the first it fits. No slot at all is -ENOENT (like a
 * missing keys/), not a wrong secret. */
int repo_key_unseal(BvBackend *b, const uint8_t repo_id[BV_REPO_ID_SIZE], const BvSecret *secret, uint8_t *master)
{
        SecretFile sf = {};
        char **names;
        size_t n;
        int r = repo_key_slots(b, &names, &n);
        if (r < 0)
                return r;
        r = n == 0 ? -ENOENT : -ENOKEY;
        for (size_t i = 0; i < n && r == -ENOKEY; i++)
                r = keyslot_unseal(b, names[i], repo_id, secret, &sf, master);
        secret_file_done(&sf);
        bv_key_slots_free(names, n);
        return r;
}

int repo_key_remove(BvBackend *b, const char *slot)
{
        char **names;
        size_t n;
        bool found = false;
        int ret;

        ret = repo_key_slots(b, &names, &n);
        if (ret < 0)
                return ret;
        for (size_t i = 0; i < n; i++)
                found = found || strcmp(names[i], slot) == 0;
        bv_key_slots_free(names, n);
        if (!found)
                return -ENOENT;
        if (n == 1)
                return -EMLINK; /* the last slot: removing it would lose the repository */
        return bv_backend_remove(b, BV_KIND_KEY, slot);
}
