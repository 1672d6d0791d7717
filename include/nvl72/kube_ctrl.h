/* SPDX-License-Identifier: Apache-2.0 */
/* The controller runtime on top of kube.h: informers (list+watch into an
 * indexed cache with handlers), work queues with per-item backoff, leader
 * election on a Lease, event recording with aggregation, and conditions. */
#ifndef NVL72_KUBE_CTRL_H
#define NVL72_KUBE_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/err.h"
#include "nvl72/kube.h"

/* ---- informer ---- */

struct kube_informer;

/* Handlers run on the informer's thread, one at a time, in event order;
 * they should only enqueue keys. Objects are borrowed and read-only. A
 * delete found by a relist (not seen as a watch event) has
 * final_state_unknown set: obj is the last state the cache knew. */
struct kube_handler {
	void (*on_add)(void *ud, json_t *obj);
	void (*on_update)(void *ud, json_t *old_obj, json_t *new_obj);
	void (*on_delete)(void *ud, json_t *obj, bool final_state_unknown);
	void *ud;
};

#define KUBE_INDEX_MAX_VALUES 16
/* Index values of one object; strings are borrowed from the object. */
struct kube_index_vals {
	const char *v[KUBE_INDEX_MAX_VALUES];
	size_t n;
};
typedef void (*kube_index_fn)(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* Built-in index functions. */
void kube_index_namespace(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* arg is the label key; the value is the label's value. */
void kube_index_label(const json_t *obj, const char *arg, struct kube_index_vals *out);
/* spec.nodeName of pods. */
void kube_index_node_name(const json_t *obj, const char *arg, struct kube_index_vals *out);

struct kube_informer_opts {
	const struct kube_res *res;
	const char *ns;               /* NULL or "": all namespaces */
	const char *label_selector;
	const char *field_selector;
	int watch_timeout_s;          /* 0: random 300..600 */
	int64_t page_size;            /* 0: 500 */
	int64_t backoff_initial_ms;   /* 0: 800 */
	int64_t backoff_max_ms;       /* 0: 30000 */
};

enum nv_err kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
			      struct kube_informer **out);
/* Before start only. name is how kube_informer_by_index finds it. */
enum nv_err kube_informer_add_index(struct kube_informer *inf, const char *name,
				    kube_index_fn fn, const char *arg);
enum nv_err kube_informer_add_handler(struct kube_informer *inf, const struct kube_handler *h);
/* Starts the list+watch thread. */
enum nv_err kube_informer_start(struct kube_informer *inf);
/* Waits until the first list has been applied; false on timeout/stop. */
bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ms);
bool kube_informer_synced(struct kube_informer *inf);
/* Stops and joins the thread; then frees. NULL does nothing. */
void kube_informer_free(struct kube_informer *inf);

/* Snapshot reads: new references to immutable cached objects (never
 * modify them; json_deep_copy first). NULL when absent. */
json_t *kube_informer_get(struct kube_informer *inf, const char *key);
/* A new array of every object, or of those whose index name has value. */
json_t *kube_informer_list(struct kube_informer *inf);
json_t *kube_informer_by_index(struct kube_informer *inf, const char *index,
			       const char *value);
/* The resourceVersion the cache reflects, copied into out. */
void kube_informer_last_rv(struct kube_informer *inf, char *out, size_t outsz);

struct kube_informer_stats {
	uint64_t lists;          /* full lists (initial + relists) */
	uint64_t watches;        /* watch requests started */
	uint64_t gone;           /* 410 answers that forced a relist */
	uint64_t bookmarks;
	uint64_t events;         /* watch events applied */
};
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *out);

/* ---- work queue ---- */

struct kube_workqueue;

struct kube_workqueue_opts {
	int64_t base_delay_ms;   /* per-item backoff start, default 5 */
	int64_t max_delay_ms;    /* cap, default 1000000 (1000 s) */
};

struct kube_workqueue *kube_workqueue_new(const char *name, const struct kube_workqueue_opts *o);
/* Shuts down (if needed) and frees; workers must have been joined. */
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
/* Blocks for the next key (caller frees it); NULL once shut down, even
 * with keys left, so that shutdown stops dispatching at once. */
char *kube_workqueue_get(struct kube_workqueue *q);
void kube_workqueue_done(struct kube_workqueue *q, const char *key);
void kube_workqueue_shutdown(struct kube_workqueue *q);
bool kube_workqueue_shutting_down(struct kube_workqueue *q);
size_t kube_workqueue_len(struct kube_workqueue *q);

/* What a reconcile asks for next. */
struct kube_result {
	enum nv_err err;          /* non-NV_OK: requeue with backoff */
	int64_t requeue_after_ms; /* > 0: forget, then add_after */
	bool terminal;            /* with err: log, forget, do not requeue */
};
typedef struct kube_result (*kube_reconcile_fn)(void *ud, const char *key);

/* Runs n worker threads until the queue shuts down. */
struct kube_workers;
struct kube_workers *kube_workers_start(struct kube_workqueue *q, int n, kube_reconcile_fn fn,
					void *ud);
/* Shuts the queue down, lets in-flight reconciles finish, joins, frees. */
void kube_workers_stop(struct kube_workers *w);

/* ---- leader election ---- */

struct kube_leader;

struct kube_leader_opts {
	const char *ns;
	const char *name;
	const char *identity;          /* default <hostname>_<random> */
	int64_t lease_ms;              /* default 15000 */
	int64_t renew_deadline_ms;     /* default 10000 */
	int64_t retry_ms;              /* default 2000 */
	bool no_release_on_stop;       /* we release by default */
	void (*on_started)(void *ud);  /* became leader */
	void (*on_stopped)(void *ud);  /* lost or released */
	void (*on_new_leader)(void *ud, const char *identity);
	void *ud;
};

enum nv_err kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
			    struct kube_leader **out);
void kube_leader_free(struct kube_leader *le);
/* Campaigns, then renews, until stop is set (NV_OK, lease released) or
 * leadership is lost (NV_E_STATE: stop all work at once and exit). */
enum nv_err kube_leader_run(struct kube_leader *le, struct kube_stop *stop);
bool kube_leader_is_leader(struct kube_leader *le);
const char *kube_leader_identity(const struct kube_leader *le);

/* ---- events (events.k8s.io/v1) ---- */

struct kube_recorder;

/* controller is reportingController ("nvl72.io/operator"); instance is
 * reportingInstance (default controller-hostname). A thread writes the
 * events; a full queue (1000) drops, never blocks. */
struct kube_recorder *kube_recorder_new(struct kube_client *c, const char *controller,
					const char *instance);
/* Flushes what is queued (up to a few seconds) and frees. */
void kube_recorder_free(struct kube_recorder *r);
/* type "Normal" or "Warning"; reason CamelCase; note up to 1024 bytes.
 * Repeats of the same (regarding, type, reason, action) within 6 minutes
 * update one Event's series instead of creating new ones. */
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

/* Sets a condition in obj's status.conditions (created if needed).
 * lastTransitionTime changes only when status changes; reason, message
 * and observedGeneration are updated in place. Returns true when anything
 * changed, so callers skip no-op status writes. now_ms is wall time. */
bool kube_condition_set(json_t *obj, const char *type, const char *status,
			const char *reason, const char *message, int64_t observed_generation,
			int64_t now_ms);
/* The condition object of that type (borrowed) or NULL. */
json_t *kube_condition_find(const json_t *obj, const char *type);
bool kube_condition_is_true(const json_t *obj, const char *type);
bool kube_condition_remove(json_t *obj, const char *type);

#endif
