/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The snapshot JSON payload: bv_snapshot_from_json on the input; whatever it accepts must
 * encode again, and the encoding must be a fixed point (decode → encode gives the same text).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot-json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
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
        free(a);
        free(b);
        bv_snapshot_free(s);
        bv_snapshot_free(t);
        return 0;
}
