// SPDX-License-Identifier: Apache-2.0
// Cross-object rules that no single object's schema can express: a node in
// two racks, overlapping partitions, a tray that its rack does not list, and
// an upgrade whose target, or any step on the way, is not in the matrix.
// The admission webhook calls these with the objects from its cache.
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"

static enum nv_err result(const struct api_errors *errs, unsigned before)
{
	return errs->n + errs->dropped == before ? NV_OK : NV_E_INVALID_OBJECT;
}

static void node_check(const struct api_rack *r, unsigned i, const struct api_rack *o,
                       struct api_errors *errs)
{
	const struct api_rack_compute_tray *t = api_rack_tray_by_node(o, r->compute[i].node);
	if (t == NULL)
		return;
	char path[64];
	snprintf(path, sizeof(path), "spec.computeTrays[%u].node", i);
	api_errors_add(errs, path, "node \"%s\" is already tray %d of rack \"%s\"",
	               r->compute[i].node, t->index, o->meta.name);
}

static void oob_check(const struct api_rack *r, unsigned i, const struct api_rack *o,
                      struct api_errors *errs)
{
	for (unsigned k = 0; k < o->nswitch; k++) {
		if (strcmp(o->switches[k].oob_address, r->switches[i].oob_address) != 0)
			continue;
		char path[64];
		snprintf(path, sizeof(path), "spec.switchTrays[%u].oobAddress", i);
		api_errors_add(errs, path,
		               "address \"%s\" is already switch tray %d of rack \"%s\"",
		               r->switches[i].oob_address, o->switches[k].index, o->meta.name);
	}
}

enum nv_err api_rack_check_unique(const struct api_rack *r, const struct api_rack *const *others,
                                  unsigned n, struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	for (unsigned k = 0; k < n; k++) {
		const struct api_rack *o = others[k];
		if (o == NULL || strcmp(o->meta.name, r->meta.name) == 0)
			continue;
		for (unsigned i = 0; i < r->ncompute; i++)
			node_check(r, i, o, errs);
		for (unsigned i = 0; i < r->nswitch; i++)
			oob_check(r, i, o, errs);
		if (r->chassis_serial[0] != '\0' &&
		    strcmp(r->chassis_serial, o->chassis_serial) == 0)
			api_errors_add(errs, "spec.chassisSerial",
			               "chassis \"%s\" is already rack \"%s\"", r->chassis_serial,
			               o->meta.name);
	}
	return result(errs, before);
}

enum nv_err api_rack_check_matrix(const struct api_rack *r, const struct matrix *m,
                                  struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	if (m == NULL) {
		api_errors_add(errs, "spec.matrix.name",
		               "CompatibilityMatrix \"%s\" does not exist", r->matrix_name);
		return NV_E_INVALID_OBJECT;
	}
	if (strcmp(m->name, r->matrix_name) != 0)
		api_errors_add(errs, "spec.matrix.name",
		               "is \"%s\", not the matrix checked (\"%s\")", r->matrix_name,
		               m->name);
	if (m->platform != r->platform)
		api_errors_add(errs, "spec.platform",
		               "rack is %s but CompatibilityMatrix \"%s\" is for %s",
		               matrix_platform_name(r->platform), m->name,
		               matrix_platform_name(m->platform));
	if (matrix_stack_find(m, r->matrix_stack) == NULL)
		api_errors_add(errs, "spec.matrix.stack",
		               "stack \"%s\" is not in CompatibilityMatrix \"%s\"", r->matrix_stack,
		               m->name);
	return result(errs, before);
}

enum nv_err api_rack_partition_check(const struct api_rack_partition *p,
                                     const struct api_rack *rack,
                                     const struct api_rack_partition *const *others, unsigned n,
                                     struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	if (rack == NULL)
		api_errors_add(errs, "spec.rack", "rack \"%s\" does not exist", p->rack);
	for (unsigned k = 0; k < n; k++) {
		const struct api_rack_partition *o = others[k];
		if (o == NULL || strcmp(o->meta.name, p->meta.name) == 0 ||
		    strcmp(o->rack, p->rack) != 0)
			continue;
		uint32_t both = o->trays & p->trays;
		for (int t = 1; t <= API_COMPUTE_TRAYS && both != 0; t++)
			if (both & (1u << t))
				api_errors_add(errs, "spec.trays",
				               "tray %d of rack \"%s\" is already in partition "
				               "\"%s\": partitions of one rack never overlap",
				               t, p->rack, o->meta.name);
	}
	return result(errs, before);
}

/* Whether from_stacks[i] is a stack an earlier entry already names. */
static bool seen_before(const char *const *from_stacks, unsigned i)
{
	for (unsigned k = 0; k < i; k++)
		if (from_stacks[k] != NULL && from_stacks[i] != NULL &&
		    strcmp(from_stacks[k], from_stacks[i]) == 0)
			return true;
	return false;
}

