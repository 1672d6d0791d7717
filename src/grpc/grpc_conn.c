// SPDX-License-Identifier: Apache-2.0
// One gRPC connection: an nghttp2 server session fed with the peer's bytes,
// the gRPC framing of unary calls on its streams (headers, the 5-byte
// message prefix, trailers) and the bounds that keep a hostile peer small.
#include "grpc_int.h"

#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/base.h"

#define GRPC_PREFIX_LEN 5
#define GRPC_PREFACE_LEN 24 /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define GRPC_OUT_CHUNK (64u << 10)

struct grpc_stream {
	struct grpc_stream *next;
	int32_t id;
	char path[GRPC_PATH_MAX + 1];
	bool path_long;
	bool post;
	bool ct_ok;
	uint32_t hdr_bytes;
	int64_t timeout_ms; /* from grpc-timeout, -1 without */
	const struct grpc_method *m;
	struct buf body; /* prefix + message as received */
	bool responded;
	int64_t begin_ms;   /* HEADERS seen */
	int64_t respond_ms; /* response submitted; 0 before */
	bool sent_all;      /* the last frame of the response went out */
	/* The response: prefix + message, then the trailers. */
	uint8_t *out;
	size_t out_len, out_off;
	enum grpc_code code;
};

struct grpc_conn {
	const struct grpc_opts *o;
	uint64_t id;
	nghttp2_session *h2;
	struct grpc_stream *streams;
	size_t buffered; /* request bytes held by all streams */
	int64_t now_ms;
	double tokens;
	int32_t last_stream; /* highest stream id the peer opened */
	int64_t tokens_ms;
	bool closing;
	/* Frame boundaries of the input, for the read deadline. */
	size_t preface_left;
	uint8_t fhdr[9];
	size_t fhdr_have;
	size_t payload_left;
	int64_t accept_ms, frame_ms;
	struct buf out;
	size_t out_off;
	int64_t out_ms; /* when the pending output was produced */
};

#define COMP "grpc"

static struct grpc_stream *grpc_stream_get(struct grpc_conn *c, int32_t id)
{
	return nghttp2_session_get_stream_user_data(c->h2, id);
}

static void grpc_stream_free(struct grpc_conn *c, struct grpc_stream *s)
{
	for (struct grpc_stream **pp = &c->streams; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	c->buffered -= s->body.len;
	buf_clear(&s->body);
	free(s->out);
	free(s);
}

/* ---- responses -------------------------------------------------------------- */

#define NV(n, v, vlen)                                                                             \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE        \
	}

static void grpc_stream_done_rx(struct grpc_conn *c, struct grpc_stream *s)
{
	c->buffered -= s->body.len;
	buf_clear(&s->body);
	s->responded = true;
	s->respond_ms = c->now_ms;
}

/* An answer that is only headers, ending the stream: an HTTP error
 * (status != 200) or gRPC's trailers-only form. */
static void grpc_respond_headers(struct grpc_conn *c, struct grpc_stream *s, int http,
                                 enum grpc_code code, const char *msg)
{
	char st[8], gs[8];
	struct buf enc;
	buf_init(&enc, GRPC_STATUS_MSG_MAX * 3);
	(void)snprintf(st, sizeof(st), "%d", http);
	(void)snprintf(gs, sizeof(gs), "%d", (int)code);
	if (msg)
		(void)grpc_message_encode(msg, &enc);
	nghttp2_nv nva[] = {
	        NV(":status", st, strlen(st)),
	        NV("content-type", "application/grpc", 16),
	        NV("grpc-status", gs, strlen(gs)),
	        NV("grpc-message", buf_str(&enc), enc.len),
	};
	size_t n = http != 200 ? 1 : enc.len ? 4 : 3;
	grpc_stream_done_rx(c, s);
	if (nghttp2_submit_response(c->h2, s->id, nva, n, NULL) != 0)
		(void)nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id,
		                                NGHTTP2_INTERNAL_ERROR);
	log_debug(COMP, "call refused", "server=%s conn=%llu stream=%d path=%s http=%d status=%s",
	          c->o->name, (unsigned long long)c->id, (int)s->id, s->path, http,
	          grpc_code_name(code));
	buf_clear(&enc);
}

