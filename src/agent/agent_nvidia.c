// SPDX-License-Identifier: Apache-2.0
// NVIDIA's DRA driver on this tray: whether NVIDIA's ComputeDomain kubelet
// plugin publishes ResourceSlices for this Node, learned from one watch
// narrowed by field selectors to this Node and that driver, and what
// follows from it: no IMEX of ours on an NVIDIA-managed tray, and the
// host's IMEX unit read (never changed) to report a conflict.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/agent.h"
#include "nvl72/alloc.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/log.h"

/* How long a first start waits for the slices before its first pass. */
#define NVIDIA_WAIT_MS 5000

static const struct kube_res RES_SLICES = {"resource.k8s.io", "v1", "resourceslices",
                                           "ResourceSlice", false};

struct agent_nvidia {
	struct kube_informer *inf;
	struct kube_workqueue *q;
	char key[254];
	char node[254];
	bool conflict; /* the last pass found the host's unit running: logged once */
};

/* ---- the decision ---- */

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void agent_nvidia_judge(const json_t *slices, bool synced, const char *why, struct agent_spec *spec,
                        struct agent_nvidia_report *out)
{
	const char *names[64];
	const json_t *s;
	size_t i, n = 0;

	memset(out, 0, sizeof(*out));
	if (!synced) {
		out->state = AGENT_NVIDIA_UNKNOWN;
		snprintf(out->why, sizeof(out->why), "%s",
		         why && why[0] ? why : "the ResourceSlices are not read yet");
	} else {
		json_array_foreach(slices, i, s) {
			if (strcmp(jx_str_or(s, "spec.driver", ""), AGENT_NVIDIA_DRIVER) != 0)
				continue;
			out->nslices++;
			if (n < ARRAY_LEN(names))
				names[n++] = kube_obj_name(s);
		}
		out->state = out->nslices > 0 ? AGENT_NVIDIA_MANAGED : AGENT_NVIDIA_NONE;
		if (n > 0) {
			qsort(names, n, sizeof(names[0]), by_name);
			(void)str_copy(out->slice, sizeof(out->slice), names[0]);
		}
	}
	if (out->state != AGENT_NVIDIA_NONE && spec->has_imex) {
		out->imex_dropped = true;
		(void)str_copy(out->imex_domain, sizeof(out->imex_domain), spec->imex.domain);
		spec->has_imex = false;
	}
}

/* ---- the watch ---- */

/* The cache keeps what the decision reads: a slice's devices may be most
 * of it. */
static void slice_trim(json_t *obj, const void *arg)
{
	json_t *spec = json_object_get(obj, "spec");
	(void)arg;
	json_object_del(spec, "devices");
	json_object_del(spec, "sharedCounters");
}

static void changed(void *ud)
{
	struct agent_nvidia *n = ud;
	kube_workqueue_add(n->q, n->key);
}

static void on_add(void *ud, json_t *obj)
{
	(void)obj;
	changed(ud);
}

static void on_update(void *ud, json_t *old_obj, json_t *new_obj)
{
	(void)old_obj;
	(void)new_obj;
	changed(ud);
}

static void on_delete(void *ud, json_t *obj, bool unknown)
{
	(void)obj;
	(void)unknown;
	changed(ud);
}

enum nv_err agent_nvidia_start(struct kube_client *c, const char *node, struct kube_workqueue *q,
                               const char *key, struct agent_nvidia **out)
{
	struct agent_nvidia *n = xcalloc(1, sizeof(*n));
	char sel[600];
	enum nv_err rc;

	n->q = q;
	(void)str_copy(n->key, sizeof(n->key), key);
	(void)str_copy(n->node, sizeof(n->node), node);
	/* Both fields are the ResourceSlice's own field selectors
	 * (resource.k8s.io/v1 ResourceSliceSpec: nodeName, driver). */
	snprintf(sel, sizeof(sel), "spec.nodeName=%s,spec.driver=%s", node, AGENT_NVIDIA_DRIVER);
	rc = kube_informer_new(c,
	                       &(struct kube_informer_opts){.res = &RES_SLICES,
	                                                    .field_selector = sel,
	                                                    .transform = slice_trim},
	                       &n->inf);
	if (rc == NV_OK)
		rc = kube_informer_add_handler(
		        n->inf, &(struct kube_handler){on_add, on_update, on_delete, n});
	if (rc == NV_OK)
		rc = kube_informer_start(n->inf);
	if (rc != NV_OK) {
		agent_nvidia_free(n);
		return rc;
	}
	log_info("agent", "watching NVIDIA's DRA driver on this node", "node=%s driver=%s", node,
	         AGENT_NVIDIA_DRIVER);
	*out = n;
	return NV_OK;
}

bool agent_nvidia_wait(struct agent_nvidia *n, int64_t timeout_ms)
{
	return n != NULL &&
	       kube_informer_wait_synced(n->inf, timeout_ms > 0 ? timeout_ms : NVIDIA_WAIT_MS);
}

void agent_nvidia_pass(struct agent_nvidia *n, struct host *h, struct agent_spec *spec,
                       struct agent_nvidia_report *out)
{
	char why[256] = "";
	json_t *slices = NULL;
	bool synced = false, conflict;

	if (n != NULL) {
		synced = kube_informer_synced(n->inf);
		if (!synced)
			(void)kube_informer_why(n->inf, why, sizeof(why));
		slices = kube_informer_list(n->inf);
	} else {
		snprintf(why, sizeof(why), "the watch of ResourceSlices did not start");
	}
	agent_nvidia_judge(slices, synced, why, spec, out);
	json_decref(slices);
	if (out->state != AGENT_NVIDIA_MANAGED)
		return;
	h->err[0] = '\0';
	out->unit_read = true;
	out->unit_err = host_unit_query(h, AGENT_HOST_IMEX_UNIT, &out->unit);
	if (out->unit_err != NV_OK)
		(void)str_copy(out->unit_why, sizeof(out->unit_why), h->err);
	conflict = out->unit_err == NV_OK && (out->unit.active == HOST_UNIT_ACTIVE ||
	                                      out->unit.active == HOST_UNIT_ACTIVATING);
	if (conflict && !n->conflict)
		log_warn("agent",
		         "the host's IMEX unit runs on a tray NVIDIA's DRA driver manages; "
		         "mask it",
		         "node=%s unit=%s driver=%s slice=%s", n->node, AGENT_HOST_IMEX_UNIT,
		         AGENT_NVIDIA_DRIVER, out->slice);
	n->conflict = conflict;
}

void agent_nvidia_free(struct agent_nvidia *n)
{
	if (n == NULL)
		return;
	kube_informer_free(n->inf);
	free(n);
}
