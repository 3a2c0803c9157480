/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
        "Usage: blkvault init REPO [OPTIONS]\n\n"
        "Create a repository in REPO (a missing or empty directory).\n\n"
        "  --encryption=aes-256-gcm|none   default aes-256-gcm\n"
        "  --chunker=hybrid|cdc|fixed      default hybrid\n"
        "  --chunk-size=MIN:AVG:MAX        bytes, K/M suffixes allowed; default 16K:64K:256K\n"
        "  --compression=auto|zstd[:LEVEL]|none\n"
        "                                  default auto: zstd where it pays, at a level chosen\n"
        "                                  for each group of new data\n"
        "  --passphrase-file=FILE          read the new passphrase from FILE\n"
        "  --key-file=FILE                 seal the repository key with the contents of FILE\n"
        "  --passphrase-fd=N               read the new passphrase from file descriptor N\n"
        "  --passphrase-command=CMD        the new passphrase is what /bin/sh -c CMD prints\n"
        "  -q, --quiet                     no progress or status lines\n"
        "  -v, --verbose                   more detail (timings)\n"
        "  -h, --help\n\n"
        "Without a secret option the passphrase comes from $BLKVAULT_PASSPHRASE or, on a terminal,\n"
        "a prompt.\n";

static int parse_size(const char *s, uint32_t *ret)
{
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s)
                return -EINVAL;
        if (*end == 'K' || *end == 'k')
                v <<= 10, end++;
        else if (*end == 'M' || *end == 'm')
                v <<= 20, end++;
        if (*end == 'i' && end[1] == 'B')
                end += 2;
        if (*end != '\0' || v == 0 || v > UINT32_MAX)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

static int parse_chunk_sizes(const char *text, BvRepoConfig *cfg)
{
        char *arg = strdupa(text);
        char *min = strtok(arg, ":"), *avg = strtok(NULL, ":"), *max = strtok(NULL, ":");
        if (!min || !avg || !max || strtok(NULL, ":"))
                return -EINVAL;
        if (parse_size(min, &cfg->chunker.min) < 0 || parse_size(avg, &cfg->chunker.avg) < 0 ||
            parse_size(max, &cfg->chunker.max) < 0)
                return -EINVAL;
        return 0;
}

static int parse_compression(const char *arg, BvRepoConfig *cfg)
{
        cfg->compress_mode = BV_COMPRESS_LEVEL;
        if (strcmp(arg, "auto") == 0) {
                cfg->compress_mode = BV_COMPRESS_AUTO;
                cfg->zstd_level = 3;
                return 0;
        }
        if (strcmp(arg, "none") == 0) {
                cfg->zstd_level = 0;
                return 0;
        }
        if (strcmp(arg, "zstd") == 0) {
                cfg->zstd_level = 3;
                return 0;
        }
        if (strncmp(arg, "zstd:", 5) == 0) {
                char *end;
                long level = strtol(arg + 5, &end, 10);
                if (*end || end == arg + 5 || level < 1 || level > 19)
                        return -EINVAL;
                cfg->zstd_level = (int)level;
                return 0;
        }
        return -EINVAL;
}

static int parse_cipher(const char *arg, void *ret)
{
        if (bv_cipher_from_name(arg, &((BvRepoConfig *)ret)->cipher) < 0) {
                log_error("unknown encryption '%s' (aes-256-gcm or none)", arg);
                return -EINVAL;
        }
        return 0;
}

static int parse_chunker(const char *arg, void *ret)
{
        if (bv_chunker_kind_from_name(arg, &((BvRepoConfig *)ret)->chunker.kind) < 0) {
                log_error("unknown chunker '%s' (hybrid, cdc or fixed)", arg);
                return -EINVAL;
        }
        return 0;
}

static int parse_chunk_size_opt(const char *arg, void *ret)
{
        if (parse_chunk_sizes(arg, ret) < 0) {
                log_error("invalid --chunk-size '%s' (expected MIN:AVG:MAX)", arg);
                return -EINVAL;
        }
        return 0;
}

static int parse_compression_opt(const char *arg, void *ret)
{
        if (parse_compression(arg, ret) < 0) {
                log_error("invalid --compression '%s' (auto, zstd, zstd:LEVEL 1-19, or none)", arg);
                return -EINVAL;
        }
        return 0;
}

int cmd_init(int argc, char **argv)
{
        SecretArgs sargs = {};
        BvRepoConfig cfg;
        BvSecret secret;
        const CliOption options[] = {
                CLI_PARSED("encryption", parse_cipher, &cfg),
                CLI_PARSED("chunker", parse_chunker, &cfg),
                CLI_PARSED("chunk-size", parse_chunk_size_opt, &cfg),
                CLI_PARSED("compression", parse_compression_opt, &cfg),
                {},
        };
        int r;

        bv_repo_config_default(&cfg);
        CLI_PARSE_OR_RETURN(argc, argv, .name = "init", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO");
        const char *path = argv[optind];

        BvChunkerParams params = cfg.chunker;
        if (bv_chunker_params_check(&params) < 0) {
                log_error("invalid chunk sizes %u:%u:%u for the %s chunker (need min < avg < max, "
                          "multiples of 4 KiB for hybrid and fixed, at most 4 MiB)",
                          cfg.chunker.min, cfg.chunker.avg, cfg.chunker.max, bv_chunker_kind_name(cfg.chunker.kind));
                return EXIT_USAGE;
        }

        if (cfg.cipher == BV_CIPHER_NONE && (sargs.passphrase_file || sargs.key_file || sargs.passphrase_fd ||
                                             sargs.passphrase_command)) {
                log_error("--encryption=none stores the data unencrypted: a passphrase or key file would protect "
                          "nothing (leave out --encryption=none to encrypt)");
                return EXIT_USAGE;
        }
        r = secret_get(&sargs, cfg.cipher != BV_CIPHER_NONE, true, &secret);
        if (r < 0)
                return EXIT_KEY;
        bool shown = secret.passphrase && status_begin("sealing the key with the passphrase (scrypt)...");
        r = bv_repo_init(path, &cfg, &secret);
        status_end(shown);
        secret_done(&secret);
        if (r < 0)
                return log_error_errno(r, "cannot create repository '%s'", path);
        log_info("created %s repository '%s' (%s chunker, %s)", bv_cipher_name(cfg.cipher), path,
                 bv_chunker_kind_name(cfg.chunker.kind),
                 !cfg.zstd_level                         ? "no compression"
                 : cfg.compress_mode == BV_COMPRESS_AUTO ? "zstd where it pays"
                                                         : "zstd");
        if (cfg.cipher != BV_CIPHER_NONE)
                log_info("the repository key is sealed in '%s/keys/default', its only copy: export it and keep the "
                         "export elsewhere ('blkvault key export %s FILE', or --paper to print it)", path, path);
        return EXIT_OK;
}
