// SPDX-License-Identifier: Apache-2.0
// The agent's loop: find this node's ComputeTray, watch only it, and on every
// change or resync observe the host, make it match the spec (one driver step
// per pass, IMEX files and daemon, channels, host units) and write the status
// only when it differs. A Lease renewed on its own thread is the heartbeat.
#include "nvl72/agent.h"
#include "agent_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvl72/api.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_access.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/metrics.h"
#include "nvl72/web.h"

#define FM_UNIT "nvidia-fabricmanager.service"
#define IMEX_UNIT "nvidia-imex.service"
#define STEP_REQUEUE_MS 300    /* between driver steps */
#define SETTLE_REQUEUE_MS 2000 /* while something is not Ready yet */
#define TRAY_POLL_MS 2000
#define VALIDATION_POLL_MS 1000 /* while a validation run is in flight */

static const struct kube_res RES_TRAYS = {"nvl72.io", "v1alpha1", "computetrays", "ComputeTray",
                                          false};

struct agent_metrics {
	struct metrics_registry *reg;
	struct metrics_std std;
	struct metrics_family *writes, *unchanged, *reconciles, *renewals, *observe_s;
};

struct agent {
	const struct agent_config *cfg;
	struct kube_client *c;
	struct kube_stop *stop;
	char tray[254];
	char tray_uid[64];
	char lease_ns[254];
	char lease_ref[512];
	char identity[300];
	struct host host;
	struct kube_informer *inf;
	struct agent_nvidia *nv; /* NVIDIA's DRA driver on this node (agent_nvidia.c) */
	struct kube_workqueue *q;
	struct kube_workers *w;
	struct kube_recorder *rec;
	struct web_server *web;
	struct kube_access *access;  /* /metrics checker with --metrics-require-token */
	struct agent_plugin *plugin; /* the kubelet plugin of imex.nvl72.io */
	struct agent_metrics m;
	pthread_t hb;
	bool hb_started;
	pthread_mutex_t mu; /* known, stats, last_drv_phase, lease_ok_ms */
	json_t *known;      /* status our last write returned */
	struct agent_stats stats;
	int last_drv_phase;               /* for events on phase changes; -1 none */
	bool drv_settled;                 /* the start-up check of a loaded target ran */
	struct agent_drv_tally drv_tally; /* the reconcile's alone */
	int64_t lease_ok_ms;              /* monotonic time of the last renewal */
};

/* ---- finding the tray ---- */

static enum nv_err tray_lookup(struct agent *a, char *why, size_t whysz)
{
	struct kube_status st;
	json_t *list = NULL, *it;
	const char *found = NULL;
	enum nv_err rc;
	size_t i, n = 0;

	if (a->cfg->tray[0] != '\0') {
		rc = kube_get(a->c, &RES_TRAYS, NULL, a->cfg->tray, &list, &st);
		if (rc == NV_OK) {
			str_copy(a->tray, sizeof(a->tray), a->cfg->tray);
			str_copy(a->tray_uid, sizeof(a->tray_uid),
			         jx_str_or(list, "metadata.uid", ""));
		} else
			snprintf(why, whysz, "ComputeTray %s: %s %s", a->cfg->tray, nv_err_str(rc),
			         st.message);
		json_decref(list);
		return rc;
	}
	rc = kube_list_all(a->c, &RES_TRAYS, NULL, &(struct kube_list_opts){.stop = a->stop}, &list,
	                   &st);
	if (rc != NV_OK) {
		snprintf(why, whysz, "listing ComputeTrays: %s %s", nv_err_str(rc), st.message);
		return rc;
	}
	json_array_foreach(jx_path(list, "items"), i, it) {
		if (strcmp(jx_str_or(it, "spec.node", ""), a->cfg->node_name) != 0)
			continue;
		n++;
		if (found == NULL) {
			found = kube_obj_name(it);
			str_copy(a->tray_uid, sizeof(a->tray_uid),
			         jx_str_or(it, "metadata.uid", ""));
		}
	}
	if (n == 1)
		str_copy(a->tray, sizeof(a->tray), found);
	else if (n == 0)
		snprintf(why, whysz, "no ComputeTray has spec.node=%s", a->cfg->node_name);
	else
		snprintf(why, whysz, "%zu ComputeTrays have spec.node=%s; name one with --tray", n,
		         a->cfg->node_name);
	json_decref(list);
	return n == 1 ? NV_OK : n == 0 ? NV_E_NOT_FOUND : NV_E_CONFLICT;
}

/* Retries what may resolve itself (a tray not created yet, a control plane
 * still starting) until tray_wait; a refused credential ends at once. */
static enum nv_err tray_find(struct agent *a, char *why, size_t whysz)
{
	int64_t deadline = time_mono_ms() + a->cfg->tray_wait_ms;
	enum nv_err rc;

