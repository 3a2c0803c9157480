/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Replay driver for fuzz targets in ordinary test runs: feeds every file of the corpus
 * directories named on the command line (and, for each, every single-byte truncation and a
 * few bit flips) to LLVMFuzzerTestOneInput. Built instead of libFuzzer's main unless
 * -Dfuzzing=true.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                perror(path);
                return -1;
        }
        size_t len = (size_t)st.st_size;
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf || read(fd, buf, len) != (ssize_t)len) {
                perror(path);
                close(fd);
                free(buf);
                return -1;
        }
        close(fd);

        LLVMFuzzerTestOneInput(buf, len);
        /* Truncations: every prefix length for small inputs, a spread for large ones. */
        size_t step = len > 4096 ? len / 512 : 1;
        for (size_t n = 0; n < len; n += step) {
                uint8_t *copy = malloc(n ? n : 1);
                memcpy(copy, buf, n);
                LLVMFuzzerTestOneInput(copy, n);
                free(copy);
        }
        /* Deterministic bit flips. */
        uint64_t x = 0x243f6a8885a308d3ull ^ len;
        for (int i = 0; i < 256 && len > 0; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                size_t pos = (size_t)(x % len);
                buf[pos] ^= (uint8_t)(1u << (x >> 61));
                LLVMFuzzerTestOneInput(buf, len);
                buf[pos] ^= (uint8_t)(1u << (x >> 61));
        }
        free(buf);
        return 0;
}

int main(int argc, char **argv)
{
        int files = 0;
        for (int i = 1; i < argc; i++) {
                DIR *d = opendir(argv[i]);
                if (!d) {
                        if (replay_file(argv[i]) < 0)
                                return 1;
                        files++;
                        continue;
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        if (replay_file(path) < 0) {
                                closedir(d);
                                return 1;
                        }
                        files++;
                }
                closedir(d);
        }
        if (files == 0) {
                fprintf(stderr, "no corpus files found\n");
                return 1;
        }
        printf("replayed %d corpus files\n", files);
        return 0;
}
