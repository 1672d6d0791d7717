// SPDX-License-Identifier: Apache-2.0
// The kubelet plugin of the DRA driver imex.nvl72.io, inside the agent: the
// registration and DRA sockets (gRPC, src/grpc), prepare and unprepare of
// IMEX channel claims through CDI specs with a record on disk, and the
// node's ResourceSlice, republished whenever it differs from what it should be.
#include "agent_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nvl72/base.h"
#include "nvl72/dra.h"
#include "nvl72/grpc.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/metrics.h"

static const struct kube_res RES_CLAIMS = {"resource.k8s.io", "v1", "resourceclaims",
                                           "ResourceClaim", true};
static const struct kube_res RES_SLICES = {"resource.k8s.io", "v1", "resourceslices",
                                           "ResourceSlice", false};

#define RECORD_FILE "dra-claims.json"
#define RECORD_MAX ((size_t)8 << 20)
#define CLAIM_GET_MS 10000 /* one claim read, within the kubelet's 45 s */
#define HOOK_ENV "NVL72_AGENT_TEST_PREPARE_PAUSE"
#define HOOK_MAX_S 120
#define SLICE_KEY "slice"

struct agent_plugin {
	struct agent_plugin_opts o;
	struct host host; /* the DRA thread's own: /proc/devices, the record */
	char reg_sock[256], dra_dir[240], dra_sock[256], record[512], slice_name[300];
	int64_t hook_ms;
	/* Lifecycle, on the reconcile worker and then agent_plugin_free. */
	bool started;
	struct grpc_server *reg, *dra;
	struct kube_informer *inf;
	struct kube_workqueue *q;
	struct kube_workers *w;
	/* The DRA thread's alone. */
	json_t *claims; /* the record's "claims" */
	/* The slice worker's alone. */
	int64_t generation;
	struct metrics_family *prepares, *unprepares, *registrations, *slice_writes;
	pthread_mutex_t mu; /* everything below */
	bool have_view;
	struct agent_dra_view view;
	bool no_registry, slices_unserved, published;
	char start_err[200], refused[200], slice_err[200];
};

/* ---- state ---- */

/* Sets one of the state strings; says whether it changed. */
static bool state_set(struct agent_plugin *p, char *field, size_t cap, const char *val)
{
	bool changed;

	pthread_mutex_lock(&p->mu);
	changed = strcmp(field, val) != 0;
	if (changed)
		(void)str_copy(field, cap, val);
	pthread_mutex_unlock(&p->mu);
	if (changed && p->o.changed != NULL)
		p->o.changed(p->o.arg);
	return changed;
}

static bool state_flag(struct agent_plugin *p, bool *field, bool val)
{
	bool changed;

	pthread_mutex_lock(&p->mu);
	changed = *field != val;
	*field = val;
	pthread_mutex_unlock(&p->mu);
	if (changed && p->o.changed != NULL)
		p->o.changed(p->o.arg);
	return changed;
}

void agent_plugin_report(struct agent_plugin *p, struct agent_plugin_report *out)
{
	const char *reason = "Serving";

	memset(out, 0, sizeof(*out));
	if (p == NULL || !p->o.cfg->kubelet_plugin)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->no_registry) {
		reason = "KubeletNotFound";
		snprintf(out->message, sizeof(out->message),
		         "%s does not exist: no kubelet on this host yet",
		         p->o.cfg->kubelet_registry_dir);
	} else if (p->start_err[0] != '\0') {
		reason = "SocketFailed";
		snprintf(out->message, sizeof(out->message), "%s", p->start_err);
	} else if (p->refused[0] != '\0') {
		reason = "RegistrationRefused";
		snprintf(out->message, sizeof(out->message), "the kubelet refused the plugin: %s",
		         p->refused);
	} else if (p->slices_unserved) {
		reason = "ResourceSlicesNotServed";
		snprintf(out->message, sizeof(out->message),
		         "resource.k8s.io/v1 is not served by the API server: no ResourceSlice is "
		         "published");
	} else if (p->slice_err[0] != '\0') {
		reason = "ResourceSliceWriteFailed";
		snprintf(out->message, sizeof(out->message), "%s", p->slice_err);
	} else if (!p->published) {
		reason = "Publishing";
		snprintf(out->message, sizeof(out->message),
		         "ResourceSlice %.200s not published yet", p->slice_name);
	} else {
		snprintf(out->message, sizeof(out->message),
		         "serving %.120s; ResourceSlice %.100s published", p->dra_sock,
		         p->slice_name);
	}
	(void)str_copy(out->reason, sizeof(out->reason), reason);
	(void)str_copy(out->status, sizeof(out->status),
	               strcmp(reason, "Serving") == 0 ? "True" : "False");
	pthread_mutex_unlock(&p->mu);
}

