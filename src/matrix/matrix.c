// SPDX-License-Identifier: Apache-2.0
// The matrix itself: component and layer names, tuples, stacks and
// transitions, the expansion of a listed edge into steps, the verdict of a
// move, the CUDA/NCCL check and CVE lookups. Everything fails closed: an
// unknown stack, an unlisted move or an edge whose steps do not land on
// stacks is blocked.
#include "nvl72/matrix.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix_int.h"
#include "nvl72/alloc.h"
#include "nvl72/parse.h"

static const struct {
	const char *name;
	enum matrix_layer layer;
} components[MATRIX_C__COUNT] = {
        [MATRIX_C_NVOS] = {"nvos", MATRIX_L_FABRIC},
        [MATRIX_C_SWITCH_TRAY_FIRMWARE] = {"switchTrayFirmware", MATRIX_L_FABRIC},
        [MATRIX_C_NMX] = {"nmx", MATRIX_L_FABRIC},
        [MATRIX_C_GPU_FIRMWARE] = {"gpuFirmware", MATRIX_L_FIRMWARE},
        [MATRIX_C_HMC_FIRMWARE] = {"hmcFirmware", MATRIX_L_FIRMWARE},
        [MATRIX_C_BMC_FIRMWARE] = {"bmcFirmware", MATRIX_L_FIRMWARE},
        [MATRIX_C_NIC_FIRMWARE] = {"nicFirmware", MATRIX_L_FIRMWARE},
        [MATRIX_C_DPU_FIRMWARE] = {"dpuFirmware", MATRIX_L_FIRMWARE},
        [MATRIX_C_DRIVER] = {"driver", MATRIX_L_NODE},
        [MATRIX_C_DOCA] = {"doca", MATRIX_L_NODE},
        [MATRIX_C_NCCL_NET_PLUGIN] = {"ncclNetPlugin", MATRIX_L_WORKLOAD},
        [MATRIX_C_DRA_DRIVER] = {"draDriver", MATRIX_L_KUBERNETES},
        [MATRIX_C_KERNEL] = {"kernel", MATRIX_L_NODE},
        [MATRIX_C_OS] = {"os", MATRIX_L_NODE},
        [MATRIX_C_KUBERNETES] = {"kubernetes", MATRIX_L_KUBERNETES},
};

static const char *const layers[MATRIX_L__COUNT] = {
        [MATRIX_L_FIRMWARE] = "firmware", [MATRIX_L_FABRIC] = "fabric",
        [MATRIX_L_NODE] = "node",         [MATRIX_L_KUBERNETES] = "kubernetes",
        [MATRIX_L_WORKLOAD] = "workload",
};

static const char *const verdicts[] = {
        [MATRIX_BLOCKED] = "blocked",
        [MATRIX_MANUAL] = "manual",
        [MATRIX_SAFE] = "safe",
};

static const char *const platforms[] = {
        [MATRIX_GB200] = "gb200",
        [MATRIX_GB300] = "gb300",
        [MATRIX_VR200] = "vr200",
};

static const char *const reasons[] = {
        [MATRIX_R_LISTED] = "Listed",
        [MATRIX_R_SAME_STACK] = "SameStack",
        [MATRIX_R_UNKNOWN_STACK] = "UnknownStack",
        [MATRIX_R_UNLISTED] = "Unlisted",
        [MATRIX_R_REVERSE_UNLISTED] = "ReverseUnlisted",
        [MATRIX_R_BAD_STEPS] = "BadSteps",
};

