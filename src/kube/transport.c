// SPDX-License-Identifier: Apache-2.0
// The shared transport: one curl multi handle, driven by one thread, that
// multiplexes every request and watch of a client over reused HTTP/2
// connections. Callers hand it prepared transfers and wait on a condition.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube_int.h"

/* A watch's undelivered bytes: pause the stream above the high mark and
 * resume it once the consumer has drained it below the low mark. */
#define STREAM_HIGH ((size_t)1 << 20)
#define STREAM_LOW ((size_t)256 << 10)
#define STREAM_MAX ((size_t)8 << 20)

static size_t xf_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct kube_xfer *x = ud;
	size_t n = size * nmemb;
	size_t ret = n;

	if (!x->streaming) {
		if (buf_append(&x->resp, ptr, n) != NV_OK) {
			x->too_large = true;
			return 0;
		}
		return n;
	}
	pthread_mutex_lock(&x->t->mu);
	if (x->resp.len > STREAM_HIGH) {
		if (!x->paused)
			x->t->stats.stream_pauses++;
		x->paused = true;
		ret = CURL_WRITEFUNC_PAUSE;
	} else if (buf_append(&x->resp, ptr, n) != NV_OK) {
		x->too_large = true;
		ret = 0;
	}
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->t->mu);
	return ret;
}

static bool hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return false;
	*val = line + k + 1;
	*vlen = n - k - 1;
	while (*vlen > 0 && (**val == ' ' || **val == '\t')) {
		(*val)++;
		(*vlen)--;
	}
	while (*vlen > 0 && ((*val)[*vlen - 1] == '\r' || (*val)[*vlen - 1] == '\n'))
		(*vlen)--;
	return true;
}

static size_t xf_header(char *line, size_t size, size_t nmemb, void *ud)
{
	struct kube_xfer *x = ud;
	size_t n = size * nmemb, vlen = 0;
	const char *v = NULL;
	int64_t secs;

	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', n);
		int64_t code = 0;
		x->retry_after_s = -1;
		x->flow_schema[0] = '\0';
		if (sp != NULL && (size_t)(sp - line) + 4 <= n)
			parse_i64_n(sp + 1, 3, 100, 999, &code);
		pthread_mutex_lock(&x->t->mu);
		x->hdr_code = (long)code;
		pthread_mutex_unlock(&x->t->mu);
	} else if (hdr_is(line, n, "Retry-After", &v, &vlen)) {
		if (parse_i64_n(v, vlen, 0, 3600, &secs) == NV_OK)
			x->retry_after_s = (int)secs;
	} else if (hdr_is(line, n, "X-Kubernetes-PF-FlowSchema-UID", &v, &vlen)) {
		if (vlen < sizeof(x->flow_schema)) {
			memcpy(x->flow_schema, v, vlen);
			x->flow_schema[vlen] = '\0';
		}
	} else if (hdr_is(line, n, "Warning", &v, &vlen)) {
		log_warn("kube", "apiserver warning", "warning=\"%.*s\"",
		         (int)(vlen > 400 ? 400 : vlen), v);
	}
	return n;
}

struct kube_xfer *kube_xfer_new(size_t max_body, bool streaming)
{
	struct kube_xfer *x = xcalloc(1, sizeof(*x));

	x->easy = curl_easy_init();
	if (x->easy == NULL) {
		log_error("kube", "curl_easy_init failed; out of memory", NULL);
		abort();
	}
	// Any response may carry a secret (a TokenReview echoes its token, a
	// Secret read its data): the buffer leaves no copy behind.
	buf_init_secret(&x->resp, streaming ? STREAM_MAX : max_body);
	x->streaming = streaming;
	x->retry_after_s = -1;
	kube_cond_init(&x->cond);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, xf_write);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, xf_header);
	curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	return x;
}

void kube_xfer_free(struct kube_xfer *x)
{
	if (x == NULL)
		return;
	curl_easy_cleanup(x->easy);
	for (struct curl_slist *h = x->hdrs; h != NULL; h = h->next)
		secure_wipe(h->data, strlen(h->data));
	curl_slist_free_all(x->hdrs);
	secure_free_str(x->req_body);
	buf_clear(&x->resp);
	pthread_cond_destroy(&x->cond);
	free(x);
}

static void tr_unlink_active(struct kube_transport *t, struct kube_xfer *x)
{
	for (struct kube_xfer **pp = &t->active; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			x->next = NULL;
			return;
		}
	}
}

/* Called with mu held. */
static void tr_finish(struct kube_transport *t, struct kube_xfer *x, CURLcode cc)
{
	long conns = 0, ver = 0;

	curl_multi_remove_handle(t->multi, x->easy);
	tr_unlink_active(t, x);
	x->cc = cc;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->http_code);
	curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &conns);
	curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &ver);
	t->stats.transfers++;
	t->stats.connections += (uint64_t)conns;
	if (ver == CURL_HTTP_VERSION_2_0)
		t->stats.http2++;
	x->state = XF_DONE;
	pthread_cond_broadcast(&x->cond);
}

/* Adopts new transfers and serves abort/unpause requests; mu held on entry
 * and exit, dropped around curl_easy_pause (it may call xf_write). */
