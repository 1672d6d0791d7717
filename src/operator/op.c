// SPDX-License-Identifier: Apache-2.0
// The operator process around its controllers: client, informers (on every
// replica, so /readyz reflects their sync and a standby takes over warm),
// the controller table (queues, handlers, and workers only on the leader),
// leader election, the web servers and the ordered graceful shutdown.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvl72/alloc.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/webhook.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_int.h"

static const struct kube_res RES_COORD_LEASES = {"coordination.k8s.io", "v1", "leases", "Lease",
                                                 true};

/* The controllers, one row each (docs/internals/controllers.md). Handlers
 * run, and objects are queued on taking the lead, in this order. */
static const struct op_controller *const controllers[] = {
        &op_rack_controller,
        &op_domain_controller,
        &op_part_controller,
        &op_upgrade_controller,
};
#define NCONTROLLERS (sizeof(controllers) / sizeof(controllers[0]))
_Static_assert(NCONTROLLERS <= OP_CTRL_MAX, "raise OP_CTRL_MAX");

/* The Nodes of a Rack's compute trays (the API allows 18, the index 32). */
static void index_rack_nodes(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	const json_t *t;
	size_t i;
	(void)arg;
	json_array_foreach(jx_path(obj, "spec.computeTrays"), i, t) {
		const char *n = jx_str_or(t, "node", "");
		if (n[0] != '\0' && out->n < KUBE_INDEX_MAX_VALUES)
			out->v[out->n++] = n;
	}
}

static void index_rack_matrix(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	const char *m = jx_str_or(obj, "spec.matrix.name", "");
	(void)arg;
	if (m[0] != '\0')
		out->v[out->n++] = m;
}

/* spec.rack, of ComputeTrays and RackUpgrades. */
static void index_spec_rack(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	const char *r = jx_str_or(obj, "spec.rack", "");
	(void)arg;
	if (r[0] != '\0')
		out->v[out->n++] = r;
}

/* spec.rack of a RackUpgrade that has not finished. */
static void index_active_rack(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	enum api_upgrade_phase ph;
	if (api_upgrade_phase_from_name(jx_str_or(obj, "status.phase", ""), &ph) &&
	    api_upgrade_phase_final(ph))
		return;
	index_spec_rack(obj, arg, out);
}

struct kube_client *op_client(struct op *op)
{
	return op->c;
}
struct metrics_registry *op_metrics(struct op *op)
{
	return op->reg;
}
const struct op_config *op_config_of(const struct op *op)
{
	return &op->cfg;
}

struct kube_informer *op_informer(struct op *op, const char *resource)
{
	if (strcmp(resource, "racks") == 0)
		return op->racks;
	if (strcmp(resource, "computetrays") == 0)
		return op->trays;
	if (strcmp(resource, "nodes") == 0)
		return op->nodes;
	if (strcmp(resource, "compatibilitymatrices") == 0)
		return op->matrices;
	if (strcmp(resource, "rackpartitions") == 0)
		return op->partitions;
	if (strcmp(resource, "computedomains") == 0)
		return op->domains;
	if (strcmp(resource, "rackupgrades") == 0)
		return op->upgrades;
	if (strcmp(resource, "upgradeapprovals") == 0)
		return op->approvals;
	return NULL;
}

/* ---- probes ---- */

static bool check_ping(void *arg, struct buf *why)
{
	(void)arg;
	(void)why;
	return true;
}

static bool check_informers(void *arg, struct buf *why)
{
	struct op *op = arg;
	struct {
		struct kube_informer *inf;
		const char *name;
	} l[] = {
	        {op->racks, "racks"},
	        {op->trays, "computetrays"},
	        {op->nodes, "nodes"},
	        {op->matrices, "compatibilitymatrices"},
	        {op->partitions, "rackpartitions"},
	        {op->domains, "computedomains"},
	        {op->upgrades, "rackupgrades"},
	        {op->approvals, "upgradeapprovals"},
	        {op->leases, "leases"},
	};
	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		if (l[i].inf && !kube_informer_synced(l[i].inf)) {
			char cause[256];

			if (kube_informer_why(l[i].inf, cause, sizeof(cause)))
				(void)buf_printf(why, "%s cache not synced: %s", l[i].name, cause);
			else
				(void)buf_printf(why, "%s cache not synced", l[i].name);
			return false;
		}
	}
	return true;
}

