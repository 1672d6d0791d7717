/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the ComputeDomain controller: from the cluster's
 * ComputeTrays (reduced to candidates) it keeps the members a domain already
 * has, picks the missing ones inside one clique, and builds the IMEX spec,
 * the Node label patches and the status. No API calls here. */
/* Contract: pure functions with no global state: no I/O, no clock (time
 * comes in as now_ms), never blocking, thread-safe on distinct arguments.
 * Objects and strings passed in are borrowed for the call. A json_t
 * returned (a merge patch, a built object) is a new reference the caller
 * json_decref's, or NULL in the cases each call names; the strings returned
 * (reasons, cliques) are static or borrowed from the arguments. The
 * _apply calls change only the private copy they are given. */
#ifndef NVL72_OPERATOR_DOMAIN_H
#define NVL72_OPERATOR_DOMAIN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api.h"

/* On member Nodes (label) and member ComputeTrays (annotation): the domain
 * as "<namespace>.<name>". Namespaces hold no dots, so the first dot splits. */
#define OP_LABEL_COMPUTE_DOMAIN "nvl72.io/compute-domain"
#define OP_FINALIZER_COMPUTE_DOMAIN "nvl72.io/compute-domain"
#define OP_DOMAIN_KEY_MAX 192

/* One ComputeTray as the placement sees it. Strings are borrowed. */
struct op_domain_cand {
	const char *tray;        /* ComputeTray name */
	const char *node;        /* spec.node */
	const char *rack;        /* spec.rack */
	int index;               /* spec.index, 1..18 */
	const char *clique;      /* status.fabric.cliqueID, "" when unknown */
	const char *ip;          /* status.imex.address, else the Node's InternalIP, else "" */
	const char *owner;       /* the domain annotation, "" when free */
	bool healthy;            /* tray and Node Ready: may be picked */
	bool selected;           /* matches the domain's rack/partition selector */
	bool nvidia;             /* NVIDIA's DRA driver runs its IMEX (status.nvidiaDRA):
	                          * never picked */
	bool imex_ready;         /* daemon Ready, domain Up, status current */
	const char *failure;     /* why a member has failed (op_domain_member_failure), or NULL */
	int64_t failed_since_ms; /* when that failure was first seen */
	bool has_slot;           /* the domain's status gave it a slot: */
	unsigned slot;           /* its status.nodes[].index (op_domain_prior_slot) */
};

struct op_domain_plan {
	unsigned n;                         /* members kept or picked */
	unsigned member[API_COMPUTE_TRAYS]; /* indexes into the candidates, by (rack, index) */
	unsigned npicked;                   /* of those, newly picked this pass */
	bool placed;                        /* n == numNodes */
	bool ready;                         /* placed and every member imex_ready */
	bool addresses;                     /* every member has an address */
	const char *clique;                 /* shared clique ("" when none yet) */
	const char *rack;
	const char *reason; /* CamelCase, for the Placed condition */
	char message[256];
	/* Failed members replaced by spares this pass (candidate indexes). */
	unsigned nreplaced;
	unsigned replaced_from[API_COMPUTE_TRAYS], replaced_to[API_COMPUTE_TRAYS];
	unsigned nunreplaced;                   /* failed members past their grace with no spare */
	unsigned unreplaced[API_COMPUTE_TRAYS]; /* their candidate indexes */
	int64_t next_check_ms; /* wall time a failed member's grace ends; 0: none */
};

/* The channel allocation of a domain (spec.channel.allocationMode). */
enum op_domain_channels {
	OP_CHANNELS_SINGLE = 0, /* one channel, id 0, on every member */
	OP_CHANNELS_ALL,        /* every channel the driver exposes */
};

/* "<ns>.<name>" into out; false when it does not fit a label value (63). */
bool op_domain_key(const char *ns, const char *name, char out[OP_DOMAIN_KEY_MAX]);

/* Whether the ComputeTray tray is NVIDIA-managed: its agent reports
 * status.nvidiaDRA (NVIDIA's ComputeDomain driver publishes ResourceSlices
 * for its Node and runs IMEX there). */
