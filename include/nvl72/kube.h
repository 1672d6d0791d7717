/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes API client: configuration (kubeconfig, in-cluster) and
 * credentials, one shared HTTP/2 transport, typed verbs on raw json_t
 * objects, and single watch streams. Controllers build on kube_ctrl.h. */
/* Contract, for every call below unless its own comment says otherwise.
 *
 * Errors: fallible calls return enum nv_err and set their out-parameters
 * only on NV_OK (kube_watch's *last_rv is the exception); a struct
 * kube_status, when one is given, is zeroed first and then filled.
 *
 * Ownership: a json_t returned through json_t **out is a new reference the
 * caller json_decref's; out may be NULL when only the result matters.
 * Objects, options and strings passed in are borrowed for the call only.
 * Configs and clients are freed with their own _free; _free(NULL) does
 * nothing.
 *
 * Threads: a kube_client is shared. kube_request, the verbs and kube_watch
 * may be called from any thread at the same time on one client: each
 * queues its transfer to the client's one transport thread and waits on
 * its own. A kube_config belongs to one thread until kube_client_new takes
 * it. kube_client_free comes last, once no thread uses the client: stop
 * its informers, workers, leader election, recorder and access checker
 * first.
 *
 * Blocking: a request blocks the calling thread for its round trip. Each
 * attempt is bounded by the client's timeout_ms (default 30 s), and a
 * retried request also waits between attempts (the backoff, at most
 * backoff_max_ms, or the server's Retry-After, at most 1 h) for up to
 * max_retries more attempts. Getting the credential may run an exec plugin
 * first (at most 60 s, one caller at a time). Only kube_request, kube_list,
 * kube_list_all and kube_watch take a kube_stop; set, it ends the wait
 * within about 100 ms with NV_E_CANCELLED. The configuration calls read
 * files and never touch the network. */
#ifndef NVL72_KUBE_H
#define NVL72_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/err.h"

/* What the apiserver (or the client, when no response came) said about a
 * failed call. Every verb fills it when given one; it is zeroed first. */
struct kube_status {
	long http_code;    /* 0 when no HTTP response was received */
	char reason[64];   /* Status.reason: "Conflict", "Expired", ... */
	char message[512]; /* Status.message, or a local explanation */
	char causes[512];  /* details.causes as "field: message; ..." */
	int retry_after_s; /* Retry-After / retryAfterSeconds; -1 if none */
	int attempts;      /* HTTP exchanges made, retries included */
};

/* A stop signal shared by threads: set once, observed by every wait in
 * this module (requests, watches, backoff sleeps). Request, read and sleep
 * from any thread, but not from a signal handler (request takes a lock);
 * free it (NULL does nothing) once no thread waits on it. kube_stop_sleep
 * with s NULL sleeps the whole ms. */
struct kube_stop;
struct kube_stop *kube_stop_new(void);
void kube_stop_free(struct kube_stop *s);
void kube_stop_request(struct kube_stop *s);
bool kube_stop_requested(const struct kube_stop *s);
/* Sleeps up to ms; returns true at once when stop is (or becomes) set. */
bool kube_stop_sleep(struct kube_stop *s, int64_t ms);

/* ---- configuration ---- */

struct kube_config;

struct kube_config_opts {
	const char *kubeconfig; /* --kubeconfig; wins over everything */
	const char *context;    /* explicit context; else current-context */
	bool no_in_cluster;     /* skip the in-cluster step of the search */
};

/* Finds and loads the configuration: --kubeconfig, then $KUBECONFIG (a
 * ':'-separated list merged first-wins), then in-cluster, then
 * $HOME/.kube/config. Errors name the file and field in st->message.
 * *out is the caller's, to kube_config_free or to hand to kube_client_new. */
enum nv_err kube_config_load(const struct kube_config_opts *o, struct kube_config **out,
                             struct kube_status *st);
/* Parses one kubeconfig document held in memory; relative paths resolve
 * against dir (may be NULL for the working directory). */
enum nv_err kube_config_parse(const char *data, size_t len, const char *dir, const char *context,
                              struct kube_config **out, struct kube_status *st);
/* The service-account configuration of a pod. */
enum nv_err kube_config_in_cluster(struct kube_config **out, struct kube_status *st);
void kube_config_free(struct kube_config *c);
const char *kube_config_server(const struct kube_config *c);
/* Strings borrowed from c, valid until kube_config_free. */
/* The context's namespace, the pod's namespace in-cluster, or "default". */
const char *kube_config_namespace(const struct kube_config *c);

/* ---- client ---- */

struct kube_client;

