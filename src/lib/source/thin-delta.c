/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thin_delta's XML, as thin-provisioning-tools 0.9 prints it:
 *
 *   <superblock uuid="" time="1" transaction="2" data_block_size="128" nr_data_blocks="1024">
 *     <diff left="1" right="2">
 *       <same begin="0" length="4"/>                     (plain)
 *       <different>                                      (--verbose: ranges nested)
 *         <range begin="4" left_data_begin="4" right_data_begin="100" length="2"/>
 *       </different>
 *       ...
 *
 * Begin and length count blocks of the thin devices; with --verbose, data_begin (and
 * left_data_begin, right_data_begin) the pool's data blocks, of which there are nr_data_blocks.
 * The XML must agree with itself: no range uses a data block past nr_data_blocks, and neither
 * device maps more blocks than the pool has. With --metadata-snap nr_data_blocks is 0: the
 * kernel wipes the space map roots in the metadata snapshot's superblock, so 0 means unknown. A
 * small reader for exactly this shape: elements, their
 * attributes (name="value", no entities needed: the values are numbers and a uuid), comments and
 * the XML declaration skipped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "thin-delta.h"

#define MAX_ATTRS 8

typedef struct Element {
        char name[24];
        bool closing;      /* </name> */
        bool self_closing; /* <name .../> */
        struct {
                char name[24];
                char value[48];
        } attrs[MAX_ATTRS];
        size_t n_attrs;
} Element;

/* What a range says: mapped by both devices to the same blocks, to different ones, or by one. */
typedef enum { KIND_NONE, KIND_SAME, KIND_DIFFERENT, KIND_LEFT_ONLY, KIND_RIGHT_ONLY } RangeKind;

typedef struct Parser {
        const char *p, *end;
        BvThinDelta d;
        size_t cap;
        uint64_t next_block; /* ranges must come in order */
        uint64_t mapped_left, mapped_right; /* blocks each device maps, at most nr_data_blocks */
        bool in_superblock, in_diff, seen_diff;
        RangeKind group; /* the --verbose group open, KIND_NONE outside one */
} Parser;

static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_space(Parser *ps)
{
        while (ps->p < ps->end && is_space(*ps->p))
                ps->p++;
}

/* Copies [from, to) into buf of size; -EBADMSG when it does not fit or is empty. */
static int copy_token(const char *from, const char *to, char *buf, size_t size)
{
        if (to <= from || (size_t)(to - from) >= size)
                return -EBADMSG;
        memcpy(buf, from, (size_t)(to - from));
        buf[to - from] = 0;
        return 0;
}

static int parse_attr(Parser *ps, Element *e)
{
        const char *name = ps->p;

        if (e->n_attrs == MAX_ATTRS)
                return -EBADMSG;
        while (ps->p < ps->end && (*ps->p == '_' || (*ps->p >= 'a' && *ps->p <= 'z')))
                ps->p++;
        int r = copy_token(name, ps->p, e->attrs[e->n_attrs].name, sizeof(e->attrs[0].name));
        if (r < 0 || ps->end - ps->p < 2 || ps->p[0] != '=' || ps->p[1] != '"')
                return -EBADMSG;
        ps->p += 2;
        const char *value = ps->p, *q = memchr(ps->p, '"', (size_t)(ps->end - ps->p));
        if (!q)
                return -EBADMSG;
        if (q == value)
                e->attrs[e->n_attrs].value[0] = 0; /* uuid="" */
        else if ((r = copy_token(value, q, e->attrs[e->n_attrs].value, sizeof(e->attrs[0].value))) < 0)
                return r;
        ps->p = q + 1;
        e->n_attrs++;
        return 0;
}