static void view_get(struct agent_plugin *p, struct agent_dra_view *v, bool *have)
{
	pthread_mutex_lock(&p->mu);
	*v = p->view;
	*have = p->have_view;
	pthread_mutex_unlock(&p->mu);
}

/* ---- the record ---- */

static void record_load(struct agent_plugin *p)
{
	struct buf b;
	char err[300];
	json_t *root = NULL;
	enum nv_err rc = host_read(&p->host, p->record, RECORD_MAX, &b);

	if (rc == NV_OK) {
		rc = agent_dra_record_parse(buf_str(&b), b.len, &root, err, sizeof(err));
		buf_clear(&b);
		if (rc != NV_OK)
			/* The kubelet prepares again what it still needs, and an
			 * unprepare finds a spec by the claim's UID alone. */
			log_error("agent", "record of prepared claims unreadable; starting empty",
			          "path=%s err=\"%s\"", p->record, err);
	} else if (rc != NV_E_NOT_FOUND) {
		log_error("agent", "record of prepared claims unreadable; starting empty",
		          "path=%s err=%s", p->record, nv_err_name(rc));
	}
	json_decref(p->claims);
	p->claims = root ? json_incref(json_object_get(root, "claims")) : json_object();
	json_decref(root);
	if (json_object_size(p->claims) > 0)
		log_info("agent", "prepared claims recorded", "path=%s claims=%zu", p->record,
		         json_object_size(p->claims));
}

static enum nv_err record_save(struct agent_plugin *p)
{
	json_t *root = json_pack("{s:O}", "claims", p->claims);
	char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	enum nv_err rc;

	json_decref(root);
	if (text == NULL)
		return NV_E_INTERNAL;
	rc = host_write_atomic(&p->host, p->record, text, strlen(text), 0600);
	free(text);
	return rc;
}

/* ---- prepare ---- */

static char **strs_dup(const json_t *arr, size_t *n)
{
	char **out = xcalloc(json_array_size(arr) + 1, sizeof(*out));
	const json_t *s;
	size_t i;

	json_array_foreach(arr, i, s)
		out[i] = xstrdup(json_string_value(s));
	*n = json_array_size(arr);
	return out;
}

/* The answer of a recorded claim: its devices, each with the CDI id. */
static void result_fill(const json_t *e, struct dra_prepare_result *r)
{
	const json_t *devs = json_object_get(e, "devices"), *d;
	size_t i;

	r->devices = xcalloc(json_array_size(devs) + 1, sizeof(*r->devices));
	json_array_foreach(devs, i, d) {
		struct dra_device *o = &r->devices[i];
		o->request_names =
		        strs_dup(json_object_get(d, "requestNames"), &o->n_request_names);
		o->pool_name = xstrdup(jx_str_or(d, "poolName", ""));
		o->device_name = xstrdup(jx_str_or(d, "deviceName", ""));
		o->cdi_device_ids =
		        strs_dup(json_object_get(e, "cdiDeviceIDs"), &o->n_cdi_device_ids);
	}
	r->n_devices = json_array_size(devs);
}

static enum nv_err cdi_write_entry(struct agent_plugin *p, const char *uid, const json_t *e)
{
	unsigned ch[HOST_CDI_CHANNELS_MAX];
	const json_t *c;
	struct buf b;
	size_t i, n = 0;
	enum nv_err rc;

	json_array_foreach(json_object_get(e, "channels"), i, c) {
		if (n < ARRAY_LEN(ch))
			ch[n++] = (unsigned)json_integer_value(c);
	}
	buf_init(&b, (size_t)4 << 20);
	rc = host_cdi_render(uid, (unsigned)json_integer_value(json_object_get(e, "major")), ch, n,
	                     &b);
	if (rc == NV_OK)
		rc = host_cdi_write(p->o.cfg->cdi_dir, uid, buf_str(&b), b.len);
	buf_clear(&b);
	return rc;
}

