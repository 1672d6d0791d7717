// SPDX-License-Identifier: Apache-2.0
// One pass over the host for the tray's status: driver, GPUs and clique,
// host kind and Fabric Manager, IMEX. Each part keeps its own error so one
// broken source never hides what the others show.
#include "nvl72/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_int.h"
#include "nvl72/base.h"

#define FM_UNIT "nvidia-fabricmanager.service"

static void part_set(struct host_obs_part *p, enum nv_err rc, const char *why)
{
	p->err = rc;
	if (rc == NV_OK)
		p->why[0] = '\0';
	else
		snprintf(p->why, sizeof(p->why), "%s", why[0] ? why : nv_err_str(rc));
}

static void observe_driver(struct host *h, struct host_obs *o)
{
	struct host_driver_params *p = xcalloc(1, sizeof(*p));
	const char *v;
	int n;

	h->err[0] = '\0';
	part_set(&o->driver_part, host_driver_read(h, &o->driver), h->err);
	if (o->driver.loaded && host_params_read(h, p) == NV_OK &&
	    (v = host_params_get(p, "ImexChannelCount")) != NULL &&
	    parse_int(v, 0, 1 << 20, &n) == NV_OK)
		o->imex_channel_count = (unsigned)n;
	free(p);
}

static void observe_gpus(struct host *h, struct host_obs *o)
{
	char why[HOST_ERRMSG_LEN] = "";
	enum nv_err rc;

	h->err[0] = '\0';
	rc = host_gpus_read(h, o->gpus, HOST_GPU_MAX, &o->n_gpus);
	part_set(&o->gpus_part, rc, h->err);
	if (rc != NV_OK) {
		o->n_gpus = 0;
		o->fabric = HOST_FABRIC_UNKNOWN;
		o->health = HOST_HEALTH_UNKNOWN;
		part_set(&o->clique_part, NV_E_STATE, "GPUs could not be read");
		return;
	}
	o->fabric = host_tray_fabric_state(o->gpus, o->n_gpus);
	o->health = host_tray_health_summary(o->gpus, o->n_gpus);
	o->health_source = host_tray_health_source(o->gpus, o->n_gpus);
	rc = host_tray_clique(o->gpus, o->n_gpus, &o->has_clique, o->clique, why, sizeof(why));
	if (rc != NV_OK) {
		o->has_clique = false;
		o->clique[0] = '\0';
	}
	part_set(&o->clique_part, rc, why);
}

static void observe_fm(struct host *h, struct host_obs *o)
{
	enum nv_err rc;

	(void)host_kind_read(h, &o->kind);
	h->err[0] = '\0';
	rc = host_unit_query(h, FM_UNIT, &o->fm);
	if (rc != NV_OK) {
		part_set(&o->fm_part, rc, h->err);
		return;
	}
	/* On NVL72 the fabric is run from the switch trays; a host FM here
	 * finds nothing to manage and has been seen to break provisioning. */
	if (!host_kind_wants_fm(&o->kind) &&
	    (o->fm.active == HOST_UNIT_ACTIVE || o->fm.active == HOST_UNIT_ACTIVATING)) {
		part_set(&o->fm_part, NV_E_STATE,
		         "host Fabric Manager runs on a tray without local NVSwitches");
		return;
	}
	part_set(&o->fm_part, NV_OK, "");
}

enum nv_err host_observe(struct host *h, enum host_imex_mode imex_mode, struct host_obs *out)
{
	if (h == NULL || out == NULL)
		return NV_E_INVAL;
	memset(out, 0, sizeof(*out));
	observe_driver(h, out);
	observe_gpus(h, out);
	observe_fm(h, out);
	if (imex_mode != HOST_IMEX_OFF) {
		out->imex_read = true;
		part_set(&out->imex_part, host_imex_status(h, &out->imex), out->imex.err);
	}
	return NV_OK;
}
