// SPDX-License-Identifier: Apache-2.0
// The pure half of the RackPartition controller: the lifecycle (drain, ask
// the fabric backend, wait for every member GPU to report the clique, wait
// for labels and IMEX, Active; Deleting) as a function of the parsed specs,
// the objects and what the backend said, the status it leads to and the
// cordon patches. Everything is pure and unit-tested.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_part.h"
#include "nvl72/operator_rack.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

static const char *const phase_names[] = {"Pending",          "Draining",       "Requesting",
                                          "WaitingForFabric", "RefreshingIMEX", "Active",
                                          "Failed",           "Deleting"};

const char *op_part_phase_name(enum api_partition_phase p)
{
	return (unsigned)p < 8 ? phase_names[p] : "Pending";
}

static enum api_partition_phase phase_parse(const char *s)
{
	for (unsigned i = 0; i < 8; i++)
		if (strcmp(s, phase_names[i]) == 0)
			return (enum api_partition_phase)i;
	return API_PART_PENDING;
}

static void msg(struct op_part_decision *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void msg(struct op_part_decision *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->message, sizeof(d->message), fmt, ap);
	va_end(ap);
}

/* "3, 4, 7" into out. */
static void tray_list(uint32_t mask, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 1; i <= API_COMPUTE_TRAYS && len < cap; i++)
		if (mask & (1u << i)) {
			int w = snprintf(out + len, cap - len, "%s%d", len ? ", " : "", i);
			len += w > 0 ? (size_t)w : 0;
		}
}

static unsigned popcount(uint32_t m)
{
	unsigned n = 0;
	for (; m; m &= m - 1)
		n++;
	return n;
}

static bool has_finalizer(const json_t *o)
{
	const json_t *f;
	size_t i;
	json_array_foreach(jx_path(o, "metadata.finalizers"), i, f)
		if (json_is_string(f) && strcmp(json_string_value(f), OP_FINALIZER_PARTITION) == 0)
			return true;
	return false;
}

static const struct op_part_tray *tray_at(const struct op_part_in *in, int index)
{
	for (unsigned i = 0; i < in->ntrays; i++)
		if (in->trays[i].index == index)
			return &in->trays[i];
	return NULL;
}

/* Every GPU of the tray reports clique, fabric state Completed. */
static bool reports(const json_t *tray, const char *clique)
{
	const json_t *gpus = jx_path(tray, "status.gpus"), *g;
	size_t i;
	if (tray == NULL || clique[0] == '\0' || json_array_size(gpus) == 0 ||
	    strcmp(jx_str_or(tray, "status.fabric.cliqueID", ""), clique) != 0)
		return false;
	json_array_foreach(gpus, i, g) {
		char c[FABRIC_CLIQUE_LEN];
		snprintf(c, sizeof(c), "%s.%lld", jx_str_or(g, "fabric.clusterUUID", ""),
		         (long long)json_integer_value(jx_path(g, "fabric.cliqueId")));
		if (strcmp(c, clique) != 0 ||
		    strcmp(jx_str_or(g, "fabric.state", ""), "Completed") != 0)
			return false;
	}
	return true;
}

/* Every GPU of the tray reports fabric state Completed in a clique other
 * than this one: a tray that left the partition has settled. */
static bool settled_elsewhere(const json_t *tray, const char *clique)
{
	const json_t *gpus = jx_path(tray, "status.gpus"), *g;
	size_t i;
	if (json_array_size(gpus) == 0 || reports(tray, clique))
		return false;
	json_array_foreach(gpus, i, g)
		if (strcmp(jx_str_or(g, "fabric.state", ""), "Completed") != 0)
			return false;
	return true;
}

/* Trays the status lists as members: those that leave must settle. */
static uint32_t former_members(const json_t *part)
{
	const json_t *t;
	uint32_t m = 0;
	size_t i;
	json_array_foreach(jx_path(part, "status.trays"), i, t) {
		json_int_t v = json_integer_value(json_object_get(t, "index"));
		if (v >= 1 && v <= API_COMPUTE_TRAYS)
			m |= 1u << v;
	}
	return m;
}

