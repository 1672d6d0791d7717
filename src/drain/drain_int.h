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

enum drain_act {
	DRAIN_ACT_SKIP = 0,    /* DaemonSet, mirror or finished pod: it stays */
	DRAIN_ACT_TERMINATING, /* being deleted already: wait for it to go */
	DRAIN_ACT_ASK,         /* Checkpoint mode: write the request now */
	DRAIN_ACT_WAIT,        /* asked, not acknowledged, deadline ahead */
	DRAIN_ACT_HOLD,        /* may go, but a gang member may not yet */
	DRAIN_ACT_EVICT,       /* evict now (DELETE when forced) */
};

struct drain_pod {
	const json_t *pod; /* borrowed from the caller's array */
	char key[320];     /* "namespace/name" */
	const char *gang;  /* the nvl72.io/job label (borrowed) or NULL */
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
 * then holds back the members of any gang that has a member still waiting
 * for its checkpoint. */
void drain_plan_build(const json_t *pods, const struct drain_policy *p, int64_t now_ms,
                      struct drain_plan *out);
void drain_plan_clear(struct drain_plan *pl);

/* The deadline written for a request made at now_ms: rounded up to the
 * second, since the annotation holds whole seconds. */
int64_t drain_deadline_for(const struct drain_policy *p, int64_t now_ms);

/* How long to wait before looking again: a quarter of the time since the
 * drain began, between 1 s and 30 s (2 s when the start is unknown). */
int64_t drain_backoff_ms(const struct drain_policy *p, int64_t now_ms);

#endif
