/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the RackPartition controller: from a RackPartition and
 * its Rack (both parsed by the API's parsers), the rack's ComputeTrays and
 * Nodes and what the fabric backend said this pass, it decides the next
 * phase and the one backend request to make, and builds the status. No API
 * or backend calls here. */
/* Contract: pure functions with no global state: no I/O, no clock (time
 * comes in as now_ms), never blocking, thread-safe on distinct arguments.
 * Objects and strings passed in are borrowed for the call. A json_t
 * returned (a merge patch, a built object) is a new reference the caller
 * json_decref's, or NULL in the cases each call names; the strings returned
 * (reasons, cliques) are static or borrowed from the arguments. The
 * _apply calls change only the private copy they are given. */
#ifndef NVL72_OPERATOR_PART_H
#define NVL72_OPERATOR_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api.h"
#include "nvl72/api_rack.h"
#include "nvl72/fabric.h"
#include "nvl72/drain.h"

#define OP_FINALIZER_PARTITION "nvl72.io/partition"
/* The value of nvl72.io/cordoned-by on Nodes a partition change cordoned. */
#define OP_PART_CORDON_PREFIX "rackpartition/"

/* One compute tray of the partition's rack (index 1..18). Borrowed. */
struct op_part_tray {
	int index;
	const char *node;     /* from the Rack's computeTrays */
	const json_t *tray;   /* the ComputeTray, NULL when absent */
	const json_t *node_o; /* the Node, NULL when absent */
	int64_t heartbeat_ms; /* the agent's last sign of life, 0: never */
	/* An NVIDIA ComputeDomain that uses the tray ("namespace/name",
	 * operator_nvidia.h), "" or NULL when none. */
	const char *nvidia_domain;
};

/* What the fabric backend said this pass; filled by the controller when
 * op_part_wants_backend asked for it. */
struct op_part_backend {
	bool configured;      /* a backend other than "none" */
	const char *name;     /* "nmx-m", "sim" */
	int64_t poll_ms;      /* how soon to look again while a change runs */
	bool looked;          /* the fields below are this pass's answers */
	enum nv_err op_err;   /* of polling status.backend.operationId (NV_OK if none) */
	struct fabric_op op;  /* its state, when op_err is NV_OK and one was recorded */
	enum nv_err find_err; /* of finding the partition: NV_OK, NV_E_NOT_FOUND or a failure */
	struct fabric_partition part;
	struct fabric_status st; /* of the call that failed, for the message */
};

struct op_part_in {
	const json_t *part;                    /* the object: metadata and status */
	const struct api_rack_partition *spec; /* its parsed spec */
	const struct api_rack *rack;           /* NULL when absent or refused */
	const char *rack_invalid;              /* why the parser refused it, or NULL */
	unsigned ntrays;
	struct op_part_tray trays[API_COMPUTE_TRAYS];
	const struct op_part_backend *be;
	int64_t now_ms;    /* wall clock of this pass */
	int64_t silent_ms; /* a member whose agent is silent this long does not
	                    * hold a deletion back; 0: wait for every member */
	/* NVIDIA's ComputeDomains are served but could not be read (why):
	 * no change is requested. NULL: read, or not served. */
	const char *nvidia_unread;
};

/* The reason (Ready condition, event) of a partition change held because
 * a tray it reaches is in an NVIDIA ComputeDomain, or NVIDIA's
 * ComputeDomains could not be read; and how soon the latter looks again. */
#define OP_PART_NVIDIA_REASON "NVIDIAComputeDomain"
#define OP_PART_NVIDIA_RETRY_MS 10000

enum op_part_action {
	OP_PART_NOTHING = 0,
	OP_PART_CREATE,  /* spec: create at the backend */
	OP_PART_UPDATE,  /* spec: replace the members of backend_id */
	OP_PART_DELETE,  /* delete backend_id */
	OP_PART_RELEASE, /* lift our cordons and drop the finalizer */
};

struct op_part_decision {
	enum api_partition_phase phase;
	enum op_part_action action;
	struct fabric_partition_spec spec; /* for CREATE and UPDATE */
	char backend_id[FABRIC_ID_LEN];    /* to record; the target of UPDATE and DELETE */
	char op_id[FABRIC_ID_LEN];         /* operation in flight to record, "" none */
	char clique[FABRIC_CLIQUE_LEN];    /* "<cluster>.<partition id>", "" unknown */
	uint32_t members;                  /* bit i: tray index i is in spec.trays */
	uint32_t cordon;                   /* bit i: keep tray i's Node cordoned by us */
	bool keep_cordons;                 /* leave every cordon as it is this pass */
	uint32_t converged;                /* bit i: member tray i reports the clique */
	uint32_t silent;                   /* bit i: released without tray i's report */
	bool fabric_converged;             /* every member in, no one else in */
	bool imex_ready;                   /* member labels and IMEX caught up */
	bool ready;                        /* Active and both of the above */
	bool retry;                        /* a failure: look again with backoff */
	int64_t requeue_ms;                /* > 0: a backend change runs, look again */
	const char *reason;                /* CamelCase, for the Ready condition */
	const char *fabric_reason;
	const char *imex_reason;
	char message[512];
	char imex_message[256];
};

/* The phase's name as written in status.phase. */
const char *op_part_phase_name(enum api_partition_phase p);

/* Whether this pass needs the backend's view (false at steady state, when
 * no backend is configured, and when nothing at the backend can be ours). */
bool op_part_wants_backend(const struct op_part_in *in);

/* The next step. Reads in->be only when in->be->looked. A create, update
 * or delete at the backend is not requested while a tray it reaches (the
 * members, and for an update the trays leaving) is in an NVIDIA
 * ComputeDomain, or while NVIDIA's ComputeDomains are unread: reason
 * OP_PART_NVIDIA_REASON, the message naming the domain, cordons as they
 * are. */
void op_part_decide(const struct op_part_in *in, struct op_part_decision *d);

/* Folds the answer to the CREATE, UPDATE or DELETE just sent into d: the
 * operation to record (phase Requesting or Deleting, look again after
 * poll_ms); NV_E_BUSY (a change still runs there) only looks again after
 * poll_ms; any other error gives phase Failed (a delete stays Deleting)
 * with the backend's answer and retry set. */
void op_part_requested(struct op_part_decision *d, const char *backend, enum nv_err rc,
                       const struct fabric_op *op, const struct fabric_status *st, int64_t poll_ms);

/* Writes status (observedGeneration, phase, trayCount, cliqueID, backend,
 * trays, lastTransitionTime, message, and the Ready, FabricConverged and
 * IMEXReady conditions) into obj, a private copy of the RackPartition.
 * Times move only when the phase or a condition's status changes. */
void op_part_status_apply(json_t *obj, const struct op_part_in *in,
                          const struct op_part_decision *d, int64_t now_ms);

/* The drain before a partition change: owner "rackpartition/<name>" into
 * owner (cap bytes, which p->owner then points at), the Rack's drain mode
 * and checkpointDeadline (Evict and 30m without a Rack; the parser gives
 * the same when the Rack does not say), and
 * when the drain began: the status's lastTransitionTime while the phase is
 * already Draining, else now_ms. Never forced: a partition change waits for
 * PodDisruptionBudgets. */
void op_part_drain_policy(const struct op_part_in *in, int64_t now_ms, char *owner, size_t cap,
                          struct drain_policy *p);

/* Folds one drain pass over the Nodes of d->cordon into d, a Draining
 * decision. Drained: d is left as it is (the request goes out). Not yet:
 * no request this pass, reason Draining (DrainBlocked when a
 * PodDisruptionBudget refused an eviction), the drain's sentence in the
 * message, and a requeue at the drain's next check. */
void op_part_drained(struct op_part_decision *d, const struct drain_result *r, int64_t now_ms);

/* The merge patch that cordons (want) node for partition name, with our
 * annotation and the Node's resourceVersion, or lifts our cordon (!want).
 * NULL when nothing is to be done: already cordoned by anyone, or not
 * cordoned by this partition. */
json_t *op_part_cordon_patch(const json_t *node, const char *name, bool want);

#endif
