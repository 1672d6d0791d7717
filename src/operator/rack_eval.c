// SPDX-License-Identifier: Apache-2.0
// Tray classification and rack aggregation for the Rack controller: which
// trays are ready, down or still starting, what stack the rack runs, how its
// fabric looks and whether it is degraded. Pure functions on the parsed
// Rack and matrix and on the JSON of the trays and Nodes.
#include <stdio.h>
#include <string.h>

#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_rack.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

static int64_t time_or_zero(const json_t *o, const char *path)
{
	int64_t ms;
	const char *s = jx_str_or(o, path, NULL);
	return s && time_parse_rfc3339(s, &ms) == NV_OK ? ms : 0;
}

int64_t op_tray_heartbeat_ms(const json_t *tray, int64_t lease_renew_ms)
{
	int64_t hb = tray ? time_or_zero(tray, "status.heartbeatTime") : 0;
	return hb > lease_renew_ms ? hb : lease_renew_ms;
}

/* The condition's status string, or NULL when absent. */
static const char *cond_status(const json_t *obj, const char *type)
{
	const json_t *c = kube_condition_find(obj, type);
	return c ? jx_str_or(c, "status", "Unknown") : NULL;
}

/* The driver version a stack names, as written in the matrix. */
static const char *stack_driver(const struct matrix_stack *s)
{
	return s->tuple.set & MATRIX_BIT(MATRIX_C_DRIVER) ? s->tuple.version[MATRIX_C_DRIVER].text
	                                                  : "";
}

/* The stack whose driver is version; the desired stack wins a tie. */
static const char *stack_of_driver(const struct matrix *matrix, const char *desired,
                                   const char *version)
{
	const char *first = NULL;
	if (!version[0] || matrix == NULL)
		return "";
	for (unsigned i = 0; i < matrix->nstacks; i++) {
		const struct matrix_stack *s = &matrix->stacks[i];
		if (strcmp(stack_driver(s), version) != 0)
			continue;
		if (strcmp(s->name, desired) == 0)
			return desired;
		if (first == NULL)
			first = s->name;
	}
	return first ? first : "";
}

static bool gpu_healthy(const json_t *g)
{
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *st = jx_str_or(g, "fabric.status", "");
	if (strcmp(jx_str_or(g, "fabric.state", ""), "Completed") != 0)
		return false;
	if (st[0] && strcmp(st, "Success") != 0)
		return false;
	return strcmp(sum, "Unhealthy") != 0 && strcmp(sum, "LimitedCapacity") != 0;
}

/* Why a GPU's health counts as degraded, or NULL. */
static const char *gpu_degraded(const json_t *g)
{
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *cfg = jx_str_or(g, "fabric.health.incorrectConfiguration", "None");
	if (strcmp(sum, "Unhealthy") == 0 || strcmp(sum, "LimitedCapacity") == 0)
		return sum;
	if (json_is_true(jx_path(g, "fabric.health.degradedBandwidth")))
		return "degraded bandwidth";
	if (json_is_true(jx_path(g, "fabric.health.routeUnhealthy")))
		return "route unhealthy";
	if (json_is_true(jx_path(g, "fabric.health.routeRecoveryInProgress")) ||
	    json_is_true(jx_path(g, "fabric.health.accessTimeoutRecoveryInProgress")))
		return "recovery in progress";
	if (strcmp(cfg, "None") != 0 && strcmp(cfg, "NotSupported") != 0)
		return "incorrect configuration";
	return NULL;
}

static void skew_add(struct op_skew *s, const char *v)
{
	if (!v || !v[0])
		return;
	for (unsigned i = 0; i < s->n; i++)
		if (strcmp(s->v[i], v) == 0)
			return;
	if (s->n < OP_SKEW_VERSIONS)
		(void)str_copy(s->v[s->n++], sizeof(s->v[0]), v);
}

