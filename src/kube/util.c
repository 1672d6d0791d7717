// SPDX-License-Identifier: Apache-2.0
// Small pieces shared by the client: the stop signal, monotonic condition
// waits, Status decoding and the HTTP-to-error mapping, URL building with
// percent-encoding, and object metadata accessors.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "kube_int.h"

struct kube_stop {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	atomic_bool set;
};

void kube_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

void kube_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms)
{
	struct timespec ts;

	if (ms < 0)
		ms = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(c, m, &ts);
}

struct kube_stop *kube_stop_new(void)
{
	struct kube_stop *s = xcalloc(1, sizeof(*s));

	pthread_mutex_init(&s->mu, NULL);
	kube_cond_init(&s->cond);
	atomic_init(&s->set, false);
	return s;
}

void kube_stop_free(struct kube_stop *s)
{
	if (s == NULL)
		return;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void kube_stop_request(struct kube_stop *s)
{
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->set, true);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

bool kube_stop_requested(const struct kube_stop *s)
{
	return s != NULL && atomic_load(&((struct kube_stop *)s)->set);
}

bool kube_stop_sleep(struct kube_stop *s, int64_t ms)
{
	int64_t end = time_mono_ms() + ms;

	if (s == NULL) {
		time_sleep_ms(ms);
		return false;
	}
	pthread_mutex_lock(&s->mu);
	while (!atomic_load(&s->set) && time_mono_ms() < end)
		kube_cond_wait_ms(&s->cond, &s->mu, end - time_mono_ms());
	pthread_mutex_unlock(&s->mu);
	return atomic_load(&s->set);
}

int64_t kube_rand_range(int64_t lo, int64_t hi)
{
	uint64_t r = 0;

	if (hi <= lo)
		return lo;
	if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
		r = (uint64_t)time_mono_us();
	return lo + (int64_t)(r % (uint64_t)(hi - lo + 1));
}

void kube_format_micro(int64_t wall_us, char out[40])
{
	time_t secs = (time_t)(wall_us / 1000000);
	struct tm tm;

	char date[24];

	gmtime_r(&secs, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 40, "%.20s.%06uZ", date, (unsigned)(wall_us % 1000000) % 1000000u);
}

void kube_status_set(struct kube_status *st, long code, const char *reason, const char *fmt, ...)
{
	va_list ap;

	if (st == NULL)
		return;
	st->http_code = code;
	snprintf(st->reason, sizeof(st->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
	st->causes[0] = '\0';
	st->retry_after_s = -1;
}

static void status_causes(struct kube_status *st, const json_t *causes)
{
	size_t i, n = 0;
	json_t *c;

	json_array_foreach(causes, i, c) {
		int w = snprintf(st->causes + n, sizeof(st->causes) - n, "%s%s: %s", n ? "; " : "",
		                 jx_str_or(c, "field", "-"),
		                 jx_str_or(c, "message", jx_str_or(c, "reason", "")));
		if (w < 0 || (size_t)w >= sizeof(st->causes) - n)
			break;
		n += (size_t)w;
	}
}

void kube_status_from_body(struct kube_status *st, long code, const char *body, size_t len)
{
	struct jx_limits lim = {.max_bytes = (size_t)1 << 20, .max_depth = 32};
	json_t *doc = NULL;
	int64_t ra;

	if (st == NULL)
		return;
	st->http_code = code;
	if (body == NULL || len == 0 || jx_loadb(body, len, &lim, &doc, NULL) != NV_OK ||
	    strcmp(jx_str_or(doc, "kind", ""), "Status") != 0) {
		snprintf(st->message, sizeof(st->message), "HTTP %ld: %.*s", code,
		         (int)(len > 200 ? 200 : len), body ? body : "");
		json_decref(doc);
		return;
	}
	snprintf(st->reason, sizeof(st->reason), "%s", jx_str_or(doc, "reason", ""));
	snprintf(st->message, sizeof(st->message), "%s", jx_str_or(doc, "message", ""));
	status_causes(st, jx_path(doc, "details.causes"));
	if (st->retry_after_s < 0 &&
	    jx_get_int(doc, "details.retryAfterSeconds", 0, 3600, &ra, NULL) == NV_OK)
		st->retry_after_s = (int)ra;
	if (code == 0) {
		int64_t c = 0;
		if (jx_get_int(doc, "code", 0, 999, &c, NULL) == NV_OK)
			st->http_code = (long)c;
	}
	json_decref(doc);
}

enum nv_err kube_http_err(long code, const char *reason)
{
	if (reason != NULL && (!strcmp(reason, "Expired") || !strcmp(reason, "Gone")))
		return NV_E_GONE;
	switch (code) {
	case 400:
		return NV_E_INVAL;
	case 401:
		return NV_E_UNAUTHORIZED;
	case 403:
		return NV_E_FORBIDDEN;
	case 404:
		return NV_E_NOT_FOUND;
	case 405:
		return NV_E_UNSUPPORTED;
	case 409:
		return reason && !strcmp(reason, "AlreadyExists") ? NV_E_EXISTS : NV_E_CONFLICT;
	case 410:
		return NV_E_GONE;
	case 422:
		return NV_E_INVALID_OBJECT;
	case 429:
		return NV_E_THROTTLED;
	case 504:
		return NV_E_TIMEOUT;
	default:
		if (code >= 200 && code < 300)
			return NV_OK;
		return code >= 500 ? NV_E_SERVER : NV_E_HTTP;
	}
}

static enum nv_err url_escape_into(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	enum nv_err rc = NV_OK;

	for (const unsigned char *p = (const unsigned char *)s; *p && rc == NV_OK; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			rc = buf_append_byte(b, (char)*p);
		} else {
			char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
			rc = buf_append(b, e, 3);
		}
	}
	return rc;
}

enum nv_err kube_path_build(struct buf *b, const struct kube_res *r, const char *ns,
                            const char *name, const char *sub)
{
	enum nv_err rc;

	if (r->group == NULL || r->group[0] == '\0')
		rc = buf_printf(b, "/api/%s", r->version);
	else
		rc = buf_printf(b, "/apis/%s/%s", r->group, r->version);
	if (rc == NV_OK && r->namespaced && ns != NULL && *ns != '\0') {
		rc = buf_append_str(b, "/namespaces/");
		if (rc == NV_OK)
			rc = url_escape_into(b, ns);
	}
	if (rc == NV_OK)
		rc = buf_printf(b, "/%s", r->resource);
	if (rc == NV_OK && name != NULL) {
		if (*name == '\0')
			return NV_E_INVAL;
		rc = buf_append_byte(b, '/');
		if (rc == NV_OK)
			rc = url_escape_into(b, name);
	}
	if (rc == NV_OK && sub != NULL)
		rc = buf_printf(b, "/%s", sub);
	return rc;
}

enum nv_err kube_query_add(struct buf *q, const char *k, const char *v)
{
	enum nv_err rc;

	if (v == NULL)
		return NV_OK;
	rc = buf_printf(q, "%s%s=", q->len ? "&" : "", k);
	return rc == NV_OK ? url_escape_into(q, v) : rc;
}

const char *kube_obj_name(const json_t *obj)
{
	return jx_str_or(obj, "metadata.name", "");
}

const char *kube_obj_namespace(const json_t *obj)
{
	return jx_str_or(obj, "metadata.namespace", "");
}

const char *kube_obj_rv(const json_t *obj)
{
	return jx_str_or(obj, "metadata.resourceVersion", "");
}

enum nv_err kube_obj_key(const json_t *obj, char *out, size_t outsz)
{
	const char *ns = kube_obj_namespace(obj), *name = kube_obj_name(obj);
	int n;

	if (*name == '\0')
		return NV_E_INVAL;
	n = *ns ? snprintf(out, outsz, "%s/%s", ns, name) : snprintf(out, outsz, "%s", name);
	return n < 0 || (size_t)n >= outsz ? NV_E_TOO_LARGE : NV_OK;
}

const char *kube_event_type_name(enum kube_event_type t)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

	return (unsigned)t < ARRAY_LEN(names) ? names[t] : "UNKNOWN";
}
