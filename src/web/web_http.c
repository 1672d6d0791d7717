// SPDX-License-Identifier: Apache-2.0
// HTTP (plain or TLS) on the service thread: probes, /metrics, the embedded
// dashboard and the routes others register, with capped request bodies.
#include "web_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nvl72/alloc.h"
#include "nvl72/log.h"
#include "nvl72/metrics.h"
#include "nvl72/parse.h"
#include "web_assets.h"

#define CT_TEXT "text/plain; charset=utf-8"
#define CT_JSON "application/json"
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"

/* ---- the transaction ------------------------------------------------------- */

void web_http_release(struct web_http *h)
{
	if (h == NULL)
		return;
	buf_clear(&h->body);
	buf_clear(&h->out);
	secure_free_str(h->bearer);
	free(h);
}

static enum web_method method_of(struct lws *wsi)
{
	char *uri = NULL;
	int ulen = 0;
	switch (lws_http_get_uri_and_method(wsi, &uri, &ulen)) {
	case LWSHUMETH_GET:
		return WEB_GET;
	case LWSHUMETH_POST:
		return WEB_POST;
	case LWSHUMETH_HEAD:
		return WEB_HEAD;
	default:
		return WEB_OTHER;
	}
}

/* Copies one header into out (cap bytes with the NUL); "" when absent or
 * longer than the room. */
static void header_copy(struct lws *wsi, enum lws_token_indexes t, char *out, size_t cap)
{
	out[0] = '\0';
	int n = lws_hdr_total_length(wsi, t);
	if (n <= 0 || (size_t)n >= cap)
		return;
	if (lws_hdr_copy(wsi, out, (int)cap, t) < 0)
		out[0] = '\0';
}

char *web_request_bearer(struct lws *wsi, const char *path)
{
	int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
	if (n <= 0)
		return NULL;
	if ((size_t)n > WEB_TOKEN_MAX + 64) {
		log_debug(WEB_COMP, "authorization header too large, ignored", "path=%s", path);
		return NULL;
	}
	size_t cap = (size_t)n + 1;
	char *hdr = xmalloc(cap), *out = NULL;
	int got = lws_hdr_copy(wsi, hdr, (int)cap, WSI_TOKEN_HTTP_AUTHORIZATION);
	const char *tok = NULL;
	size_t tok_len = 0;
	if (got > 0 && web_bearer_parse(hdr, (size_t)got, &tok, &tok_len) == NV_OK)
		out = xstrndup(tok, tok_len);
	secure_wipe(hdr, cap);
	free(hdr);
	return out;
}

static bool query_has(struct lws *wsi, const char *name)
{
	char frag[128];
	size_t nl = strlen(name);
	for (int i = 0; i < 16; i++) {
		int n = lws_hdr_copy_fragment(wsi, frag, (int)sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS,
		                              i);
		if (n < 0)
			break;
		if (strncmp(frag, name, nl) == 0 && (frag[nl] == '\0' || frag[nl] == '='))
			return true;
	}
	return false;
}

static const struct web_route *route_find(struct web_server *s, const char *path, enum web_method m,
                                          bool *other_method)
{
	*other_method = false;
	for (size_t i = 0; i < s->nroutes; i++) {
		if (strcmp(s->routes[i].path, path) != 0)
			continue;
		if (s->routes[i].method == m)
			return &s->routes[i];
		*other_method = true;
	}
	return NULL;
}

/* ---- writing the response ----------------------------------------------------- */

static int header_add(struct lws *wsi, const char *name, const char *value, unsigned char **p,
                      unsigned char *end)
{
	return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
	                                   (const unsigned char *)value, (int)strlen(value), p,
	                                   end);
}

