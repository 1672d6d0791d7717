// SPDX-License-Identifier: Apache-2.0
// Watch streams: the framer that splits a chunked response into JSON values
// (bounded, never re-scanning), the event decoder, and kube_watch, which
// runs one watch request and tracks the last resourceVersion it saw.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_int.h"

#define FRAMER_SLACK ((size_t)64 << 10)
#define WATCH_MAX_EVENT_DEFAULT ((size_t)8 << 20)
#define WATCH_ERRBODY_MAX ((size_t)64 << 10)
#define WATCH_JSON_DEPTH 128

void kube_framer_init(struct kube_framer *f, size_t max)
{
	memset(f, 0, sizeof(*f));
	f->max = max;
	buf_init(&f->b, max + FRAMER_SLACK);
}

void kube_framer_clear(struct kube_framer *f)
{
	buf_clear(&f->b);
}

enum nv_err kube_framer_feed(struct kube_framer *f, const char *data, size_t len)
{
	return buf_append(&f->b, data, len);
}

bool kube_framer_partial(const struct kube_framer *f)
{
	for (size_t i = 0; i < f->b.len; i++) {
		char c = f->b.data[i];
		if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
			return true;
	}
	return false;
}

/* Advances the scan; returns the length of a complete value or 0. */
static size_t framer_scan(struct kube_framer *f)
{
	const char *d = f->b.data;

	for (; f->pos < f->b.len; f->pos++) {
		char c = d[f->pos];
		if (f->in_str) {
			if (f->esc)
				f->esc = false;
			else if (c == '\\')
				f->esc = true;
			else if (c == '"')
				f->in_str = false;
		} else if (c == '"') {
			f->in_str = true;
		} else if (c == '{' || c == '[') {
			f->depth++;
		} else if ((c == '}' || c == ']') && --f->depth == 0) {
			return ++f->pos;
		}
	}
	return 0;
}

enum nv_err kube_framer_next(struct kube_framer *f, json_t **out, struct jx_err *e)
{
	struct jx_limits lim = {.max_bytes = f->max, .max_depth = WATCH_JSON_DEPTH};
	size_t skip = 0, end;
	enum nv_err rc;

	if (!f->started) {
		while (skip < f->b.len && strchr(" \t\r\n", f->b.data[skip]) != NULL)
			skip++;
		buf_consume(&f->b, skip);
		if (f->b.len == 0)
			return NV_E_NOT_FOUND;
		if (f->b.data[0] != '{') {
			snprintf(e->msg, sizeof(e->msg),
			         "watch stream: expected '{', got byte 0x%02x",
			         (unsigned char)f->b.data[0]);
			return NV_E_PARSE;
		}
		f->started = true;
		f->pos = 0;
		f->depth = 0;
		f->in_str = f->esc = false;
	}
	end = framer_scan(f);
	if ((end == 0 && f->pos > f->max) || end > f->max) {
		snprintf(e->msg, sizeof(e->msg), "watch event larger than %zu bytes", f->max);
		return NV_E_TOO_LARGE;
	}
	if (end == 0)
		return NV_E_NOT_FOUND;
	rc = jx_loadb(f->b.data, end, &lim, out, e);
	buf_consume(&f->b, end);
	f->started = false;
	f->pos = 0;
	return rc;
}

enum nv_err kube_watch_event_decode(json_t *ev, enum kube_event_type *type, json_t **obj,
                                    struct jx_err *e)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
	const char *t = NULL;
	json_t *o = NULL;
	enum nv_err rc;

	if ((rc = jx_get_str(ev, "type", &t, e)) != NV_OK ||
	    (rc = jx_get_obj(ev, "object", &o, e)) != NV_OK)
		return rc == NV_E_NOT_FOUND ? NV_E_PARSE : rc;
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		if (strcmp(t, names[i]) == 0) {
			*type = (enum kube_event_type)i;
			*obj = o;
			return NV_OK;
		}
	}
	snprintf(e->msg, sizeof(e->msg), "type: unknown watch event type \"%.64s\"", t);
	return NV_E_PARSE;
}

