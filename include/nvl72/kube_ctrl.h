/* SPDX-License-Identifier: Apache-2.0 */
/* The controller runtime on top of kube.h: informers (list+watch into an
 * indexed cache with handlers), work queues with per-item backoff, leader
 * election on a Lease, event recording with aggregation, and conditions. */
/* Contract. The errors, ownership words and request bounds of kube.h hold
 * here too. An object made with a kube_client borrows it, and the client
 * must outlive it. Threads this header starts: one reflector per started
 * informer (its handlers run on it), n per kube_workers, one per recorder;
 * leader election runs on the thread that calls kube_leader_run. The
 * frees stop and join those threads, so none may be called from a thread
 * of the object it frees (a handler, a reconcile, a leader callback), and
 * each waits for the callback in progress to return. Reads (informer
 * get/list/by_index/stats, queue calls, kube_leader_is_leader, recorder
 * eventf/stats) may be called from any thread; configuration calls
 * (add_index, add_handler) belong to the creating thread, before start. */
#ifndef NVL72_KUBE_CTRL_H
#define NVL72_KUBE_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/err.h"
#include "nvl72/kube.h"

/* ---- label selectors ---- */

/* A label selector in the apiserver's text form: requirements joined by
 * commas, each `key`, `!key`, `key=value` (or `==`), `key!=value`,
 * `key in (v1,v2)` or `key notin (v1,v2)`; all must hold. "" selects
 * everything. Bounds: 32 requirements, 16 values each, keys of 317 and
 * values of 63 characters. */
struct kube_selector;

/* Parses text; on NV_E_INVAL err says where and why. *out is the
 * caller's, freed with kube_selector_free. */
enum nv_err kube_selector_parse(const char *text, struct kube_selector **out, char *err,
                                size_t errcap);
void kube_selector_free(struct kube_selector *s);
bool kube_selector_empty(const struct kube_selector *s);
/* Whether labels (an object's metadata.labels, NULL for none) satisfy s;
 * when not, unmet gets the first requirement that fails, as text. */
bool kube_selector_match(const struct kube_selector *s, const json_t *labels, char *unmet,
                         size_t cap);
/* Whether one of s's requirements names key. */
bool kube_selector_names(const struct kube_selector *s, const char *key);

/* ---- informer ---- */

struct kube_informer;

/* Handlers run on the informer's thread, one at a time, in event order;
 * they should only enqueue keys. Objects are borrowed and read-only, valid
 * for the call (json_incref to keep one). A delete found by a relist (not
 * seen as a watch event) has final_state_unknown set: obj is the last
 * state the cache knew. Handlers run outside the cache lock, so they may
 * read any informer (this one included) and add to work queues; they must
 * not block (a slow handler delays this informer's events and pauses its
 * watch stream) and must not free their own informer. */
struct kube_handler {
	void (*on_add)(void *ud, json_t *obj);
	void (*on_update)(void *ud, json_t *old_obj, json_t *new_obj);
	void (*on_delete)(void *ud, json_t *obj, bool final_state_unknown);
	void *ud;
};

/* Room for the Nodes of a rack's 18 compute trays, and then some. */
#define KUBE_INDEX_MAX_VALUES 32
/* Index values of one object; strings are borrowed from the object (the
 * informer copies them). */
struct kube_index_vals {
	const char *v[KUBE_INDEX_MAX_VALUES];
	size_t n;
};
/* Runs on the informer's thread when an object is stored, whose values it
 * keeps until the object goes: it must only read obj, and must not call
 * into the informer. */
