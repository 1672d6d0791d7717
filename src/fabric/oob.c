// SPDX-License-Identifier: Apache-2.0
// Out-of-band updates, the generic half: which components are updated out
// of band and on which targets, the registry of backends, the checked
// calls, and waiting for an operation. The backends are oob_*.c.
#include "nvl72/oob.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_int.h"
#include "oob_int.h"

static const void *const backends[] = {&oob_sim_ops};
static char names[64];
static const struct fabric_registry registry = {backends, ARRAY_LEN(backends), names,
                                                sizeof(names)};
_Static_assert(offsetof(struct oob_backend_ops, name) == 0, "the registry reads the name");

struct oob_backend {
	const struct oob_backend_ops *ops;
	void *state;
	long poll_interval_ms, poll_max_interval_ms, op_deadline_ms;
};

bool oob_component_is_oob(enum matrix_component c)
{
	switch (c) {
	case MATRIX_C_NVOS:
	case MATRIX_C_SWITCH_TRAY_FIRMWARE:
	case MATRIX_C_NMX:
	case MATRIX_C_GPU_FIRMWARE:
	case MATRIX_C_HMC_FIRMWARE:
	case MATRIX_C_BMC_FIRMWARE:
	case MATRIX_C_NIC_FIRMWARE:
	case MATRIX_C_DPU_FIRMWARE:
		return true;
	default:
		return false;
	}
}

bool oob_component_target_ok(enum matrix_component c, enum oob_target_kind k)
{
	bool on_switch =
	        c == MATRIX_C_NVOS || c == MATRIX_C_SWITCH_TRAY_FIRMWARE || c == MATRIX_C_NMX;

	if (!oob_component_is_oob(c))
		return false;
	return on_switch ? k == OOB_SWITCH_TRAY : k == OOB_COMPUTE_TRAY;
}

enum nv_err oob_target_check(enum matrix_component c, const struct oob_target *t, char *why,
                             size_t whysz)
{
	unsigned max = t->kind == OOB_SWITCH_TRAY ? OOB_SWITCH_TRAYS : OOB_COMPUTE_TRAYS;

	if (!oob_component_is_oob(c)) {
		snprintf(why, whysz, "%s is not updated out of band", matrix_component_name(c));
		return NV_E_INVAL;
	}
	if (t->kind != OOB_SWITCH_TRAY && t->kind != OOB_COMPUTE_TRAY) {
		snprintf(why, whysz, "unknown target kind");
		return NV_E_INVAL;
	}
	if (!oob_component_target_ok(c, t->kind)) {
		snprintf(why, whysz, "%s is not updated on %s trays", matrix_component_name(c),
		         t->kind == OOB_SWITCH_TRAY ? "switch" : "compute");
		return NV_E_INVAL;
	}
	if (t->index < 1 || t->index > max) {
		snprintf(why, whysz, "%s tray index %u is outside 1..%u",
		         t->kind == OOB_SWITCH_TRAY ? "switch" : "compute", t->index, max);
		return NV_E_INVAL;
	}
	return NV_OK;
}

void oob_config_init(struct oob_config *c)
{
	memset(c, 0, sizeof(*c));
	str_copy(c->backend, sizeof(c->backend), "sim");
	c->sim_delay_ms = 2000;
	c->poll_interval_ms = 1000;
	c->poll_max_interval_ms = 10000;
	c->op_deadline_ms = 3600 * 1000L;
}

const struct oob_backend_ops *oob_backend_find(const char *name)
{
	return fabric_registry_find(&registry, name);
}

const char *oob_backend_names(void)
{
	return fabric_registry_names(&registry);
}

enum nv_err oob_config_validate(const struct oob_config *c, char *why, size_t whysz)
{
	if (oob_backend_find(c->backend) == NULL) {
		snprintf(why, whysz, "oob backend \"%s\" is not one of: %s", c->backend,
		         oob_backend_names());
		return NV_E_CONFIG;
	}
	if (strcmp(c->backend, "sim") == 0 && c->sim_root[0] == '\0') {
		snprintf(why, whysz, "the sim backend needs the rack folder (sim_root)");
		return NV_E_CONFIG;
	}
	if (c->sim_delay_ms < 0 || c->poll_interval_ms <= 0 ||
	    c->poll_max_interval_ms < c->poll_interval_ms || c->op_deadline_ms <= 0) {
		snprintf(why, whysz, "delays and poll intervals must be positive, max >= first");
		return NV_E_CONFIG;
	}
	return NV_OK;
}