static void tr_adopt(struct kube_transport *t)
{
	struct kube_xfer *resume[64];
	size_t nres = 0;

	while (t->pending != NULL) {
		struct kube_xfer *x = t->pending;
		t->pending = x->next;
		x->next = t->active;
		t->active = x;
		x->state = XF_RUNNING;
		curl_multi_add_handle(t->multi, x->easy);
	}
	if (!t->poked)
		return;
	t->poked = false;
	for (struct kube_xfer *x = t->active, *next; x != NULL; x = next) {
		next = x->next;
		if (x->abort_req) {
			tr_finish(t, x, CURLE_ABORTED_BY_CALLBACK);
		} else if (x->unpause_req && nres < ARRAY_LEN(resume)) {
			x->unpause_req = false;
			x->paused = false;
			resume[nres++] = x;
		} else if (x->unpause_req) {
			t->poked = true; /* the rest on the next turn */
		}
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < nres; i++)
		curl_easy_pause(resume[i]->easy, CURLPAUSE_CONT);
	pthread_mutex_lock(&t->mu);
}

static void *tr_main(void *arg)
{
	struct kube_transport *t = arg;
	CURLMsg *m;
	int running = 0, left = 0;

	pthread_mutex_lock(&t->mu);
	while (!t->stopping) {
		tr_adopt(t);
		pthread_mutex_unlock(&t->mu);
		curl_multi_perform(t->multi, &running);
		while ((m = curl_multi_info_read(t->multi, &left)) != NULL) {
			struct kube_xfer *x = NULL;
			if (m->msg != CURLMSG_DONE)
				continue;
			CURL *easy = m->easy_handle;
			CURLcode cc = m->data.result;
			curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
			pthread_mutex_lock(&t->mu);
			tr_finish(t, x, cc);
			pthread_mutex_unlock(&t->mu);
		}
		curl_multi_poll(t->multi, NULL, 0, 1000, NULL);
		pthread_mutex_lock(&t->mu);
	}
	while (t->active != NULL)
		tr_finish(t, t->active, CURLE_ABORTED_BY_CALLBACK);
	for (struct kube_xfer *x = t->pending, *next; x != NULL; x = next) {
		next = x->next;
		x->next = NULL;
		x->cc = CURLE_ABORTED_BY_CALLBACK;
		x->state = XF_DONE;
		pthread_cond_broadcast(&x->cond);
	}
	t->pending = NULL;
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

enum nv_err kube_transport_init(struct kube_transport *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	t->multi = curl_multi_init();
	if (t->multi == NULL)
		return NV_E_INTERNAL;
	curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, 25L);
	if (pthread_create(&t->thread, NULL, tr_main, t) != 0) {
		curl_multi_cleanup(t->multi);
		return NV_E_INTERNAL;
	}
	t->started = true;
	return NV_OK;
}

void kube_transport_clear(struct kube_transport *t)
{
	if (t->started) {
		pthread_mutex_lock(&t->mu);
		t->stopping = true;
		pthread_mutex_unlock(&t->mu);
		curl_multi_wakeup(t->multi);
		pthread_join(t->thread, NULL);
	}
	if (t->multi != NULL)
		curl_multi_cleanup(t->multi);
	pthread_mutex_destroy(&t->mu);
	t->started = false;
}

void kube_xfer_submit(struct kube_transport *t, struct kube_xfer *x)
{
	x->t = t;
	pthread_mutex_lock(&t->mu);
	x->state = XF_QUEUED;
	if (t->stopping) {
		x->cc = CURLE_ABORTED_BY_CALLBACK;
		x->state = XF_DONE;
	} else {
		struct kube_xfer **pp = &t->pending;
		while (*pp != NULL)
			pp = &(*pp)->next;
		x->next = NULL;
		*pp = x;
	}
	pthread_mutex_unlock(&t->mu);
	curl_multi_wakeup(t->multi);
}

/* mu held. */
static void xf_abort_locked(struct kube_transport *t, struct kube_xfer *x)
{
	if (x->state == XF_DONE || x->abort_req)
		return;
	if (x->state == XF_QUEUED) {
		for (struct kube_xfer **pp = &t->pending; *pp != NULL; pp = &(*pp)->next) {
			if (*pp == x) {
				*pp = x->next;
				x->next = NULL;
				x->cc = CURLE_ABORTED_BY_CALLBACK;
				x->state = XF_DONE;
				return;
			}
		}
	}
	x->abort_req = true;
	t->poked = true;
	curl_multi_wakeup(t->multi);
}

void kube_xfer_abort(struct kube_transport *t, struct kube_xfer *x)
{
	pthread_mutex_lock(&t->mu);
	xf_abort_locked(t, x);
	while (x->state != XF_DONE)
		kube_cond_wait_ms(&x->cond, &t->mu, 100);
	pthread_mutex_unlock(&t->mu);
}

void kube_xfer_wait(struct kube_transport *t, struct kube_xfer *x, struct kube_stop *stop)
{
	pthread_mutex_lock(&t->mu);
	while (x->state != XF_DONE) {
		if (stop != NULL && kube_stop_requested(stop))
			xf_abort_locked(t, x);
		kube_cond_wait_ms(&x->cond, &t->mu, 100);
	}
	pthread_mutex_unlock(&t->mu);
}

size_t kube_xfer_read(struct kube_transport *t, struct kube_xfer *x, char *dst, size_t room,
                      int64_t wait_ms, bool *done)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	if (x->resp.len == 0 && x->state != XF_DONE && wait_ms > 0)
		kube_cond_wait_ms(&x->cond, &t->mu, wait_ms);
	n = x->resp.len < room ? x->resp.len : room;
	if (n > 0) {
		memcpy(dst, x->resp.data, n);
		buf_consume(&x->resp, n);
	}
	if (x->paused && !x->unpause_req && x->resp.len < STREAM_LOW) {
		x->unpause_req = true;
		t->poked = true;
		curl_multi_wakeup(t->multi);
	}
	*done = x->state == XF_DONE && x->resp.len == 0;
	pthread_mutex_unlock(&t->mu);
	return n;
}