/* Reads the claim with a deadline inside the kubelet's. */
static enum nv_err claim_read(struct agent_plugin *p, const struct dra_claim *c,
                              int64_t deadline_ms, json_t **out, char *err, size_t errsz)
{
	int64_t t = CLAIM_GET_MS, left;
	struct kube_status st;
	enum nv_err rc;

	if (deadline_ms > 0) {
		left = deadline_ms - time_mono_ms() - 1000;
		if (left < t)
			t = left;
		if (t < 500) {
			snprintf(err, errsz,
			         "claim %s/%s: no time left to read it before the deadline", c->ns,
			         c->name);
			return NV_E_TIMEOUT;
		}
	}
	rc = kube_get_once(p->o.c, &RES_CLAIMS, c->ns, c->name, t, out, &st);
	if (rc == NV_E_NOT_FOUND)
		snprintf(err, errsz, "claim %s/%s: not found", c->ns, c->name);
	else if (rc != NV_OK)
		snprintf(err, errsz, "claim %s/%s: reading it: %s %.200s", c->ns, c->name,
		         nv_err_name(rc), st.message);
	return rc;
}

/* The tray's membership as the cache has it now must be the one the last
 * pass acted on (its IMEX readiness belongs to that domain). */
static enum nv_err membership_now(struct agent_plugin *p, const struct dra_claim *c,
                                  const struct agent_dra_view *v, char *err, size_t errsz)
{
	json_t *tray = p->o.tray_get ? p->o.tray_get(p->o.arg) : NULL;
	const char *now =
	        jx_path(tray, "spec.imex") ? jx_str_or(tray, "spec.imex.domainUID", "") : "";
	enum nv_err rc = NV_OK;

	if (tray == NULL || strcmp(now, v->domain_uid) != 0) {
		snprintf(err, errsz,
		         "claim %s/%s: this tray's ComputeDomain is changing (spec.imex.domainUID "
		         "\"%.64s\", last acted on \"%.64s\"); try again",
		         c->ns, c->name, now, v->domain_uid);
		rc = NV_E_STATE;
	}
	json_decref(tray);
	return rc;
}

static void hook_pause(struct agent_plugin *p, const struct dra_claim *c)
{
	if (p->hook_ms <= 0)
		return;
	log_warn("agent", "test hook: claim prepared and recorded, pausing before the answer",
	         "claim=%s/%s uid=%s pause_ms=%lld", c->ns, c->name, c->uid, (long long)p->hook_ms);
	(void)kube_stop_sleep(p->o.stop, p->hook_ms);
}

/* Prepares one claim that is not in the record. */
static enum nv_err prepare_new(struct agent_plugin *p, const struct dra_claim *c,
                               int64_t deadline_ms, json_t **entry, char *err, size_t errsz)
{
	struct agent_dra_view v;
	struct agent_dra_plan plan;
	unsigned ch[HOST_CDI_CHANNELS_MAX], major = 0;
	json_t *claim = NULL, *e;
	bool have;
	size_t n;
	enum nv_err rc;

	view_get(p, &v, &have);
	if (!have) {
		snprintf(err, errsz, "claim %s/%s: the agent has not read its tray yet", c->ns,
		         c->name);
		return NV_E_STATE;
	}
	rc = membership_now(p, c, &v, err, errsz);
	if (rc == NV_OK)
		rc = claim_read(p, c, deadline_ms, &claim, err, errsz);
	if (rc == NV_OK)
		rc = agent_dra_claim_check(claim, c->ns, c->name, c->uid, &v, &plan, err, errsz);
	json_decref(claim);
	if (rc != NV_OK)
		return rc;
	n = agent_dra_plan_channels(&plan, &v, ch, ARRAY_LEN(ch));
	p->host.err[0] = '\0';
	rc = host_channel_major(&p->host, &major);
	if (rc != NV_OK) {
		snprintf(err, errsz, "claim %s/%s: %s", c->ns, c->name, p->host.err);
		return rc;
	}
	e = agent_dra_record_entry(c->ns, c->name, c->uid, &plan, ch, n, major, time_wall_ms());
	rc = cdi_write_entry(p, c->uid, e);
	if (rc != NV_OK) {
		snprintf(err, errsz, "claim %s/%s: writing its CDI spec in %s: %s", c->ns, c->name,
		         p->o.cfg->cdi_dir, nv_err_str(rc));
		json_decref(e);
		return rc;
	}
	/* On disk before the answer: a retry after a crash finds it. */
	json_object_set(p->claims, c->uid, e);
	rc = record_save(p);
	if (rc != NV_OK) {
		bool gone;
		json_object_del(p->claims, c->uid);
		(void)host_cdi_remove(p->o.cfg->cdi_dir, c->uid, &gone);
		snprintf(err, errsz, "claim %s/%s: recording it in %s: %s", c->ns, c->name,
		         p->record, nv_err_str(rc));
		json_decref(e);
		return rc;
	}
	log_info("agent", "claim prepared",
	         "claim=%s/%s uid=%s domain=%s/%s mode=%s channels=%zu "
	         "major=%u cdi=%s=%s",
	         c->ns, c->name, c->uid, v.domain_ns, v.domain_name, plan.all ? "All" : "Single", n,
	         major, HOST_CDI_KIND, c->uid);
	hook_pause(p, c);
	*entry = e;
	return NV_OK;
}

