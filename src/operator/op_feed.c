// SPDX-License-Identifier: Apache-2.0
// Publishes the dashboard feed (docs/internals/dashboard-feed.md): the fleet
// summary, one message per rack, the ComputeDomains and Events of each namespace (for the
// readers of that namespace), the RackUpgrades and recent events. A topic is republished only
// when its text changed, so a quiet rack costs nothing.
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

#define EVENTS_KEPT 100
/* Upgrades on the feed: active ones first, then finished ones by name, up
 * to this many (with 256 steps each, the message stays under 4 MiB). */
#define UPGRADES_SHOWN 32

/* "WaitingForRecovery" -> "WAITING_FOR_RECOVERY", as nvidia-imex-ctl prints. */
static void upper_snake(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	// cppcheck-suppress arrayIndexOutOfBoundsCond ; in[i] is read up to in's NUL only
	for (size_t i = 0; in[i] && o + 2 < cap; i++) {
		if (i > 0 && isupper((unsigned char)in[i]) && islower((unsigned char)in[i - 1]))
			out[o++] = '_';
		out[o++] = (char)toupper((unsigned char)in[i]);
	}
	out[o] = '\0';
}

/* Publishes text on topic, for the readers of scope (a namespace; NULL:
 * everyone), unless it is what we sent last; takes text. */
static void publish_scoped_take(struct op *op, const char *topic, const char *scope, char *text)
{
	if (op->dash == NULL || text == NULL) {
		free(text);
		return;
	}
	pthread_mutex_lock(&op->feed_mu);
	const char *last = json_string_value(json_object_get(op->feed_last, topic));
	if (last == NULL || strcmp(last, text) != 0) {
		enum nv_err rc = web_publish_scoped(op->dash, topic, scope, text, true);
		if (rc == NV_OK)
			json_object_set_new(op->feed_last, topic, json_string(text));
		else if (rc != NV_E_STATE)
			log_warn(OP_COMP, "feed publish failed", "topic=%s err=%s", topic,
			         nv_err_name(rc));
	}
	pthread_mutex_unlock(&op->feed_mu);
	free(text);
}

static void publish_take(struct op *op, const char *topic, char *text)
{
	publish_scoped_take(op, topic, NULL, text);
}

/* Per-namespace topics (prefix "domains/", "events/"): publishes each
 * namespace's array of by_ns, and removes the topics of namespaces that
 * have none any more. Takes by_ns. */
static void publish_by_ns(struct op *op, const char *prefix, json_t *by_ns)
{
	char topic[WEB_TOPIC_MAX];
	const char *ns, *key;
	json_t *list, *v;
	json_t *gone = json_array();
	size_t plen = strlen(prefix);

	json_object_foreach(by_ns, ns, list) {
		snprintf(topic, sizeof(topic), "%s%s", prefix, ns);
		publish_scoped_take(op, topic, ns, jx_dumps(list));
	}
	pthread_mutex_lock(&op->feed_mu);
	json_object_foreach(op->feed_last, key, v)
		if (strncmp(key, prefix, plen) == 0 && json_object_get(by_ns, key + plen) == NULL)
			json_array_append_new(gone, json_string(key));
	size_t i;
	json_array_foreach(gone, i, v) {
		json_object_del(op->feed_last, json_string_value(v));
		(void)web_unpublish(op->dash, json_string_value(v));
	}
	pthread_mutex_unlock(&op->feed_mu);
	json_decref(gone);
	json_decref(by_ns);
}

static json_t *gpu_json(const json_t *g)
{
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *health = strcmp(sum, "Healthy") == 0           ? "Healthy"
	                     : strcmp(sum, "Unhealthy") == 0       ? "Unhealthy"
	                     : strcmp(sum, "LimitedCapacity") == 0 ? "Degraded"
	                                                           : "Unknown";
	json_t *cl = jx_path(g, "fabric.cliqueId");
	return json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:s}", "index",
	                 (json_int_t)json_integer_value(json_object_get(g, "index")), "uuid",
	                 jx_str_or(g, "uuid", ""), "fabricState", jx_str_or(g, "fabric.state", ""),
	                 "fabricStatus", jx_str_or(g, "fabric.status", ""), "health", health,
	                 "healthSource", jx_str_or(g, "fabric.healthSource", ""), "clique",
	                 (json_int_t)(json_is_integer(cl) ? json_integer_value(cl) : -1), "vbios",
	                 jx_str_or(g, "vbios", ""), "pciBusId", jx_str_or(g, "pciBusId", ""));
}

