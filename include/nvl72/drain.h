/* SPDX-License-Identifier: Apache-2.0 */
/* Draining compute trays for maintenance: cordon, the checkpoint
 * annotation handshake, eviction through the Eviction API with
 * PodDisruptionBudgets honoured, gangs moved together, and the uncordon of
 * only what the drain cordoned. One call is one idempotent pass: it looks at
 * the pods on the nodes now (a LIST per node with a spec.nodeName field
 * selector, only while draining), does what can be done, and says whether
 * the nodes are drained and when to look again. All state lives in the API
 * (annotations on Nodes and Pods), so a restart resumes where it stopped. */
/* Contract: drain_nodes and drain_release keep no state of their own and
 * may run on any thread; they block on the calling thread for every
 * request they make through c (a LIST of pods per node, a GET of each
 * ResourceClaim those pods name, then the GETs, PATCHes, evictions and
 * deletions of pods and Nodes the pass needs), each bounded as kube.h says,
 * with no stop to cut a pass short. Arguments are borrowed for the call.
 * drain_cordon_patch and drain_message_keep_claims are pure. */
#ifndef NVL72_DRAIN_H
#define NVL72_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api_rack.h"
#include "nvl72/err.h"

struct kube_client;
struct kube_status;

/* On a Pod: the operator asks for a checkpoint; the value is the RFC 3339
 * deadline after which the pod is evicted anyway. */
#define DRAIN_ANN_CHECKPOINT "nvl72.io/checkpoint-requested"
/* On a Pod: set by the workload once its checkpoint is safe (any value). */
#define DRAIN_ANN_CHECKPOINT_ACK "nvl72.io/checkpoint-done"
/* On a Node: who cordoned it, "rack/<name>" (a degraded rack),
 * "rackpartition/<name>" or "rackupgrade/<name>" (a drain). A cordon without
 * it, or with another owner's value, is someone else's and is never lifted. */
#define DRAIN_ANN_CORDONED_BY "nvl72.io/cordoned-by"
/* Pods with the same value of this label on the drained nodes are one
 * gang: none of them is evicted before all of them may be. */
#define DRAIN_LABEL_GANG "nvl72.io/job"
/* Our DRA driver (the agent's kubelet plugin). Pods holding ResourceClaims
 * it allocated on a drained node are named in the drain's sentence, and
 * the holders of one ComputeDomain's claims on the drained nodes are one
 * gang, as if they shared a DRAIN_LABEL_GANG value. */
#define DRAIN_DRA_DRIVER "imex.nvl72.io"
/* How the sentence names those claims: this, then ": " and the claims. */
#define DRAIN_CLAIMS_NOTE "pulled from under allocated imex.nvl72.io claims"

/* What a cordon or uncordon write may start from and carry besides. */
struct drain_node_write {
	/* By position in the nodes given, entries may be NULL: the Node as a
	 * cache last saw it. The first try writes against its
	 * resourceVersion (a stale copy fails with a conflict and the Node is
	 * read then), saving a GET per Node and pass. */
	const json_t *const *cached;
	/* Label -> string, or JSON null to remove it: set in the same write
	 * as the cordon, or alone when the cordon has nothing to do. */
	const json_t *labels;
};

struct drain_policy {
	enum api_drain_mode mode;
	int64_t checkpoint_deadline_ms; /* Checkpoint mode: wait for acks this long */
	bool force;                     /* evict ignoring PDBs (DELETE), recorded */
	const char *owner;              /* "rackupgrade/<name>": cordon and annotations */
	int64_t started_ms;             /* wall time the drain began (0: unknown); the
	                                 * wait between passes grows with it */
	struct drain_node_write write;  /* the cordon's start and extra labels */
};

struct drain_result {
	bool done;             /* every node cordoned, no evictable pod left and none
	                        * still terminating */
	int pods;              /* evictable pods still on the nodes, not yet evicted */
	int waiting_ack;       /* asked to checkpoint, not acknowledged, in deadline */
	int held;              /* may go, but wait for a member of their gang */
	int terminating;       /* being deleted (evicted in this pass included) */
	int evicted;           /* evictions (or deletions) accepted in this pass */
	int blocked;           /* evictions refused with 429 (a PDB) in this pass */
	int64_t next_check_ms; /* wall time to look again; 0: done, nothing to wait for */
	int claim_pods;        /* pods holding a claim of DRAIN_DRA_DRIVER on their node */
	char message[512];     /* one sentence for status and events; ends with the
	                        * claims note when claim_pods > 0 */
	char claims[320];      /* that note alone ("" when none) */
};

/* One pass over nodes (n of them) at now_ms. NV_OK with *res filled, also
 * when not done; an error only when the API could not be read or written
 * (st says how). Pods of DaemonSets, mirror pods and pods already being
 * deleted are left alone. */
enum nv_err drain_nodes(struct kube_client *c, const char *const *nodes, unsigned n,
                        const struct drain_policy *p, int64_t now_ms, struct drain_result *res,
                        struct kube_status *st);

/* A drain's last sentence (msg, cap bytes) keeps the claims note of an
 * earlier one (before, the sentence of an earlier pass of the same drain):
 * the pass that evicted the holders said so, and the pods are gone by the
 * time the drain is done. Nothing changes when msg has a note already or
 * before has none. */
void drain_message_keep_claims(char *msg, size_t cap, const char *before);

/* Uncordons the nodes this owner cordoned (and drops its annotation);
 * a cordon by anyone else stays. w (NULL: none) as in drain_policy. */
enum nv_err drain_release(struct kube_client *c, const char *const *nodes, unsigned n,
                          const char *owner, const struct drain_node_write *w,
                          struct kube_status *st);

/* The merge patch that cordons (want) or uncordons node on behalf of owner,
 * the whole value of the cordoned-by annotation ("rack/<name>",
 * "rackupgrade/<name>"), carrying the Node's resourceVersion so that a
 * concurrent cordon by someone else is never mistaken for ours. NULL when
 * nothing is to be done: already cordoned (by anyone), or not cordoned by
 * owner. Shared by the Rack controller and the drain. A new reference
 * (json_decref it); node is borrowed. */
json_t *drain_cordon_patch(const json_t *node, const char *owner, bool want);

#endif
