// SPDX-License-Identifier: Apache-2.0
// CompatibilityMatrix: validates the object against the CRD's schema and
// CEL rules and builds the matrix engine from its spec, then checks what
// only the whole matrix shows (every intermediate tuple is a stack).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/parse.h"

static const char *const tier_names[] = {"Supported", "Preview"};
static const char *const verdict_names[] = {"blocked", "manual", "safe"};
static const char *const flavour_names[] = {"open", "proprietary"};
static const char *const transport_names[] = {"NVLS", "NVLink", "Net"};

static void version_set(struct api_ctx *c, const char *field, const char *s, struct matrix_tuple *t,
                        enum matrix_component comp)
{
	if (matrix_version_parse(s, &t->version[comp]) != NV_OK) {
		api_fail_at(c, field, "must be a version with at most %d segments",
		            MATRIX_VERSION_SEGMENTS);
		return;
	}
	t->set |= MATRIX_BIT(comp);
}

static void driver_parse(struct api_ctx *c, const json_t *js, struct matrix_tuple *t)
{
	char branch[9] = "";
	char version[17] = "";
	int flavour = 0;
	bool hb = api_get_string(c, js, "branch", true, 4, 8, API_S_BRANCH, branch, sizeof(branch));
	bool hv = api_get_string(c, js, "version", true, 5, 16, API_S_DRIVER, version,
	                         sizeof(version));
	(void)api_get_enum(c, js, "flavour", false, flavour_names, 2, &flavour);
	if (!hb || !hv)
		return;
	unsigned b = 0;
	struct matrix_driver d;
	if (matrix_branch_parse(branch, &b) != NV_OK || matrix_driver_parse(version, &d) != NV_OK)
		return; // the patterns above already failed
	if (d.branch != b)
		api_fail_at(c, "version",
		            "driver.version must belong to driver.branch (%u.x for %s)", b, branch);
	if (b >= 615 && flavour == 1)
		api_fail_at(c, "flavour", "driver.flavour must be open from branch R615 on");
	t->version[MATRIX_C_DRIVER] = d.version;
	(void)str_copy(t->extra[MATRIX_C_DRIVER], MATRIX_EXTRA_LEN, flavour_names[flavour]);
	t->set |= MATRIX_BIT(MATRIX_C_DRIVER);
}

static void kernel_parse(struct api_ctx *c, const json_t *js, struct matrix_tuple *t)
{
	static const char *const arch_names[] = {"arm64"};
	static const char *const page_names[] = {"4k", "64k"};
	int arch = 0;
	int page = 0;
	char version[17] = "";
	(void)api_get_enum(c, js, "arch", false, arch_names, 1, &arch);
	bool hp = api_get_enum(c, js, "pageSize", true, page_names, 2, &page);
	bool hv = api_get_string(c, js, "version", false, 1, 16, API_S_NUMVER, version,
	                         sizeof(version));
	if (!hp)
		return;
	if (hv)
		version_set(c, "version", version, t, MATRIX_C_KERNEL);
	// The page size and arch are part of the kernel's identity: a 4k and a
	// 64k kernel of one release are different tuples.
	snprintf(t->extra[MATRIX_C_KERNEL], MATRIX_EXTRA_LEN, "%s/%s", arch_names[arch],
	         page_names[page]);
	t->set |= MATRIX_BIT(MATRIX_C_KERNEL);
}

static void os_parse(struct api_ctx *c, const json_t *js, struct matrix_tuple *t)
{
	char name[33] = "";
	char version[65] = "";
	bool hn = api_get_string(c, js, "name", true, 1, 32, API_S_OS_NAME, name, sizeof(name));
	bool hv = api_get_string(c, js, "version", true, 1, 64, API_S_VERSION, version,
	                         sizeof(version));
	if (!hn || !hv)
		return;
	version_set(c, "version", version, t, MATRIX_C_OS);
	(void)str_copy(t->extra[MATRIX_C_OS], MATRIX_EXTRA_LEN, name);
}