/* Readiness: not once a stop was requested (--shutdown-delay). */
static bool check_running(void *arg, struct buf *why)
{
	struct op *op = arg;
	pthread_mutex_lock(&op->mu);
	bool stopping = op->stop;
	pthread_mutex_unlock(&op->mu);
	if (stopping)
		(void)buf_append_str(why, "shutting down");
	return !stopping;
}

/* Liveness: the election thread ended without us asking. */
static bool check_leader(void *arg, struct buf *why)
{
	struct op *op = arg;
	pthread_mutex_lock(&op->mu);
	bool bad = op->lost;
	pthread_mutex_unlock(&op->mu);
	if (bad)
		(void)buf_append_str(why, "leader election lost");
	return !bad;
}

/* ---- construction ---- */

/* Every server that serves the registry on /metrics (the metrics server
 * and the webhook's) authorises it alike: with --metrics-require-token, as
 * kube-rbac-proxy does, the scraper's token must be allowed "get" on
 * /metrics (docs/metrics.md). One checker serves them all. */
static void metrics_guard(struct op *op, struct web_config *wc)
{
	if (!op->cfg.metrics_require_token)
		return;
	if (op->access == NULL)
		op->access = kube_access_new(op->c, 0, 0, 0);
	wc->metrics_authz = kube_access_authz;
	wc->metrics_authz_arg = op->access;
}

/* A feed scope is a namespace: its ComputeDomains and Events reach a reader
 * allowed to list ComputeDomains there (everywhere, asked first, covers
 * every namespace with one cached review). */
static enum nv_err dash_scope(void *arg, const char *bearer, const char *ns)
{
	const char *g = OP_RES_DOMAINS.group, *r = OP_RES_DOMAINS.resource;
	enum nv_err e = kube_access_check_resource(arg, bearer, "list", g, r, "");
	if (e != NV_E_FORBIDDEN)
		return e;
	return kube_access_check_resource(arg, bearer, "list", g, r, ns);
}

static enum nv_err server_new(struct op *op, const char *name, const char *addr, bool metrics,
                              struct web_server **out)
{
	char host[128];
	int port;
	struct web_config wc = {.name = name};

	*out = NULL;
	if (parse_hostport(addr, host, sizeof(host), &port) != NV_OK) {
		log_error(OP_COMP, "bad bind address", "server=%s addr=\"%s\"", name, addr);
		return NV_E_CONFIG;
	}
	if (port < 0)
		return NV_OK;
	wc.bind_addr = host[0] ? host : NULL;
	wc.port = port;
	wc.metrics = metrics ? op->reg : NULL;
	if (strcmp(name, "dashboard") == 0) {
		/* docs/dashboard.md: the feed needs a token allowed "get" on
		 * /ws (unless --dashboard-anonymous-read), a namespace's
		 * ComputeDomains one allowed to list them there, and any POST
		 * one allowed "post" on its path. */
		if (op->access == NULL)
			op->access = kube_access_new(op->c, 0, 0, 0);
		wc.post_authz = kube_access_authz;
		wc.post_authz_arg = op->access;
		if (!op->cfg.dashboard_anonymous_read) {
			wc.read_authz = kube_access_authz;
			wc.read_authz_arg = op->access;
			wc.scope_authz = dash_scope;
			wc.scope_authz_arg = op->access;
		} else {
			log_warn(OP_COMP,
			         "dashboard feed open to anyone who reaches its port "
			         "(--dashboard-anonymous-read)",
			         "addr=%s", addr);
		}
	}
	if (metrics)
		metrics_guard(op, &wc);
	return web_server_new(&wc, out);
}

static enum nv_err informer(struct op *op, const struct kube_res *res, const char *ns,
                            struct kube_informer **out)
{
	/* Labels and annotations the operator reads on Nodes: its own, the
	 * control-plane role the webhook refuses, and those
	 * --agent-node-selector names. */
	static const char *const node_labels[] = {"nvl72.io/", "node-role.kubernetes.io/", NULL};
	static const char *const node_annotations[] = {"nvl72.io/", NULL};
	struct kube_informer_opts o = {.res = res, .ns = ns};
	/* --parsed-cache-mib: every tray has a Node, and a trimmed Node's tree
	 * counts about a sixth of a ComputeTray's (1.5 MiB against 9.6 for
	 * the 288 of the 16-rack bench), so a quarter of the budget holds the
	 * Nodes of all the trays the rest holds. */
	size_t parsed = (size_t)op->cfg.parsed_cache_mib << 20;

