// SPDX-License-Identifier: Apache-2.0
// Unit tests for the protobuf wire codec: varints at their edges, each wire
// type written and read back, lengths bounded by the enclosing bytes,
// unknown fields walked over, and the errors of malformed input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/pb.h"

static void test_pb_put_varint_edges(void **state)
{
	static const uint64_t vals[] = {1, 127, 128, 300, 16383, 16384, UINT32_MAX, UINT64_MAX};
	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		struct buf b;
		struct pb_writer w;
		struct pb_reader r;
		struct pb_field f;
		buf_init(&b, 64);
		pb_writer_init(&w, &b);
		pb_put_uint(&w, 7, vals[i]);
		assert_int_equal(pb_writer_done(&w), NV_OK);
		assert_int_equal(b.len, 1 + pb_varint_len(vals[i]));
		pb_reader_init(&r, b.data, b.len, "T", NULL);
		assert_int_equal(pb_reader_next(&r, &f), NV_OK);
		assert_int_equal(f.num, 7);
		assert_int_equal(f.wire, PB_WIRE_VARINT);
		assert_true(f.u == vals[i]);
		assert_int_equal(pb_reader_next(&r, &f), NV_E_NOT_FOUND);
		buf_clear(&b);
	}
	assert_int_equal(pb_varint_len(UINT64_MAX), 10);
}

/* 300 as a varint is ac 02 (the protobuf encoding guide's example). */
static void test_pb_put_known_bytes(void **state)
{
	struct buf b;
	struct pb_writer w;
	(void)state;
	buf_init(&b, 64);
	pb_writer_init(&w, &b);
	pb_put_uint(&w, 1, 300);
	pb_put_str(&w, 2, "hi");
	pb_put_str(&w, 3, ""); /* proto3: the default is not written */
	pb_put_bool(&w, 4, false);
	pb_put_fixed32(&w, 5, 0x01020304u);
	assert_int_equal(pb_writer_done(&w), NV_OK);
	static const uint8_t want[] = {0x08, 0xac, 0x02, 0x12, 0x02, 'h',
	                               'i',  0x2d, 0x04, 0x03, 0x02, 0x01};
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	buf_clear(&b);
}

static void test_pb_put_nested_round_trip(void **state)
{
	struct buf b;
	struct pb_writer w;
	struct pb_reader r, sub;
	struct pb_field f;
	struct pb_err e;
	char big[300];
	char *s = NULL;
	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	buf_init(&b, 4096);
	pb_writer_init(&w, &b);
	size_t m = pb_put_begin(&w, 1);
	pb_put_str(&w, 2, big); /* the body is over 127 bytes: a 2-byte length */
	pb_put_fixed64(&w, 3, 0x1122334455667788ull);
	pb_put_end(&w, m);
	size_t empty = pb_put_begin(&w, 4);
	pb_put_end(&w, empty);
	assert_int_equal(pb_writer_done(&w), NV_OK);

	pb_reader_init(&r, b.data, b.len, "Outer", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_msg(&r, &f, "inner", "Inner", &sub), NV_OK);
	assert_int_equal(pb_reader_next(&sub, &f), NV_OK);
	assert_int_equal(pb_field_str(&sub, &f, "s", 512, &s), NV_OK);
	assert_string_equal(s, big);
	assert_int_equal(pb_reader_next(&sub, &f), NV_OK);
	assert_int_equal(f.wire, PB_WIRE_I64);
	assert_true(f.u == 0x1122334455667788ull);
	assert_int_equal(pb_reader_next(&sub, &f), NV_E_NOT_FOUND);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(f.num, 4);
	assert_int_equal(f.len, 0);
	assert_int_equal(pb_reader_next(&r, &f), NV_E_NOT_FOUND);
	free(s);
	buf_clear(&b);
}

static void test_pb_writer_cap_sticks(void **state)
{
	struct buf b;
	struct pb_writer w;
	(void)state;
	buf_init(&b, 8);
	pb_writer_init(&w, &b);
	pb_put_str(&w, 1, "0123456789");
	pb_put_uint(&w, 2, 1);
	assert_int_equal(pb_writer_done(&w), NV_E_TOO_LARGE);
	buf_clear(&b);
}

static enum nv_err read_one(const uint8_t *d, size_t n, struct pb_err *e)
{
	struct pb_reader r;
	struct pb_field f;
	enum nv_err rc;
	pb_reader_init(&r, d, n, "T", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK)
		;
	return rc;
}

static void test_pb_reader_next_malformed(void **state)
{
	struct pb_err e;
	(void)state;
	static const uint8_t trunc_varint[] = {0x08, 0x80};
	assert_int_equal(read_one(trunc_varint, sizeof(trunc_varint), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "truncated varint"));
	static const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                      0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	assert_int_equal(read_one(long_varint, sizeof(long_varint), &e), NV_E_PARSE);
	static const uint8_t over64[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                 0xff, 0xff, 0xff, 0xff, 0x02};
	assert_int_equal(read_one(over64, sizeof(over64), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "64 bits"));
	static const uint8_t field0[] = {0x00, 0x01};
	assert_int_equal(read_one(field0, sizeof(field0), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "field number 0"));
	static const uint8_t group[] = {0x0b, 0x0c};
	assert_int_equal(read_one(group, sizeof(group), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "wire type 3"));
	static const uint8_t past_end[] = {0x0a, 0x05, 'a', 'b'};
	assert_int_equal(read_one(past_end, sizeof(past_end), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "runs past the end"));
	/* A length near 2^64 must not wrap the bounds check. */
	static const uint8_t huge_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                   0xff, 0xff, 0xff, 0xff, 0x01};
	assert_int_equal(read_one(huge_len, sizeof(huge_len), &e), NV_E_PARSE);
	static const uint8_t trunc_fixed[] = {0x0d, 0x01, 0x02};
	assert_int_equal(read_one(trunc_fixed, sizeof(trunc_fixed), &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "fixed32"));
	static const uint8_t trunc_tag[] = {0x80};
	assert_int_equal(read_one(trunc_tag, sizeof(trunc_tag), &e), NV_E_PARSE);
	assert_int_equal(read_one(NULL, 0, &e), NV_E_NOT_FOUND);
}

