/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A libvirt domain and its disks. The disks are read from the domain's XML (the live one when it
 * runs: its targets and sources are what QEMU has open), their virtual sizes from
 * virDomainGetBlockInfo.
 */
#include <errno.h>
#include <libvirt/libvirt.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "virt-internal.h"

void bv_virt_domain_close(BvVirtDomain *d)
{
        if (!d)
                return;
        if (d->dom)
                virDomainFree(d->dom);
        free(d->name);
        free(d);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(BvVirtDomain, bv_virt_domain_close);

int bv_virt_domain_open(BvVirt *v, const char *name, BvVirtDomain **ret)
{
        if (!v || !name || !ret)
                return -EINVAL;
        _cleanup_(bv_virt_domain_closep) BvVirtDomain *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->v = v;
        d->dom = virDomainLookupByName(v->conn, name);
        if (!d->dom && strlen(name) == VIR_UUID_STRING_BUFLEN - 1) { /* a UUID? */
                virResetLastError();
                d->dom = virDomainLookupByUUIDString(v->conn, name);
        }
        if (!d->dom) {
                int r = bv_virt_take_error(v);
                if (r == -ENOENT)
                        bv_virt_set_error(v, VIR_ERR_NO_DOMAIN, "no domain is named '%s'", name);
                return r;
        }
        const char *real = virDomainGetName(d->dom);
        if (!real || virDomainGetUUIDString(d->dom, d->uuid) < 0)
                return bv_virt_take_error(v);
        if (!(d->name = strdup(real)))
                return -ENOMEM;
        *ret = TAKE_PTR(d);
        return 0;
}

int bv_virt_domain_reconnect(BvVirtDomain *d)
{
        BvVirt *v = d ? d->v : NULL;

        if (!v)
                return -EINVAL;
        unsigned long version;
        /* a call finds out: without an event loop the client sees the socket closed only then */
        if (virConnectGetLibVersion(v->conn, &version) == 0 && virConnectIsAlive(v->conn) == 1)
                return 0;
        virResetLastError();
        virConnectPtr conn = virConnectOpen(v->uri);
        if (!conn)
                return bv_virt_take_error(v);
        virDomainPtr dom = virDomainLookupByUUIDString(conn, d->uuid);
        if (!dom) {
                int r = bv_virt_take_error(v);
                virConnectClose(conn);
                return r;
        }
        virDomainFree(d->dom);
        virConnectClose(v->conn);
        d->dom = dom;
        v->conn = conn;
        v->reconnects++;
        return 1;
}

unsigned bv_virt_reconnects(const BvVirt *v)
{
        return v ? v->reconnects : 0;
}

const char *bv_virt_domain_name(const BvVirtDomain *d)
{
        return d->name;
}

const char *bv_virt_domain_uuid(const BvVirtDomain *d)
{
        return d->uuid;
}

BvVirt *bv_virt_domain_conn(const BvVirtDomain *d)
{
        return d->v;
}

void *bv_virt_domain_ptr(const BvVirtDomain *d)
{
        return d->dom;
}

int bv_virt_domain_running(BvVirtDomain *d)
{
        int r = virDomainIsActive(d->dom);

        return r < 0 ? bv_virt_take_error(d->v) : r > 0;
}

int bv_virt_domain_paused(BvVirtDomain *d)
{
        int state = 0, reason = 0;

        if (virDomainGetState(d->dom, &state, &reason, 0) < 0)
                return bv_virt_take_error(d->v);
        return state == VIR_DOMAIN_PAUSED;
}

void bv_virt_disks_done(BvVirtDisks *disks)
{
        for (size_t i = 0; disks->v && i < disks->n; i++) {
                BvVirtDisk *k = &disks->v[i];
                free(k->target);
                free(k->device);
                free(k->type);
                free(k->source);
                free(k->format);
        }
        free(disks->v);
        *disks = (BvVirtDisks){};
}

const BvVirtDisk *bv_virt_disks_find(const BvVirtDisks *disks, const char *target)
{
        for (size_t i = 0; i < disks->n; i++)
                if (strcmp(disks->v[i].target, target) == 0)
                        return &disks->v[i];
        return NULL;
}

static xmlNode *child(xmlNode *n, const char *name)
{
        for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
                if (c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, name) == 0)
                        return c;
        return NULL;
}

/* A copy of attribute name of n (NULL when n or it is absent); -ENOMEM into *r. */
static char *attr(xmlNode *n, const char *name, int *r)
{
        xmlChar *a = n ? xmlGetProp(n, (const xmlChar *)name) : NULL;
        char *s = a ? strdup((const char *)a) : NULL;

        if (a && !s)
                *r = -ENOMEM;
        xmlFree(a);
        return s;
}

/* The source of a disk: file=, dev=, or a volume's; NULL for a network disk or an empty drive. */
static char *disk_source(xmlNode *disk, int *r)
{
        xmlNode *src = child(disk, "source");
        static const char *const names[] = { "file", "dev", "dir" };

        for (size_t i = 0; src && i < ELEMENTSOF(names); i++) {
                char *s = attr(src, names[i], r);
                if (s || *r < 0)
                        return s;
        }
        return NULL;
}

static int disk_parse(xmlNode *n, BvVirtDisk *k)
{
        int r = 0;

        k->target = attr(child(n, "target"), "dev", &r);
        k->device = attr(n, "device", &r);
        k->type = attr(n, "type", &r);
        k->source = disk_source(n, &r);
        k->format = attr(child(n, "driver"), "type", &r);
        k->readonly = child(n, "readonly") != NULL;
        k->shareable = child(n, "shareable") != NULL;
        if (r >= 0 && !k->device && !(k->device = strdup("disk"))) /* the schema's default */
                r = -ENOMEM;
        if (r >= 0 && !k->target)
                r = -EBADMSG;
        return r;
}

/* Parses the domain XML's <devices><disk> elements into ret. */
static int disks_parse(const char *xml, BvVirtDisks *ret)
{
        size_t cap = 0;
        int r = 0;
        xmlDoc *doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                                        XML_PARSE_NOWARNING);
        xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;

        if (!root || strcmp((const char *)root->name, "domain") != 0)
                r = -EBADMSG;
        for (xmlNode *c = r < 0 ? NULL : child(root, "devices") ? child(root, "devices")->children : NULL; c && r >= 0;
             c = c->next) {
                if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "disk") != 0)
                        continue;
                r = BV_ARRAY_RESERVE(ret->v, cap, ret->n + 1, 4);
                if (r < 0)
                        break;
                ret->v[ret->n] = (BvVirtDisk){};
                r = disk_parse(c, &ret->v[ret->n++]);
        }
        xmlFreeDoc(doc);
        return r;
}

int bv_virt_domain_disks(BvVirtDomain *d, BvVirtDisks *ret)
{
        BvVirtDisks disks = {};
        int r = bv_virt_domain_running(d);

        if (r < 0)
                return r;
        disks.running = r > 0;
        _cleanup_free_ char *xml = virDomainGetXMLDesc(d->dom, 0);
        if (!xml)
                return bv_virt_take_error(d->v);
        r = disks_parse(xml, &disks);
        for (size_t i = 0; r >= 0 && i < disks.n; i++) {
                virDomainBlockInfo info;
                if (!disks.v[i].source)
                        continue;
                if (virDomainGetBlockInfo(d->dom, disks.v[i].target, &info, 0) < 0)
                        virResetLastError(); /* unknown: an image libvirt cannot open now */
                else
                        disks.v[i].size = info.capacity;
        }
        if (r < 0) {
                bv_virt_disks_done(&disks);
                return r;
        }
        *ret = disks;
        return 0;
}