	for (;;) {
		rc = tray_lookup(a, why, whysz);
		if (rc == NV_OK || rc == NV_E_UNAUTHORIZED || rc == NV_E_FORBIDDEN ||
		    rc == NV_E_CONFLICT || rc == NV_E_TLS || rc == NV_E_CONFIG || rc == NV_E_AUTH)
			return rc;
		if (time_mono_ms() >= deadline)
			return rc;
		log_warn("agent", "waiting for this node's ComputeTray", "node=%s err=\"%s\"",
		         a->cfg->node_name, why);
		if (kube_stop_sleep(a->stop, TRAY_POLL_MS))
			return NV_E_CANCELLED;
	}
}

/* ---- metrics ---- */

static void metrics_init(struct agent_metrics *m)
{
	static const char *const result[] = {"result", NULL};
	static const double obs_buckets[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

	m->reg = metrics_registry_new();
	(void)metrics_std_register(m->reg, &m->std);
	(void)metrics_family_register(
	        m->reg,
	        &(struct metrics_desc){"nvl72_agent_status_writes_total",
	                               "Status writes of the tray's ComputeTray.", METRICS_COUNTER,
	                               NULL, NULL, 0, 0},
	        &m->writes);
	(void)metrics_family_register(
	        m->reg,
	        &(struct metrics_desc){"nvl72_agent_status_unchanged_total",
	                               "Passes whose status equalled the stored one (no write).",
	                               METRICS_COUNTER, NULL, NULL, 0, 0},
	        &m->unchanged);
	(void)metrics_family_register(m->reg,
	                              &(struct metrics_desc){"nvl72_agent_reconcile_total",
	                                                     "Agent passes by result.",
	                                                     METRICS_COUNTER, result, NULL, 0, 0},
	                              &m->reconciles);
	(void)metrics_family_register(m->reg,
	                              &(struct metrics_desc){"nvl72_agent_lease_renewals_total",
	                                                     "Heartbeat Lease renewals by result.",
	                                                     METRICS_COUNTER, result, NULL, 0, 0},
	                              &m->renewals);
	(void)metrics_family_register(m->reg,
	                              &(struct metrics_desc){"nvl72_agent_host_observe_seconds",
	                                                     "Time to read the whole host once.",
	                                                     METRICS_HISTOGRAM, NULL, obs_buckets,
	                                                     ARRAY_LEN(obs_buckets), 0},
	                              &m->observe_s);
	(void)metrics_family_touch(m->writes, NULL);
	(void)metrics_family_touch(m->unchanged, NULL);
	for (int i = 0; i < 2; i++) {
		const char *v[] = {i ? "error" : "success"};
		(void)metrics_family_touch(m->reconciles, v);
		(void)metrics_family_touch(m->renewals, v);
	}
}

/* ---- the heartbeat Lease ---- */

static json_t *lease_new(struct agent *a, const char *now, const char *uid)
{
	json_t *l =
	        json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s}},s:{s:s,s:I,s:s,s:s}}", "apiVersion",
	                  "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", a->tray,
	                  "namespace", a->lease_ns, "labels", "app.kubernetes.io/component",
	                  "agent", "nvl72.io/tray", a->tray, "spec", "holderIdentity", a->identity,
	                  "leaseDurationSeconds", (json_int_t)(a->cfg->lease_duration_ms / 1000),
	                  "acquireTime", now, "renewTime", now);

	/* Owned by the tray, so the Lease goes when the tray does. */
	if (l != NULL && uid != NULL && uid[0] != '\0')
		jx_set_take(l, "metadata.ownerReferences",
		            json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", API_VERSION, "kind",
		                      "ComputeTray", "name", a->tray, "uid", uid));
	return l;
}

static void lease_renew(struct agent *a)
{
	char now[40];
	struct kube_status st;
	json_t *patch, *l;
	enum nv_err rc;
	const char *res;

	kube_format_micro(time_wall_ms() * 1000, now);
	patch = json_pack("{s:{s:s,s:I,s:s}}", "spec", "holderIdentity", a->identity,
	                  "leaseDurationSeconds", (json_int_t)(a->cfg->lease_duration_ms / 1000),
	                  "renewTime", now);
	rc = kube_patch(a->c, &KUBE_RES_LEASES, a->lease_ns, a->tray,
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL, &st);
	json_decref(patch);
	if (rc == NV_E_NOT_FOUND) {
		l = lease_new(a, now, a->tray_uid);
		rc = kube_create(a->c, &KUBE_RES_LEASES, a->lease_ns, l, NULL, &st);
		json_decref(l);
	}
	res = rc == NV_OK ? "success" : "error";
	(void)metrics_counter_inc(a->m.renewals, (const char *const[]){res});
	pthread_mutex_lock(&a->mu);
	if (rc == NV_OK) {
		a->stats.lease_renewals++;
		a->lease_ok_ms = time_mono_ms();
	} else {
		a->stats.lease_failures++;
	}
	pthread_mutex_unlock(&a->mu);
	if (rc != NV_OK)
		log_warn("agent", "heartbeat Lease renewal failed", "lease=%s err=%s msg=\"%s\"",
		         a->lease_ref, nv_err_name(rc), st.message);
}