typedef void (*kube_index_fn)(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* Built-in index functions. */
void kube_index_namespace(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* arg is the label key; the value is the label's value. */
void kube_index_label(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* spec.nodeName of pods. */
void kube_index_node_name(const json_t *obj, const char *arg, struct kube_index_vals *out);

/* Trims an object the informer is about to store, in place: it may only
 * delete members (and must leave metadata.name, namespace and
 * resourceVersion). Runs on the informer's thread, without the cache lock,
 * on every listed and watched object, deleted ones included; arg is
 * kube_informer_opts.transform_arg. */
typedef void (*kube_transform_fn)(json_t *obj, const void *arg);

/* What the operator reads of a Node (docs/performance.md lists it):
 * metadata's name, namespace, uid, resourceVersion, creationTimestamp and
 * deletionTimestamp; the labels and annotations keep admits; spec's
 * unschedulable and taints; status.addresses and the Ready condition less
 * its lastHeartbeatTime. arg is a struct kube_node_keep. */
struct kube_node_keep {
	const char *const *label_prefixes;      /* NULL-terminated; NULL: none */
	const char *const *annotation_prefixes; /* NULL-terminated; NULL: none */
	const struct kube_selector *selector;   /* labels its requirements name */
};
void kube_transform_node(json_t *obj, const void *keep);
/* Of a Lease: metadata's name, namespace, uid and resourceVersion, and
 * spec's holderIdentity, renewTime and leaseDurationSeconds. arg unused. */
void kube_transform_lease(json_t *obj, const void *arg);

struct kube_informer_opts {
	const struct kube_res *res;
	const char *ns; /* NULL or "": all namespaces */
	const char *label_selector;
	const char *field_selector;
	int watch_timeout_s;        /* 0: random 300..600 */
	int64_t page_size;          /* 0: 500 */
	int64_t backoff_initial_ms; /* 0: 800 */
	int64_t backoff_max_ms;     /* 0: 30000 */
	/* Every object loses metadata.managedFields before it is stored,
	 * unless keep_managed_fields; then transform, if set, trims it
	 * further. A reconciler that writes an object it read from the cache
	 * patches it (or applies), never PUTs the trimmed copy back. */
	bool keep_managed_fields;
	kube_transform_fn transform;
	const void *transform_arg; /* borrowed: must outlive the informer */
	/* Parsed trees kept for kube_informer_get_shared: those of keys
	 * read again within 5 s, up to this many bytes (counted as 8 times
	 * their text), least recently read out first, each dropped after 5 s
	 * unread; 0: none, every read parses. With a budget a handler's old
	 * object may be such a tree: a handler must not change it. */
	size_t memo_bytes;
};

/* Sends no request: the first list happens on the thread kube_informer_start
 * creates. The options' strings are copied; o->res is borrowed and must
 * outlive the informer. */
enum nv_err kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
                              struct kube_informer **out);
/* Before start only (NV_E_STATE after it). name is how
 * kube_informer_by_index finds it; name and arg are copied. */
enum nv_err kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn fn,
                                    const char *arg);
enum nv_err kube_informer_add_handler(struct kube_informer *inf, const struct kube_handler *h);
/* Starts the list+watch thread. */
enum nv_err kube_informer_start(struct kube_informer *inf);
/* Waits until the first list has been applied; false on timeout/stop.
 * Blocks up to timeout_ms; kube_informer_synced does not wait. */
bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ms);
bool kube_informer_synced(struct kube_informer *inf);
/* Why the informer's last list failed ("" and false once a list succeeded):
 * a CustomResourceDefinition not installed is named as such. */
bool kube_informer_why(struct kube_informer *inf, char *out, size_t cap);
/* Stops and joins the thread: no handler runs after it returns, and the
 * cache stays readable. Returns once the request in flight is aborted and a
 * handler in progress has returned: about 200 ms plus that handler. Stop
 * every informer whose handlers read others before freeing any of them.
 * NULL or a stopped informer does nothing. */
void kube_informer_stop(struct kube_informer *inf);
/* kube_informer_stop, then frees. NULL does nothing. */
void kube_informer_free(struct kube_informer *inf);

/* Snapshot reads under the cache lock, from any thread, never waiting on
 * the network: new references (json_decref them) to immutable cached
 * objects (never modify them; json_deep_copy first). NULL when absent.
 * Before the first list the cache is empty, not an error. The cache keeps
 * each object as compact JSON text and every read parses it anew (about a
 * microsecond per 100 bytes): a pass reads an object once, and reads a few
 * through get or by_index rather than the whole list. */
json_t *kube_informer_get(struct kube_informer *inf, const char *key);
/* key's object as a tree shared with every other shared reader (other
 * threads too), or NULL: parsed once per version while the informer's
 * memo keeps it (opts.memo_bytes), parsed anew for each read otherwise.
 * Read it, never change it (jansson's readers, dump, copy and equal are
 * safe on a tree other threads read); hand it back with kube_shared_put.
 * For a pass that reads the same objects as many other passes: a rack's
 * trays and Nodes. */
const json_t *kube_informer_get_shared(struct kube_informer *inf, const char *key);
/* Drops a shared read's reference; NULL does nothing. */
void kube_shared_put(const json_t *obj);
/* A new array of every object, or of those whose index name has value. */
json_t *kube_informer_list(struct kube_informer *inf);
json_t *kube_informer_by_index(struct kube_informer *inf, const char *index, const char *value);
/* The keys (name, or namespace/name) of the objects whose index has
 * value, as a new array of strings, parsing none: for a handler that maps
 * an event to the keys of other objects. */
