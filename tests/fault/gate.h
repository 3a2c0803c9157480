/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A gate file for fault tests: a program held at a known point announces it with GATE.waiting
 * and goes on once the test creates GATE (stall.so, virtgate.so, tests/libvirt/agent-tool).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Creates GATE.waiting when announce is set, then waits until GATE exists. */
static inline void gate_wait(const char *gate, bool announce)
{
        char path[PATH_MAX];

        if (announce) {
                snprintf(path, sizeof(path), "%s.waiting", gate);
                int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd >= 0)
                        close(fd);
        }
        while (access(gate, F_OK) != 0)
                nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}
