// SPDX-License-Identifier: Apache-2.0
// Publishes the dashboard feed (docs/internals/dashboard-feed.md): the fleet
// summary, one message per rack, the ComputeDomains and recent events. A topic is republished
// only when its text changed, so a quiet rack costs nothing.
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/timeutil.h"
#include "op_int.h"

#define EVENTS_KEPT 100

/* "WaitingForRecovery" -> "WAITING_FOR_RECOVERY", as nvidia-imex-ctl prints. */
static void upper_snake(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; in[i] && o + 2 < cap; i++) {
		if (i > 0 && isupper((unsigned char)in[i]) && islower((unsigned char)in[i - 1]))
			out[o++] = '_';
		out[o++] = (char)toupper((unsigned char)in[i]);
	}
	out[o] = '\0';
}

/* Publishes text on topic unless it is what we sent last; takes text. */
static void publish_take(struct op *op, const char *topic, char *text)
{
	if (op->dash == NULL || text == NULL) {
		free(text);
		return;
	}
	pthread_mutex_lock(&op->feed_mu);
	const char *last = json_string_value(json_object_get(op->feed_last, topic));
	if (last == NULL || strcmp(last, text) != 0) {
		enum nv_err rc = web_publish(op->dash, topic, text);
		if (rc == NV_OK)
			json_object_set_new(op->feed_last, topic, json_string(text));
		else if (rc != NV_E_STATE)
			log_warn(OP_COMP, "feed publish failed", "topic=%s err=%s", topic,
			         nv_err_name(rc));
	}
	pthread_mutex_unlock(&op->feed_mu);
	free(text);
}

static json_t *gpu_json(const json_t *g)
{
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *health = strcmp(sum, "Healthy") == 0           ? "Healthy"
	                     : strcmp(sum, "Unhealthy") == 0       ? "Unhealthy"
	                     : strcmp(sum, "LimitedCapacity") == 0 ? "Degraded"
	                                                           : "Unknown";
	json_t *cl = jx_path(g, "fabric.cliqueId");
	return json_pack("{s:I,s:s,s:s,s:s,s:s,s:I}", "index",
	                 (json_int_t)json_integer_value(json_object_get(g, "index")), "uuid",
	                 jx_str_or(g, "uuid", ""), "fabricState", jx_str_or(g, "fabric.state", ""),
	                 "fabricStatus", jx_str_or(g, "fabric.status", ""), "health", health,
	                 "clique", (json_int_t)(json_is_integer(cl) ? json_integer_value(cl) : -1));
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
	if (phase[0] && strcmp(phase, "Completed") != 0 && strcmp(phase, "Aborted") != 0)
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
	json_object_foreach(op->fleet, k, v) json_array_append(racks, v);
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
	json_array_foreach(jx_path(rack, "status.conditions"), i, c) json_array_append_new(
	        conds, json_pack("{s:s,s:s,s:s,s:s}", "type", jx_str_or(c, "type", ""), "status",
	                         jx_str_or(c, "status", ""), "reason", jx_str_or(c, "reason", ""),
	                         "message", jx_str_or(c, "message", "")));
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

void op_feed_event(struct op *op, const char *type, const char *reason, const char *object,
                   const char *message)
{
	char now[TIME_RFC3339_LEN];
	json_t *ev;
	char *one, *all;

	if (op->dash == NULL)
		return;
	time_format_rfc3339(time_wall_ms(), now);
	ev = json_pack("{s:s,s:s,s:s,s:s,s:s}", "time", now, "type", type, "reason", reason,
	               "object", object, "message", message);
	pthread_mutex_lock(&op->feed_mu);
	json_array_insert(op->events, 0, ev);
	while (json_array_size(op->events) > EVENTS_KEPT)
		json_array_remove(op->events, EVENTS_KEPT);
	all = jx_dumps(op->events);
	pthread_mutex_unlock(&op->feed_mu);
	one = jx_dumps(ev);
	if (one)
		(void)web_publish_transient(op->dash, "event", one);
	if (all)
		(void)web_publish(op->dash, "events", all);
	free(one);
	free(all);
	json_decref(ev);
}

static json_t *domain_json(const json_t *d)
{
	const json_t *ready = kube_condition_find(d, "Ready"), *n;
	json_t *nodes = json_array();
	size_t i;

	json_array_foreach(jx_path(d, "status.nodes"), i, n) json_array_append_new(
	        nodes, json_pack("{s:s,s:s,s:s,s:I,s:s}", "name", jx_str_or(n, "name", ""),
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
	out = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(out, domain_json(v[i]));
	publish_take(op, "domains", jx_dumps(out));
	json_decref(out);
	free(v);
	json_decref(ds);
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