bool op_domain_tray_nvidia(const json_t *tray);

/* Keeps the members of key (the first num_nodes by rack and index), then
 * adds healthy, selected, free trays of the members' clique that are not
 * NVIDIA-managed; with no member
 * yet it picks the clique that fits num_nodes most tightly, and only when
 * it can fill the domain at once (a domain never hoards part of a clique). */
void op_domain_place(const struct op_domain_cand *c, unsigned n, const char *key, int num_nodes,
                     struct op_domain_plan *out);

/* Why a member tray of key has failed, or NULL when it has not: its Node
 * is gone (`NodeGone`) or not Ready (`NodeNotReady`), its GPUs left the
 * fabric or report it unhealthy (`FabricUnhealthy`), the tray is otherwise
 * not Ready (`TrayNotReady`), or the IMEX daemon configured for key is not
 * running (`IMEXDaemonDown`). A peer's failure that leaves this tray's
 * domain degraded is not this tray's failure. node may be NULL. */
const char *op_domain_member_failure(const json_t *tray, const json_t *node, const char *key);

/* A member's failure when its GPUs report a clique other than the domain's
 * (a RackPartition change moved it): it cannot join the domain's IMEX
 * peers until it is back, so with spec.replaceFailedNodes it is replaced
 * at once, without the grace. */
#define OP_DOMAIN_CLIQUE_CHANGED "CliqueChanged"

/* The domain's clique among the members of key: the recorded one
 * (status.cliqueID of dom) while a member still reports it, else the one
 * most members report (a tie goes to the clique of the lowest tray index).
 * Every member reporting another clique is marked failed with
 * CliqueChanged (failed_since_ms from op_domain_failed_since); a member
 * reporting no clique (a change in progress) is left alone. Returns the
 * clique (borrowed from c or dom), NULL when no member reports one. */
const char *op_domain_clique_split(struct op_domain_cand *c, unsigned n, const char *key,
                                   const json_t *dom, int64_t now_ms);

/* HeartbeatStale when the tray's agent has given no sign of life (the later
 * of status.heartbeatTime and lease_renew_ms, as the Rack controller reads
 * it) for longer than timeout_ms at now_ms, else NULL. *stale_at_ms (may be
 * NULL) is set to the wall time a fresh heartbeat goes stale, so the caller
 * can look again then instead of polling; 0 when the agent never reported
 * or timeout_ms is 0 (the check is off). */
const char *op_domain_member_heartbeat(const json_t *tray, int64_t lease_renew_ms,
                                       int64_t timeout_ms, int64_t now_ms, int64_t *stale_at_ms);

/* When the domain's status first recorded node as failed
 * (status.nodes[].failedSince), else now_ms. */
int64_t op_domain_failed_since(const json_t *dom, const char *node, int64_t now_ms);

/* Replaces, in a plan from op_domain_place, each member that has failed for
 * grace_ms or longer (a CliqueChanged member at once) with a healthy,
 * selected, free tray of the domain's clique and rack (lowest index first),
 * and sets next_check_ms to the end of the earliest grace still running. A
 * failed member with no spare stays, listed in unreplaced. */
void op_domain_replace_failed(const struct op_domain_cand *c, unsigned n, int num_nodes,
                              int64_t grace_ms, int64_t now_ms, struct op_domain_plan *p);

/* The slot (status.nodes[].index) the domain's status gives node; false
 * when it lists none. */
bool op_domain_prior_slot(const json_t *dom, const char *node, unsigned *slot);

/* The ordered peer list of the plan's members, by slot: a member keeps the
 * slot it had (has_slot) while that is below n and no member of a lower
 * tray index holds it; the others fill the free slots, lowest first, in
 * tray index order (so a new domain is in tray index order, and a spare
 * takes the slot of the member it replaces while the survivors' lines stay
 * where they are). NULL when a member has no address. */
json_t *op_domain_peers(const struct op_domain_cand *c, const struct op_domain_plan *p);

