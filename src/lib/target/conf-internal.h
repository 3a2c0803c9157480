/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Between the file reader (conf.c) and the sections' keys and checks (conf-sections.c). */

#include "conf.h"

typedef enum ConfKind {
        CONF_NONE,
        CONF_INVALID, /* a section that was reported: its keys are skipped */
        CONF_TARGET,
        CONF_JOB,
        CONF_EXPORT,
        CONF_REMOTE,
        CONF_GLOBAL,
} ConfKind;

/* The section being filled: its kind and its index in the config's array of that kind. */
typedef struct ConfSection {
        ConfKind kind;
        size_t index;
        unsigned seen[24]; /* the line each key was set on, by its index in the kind's key table */
} ConfSection;

int conf_error(BvConfig *c, const char *file, unsigned line, const char *fmt, ...) _printf_(4, 5);

/* A section header was seen (the first key after it): parse "KIND NAME" and add the entity. */
int conf_section_open(BvConfig *c, const char *file, unsigned line, const char *header, ConfSection *ret);
/* key = value in the current section. */
int conf_section_set(BvConfig *c, ConfSection *s, const char *file, unsigned line, const char *key,
                     const char *value);

/* The mistake of the target, job, export or remote whose section header is at (file, line), or NULL. */
char **conf_section_mistake(BvConfig *c, const char *file, unsigned line);
/* Keeps e as *mistake ("FILE:LINE: MESSAGE") unless it holds one already. -ENOMEM only. */
int conf_set_mistake(char **mistake, const BvConfError *e);

/* conf-owner.c: an error at file:line when path (a file or directory) is not owned by root (or
 * the effective user) or is writable by others, or, for a secret, readable by others. */
int conf_check_owner(BvConfig *c, const char *file, unsigned line, const char *path, bool secret);
/* The same for the file of st (as it was opened and read). */
int conf_check_owner_st(BvConfig *c, const char *file, unsigned line, const char *path, const struct stat *st,
                        bool secret);
/* Every file read, c->dirs, and the secret files the sections name. */
int conf_check_owners(BvConfig *c);