struct kube_client_opts {
	const char *component;      /* "nvl72-operator" (default) or "nvl72-agent" */
	int64_t timeout_ms;         /* per request, not watches; default 30000 */
	int64_t connect_timeout_ms; /* default 30000 */
	size_t max_body;            /* response cap, default 64 MiB */
	int max_retries;            /* 429 / retryable 5xx / transport; default 10 */
	int64_t token_file_ttl_ms;  /* token file cache, default 50000 */
	int64_t backoff_base_ms;    /* first retry wait, default 200 */
	int64_t backoff_max_ms;     /* cap, default 10000 */
	/* Liveness of the shared HTTP/2 connection: with transfers in flight
	 * and nothing read for read_idle_ms (default 30000, as client-go's
	 * HTTP/2 read-idle timeout; negative: off), a GET /version rides the
	 * same connection; without an answer in probe_timeout_ms (default
	 * 15000, client-go's ping timeout) the connection is dropped, the
	 * transfers on it fail as timed out and are retried or resumed on a
	 * new one. */
	int64_t read_idle_ms;
	int64_t probe_timeout_ms;
};

/* Takes ownership of cfg on every path. Starts the transport thread; the
 * call itself sends no request. */
enum nv_err kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o,
                            struct kube_client **out, struct kube_status *st);
void kube_client_free(struct kube_client *c);

/* Counters of the shared transport, for tests and metrics; a snapshot,
 * from any thread. The namespace is borrowed from the client's config,
 * valid until kube_client_free. */
struct kube_client_stats {
	uint64_t transfers;     /* HTTP exchanges finished */
	uint64_t connections;   /* new connections opened for them */
	uint64_t http2;         /* exchanges that ran over HTTP/2 */
	uint64_t stream_pauses; /* watch streams paused for a slow consumer */
	uint64_t probes;        /* liveness probes sent after a silence */
	uint64_t redials;       /* connections dropped for an unanswered probe */
};
void kube_client_stats(struct kube_client *c, struct kube_client_stats *out);
const char *kube_client_namespace(const struct kube_client *c);
/* The server's "host:port", as client-go's rest_client_* metrics label it. */
const char *kube_client_host(const struct kube_client *c);

/* One finished exchange with the apiserver (a request, a watch stream or a
 * liveness probe), for client-go's rest_client_* metrics. Called on the
 * transport's thread with its lock held: an observer is quick and never
 * calls into the client. */
struct kube_exchange {
	const char *method; /* "GET", "PATCH", ... */
	long code;          /* HTTP status; 0: no response (a transport error) */
	double seconds;     /* from the start of the transfer to its end */
	bool watch;         /* a watch stream: seconds is its whole life */
};
typedef void (*kube_exchange_fn)(void *arg, const struct kube_exchange *ex);
/* Sets the observer (NULL: none), before the first request or later. */
void kube_client_observe(struct kube_client *c, kube_exchange_fn fn, void *arg);

/* ---- resources ---- */

/* Which collection a call addresses. group "" is the core API. */
struct kube_res {
	const char *group;
	const char *version;
	const char *resource; /* plural, lower case: "configmaps" */
	const char *kind;
	bool namespaced;
};

extern const struct kube_res KUBE_RES_NAMESPACES;
extern const struct kube_res KUBE_RES_NODES;
extern const struct kube_res KUBE_RES_PODS;
extern const struct kube_res KUBE_RES_CONFIGMAPS;
extern const struct kube_res KUBE_RES_SECRETS;
extern const struct kube_res KUBE_RES_LEASES;
extern const struct kube_res KUBE_RES_EVENTS;
extern const struct kube_res KUBE_RES_CRDS;

/* A raw request for anything the verbs below do not cover. path begins
 * with '/'; query is already encoded (no '?'); body may be NULL. A 2xx
 * answer with an empty body and out not NULL is NV_E_PARSE. */
struct kube_raw_req {
	const char *method;
	const char *path;
	const char *query;
	const char *content_type;
	const json_t *body;
	int64_t timeout_ms;     /* 0: the client's default */
	bool no_retry;          /* one attempt (the 401 re-read still applies) */
	struct kube_stop *stop; /* aborts the exchange and its retries; may be NULL */
};
enum nv_err kube_request(struct kube_client *c, const struct kube_raw_req *r, json_t **out,
                         struct kube_status *st);

/* ---- verbs: objects are json_t, unknown fields survive ---- */

enum nv_err kube_get(struct kube_client *c, const struct kube_res *r, const char *ns,
                     const char *name, json_t **out, struct kube_status *st);

struct kube_list_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;       /* NULL: a consistent read */
	const char *resource_version_match; /* "NotOlderThan" / "Exact" */
	int64_t limit;                      /* page size; 0: no limit */
	const char *continue_token;
	struct kube_stop *stop; /* aborts paging; may be NULL */
};
/* One page, as the apiserver returns it (a *List object). */
enum nv_err kube_list(struct kube_client *c, const struct kube_res *r, const char *ns,
                      const struct kube_list_opts *o, json_t **out, struct kube_status *st);
/* Every page (o->limit defaults to 500), merged into one list object whose
 * metadata.resourceVersion is that of the last page. One request per page,
 * plus one full list when a continue token expires (410). */
