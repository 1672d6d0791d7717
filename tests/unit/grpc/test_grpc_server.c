// SPDX-License-Identifier: Apache-2.0
// Unit tests for the gRPC server on a real unix socket, called by an HTTP/2
// client written here with nghttp2's client API: the kubelet's calls, and
// a hostile peer's (unknown method, oversized and compressed messages,
// garbage, a flood of streams, a stalled preface, too many connections).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvl72/dra.h"
#include "nvl72/grpc.h"

#define WAIT_MS 10000 /* the most any condition is waited for */
#define TEST_MSG_MAX 2048
#define TEST_TIMEOUT_MS 500

/* ---- the services under test ------------------------------------------------- */

static enum grpc_code h_get_info(void *arg, struct grpc_call *call)
{
	char *versions[] = {(char *)"v1.DRAPlugin", (char *)"v1beta1.DRAPlugin"};
	struct dra_plugin_info info = {.type = (char *)"DRAPlugin",
	                               .name = (char *)"imex.nvl72.io",
	                               .endpoint = arg,
	                               .versions = versions,
	                               .n_versions = 2};
	return dra_plugin_info_encode(&info, &call->resp) == NV_OK ? GRPC_OK : GRPC_INTERNAL;
}

/* Answers every claim with one device named after its UID. */
static enum grpc_code h_prepare(void *arg, struct grpc_call *call)
{
	struct dra_claims_req req;
	struct pb_err e;
	(void)arg;
	if (dra_claims_req_decode(call->req, call->req_len, "NodePrepareResourcesRequest", &req,
	                          &e) != NV_OK) {
		(void)buf_append_str(&call->status_msg, e.msg);
		return GRPC_INVALID_ARGUMENT;
	}
	struct dra_prepare_resp resp = {.n_claims = req.n_claims};
	struct dra_device *devs = calloc(req.n_claims + 1, sizeof(*devs));
	resp.claims = calloc(req.n_claims + 1, sizeof(*resp.claims));
	for (size_t i = 0; i < req.n_claims; i++) {
		devs[i].pool_name = (char *)"node-a";
		devs[i].device_name = req.claims[i].uid;
		resp.claims[i].uid = req.claims[i].uid;
		resp.claims[i].devices = &devs[i];
		resp.claims[i].n_devices = 1;
	}
	enum nv_err rc = dra_prepare_resp_encode(&resp, &call->resp);
	free(devs);
	free(resp.claims);
	dra_claims_req_clear(&req);
	return rc == NV_OK ? GRPC_OK : GRPC_INTERNAL;
}

static enum grpc_code h_refuse(void *arg, struct grpc_call *call)
{
	(void)arg;
	(void)buf_append_str(&call->status_msg, "100% not ready: tray \xc3\xa9");
	return GRPC_FAILED_PRECONDITION;
}

/* ---- fixture ---------------------------------------------------------------- */

struct fix {
	char dir[64];
	char path[128];
	char endpoint[128];
	struct grpc_server *s;
};

static int fix_setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	(void)snprintf(f->dir, sizeof(f->dir), "/tmp/nvl72-grpc-test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	(void)snprintf(f->path, sizeof(f->path), "%s/imex.nvl72.io-reg.sock", f->dir);
	(void)snprintf(f->endpoint, sizeof(f->endpoint), "%s/dra.sock", f->dir);
	const struct grpc_method methods[] = {
	        {DRA_PATH_GET_INFO, h_get_info, f->endpoint},
	        {DRA_PATH_PREPARE, h_prepare, NULL},
	        {"/test.Svc/Refuse", h_refuse, NULL},
	};
	struct grpc_config cfg = {.name = "test",
	                          .socket_path = f->path,
	                          .methods = methods,
	                          .n_methods = 3,
	                          .msg_max = TEST_MSG_MAX,
	                          .streams_max = 8,
	                          .header_list_max = 4096,
	                          .conns_max = 4,
	                          .read_timeout_ms = TEST_TIMEOUT_MS,
	                          .stream_burst = 40};
	assert_int_equal(grpc_server_new(&cfg, &f->s), NV_OK);
	assert_int_equal(grpc_server_start(f->s), NV_OK);
	*state = f;
	return 0;
}