static void prepare_one(struct agent_plugin *p, const struct dra_claim *c, int64_t deadline_ms,
                        struct dra_prepare_result *r)
{
	char err[600] = "";
	json_t *e = NULL; /* owned: the claim's record entry */
	enum nv_err rc = NV_OK;

	r->uid = xstrdup(c->uid ? c->uid : "");
	if (c->uid == NULL || c->ns == NULL || c->name == NULL) {
		snprintf(err, sizeof(err), "claim %s/%s: namespace, name and uid are all required",
		         c->ns ? c->ns : "", c->name ? c->name : "");
		rc = NV_E_INVAL;
	} else if ((e = json_incref(json_object_get(p->claims, c->uid))) != NULL) {
		/* Prepared before (a retry, or a kubelet restart): the same answer,
		 * and the spec again if something removed it. */
		if (!host_cdi_exists(p->o.cfg->cdi_dir, c->uid) &&
		    (rc = cdi_write_entry(p, c->uid, e)) != NV_OK)
			snprintf(err, sizeof(err), "claim %s/%s: rewriting its CDI spec: %s", c->ns,
			         c->name, nv_err_str(rc));
		else
			log_debug("agent", "claim already prepared", "claim=%s/%s uid=%s", c->ns,
			          c->name, c->uid);
	} else {
		rc = prepare_new(p, c, deadline_ms, &e, err, sizeof(err));
	}
	if (rc == NV_OK) {
		result_fill(e, r);
	} else {
		r->error = xstrdup(err);
		log_warn("agent", "claim not prepared", "err=\"%s\"", err);
	}
	json_decref(e);
	(void)metrics_counter_inc(p->prepares,
	                          (const char *const[]){rc == NV_OK ? "success" : "error"});
}

static enum grpc_code claims_decode(struct grpc_call *call, const char *msg,
                                    struct dra_claims_req *req)
{
	struct pb_err e;

	if (dra_claims_req_decode(call->req, call->req_len, msg, req, &e) == NV_OK)
		return GRPC_OK;
	(void)buf_append_str(&call->status_msg, e.msg);
	return GRPC_INVALID_ARGUMENT;
}

static enum grpc_code h_prepare(void *arg, struct grpc_call *call)
{
	struct agent_plugin *p = arg;
	struct dra_claims_req req;
	struct dra_prepare_resp resp = {0};
	enum grpc_code code = claims_decode(call, "NodePrepareResourcesRequest", &req);

	if (code != GRPC_OK)
		return code;
	resp.claims = xcalloc(req.n_claims + 1, sizeof(*resp.claims));
	resp.n_claims = req.n_claims;
	for (size_t i = 0; i < req.n_claims; i++)
		prepare_one(p, &req.claims[i], call->deadline_ms, &resp.claims[i]);
	if (dra_prepare_resp_encode(&resp, &call->resp) != NV_OK) {
		(void)buf_append_str(&call->status_msg, "the response is too large");
		code = GRPC_RESOURCE_EXHAUSTED;
	}
	dra_prepare_resp_clear(&resp);
	dra_claims_req_clear(&req);
	return code;
}

/* ---- unprepare ---- */

static void unprepare_one(struct agent_plugin *p, const struct dra_claim *c,
                          struct dra_unprepare_result *r)
{
	const char *uid = c->uid ? c->uid : "";
	char err[400] = "";
	bool removed = false, recorded = json_object_get(p->claims, uid) != NULL;
	enum nv_err rc;

