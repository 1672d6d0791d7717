// SPDX-License-Identifier: Apache-2.0
// Unit tests for the kubelet plugin message codecs: known bytes of a
// request, round trips of every message, map keys sent twice, unknown
// fields, the count and size limits, and every truncation of a message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/dra.h"

/* The structs own their strings; a test lends them literals it never frees. */
#define S(lit) ((char *)(lit))

/* NodePrepareResourcesRequest{claims: [{namespace: "ns", uid: "u1", name: "c"}]} */
static const uint8_t one_claim[] = {0x0a, 0x0b, 0x0a, 0x02, 'n',  's', 0x12,
                                    0x02, 'u',  '1',  0x1a, 0x01, 'c'};

static void test_dra_claims_req_known_bytes(void **state)
{
	struct dra_claim c = {.ns = S("ns"), .uid = S("u1"), .name = S("c")};
	struct dra_claims_req m = {.claims = &c, .n_claims = 1}, got = {0};
	struct buf b;
	struct pb_err e;
	(void)state;
	buf_init(&b, 1024);
	assert_int_equal(dra_claims_req_encode(&m, &b), NV_OK);
	assert_int_equal(b.len, sizeof(one_claim));
	assert_memory_equal(b.data, one_claim, sizeof(one_claim));
	assert_int_equal(dra_claims_req_decode(one_claim, sizeof(one_claim), NULL, &got, &e),
	                 NV_OK);
	assert_int_equal(got.n_claims, 1);
	assert_string_equal(got.claims[0].ns, "ns");
	assert_string_equal(got.claims[0].uid, "u1");
	assert_string_equal(got.claims[0].name, "c");
	dra_claims_req_clear(&got);
	assert_int_equal(dra_claims_req_decode("", 0, NULL, &got, &e), NV_OK);
	assert_int_equal(got.n_claims, 0);
	buf_clear(&b);
}

static void test_dra_plugin_info_round_trip(void **state)
{
	char *versions[] = {S("v1.DRAPlugin"), S("v1beta1.DRAPlugin")};
	struct dra_plugin_info m = {.type = S("DRAPlugin"),
	                            .name = S("imex.nvl72.io"),
	                            .endpoint =
	                                    S("/var/lib/kubelet/plugins/imex.nvl72.io/dra.sock"),
	                            .versions = versions,
	                            .n_versions = 2},
	                       got;
	struct dra_reg_status st = {.registered = true, .error = S("none")}, st2;
	struct buf b;
	struct pb_err e;
	(void)state;
	buf_init(&b, 1024);
	assert_int_equal(dra_plugin_info_encode(&m, &b), NV_OK);
	assert_int_equal(dra_plugin_info_decode(b.data, b.len, &got, &e), NV_OK);
	assert_string_equal(got.type, "DRAPlugin");
	assert_string_equal(got.name, "imex.nvl72.io");
	assert_string_equal(got.endpoint, m.endpoint);
	assert_int_equal(got.n_versions, 2);
	assert_string_equal(got.versions[1], "v1beta1.DRAPlugin");
	dra_plugin_info_clear(&got);

	buf_reset(&b);
	assert_int_equal(dra_reg_status_encode(&st, &b), NV_OK);
	assert_int_equal(dra_reg_status_decode(b.data, b.len, &st2, &e), NV_OK);
	assert_true(st2.registered);
	assert_string_equal(st2.error, "none");
	dra_reg_status_clear(&st2);
	/* Empty: registered false, no error (both left out by proto3). */
	assert_int_equal(dra_reg_status_decode("", 0, &st2, &e), NV_OK);
	assert_false(st2.registered);
	assert_null(st2.error);
	buf_clear(&b);
}

static void test_dra_prepare_resp_round_trip(void **state)
{
	char *reqs[] = {S("channel")}, *cdi[] = {S("imex.nvl72.io/channel=channel0")};
	struct dra_device dev = {.request_names = reqs,
	                         .n_request_names = 1,
	                         .pool_name = S("node-a"),
	                         .device_name = S("channel-0"),
	                         .cdi_device_ids = cdi,
	                         .n_cdi_device_ids = 1};
	struct dra_prepare_result res[] = {
	        {.uid = S("uid-1"), .devices = &dev, .n_devices = 1},
	        {.uid = S("uid-2"), .error = S("tray is not a member of the domain")},
	        {.uid = S("uid-3")},
	};
	struct dra_prepare_resp m = {.claims = res, .n_claims = 3}, got;
	struct buf b;
	struct pb_err e;
	(void)state;
	buf_init(&b, 4096);
	assert_int_equal(dra_prepare_resp_encode(&m, &b), NV_OK);
	assert_int_equal(dra_prepare_resp_decode(b.data, b.len, &got, &e), NV_OK);
	assert_int_equal(got.n_claims, 3);
	assert_string_equal(got.claims[0].uid, "uid-1");
	assert_int_equal(got.claims[0].n_devices, 1);
	assert_string_equal(got.claims[0].devices[0].request_names[0], "channel");
	assert_string_equal(got.claims[0].devices[0].pool_name, "node-a");
	assert_string_equal(got.claims[0].devices[0].device_name, "channel-0");
	assert_string_equal(got.claims[0].devices[0].cdi_device_ids[0], cdi[0]);
	assert_null(got.claims[0].error);
	assert_string_equal(got.claims[1].error, "tray is not a member of the domain");
	assert_int_equal(got.claims[2].n_devices, 0);
	dra_prepare_resp_clear(&got);
	buf_clear(&b);
}

