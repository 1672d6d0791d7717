// SPDX-License-Identifier: Apache-2.0
// The protocol buffers wire format, read and written by hand: varints,
// fixed32/64 and length-delimited fields. The reader bounds every length by
// the bytes around it and names the message and field in its errors.
#include "nvl72/pb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"

void pb_reader_init(struct pb_reader *r, const void *data, size_t len, const char *msg,
                    struct pb_err *e)
{
	r->p = data;
	r->len = data ? len : 0;
	r->off = 0;
	r->base = 0;
	r->msg = msg ? msg : "message";
	r->e = e;
	if (e)
		e->msg[0] = '\0';
}

static enum nv_err pb_fail_at(struct pb_reader *r, size_t off, enum nv_err rc, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static enum nv_err pb_fail_at(struct pb_reader *r, size_t off, enum nv_err rc, const char *fmt, ...)
{
	if (!r->e)
		return rc;
	va_list ap;
	int n = snprintf(r->e->msg, sizeof(r->e->msg), "%s at byte %zu: ", r->msg, off);
	if (n < 0 || (size_t)n >= sizeof(r->e->msg))
		return rc;
	va_start(ap, fmt);
	(void)vsnprintf(r->e->msg + n, sizeof(r->e->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

enum nv_err pb_reader_fail(struct pb_reader *r, const struct pb_field *f, const char *name,
                           enum nv_err rc, const char *fmt, ...)
{
	if (!r->e)
		return rc;
	char what[160];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	(void)snprintf(r->e->msg, sizeof(r->e->msg), "%s.%s (field %u) at byte %zu: %s", r->msg,
	               name, (unsigned)f->num, f->off, what);
	return rc;
}

/* Reads a varint at r->off; NV_E_PARSE when it runs past the end or over
 * ten bytes (or ten bytes with bits past 64). */
static enum nv_err pb_read_varint(struct pb_reader *r, uint64_t *out)
{
	uint64_t v = 0;
	size_t start = r->off;
	for (unsigned i = 0; i < 10; i++) {
		if (r->off >= r->len)
			return pb_fail_at(r, r->base + start, NV_E_PARSE, "truncated varint");
		uint8_t c = r->p[r->off++];
		if (i == 9 && c > 1)
			return pb_fail_at(r, r->base + start, NV_E_PARSE,
			                  "varint longer than 64 bits");
		v |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*out = v;
			return NV_OK;
		}
	}
	return pb_fail_at(r, r->base + start, NV_E_PARSE, "varint longer than 10 bytes");
}

static enum nv_err pb_read_fixed(struct pb_reader *r, size_t n, uint64_t *out)
{
	if (r->len - r->off < n)
		return pb_fail_at(r, r->base + r->off, NV_E_PARSE, "truncated fixed%zu", n * 8);
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[r->off + i] << (8 * i);
	r->off += n;
	*out = v;
	return NV_OK;
}

enum nv_err pb_reader_next(struct pb_reader *r, struct pb_field *f)
{
	struct pb_field t = {0};
	uint64_t key;
	enum nv_err rc;

	if (r->off >= r->len)
		return NV_E_NOT_FOUND;
	t.off = r->base + r->off;
	if ((rc = pb_read_varint(r, &key)) != NV_OK)
		return rc;
	if ((key >> 3) == 0 || (key >> 3) > PB_FIELD_NUM_MAX)
		return pb_fail_at(r, t.off, NV_E_PARSE, "field number %llu out of range",
		                  (unsigned long long)(key >> 3));
	t.num = (uint32_t)(key >> 3);
	switch (key & 7) {
	case PB_WIRE_VARINT:
		t.wire = PB_WIRE_VARINT;
		rc = pb_read_varint(r, &t.u);
		break;
	case PB_WIRE_I64:
		t.wire = PB_WIRE_I64;
		rc = pb_read_fixed(r, 8, &t.u);
		break;
	case PB_WIRE_I32:
		t.wire = PB_WIRE_I32;
		rc = pb_read_fixed(r, 4, &t.u);
		break;
	case PB_WIRE_LEN:
		t.wire = PB_WIRE_LEN;
		if ((rc = pb_read_varint(r, &t.u)) != NV_OK)
			break;
		if (t.u > r->len - r->off)
			return pb_fail_at(
			        r, t.off, NV_E_PARSE,
			        "field %u: length %llu runs past the end (%zu bytes left)",
			        (unsigned)t.num, (unsigned long long)t.u, r->len - r->off);
		t.len = (size_t)t.u;
		t.data = r->p + r->off;
		r->off += t.len;
		break;
	default:
		return pb_fail_at(r, t.off, NV_E_PARSE, "field %u: wire type %u is not supported",
		                  (unsigned)t.num, (unsigned)(key & 7));
	}
	if (rc != NV_OK)
		return rc;
	*f = t;
	return NV_OK;
}

static const char *pb_wire_name(enum pb_wire w)
{
	switch (w) {
	case PB_WIRE_VARINT:
		return "varint";
	case PB_WIRE_I64:
		return "fixed64";
	case PB_WIRE_LEN:
		return "length-delimited";
	case PB_WIRE_I32:
		return "fixed32";
	}
	return "?";
}

static enum nv_err pb_want(struct pb_reader *r, const struct pb_field *f, const char *name,
                           enum pb_wire want)
{
	if (f->wire == want)
		return NV_OK;
	return pb_reader_fail(r, f, name, NV_E_PARSE, "%s, want %s", pb_wire_name(f->wire),
	                      pb_wire_name(want));
}

/* The length of the UTF-8 sequence at s (n bytes left), or 0 when it is
 * not valid: overlong forms, surrogates and code points past U+10FFFF are
 * refused as protobuf's own decoders do for proto3 strings. */
static size_t pb_utf8_seq(const uint8_t *s, size_t n)
{
	uint8_t c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1fu;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0fu;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07u;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

enum nv_err pb_field_str(struct pb_reader *r, const struct pb_field *f, const char *name,
                         size_t max, char **out)
{
	enum nv_err rc = pb_want(r, f, name, PB_WIRE_LEN);
	if (rc != NV_OK)
		return rc;
	if (f->len > max)
		return pb_reader_fail(r, f, name, NV_E_TOO_LARGE,
		                      "string of %zu bytes, at most %zu", f->len, max);
	for (size_t i = 0; i < f->len;) {
		size_t n = f->data[i] ? pb_utf8_seq(f->data + i, f->len - i) : 0;
		if (n == 0)
			return pb_reader_fail(r, f, name, NV_E_PARSE,
			                      "%s at offset %zu of the string",
			                      f->data[i] ? "invalid UTF-8" : "NUL byte", i);
		i += n;
	}
	free(*out);
	*out = xstrndup(f->len ? (const char *)f->data : "", f->len);
	return NV_OK;
}

enum nv_err pb_field_bool(struct pb_reader *r, const struct pb_field *f, const char *name,
                          bool *out)
{
	enum nv_err rc = pb_want(r, f, name, PB_WIRE_VARINT);
	if (rc == NV_OK)
		*out = f->u != 0;
	return rc;
}

enum nv_err pb_field_uint(struct pb_reader *r, const struct pb_field *f, const char *name,
                          uint64_t max, uint64_t *out)
{
	enum nv_err rc = pb_want(r, f, name, PB_WIRE_VARINT);
	if (rc != NV_OK)
		return rc;
	if (f->u > max)
		return pb_reader_fail(r, f, name, NV_E_RANGE, "%llu is larger than %llu",
		                      (unsigned long long)f->u, (unsigned long long)max);
	*out = f->u;
	return NV_OK;
}

enum nv_err pb_field_msg(struct pb_reader *r, const struct pb_field *f, const char *name,
                         const char *msg, struct pb_reader *sub)
{
	enum nv_err rc = pb_want(r, f, name, PB_WIRE_LEN);
	if (rc != NV_OK)
		return rc;
	sub->p = f->data;
	sub->len = f->len;
	sub->off = 0;
	sub->base = r->base + (size_t)(f->data - r->p);
	sub->msg = msg;
	sub->e = r->e;
	return NV_OK;
}

/* ---- writer ----------------------------------------------------------------- */

void pb_writer_init(struct pb_writer *w, struct buf *b)
{
	w->b = b;
	w->err = NV_OK;
}

enum nv_err pb_writer_done(const struct pb_writer *w)
{
	return w->err;
}

size_t pb_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t pb_varint_enc(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static void pb_put_raw(struct pb_writer *w, const void *data, size_t len)
{
	if (w->err == NV_OK && len)
		w->err = buf_append(w->b, data, len);
}

static void pb_put_varint(struct pb_writer *w, uint64_t v)
{
	uint8_t tmp[10];
	pb_put_raw(w, tmp, pb_varint_enc(tmp, v));
}

static void pb_put_tag(struct pb_writer *w, uint32_t num, enum pb_wire wire)
{
	pb_put_varint(w, ((uint64_t)num << 3) | (uint64_t)wire);
}

void pb_put_uint(struct pb_writer *w, uint32_t num, uint64_t v)
{
	if (v == 0)
		return;
	pb_put_tag(w, num, PB_WIRE_VARINT);
	pb_put_varint(w, v);
}

void pb_put_bool(struct pb_writer *w, uint32_t num, bool v)
{
	pb_put_uint(w, num, v ? 1 : 0);
}

void pb_put_bytes(struct pb_writer *w, uint32_t num, const void *data, size_t len)
{
	pb_put_tag(w, num, PB_WIRE_LEN);
	pb_put_varint(w, len);
	pb_put_raw(w, data, len);
}

void pb_put_str(struct pb_writer *w, uint32_t num, const char *s)
{
	if (s && *s)
		pb_put_bytes(w, num, s, strlen(s));
}

void pb_put_fixed32(struct pb_writer *w, uint32_t num, uint32_t v)
{
	uint8_t tmp[4];
	for (size_t i = 0; i < 4; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	pb_put_tag(w, num, PB_WIRE_I32);
	pb_put_raw(w, tmp, sizeof(tmp));
}

void pb_put_fixed64(struct pb_writer *w, uint32_t num, uint64_t v)
{
	uint8_t tmp[8];
	for (size_t i = 0; i < 8; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	pb_put_tag(w, num, PB_WIRE_I64);
	pb_put_raw(w, tmp, sizeof(tmp));
}

size_t pb_put_begin(struct pb_writer *w, uint32_t num)
{
	pb_put_tag(w, num, PB_WIRE_LEN);
	return w->b->len;
}

/* The body written since the mark moves right to make room for its
 * length, which then goes in front of it. */
void pb_put_end(struct pb_writer *w, size_t mark)
{
	if (w->err != NV_OK || mark > w->b->len)
		return;
	size_t body = w->b->len - mark;
	uint8_t tmp[10];
	size_t n = pb_varint_enc(tmp, body);
	pb_put_raw(w, tmp, n); /* grows the buffer by n */
	if (w->err != NV_OK)
		return;
	char *d = w->b->data;
	memmove(d + mark + n, d + mark, body);
	memcpy(d + mark, tmp, n);
}