json_t *kube_informer_index_keys(struct kube_informer *inf, const char *index, const char *value);
/* Calls fn with each cached object in turn (a new tree, borrowed for the
 * call), parsing one at a time: a pass over a large cache holds one object,
 * where kube_informer_list holds them all. The objects are those cached when
 * the call began; fn runs outside the cache lock, and returning false
 * stops the pass. */
typedef bool (*kube_visit_fn)(void *ud, json_t *obj);
void kube_informer_foreach(struct kube_informer *inf, kube_visit_fn fn, void *ud);
/* The resourceVersion the cache reflects, copied into out. */
void kube_informer_last_rv(struct kube_informer *inf, char *out, size_t outsz);

struct kube_informer_stats {
	uint64_t lists;   /* full lists (initial + relists) */
	uint64_t watches; /* watch requests started */
	uint64_t gone;    /* 410 answers that forced a relist */
	uint64_t bookmarks;
	uint64_t events;                 /* watch events applied */
	size_t objects;                  /* in the cache now */
	size_t bytes;                    /* their compact JSON text */
	uint64_t memo_hits, memo_misses; /* shared reads served kept, parsed */
	size_t memo_bytes;               /* what the kept trees count for */
};
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *out);

/* ---- work queue ---- */

struct kube_workqueue;

struct kube_workqueue_opts {
	int64_t base_delay_ms; /* per-item backoff start, default 5 */
	int64_t max_delay_ms;  /* cap, default 1000000 (1000 s) */
};

struct kube_workqueue *kube_workqueue_new(const char *name, const struct kube_workqueue_opts *o);
/* Every queue call may be made from any thread; only kube_workqueue_get
 * blocks. Keys are copied in. */
/* Frees the queue and the keys left in it; no thread may still be in a
 * call on it (stop its workers first). NULL does nothing. */
void kube_workqueue_free(struct kube_workqueue *q);
/* Adds a key; a key already waiting is not added twice, and a key being
 * processed is re-queued when its worker calls done. Ignored after shutdown. */
void kube_workqueue_add(struct kube_workqueue *q, const char *key);
void kube_workqueue_add_after(struct kube_workqueue *q, const char *key, int64_t delay_ms);
/* add_after with the per-item exponential backoff; counts a failure. */
void kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key);
/* Resets the failure count of key. */
void kube_workqueue_forget(struct kube_workqueue *q, const char *key);
int kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key);
/* Blocks for the next key (caller frees it, after kube_workqueue_done);
 * NULL once shut down, even with keys left, so that shutdown stops
 * dispatching at once. */
char *kube_workqueue_get(struct kube_workqueue *q);
void kube_workqueue_done(struct kube_workqueue *q, const char *key);
void kube_workqueue_shutdown(struct kube_workqueue *q);
/* Accepts adds and serves gets again after a shutdown, keeping what is
 * queued: for the next workers on the same queue (a new leadership term).
 * Only once the workers of the shutdown have been stopped. */
void kube_workqueue_reopen(struct kube_workqueue *q);
bool kube_workqueue_shutting_down(struct kube_workqueue *q);
size_t kube_workqueue_len(struct kube_workqueue *q);

/* What a queue reports for the workqueue_* metrics, as client-go's
 * MetricsProvider: called with the queue's lock held, so quick and never
 * back into the queue. A NULL member reports nothing. */
struct kube_workqueue_metrics {
	void *arg;
	void (*added)(void *arg);                  /* a key queued, not a duplicate */
	void (*retried)(void *arg);                /* a delayed or rate-limited add */
	void (*waited)(void *arg, double seconds); /* a key's time queued, at get */
	void (*worked)(void *arg, double seconds); /* a worker's time on it, at done */
};
/* Copied in; NULL: none. Before the first add, or any time after. */
void kube_workqueue_set_metrics(struct kube_workqueue *q, const struct kube_workqueue_metrics *m);
/* Seconds spent so far on the keys workers hold now: all of them together
 * and the longest one (0 and 0 with none). */
void kube_workqueue_in_progress(struct kube_workqueue *q, double *unfinished_s, double *longest_s);

/* What a reconcile asks for next. */
struct kube_result {
	enum nv_err err;          /* non-NV_OK: requeue with backoff */
	int64_t requeue_after_ms; /* > 0: forget, then add_after */
	bool terminal;            /* with err: log, forget, do not requeue */
};
typedef struct kube_result (*kube_reconcile_fn)(void *ud, const char *key);

