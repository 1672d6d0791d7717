/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/operator/: the context every controller shares (struct op,
 * the resources, names, events and leadership), the controller row that
 * op.c's table lists, and the one informer handler that maps objects to
 * queue keys. It sits below both op.c and the controllers, so that they
 * meet only through the table (docs/internals/controllers.md). */
#ifndef NVL72_OP_CTX_H
#define NVL72_OP_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "nvl72/fabric.h"
#include "nvl72/kube.h"
#include "nvl72/kube_access.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/metrics.h"
#include "nvl72/oob.h"
#include "nvl72/operator.h"
#include "nvl72/operator_domain.h"
#include "nvl72/operator_nvidia.h"
#include "nvl72/operator_rack.h"
#include "nvl72/web.h"

/* Log components and controller names (queue and metrics label). */
#define OP_COMP "operator"
#define RACK_COMP "rack"
#define RACK_CONTROLLER "rack"
#define DOMAIN_COMP "domain"
#define DOMAIN_CONTROLLER "computedomain"
#define PART_COMP "partition"
#define PART_CONTROLLER "rackpartition"
#define UPGRADE_COMP "upgrade"
#define UPGRADE_CONTROLLER "rackupgrade"

extern const struct kube_res OP_RES_RACKS;
extern const struct kube_res OP_RES_TRAYS;
extern const struct kube_res OP_RES_MATRICES;
extern const struct kube_res OP_RES_PARTITIONS;
extern const struct kube_res OP_RES_DOMAINS;
extern const struct kube_res OP_RES_UPGRADES;
extern const struct kube_res OP_RES_APPROVALS;

struct op;

/* ---- the controller row ---- */

/* Puts the queue keys that obj concerns into q. */
typedef void (*op_map_fn)(struct op *op, const json_t *obj, struct kube_workqueue *q);
/* The same from both states of an object: old is NULL on an add, new_obj
 * on a delete. */
typedef void (*op_map2_fn)(struct op *op, const json_t *old, const json_t *new_obj,
                           struct kube_workqueue *q);
/* Whether an update can matter to the controller; false drops it. */
typedef bool (*op_changed_fn)(struct op *op, const json_t *old, const json_t *new_obj);

/* One informer a controller watches, and how its events become keys.
 * Exactly one of map and map2 is set: map sees the object added, the new
 * state of an update or the object deleted; map2 sees both states. */
struct op_watch {
	size_t informer; /* OP_INFORMER(field) of struct op */
	op_map_fn map;
	op_map2_fn map2;
	op_changed_fn changed; /* NULL: every update maps */
};
#define OP_INFORMER(field) offsetof(struct op, field)
/* Indexes of the racks informer: the Nodes a Rack lists in
 * spec.computeTrays, and its spec.matrix.name; a Node or matrix event
 * finds its racks without scanning them all. */
#define OP_INDEX_RACK_NODE "node"
#define OP_INDEX_RACK_MATRIX "matrix"
/* ComputeTrays by spec.rack: a pass over one rack's trays reads 18, not
 * every tray of the cluster. */
#define OP_INDEX_TRAY_RACK "rack"
/* RackUpgrades by spec.rack: a tray's event finds its rack's upgrades
 * without reading them all. */
#define OP_INDEX_UPGRADE_RACK "rack"
/* The same for the upgrades still in flight (not Completed, Aborted or
 * RolledBack): a tray's, partition's or Node's event concerns only those. */
#define OP_INDEX_UPGRADE_ACTIVE "active-rack"
/* RackPartitions by spec.rack: a rack's pass or event reads its own. */
#define OP_INDEX_PARTITION_RACK "rack"
#define OP_WATCH_MAX 8

/* A controller: one row of op.c's table, defined in the controller's own
 * file. Its reconcile runs on workers of its own queue while this replica
 * leads; ud is the struct op. */
struct op_controller {
	const char *name;                 /* queue and metrics label */
	const char *comp;                 /* log component */
	size_t workers;                   /* OP_CONFIG(field): its int worker count */
	struct kube_workqueue_opts queue; /* per-item backoff; zero: the defaults */
	/* watches[0] is the controller's own kind: on taking the lead, every
	 * cached object of it is mapped into the queue. */
	const struct op_watch *watches;
	size_t nwatches;
	kube_reconcile_fn reconcile;
	/* Optional hooks. open: once the handlers are registered (a backend),
	 * an error fails op_new; close: after every worker stopped; passed:
	 * after every pass, outside its metrics; leading: on taking the lead,
	 * after every controller queued its objects. */
	enum nv_err (*open)(struct op *op);
	void (*close)(struct op *op);
	void (*passed)(struct op *op);
	void (*leading)(struct op *op);
};
#define OP_CONFIG(field) offsetof(struct op_config, field)

