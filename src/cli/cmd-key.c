/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
        "Usage: blkvault key change REPO [OPTIONS]\n\n"
        "Seal the repository key under a new passphrase or key file. No data is rewritten.\n"
        "The current secret comes from --passphrase-file, --key-file, $BLKVAULT_PASSPHRASE or a\n"
        "prompt; the new one from --new-passphrase-file, --new-key-file, $BLKVAULT_NEW_PASSPHRASE\n"
        "or a prompt.\n\n"
        "  --new-passphrase-file=FILE, --new-key-file=FILE\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -h, --help\n";

int cmd_key(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "new-passphrase-file", required_argument, NULL, 'p' },
                { "new-key-file", required_argument, NULL, 'k' },
                SECRET_OPTIONS,
                {},
        };
        SecretArgs sargs = {}, new_args = { .new_secret = true };
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'p':
                        new_args.passphrase_file = optarg;
                        break;
                case 'k':
                        new_args.key_file = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 2 != argc || strcmp(argv[optind], "change") != 0) {
                log_error("expected: blkvault key change REPO (see 'blkvault key --help')");
                return EXIT_USAGE;
        }
        const char *path = argv[optind + 1];

        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_WRITE, &repo);
        if (r != EXIT_OK)
                return r;
        if (bv_repo_config(repo)->cipher == BV_CIPHER_NONE) {
                log_error("repository '%s' is not encrypted: it has no key to change", path);
                return EXIT_USAGE;
        }

        BvSecret secret;
        r = secret_get(&new_args, true, true, &secret);
        if (r < 0)
                return EXIT_KEY;
        r = bv_repo_change_key(repo, &secret);
        secret_done(&secret);
        if (r < 0)
                return log_error_errno(r, "cannot change the key of '%s'", path);
        log_info("the key of '%s' is now sealed with the new %s", path,
                 new_args.key_file ? "key file" : "passphrase");
        return EXIT_OK;
}
