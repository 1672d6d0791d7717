// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the protobuf decoders of the kubelet plugin messages:
// every decoder reads the same input, and whatever one accepts must encode
// and decode again to the same bytes (the codec is stable on its own output).
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/dra.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Encodes twice through a decode and aborts when the bytes differ. */
#define CHECK_STABLE(type, m)                                                                      \
	do {                                                                                       \
		struct buf b1, b2;                                                                 \
		struct type again;                                                                 \
		struct pb_err e2;                                                                  \
		buf_init(&b1, 1u << 24);                                                           \
		buf_init(&b2, 1u << 24);                                                           \
		if (type##_encode(&(m), &b1) != NV_OK)                                             \
			abort();                                                                   \
		if (type##_decode(b1.data, b1.len, &again, &e2) != NV_OK)                          \
			abort();                                                                   \
		if (type##_encode(&again, &b2) != NV_OK || b1.len != b2.len ||                     \
		    (b1.len && memcmp(b1.data, b2.data, b1.len) != 0))                             \
			abort();                                                                   \
		type##_clear(&again);                                                              \
		buf_clear(&b1);                                                                    \
		buf_clear(&b2);                                                                    \
	} while (0)

static enum nv_err claims_decode(const void *d, size_t n, struct dra_claims_req *m,
                                 struct pb_err *e)
{
	return dra_claims_req_decode(d, n, NULL, m, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pb_err e;
	struct dra_claims_req req;
	struct dra_plugin_info info;
	struct dra_reg_status st;
	struct dra_prepare_resp prep;
	struct dra_unprepare_resp unprep;

	if (claims_decode(data, size, &req, &e) == NV_OK) {
		struct buf b1, b2;
		struct dra_claims_req again;
		buf_init(&b1, 1u << 24);
		buf_init(&b2, 1u << 24);
		if (dra_claims_req_encode(&req, &b1) != NV_OK ||
		    claims_decode(b1.data, b1.len, &again, &e) != NV_OK ||
		    dra_claims_req_encode(&again, &b2) != NV_OK || b1.len != b2.len ||
		    (b1.len && memcmp(b1.data, b2.data, b1.len) != 0))
			abort();
		dra_claims_req_clear(&again);
		dra_claims_req_clear(&req);
		buf_clear(&b1);
		buf_clear(&b2);
	} else if (req.claims || !e.msg[0]) {
		abort(); /* a failed decode leaves nothing behind and says why */
	}
	if (dra_plugin_info_decode(data, size, &info, &e) == NV_OK) {
		CHECK_STABLE(dra_plugin_info, info);
		dra_plugin_info_clear(&info);
	}
	if (dra_reg_status_decode(data, size, &st, &e) == NV_OK) {
		CHECK_STABLE(dra_reg_status, st);
		dra_reg_status_clear(&st);
	}
	if (dra_prepare_resp_decode(data, size, &prep, &e) == NV_OK) {
		CHECK_STABLE(dra_prepare_resp, prep);
		dra_prepare_resp_clear(&prep);
	}
	if (dra_unprepare_resp_decode(data, size, &unprep, &e) == NV_OK) {
		CHECK_STABLE(dra_unprepare_resp, unprep);
		dra_unprepare_resp_clear(&unprep);
	}
	return 0;
}
