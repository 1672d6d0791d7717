// SPDX-License-Identifier: Apache-2.0
// Upgrade plans: a move from one stack to another as ordered component
// steps, each landing on a tuple that is itself a stack of the matrix, with
// the drain and fabric-restart needs of every step. Several listed edges
// (each expanded by matrix.c) may be chained when asked, preferring safe
// edges, then fewer hops.
#include "nvl72/matrix.h"

#include <stdlib.h>
#include <string.h>

#include "matrix_int.h"
#include "nvl72/alloc.h"

// Fills p from a chain of edges; false (with p->problem) when one of them
// does not expand.
static bool plan_from_hops(const struct matrix *m, const unsigned *hops, unsigned nhops,
                           struct matrix_plan *p)
{
	p->nsteps = 0;
	p->verdict = MATRIX_SAFE;
	p->reversible = true;
	p->nhops = nhops;
	for (unsigned h = 0; h < nhops; h++) {
		const struct matrix_transition *t = &m->transitions[hops[h]];
		p->hops[h] = hops[h];
		if (t->verdict < p->verdict)
			p->verdict = t->verdict;
		p->reversible = p->reversible && t->reversible;
		if (!matrix_edge_expand(m, hops[h], p))
			return false;
	}
	for (unsigned i = 0; i < p->nsteps; i++) {
		const struct matrix_plan_step *s = &p->steps[i];
		for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
			if (s->components & MATRIX_BIT(c))
				p->layers |= MATRIX_BIT(
				        matrix_component_layer((enum matrix_component)c));
		p->needs_drain = p->needs_drain || s->drain;
		p->needs_fabric_restart = p->needs_fabric_restart || s->fabric_restart;
	}
	p->reason = MATRIX_R_LISTED;
	return true;
}

enum { COST_INF = 1 << 30, COST_MANUAL = 1000 };

struct path_search {
	int cost[MATRIX_PLAN_HOPS_MAX + 1][MATRIX_STACKS_MAX];
	int pred[MATRIX_PLAN_HOPS_MAX + 1][MATRIX_STACKS_MAX]; /* edge index */
};

static bool edge_usable(const struct matrix *m, unsigned e)
{
	if (m->transitions[e].verdict == MATRIX_BLOCKED)
		return false;
	struct matrix_plan *scratch = xcalloc(1, sizeof(*scratch));
	bool ok = matrix_edge_expand(m, e, scratch);
	free(scratch);
	return ok;
}

// Layered shortest path over usable edges: a manual edge costs more than
// any number of safe hops, so an all-safe route wins when there is one.
static unsigned path_find(const struct matrix *m, unsigned from, unsigned to, unsigned *hops)
{
	struct path_search *ps = xmalloc(sizeof(*ps));
	bool *usable = xcalloc(m->ntransitions + 1, sizeof(*usable));
	for (unsigned e = 0; e < m->ntransitions; e++)
		usable[e] = edge_usable(m, e);
	for (unsigned h = 0; h <= MATRIX_PLAN_HOPS_MAX; h++)
		for (unsigned v = 0; v < MATRIX_STACKS_MAX; v++)
			ps->cost[h][v] = COST_INF;
	ps->cost[0][from] = 0;
	for (unsigned h = 0; h < MATRIX_PLAN_HOPS_MAX; h++) {
		for (unsigned e = 0; e < m->ntransitions; e++) {
			const struct matrix_transition *t = &m->transitions[e];
			if (!usable[e] || ps->cost[h][t->from] == COST_INF)
				continue;
			int c = ps->cost[h][t->from] + 1 +
			        (t->verdict == MATRIX_MANUAL ? COST_MANUAL : 0);
			if (c < ps->cost[h + 1][t->to]) {
				ps->cost[h + 1][t->to] = c;
				ps->pred[h + 1][t->to] = (int)e;
			}
		}
	}
	unsigned best = 0;
	for (unsigned h = 1; h <= MATRIX_PLAN_HOPS_MAX; h++)
		if (ps->cost[h][to] < COST_INF &&
		    (best == 0 || ps->cost[h][to] < ps->cost[best][to]))
			best = h;
	for (unsigned h = best, v = to; h > 0; h--) {
		unsigned e = (unsigned)ps->pred[h][v];
		hops[h - 1] = e;
		v = m->transitions[e].from;
	}
	free(usable);
	free(ps);
	return best;
}

