/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

int main(int argc, char **argv)
{
        fprintf(stderr, "blkvault: not implemented yet\n");
        return 1;
}