	if (res == &KUBE_RES_NODES) {
		op->node_keep = (struct kube_node_keep){.label_prefixes = node_labels,
		                                        .annotation_prefixes = node_annotations,
		                                        .selector = op->agent_sel};
		o.transform = kube_transform_node;
		o.transform_arg = &op->node_keep;
		o.memo_bytes = parsed / 4;
	} else if (res == &OP_RES_TRAYS) {
		o.memo_bytes = parsed - parsed / 4;
	} else if (res == &RES_COORD_LEASES) {
		o.transform = kube_transform_lease;
	}
	return kube_informer_new(op->c, &o, out);
}

static void identity_make(struct op *op)
{
	char host[64] = "nvl72-operator";
	const char *base = op->cfg.identity && op->cfg.identity[0] ? op->cfg.identity : NULL;
	unsigned r = (unsigned)(time_mono_us() ^ (int64_t)getpid() * 2654435761LL);
	if (base == NULL) {
		(void)gethostname(host, sizeof(host) - 1);
		base = host;
	}
	snprintf(op->identity, sizeof(op->identity), "%s_%08x", base, r);
}

/* A queue per row and the handlers of its watches, then the rows' own
 * opening (backends). */
static enum nv_err controllers_build(struct op *op)
{
	enum nv_err rc;
	for (size_t i = 0; i < NCONTROLLERS; i++) {
		struct op_ctrl *c = &op->ctrl[op->nctrl++];
		c->row = controllers[i];
		c->op = op;
		c->q = kube_workqueue_new(c->row->name, &c->row->queue);
		if ((rc = op_ctrl_watch(c)) != NV_OK)
			return rc;
	}
	for (size_t i = 0; i < op->nctrl; i++)
		if (op->ctrl[i].row->open && (rc = op->ctrl[i].row->open(op)) != NV_OK)
			return rc;
	return NV_OK;
}

static enum nv_err op_build(struct op *op)
{
	struct kube_config *kc = NULL;
	struct kube_status st;
	enum nv_err rc;
	const char *k = op->cfg.kubeconfig && op->cfg.kubeconfig[0] ? op->cfg.kubeconfig : NULL;