static void plan_blocked(const struct matrix *m, struct matrix_plan *p)
{
	const char *from = m->stacks[p->from].name;
	const char *to = m->stacks[p->to].name;
	struct matrix_verdict_info vi;
	(void)matrix_verdict_get(m, from, to, &vi);
	p->verdict = MATRIX_BLOCKED;
	p->reason = vi.reason;
	if (vi.reason == MATRIX_R_BAD_STEPS)
		return; // the expansion already said why
	if (vi.reason == MATRIX_R_LISTED)
		matrix_problem_set(p->problem, "%.63s -> %.63s is listed as blocked", from, to);
	else if (vi.reason == MATRIX_R_REVERSE_UNLISTED)
		matrix_problem_set(p->problem,
		                   "%.63s -> %.63s is not listed (only its reverse is, and a "
		                   "downgrade never inherits its verdict)",
		                   from, to);
	else
		matrix_problem_set(p->problem, "%.63s -> %.63s is not listed", from, to);
}

enum nv_err matrix_plan_build(const struct matrix *m, const char *from, const char *to,
                              unsigned flags, struct matrix_plan *out)
{
	memset(out, 0, sizeof(*out));
	int fi = matrix_stack_index(m, from);
	int ti = matrix_stack_index(m, to);
	if (fi < 0 || ti < 0) {
		out->reason = MATRIX_R_UNKNOWN_STACK;
		matrix_problem_set(out->problem, "stack \"%.63s\" is not in matrix %.63s",
		                   fi < 0 ? (from ? from : "") : to, m->name);
		return NV_E_NOT_FOUND;
	}
	out->from = (unsigned)fi;
	out->to = (unsigned)ti;
	if (fi == ti) {
		out->verdict = MATRIX_SAFE;
		out->reason = MATRIX_R_SAME_STACK;
		out->reversible = true;
		return NV_OK;
	}
	const struct matrix_transition *direct =
	        matrix_transition_find(m, (unsigned)fi, (unsigned)ti);
	if (direct != NULL && direct->verdict != MATRIX_BLOCKED) {
		unsigned e = (unsigned)(direct - m->transitions);
		if (plan_from_hops(m, &e, 1, out))
			return NV_OK;
		out->verdict = MATRIX_BLOCKED;
		out->reason = MATRIX_R_BAD_STEPS;
		return NV_OK;
	}
	unsigned hops[MATRIX_PLAN_HOPS_MAX];
	unsigned n = (flags & MATRIX_PLAN_MULTI_HOP)
	                     ? path_find(m, (unsigned)fi, (unsigned)ti, hops)
	                     : 0;
	if (n > 0 && plan_from_hops(m, hops, n, out))
		return NV_OK;
	char keep[MATRIX_PROBLEM_LEN];
	memcpy(keep, out->problem, sizeof(keep));
	memset(out, 0, sizeof(*out));
	out->from = (unsigned)fi;
	out->to = (unsigned)ti;
	memcpy(out->problem, keep, sizeof(keep));
	plan_blocked(m, out);
	return NV_OK;
}

// The group of trays starting from stack index si, added when new.
static unsigned tray_group(struct matrix_tray_plan *tp, unsigned si)
{
	for (unsigned g = 0; g < tp->ngroups; g++)
		if (tp->groups[g].plan.from == si)
			return g;
	tp->groups[tp->ngroups].plan.from = si;
	return tp->ngroups++;
}

enum nv_err matrix_plan_trays(const struct matrix *m, const char *const *tray_stacks,
                              unsigned ntrays, const char *target, unsigned flags,
                              struct matrix_tray_plan *out)
{
	if (ntrays == 0 || ntrays > MATRIX_TRAYS_MAX)
		return NV_E_INVAL;
	if (matrix_stack_index(m, target) < 0)
		return NV_E_NOT_FOUND;
	struct matrix_tray_plan *tp = xcalloc(1, sizeof(*tp));
	tp->verdict = MATRIX_SAFE;
	for (unsigned i = 0; i < ntrays; i++) {
		int si = matrix_stack_index(m, tray_stacks[i]);
		if (si < 0) {
			tp->unknown_trays |= 1u << (i + 1);
			tp->verdict = MATRIX_BLOCKED;
			if (tp->problem[0] == '\0')
				matrix_problem_set(tp->problem,
				                   "tray %u runs no stack of matrix %.63s", i + 1,
				                   m->name);
			continue;
		}
		tp->groups[tray_group(tp, (unsigned)si)].trays |= 1u << (i + 1);
	}
	for (unsigned g = 0; g < tp->ngroups; g++) {
		struct matrix_plan *p = &tp->groups[g].plan;
		(void)matrix_plan_build(m, m->stacks[p->from].name, target, flags, p);
		if (p->verdict < tp->verdict)
			tp->verdict = p->verdict;
		if (p->verdict == MATRIX_BLOCKED && tp->problem[0] == '\0')
			memcpy(tp->problem, p->problem, sizeof(tp->problem));
	}
	memcpy(out, tp, sizeof(*out));
	free(tp);
	return NV_OK;
}
