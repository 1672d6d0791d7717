/* SPDX-License-Identifier: Apache-2.0 */
/* A small protocol buffers wire codec (proto3 binary format): a reader that
 * walks the fields of one message and a writer that appends them to a
 * capped buffer. Message types are written by hand on top of it (src/dra/). */
/* Contract: pure; one thread per reader or writer. A reader borrows the
 * bytes it walks (and every slice it hands out points into them); nothing
 * it returns must outlive them. Every length read from the input is checked
 * against the bytes that enclose it before it is used, and strings against
 * the caller's maximum. Groups (wire types 3 and 4, absent from proto3) are
 * refused. Errors fill the reader's pb_err with the message and field named,
 * e.g. "Claim.uid (field 2) at byte 17: string of 300 bytes, at most 256".
 * The writer's first failure (NV_E_TOO_LARGE past the buffer's cap) sticks:
 * later calls do nothing and pb_writer_done returns it. */
#ifndef NVL72_PB_H
#define NVL72_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

/* The largest field number the format allows (2^29 - 1). */
#define PB_FIELD_NUM_MAX 536870911u

enum pb_wire {
	PB_WIRE_VARINT = 0,
	PB_WIRE_I64 = 1,
	PB_WIRE_LEN = 2,
	PB_WIRE_I32 = 5,
};

struct pb_err {
	char msg[256];
};

struct pb_reader {
	const uint8_t *p;
	size_t len;
	size_t off;
	size_t base;     /* offset of p[0] in the outermost message, for errors */
	const char *msg; /* message type name, for errors */
	struct pb_err *e;
};

/* One field as read: u holds a varint, fixed32 or fixed64 value; data and
 * len the bytes of a length-delimited one (borrowed from the input). */
struct pb_field {
	uint32_t num;
	enum pb_wire wire;
	uint64_t u;
	const uint8_t *data;
	size_t len;
	size_t off; /* where the tag starts, relative to the outermost message */
};

/* msg names the message type in errors; e may be NULL. */
void pb_reader_init(struct pb_reader *r, const void *data, size_t len, const char *msg,
                    struct pb_err *e);
/* The next field: NV_OK, NV_E_NOT_FOUND at the end of the message, or
 * NV_E_PARSE for a truncated or malformed field (a varint of more than ten
 * bytes, field number 0 or past PB_FIELD_NUM_MAX, a group, a length past
 * the end). Unknown fields are the caller's to skip: just read on. */
enum nv_err pb_reader_next(struct pb_reader *r, struct pb_field *f);

/* The typed views of a field. name is the field's name for errors. Each
 * checks the wire type (NV_E_PARSE when it is not the field's). */
/* A string: at most max bytes, valid UTF-8 and without NUL bytes (so it
 * reads as a C string). Replaces *out, freeing what it held (proto3: the
 * last one wins); the caller frees it. NV_E_TOO_LARGE past max. */
enum nv_err pb_field_str(struct pb_reader *r, const struct pb_field *f, const char *name,
                         size_t max, char **out);
/* A bool (any non-zero varint is true). */
enum nv_err pb_field_bool(struct pb_reader *r, const struct pb_field *f, const char *name,
                          bool *out);
/* An unsigned varint (uint32/uint64) no larger than max. NV_E_RANGE past it. */
enum nv_err pb_field_uint(struct pb_reader *r, const struct pb_field *f, const char *name,
                          uint64_t max, uint64_t *out);
/* An embedded message: sub walks its bytes, msg naming its type. */
enum nv_err pb_field_msg(struct pb_reader *r, const struct pb_field *f, const char *name,
                         const char *msg, struct pb_reader *sub);
/* Reports an error at field f of r's message (for checks of the caller's
 * own, such as a count limit) and returns rc. */
enum nv_err pb_reader_fail(struct pb_reader *r, const struct pb_field *f, const char *name,
                           enum nv_err rc, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

struct pb_writer {
	struct buf *b;
	enum nv_err err;
};

/* Appends to b (not owned), whose cap bounds the encoding. */
void pb_writer_init(struct pb_writer *w, struct buf *b);
/* proto3 leaves fields at their default out: pb_put_str writes nothing for
 * NULL or "", pb_put_bool nothing for false, pb_put_uint nothing for 0. */
void pb_put_uint(struct pb_writer *w, uint32_t num, uint64_t v);
void pb_put_bool(struct pb_writer *w, uint32_t num, bool v);
void pb_put_str(struct pb_writer *w, uint32_t num, const char *s);
void pb_put_bytes(struct pb_writer *w, uint32_t num, const void *data, size_t len);
void pb_put_fixed32(struct pb_writer *w, uint32_t num, uint32_t v);
void pb_put_fixed64(struct pb_writer *w, uint32_t num, uint64_t v);
/* An embedded message: pb_put_begin writes the tag and returns a mark, the
 * caller writes the message's fields, pb_put_end puts the length in front
 * of them. Always written, even when empty (a map entry or a repeated
 * element is present by being there). */
size_t pb_put_begin(struct pb_writer *w, uint32_t num);
void pb_put_end(struct pb_writer *w, size_t mark);
/* The first error of any call since pb_writer_init, or NV_OK. */
enum nv_err pb_writer_done(const struct pb_writer *w);

/* The length of v as a varint (1 to 10). */
size_t pb_varint_len(uint64_t v);

#endif
