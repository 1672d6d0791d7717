/* SPDX-License-Identifier: Apache-2.0 */
/* Monotonic and wall-clock time in milliseconds, and the RFC 3339 form the
 * Kubernetes API uses for timestamps. Deadlines use the monotonic clock;
 * only what is shown or stored uses the wall clock. */
/* Contract: thread-safe (no static buffers); only time_sleep_ms blocks,
 * for the time asked. Out-parameters are set only on NV_OK. */
#ifndef NVL72_TIMEUTIL_H
#define NVL72_TIMEUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "nvl72/err.h"

/* Room for "2026-11-29T15:49:51.123456Z" and a NUL. */
#define TIME_RFC3339_LEN 32

int64_t time_mono_ms(void);
int64_t time_mono_us(void);
int64_t time_wall_ms(void);
/* Sleeps, resuming after signals, until ms have passed. */
void time_sleep_ms(int64_t ms);
/* "2026-11-29T15:49:51Z" (the API's metav1.Time, seconds precision). */
void time_format_rfc3339(int64_t wall_ms, char out[TIME_RFC3339_LEN]);
/* "2026-11-29T15:49:51.123Z" (for logs). */
void time_format_rfc3339_ms(int64_t wall_ms, char out[TIME_RFC3339_LEN]);
/* Accepts Z or ±hh:mm offsets and optional fractional seconds. */
enum nv_err time_parse_rfc3339(const char *s, int64_t *out_wall_ms);

#endif