static void *heartbeat_main(void *arg)
{
	struct agent *a = arg;

	do
		lease_renew(a);
	while (!kube_stop_sleep(a->stop, a->cfg->heartbeat_ms));
	return NULL;
}

/* ---- informer handlers: enqueue, and forget what we wrote ---- */

static void on_add(void *ud, json_t *obj)
{
	struct agent *a = ud;

	(void)obj;
	kube_workqueue_add(a->q, a->tray);
}

static void on_update(void *ud, json_t *old_obj, json_t *new_obj)
{
	struct agent *a = ud;

	(void)old_obj;
	(void)new_obj;
	/* The cache now holds the newest stored status, ours or anyone's. */
	pthread_mutex_lock(&a->mu);
	json_decref(a->known);
	a->known = NULL;
	pthread_mutex_unlock(&a->mu);
	kube_workqueue_add(a->q, a->tray);
}

static void on_delete(void *ud, json_t *obj, bool unknown)
{
	(void)unknown;
	on_add(ud, obj);
}

/* ---- one pass ---- */

struct pass {
	struct agent_spec spec;
	char spec_err[256];
	struct host_obs obs;
	struct host_driver_params params;
	struct agent_report rep;
	bool host_changed;
	int64_t imex_retry_ms; /* > 0: IMEX is due a signal that soon */
};

static void pass_units(struct agent *a, struct pass *p)
{
	struct host_kind kind;
	bool allowed = agent_config_fm_policy(a->cfg) == AGENT_FM_MASK, changed = false;
	enum nv_err rc;

	if (host_kind_read(&a->host, &kind) == NV_OK && host_kind_wants_fm(&kind))
		return;
	a->host.err[0] = '\0';
	rc = host_unit_reconcile(&a->host, FM_UNIT, HOST_UNIT_WANT_MASKED, allowed, &changed);
	p->rep.fm_err = rc;
	str_copy(p->rep.fm_why, sizeof(p->rep.fm_why), a->host.err);
	if (changed) {
		p->host_changed = true;
		log_info("agent", "host Fabric Manager stopped and masked", "tray=%s", a->tray);
	}
	/* A host IMEX unit would fight the daemon the agent supervises. */
	if (p->spec.has_imex && p->spec.imex.mode == HOST_IMEX_PROCESS) {
		changed = false;
		rc = host_unit_reconcile(&a->host, IMEX_UNIT, HOST_UNIT_WANT_STOPPED, allowed,
		                         &changed);
		if (rc != NV_OK && p->rep.fm_err == NV_OK) {
			p->rep.fm_err = rc;
			snprintf(p->rep.fm_why, sizeof(p->rep.fm_why), "%s: %.200s", IMEX_UNIT,
			         a->host.err);
		}
		p->host_changed |= changed;
	}
}

static enum nv_err status_sync(struct agent *a, const json_t *tray, struct pass *p);

static void drv_event(struct agent *a, const json_t *tray, const struct agent_drv_report *d)
{
	bool fresh;

	pthread_mutex_lock(&a->mu);
	fresh = a->last_drv_phase != (int)d->phase;
	a->last_drv_phase = (int)d->phase;
	pthread_mutex_unlock(&a->mu);
	if (!fresh)
		return;
	kube_recorder_eventf(a->rec, tray,
	                     d->phase == HOST_DRV_FAILED || d->err != NV_OK ? "Warning" : "Normal",
	                     host_drv_phase_name(d->phase), "DriverChange", "%s", d->detail);
}

/* The target is loaded. The change's last step (check NVML agrees, bring
 * back the persistence daemon) runs after a step made by this process, and
 * once at start in case a killed agent left it undone. */
static bool driver_finish(struct agent *a, const json_t *tray, struct pass *p)
{
	struct agent_drv_report *d = &p->rep.drv;
	struct host_drv_step step;
	enum host_imex_mode mode = p->spec.has_imex ? p->spec.imex.mode : HOST_IMEX_OFF;
	bool first, pending;
	int last;

	pthread_mutex_lock(&a->mu);
	last = a->last_drv_phase;
	first = !a->drv_settled;
	a->drv_settled = true;
	pthread_mutex_unlock(&a->mu);
	pending = last >= 0 && last != HOST_DRV_DONE && last != HOST_DRV_FAILED &&
	          last != HOST_DRV_REBOOT_REQUIRED;
	if (!first && !pending)
		return false;
	d->err = host_driver_step(&a->host, p->spec.driver_version, mode, &step);
	if (step.phase == HOST_DRV_DONE && d->err == NV_OK) {
		if (pending) {
			d->phase = HOST_DRV_DONE;
			str_copy(d->detail, sizeof(d->detail), step.detail);
			drv_event(a, tray, d);
			p->host_changed = true;
		}
		return false;
	}
	d->active = true;
	d->phase = step.phase;
	str_copy(d->detail, sizeof(d->detail), step.detail[0] ? step.detail : a->host.err);
	drv_event(a, tray, d);
	return true;
}