static void from_check(const struct api_rack_upgrade *u, const struct matrix *m, const char *from,
                       unsigned flags, struct api_errors *errs)
{
	struct matrix_plan p;
	if (from == NULL || from[0] == '\0') {
		api_errors_add(errs, "spec.target.stack",
		               "a tray of the rack runs no stack of the matrix: no plan can start "
		               "from it");
		return;
	}
	if (matrix_plan_build(m, from, u->target_stack, flags, &p) == NV_E_NOT_FOUND) {
		api_errors_add(
		        errs, "spec.target.stack",
		        "the rack runs stack \"%s\", which is not in CompatibilityMatrix \"%s\"",
		        from, m->name);
		return;
	}
	if (p.verdict == MATRIX_BLOCKED)
		api_errors_add(errs, "spec.target.stack", "no allowed move from \"%s\": %s", from,
		               p.problem);
}

enum nv_err api_rack_upgrade_check_matrix(const struct api_rack_upgrade *u, const struct matrix *m,
                                          const char *const *from_stacks, unsigned n,
                                          unsigned plan_flags, struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	if (m == NULL || strcmp(m->name, u->target_matrix) != 0) {
		api_errors_add(errs, "spec.target.matrix",
		               "CompatibilityMatrix \"%s\" does not exist", u->target_matrix);
		return NV_E_INVALID_OBJECT;
	}
	const struct matrix_stack *target = matrix_stack_find(m, u->target_stack);
	if (target == NULL) {
		api_errors_add(errs, "spec.target.stack",
		               "stack \"%s\" is not in CompatibilityMatrix \"%s\"", u->target_stack,
		               m->name);
		return NV_E_INVALID_OBJECT;
	}
	for (unsigned i = 0; i < n; i++)
		if (!seen_before(from_stacks, i))
			from_check(u, m, from_stacks[i], plan_flags, errs);
	for (unsigned i = 0; u->cls == API_UPGRADE_SECURITY && i < u->ncves; i++) {
		if (matrix_stack_fixes(target, u->cves[i]))
			continue;
		char path[32];
		snprintf(path, sizeof(path), "spec.cves[%u]", i);
		api_errors_add(errs, path, "%s is not fixed by stack \"%s\"", u->cves[i],
		               target->name);
	}
	return result(errs, before);
}

enum nv_err api_upgrade_approval_check(const struct api_upgrade_approval *a,
                                       const struct api_rack_upgrade *u,
                                       const struct api_rack_upgrade_status *us,
                                       struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	if (u == NULL || strcmp(u->meta.name, a->upgrade) != 0) {
		api_errors_add(errs, "spec.upgrade", "RackUpgrade \"%s\" does not exist",
		               a->upgrade);
		return NV_E_INVALID_OBJECT;
	}
	if (us == NULL)
		return NV_OK;
	if (api_upgrade_phase_final(us->phase))
		api_errors_add(errs, "spec.upgrade", "RackUpgrade \"%s\" is already %s", a->upgrade,
		               api_upgrade_phase_name(us->phase));
	if (us->required_approvals != 0 && !(us->required_approvals & MATRIX_BIT(a->layer)))
		api_errors_add(errs, "spec.layer",
		               "RackUpgrade \"%s\" needs no approval for layer %s", a->upgrade,
		               matrix_layer_name(a->layer));
	return result(errs, before);
}

/* The windowOwner of layer l on r; "" when the layer has no entry (or r is
 * NULL). */
static const char *window_owner_of(const struct api_rack *r, enum matrix_layer l)
{
	for (unsigned k = 0; r != NULL && k < r->nresp; k++)
		if (r->resp[k].layer == l)
			return r->resp[k].window_owner;
	return "";
}

static bool approval_bound(const struct api_upgrade_approval *a, const struct api_rack_upgrade *u,
                           char *why, size_t cap)
{
	if (strcmp(a->upgrade, u->meta.name) != 0) {
		snprintf(why, cap, "it approves RackUpgrade \"%s\", not \"%s\"", a->upgrade,
		         u->meta.name);
		return false;
	}
	if (a->upgrade_uid[0] == '\0') {
		snprintf(why, cap,
		         "spec.upgradeRef is missing: the admission webhook did not stamp it");
		return false;
	}
	if (u->meta.uid[0] == '\0' || strcmp(a->upgrade_uid, u->meta.uid) != 0) {
		snprintf(
		        why, cap,
		        "spec.upgradeRef.uid %s is not RackUpgrade \"%s\" (uid %s): it approved an "
		        "earlier upgrade of that name",
		        a->upgrade_uid, u->meta.name, u->meta.uid);
		return false;
	}
	if (strcmp(a->upgrade_matrix, u->target_matrix) != 0 ||
	    strcmp(a->upgrade_stack, u->target_stack) != 0) {
		snprintf(why, cap, "it approved target %s/%s, the upgrade moves to %s/%s",
		         a->upgrade_matrix, a->upgrade_stack, u->target_matrix, u->target_stack);
		return false;
	}
	if (u->meta.created_ms == 0 || a->meta.created_ms < u->meta.created_ms) {
		snprintf(why, cap, "it was created before RackUpgrade \"%s\"", u->meta.name);
		return false;
	}
	return true;
}

