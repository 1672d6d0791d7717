/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's admission webhook: a validating handler for the
 * cross-object rules of the nvl72.io kinds, a mutating handler that stamps
 * the requesting user into UpgradeApprovals, and the manager of its serving
 * certificate (Secret, caBundle). The operator's main wires it in; see
 * docs/webhook.md for what is checked where. */
/* Contract. A struct webhook only reads its configuration after
 * webhook_new, so webhook_review may run on any thread, several at once
 * (the routes run it on the web server's service thread); it blocks only
 * in the cache ops it calls. Everything the config names (cache, cache_arg,
 * metrics) is borrowed and must outlive the webhook. A webhook_cert is
 * driven from one thread (new, ensure, start, free) while its resync
 * thread runs webhook_cert_sync_ca; the sync takes the certificate's lock,
 * so it may also be called from elsewhere. Their requests are bounded as
 * kube.h says. Out-parameters are set only on NV_OK; _free(NULL) does
 * nothing. */
#ifndef NVL72_WEBHOOK_H
#define NVL72_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

struct kube_client;
struct kube_informer;
struct kube_status;
struct metrics_registry;
struct web_server;

/* ---- what the webhook reads: the operator's caches ------------------- */

/* RackUpgrades are read by the mutating handler, which stamps the
 * upgrade's UID and target into each UpgradeApproval, and by the validating
 * one: one upgrade per rack at a time. */
enum webhook_kind {
	WEBHOOK_RACKS = 0,
	WEBHOOK_PARTITIONS,
	WEBHOOK_MATRICES,
	WEBHOOK_UPGRADES, /* RackUpgrades: one upgrade per rack at a time */
	WEBHOOK_NODES,    /* Nodes: a Rack may not list a control-plane Node */
	WEBHOOK__KINDS
};

/* The read side of the caches the rules are judged against. list returns
 * a new reference to an array of every object of kind (the objects are
 * read, never modified), or NULL while that cache has not synced yet: the
 * webhook then refuses the request (fail closed) rather than judge it on
 * partial data. Called on the web server's thread; must not block long.
 * webhook_informer_cache's list is an informer snapshot and never waits on
 * the network; its get is one kube_get through the client. */
struct webhook_cache_ops {
	json_t *(*list)(void *arg, enum webhook_kind kind);
	/* Optional: the object of kind named name read from the API server,
	 * for a name the list lacks. A cache lags the writes it watches, so an
	 * object created a moment ago (a Rack, then at once a RackPartition
	 * naming it) would otherwise be judged missing. A new reference, or
	 * NULL when it does not exist (or cannot be read: the miss stands). */
	json_t *(*get)(void *arg, enum webhook_kind kind, const char *name);
	/* Optional: every object of kind read from the API server, as list
	 * returns it. Asked only for RackUpgrades, when one is created or
	 * moved to other racks, so an upgrade created a moment ago still
	 * counts as in flight; NULL (or a failed read): the list is used. */
	json_t *(*list_live)(void *arg, enum webhook_kind kind);
};

/* Reads from the API server in the middle of a review are one attempt of
 * this at most, never retried: the API server waits on the answer (the
 * configurations' timeoutSeconds is 10). */
#define WEBHOOK_READ_TIMEOUT_MS 3000
/* A name read and not found (or not readable) is judged missing without
 * another read for this long, */
#define WEBHOOK_MISS_TTL_MS 2000
#define WEBHOOK_MISSES_MAX 64
/* and reads are limited to this many a second (after a burst). */
#define WEBHOOK_READS_PER_S 10
#define WEBHOOK_READ_BURST 20

/* The read-through's own state: a webhook_informers starts it zeroed. */
struct webhook_read_guard {
	struct {
		uint64_t key; /* a hash of kind and name; 0: free */
		int64_t until_ms;
	} miss[WEBHOOK_MISSES_MAX];
	double tokens;
	int64_t refilled_ms; /* 0: not started */
};

/* A cache over the operator's informers: pass &webhook_informer_cache
 * with a struct webhook_informers as its argument. With client set, a
 * name the informer lacks is read once from the API server, and the
 * RackUpgrades are listed from it when an upgrade is created; both within
 * the bounds above. Used from the webhook server's service thread only. */
struct webhook_informers {
	struct kube_informer *inf[WEBHOOK__KINDS];
	struct kube_client *client; /* NULL: no read-through */
	struct webhook_read_guard guard;
};
extern const struct webhook_cache_ops webhook_informer_cache;

/* ---- the handlers ----------------------------------------------------- */

#define WEBHOOK_PATH_VALIDATE "/validate"
#define WEBHOOK_PATH_MUTATE "/mutate"
/* The largest AdmissionReview accepted, in bytes, and its nesting. */
#define WEBHOOK_REVIEW_MAX_DEFAULT ((size_t)3 << 20)
#define WEBHOOK_DEPTH_MAX 48
/* The most groups an approval may record (the CRD's bound). */
#define WEBHOOK_GROUPS_MAX 64

struct webhook_config {
	const struct webhook_cache_ops *cache; /* required */
	void *cache_arg;                       /* borrowed */
	size_t review_max;                     /* 0: WEBHOOK_REVIEW_MAX_DEFAULT */
	/* Judge upgrades on direct edges only. By default a plan may follow
	 * several listed edges, as the upgrade reconciler does. */
	bool single_hop;
	/* Where decisions are counted, when not NULL (borrowed):
	 * nvl72_webhook_admissions_total{webhook,resource,result}, result
	 * allowed, denied or error (a review that could not be answered). */
	struct metrics_registry *metrics;
};

