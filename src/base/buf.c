// SPDX-License-Identifier: Apache-2.0
// Bounded growable buffer: the only way bytes from outside (HTTP bodies,
// files, process output) are collected, so every such input has a cap.
#include "nvl72/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	/* Leaves room for the NUL and keeps len + extra + 1 from wrapping. */
	b->max = max < SIZE_MAX / 2 ? max : SIZE_MAX / 2;
	b->secret = false;
}

void buf_init_secret(struct buf *b, size_t max)
{
	buf_init(b, max);
	b->secret = true;
}

void buf_clear(struct buf *b)
{
	if (b->secret)
		secure_wipe(b->data, b->cap);
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_clear_secure(struct buf *b)
{
	secure_wipe(b->data, b->cap);
	buf_clear(b);
}

void buf_reset(struct buf *b)
{
	if (b->secret && b->data != NULL)
		secure_wipe(b->data, b->len);
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Makes room for extra more bytes plus the NUL. */
static enum nv_err buf_reserve(struct buf *b, size_t extra)
{
	if (extra > b->max - b->len)
		return NV_E_TOO_LARGE;
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return NV_OK;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	if (b->secret && b->data != NULL) {
		// realloc may move the bytes and free the old block unwiped.
		char *p = xmalloc(cap);
		memcpy(p, b->data, b->len + 1);
		secure_wipe(b->data, b->cap);
		free(b->data);
		b->data = p;
	} else {
		b->data = xrealloc(b->data, cap);
	}
	b->cap = cap;
	return NV_OK;
}

enum nv_err buf_append(struct buf *b, const void *data, size_t len)
{
	enum nv_err e = buf_reserve(b, len);
	if (e)
		return e;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return NV_OK;
}

enum nv_err buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

enum nv_err buf_append_byte(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

enum nv_err buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return NV_E_INVAL;
	enum nv_err e = buf_reserve(b, (size_t)n);
	if (e)
		return e;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return NV_OK;
}

enum nv_err buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum nv_err e = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return e;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	if (b->secret)
		secure_wipe(b->data + b->len - n, n);
	b->len -= n;
	b->data[b->len] = '\0';
}

char *buf_take(struct buf *b)
{
	char *p = b->data ? b->data : xstrdup("");
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	return p;
}

const char *buf_str(const struct buf *b)
{
	return b->data ? b->data : "";
}
