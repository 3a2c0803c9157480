/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The appliance configuration parser (inih with our line reader, the section and key checks,
 * the checks across sections). Whatever the bytes, it must not crash, leak or read out of
 * bounds; every error it records has a line within the text and a message; every entity it
 * keeps has a name.
 */
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvConfig *c = NULL;
        size_t lines = 1;

        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        if (bv_conf_new(&c) < 0)
                abort();
        if (bv_conf_parse_text(c, "fuzz.conf", (const char *)data, size) < 0 || bv_conf_finish(c) < 0)
                abort();
        for (size_t i = 0; i < c->n_errors; i++)
                if (c->errors[i].line > lines || !c->errors[i].message[0] || strcmp(c->errors[i].file, "fuzz.conf") != 0)
                        abort();
        for (size_t i = 0; i < c->n_jobs; i++)
                if (!c->jobs[i].name[0] || (!c->jobs[i].any_target && c->jobs[i].n_targets == 0 && c->n_errors == 0))
                        abort();
        for (size_t i = 0; i < c->n_targets; i++)
                if (c->n_errors == 0 && (!c->targets[i].uuid || !c->targets[i].key_file || !c->targets[i].repository))
                        abort();
        bv_conf_free(c);
        return 0;
}
