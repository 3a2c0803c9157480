/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Compiled by test-layering-include.sh with one layer's include path: PROBE_HEADER names a
 * header of that layer (must compile) or of a higher layer (must not be found). */
#include PROBE_HEADER

int probe(void);
int probe(void)
{
        return 0;
}