struct webhook;

enum nv_err webhook_new(const struct webhook_config *cfg, struct webhook **out);
/* NULL does nothing. The web server must be stopped first. */
void webhook_free(struct webhook *w);

/* Adds POST /validate and POST /mutate to s (before web_server_start).
 * w is borrowed and must outlive the server. */
enum nv_err webhook_register(struct web_server *s, struct webhook *w);

enum webhook_mode {
	WEBHOOK_VALIDATE = 0,
	WEBHOOK_MUTATE,
};

/* One review without HTTP (what the routes call): body is the request's
 * AdmissionReview. Fills *http_status and out with the response review, or
 * with a short JSON error and 400/415 when the review itself is unusable.
 * Returns an error only for a response that does not fit out's cap. */
enum nv_err webhook_review(struct webhook *w, enum webhook_mode mode, const char *content_type,
                           const char *body, size_t len, int *http_status, struct buf *out);

/* ---- serving certificate ---------------------------------------------- */

/* Who makes the pair in the Secret. */
enum webhook_cert_source {
	/* The operator: it generates the pair, stores it, renews it
	 * renew_before_ms before expiry and keeps the caBundle of both
	 * configurations current. */
	WEBHOOK_CERT_SELF = 0,
	/* Another party (cert-manager): the operator only reads the Secret
	 * (tls.crt, tls.key, ca.crt optional) and serves what it holds; it
	 * writes neither the Secret nor a caBundle. */
	WEBHOOK_CERT_SECRET,
};

struct webhook_cert_config {
	struct kube_client *client; /* borrowed; NULL: nothing is read or written */
	enum webhook_cert_source source;
	const char *ns;      /* namespace of the Secret and Service */
	const char *secret;  /* Secret name: tls.crt, tls.key, ca.crt */
	const char *service; /* Service name, for the DNS SANs */
	/* Name of both webhook configurations whose caBundle is kept
	 * current (validating and mutating); NULL patches none. */
	const char *configuration;
	/* Extra SANs, NULL-terminated lists (tests add "127.0.0.1"). */
	const char *const *extra_dns;
	const char *const *extra_ips;
	int64_t valid_ms;        /* new certificates; 0: one year */
	int64_t renew_before_ms; /* reuse only with more left; 0: 30 days */
	int64_t resync_ms;       /* the thread's round; 0: one minute */
	/* Called on the thread when the pair to serve has changed (PEM,
	 * borrowed for the call: copy it); NULL tells nobody. */
	void (*on_change)(void *arg, const char *crt_pem, const char *key_pem);
	void *on_change_arg;
};

struct webhook_cert;

enum nv_err webhook_cert_new(const struct webhook_cert_config *cfg, struct webhook_cert **out);
/* Stops the thread (waiting for a round in flight), wipes the key and
 * frees; NULL does nothing. */
void webhook_cert_free(struct webhook_cert *c);

/* Reads the Secret and reuses its certificate when it is valid, covers
 * the SANs and has more than renew_before_ms left; otherwise generates a
 * new CA and serving certificate and writes them to the Secret (create,
 * or update guarded by resourceVersion: when another replica wins the
 * race its certificate is used). Then tries to make the caBundle of both
 * webhook configurations current; a failure there is logged, not returned
 * (the thread retries it). With WEBHOOK_CERT_SECRET it only reads, and
 * waits up to a minute for a usable pair (NV_E_NOT_FOUND after that). Call
 * before web_server_start and before webhook_cert_start. Blocks for its
 * requests (a Secret read and write, tried up to three times when another
 * replica races it, then the caBundle patches) and for generating P-256
 * keys. NV_E_STATE without a client. */
enum nv_err webhook_cert_ensure(struct webhook_cert *c, struct kube_status *st);
/* Patches each webhook of both configurations whose caBundle differs from
 * ca.crt; writes nothing when all agree. NV_E_NOT_FOUND when a
 * configuration does not exist. */
enum nv_err webhook_cert_sync_ca(struct webhook_cert *c, struct kube_status *st);
/* Starts a thread that, every resync_ms, reads the Secret again: adopts a
 * pair another replica (or cert-manager) stored, renews one that has
 * renew_before_ms or less left (the same guarded write as ensure), and
 * keeps the caBundle current, so a recreated configuration gets it back.
 * A new pair goes to on_change once the caBundle has trusted its CA for a
 * round (the old CA stays in the bundle, so the pair served until then
 * stays trusted), or at once when the served one would expire first.
 * NV_E_STATE before ensure succeeded or without a client. */
enum nv_err webhook_cert_start(struct webhook_cert *c);
/* Stops the thread, waiting for a round in flight; safe to call twice and
 * before start. After it on_change is not called again. */
void webhook_cert_stop(struct webhook_cert *c);

/* PEM text for web_config, borrowed from c: NULL until ensure succeeds,
 * then valid until the thread's next change (read them before
 * webhook_cert_start; never log them). */
const char *webhook_cert_pem(const struct webhook_cert *c);
const char *webhook_cert_key_pem(const struct webhook_cert *c);
const char *webhook_cert_ca_pem(const struct webhook_cert *c);
/* notAfter of the serving certificate, wall-clock ms. */
int64_t webhook_cert_not_after_ms(const struct webhook_cert *c);
/* Whether ensure reused the Secret's certificate. */
bool webhook_cert_reused(const struct webhook_cert *c);

/* A web_check_fn: fails while there is no serving certificate or the one
 * served expires within a day (its renewal keeps failing). */
bool webhook_cert_check(void *arg, struct buf *why);

#endif