static const char *cluster_uuid(const struct op_part_in *in, uint32_t members)
{
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < in->ntrays; i++) {
			const char *u =
			        jx_str_or(in->trays[i].tray, "status.fabric.clusterUUID", "");
			if (u[0] && (pass == 1 || (members & (1u << in->trays[i].index))))
				return u;
		}
	return "";
}

static bool tray_imex_ok(const json_t *tray)
{
	return jx_str_or(tray, "spec.imex.domain", "")[0] == '\0' ||
	       (strcmp(jx_str_or(tray, "status.imex.daemonState", ""), "Ready") == 0 &&
	        strcmp(jx_str_or(tray, "status.imex.domainState", ""), "Up") == 0);
}

static const char *label(const json_t *node, const char *key)
{
	const json_t *v = json_object_get(jx_path(node, "metadata.labels"), key);
	return json_is_string(v) ? json_string_value(v) : "";
}

/* Which trays report d->clique, and whether labels and IMEX caught up. */
static void observe(const struct op_part_in *in, struct op_part_decision *d, uint32_t *strays)
{
	const char *name = kube_obj_name(in->part);
	uint32_t former = former_members(in->part) & ~d->members;
	*strays = 0;
	d->converged = 0;
	for (unsigned i = 0; i < in->ntrays; i++) {
		const struct op_part_tray *t = &in->trays[i];
		uint32_t bit = 1u << t->index;
		if ((former & bit) && t->tray && !settled_elsewhere(t->tray, d->clique))
			*strays |= bit; /* leaving, not settled yet */
		if (!reports(t->tray, d->clique))
			continue;
		if (d->members & bit)
			d->converged |= bit;
		else
			*strays |= bit;
	}
	d->fabric_converged = d->clique[0] && d->converged == d->members && *strays == 0;
	d->fabric_reason = d->fabric_converged ? "Converged"
	                   : d->clique[0]      ? "WaitingForTrays"
	                                       : "NoClique";
	d->imex_ready = d->fabric_converged;
	d->imex_reason = d->fabric_converged ? "Ready" : "FabricNotConverged";
	d->imex_message[0] = '\0';
	for (int idx = 1; idx <= API_COMPUTE_TRAYS && d->imex_ready; idx++) {
		const struct op_part_tray *t = tray_at(in, idx);
		if (!(d->members & (1u << idx)) || t == NULL)
			continue;
		if (t->node_o == NULL || strcmp(label(t->node_o, OP_LABEL_PARTITION), name) != 0 ||
		    strcmp(label(t->node_o, OP_LABEL_CLIQUE), d->clique) != 0) {
			d->imex_ready = false;
			d->imex_reason = "LabelsPending";
			snprintf(d->imex_message, sizeof(d->imex_message),
			         "Node %s does not carry %s=%s and %s=%s yet", t->node,
			         OP_LABEL_PARTITION, name, OP_LABEL_CLIQUE, d->clique);
		} else if (!tray_imex_ok(t->tray)) {
			d->imex_ready = false;
			d->imex_reason = "IMEXNotReady";
			snprintf(d->imex_message, sizeof(d->imex_message),
			         "IMEX of ComputeDomain %s on Node %s is not Ready and Up",
			         jx_str_or(t->tray, "spec.imex.domain", ""), t->node);
		}
	}
	if (d->imex_ready)
		snprintf(d->imex_message, sizeof(d->imex_message),
		         "member Nodes labelled, IMEX of their domains Ready");
}

static void backend_failed(struct op_part_decision *d, const struct op_part_backend *be,
                           const char *what, enum nv_err rc)
{
	d->retry = true;
	d->keep_cordons = true;
	d->reason = "BackendUnavailable";
	msg(d, "fabric backend %s: %s failed: %s (%s)", be->name, what,
	    be->st.message[0] ? be->st.message : nv_err_str(rc), nv_err_name(rc));
}