static void grpc_respond_status(struct grpc_conn *c, struct grpc_stream *s, enum grpc_code code,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void grpc_respond_status(struct grpc_conn *c, struct grpc_stream *s, enum grpc_code code,
                                const char *fmt, ...)
{
	char msg[GRPC_STATUS_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	grpc_respond_headers(c, s, 200, code, msg);
}

/* Feeds the response message to nghttp2; at its end the trailers follow. */
static ssize_t grpc_data_read(nghttp2_session *h2, int32_t id, uint8_t *dst, size_t len,
                              uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct grpc_conn *c = user;
	struct grpc_stream *s = src->ptr;
	size_t n = s->out_len - s->out_off;
	(void)h2;
	if (n > len)
		n = len;
	memcpy(dst, s->out + s->out_off, n);
	s->out_off += n;
	if (s->out_off < s->out_len)
		return (ssize_t)n;
	*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	char gs[8];
	(void)snprintf(gs, sizeof(gs), "%d", (int)s->code);
	nghttp2_nv tr[] = {NV("grpc-status", gs, strlen(gs))};
	if (nghttp2_submit_trailer(c->h2, id, tr, ARRAY_LEN(tr)) != 0)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return (ssize_t)n;
}

static void grpc_respond_ok(struct grpc_conn *c, struct grpc_stream *s, const struct buf *resp)
{
	size_t n = resp->len;
	s->out = xmalloc(GRPC_PREFIX_LEN + n);
	s->out[0] = 0;
	s->out[1] = (uint8_t)(n >> 24);
	s->out[2] = (uint8_t)(n >> 16);
	s->out[3] = (uint8_t)(n >> 8);
	s->out[4] = (uint8_t)n;
	if (n)
		memcpy(s->out + GRPC_PREFIX_LEN, resp->data, n);
	s->out_len = GRPC_PREFIX_LEN + n;
	s->code = GRPC_OK;
	nghttp2_nv nva[] = {
	        NV(":status", "200", 3),
	        NV("content-type", "application/grpc", 16),
	};
	nghttp2_data_provider dp = {.source.ptr = s, .read_callback = grpc_data_read};
	grpc_stream_done_rx(c, s);
	if (nghttp2_submit_response(c->h2, s->id, nva, ARRAY_LEN(nva), &dp) != 0)
		(void)nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id,
		                                NGHTTP2_INTERNAL_ERROR);
}

/* The request is complete: check its message and run the handler. */
static void grpc_dispatch(struct grpc_conn *c, struct grpc_stream *s)
{
	const uint8_t *b = (const uint8_t *)s->body.data;
	if (!s->m) { /* grpc_headers_done answers first; kept for safety */
		grpc_respond_status(c, s, GRPC_UNIMPLEMENTED, "unknown method");
		return;
	}
	if (s->body.len < GRPC_PREFIX_LEN) {
		grpc_respond_status(c, s, GRPC_INTERNAL, "%s",
		                    s->body.len ? "truncated message prefix"
		                                : "no request message for a unary method");
		return;
	}
	size_t mlen = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (s->body.len - GRPC_PREFIX_LEN < mlen) {
		grpc_respond_status(c, s, GRPC_INTERNAL, "truncated message: %zu of %zu bytes",
		                    s->body.len - GRPC_PREFIX_LEN, mlen);
		return;
	}
	struct grpc_call call = {.path = s->path, .req = b + GRPC_PREFIX_LEN, .req_len = mlen};
	if (s->timeout_ms >= 0)
		call.deadline_ms = s->begin_ms + s->timeout_ms;
	buf_init(&call.resp, c->o->msg_max);
	buf_init(&call.status_msg, GRPC_STATUS_MSG_MAX);
	int64_t t0 = time_mono_ms();
	enum grpc_code code = s->m->fn(s->m->arg, &call);
	log_debug(COMP, "call",
	          "server=%s conn=%llu path=%s status=%s req_bytes=%zu resp_bytes=%zu "
	          "ms=%lld",
	          c->o->name, (unsigned long long)c->id, s->path, grpc_code_name(code), mlen,
	          call.resp.len, (long long)(time_mono_ms() - t0));
	if (code == GRPC_OK)
		grpc_respond_ok(c, s, &call.resp);
	else
		grpc_respond_headers(c, s, 200, code,
		                     call.status_msg.len ? buf_str(&call.status_msg) : NULL);
	buf_clear(&call.resp);
	buf_clear(&call.status_msg);
}

/* ---- nghttp2 callbacks ------------------------------------------------------ */

/* Every frame header: a HEADERS frame that opens a stream takes a token
 * from the bucket, before nghttp2 decides anything about the stream, so
 * streams it refuses (past SETTINGS_MAX_CONCURRENT_STREAMS) count too. */
static int grpc_on_begin_frame(nghttp2_session *h2, const nghttp2_frame_hd *hd, void *user)
{
	struct grpc_conn *c = user;
	(void)h2;
	if (hd->type != NGHTTP2_HEADERS || hd->stream_id <= c->last_stream)
		return 0;
	c->last_stream = hd->stream_id;
	double burst = c->o->stream_burst;
	c->tokens += (double)(c->now_ms - c->tokens_ms) * burst / 1000.0;
	if (c->tokens > burst)
		c->tokens = burst;
	c->tokens_ms = c->now_ms;
	if (c->tokens >= 1.0) {
		c->tokens -= 1.0;
		return 0;
	}
	log_warn(COMP, "closing a connection that opens streams too fast",
	         "server=%s conn=%llu burst=%u", c->o->name, (unsigned long long)c->id,
	         (unsigned)c->o->stream_burst);
	grpc_conn_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM);
	return NGHTTP2_ERR_CALLBACK_FAILURE; /* read no further */
}

