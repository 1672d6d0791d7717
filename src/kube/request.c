// SPDX-License-Identifier: Apache-2.0
// The client and its request path: building an authenticated transfer,
// running it on the shared transport, decoding the apiserver's Status, and
// retrying throttled or transient failures with backoff.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_int.h"

#ifndef NVL72_VERSION
#define NVL72_VERSION "0.0.0"
#endif

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* tls-server-name: the URL names that host, so SNI and certificate checks
 * use it, and CURLOPT_CONNECT_TO sends the connection to the real one. */
static enum nv_err client_urls(struct kube_client *c, struct kube_status *st)
{
	CURLU *u = NULL;
	char *host = NULL, *port = NULL, *url = NULL;
	enum nv_err rc = NV_E_CONFIG;

	if (c->cfg->tls_server_name == NULL) {
		c->base_url = xstrdup(c->cfg->server);
		return NV_OK;
	}
	u = curl_url();
	if (curl_url_set(u, CURLUPART_URL, c->cfg->server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_HOST, c->cfg->tls_server_name, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		kube_status_set(st, 0, "", "cluster.tls-server-name: cannot apply \"%s\" to %s",
		                c->cfg->tls_server_name, c->cfg->server);
		goto out;
	}
	char *ct = xasprintf("%s:%s:%s:%s", c->cfg->tls_server_name, port, host, port);
	c->connect_to = curl_slist_append(NULL, ct);
	free(ct);
	c->base_url = xstrdup(url);
	while (str_has_suffix(c->base_url, "/"))
		c->base_url[strlen(c->base_url) - 1] = '\0';
	rc = NV_OK;
out:
	curl_free(host);
	curl_free(port);
	curl_free(url);
	curl_url_cleanup(u);
	return rc;
}

/* The server's host:port as the metrics label it ("" when the URL has
 * none: a config error reported elsewhere). */
static void client_host(struct kube_client *c)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;

	if (u != NULL && curl_url_set(u, CURLUPART_URL, c->cfg->server, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
		snprintf(c->host, sizeof(c->host), "%s:%s", host, port);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

enum nv_err kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o,
                            struct kube_client **out, struct kube_status *st)
{
	struct kube_client *c;
	enum nv_err rc;

	pthread_once(&curl_once, curl_init_once);
	if (cfg == NULL)
		return NV_E_INVAL;
	c = xcalloc(1, sizeof(*c));
	c->cfg = cfg;
	if (o != NULL)
		c->o = *o;
	if (c->o.component == NULL)
		c->o.component = "nvl72-operator";
	if (c->o.timeout_ms <= 0)
		c->o.timeout_ms = 30000;
	if (c->o.connect_timeout_ms <= 0)
		c->o.connect_timeout_ms = 30000;
	if (c->o.max_body == 0)
		c->o.max_body = (size_t)64 << 20;
	if (c->o.max_retries <= 0)
		c->o.max_retries = 10;
	if (c->o.token_file_ttl_ms <= 0)
		c->o.token_file_ttl_ms = 50000;
	if (c->o.backoff_base_ms <= 0)
		c->o.backoff_base_ms = 200;
	if (c->o.backoff_max_ms <= 0)
		c->o.backoff_max_ms = 10000;
	if (c->o.read_idle_ms == 0)
		c->o.read_idle_ms = 30000;
	if (c->o.probe_timeout_ms <= 0)
		c->o.probe_timeout_ms = 15000;
	snprintf(c->user_agent, sizeof(c->user_agent), "%s/%s", c->o.component, NVL72_VERSION);
	kube_auth_init(&c->auth, cfg, c->o.token_file_ttl_ms);
	rc = client_urls(c, st);
	if (rc != NV_OK) {
		kube_client_free(c);
		return rc;
	}
	client_host(c);
	rc = kube_transport_init(&c->tr);
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "cannot start the transport thread");
		kube_client_free(c);
		return rc;
	}
	if (c->o.read_idle_ms > 0) {
		char *probe = xasprintf("%s/version", c->base_url);
		kube_transport_liveness(&c->tr, c->o.read_idle_ms, c->o.probe_timeout_ms, probe);
		free(probe);
	}
	*out = c;
	return NV_OK;
}

void kube_client_free(struct kube_client *c)
{
	if (c == NULL)
		return;
	if (c->tr.started)
		kube_transport_clear(&c->tr);
	kube_auth_clear(&c->auth);
	free(c->base_url);
	curl_slist_free_all(c->connect_to);
	kube_config_free(c->cfg);
	free(c);
}

void kube_client_stats(struct kube_client *c, struct kube_client_stats *out)
{
	pthread_mutex_lock(&c->tr.mu);
	*out = c->tr.stats;
	pthread_mutex_unlock(&c->tr.mu);
}

const char *kube_client_namespace(const struct kube_client *c)
{
	return kube_config_namespace(c->cfg);
}

const char *kube_client_host(const struct kube_client *c)
{
	return c->host;
}

