/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Prometheus textfile (node-exporter's textfile collector): after every run the whole file is
 * written again from the state files (state.h), tmpfile + rename, so the collector never reads
 * half of one. Per job and target: blkvault_last_run_timestamp_seconds,
 * blkvault_last_success_timestamp_seconds, blkvault_last_run_status (0 ok, 1 failed),
 * blkvault_last_run_duration_seconds, blkvault_last_run_new_bytes,
 * blkvault_last_run_stored_bytes, blkvault_repository_size_bytes; per target the same run
 * families prefixed blkvault_target_; per job blkvault_age_alarm and blkvault_max_age_seconds;
 * and blkvault_configuration_mistakes.
 */

#include <stdint.h>
#include <stdio.h>

#include "conf.h"

/* The textfile of c ([global] metrics, else BV_CONF_DEFAULT_METRICS), NULL for metrics = no. */
const char *bv_metrics_path(const BvConfig *c);
/* Writes the metrics of c (runs recorded in state_dir; now: unix seconds, for the age alarm). */
int bv_metrics_render(FILE *f, const BvConfig *c, const char *state_dir, uint64_t now);
/* Renders into path, replacing it atomically. -ENOENT when its directory does not exist. */
int bv_metrics_write(const char *path, const BvConfig *c, const char *state_dir, uint64_t now);
