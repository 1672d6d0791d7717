// SPDX-License-Identifier: Apache-2.0
// Base64 in the standard alphabet, padded, through OpenSSL's block coder:
// the admission webhook's JSON patches and the Secrets the operator reads.
// Decoding is bounded and refuses embedded NULs, so its result is a C string.
#include "nvl72/b64.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "nvl72/alloc.h"

enum nv_err b64_encode(const void *data, size_t len, struct buf *out)
{
	if (len > ((size_t)INT32_MAX / 4) * 3 - 3)
		return NV_E_TOO_LARGE;
	size_t n = 4 * ((len + 2) / 3);
	char *tmp = xmalloc(n + 1);
	int w = EVP_EncodeBlock((unsigned char *)tmp, data, (int)len);
	enum nv_err rc = w < 0 ? NV_E_INTERNAL : buf_append(out, tmp, (size_t)w);
	secure_wipe(tmp, n + 1);
	free(tmp);
	return rc;
}

enum nv_err b64_decode(const char *s, size_t max, char **out, size_t *out_len)
{
	size_t len = strlen(s);
	if (len > max / 3 * 4 + 4)
		return NV_E_TOO_LARGE;
	if (len % 4 != 0)
		return NV_E_PARSE;
	unsigned char *tmp = xmalloc(len / 4 * 3 + 1);
	int n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
	if (n < 0) {
		free(tmp);
		return NV_E_PARSE;
	}
	// EVP_DecodeBlock counts the bytes that padding stands for.
	size_t pad =
	        (size_t)(len >= 1 && s[len - 1] == '=') + (size_t)(len >= 2 && s[len - 2] == '=');
	size_t got = (size_t)n - pad;
	tmp[got] = '\0';
	if (got > max || memchr(tmp, '\0', got) != NULL) {
		secure_wipe(tmp, got);
		free(tmp);
		return got > max ? NV_E_TOO_LARGE : NV_E_PARSE;
	}
	*out = (char *)tmp;
	*out_len = got;
	return NV_OK;
}