	r->uid = xstrdup(uid);
	/* By UID alone, recorded or not: a spec a crash left unrecorded goes
	 * too. A UID that cannot name a spec has none to remove. */
	rc = host_cdi_remove(p->o.cfg->cdi_dir, uid, &removed);
	if (rc == NV_E_INVAL)
		rc = NV_OK;
	if (rc != NV_OK)
		snprintf(err, sizeof(err), "claim %s/%s: removing its CDI spec from %s: %s",
		         c->ns ? c->ns : "", c->name ? c->name : "", p->o.cfg->cdi_dir,
		         nv_err_str(rc));
	if (rc == NV_OK && recorded) {
		json_t *keep = json_incref(json_object_get(p->claims, uid));
		json_object_del(p->claims, uid);
		rc = record_save(p);
		if (rc != NV_OK) {
			json_object_set(p->claims, uid, keep);
			snprintf(err, sizeof(err),
			         "claim %.63s/%.100s: updating the record %.120s: %s",
			         c->ns ? c->ns : "", c->name ? c->name : "", p->record,
			         nv_err_str(rc));
		}
		json_decref(keep);
	}
	if (rc != NV_OK) {
		r->error = xstrdup(err);
		log_warn("agent", "claim not unprepared", "err=\"%s\"", err);
	} else if (removed || recorded) {
		log_info("agent", "claim unprepared", "claim=%s/%s uid=%s", c->ns ? c->ns : "",
		         c->name ? c->name : "", uid);
	}
	(void)metrics_counter_inc(p->unprepares,
	                          (const char *const[]){rc == NV_OK ? "success" : "error"});
}

static enum grpc_code h_unprepare(void *arg, struct grpc_call *call)
{
	struct agent_plugin *p = arg;
	struct dra_claims_req req;
	struct dra_unprepare_resp resp = {0};
	enum grpc_code code = claims_decode(call, "NodeUnprepareResourcesRequest", &req);

	if (code != GRPC_OK)
		return code;
	resp.claims = xcalloc(req.n_claims + 1, sizeof(*resp.claims));
	resp.n_claims = req.n_claims;
	for (size_t i = 0; i < req.n_claims; i++)
		unprepare_one(p, &req.claims[i], &resp.claims[i]);
	if (dra_unprepare_resp_encode(&resp, &call->resp) != NV_OK) {
		(void)buf_append_str(&call->status_msg, "the response is too large");
		code = GRPC_RESOURCE_EXHAUSTED;
	}
	dra_unprepare_resp_clear(&resp);
	dra_claims_req_clear(&req);
	return code;
}

/* ---- registration ---- */

static enum grpc_code h_get_info(void *arg, struct grpc_call *call)
{
	struct agent_plugin *p = arg;
	/* The kubelet's names for the DRA service versions it speaks
	 * (k8s.io/kubelet v0.34.4, pkg/apis/dra/v1 and v1beta1). */
	char *versions[] = {(char *)"v1.DRAPlugin", (char *)"v1beta1.DRAPlugin"};
	struct dra_plugin_info info = {.type = (char *)"DRAPlugin",
	                               .name = (char *)AGENT_DRA_DRIVER,
	                               .endpoint = p->dra_sock,
	                               .versions = versions,
	                               .n_versions = ARRAY_LEN(versions)};

	return dra_plugin_info_encode(&info, &call->resp) == NV_OK ? GRPC_OK : GRPC_INTERNAL;
}

static enum grpc_code h_notify(void *arg, struct grpc_call *call)
{
	struct agent_plugin *p = arg;
	struct dra_reg_status st;
	struct pb_err e;

	if (dra_reg_status_decode(call->req, call->req_len, &st, &e) != NV_OK) {
		(void)buf_append_str(&call->status_msg, e.msg);
		return GRPC_INVALID_ARGUMENT;
	}
	if (st.registered) {
		log_info("agent", "registered with the kubelet", "driver=%s endpoint=%s",
		         AGENT_DRA_DRIVER, p->dra_sock);
		(void)state_set(p, p->refused, sizeof(p->refused), "");
	} else {
		log_warn("agent", "the kubelet refused the plugin's registration",
		         "driver=%s err=\"%s\"", AGENT_DRA_DRIVER, st.error ? st.error : "");
		(void)state_set(p, p->refused, sizeof(p->refused),
		                st.error && st.error[0] ? st.error : "no reason given");
	}
	(void)metrics_counter_inc(p->registrations,
	                          (const char *const[]){st.registered ? "registered" : "refused"});
	dra_reg_status_clear(&st);
	return GRPC_OK; /* RegistrationStatusResponse has no fields */
}

/* ---- the ResourceSlice ---- */

static void slice_enqueue(void *ud, json_t *obj)
{
	struct agent_plugin *p = ud;

	(void)obj;
	kube_workqueue_add(p->q, SLICE_KEY);
}

static void slice_update(void *ud, json_t *o, json_t *n)
{
	(void)o;
	slice_enqueue(ud, n);
}

static void slice_delete(void *ud, json_t *obj, bool unknown)
{
	(void)unknown;
	slice_enqueue(ud, obj);
}