// Finds s in a table of names; -1 when absent.
static int name_find(const char *const *names, size_t n, const char *s)
{
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (names[i] != NULL && strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

const char *matrix_component_name(enum matrix_component c)
{
	if ((unsigned)c >= MATRIX_C__COUNT)
		return "unknown";
	return components[c].name;
}

bool matrix_component_parse(const char *s, enum matrix_component *out)
{
	for (unsigned i = 0; s != NULL && i < MATRIX_C__COUNT; i++) {
		if (strcmp(components[i].name, s) == 0) {
			*out = (enum matrix_component)i;
			return true;
		}
	}
	return false;
}

enum matrix_layer matrix_component_layer(enum matrix_component c)
{
	if ((unsigned)c >= MATRIX_C__COUNT)
		return MATRIX_L_NODE;
	return components[c].layer;
}

const char *matrix_layer_name(enum matrix_layer l)
{
	if ((unsigned)l >= MATRIX_L__COUNT)
		return "unknown";
	return layers[l];
}

bool matrix_layer_parse(const char *s, enum matrix_layer *out)
{
	int i = name_find(layers, MATRIX_L__COUNT, s);
	if (i < 0)
		return false;
	*out = (enum matrix_layer)i;
	return true;
}

const char *matrix_verdict_name(enum matrix_verdict v)
{
	if ((unsigned)v >= sizeof(verdicts) / sizeof(verdicts[0]))
		return "blocked";
	return verdicts[v];
}

bool matrix_verdict_parse(const char *s, enum matrix_verdict *out)
{
	int i = name_find(verdicts, sizeof(verdicts) / sizeof(verdicts[0]), s);
	if (i < 0)
		return false;
	*out = (enum matrix_verdict)i;
	return true;
}

const char *matrix_platform_name(enum matrix_platform p)
{
	if ((unsigned)p >= sizeof(platforms) / sizeof(platforms[0]))
		return "unknown";
	return platforms[p];
}

bool matrix_platform_parse(const char *s, enum matrix_platform *out)
{
	int i = name_find(platforms, sizeof(platforms) / sizeof(platforms[0]), s);
	if (i < 0)
		return false;
	*out = (enum matrix_platform)i;
	return true;
}

const char *matrix_reason_name(enum matrix_reason r)
{
	if ((unsigned)r >= sizeof(reasons) / sizeof(reasons[0]))
		return "Unknown";
	return reasons[r];
}

void matrix_problem_set(char *problem, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(problem, MATRIX_PROBLEM_LEN, fmt, ap);
	va_end(ap);
	if (n < 0)
		problem[0] = '\0';
}

/* ---- tuples ----------------------------------------------------------- */

static bool component_eq(const struct matrix_tuple *a, const struct matrix_tuple *b, unsigned c)
{
	bool ha = (a->set & MATRIX_BIT(c)) != 0;
	bool hb = (b->set & MATRIX_BIT(c)) != 0;
	if (ha != hb)
		return false;
	if (!ha)
		return true;
	return matrix_version_cmp_str(a->version[c].text, b->version[c].text) == 0 &&
	       strcmp(a->extra[c], b->extra[c]) == 0;
}

uint32_t matrix_tuple_diff(const struct matrix_tuple *a, const struct matrix_tuple *b)
{
	uint32_t diff = 0;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (!component_eq(a, b, c))
			diff |= MATRIX_BIT(c);
	return diff;
}

bool matrix_tuple_eq(const struct matrix_tuple *a, const struct matrix_tuple *b)
{
	return matrix_tuple_diff(a, b) == 0;
}

bool matrix_tuple_is_downgrade(const struct matrix_tuple *from, const struct matrix_tuple *to)
{
	uint32_t both = from->set & to->set;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++) {
		if (!(both & MATRIX_BIT(c)))
			continue;
		if (matrix_version_cmp_str(to->version[c].text, from->version[c].text) < 0)
			return true;
	}
	return false;
}

bool matrix_gate_passes(const struct matrix_gate *g, int64_t busbw_gbps)
{
	if (!g->has_nccl)
		return true;
	// Integer form of busbw >= floor * (100 - tolerance) / 100.
	return busbw_gbps * 100 >= (int64_t)g->floor_gbps * (100 - (int64_t)g->tolerance_pct);
}

/* ---- the matrix ------------------------------------------------------- */

struct matrix *matrix_new(const char *name, enum matrix_platform platform, enum matrix_tier tier)
{
	struct matrix *m = xcalloc(1, sizeof(*m));
	(void)str_copy(m->name, sizeof(m->name), name != NULL ? name : "");
	m->platform = platform;
	m->tier = tier;
	return m;
}

void matrix_free(struct matrix *m)
{
	if (m == NULL)
		return;
	free(m->stacks);
	free(m->transitions);
	free(m);
}

enum nv_err matrix_stack_add(struct matrix *m, const struct matrix_stack *s)
{
	if (s->name[0] == '\0')
		return NV_E_INVAL;
	if (matrix_stack_index(m, s->name) >= 0)
		return NV_E_EXISTS;
	if (m->nstacks >= MATRIX_STACKS_MAX)
		return NV_E_TOO_LARGE;
	m->stacks = xreallocarray(m->stacks, m->nstacks + 1, sizeof(*m->stacks));
	m->stacks[m->nstacks++] = *s;
	return NV_OK;
}

enum nv_err matrix_transition_add(struct matrix *m, const struct matrix_transition *t)
{
	if (t->from >= m->nstacks || t->to >= m->nstacks)
		return NV_E_NOT_FOUND;
	if (t->from == t->to || t->nsteps > MATRIX_STEPS_MAX)
		return NV_E_INVAL;
	if (matrix_transition_find(m, t->from, t->to) != NULL)
		return NV_E_EXISTS;
	if (m->ntransitions >= MATRIX_TRANSITIONS_MAX)
		return NV_E_TOO_LARGE;
	m->transitions =
	        xreallocarray(m->transitions, m->ntransitions + 1, sizeof(*m->transitions));
	m->transitions[m->ntransitions++] = *t;
	return NV_OK;
}

int matrix_stack_index(const struct matrix *m, const char *name)
{
	if (name == NULL)
		return -1;
	for (unsigned i = 0; i < m->nstacks; i++)
		if (strcmp(m->stacks[i].name, name) == 0)
			return (int)i;
	return -1;
}

const struct matrix_stack *matrix_stack_find(const struct matrix *m, const char *name)
{
	int i = matrix_stack_index(m, name);
	return i < 0 ? NULL : &m->stacks[i];
}

const struct matrix_stack *matrix_stack_find_tuple(const struct matrix *m,
                                                   const struct matrix_tuple *t)
{
	for (unsigned i = 0; i < m->nstacks; i++)
		if (matrix_tuple_eq(&m->stacks[i].tuple, t))
			return &m->stacks[i];
	return NULL;
}

const struct matrix_transition *matrix_transition_find(const struct matrix *m, unsigned from,
                                                       unsigned to)
{
	for (unsigned i = 0; i < m->ntransitions; i++)
		if (m->transitions[i].from == from && m->transitions[i].to == to)
			return &m->transitions[i];
	return NULL;
}

/* ---- edges and verdicts ----------------------------------------------- */

// Names the components of mask, comma-separated, into out.
static void components_format(uint32_t mask, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++) {
		if (!(mask & MATRIX_BIT(c)))
			continue;
		const char *n = matrix_component_name((enum matrix_component)c);
		size_t nl = strlen(n);
		if (len + nl + 2 >= cap)
			return;
		if (len > 0)
			out[len++] = ',';
		memcpy(out + len, n, nl + 1);
		len += nl;
	}
}