struct wstate {
	struct kube_framer fr;
	struct buf errbody; /* body of a non-200 answer */
	kube_watch_fn fn;
	void *ud;
	char *rv;
	size_t events;
	struct kube_status *st;
};

/* Handles one decoded event; non-NV_OK ends the stream. */
static enum nv_err watch_event(struct wstate *w, json_t *ev)
{
	enum kube_event_type type;
	json_t *obj = NULL;
	struct jx_err e;
	const char *rv;

	if (kube_watch_event_decode(ev, &type, &obj, &e) != NV_OK) {
		kube_status_set(w->st, 200, "", "watch event: %s", e.msg);
		return NV_E_PARSE;
	}
	if (type == KUBE_EV_ERROR) {
		char *s = jx_dumps(obj);
		kube_status_set(w->st, 0, "", "%s", "");
		kube_status_from_body(w->st, 0, s, s ? strlen(s) : 0);
		free(s);
		return kube_http_err(w->st->http_code, w->st->reason);
	}
	rv = kube_obj_rv(obj);
	if (*rv != '\0') {
		free(w->rv);
		w->rv = xstrdup(rv);
	}
	w->events++;
	return w->fn ? w->fn(w->ud, type, obj) : NV_OK;
}

/* Feeds bytes of a 200 stream through the framer and the handler. */
static enum nv_err watch_bytes(struct wstate *w, const char *data, size_t n)
{
	struct jx_err e;
	json_t *ev = NULL;
	enum nv_err rc = kube_framer_feed(&w->fr, data, n);

	if (rc != NV_OK) {
		kube_status_set(w->st, 200, "", "watch event larger than %zu bytes", w->fr.max);
		return NV_E_TOO_LARGE;
	}
	while ((rc = kube_framer_next(&w->fr, &ev, &e)) == NV_OK) {
		rc = watch_event(w, ev);
		json_decref(ev);
		if (rc != NV_OK)
			return rc;
	}
	if (rc == NV_E_NOT_FOUND)
		return NV_OK;
	kube_status_set(w->st, 200, "", "%s", e.msg);
	return rc;
}

static enum nv_err watch_query(struct buf *q, const struct kube_watch_opts *o)
{
	char tmo[32];
	int secs = o->timeout_s > 0 ? o->timeout_s : (int)kube_rand_range(300, 600);
	enum nv_err rc;

	snprintf(tmo, sizeof(tmo), "%d", secs);
	rc = kube_query_add(q, "watch", "1");
	if (rc == NV_OK && !o->no_bookmarks)
		rc = kube_query_add(q, "allowWatchBookmarks", "true");
	if (rc == NV_OK)
		rc = kube_query_add(q, "timeoutSeconds", tmo);
	if (rc == NV_OK)
		rc = kube_query_add(q, "resourceVersion", o->resource_version);
	if (rc == NV_OK)
		rc = kube_query_add(q, "labelSelector", o->label_selector);
	if (rc == NV_OK)
		rc = kube_query_add(q, "fieldSelector", o->field_selector);
	return rc;
}

static enum nv_err watch_url(struct kube_client *c, const struct kube_res *r, const char *ns,
                             const struct kube_watch_opts *o, struct buf *url)
{
	struct buf q;
	enum nv_err rc = buf_append_str(url, c->base_url);

	buf_init(&q, 8192);
	if (rc == NV_OK)
		rc = kube_path_build(url, r, ns, NULL, NULL);
	if (rc == NV_OK)
		rc = watch_query(&q, o);
	if (rc == NV_OK)
		rc = buf_printf(url, "?%s", buf_str(&q));
	buf_clear(&q);
	return rc;
}