/* A stream nghttp2 accepted: its state. */
static int grpc_on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
	struct grpc_conn *c = user;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct grpc_stream *s = xcalloc(1, sizeof(*s));
	s->id = frame->hd.stream_id;
	s->timeout_ms = -1;
	s->begin_ms = c->now_ms;
	buf_init(&s->body, c->o->msg_max + GRPC_PREFIX_LEN);
	s->next = c->streams;
	c->streams = s;
	(void)nghttp2_session_set_stream_user_data(h2, s->id, s);
	return 0;
}

static bool grpc_ct_ok(const uint8_t *v, size_t len)
{
	static const char ct[] = "application/grpc";
	size_t n = sizeof(ct) - 1;
	return len >= n && memcmp(v, ct, n) == 0 && (len == n || v[n] == '+' || v[n] == ';');
}

static int grpc_on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                          size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                          void *user)
{
	struct grpc_conn *c = user;
	struct grpc_stream *s = grpc_stream_get(c, frame->hd.stream_id);
	(void)h2;
	(void)flags;
	if (!s || s->responded)
		return 0;
	/* RFC 7541 §4.1 counts 32 bytes of overhead per field. */
	s->hdr_bytes += (uint32_t)(namelen + valuelen + 32);
	if (s->hdr_bytes > c->o->header_list_max) {
		log_debug(COMP, "header list too large", "server=%s conn=%llu stream=%d max=%u",
		          c->o->name, (unsigned long long)c->id, (int)s->id,
		          (unsigned)c->o->header_list_max);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0; /* trailers of the request carry nothing we need */
	if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
		s->post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
	} else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
		s->path_long = valuelen > GRPC_PATH_MAX;
		size_t n = s->path_long ? GRPC_PATH_MAX : valuelen;
		memcpy(s->path, value, n);
		s->path[n] = '\0';
	} else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
		s->ct_ok = grpc_ct_ok(value, valuelen);
	} else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
		int64_t ms;
		if (grpc_timeout_parse((const char *)value, valuelen, &ms) == NV_OK)
			s->timeout_ms = ms;
	}
	return 0;
}

/* The end of the request's header block: refuse what cannot be served. */
static void grpc_headers_done(struct grpc_conn *c, struct grpc_stream *s)
{
	if (!s->post) {
		grpc_respond_headers(c, s, 405, GRPC_UNIMPLEMENTED, NULL);
		return;
	}
	if (!s->ct_ok) {
		grpc_respond_headers(c, s, 415, GRPC_INTERNAL, NULL);
		return;
	}
	for (size_t i = 0; !s->path_long && i < c->o->n_methods; i++)
		if (strcmp(c->o->methods[i].path, s->path) == 0)
			s->m = &c->o->methods[i];
	if (!s->m)
		grpc_respond_status(c, s, GRPC_UNIMPLEMENTED, "unknown method %s%s", s->path,
		                    s->path_long ? "..." : "");
}

static int grpc_on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
	struct grpc_conn *c = user;
	(void)h2;
	if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
		return 0;
	struct grpc_stream *s = grpc_stream_get(c, frame->hd.stream_id);
	if (!s || s->responded)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
		grpc_headers_done(c, s);
	if (!s->responded && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		grpc_dispatch(c, s);
	return 0;
}

/* Checks the 5-byte prefix once it is in: the flag and the length. */
static bool grpc_prefix_check(struct grpc_conn *c, struct grpc_stream *s)
{
	const uint8_t *b = (const uint8_t *)s->body.data;
	size_t mlen = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (b[0] == 1) {
		grpc_respond_status(c, s, GRPC_UNIMPLEMENTED,
		                    "compressed messages are not supported (identity only)");
		return false;
	}
	if (b[0] != 0) {
		grpc_respond_status(c, s, GRPC_INTERNAL, "invalid compressed flag %u",
		                    (unsigned)b[0]);
		return false;
	}
	if (mlen > c->o->msg_max) {
		grpc_respond_status(c, s, GRPC_RESOURCE_EXHAUSTED,
		                    "message of %zu bytes is larger than the limit of %zu", mlen,
		                    c->o->msg_max);
		return false;
	}
	return true;
}

