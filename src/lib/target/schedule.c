/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drive.h"
#include "schedule.h"

/* systemd-analyze calendar SPEC, stdout and stderr into out: its exit status, or -errno. */
static int run_analyze(const char *spec, char *out, size_t size)
{
        char *argv[] = { (char *)"systemd-analyze", (char *)"calendar", (char *)spec, NULL };
        out[0] = '\0';
        int r = bv_target_run(argv, out, size);
        return r == 127 ? -ENOENT : r;
}

static char *line_after(const char *text, const char *label)
{
        const char *s = strstr(text, label);
        if (!s)
                return NULL;
        s += strlen(label);
        return strndup(s, strcspn(s, "\n"));
}

int bv_schedule_check(const char *spec, char **ret_next, char **ret_error)
{
        char out[4096];

        if (ret_next)
                *ret_next = NULL;
        if (ret_error)
                *ret_error = NULL;
        int r = run_analyze(spec, out, sizeof(out));
        if (r < 0)
                return r;
        if (r != 0) {
                if (ret_error)
                        *ret_error = strndup(out, strcspn(out, "\n"));
                return -EINVAL;
        }
        if (ret_next) {
                char *next = line_after(out, "Next elapse: ");
                if (next && strcmp(next, "never") == 0) {
                        free(next);
                        next = NULL;
                }
                *ret_next = next;
        }
        return 0;
}
