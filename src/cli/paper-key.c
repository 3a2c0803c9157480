/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The paper form of a key file: printable lines that a person can type back, each with a
 * checksum so that a typo is found on the line where it was made.
 *
 *   blkvault paper key v1, 517 bytes
 *   01: 7b227665 7273696f 6e223a31 2c227265 706f7369 746f7279 223a2231 65356530  9f3a
 *   ...
 *
 * A line holds 32 bytes in hex (the last one fewer); its checksum is the first two bytes of
 * SHA-256 over "NN:" and the line's hex digits, so a changed digit, a swapped pair and a line
 * typed in the wrong place are all found.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hash.h"
#include "hex.h"

#define PAPER_HEADER "blkvault paper key v1, "
#define PAPER_LINE 32

static void line_sum(unsigned line, const char *hex, char out[5])
{
        char buf[8 + 2 * PAPER_LINE];
        uint8_t h[BV_HASH_SIZE];
        int n = snprintf(buf, sizeof(buf), "%02u:%s", line, hex);
        bv_sha256(buf, (size_t)n, h);
        bv_hex_encode(h, 2, out);
}

int paper_format(FILE *f, const char *data, size_t len)
{
        fprintf(f, PAPER_HEADER "%zu bytes\n", len);
        for (size_t off = 0, line = 1; off < len; off += PAPER_LINE, line++) {
                size_t n = MIN((size_t)PAPER_LINE, len - off);
                char hex[2 * PAPER_LINE + 1], sum[5];
                bv_hex_encode(data + off, n, hex);
                line_sum((unsigned)line, hex, sum);
                fprintf(f, "%02zu:", line);
                for (size_t i = 0; i < 2 * n; i += 8)
                        fprintf(f, " %.8s", hex + i);
                fprintf(f, "  %s\n", sum);
        }
        return ferror(f) ? -EIO : 0;
}

bool paper_detect(const char *text, size_t len)
{
        return len >= strlen(PAPER_HEADER) && strncmp(text, PAPER_HEADER, strlen(PAPER_HEADER)) == 0;
}

/* One typed line "NN: hex hex ...  sum": its hex digits (no spaces) and checksum. */
static int parse_line(const char *line, unsigned *ret_no, char hex[2 * PAPER_LINE + 1], char sum[5])
{
        char digits[2 * PAPER_LINE + 8];
        size_t n = 0;
        unsigned no;
        int used;
        if (sscanf(line, " %u:%n", &no, &used) != 1)
                return -EINVAL;
        for (const char *p = line + used; *p; p++) {
                if (isspace((unsigned char)*p))
                        continue;
                if (!isxdigit((unsigned char)*p) || n + 1 >= sizeof(digits))
                        return -EINVAL;
                digits[n++] = (char)tolower((unsigned char)*p);
        }
        if (n < 4 + 2 || (n - 4) % 2)
                return -EINVAL;
        memcpy(sum, digits + n - 4, 4);
        sum[4] = '\0';
        memcpy(hex, digits, n - 4);
        hex[n - 4] = '\0';
        *ret_no = no;
        return 0;
}

int paper_parse(const char *text, const char *file, char **ret, size_t *ret_len)
{
        size_t len;
        if (sscanf(text, PAPER_HEADER "%zu bytes", &len) != 1 || len == 0 || len > 64 * 1024) {
                log_error("'%s' does not start with a paper key's first line", file);
                return -EINVAL;
        }
        _cleanup_free_ char *out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        size_t got = 0;
        unsigned expect = 1;
        for (const char *p = strchr(text, '\n'); p && got < len; p = strchr(p, '\n')) {
                char line[256], hex[2 * PAPER_LINE + 1], sum[5], want[5];
                unsigned no;
                p++;
                size_t n = strcspn(p, "\n");
                if (n == 0 || n >= sizeof(line))
                        continue;
                memcpy(line, p, n);
                line[n] = '\0';
                int pr = parse_line(line, &no, hex, sum);
                if (pr >= 0 && no != expect) {
                        log_error("line %u of the paper key in '%s' is missing (line %u follows line %u)", expect,
                                  file, no, expect - 1);
                        return -EINVAL;
                }
                if (pr < 0) {
                        log_error("line %u of the paper key in '%s' is not readable: type it again as printed",
                                  expect, file);
                        return -EINVAL;
                }
                line_sum(no, hex, want);
                size_t bytes = strlen(hex) / 2;
                if (strcmp(sum, want) != 0 || bytes > len - got || bv_hex_decode(hex, out + got, bytes) < 0) {
                        log_error("line %u of the paper key in '%s' does not match its checksum: a typo? Compare "
                                  "it with the paper", no, file);
                        return -EBADMSG;
                }
                got += bytes;
                expect++;
        }
        if (got != len) {
                log_error("the paper key in '%s' ends after %zu of %zu bytes: a line is missing", file, got, len);
                return -EINVAL;
        }
        out[len] = '\0';
        *ret = TAKE_PTR(out);
        *ret_len = len;
        return 0;
}
