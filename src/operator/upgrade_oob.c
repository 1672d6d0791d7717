// SPDX-License-Identifier: Apache-2.0
// The out-of-band half of a RackUpgrade's Apply steps: switch-tray NVOS,
// firmware and NMX once for the rack, and GPU, HMC, BMC, NIC and DPU
// firmware per compute tray, through the oob backend. One pass polls the
// operations the step records and starts the next ones; the step (written
// to the status before anything is polled) is the durable record, so a
// restarted operator polls the same operations instead of starting others.
#include <stdio.h>
#include <string.h>

#include "nvl72/oob.h"
#include "nvl72/operator_upgrade.h"

static struct api_upgrade_oob_op *op_find(struct api_upgrade_step *s, const char *target)
{
	for (unsigned i = 0; i < s->nops && i < API_UPGRADE_STEP_OPS_MAX; i++)
		if (strcmp(s->ops[i].target, target) == 0)
			return &s->ops[i];
	return NULL;
}

/* The first component of a->components after `after` (-1: from the start);
 * -1 when none is left. */
static int comp_next(const struct op_upgrade_out *a, int after)
{
	for (int c = after + 1; c < MATRIX_C__COUNT; c++)
		if (a->components & MATRIX_BIT(c))
			return c;
	return -1;
}

static void failed(struct op_upgrade_oob_result *r, const struct api_upgrade_oob_op *x,
                   const char *version, const char *why)
{
	if (r->failed)
		return; /* the first failure is the evidence */
	r->failed = true;
	snprintf(r->message, sizeof(r->message), "%s on %s to %.64s failed: %.300s",
	         matrix_component_name(x->component), x->target, version, why);
}

/* Starts comp on t, recording the operation in x; loops on while the
 * backend finds the target already at the version. */
static enum nv_err start(struct oob_backend *b, const struct op_upgrade_out *a,
                         const struct oob_target *t, int comp, struct api_upgrade_oob_op *x,
                         struct op_upgrade_oob_result *r)
{
	struct fabric_status fst;
	struct oob_op op;
	for (; comp >= 0; comp = comp_next(a, comp)) {
		memset(&fst, 0, sizeof(fst));
		enum nv_err rc =
		        oob_update(b, (enum matrix_component)comp, t, a->versions[comp], &op, &fst);
		if (rc != NV_OK) {
			snprintf(r->message, sizeof(r->message), "%s on %s: %s: %.300s",
			         matrix_component_name((enum matrix_component)comp), x->target,
			         nv_err_name(rc), fst.message);
			return rc;
		}
		x->component = (enum matrix_component)comp;
		snprintf(x->id, sizeof(x->id), "%s", op.id);
		r->recorded = true;
		r->started++;
		if (op.state == FABRIC_OP_FAILED) {
			x->phase = API_STEP_FAILED;
			failed(r, x, a->versions[comp], op.message);
			return NV_OK;
		}
		if (op.state != FABRIC_OP_COMPLETED) {
			x->phase = API_STEP_RUNNING;
			r->running++;
			return NV_OK;
		}
		x->phase = API_STEP_SUCCEEDED;
	}
	return NV_OK;
}

/* One target: poll its recorded operation, then start what comes next. */
static enum nv_err target_pass(struct oob_backend *b, struct api_upgrade_step *s,
                               const struct op_upgrade_out *a, const struct oob_target *t,
                               struct op_upgrade_oob_result *r)
{
	struct api_upgrade_oob_op *x;
	struct fabric_status fst;
	struct oob_op op;
	char name[17];
	int next = comp_next(a, -1);

	oob_target_name(t, name, sizeof(name));
	if ((x = op_find(s, name)) == NULL) {
		if (s->nops >= API_UPGRADE_STEP_OPS_MAX) {
			snprintf(r->message, sizeof(r->message), "too many targets in one step");
			return NV_E_TOO_LARGE;
		}
		x = &s->ops[s->nops++];
		memset(x, 0, sizeof(*x));
		snprintf(x->target, sizeof(x->target), "%s", name);
		x->phase = API_STEP_PENDING;
	} else if (x->phase == API_STEP_FAILED) {
		failed(r, x, a->versions[x->component], "recorded as failed");
		return NV_OK;
	} else if (x->phase == API_STEP_RUNNING) {
		memset(&fst, 0, sizeof(fst));
		enum nv_err rc = oob_op_poll(b, x->id, &op, &fst);
		if (rc == NV_E_NOT_FOUND) {
			next = (int)x->component; /* the backend forgot it: ask again */
		} else if (rc != NV_OK) {
			snprintf(r->message, sizeof(r->message), "polling %.64s on %s: %s: %.300s",
			         x->id, name, nv_err_name(rc), fst.message);
			return rc;
		} else if (op.state == FABRIC_OP_FAILED) {
			x->phase = API_STEP_FAILED;
			r->recorded = true;
			failed(r, x, a->versions[x->component], op.message);
			return NV_OK;
		} else if (op.state != FABRIC_OP_COMPLETED) {
			r->running++;
			return NV_OK;
		} else {
			x->phase = API_STEP_SUCCEEDED;
			r->recorded = true;
			next = comp_next(a, (int)x->component);
		}
	} else if (x->phase == API_STEP_SUCCEEDED) {
		next = comp_next(a, (int)x->component);
	}
	return start(b, a, t, next, x, r);
}

enum nv_err op_upgrade_oob_step(struct oob_backend *b, struct api_upgrade_step *s,
                                const struct op_upgrade_out *a, struct op_upgrade_oob_result *r)
{
	memset(r, 0, sizeof(*r));
	for (unsigned i = 1; i <= OOB_COMPUTE_TRAYS; i++) {
		struct oob_target t = {s->trays ? OOB_COMPUTE_TRAY : OOB_SWITCH_TRAY, i};
		if (s->trays ? !(s->trays & (1u << i)) : i > OOB_SWITCH_TRAYS)
			continue;
		r->targets++;
		enum nv_err rc = target_pass(b, s, a, &t, r);
		if (rc != NV_OK)
			return rc;
		if (r->failed)
			return NV_OK; /* the step halts: start nothing more */
	}
	if (!r->failed && r->running == 0) {
		r->done = true;
		snprintf(r->message, sizeof(r->message), "plan step %d: %u %s trays run ",
		         a->plan_step + 1, r->targets, s->trays ? "compute" : "switch");
		for (int c = comp_next(a, -1); c >= 0; c = comp_next(a, c)) {
			size_t len = strlen(r->message);
			snprintf(r->message + len, sizeof(r->message) - len, "%s%s %s",
			         c == comp_next(a, -1) ? "" : ", ",
			         matrix_component_name((enum matrix_component)c), a->versions[c]);
		}
	}
	return NV_OK;
}