/* The next element: 1, or 0 at the end of the text (only white space left). */
static int next_element(Parser *ps, Element *e)
{
        for (;;) {
                skip_space(ps);
                if (ps->p == ps->end)
                        return 0;
                if (*ps->p != '<')
                        return -EBADMSG; /* no text content in this format */
                if (ps->end - ps->p >= 4 && memcmp(ps->p, "<!--", 4) == 0) {
                        const char *q = memmem(ps->p, (size_t)(ps->end - ps->p), "-->", 3);
                        if (!q)
                                return -EBADMSG;
                        ps->p = q + 3;
                } else if (ps->end - ps->p >= 2 && ps->p[1] == '?') {
                        const char *q = memmem(ps->p, (size_t)(ps->end - ps->p), "?>", 2);
                        if (!q)
                                return -EBADMSG;
                        ps->p = q + 2;
                } else
                        break;
        }
        *e = (Element){};
        ps->p++;
        if (ps->p < ps->end && *ps->p == '/') {
                e->closing = true;
                ps->p++;
        }
        const char *name = ps->p;
        while (ps->p < ps->end && (*ps->p == '_' || (*ps->p >= 'a' && *ps->p <= 'z')))
                ps->p++;
        if (copy_token(name, ps->p, e->name, sizeof(e->name)) < 0)
                return -EBADMSG;
        for (;;) {
                skip_space(ps);
                if (ps->p == ps->end)
                        return -EBADMSG;
                if (*ps->p == '>') {
                        ps->p++;
                        return 1;
                }
                if (ps->end - ps->p >= 2 && ps->p[0] == '/' && ps->p[1] == '>' && !e->closing) {
                        e->self_closing = true;
                        ps->p += 2;
                        return 1;
                }
                if (e->closing)
                        return -EBADMSG;
                int r = parse_attr(ps, e);
                if (r < 0)
                        return r;
        }
}

static const char *attr(const Element *e, const char *name)
{
        for (size_t i = 0; i < e->n_attrs; i++)
                if (strcmp(e->attrs[i].name, name) == 0)
                        return e->attrs[i].value;
        return NULL;
}