/* Handles a recorded operation. True when the pass ends here. */
static bool operation(const struct op_part_backend *be, struct op_part_decision *d, uint32_t drain)
{
	char what[FABRIC_ID_LEN + 32];
	if (d->op_id[0] == '\0')
		return false;
	if (be->op_err == NV_E_NOT_FOUND) { /* the backend forgot it: look afresh */
		d->op_id[0] = '\0';
		return false;
	}
	if (be->op_err != NV_OK) {
		snprintf(what, sizeof(what), "polling operation %s", d->op_id);
		backend_failed(d, be, what, be->op_err);
		return true;
	}
	if (!fabric_op_done(be->op.state)) {
		/* A backend whose change has several steps answers with the
		 * running step's id: it is recorded, so a restart polls it. */
		if (be->op.id[0] != '\0' && strcmp(be->op.id, d->op_id) != 0)
			(void)str_copy(d->op_id, sizeof(d->op_id), be->op.id);
		d->cordon = drain;
		d->requeue_ms = be->poll_ms;
		d->reason = d->phase == API_PART_DELETING ? "Deleting" : "Requesting";
		msg(d, "fabric backend %s: operation %s %s (%d%%)%s%s", be->name, d->op_id,
		    fabric_op_state_name(be->op.state), be->op.percent,
		    be->op.message[0] ? ": " : "", be->op.message);
		return true;
	}
	if (be->op.state != FABRIC_OP_COMPLETED) {
		msg(d, "fabric backend %s: operation %s %s: %s", be->name, d->op_id,
		    fabric_op_state_name(be->op.state),
		    be->op.message[0] ? be->op.message : "no reason given");
		d->op_id[0] = '\0';
		d->retry = true;
		d->reason = "BackendFailed";
		if (d->phase != API_PART_DELETING)
			d->phase = API_PART_FAILED;
		return true;
	}
	d->op_id[0] = '\0';
	return false;
}

static bool spec_build(const struct op_part_in *in, const char *cluster, struct op_part_decision *d)
{
	struct fabric_partition_spec *s = &d->spec;
	fabric_spec_init(s);
	(void)str_copy(s->name, sizeof(s->name), kube_obj_name(in->part));
	(void)str_copy(s->rack, sizeof(s->rack), in->spec->rack);
	(void)str_copy(s->domain_uuid, sizeof(s->domain_uuid), cluster);
	(void)str_copy(s->chassis_serial, sizeof(s->chassis_serial), in->rack->chassis_serial);
	for (int idx = 1; idx <= API_COMPUTE_TRAYS; idx++) {
		const struct op_part_tray *t = tray_at(in, idx);
		if (!(d->members & (1u << idx)))
			continue;
		json_int_t slot = json_integer_value(jx_path(
		        json_array_get(jx_path(t->tray, "status.gpus"), 0), "platform.slotNumber"));
		/* Every NVL72 compute tray is NVML host 1 of its slot. */
		if (fabric_spec_add_tray(s, (unsigned)idx,
		                         slot > 0 && slot < 1000 ? (unsigned)slot : 0, 1) != NV_OK)
			return false;
	}
	return true;
}

/* The trays of the backend's partition, by tray index or chassis slot. */
static uint32_t backend_trays(const struct op_part_in *in, const struct fabric_partition *p)
{
	uint32_t m = 0;
	for (size_t i = 0; i < p->n_gpus && i < FABRIC_GPUS_MAX; i++) {
		unsigned tr = p->gpus[i].tray;
		for (unsigned k = 0; tr == 0 && p->gpus[i].slot && k < in->ntrays; k++)
			if (json_integer_value(jx_path(
			            json_array_get(jx_path(in->trays[k].tray, "status.gpus"), 0),
			            "platform.slotNumber")) == (json_int_t)p->gpus[i].slot)
				tr = (unsigned)in->trays[k].index;
		if (tr >= 1 && tr <= API_COMPUTE_TRAYS)
			m |= 1u << tr;
	}
	return m;
}

static void take_partition(const struct fabric_partition *p, const char *cluster,
                           struct op_part_decision *d)
{
	(void)str_copy(d->backend_id, sizeof(d->backend_id), p->id);
	if (p->has_partition_id && cluster[0] &&
	    fabric_partition_clique(p, cluster, d->clique) != NV_OK)
		d->clique[0] = '\0';
}