/* A map key sent twice keeps the last entry, as protobuf's maps do. */
static void test_dra_unprepare_resp_duplicate_key(void **state)
{
	struct dra_unprepare_result res[] = {
	        {.uid = S("a"), .error = S("first")},
	        {.uid = S("b")},
	        {.uid = S("a"), .error = S("second")},
	};
	struct dra_unprepare_resp m = {.claims = res, .n_claims = 3}, got;
	struct buf b;
	struct pb_err e;
	(void)state;
	buf_init(&b, 4096);
	assert_int_equal(dra_unprepare_resp_encode(&m, &b), NV_OK);
	assert_int_equal(dra_unprepare_resp_decode(b.data, b.len, &got, &e), NV_OK);
	assert_int_equal(got.n_claims, 2);
	assert_string_equal(got.claims[0].uid, "a");
	assert_string_equal(got.claims[0].error, "second");
	assert_string_equal(got.claims[1].uid, "b");
	assert_null(got.claims[1].error);
	dra_unprepare_resp_clear(&got);
	buf_clear(&b);
}

/* Fields a newer kubelet might add are skipped at every level. */
static void test_dra_claims_req_unknown_fields(void **state)
{
	static const uint8_t d[] = {
	        0x10, 0x05,                               /* 2: varint (unknown) */
	        0x0a, 0x0e, 0x22, 0x01, 'x',              /* claim: 4: "x" (unknown) */
	        0x12, 0x02, 'u',  '9',  0x2d, 1, 2, 3, 4, /* uid, 5: fixed32 */
	        0x1a, 0x00,                               /* 1: name "" */
	};
	struct dra_claims_req got;
	struct pb_err e;
	(void)state;
	assert_int_equal(dra_claims_req_decode(d, sizeof(d), NULL, &got, &e), NV_OK);
	assert_int_equal(got.n_claims, 1);
	assert_string_equal(got.claims[0].uid, "u9");
	assert_string_equal(got.claims[0].name, "");
	assert_null(got.claims[0].ns);
	dra_claims_req_clear(&got);
}

/* Every proper prefix of a valid message either decodes (it ends at a field
 * boundary) or fails cleanly, never reading past the cut. */
static void test_dra_prepare_resp_truncated(void **state)
{
	char *cdi[] = {S("imex.nvl72.io/channel=channel0")};
	struct dra_device dev = {.pool_name = S("p"), .cdi_device_ids = cdi, .n_cdi_device_ids = 1};
	struct dra_prepare_result res = {.uid = S("uid-1"), .devices = &dev, .n_devices = 1};
	struct dra_prepare_resp m = {.claims = &res, .n_claims = 1};
	struct buf b;
	struct pb_err e;
	size_t failed = 0;
	(void)state;
	buf_init(&b, 4096);
	assert_int_equal(dra_prepare_resp_encode(&m, &b), NV_OK);
	for (size_t n = 1; n < b.len; n++) {
		struct dra_prepare_resp got;
		uint8_t *cut = malloc(n);
		memcpy(cut, b.data, n);
		enum nv_err rc = dra_prepare_resp_decode(cut, n, &got, &e);
		if (rc != NV_OK) {
			assert_int_equal(rc, NV_E_PARSE);
			assert_int_equal(got.n_claims, 0);
			assert_null(got.claims);
			assert_true(e.msg[0] != '\0');
			failed++;
		}
		dra_prepare_resp_clear(&got);
		free(cut);
	}
	/* The whole message is one map entry: every cut is inside it. */
	assert_int_equal(failed, b.len - 1);
	buf_clear(&b);
}

static void test_dra_claims_req_limits(void **state)
{
	struct buf b;
	struct pb_writer w;
	struct dra_claims_req got;
	struct pb_err e;
	(void)state;
	buf_init(&b, 1u << 20);
	pb_writer_init(&w, &b);
	for (int i = 0; i <= DRA_ITEMS_MAX; i++) {
		size_t mk = pb_put_begin(&w, 1);
		pb_put_str(&w, 2, "u");
		pb_put_end(&w, mk);
	}
	assert_int_equal(pb_writer_done(&w), NV_OK);
	assert_int_equal(
	        dra_claims_req_decode(b.data, b.len, "NodeUnprepareResourcesRequest", &got, &e),
	        NV_E_TOO_LARGE);
	assert_non_null(strstr(e.msg, "NodeUnprepareResourcesRequest.claims (field 1)"));
	assert_non_null(strstr(e.msg, "more than 1024 entries"));
	assert_null(got.claims);

	char *big = malloc(DRA_STR_MAX + 2);
	memset(big, 'n', DRA_STR_MAX + 1);
	big[DRA_STR_MAX + 1] = '\0';
	struct dra_claim c = {.name = big};
	struct dra_claims_req m = {.claims = &c, .n_claims = 1};
	buf_reset(&b);
	assert_int_equal(dra_claims_req_encode(&m, &b), NV_OK);
	assert_int_equal(dra_claims_req_decode(b.data, b.len, NULL, &got, &e), NV_E_TOO_LARGE);
	assert_non_null(strstr(e.msg, "Claim.name (field 3)"));
	free(big);
	buf_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_dra_claims_req_known_bytes),
	        cmocka_unit_test(test_dra_plugin_info_round_trip),
	        cmocka_unit_test(test_dra_prepare_resp_round_trip),
	        cmocka_unit_test(test_dra_unprepare_resp_duplicate_key),
	        cmocka_unit_test(test_dra_claims_req_unknown_fields),
	        cmocka_unit_test(test_dra_prepare_resp_truncated),
	        cmocka_unit_test(test_dra_claims_req_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