void kube_client_observe(struct kube_client *c, kube_exchange_fn fn, void *arg)
{
	pthread_mutex_lock(&c->tr.mu);
	c->tr.observe = fn;
	c->tr.observe_arg = arg;
	pthread_mutex_unlock(&c->tr.mu);
}

static void xf_set_blob(CURL *e, CURLoption opt, const struct kube_blob *b)
{
	struct curl_blob blob = {.data = b->data, .len = b->len, .flags = CURL_BLOB_COPY};

	curl_easy_setopt(e, opt, &blob);
}

static void xf_tls(struct kube_client *c, CURL *e, const struct kube_cred *cred)
{
	const struct kube_config *cfg = c->cfg;

	if (cfg->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (cfg->ca.data != NULL) {
		xf_set_blob(e, CURLOPT_CAINFO_BLOB, &cfg->ca);
	}
	if (cred->cert.data != NULL && cred->key.data != NULL) {
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
		xf_set_blob(e, CURLOPT_SSLCERT_BLOB, &cred->cert);
		xf_set_blob(e, CURLOPT_SSLKEY_BLOB, &cred->key);
	}
	if (cfg->proxy_url != NULL)
		curl_easy_setopt(e, CURLOPT_PROXY, cfg->proxy_url);
	if (c->connect_to != NULL)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
}

enum nv_err kube_xfer_prepare(struct kube_client *c, struct kube_xfer *x, const char *method,
                              const char *url, const char *ctype, const char *body, bool streaming,
                              struct kube_status *st)
{
	struct kube_cred cred;
	CURL *e = x->easy;
	enum nv_err rc = kube_auth_get(&c->auth, &cred, st);

	if (rc != NV_OK)
		return rc;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->o.connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
	if (!c->cfg->disable_compression)
		curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (streaming) {
		/* No overall limit; a silent stream is dropped and resumed. */
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 700L);
	} else {
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->o.timeout_ms);
	}
	x->hdrs = curl_slist_append(x->hdrs, "Accept: application/json");
	if (ctype != NULL) {
		char *h = xasprintf("Content-Type: %s", ctype);
		x->hdrs = curl_slist_append(x->hdrs, h);
		free(h);
	}
	if (cred.token != NULL) {
		char *h = xasprintf("Authorization: Bearer %s", cred.token);
		x->hdrs = curl_slist_append(x->hdrs, h);
		secure_free_str(h);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	xf_tls(c, e, &cred);
	kube_cred_clear(&cred);
	if (strcmp(method, "GET") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		x->req_body = xstrdup(body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->req_body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	return NV_OK;
}

static enum nv_err curl_err(CURLcode cc)
{
	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		return NV_E_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CIPHER:
		return NV_E_TLS;
	case CURLE_ABORTED_BY_CALLBACK:
		return NV_E_CANCELLED;
	default:
		return NV_E_TRANSPORT;
	}
}

/* Where a 2xx answer goes: parsed into *json, or the text moved into raw
 * (a caller that reads it piece by piece); neither set: dropped. */
struct req_sink {
	json_t **json;
	struct buf *raw;
};

/* Turns a finished transfer into the result; fills st on failure. */
static enum nv_err xf_result(struct kube_xfer *x, const struct req_sink *out,
                             struct kube_status *st)
{
	struct jx_err je;
	json_t *doc = NULL;
	enum nv_err rc;

	if (x->too_large) {
		kube_status_set(st, x->http_code, "", "response larger than %zu bytes",
		                x->resp.max);
		return NV_E_TOO_LARGE;
	}
	/* An apiserver that rejects a request before reading its body answers
	 * and resets the HTTP/2 stream; the answer is still the answer. */
	if ((x->cc == CURLE_PARTIAL_FILE || x->cc == CURLE_HTTP2_STREAM || x->cc == CURLE_HTTP2) &&
	    x->http_code >= 400)
		x->cc = CURLE_OK;
	if (x->cc != CURLE_OK) {
		kube_status_set(st, 0, "", "%s",
		                x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc));
		return curl_err(x->cc);
	}
	if (x->http_code < 200 || x->http_code >= 300) {
		kube_status_set(st, x->http_code, "", "%s", "");
		st = st ? st : &(struct kube_status){0};
		st->retry_after_s = x->retry_after_s;
		kube_status_from_body(st, x->http_code, x->resp.data, x->resp.len);
		return kube_http_err(x->http_code, st->reason);
	}
	if (out->raw != NULL) {
		buf_clear(out->raw);
		*out->raw = x->resp;
		buf_init(&x->resp, out->raw->max);
		return NV_OK;
	}
	if (out->json == NULL)
		return NV_OK;
	rc = jx_loadb(x->resp.data, x->resp.len, &(struct jx_limits){.max_bytes = x->resp.max},
	              &doc, &je);
	if (rc != NV_OK) {
		kube_status_set(st, x->http_code, "", "response body: %s", je.msg);
		return rc;
	}
	*out->json = doc;
	return NV_OK;
}

/* Whether to try again, and after how long. A 429 or a 5xx waits its
 * Retry-After (a 429 without one, 1 s); a Retry-After of 0 is no licence to
 * come back at once, so it waits the backoff step instead: no request is
 * ever repeated without a pause. */