/* Unknown fields of every wire type are walked over to the next one. */
static void test_pb_reader_next_skips_unknown(void **state)
{
	static const uint8_t d[] = {
	        0x98, 0x06, 0x01,                            /* 99: varint */
	        0x99, 0x06, 1,    2,   3,   4,   5, 6, 7, 8, /* 99: fixed64 */
	        0x9a, 0x06, 0x03, 'a', 'b', 'c',             /* 99: bytes */
	        0x9d, 0x06, 1,    2,   3,   4,               /* 99: fixed32 */
	        0x0a, 0x02, 'o',  'k',                       /* 1: "ok" */
	};
	struct pb_reader r;
	struct pb_field f;
	char *s = NULL;
	(void)state;
	pb_reader_init(&r, d, sizeof(d), "T", NULL);
	for (;;) {
		assert_int_equal(pb_reader_next(&r, &f), NV_OK);
		if (f.num == 1)
			break;
		assert_int_equal(f.num, 99);
	}
	assert_int_equal(pb_field_str(&r, &f, "s", 16, &s), NV_OK);
	assert_string_equal(s, "ok");
	assert_int_equal(pb_reader_next(&r, &f), NV_E_NOT_FOUND);
	free(s);
}

static void test_pb_field_str_checks(void **state)
{
	struct pb_reader r;
	struct pb_field f;
	struct pb_err e;
	char *s = NULL;
	(void)state;
	static const uint8_t nul[] = {0x12, 0x03, 'a', 0, 'b'};
	pb_reader_init(&r, nul, sizeof(nul), "Claim", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 16, &s), NV_E_PARSE);
	assert_string_equal(e.msg, "Claim.uid (field 2) at byte 0: NUL byte at offset 1 of the "
	                           "string");
	static const uint8_t bad_utf8[] = {0x12, 0x02, 0xc0, 0x80}; /* overlong NUL */
	pb_reader_init(&r, bad_utf8, sizeof(bad_utf8), "Claim", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 16, &s), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "invalid UTF-8"));
	static const uint8_t surrogate[] = {0x12, 0x03, 0xed, 0xa0, 0x80};
	pb_reader_init(&r, surrogate, sizeof(surrogate), "Claim", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 16, &s), NV_E_PARSE);
	static const uint8_t ok[] = {0x12, 0x04, 0xf0, 0x9f, 0x98, 0x80}; /* U+1F600 */
	pb_reader_init(&r, ok, sizeof(ok), "Claim", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 16, &s), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 3, &s), NV_E_TOO_LARGE);
	assert_string_equal(e.msg, "Claim.uid (field 2) at byte 0: string of 4 bytes, at most 3");
	static const uint8_t wrong_wire[] = {0x10, 0x01};
	pb_reader_init(&r, wrong_wire, sizeof(wrong_wire), "Claim", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_str(&r, &f, "uid", 16, &s), NV_E_PARSE);
	assert_string_equal(e.msg, "Claim.uid (field 2) at byte 0: varint, want length-delimited");
	free(s);
}

/* An error inside an embedded message gives the offset in the outer one. */
static void test_pb_field_msg_offsets(void **state)
{
	static const uint8_t d[] = {0x08, 0x01, 0x0a, 0x03, 0x10, 0x80, 0x80};
	struct pb_reader r, sub;
	struct pb_field f;
	struct pb_err e;
	uint64_t v = 0;
	(void)state;
	pb_reader_init(&r, d, sizeof(d), "Outer", &e);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_uint(&r, &f, "n", 0, &v), NV_E_RANGE);
	assert_int_equal(pb_field_uint(&r, &f, "n", 1, &v), NV_OK);
	assert_int_equal(pb_reader_next(&r, &f), NV_OK);
	assert_int_equal(pb_field_msg(&r, &f, "inner", "Inner", &sub), NV_OK);
	assert_int_equal(pb_reader_next(&sub, &f), NV_E_PARSE);
	assert_string_equal(e.msg, "Inner at byte 5: truncated varint");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_pb_put_varint_edges),
	        cmocka_unit_test(test_pb_put_known_bytes),
	        cmocka_unit_test(test_pb_put_nested_round_trip),
	        cmocka_unit_test(test_pb_writer_cap_sticks),
	        cmocka_unit_test(test_pb_reader_next_malformed),
	        cmocka_unit_test(test_pb_reader_next_skips_unknown),
	        cmocka_unit_test(test_pb_field_str_checks),
	        cmocka_unit_test(test_pb_field_msg_offsets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
