/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The snapshot JSON payload: bv_snapshot_from_json on the input; whatever it accepts must
 * encode again, and the encoding must be a fixed point (decode → encode gives the same text).
 * The decoded record then goes through what the library does with loaded records: the name
 * check, and resolution of its id, an id prefix and its name against a list holding it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot-json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void check_uses(BvSnapshot *s, BvSnapshot *t)
{
        BvSnapshot *list[2] = { s, t };
        const BvSnapshot *found = NULL;
        char prefix[BV_SNAPSHOT_NAME_HEX_MIN + 1];

        if (s->name && (bv_snapshot_name_problem(s->name) == NULL) != (bv_snapshot_name_problem(t->name) == NULL))
                abort();
        /* one record: its id, a prefix of it and "latest" find it */
        if (bv_snapshot_resolve(list, 1, s->id, &found) < 0 || found != s)
                abort();
        if (bv_snapshot_resolve(list, 1, "latest", &found) < 0 || found != s)
                abort();
        memcpy(prefix, s->id, BV_SNAPSHOT_NAME_HEX_MIN);
        prefix[BV_SNAPSHOT_NAME_HEX_MIN] = 0;
        (void) bv_snapshot_resolve(list, 1, prefix, &found);
        if (s->name)
                (void) bv_snapshot_resolve(list, 1, s->name, &found);
        /* two records with the same id: resolving it must not crash */
        (void) bv_snapshot_resolve(list, 2, s->id, &found);
        (void) bv_snapshot_resolve(list, 2, prefix, &found);
        if (s->name)
                (void) bv_snapshot_resolve(list, 2, s->name, &found);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvSnapshot *s = NULL, *t = NULL;
        char *a = NULL, *b = NULL;

        if (bv_snapshot_from_json((const char *)data, size, &s) < 0)
                return 0;
        if (bv_snapshot_to_json(s, &a) < 0)
                abort();
        if (bv_snapshot_from_json(a, strlen(a), &t) < 0)
                abort();
        if (bv_snapshot_to_json(t, &b) < 0)
                abort();
        if (strcmp(a, b) != 0 || strcmp(s->id, t->id) != 0 || s->size != t->size || s->time != t->time ||
            s->height != t->height || memcmp(s->root, t->root, sizeof(s->root)) != 0)
                abort();
        check_uses(s, t);
        free(a);
        free(b);
        bv_snapshot_free(s);
        bv_snapshot_free(t);
        return 0;
}
