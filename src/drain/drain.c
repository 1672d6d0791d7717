// SPDX-License-Identifier: Apache-2.0
// Draining compute trays for maintenance: the per-pod rules (drain_plan_*,
// pure) and one pass against the API (drain_nodes, drain_release). Nothing
// is kept between passes but what the API holds: each Node's cordon with its
// owner annotation and each Pod's checkpoint request with its deadline.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/log.h"
#include "nvl72/timeutil.h"
#include "drain_int.h"

#define DRAIN_COMP "drain"
/* Writes retried after a conflict, each on a fresh read. */
#define WRITE_TRIES 5

/* ---- the rules ---- */

const char *drain_act_name(enum drain_act a)
{
	static const char *const names[] = {"skip", "terminating", "ask", "wait", "hold", "evict"};
	return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}

static const char *annotation(const json_t *pod, const char *key)
{
	const json_t *a = jx_path(pod, "metadata.annotations");
	const json_t *v = json_is_object(a) ? json_object_get(a, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

json_t *drain_cordon_patch(const json_t *node, const char *owner, bool want)
{
	bool unsched = json_is_true(jx_path(node, "spec.unschedulable"));
	const char *by = annotation(node, DRAIN_ANN_CORDONED_BY);
	if (by == NULL)
		by = "";
	const char *rv = jx_str_or(node, "metadata.resourceVersion", "");
	bool ours = strcmp(by, owner) == 0;

	if (want) {
		if (unsched)
			return NULL; /* ours already, or someone else's: leave it */
		return json_pack("{s:{s:s,s:{s:s}},s:{s:b}}", "metadata", "resourceVersion", rv,
		                 "annotations", DRAIN_ANN_CORDONED_BY, owner, "spec",
		                 "unschedulable", 1);
	}
	if (!ours)
		return NULL;
	if (!unsched) /* uncordoned by hand: only drop our mark */
		return json_pack("{s:{s:s,s:{s:n}}}", "metadata", "resourceVersion", rv,
		                 "annotations", DRAIN_ANN_CORDONED_BY);
	return json_pack("{s:{s:s,s:{s:n}},s:{s:n}}", "metadata", "resourceVersion", rv,
	                 "annotations", DRAIN_ANN_CORDONED_BY, "spec", "unschedulable");
}

static bool daemonset_owned(const json_t *pod)
{
	const json_t *refs = jx_path(pod, "metadata.ownerReferences");
	json_t *r;
	size_t i;

	json_array_foreach(refs, i, r) {
		if (strcmp(jx_str_or(r, "kind", ""), "DaemonSet") == 0)
			return true;
	}
	return false;
}

static bool finished(const json_t *pod)
{
	const char *phase = jx_str_or(pod, "status.phase", "");
	return strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
}

int64_t drain_deadline_for(const struct drain_policy *p, int64_t now_ms)
{
	int64_t wait = p->checkpoint_deadline_ms > 0 ? p->checkpoint_deadline_ms : 0;
	return (now_ms + wait + 999) / 1000 * 1000;
}

int64_t drain_backoff_ms(const struct drain_policy *p, int64_t now_ms)
{
	int64_t b;

	if (p->started_ms <= 0 || p->started_ms > now_ms)
		return 2000;
	b = (now_ms - p->started_ms) / 4;
	return b < 1000 ? 1000 : b > 30000 ? 30000 : b;
}

static void decide(struct drain_pod *d, enum drain_act act, const char *why)
{
	d->act = act;
	d->why = why;
}

/* Checkpoint mode. A deadline once written is kept: restarts and other
 * replicas read it back instead of granting a new one. */
static void checkpoint_classify(struct drain_pod *d, const char *req, const struct drain_policy *p,
                                int64_t now_ms)
{
	if (req && time_parse_rfc3339(req, &d->deadline_ms) != NV_OK) {
		d->deadline_ms = 0;
		d->bad_deadline = true;
	}
	if (annotation(d->pod, DRAIN_ANN_CHECKPOINT_ACK)) {
		decide(d, DRAIN_ACT_EVICT, "checkpoint acknowledged");
	} else if (req == NULL) {
		d->deadline_ms = drain_deadline_for(p, now_ms);
		decide(d, DRAIN_ACT_ASK, "checkpoint requested");
	} else if (d->bad_deadline) {
		decide(d, DRAIN_ACT_EVICT, "deadline unreadable");
	} else if (now_ms >= d->deadline_ms) {
		decide(d, DRAIN_ACT_EVICT, "deadline passed");
	} else {
		decide(d, DRAIN_ACT_WAIT, "waiting for the checkpoint");
	}
}

void drain_pod_classify(const json_t *pod, const struct drain_policy *p, int64_t now_ms,
                        struct drain_pod *out)
{
	const char *req = annotation(pod, DRAIN_ANN_CHECKPOINT);
	const json_t *labels = jx_path(pod, "metadata.labels");
	const json_t *g = json_is_object(labels) ? json_object_get(labels, DRAIN_LABEL_GANG) : NULL;

	memset(out, 0, sizeof(*out));
	out->pod = pod;
	snprintf(out->key, sizeof(out->key), "%s/%s", jx_str_or(pod, "metadata.namespace", ""),
	         jx_str_or(pod, "metadata.name", ""));
	if (json_is_string(g) && json_string_value(g)[0] != '\0')
		out->gang = json_string_value(g);

	if (daemonset_owned(pod))
		decide(out, DRAIN_ACT_SKIP, "owned by a DaemonSet");
	else if (annotation(pod, DRAIN_ANN_MIRROR))
		decide(out, DRAIN_ACT_SKIP, "mirror pod");
	else if (jx_path(pod, "metadata.deletionTimestamp") != NULL)
		decide(out, DRAIN_ACT_TERMINATING, "being deleted");
	else if (finished(pod))
		decide(out, DRAIN_ACT_SKIP, "finished");
	else if (p->mode != API_DRAIN_CHECKPOINT)
		decide(out, DRAIN_ACT_EVICT, "Evict mode");
	else
		checkpoint_classify(out, req, p, now_ms);
}

/* ---- claims of our DRA driver ---- */

unsigned drain_pod_claim_names(const json_t *pod, const char **names, unsigned cap)
{
	const json_t *refs = jx_path(pod, "spec.resourceClaims"), *r, *st, *s;
	unsigned n = 0;
	size_t i, k;

	json_array_foreach(refs, i, r) {
		const char *ref = jx_str_or(r, "name", "");
		const char *claim = jx_str_or(r, "resourceClaimName", "");
		if (n >= cap)
			break;
		/* A claim made from a template: the name the pod's status
		 * records for this reference once it exists. */
		st = jx_path(pod, "status.resourceClaimStatuses");
		json_array_foreach(st, k, s) {
			if (claim[0] == '\0' && strcmp(jx_str_or(s, "name", ""), ref) == 0)
				claim = jx_str_or(s, "resourceClaimName", "");
		}
		if (claim[0] != '\0')
			names[n++] = claim;
	}
	return n;
}

bool drain_pod_wants_claims(const json_t *pod)
{
	const char *one;
	return !daemonset_owned(pod) && annotation(pod, DRAIN_ANN_MIRROR) == NULL &&
	       !finished(pod) && drain_pod_claim_names(pod, &one, 1) == 1;
}

/* The parameters of the opaque config entry of our driver in configs
 * (DeviceClaimConfiguration or DeviceAllocationConfiguration entries) that
 * applies to request (no requests listed: every request), or NULL. */
static const json_t *opaque_params(const json_t *configs, const char *request)
{
	const json_t *c, *r;
	size_t i, k;

	json_array_foreach(configs, i, c) {
		bool applies = json_array_size(json_object_get(c, "requests")) == 0;
		if (strcmp(jx_str_or(c, "opaque.driver", ""), DRAIN_DRA_DRIVER) != 0)
			continue;
		json_array_foreach(json_object_get(c, "requests"), k, r)
			applies |= json_is_string(r) && strcmp(json_string_value(r), request) == 0;
		if (applies && json_is_object(jx_path(c, "opaque.parameters")))
			return jx_path(c, "opaque.parameters");
	}
	return NULL;
}

bool drain_claim_read(const json_t *claim, const char *node, struct drain_claim *out)
{
	const json_t *results = jx_path(claim, "status.allocation.devices.results"), *r;
	const json_t *params = NULL, *hit = NULL;
	size_t i;

	json_array_foreach(results, i, r) {
		if (strcmp(jx_str_or(r, "driver", ""), DRAIN_DRA_DRIVER) == 0 &&
		    strcmp(jx_str_or(r, "pool", ""), node) == 0) {
			hit = r;
			break;
		}
	}
	if (hit == NULL)
		return false;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", jx_str_or(claim, "metadata.name", ""));
	snprintf(out->device, sizeof(out->device), "%s", jx_str_or(hit, "device", ""));
	params = opaque_params(jx_path(claim, "status.allocation.devices.config"),
	                       jx_str_or(hit, "request", ""));
	if (params == NULL)
		params = opaque_params(jx_path(claim, "spec.devices.config"),
		                       jx_str_or(hit, "request", ""));
	if (params) {
		snprintf(out->domain, sizeof(out->domain), "%s", jx_str_or(params, "domain", ""));
		snprintf(out->domain_uid, sizeof(out->domain_uid), "%s",
		         jx_str_or(params, "domainUID", ""));
	}
	return true;
}

/* Notes the claims of our driver the pod holds on its node, from the
 * claims the pass read. */
static void pod_claims(struct drain_pod *d, const json_t *claims)
{
	const char *names[DRAIN_CLAIMS_PER_POD];
	const char *ns = jx_str_or(d->pod, "metadata.namespace", "");
	const char *node = jx_str_or(d->pod, "spec.nodeName", "");
	unsigned n = drain_pod_claim_names(d->pod, names, DRAIN_CLAIMS_PER_POD);
	struct drain_claim c;
	char key[600];

	if (claims == NULL || d->act == DRAIN_ACT_SKIP || node[0] == '\0')
		return;
	for (unsigned i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s/%s", ns, names[i]);
		if (!drain_claim_read(json_object_get(claims, key), node, &c))
			continue;
		if (d->nclaims++ == 0)
			d->claim = c;
	}
	if (d->nclaims == 0)
		return;
	if (d->claim.domain_uid[0])
		snprintf(d->domain_gang, sizeof(d->domain_gang), "cd:%s", d->claim.domain_uid);
	else if (d->claim.domain[0])
		snprintf(d->domain_gang, sizeof(d->domain_gang), "cd:%s", d->claim.domain);
}

static bool waits(const struct drain_pod *d)
{
	return d->act == DRAIN_ACT_ASK || d->act == DRAIN_ACT_WAIT;
}

/* Whether a member of d's gangs (its job label, its ComputeDomain) still
 * waits for its checkpoint. */
static bool gang_waits(const struct drain_plan *pl, const struct drain_pod *d)
{
	for (unsigned i = 0; i < pl->n; i++) {
		const struct drain_pod *o = &pl->pods[i];
		if (!waits(o))
			continue;
		if (d->gang && o->gang && strcmp(d->gang, o->gang) == 0)
			return true;
		if (d->domain_gang[0] && strcmp(d->domain_gang, o->domain_gang) == 0)
			return true;
	}
	return false;
}

void drain_plan_build(const json_t *pods, const json_t *claims, const struct drain_policy *p,
                      int64_t now_ms, struct drain_plan *out)
{
	size_t n = json_array_size(pods);

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return;
	out->pods = xcalloc(n, sizeof(*out->pods));
	for (size_t i = 0; i < n; i++) {
		struct drain_pod *d = &out->pods[out->n++];
		drain_pod_classify(json_array_get(pods, i), p, now_ms, d);
		pod_claims(d, claims);
		if (waits(d) &&
		    (out->first_deadline_ms == 0 || d->deadline_ms < out->first_deadline_ms))
			out->first_deadline_ms = d->deadline_ms;
	}
	/* A gang moves together: while one member on these nodes still waits
	 * for its checkpoint, the others stay too. */
	for (unsigned i = 0; i < out->n; i++) {
		struct drain_pod *d = &out->pods[i];
		if (d->act == DRAIN_ACT_EVICT && (d->gang || d->domain_gang[0]) &&
		    gang_waits(out, d))
			decide(d, DRAIN_ACT_HOLD, "waiting for its gang");
	}
}

void drain_claims_note(const struct drain_plan *pl, char *out, size_t cap)
{
	size_t len = 0;
	unsigned shown = 0, total = 0;
	char one[900], more[48];

	if (cap == 0)
		return;
	out[0] = '\0';
	for (unsigned i = 0; i < pl->n; i++)
		total += pl->pods[i].nclaims > 0;
	if (total == 0)
		return;
	len = (size_t)snprintf(out, cap, "%s: ", DRAIN_CLAIMS_NOTE);
	if (len >= cap)
		len = cap - 1;
	for (unsigned i = 0; i < pl->n; i++) {
		const struct drain_pod *d = &pl->pods[i];
		const char *ns = jx_str_or(d->pod, "metadata.namespace", "");
		size_t w;

		if (d->nclaims == 0)
			continue;
		w = (size_t)snprintf(
		        one, sizeof(one),
		        "%sResourceClaim %s/%s%s of pod %s (ComputeDomain %s, node %s)",
		        shown ? "; " : "", ns, d->claim.name, d->nclaims > 1 ? " and more" : "",
		        d->key, d->claim.domain[0] ? d->claim.domain : "unnamed",
		        jx_str_or(d->pod, "spec.nodeName", ""));
		/* Room is kept for the count of those left out. */
		snprintf(more, sizeof(more), "; and %u more", total - shown - 1);
		if (len + w + (shown + 1 < total ? strlen(more) : 0) >= cap)
			break;
		memcpy(out + len, one, w + 1);
		len += w;
		shown++;
	}
	if (shown == 0) { /* not even one fits: the count alone */
		snprintf(out, cap, "%s: %u pods", DRAIN_CLAIMS_NOTE, total);
		return;
	}
	if (shown < total)
		snprintf(out + len, cap - len, "; and %u more", total - shown);
}

void drain_message_join(char *out, size_t cap, const char *core, const char *note)
{
	size_t nl = strlen(note), keep;

	if (cap == 0)
		return;
	if (nl == 0) {
		snprintf(out, cap, "%s", core);
		return;
	}
	if (nl + 3 > cap) { /* the note alone, cut */
		snprintf(out, cap, "%s", note);
		return;
	}
	keep = cap - nl - 3; /* "; " and the NUL */
	snprintf(out, cap, "%.*s; %s", (int)(strlen(core) < keep ? strlen(core) : keep), core,
	         note);
}

void drain_message_keep_claims(char *msg, size_t cap, const char *before)
{
	const char *note = before ? strstr(before, DRAIN_CLAIMS_NOTE) : NULL;
	char core[1024];

	if (note == NULL || strstr(msg, DRAIN_CLAIMS_NOTE) != NULL)
		return;
	snprintf(core, sizeof(core), "%s", msg);
	drain_message_join(msg, cap, core, note);
}

void drain_plan_clear(struct drain_plan *pl)
{
	free(pl->pods);
	memset(pl, 0, sizeof(*pl));
}

/* ---- the API side ---- */

/* Prefixes st->message with what was being done, so that the error names
 * the object. */
__attribute__((format(printf, 2, 3))) static void st_prefix(struct kube_status *st, const char *fmt,
                                                            ...)
{
	char what[200], msg[sizeof(st->message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	memcpy(msg, st->message, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	/* A long apiserver message is cut, never the object's name. */
	if (snprintf(st->message, sizeof(st->message), "%s: %s", what, msg[0] ? msg : "failed") < 0)
		st->message[0] = '\0';
}

static void st_say(struct kube_status *st, const char *msg)
{
	memset(st, 0, sizeof(*st));
	st->retry_after_s = -1;
	snprintf(st->message, sizeof(st->message), "%s", msg);
}

/* Adds to *patch (made when NULL, with node's resourceVersion) the labels
 * of want (label -> string or null) that node does not have yet. */
static void labels_add(json_t **patch, const json_t *node, const json_t *want)
{
	const json_t *have = jx_path(node, "metadata.labels"), *v, *cur;
	const char *key;
	json_t *meta, *labels;

	json_object_foreach((json_t *)want, key, v) {
		cur = json_is_object(have) ? json_object_get(have, key) : NULL;
		if (json_is_null(v) ? cur == NULL : json_equal(cur, v))
			continue;
		if (*patch == NULL)
			*patch = json_object();
		if ((meta = json_object_get(*patch, "metadata")) == NULL) {
			meta = json_pack("{s:s}", "resourceVersion",
			                 jx_str_or(node, "metadata.resourceVersion", ""));
			json_object_set_new(*patch, "metadata", meta);
		}
		if ((labels = json_object_get(meta, "labels")) == NULL) {
			labels = json_object();
			json_object_set_new(meta, "labels", labels);
		}
		json_object_set(labels, key, (json_t *)v);
	}
}

/* Cordons (want) or uncordons node for owner, with the labels of w. Each
 * try reads the Node (the first starts from w's cached copy when there is
 * one) and writes with its resourceVersion; a conflict means someone else
 * wrote in between, so the decision is made again on a fresh read. */
static enum nv_err node_cordon(struct kube_client *c, const char *node, const char *owner,
                               bool want, const json_t *cached, const json_t *labels,
                               struct kube_status *st)
{
	const struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
	enum nv_err rc = NV_E_CONFLICT;

	for (int i = 0; i < WRITE_TRIES + (cached != NULL) && rc == NV_E_CONFLICT; i++) {
		json_t *n = NULL, *patch;
		if (i == 0 && cached) {
			n = json_incref((json_t *)cached);
			rc = NV_OK;
		} else {
			rc = kube_get(c, &KUBE_RES_NODES, NULL, node, &n, st);
		}
		if (rc == NV_E_NOT_FOUND && !want)
			return NV_OK; /* gone: nothing left to uncordon */
		if (rc != NV_OK)
			break;
		patch = drain_cordon_patch(n, owner, want);
		if (json_is_object(labels))
			labels_add(&patch, n, labels);
		json_decref(n);
		if (patch == NULL)
			return NV_OK;
		rc = kube_patch(c, &KUBE_RES_NODES, NULL, node, &po, patch, NULL, st);
		json_decref(patch);
		if (rc == NV_OK)
			log_info(DRAIN_COMP, want ? "node cordoned" : "node uncordoned",
			         "node=%s owner=%s", node, owner);
	}
	if (rc != NV_OK)
		st_prefix(st, "node %s: %s", node, want ? "cordon" : "uncordon");
	return rc;
}

/* Appends the pods bound to node to all: one LIST with a spec.nodeName
 * field selector, so only these pods are ever read. */
static enum nv_err pods_on(struct kube_client *c, const char *node, json_t *all,
                           struct kube_status *st)
{
	char sel[300];
	struct kube_list_opts o = {.field_selector = sel};
	json_t *l = NULL, *it;
	enum nv_err rc;
	size_t i;

	snprintf(sel, sizeof(sel), "spec.nodeName=%s", node);
	if ((rc = kube_list_all(c, &KUBE_RES_PODS, NULL, &o, &l, st)) != NV_OK) {
		st_prefix(st, "node %s: list pods", node);
		return rc;
	}
	json_array_foreach(json_object_get(l, "items"), i, it) {
		if (json_array_size(all) >= DRAIN_MAX_PODS) {
			st_say(st, "");
			snprintf(st->message, sizeof(st->message),
			         "node %s: more than %d pods on the drained nodes", node,
			         DRAIN_MAX_PODS);
			rc = NV_E_TOO_LARGE;
			break;
		}
		json_array_append(all, it);
	}
	json_decref(l);
	return rc;
}

static const struct kube_res RES_CLAIMS = {"resource.k8s.io", "v1", "resourceclaims",
                                           "ResourceClaim", true};

/* Reads the ResourceClaims the pods of all name (only pods the drain may
 * move), each once, into a new object from "<namespace>/<name>" to the
 * claim: on demand, for the pods on the drained nodes only, so the
 * operator never caches the cluster's claims. A claim that is gone is
 * left out; any other failure ends the pass naming the pod and claim. */
static enum nv_err claims_read(struct kube_client *c, const json_t *all, json_t **out,
                               struct kube_status *st)
{
	json_t *claims = json_object(), *pod;
	enum nv_err rc = NV_OK;
	size_t i, nread = 0;

	json_array_foreach(all, i, pod) {
		const char *names[DRAIN_CLAIMS_PER_POD];
		const char *ns = jx_str_or(pod, "metadata.namespace", "");
		unsigned n;

		if (!drain_pod_wants_claims(pod))
			continue;
		n = drain_pod_claim_names(pod, names, DRAIN_CLAIMS_PER_POD);
		for (unsigned k = 0; k < n && rc == NV_OK; k++) {
			char key[600];
			json_t *cl = NULL;

			snprintf(key, sizeof(key), "%s/%s", ns, names[k]);
			if (json_object_get(claims, key) != NULL)
				continue;
			if (nread++ >= DRAIN_MAX_CLAIMS) {
				st_say(st, "");
				snprintf(st->message, sizeof(st->message),
				         "more than %d ResourceClaims named by the pods on the "
				         "drained nodes",
				         DRAIN_MAX_CLAIMS);
				rc = NV_E_TOO_LARGE;
				break;
			}
			rc = kube_get(c, &RES_CLAIMS, ns, names[k], &cl, st);
			if (rc == NV_E_NOT_FOUND) {
				rc = NV_OK;
				cl = json_null();
			} else if (rc != NV_OK) {
				st_prefix(st, "pod %s/%s: read ResourceClaim %s", ns,
				          jx_str_or(pod, "metadata.name", ""), names[k]);
				break;
			}
			json_object_set_new(claims, key, cl);
		}
		if (rc != NV_OK)
			break;
	}
	if (rc != NV_OK) {
		json_decref(claims);
		return rc;
	}
	*out = claims;
	return NV_OK;
}

/* Writes the checkpoint request with the pod's resourceVersion. On a
 * conflict (the kubelet or the workload wrote in between) the pod is read
 * again: a request already there (another pass got in first) is kept. */
static enum nv_err pod_ask(struct kube_client *c, const struct drain_pod *d, struct kube_status *st)
{
	const struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
	const char *ns = jx_str_or(d->pod, "metadata.namespace", "");
	const char *name = jx_str_or(d->pod, "metadata.name", "");
	char when[TIME_RFC3339_LEN];
	json_t *cur = json_incref((json_t *)d->pod), *patch;
	enum nv_err rc = NV_E_CONFLICT;

	time_format_rfc3339(d->deadline_ms, when);
	for (int i = 0; i < WRITE_TRIES && rc == NV_E_CONFLICT; i++) {
		if (i > 0) {
			json_decref(cur);
			cur = NULL;
			if ((rc = kube_get(c, &KUBE_RES_PODS, ns, name, &cur, st)) != NV_OK)
				break;
			if (annotation(cur, DRAIN_ANN_CHECKPOINT) != NULL)
				break;
		}
		patch = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "resourceVersion",
		                  jx_str_or(cur, "metadata.resourceVersion", ""), "annotations",
		                  DRAIN_ANN_CHECKPOINT, when);
		rc = kube_patch(c, &KUBE_RES_PODS, ns, name, &po, patch, NULL, st);
		json_decref(patch);
	}
	json_decref(cur);
	return rc;
}

/* Evicts through policy/v1 Eviction (PDBs decide), or deletes when forced.
 * Either way only this pod: a new pod of the same name is not touched. One
 * attempt: a refusal is the answer for this pass, not something to retry
 * inside it. */
static enum nv_err pod_evict(struct kube_client *c, const struct drain_pod *d, bool force,
                             struct kube_status *st)
{
	const char *ns = jx_str_or(d->pod, "metadata.namespace", "");
	const char *name = jx_str_or(d->pod, "metadata.name", "");
	const char *uid = jx_str_or(d->pod, "metadata.uid", "");
	char path[600];
	json_t *body;
	enum nv_err rc;

	if (force) {
		const struct kube_delete_opts o = {.grace_period_s = -1,
		                                   .precondition_uid = uid[0] ? uid : NULL};
		return kube_delete(c, &KUBE_RES_PODS, ns, name, &o, st);
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/eviction", ns, name);
	body = json_pack("{s:s,s:s,s:{s:s,s:s},s:{}}", "apiVersion", "policy/v1", "kind",
	                 "Eviction", "metadata", "name", name, "namespace", ns, "deleteOptions");
	if (uid[0])
		jx_set_take(body, "deleteOptions.preconditions", json_pack("{s:s}", "uid", uid));
	{
		const struct kube_raw_req r = {.method = "POST",
		                               .path = path,
		                               .content_type = "application/json",
		                               .body = body,
		                               .no_retry = true};
		rc = kube_request(c, &r, NULL, st);
	}
	json_decref(body);
	return rc;
}

/* What one pass did, beyond the counters of the result. */
struct pass {
	struct drain_result *res;
	int forced;
	char refusal[sizeof(((struct drain_result *)0)->message)]; /* the first PDB refusal */
	int retry_after_s;
	bool recheck;    /* something changed under us: look again soon */
	enum nv_err err; /* the first API failure */
	struct kube_status *st;
};

static void pass_fail(struct pass *ps, enum nv_err rc, const struct drain_pod *d, const char *what,
                      struct kube_status *one)
{
	log_warn(DRAIN_COMP, "pod write failed", "pod=%s action=%s err=%s msg=\"%s\"", d->key, what,
	         nv_err_name(rc), one->message);
	if (ps->err != NV_OK)
		return;
	ps->err = rc;
	*ps->st = *one;
	st_prefix(ps->st, "pod %s: %s", d->key, what);
}

static void act_ask(struct kube_client *c, struct pass *ps, const struct drain_pod *d,
                    const char *node)
{
	struct kube_status one;
	enum nv_err rc = pod_ask(c, d, &one);

	ps->res->pods++;
	if (rc == NV_OK) {
		char when[TIME_RFC3339_LEN];
		time_format_rfc3339(d->deadline_ms, when);
		ps->res->waiting_ack++;
		log_info(DRAIN_COMP, "checkpoint requested", "pod=%s node=%s deadline=%s", d->key,
		         node, when);
	} else if (rc == NV_E_CONFLICT || rc == NV_E_NOT_FOUND) {
		ps->recheck = true;
	} else {
		pass_fail(ps, rc, d, "checkpoint request", &one);
	}
}

static void act_evict(struct kube_client *c, struct pass *ps, const struct drain_pod *d,
                      const char *node, bool force)
{
	struct kube_status one;
	enum nv_err rc = pod_evict(c, d, force, &one);
	const char *causes = one.causes;

	/* Causes without a field ("-: ...") read better without the mark. */
	if (strncmp(causes, "-: ", 3) == 0)
		causes += 3;

	if (rc == NV_OK) {
		ps->res->evicted++;
		ps->res->terminating++;
		ps->forced += force;
		if (d->nclaims > 0)
			log_warn(DRAIN_COMP, "pod holding an IMEX channel claim moved off its tray",
			         "pod=%s node=%s claim=%s/%s domain=%s driver=%s", d->key, node,
			         jx_str_or(d->pod, "metadata.namespace", ""), d->claim.name,
			         d->claim.domain[0] ? d->claim.domain : "-", DRAIN_DRA_DRIVER);
		if (force)
			log_warn(DRAIN_COMP,
			         "pod deleted (forced, PodDisruptionBudgets not consulted)",
			         "pod=%s node=%s why=\"%s\"", d->key, node, d->why);
		else
			log_info(DRAIN_COMP, "pod evicted", "pod=%s node=%s why=\"%s\"", d->key,
			         node, d->why);
	} else if (rc == NV_E_NOT_FOUND || rc == NV_E_CONFLICT) {
		ps->recheck = true; /* gone, or replaced by a new pod of that name */
	} else if (rc == NV_E_THROTTLED) {
		ps->res->pods++;
		/* The causes carry the budget's name and its arithmetic. */
		if (ps->res->blocked++ == 0 &&
		    snprintf(ps->refusal, sizeof(ps->refusal),
		             "pod %s: eviction refused by a PodDisruptionBudget: %s%s%s%s", d->key,
		             one.message[0] ? one.message : "429 Too Many Requests",
		             causes[0] ? " (" : "", causes, causes[0] ? ")" : "") < 0)
			ps->refusal[0] = '\0';
		if (one.retry_after_s > ps->retry_after_s)
			ps->retry_after_s = one.retry_after_s;
		log_info(DRAIN_COMP, "eviction refused by a PodDisruptionBudget",
		         "pod=%s node=%s msg=\"%s\"", d->key, node, one.message);
	} else {
		ps->res->pods++;
		pass_fail(ps, rc, d, force ? "delete" : "evict", &one);
	}
}

__attribute__((format(printf, 2, 3))) static void msg_add(struct drain_result *res, const char *fmt,
                                                          ...)
{
	size_t len = strlen(res->message);
	va_list ap;

	if (len + 1 >= sizeof(res->message))
		return;
	va_start(ap, fmt);
	vsnprintf(res->message + len, sizeof(res->message) - len, fmt, ap);
	va_end(ap);
}

static void pass_message(const struct pass *ps, const struct drain_plan *pl, unsigned nodes)
{
	struct drain_result *res = ps->res;
	const char *s = nodes == 1 ? "" : "s";
	int64_t first_deadline_ms = pl->first_deadline_ms;
	char core[sizeof(res->message)];

	res->message[0] = '\0';
	if (res->blocked > 0) {
		msg_add(res, "%s", ps->refusal);
		if (res->blocked > 1)
			msg_add(res, " (%d pods refused in all)", res->blocked);
	} else if (res->done) {
		msg_add(res, "%u node%s drained: cordoned, no pod left to evict", nodes, s);
	} else {
		msg_add(res, "draining %u node%s: %d pod%s to move", nodes, s, res->pods,
		        res->pods == 1 ? "" : "s");
		if (res->waiting_ack > 0) {
			char when[TIME_RFC3339_LEN];
			time_format_rfc3339(first_deadline_ms, when);
			msg_add(res, ", %d waiting for a checkpoint (first deadline %s)",
			        res->waiting_ack, when);
		}
		if (res->held > 0)
			msg_add(res, ", %d held with their gang", res->held);
		if (res->evicted > 0)
			msg_add(res, ", %d evicted now", res->evicted);
		if (res->terminating > 0)
			msg_add(res, ", %d terminating", res->terminating);
	}
	if (ps->forced > 0)
		msg_add(res, "; forced: %d pod%s deleted without the Eviction API", ps->forced,
		        ps->forced == 1 ? "" : "s");
	/* A tray is never pulled from under a claim of our driver unsaid. */
	drain_claims_note(pl, res->claims, sizeof(res->claims));
	for (unsigned i = 0; i < pl->n; i++)
		res->claim_pods += pl->pods[i].nclaims > 0;
	memcpy(core, res->message, sizeof(core));
	drain_message_join(res->message, sizeof(res->message), core, res->claims);
}

static bool args_ok(const char *const *nodes, unsigned n, const char *owner, struct kube_status *st)
{
	if (owner == NULL || owner[0] == '\0') {
		st_say(st, "drain: the owner is required (e.g. rackupgrade/<name>)");
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		if (nodes == NULL || nodes[i] == NULL || nodes[i][0] == '\0') {
			st_say(st, "");
			snprintf(st->message, sizeof(st->message), "drain: node %u has no name", i);
			return false;
		}
	}
	return true;
}

static void act_all(struct kube_client *c, struct pass *ps, const struct drain_plan *pl,
                    const struct drain_policy *p)
{
	for (unsigned i = 0; i < pl->n; i++) {
		const struct drain_pod *d = &pl->pods[i];
		const char *node = jx_str_or(d->pod, "spec.nodeName", "");
		switch (d->act) {
		case DRAIN_ACT_SKIP:
			break;
		case DRAIN_ACT_TERMINATING:
			ps->res->terminating++;
			break;
		case DRAIN_ACT_ASK:
			act_ask(c, ps, d, node);
			break;
		case DRAIN_ACT_WAIT:
			ps->res->pods++;
			ps->res->waiting_ack++;
			break;
		case DRAIN_ACT_HOLD:
			ps->res->pods++;
			ps->res->held++;
			break;
		case DRAIN_ACT_EVICT:
			if (d->bad_deadline)
				log_warn(DRAIN_COMP, "checkpoint deadline unreadable, evicting",
				         "pod=%s field=metadata.annotations[%s] value=\"%s\"",
				         d->key, DRAIN_ANN_CHECKPOINT,
				         annotation(d->pod, DRAIN_ANN_CHECKPOINT));
			act_evict(c, ps, d, node, p->force);
			break;
		}
	}
}

enum nv_err drain_nodes(struct kube_client *c, const char *const *nodes, unsigned n,
                        const struct drain_policy *p, int64_t now_ms, struct drain_result *res,
                        struct kube_status *st)
{
	struct kube_status local;
	struct drain_plan pl = {0};
	struct pass ps = {.res = res, .retry_after_s = -1};
	json_t *all = NULL, *claims = NULL;
	enum nv_err rc = NV_OK;
	int64_t next;

	// cppcheck-suppress uninitvar ; local is only written, for callers without a status
	st = st ? st : &local;
	ps.st = st;
	memset(res, 0, sizeof(*res));
	if (p == NULL) {
		st_say(st, "drain: a policy is required");
		return NV_E_INVAL;
	}
	if (!args_ok(nodes, n, p->owner, st))
		return NV_E_INVAL;
	all = json_array();
	for (unsigned i = 0; i < n && rc == NV_OK; i++) {
		rc = node_cordon(c, nodes[i], p->owner, true,
		                 p->write.cached ? p->write.cached[i] : NULL, p->write.labels, st);
		if (rc == NV_OK)
			rc = pods_on(c, nodes[i], all, st);
	}
	if (rc != NV_OK || (rc = claims_read(c, all, &claims, st)) != NV_OK)
		goto out;
	drain_plan_build(all, claims, p, now_ms, &pl);
	act_all(c, &ps, &pl, p);
	if ((rc = ps.err) != NV_OK)
		goto out;
	res->done = res->pods == 0 && res->terminating == 0 && !ps.recheck;
	pass_message(&ps, &pl, n);
	if (!res->done) {
		next = now_ms + drain_backoff_ms(p, now_ms);
		if (ps.recheck)
			next = now_ms + 1000;
		if (ps.retry_after_s > 0 && now_ms + ps.retry_after_s * 1000LL > next)
			next = now_ms + ps.retry_after_s * 1000LL;
		if (pl.first_deadline_ms > now_ms && pl.first_deadline_ms < next)
			next = pl.first_deadline_ms;
		res->next_check_ms = next;
	}
	log_debug(DRAIN_COMP, "pass",
	          "owner=%s nodes=%u pods=%d waiting=%d held=%d evicted=%d "
	          "blocked=%d terminating=%d claim_pods=%d done=%d",
	          p->owner, n, res->pods, res->waiting_ack, res->held, res->evicted, res->blocked,
	          res->terminating, res->claim_pods, res->done);
out:
	drain_plan_clear(&pl);
	json_decref(claims);
	json_decref(all);
	return rc;
}

/* Drops the checkpoint handshake from the pods that stay on node, so a
 * later drain starts with a fresh deadline. */
static enum nv_err handshake_clear(struct kube_client *c, const char *node, struct kube_status *st)
{
	const struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
	json_t *all = json_array(), *pod, *patch;
	enum nv_err rc = pods_on(c, node, all, st);
	size_t i;

	json_array_foreach(all, i, pod) {
		if (rc != NV_OK)
			break;
		if (annotation(pod, DRAIN_ANN_CHECKPOINT) == NULL ||
		    jx_path(pod, "metadata.deletionTimestamp") != NULL)
			continue;
		patch = json_pack("{s:{s:{s:n,s:n}}}", "metadata", "annotations",
		                  DRAIN_ANN_CHECKPOINT, DRAIN_ANN_CHECKPOINT_ACK);
		rc = kube_patch(c, &KUBE_RES_PODS, kube_obj_namespace(pod), kube_obj_name(pod), &po,
		                patch, NULL, st);
		json_decref(patch);
		if (rc == NV_E_NOT_FOUND)
			rc = NV_OK;
		else if (rc != NV_OK)
			st_prefix(st, "pod %s/%s: clear the checkpoint request",
			          kube_obj_namespace(pod), kube_obj_name(pod));
	}
	json_decref(all);
	return rc;
}

enum nv_err drain_release(struct kube_client *c, const char *const *nodes, unsigned n,
                          const char *owner, const struct drain_node_write *w,
                          struct kube_status *st)
{
	struct kube_status local;
	enum nv_err rc = NV_OK;

	// cppcheck-suppress uninitvar ; local is only written, for callers without a status
	st = st ? st : &local;
	if (!args_ok(nodes, n, owner, st))
		return NV_E_INVAL;
	for (unsigned i = 0; i < n && rc == NV_OK; i++) {
		rc = node_cordon(c, nodes[i], owner, false, w && w->cached ? w->cached[i] : NULL,
		                 w ? w->labels : NULL, st);
		if (rc == NV_OK)
			rc = handshake_clear(c, nodes[i], st);
	}
	return rc;
}