/* Runs n worker threads (n < 1: one) until the queue shuts down. fn runs
 * on a worker thread, one key at a time per worker and never the same key
 * on two workers; it may block (API calls) but must not stop its own
 * workers. The queue and ud are borrowed and must outlive the workers. */
struct kube_workers;
struct kube_workers *kube_workers_start(struct kube_workqueue *q, int n, kube_reconcile_fn fn,
                                        void *ud);
/* Shuts the queue down, lets in-flight reconciles finish, joins, frees;
 * blocks as long as the slowest reconcile in flight. NULL does nothing. */
void kube_workers_stop(struct kube_workers *w);

/* ---- leader election ---- */

struct kube_leader;

struct kube_leader_opts {
	const char *ns;
	const char *name;
	const char *identity;      /* default <hostname>_<random> */
	int64_t lease_ms;          /* default 15000 */
	int64_t renew_deadline_ms; /* default 10000 */
	int64_t retry_ms;          /* default 2000 */
	bool no_release_on_stop;   /* we release by default */
	/* The callbacks run on the thread of kube_leader_run, inside the loop
	 * that renews: they must return quickly (start work elsewhere), or
	 * the renewal waits. identity is borrowed for the call. */
	void (*on_started)(void *ud); /* became leader */
	void (*on_stopped)(void *ud); /* lost or released */
	void (*on_new_leader)(void *ud, const char *identity);
	void *ud;
};

/* NV_E_CONFIG when the durations break lease > renew deadline > 1.2 x
 * retry. Sends no request; the strings of o are copied. */
enum nv_err kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                            struct kube_leader **out);
void kube_leader_free(struct kube_leader *le);
/* Campaigns, then renews, until stop is set (NV_OK, lease released) or
 * leadership is lost (NV_E_STATE: stop all work at once and exit). Blocks
 * the calling thread all that time; each Lease request is one attempt
 * bounded by retry_ms, and stop is seen within about 100 ms. Free with
 * kube_leader_free only after it returns. */
enum nv_err kube_leader_run(struct kube_leader *le, struct kube_stop *stop);
bool kube_leader_is_leader(struct kube_leader *le);
/* Borrowed from le, valid until kube_leader_free. */
const char *kube_leader_identity(const struct kube_leader *le);

/* ---- events (events.k8s.io/v1) ---- */

struct kube_recorder;

/* controller is reportingController ("nvl72.io/operator"); instance is
 * reportingInstance (default controller-hostname). A thread writes the
 * events; a full queue (1000) drops, never blocks. */
struct kube_recorder *kube_recorder_new(struct kube_client *c, const char *controller,
                                        const char *instance);
/* Flushes what is queued (up to 5 s), then joins the thread, which writes
 * the series still counted locally first, and frees. NULL does nothing. */
void kube_recorder_free(struct kube_recorder *r);
/* type "Normal" or "Warning"; reason CamelCase; note up to 1024 bytes.
 * Repeats of the same (regarding, type, reason, action) within 6 minutes
 * update one Event's series instead of creating new ones. From any thread;
 * never blocks on the network: what it needs of regarding is copied. */
void kube_recorder_eventf(struct kube_recorder *r, const json_t *regarding, const char *type,
                          const char *reason, const char *action, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
/* Blocks until the queue is empty or timeout; true when drained. */
bool kube_recorder_flush(struct kube_recorder *r, int64_t timeout_ms);

struct kube_recorder_stats {
	uint64_t created;
	uint64_t series_updates;
	uint64_t dropped;
	uint64_t failed;
};
void kube_recorder_stats(struct kube_recorder *r, struct kube_recorder_stats *out);

/* ---- conditions (metav1.Condition) ---- */

/* Pure helpers on the caller's object: one thread per object being
 * changed; they never block. */
/* Sets a condition in obj's status.conditions (created if needed).
 * lastTransitionTime changes only when status changes; reason, message
 * and observedGeneration are updated in place. Returns true when anything
 * changed, so callers skip no-op status writes. now_ms is wall time. */
bool kube_condition_set(json_t *obj, const char *type, const char *status, const char *reason,
                        const char *message, int64_t observed_generation, int64_t now_ms);
/* The condition object of that type (borrowed from obj) or NULL. */
json_t *kube_condition_find(const json_t *obj, const char *type);
bool kube_condition_is_true(const json_t *obj, const char *type);
bool kube_condition_remove(json_t *obj, const char *type);

#endif