/* Of the busy members, those whose agents have been silent for
 * in->silent_ms go to d->silent: no report will come from them, and a
 * deletion must not wait for ever. Returns the members still awaited, and
 * asks to look again when the next of them would turn silent (a silent
 * agent writes nothing that would wake this controller). */
static uint32_t silent_members(const struct op_part_in *in, struct op_part_decision *d,
                               uint32_t busy)
{
	if (in->silent_ms <= 0)
		return busy;
	for (unsigned i = 0; i < in->ntrays; i++) {
		const struct op_part_tray *t = &in->trays[i];
		uint32_t bit = 1u << t->index;
		int64_t left = t->heartbeat_ms + in->silent_ms - in->now_ms;

		if (!(busy & bit))
			continue;
		if (t->heartbeat_ms == 0 || left < 0) {
			busy &= ~bit;
			d->silent |= bit;
		} else if (d->requeue_ms == 0 || left + 1 < d->requeue_ms) {
			d->requeue_ms = left + 1;
		}
	}
	return busy;
}

/* Whether a change (verb) that reaches the trays of reach must wait for
 * NVIDIA: one is in an NVIDIA ComputeDomain, or NVIDIA's ComputeDomains
 * could not be read. Then d asks for nothing and says why. */
static bool nvidia_held(const struct op_part_in *in, struct op_part_decision *d, uint32_t reach,
                        const char *verb)
{
	const struct op_part_tray *t = NULL;

	for (int idx = 1; idx <= API_COMPUTE_TRAYS && t == NULL; idx++) {
		const struct op_part_tray *x = (reach & (1u << idx)) ? tray_at(in, idx) : NULL;
		if (x && x->nvidia_domain && x->nvidia_domain[0])
			t = x;
	}
	if (t == NULL && in->nvidia_unread == NULL)
		return false;
	d->action = OP_PART_NOTHING;
	d->keep_cordons = true;
	d->reason = OP_PART_NVIDIA_REASON;
	if (d->phase != API_PART_ACTIVE && d->phase != API_PART_FAILED &&
	    d->phase != API_PART_DELETING)
		d->phase = API_PART_PENDING;
	if (t != NULL) {
		msg(d,
		    "held: tray %d (Node %s) is in NVIDIA ComputeDomain %s; the partition %s "
		    "starts "
		    "once NVIDIA's driver releases it",
		    t->index, t->node, t->nvidia_domain, verb);
	} else {
		msg(d,
		    "held: NVIDIA's ComputeDomains are served but not read (%s): the partition %s "
		    "starts once they are",
		    in->nvidia_unread, verb);
		d->requeue_ms = OP_PART_NVIDIA_RETRY_MS;
	}
	return true;
}

static void decide_delete(const struct op_part_in *in, struct op_part_decision *d)
{
	const struct op_part_backend *be = in->be;
	const char *cluster = cluster_uuid(in, d->members);
	uint32_t strays;

	d->phase = API_PART_DELETING;
	d->reason = "Deleting";
	observe(in, d, &strays);
	d->cordon = d->members;
	if (!has_finalizer(in->part))
		return;
	if (!be->configured) {
		if (d->backend_id[0] == '\0' && d->op_id[0] == '\0') {
			d->action = OP_PART_RELEASE;
			msg(d, "nothing was requested from a fabric backend: released");
			return;
		}
		d->reason = "NoFabricBackend";
		msg(d,
		    "cannot delete backend partition %s: no fabric backend is configured "
		    "(--fabric-backend none)",
		    d->backend_id[0] ? d->backend_id : d->op_id);
		return;
	}
	if (!be->looked || operation(be, d, d->members))
		return;
	if (be->find_err == NV_OK) {
		take_partition(&be->part, cluster, d);
		if (nvidia_held(in, d, d->members | backend_trays(in, &be->part), "deletion"))
			return;
		d->action = OP_PART_DELETE;
		msg(d, "deleting backend partition %s", d->backend_id);
		return;
	}
	if (be->find_err != NV_E_NOT_FOUND) {
		backend_failed(d, be, "finding the partition", be->find_err);
		return;
	}
	d->backend_id[0] = '\0';
	uint32_t busy = strays;
	for (unsigned i = 0; i < in->ntrays; i++) {
		const struct op_part_tray *t = &in->trays[i];
		if ((d->members & (1u << t->index)) && t->tray &&
		    !settled_elsewhere(t->tray, d->clique))
			busy |= 1u << t->index;
	}
	busy = silent_members(in, d, busy);
	if (busy) { /* their status updates bring the partition back */
		char list[64];
		tray_list(busy, list, sizeof(list));
		msg(d,
		    "backend partition deleted; waiting for trays %s to report a completed "
		    "fabric state outside clique %s",
		    list, d->clique);
		return;
	}
	d->action = OP_PART_RELEASE;
	if (d->silent) {
		char list[64];
		tray_list(d->silent, list, sizeof(list));
		msg(d,
		    "backend partition deleted; released without a report from trays %s, whose "
		    "agents have been silent for over %llds: check their fabric state when they "
		    "return",
		    list, (long long)(in->silent_ms / 1000));
		return;
	}
	msg(d, "backend partition deleted, member GPUs back in the default clique");
}

