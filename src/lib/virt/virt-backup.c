/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pull-mode backup jobs and checkpoints of a running domain. The job's XML names every disk of
 * the job; the checkpoint is created by the same virDomainBackupBegin call, so the bitmap it
 * starts and the frozen view the job exports are the same instant.
 */
#include <errno.h>
#include <libvirt/libvirt.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <stdlib.h>
#include <string.h>

#include "virt-internal.h"

/* Adds <NAME attr=value ...> under parent: the attributes in pairs, a NULL value skipped. */
static xmlNode *add(xmlNode *parent, const char *name, ...)
{
        xmlNode *n = xmlNewChild(parent, NULL, (const xmlChar *)name, NULL);
        va_list ap;

        va_start(ap, name);
        for (const char *k; n && (k = va_arg(ap, const char *));) {
                const char *v = va_arg(ap, const char *);
                if (v && !xmlNewProp(n, (const xmlChar *)k, (const xmlChar *)v))
                        n = NULL;
        }
        va_end(ap);
        return n;
}

/* A new document whose root is an element name (in *ret_root), or NULL. */
static xmlDoc *doc_new(const char *name, xmlNode **ret_root)
{
        xmlDoc *doc = xmlNewDoc((const xmlChar *)"1.0");
        xmlNode *root = doc ? xmlNewNode(NULL, (const xmlChar *)name) : NULL;

        if (!root) {
                xmlFreeDoc(doc);
                return NULL;
        }
        xmlDocSetRootElement(doc, root);
        *ret_root = root;
        return doc;
}

/* The document as a string (xmlFree it) when ok, or NULL; the document is freed either way. */
static char *doc_finish(xmlDoc *doc, bool ok)
{
        xmlChar *s = NULL;
        int len = 0;

        if (doc && ok)
                xmlDocDumpMemory(doc, &s, &len);
        xmlFreeDoc(doc);
        return (char *)s;
}

/* <disk> of a backup job: backed up with a scratch file (type: the scratch file's), full or
 * incremental from a checkpoint, or left out. */
static bool backup_disk_add(xmlNode *list, const BvVirtBackupDisk *k)
{
        if (!k->backup)
                return add(list, "disk", "name", k->target, "backup", "no", NULL) != NULL;
        if (!k->scratch)
                return false;
        xmlNode *d = add(list, "disk", "name", k->target, "backup", "yes", "type", "file", "backupmode",
                         k->incremental ? "incremental" : "full", "incremental", k->incremental, NULL);
        return d && add(d, "scratch", "file", k->scratch, NULL);
}

static char *backup_xml(const char *socket, const BvVirtBackupDisk *disks, size_t n)
{
        xmlNode *root, *list = NULL;
        xmlDoc *doc = doc_new("domainbackup", &root);
        bool ok = doc && xmlNewProp(root, (const xmlChar *)"mode", (const xmlChar *)"pull") &&
                  add(root, "server", "transport", "unix", "socket", socket, NULL) && (list = add(root, "disks", NULL));

        for (size_t i = 0; ok && i < n; i++)
                ok = backup_disk_add(list, &disks[i]);
        return doc_finish(doc, ok);
}

static char *checkpoint_xml(const char *name, const BvVirtBackupDisk *disks, size_t n)
{
        xmlNode *root, *list = NULL;
        xmlDoc *doc = doc_new("domaincheckpoint", &root);
        bool ok = doc && xmlNewChild(root, NULL, (const xmlChar *)"name", (const xmlChar *)name) &&
                  (list = add(root, "disks", NULL));

        for (size_t i = 0; ok && i < n; i++)
                ok = add(list, "disk", "name", disks[i].target, "checkpoint",
                         disks[i].backup && disks[i].checkpoint ? "bitmap" : "no", NULL) != NULL;
        return doc_finish(doc, ok);
}

int bv_virt_backup_begin(BvVirtDomain *d, const char *socket, const BvVirtBackupDisk *disks, size_t n,
                         const char *checkpoint)
{
        if (!d || !socket || !disks || n == 0)
                return -EINVAL;
        char *bx = backup_xml(socket, disks, n);
        char *cx = bx && checkpoint ? checkpoint_xml(checkpoint, disks, n) : NULL;
        int r = 0;

        if (!bx || (checkpoint && !cx))
                r = -EINVAL; /* a disk to back up without a scratch file, or no memory */
        else if (virDomainBackupBegin(d->dom, bx, cx, 0) < 0)
                r = bv_virt_take_error(d->v);
        xmlFree(bx);
        xmlFree(cx);
        return r;
}

int bv_virt_backup_end(BvVirtDomain *d)
{
        virDomainJobInfo info;

        if (virDomainGetJobInfo(d->dom, &info) < 0)
                return bv_virt_take_error(d->v);
        if (info.type == VIR_DOMAIN_JOB_NONE)
                return 0;
        if (virDomainAbortJob(d->dom) < 0) {
                int r = bv_virt_take_error(d->v);
                /* a job that ended meanwhile, or a domain that stopped: nothing runs */
                return bv_virt_error_code(d->v) == VIR_ERR_OPERATION_INVALID ? 0 : r;
        }
        return 0;
}

int bv_virt_checkpoint_covers(BvVirtDomain *d, const char *name, const char *target)
{
        virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(d->dom, name, 0);
        int r;

        if (!cp)
                return bv_virt_take_error(d->v);
        _cleanup_free_ char *xml = virDomainCheckpointGetXMLDesc(cp, 0);
        virDomainCheckpointFree(cp);
        if (!xml)
                return bv_virt_take_error(d->v);
        xmlDoc *doc = xmlReadMemory(xml, (int)strlen(xml), "checkpoint.xml", NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
        r = root ? 0 : -EBADMSG;
        for (xmlNode *c = root ? root->children : NULL; c; c = c->next) {
                if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "disks") != 0)
                        continue;
                for (xmlNode *k = c->children; k; k = k->next) {
                        if (k->type != XML_ELEMENT_NODE || strcmp((const char *)k->name, "disk") != 0)
                                continue;
                        xmlChar *dn = xmlGetProp(k, (const xmlChar *)"name");
                        xmlChar *how = xmlGetProp(k, (const xmlChar *)"checkpoint");
                        if (dn && how && strcmp((const char *)dn, target) == 0 &&
                            strcmp((const char *)how, "bitmap") == 0)
                                r = 1;
                        xmlFree(dn);
                        xmlFree(how);
                }
        }
        xmlFreeDoc(doc);
        return r;
}

int bv_virt_checkpoint_delete(BvVirtDomain *d, const char *name)
{
        virDomainCheckpointPtr cp = virDomainCheckpointLookupByName(d->dom, name, 0);
        int r = 0;

        if (!cp)
                return bv_virt_take_error(d->v);
        if (virDomainCheckpointDelete(cp, 0) < 0)
                r = bv_virt_take_error(d->v);
        virDomainCheckpointFree(cp);
        return r;
}