	if ((rc = kube_config_load(&(struct kube_config_opts){.kubeconfig = k}, &kc, &st)) !=
	    NV_OK) {
		log_error(OP_COMP, "no cluster configuration", "err=%s msg=\"%s\"", nv_err_name(rc),
		          st.message);
		return rc;
	}
	if ((rc = kube_client_new(kc, &(struct kube_client_opts){.component = "nvl72-operator"},
	                          &op->c, &st)) != NV_OK) {
		log_error(OP_COMP, "client failed", "err=%s msg=\"%s\"", nv_err_name(rc),
		          st.message);
		return rc;
	}
	snprintf(op->lease_ns, sizeof(op->lease_ns), "%s",
	         op->cfg.leader_election_ns && op->cfg.leader_election_ns[0]
	                 ? op->cfg.leader_election_ns
	                 : kube_client_namespace(op->c));
	snprintf(op->agent_ns, sizeof(op->agent_ns), "%s",
	         op->cfg.agent_lease_ns && op->cfg.agent_lease_ns[0] ? op->cfg.agent_lease_ns
	                                                             : op->lease_ns);
	if (op->cfg.agent_node_selector && op->cfg.agent_node_selector[0]) {
		char why[200];

		rc = kube_selector_parse(op->cfg.agent_node_selector, &op->agent_sel, why,
		                         sizeof(why));
		if (rc != NV_OK) {
			log_error(OP_COMP, "bad --agent-node-selector",
			          "selector=\"%s\" why=\"%s\"", op->cfg.agent_node_selector, why);
			return rc;
		}
	}
	identity_make(op);
	if ((rc = informer(op, &OP_RES_RACKS, NULL, &op->racks)) ||
	    (rc = informer(op, &OP_RES_TRAYS, NULL, &op->trays)) ||
	    (rc = informer(op, &KUBE_RES_NODES, NULL, &op->nodes)) ||
	    (rc = informer(op, &OP_RES_MATRICES, NULL, &op->matrices)) ||
	    (rc = informer(op, &OP_RES_PARTITIONS, NULL, &op->partitions)) ||
	    (rc = informer(op, &OP_RES_DOMAINS, NULL, &op->domains)) ||
	    (rc = informer(op, &OP_RES_UPGRADES, NULL, &op->upgrades)) ||
	    (rc = informer(op, &OP_RES_APPROVALS, NULL, &op->approvals)) ||
	    (rc = informer(op, &RES_COORD_LEASES, op->agent_ns, &op->leases)))
		return rc;
	if ((rc = kube_informer_add_index(op->racks, OP_INDEX_RACK_NODE, index_rack_nodes, NULL)) ||
	    (rc = kube_informer_add_index(op->racks, OP_INDEX_RACK_MATRIX, index_rack_matrix,
	                                  NULL)) ||
	    (rc = kube_informer_add_index(op->trays, OP_INDEX_TRAY_RACK, index_spec_rack, NULL)) ||
	    (rc = kube_informer_add_index(op->upgrades, OP_INDEX_UPGRADE_RACK, index_spec_rack,
	                                  NULL)) ||
	    (rc = kube_informer_add_index(op->upgrades, OP_INDEX_UPGRADE_ACTIVE, index_active_rack,
	                                  NULL)) ||
	    (rc = kube_informer_add_index(op->partitions, OP_INDEX_PARTITION_RACK, index_spec_rack,
	                                  NULL)) ||
	    (rc = kube_informer_add_index(op->nodes, "rack", kube_index_label, OP_LABEL_RACK)) ||
	    (rc = kube_informer_add_index(op->nodes, "domain", kube_index_label,
	                                  OP_LABEL_COMPUTE_DOMAIN)))
		return rc;
	if ((rc = op_nvidia_new(op)) != NV_OK || (rc = controllers_build(op)) != NV_OK)
		return rc;
	op->rec = kube_recorder_new(op->c, "nvl72.io/operator", NULL);
	op->reg = metrics_registry_new();
	if ((rc = metrics_std_register(op->reg, &op->std)) != NV_OK)
		return rc;
	for (size_t i = 0; i < op->nctrl; i++)
		if ((rc = metrics_std_controller_init(&op->std, op->ctrl[i].row->name)) != NV_OK)
			return rc;
	if ((rc = op_metrics_register(op)) != NV_OK)
		return rc;
	if ((rc = server_new(op, "probes", op->cfg.probe_addr, false, &op->probes)) ||
	    (rc = server_new(op, "metrics", op->cfg.metrics_addr, true, &op->metrics_srv)) ||
	    (rc = server_new(op, "dashboard", op->cfg.dashboard_addr, false, &op->dash)))
		return rc;
	if (op->probes) {
		web_check_add(op->probes, WEB_PROBE_LIVE, "ping", check_ping, op);
		web_check_add(op->probes, WEB_PROBE_LIVE, "leader-election", check_leader, op);
		web_check_add(op->probes, WEB_PROBE_READY, "ping", check_ping, op);
		web_check_add(op->probes, WEB_PROBE_READY, "informers", check_informers, op);
		web_check_add(op->probes, WEB_PROBE_READY, "shutdown", check_running, op);
	}
	return NV_OK;
}

enum nv_err op_new(const struct op_config *cfg, struct op **out)
{
	struct op *op = xcalloc(1, sizeof(*op));
	enum nv_err rc;

	op->cfg = *cfg;
	pthread_mutex_init(&op->mu, NULL);
	pthread_cond_init(&op->cv, NULL);
	pthread_mutex_init(&op->feed_mu, NULL);
	pthread_mutex_init(&op->rack_mu, NULL);
	pthread_mutex_init(&op->dra.mu, NULL);
	op->rack_written = json_object();
	op->feed_last = json_object();
	op->fleet = json_object();
	op->events = json_array();
	if ((rc = op_build(op)) != NV_OK) {
		op_free(op);
		return rc;
	}
	*out = op;
	return NV_OK;
}