/* Why the partition cannot be requested yet, or NULL. */
static const char *blocked(const struct op_part_in *in, struct op_part_decision *d,
                           const char **cluster)
{
	uint32_t missing = 0, silent = 0;
	char list[64];
	if (!in->be->configured) {
		msg(d, "no fabric backend is configured (--fabric-backend none): the partition "
		       "is not requested");
		return "NoFabricBackend";
	}
	if (in->rack == NULL) {
		if (in->rack_invalid)
			msg(d, "rack %s is invalid: %s", in->spec->rack, in->rack_invalid);
		else
			msg(d, "rack %s does not exist", in->spec->rack);
		return "RackNotFound";
	}
	for (int idx = 1; idx <= API_COMPUTE_TRAYS; idx++) {
		const struct op_part_tray *t = tray_at(in, idx);
		if (!(d->members & (1u << idx)))
			continue;
		if (t == NULL || t->node == NULL || t->node[0] == '\0')
			missing |= 1u << idx;
		else if (t->tray == NULL || json_array_size(jx_path(t->tray, "status.gpus")) == 0)
			silent |= 1u << idx;
	}
	if (missing) {
		tray_list(missing, list, sizeof(list));
		msg(d, "spec.trays: trays %s are not in rack %s's spec.computeTrays", list,
		    in->spec->rack);
		return "TrayNotInRack";
	}
	if (silent) {
		tray_list(silent, list, sizeof(list));
		msg(d, "trays %s have not reported their GPUs in ComputeTray status yet", list);
		return "TraysNotReporting";
	}
	*cluster = cluster_uuid(in, d->members);
	if ((*cluster)[0] == '\0') {
		msg(d, "no member tray reports the rack's ClusterUUID yet");
		return "NoClusterUUID";
	}
	return NULL;
}

static void request(const struct op_part_in *in, const char *cluster, struct op_part_decision *d,
                    enum op_part_action a, uint32_t strays)
{
	d->phase = API_PART_DRAINING;
	d->reason = "Draining";
	d->cordon = d->members | strays;
	if (!spec_build(in, cluster, d)) {
		d->phase = API_PART_FAILED;
		d->reason = "InvalidMembers";
		msg(d, "spec.trays: the member GPUs do not fit one fabric request");
		return;
	}
	d->action = a;
	msg(d, "cordoning the member Nodes, then asking fabric backend %s to %s the partition",
	    in->be->name, a == OP_PART_CREATE ? "create" : "update");
}

