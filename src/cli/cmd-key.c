/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"

static const char usage_text[] =
        "Usage: blkvault key COMMAND REPO ... [OPTIONS]\n\n"
        "The repository's master key is sealed in one or more key slots (REPO/keys/), each under its\n"
        "own passphrase or key file. Keep an export of a slot away from the repository: without it,\n"
        "a damaged keys/ directory loses every snapshot.\n\n"
        "  change REPO              seal slot 'default' (or --slot) under a new secret; no data is rewritten\n"
        "  export REPO [FILE|-]     write a slot's sealed key to FILE or standard output (default)\n"
        "  import REPO FILE         add a key from an export (either form) as slot 'default' (or --slot)\n"
        "  add REPO                 add a slot sealed under a new secret\n"
        "  list REPO                list the slots\n"
        "  remove REPO SLOT         remove a slot (never the last one)\n\n"
        "  --slot=NAME              the slot (export, import, change, add)\n"
        "  --paper                  export as printable text with a checksum per line\n"
        "  --new-passphrase-file=FILE, --new-key-file=FILE (or $BLKVAULT_NEW_PASSPHRASE, or a prompt)\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

typedef struct KeyArgs {
        SecretArgs cur, new;
        const char *slot;
        bool paper;
} KeyArgs;

static int key_change(BvRepo *repo, const char *path, KeyArgs *a)
{
        BvSecret secret;
        int r = secret_get(&a->new, true, true, &secret);
        if (r < 0)
                return EXIT_KEY;
        if (a->slot && strcmp(a->slot, "default") != 0) {
                /* another slot: replace it by removing and adding */
                r = bv_repo_key_remove(repo, a->slot);
                if (r >= 0)
                        r = bv_repo_key_add(repo, a->slot, &secret);
        } else
                r = bv_repo_change_key(repo, &secret);
        secret_done(&secret);
        if (r < 0)
                return log_error_errno(r, "cannot change the key of '%s'", path);
        log_info("the key of '%s' is now sealed with the new %s", path, a->new.key_file ? "key file" : "passphrase");
        return EXIT_OK;
}

