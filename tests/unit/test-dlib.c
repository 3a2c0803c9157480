/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Optional libraries loaded on first use (dlib.h): a missing library or symbol is -ELIBACC with
 * words naming it, sets no slot, and is the answer of every later call; a library that loads
 * fills every slot once. */
#include <dlfcn.h>
#include <math.h>

#include "bvtest.h"
#include "dlib.h"
#include "macro.h"

TEST(missing_library)
{
        static BvDlLib lib = {.soname = "libblkvault-no-such-library.so.0"};
        void *slot = NULL;
        const BvDlSym syms[] = {{"anything", &slot}};

        ASSERT_ERROR(bv_dl_open(&lib, syms, ELEMENTSOF(syms)), ELIBACC);
        ASSERT_TRUE(strstr(bv_dl_error(), "cannot load libblkvault-no-such-library.so.0: "));
        ASSERT_TRUE(strstr(bv_dl_error(), "No such file or directory"));
        ASSERT_TRUE(!slot);
        /* the same answer again, without trying again */
        ASSERT_ERROR(bv_dl_open(&lib, syms, ELEMENTSOF(syms)), ELIBACC);
}

TEST(missing_symbol_sets_nothing)
{
        static BvDlLib lib = {.soname = "libm.so.6"};
        void *cos_slot = NULL, *missing_slot = NULL;
        const BvDlSym syms[] = {{"cos", &cos_slot}, {"blkvault_no_such_symbol", &missing_slot}};

        ASSERT_ERROR(bv_dl_open(&lib, syms, ELEMENTSOF(syms)), ELIBACC);
        ASSERT_TRUE(strstr(bv_dl_error(), "cannot load libm.so.6 symbol blkvault_no_such_symbol: "));
        /* all or nothing: cos was found but not set */
        ASSERT_TRUE(!cos_slot && !missing_slot);
}

static double (*sym_test_cos)(double);
static double (*sym_test_sqrt)(double);

TEST(loads_once)
{
        static BvDlLib lib = {.soname = "libm.so.6"};
        const BvDlSym syms[] = {{"cos", (void **)&sym_test_cos}, {"sqrt", (void **)&sym_test_sqrt}};

        ASSERT_OK(bv_dl_open(&lib, syms, ELEMENTSOF(syms)));
        ASSERT_TRUE(sym_test_cos && sym_test_sqrt);
        ASSERT_TRUE(sym_test_cos(0.0) == 1.0 && sym_test_sqrt(16.0) == 4.0);
        sym_test_cos = NULL; /* a second call does not resolve again */
        ASSERT_OK(bv_dl_open(&lib, syms, ELEMENTSOF(syms)));
        ASSERT_TRUE(!sym_test_cos);
}

int main(void)
{
        RUN(missing_library);
        RUN(missing_symbol_sets_nothing);
        RUN(loads_once);
        return 0;
}
