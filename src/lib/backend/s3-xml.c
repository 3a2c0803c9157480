/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The XML of S3's answers, read with libxml2: errors, listings, multipart upload ids. Elements
 * are matched by local name: stores differ in namespaces. */
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "s3-internal.h"

static xmlDocPtr parse(const char *body, size_t len)
{
        if (!body || len == 0 || len > INT32_MAX)
                return NULL;
        /* no network, no entity expansion, no DTD: the answer is data, nothing more */
        return xmlReadMemory(body, (int)len, "s3.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

static bool named(const xmlNode *n, const char *name)
{
        return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static const xmlNode *child(const xmlNode *parent, const char *name)
{
        for (const xmlNode *n = parent->children; n; n = n->next)
                if (named(n, name))
                        return n;
        return NULL;
}

/* The text of parent's child name into out (truncated), "" when absent. */
static void child_text(const xmlNode *parent, const char *name, char *out, size_t outlen)
{
        const xmlNode *n = child(parent, name);
        xmlChar *t = n ? xmlNodeGetContent(n) : NULL;

        snprintf(out, outlen, "%s", t ? (const char *)t : "");
        xmlFree(t);
}

static char *child_strdup(const xmlNode *parent, const char *name)
{
        const xmlNode *n = child(parent, name);
        xmlChar *t = n ? xmlNodeGetContent(n) : NULL;
        char *s = t ? strdup((const char *)t) : NULL;

        xmlFree(t);
        return s;
}

void s3_xml_error(const char *body, size_t len, char *code, size_t code_len, char *msg, size_t msg_len)
{
        xmlDocPtr doc = parse(body, len);
        const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;

        code[0] = msg[0] = '\0';
        if (root && named(root, "Error")) {
                child_text(root, "Code", code, code_len);
                child_text(root, "Message", msg, msg_len);
        }
        xmlFreeDoc(doc);
}

static const xmlNode *find(const xmlNode *n, const char *name)
{
        for (; n; n = n->next) {
                const xmlNode *f;
                if (named(n, name))
                        return n;
                if ((f = find(n->children, name)))
                        return f;
        }
        return NULL;
}

int s3_xml_text(const char *body, size_t len, const char *name, char **ret, bool *ret_is_error)
{
        xmlDocPtr doc = parse(body, len);
        const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL, *n;
        xmlChar *t;
        int r = -EBADMSG;

        if (!root)
                goto out;
        if (ret_is_error)
                *ret_is_error = named(root, "Error");
        n = find(root, name);
        if (!n)
                goto out;
        t = xmlNodeGetContent(n);
        *ret = t ? strdup((const char *)t) : NULL;
        xmlFree(t);
        r = *ret ? 0 : -ENOMEM;
out:
        xmlFreeDoc(doc);
        return r;
}

void s3_list_page_done(s3_list_page *p)
{
        free(p->next_token);
        free(p->next_key);
        free(p->next_version);
        *p = (s3_list_page){};
}

/* One <Contents>, <Version> or <DeleteMarker> to cb; -EBADMSG for an entry without a key or one
 * outside the prefix asked for (under), said in why: a store answering so is broken, and a key
 * shorter than what callers strip would be read past its end. */
static int list_entry(const xmlNode *n, bool delete_marker, const char *under, size_t strip_len,
                      bv_s3_list_cb cb, void *userdata, char *why, size_t whylen)
{
        _cleanup_free_ char *key = child_strdup(n, "Key");
        _cleanup_free_ char *version = child_strdup(n, "VersionId");
        bv_s3_object o = {};
        char v[64];

        if (!key) {
                snprintf(why, whylen, "a <%s> without a <Key>", (const char *)n->name);
                return -EBADMSG;
        }
        if (strlen(key) < strip_len || strncmp(key, under, strlen(under)) != 0) {
                snprintf(why, whylen, "key '%.100s' is outside the prefix '%.100s' asked for", key, under);
                return -EBADMSG;
        }
        o.key = key + strip_len;
        o.version_id = version;
        o.delete_marker = delete_marker;
        child_text(n, "Size", v, sizeof(v));
        o.size = strtoull(v, NULL, 10);
        child_text(n, "IsLatest", v, sizeof(v));
        o.is_latest = strcmp(v, "true") == 0;
        child_text(n, "LastModified", v, sizeof(v));
        o.mtime = v[0] ? s3_parse_iso8601(v) : 0;
        child_text(n, "ETag", o.etag, sizeof(o.etag));
        size_t el = strlen(o.etag);
        if (el >= 2 && o.etag[0] == '"' && o.etag[el - 1] == '"') {
                memmove(o.etag, o.etag + 1, el - 2);
                o.etag[el - 2] = '\0';
        }
        return cb(&o, userdata);
}

/* What a page is when it is not the listing asked for, in why. */
static void not_a_listing(const char *body, size_t len, const xmlNode *root, const char *root_name, char *why,
                          size_t whylen)
{
        if (!body || len == 0)
                snprintf(why, whylen, "an empty answer, not a %s", root_name);
        else if (!root)
                snprintf(why, whylen, "%zu bytes that are not XML (a cut answer, or a proxy's page?), not a %s",
                         len, root_name);
        else
                snprintf(why, whylen, "<%.60s>, not a %s", (const char *)root->name, root_name);
}

int s3_xml_list_page(const char *body, size_t len, bool versions, const char *under, size_t strip_len,
                     bv_s3_list_cb cb, void *userdata, s3_list_page *ret, char *why, size_t whylen)
{
        xmlDocPtr doc = parse(body, len);
        const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
        const char *root_name = versions ? "ListVersionsResult" : "ListBucketResult";
        s3_list_page p = {};
        char v[16];
        int r = 0;

        why[0] = '\0';
        if (!root || !named(root, root_name)) {
                not_a_listing(body, len, root, root_name, why, whylen);
                xmlFreeDoc(doc);
                return -EBADMSG;
        }
        for (const xmlNode *n = root->children; n && r >= 0; n = n->next) {
                if (named(n, versions ? "Version" : "Contents"))
                        r = list_entry(n, false, under, strip_len, cb, userdata, why, whylen);
                else if (versions && named(n, "DeleteMarker"))
                        r = list_entry(n, true, under, strip_len, cb, userdata, why, whylen);
        }
        child_text(root, "IsTruncated", v, sizeof(v));
        p.truncated = strcmp(v, "true") == 0;
        if (r >= 0 && p.truncated) {
                if (versions) {
                        p.next_key = child_strdup(root, "NextKeyMarker");
                        p.next_version = child_strdup(root, "NextVersionIdMarker");
                        if (!p.next_key) {
                                snprintf(why, whylen, "truncated without a <NextKeyMarker>");
                                r = -EBADMSG;
                        }
                } else if (!(p.next_token = child_strdup(root, "NextContinuationToken"))) {
                        snprintf(why, whylen, "truncated without a <NextContinuationToken>");
                        r = -EBADMSG;
                }
        }
        xmlFreeDoc(doc);
        if (r < 0) {
                s3_list_page_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}
