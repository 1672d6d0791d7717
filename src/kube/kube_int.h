/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/kube: the configuration and client structures, the
 * credential cache, the shared transport and the watch framer. Nothing
 * here is part of the public API in kube.h / kube_ctrl.h. Besides
 * src/kube/ (all of it but access.c), its unit tests in tests/unit/kube/
 * (all but test_workqueue.c) and the fuzz targets
 * tests/fuzz/fuzz_kubeconfig.c and tests/fuzz/fuzz_watch_framing.c
 * include it. */
#ifndef NVL72_KUBE_INT_H
#define NVL72_KUBE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"

#define KUBECONFIG_MAX_BYTES ((size_t)1 << 20)
#define KUBE_TOKEN_MAX ((size_t)64 << 10)
#define KUBE_PEM_MAX ((size_t)256 << 10)
#define KUBE_EXEC_OUT_MAX ((size_t)1 << 20)
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* PEM bytes held in memory; key material is wiped when cleared. */
struct kube_blob {
	unsigned char *data;
	size_t len;
};
void kube_blob_clear(struct kube_blob *b);
void kube_blob_copy(struct kube_blob *dst, const struct kube_blob *src);

struct kube_exec {
	char *command;
	char **argv; /* argv[0] = command, NULL-terminated */
	char **env;  /* "NAME=value", NULL-terminated */
	char *api_version;
	char *interactive; /* Never | IfAvailable | Always */
	char *dir;         /* of the kubeconfig, for relative commands */
	bool provide_cluster_info;
};

struct kube_config {
	char *server;
	char *tls_server_name;
	char *proxy_url;
	bool insecure;
	bool disable_compression;
	struct kube_blob ca;
	struct kube_blob cert;
	struct kube_blob key;
	char *cert_file; /* set when cert/key came from files: re-read */
	char *key_file;
	char *token; /* secret */
	char *token_file;
	struct kube_exec *exec;
	char *ns;
	char *source; /* "file:/path" or "in-cluster", for logs */
};

void kube_exec_free(struct kube_exec *x);
/* Standard or URL-safe base64, whitespace ignored, padding optional. */
enum nv_err kube_b64_decode(const char *s, struct kube_blob *out);
/* Reads a whole file (at most max bytes) into a NUL-terminated buffer. */
enum nv_err kube_read_file(const char *path, size_t max, char **out, size_t *len);
/* Resolves a path from a kubeconfig against its directory; caller frees. */
char *kube_resolve_path(const char *dir, const char *path);

/* YAML (the JSON-compatible subset a kubeconfig uses) into json_t: plain
 * scalars true/false/null/integers get their JSON types, aliases and
 * anchors are refused, and errors name the path ("users[0].user.token"). */
enum nv_err kube_yaml_load(const char *data, size_t len, json_t **out, char *err, size_t errlen);

/* ---- credentials ---- */

/* What a request authenticates with; every member is a private copy. */
struct kube_cred {
	char *token;
	struct kube_blob cert;
	struct kube_blob key;
};
void kube_cred_clear(struct kube_cred *c);

struct kube_auth {
	pthread_mutex_t mu;
	const struct kube_config *cfg;
	int64_t file_ttl_ms;
	char *file_token;     /* cached token file contents */
	int64_t file_read_ms; /* monotonic time of that read */
	char *exec_token;
	struct kube_blob exec_cert;
	struct kube_blob exec_key;
	int64_t exec_expiry_ms; /* wall clock; 0 = none given */
	bool exec_valid;
	struct kube_blob file_cert; /* re-read client certificate files */
	struct kube_blob file_key;
	int64_t cert_read_ms;
};
#define KUBE_CERT_REREAD_MS (5 * 60 * 1000)
void kube_auth_init(struct kube_auth *a, const struct kube_config *cfg, int64_t ttl_ms);
void kube_auth_clear(struct kube_auth *a);
/* Fills cred with what the next request should send. */
enum nv_err kube_auth_get(struct kube_auth *a, struct kube_cred *cred, struct kube_status *st);
/* Called after a 401: cached file tokens and exec credentials are dropped. */
void kube_auth_invalidate(struct kube_auth *a);
/* Runs an exec plugin and parses its ExecCredential (for tests too). */
enum nv_err kube_exec_run(const struct kube_exec *x, const char *server, struct kube_cred *cred,
                          int64_t *expiry_ms, struct kube_status *st);
enum nv_err kube_exec_parse(const char *out, size_t len, const char *want_api,
                            struct kube_cred *cred, int64_t *expiry_ms, struct kube_status *st);

