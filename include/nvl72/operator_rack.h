/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the Rack controller: from a Rack, its ComputeTrays, their
 * Nodes and agent heartbeats it derives the rack's status, conditions and the
 * degraded decision, and the patches for Node labels, cordons and trays. No
 * API calls here, so every rule is unit-tested on plain JSON and the
 * Rack's parsed spec. */
/* Contract: pure functions with no global state: no I/O, no clock (time
 * comes in as now_ms), never blocking, thread-safe on distinct arguments.
 * Objects and strings passed in are borrowed for the call. A json_t
 * returned (a merge patch, a built object) is a new reference the caller
 * json_decref's, or NULL in the cases each call names; the strings returned
 * (reasons, cliques) are static or borrowed from the arguments. The
 * _apply calls change only the private copy they are given. */
#ifndef NVL72_OPERATOR_RACK_H
#define NVL72_OPERATOR_RACK_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api.h"
#include "nvl72/api_rack.h"
#include "nvl72/drain.h"

#define OP_LABEL_RACK "nvl72.io/rack"
#define OP_LABEL_TRAY_INDEX "nvl72.io/tray-index"
#define OP_LABEL_CLIQUE "nvl72.io/clique"
#define OP_LABEL_PARTITION "nvl72.io/partition"
/* On every Rack: held until the controller has released what it put
 * outside the Rack's own objects (Node labels, its cordons) and deleted the
 * Rack's ComputeTrays. */
#define OP_FINALIZER_RACK "nvl72.io/rack"

/* The field manager and controller name the operator writes under. */
#define OP_FIELD_MANAGER "nvl72-operator"

/* What the controller found for one compute tray of the rack. Objects are
 * borrowed. */
struct op_tray_in {
	int index;              /* 1..18 */
	const char *node_name;  /* from the Rack's parsed spec */
	const json_t *tray;     /* the ComputeTray, NULL when absent */
	const json_t *node;     /* the Node, NULL when absent */
	int64_t lease_renew_ms; /* renewTime of the agent's Lease; 0: none */
	const char *partition;  /* RackPartition listing the tray, "" if none */
	/* The agent's node-selector requirement the Node fails ("" or NULL:
	 * met): no agent pod will run there. */
	const char *agent_unmet;
};

/* The verdict on one tray. */
struct op_tray_eval {
	int index;
	char node[254];
	char partition[64];
	bool has_status;      /* the agent has reported at least once */
	bool ready;           /* counts as ready capacity */
	bool pending;         /* never reported, still inside its start grace */
	bool online;          /* heartbeat fresh */
	bool cordoned;        /* Node unschedulable, by anyone */
	bool cordoned_by_us;  /* ... with our annotation for this rack */
	const char *why;      /* CamelCase reason when not ready, else NULL */
	int64_t heartbeat_ms; /* later of heartbeatTime and the Lease; 0 none */
	char stack[64];
	char driver[17];
	char clique[49];
	char cluster[37];
	char maintenance[17];
	int gpus;
	int healthy_gpus;
};

#define OP_SKEW_MAX 3
#define OP_SKEW_VERSIONS 18

/* Distinct versions of one component across the rack's trays. */
struct op_skew {
	const char *component; /* "driver", "imex", "gpuFirmware" */
	unsigned n;
	char v[OP_SKEW_VERSIONS][65];
};

struct op_clique {
	char id[49];
	char partition[64];
	uint32_t trays; /* bit i = tray index i */
};