/* The rows, in their files; op.c's table orders them. */
extern const struct op_controller op_rack_controller;    /* rack_ctrl.c */
extern const struct op_controller op_domain_controller;  /* domain_ctrl.c */
extern const struct op_controller op_part_controller;    /* part_ctrl.c */
extern const struct op_controller op_upgrade_controller; /* upgrade_ctrl.c */

/* A watch bound to the running controller it feeds: a handler's ud. */
struct op_binding {
	struct op_ctrl *ctrl;
	const struct op_watch *w;
};

/* A row at run time: its queue, and its workers while leading. */
struct op_ctrl {
	const struct op_controller *row;
	struct op *op;
	struct kube_workqueue *q;
	struct kube_workers *workers;
	struct op_binding bind[OP_WATCH_MAX];
};
#define OP_CTRL_MAX 8

/* ---- the context ---- */

/* The operator's own metric families. The domain families of
 * docs/metrics.md are written from the caches at each scrape (op_metrics.c)
 * and kept nowhere. */
struct op_domain_metrics {
	struct metrics_family *build_info;
	/* The kube transport's liveness counters and what was last exported. */
	struct metrics_family *kube_probes, *kube_redials;
	uint64_t probes_seen, redials_seen;
	struct metrics_family *parsed_reads, *parsed_bytes; /* --parsed-cache-mib */
	uint64_t parsed_seen[2][2];                         /* trays, Nodes: hits, parses */
	pthread_mutex_t mu; /* one export of the counters at a time */
};

/* Whether the API server serves resource.k8s.io/v1, as the leader last
 * found it (domain_claim.c). */
enum op_dra_state {
	OP_DRA_UNKNOWN = 0, /* not looked yet in this term */
	OP_DRA_SERVED,
	OP_DRA_UNAVAILABLE, /* 404: ComputeDomains get no ResourceClaimTemplate */
};

/* The DRA objects of the ComputeDomain controller. Everything is read and
 * written under mu; templates is made (once, by the first term that finds
 * the API served) and freed on the main thread only, so op.c reads the
 * pointer there without the lock. */
struct op_dra {
	pthread_mutex_t mu;
	enum op_dra_state state;
	bool said_unavailable; /* the one log line is out */
	/* The ResourceClaimTemplates labelled nvl72.io/compute-domain, in every
	 * namespace; NULL until then. Not part of /readyz: a replica that never
	 * led has none. */
	struct kube_informer *templates;
};

struct op {
	struct op_config cfg;
	char lease_ns[64];
	char agent_ns[64];
	struct kube_selector *agent_sel; /* --agent-node-selector, NULL: none */
	struct kube_node_keep node_keep; /* what the Node cache keeps */
	char identity[160];

	struct kube_client *c;
	struct kube_access *access; /* POSTs to the dashboard */
	struct kube_informer *racks, *trays, *nodes, *leases, *matrices, *partitions, *domains;
	struct kube_informer *upgrades, *approvals;
	struct op_dra dra;
	struct op_nvidia *nv;             /* NVIDIA's ComputeDomains, read only (op_nvidia.c) */
	struct op_ctrl ctrl[OP_CTRL_MAX]; /* the table's rows, in its order */
	size_t nctrl;
	struct fabric_backend *fabric; /* NULL: --fabric-backend none */
	struct oob_backend *oob;       /* NULL: --oob-backend none */
	int64_t oob_poll_ms;           /* look at a running update this often */
	struct kube_recorder *rec;
	struct kube_leader *le;

	struct metrics_registry *reg;
	struct metrics_std std;
	struct op_domain_metrics dm;
	/* RackUpgrade metrics updated by the controller (docs/metrics.md). */
	struct metrics_family *upg_step_seconds;

	struct web_server *probes, *metrics_srv, *dash, *webhook;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool leading;     /* set by the election callbacks */
	bool lost;        /* leadership lost: exit non-zero */
	bool stop;        /* op_request_stop */
	int64_t stop_ms;  /* monotonic time of the first stop request */
	bool leader_done; /* the election thread returned */
	bool workers_on;  /* controllers running (main thread only) */

	/* Rack controller: when each Rack's status was last written
	 * (monotonic ms), for --rack-status-interval. */
	pthread_mutex_t rack_mu;
	json_t *rack_written; /* rack name -> integer */

	/* Dashboard feed: last text published per topic, and the fleet. */
	pthread_mutex_t feed_mu;
	json_t *feed_last; /* topic -> string */
	json_t *fleet;     /* rack name -> fleet entry */
	json_t *events;    /* recent event payloads, newest first */
};

/* Registers the handler of each of c's watches (c->row, c->op and c->q
 * set) on its informer; an informer the context lacks is skipped. */
enum nv_err op_ctrl_watch(struct op_ctrl *c);
/* Maps every cached object of c's first watch into its queue. */
void op_ctrl_enqueue_all(struct op_ctrl *c);
/* The queue of the controller named name; NULL when there is none. */
struct kube_workqueue *op_queue(struct op *op, const char *name);

/* ---- a ComputeDomain's DRA objects (domain_claim.c) ---- */