enum nv_err kube_list_all(struct kube_client *c, const struct kube_res *r, const char *ns,
                          const struct kube_list_opts *o, json_t **out, struct kube_status *st);

enum nv_err kube_create(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const json_t *obj, json_t **out, struct kube_status *st);

/* The same verbs as one attempt bounded by timeout_ms (0: the client's),
 * for a caller that answers someone waiting on it (an admission review, an
 * authorization): no retry and no backoff, so an API server in a brownout
 * costs at most timeout_ms. kube_list_once reads one unpaged list. */
enum nv_err kube_get_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                          const char *name, int64_t timeout_ms, json_t **out,
                          struct kube_status *st);
enum nv_err kube_list_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                           int64_t timeout_ms, json_t **out, struct kube_status *st);
enum nv_err kube_create_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                             const json_t *obj, int64_t timeout_ms, json_t **out,
                             struct kube_status *st);
/* PUT with obj's metadata.resourceVersion: a stale one fails with
 * NV_E_CONFLICT. subresource is NULL or "status". */
enum nv_err kube_update(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const json_t *obj, const char *subresource, json_t **out,
                        struct kube_status *st);

enum kube_patch_type {
	KUBE_PATCH_MERGE = 0, /* application/merge-patch+json */
	KUBE_PATCH_JSON,      /* application/json-patch+json */
	KUBE_PATCH_APPLY,     /* server-side apply */
};
struct kube_patch_opts {
	enum kube_patch_type type;
	const char *field_manager; /* required for apply */
	bool force;                /* apply: take fields from other managers */
	const char *subresource;   /* NULL or "status" */
};
enum nv_err kube_patch(struct kube_client *c, const struct kube_res *r, const char *ns,
                       const char *name, const struct kube_patch_opts *o, const json_t *patch,
                       json_t **out, struct kube_status *st);

struct kube_delete_opts {
	const char *propagation; /* "Background", "Foreground", "Orphan" */
	int64_t grace_period_s;  /* < 0: not sent */
	const char *precondition_uid;
	const char *precondition_rv;
};
enum nv_err kube_delete(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const char *name, const struct kube_delete_opts *o, struct kube_status *st);
/* POST pods/<name>/eviction (policy/v1); 429 means a PDB forbids it now. */
enum nv_err kube_evict(struct kube_client *c, const char *ns, const char *pod,
                       const struct kube_delete_opts *o, struct kube_status *st);

/* ---- watch: one stream ---- */

enum kube_event_type {
	KUBE_EV_ADDED = 0,
	KUBE_EV_MODIFIED,
	KUBE_EV_DELETED,
	KUBE_EV_BOOKMARK,
	KUBE_EV_ERROR,
};
const char *kube_event_type_name(enum kube_event_type t);

struct kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version; /* start after this RV */
	int timeout_s;                /* server side; default random 300..600 */
	bool no_bookmarks;            /* bookmarks are requested by default */
	size_t max_event;             /* one event's cap, default 8 MiB */
	struct kube_stop *stop;       /* ends the stream early; may be NULL */
};

/* Called for each event with a borrowed object, valid for the call
 * (json_incref it to keep it), on the thread that called kube_watch, one
 * event at a time. Returning non-NV_OK ends the stream with that error. A
 * slow callback slows only its own stream (it is paused past 1 MiB
 * unread), never the other transfers of the client. */
typedef enum nv_err (*kube_watch_fn)(void *ud, enum kube_event_type type, json_t *object);

/* Runs one watch request until the server ends it, stop is set, or an
 * error. ERROR events end it with the mapped error (410 => NV_E_GONE) and
 * st filled from the carried Status. *last_rv (optional; caller frees)
 * receives the last resourceVersion seen, bookmarks included, on every
 * path, errors too, and is left alone when none was seen. One attempt, no
 * retries: blocks for the stream's life (the server ends it at
 * timeoutSeconds, at most 600 s by default; a stream silent for 700 s is
 * dropped), or until stop. */
enum nv_err kube_watch(struct kube_client *c, const struct kube_res *r, const char *ns,
                       const struct kube_watch_opts *o, kube_watch_fn fn, void *ud, char **last_rv,
                       struct kube_status *st);

/* ---- helpers ---- */

/* Pure; the strings returned are borrowed from obj ("" when absent). */
/* "ns/name" or "name" for a cluster-scoped object, into out; NV_E_INVAL
 * without a name, NV_E_TOO_LARGE when it does not fit. */
enum nv_err kube_obj_key(const json_t *obj, char *out, size_t outsz);
const char *kube_obj_name(const json_t *obj);
const char *kube_obj_namespace(const json_t *obj);
const char *kube_obj_rv(const json_t *obj);
/* Microsecond RFC 3339 (MicroTime) of a wall time: "…T15:04:05.000000Z". */
void kube_format_micro(int64_t wall_us, char out[40]);

#endif