static int fix_teardown(void **state)
{
	struct fix *f = *state;
	grpc_server_free(f->s);
	assert_int_equal(access(f->path, F_OK), -1); /* stop removed it */
	assert_int_equal(rmdir(f->dir), 0);
	free(f);
	return 0;
}

static int sock_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* ---- an HTTP/2 client ------------------------------------------------------- */

struct reply {
	int http;
	int grpc_status; /* -1 when absent */
	char grpc_message[512];
	uint8_t data[8192];
	size_t data_len;
	bool closed;
	uint32_t rst;
};

struct cli {
	int fd;
	nghttp2_session *h2;
	int32_t sid;
	struct reply *r;
	const uint8_t *body;
	size_t body_len, body_off;
	bool eof;
	bool goaway;
	uint32_t goaway_code;
};

static int cli_on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                         size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                         void *user)
{
	struct cli *c = user;
	char v[512];
	(void)h2;
	(void)flags;
	if (frame->hd.stream_id != c->sid)
		return 0;
	(void)snprintf(v, sizeof(v), "%.*s", (int)valuelen, (const char *)value);
	if (namelen == 7 && memcmp(name, ":status", 7) == 0)
		c->r->http = (int)strtol(v, NULL, 10);
	else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0)
		c->r->grpc_status = (int)strtol(v, NULL, 10);
	else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0)
		(void)snprintf(c->r->grpc_message, sizeof(c->r->grpc_message), "%s", v);
	return 0;
}

static int cli_on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                       size_t len, void *user)
{
	struct cli *c = user;
	(void)h2;
	(void)flags;
	if (id == c->sid && len <= sizeof(c->r->data) - c->r->data_len) {
		memcpy(c->r->data + c->r->data_len, data, len);
		c->r->data_len += len;
	}
	return 0;
}

static int cli_on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
	struct cli *c = user;
	(void)h2;
	if (id == c->sid) {
		c->r->closed = true;
		c->r->rst = code;
	}
	return 0;
}

static int cli_on_frame(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
	struct cli *c = user;
	(void)h2;
	if (frame->hd.type == NGHTTP2_GOAWAY) {
		c->goaway = true;
		c->goaway_code = frame->goaway.error_code;
	}
	return 0;
}