static json_t *tray_json(const struct op_tray_eval *t, const json_t *tray)
{
	char daemon[40], domain[24];
	json_t *gpus = json_array(), *g;
	size_t i;

	upper_snake(tray ? jx_str_or(tray, "status.imex.daemonState", "") : "", daemon,
	            sizeof(daemon));
	upper_snake(tray ? jx_str_or(tray, "status.imex.domainState", "") : "", domain,
	            sizeof(domain));
	json_array_foreach(tray ? jx_path(tray, "status.gpus") : NULL, i, g)
		json_array_append_new(gpus, gpu_json(g));
	return json_pack(
	        "{s:i,s:s,s:b,s:b,s:b,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:I,s:I},s:o}", "index", t->index,
	        "node", t->node, "ready", t->ready, "online", t->online, "cordoned", t->cordoned,
	        "maintenance", t->maintenance, "driver", t->driver, "clique", t->clique,
	        "partition", t->partition, "imex", "daemon", daemon, "domain", domain,
	        "peersConnected",
	        (json_int_t)json_integer_value(jx_path(tray, "status.imex.peersConnected")),
	        "peersTotal",
	        (json_int_t)json_integer_value(jx_path(tray, "status.imex.peersTotal")), "gpus",
	        gpus);
}

static const char *health_of(const struct op_rack_eval *ev, const json_t *rack)
{
	const char *phase = jx_str_or(rack, "status.upgrade.phase", "");
	if (ev->reporting == 0)
		return "Unknown";
	if (ev->ready < ev->min_healthy)
		return "Unhealthy";
	if (ev->degraded || strcmp(ev->fabric, "Healthy") != 0)
		return "Degraded";
	if (phase[0] && !api_upgrade_phase_name_final(phase))
		return "Progressing";
	return "Healthy";
}

static json_t *upgrade_json(const json_t *rack)
{
	const char *name = jx_str_or(rack, "status.upgrade.name", "");
	if (!name[0])
		return json_null();
	return json_pack("{s:s,s:s}", "name", name, "phase",
	                 jx_str_or(rack, "status.upgrade.phase", ""));
}

static void fleet_publish(struct op *op)
{
	char now[TIME_RFC3339_LEN];
	json_t *racks = json_array(), *v, *msg;
	const char *k;

	time_format_rfc3339(time_wall_ms(), now);
	pthread_mutex_lock(&op->feed_mu);
	json_object_foreach(op->fleet, k, v)
		json_array_append(racks, v);
	pthread_mutex_unlock(&op->feed_mu);
	/* generatedAt changes every time: compare without it. */
	msg = json_pack("{s:{s:s,s:s},s:o}", "operator", "version", NVL72_VERSION, "leader",
	                op->identity, "racks", racks);
	char *body = jx_dumps(msg);
	pthread_mutex_lock(&op->feed_mu);
	const char *last = json_string_value(json_object_get(op->feed_last, "fleet#body"));
	bool same = last && body && strcmp(last, body) == 0;
	if (!same && body)
		json_object_set_new(op->feed_last, "fleet#body", json_string(body));
	pthread_mutex_unlock(&op->feed_mu);
	if (!same) {
		json_object_set_new(msg, "generatedAt", json_string(now));
		publish_take(op, "fleet", jx_dumps(msg));
	}
	free(body);
	json_decref(msg);
}

