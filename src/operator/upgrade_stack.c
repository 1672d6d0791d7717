// SPDX-License-Identifier: Apache-2.0
// The Rack's spec.matrix after a Completed RackUpgrade: whether it still
// has to move to the upgrade's target, and the condition that records it
// once, so that a restart neither repeats the move nor undoes a person's
// later change. Pure: the controller (upgrade_ctrl.c) applies and writes.
#include <stdio.h>
#include <string.h>

#include "nvl72/json.h"
#include "nvl72/operator_upgrade.h"
#include "nvl72/timeutil.h"

void op_upgrade_condition_put(struct api_rack_upgrade_status *st, const struct api_condition *c)
{
	unsigned i;
	for (i = 0; i < st->nconditions; i++)
		if (strcmp(st->conditions[i].type, c->type) == 0)
			break;
	if (i == st->nconditions) {
		if (st->nconditions >= API_CONDITIONS_MAX)
			return;
		st->nconditions++;
	}
	st->conditions[i] = *c;
}

static bool has_condition(const struct api_rack_upgrade_status *st, const char *type)
{
	for (unsigned i = 0; i < st->nconditions; i++)
		if (strcmp(st->conditions[i].type, type) == 0)
			return true;
	return false;
}

/* The Completed upgrade of the rack that completed after u, which ended at
 * done_ms (the rack's latest, in api_rack_upgrade_latest_completed's
 * order, unless that is u itself or ended before it: u's cached entry may
 * be older than this pass); NULL when none. */
static const json_t *later_completed(const struct api_rack_upgrade *u, int64_t done_ms,
                                     const json_t *upgrades)
{
	const json_t *o = api_rack_upgrade_latest_completed(upgrades, u->rack);
	const char *name = jx_str_or(o, "metadata.name", "");
	int64_t ms = 0;
	if (o == NULL || strcmp(name, u->meta.name) == 0)
		return NULL;
	if (time_parse_rfc3339(jx_str_or(o, "status.completionTime", ""), &ms) != NV_OK)
		ms = 0;
	return ms > done_ms || (ms == done_ms && strcmp(name, u->meta.name) > 0) ? o : NULL;
}

static void cond_fill(struct api_condition *c, bool ok, const char *reason, int64_t gen,
                      int64_t now_ms)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->type, sizeof(c->type), "%s", OP_UPGRADE_COND_RACK_STACK);
	c->status = ok ? API_COND_TRUE : API_COND_FALSE;
	c->observed_generation = gen;
	c->last_transition_ms = now_ms;
	snprintf(c->reason, sizeof(c->reason), "%s", reason);
}

void op_upgrade_stack_next(const struct api_rack_upgrade *u,
                           const struct api_rack_upgrade_status *st, const struct api_rack *rack,
                           const json_t *upgrades, int64_t now_ms, struct op_upgrade_stack_out *out)
{
	const json_t *later;
	struct api_condition *c = &out->cond;

	memset(out, 0, sizeof(*out));
	if (st->phase != API_PHASE_COMPLETED || rack == NULL || u->rack[0] == '\0' ||
	    has_condition(st, OP_UPGRADE_COND_RACK_STACK))
		return;
	out->act = OP_STACK_RECORD;
	if ((later = later_completed(u, st->completion_ms, upgrades)) != NULL) {
		cond_fill(c, false, "Superseded", u->meta.generation, now_ms);
		snprintf(c->message, sizeof(c->message),
		         "RackUpgrade %.200s completed later on rack %.200s; its target is the "
		         "rack's",
		         jx_str_or(later, "metadata.name", ""), u->rack);
		return;
	}
	if (strcmp(rack->matrix_name, u->target_matrix) == 0 &&
	    strcmp(rack->matrix_stack, u->target_stack) == 0) {
		cond_fill(c, true, "AlreadySet", u->meta.generation, now_ms);
		snprintf(c->message, sizeof(c->message),
		         "Rack %.200s: spec.matrix already names %.63s of %.63s", u->rack,
		         u->target_stack, u->target_matrix);
		return;
	}
	out->act = OP_STACK_APPLY;
	snprintf(out->from, sizeof(out->from), "%s", rack->matrix_stack);
	cond_fill(c, true, "Applied", u->meta.generation, now_ms);
	snprintf(c->message, sizeof(c->message),
	         "Rack %.200s: spec.matrix.stack moved from %.63s to %.63s", u->rack,
	         rack->matrix_stack, u->target_stack);
}