/* One driver step when the spec wants another version and maintenance
 * allows it. Returns whether the change is still in flight. */
static bool pass_driver(struct agent *a, const json_t *tray, struct pass *p)
{
	struct agent_drv_report *d = &p->rep.drv;
	const struct host_driver_info *di = &p->obs.driver;
	const char *loaded = di->sys_version[0] ? di->sys_version : di->version;
	struct host_drv_step step;
	enum host_imex_mode mode = p->spec.has_imex ? p->spec.imex.mode : HOST_IMEX_OFF;
	int last;

	if (!p->spec.has_driver)
		return false;
	if (strcmp(loaded, p->spec.driver_version) == 0)
		return driver_finish(a, tray, p);
	/* An unreadable driver is reported, never taken as "not installed". */
	if (loaded[0] == '\0' && p->obs.driver_part.err != NV_OK)
		return false;
	d->active = true;
	if (strcmp(p->spec.maint_state, "Drained") != 0 &&
	    strcmp(p->spec.maint_state, "Upgrading") != 0) {
		d->waiting_maintenance = true;
		return true;
	}
	if (p->spec.activation == AGENT_ACTIVATE_REBOOT &&
	    strcmp(p->rep.ondisk, p->spec.driver_version) == 0) {
		d->phase = HOST_DRV_REBOOT_REQUIRED;
		snprintf(d->detail, sizeof(d->detail), "activation is Reboot: reboot the tray");
		drv_event(a, tray, d);
		return true;
	}
	if (agent_drv_hold(&a->drv_tally, p->spec.driver_version, time_mono_ms(), d))
		return true;
	/* An install blocks this pass for as long as the installer runs (minutes
	 * on a tray): when the last step stopped the holders and the target is
	 * not on disk yet, that is what comes next, so report it first. */
	pthread_mutex_lock(&a->mu);
	last = a->last_drv_phase;
	pthread_mutex_unlock(&a->mu);
	if (last == HOST_DRV_STOPPING_HOLDERS &&
	    strcmp(p->rep.ondisk, p->spec.driver_version) != 0) {
		d->phase = HOST_DRV_INSTALLING;
		snprintf(d->detail, sizeof(d->detail), "running the installer for %s",
		         p->spec.driver_version);
		(void)status_sync(a, tray, p);
	}
	d->err = host_driver_step(&a->host, p->spec.driver_version, mode, &step);
	d->phase = step.phase;
	str_copy(d->detail, sizeof(d->detail), step.detail[0] ? step.detail : a->host.err);
	log_info("agent", "driver step", "tray=%s target=%s phase=%s err=%s detail=\"%s\"", a->tray,
	         p->spec.driver_version, host_drv_phase_name(step.phase), nv_err_name(d->err),
	         d->detail);
	drv_event(a, tray, d);
	p->host_changed = true;
	if (step.phase == HOST_DRV_DONE && d->err == NV_OK) {
		d->active = false;
		return false;
	}
	return true;
}

static void channels_scan(struct agent *a, struct pass *p)
{
	for (size_t i = 0; i < p->spec.n_channel_ids; i++) {
		char rel[96], full[1024];
		struct stat sb;
		snprintf(rel, sizeof(rel), "/dev/nvidia-caps-imex-channels/channel%u",
		         p->spec.channel_ids[i]);
		if (host_path(&a->host, rel, full, sizeof(full)) == NV_OK && stat(full, &sb) == 0 &&
		    S_ISCHR(sb.st_mode))
			p->rep.channels_created[p->rep.n_channels_created++] =
			        p->spec.channel_ids[i];
	}
}

/* Host names in the nodes file need IMEX 570.158.01 or later (the IMEX
 * guide, nodes_config; NVIDIA's DRA driver refuses its DNS-name mode below
 * it too) and a daemon that resolves through the host's /etc/hosts, the
 * file the agent edits: the host's unit, or our own daemon when the tools
 * run in the host's namespace. Otherwise the nodes file lists addresses. */
#define IMEX_NAMES_MIN_DRIVER "570.158.01"
static bool imex_by_name(const struct agent *a, const struct pass *p)
{
	int cmp = -1;

	if (p->spec.imex.mode == HOST_IMEX_PROCESS && a->host.cfg.tool_ns != HOST_TOOL_NS_HOST)
		return false;
	return p->obs.driver.loaded &&
	       host_version_cmp(p->obs.driver.version, IMEX_NAMES_MIN_DRIVER, &cmp) == NV_OK &&
	       cmp >= 0;
}

