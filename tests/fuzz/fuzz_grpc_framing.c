// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the HTTP/2-to-gRPC framing: the input is what a
// client sends on the socket, fed to one server connection in chunks whose
// size comes from the first byte, with the output drained after each chunk
// as the server loop does. Unless the first byte's top bit is set, the
// client preface is sent first, so the fuzzer spends its time on frames.
#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/grpc/grpc_int.h"
#include "nvl72/dra.h"
#include "nvl72/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes the request as the DRA service will, and answers with a claim. */
static enum grpc_code fz_prepare(void *arg, struct grpc_call *call)
{
	struct dra_claims_req req;
	struct pb_err e;
	(void)arg;
	if (dra_claims_req_decode(call->req, call->req_len, NULL, &req, &e) != NV_OK) {
		(void)buf_append_str(&call->status_msg, e.msg);
		return GRPC_INVALID_ARGUMENT;
	}
	struct dra_prepare_result res = {.uid = req.n_claims ? req.claims[0].uid : NULL};
	struct dra_prepare_resp resp = {.claims = &res, .n_claims = 1};
	enum nv_err rc = dra_prepare_resp_encode(&resp, &call->resp);
	dra_claims_req_clear(&req);
	return rc == NV_OK ? GRPC_OK : GRPC_INTERNAL;
}

static enum grpc_code fz_echo(void *arg, struct grpc_call *call)
{
	(void)arg;
	return buf_append(&call->resp, call->req, call->req_len) == NV_OK ? GRPC_OK
	                                                                  : GRPC_RESOURCE_EXHAUSTED;
}

static void fz_drain(struct grpc_conn *c, int64_t now)
{
	size_t len;
	for (int i = 0; i < 64; i++) {
		(void)grpc_conn_out(c, &len, now);
		if (!len)
			break;
		grpc_conn_sent(c, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct grpc_opts o;
	static int ready;
	if (!ready) {
		const struct grpc_method m[] = {
		        {DRA_PATH_PREPARE, fz_prepare, NULL},
		        {DRA_PATH_GET_INFO, fz_echo, NULL},
		};
		struct grpc_config cfg = {.methods = m,
		                          .n_methods = 2,
		                          .msg_max = 4096,
		                          .streams_max = 8,
		                          .header_list_max = 4096,
		                          .conn_buf_max = 16384,
		                          .stream_burst = 16};
		log_set_level(LOG_LVL_ERROR);
		if (grpc_opts_init(&o, &cfg) != NV_OK)
			abort();
		ready = 1;
	}
	if (size == 0)
		return 0;
	size_t step = (size_t)(data[0] & 0x7f) + 1, off = 1;
	int64_t now = 1000;
	struct grpc_conn *c = grpc_conn_new(&o, 1, now);
	if (!(data[0] & 0x80))
		(void)grpc_conn_recv(c, (const uint8_t *)NGHTTP2_CLIENT_MAGIC,
		                     NGHTTP2_CLIENT_MAGIC_LEN, now);
	fz_drain(c, now);
	while (off < size && !grpc_conn_done(c)) {
		size_t n = size - off < step ? size - off : step;
		now += 7;
		(void)grpc_conn_recv(c, data + off, n, now);
		off += n;
		fz_drain(c, now);
		(void)grpc_conn_deadline(c);
	}
	grpc_conn_free(c);
	return 0;
}