/* Health of the tray itself: sets why/online/pending. */
static void classify_health(struct op_tray_eval *t, const struct op_tray_in *in, int64_t now,
                            int64_t timeout, int64_t *next)
{
	const char *ready = in->tray ? cond_status(in->tray, "Ready") : NULL;
	const char *node_ready = in->node ? cond_status(in->node, "Ready") : NULL;
	int64_t created = in->tray ? time_or_zero(in->tray, "metadata.creationTimestamp") : 0;
	int64_t until;

	t->online = t->heartbeat_ms > 0 && (timeout == 0 || now - t->heartbeat_ms <= timeout);
	if (t->online && timeout > 0) {
		until = t->heartbeat_ms + timeout + 1;
		if (*next == 0 || until < *next)
			*next = until;
	}
	if (in->node == NULL) {
		t->why = "NodeNotFound";
	} else if (node_ready && strcmp(node_ready, "True") != 0) {
		t->why = "NodeNotReady";
	} else if (in->agent_unmet && in->agent_unmet[0]) {
		/* No grace: the DaemonSet will not place an agent there, and one
		 * still reporting is a pod on its way out. */
		t->why = "AgentNotScheduled";
	} else if (in->tray == NULL || t->heartbeat_ms == 0 || ready == NULL) {
		/* Never reported (no heartbeat yet, or an agent that renews its
		 * Lease but has not written a status yet): a grace of one
		 * heartbeat timeout from the tray's creation before it counts
		 * as down, so a new rack is not cordoned while agents start. */
		until = created ? created + timeout + 1 : 0;
		t->pending = in->tray == NULL || timeout == 0 || now < until;
		if (t->pending && until > now && (*next == 0 || until < *next))
			*next = until;
		t->why = t->pending             ? "AwaitingAgent"
		         : t->heartbeat_ms == 0 ? "NoHeartbeat"
		                                : "NoStatus";
	} else if (!t->online) {
		t->why = "HeartbeatStale";
	} else if (ready && strcmp(ready, "False") == 0) {
		t->why = "TrayNotReady";
	} else if (ready == NULL || strcmp(ready, "True") != 0) {
		t->why = "TrayReadyUnknown";
	} else if (node_ready == NULL) {
		t->why = "NodeReadyUnknown";
	}
}

static void eval_tray(struct op_tray_eval *t, const struct op_tray_in *in, const char *rack,
                      const struct matrix *matrix, const char *desired, int64_t now,
                      int64_t timeout, int64_t *next)
{
	const json_t *gpus, *g;
	char mine[264]; /* "rack/" and a name of up to 253 */
	size_t i;

	memset(t, 0, sizeof(*t));
	t->index = in->index;
	(void)str_copy(t->node, sizeof(t->node), in->node_name);
	(void)str_copy(t->partition, sizeof(t->partition), in->partition ? in->partition : "");
	t->heartbeat_ms = op_tray_heartbeat_ms(in->tray, in->lease_renew_ms);
	t->has_status =
	        in->tray && json_is_object(jx_path(in->tray, "status")) && t->heartbeat_ms > 0;
	(void)str_copy(t->maintenance, sizeof(t->maintenance),
	               in->tray ? jx_str_or(in->tray, "spec.maintenance.state", "None") : "None");
	if (in->tray) {
		(void)str_copy(t->driver, sizeof(t->driver),
		               jx_str_or(in->tray, "status.driver.version", ""));
		(void)str_copy(t->clique, sizeof(t->clique),
		               jx_str_or(in->tray, "status.fabric.cliqueID", ""));
		(void)str_copy(t->cluster, sizeof(t->cluster),
		               jx_str_or(in->tray, "status.fabric.clusterUUID", ""));
		(void)str_copy(t->stack, sizeof(t->stack),
		               stack_of_driver(matrix, desired, t->driver));
		gpus = jx_path(in->tray, "status.gpus");
		json_array_foreach(gpus, i, g) {
			t->gpus++;
			t->healthy_gpus += gpu_healthy(g);
		}
	}
	snprintf(mine, sizeof(mine), "rack/%s", rack);
	t->cordoned = in->node && json_is_true(jx_path(in->node, "spec.unschedulable"));
	t->cordoned_by_us =
	        t->cordoned &&
	        strcmp(jx_str_or(in->node, "metadata.annotations.nvl72\\.io/cordoned-by", ""),
	               mine) == 0;
	classify_health(t, in, now, timeout, next);
	if (t->why == NULL && t->cordoned && !t->cordoned_by_us)
		t->why = "NodeCordoned";
	if (t->why == NULL && strcmp(t->maintenance, "None") != 0)
		t->why = "InMaintenance";
	t->ready = t->why == NULL;
}

static void eval_stack(struct op_rack_eval *ev)
{
	bool any = false;
	ev->stack[0] = '\0';
	for (unsigned i = 0; i < ev->ntrays; i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		if (!t->driver[0])
			continue;
		if (!any) {
			(void)str_copy(ev->stack, sizeof(ev->stack), t->stack);
			any = true;
		} else if (strcmp(ev->stack, t->stack) != 0) {
			(void)str_copy(ev->stack, sizeof(ev->stack), "mixed");
			return;
		}
	}
}