TESTABLE bool kube_should_retry(struct kube_client *c, const char *method, enum nv_err rc,
                                const struct kube_status *st, bool unsent, int attempt,
                                int64_t *wait_ms)
{
	bool idempotent = !strcmp(method, "GET");
	int64_t backoff = c->o.backoff_base_ms << (attempt < 16 ? attempt : 16);

	if (attempt >= c->o.max_retries || !nv_err_retryable(rc))
		return false;
	if (backoff > c->o.backoff_max_ms)
		backoff = c->o.backoff_max_ms;
	backoff = kube_rand_range(backoff / 2, backoff);
	if (rc == NV_E_THROTTLED || (rc == NV_E_SERVER && st->retry_after_s >= 0)) {
		if (st->retry_after_s > 0)
			*wait_ms = (int64_t)st->retry_after_s * 1000;
		else if (st->retry_after_s < 0)
			*wait_ms = 1000;
		else
			*wait_ms = backoff;
		return true;
	}
	if (rc == NV_E_SERVER && st->http_code == 503) {
		*wait_ms = backoff;
		return true;
	}
	/* A write that may have reached the server is not repeated blindly. */
	if (idempotent || unsent) {
		*wait_ms = backoff;
		return true;
	}
	return false;
}

static enum nv_err req_once(struct kube_client *c, const struct kube_raw_req *r, const char *url,
                            const char *body, const struct req_sink *out, bool *unsent,
                            struct kube_status *st)
{
	struct kube_xfer *x = kube_xfer_new(c->o.max_body, false);
	enum nv_err rc = kube_xfer_prepare(c, x, r->method, url, r->content_type, body, false, st);

	*unsent = false;
	if (rc == NV_OK && r->timeout_ms > 0)
		curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
	if (rc == NV_OK) {
		kube_xfer_submit(&c->tr, x);
		kube_xfer_wait(&c->tr, x, r->stop);
		rc = xf_result(x, out, st);
		*unsent = x->cc == CURLE_COULDNT_CONNECT || x->cc == CURLE_COULDNT_RESOLVE_HOST ||
		          x->cc == CURLE_COULDNT_RESOLVE_PROXY;
		if (rc == NV_E_THROTTLED)
			log_info("kube", "throttled by the apiserver",
			         "method=%s url=%s retry_after_s=%d "
			         "flow_schema=%s",
			         r->method, url, st->retry_after_s, x->flow_schema);
	}
	kube_xfer_free(x);
	return rc;
}

/* Runs method url with retries; the 401 retry re-reads credentials once. */
static enum nv_err req_run(struct kube_client *c, const struct kube_raw_req *r, const char *url,
                           const char *body, const struct req_sink *out, struct kube_status *st)
{
	const char *method = r->method;
	bool auth_retried = false, unsent = false;
	int64_t wait_ms = 0;
	enum nv_err rc;

	for (int attempt = 0;; attempt++) {
		kube_status_set(st, 0, "", "%s", "");
		rc = req_once(c, r, url, body, out, &unsent, st);
		st->attempts = attempt + 1;
		if (rc == NV_E_UNAUTHORIZED && !auth_retried &&
		    (c->cfg->token_file != NULL || c->cfg->exec != NULL)) {
			auth_retried = true;
			kube_auth_invalidate(&c->auth);
			continue;
		}
		if (rc == NV_OK || r->no_retry ||
		    !kube_should_retry(c, method, rc, st, unsent, attempt, &wait_ms))
			return rc;
		log_debug("kube", "retrying request", "method=%s url=%s err=%s wait_ms=%lld",
		          method, url, nv_err_name(rc), (long long)wait_ms);
		if (kube_stop_sleep(r->stop, wait_ms))
			return NV_E_CANCELLED;
	}
}

static enum nv_err request_to(struct kube_client *c, const struct kube_raw_req *r,
                              const struct req_sink *out, struct kube_status *st)
{
	struct kube_status local;
	struct buf url;
	char *body = NULL;
	enum nv_err rc;

	if (st == NULL)
		st = &local;
	buf_init(&url, 16384);
	rc = buf_printf(&url, "%s%s%s%s", c->base_url, r->path, r->query && *r->query ? "?" : "",
	                r->query ? r->query : "");
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "request URL longer than %zu bytes", url.max);
		goto out;
	}
	if (r->body != NULL)
		body = jx_dumps(r->body);
	rc = req_run(c, r, buf_str(&url), body, out, st);
out:
	secure_free_str(body); // a TokenReview or a Secret write carries one
	buf_clear(&url);
	return rc;
}

enum nv_err kube_request(struct kube_client *c, const struct kube_raw_req *r, json_t **out,
                         struct kube_status *st)
{
	return request_to(c, r, &(struct req_sink){.json = out}, st);
}

enum nv_err kube_request_text(struct kube_client *c, const struct kube_raw_req *r, struct buf *out,
                              struct kube_status *st)
{
	return request_to(c, r, &(struct req_sink){.raw = out}, st);
}
