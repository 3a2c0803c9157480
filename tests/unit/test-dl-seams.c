/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The seams of the optional libraries (virt-dl.h, ext2fs-dl.h, ntfs-dl.h, drive-dl.h): none of
 * them is loaded before its first use (this program links libblkvault as blkvault does), and each
 * table resolves whole against the installed library (a misspelt or missing name fails here, not
 * on an operator's first libvirt backup). */
#include <dlfcn.h>

#include "bvtest.h"
#include "drive-dl.h"
#include "ext2fs-dl.h"
#include "macro.h"
#include "ntfs-dl.h"
#include "virt-dl.h"

static bool loaded(const char *soname)
{
        void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);

        if (h)
                dlclose(h);
        return h != NULL;
}

/* (not libcom_err: Kerberos, under libcurl and libtirpc, loads it anyway) */
static const char *const sonames[] = {"libvirt.so.0",     "libvirt-qemu.so.0",   "libext2fs.so.2",
                                      "libntfs-3g.so.89", "libcryptsetup.so.12", "libguestfs.so.0",
                                      "libsystemd.so.0"};

TEST(none_loaded_at_start)
{
        for (size_t i = 0; i < ELEMENTSOF(sonames); i++) {
                if (loaded(sonames[i]))
                        fprintf(stderr, "%s is loaded at start\n", sonames[i]);
                ASSERT_TRUE(!loaded(sonames[i]));
        }
}

TEST(tables_resolve)
{
        ASSERT_OK(virt_dl_open());
        ASSERT_TRUE(loaded("libvirt.so.0") && loaded("libvirt-qemu.so.0"));
        ASSERT_TRUE(sym_virConnectOpen && sym_virDomainQemuAgentCommand);
        ASSERT_OK(ext2fs_dl_open());
        ASSERT_TRUE(sym_ext2fs_open2 && sym_error_message);
        /* a variable: its address, and what the library set it to */
        ASSERT_TRUE(sym_unix_io_manager && unix_io_manager && unix_io_manager->name);
        ASSERT_STREQ(unix_io_manager->name, "Unix I/O Manager");
        ASSERT_OK(ntfs_dl_open());
        ASSERT_TRUE(sym_ntfs_device_mount && sym_NTFS_INDEX_I30 && sym_AT_UNNAMED);
        ASSERT_EQ(NTFS_INDEX_I30[0], 0x24); /* "$I30" in little-endian UTF-16 */
        ASSERT_OK(drive_dl_open());
        ASSERT_TRUE(sym_crypt_init && sym_crypt_free);
        ASSERT_EQ(bv_dl_error()[0], 0);
}

int main(void)
{
        RUN(none_loaded_at_start);
        RUN(tables_resolve);
        return 0;
}