static void cli_open(struct cli *c, const char *path)
{
	nghttp2_session_callbacks *cb;
	memset(c, 0, sizeof(*c));
	c->fd = sock_connect(path);
	assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, cli_on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cli_on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, cli_on_close);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cli_on_frame);
	assert_int_equal(nghttp2_session_client_new(&c->h2, cb, c), 0);
	nghttp2_session_callbacks_del(cb);
	assert_int_equal(nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

static void cli_close(struct cli *c)
{
	nghttp2_session_del(c->h2);
	(void)close(c->fd);
}

/* Sends what the session has, then reads once (waiting up to WAIT_MS). */
static void cli_pump(struct cli *c)
{
	const uint8_t *p;
	ssize_t n;
	while ((n = nghttp2_session_mem_send(c->h2, &p)) > 0)
		if (send(c->fd, p, (size_t)n, MSG_NOSIGNAL) != n)
			break; /* the server may have closed: the read says so */
	struct pollfd pf = {.fd = c->fd, .events = POLLIN};
	assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
	uint8_t b[16384];
	n = recv(c->fd, b, sizeof(b), 0);
	if (n <= 0) {
		c->eof = true;
		return;
	}
	assert_true(nghttp2_session_mem_recv(c->h2, b, (size_t)n) >= 0);
}

static ssize_t cli_body_read(nghttp2_session *h2, int32_t id, uint8_t *dst, size_t len,
                             uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct cli *c = user;
	size_t n = c->body_len - c->body_off;
	(void)h2;
	(void)id;
	(void)src;
	if (n > len)
		n = len;
	memcpy(dst, c->body + c->body_off, n);
	c->body_off += n;
	if (c->body_off == c->body_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define CNV(n, v)                                                                                  \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE         \
	}

/* One call: body is sent as it is (prefix included) and the reply waited
 * for. ct NULL means application/grpc. False when the connection ended
 * before the stream did. */
static bool cli_try(struct cli *c, const char *path, const char *ct, const void *body, size_t len,
                    struct reply *r)
{
	memset(r, 0, sizeof(*r));
	r->grpc_status = -1;
	c->r = r;
	c->body = body;
	c->body_len = len;
	c->body_off = 0;
	nghttp2_nv nva[] = {
	        CNV(":method", "POST"),
	        CNV(":scheme", "http"),
	        CNV(":path", path),
	        CNV(":authority", "localhost"),
	        CNV("content-type", ct ? ct : "application/grpc"),
	        CNV("te", "trailers"),
	        CNV("grpc-timeout", "1S"),
	};
	nghttp2_data_provider dp = {.read_callback = cli_body_read};
	c->sid = nghttp2_submit_request(c->h2, NULL, nva, sizeof(nva) / sizeof(nva[0]), &dp, NULL);
	assert_true(c->sid > 0);
	while (!r->closed && !c->eof)
		cli_pump(c);
	return r->closed;
}

static void cli_call_raw(struct cli *c, const char *path, const char *ct, const void *body,
                         size_t len, struct reply *r)
{
	assert_true(cli_try(c, path, ct, body, len, r));
}

/* A message with its 5-byte prefix. */
static size_t frame_msg(uint8_t *out, uint8_t flag, uint32_t declared, const void *msg, size_t len)
{
	out[0] = flag;
	out[1] = (uint8_t)(declared >> 24);
	out[2] = (uint8_t)(declared >> 16);
	out[3] = (uint8_t)(declared >> 8);
	out[4] = (uint8_t)declared;
	if (len)
		memcpy(out + 5, msg, len);
	return 5 + len;
}

static void cli_call(struct cli *c, const char *path, const void *msg, size_t len, struct reply *r)
{
	uint8_t *b = malloc(len + 5);
	cli_call_raw(c, path, NULL, b, frame_msg(b, 0, (uint32_t)len, msg, len), r);
	free(b);
}

/* ---- the kubelet's calls ---------------------------------------------------- */

static void test_grpc_server_get_info(void **state)
{
	struct fix *f = *state;
	struct cli c;
	struct reply r;
	struct dra_plugin_info info;
	struct pb_err e;
	struct stat st;

	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	cli_open(&c, f->path);
	cli_call(&c, DRA_PATH_GET_INFO, NULL, 0, &r);
	assert_int_equal(r.http, 200);
	assert_int_equal(r.grpc_status, 0);
	assert_int_equal(r.rst, NGHTTP2_NO_ERROR);
	assert_true(r.data_len >= 5);
	assert_int_equal(r.data[0], 0);
	size_t mlen = (size_t)r.data[1] << 24 | (size_t)r.data[2] << 16 | (size_t)r.data[3] << 8 |
	              r.data[4];
	assert_int_equal(mlen, r.data_len - 5);
	assert_int_equal(dra_plugin_info_decode(r.data + 5, mlen, &info, &e), NV_OK);
	assert_string_equal(info.type, "DRAPlugin");
	assert_string_equal(info.name, "imex.nvl72.io");
	assert_string_equal(info.endpoint, f->endpoint);
	assert_int_equal(info.n_versions, 2);
	dra_plugin_info_clear(&info);
	cli_close(&c);
}

/* Two prepares and a refusal on one connection, which then idles past the
 * read timeout and still serves: the kubelet keeps its connection. */
static void test_grpc_server_prepare_keeps_connection(void **state)
{
	struct fix *f = *state;
	struct dra_claim cl[] = {
	        {.ns = (char *)"team-a", .uid = (char *)"uid-1", .name = (char *)"channel"},
	        {.ns = (char *)"team-a", .uid = (char *)"uid-2", .name = (char *)"channel2"},
	};
	struct dra_claims_req req = {.claims = cl, .n_claims = 2};
	struct dra_prepare_resp resp;
	struct pb_err e;
	struct buf b;
	struct cli c;
	struct reply r;

	buf_init(&b, 4096);
	assert_int_equal(dra_claims_req_encode(&req, &b), NV_OK);
	cli_open(&c, f->path);
	for (int round = 0; round < 2; round++) {
		cli_call(&c, DRA_PATH_PREPARE, b.data, b.len, &r);
		assert_int_equal(r.grpc_status, 0);
		assert_int_equal(dra_prepare_resp_decode(r.data + 5, r.data_len - 5, &resp, &e),
		                 NV_OK);
		assert_int_equal(resp.n_claims, 2);
		assert_string_equal(resp.claims[1].uid, "uid-2");
		assert_string_equal(resp.claims[1].devices[0].device_name, "uid-2");
		dra_prepare_resp_clear(&resp);
		if (round == 0) {
			/* Idle for three read timeouts: nothing arrives, no EOF. */
			struct pollfd pf = {.fd = c.fd, .events = POLLIN};
			assert_int_equal(poll(&pf, 1, 3 * TEST_TIMEOUT_MS), 0);
		}
	}
	cli_call(&c, "/test.Svc/Refuse", NULL, 0, &r);
	assert_int_equal(r.http, 200);
	assert_int_equal(r.grpc_status, GRPC_FAILED_PRECONDITION);
	assert_string_equal(r.grpc_message, "100%25 not ready: tray %C3%A9");
	assert_int_equal(r.data_len, 0);
	assert_int_equal(grpc_server_conns(f->s), 1);
	cli_close(&c);
	buf_clear(&b);
}

/* A malformed request reaches the handler, which names the field. */
static void test_grpc_server_bad_protobuf(void **state)
{
	struct fix *f = *state;
	static const uint8_t bad[] = {0x0a, 0x04, 0x12, 0x05, 'u', 'i'};
	struct cli c;
	struct reply r;
	cli_open(&c, f->path);
	cli_call(&c, DRA_PATH_PREPARE, bad, sizeof(bad), &r);
	assert_int_equal(r.grpc_status, GRPC_INVALID_ARGUMENT);
	assert_non_null(strstr(r.grpc_message, "Claim at byte 2: field 2: length 5 runs past"));
	cli_close(&c);
}

/* ---- refusals on the stream ------------------------------------------------- */

static void test_grpc_server_unknown_method(void **state)
{
	struct fix *f = *state;
	struct cli c;
	struct reply r;
	cli_open(&c, f->path);
	cli_call(&c, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/Nope", NULL, 0, &r);
	assert_int_equal(r.http, 200);
	assert_int_equal(r.grpc_status, GRPC_UNIMPLEMENTED);
	assert_string_equal(r.grpc_message,
	                    "unknown method /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/Nope");
	assert_int_equal(r.data_len, 0);
	/* The connection goes on. */
	cli_call(&c, DRA_PATH_GET_INFO, NULL, 0, &r);
	assert_int_equal(r.grpc_status, 0);
	cli_close(&c);
}

static void test_grpc_server_message_limits(void **state)
{
	struct fix *f = *state;
	uint8_t *big = calloc(1, TEST_MSG_MAX + 64);
	uint8_t b[16];
	struct cli c;
	struct reply r;
	cli_open(&c, f->path);
	/* Larger than msg_max, sent whole. */
	cli_call(&c, DRA_PATH_PREPARE, big, TEST_MSG_MAX + 1, &r);
	assert_int_equal(r.grpc_status, GRPC_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(r.grpc_message, "larger than the limit of 2048"));
	/* Only a prefix that declares 4 GiB - 1. */
	cli_call_raw(&c, DRA_PATH_PREPARE, NULL, b, frame_msg(b, 0, UINT32_MAX, NULL, 0), &r);
	assert_int_equal(r.grpc_status, GRPC_RESOURCE_EXHAUSTED);
	/* Exactly msg_max is served. */
	cli_call(&c, DRA_PATH_PREPARE, big, TEST_MSG_MAX, &r);
	assert_int_equal(r.grpc_status, GRPC_INVALID_ARGUMENT); /* zeros: field number 0 */
	/* Compressed, and a flag that is neither 0 nor 1. */
	cli_call_raw(&c, DRA_PATH_GET_INFO, NULL, b, frame_msg(b, 1, 2, "xx", 2), &r);
	assert_int_equal(r.grpc_status, GRPC_UNIMPLEMENTED);
	assert_non_null(strstr(r.grpc_message, "compressed"));
	cli_call_raw(&c, DRA_PATH_GET_INFO, NULL, b, frame_msg(b, 7, 0, NULL, 0), &r);
	assert_int_equal(r.grpc_status, GRPC_INTERNAL);
	/* No message, a cut message, two messages. */
	cli_call_raw(&c, DRA_PATH_GET_INFO, NULL, "", 0, &r);
	assert_int_equal(r.grpc_status, GRPC_INTERNAL);
	assert_non_null(strstr(r.grpc_message, "no request message"));
	cli_call_raw(&c, DRA_PATH_GET_INFO, NULL, b, frame_msg(b, 0, 9, "abc", 3), &r);
	assert_int_equal(r.grpc_status, GRPC_INTERNAL);
	assert_non_null(strstr(r.grpc_message, "truncated message: 3 of 9 bytes"));
	size_t n = frame_msg(b, 0, 0, NULL, 0);
	n += frame_msg(b + n, 0, 0, NULL, 0);
	cli_call_raw(&c, DRA_PATH_GET_INFO, NULL, b, n, &r);
	assert_int_equal(r.grpc_status, GRPC_INTERNAL);
	assert_non_null(strstr(r.grpc_message, "more than one request message"));
	/* Not gRPC: 415. */
	cli_call_raw(&c, DRA_PATH_GET_INFO, "application/json", b, frame_msg(b, 0, 0, NULL, 0), &r);
	assert_int_equal(r.http, 415);
	/* After all that the connection still serves. */
	cli_call(&c, DRA_PATH_GET_INFO, NULL, 0, &r);
	assert_int_equal(r.grpc_status, 0);
	cli_close(&c);
	free(big);
}

/* ---- a hostile peer --------------------------------------------------------- */

/* The RST_STREAM frames a raw peer saw: stream and error code. */
struct rsts {
	uint32_t sid[64];
	uint32_t code[64];
	size_t n;
};

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads frames until EOF (true) or WAIT_MS without it (false); with
 * stop_on_rst, until the first RST_STREAM instead. A GOAWAY's error code
 * goes to *goaway_code (-1 when none came), RST_STREAM frames to *rs (when
 * not NULL). */
static bool raw_read(int fd, int64_t *goaway_code, struct rsts *rs, bool stop_on_rst)
{
	uint8_t b[65536];
	size_t have = 0;
	*goaway_code = -1;
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, WAIT_MS) != 1)
			return false;
		ssize_t n = recv(fd, b + have, sizeof(b) - have, 0);
		if (n <= 0)
			return true; /* EOF, or ECONNRESET from a server that closed */
		have += (size_t)n;
		size_t off = 0;
		while (off + 9 <= have) {
			size_t len = (size_t)b[off] << 16 | (size_t)b[off + 1] << 8 | b[off + 2];
			if (off + 9 + len > have)
				break;
			const uint8_t *fr = b + off;
			if (fr[3] == NGHTTP2_GOAWAY && len >= 8)
				*goaway_code = be32(fr + 13);
			if (fr[3] == NGHTTP2_RST_STREAM && len >= 4 && rs && rs->n < 64) {
				rs->sid[rs->n] = be32(fr + 5) & 0x7fffffffu;
				rs->code[rs->n++] = be32(fr + 9);
				if (stop_on_rst)
					return true;
			}
			off += 9 + len;
		}
		memmove(b, b + off, have - off);
		have -= off;
		assert_true(have < sizeof(b)); /* no frame the server sends is this big */
	}
}