void op_feed_rack(struct op *op, const json_t *rack, const struct op_rack_eval *ev,
                  const struct op_tray_in *in, bool cordoned)
{
	const char *name = kube_obj_name(rack);
	char topic[WEB_TOPIC_MAX], loc[256];
	json_t *trays, *conds, *c, *msg, *entry;
	size_t i;

	if (op->dash == NULL)
		return;
	trays = json_array();
	conds = json_array();
	for (unsigned k = 0; k < ev->ntrays; k++)
		json_array_append_new(trays, tray_json(&ev->trays[k], in[k].tray));
	json_array_foreach(jx_path(rack, "status.conditions"), i, c)
		json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s}", "type",
		                                       jx_str_or(c, "type", ""), "status",
		                                       jx_str_or(c, "status", ""), "reason",
		                                       jx_str_or(c, "reason", ""), "message",
		                                       jx_str_or(c, "message", "")));
	msg = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:{s:s,s:s},s:o,s:o,s:[],s:[],s:[]}", "name",
	                name, "platform", jx_str_or(rack, "spec.platform", ""), "chassisSerial",
	                jx_str_or(rack, "spec.chassisSerial", ""), "clusterUUID", ev->cluster_uuid,
	                "health", health_of(ev, rack), "conditions", conds, "stack", "desired",
	                ev->desired_stack, "observed", ev->stack, "upgrade", upgrade_json(rack),
	                "trays", trays, "switchTrays", "partitions", "domains");
	snprintf(topic, sizeof(topic), "rack/%s", name);
	publish_take(op, topic, jx_dumps(msg));
	json_decref(msg);

	snprintf(loc, sizeof(loc), "%s/%s/%s/%s", jx_str_or(rack, "spec.location.site", ""),
	         jx_str_or(rack, "spec.location.room", ""),
	         jx_str_or(rack, "spec.location.row", ""),
	         jx_str_or(rack, "spec.location.position", ""));
	entry = json_pack("{s:s,s:s,s:s,s:s,s:b,s:{s:s,s:s},s:o,s:{s:i,s:i,s:i,s:i}}", "name", name,
	                  "platform", jx_str_or(rack, "spec.platform", ""), "location", loc,
	                  "health", health_of(ev, rack), "cordoned", cordoned, "stack", "desired",
	                  ev->desired_stack, "observed", ev->stack, "upgrade", upgrade_json(rack),
	                  "capacity", "trays", (int)ev->ntrays, "traysReady", ev->ready, "gpus",
	                  ev->gpus, "gpusReady", ev->healthy_gpus);
	pthread_mutex_lock(&op->feed_mu);
	json_object_set_new(op->fleet, name, entry);
	pthread_mutex_unlock(&op->feed_mu);
	fleet_publish(op);
}

void op_feed_rack_gone(struct op *op, const char *name)
{
	char topic[WEB_TOPIC_MAX];
	if (op->dash == NULL)
		return;
	snprintf(topic, sizeof(topic), "rack/%s", name);
	pthread_mutex_lock(&op->feed_mu);
	int had = json_object_del(op->fleet, name) == 0;
	json_object_del(op->feed_last, topic);
	pthread_mutex_unlock(&op->feed_mu);
	if (had) {
		(void)web_unpublish(op->dash, topic);
		fleet_publish(op);
	}
}

void op_feed_event(struct op *op, const char *type, const char *reason, const char *ns,
                   const char *object, const char *message)
{
	char now[TIME_RFC3339_LEN];
	json_t *ev, *cluster, *by_ns, *e;
	char *one;
	size_t i;

	if (op->dash == NULL)
		return;
	ns = ns ? ns : "";
	time_format_rfc3339(time_wall_ms(), now);
	ev = json_pack("{s:s,s:s,s:s,s:s,s:s}", "time", now, "type", type, "reason", reason,
	               "object", object, "message", message);
	if (ns[0])
		json_object_set_new(ev, "namespace", json_string(ns));
	/* The last EVENTS_KEPT events: those of cluster objects on "events",
	 * those of a namespace's objects (tenants' ComputeDomains, their
	 * pods) on "events/<ns>", for the readers of that namespace. */
	cluster = json_array();
	by_ns = json_object();
	pthread_mutex_lock(&op->feed_mu);
	json_array_insert(op->events, 0, ev);
	while (json_array_size(op->events) > EVENTS_KEPT)
		json_array_remove(op->events, EVENTS_KEPT);
	json_array_foreach(op->events, i, e) {
		const char *n = jx_str_or(e, "namespace", "");
		json_t *to = cluster;
		if (n[0] && (to = json_object_get(by_ns, n)) == NULL) {
			to = json_array();
			json_object_set_new(by_ns, n, to);
		}
		json_array_append(to, e);
	}
	pthread_mutex_unlock(&op->feed_mu);
	one = jx_dumps(ev);
	if (one)
		(void)web_publish_scoped(op->dash, "event", ns[0] ? ns : NULL, one, false);
	free(one);
	publish_take(op, "events", jx_dumps(cluster));
	publish_by_ns(op, "events/", by_ns);
	json_decref(cluster);
	json_decref(ev);
}