static int finish_transaction(struct lws *wsi, struct web_session *pss)
{
	bool close = pss->http->close_after;
	web_http_release(pss->http);
	pss->http = NULL;
	if (close)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Sends the status line and headers, then the body from the writeable
 * callback (or finishes now when there is none). */
static int respond(struct lws *wsi, struct web_session *pss)
{
	struct web_http *h = pss->http;
	unsigned char hb[LWS_PRE + 2048];
	unsigned char *start = hb + LWS_PRE, *p = start, *end = hb + sizeof(hb) - 1;
	h->responding = true;
	if (h->data == NULL) {
		h->data = (const unsigned char *)buf_str(&h->out);
		h->len = h->out.len;
	}
	if (lws_add_http_common_headers(wsi, (unsigned)h->status, h->ctype, (lws_filepos_t)h->len,
	                                &p, end) ||
	    header_add(wsi, "x-content-type-options:", "nosniff", &p, end) ||
	    header_add(wsi, "cache-control:", "no-store", &p, end))
		return -1;
	if (h->html && (header_add(wsi, "content-security-policy:",
	                           "default-src 'self'; connect-src 'self'; "
	                           "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
	                           &p, end) ||
	                header_add(wsi, "referrer-policy:", "no-referrer", &p, end)))
		return -1;
	if (lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	log_debug(WEB_COMP, "request", "path=%s status=%d bytes=%zu", h->path, h->status, h->len);
	web_count_request(web_server_of(wsi), h->handler, h->status);
	if (h->len == 0)
		return finish_transaction(wsi, pss);
	lws_callback_on_writable(wsi);
	return 0;
}

static int authz_resume(struct lws *wsi, struct web_session *pss);

static int write_body(struct lws *wsi, struct web_session *pss)
{
	struct web_http *h = pss->http;
	if (h != NULL && h->authz_ready && !h->responding)
		return authz_resume(wsi, pss);
	if (h == NULL || !h->responding)
		return 0;
	unsigned char chunk[LWS_PRE + WEB_CHUNK];
	size_t n = h->len - h->sent;
	if (n > WEB_CHUNK)
		n = WEB_CHUNK;
	memcpy(chunk + LWS_PRE, h->data + h->sent, n);
	bool last = h->sent + n == h->len;
	int wrote =
	        lws_write(wsi, chunk + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
	if (wrote < 0 || (size_t)wrote != n)
		return -1;
	h->sent += n;
	if (last)
		return finish_transaction(wsi, pss);
	lws_callback_on_writable(wsi);
	return 0;
}

static int respond_text(struct lws *wsi, struct web_session *pss, int status, const char *text)
{
	struct web_http *h = pss->http;
	buf_reset(&h->out);
	h->data = NULL;
	h->status = status;
	h->ctype = CT_TEXT;
	if (buf_append_str(&h->out, text) != NV_OK)
		return -1;
	return respond(wsi, pss);
}

/* ---- built-in routes ---------------------------------------------------------- */

static int serve_probe(struct lws *wsi, struct web_session *pss, enum web_probe probe)
{
	struct web_server *s = web_server_of(wsi);
	struct web_http *h = pss->http;
	struct buf why;
	buf_init(&why, 256);
	bool all_ok = true;
	h->handler = probe == WEB_PROBE_LIVE ? "healthz" : "readyz";
	for (size_t i = 0; i < s->nchecks; i++) {
		const struct web_check *c = &s->checks[i];
		if (c->probe != probe)
			continue;
		buf_reset(&why);
		bool ok = c->fn(c->arg, &why);
		all_ok = all_ok && ok;
		if (ok)
			(void)buf_printf(&h->out, "[+]%s ok\n", c->name);
		else
			(void)buf_printf(&h->out, "[-]%s failed: %s\n", c->name,
			                 h->verbose && why.len ? buf_str(&why) : "reason withheld");
	}
	buf_clear(&why);
	const char *what = probe == WEB_PROBE_LIVE ? "healthz" : "readyz";
	if (all_ok && !h->verbose)
		buf_reset(&h->out);
	if (all_ok && !h->verbose)
		(void)buf_append_str(&h->out, "ok");
	else
		(void)buf_printf(&h->out, "%s check %s\n", what, all_ok ? "passed" : "failed");
	h->status = all_ok ? 200 : 500;
	h->ctype = CT_TEXT;
	return respond(wsi, pss);
}

/* Answers a request the authorizer refused (or could not judge). */
static int authz_refused(struct lws *wsi, struct web_session *pss, enum nv_err a)
{
	struct web_http *h = pss->http;
	h->close_after = h->method == WEB_POST;
	if (a == NV_E_UNAUTHORIZED)
		return respond_text(wsi, pss, 401, "unauthorized\n");
	if (a == NV_E_FORBIDDEN)
		return respond_text(wsi, pss, 403, "forbidden\n");
	if (a == NV_E_THROTTLED || a == NV_E_BUSY)
		return respond_text(wsi, pss, 429, "too many authorization requests, retry\n");
	return respond_text(wsi, pss, 500, "authorization unavailable\n");
}

/* Parks the request while a worker asks fn; it goes on in authz_resume.
 * A POST's body is still read meanwhile, within the cap, and dropped if
 * the answer is a refusal. */
static int authz_begin(struct lws *wsi, struct web_session *pss, web_authz_fn fn, void *arg,
                       const char *verb)
{
	enum nv_err e = web_authz_submit(wsi, pss, fn, arg, verb);
	if (e != NV_OK) {
		if (e == NV_E_BUSY)
			log_warn(WEB_COMP, "authorization queue full, request refused",
			         "server=%s path=%s", web_server_of(wsi)->name, pss->http->path);
		return authz_refused(wsi, pss, e);
	}
	return 0;
}

static int serve_metrics(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_http *h = pss->http;
	if (s->metrics == NULL)
		return respond_text(wsi, pss, 404, "not found\n");
	h->handler = "metrics";
	if (s->metrics_authz && !h->authorized)
		return authz_begin(wsi, pss, s->metrics_authz, s->metrics_authz_arg, "get");
	enum nv_err e = metrics_registry_render(s->metrics, &h->out);
	if (e) {
		log_error(WEB_COMP, "metrics do not fit the response cap", "cap=%zu err=%s",
		          s->response_max, nv_err_name(e));
		return respond_text(wsi, pss, 500, "metrics unavailable\n");
	}
	h->status = 200;
	h->ctype = CT_METRICS;
	return respond(wsi, pss);
}

static int serve_asset(struct lws *wsi, struct web_session *pss)
{
	struct web_http *h = pss->http;
	const char *path = strcmp(h->path, "/") == 0 ? "/index.html" : h->path;
	for (size_t i = 0; i < web_assets_count; i++) {
		if (strcmp(web_assets[i].path, path) != 0)
			continue;
		h->status = 200;
		h->handler = "dashboard";
		h->ctype = web_assets[i].content_type;
		h->html = str_has_prefix(h->ctype, "text/html");
		h->data = web_assets[i].data;
		h->len = web_assets[i].len;
		return respond(wsi, pss);
	}
	return respond_text(wsi, pss, 404, "not found\n");
}

static int run_handler(struct lws *wsi, struct web_session *pss)
{
	struct web_http *h = pss->http;
	const struct web_request req = {
	        .method = h->method,
	        .path = h->path,
	        .content_type = h->content_type,
	        .body = buf_str(&h->body),
	        .body_len = h->body.len,
	        .bearer = h->bearer,
	};
	struct web_response resp = {.status = 200, .content_type = CT_JSON};
	h->handler = h->route->path;
	resp.body = h->out; /* empty, with the response cap */
	enum nv_err e = h->route->fn(h->route->arg, &req, &resp);
	h->out = resp.body;
	secure_free_str(h->bearer);
	h->bearer = NULL;
	if (e || resp.status < 100 || resp.status > 599) {
		log_warn(WEB_COMP, "handler failed", "path=%s err=%s", h->path, nv_err_name(e));
		buf_reset(&h->out);
		h->status = 500;
		h->ctype = CT_JSON;
		(void)buf_append_str(&h->out, "{\"error\":\"internal error\"}");
		return respond(wsi, pss);
	}
	h->status = resp.status;
	h->ctype = resp.content_type ? resp.content_type : CT_JSON;
	return respond(wsi, pss);
}

static int serve_get(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_http *h = pss->http;
	bool other = false;
	if (strcmp(h->path, "/healthz") == 0)
		return serve_probe(wsi, pss, WEB_PROBE_LIVE);
	if (strcmp(h->path, "/readyz") == 0)
		return serve_probe(wsi, pss, WEB_PROBE_READY);
	if (strcmp(h->path, "/metrics") == 0)
		return serve_metrics(wsi, pss);
	if (strcmp(h->path, "/ws") == 0) {
		h->handler = "ws";
		return respond_text(wsi, pss, 426, "websocket upgrade required\n");
	}
	h->route = route_find(s, h->path, WEB_GET, &other);
	if (h->route && s->read_authz && !h->authorized) {
		h->handler = h->route->path;
		return authz_begin(wsi, pss, s->read_authz, s->read_authz_arg, "get");
	}
	if (h->route)
		return run_handler(wsi, pss);
	if (other)
		return respond_text(wsi, pss, 405, "method not allowed\n");
	return serve_asset(wsi, pss);
}

/* ---- request bodies ------------------------------------------------------------- */

static int on_body_done(struct lws *wsi, struct web_session *pss);

/* A POST once it may go on (authorized, or no authorizer): the route, then
 * the body, or the handler at once when there is none. */
static int post_continue(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_http *h = pss->http;
	bool other = false;
	h->handler = "none";
	h->route = route_find(s, h->path, WEB_POST, &other);
	if (h->route)
		h->handler = h->route->path;
	char cl[32];
	header_copy(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof(cl));
	h->has_len = cl[0] && parse_u64(cl, 0, UINT64_MAX, &h->content_len) == NV_OK;
	if (h->has_len && h->content_len > (uint64_t)s->body_max + WEB_DRAIN_MAX) {
		/* Not worth reading: answer and hang up. */
		h->close_after = true;
		return respond_text(wsi, pss, 413, "request body too large\n");
	}
	if (!h->has_len || h->content_len == 0) {
		/* lws delivers no body callbacks: the request is complete. */
		if (h->route == NULL)
			return respond_text(wsi, pss, other ? 405 : 404,
			                    other ? "method not allowed\n" : "not found\n");
		return run_handler(wsi, pss);
	}
	if (h->body_done)
		return on_body_done(wsi, pss);
	return 0;
}

static int begin_post(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	if (s->post_authz) {
		/* Before the route and the body are looked at: a refused caller
		 * learns nothing about which paths exist, and no handler sees
		 * its body. */
		pss->http->handler = "post-authz";
		return authz_begin(wsi, pss, s->post_authz, s->post_authz_arg, "post");
	}
	return post_continue(wsi, pss);
}

/* On the writeable callback after a worker answered: the parked request
 * goes on, or is refused. */
static int authz_resume(struct lws *wsi, struct web_session *pss)
{
	struct web_http *h = pss->http;
	h->authz_ready = false;
	if (h->authz_answer != NV_OK)
		return authz_refused(wsi, pss, h->authz_answer);
	h->authorized = true;
	if (h->method == WEB_POST)
		return post_continue(wsi, pss);
	if (h->route != NULL)
		return run_handler(wsi, pss);
	return serve_metrics(wsi, pss);
}

static bool parked(const struct web_http *h)
{
	return h->authz != NULL || h->authz_ready;
}

static int on_body(struct web_session *pss, const void *in, size_t len)
{
	struct web_http *h = pss->http;
	if (h == NULL || h->responding)
		return 0;
	h->body_seen += len;
	if (h->body_seen > h->body.max + WEB_DRAIN_MAX)
		return -1;
	/* Parked, the route is not known yet: what lws had read already is
	 * kept, within the cap, for when it is. */
	if ((h->route == NULL && !parked(h)) || h->too_large)
		return 0;
	if (buf_append(&h->body, in, len) != NV_OK) {
		h->too_large = true;
		buf_clear(&h->body);
	}
	return 0;
}

static int on_body_done(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_http *h = pss->http;
	bool other = false;
	if (h == NULL || h->responding)
		return 0;
	if (parked(h)) {
		h->body_done = true;
		return 0;
	}
	if (h->route == NULL) {
		(void)route_find(s, h->path, WEB_POST, &other);
		return respond_text(wsi, pss, other ? 405 : 404,
		                    other ? "method not allowed\n" : "not found\n");
	}
	if (h->too_large) {
		log_warn(WEB_COMP, "request body over the cap", "path=%s cap=%zu", h->path,
		         s->body_max);
		return respond_text(wsi, pss, 413, "request body too large\n");
	}
	return run_handler(wsi, pss);
}

/* ---- the callback ---------------------------------------------------------- */

static int begin_request(struct lws *wsi, struct web_session *pss, const char *uri, size_t len)
{
	struct web_server *s = web_server_of(wsi);
	web_http_release(pss->http);
	struct web_http *h = xcalloc(1, sizeof(*h));
	pss->http = h;
	buf_init(&h->body, s->body_max);
	buf_init(&h->out, s->response_max);
	h->method = method_of(wsi);
	h->handler = "none";
	h->status = 200;
	h->ctype = CT_TEXT;
	if (uri == NULL || len >= sizeof(h->path) || memchr(uri, '\0', len)) {
		(void)str_copy(h->path, sizeof(h->path), "-");
		return respond_text(wsi, pss, 414, "request path too long\n");
	}
	memcpy(h->path, uri, len);
	h->path[len] = '\0';
	header_copy(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, h->content_type, sizeof(h->content_type));
	h->verbose = query_has(wsi, "verbose");
	h->bearer = web_request_bearer(wsi, h->path);
	if (h->method == WEB_GET)
		return serve_get(wsi, pss);
	if (h->method == WEB_POST)
		return begin_post(wsi, pss);
	h->close_after = true;
	return respond_text(wsi, pss, 405, "method not allowed\n");
}

int web_http_callback(struct lws *wsi, enum lws_callback_reasons reason, struct web_session *pss,
                      void *in, size_t len)
{
	switch (reason) {
	case LWS_CALLBACK_HTTP:
		return begin_request(wsi, pss, in, len);
	case LWS_CALLBACK_HTTP_BODY:
		return on_body(pss, in, len);
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		return on_body_done(wsi, pss);
	case LWS_CALLBACK_HTTP_WRITEABLE:
		return write_body(wsi, pss);
	case LWS_CALLBACK_CLOSED_HTTP:
	case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
		if (pss) {
			web_authz_forget(web_server_of(wsi), pss->http);
			web_http_release(pss->http);
			pss->http = NULL;
		}
		break;
	default:
		break;
	}
	return lws_callback_http_dummy(wsi, reason, pss, in, len);
}
