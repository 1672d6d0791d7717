// SPDX-License-Identifier: Apache-2.0
// The shared transport: one curl multi handle, driven by one thread, that
// multiplexes every request and watch of a client over reused HTTP/2
// connections. Callers hand it prepared transfers and wait on a condition.
//
// A connection that silently stops delivering (a middlebox that lost the
// flow, a peer gone without a reset) holds every transfer on it: TCP
// keepalive sees nothing wrong while something still ACKs, a request's
// timeout only moves its retry onto the same connection, and curl closes a
// multiplexed connection for no single stream's timeout. So the transport
// checks liveness itself, as client-go's HTTP/2 transport does with a PING
// after 30 s of read silence and a close after 15 s without the ack: a
// small GET rides the same connection, and when it is not answered either,
// every transfer ends and the connection pool is dropped.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube_int.h"
#include "nvl72/timeutil.h"

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

	x->t->last_rx_ms = time_mono_ms(); /* only the transport thread runs this */
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

	x->t->last_rx_ms = time_mono_ms();
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

static struct kube_xfer *xf_alloc(CURL *easy, size_t max_body, bool streaming)
{
	struct kube_xfer *x = xcalloc(1, sizeof(*x));

	x->easy = easy;
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

struct kube_xfer *kube_xfer_new(size_t max_body, bool streaming)
{
	CURL *easy = curl_easy_init();

	if (easy == NULL) {
		log_error("kube", "curl_easy_init failed; out of memory", NULL);
		abort();
	}
	return xf_alloc(easy, max_body, streaming);
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

/* Tells the observer of one finished exchange; mu held. A transfer the
 * caller cancelled before any answer is not an exchange. */
static void tr_observe(struct kube_transport *t, struct kube_xfer *x)
{
	struct kube_exchange ex = {.code = x->http_code ? x->http_code : x->hdr_code,
	                           .watch = x->streaming};
	curl_off_t us = 0;
	char *method = NULL;

	if (ex.code == 0 && x->abort_req)
		return;
	curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_METHOD, &method);
	curl_easy_getinfo(x->easy, CURLINFO_TOTAL_TIME_T, &us);
	ex.method = method != NULL ? method : "GET";
	ex.seconds = (double)us / 1e6;
	t->observe(t->observe_arg, &ex);
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
	if (t->observe != NULL)
		tr_observe(t, x);
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

/* The probe: a copy of a transfer in flight (the same TLS settings, so curl
 * puts it on the same connection) that GETs probe_url with no credentials.
 * Any answer, a 401 included, proves the connection alive. mu held. */
static void tr_probe_start(struct kube_transport *t, struct kube_xfer *from)
{
	CURL *e = curl_easy_duphandle(from->easy);
	struct kube_xfer *x;

	if (e == NULL)
		return;
	x = xf_alloc(e, 4096, false);
	x->t = t;
	curl_easy_setopt(e, CURLOPT_URL, t->probe_url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
	curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
	x->hdrs = curl_slist_append(NULL, "Accept: application/json");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs); /* never the token */
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 0L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 0L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)t->probe_timeout_ms);
	/* Not waiting to learn whether the connection multiplexes: an HTTP/2
	 * one, known since its TLS handshake, takes the probe; over HTTP/1.1
	 * it goes on a connection of its own and proves only the server. */
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 0L);
	x->state = XF_RUNNING;
	x->next = t->active;
	t->active = x;
	curl_multi_add_handle(t->multi, e);
	t->probe = x;
	t->stats.probes++;
	log_debug("kube", "apiserver connection silent; probing it", "url=%s timeout_ms=%lld",
	          t->probe_url, (long long)t->probe_timeout_ms);
}

static CURLM *tr_multi_new(void)
{
	CURLM *m = curl_multi_init();

	if (m != NULL) {
		curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, 25L);
	}
	return m;
}

/* Ends every transfer in flight as timed out and closes the connections
 * (curl_multi_cleanup of the pool, a new pool in its place); the callers'
 * retries and resumed watches dial anew. mu held: every other use of
 * t->multi is under mu. */
static void tr_redial(struct kube_transport *t, int64_t silent_ms)
{
	CURLM *fresh = tr_multi_new();
	int n = 0;

	if (fresh == NULL)
		return; /* out of memory: the next silence tries again */
	while (t->active != NULL) {
		struct kube_xfer *x = t->active;
		snprintf(x->errbuf, sizeof(x->errbuf),
		         "the apiserver connection went silent (nothing read for %lld ms, a probe "
		         "unanswered); dropped it",
		         (long long)silent_ms);
		tr_finish(t, x, CURLE_OPERATION_TIMEDOUT);
		n++;
	}
	curl_multi_cleanup(t->multi);
	t->multi = fresh;
	t->stats.redials++;
	log_warn("kube", "apiserver connection silent; dropped it and dialing anew",
	         "silent_ms=%lld probe_timeout_ms=%lld transfers_ended=%d", (long long)silent_ms,
	         (long long)t->probe_timeout_ms, n);
}

/* One turn of the liveness check; mu held. */
static void tr_liveness(struct kube_transport *t)
{
	int64_t now = time_mono_ms();
	struct kube_xfer *p = t->probe;

	if (t->read_idle_ms <= 0 || t->probe_url == NULL)
		return;
	if (p != NULL) {
		if (p->state != XF_DONE)
			return;
		t->probe = NULL;
		if (p->http_code == 0 && p->hdr_code == 0)
			tr_redial(t, now - t->last_rx_ms);
		kube_xfer_free(p);
		return;
	}
	/* Silence counts from the last byte read or, when nothing was in
	 * flight, from the moment something was again. */
	if (t->active == NULL) {
		t->last_rx_ms = now;
		return;
	}
	if (now - t->last_rx_ms >= t->read_idle_ms)
		tr_probe_start(t, t->active);
}

static void *tr_main(void *arg)
{
	struct kube_transport *t = arg;
	CURLMsg *m;
	int running = 0, left = 0;

	pthread_mutex_lock(&t->mu);
	while (!t->stopping) {
		tr_adopt(t);
		tr_liveness(t);
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
	t->multi = tr_multi_new();
	if (t->multi == NULL)
		return NV_E_INTERNAL;
	t->last_rx_ms = time_mono_ms();
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
		curl_multi_wakeup(t->multi);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->thread, NULL);
	}
	kube_xfer_free(t->probe);
	t->probe = NULL;
	if (t->multi != NULL)
		curl_multi_cleanup(t->multi);
	free(t->probe_url);
	t->probe_url = NULL;
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
	curl_multi_wakeup(t->multi); /* under mu: tr_redial replaces the handle */
	pthread_mutex_unlock(&t->mu);
}

void kube_transport_liveness(struct kube_transport *t, int64_t read_idle_ms,
                             int64_t probe_timeout_ms, const char *probe_url)
{
	pthread_mutex_lock(&t->mu);
	t->read_idle_ms = read_idle_ms;
	t->probe_timeout_ms = probe_timeout_ms;
	free(t->probe_url);
	t->probe_url = probe_url != NULL ? xstrdup(probe_url) : NULL;
	pthread_mutex_unlock(&t->mu);
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