static bool raw_until_eof(int fd, int64_t *goaway_code)
{
	return raw_read(fd, goaway_code, NULL, false);
}

static void raw_send(int fd, const void *d, size_t n)
{
	(void)send(fd, d, n, MSG_NOSIGNAL); /* the server may close first */
}

static void raw_frame(int fd, uint8_t type, uint8_t flags, uint32_t sid, const void *p, size_t n)
{
	uint8_t h[9] = {
	        (uint8_t)(n >> 16),   (uint8_t)(n >> 8),    (uint8_t)n,          type,        flags,
	        (uint8_t)(sid >> 24), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8), (uint8_t)sid};
	raw_send(fd, h, sizeof(h));
	if (n)
		raw_send(fd, p, n);
}

static void test_grpc_server_garbage(void **state)
{
	struct fix *f = *state;
	static const char http1[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	int64_t code;
	int fd = sock_connect(f->path);
	raw_send(fd, http1, sizeof(http1) - 1);
	assert_true(raw_until_eof(fd, &code));
	assert_int_equal(code, NGHTTP2_PROTOCOL_ERROR);
	(void)close(fd);

	/* A valid preface, then a frame of a type and size nobody sends. */
	fd = sock_connect(f->path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
	uint8_t junk[64];
	memset(junk, 0xa5, sizeof(junk));
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 3, junk, 6); /* SETTINGS on a stream */
	assert_true(raw_until_eof(fd, &code));
	assert_int_equal(code, NGHTTP2_PROTOCOL_ERROR);
	(void)close(fd);
}

/* HEADERS frames that open streams and never end them, far past the
 * stream limit and the bucket: GOAWAY ENHANCE_YOUR_CALM, and the server
 * goes on serving others. */
static void test_grpc_server_stream_flood(void **state)
{
	struct fix *f = *state;
	nghttp2_hd_deflater *def;
	nghttp2_nv nva[] = {
	        CNV(":method", "POST"),
	        CNV(":scheme", "http"),
	        CNV(":path", DRA_PATH_GET_INFO),
	        CNV(":authority", "x"),
	        CNV("content-type", "application/grpc"),
	};
	uint8_t blk[512];
	int64_t code;
	struct cli c;
	struct reply r;

	assert_int_equal(nghttp2_hd_deflate_new(&def, 4096), 0);
	int fd = sock_connect(f->path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
	for (uint32_t sid = 1; sid < 2 * 500; sid += 2) {
		ssize_t n = nghttp2_hd_deflate_hd(def, blk, sizeof(blk), nva, 5);
		assert_true(n > 0);
		raw_frame(fd, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, sid, blk, (size_t)n);
	}
	assert_true(raw_until_eof(fd, &code));
	assert_int_equal(code, NGHTTP2_ENHANCE_YOUR_CALM);
	(void)close(fd);
	nghttp2_hd_deflate_del(def);

	cli_open(&c, f->path);
	cli_call(&c, DRA_PATH_GET_INFO, NULL, 0, &r);
	assert_int_equal(r.grpc_status, 0);
	cli_close(&c);
}

/* Rapid reset (CVE-2023-44487): streams opened and reset at once still
 * take their tokens, so the peer is sent GOAWAY ENHANCE_YOUR_CALM. */
static void test_grpc_server_rapid_reset(void **state)
{
	struct fix *f = *state;
	nghttp2_hd_deflater *def;
	nghttp2_nv nva[] = {
	        CNV(":method", "POST"),
	        CNV(":scheme", "http"),
	        CNV(":path", DRA_PATH_GET_INFO),
	        CNV(":authority", "x"),
	        CNV("content-type", "application/grpc"),
	};
	static const uint8_t cancel[4] = {0, 0, 0, NGHTTP2_CANCEL};
	uint8_t blk[512];
	int64_t code;
	assert_int_equal(nghttp2_hd_deflate_new(&def, 4096), 0);
	int fd = sock_connect(f->path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
	for (uint32_t sid = 1; sid < 2 * 500; sid += 2) {
		ssize_t n = nghttp2_hd_deflate_hd(def, blk, sizeof(blk), nva, 5);
		assert_true(n > 0);
		raw_frame(fd, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, sid, blk, (size_t)n);
		raw_frame(fd, NGHTTP2_RST_STREAM, 0, sid, cancel, sizeof(cancel));
	}
	assert_true(raw_until_eof(fd, &code));
	assert_int_equal(code, NGHTTP2_ENHANCE_YOUR_CALM);
	(void)close(fd);
	nghttp2_hd_deflate_del(def);
}

/* A peer that sends PINGs and never reads the answers is closed, once
 * nghttp2's queue of acknowledgements or the deadline on unread output
 * says so. */
static void test_grpc_server_ping_flood(void **state)
{
	struct fix *f = *state;
	static const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	int64_t code;
	int fd = sock_connect(f->path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
	for (int i = 0; i < 20000; i++)
		raw_frame(fd, NGHTTP2_PING, 0, 0, data, sizeof(data));
	assert_true(raw_until_eof(fd, &code));
	(void)close(fd);
}

/* Opens streams on a raw connection: HEADERS of a GetInfo call without
 * END_STREAM, with one extra header of extra_len bytes when extra_len > 0. */
static int raw_open_streams(const char *path, uint32_t n, size_t extra_len)
{
	nghttp2_hd_deflater *def;
	char *extra = malloc(extra_len + 1);
	memset(extra, 'v', extra_len);
	extra[extra_len] = '\0';
	nghttp2_nv nva[] = {
	        CNV(":method", "POST"),
	        CNV(":scheme", "http"),
	        CNV(":path", DRA_PATH_GET_INFO),
	        CNV(":authority", "x"),
	        CNV("content-type", "application/grpc"),
	        CNV("x-extra", extra),
	};
	uint8_t blk[8192];
	assert_int_equal(nghttp2_hd_deflate_new(&def, 4096), 0);
	int fd = sock_connect(path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	raw_frame(fd, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
	for (uint32_t i = 0; i < n; i++) {
		ssize_t len = nghttp2_hd_deflate_hd(def, blk, sizeof(blk), nva, extra_len ? 6 : 5);
		assert_true(len > 0);
		raw_frame(fd, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 2 * i + 1, blk,
		          (size_t)len);
	}
	nghttp2_hd_deflate_del(def);
	free(extra);
	return fd;
}

/* Nine streams left open against a limit of eight: nghttp2 refuses the
 * ninth, and the read deadline closes the connection. */
static void test_grpc_server_streams_max(void **state)
{
	struct fix *f = *state;
	struct rsts rs = {0};
	int64_t code;
	int fd = raw_open_streams(f->path, 9, 0);
	assert_true(raw_read(fd, &code, &rs, false));
	(void)close(fd);
	assert_int_equal(rs.n, 1);
	assert_int_equal(rs.sid[0], 17);
	assert_int_equal(rs.code[0], NGHTTP2_REFUSED_STREAM);
	assert_int_equal(code, NGHTTP2_NO_ERROR);
}

/* A header list past header_list_max resets the stream only: no GOAWAY,
 * and the server serves on. */
static void test_grpc_server_header_list_max(void **state)
{
	struct fix *f = *state;
	struct rsts rs = {0};
	int64_t code;
	int fd = raw_open_streams(f->path, 1, 5000);
	assert_true(raw_read(fd, &code, &rs, true));
	assert_int_equal(rs.n, 1);
	assert_int_equal(rs.sid[0], 1);
	assert_int_equal(rs.code[0], NGHTTP2_INTERNAL_ERROR);
	assert_int_equal(code, -1);
	(void)close(fd);

	struct cli c;
	struct reply r;
	cli_open(&c, f->path);
	cli_call(&c, DRA_PATH_GET_INFO, NULL, 0, &r);
	assert_int_equal(r.grpc_status, 0);
	cli_close(&c);
}

/* A peer that stops in the middle of its preface is closed after the read
 * timeout (waited for as the EOF it causes). */
static void test_grpc_server_stalled_preface(void **state)
{
	struct fix *f = *state;
	int64_t code;
	int fd = sock_connect(f->path);
	raw_send(fd, NGHTTP2_CLIENT_MAGIC, 10);
	assert_true(raw_until_eof(fd, &code));
	(void)close(fd);

	/* And one that leaves a request half sent. */
	struct cli c;
	cli_open(&c, f->path);
	nghttp2_nv nva[] = {
	        CNV(":method", "POST"),
	        CNV(":scheme", "http"),
	        CNV(":path", DRA_PATH_GET_INFO),
	        CNV(":authority", "x"),
	        CNV("content-type", "application/grpc"),
	};
	struct reply r = {.grpc_status = -1};
	c.r = &r;
	c.sid = nghttp2_submit_headers(c.h2, NGHTTP2_FLAG_NONE, -1, NULL, nva, 5, NULL);
	assert_true(c.sid > 0);
	while (!c.eof)
		cli_pump(&c);
	assert_true(c.goaway);
	cli_close(&c);
}

static void test_grpc_server_conns_max(void **state)
{
	struct fix *f = *state;
	int64_t code;
	struct cli c, cs[4];
	struct reply r;
	/* Four connections that completed a call hold every slot. */
	for (int i = 0; i < 4; i++) {
		cli_open(&cs[i], f->path);
		cli_call(&cs[i], DRA_PATH_GET_INFO, NULL, 0, &r);
		assert_int_equal(r.grpc_status, 0);
	}
	assert_int_equal(grpc_server_conns(f->s), 4);
	int fd = sock_connect(f->path);
	assert_true(raw_until_eof(fd, &code));
	assert_int_equal(code, -1); /* closed at once, nothing said */
	(void)close(fd);
	cli_close(&cs[0]);
	/* A slot is free again once the server has seen the close. */
	bool served = false;
	for (int tries = 0; tries < 1000 && !served; tries++) {
		cli_open(&c, f->path);
		served = cli_try(&c, DRA_PATH_GET_INFO, NULL, "\0\0\0\0\0", 5, &r);
		if (!served)
			cli_close(&c);
	}
	assert_true(served);
	assert_int_equal(r.grpc_status, 0);
	cli_close(&c);
	for (int i = 1; i < 4; i++)
		cli_close(&cs[i]);
}

/* ---- configuration and the socket file -------------------------------------- */

static void test_grpc_server_new_config(void **state)
{
	const struct grpc_method dup[] = {{"/a.B/C", h_refuse, NULL}, {"/a.B/C", h_refuse, NULL}};
	const struct grpc_method rel[] = {{"a.B/C", h_refuse, NULL}};
	struct grpc_config cfg = {.socket_path = "x.sock", .methods = dup, .n_methods = 2};
	struct grpc_server *s = NULL;
	char longp[200];
	(void)state;
	assert_int_equal(grpc_server_new(&cfg, &s), NV_E_CONFIG);
	cfg.methods = rel;
	cfg.n_methods = 1;
	assert_int_equal(grpc_server_new(&cfg, &s), NV_E_CONFIG);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	cfg.socket_path = longp;
	cfg.n_methods = 0;
	assert_int_equal(grpc_server_new(&cfg, &s), NV_E_CONFIG);
	cfg.socket_path = NULL;
	assert_int_equal(grpc_server_new(&cfg, &s), NV_E_CONFIG);
	assert_null(s);
	assert_string_equal(grpc_code_name(GRPC_UNIMPLEMENTED), "UNIMPLEMENTED");
	assert_string_equal(grpc_code_name((enum grpc_code)99), "UNKNOWN_CODE");
}

/* A stale socket is replaced; a regular file is left alone and refused. */
static void test_grpc_server_start_socket_path(void **state)
{
	char dir[64], path[128], stale[160];
	struct grpc_config cfg = {.socket_path = path, .socket_mode = 0660};
	struct grpc_server *s;
	struct stat st;
	(void)state;
	(void)snprintf(dir, sizeof(dir), "/tmp/nvl72-grpc-test.XXXXXX");
	assert_non_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/dra.sock", dir);
	(void)snprintf(stale, sizeof(stale), "%s/stale", dir);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(grpc_server_new(&cfg, &s), NV_OK);
		assert_int_equal(grpc_server_start(s), NV_OK);
		assert_int_equal(grpc_server_start(s), NV_E_STATE);
		assert_int_equal(lstat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0660);
		if (i == 0) {
			/* Leave the socket behind, as a crash would. */
			assert_int_equal(rename(path, stale), 0);
			grpc_server_free(s);
			assert_int_equal(rename(stale, path), 0);
		} else {
			grpc_server_free(s);
		}
	}
	assert_int_equal(access(path, F_OK), -1);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	(void)fclose(fp);
	assert_int_equal(grpc_server_new(&cfg, &s), NV_OK);
	assert_int_equal(grpc_server_start(s), NV_E_EXISTS);
	grpc_server_free(s);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_grpc_server_get_info, fix_setup, fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_prepare_keeps_connection,
	                                        fix_setup, fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_bad_protobuf, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_unknown_method, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_message_limits, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_garbage, fix_setup, fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_stream_flood, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_rapid_reset, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_ping_flood, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_streams_max, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_header_list_max, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_stalled_preface, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test_setup_teardown(test_grpc_server_conns_max, fix_setup,
	                                        fix_teardown),
	        cmocka_unit_test(test_grpc_server_new_config),
	        cmocka_unit_test(test_grpc_server_start_socket_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