enum nv_err oob_backend_new(const struct oob_config *c, struct oob_backend **out,
                            struct fabric_status *st)
{
	struct oob_backend *b;
	char why[FABRIC_MSG_LEN];
	enum nv_err rc;

	fabric_status_reset(st);
	if (oob_config_validate(c, why, sizeof(why)) != NV_OK) {
		fabric_status_msg(st, "%s", why);
		return NV_E_CONFIG;
	}
	b = xcalloc(1, sizeof(*b));
	b->ops = oob_backend_find(c->backend);
	b->poll_interval_ms = c->poll_interval_ms;
	b->poll_max_interval_ms = c->poll_max_interval_ms;
	b->op_deadline_ms = c->op_deadline_ms;
	rc = b->ops->open(c, &b->state, st);
	if (rc != NV_OK) {
		free(b);
		return rc;
	}
	*out = b;
	return NV_OK;
}

void oob_backend_free(struct oob_backend *b)
{
	if (b == NULL)
		return;
	b->ops->close(b->state);
	free(b);
}

const char *oob_backend_name(const struct oob_backend *b)
{
	return b->ops->name;
}

static bool version_ok(const char *v)
{
	size_t n = v ? strlen(v) : 0;

	if (n == 0 || n >= MATRIX_VERSION_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'A' && v[i] <= 'Z') ||
		      (v[i] >= 'a' && v[i] <= 'z') || v[i] == '.' || v[i] == '-' || v[i] == '_' ||
		      v[i] == '+'))
			return false;
	return true;
}

enum nv_err oob_update(struct oob_backend *b, enum matrix_component comp,
                       const struct oob_target *t, const char *version, struct oob_op *op,
                       struct fabric_status *st)
{
	char why[FABRIC_MSG_LEN];

	fabric_status_reset(st);
	if (oob_target_check(comp, t, why, sizeof(why)) != NV_OK) {
		fabric_status_msg(st, "%s", why);
		return NV_E_INVAL;
	}
	if (!version_ok(version)) {
		fabric_status_msg(st, "\"%.64s\" is not a version", version ? version : "");
		return NV_E_INVAL;
	}
	return b->ops->update(b->state, comp, t, version, op, st);
}

enum nv_err oob_version(struct oob_backend *b, enum matrix_component comp,
                        const struct oob_target *t, char *out, size_t outsz,
                        struct fabric_status *st)
{
	char why[FABRIC_MSG_LEN];

	fabric_status_reset(st);
	if (oob_target_check(comp, t, why, sizeof(why)) != NV_OK) {
		fabric_status_msg(st, "%s", why);
		return NV_E_INVAL;
	}
	return b->ops->version(b->state, comp, t, out, outsz, st);
}

enum nv_err oob_op_poll(struct oob_backend *b, const char *op_id, struct oob_op *op,
                        struct fabric_status *st)
{
	fabric_status_reset(st);
	return b->ops->poll(b->state, op_id, op, st);
}

enum nv_err oob_op_wait(struct oob_backend *b, struct oob_op *op, const volatile bool *stop,
                        struct fabric_status *st)
{
	struct fabric_poll pl;
	char id[FABRIC_ID_LEN];
	enum nv_err err;

	fabric_poll_start(&pl, b->poll_interval_ms, b->poll_max_interval_ms, b->op_deadline_ms);
	str_copy(id, sizeof(id), op->id);
	for (;;) {
		if (!fabric_op_done(op->state)) {
			struct oob_op cur;
			err = oob_op_poll(b, id, &cur, st);
			if (err == NV_OK)
				*op = cur;
			else if (!nv_err_retryable(err))
				return err;
		}
		if (op->state == FABRIC_OP_COMPLETED)
			return NV_OK;
		if (fabric_op_done(op->state)) {
			fabric_status_msg(st, "%s", op->message);
			return op->state == FABRIC_OP_CANCELLED ? NV_E_CANCELLED : NV_E_STATE;
		}
		err = fabric_poll_next(&pl, id, op->state, stop, st);
		if (err != NV_OK)
			return err;
	}
}
