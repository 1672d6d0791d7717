/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the drain: what to do with each pod on the drained
 * nodes, decided from the pods' JSON, the policy and the time alone, so the
 * rules are tested without an apiserver. drain.c acts on the plan. */
/* Private to src/drain/drain.c and its unit test tests/unit/drain/
 * test_drain.c; other modules go through nvl72/drain.h. */
#ifndef NVL72_DRAIN_INT_H
#define NVL72_DRAIN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/drain.h"

/* Annotation of the kubelet's mirror of a static pod. */
#define DRAIN_ANN_MIRROR "kubernetes.io/config.mirror"
/* Most pods one pass looks at, over all its nodes. */
#define DRAIN_MAX_PODS 8192
/* Most ResourceClaims one pod names that the pass reads, and most claims
 * one pass reads over all its pods. */
#define DRAIN_CLAIMS_PER_POD 16
#define DRAIN_MAX_CLAIMS 1024

enum drain_act {
	DRAIN_ACT_SKIP = 0,    /* DaemonSet, mirror or finished pod: it stays */
	DRAIN_ACT_TERMINATING, /* being deleted already: wait for it to go */
	DRAIN_ACT_ASK,         /* Checkpoint mode: write the request now */
	DRAIN_ACT_WAIT,        /* asked, not acknowledged, deadline ahead */
	DRAIN_ACT_HOLD,        /* may go, but a gang member may not yet */
	DRAIN_ACT_EVICT,       /* evict now (DELETE when forced) */
};

/* One ResourceClaim allocated by our DRA driver (DRAIN_DRA_DRIVER) on the
 * node of the pod that holds it. */
struct drain_claim {
	char name[254];      /* metadata.name; the pod's namespace */
	char domain[254];    /* the opaque config's "domain" ("<ns>/<name>"), "" unknown */
	char domain_uid[64]; /* its "domainUID", "" unknown */
	char device[128];    /* the allocated device ("slot-0") */
};

struct drain_pod {
	const json_t *pod; /* borrowed from the caller's array */
	char key[320];     /* "namespace/name" */
	const char *gang;  /* the nvl72.io/job label (borrowed) or NULL */
	/* The first of our claims the pod holds on its node, and how many it
	 * holds; its domain is the pod's second gang (domain_gang: "cd:" and
	 * the domain's UID, else its name; "" without a claim). */
	struct drain_claim claim;
	unsigned nclaims;
	char domain_gang[264];
	enum drain_act act;
	const char *why;     /* static text: "DaemonSet", "deadline passed", ... */
	int64_t deadline_ms; /* Checkpoint mode: the deadline (to write, for ASK) */
	bool bad_deadline;   /* the request annotation is not an RFC 3339 time */
};

struct drain_plan {
	struct drain_pod *pods;
	unsigned n;
	int64_t first_deadline_ms; /* earliest deadline still ahead; 0: none */
};

const char *drain_act_name(enum drain_act a);

/* Decides one pod on its own (gangs aside) at now_ms. */
void drain_pod_classify(const json_t *pod, const struct drain_policy *p, int64_t now_ms,
                        struct drain_pod *out);

/* Decides every pod of the array pods (borrowed; it must outlive the plan),
 * notes the claims of our driver each holds on its node (claims: an object
 * from "<namespace>/<name>" to the ResourceClaims the pass read, borrowed;
 * NULL when none were read), then holds back the members of any gang that
 * has a member still waiting for its checkpoint. Two gangs: the pods of one
 * nvl72.io/job label value, and the pods holding claims of one
 * ComputeDomain; a pod in both waits for either. */
void drain_plan_build(const json_t *pods, const json_t *claims, const struct drain_policy *p,
                      int64_t now_ms, struct drain_plan *out);
void drain_plan_clear(struct drain_plan *pl);

/* Whether a pod may hold a claim the drain must know about: it is not left
 * alone (DaemonSet, mirror, finished) and names at least one claim. */
bool drain_pod_wants_claims(const json_t *pod);

/* The ResourceClaims pod names (spec.resourceClaims[].resourceClaimName,
 * and for a claim made from a template the name its
 * status.resourceClaimStatuses[] records), borrowed from pod, at most cap;
 * returns how many. */
unsigned drain_pod_claim_names(const json_t *pod, const char **names, unsigned cap);

/* Whether claim (a resource.k8s.io/v1 ResourceClaim) holds a device of our
 * driver from node's pool (status.allocation.devices.results[]: driver
 * DRAIN_DRA_DRIVER, pool node); then out names it and the ComputeDomain
 * its opaque config for our driver names (status.allocation.devices.config,
 * else spec.devices.config). */
bool drain_claim_read(const json_t *claim, const char *node, struct drain_claim *out);

/* The sentence naming the claims of our driver the plan's pods hold on the
 * drained nodes ("" when none): DRAIN_CLAIMS_NOTE, then per pod its claim,
 * the pod, the ComputeDomain and the node, as many as fit in cap, and how
 * many more. */
void drain_claims_note(const struct drain_plan *pl, char *out, size_t cap);

/* Writes core, then "; " and note when note is not empty, into out (cap
 * bytes): core is cut first, so that the note is never lost to a long
 * sentence before it. */
void drain_message_join(char *out, size_t cap, const char *core, const char *note);

/* The deadline written for a request made at now_ms: rounded up to the
 * second, since the annotation holds whole seconds. */
int64_t drain_deadline_for(const struct drain_policy *p, int64_t now_ms);

/* How long to wait before looking again: a quarter of the time since the
 * drain began, between 1 s and 30 s (2 s when the start is unknown). */
int64_t drain_backoff_ms(const struct drain_policy *p, int64_t now_ms);

#endif