static void tuple_apply(struct matrix_tuple *cur, const struct matrix_tuple *to, uint32_t comps)
{
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++) {
		if (!(comps & MATRIX_BIT(c)))
			continue;
		cur->set = (cur->set & ~MATRIX_BIT(c)) | (to->set & MATRIX_BIT(c));
		cur->version[c] = to->version[c];
		memcpy(cur->extra[c], to->extra[c], MATRIX_EXTRA_LEN);
	}
}

static bool step_append(struct matrix_plan *p, const struct matrix_step_spec *s, unsigned from,
                        unsigned to, unsigned edge)
{
	if (p->nsteps >= MATRIX_PLAN_STEPS_MAX) {
		matrix_problem_set(p->problem, "plan has more than %d steps",
		                   MATRIX_PLAN_STEPS_MAX);
		return false;
	}
	struct matrix_plan_step *ps = &p->steps[p->nsteps++];
	ps->components = s->components;
	ps->drain = s->drain;
	ps->fabric_restart = s->fabric_restart;
	ps->reboot = s->reboot;
	ps->from_stack = from;
	ps->to_stack = to;
	ps->edge = edge;
	return true;
}

bool matrix_edge_expand(const struct matrix *m, unsigned edge, struct matrix_plan *p)
{
	const struct matrix_transition *t = &m->transitions[edge];
	const struct matrix_stack *src = &m->stacks[t->from];
	const struct matrix_stack *dst = &m->stacks[t->to];
	struct matrix_tuple cur = src->tuple;
	struct matrix_step_spec all = {matrix_tuple_diff(&src->tuple, &dst->tuple), false, false,
	                               false};
	unsigned nsteps = t->nsteps > 0 ? t->nsteps : 1;
	unsigned at = t->from;
	char names[MATRIX_PROBLEM_LEN / 2];
	for (unsigned k = 0; k < nsteps; k++) {
		const struct matrix_step_spec *s = t->nsteps ? &t->steps[k] : &all;
		tuple_apply(&cur, &dst->tuple, s->components);
		unsigned next = t->to;
		if (k + 1 < nsteps) {
			const struct matrix_stack *mid = matrix_stack_find_tuple(m, &cur);
			if (mid == NULL) {
				components_format(s->components, names, sizeof(names));
				matrix_problem_set(p->problem,
				                   "%.63s -> %.63s: the tuple after step %u (%s) "
				                   "is not a stack of this matrix",
				                   src->name, dst->name, k + 1, names);
				return false;
			}
			next = (unsigned)(mid - m->stacks);
		}
		if (!step_append(p, s, at, next, edge))
			return false;
		at = next;
	}
	uint32_t left = matrix_tuple_diff(&cur, &dst->tuple);
	if (left != 0) {
		components_format(left, names, sizeof(names));
		matrix_problem_set(p->problem, "%.63s -> %.63s: no step moves %s", src->name,
		                   dst->name, names);
		return false;
	}
	return true;
}