static void eval_skew(struct op_rack_eval *ev, const struct op_tray_in *in, unsigned n)
{
	static const char *const comps[OP_SKEW_MAX] = {"driver", "imex", "gpuFirmware"};
	const json_t *g;
	size_t j;

	ev->nskew = OP_SKEW_MAX;
	for (unsigned c = 0; c < OP_SKEW_MAX; c++)
		ev->skew[c].component = comps[c];
	for (unsigned i = 0; i < n; i++) {
		if (in[i].tray == NULL)
			continue;
		skew_add(&ev->skew[0], jx_str_or(in[i].tray, "status.driver.version", ""));
		skew_add(&ev->skew[1], jx_str_or(in[i].tray, "status.imex.version", ""));
		json_array_foreach(jx_path(in[i].tray, "status.gpus"), j, g)
			skew_add(&ev->skew[2], jx_str_or(g, "vbios", ""));
	}
}

static unsigned skew_index(const struct op_skew *s, const char *v)
{
	for (unsigned k = 0; k < s->n; k++)
		if (strcmp(s->v[k], v) == 0)
			return k;
	return s->n;
}

/* Appends "TRAY GPU i (VBIOS)" to ev->vbios_odd; four at most, then a count. */
static void vbios_odd_add(struct op_rack_eval *ev, unsigned *nodd, const char *tray, json_int_t gpu,
                          const char *v)
{
	size_t len = strlen(ev->vbios_odd);

	if (++*nodd <= 4)
		snprintf(ev->vbios_odd + len, sizeof(ev->vbios_odd) - len,
		         "%s%s GPU %" JSON_INTEGER_FORMAT " (%s)", len ? "; " : "", tray, gpu, v);
}

/* The VBIOS most of the rack's GPUs run, and every GPU on another one. */
static void eval_vbios_odd(struct op_rack_eval *ev, const struct op_tray_in *in, unsigned n)
{
	const struct op_skew *s = &ev->skew[2];
	unsigned count[OP_SKEW_VERSIONS] = {0}, best = 0, nodd = 0, k;
	const json_t *g;
	size_t j, len;

	if (s->n < 2)
		return;
	for (unsigned i = 0; i < n; i++)
		json_array_foreach(in[i].tray ? jx_path(in[i].tray, "status.gpus") : NULL, j, g)
			if ((k = skew_index(s, jx_str_or(g, "vbios", ""))) < s->n)
				count[k]++;
	for (k = 1; k < s->n; k++)
		if (count[k] > count[best])
			best = k;
	(void)str_copy(ev->vbios_common, sizeof(ev->vbios_common), s->v[best]);
	for (unsigned i = 0; i < n; i++) {
		const char *tray = in[i].tray ? jx_str_or(in[i].tray, "metadata.name", "") : "";
		json_array_foreach(in[i].tray ? jx_path(in[i].tray, "status.gpus") : NULL, j, g) {
			const char *v = jx_str_or(g, "vbios", "");
			if (v[0] && strcmp(v, ev->vbios_common) != 0)
				vbios_odd_add(ev, &nodd, tray,
				              json_integer_value(json_object_get(g, "index")), v);
		}
	}
	len = strlen(ev->vbios_odd);
	if (nodd > 4)
		snprintf(ev->vbios_odd + len, sizeof(ev->vbios_odd) - len, "; %u more", nodd - 4);
}

static void fabric_set(struct op_rack_eval *ev, const char *state, const char *reason,
                       const char *msg)
{
	ev->fabric = state;
	(void)str_copy(ev->fabric_reason, sizeof(ev->fabric_reason), reason);
	(void)str_copy(ev->fabric_msg, sizeof(ev->fabric_msg), msg);
}

static void cliques_collect(struct op_rack_eval *ev)
{
	for (unsigned i = 0; i < ev->ntrays; i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		unsigned k;
		if (!t->clique[0])
			continue;
		for (k = 0; k < ev->ncliques; k++)
			if (strcmp(ev->cliques[k].id, t->clique) == 0)
				break;
		if (k == ev->ncliques) {
			ev->ncliques++;
			(void)str_copy(ev->cliques[k].id, sizeof(ev->cliques[k].id), t->clique);
			(void)str_copy(ev->cliques[k].partition, sizeof(ev->cliques[k].partition),
			               t->partition);
		} else if (strcmp(ev->cliques[k].partition, t->partition) != 0) {
			ev->cliques[k].partition[0] = '\0';
		}
		ev->cliques[k].trays |= 1u << t->index;
	}
}

/* Trays that should share a clique (one partition, or no partition) but do
 * not; writes the message and returns true. */
