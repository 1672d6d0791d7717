/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648 standard alphabet, padded) for Kubernetes data: Secret
 * values, JSON patches in AdmissionReview responses. Thread-safe; no call
 * blocks. */
#ifndef NVL72_B64_H
#define NVL72_B64_H

#include <stddef.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

/* Appends the encoding of len bytes of data to out. NV_E_TOO_LARGE when the
 * encoding would not fit an int (OpenSSL's limit) or out's cap. The scratch
 * copy is wiped, so data may be a secret. */
enum nv_err b64_encode(const void *data, size_t len, struct buf *out);

/* Decodes the NUL-terminated s into a new NUL-terminated buffer *out of
 * *out_len bytes, which the caller owns (free it; wipe it first when it
 * holds a secret). NV_E_TOO_LARGE past max decoded bytes, NV_E_PARSE on a
 * length that is not a multiple of 4, a character outside the alphabet, or
 * a decoded NUL. Out-parameters are set only on NV_OK. */
enum nv_err b64_decode(const char *s, size_t max, char **out, size_t *out_len);

#endif