static void slice_result(struct agent_plugin *p, enum nv_err rc, const char *what,
                         const struct kube_status *st)
{
	char msg[200];

	(void)metrics_counter_inc(p->slice_writes,
	                          (const char *const[]){rc == NV_OK ? "success" : "error"});
	if (rc == NV_OK) {
		(void)state_set(p, p->slice_err, sizeof(p->slice_err), "");
		(void)state_flag(p, &p->published, true);
		return;
	}
	snprintf(msg, sizeof(msg), "%s ResourceSlice %.60s: %s %.80s", what, p->slice_name,
	         nv_err_name(rc), st->message);
	if (rc != NV_E_CONFLICT && rc != NV_E_EXISTS)
		(void)state_set(p, p->slice_err, sizeof(p->slice_err), msg);
	log_warn("agent", "ResourceSlice write failed", "slice=%s op=%s err=%s msg=\"%s\"",
	         p->slice_name, what, nv_err_name(rc), st->message);
}

/* Slices of this node and driver under another name (an older agent's). */
static void slice_drop_others(struct agent_plugin *p, const json_t *items)
{
	const json_t *s;
	size_t i;

	json_array_foreach(items, i, s) {
		struct kube_status st;
		const char *n = kube_obj_name(s);
		if (strcmp(n, p->slice_name) == 0)
			continue;
		if (kube_delete(p->o.c, &RES_SLICES, NULL, n, NULL, &st) == NV_OK)
			log_info("agent", "ResourceSlice of this node removed", "slice=%s", n);
	}
}

static struct kube_result slice_reconcile(void *ud, const char *key)
{
	struct agent_plugin *p = ud;
	struct kube_result res = {0};
	struct agent_dra_view v;
	struct kube_status st;
	json_t *items, *stored = NULL, *want, *s;
	bool have;
	size_t i;

	(void)key;
	view_get(p, &v, &have);
	if (!have || !kube_informer_synced(p->inf)) {
		res.requeue_after_ms = 200;
		return res;
	}
	items = kube_informer_list(p->inf);
	json_array_foreach(items, i, s) {
		if (strcmp(kube_obj_name(s), p->slice_name) == 0)
			stored = s;
	}
	slice_drop_others(p, items);
	want = agent_dra_slice_build(&v, 0);
	if (stored == NULL) {
		json_int_t g = (json_int_t)p->generation + 1;
		jx_set_take(want, "spec.pool.generation", json_integer(g));
		res.err = kube_create(p->o.c, &RES_SLICES, NULL, want, NULL, &st);
		if (res.err == NV_OK) {
			p->generation = g;
			log_info("agent", "ResourceSlice published", "slice=%s generation=%lld",
			         p->slice_name, (long long)g);
		}
		slice_result(p, res.err, "creating", &st);
	} else if (agent_dra_slice_differs(stored, want)) {
		int64_t g = json_integer_value(jx_path(stored, "spec.pool.generation"));
		json_t *patch;
		if (g < p->generation)
			g = p->generation;
		g++;
		patch = json_pack("{s:{s:s},s:{s:{s:I},s:O}}", "metadata", "resourceVersion",
		                  kube_obj_rv(stored), "spec", "pool", "generation", (json_int_t)g,
		                  "devices", jx_path(want, "spec.devices"));
		res.err = kube_patch(p->o.c, &RES_SLICES, NULL, p->slice_name,
		                     &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch,
		                     NULL, &st);
		json_decref(patch);
		if (res.err == NV_OK) {
			p->generation = g;
			log_info("agent", "ResourceSlice updated", "slice=%s generation=%lld",
			         p->slice_name, (long long)g);
		}
		slice_result(p, res.err, "updating", &st);
	} else {
		int64_t g = json_integer_value(jx_path(stored, "spec.pool.generation"));
		if (g > p->generation)
			p->generation = g;
		(void)state_set(p, p->slice_err, sizeof(p->slice_err), "");
		(void)state_flag(p, &p->published, true);
	}
	json_decref(want);
	json_decref(items);
	return res;
}

/* Whether resource.k8s.io/v1 is served; said once when it is not. */
static bool slices_served(struct agent_plugin *p, const char *sel)
{
	struct kube_status st;
	json_t *out = NULL;
	enum nv_err rc =
	        kube_list(p->o.c, &RES_SLICES, NULL,
	                  &(struct kube_list_opts){.field_selector = sel, .limit = 1}, &out, &st);

	json_decref(out);
	if (rc == NV_E_NOT_FOUND && st.http_code == 404) {
		log_error("agent",
		          "resource.k8s.io/v1 is not served: no ResourceSlice is published (the "
		          "plugin still serves the kubelet)",
		          "node=%s", p->view.node);
		(void)state_flag(p, &p->slices_unserved, true);
		return false;
	}
	return true;
}

