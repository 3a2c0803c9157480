/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * Forgetting and protecting snapshots (docs/FORMAT.md, "Forgetting a snapshot"): a snapshot
 * is forgotten by unlinking snapshots/<id>.snap and fsyncing the directory (atomic: no
 * half-deleted state); snapshots/<id>.protect, an empty marker, keeps it from every policy.
 */
#include <stdbool.h>

#include "backend.h"

/* 1 if protected, 0 if not; -errno. */
int bv_snapshot_is_protected(BvBackend *b, const char *id);
/* Sets or clears the marker, durably. -ENOENT if the snapshot does not exist. */
int bv_snapshot_protect(BvBackend *b, const char *id, bool on);
/* Forgets the snapshot: -EPERM if protected and !force, -ENOENT if absent. */
int bv_snapshot_forget(BvBackend *b, const char *id, bool force);