static json_t *domain_json(const json_t *d)
{
	const json_t *ready = kube_condition_find(d, "Ready"), *n;
	json_t *nodes = json_array();
	size_t i;

	json_array_foreach(jx_path(d, "status.nodes"), i, n)
		json_array_append_new(
		        nodes,
		        json_pack("{s:s,s:s,s:s,s:I,s:s}", "name", jx_str_or(n, "name", ""),
		                  "ipAddress", jx_str_or(n, "ipAddress", ""), "cliqueID",
		                  jx_str_or(n, "cliqueID", ""), "index",
		                  (json_int_t)json_integer_value(json_object_get(n, "index")),
		                  "status", jx_str_or(n, "status", "")));
	return json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:o}", "namespace",
	                 kube_obj_namespace(d), "name", kube_obj_name(d), "numNodes",
	                 (json_int_t)json_integer_value(jx_path(d, "spec.numNodes")), "status",
	                 jx_str_or(d, "status.status", ""), "rack", jx_str_or(d, "status.rack", ""),
	                 "partition", jx_str_or(d, "status.partition", ""), "clique",
	                 jx_str_or(d, "status.cliqueID", ""), "reason",
	                 ready ? jx_str_or(ready, "reason", "") : "", "message",
	                 ready ? jx_str_or(ready, "message", "") : "", "nodes", nodes);
}

static int domain_cmp(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int c = strcmp(kube_obj_namespace(x), kube_obj_namespace(y));
	return c ? c : strcmp(kube_obj_name(x), kube_obj_name(y));
}

void op_feed_domains(struct op *op)
{
	json_t *ds, *out;
	const json_t **v;
	size_t n;

	if (op->dash == NULL || op->domains == NULL)
		return;
	ds = kube_informer_list(op->domains);
	n = json_array_size(ds);
	v = xcalloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(ds, i);
	/* The cache's order is not stable: sort, so that an unchanged list
	 * is the same text and is not sent again. */
	qsort(v, n, sizeof(*v), domain_cmp);
	/* One topic per namespace, read only by those allowed it. */
	out = json_object();
	for (size_t i = 0; i < n; i++) {
		const char *ns = kube_obj_namespace(v[i]);
		json_t *list = json_object_get(out, ns);
		if (list == NULL) {
			list = json_array();
			json_object_set_new(out, ns, list);
		}
		json_array_append_new(list, domain_json(v[i]));
	}
	publish_by_ns(op, "domains/", out);
	free(v);
	json_decref(ds);
}

/* ---- upgrades ---- */

/* The integers of arr (tray numbers); anything else is dropped. */
static json_t *ints_of(const json_t *arr)
{
	json_t *out = json_array(), *v;
	size_t i;
	json_array_foreach(arr, i, v)
		if (json_is_integer(v) && i < 64)
			json_array_append_new(out, json_integer(json_integer_value(v)));
	return out;
}

/* The strings of arr (layer names). */
static json_t *strs_of(const json_t *arr)
{
	json_t *out = json_array(), *v;
	size_t i;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && i < 16)
			json_array_append_new(out, json_string(json_string_value(v)));
	return out;
}

static json_t *evidence_json(const json_t *e)
{
	if (!json_is_object(e))
		return json_null();
	return json_pack(
	        "{s:I,s:I,s:I,s:s,s:s,s:s,s:b}", "busBandwidthGBps",
	        (json_int_t)json_integer_value(json_object_get(e, "busBandwidthGBps")), "floorGBps",
	        (json_int_t)json_integer_value(json_object_get(e, "floorGBps")), "tolerancePercent",
	        (json_int_t)json_integer_value(json_object_get(e, "tolerancePercent")),
	        "fabricState", jx_str_or(e, "fabricState", ""), "imexDomainState",
	        jx_str_or(e, "imexDomainState", ""), "transport", jx_str_or(e, "transport", ""),
	        "passed", json_is_true(json_object_get(e, "passed")));
}

