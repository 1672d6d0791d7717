/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the webhook files: the decoded admission request, the verdict
 * a handler reaches, and the helpers the review code, the rules and the
 * certificate manager share. Nothing here is part of webhook.h. */
/* Included by src/webhook/ and its unit tests tests/unit/webhook/
 * test_webhook.c, test_webhook_cert.c and test_webhook_validate.c. */
#ifndef NVL72_WEBHOOK_INT_H
#define NVL72_WEBHOOK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api.h"
#include "nvl72/b64.h"
#include "nvl72/base.h"
#include "nvl72/webhook.h"

struct metrics_family;

#define WH_COMP "webhook"
#define WH_REVIEW_VERSION "admission.k8s.io/v1"
#define WH_MSG_MAX ((size_t)16 << 10)   /* one denial message */
#define WH_PATCH_MAX ((size_t)64 << 10) /* one JSON patch, before base64 */
/* Warnings of one response (admission.k8s.io/v1 AdmissionResponse.warnings,
 * which kubectl prints as "Warning: ..."); the API asks for at most 256
 * characters each and may cut longer ones. */
#define WH_WARNINGS_MAX 4
#define WH_WARNING_MAX 257

struct webhook {
	const struct webhook_cache_ops *cache;
	void *cache_arg;
	size_t review_max;
	unsigned plan_flags;
	struct metrics_family *admissions; /* NULL: not counted */
};

/* request of an AdmissionReview; the json_t members are borrowed from the
 * review and live as long as it does. */
struct wh_request {
	char uid[129];
	char group[64]; /* of the resource */
	char resource[64];
	char kind[64];
	char operation[8];
	char name[254];
	const json_t *object;     /* NULL for DELETE and CONNECT */
	const json_t *old_object; /* NULL unless UPDATE or DELETE */
	const json_t *user_info;  /* NULL when absent */
	bool dry_run;
};

/* What a handler decided. A denial carries an HTTP-like code (400: the
 * request is unusable, 422: an object rule failed, 503: the caches are not
 * ready) and a message that names the object and the field. */
struct wh_verdict {
	bool allowed;
	int code;
	const char *reason; /* a static metav1.StatusReason */
	struct buf msg;
	struct buf patch; /* JSON patch text; empty: none */
	unsigned nwarnings;
	char warnings[WH_WARNINGS_MAX][WH_WARNING_MAX];
};

void wh_verdict_init(struct wh_verdict *v);
void wh_verdict_clear(struct wh_verdict *v);
void wh_deny(struct wh_verdict *v, int code, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Adds a warning to the response, allowed or not: cut at WH_WARNING_MAX - 1
 * bytes; past WH_WARNINGS_MAX warnings the rest are dropped. */
void wh_warn(struct wh_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Denies with `Kind "name": path: msg; ...` (422 Invalid). */
void wh_deny_errors(struct wh_verdict *v, const struct wh_request *req,
                    const struct api_errors *errs);

/* Decodes an AdmissionReview. On failure why says which field is wrong;
 * *uid_ok tells whether request.uid was read, so a denial can answer it. */
enum nv_err wh_review_decode(const json_t *review, struct wh_request *out, bool *uid_ok, char *why,
                             size_t whylen);
/* The response review for uid, appended to out. */
enum nv_err wh_response_write(const char *uid, const struct wh_verdict *v, struct buf *out);

/* The handlers, on a decoded request. */
void wh_validate(struct webhook *w, const struct wh_request *req, struct wh_verdict *v);
void wh_mutate(struct webhook *w, const struct wh_request *req, struct wh_verdict *v);

/* What a round does with the pair in the Secret. */
enum wh_cert_step {
	WH_CERT_KEEP,  /* it is the pair held, still usable */
	WH_CERT_ADOPT, /* another usable pair (another replica renewed): take it */
	WH_CERT_RENEW, /* none usable: make one and store it */
	WH_CERT_WAIT,  /* none usable, and not ours to make: keep serving */
};

#ifdef NVL72_UNIT_TEST
/* Static helpers of webhook_validate.c and webhook_cert.c the unit tests
 * reach (see TESTABLE). */
enum nv_err wh_cert_generate(struct webhook_cert *c, const char *prev_ca);
/* The RackUpgrade in flight on rack ro, other than u and neither owning
 * nor owned by it, among upgrades (borrowed); NULL when none. */
const json_t *wh_upgrade_in_flight_on(const json_t *u, const json_t *ro, const json_t *upgrades);
/* Whether moving Rack obj (its old version old) to its spec.matrix only
 * records what the rack runs, so that no warning is due: the new stack is
 * the old status.stack, or spec.matrix is the target of the rack's latest
 * Completed RackUpgrade among upgrades (NULL: none known). */
bool wh_rack_stack_recorded(const json_t *obj, const json_t *old, const json_t *upgrades);
bool wh_cert_usable(const struct webhook_cert *c, const char *crt, const char *key, const char *ca,
                    int64_t now_ms, int64_t *not_after_ms, const char **why);
/* The step for a Secret whose pair is usable or not, and is or is not the
 * pair held. */
enum wh_cert_step wh_cert_decide(enum webhook_cert_source source, bool stored_usable,
                                 bool stored_changed);
/* Whether to hand a new pair (differs: the Secret's is not the one served)
 * to the server now: once the caBundle has trusted it for a round, or when
 * the one served expires within two rounds. */
bool wh_cert_serve_due(bool differs, bool bundle_settled, int64_t served_not_after_ms,
                       int64_t now_ms, int64_t resync_ms);
/* One round of the thread: the Secret, the caBundle, the server. */
enum nv_err wh_cert_round(struct webhook_cert *c);
#endif

#endif
