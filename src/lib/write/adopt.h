/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Resuming an interrupted backup (docs/LIFECYCLE.md, "Interrupted backups"): a backup that was
 * killed, lost its drive or met a full filesystem may leave durable packs that no index segment
 * names (it died before it recorded them). The next backup adopts them: it reads each one's own
 * index and records it in a new durable index segment, so that every chunk they hold counts as
 * stored and is not stored again.
 */

#include <stdint.h>

#include "object.h"
#include "repo.h"

/* Call with the repository open for writing (locks/write held: no other backup writes packs) and
 * its lease taken. Under locks/commit, so that no gc condemns meanwhile: packs in a condemned list
 * (gc/<16 hex>.idx) are left to it, and a gc that condemns later finds them named by the index
 * (and, if their entries are unused, waits for this backup's lease before deleting them). */
/* ret_packs, ret_bytes: the packs adopted and their encoded bytes (an orphan whose own index does
 * not read is left to gc). */
int bv_backup_adopt(BvRepo *repo, BvObjectCodec *codec, uint64_t *ret_packs, uint64_t *ret_bytes);