static json_t *waves_json(const json_t *st)
{
	json_t *out = json_array(), *w;
	size_t i;
	json_array_foreach(jx_path(st, "waves"), i, w)
		json_array_append_new(
		        out, json_pack("{s:I,s:o,s:s,s:s,s:s}", "index",
		                       (json_int_t)json_integer_value(json_object_get(w, "index")),
		                       "trays", ints_of(json_object_get(w, "trays")), "phase",
		                       jx_str_or(w, "phase", ""), "startTime",
		                       jx_str_or(w, "startTime", ""), "completionTime",
		                       jx_str_or(w, "completionTime", "")));
	return out;
}

static json_t *steps_json(const json_t *st)
{
	json_t *out = json_array(), *s;
	size_t i;
	json_array_foreach(jx_path(st, "steps"), i, s)
		json_array_append_new(
		        out, json_pack("{s:I,s:s,s:I,s:o,s:s,s:s,s:s,s:s,s:o}", "index",
		                       (json_int_t)json_integer_value(json_object_get(s, "index")),
		                       "action", jx_str_or(s, "action", ""), "wave",
		                       (json_int_t)json_integer_value(json_object_get(s, "wave")),
		                       "trays", ints_of(json_object_get(s, "trays")), "phase",
		                       jx_str_or(s, "phase", ""), "startTime",
		                       jx_str_or(s, "startTime", ""), "completionTime",
		                       jx_str_or(s, "completionTime", ""), "message",
		                       jx_str_or(s, "message", ""), "evidence",
		                       evidence_json(json_object_get(s, "evidence"))));
	return out;
}

/* Whether status.approvals (the counted ones) names the approval. */
static bool approval_counted(const json_t *st, const char *name)
{
	const json_t *a;
	size_t i;
	json_array_foreach(jx_path(st, "approvals"), i, a)
		if (strcmp(jx_str_or(a, "name", ""), name) == 0)
			return true;
	return false;
}

static int approval_cmp(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int c = strcmp(jx_str_or(x, "layer", ""), jx_str_or(y, "layer", ""));
	return c ? c : strcmp(jx_str_or(x, "name", ""), jx_str_or(y, "name", ""));
}

/* Required layers, those still without a counted approval, and every
 * UpgradeApproval of the upgrade with the user the webhook stamped on it. */
static json_t *approvals_json(const json_t *u, const json_t *all)
{
	const json_t *st = json_object_get(u, "status"), *a, *l;
	json_t *given = json_array(), *pending = json_array(), *sorted;
	const json_t **v;
	size_t i, k, n = 0;

	v = xcalloc(json_array_size(all) + 1, sizeof(*v));
	json_array_foreach(all, i, a)
		if (strcmp(jx_str_or(a, "spec.upgrade", ""), kube_obj_name(u)) == 0)
			v[n++] = a;
	sorted = json_array();
	for (k = 0; k < n; k++)
		json_array_append_new(
		        sorted, json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "name", kube_obj_name(v[k]),
		                          "layer", jx_str_or(v[k], "spec.layer", ""), "decision",
		                          jx_str_or(v[k], "spec.decision", "Approved"), "user",
		                          jx_str_or(v[k], "spec.approvedBy.username", ""), "time",
		                          jx_str_or(v[k], "metadata.creationTimestamp", ""),
		                          "counted", approval_counted(st, kube_obj_name(v[k]))));
	free(v);
	/* Sort the payloads (not the cache objects) by layer and name. */
	n = json_array_size(sorted);
	v = xcalloc(n + 1, sizeof(*v));
	for (k = 0; k < n; k++)
		v[k] = json_array_get(sorted, k);
	qsort(v, n, sizeof(*v), approval_cmp);
	for (k = 0; k < n; k++)
		json_array_append(given, (json_t *)v[k]);
	free(v);
	json_decref(sorted);

	json_array_foreach(jx_path(st, "requiredApprovals"), i, l) {
		const json_t *c;
		size_t j;
		bool done = false;
		if (!json_is_string(l))
			continue;
		json_array_foreach(jx_path(st, "approvals"), j, c)
			done |= strcmp(jx_str_or(c, "layer", ""), json_string_value(l)) == 0;
		if (!done)
			json_array_append_new(pending, json_string(json_string_value(l)));
	}
	return json_pack("{s:o,s:o,s:o}", "required", strs_of(jx_path(st, "requiredApprovals")),
	                 "pending", pending, "given", given);
}