/* Every informer of the operator, in one place. */
#define OP_INFORMERS 9

static void informers_all(struct op *op, struct kube_informer **l[OP_INFORMERS])
{
	struct kube_informer **all[OP_INFORMERS] = {&op->racks,    &op->trays,      &op->nodes,
	                                            &op->matrices, &op->partitions, &op->leases,
	                                            &op->domains,  &op->upgrades,   &op->approvals};
	memcpy(l, all, sizeof(all));
}

/* These and the ComputeDomains' template cache, which a leader makes
 * (op_ctx.h, struct op_dra) and which no sync wait or probe counts. */
static void informers_stop(struct op *op)
{
	struct kube_informer **l[OP_INFORMERS];
	informers_all(op, l);
	for (size_t i = 0; i < OP_INFORMERS; i++)
		kube_informer_stop(*l[i]);
	kube_informer_stop(op->dra.templates);
}

static void informers_free(struct op *op)
{
	struct kube_informer **l[OP_INFORMERS];
	informers_all(op, l);
	for (size_t i = 0; i < OP_INFORMERS; i++) {
		kube_informer_free(*l[i]);
		*l[i] = NULL;
	}
	pthread_mutex_lock(&op->dra.mu);
	struct kube_informer *t = op->dra.templates;
	op->dra.templates = NULL;
	pthread_mutex_unlock(&op->dra.mu);
	kube_informer_free(t);
}

/* The webhook's threads stop before its server and the client go. */
static void webhook_stopping(struct op *op)
{
	const struct op_webhook_ops *w = op->cfg.webhook;
	if (w != NULL && w->stopping != NULL)
		w->stopping(w->arg, op);
}

void op_free(struct op *op)
{
	if (op == NULL)
		return;
	webhook_stopping(op);
	web_server_free(op->webhook);
	web_server_free(op->dash);
	web_server_free(op->metrics_srv);
	web_server_free(op->probes);
	kube_access_free(op->access);
	for (size_t i = 0; i < op->nctrl; i++)
		kube_workers_stop(op->ctrl[i].workers);
	/* After an early return of op_run the informers may still run: stop
	 * them all before the queues their handlers feed and the caches their
	 * handlers read are freed. */
	informers_stop(op);
	op_nvidia_stop(op);
	for (size_t i = 0; i < op->nctrl; i++)
		kube_workqueue_free(op->ctrl[i].q);
	for (size_t i = 0; i < op->nctrl; i++)
		if (op->ctrl[i].row->close)
			op->ctrl[i].row->close(op);
	informers_free(op);
	op_nvidia_free(op);
	kube_leader_free(op->le);
	kube_recorder_free(op->rec);
	kube_client_free(op->c);
	kube_selector_free(op->agent_sel);
	metrics_registry_free(op->reg);
	json_decref(op->rack_written);
	json_decref(op->feed_last);
	json_decref(op->fleet);
	json_decref(op->events);
	pthread_mutex_destroy(&op->mu);
	pthread_cond_destroy(&op->cv);
	pthread_mutex_destroy(&op->feed_mu);
	pthread_mutex_destroy(&op->rack_mu);
	pthread_mutex_destroy(&op->dra.mu);
	free(op);
}

/* ---- the webhook hook ---- */

static enum nv_err webhook_start(struct op *op)
{
	const struct op_webhook_ops *w = op->cfg.webhook;
	char host[128], *cert = NULL, *key = NULL;
	int port;
	enum nv_err rc;

	if (parse_hostport(op->cfg.webhook_addr, host, sizeof(host), &port) != NV_OK)
		return NV_E_CONFIG;
	if (port < 0)
		return NV_OK;
	if (w == NULL) {
		log_warn(OP_COMP, "admission webhook not built in: not serving it", "addr=%s",
		         op->cfg.webhook_addr);
		return NV_OK;
	}
	if ((rc = w->serving_cert(w->arg, op, &cert, &key)) != NV_OK)
		return rc;
	struct web_config wc = {.name = "webhook",
	                        .bind_addr = host[0] ? host : NULL,
	                        .port = port,
	                        .tls_cert_pem = cert,
	                        .tls_key_pem = key,
	                        /* The apiserver sends reviews up to its own 3 MiB
	                         * request limit. */
	                        .body_max = WEBHOOK_REVIEW_MAX_DEFAULT,
	                        .metrics = op->reg};
	metrics_guard(op, &wc);
	rc = web_server_new(&wc, &op->webhook);
	secure_free_str(cert);
	secure_free_str(key);
	if (rc == NV_OK)
		rc = w->register_routes(w->arg, op, op->webhook);
	if (rc == NV_OK)
		rc = web_server_start(op->webhook);
	if (rc == NV_OK && w->started)
		w->started(w->arg, op);
	return rc;
}

