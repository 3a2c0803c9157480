/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libvirt and libvirt-qemu, loaded on first use (util/dlib.h): only libvirt: sources, restore
 * --libvirt and serve --libvirt-xml need them, and libvirt brings ~40 libraries of its own
 * (GLib, GnuTLS, libxml2, ...). Every file of this room includes libvirt through this header:
 * it declares the types as libvirt's headers do and turns each call virX(...) into one through
 * the pointer sym_virX that virt_dl_open() fills. A function missing from the lists below fails
 * to link (libvirt is not linked): add it to both lists.
 */

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "dlib.h"

/* the functions of libvirt.so.0 this room calls */
#define VIRT_DL_SYMBOLS(X) \
        X(virConnectClose) \
        X(virConnectGetLibVersion) \
        X(virConnectIsAlive) \
        X(virConnectOpen) \
        X(virDomainAbortJob) \
        X(virDomainBackupBegin) \
        X(virDomainBackupGetXMLDesc) \
        X(virDomainCheckpointDelete) \
        X(virDomainCheckpointFree) \
        X(virDomainCheckpointGetName) \
        X(virDomainCheckpointGetXMLDesc) \
        X(virDomainCheckpointLookupByName) \
        X(virDomainFSFreeze) \
        X(virDomainFSThaw) \
        X(virDomainFree) \
        X(virDomainGetBlockInfo) \
        X(virDomainGetJobInfo) \
        X(virDomainGetJobStats) \
        X(virDomainGetName) \
        X(virDomainGetState) \
        X(virDomainGetUUIDString) \
        X(virDomainGetXMLDesc) \
        X(virDomainIsActive) \
        X(virDomainListAllCheckpoints) \
        X(virDomainLookupByName) \
        X(virDomainLookupByUUIDString) \
        X(virGetLastError) \
        X(virInitialize) \
        X(virResetLastError) \
        X(virSetErrorFunc) \
        X(virTypedParamsFree) \
        X(virTypedParamsGetInt)
/* ... and of libvirt-qemu.so.0 */
#define VIRT_QEMU_DL_SYMBOLS(X) X(virDomainQemuAgentCommand)

VIRT_DL_SYMBOLS(BV_DL_DECLARE)
VIRT_QEMU_DL_SYMBOLS(BV_DL_DECLARE)

/* Loads libvirt.so.0 and libvirt-qemu.so.0 once: 0, or -ELIBACC with bv_dl_error() saying what
 * is missing. bv_virt_init() calls it; every use of libvirt starts there. */
int virt_dl_open(void);

#ifndef VIRT_DL_IMPL
#define virConnectClose sym_virConnectClose
#define virConnectGetLibVersion sym_virConnectGetLibVersion
#define virConnectIsAlive sym_virConnectIsAlive
#define virConnectOpen sym_virConnectOpen
#define virDomainAbortJob sym_virDomainAbortJob
#define virDomainBackupBegin sym_virDomainBackupBegin
#define virDomainBackupGetXMLDesc sym_virDomainBackupGetXMLDesc
#define virDomainCheckpointDelete sym_virDomainCheckpointDelete
#define virDomainCheckpointFree sym_virDomainCheckpointFree
#define virDomainCheckpointGetName sym_virDomainCheckpointGetName
#define virDomainCheckpointGetXMLDesc sym_virDomainCheckpointGetXMLDesc
#define virDomainCheckpointLookupByName sym_virDomainCheckpointLookupByName
#define virDomainFSFreeze sym_virDomainFSFreeze
#define virDomainFSThaw sym_virDomainFSThaw
#define virDomainFree sym_virDomainFree
#define virDomainGetBlockInfo sym_virDomainGetBlockInfo
#define virDomainGetJobInfo sym_virDomainGetJobInfo
#define virDomainGetJobStats sym_virDomainGetJobStats
#define virDomainGetName sym_virDomainGetName
#define virDomainGetState sym_virDomainGetState
#define virDomainGetUUIDString sym_virDomainGetUUIDString
#define virDomainGetXMLDesc sym_virDomainGetXMLDesc
#define virDomainIsActive sym_virDomainIsActive
#define virDomainListAllCheckpoints sym_virDomainListAllCheckpoints
#define virDomainLookupByName sym_virDomainLookupByName
#define virDomainLookupByUUIDString sym_virDomainLookupByUUIDString
#define virGetLastError sym_virGetLastError
#define virInitialize sym_virInitialize
#define virResetLastError sym_virResetLastError
#define virSetErrorFunc sym_virSetErrorFunc
#define virTypedParamsFree sym_virTypedParamsFree
#define virTypedParamsGetInt sym_virTypedParamsGetInt
#define virDomainQemuAgentCommand sym_virDomainQemuAgentCommand
#endif
