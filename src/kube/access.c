// SPDX-License-Identifier: Apache-2.0
// Access reviews for bearer tokens: TokenReview (who is it) then
// SubjectAccessReview on a non-resource path (may they). A small cache keyed
// by SHA-256 of token, verb and path keeps a busy page from costing two API
// calls per request; the token itself is never kept, logged or copied. A
// miss is one bounded attempt per review, and misses are rate limited, so
// a flood of made-up tokens neither floods the API server nor waits on it.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/kube_access.h"
#include "nvl72/log.h"
#include "nvl72/timeutil.h"

#define ACCESS_COMP "access"
/* a question as the log and the cache key name it */
#define WHAT_MAX 512

static const struct kube_res RES_TOKENREVIEWS = {"authentication.k8s.io", "v1", "tokenreviews",
                                                 "TokenReview", false};
static const struct kube_res RES_SARS = {"authorization.k8s.io", "v1", "subjectaccessreviews",
                                         "SubjectAccessReview", false};

struct access_entry {
	unsigned char key[32];
	int64_t expires_ms;
	enum nv_err answer;
	bool used;
};

struct kube_access {
	struct kube_client *c;
	int64_t ttl_ms, deny_ttl_ms;
	size_t n;
	struct access_entry *e;
	/* the misses' token bucket, under mu */
	double tokens;
	int64_t refilled_ms;
	pthread_mutex_t mu;
};

struct kube_access *kube_access_new(struct kube_client *c, int64_t ttl_ms, int64_t deny_ttl_ms,
                                    size_t entries)
{
	struct kube_access *a = xcalloc(1, sizeof(*a));
	a->c = c;
	a->ttl_ms = ttl_ms > 0 ? ttl_ms : KUBE_ACCESS_TTL_MS_DEFAULT;
	a->deny_ttl_ms = deny_ttl_ms > 0 ? deny_ttl_ms : KUBE_ACCESS_DENY_TTL_MS_DEFAULT;
	a->n = entries > 0 ? entries : KUBE_ACCESS_ENTRIES_DEFAULT;
	a->e = xcalloc(a->n, sizeof(*a->e));
	a->tokens = KUBE_ACCESS_MISS_BURST;
	a->refilled_ms = time_mono_ms();
	pthread_mutex_init(&a->mu, NULL);
	return a;
}

void kube_access_free(struct kube_access *a)
{
	if (a == NULL)
		return;
	pthread_mutex_destroy(&a->mu);
	secure_wipe(a->e, a->n * sizeof(*a->e));
	free(a->e);
	free(a);
}

static bool key_of(const char *token, const char *verb, const char *path, unsigned char out[32])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int len = 0;
	bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	          EVP_DigestUpdate(ctx, token, strlen(token) + 1) == 1 &&
	          EVP_DigestUpdate(ctx, verb, strlen(verb) + 1) == 1 &&
	          EVP_DigestUpdate(ctx, path, strlen(path) + 1) == 1 &&
	          EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 32;
	EVP_MD_CTX_free(ctx);
	return ok;
}

static bool cache_get(struct kube_access *a, const unsigned char key[32], enum nv_err *answer)
{
	int64_t now = time_mono_ms();
	bool hit = false;
	pthread_mutex_lock(&a->mu);
	for (size_t i = 0; i < a->n && !hit; i++) {
		struct access_entry *e = &a->e[i];
		if (e->used && e->expires_ms > now && memcmp(e->key, key, 32) == 0) {
			*answer = e->answer;
			hit = true;
		}
	}
	pthread_mutex_unlock(&a->mu);
	return hit;
}

/* Takes a free or expired slot, else the one closest to expiry. */
static void cache_put(struct kube_access *a, const unsigned char key[32], enum nv_err answer)
{
	int64_t now = time_mono_ms();
	size_t pick = 0;
	pthread_mutex_lock(&a->mu);
	for (size_t i = 0; i < a->n; i++) {
		if (!a->e[i].used || a->e[i].expires_ms <= now) {
			pick = i;
			break;
		}
		if (a->e[i].expires_ms < a->e[pick].expires_ms)
			pick = i;
	}
	memcpy(a->e[pick].key, key, 32);
	a->e[pick].answer = answer;
	a->e[pick].expires_ms = now + (answer == NV_OK ? a->ttl_ms : a->deny_ttl_ms);
	a->e[pick].used = true;
	pthread_mutex_unlock(&a->mu);
}

/* Takes one miss from the bucket: false when misses come faster than
 * KUBE_ACCESS_MISSES_PER_S (after a burst of KUBE_ACCESS_MISS_BURST). */
static bool miss_allowed(struct kube_access *a)
{
	int64_t now = time_mono_ms();
	bool ok;
	pthread_mutex_lock(&a->mu);
	a->tokens += (double)(now - a->refilled_ms) * KUBE_ACCESS_MISSES_PER_S / 1000.0;
	if (a->tokens > KUBE_ACCESS_MISS_BURST)
		a->tokens = KUBE_ACCESS_MISS_BURST;
	a->refilled_ms = now;
	ok = a->tokens >= 1.0;
	if (ok)
		a->tokens -= 1.0;
	pthread_mutex_unlock(&a->mu);
	return ok;
}

/* A TokenReview, sent or answered, carries the token in spec.token: wipe
 * it before the object is freed. */
static void token_wipe(json_t *review)
{
	json_t *t = json_object_get(json_object_get(review, "spec"), "token");
	if (json_is_string(t))
		secure_wipe((char *)json_string_value(t), json_string_length(t));
}

/* The TokenReview's user as a SubjectAccessReview spec; NV_E_UNAUTHORIZED
 * when the token does not authenticate. */