/* The merge patch that gives tray this domain's annotation and spec.imex
 * (mode process, domain key, domainUID uid (left out when ""), peers, and
 * channels: id 0 for Single, every channel for All), with its
 * resourceVersion; NULL when nothing changes. peers NULL: only the
 * annotation. */
json_t *op_domain_tray_patch(const json_t *tray, const char *key, const char *uid,
                             const json_t *peers, enum op_domain_channels channels);

/* The merge patch that takes the domain's annotation and spec.imex off a
 * tray of key; NULL when the tray is not key's. */
json_t *op_domain_tray_release_patch(const json_t *tray, const char *key);

/* The merge patch that sets (member) or removes (!member) node's domain
 * label for key, touching no other label; NULL when nothing changes. A
 * label naming another domain is never removed. */
json_t *op_domain_node_patch(const json_t *node, const char *key, bool member);

/* Writes status.status, nodes (with reason and failedSince of a failed
 * member, and replacement NoSpare when its grace ran out with no spare), rack, cliqueID,
 * nodeSelector, the Placed and Ready conditions and observedGeneration into obj, a private copy of
 * the ComputeDomain. */
void op_domain_status_apply(json_t *obj, const char *key, const struct op_domain_cand *c,
                            const struct op_domain_plan *p, int64_t now_ms);

/* ---- the domain's IMEX channel through DRA ----
 *
 * The imex.nvl72.io driver's names, as the project's DRA contract fixes
 * them (docs/operator.md, "The domain's ResourceClaimTemplate"): the agent
 * publishes a tray's devices with the attributes the selector reads, the
 * operator keeps the DeviceClass and one ResourceClaimTemplate per domain. */
#define OP_DRA_DRIVER "imex.nvl72.io"
#define OP_DRA_DEVICE_CLASS "imex-channel.nvl72.io"
#define OP_DRA_REQUEST "channel"
#define OP_DRA_CONFIG_KIND "ImexChannelConfig"
#define OP_COND_CLAIM_TEMPLATE "ClaimTemplateReady"

/* The DeviceClass as the operator applies it: one CEL selector on the
 * driver's name. New reference. */
json_t *op_domain_device_class(void);

/* The ResourceClaimTemplate name of dom (a ComputeDomain with its
 * metadata.uid), key its domain key, in dom's namespace: labelled
 * nvl72.io/compute-domain=key, controlled by dom, one request "channel" of
 * exactly one device of the DeviceClass whose domain attribute is dom's uid
 * and whose IMEX is ready, and the opaque config the kubelet plugin reads
 * (domainUID, domain "<namespace>/<name>", allocationMode). New reference. */
json_t *op_domain_claim_template(const json_t *dom, const char *key, const char *name,
                                 enum op_domain_channels channels);

enum op_claim_verdict {
	OP_CLAIM_MATCHES = 0, /* ours and as wanted: nothing to write */
	OP_CLAIM_DIFFERS,     /* ours (or left by an earlier domain of the name): replace it */
	OP_CLAIM_FOREIGN,     /* someone else's: leave it alone */
};

/* Judges have, the template of that name found in the cluster, against
 * want (from op_domain_claim_template). Ours: its controller owner
 * reference has want's uid. Matches: ours, with want's label, and every
 * field want sets in spec.spec equal (fields the API server adds, such as
 * defaults, are allowed; lists must have want's length). A template whose
 * controller is a ComputeDomain of want's name with another uid was left by
 * an earlier domain of that name, which no longer exists: it differs. why
 * (cap bytes) says what differs, or whose the template is. */
enum op_claim_verdict op_domain_claim_judge(const json_t *have, const json_t *want, char *why,
                                            size_t cap);

/* What the last pass knows of the template, for the status: name is
 * status.resourceClaimTemplate.name (NULL: removed), and the
 * ClaimTemplateReady condition. */
struct op_domain_claim {
	const char *name;
	bool ready;
	const char *reason; /* CamelCase */
	char message[384];
};

/* Writes status.resourceClaimTemplate and the ClaimTemplateReady condition
 * into obj, a private copy of the ComputeDomain. */
void op_domain_claim_status_apply(json_t *obj, const struct op_domain_claim *c, int64_t now_ms);

#endif
