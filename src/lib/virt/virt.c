/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The libvirt connection and what its errors mean here. libvirt reports an error twice: to an
 * error handler (by default one that writes it to stderr) and as the thread's last error. The
 * handler is replaced once, process-wide, by one that does nothing, and each failed call's last
 * error is turned into an errno and kept in words on the connection for the caller to print.
 */
#include <errno.h>
#include <signal.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "virt-internal.h"

static void silent_handler(void *userdata, virErrorPtr error)
{
        (void)userdata;
        (void)error;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void virt_init_once(void)
{
        struct sigaction sa;

        init_result = virInitialize() < 0 ? -EIO : 0;
        virSetErrorFunc(NULL, silent_handler);
        /* libvirt's client writes to its socket without MSG_NOSIGNAL: a libvirtd that restarts
         * under a call would kill the process with SIGPIPE (blkvault died so mid-backup, the job
         * and a frozen guest left behind); ignored, the call fails and the caller cleans up */
        if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
                signal(SIGPIPE, SIG_IGN);
}

/* 0, -ELIBACC when libvirt cannot be loaded (bv_dl_error() says why), or -EIO. */
int bv_virt_init(void)
{
        int r = virt_dl_open();

        if (r < 0)
                return r;
        pthread_once(&init_once, virt_init_once);
        return init_result;
}

/* The errno for libvirt's error number: one meaning each (the rest is -EIO). */
static int errno_of(int code)
{
        switch (code) {
        case VIR_ERR_NO_MEMORY:
                return -ENOMEM;
        case VIR_ERR_RPC:
        case VIR_ERR_NO_CLIENT:
                return -ECONNREFUSED;
        case VIR_ERR_AUTH_FAILED:
        case VIR_ERR_AUTH_CANCELLED:
        case VIR_ERR_AUTH_UNAVAILABLE:
        case VIR_ERR_ACCESS_DENIED:
        case VIR_ERR_OPERATION_DENIED:
                return -EACCES;
        case VIR_ERR_NO_DOMAIN:
        case VIR_ERR_NO_DOMAIN_CHECKPOINT:
        case VIR_ERR_NO_DOMAIN_BACKUP:
        case VIR_ERR_NO_STORAGE_VOL:
                return -ENOENT;
        case VIR_ERR_NO_CONNECT: /* no driver for the URI */
        case VIR_ERR_INVALID_ARG:
        case VIR_ERR_XML_ERROR:
        case VIR_ERR_XML_DETAIL:
        case VIR_ERR_INVALID_DOMAIN:
        case VIR_ERR_INVALID_CONN:
                return -EINVAL;
        case VIR_ERR_OPERATION_INVALID: /* e.g. the domain is not running, or another job runs */
                return -EBUSY;
        case VIR_ERR_NO_SUPPORT:
        case VIR_ERR_OPERATION_UNSUPPORTED:
        case VIR_ERR_CONFIG_UNSUPPORTED:
                return -EOPNOTSUPP;
        case VIR_ERR_OPERATION_TIMEOUT:
        case VIR_ERR_AGENT_UNRESPONSIVE:
                return -ETIMEDOUT;
        case VIR_ERR_CHECKPOINT_INCONSISTENT:
                return -ESTALE;
        case VIR_ERR_OPERATION_ABORTED:
                return -ECANCELED;
        default:
                return -EIO;
        }
}

static int take_error(char *buf, size_t size, int *ret_code)
{
        virErrorPtr e = virGetLastError();
        int code = e ? e->code : 0;

        if (buf && size)
                snprintf(buf, size, "%s", e && e->message ? e->message : "");
        if (ret_code)
                *ret_code = code;
        /* a system error carries the errno it failed with */
        int r = !e ? -EIO : code == VIR_ERR_SYSTEM_ERROR && e->int1 > 0 ? -e->int1 : errno_of(code);
        virResetLastError();
        return r;
}

int bv_virt_take_error(BvVirt *v)
{
        return v ? take_error(v->error, sizeof(v->error), &v->error_code) : take_error(NULL, 0, NULL);
}

const char *bv_virt_uri_resolve(const char *uri)
{
        const char *env = getenv("LIBVIRT_DEFAULT_URI");

        return uri ? uri : env && env[0] ? env : BV_VIRT_URI_DEFAULT;
}

int bv_virt_connect(const char *uri, BvVirt **ret, char *detail, size_t size)
{
        int r;

        if (detail && size)
                detail[0] = 0;
        if (!ret)
                return -EINVAL;
        r = bv_virt_init(); /* -ELIBACC: bv_dl_error() says why */
        if (r < 0)
                return r;
        uri = bv_virt_uri_resolve(uri);
        BvVirt *v = calloc(1, sizeof(*v));
        if (!v || !(v->uri = strdup(uri))) {
                free(v);
                return -ENOMEM;
        }
        v->conn = virConnectOpen(uri);
        if (!v->conn) {
                r = take_error(detail, size, NULL);
                if (r == -ENOENT) /* no socket: no daemon listens there */
                        r = -ECONNREFUSED;
                bv_virt_close(v);
                return r;
        }
        *ret = v;
        return 0;
}

void bv_virt_close(BvVirt *v)
{
        if (!v)
                return;
        if (v->conn)
                virConnectClose(v->conn);
        free(v->uri);
        free(v);
}

const char *bv_virt_uri(const BvVirt *v)
{
        return v->uri;
}

const char *bv_virt_error(const BvVirt *v)
{
        return v->error;
}

int bv_virt_error_code(const BvVirt *v)
{
        return v->error_code;
}

/* Words of our own for a failure libvirt did not describe. */
void bv_virt_set_error(BvVirt *v, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(v->error, sizeof(v->error), fmt, ap);
        va_end(ap);
        v->error_code = code;
}
