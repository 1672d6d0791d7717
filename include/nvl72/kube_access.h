/* SPDX-License-Identifier: Apache-2.0 */
/* Asks the API server whether the holder of a bearer token may do
 * something: a TokenReview names the user, a SubjectAccessReview decides,
 * as kube-rbac-proxy does. Answers are cached by a hash of the token, never
 * by the token itself. */
/* Contract: a checker may be used from any thread (its cache has a lock
 * held only for lookups). A check answered from the cache never blocks; a
 * miss makes two requests through the client (a TokenReview, then a
 * SubjectAccessReview), each one attempt of KUBE_ACCESS_TIMEOUT_MS at
 * most, without holding the lock. The token is borrowed for the call, never kept and never logged.
 */
#ifndef NVL72_KUBE_ACCESS_H
#define NVL72_KUBE_ACCESS_H

#include <stdint.h>

#include "nvl72/kube.h"

struct kube_access;

/* Defaults used when the matching argument is 0. */
#define KUBE_ACCESS_TTL_MS_DEFAULT 10000     /* an allowed answer */
#define KUBE_ACCESS_DENY_TTL_MS_DEFAULT 2000 /* a refused one: RBAC grants show soon */
#define KUBE_ACCESS_ENTRIES_DEFAULT 256
/* Each review on a miss is one attempt bounded by this, never retried. */
#define KUBE_ACCESS_TIMEOUT_MS 5000
/* Misses (a token, verb and path not in the cache) allowed per second,
 * after a burst: past them a check answers NV_E_THROTTLED at once. */
#define KUBE_ACCESS_MISSES_PER_S 20
#define KUBE_ACCESS_MISS_BURST 40

/* c is borrowed and must outlive the checker. */
struct kube_access *kube_access_new(struct kube_client *c, int64_t ttl_ms, int64_t deny_ttl_ms,
                                    size_t entries);
/* NULL does nothing. */
void kube_access_free(struct kube_access *a);

/* May the holder of token (NULL: none) use verb on the non-resource path?
 * NV_OK when allowed; NV_E_UNAUTHORIZED without a token or when the
 * TokenReview does not authenticate it; NV_E_FORBIDDEN when the
 * SubjectAccessReview refuses; NV_E_THROTTLED past the miss rate;
 * another error when the API server could not answer (not cached). Allowed answers are cached for
 * ttl_ms, 401 and 403 for deny_ttl_ms, keyed by a SHA-256 of token, verb and path (NV_E_STATE when
 * that hash fails). Safe from any thread; blocks on a cache miss for at most two API calls of
 * KUBE_ACCESS_TIMEOUT_MS each, without retry. */
enum nv_err kube_access_check(struct kube_access *a, const char *token, const char *verb,
                              const char *path);

/* May the holder of token use verb on resource of group (the core group:
 * "") in namespace ns ("" or NULL: every namespace)? A SubjectAccessReview
 * with resourceAttributes, with the same answers, cache and rate as
 * kube_access_check; NV_E_INVAL without a resource. */
enum nv_err kube_access_check_resource(struct kube_access *a, const char *token, const char *verb,
                                       const char *group, const char *resource, const char *ns);

/* The same, as a web_authz_fn (arg is the struct kube_access): it runs on
 * the web server's authorization workers, never its service thread. */
enum nv_err kube_access_authz(void *arg, const char *bearer, const char *verb, const char *path);

#endif