bool api_upgrade_approval_counts(const struct api_upgrade_approval *a,
                                 const struct api_rack_upgrade *u, const struct api_rack *r,
                                 char *why, size_t cap)
{
	if (!approval_bound(a, u, why, cap))
		return false;
	if (r == NULL) {
		snprintf(why, cap, "rack \"%s\" is unknown: no window owner to check against",
		         u->rack);
		return false;
	}
	const char *owner = window_owner_of(r, a->layer);
	if (owner[0] == '\0') {
		snprintf(why, cap,
		         "layer %s of rack \"%s\" has no windowOwner: no approval counts for it",
		         matrix_layer_name(a->layer), r->meta.name);
		return false;
	}
	for (unsigned i = 0; i < a->ngroups; i++)
		if (strcmp(a->groups[i], owner) == 0)
			return true;
	snprintf(why, cap, "%s is not in group %s, the windowOwner of layer %s",
	         a->approved_by[0] ? a->approved_by : "the approver", owner,
	         matrix_layer_name(a->layer));
	return false;
}

uint32_t api_upgrade_touched_layers(const struct matrix_plan *p)
{
	return p->layers | (p->needs_drain ? MATRIX_BIT(MATRIX_L_WORKLOAD) : 0);
}

uint32_t api_upgrade_required_layers(const struct api_rack *r, enum api_upgrade_class cls,
                                     const struct matrix_plan *p)
{
	uint32_t touched = api_upgrade_touched_layers(p), need = 0;
	if (cls == API_UPGRADE_SECURITY)
		return 0;
	for (unsigned k = 0; r != NULL && k < r->nresp; k++)
		if (r->resp[k].approval_required && (touched & MATRIX_BIT(r->resp[k].layer)))
			need |= MATRIX_BIT(r->resp[k].layer);
	// A manual edge needs every touched layer's owner to agree.
	if (p->verdict == MATRIX_MANUAL)
		need |= touched;
	return need;
}

uint32_t api_rack_ownerless_layers(const struct api_rack *r, uint32_t mask)
{
	uint32_t out = 0;
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++)
		if ((mask & MATRIX_BIT(l)) && window_owner_of(r, (enum matrix_layer)l)[0] == '\0')
			out |= MATRIX_BIT(l);
	return out;
}

enum nv_err api_rack_upgrade_check_rollback(const struct api_rack_upgrade *u,
                                            const struct matrix *m, const struct api_rack *r,
                                            const char *const *from_stacks, unsigned n,
                                            unsigned plan_flags, struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	char why[MATRIX_PROBLEM_LEN + 160];
	struct matrix_plan p;
	for (unsigned i = 0; r->policy.on_gate_failure == API_ON_GATE_ROLL_BACK && i < n; i++) {
		if (seen_before(from_stacks, i) || from_stacks[i] == NULL ||
		    matrix_plan_build(m, from_stacks[i], u->target_stack, plan_flags, &p) !=
		            NV_OK ||
		    p.verdict == MATRIX_BLOCKED)
			continue;
		if (api_upgrade_rollback_check(m, from_stacks[i], u->target_stack, plan_flags, why,
		                               sizeof(why)) == NV_E_UNSUPPORTED)
			api_errors_add(
			        errs, "spec.target.stack",
			        "rack \"%s\" rolls a failed canary back "
			        "(spec.policy.onGateFailure: RollBack), but %s: set it to Hold "
			        "or list the move back",
			        r->meta.name, why);
	}
	return result(errs, before);
}

enum nv_err api_rack_upgrade_check_owners(const struct api_rack_upgrade *u, const struct matrix *m,
                                          const struct api_rack *r, const char *const *from_stacks,
                                          unsigned n, unsigned plan_flags, struct api_errors *errs)
{
	unsigned before = errs->n + errs->dropped;
	uint32_t told = 0;
	struct matrix_plan p;
	for (unsigned i = 0; u->cls != API_UPGRADE_SECURITY && i < n; i++) {
		if (from_stacks[i] == NULL ||
		    matrix_plan_build(m, from_stacks[i], u->target_stack, plan_flags, &p) !=
		            NV_OK ||
		    p.verdict == MATRIX_BLOCKED)
			continue;
		uint32_t none =
		        api_rack_ownerless_layers(r, api_upgrade_required_layers(r, u->cls, &p));
		for (unsigned l = 0; l < MATRIX_L__COUNT; l++) {
			if (!(none & ~told & MATRIX_BIT(l)))
				continue;
			told |= MATRIX_BIT(l);
			api_errors_add(
			        errs, "spec.target.stack",
			        "the move from \"%s\" needs an approval of layer %s, but rack "
			        "\"%s\" names no windowOwner for it, so none could count: give "
			        "it one in spec.responsibilities",
			        from_stacks[i], matrix_layer_name((enum matrix_layer)l),
			        r->meta.name);
		}
	}
	return result(errs, before);
}