/* ---- leadership ---- */

static void on_started(void *ud)
{
	struct op *op = ud;
	pthread_mutex_lock(&op->mu);
	op->leading = true;
	pthread_cond_broadcast(&op->cv);
	pthread_mutex_unlock(&op->mu);
}

static void on_stopped(void *ud)
{
	struct op *op = ud;
	pthread_mutex_lock(&op->mu);
	op->leading = false;
	pthread_cond_broadcast(&op->cv);
	pthread_mutex_unlock(&op->mu);
}

static void on_new_leader(void *ud, const char *id)
{
	(void)ud;
	log_info(OP_COMP, "leader observed", "identity=%s", id);
}

struct leader_thread {
	struct op *op;
	struct kube_stop *stop;
	enum nv_err rc;
	pthread_t th;
};

static void *leader_main(void *arg)
{
	struct leader_thread *lt = arg;
	struct op *op = lt->op;
	lt->rc = kube_leader_run(op->le, lt->stop);
	pthread_mutex_lock(&op->mu);
	op->leader_done = true;
	op->leading = false;
	op->lost |= lt->rc == NV_E_STATE;
	pthread_cond_broadcast(&op->cv);
	pthread_mutex_unlock(&op->mu);
	return NULL;
}

void op_request_stop(struct op *op)
{
	pthread_mutex_lock(&op->mu);
	if (!op->stop)
		op->stop_ms = time_mono_ms();
	op->stop = true;
	pthread_cond_broadcast(&op->cv);
	pthread_mutex_unlock(&op->mu);
}

static bool informers_wait(struct op *op)
{
	int64_t end = time_mono_ms() + op->cfg.cache_sync_timeout_ms;
	struct kube_informer **l[OP_INFORMERS];
	informers_all(op, l);
	for (size_t i = 0; i < OP_INFORMERS; i++) {
		int64_t left = end - time_mono_ms();
		if (*l[i] && !kube_informer_wait_synced(*l[i], left > 0 ? left : 1))
			return false;
	}
	return true;
}

/* Reconcile wrapper: controller-runtime's metrics around each pass; ud is
 * the running controller. */
static struct kube_result metered(void *ud, const char *key)
{
	const struct op_ctrl *c = ud;
	struct op *op = c->op;
	const char *name = c->row->name, *comp = c->row->comp;
	const char *ctl[] = {name};
	int64_t t0 = time_mono_us();
	(void)metrics_gauge_add(op->std.active_workers, ctl, 1);
	struct kube_result r = c->row->reconcile(op, key);
	(void)metrics_gauge_add(op->std.active_workers, ctl, -1);
	(void)metrics_histogram_observe(op->std.reconcile_time_seconds, ctl,
	                                (double)(time_mono_us() - t0) / 1e6);
	const char *result = r.err ? "error" : r.requeue_after_ms > 0 ? "requeue_after" : "success";
	const char *lv[] = {name, result};
	(void)metrics_counter_inc(op->std.reconcile_total, lv);
	if (r.err) {
		(void)metrics_counter_inc(op->std.reconcile_errors_total, ctl);
		log_warn(comp, "reconcile failed", "%s=%s err=%s", comp, key, nv_err_name(r.err));
	}
	if (c->row->passed)
		c->row->passed(op);
	return r;
}

static int ctrl_workers(const struct op_ctrl *c)
{
	return *(const int *)(const void *)((const char *)&c->op->cfg + c->row->workers);
}

/* "rack:2,computedomain:2,...": the worker counts, for the log. */
static void workers_list(const struct op *op, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (size_t i = 0; i < op->nctrl && len < cap; i++) {
		int w = snprintf(out + len, cap - len, "%s%s:%d", i ? "," : "",
		                 op->ctrl[i].row->name, ctrl_workers(&op->ctrl[i]));
		len += w > 0 ? (size_t)w : 0;
	}
}