static json_t *canary_json(const json_t *st)
{
	const json_t *c = json_object_get(st, "canary");
	if (!json_is_object(c))
		return json_null();
	return json_pack("{s:s,s:o}", "partition", jx_str_or(c, "partition", ""), "trays",
	                 ints_of(json_object_get(c, "trays")));
}

static json_t *upgrade_feed_json(const json_t *u, const json_t *approvals)
{
	const json_t *st = json_object_get(u, "status");
	json_t *o = json_pack(
	        "{s:s,s:s,s:{s:s,s:s},s:s,s:s,s:o,s:s,s:s,s:s,s:b,s:b}", "name", kube_obj_name(u),
	        "rack", jx_str_or(u, "spec.rack", ""), "target", "matrix",
	        jx_str_or(u, "spec.target.matrix", ""), "stack",
	        jx_str_or(u, "spec.target.stack", ""), "fromStack", jx_str_or(st, "fromStack", ""),
	        "class", jx_str_or(u, "spec.class", "routine"), "cves",
	        strs_of(jx_path(u, "spec.cves")), "phase", jx_str_or(st, "phase", ""), "phaseTime",
	        jx_str_or(st, "phaseTime", ""), "message", jx_str_or(st, "message", ""), "paused",
	        json_is_true(jx_path(u, "spec.paused")), "abort",
	        json_is_true(jx_path(u, "spec.abort")));
	json_object_set_new(o, "noticeEnd", json_string(jx_str_or(st, "noticeEndTime", "")));
	json_object_set_new(o, "approvals", approvals_json(u, approvals));
	json_object_set_new(o, "scheduledStart", json_string(jx_str_or(st, "scheduledStart", "")));
	json_object_set_new(o, "window", json_string(jx_str_or(st, "window", "")));
	json_object_set_new(o, "canary", canary_json(st));
	json_object_set_new(o, "waves", waves_json(st));
	json_object_set_new(o, "steps", steps_json(st));
	json_object_set_new(o, "startTime", json_string(jx_str_or(st, "startTime", "")));
	json_object_set_new(o, "completionTime", json_string(jx_str_or(st, "completionTime", "")));
	if (json_array_size(jx_path(st, "racks")) > 0) { /* a selector upgrade's racks */
		json_t *racks = json_array(), *r;
		size_t i;
		json_array_foreach(jx_path(st, "racks"), i, r)
			json_array_append_new(racks,
			                      json_pack("{s:s,s:s,s:s,s:s,s:s}", "name",
			                                jx_str_or(r, "name", ""), "upgrade",
			                                jx_str_or(r, "upgrade", ""), "phase",
			                                jx_str_or(r, "phase", ""), "slotTime",
			                                jx_str_or(r, "slotTime", ""), "message",
			                                jx_str_or(r, "message", "")));
		json_object_set_new(o, "racks", racks);
	}
	return o;
}

static bool upgrade_finished(const json_t *u)
{
	const char *p = jx_str_or(u, "status.phase", "");
	return api_upgrade_phase_name_final(p);
}

static int upgrade_cmp(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	int fx = upgrade_finished(x), fy = upgrade_finished(y);
	return fx != fy ? fx - fy : strcmp(kube_obj_name(x), kube_obj_name(y));
}

void op_feed_upgrades(struct op *op)
{
	json_t *ups, *appr, *out;
	const json_t **v;
	size_t n;

	if (op->dash == NULL || op->upgrades == NULL)
		return;
	ups = kube_informer_list(op->upgrades);
	appr = op->approvals ? kube_informer_list(op->approvals) : json_array();
	n = json_array_size(ups);
	v = xcalloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(ups, i);
	/* A stable order, so that an unchanged list is the same text. */
	qsort(v, n, sizeof(*v), upgrade_cmp);
	out = json_array();
	for (size_t i = 0; i < n && i < UPGRADES_SHOWN; i++)
		json_array_append_new(out, upgrade_feed_json(v[i], appr));
	publish_take(op, "upgrades", jx_dumps(out));
	json_decref(out);
	free(v);
	json_decref(appr);
	json_decref(ups);
}

/* A replica that stops leading stops publishing; forget what was sent so
 * that a later term republishes everything. */
void op_feed_clear(struct op *op)
{
	pthread_mutex_lock(&op->feed_mu);
	json_object_clear(op->feed_last);
	json_object_clear(op->fleet);
	pthread_mutex_unlock(&op->feed_mu);
}