/* The domain controller's leading hook: finds whether resource.k8s.io/v1
 * is served (one discovery GET), starts the template cache, applies the
 * DeviceClass and queues every ComputeDomain again. Main thread. */
void op_claim_leading(struct op *op);
/* Keeps dom's ResourceClaimTemplate name (key its domain key) as
 * op_domain_claim_template builds it: created when absent, deleted and
 * created again when it differs, left alone when it matches or is not the
 * domain's. Fills *out for the status (out->reason NULL: resource.k8s.io
 * not looked at yet, leave the status as it is) and returns the error of a
 * failed read or write. Worker thread. */
enum nv_err op_claim_sync(struct op *op, const json_t *dom, const char *key, const char *name,
                          enum op_domain_channels channels, struct op_domain_claim *out);
/* Deletes the templates dom controls among those named names[0..n) (its
 * wanted and its reported one), before its finalizer goes. */
enum nv_err op_claim_release(struct op *op, const json_t *dom, const char *const *names, size_t n);

/* Records an Event about obj and mirrors it to the dashboard feed. */
void op_event(struct op *op, const json_t *obj, const char *type, const char *reason,
              const char *action, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* A new, empty error list for one parse of a spec (32 KiB: too large for
 * a worker's stack); op_spec_report_take frees it. */
struct api_errors *op_spec_errors_new(void);
/* Takes the result rc of one api parse of obj and its errs, and frees
 * errs. A refusal (rc not NV_OK) is reported: one warning line naming the
 * object as key=name (key=namespace/name when namespaced) with every field
 * and its problem, and a Warning SpecInvalid Event on obj. The caller then
 * writes nothing and does not requeue: the object's next change brings it
 * back. Returns rc. */
enum nv_err op_spec_report_take(struct op *op, const json_t *obj, const char *comp, const char *key,
                                const char *action, enum nv_err rc, struct api_errors *errs);

bool op_is_leading(struct op *op);

/* ---- what several controllers read ---- */

/* The renewal time of the agent Lease of tray, in ms; 0 when unknown. */
int64_t op_lease_renew_ms(struct op *op, const char *tray);
/* The stale-Lease filter: a renewal of a Lease that was still fresh, by
 * the same holder, changes nothing a controller shows (the pass that read
 * it is requeued for the moment it would go stale); only a renewal after
 * staleness, or a new holder, does. At 64 racks this keeps every agent's
 * renewal from costing a reconcile. */
bool op_lease_changed(struct op *op, const json_t *old, const json_t *new_obj);
/* The status of a Node's Ready condition, "" without one. */
const char *op_node_ready(const json_t *node);

/* ---- NVIDIA's ComputeDomains (op_nvidia.c) ---- */

/* What a pass knows of the trays NVIDIA's ComputeDomains use. */
enum op_nvidia_view {
	OP_NVIDIA_ABSENT = 0, /* NVIDIA's ComputeDomain CRD is not served: none */
	OP_NVIDIA_READ,       /* read from the caches */
	OP_NVIDIA_UNREAD,     /* served (or discovery failed) but not read yet */
};

/* The state and, once NVIDIA's CRD is served, the caches: created empty
 * by op_build; op_nvidia_stop stops the caches' threads (before the queues
 * their handlers feed go), op_nvidia_free frees them (NULL-safe). */
enum nv_err op_nvidia_new(struct op *op);
void op_nvidia_stop(struct op *op);
void op_nvidia_free(struct op *op);
/* For each of nodes[i] (n of them), the NVIDIA ComputeDomain using it into
 * busy[i] ("namespace/name", "" when none; see op_nvidia_node_domain).
 * Asks discovery first when it has not answered in the last five minutes
 * (one GET, blocking) and starts or drops the caches to match; waits up
 * to 2 s for caches just started. UNREAD comes with why. Any worker may
 * call it. */
enum op_nvidia_view op_nvidia_busy(struct op *op, const char *const *nodes, unsigned n,
                                   char (*busy)[OP_NVIDIA_NAME_MAX], char *why, size_t cap);

/* ---- the dashboard feed (op_feed.c) ---- */

void op_feed_rack(struct op *op, const json_t *rack, const struct op_rack_eval *ev,
                  const struct op_tray_in *in, bool cordoned);
void op_feed_rack_gone(struct op *op, const char *name);
/* Publishes the `domains/<namespace>` topics from the ComputeDomain cache,
 * each for the readers of its namespace, and removes emptied ones. */
void op_feed_domains(struct op *op);
/* The "upgrades" topic from the RackUpgrade and UpgradeApproval caches. */
void op_feed_upgrades(struct op *op);
/* Mirrors an Event about object (in namespace ns, "" for a cluster
 * object) to the feed: `event`, and `events` or `events/<ns>`. */
void op_feed_event(struct op *op, const char *type, const char *reason, const char *ns,
                   const char *object, const char *message);
void op_feed_clear(struct op *op);

#endif