static void imex_applied_event(struct agent *a, const json_t *tray, struct pass *p,
                               const struct host_imex_apply *ap)
{
	if (ap->restarted) {
		p->host_changed = true;
		log_info("agent", "IMEX daemon (re)started",
		         "tray=%s domain=%s changed=%d hash=%.12s", a->tray, p->spec.imex.domain,
		         ap->changed, ap->nodes_hash);
		kube_recorder_eventf(a->rec, tray, "Normal", "IMEXRestarted", "ApplyIMEX",
		                     "domain %s, %zu peers, peer list %.12s", p->spec.imex.domain,
		                     p->spec.imex.n_peers, ap->nodes_hash);
	} else if (ap->signalled) {
		p->host_changed = true;
		log_info("agent", "IMEX daemon told the new peer addresses",
		         "tray=%s domain=%s hash=%.12s", a->tray, p->spec.imex.domain,
		         ap->nodes_hash);
		kube_recorder_eventf(a->rec, tray, "Normal", "IMEXPeersUpdated", "ApplyIMEX",
		                     "domain %s, %zu peers, peer list %.12s, daemon kept",
		                     p->spec.imex.domain, p->spec.imex.n_peers, ap->nodes_hash);
	}
}

static void pass_imex(struct agent *a, const json_t *tray, struct pass *p)
{
	struct host_imex_apply ap;
	unsigned top = 0, created = 0;
	enum nv_err rc;

	if (!p->spec.has_imex || p->rep.drv.active)
		return;
	a->host.err[0] = '\0';
	p->spec.imex.by_name = imex_by_name(a, p);
	rc = host_imex_apply(&a->host, &p->spec.imex, &ap);
	p->rep.imex_apply_err = rc;
	if (rc != NV_OK) {
		str_copy(p->rep.imex_apply_why, sizeof(p->rep.imex_apply_why), a->host.err);
		return;
	}
	p->rep.imex_applied = true;
	memcpy(p->rep.imex_hash, ap.nodes_hash, sizeof(p->rep.imex_hash));
	p->imex_retry_ms = ap.retry_ms;
	imex_applied_event(a, tray, p, &ap);
	for (size_t i = 0; i < p->spec.n_channel_ids; i++)
		if (p->spec.channel_ids[i] + 1 > top)
			top = p->spec.channel_ids[i] + 1;
	if (p->spec.channels_all)
		top = p->spec.channel_count;
	if (top > 0) {
		a->host.err[0] = '\0';
		rc = host_channels_ensure(&a->host, top, &created);
		p->rep.channels_err = rc;
		str_copy(p->rep.channels_why, sizeof(p->rep.channels_why), a->host.err);
	}
	channels_scan(a, p);
}

/* Validation runs: one per new spec.validation.id, never while a driver
 * change is in flight (the GPUs come and go). The run itself is detached;
 * this only starts, polls and records it. */
static void pass_validation(struct agent *a, const json_t *tray, struct pass *p)
{
	struct host_val_result reported, *v = &p->rep.validation;
	enum host_val_phase before;
	const struct host_val_request *req =
	        p->spec.has_validation && !p->rep.drv.active ? &p->spec.validation : NULL;

	agent_validation_from_status(jx_path(tray, "status"), &reported);
	before = reported.phase;
	(void)host_validation_step(&a->host, req, &reported, v);
	if (v->phase == before && strcmp(v->id, reported.id) == 0)
		return;
	if (v->phase == HOST_VAL_SUCCEEDED)
		kube_recorder_eventf(a->rec, tray, "Normal", "ValidationSucceeded", "Validate",
		                     "%s: %s", v->id, v->message);
	else if (v->phase == HOST_VAL_FAILED)
		kube_recorder_eventf(a->rec, tray, "Warning", "ValidationFailed", "Validate",
		                     "%s: %s", v->id, v->message);
}

static void observe(struct agent *a, struct pass *p)
{
	int64_t t0 = time_mono_ms();
	enum host_imex_mode mode = p->spec.has_imex ? p->spec.imex.mode : HOST_IMEX_OFF;

	(void)host_observe(&a->host, mode, &p->obs);
	p->params.n = 0;
	if (p->obs.driver.loaded && host_params_read(&a->host, &p->params) != NV_OK)
		p->params.n = 0;
	if (host_driver_ondisk(&a->host, p->rep.ondisk, sizeof(p->rep.ondisk)) != NV_OK)
		p->rep.ondisk[0] = '\0';
	(void)metrics_histogram_observe(a->m.observe_s, NULL, (double)(time_mono_ms() - t0) / 1e3);
}

