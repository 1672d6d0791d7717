/* SPDX-License-Identifier: Apache-2.0 */
/* Checked parsing of numbers, booleans and durations. Every function
 * rejects empty input, trailing garbage and values outside [min, max], and
 * sets *out only on success. */
/* Contract: pure functions, thread-safe, never blocking; they keep no
 * pointer to their arguments. */
#ifndef NVL72_PARSE_H
#define NVL72_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/err.h"

enum nv_err parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
enum nv_err parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
enum nv_err parse_int(const char *s, int min, int max, int *out);
/* Parses base 16 digits, with or without a 0x prefix. */
enum nv_err parse_hex_u64(const char *s, uint64_t *out);
enum nv_err parse_double(const char *s, double min, double max, double *out);
/* true/false, yes/no, on/off, 1/0 (case-insensitive). */
enum nv_err parse_bool(const char *s, bool *out);
/* Durations in Go's style: "90s", "1h30m", "250ms", "7d" (days are ours). */
enum nv_err parse_duration_ms(const char *s, int64_t *out_ms);
/* Same as above but on the first len bytes of s (not NUL-terminated). */
enum nv_err parse_i64_n(const char *s, size_t len, int64_t min, int64_t max, int64_t *out);

/* A listen address: "host:port", ":port" (every address) or "[v6]:port",
 * the host copied without brackets into host (hostsz bytes, "" for every
 * address) and the port 0..65535. "" and "0" mean off: host "" and port
 * -1. NV_E_INVAL when malformed or when the host does not fit. */
enum nv_err parse_hostport(const char *addr, char *host, size_t hostsz, int *port);

/* Copies src into dst of size dstsz, always NUL-terminating; returns
 * NV_E_TOO_LARGE (and a truncated copy) when src does not fit. */
enum nv_err str_copy(char *dst, size_t dstsz, const char *src);
bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);
/* Returns s without leading and trailing ASCII space, in place. */
char *str_trim(char *s);

#endif