enum matrix_verdict matrix_verdict_get(const struct matrix *m, const char *from, const char *to,
                                       struct matrix_verdict_info *out)
{
	struct matrix_verdict_info vi = {MATRIX_BLOCKED, MATRIX_R_UNKNOWN_STACK, false, NULL};
	int fi = matrix_stack_index(m, from);
	int ti = matrix_stack_index(m, to);
	if (fi < 0 || ti < 0)
		goto out;
	if (fi == ti) {
		vi.verdict = MATRIX_SAFE;
		vi.reason = MATRIX_R_SAME_STACK;
		goto out;
	}
	vi.downgrade = matrix_tuple_is_downgrade(&m->stacks[fi].tuple, &m->stacks[ti].tuple);
	vi.edge = matrix_transition_find(m, (unsigned)fi, (unsigned)ti);
	if (vi.edge == NULL) {
		// The reverse edge says nothing about this one, whatever its
		// verdict and reversible flag: fail closed.
		vi.reason = matrix_transition_find(m, (unsigned)ti, (unsigned)fi)
		                    ? MATRIX_R_REVERSE_UNLISTED
		                    : MATRIX_R_UNLISTED;
		goto out;
	}
	vi.reason = MATRIX_R_LISTED;
	if (vi.edge->verdict == MATRIX_BLOCKED)
		goto out;
	struct matrix_plan *p = xcalloc(1, sizeof(*p));
	bool ok = matrix_edge_expand(m, (unsigned)(vi.edge - m->transitions), p);
	free(p);
	if (!ok) {
		vi.reason = MATRIX_R_BAD_STEPS;
		goto out;
	}
	vi.verdict = vi.edge->verdict;
out:
	if (out != NULL)
		*out = vi;
	return vi.verdict;
}

/* ---- workloads and CVEs ----------------------------------------------- */

static bool lib_check(const char *lib, const char *have, bool has_range,
                      const struct matrix_range *r, char *problem, enum nv_err *rc)
{
	if (have == NULL)
		return true;
	struct matrix_version v;
	*rc = matrix_version_parse(have, &v);
	if (*rc != NV_OK) {
		matrix_problem_set(problem, "%s version \"%.64s\" is malformed", lib, have);
		return false;
	}
	if (!has_range) {
		matrix_problem_set(problem, "stack sets no %s range", lib);
		return false;
	}
	if (matrix_range_contains(r, &v))
		return true;
	char rs[MATRIX_RANGE_LEN];
	matrix_range_format(r, rs, sizeof(rs));
	matrix_problem_set(problem, "%s %s is outside %s", lib, v.text, rs);
	return false;
}

enum nv_err matrix_stack_check_workload(const struct matrix_stack *s, const char *cuda,
                                        const char *nccl, struct matrix_workload_check *out)
{
	struct matrix_workload_check r;
	memset(&r, 0, sizeof(r));
	enum nv_err rc = NV_OK;
	r.cuda_ok = lib_check("CUDA", cuda, s->has_cuda, &s->cuda, r.problem, &rc);
	if (rc != NV_OK)
		return rc;
	char second[MATRIX_PROBLEM_LEN] = "";
	r.nccl_ok = lib_check("NCCL", nccl, s->has_nccl, &s->nccl, second, &rc);
	if (rc != NV_OK)
		return rc;
	if (r.cuda_ok && !r.nccl_ok)
		memcpy(r.problem, second, sizeof(second));
	r.ok = r.cuda_ok && r.nccl_ok;
	*out = r;
	return NV_OK;
}

static bool cve_in(const char (*list)[MATRIX_CVE_LEN], unsigned n, const char *cve)
{
	for (unsigned i = 0; cve != NULL && i < n; i++)
		if (strcmp(list[i], cve) == 0)
			return true;
	return false;
}

bool matrix_stack_fixes(const struct matrix_stack *s, const char *cve)
{
	return cve_in(s->fixed_cves, s->nfixed, cve);
}

bool matrix_stack_is_affected(const struct matrix_stack *s, const char *cve)
{
	return cve_in(s->open_cves, s->nopen, cve);
}

unsigned matrix_cve_fixed_by(const struct matrix *m, const char *cve, unsigned *idx, unsigned cap)
{
	unsigned n = 0;
	for (unsigned i = 0; i < m->nstacks; i++) {
		if (!matrix_stack_fixes(&m->stacks[i], cve))
			continue;
		if (n < cap && idx != NULL)
			idx[n] = i;
		n++;
	}
	return n;
}