/* Writes status when it differs from the newest stored one we know. */
static enum nv_err status_sync(struct agent *a, const json_t *tray, struct pass *p)
{
	char ts[TIME_RFC3339_LEN];
	struct kube_status st;
	json_t *known, *base, *want, *patch, *diff, *out = NULL;
	enum nv_err rc = NV_OK;

	pthread_mutex_lock(&a->mu);
	known = json_incref(a->known);
	pthread_mutex_unlock(&a->mu);
	base = known ? known : jx_path(tray, "status");
	want = agent_status_build(&p->rep, base, time_wall_ms());
	if (!agent_status_differs(base, want)) {
		(void)metrics_counter_inc(a->m.unchanged, NULL);
		pthread_mutex_lock(&a->mu);
		a->stats.status_skipped++;
		pthread_mutex_unlock(&a->mu);
		goto out;
	}
	time_format_rfc3339(time_wall_ms(), ts);
	json_object_set_new(want, "heartbeatTime", json_string(ts));
	diff = jx_merge_patch_diff(json_is_object(base) ? base : NULL, want);
	patch = json_pack("{s:o}", "status", diff);
	rc = kube_patch(
	        a->c, &RES_TRAYS, NULL, a->tray,
	        &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE, .subresource = "status"}, patch,
	        &out, &st);
	json_decref(patch);
	if (rc != NV_OK) {
		log_warn("agent", "status write failed", "tray=%s err=%s msg=\"%s\"", a->tray,
		         nv_err_name(rc), st.message);
		goto out;
	}
	(void)metrics_counter_inc(a->m.writes, NULL);
	log_debug("agent", "status written", "tray=%s", a->tray);
	pthread_mutex_lock(&a->mu);
	a->stats.status_writes++;
	json_decref(a->known);
	a->known = json_incref(jx_path(out, "status"));
	pthread_mutex_unlock(&a->mu);
out:
	json_decref(out);
	json_decref(want);
	json_decref(known);
	return rc;
}

/* The plugin learns the tray as this pass left it; its state goes into
 * this status. */
static void pass_plugin(struct agent *a, const json_t *tray, struct pass *p)
{
	struct agent_dra_view v;

	if (!a->cfg->kubelet_plugin)
		return;
	/* With --tray alone the Node is the one the tray names. */
	agent_dra_view_build(tray, &p->spec, &p->obs,
	                     a->cfg->node_name[0] ? a->cfg->node_name : p->spec.node, &v);
	agent_plugin_update(a->plugin, &v);
	agent_plugin_report(a->plugin, &p->rep.plugin);
}

static bool all_ready(const struct pass *p)
{
	return p->obs.clique_part.err == NV_OK && p->obs.has_clique &&
	       (!p->spec.has_imex ||
	        (p->obs.imex_part.err == NV_OK && p->obs.imex.daemon == HOST_IMEXD_READY &&
	         p->obs.imex.nodes_ok && p->obs.imex.dom.domain == HOST_IMEX_DOMAIN_UP));
}

static struct kube_result reconcile(void *ud, const char *key)
{
	struct agent *a = ud;
	json_t *tray = kube_informer_get(a->inf, key);
	struct pass *p;
	struct kube_result res = {.requeue_after_ms = a->cfg->resync_ms};
	bool drv_busy;

	if (tray == NULL) {
		log_warn("agent", "ComputeTray not found; waiting for it", "tray=%s", key);
		return res;
	}
	p = xcalloc(1, sizeof(*p));
	(void)agent_spec_parse(tray, a->cfg->node_ip, &p->spec, p->spec_err, sizeof(p->spec_err));
	agent_nvidia_pass(a->nv, &a->host, &p->spec, &p->rep.nvidia);
	p->rep.spec = &p->spec;
	p->rep.spec_error = p->spec_err;
	p->rep.node_ip = a->cfg->node_ip;
	p->rep.obs = &p->obs;
	p->rep.params = &p->params;
	p->rep.lease = a->lease_ref;
	pass_units(a, p);
	observe(a, p);
	drv_busy = pass_driver(a, tray, p);
	agent_drv_tally(&a->drv_tally, p->spec.driver_version, time_mono_ms(), &p->rep.drv);
	pass_imex(a, tray, p);
	pass_validation(a, tray, p);
	if (p->host_changed) {
		char ondisk[HOST_VERSION_LEN];
		memcpy(ondisk, p->rep.ondisk, sizeof(ondisk));
		observe(a, p);
		if (p->rep.ondisk[0] == '\0')
			memcpy(p->rep.ondisk, ondisk, sizeof(ondisk));
	}
	pass_plugin(a, tray, p);
	res.err = status_sync(a, tray, p);
	if (drv_busy && !p->rep.drv.waiting_maintenance &&
	    p->rep.drv.phase != HOST_DRV_REBOOT_REQUIRED && p->rep.drv.phase != HOST_DRV_FAILED)
		res.requeue_after_ms = STEP_REQUEUE_MS;
	else if (p->rep.validation.phase == HOST_VAL_RUNNING &&
	         a->cfg->resync_ms > VALIDATION_POLL_MS)
		res.requeue_after_ms = VALIDATION_POLL_MS;
	else if (!all_ready(p) && a->cfg->resync_ms > SETTLE_REQUEUE_MS)
		res.requeue_after_ms = SETTLE_REQUEUE_MS;
	if (p->imex_retry_ms > 0 && p->imex_retry_ms < res.requeue_after_ms)
		res.requeue_after_ms = p->imex_retry_ms;
	(void)metrics_counter_inc(a->m.reconciles,
	                          (const char *const[]){res.err == NV_OK ? "success" : "error"});
	pthread_mutex_lock(&a->mu);
	a->stats.reconciles++;
	pthread_mutex_unlock(&a->mu);
	free(p);
	json_decref(tray);
	return res;
}