static void components_parse(struct api_ctx *c, const json_t *js, struct matrix_tuple *t)
{
	for (unsigned i = 0; i < MATRIX_C__COUNT; i++) {
		const char *f = api_component_names[i];
		const json_t *sub = NULL;
		char v[65];
		bool req = i == MATRIX_C_DRIVER || i == MATRIX_C_KERNEL || i == MATRIX_C_KUBERNETES;
		if (i == MATRIX_C_DRIVER || i == MATRIX_C_KERNEL || i == MATRIX_C_OS) {
			if (!api_get_object(c, js, f, req, &sub))
				continue;
			size_t old = api_path_push(c, f);
			if (i == MATRIX_C_DRIVER)
				driver_parse(c, sub, t);
			else if (i == MATRIX_C_KERNEL)
				kernel_parse(c, sub, t);
			else
				os_parse(c, sub, t);
			api_path_pop(c, old);
		} else if (i == MATRIX_C_KUBERNETES) {
			if (api_get_string(c, js, f, true, 3, 16, API_S_K8S, v, sizeof(v)))
				version_set(c, f, v, t, (enum matrix_component)i);
		} else if (api_get_string(c, js, f, false, 1, 64, API_S_VERSION, v, sizeof(v))) {
			version_set(c, f, v, t, (enum matrix_component)i);
		}
	}
	char imex[17];
	if (api_get_string(c, js, "imex", false, 0, 16, API_S_DRIVER, imex, sizeof(imex)) &&
	    (t->set & MATRIX_BIT(MATRIX_C_DRIVER)) &&
	    strcmp(imex, t->version[MATRIX_C_DRIVER].text) != 0)
		api_fail_at(c, "imex",
		            "components.imex must equal components.driver.version: IMEX is "
		            "versioned with the driver");
}

static void range_parse(struct api_ctx *c, const json_t *js, const char *field, bool *has,
                        struct matrix_range *r)
{
	const json_t *o = NULL;
	if (!api_get_object(c, js, field, false, &o))
		return;
	size_t old = api_path_push(c, field);
	char min[17];
	char max[17];
	bool hmin = api_get_string(c, o, "min", true, 1, 16, API_S_NUMVER, min, sizeof(min));
	bool hmax = api_get_string(c, o, "max", true, 1, 16, API_S_NUMVER, max, sizeof(max));
	if (hmin && hmax) {
		if (matrix_range_set_inclusive(r, min, max) == NV_OK)
			*has = true;
		else
			api_fail_at(c, "max", "must not be below min (%s)", min);
	}
	api_path_pop(c, old);
}