static bool clique_mismatch(const struct op_rack_eval *ev, char *msg, size_t cap)
{
	for (unsigned i = 0; i < ev->ntrays; i++) {
		const struct op_tray_eval *a = &ev->trays[i];
		if (!a->clique[0])
			continue;
		for (unsigned j = i + 1; j < ev->ntrays; j++) {
			const struct op_tray_eval *b = &ev->trays[j];
			if (b->clique[0] && strcmp(a->partition, b->partition) == 0 &&
			    strcmp(a->clique, b->clique) != 0) {
				snprintf(msg, cap,
				         "trays %d and %d are in one %s but report cliques %s and "
				         "%s",
				         a->index, b->index, a->partition[0] ? "partition" : "rack",
				         a->clique, b->clique);
				return true;
			}
		}
	}
	return false;
}

static void eval_fabric(struct op_rack_eval *ev, const struct op_tray_in *in, unsigned n)
{
	char msg[256];
	const char *why;
	const json_t *g;
	size_t j;

	ev->cluster_uuid[0] = '\0';
	cliques_collect(ev);
	if (ev->reporting == 0) {
		fabric_set(ev, "Unknown", "NoData", "no tray has reported yet");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		if (!t->has_status)
			continue;
		if (t->cluster[0] && !ev->cluster_uuid[0])
			(void)str_copy(ev->cluster_uuid, sizeof(ev->cluster_uuid), t->cluster);
		if (t->cluster[0] && strcmp(t->cluster, ev->cluster_uuid) != 0) {
			snprintf(msg, sizeof(msg), "tray %d is in NVLink domain %s, not %s",
			         t->index, t->cluster, ev->cluster_uuid);
			fabric_set(ev, "Unhealthy", "ClusterMismatch", msg);
			return;
		}
		const char *st = jx_str_or(in[i].tray, "status.fabric.state", "");
		if (strcmp(st, "Completed") != 0) {
			snprintf(msg, sizeof(msg), "tray %d: fabric state %s", t->index,
			         st[0] ? st : "not reported");
			fabric_set(ev, "Unhealthy", "FabricNotCompleted", msg);
			return;
		}
	}
	if (clique_mismatch(ev, msg, sizeof(msg))) {
		fabric_set(ev, "Unhealthy", "CliqueMismatch", msg);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		if (!ev->trays[i].has_status)
			continue;
		json_array_foreach(jx_path(in[i].tray, "status.gpus"), j, g) {
			if ((why = gpu_degraded(g)) != NULL) {
				snprintf(msg, sizeof(msg), "tray %d GPU %lld: %s",
				         ev->trays[i].index,
				         (long long)json_integer_value(json_object_get(g, "index")),
				         why);
				fabric_set(ev, "Degraded", "GPUUnhealthy", msg);
				return;
			}
		}
	}
	snprintf(msg, sizeof(msg), "%d of %u trays Completed in %u clique%s", ev->reporting,
	         ev->ntrays, ev->ncliques, ev->ncliques == 1 ? "" : "s");
	fabric_set(ev, "Healthy", "AllCompleted", msg);
}

void op_rack_evaluate(const struct api_rack *rack, const struct matrix *matrix,
                      const struct op_tray_in *in, unsigned n, int64_t now_ms,
                      int64_t hb_timeout_ms, struct op_rack_eval *out)
{
	const char *name = rack->meta.name;
	const struct matrix_stack *st;

	memset(out, 0, sizeof(*out));
	if (n > API_COMPUTE_TRAYS)
		n = API_COMPUTE_TRAYS;
	out->ntrays = n;
	out->threshold = rack->policy.degraded_threshold;
	out->min_healthy = rack->policy.min_healthy_trays;
	out->cordon_policy = rack->policy.cordon_when_degraded;
	(void)str_copy(out->desired_stack, sizeof(out->desired_stack), rack->matrix_stack);
	st = matrix ? matrix_stack_find(matrix, out->desired_stack) : NULL;
	(void)str_copy(out->desired_driver, sizeof(out->desired_driver),
	               st ? stack_driver(st) : "");
	for (unsigned i = 0; i < n; i++) {
		struct op_tray_eval *t = &out->trays[i];
		eval_tray(t, &in[i], name, matrix, out->desired_stack, now_ms, hb_timeout_ms,
		          &out->next_check_ms);
		out->ready += t->ready;
		out->reporting += t->has_status;
		out->counted += !t->ready && !t->pending;
		out->gpus += t->gpus;
		out->healthy_gpus += t->healthy_gpus;
	}
	out->unavailable = (int)n - out->ready;
	out->degraded = out->counted > out->threshold;
	eval_stack(out);
	eval_skew(out, in, n);
	eval_vbios_odd(out, in, n);
	eval_fabric(out, in, n);
}