/* ---- transport: one curl multi handle driven by one thread ---- */

enum kube_xfer_state { XF_NEW = 0, XF_QUEUED, XF_RUNNING, XF_DONE };

struct kube_transport;

struct kube_xfer {
	struct kube_xfer *next; /* pending or active list */
	struct kube_transport *t;
	CURL *easy;
	struct curl_slist *hdrs; /* may hold a bearer token: wiped */
	char *req_body;
	struct buf resp; /* response body, capped */
	bool streaming;  /* watch: resp drained by the consumer */
	enum kube_xfer_state state;
	CURLcode cc;
	long http_code;
	long hdr_code; /* from the status line; under mu */
	int retry_after_s;
	bool too_large;
	bool abort_req;
	bool paused;
	bool unpause_req;
	char errbuf[CURL_ERROR_SIZE];
	char flow_schema[64]; /* X-Kubernetes-PF-FlowSchema-UID */
	pthread_cond_t cond;
};

struct kube_transport {
	CURLM *multi;
	pthread_t thread;
	pthread_mutex_t mu;
	bool started;
	bool stopping;
	bool poked;
	struct kube_xfer *pending;
	struct kube_xfer *active;
	struct kube_client_stats stats;
	/* Liveness of the connection (see kube_transport_liveness). */
	int64_t read_idle_ms;     /* nothing read this long: probe; 0 off */
	int64_t probe_timeout_ms; /* a probe unanswered this long: redial */
	char *probe_url;          /* GET of the server's /version */
	int64_t last_rx_ms;       /* monotonic, of the last byte read */
	struct kube_xfer *probe;  /* in flight, or NULL */
	kube_exchange_fn observe; /* each finished exchange, or NULL */
	void *observe_arg;
};

enum nv_err kube_transport_init(struct kube_transport *t);
/* Turns on the liveness check before the first transfer: after read_idle_ms
 * with transfers in flight and not a byte read, a GET of probe_url rides the
 * connection they share; unanswered within probe_timeout_ms, every transfer
 * in flight ends with CURLE_OPERATION_TIMEDOUT and the connections are
 * closed, so retries and resumed watches dial anew. */
void kube_transport_liveness(struct kube_transport *t, int64_t read_idle_ms,
                             int64_t probe_timeout_ms, const char *probe_url);
void kube_transport_clear(struct kube_transport *t);
/* x->easy is set up by the caller; the transport adds its callbacks. */
struct kube_xfer *kube_xfer_new(size_t max_body, bool streaming);
void kube_xfer_free(struct kube_xfer *x);
void kube_xfer_submit(struct kube_transport *t, struct kube_xfer *x);
/* Waits for the end; aborts the transfer when stop is set. */
void kube_xfer_wait(struct kube_transport *t, struct kube_xfer *x, struct kube_stop *stop);
/* Streaming: moves what arrived into dst (up to room bytes), waiting up to
 * wait_ms for data. Returns the bytes moved; *done when the transfer ended
 * and nothing is left. */
size_t kube_xfer_read(struct kube_transport *t, struct kube_xfer *x, char *dst, size_t room,
                      int64_t wait_ms, bool *done);
void kube_xfer_abort(struct kube_transport *t, struct kube_xfer *x);

/* ---- client ---- */

struct kube_client {
	struct kube_config *cfg;
	char *base_url;                /* server, host swapped for tls-server-name */
	char host[264];                /* the server's host:port, for metrics */
	struct curl_slist *connect_to; /* tls-server-name: where to really connect */
	struct kube_auth auth;
	struct kube_transport tr;
	struct kube_client_opts o;
	char user_agent[96];
};

/* Builds an easy handle for method + url with the client's TLS, auth and
 * timeouts. body is copied. streaming sets watch timeouts. */
enum nv_err kube_xfer_prepare(struct kube_client *c, struct kube_xfer *x, const char *method,
                              const char *url, const char *ctype, const char *body, bool streaming,
                              struct kube_status *st);
/* kube_request, but a 2xx answer's text is moved into out (cleared first;
 * the caller clears it) instead of parsed: for a reader that parses it piece
 * by piece. */
enum nv_err kube_request_text(struct kube_client *c, const struct kube_raw_req *r, struct buf *out,
                              struct kube_status *st);

/* Gets each item of a list, borrowed for the call (json_incref to keep it);
 * an error stops the list and is returned. */