/* ---- lifecycle ---- */

static json_t *plugin_tray_get(void *arg)
{
	struct agent *a = arg;

	return a->inf ? kube_informer_get(a->inf, a->tray) : NULL;
}

static void plugin_changed(void *arg)
{
	struct agent *a = arg;

	if (a->q != NULL)
		kube_workqueue_add(a->q, a->tray);
}

static bool check_heartbeat(void *arg, struct buf *why)
{
	struct agent *a = arg;
	int64_t last;

	pthread_mutex_lock(&a->mu);
	last = a->lease_ok_ms;
	pthread_mutex_unlock(&a->mu);
	if (last != 0 && time_mono_ms() - last <= a->cfg->lease_duration_ms)
		return true;
	(void)buf_append_str(why, "heartbeat Lease not renewed within its duration");
	return false;
}

static bool check_synced(void *arg, struct buf *why)
{
	struct agent *a = arg;

	if (a->inf != NULL && kube_informer_synced(a->inf))
		return true;
	(void)buf_append_str(why, "ComputeTray cache not synced");
	return false;
}

static enum nv_err web_start(struct agent *a)
{
	char addr[256];
	int port;
	enum nv_err rc;

	rc = agent_config_metrics_addr(a->cfg, addr, sizeof(addr), &port);
	if (rc != NV_OK || port < 0)
		return rc;
	struct web_config wc = {.name = "agent",
	                        .bind_addr = addr[0] ? addr : NULL,
	                        .port = port,
	                        .metrics = a->m.reg};
	if (a->cfg->metrics_require_token) {
		/* As the operator's: a TokenReview and a SubjectAccessReview for
		 * "get" on /metrics; the probes stay open for the kubelet. */
		if (a->access == NULL)
			a->access = kube_access_new(a->c, 0, 0, 0);
		wc.metrics_authz = kube_access_authz;
		wc.metrics_authz_arg = a->access;
	}
	rc = web_server_new(&wc, &a->web);
	if (rc == NV_OK)
		rc = web_check_add(a->web, WEB_PROBE_LIVE, "heartbeat", check_heartbeat, a);
	if (rc == NV_OK)
		rc = web_check_add(a->web, WEB_PROBE_READY, "informer", check_synced, a);
	if (rc == NV_OK)
		rc = web_server_start(a->web);
	if (rc == NV_OK)
		log_info("agent", "serving metrics and probes", "addr=%s port=%d", addr,
		         web_server_port(a->web));
	return rc;
}

/* The host layer knows nothing of kube: it polls this during long waits. */
static bool host_stopping(void *arg)
{
	return kube_stop_requested(arg);
}

enum nv_err agent_new(const struct agent_config *cfg, struct kube_client *client,
                      struct kube_stop *stop, struct agent **out, char *why, size_t whysz)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	struct host_cfg hc = {0};
	enum nv_err rc;

	a->cfg = cfg;
	a->c = client;
	a->stop = stop;
	a->last_drv_phase = -1;
	pthread_mutex_init(&a->mu, NULL);
	metrics_init(&a->m);
	why[0] = '\0';
	rc = tray_find(a, why, whysz);
	if (rc != NV_OK) {
		agent_free(a);
		return rc;
	}
	str_copy(a->lease_ns, sizeof(a->lease_ns),
	         cfg->lease_namespace[0] ? cfg->lease_namespace : kube_client_namespace(client));
	snprintf(a->lease_ref, sizeof(a->lease_ref), "%s/%s", a->lease_ns, a->tray);
	snprintf(a->identity, sizeof(a->identity), "nvl72-agent/%s",
	         cfg->node_name[0] ? cfg->node_name : a->tray);
	hc.host_root = cfg->host_root;
	hc.tool_ns = agent_config_tools_in_agent_ns(cfg) ? HOST_TOOL_NS_AGENT : HOST_TOOL_NS_HOST;
	hc.nvml_path = cfg->nvml_path;
	hc.systemctl = cfg->systemctl;
	hc.modprobe = cfg->modprobe;
	hc.modinfo = cfg->modinfo;
	hc.imex_bin = cfg->imex_bin;
	hc.imex_ctl = cfg->imex_ctl;
	hc.imex_dir = cfg->imex_dir;
	hc.state_dir = cfg->state_dir;
	hc.installer = cfg->n_installer ? (const char *const *)cfg->installer : NULL;
	hc.validation_cmd = cfg->validation_cmd;
	hc.tool_timeout_ms = cfg->tool_timeout_ms;
	hc.install_timeout_ms = cfg->install_timeout_ms;
	hc.stopping = host_stopping;
	hc.stopping_arg = stop;
	host_init(&a->host, &hc, NULL);
	log_info("agent", "owning ComputeTray", "tray=%s node=%s lease=%s", a->tray, cfg->node_name,
	         a->lease_ref);
	*out = a;
	return NV_OK;
}