static int grpc_on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                              size_t len, void *user)
{
	struct grpc_conn *c = user;
	struct grpc_stream *s = grpc_stream_get(c, id);
	(void)h2;
	(void)flags;
	if (!s || s->responded)
		return 0;
	if (len > c->o->conn_buf_max - c->buffered) {
		log_warn(COMP, "closing a connection that holds too much request data",
		         "server=%s conn=%llu max=%zu", c->o->name, (unsigned long long)c->id,
		         c->o->conn_buf_max);
		grpc_conn_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM);
		return 0;
	}
	if (s->body.len < GRPC_PREFIX_LEN) {
		size_t n =
		        GRPC_PREFIX_LEN - s->body.len < len ? GRPC_PREFIX_LEN - s->body.len : len;
		(void)buf_append(&s->body, data, n);
		c->buffered += n;
		data += n;
		len -= n;
		if (s->body.len < GRPC_PREFIX_LEN || !grpc_prefix_check(c, s))
			return 0;
	}
	const uint8_t *b = (const uint8_t *)s->body.data;
	size_t mlen = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (len > GRPC_PREFIX_LEN + mlen - s->body.len) {
		grpc_respond_status(c, s, GRPC_INTERNAL,
		                    "more than one request message for a unary method");
		return 0;
	}
	if (len && buf_append(&s->body, data, len) == NV_OK)
		c->buffered += len;
	return 0;
}

/* Once our last frame of a stream is out while the peer still sends (a
 * request refused early), RST_STREAM NO_ERROR tells it to stop (RFC 9113
 * §8.1). */
static int grpc_on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
	struct grpc_conn *c = user;
	if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
	    !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct grpc_stream *s = grpc_stream_get(c, frame->hd.stream_id);
	if (s)
		s->sent_all = true;
	if (nghttp2_session_get_stream_remote_close(h2, frame->hd.stream_id) == 0)
		(void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
		                                NGHTTP2_NO_ERROR);
	return 0;
}

static int grpc_on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user)
{
	struct grpc_conn *c = user;
	struct grpc_stream *s = grpc_stream_get(c, id);
	(void)error_code;
	if (s) {
		(void)nghttp2_session_set_stream_user_data(h2, id, NULL);
		grpc_stream_free(c, s);
	}
	return 0;
}

/* ---- the connection --------------------------------------------------------- */

static nghttp2_session *grpc_session_new(struct grpc_conn *c)
{
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	nghttp2_session *h2 = NULL;
	if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
		goto out;
	nghttp2_session_callbacks_set_on_begin_frame_callback(cb, grpc_on_begin_frame);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, grpc_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, grpc_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, grpc_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, grpc_on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, grpc_on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, grpc_on_stream_close);
	/* Rapid reset (CVE-2023-44487) is capped by nghttp2 as well as by the
	 * stream bucket; closed streams are not kept for priority. */
	nghttp2_option_set_stream_reset_rate_limit(opt, c->o->stream_burst, c->o->stream_burst);
	nghttp2_option_set_no_closed_streams(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	if (nghttp2_session_server_new2(&h2, cb, c, opt) != 0)
		h2 = NULL;
out:
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	return h2;
}

struct grpc_conn *grpc_conn_new(const struct grpc_opts *o, uint64_t id, int64_t now_ms)
{
	struct grpc_conn *c = xcalloc(1, sizeof(*c));
	c->o = o;
	c->id = id;
	c->now_ms = c->accept_ms = c->tokens_ms = now_ms;
	c->tokens = o->stream_burst;
	c->preface_left = GRPC_PREFACE_LEN;
	buf_init(&c->out, 4 * GRPC_OUT_CHUNK);
	c->h2 = grpc_session_new(c);
	if (!c->h2) {
		log_error(COMP, "cannot make an HTTP/2 session", "server=%s", o->name);
		abort();
	}
	nghttp2_settings_entry iv[] = {
	        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o->streams_max},
	        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, o->header_list_max},
	        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	};
	(void)nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, ARRAY_LEN(iv));
	return c;
}

void grpc_conn_free(struct grpc_conn *c)
{
	if (!c)
		return;
	nghttp2_session_del(c->h2); /* closes the streams through the callback */
	while (c->streams)
		grpc_stream_free(c, c->streams);
	buf_clear(&c->out);
	free(c);
}