/* In a pod (POD_NAME and POD_NAMESPACE from the downward API, as the chart
 * sets them), the leader labels its own pod nvl72.io/operator-leader=true
 * (OP_LEADER_LABEL) and a
 * replica that does not lead takes the label off: the dashboard's Service
 * selects it, since only the leader publishes the feed. Best effort: a
 * failure is logged and changes nothing else. */
static void leader_mark(struct op *op, bool on)
{
	const char *pod = getenv("POD_NAME"), *ns = getenv("POD_NAMESPACE");
	struct kube_status st;
	json_t *patch;
	enum nv_err rc;

	if (pod == NULL || pod[0] == '\0' || ns == NULL || ns[0] == '\0')
		return;
	patch = json_pack("{s:{s:{s:o}}}", "metadata", "labels", OP_LEADER_LABEL,
	                  on ? json_string("true") : json_null());
	rc = kube_patch(op->c, &KUBE_RES_PODS, ns, pod,
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL, &st);
	json_decref(patch);
	if (rc != NV_OK)
		log_warn(OP_COMP, "cannot label the operator's own pod",
		         "pod=%s/%s label=%s err=%s "
		         "msg=\"%s\"",
		         ns, pod, OP_LEADER_LABEL, nv_err_name(rc), st.message);
}

/* Starts the controllers; a leader whose caches do not sync gives up (the
 * process exits non-zero and a standby takes over). */
static void workers_start(struct op *op)
{
	char list[256];
	if (!informers_wait(op)) {
		log_error(OP_COMP, "caches did not sync in time: giving up", "timeout_ms=%lld",
		          (long long)op->cfg.cache_sync_timeout_ms);
		pthread_mutex_lock(&op->mu);
		op->lost = op->stop = true;
		pthread_mutex_unlock(&op->mu);
		return;
	}
	for (size_t i = 0; i < op->nctrl; i++) {
		struct op_ctrl *c = &op->ctrl[i];
		int n = ctrl_workers(c);
		(void)metrics_gauge_set(op->std.max_concurrent_reconciles,
		                        (const char *[]){c->row->name}, n);
		c->workers = kube_workers_start(c->q, n, metered, c);
	}
	op->workers_on = true;
	for (size_t i = 0; i < op->nctrl; i++)
		op_ctrl_enqueue_all(&op->ctrl[i]);
	for (size_t i = 0; i < op->nctrl; i++)
		if (op->ctrl[i].row->leading)
			op->ctrl[i].row->leading(op);
	op_metrics_leading(op, true);
	leader_mark(op, true);
	workers_list(op, list, sizeof(list));
	log_info(OP_COMP, "controllers started", "identity=%s workers=%s", op->identity, list);
}

/* Stops dispatching, lets in-flight reconciles end, and readies a fresh
 * queue for the next term (a shut-down queue ignores adds). */
static void workers_stop(struct op *op)
{
	if (!op->workers_on)
		return;
	for (size_t i = 0; i < op->nctrl; i++) {
		kube_workers_stop(op->ctrl[i].workers);
		op->ctrl[i].workers = NULL;
		kube_workqueue_reopen(op->ctrl[i].q);
	}
	op->workers_on = false;
	op_metrics_leading(op, false);
	op_feed_clear(op);
	leader_mark(op, false);
	log_info(OP_COMP, "controllers stopped", "identity=%s", op->identity);
}

static enum nv_err servers_start(struct op *op)
{
	struct web_server *s[] = {op->probes, op->metrics_srv, op->dash};
	enum nv_err rc;
	for (size_t i = 0; i < 3; i++) {
		if (s[i] && (rc = web_server_start(s[i])) != NV_OK) {
			log_error(OP_COMP, "web server failed to start", "err=%s", nv_err_name(rc));
			return rc;
		}
	}
	log_info(OP_COMP, "serving", "probes=%d metrics=%d dashboard=%d",
	         op->probes ? web_server_port(op->probes) : -1,
	         op->metrics_srv ? web_server_port(op->metrics_srv) : -1,
	         op->dash ? web_server_port(op->dash) : -1);
	return webhook_start(op);
}