static int key_add(BvRepo *repo, const char *path, KeyArgs *a)
{
        char slot[32];
        if (!a->slot) { /* the first free "key-N" */
                char **names;
                size_t n;
                int r = bv_repo_key_slots(repo, &names, &n);
                if (r < 0)
                        return log_error_errno(r, "cannot list the key slots of '%s'", path);
                for (unsigned k = 1;; k++) {
                        bool used = false;
                        snprintf(slot, sizeof(slot), "key-%u", k);
                        for (size_t i = 0; i < n; i++)
                                used = used || strcmp(names[i], slot) == 0;
                        if (!used)
                                break;
                }
                bv_key_slots_free(names, n);
                a->slot = slot;
        }
        BvSecret secret;
        int r = secret_get(&a->new, true, true, &secret);
        if (r < 0)
                return EXIT_KEY;
        r = bv_repo_key_add(repo, a->slot, &secret);
        secret_done(&secret);
        if (r == -EEXIST) {
                log_error("'%s' has a key slot '%s' already (see 'blkvault key list %s')", path, a->slot, path);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot add key slot '%s' to '%s'", a->slot, path);
        log_info("added key slot '%s' to '%s'", a->slot, path);
        return EXIT_OK;
}

static int key_list(BvRepo *repo, const char *path)
{
        char **names;
        size_t n;
        int r = bv_repo_key_slots(repo, &names, &n);
        if (r < 0)
                return log_error_errno(r, "cannot list the key slots of '%s'", path);
        for (size_t i = 0; i < n; i++)
                printf("%s\n", names[i]);
        bv_key_slots_free(names, n);
        return EXIT_OK;
}

static int key_remove(BvRepo *repo, const char *path, const char *slot)
{
        int r = bv_repo_key_remove(repo, slot);
        if (r == -EMLINK) {
                log_error("'%s' is the last key slot of '%s': removing it would make every snapshot unreadable "
                          "(add another first with 'blkvault key add')", slot, path);
                return EXIT_ERROR;
        }
        if (r == -ENOENT || r == -EINVAL) {
                log_error("'%s' has no key slot '%s' (see 'blkvault key list %s')", path, slot, path);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot remove key slot '%s' of '%s'", slot, path);
        log_info("removed key slot '%s' of '%s'", slot, path);
        return EXIT_OK;
}

static int key_export(BvRepo *repo, const char *path, const char *file, KeyArgs *a)
{
        const char *slot = a->slot ? a->slot : "default";
        _cleanup_free_ char *json = NULL;
        size_t len;
        int r = bv_repo_key_export(repo, slot, &json, &len);
        if (r == -ENOENT || r == -EINVAL) {
                log_error("'%s' has no key slot '%s' (see 'blkvault key list %s')", path, slot, path);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot read key slot '%s' of '%s'", slot, path);
        bool out = strcmp(file, "-") == 0;
        FILE *f = out ? stdout : fopen(file, "wxe");
        if (!f)
                return log_error_errno(-errno, "cannot create '%s'", file);
        r = a->paper ? paper_format(f, json, len) : (fwrite(json, 1, len, f) == len ? 0 : -EIO);
        if (!out && (fclose(f) != 0) && r >= 0)
                r = -errno;
        if (r < 0)
                return log_error_errno(r, "cannot write '%s'", file);
        if (!out)
                log_info("exported key slot '%s' of '%s' to '%s': keep it away from the repository; it opens the "
                         "repository with that slot's passphrase or key file", slot, path, file);
        return EXIT_OK;
}

static int key_import(const char *path, const char *file, KeyArgs *a)
{
        const char *slot = a->slot ? a->slot : "default";
        _cleanup_free_ char *text = NULL, *json = NULL;
        size_t len;
        int r = bv_read_file(AT_FDCWD, file, 1024 * 1024, (void **)&text, &len);
        if (r < 0)
                return log_error_errno(r, "cannot read '%s'", file);
        if (paper_detect(text, len)) {
                r = paper_parse(text, file, &json, &len);
                if (r < 0)
                        return EXIT_ERROR;
        } else
                json = TAKE_PTR(text);
        r = bv_repo_key_import(path, slot, json, len);
        if (r == -EEXIST) {
                log_error("'%s' has a key slot '%s' already: import as another with --slot=NAME", path, slot);
                return EXIT_ERROR;
        }
        if (r == -EXDEV) {
                log_error("'%s' holds the key of another repository", file);
                return EXIT_KEY;
        }
        if (r == -EBADMSG || r == -EPROTONOSUPPORT) {
                log_error("'%s' is not a blkvault key export", file);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot import '%s' into '%s'", file, path);
        log_info("imported '%s' into '%s' as key slot '%s'", file, path, slot);
        return EXIT_OK;
}

static int parse_slot(const char *arg, void *ret)
{
        if (!bv_key_slot_valid(arg)) {
                log_error("invalid --slot '%s' (1 to 64 of a-z, 0-9, '.', '_', '-')", arg);
                return -EINVAL;
        }
        *(const char **)ret = arg;
        return 0;
}

static int parse_key_args(int argc, char **argv, KeyArgs *a)
{
        const CliOption options[] = {
                CLI_STR("new-passphrase-file", &a->new.passphrase_file),
                CLI_STR("new-key-file", &a->new.key_file),
                CLI_PARSED("slot", parse_slot, &a->slot),
                CLI_FLAG("paper", &a->paper),
                {},
        };
        static const CliKeyword keywords[] = {
                { "change", "REPO" }, { "export", "REPO [FILE|-]" }, { "import", "REPO FILE" },
                { "add", "REPO" },    { "list", "REPO" },            { "remove", "REPO SLOT" },
                {},
        };
        return cli_parse(&(CliCommand){ .name = "key", .usage = usage_text, .options = options, .secret = &a->cur,
                                        .keywords = keywords },
                         &argc, &argv);
}

int cmd_key(int argc, char **argv)
{
        KeyArgs a = { .new = { .new_secret = true } };
        int r = parse_key_args(argc, argv, &a);
        if (r >= 0)
                return r;
        const char *verb = argv[optind];
        int nargs = argc - optind - 1;
        const char *path = argv[optind + 1];
        if (strcmp(verb, "import") == 0)
                return key_import(path, argv[optind + 2], &a);

        bool writes = strcmp(verb, "export") != 0 && strcmp(verb, "list") != 0;
        OPEN_REPO_OR_RETURN(repo, path, &a.cur, writes ? BV_OPEN_WRITE | BV_OPEN_KEYS : BV_OPEN_READ);
        if (bv_repo_config(repo)->cipher == BV_CIPHER_NONE) {
                log_error("repository '%s' is not encrypted: it has no key to %s", path, verb);
                return EXIT_USAGE;
        }
        if (strcmp(verb, "change") == 0)
                return key_change(repo, path, &a);
        if (strcmp(verb, "add") == 0)
                return key_add(repo, path, &a);
        if (strcmp(verb, "list") == 0)
                return key_list(repo, path);
        if (strcmp(verb, "remove") == 0)
                return key_remove(repo, path, argv[optind + 2]);
        return key_export(repo, path, nargs == 2 ? argv[optind + 2] : "-", &a);
}
