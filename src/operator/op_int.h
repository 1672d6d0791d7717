/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/operator/: the operator context shared by the process
 * wiring (op.c), the Rack controller, the domain metrics and the dashboard
 * feed. */
#ifndef NVL72_OP_INT_H
#define NVL72_OP_INT_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>

#include "nvl72/fabric.h"
#include "nvl72/kube.h"
#include "nvl72/kube_access.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/metrics.h"
#include "nvl72/oob.h"
#include "nvl72/operator.h"
#include "nvl72/operator_domain.h"
#include "nvl72/operator_rack.h"
#include "nvl72/web.h"

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

/* Domain metric families (docs/metrics.md), rebuilt at each scrape. */
struct op_domain_metrics {
	struct metrics_family *rack_info, *rack_trays, *rack_trays_ready, *rack_trays_unavailable,
	        *rack_gpus_healthy, *rack_min_healthy, *rack_threshold, *rack_degraded,
	        *rack_fabric_state, *version_skew;
	struct metrics_family *tray_ready, *tray_heartbeat, *tray_clique, *tray_driver,
	        *tray_maintenance;
	struct metrics_family *gpu_state, *gpu_status_ok, *gpu_degraded, *gpu_mask, *gpu_summary;
	struct metrics_family *imex_daemon, *imex_domain, *imex_connected, *imex_peers,
	        *imex_config;
	struct metrics_family *build_info;
	struct metrics_family *upgrade_info, *upgrade_phase, *upgrade_phase_start, *upgrade_wave,
	        *upgrade_waves, *upgrade_approvals_pending, *upgrade_gate_passed,
	        *upgrade_gate_busbw, *upgrade_gate_floor, *drain_wait, *drain_deadline;
	pthread_mutex_t mu; /* one rebuild at a time */
};

struct op {
	struct op_config cfg;
	char lease_ns[64];
	char agent_ns[64];
	char identity[160];

	struct kube_client *c;
	struct kube_access *access; /* POSTs to the dashboard */
	struct kube_informer *racks, *trays, *nodes, *leases, *matrices, *partitions, *domains;
	struct kube_informer *upgrades, *approvals;
	/* Rack, ComputeDomain, RackPartition, RackUpgrade */
	struct kube_workqueue *q, *dq, *pq, *uq;
	struct kube_workers *workers, *dworkers, *pworkers, *uworkers;
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
	bool leader_done; /* the election thread returned */
	bool workers_on;  /* controllers running (main thread only) */

	/* Dashboard feed: last text published per topic, and the fleet. */
	pthread_mutex_t feed_mu;
	json_t *feed_last; /* topic -> string */
	json_t *fleet;     /* rack name -> fleet entry */
	json_t *events;    /* recent event payloads, newest first */
};

/* rack_ctrl.c */
void rack_ctrl_handlers(struct op *op);
struct kube_result rack_reconcile(void *ud, const char *key);
void rack_enqueue_all(struct op *op);

/* domain_ctrl.c */
void domain_ctrl_handlers(struct op *op);
struct kube_result domain_reconcile(void *ud, const char *key);
void domain_enqueue_all(struct op *op);

/* part_ctrl.c */
enum nv_err part_backend_open(struct op *op);
void part_ctrl_handlers(struct op *op);
struct kube_result part_reconcile(void *ud, const char *key);
void part_enqueue_all(struct op *op);

/* upgrade_ctrl.c */
enum nv_err upgrade_oob_open(struct op *op);
void upgrade_ctrl_handlers(struct op *op);
struct kube_result upgrade_reconcile(void *ud, const char *key);
void upgrade_enqueue_all(struct op *op);

/* op_metrics.c */
enum nv_err op_metrics_register(struct op *op);
void op_metrics_leading(struct op *op, bool leading);

/* op_feed.c */
void op_feed_rack(struct op *op, const json_t *rack, const struct op_rack_eval *ev,
                  const struct op_tray_in *in, bool cordoned);
void op_feed_rack_gone(struct op *op, const char *name);
/* Publishes the `domains` topic from the ComputeDomain cache. */
void op_feed_domains(struct op *op);
/* The "upgrades" topic from the RackUpgrade and UpgradeApproval caches. */
void op_feed_upgrades(struct op *op);
void op_feed_event(struct op *op, const char *type, const char *reason, const char *object,
                   const char *message);
void op_feed_clear(struct op *op);

/* Records an Event about obj and mirrors it to the dashboard feed. */
void op_event(struct op *op, const json_t *obj, const char *type, const char *reason,
              const char *action, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

bool op_is_leading(struct op *op);

#endif