static void converge(const struct op_part_in *in, struct op_part_decision *d, uint32_t strays)
{
	char list[64];
	if (!d->fabric_converged) {
		d->phase = API_PART_WAITING_FOR_FABRIC;
		d->reason = "WaitingForFabric";
		d->cordon = d->members | strays;
		d->requeue_ms = in->be->poll_ms;
		tray_list(d->members & ~d->converged, list, sizeof(list));
		msg(d, "%u of %u member trays report clique %s%s%s", popcount(d->converged),
		    popcount(d->members), d->clique, list[0] ? "; waiting for trays " : "", list);
		if (strays && !list[0]) {
			tray_list(strays, list, sizeof(list));
			msg(d, "trays %s leaving the partition have not settled outside clique %s",
			    list, d->clique);
		}
		return;
	}
	d->cordon = 0;
	if (!d->imex_ready) {
		d->phase = API_PART_REFRESHING_IMEX;
		d->reason = "RefreshingIMEX";
		msg(d, "%s", d->imex_message);
		return;
	}
	d->phase = API_PART_ACTIVE;
	d->ready = true;
	d->reason = "Active";
	msg(d, "%u trays in clique %s", popcount(d->members), d->clique);
}

bool op_part_wants_backend(const struct op_part_in *in)
{
	const json_t *p = in->part;
	if (!in->be->configured)
		return false;
	if (json_is_string(jx_path(p, "metadata.deletionTimestamp")))
		return has_finalizer(p);
	return !(strcmp(jx_str_or(p, "status.phase", ""), "Active") == 0 &&
	         json_integer_value(jx_path(p, "status.observedGeneration")) ==
	                 json_integer_value(jx_path(p, "metadata.generation")) &&
	         jx_str_or(p, "status.backend.operationId", "")[0] == '\0' &&
	         jx_str_or(p, "status.backend.partitionId", "")[0] != '\0' &&
	         jx_str_or(p, "status.cliqueID", "")[0] != '\0');
}

void op_part_decide(const struct op_part_in *in, struct op_part_decision *d)
{
	const json_t *p = in->part;
	const struct op_part_backend *be = in->be;
	const char *cluster = "", *why;
	uint32_t strays;

	memset(d, 0, sizeof(*d));
	d->phase = phase_parse(jx_str_or(p, "status.phase", ""));
	(void)str_copy(d->backend_id, sizeof(d->backend_id),
	               jx_str_or(p, "status.backend.partitionId", ""));
	(void)str_copy(d->op_id, sizeof(d->op_id), jx_str_or(p, "status.backend.operationId", ""));
	(void)str_copy(d->clique, sizeof(d->clique), jx_str_or(p, "status.cliqueID", ""));
	d->members = in->spec->trays;
	if (json_is_string(jx_path(p, "metadata.deletionTimestamp"))) {
		decide_delete(in, d);
		return;
	}
	if ((why = blocked(in, d, &cluster)) != NULL) {
		if (d->phase != API_PART_ACTIVE && d->phase != API_PART_FAILED)
			d->phase = API_PART_PENDING;
		d->reason = why;
		d->keep_cordons = true;
		observe(in, d, &strays);
		return;
	}
	if (!be->looked) { /* steady: Active for this generation */
		observe(in, d, &strays);
		converge(in, d, strays);
		if (!d->fabric_converged) {
			d->reason = "FabricDiverged";
			msg(d, "Active, but not every member GPU reports clique %s", d->clique);
		}
		d->phase = API_PART_ACTIVE;
		d->requeue_ms = 0;
		d->cordon = 0;
		return;
	}
	if (operation(be, d, d->members)) {
		observe(in, d, &strays);
		d->cordon |= strays;
		if (!d->retry)
			d->phase = API_PART_REQUESTING;
		return;
	}
	if (be->find_err != NV_OK && be->find_err != NV_E_NOT_FOUND) {
		observe(in, d, &strays);
		backend_failed(d, be, "finding the partition", be->find_err);
		return;
	}
	if (be->find_err == NV_E_NOT_FOUND) {
		d->backend_id[0] = '\0';
		d->clique[0] = '\0';
		observe(in, d, &strays);
		if (!nvidia_held(in, d, d->members, "change"))
			request(in, cluster, d, OP_PART_CREATE, 0);
		return;
	}
	take_partition(&be->part, cluster, d);
	observe(in, d, &strays);
	if (backend_trays(in, &be->part) != d->members ||
	    be->part.n_gpus != (size_t)popcount(d->members) * 4) {
		if (!nvidia_held(in, d, d->members | strays | backend_trays(in, &be->part),
		                 "change"))
			request(in, cluster, d, OP_PART_UPDATE, strays);
		return;
	}
	converge(in, d, strays);
}

