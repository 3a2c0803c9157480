/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Private to the repo layer (repo.c, repocheck.c, repokey.c, lease.c): naming what a repository's
 * open refused or found damaged, the writer's check of the packs the index names, and key files. */

#include "lease.h"
#include "repo.h"

/* The index's damaged segments as problems (index/<name>), appended to *list. */
int repo_index_damage(BvBackend *b, BvIndex *index, BvRepoProblem **list, size_t *n);

/* For a writer: lists packs/ (refusing a symbolic link or a foreign type there, named in *p) and
 * compares it with the packs the index names. The missing ones (sorted, malloc'd) are handed to
 * the index, which then treats what they held as not stored, and returned. */
int repo_check_packs(BvBackend *b, BvIndex *index, BvPackSet *packs, BvRepoProblem *p,
                     uint8_t (**ret_missing)[BV_PACK_ID_SIZE], size_t *ret_count);

/* The lock and the lease an open takes (lease.c): gc locks/gc exclusively; writers locks/write
 * and a lease; readers a lease, or the shared locks/gc where leases/ cannot be written. */
int repo_open_lock(BvBackend *b, BvOpenFlags flags, BvRepoProblem *problem, int *ret_lock_fd, BvLease **ret_lease);

/* Key files (repokey.c). A secret to seal with: exactly one of a passphrase and a key file
 * (-ENOKEY: neither; -EINVAL: both). */
int repo_secret_check(const BvSecret *secret);
/* Seals master under secret, a fresh salt and nonce into *ret. */
int repo_key_seal(const uint8_t repo_id[BV_REPO_ID_SIZE], const BvSecret *secret, const uint8_t *master,
                  BvKeyFile *ret);
/* Opens master (secure memory of BV_MASTER_SIZE) with the first slot the secret fits: -ENOKEY if none,
 * -ENOENT if there is no slot (or no keys/). */
int repo_key_unseal(BvBackend *b, const uint8_t repo_id[BV_REPO_ID_SIZE], const BvSecret *secret, uint8_t *master);
/* The slots in keys/, sorted, "default" first (bv_key_slots_free). */
int repo_key_slots(BvBackend *b, char ***ret, size_t *ret_n);
/* keys/<slot>: its JSON read, written durably (replacing only with replace), or removed (-ENOENT
 * if absent, -EMLINK for the last slot). The slot name is the caller's to check. */
int repo_key_read(BvBackend *b, const char *slot, char **ret, size_t *ret_len);
int repo_key_write(BvBackend *b, const char *slot, const BvKeyFile *kf, bool replace);
int repo_key_remove(BvBackend *b, const char *slot);