/* Follows frame boundaries in the input so the deadline knows whether the
 * peer is in the middle of something. */
static void grpc_conn_track(struct grpc_conn *c, const uint8_t *d, size_t len)
{
	while (len) {
		size_t n;
		if (!c->preface_left && !c->fhdr_have && !c->payload_left)
			c->frame_ms = c->now_ms;
		if (c->preface_left) {
			n = c->preface_left < len ? c->preface_left : len;
			c->preface_left -= n;
		} else if (c->fhdr_have < sizeof(c->fhdr)) {
			n = sizeof(c->fhdr) - c->fhdr_have < len ? sizeof(c->fhdr) - c->fhdr_have
			                                         : len;
			memcpy(c->fhdr + c->fhdr_have, d, n);
			c->fhdr_have += n;
			if (c->fhdr_have == sizeof(c->fhdr)) {
				c->payload_left = (size_t)c->fhdr[0] << 16 |
				                  (size_t)c->fhdr[1] << 8 | c->fhdr[2];
				if (!c->payload_left)
					c->fhdr_have = 0;
			}
		} else {
			n = c->payload_left < len ? c->payload_left : len;
			c->payload_left -= n;
			if (!c->payload_left)
				c->fhdr_have = 0;
		}
		d += n;
		len -= n;
	}
}

enum nv_err grpc_conn_recv(struct grpc_conn *c, const uint8_t *data, size_t len, int64_t now_ms)
{
	c->now_ms = now_ms;
	if (c->closing)
		return NV_E_STATE;
	grpc_conn_track(c, data, len);
	ssize_t rv = nghttp2_session_mem_recv(c->h2, data, len);
	if (rv >= 0)
		return c->closing ? NV_E_PARSE : NV_OK;
	if (c->closing)
		return NV_E_PARSE; /* a callback closed it and said why */
	log_warn(COMP, "closing a connection after an HTTP/2 error",
	         "server=%s conn=%llu err=\"%s\"", c->o->name, (unsigned long long)c->id,
	         rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC
	                 ? "not an HTTP/2 client (bad connection preface)"
	                 : nghttp2_strerror((int)rv));
	grpc_conn_goaway(c, rv == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
	                                              : NGHTTP2_PROTOCOL_ERROR);
	return NV_E_PARSE;
}

void grpc_conn_goaway(struct grpc_conn *c, uint32_t h2_error)
{
	if (c->closing)
		return;
	c->closing = true;
	(void)nghttp2_session_terminate_session(c->h2, h2_error);
}

const uint8_t *grpc_conn_out(struct grpc_conn *c, size_t *len, int64_t now_ms)
{
	if (c->out_off == c->out.len) {
		buf_reset(&c->out);
		c->out_off = 0;
		while (c->out.len < GRPC_OUT_CHUNK) {
			const uint8_t *p;
			ssize_t n = nghttp2_session_mem_send(c->h2, &p);
			if (n <= 0) {
				if (n < 0)
					c->closing = true;
				break;
			}
			if (buf_append(&c->out, p, (size_t)n) != NV_OK) {
				c->closing = true; /* a frame larger than the buffer: a bug */
				break;
			}
		}
		if (c->out.len)
			c->out_ms = now_ms;
	}
	*len = c->out.len - c->out_off;
	return (const uint8_t *)c->out.data + c->out_off;
}

void grpc_conn_sent(struct grpc_conn *c, size_t n)
{
	c->out_off += n <= c->out.len - c->out_off ? n : c->out.len - c->out_off;
}

bool grpc_conn_done(const struct grpc_conn *c)
{
	if (c->out_off < c->out.len)
		return false;
	if (nghttp2_session_want_write(c->h2))
		return false;
	return c->closing || !nghttp2_session_want_read(c->h2);
}

static int64_t grpc_min_deadline(int64_t a, int64_t b)
{
	return a == 0 || (b != 0 && b < a) ? b : a;
}

int64_t grpc_conn_deadline(const struct grpc_conn *c)
{
	int64_t t = c->o->read_timeout_ms, d = 0;
	if (c->preface_left)
		d = c->accept_ms + t;
	else if (c->fhdr_have || c->payload_left)
		d = c->frame_ms + t;
	if (c->out_off < c->out.len)
		d = grpc_min_deadline(d, c->out_ms + t);
	for (const struct grpc_stream *s = c->streams; s; s = s->next) {
		if (!s->responded)
			d = grpc_min_deadline(d, s->begin_ms + t);
		else if (!s->sent_all)
			d = grpc_min_deadline(d, s->respond_ms + t);
	}
	return d;
}