typedef enum nv_err (*kube_item_fn)(void *ud, json_t *item);
/* Reads a List's text (an object whose "items" is an array of objects),
 * parsing one item at a time and handing it to fn, so the whole list is
 * never one tree. *meta gets the list's metadata (a new reference; {} when
 * absent) on success; NV_E_PARSE, with e saying where, on malformed text. */
enum nv_err kube_list_scan(const char *data, size_t len, kube_item_fn fn, void *ud, json_t **meta,
                           struct jx_err *e);
/* kube_list_all, item by item: every page is read with kube_list_scan, so
 * a list costs one page of text and one item at a time. *rv gets the
 * resourceVersion of the last page (the caller frees it). A 410 (an
 * expired continue token, or a resourceVersion too old) restarts the list
 * once from a consistent read, and fn sees the first pages' items again. */
enum nv_err kube_list_each(struct kube_client *c, const struct kube_res *r, const char *ns,
                           const struct kube_list_opts *o, kube_item_fn fn, void *ud, char **rv,
                           struct kube_status *st);

/* Maps an HTTP status (and Status.reason) to the error enum. */
enum nv_err kube_http_err(long code, const char *reason);
/* Fills st from a Status object body (may be NULL or not a Status). */
void kube_status_from_body(struct kube_status *st, long code, const char *body, size_t len);
void kube_status_set(struct kube_status *st, long code, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* "/api/v1/namespaces/ns/pods/name/status" into b, percent-encoding parts. */
enum nv_err kube_path_build(struct buf *b, const struct kube_res *r, const char *ns,
                            const char *name, const char *sub);
/* Appends "&k=v" (or "k=v" first) with v percent-encoded. */
enum nv_err kube_query_add(struct buf *q, const char *k, const char *v);

/* ---- watch framing ---- */

/* Splits a byte stream into JSON values without re-scanning: scan state
 * survives between feeds, and one value may not exceed max bytes. */
struct kube_framer {
	struct buf b;
	size_t max;
	size_t pos; /* scan position inside b */
	int depth;
	bool in_str;
	bool esc;
	bool started; /* inside a value */
};
void kube_framer_init(struct kube_framer *f, size_t max);
void kube_framer_clear(struct kube_framer *f);
enum nv_err kube_framer_feed(struct kube_framer *f, const char *data, size_t len);
/* NV_OK with *out (new reference), NV_E_NOT_FOUND when more input is
 * needed, NV_E_TOO_LARGE for an oversized value, NV_E_PARSE for garbage. */
enum nv_err kube_framer_next(struct kube_framer *f, json_t **out, struct jx_err *e);
/* Whether bytes of an unfinished value are buffered (a truncated stream). */
bool kube_framer_partial(const struct kube_framer *f);
/* Decodes {"type":..., "object":...}; *obj is borrowed from ev. */
enum nv_err kube_watch_event_decode(json_t *ev, enum kube_event_type *type, json_t **obj,
                                    struct jx_err *e);

/* ---- the informer's cache (cache.c) ---- */

/* One stored object: its compact JSON text, resourceVersion and index
 * values, immutable and reference counted, so a reader takes a reference
 * under the informer's lock and parses outside it. */
struct kube_cobj;
/* The key -> object table with its indexes. No lock of its own: the
 * informer holds its lock around every call below that takes a cache. */
struct kube_cache;

struct kube_cache *kube_cache_new(void);
/* Frees the table, its indexes and its references. NULL does nothing. */
void kube_cache_free(struct kube_cache *c);
/* While the cache is empty; NV_E_STATE past 8 indexes. name and arg are
 * copied. */
enum nv_err kube_cache_add_index(struct kube_cache *c, const char *name, kube_index_fn fn,
                                 const char *arg);
/* The stored form of obj (one reference): its text, resourceVersion and
 * the values of c's indexes, taken now. Reads only c's index table, which
 * is fixed before the first object, so it needs no lock. */
struct kube_cobj *kube_cobj_new(const struct kube_cache *c, const json_t *obj);
struct kube_cobj *kube_cobj_ref(struct kube_cobj *o);
/* NULL does nothing. */
void kube_cobj_unref(struct kube_cobj *o);
const char *kube_cobj_rv(const struct kube_cobj *o);
/* The compact text, borrowed from o; *len (when not NULL) its length. */
const char *kube_cobj_text(const struct kube_cobj *o, size_t *len);
/* A new tree of o (a new reference); never NULL. */
json_t *kube_cobj_parse(const struct kube_cobj *o);
/* Parses each of v[0..n) into a new array, then drops the references and
 * frees v. */
json_t *kube_cobj_parse_all(struct kube_cobj **v, size_t n);
/* key's object, borrowed (valid while the lock is held), or NULL. */
struct kube_cobj *kube_cache_peek(const struct kube_cache *c, const char *key);
/* Stores o under key (taking its reference; NULL deletes) and returns the
 * object it replaced (the caller's reference) or NULL. An existing key
 * keeps its place in the order. The replaced object's kept tree (see
 * kube_cache_keep) goes to *old_tree when old_tree is not NULL (NULL when
 * none was kept), else it is dropped. */
struct kube_cobj *kube_cache_swap(struct kube_cache *c, const char *key, struct kube_cobj *o,
                                  json_t **old_tree);
/* The memo of parsed trees: up to bytes of them (counted as 8 times their
 * text), the least recently read dropped first, and any not read for
 * idle_ms dropped by kube_cache_memo_expire; a key is kept from its second
 * read within idle_ms, so bytes 0 (the default) or idle_ms 0 keeps none.
 * Lowering the budget drops trees at once. The calls below take the
 * monotonic time in ms. */
void kube_cache_memo_max(struct kube_cache *c, size_t bytes, int64_t idle_ms);
/* Drops the trees not read for the idle time; returns what they counted
 * for. */
size_t kube_cache_memo_expire(struct kube_cache *c, int64_t now_ms);
/* Offers tree, parsed from o for a shared read of key: kept (the cache
 * takes its own reference) when o is still key's object, none is kept for
 * it yet, it fits the budget and key had a shared read within the idle
 * time before this one (a key read once in a while is not kept). A kept
 * tree is shared from here on: nobody may change it. */
void kube_cache_keep(struct kube_cache *c, const char *key, const struct kube_cobj *o, json_t *tree,
                     int64_t now_ms);
/* key's kept tree (a new reference) and *o NULL; or, with none kept, NULL
 * and a reference to key's object in *o, for the caller to parse (and
 * offer to kube_cache_keep); NULL and *o NULL when key is absent. */
json_t *kube_cache_tree(struct kube_cache *c, const char *key, struct kube_cobj **o,
                        int64_t now_ms);
void kube_cache_memo_stats(const struct kube_cache *c, uint64_t *hits, uint64_t *misses,
                           size_t *bytes);
size_t kube_cache_len(const struct kube_cache *c);
/* Bytes of text of every object. */
size_t kube_cache_bytes(const struct kube_cache *c);
/* References to every object in the order their keys came (*n of them),
 * or to those whose index has value; the caller frees the array (or hands
 * it to kube_cobj_parse_all). */
struct kube_cobj **kube_cache_all(const struct kube_cache *c, size_t *n);
struct kube_cobj **kube_cache_index(const struct kube_cache *c, const char *index,
                                    const char *value, size_t *n);
/* The keys whose index has value, as a new array of strings. */
json_t *kube_cache_index_keys(const struct kube_cache *c, const char *index, const char *value);
/* Copies of every key, in order; the caller frees each and the array. */
char **kube_cache_keys(const struct kube_cache *c, size_t *n);

/* Condition variables on the monotonic clock; waits return after at most
 * ms (spurious wake-ups included, so callers loop on their predicate). */
void kube_cond_init(pthread_cond_t *c);
void kube_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms);

/* The informer's list/watch backoff: 800 ms x2 up to 30 s by default. */
struct kube_backoff {
	int64_t cur_ms, initial_ms, max_ms, healthy_since;
};

/* Random integer in [lo, hi]. */
int64_t kube_rand_range(int64_t lo, int64_t hi);

/* A Lease claiming more than this many times our own lease duration is
 * judged by our own duration instead (see leader.c). */
#define KUBE_LEADER_CLAIM_FACTOR 4

#ifdef NVL72_UNIT_TEST
/* Static helpers the unit tests reach (see TESTABLE in base.h). */
int64_t kube_leader_claim_ms(int64_t claimed_ms, int64_t lease_ms);
enum nv_err kube_config_in_cluster_at(const char *sa_dir, const char *host, const char *port,
                                      struct kube_config **out, struct kube_status *st);
int64_t kube_backoff_next(struct kube_backoff *b, int retry_after_s, int64_t now_ms);
bool kube_should_retry(struct kube_client *c, const char *method, enum nv_err rc,
                       const struct kube_status *st, bool unsent, int attempt, int64_t *wait_ms);
#endif

#endif