static enum nv_err slices_start(struct agent_plugin *p)
{
	char sel[400];
	enum nv_err rc;

	if (agent_dra_slice_name(p->view.node, p->slice_name, sizeof(p->slice_name)) != NV_OK) {
		log_error("agent", "no ResourceSlice: the Node's name is too long for its name",
		          "node=%s", p->view.node);
		return NV_E_TOO_LARGE;
	}
	snprintf(sel, sizeof(sel), "spec.nodeName=%s,spec.driver=%s", p->view.node,
	         AGENT_DRA_DRIVER);
	if (!slices_served(p, sel))
		return NV_OK;
	p->q = kube_workqueue_new("resourceslice", NULL);
	rc = kube_informer_new(
	        p->o.c, &(struct kube_informer_opts){.res = &RES_SLICES, .field_selector = sel},
	        &p->inf);
	if (rc == NV_OK)
		rc = kube_informer_add_handler(
		        p->inf,
		        &(struct kube_handler){slice_enqueue, slice_update, slice_delete, p});
	if (rc == NV_OK)
		rc = kube_informer_start(p->inf);
	if (rc != NV_OK)
		return rc;
	p->w = kube_workers_start(p->q, 1, slice_reconcile, p);
	kube_workqueue_add(p->q, SLICE_KEY);
	return NV_OK;
}

/* ---- lifecycle ---- */

static void metrics_init(struct agent_plugin *p)
{
	static const char *const result[] = {"result", NULL};
	struct {
		const char *name, *help;
		struct metrics_family **f;
		const char *v[2];
	} rows[] = {
	        {"nvl72_agent_dra_prepares_total",
	         "Claims the kubelet asked the plugin to prepare, by result.",
	         &p->prepares,
	         {"success", "error"}},
	        {"nvl72_agent_dra_unprepares_total",
	         "Claims the kubelet asked the plugin to unprepare, by result.",
	         &p->unprepares,
	         {"success", "error"}},
	        {"nvl72_agent_kubelet_registrations_total",
	         "The kubelet's answers to the plugin's registration.",
	         &p->registrations,
	         {"registered", "refused"}},
	        {"nvl72_agent_resourceslice_writes_total",
	         "Writes of this node's ResourceSlice, by result.",
	         &p->slice_writes,
	         {"success", "error"}},
	};

	for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
		(void)metrics_family_register(p->o.reg,
		                              &(struct metrics_desc){rows[i].name, rows[i].help,
		                                                     METRICS_COUNTER, result, NULL,
		                                                     0, 0},
		                              rows[i].f);
		for (int k = 0; k < 2; k++)
			(void)metrics_family_touch(*rows[i].f, (const char *const[]){rows[i].v[k]});
	}
}

struct agent_plugin *agent_plugin_new(const struct agent_plugin_opts *o)
{
	struct agent_plugin *p = xcalloc(1, sizeof(*p));
	const struct agent_config *cfg = o->cfg;
	const char *hook = getenv(HOOK_ENV);
	int64_t s;

	p->o = *o;
	pthread_mutex_init(&p->mu, NULL);
	host_init(&p->host, &(struct host_cfg){.host_root = cfg->host_root}, NULL);
	snprintf(p->reg_sock, sizeof(p->reg_sock), "%s/%s-reg.sock", cfg->kubelet_registry_dir,
	         AGENT_DRA_DRIVER);
	snprintf(p->dra_dir, sizeof(p->dra_dir), "%s/%s", cfg->kubelet_plugins_dir,
	         AGENT_DRA_DRIVER);
	snprintf(p->dra_sock, sizeof(p->dra_sock), "%s/dra.sock", p->dra_dir);
	snprintf(p->record, sizeof(p->record), "%s/%s", cfg->state_dir, RECORD_FILE);
	p->claims = json_object();
	if (cfg->kubelet_plugin)
		metrics_init(p);
	if (hook != NULL && hook[0] != '\0') {
		if (parse_i64(hook, 0, HOOK_MAX_S, &s) == NV_OK) {
			p->hook_ms = s * 1000;
			log_warn("agent", "test hook on: every prepare pauses before its answer",
			         "env=%s seconds=%lld", HOOK_ENV, (long long)s);
		} else {
			log_warn("agent", "test hook ignored: not a number of seconds",
			         "env=%s max=%d", HOOK_ENV, HOOK_MAX_S);
		}
	}
	return p;
}