const char *agent_tray_name(const struct agent *a)
{
	return a->tray;
}

static enum nv_err informer_start(struct agent *a)
{
	char sel[300];
	enum nv_err rc;

	snprintf(sel, sizeof(sel), "metadata.name=%s", a->tray);
	rc = kube_informer_new(
	        a->c, &(struct kube_informer_opts){.res = &RES_TRAYS, .field_selector = sel},
	        &a->inf);
	if (rc == NV_OK)
		rc = kube_informer_add_handler(
		        a->inf, &(struct kube_handler){on_add, on_update, on_delete, a});
	if (rc == NV_OK)
		rc = kube_informer_start(a->inf);
	return rc;
}

/* The watch of NVIDIA's slices for this Node (--node-name, else the
 * tray's spec.node), given a moment to list before the first pass. Without
 * it every pass finds the state unknown and starts no IMEX. */
static void nvidia_start(struct agent *a)
{
	json_t *t = kube_informer_get(a->inf, a->tray);
	const char *node = a->cfg->node_name[0] ? a->cfg->node_name : jx_str_or(t, "spec.node", "");

	if (agent_nvidia_start(a->c, node, a->q, a->tray, &a->nv) == NV_OK)
		(void)agent_nvidia_wait(a->nv, 0);
	else
		log_warn("agent", "cannot watch NVIDIA's DRA driver: IMEX stays off", "node=%s",
		         node);
	json_decref(t);
}

enum nv_err agent_run(struct agent *a)
{
	enum nv_err rc;

	a->q = kube_workqueue_new("computetray", NULL);
	a->plugin = agent_plugin_new(&(struct agent_plugin_opts){.cfg = a->cfg,
	                                                         .c = a->c,
	                                                         .reg = a->m.reg,
	                                                         .stop = a->stop,
	                                                         .tray_get = plugin_tray_get,
	                                                         .changed = plugin_changed,
	                                                         .arg = a});
	a->rec = kube_recorder_new(a->c, "nvl72.io/agent", a->identity);
	rc = informer_start(a);
	if (rc != NV_OK)
		goto out;
	if (pthread_create(&a->hb, NULL, heartbeat_main, a) == 0)
		a->hb_started = true;
	rc = web_start(a);
	if (rc != NV_OK) {
		log_error("agent", "metrics server did not start", "addr=%s err=%s",
		          a->cfg->metrics_bind, nv_err_name(rc));
		goto out;
	}
	while (!kube_informer_wait_synced(a->inf, 200))
		if (kube_stop_requested(a->stop))
			goto out;
	nvidia_start(a);
	a->w = kube_workers_start(a->q, 1, reconcile, a);
	kube_workqueue_add(a->q, a->tray);
	while (!kube_stop_sleep(a->stop, 1000))
		;
	log_info("agent", "stopping", "tray=%s", a->tray);
out:
	/* A pass in flight ends first (a running installer keeps going on its own). */
	kube_stop_request(a->stop);
	kube_workers_stop(a->w);
	a->w = NULL;
	agent_plugin_free(a->plugin);
	a->plugin = NULL;
	agent_nvidia_free(a->nv);
	a->nv = NULL;
	web_server_free(a->web);
	a->web = NULL;
	kube_access_free(a->access);
	a->access = NULL;
	kube_informer_free(a->inf);
	a->inf = NULL;
	if (a->hb_started)
		pthread_join(a->hb, NULL);
	a->hb_started = false;
	kube_recorder_free(a->rec);
	a->rec = NULL;
	kube_workqueue_free(a->q);
	a->q = NULL;
	return rc;
}

void agent_stats_get(struct agent *a, struct agent_stats *out)
{
	pthread_mutex_lock(&a->mu);
	*out = a->stats;
	pthread_mutex_unlock(&a->mu);
}

void agent_free(struct agent *a)
{
	if (a == NULL)
		return;
	host_clear(&a->host);
	json_decref(a->known);
	kube_client_free(a->c);
	metrics_registry_free(a->m.reg);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