struct op_rack_eval {
	unsigned ntrays;
	struct op_tray_eval trays[API_COMPUTE_TRAYS];
	int ready;       /* capacity.readyTrays */
	int unavailable; /* capacity.unavailableTrays = trays - ready */
	int counted;     /* unavailable, less trays still pending */
	int reporting;   /* trays whose agent has reported */
	int gpus;
	int healthy_gpus;
	int threshold;      /* spec.policy.degradedThreshold */
	int min_healthy;    /* spec.policy.minHealthyTrays */
	bool cordon_policy; /* spec.policy.cordonWhenDegraded */
	bool degraded;      /* counted > threshold */
	char stack[64];     /* "", a stack name, or "mixed" */
	char desired_stack[64];
	char desired_driver[17]; /* driver of the desired stack, "" if unresolved */
	unsigned nskew;
	struct op_skew skew[OP_SKEW_MAX];
	/* With more than one VBIOS in the rack: the one most GPUs run, and the
	 * GPUs on another, "r07-t05 GPU 1 (97.00.00.00.00)", "; "-separated. */
	char vbios_common[65];
	char vbios_odd[384];
	const char *fabric; /* Healthy | Degraded | Unhealthy | Unknown */
	char fabric_reason[64];
	char fabric_msg[256];
	char cluster_uuid[37];
	unsigned ncliques;
	struct op_clique cliques[API_COMPUTE_TRAYS];
	/* Wall time at which a fresh heartbeat or a start grace runs out, so
	 * the controller looks again without polling; 0 when nothing expires. */
	int64_t next_check_ms;
};

/* Classifies every tray and aggregates the rack: rack is the Rack as
 * api_rack_parse read it (policy, desired stack), matrix the parsed
 * CompatibilityMatrix it names, or NULL while that is not known (or does
 * not parse). hb_timeout_ms of 0 turns the heartbeat check off. */
void op_rack_evaluate(const struct api_rack *rack, const struct matrix *matrix,
                      const struct op_tray_in *in, unsigned n, int64_t now_ms,
                      int64_t hb_timeout_ms, struct op_rack_eval *out);

/* Writes the status fields the Rack controller owns (observedGeneration,
 * stack, trays, versionSkew, fabric, capacity and the five conditions) into
 * obj, a private copy of the Rack, leaving status.upgrade and
 * status.maintenance as they are. cordoned: the rack's Nodes are cordoned
 * by us now. Conditions move lastTransitionTime only on a status flip. */
void op_rack_status_apply(json_t *obj, const struct op_rack_eval *ev, bool cordoned,
                          int64_t now_ms);

/* The merge patch that turns rack's status into want's, with rack's
 * resourceVersion for optimistic locking; NULL when nothing changed. */
json_t *op_rack_status_patch(const json_t *rack, const json_t *want);

/* The merge patch of our labels on node: rack NULL removes all of them;
 * clique or partition "" removes that one. NULL when nothing changes. Labels
 * of others are never in the patch. */
json_t *op_node_labels_patch(const json_t *node, const char *rack, int index, const char *clique,
                             const char *partition);

/* "<rack>-tNN" into out (64 bytes). */
void op_tray_name(const char *rack, int index, char out[64]);

/* A new ComputeTray for the tray at index, owned by rack (controller and
 * blockOwnerDeletion), with spec.driver set when driver is not "". */
json_t *op_tray_build(const json_t *rack, int index, const char *node, const char *driver);

enum op_tray_check {
	OP_TRAY_OK = 0,   /* ours and right */
	OP_TRAY_PATCH,    /* ours (or unowned), *patch adopts or fixes it */
	OP_TRAY_RECREATE, /* its immutable spec names another node */
	OP_TRAY_FOREIGN,  /* another controller owns it: leave it */
};
/* Compares an existing tray with what rack wants at that index. *patch (a
 * merge patch with the tray's resourceVersion, a new reference) is set
 * only for PATCH. */
enum op_tray_check op_tray_check(const json_t *tray, const json_t *rack, int index,
                                 const char *node, json_t **patch);

/* Whether obj's metadata.finalizers holds name. */
bool op_has_finalizer(const json_t *obj, const char *name);

/* The merge patch that adds (want) or removes finalizer name on obj,
 * keeping every other finalizer in order, with obj's resourceVersion; NULL
 * when obj already is as wanted. */
json_t *op_finalizer_patch(const json_t *obj, const char *name, bool want);

/* Whether rack is the controller owner of tray (same uid): the trays the
 * Rack's finalizer deletes. */
bool op_tray_owned_by(const json_t *tray, const json_t *rack);

/* The later of the tray's status.heartbeatTime and lease_renew_ms; 0 when
 * neither is known. */
int64_t op_tray_heartbeat_ms(const json_t *tray, int64_t lease_renew_ms);

#endif