void op_part_requested(struct op_part_decision *d, const char *backend, enum nv_err rc,
                       const struct fabric_op *op, const struct fabric_status *st, int64_t poll_ms)
{
	const char *verb = d->action == OP_PART_CREATE   ? "create"
	                   : d->action == OP_PART_UPDATE ? "update"
	                                                 : "delete";
	if (rc == NV_E_BUSY) { /* a change of ours (or another's) still runs: look again */
		d->requeue_ms = poll_ms;
		d->phase = d->action == OP_PART_DELETE ? API_PART_DELETING : API_PART_REQUESTING;
		d->reason = d->action == OP_PART_DELETE ? "Deleting" : "Requesting";
		msg(d, "fabric backend %s: the partition has a change in progress; %s after it",
		    backend, verb);
		return;
	}
	if (rc != NV_OK) {
		d->retry = true;
		d->reason = "BackendRefused";
		if (d->action != OP_PART_DELETE)
			d->phase = API_PART_FAILED;
		msg(d, "fabric backend %s refused the %s: %s (%s)", backend, verb,
		    st && st->message[0] ? st->message : nv_err_str(rc), nv_err_name(rc));
		return;
	}
	(void)str_copy(d->op_id, sizeof(d->op_id), op->id);
	if (d->action == OP_PART_CREATE && op->partition_id[0])
		(void)str_copy(d->backend_id, sizeof(d->backend_id), op->partition_id);
	d->phase = d->action == OP_PART_DELETE ? API_PART_DELETING : API_PART_REQUESTING;
	d->reason = d->action == OP_PART_DELETE ? "Deleting" : "Requesting";
	d->requeue_ms = poll_ms;
	msg(d, "fabric backend %s: %s requested (operation %s)", backend, verb, op->id);
}

void op_part_status_apply(json_t *obj, const struct op_part_in *in,
                          const struct op_part_decision *d, int64_t now_ms)
{
	struct api_rack_partition_status s;
	const json_t *old = json_object_get(obj, "status");
	json_t *st, *conds;
	int64_t gen = json_integer_value(jx_path(obj, "metadata.generation")), was = 0;

	memset(&s, 0, sizeof(s));
	s.observed_generation = gen;
	s.phase = d->phase;
	s.tray_count = (int)popcount(d->members);
	(void)str_copy(s.clique_id, sizeof(s.clique_id), d->clique);
	(void)str_copy(s.backend_partition_id, sizeof(s.backend_partition_id), d->backend_id);
	(void)str_copy(s.backend_operation_id, sizeof(s.backend_operation_id), d->op_id);
	for (int idx = 1; idx <= API_COMPUTE_TRAYS; idx++) {
		const struct op_part_tray *t = tray_at(in, idx);
		if (!(d->members & (1u << idx)))
			continue;
		s.trays[s.ntrays].index = idx;
		(void)str_copy(s.trays[s.ntrays].node, sizeof(s.trays[0].node),
		               t && t->node ? t->node : "");
		(void)str_copy(s.trays[s.ntrays].clique_id, sizeof(s.trays[0].clique_id),
		               jx_str_or(t ? t->tray : NULL, "status.fabric.cliqueID", ""));
		s.trays[s.ntrays].ready =
		        (d->converged & (1u << idx)) && t && tray_imex_ok(t->tray);
		s.ntrays++;
	}
	if (strcmp(jx_str_or(old, "phase", ""), op_part_phase_name(d->phase)) != 0 ||
	    time_parse_rfc3339(jx_str_or(old, "lastTransitionTime", ""), &was) != NV_OK)
		was = now_ms;
	s.last_transition_ms = was;
	(void)str_copy(s.message, sizeof(s.message), d->message);
	st = api_rack_partition_status_to_json(&s);
	conds = json_object_get(old, "conditions"); /* kept, so times survive */
	json_object_set_new(st, "conditions",
	                    json_is_array(conds) ? json_deep_copy(conds) : json_array());
	json_object_set_new(obj, "status", st); /* old is gone from here on */
	(void)kube_condition_set(obj, "FabricConverged", d->fabric_converged ? "True" : "False",
	                         d->fabric_reason ? d->fabric_reason : "NoClique",
	                         d->fabric_converged ? "every member GPU reports the clique"
	                                             : d->message,
	                         gen, now_ms);
	(void)kube_condition_set(obj, "IMEXReady", d->imex_ready ? "True" : "False",
	                         d->imex_reason ? d->imex_reason : "FabricNotConverged",
	                         d->imex_message, gen, now_ms);
	(void)kube_condition_set(obj, "Ready", d->ready ? "True" : "False",
	                         d->reason ? d->reason : "Pending", d->message, gen, now_ms);
}