static int attr_u64(const Element *e, const char *name, uint64_t *ret)
{
        const char *v = attr(e, name);
        char *endp;

        if (!v || *v < '0' || *v > '9')
                return -EBADMSG;
        errno = 0;
        unsigned long long x = strtoull(v, &endp, 10);
        if (errno || *endp)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static RangeKind range_kind(const char *name)
{
        if (strcmp(name, "same") == 0)
                return KIND_SAME;
        if (strcmp(name, "different") == 0)
                return KIND_DIFFERENT;
        if (strcmp(name, "left_only") == 0)
                return KIND_LEFT_ONLY;
        if (strcmp(name, "right_only") == 0)
                return KIND_RIGHT_ONLY;
        return KIND_NONE;
}

/* A --verbose range's data blocks (any of name present) lie within the pool. */
static int check_data_blocks(const Parser *ps, const Element *e, const char *name, uint64_t length)
{
        uint64_t begin;

        if (!attr(e, name) || ps->d.data_blocks == 0)
                return 0;
        if (attr_u64(e, name, &begin) < 0 || begin > ps->d.data_blocks || length > ps->d.data_blocks - begin)
                return -EBADMSG;
        return 0;
}

/* Counts the blocks each device maps: never more than the pool has. */
static int count_mapped(Parser *ps, RangeKind kind, uint64_t length)
{
        if (kind != KIND_RIGHT_ONLY)
                ps->mapped_left += length; /* cannot wrap: the ranges' ends fit in 64 bits */
        if (kind != KIND_LEFT_ONLY)
                ps->mapped_right += length;
        if (ps->d.data_blocks == 0)
                return 0; /* unknown (--metadata-snap) */
        return ps->mapped_left > ps->d.data_blocks || ps->mapped_right > ps->d.data_blocks ? -EBADMSG : 0;
}

/* A range of blocks: checked for order, overflow and the pool's size, a changed one recorded in
 * bytes. */
static int add_range(Parser *ps, RangeKind kind, const Element *e)
{
        uint64_t begin, length, bytes_begin, bytes_length;

        if (attr_u64(e, "begin", &begin) < 0 || attr_u64(e, "length", &length) < 0 || length == 0 ||
            begin < ps->next_block || __builtin_add_overflow(begin, length, &ps->next_block) ||
            __builtin_mul_overflow(begin, ps->d.block_bytes, &bytes_begin) ||
            __builtin_mul_overflow(length, ps->d.block_bytes, &bytes_length) ||
            bytes_begin + bytes_length < bytes_begin)
                return -EBADMSG;
        if (kind != KIND_LEFT_ONLY)
                ps->d.blocks = ps->next_block;
        if (check_data_blocks(ps, e, "data_begin", length) < 0 ||
            check_data_blocks(ps, e, "left_data_begin", length) < 0 ||
            check_data_blocks(ps, e, "right_data_begin", length) < 0 || count_mapped(ps, kind, length) < 0)
                return -EBADMSG;
        if (kind == KIND_SAME)
                return 0;
        return bv_range_append(&ps->d.changed, &ps->d.n_changed, &ps->cap, bytes_begin, bytes_length);
}

static int on_superblock(Parser *ps, const Element *e)
{
        uint64_t sectors;

        if (e->closing) {
                if (!ps->in_superblock || ps->in_diff)
                        return -EBADMSG;
                ps->in_superblock = false;
                return 0;
        }
        if (ps->in_superblock || ps->seen_diff || e->self_closing || attr_u64(e, "data_block_size", &sectors) < 0 ||
            sectors == 0 || sectors > UINT64_MAX / 512 || attr_u64(e, "nr_data_blocks", &ps->d.data_blocks) < 0)
                return -EBADMSG;
        ps->d.block_bytes = sectors * 512;
        ps->in_superblock = true;
        return 0;
}

static int on_diff(Parser *ps, const Element *e)
{
        if (e->closing) {
                if (!ps->in_diff || ps->group != KIND_NONE)
                        return -EBADMSG;
                ps->in_diff = false;
                return 0;
        }
        if (!ps->in_superblock || ps->seen_diff || attr_u64(e, "left", &ps->d.left) < 0 ||
            attr_u64(e, "right", &ps->d.right) < 0)
                return -EBADMSG;
        ps->seen_diff = true;
        ps->in_diff = !e->self_closing;
        return 0;
}

static int on_element(Parser *ps, const Element *e)
{
        RangeKind kind = range_kind(e->name);

        if (strcmp(e->name, "superblock") == 0)
                return on_superblock(ps, e);
        if (strcmp(e->name, "diff") == 0)
                return on_diff(ps, e);
        if (!ps->in_diff)
                return -EBADMSG;
        if (strcmp(e->name, "range") == 0)
                return ps->group == KIND_NONE || !e->self_closing ? -EBADMSG : add_range(ps, ps->group, e);
        if (kind == KIND_NONE || (ps->group != KIND_NONE) != e->closing)
                return -EBADMSG;
        if (e->closing) {
                ps->group = KIND_NONE;
                return 0;
        }
        if (e->self_closing)
                return add_range(ps, kind, e);
        ps->group = kind;
        return 0;
}

int bv_thin_delta_parse(const char *text, size_t len, BvThinDelta *ret)
{
        Parser ps = { .p = text, .end = text + len };
        Element e;
        int r;

        if (!text || !ret)
                return -EINVAL;
        while ((r = next_element(&ps, &e)) > 0)
                if ((r = on_element(&ps, &e)) < 0)
                        break;
        if (r == 0 && (ps.in_superblock || !ps.seen_diff || ps.in_diff))
                r = -EBADMSG;
        if (r < 0) {
                free(ps.d.changed);
                return r;
        }
        *ret = ps.d;
        return 0;
}

void bv_thin_delta_done(BvThinDelta *d)
{
        if (!d)
                return;
        free(d->changed);
        *d = (BvThinDelta){};
}