static enum nv_err sockets_start(struct agent_plugin *p, char *why, size_t whysz)
{
	const struct grpc_method dra_rows[] = {
	        {DRA_PATH_PREPARE, h_prepare, p},
	        {DRA_PATH_UNPREPARE, h_unprepare, p},
	        {DRA_PATH_PREPARE_V1BETA1, h_prepare, p},
	        {DRA_PATH_UNPREPARE_V1BETA1, h_unprepare, p},
	};
	const struct grpc_method reg_rows[] = {
	        {DRA_PATH_GET_INFO, h_get_info, p},
	        {DRA_PATH_NOTIFY, h_notify, p},
	};
	enum nv_err rc;

	if (mkdir(p->dra_dir, 0750) != 0 && errno != EEXIST) {
		snprintf(why, whysz, "making %.120s: %s", p->dra_dir, strerror(errno));
		return NV_E_IO;
	}
	/* The DRA socket first: the kubelet dials the endpoint GetInfo names
	 * as soon as it sees the registration socket. */
	rc = grpc_server_new(&(struct grpc_config){.name = "dra",
	                                           .socket_path = p->dra_sock,
	                                           .methods = dra_rows,
	                                           .n_methods = ARRAY_LEN(dra_rows)},
	                     &p->dra);
	if (rc == NV_OK)
		rc = grpc_server_start(p->dra);
	if (rc != NV_OK) {
		snprintf(why, whysz, "serving %.150s: %s", p->dra_sock, nv_err_str(rc));
		return rc;
	}
	rc = grpc_server_new(&(struct grpc_config){.name = "registration",
	                                           .socket_path = p->reg_sock,
	                                           .methods = reg_rows,
	                                           .n_methods = ARRAY_LEN(reg_rows)},
	                     &p->reg);
	if (rc == NV_OK)
		rc = grpc_server_start(p->reg);
	if (rc != NV_OK)
		snprintf(why, whysz, "serving %.150s: %s", p->reg_sock, nv_err_str(rc));
	return rc;
}

static void plugin_start(struct agent_plugin *p)
{
	struct stat sb;
	char why[200] = "";
	enum nv_err rc;

	if (stat(p->o.cfg->kubelet_registry_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		if (state_flag(p, &p->no_registry, true))
			log_warn("agent", "kubelet plugin waits: no kubelet registration folder",
			         "dir=%s", p->o.cfg->kubelet_registry_dir);
		return;
	}
	(void)state_flag(p, &p->no_registry, false);
	record_load(p);
	rc = sockets_start(p, why, sizeof(why));
	if (rc != NV_OK) {
		grpc_server_free(p->dra);
		grpc_server_free(p->reg);
		p->dra = p->reg = NULL;
		if (state_set(p, p->start_err, sizeof(p->start_err), why))
			log_error("agent", "kubelet plugin did not start", "err=\"%s\"", why);
		return;
	}
	(void)state_set(p, p->start_err, sizeof(p->start_err), "");
	p->started = true;
	log_info("agent", "kubelet plugin serving", "driver=%s registration=%s dra=%s cdi=%s",
	         AGENT_DRA_DRIVER, p->reg_sock, p->dra_sock, p->o.cfg->cdi_dir);
	rc = slices_start(p);
	if (rc != NV_OK)
		log_error("agent", "ResourceSlice publisher did not start", "err=%s",
		          nv_err_name(rc));
}

void agent_plugin_update(struct agent_plugin *p, const struct agent_dra_view *v)
{
	bool changed;

	if (!p->o.cfg->kubelet_plugin)
		return;
	pthread_mutex_lock(&p->mu);
	changed = !p->have_view || memcmp(&p->view, v, sizeof(*v)) != 0;
	p->view = *v;
	p->have_view = true;
	pthread_mutex_unlock(&p->mu);
	if (!p->started)
		plugin_start(p);
	if (changed && p->q != NULL)
		kube_workqueue_add(p->q, SLICE_KEY);
}

void agent_plugin_free(struct agent_plugin *p)
{
	if (p == NULL)
		return;
	/* Registration first, so the kubelet stops dialling a plugin going away. */
	grpc_server_free(p->reg);
	grpc_server_free(p->dra);
	kube_workers_stop(p->w);
	kube_informer_free(p->inf);
	kube_workqueue_free(p->q);
	json_decref(p->claims);
	host_clear(&p->host);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
