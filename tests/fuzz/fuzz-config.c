/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The config file parser. A config that parses must format back to JSON that parses to the
 * same values, and its canonical MAC text must be deterministic. The parsed values then go
 * through the checks repository open applies (bv_repo_config_check), whose verdict must not
 * change across the round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "repo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvRepoConfigFile f, g;
        char *json = NULL, *c1 = NULL, *c2 = NULL;

        if (bv_repo_config_parse((const char *)data, size, &f) < 0)
                return 0;
        if (bv_repo_config_format(&f, &json) < 0 || bv_repo_config_parse(json, strlen(json), &g) < 0)
                abort();
        if (memcmp(&f.config, &g.config, sizeof(f.config)) != 0 || memcmp(f.id, g.id, sizeof(f.id)) != 0 ||
            memcmp(f.mac, g.mac, sizeof(f.mac)) != 0 || f.created != g.created)
                abort();
        if (bv_repo_config_canonical(&f, &c1) < 0 || bv_repo_config_canonical(&g, &c2) < 0 || strcmp(c1, c2) != 0)
                abort();
        if (bv_repo_config_check(&f.config) != bv_repo_config_check(&g.config))
                abort();
        free(json);
        free(c1);
        free(c2);
        return 0;
}