// A list-type=set of CVE ids.
static void cves_parse(struct api_ctx *c, const json_t *js, const char *field,
                       char (*out)[MATRIX_CVE_LEN], unsigned *n)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, js, field, false, 0, MATRIX_CVES_MAX, &arr))
		return;
	size_t old = api_path_push(c, field);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		char id[MATRIX_CVE_LEN];
		if (api_check_string(c, json_array_get(arr, i), 1, 31, API_S_CVE, id, sizeof(id))) {
			bool dup = false;
			for (unsigned k = 0; k < *n && !dup; k++)
				dup = strcmp(out[k], id) == 0;
			if (dup)
				api_fail(c, "duplicate value \"%s\"", id);
			else
				memcpy(out[(*n)++], id, sizeof(id));
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void gate_parse(struct api_ctx *c, const json_t *js, struct matrix_gate *g)
{
	g->fabric_completed = true;
	g->imex_domain_up = true;
	g->dcgm_diag_level = 1;
	g->soak_ms = 30 * 60 * 1000;
	const json_t *o = NULL;
	if (!api_get_object(c, js, "gate", false, &o))
		return;
	size_t old = api_path_push(c, "gate");
	int64_t v = 0;
	(void)api_get_bool(c, o, "fabricCompleted", &g->fabric_completed);
	(void)api_get_bool(c, o, "imexDomainUp", &g->imex_domain_up);
	if (api_get_int(c, o, "dcgmDiagLevel", false, 0, 4, &v))
		g->dcgm_diag_level = (int)v;
	(void)api_get_duration(c, o, "soak", &g->soak_ms);
	const json_t *n = NULL;
	if (api_get_object(c, o, "ncclAllReduce", false, &n)) {
		size_t o2 = api_path_push(c, "ncclAllReduce");
		int t = 0;
		g->tolerance_pct = 10;
		(void)api_get_enum(c, n, "transport", false, transport_names, 3, &t);
		(void)str_copy(g->transport, sizeof(g->transport), transport_names[t]);
		if (api_get_int(c, n, "floorGBps", true, 1, 100000, &v)) {
			g->floor_gbps = (int)v;
			g->has_nccl = true;
		}
		if (api_get_int(c, n, "tolerancePercent", false, 0, 50, &v))
			g->tolerance_pct = (int)v;
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void stack_parse(struct api_ctx *c, const json_t *js, struct matrix_stack *s)
{
	if (!json_is_object(js)) {
		api_fail(c, "must be an object");
		return;
	}
	(void)api_get_string(c, js, "name", true, 1, 63, API_S_STACK, s->name, sizeof(s->name));
	char notes[2049];
	(void)api_get_string(c, js, "notes", false, 0, 2048, API_S_ANY, notes, sizeof(notes));
	const json_t *o = NULL;
	if (api_get_object(c, js, "components", true, &o)) {
		size_t old = api_path_push(c, "components");
		components_parse(c, o, &s->tuple);
		api_path_pop(c, old);
	}
	if (api_get_object(c, js, "workloads", false, &o)) {
		size_t old = api_path_push(c, "workloads");
		range_parse(c, o, "cuda", &s->has_cuda, &s->cuda);
		range_parse(c, o, "nccl", &s->has_nccl, &s->nccl);
		api_path_pop(c, old);
	}
	cves_parse(c, js, "fixedCVEs", s->fixed_cves, &s->nfixed);
	cves_parse(c, js, "openCVEs", s->open_cves, &s->nopen);
	for (unsigned i = 0; i < s->nopen; i++)
		if (matrix_stack_fixes(s, s->open_cves[i]))
			api_fail_at(c, "openCVEs", "%s is also in fixedCVEs", s->open_cves[i]);
	gate_parse(c, js, &s->gate);
}

static void step_parse(struct api_ctx *c, const json_t *js, uint32_t *seen,
                       struct matrix_step_spec *st)
{
	const json_t *arr = NULL;
	if (!json_is_object(js)) {
		api_fail(c, "must be an object");
		return;
	}
	(void)api_get_bool(c, js, "requiresDrain", &st->drain);
	(void)api_get_bool(c, js, "requiresFabricRestart", &st->fabric_restart);
	(void)api_get_bool(c, js, "requiresReboot", &st->reboot);
	if (!api_get_array(c, js, "components", true, 1, MATRIX_C__COUNT, &arr))
		return;
	size_t old = api_path_push(c, "components");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		int comp = 0;
		if (api_check_enum(c, json_array_get(arr, i), api_component_names, MATRIX_C__COUNT,
		                   &comp)) {
			uint32_t bit = MATRIX_BIT(comp);
			if (st->components & bit)
				api_fail(c, "duplicate value \"%s\"", api_component_names[comp]);
			else if (*seen & bit)
				api_fail(c, "each component may appear in only one step");
			st->components |= bit;
			*seen |= bit;
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void steps_parse(struct api_ctx *c, const json_t *js, struct matrix_transition *t)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, js, "steps", false, 0, MATRIX_STEPS_MAX, &arr))
		return;
	size_t old = api_path_push(c, "steps");
	uint32_t seen = 0;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		step_parse(c, json_array_get(arr, i), &seen, &t->steps[t->nsteps++]);
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static bool stack_ref(struct api_ctx *c, const json_t *js, const char *field,
                      const struct matrix *m, unsigned *out)
{
	char name[64];
	if (!api_get_string(c, js, field, true, 1, 63, API_S_STACK, name, sizeof(name)))
		return false;
	int i = matrix_stack_index(m, name);
	if (i < 0) {
		api_fail_at(c, field, "stack \"%s\" is not in spec.stacks", name);
		return false;
	}
	*out = (unsigned)i;
	return true;
}

// Fills t; true when it may be added to the matrix.
static bool transition_parse(struct api_ctx *c, const json_t *js, const struct matrix *m,
                             struct matrix_transition *t)
{
	if (!json_is_object(js)) {
		api_fail(c, "must be an object");
		return false;
	}
	size_t errs = c->errs->n;
	bool hf = stack_ref(c, js, "from", m, &t->from);
	bool ht = stack_ref(c, js, "to", m, &t->to);
	int verdict = 0;
	bool hv = api_get_enum(c, js, "verdict", true, verdict_names, 3, &verdict);
	t->verdict = (enum matrix_verdict)verdict;
	(void)api_get_bool(c, js, "reversible", &t->reversible);
	steps_parse(c, js, t);
	char notes[2049] = "";
	(void)api_get_string(c, js, "notes", false, 0, 2048, API_S_ANY, notes, sizeof(notes));
	const json_t *refs = NULL;
	if (api_get_array(c, js, "references", false, 0, 8, &refs)) {
		size_t old = api_path_push(c, "references");
		for (size_t i = 0; i < json_array_size(refs); i++) {
			char ref[513];
			size_t o2 = api_path_push_index(c, i);
			(void)api_check_string(c, json_array_get(refs, i), 0, 512, API_S_ANY, ref,
			                       sizeof(ref));
			api_path_pop(c, o2);
		}
		api_path_pop(c, old);
	}
	if (hf && ht && t->from == t->to)
		api_fail_at(c, "to", "a transition must connect two different stacks");
	if (hv && t->verdict != MATRIX_BLOCKED && t->nsteps == 0)
		api_fail_at(
		        c, "steps",
		        "is required: safe and manual transitions must list their ordered steps");
	if (hv && t->verdict == MATRIX_BLOCKED && notes[0] == '\0')
		api_fail_at(c, "notes", "is required: a blocked transition must explain itself");
	return c->errs->n == errs;
}

static void stacks_parse(struct api_ctx *c, const json_t *arr, struct matrix *m)
{
	struct matrix_stack *s = xmalloc(sizeof(*s));
	size_t old = api_path_push(c, "stacks");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		memset(s, 0, sizeof(*s));
		stack_parse(c, json_array_get(arr, i), s);
		int dup = s->name[0] ? matrix_stack_index(m, s->name) : -1;
		if (dup >= 0)
			api_fail_at(c, "name", "duplicate stack name (also spec.stacks[%d])", dup);
		else if (s->name[0] != '\0')
			(void)matrix_stack_add(m, s);
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
	free(s);
}

static void transitions_parse(struct api_ctx *c, const json_t *arr, struct matrix *m)
{
	size_t old = api_path_push(c, "transitions");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		struct matrix_transition t;
		memset(&t, 0, sizeof(t));
		if (transition_parse(c, json_array_get(arr, i), m, &t)) {
			const struct matrix_transition *d = matrix_transition_find(m, t.from, t.to);
			if (d != NULL)
				api_fail(c,
				         "each (from, to) pair may appear only once (also "
				         "spec.transitions[%u])",
				         (unsigned)(d - m->transitions));
			else
				(void)matrix_transition_add(m, &t);
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

// Every listed, non-blocked edge must expand: the tuple after each step but
// the last is a stack, and the steps move everything that differs.
static void steps_check(struct api_ctx *c, const struct matrix *m)
{
	struct matrix_plan *p = xmalloc(sizeof(*p));
	for (unsigned i = 0; i < m->ntransitions; i++) {
		const struct matrix_transition *t = &m->transitions[i];
		if (t->verdict == MATRIX_BLOCKED)
			continue;
		(void)matrix_plan_build(m, m->stacks[t->from].name, m->stacks[t->to].name, 0, p);
		if (p->reason != MATRIX_R_BAD_STEPS)
			continue;
		char path[64];
		snprintf(path, sizeof(path), "spec.transitions[%u].steps", i);
		api_errors_add(c->errs, path, "%s", p->problem);
	}
	free(p);
}

enum nv_err api_matrix_parse(const json_t *obj, struct matrix **out, struct api_errors *errs)
{
	struct api_ctx c;
	struct api_meta meta;
	struct matrix *m = NULL;
	const json_t *arr = NULL;
	int platform = 0;
	int tier = 0;
	char text[4097];
	memset(&meta, 0, sizeof(meta));
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "CompatibilityMatrix", false, &meta, NULL);
	if (!spec)
		goto out;
	size_t old = api_path_push(&c, "spec");
	(void)api_get_enum(&c, spec, "platform", true, api_platform_names, 3, &platform);
	(void)api_get_enum(&c, spec, "tier", false, tier_names, 2, &tier);
	(void)api_get_string(&c, spec, "supersedes", false, 1, 63, API_S_DNS_SUBDOMAIN, text,
	                     sizeof(text));
	(void)api_get_string(&c, spec, "notes", false, 0, 4096, API_S_ANY, text, sizeof(text));
	m = matrix_new(meta.name, (enum matrix_platform)platform, (enum matrix_tier)tier);
	if (api_get_array(&c, spec, "stacks", true, 1, MATRIX_STACKS_MAX, &arr))
		stacks_parse(&c, arr, m);
	if (api_get_array(&c, spec, "transitions", false, 0, MATRIX_TRANSITIONS_MAX, &arr))
		transitions_parse(&c, arr, m);
	api_path_pop(&c, old);
	if (!api_ctx_failed(&c))
		steps_check(&c, m);
out:
	if (api_ctx_failed(&c)) {
		matrix_free(m);
		return NV_E_INVALID_OBJECT;
	}
	*out = m;
	return NV_OK;
}

json_t *api_matrix_status_to_json(const struct api_matrix_status *s)
{
	json_t *o = json_object();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration", json_integer(s->observed_generation));
	json_object_set_new(o, "stackCount", json_integer(s->stack_count));
	json_object_set_new(o, "transitionCount", json_integer(s->transition_count));
	json_object_set_new(o, "racks", json_integer(s->racks));
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}