void op_part_drain_policy(const struct op_part_in *in, int64_t now_ms, char *owner, size_t cap,
                          struct drain_policy *p)
{
	const json_t *part = in->part;
	int64_t began = 0;

	memset(p, 0, sizeof(*p));
	snprintf(owner, cap, "%s%s", OP_PART_CORDON_PREFIX, kube_obj_name(part));
	p->owner = owner;
	p->mode = in->rack ? in->rack->policy.drain_mode : API_DRAIN_EVICT;
	p->checkpoint_deadline_ms = in->rack ? in->rack->policy.checkpoint_deadline_ms : 30 * 60000;
	p->started_ms = now_ms;
	if (strcmp(jx_str_or(part, "status.phase", ""), "Draining") == 0 &&
	    time_parse_rfc3339(jx_str_or(part, "status.lastTransitionTime", ""), &began) == NV_OK &&
	    began > 0 && began <= now_ms)
		p->started_ms = began;
}

void op_part_drained(struct op_part_decision *d, const struct drain_result *r, int64_t now_ms)
{
	const char *verb = d->action == OP_PART_CREATE ? "create" : "update";
	if (r->done)
		return;
	d->action = OP_PART_NOTHING;
	d->phase = API_PART_DRAINING;
	d->reason = r->blocked > 0 ? "DrainBlocked" : "Draining";
	d->requeue_ms = r->next_check_ms > now_ms ? r->next_check_ms - now_ms : 1000;
	msg(d, "waiting for %d pod%s on the member Nodes before the %s%s: %s",
	    r->pods + r->terminating, r->pods + r->terminating == 1 ? "" : "s", verb,
	    r->blocked > 0 ? " (blocked by a PodDisruptionBudget)" : "", r->message);
}

json_t *op_part_cordon_patch(const json_t *node, const char *name, bool want)
{
	char mine[128];
	bool unsched = json_is_true(jx_path(node, "spec.unschedulable"));
	const json_t *a =
	        json_object_get(jx_path(node, "metadata.annotations"), DRAIN_ANN_CORDONED_BY);
	const char *rv = jx_str_or(node, "metadata.resourceVersion", "");

	snprintf(mine, sizeof(mine), "%s%s", OP_PART_CORDON_PREFIX, name);
	if (want)
		return unsched ? NULL
		               : json_pack("{s:{s:s,s:{s:s}},s:{s:b}}", "metadata",
		                           "resourceVersion", rv, "annotations",
		                           DRAIN_ANN_CORDONED_BY, mine, "spec", "unschedulable", 1);
	if (!json_is_string(a) || strcmp(json_string_value(a), mine) != 0)
		return NULL;
	if (!unsched) /* uncordoned by hand: only drop our mark */
		return json_pack("{s:{s:s,s:{s:n}}}", "metadata", "resourceVersion", rv,
		                 "annotations", DRAIN_ANN_CORDONED_BY);
	return json_pack("{s:{s:s,s:{s:n}},s:{s:n}}", "metadata", "resourceVersion", rv,
	                 "annotations", DRAIN_ANN_CORDONED_BY, "spec", "unschedulable");
}