static enum nv_err informers_start(struct op *op)
{
	struct kube_informer **l[OP_INFORMERS];
	enum nv_err rc;
	informers_all(op, l);
	for (size_t i = 0; i < OP_INFORMERS; i++)
		if (*l[i] && (rc = kube_informer_start(*l[i])) != NV_OK)
			return rc;
	return NV_OK;
}

/* The main loop: follows leadership until stop or loss. */
static void follow(struct op *op, struct leader_thread *lt)
{
	pthread_mutex_lock(&op->mu);
	for (;;) {
		bool stop = op->stop, leading = op->leading, done = lt ? op->leader_done : false;
		if (stop || (lt && done && !leading))
			break;
		if (leading != op->workers_on) {
			pthread_mutex_unlock(&op->mu);
			if (leading)
				workers_start(op);
			else
				workers_stop(op);
			pthread_mutex_lock(&op->mu);
			continue;
		}
		pthread_cond_wait(&op->cv, &op->mu);
	}
	pthread_mutex_unlock(&op->mu);
}

/* The rest of --shutdown-delay after the stop request: the webhook and
 * /metrics keep answering (and /readyz fails) until the Service's
 * endpoints have dropped this replica. A connection the API server opens
 * to a replica that already closed its listener is refused, and refused
 * admission fails closed; the kubelet kills a pod deleted by force 2 s
 * after SIGTERM, the chart's delay. */
static void shutdown_delay(struct op *op)
{
	pthread_mutex_lock(&op->mu);
	int64_t left = op->stop_ms + op->cfg.shutdown_delay_ms - time_mono_ms();
	pthread_mutex_unlock(&op->mu);
	if (op->stop_ms > 0 && left > 0) {
		log_info(OP_COMP, "serving until the endpoints drop this replica", "delay_ms=%lld",
		         (long long)left);
		time_sleep_ms(left);
	}
}

enum nv_err op_run(struct op *op)
{
	struct leader_thread lt = {.op = op};
	enum nv_err rc;
	bool lost;

	if ((rc = servers_start(op)) != NV_OK || (rc = informers_start(op)) != NV_OK)
		return rc;
	if (op->cfg.leader_elect) {
		struct kube_leader_opts lo = {
		        .ns = op->lease_ns,
		        .name = op->cfg.leader_election_id,
		        .identity = op->identity,
		        .lease_ms = op->cfg.lease_ms,
		        .renew_deadline_ms = op->cfg.renew_deadline_ms,
		        .retry_ms = op->cfg.retry_ms,
		        .on_started = on_started,
		        .on_stopped = on_stopped,
		        .on_new_leader = on_new_leader,
		        .ud = op,
		};
		if ((rc = kube_leader_new(op->c, &lo, &op->le)) != NV_OK)
			return rc;
		lt.stop = kube_stop_new();
		leader_mark(op, false); /* left by an earlier container of this pod */
		log_info(OP_COMP, "campaigning", "lease=%s/%s identity=%s", op->lease_ns,
		         op->cfg.leader_election_id, op->identity);
		pthread_create(&lt.th, NULL, leader_main, &lt);
		follow(op, &lt);
	} else {
		on_started(op);
		follow(op, NULL);
	}
	/* Shutdown: controllers first, then the Lease (released only after
	 * our last write), events, the servers, and the caches they read. */
	workers_stop(op);
	if (lt.stop) {
		kube_stop_request(lt.stop);
		pthread_join(lt.th, NULL);
		kube_stop_free(lt.stop);
	}
	pthread_mutex_lock(&op->mu);
	lost = op->lost;
	pthread_mutex_unlock(&op->mu);
	kube_recorder_flush(op->rec, 5000);
	shutdown_delay(op);
	webhook_stopping(op);
	web_server_stop(op->webhook);
	web_server_stop(op->dash);
	web_server_stop(op->metrics_srv);
	web_server_stop(op->probes);
	/* Caches last: the servers' metrics collector and probes read them.
	 * All stop before any is freed: a handler of one reads the others. */
	informers_stop(op);
	op_nvidia_stop(op);
	informers_free(op);
	op_nvidia_free(op);
	log_info(OP_COMP, "stopped", "identity=%s lost=%d", op->identity, lost);
	return lost ? NV_E_STATE : NV_OK;
}