static enum nv_err review_token(struct kube_access *a, const char *token, json_t **spec)
{
	struct kube_status st = {0};
	json_t *body = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "authentication.k8s.io/v1",
	                         "kind", "TokenReview", "spec", "token", token);
	json_t *out = NULL;
	enum nv_err rc = kube_create_once(a->c, &RES_TOKENREVIEWS, NULL, body,
	                                  KUBE_ACCESS_TIMEOUT_MS, &out, &st);
	token_wipe(body);
	json_decref(body);
	token_wipe(out);
	if (rc != NV_OK) {
		log_warn(ACCESS_COMP, "token review failed", "err=%s code=%ld", nv_err_name(rc),
		         st.http_code);
		json_decref(out);
		return rc;
	}
	if (!json_is_true(jx_path(out, "status.authenticated"))) {
		json_decref(out);
		return NV_E_UNAUTHORIZED;
	}
	const json_t *u = jx_path(out, "status.user");
	json_t *groups = json_object_get(u, "groups"), *extra = json_object_get(u, "extra");
	*spec = json_pack("{s:s,s:s}", "user", jx_str_or(u, "username", ""), "uid",
	                  jx_str_or(u, "uid", ""));
	if (json_is_array(groups))
		json_object_set(*spec, "groups", groups);
	if (json_is_object(extra))
		json_object_set(*spec, "extra", extra);
	json_decref(out);
	return NV_OK;
}

/* attrs: the SubjectAccessReview's nonResourceAttributes or
 * resourceAttributes, taken; what names the question in the log. */
static enum nv_err review_access(struct kube_access *a, json_t *spec, const char *kind,
                                 json_t *attrs, const char *verb, const char *what)
{
	struct kube_status st = {0};
	json_t *out = NULL, *body;
	const char *user = jx_str_or(spec, "user", "");
	enum nv_err rc;

	json_object_set_new(spec, kind, attrs);
	body = json_pack("{s:s,s:s,s:O}", "apiVersion", "authorization.k8s.io/v1", "kind",
	                 "SubjectAccessReview", "spec", spec);
	rc = kube_create_once(a->c, &RES_SARS, NULL, body, KUBE_ACCESS_TIMEOUT_MS, &out, &st);
	json_decref(body);
	if (rc != NV_OK) {
		log_warn(ACCESS_COMP, "access review failed", "err=%s code=%ld", nv_err_name(rc),
		         st.http_code);
		return rc;
	}
	bool allowed = json_is_true(jx_path(out, "status.allowed"));
	log_info(ACCESS_COMP, "access reviewed", "user=%s verb=%s %s allowed=%s", user, verb, what,
	         allowed ? "true" : "false");
	json_decref(out);
	return allowed ? NV_OK : NV_E_FORBIDDEN;
}

/* The cached, rate-limited review of token; key names the question (a
 * non-resource path starts with '/', a resource one does not, so the two
 * never share a key). attrs is taken. */
static enum nv_err check(struct kube_access *a, const char *token, const char *verb,
                         const char *key_text, const char *kind, json_t *attrs, const char *what)
{
	unsigned char key[32];
	enum nv_err rc;
	json_t *spec = NULL;

	if (token == NULL || token[0] == '\0') {
		json_decref(attrs);
		return NV_E_UNAUTHORIZED;
	}
	if (!key_of(token, verb, key_text, key)) {
		json_decref(attrs);
		return NV_E_STATE;
	}
	if (cache_get(a, key, &rc)) {
		secure_wipe(key, sizeof(key));
		json_decref(attrs);
		return rc;
	}
	if (!miss_allowed(a)) {
		secure_wipe(key, sizeof(key));
		json_decref(attrs);
		log_debug(ACCESS_COMP, "review refused: too many misses", "verb=%s %s", verb, what);
		return NV_E_THROTTLED;
	}
	rc = review_token(a, token, &spec);
	if (rc == NV_OK)
		rc = review_access(a, spec, kind, attrs, verb, what);
	else
		json_decref(attrs);
	json_decref(spec);
	if (rc == NV_OK || rc == NV_E_UNAUTHORIZED || rc == NV_E_FORBIDDEN)
		cache_put(a, key, rc);
	secure_wipe(key, sizeof(key));
	return rc;
}

enum nv_err kube_access_check(struct kube_access *a, const char *token, const char *verb,
                              const char *path)
{
	char what[WHAT_MAX];
	snprintf(what, sizeof(what), "path=%s", path);
	return check(a, token, verb, path, "nonResourceAttributes",
	             json_pack("{s:s,s:s}", "path", path, "verb", verb), what);
}

enum nv_err kube_access_check_resource(struct kube_access *a, const char *token, const char *verb,
                                       const char *group, const char *resource, const char *ns)
{
	char key_text[WHAT_MAX], what[WHAT_MAX];
	if (group == NULL || resource == NULL || resource[0] == '\0')
		return NV_E_INVAL;
	ns = ns ? ns : "";
	/* No '/' opens it: never the key of a non-resource path. */
	snprintf(key_text, sizeof(key_text), "%s|%s|%s", group, resource, ns);
	snprintf(what, sizeof(what), "resource=%s%s%s namespace=%s", resource, group[0] ? "." : "",
	         group, ns[0] ? ns : "*");
	return check(a, token, verb, key_text, "resourceAttributes",
	             json_pack("{s:s,s:s,s:s,s:s}", "group", group, "resource", resource,
	                       "namespace", ns, "verb", verb),
	             what);
}

enum nv_err kube_access_authz(void *arg, const char *bearer, const char *verb, const char *path)
{
	return kube_access_check(arg, bearer, verb, path);
}