/* Reads the stream until it ends, stop is set, or an event fails. */
static enum nv_err watch_pump(struct kube_client *c, struct kube_xfer *x,
                              const struct kube_watch_opts *o, struct wstate *w)
{
	char *chunk = xmalloc(FRAMER_SLACK);
	enum nv_err rc = NV_OK;
	bool done = false;

	while (rc == NV_OK) {
		size_t n = kube_xfer_read(&c->tr, x, chunk, FRAMER_SLACK, 200, &done);
		long code;
		if (kube_stop_requested(o->stop)) {
			rc = NV_E_CANCELLED;
			break;
		}
		if (n == 0) {
			if (done)
				break;
			continue;
		}
		pthread_mutex_lock(&c->tr.mu);
		code = x->hdr_code;
		pthread_mutex_unlock(&c->tr.mu);
		if (code == 200)
			rc = watch_bytes(w, chunk, n);
		else
			buf_append(&w->errbody, chunk, n); /* a Status; truncation is fine */
	}
	free(chunk);
	return rc;
}

/* Classifies the end of a stream that no event or stop ended. */
static enum nv_err watch_end(struct kube_xfer *x, struct wstate *w)
{
	if (x->cc == CURLE_OK && x->http_code != 200) {
		kube_status_set(w->st, x->http_code, "", "%s", "");
		w->st->retry_after_s = x->retry_after_s;
		kube_status_from_body(w->st, x->http_code, w->errbody.data, w->errbody.len);
		return kube_http_err(x->http_code, w->st->reason);
	}
	if (x->too_large) {
		kube_status_set(w->st, 200, "", "watch stream buffer overflow");
		return NV_E_TOO_LARGE;
	}
	if (kube_framer_partial(&w->fr)) {
		kube_status_set(w->st, x->http_code, "", "watch stream ended inside an event (%s)",
		                x->cc == CURLE_OK ? "truncated" : curl_easy_strerror(x->cc));
		return NV_E_TRANSPORT;
	}
	if (x->cc != CURLE_OK) {
		kube_status_set(w->st, x->http_code, "", "watch stream broke: %s",
		                x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc));
		return x->cc == CURLE_OPERATION_TIMEDOUT ? NV_E_TIMEOUT : NV_E_TRANSPORT;
	}
	return NV_OK;
}

enum nv_err kube_watch(struct kube_client *c, const struct kube_res *r, const char *ns,
                       const struct kube_watch_opts *o, kube_watch_fn fn, void *ud, char **last_rv,
                       struct kube_status *st)
{
	struct kube_status local;
	// cppcheck-suppress uninitvar ; local is only written, for callers without a status
	struct wstate w = {.fn = fn, .ud = ud, .st = st ? st : &local};
	struct kube_xfer *x = NULL;
	struct buf url;
	enum nv_err rc;

	kube_status_set(w.st, 0, "", "%s", "");
	kube_framer_init(&w.fr, o->max_event ? o->max_event : WATCH_MAX_EVENT_DEFAULT);
	buf_init(&w.errbody, WATCH_ERRBODY_MAX);
	buf_init(&url, 16384);
	rc = watch_url(c, r, ns, o, &url);
	if (rc != NV_OK) {
		kube_status_set(w.st, 0, "", "watch %s: URL too long", r->resource);
		goto out;
	}
	x = kube_xfer_new(0, true);
	rc = kube_xfer_prepare(c, x, "GET", buf_str(&url), NULL, NULL, true, w.st);
	if (rc != NV_OK)
		goto out;
	kube_xfer_submit(&c->tr, x);
	rc = watch_pump(c, x, o, &w);
	if (rc != NV_OK)
		kube_xfer_abort(&c->tr, x);
	else
		kube_xfer_wait(&c->tr, x, NULL);
	if (rc == NV_OK)
		rc = watch_end(x, &w);
	if (rc == NV_E_UNAUTHORIZED)
		kube_auth_invalidate(&c->auth);
out:
	log_debug("kube", "watch ended", "resource=%s ns=%s events=%zu err=%s", r->resource,
	          ns ? ns : "", w.events, nv_err_name(rc));
	if (last_rv != NULL && w.rv != NULL) {
		*last_rv = w.rv;
		w.rv = NULL;
	}
	free(w.rv);
	kube_xfer_free(x);
	kube_framer_clear(&w.fr);
	buf_clear(&w.errbody);
	buf_clear(&url);
	return rc;
}
