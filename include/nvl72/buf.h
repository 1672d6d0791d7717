/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer with a hard cap. Appending past the cap fails with
 * NV_E_TOO_LARGE and leaves the contents unchanged; the data is always
 * NUL-terminated so text can be read in place. */
/* Contract: one thread per buffer; no call blocks. A buffer is caller
 * storage (buf_init / buf_clear); the data it holds is its own until
 * buf_take hands it over. Appends that fail leave the buffer as it was. */
#ifndef NVL72_BUF_H
#define NVL72_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "nvl72/err.h"

struct buf {
	char *data;  /* NUL-terminated; NULL until the first append */
	size_t len;  /* bytes used, not counting the NUL */
	size_t cap;  /* bytes allocated */
	size_t max;  /* the most len may ever be */
	bool secret; /* buf_init_secret: no copy outlives the buffer */
};

void buf_init(struct buf *b, size_t max);
/* As buf_init, for a buffer that will hold a secret (a token, a key, a
 * Secret's data): growing moves the data to a new allocation and wipes
 * the old one, buf_reset and buf_consume wipe the bytes they drop, and
 * buf_clear wipes before freeing. */
void buf_init_secret(struct buf *b, size_t max);
/* Frees the storage (wiped first for a secret buffer); the buffer may be
 * reused after buf_init. */
void buf_clear(struct buf *b);
/* Empties without freeing. */
void buf_reset(struct buf *b);
enum nv_err buf_append(struct buf *b, const void *data, size_t len);
enum nv_err buf_append_str(struct buf *b, const char *s);
enum nv_err buf_append_byte(struct buf *b, char c);
enum nv_err buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum nv_err buf_vprintf(struct buf *b, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
/* Removes the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);
/* Hands the data to the caller (never NULL; free() it, after a wipe when
 * it is a secret) and leaves the buffer empty. */
char *buf_take(struct buf *b);
/* Wipes the contents before freeing: for buffers that held secrets. */
void buf_clear_secure(struct buf *b);
/* A read-only view that is never NULL: borrowed from b, valid until the
 * next call that changes b. */
const char *buf_str(const struct buf *b);

#endif
