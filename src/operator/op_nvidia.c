// SPDX-License-Identifier: Apache-2.0
// NVIDIA's ComputeDomains, read only: while NVIDIA's API group serves them
// (asked through discovery, again every few minutes, so a cluster without
// NVIDIA's driver costs one GET now and then and no failing watch), two
// trimmed caches of its ComputeDomains and ComputeDomainCliques tell the
// upgrade and partition controllers which trays NVIDIA's workloads use,
// and their changes requeue the upgrades and partitions of those trays'
// racks. Nothing of resource.nvidia.com is ever written.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_nvidia.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

#define NV_COMP "nvidia"
/* How often discovery is asked again once it answered. */
#define NV_RECHECK_MS (5 * 60 * 1000)
/* How long a pass waits for a cache just started to list. */
#define NV_SYNC_WAIT_MS 2000

static const struct kube_res RES_NV_DOMAINS = {OP_NVIDIA_GROUP, OP_NVIDIA_VERSION,
                                               OP_NVIDIA_DOMAINS, "ComputeDomain", true};
static const struct kube_res RES_NV_CLIQUES = {OP_NVIDIA_GROUP, OP_NVIDIA_VERSION,
                                               OP_NVIDIA_CLIQUES, "ComputeDomainClique", true};

/* ---- the pure parts ---- */

void op_nvidia_discovery_parse(const json_t *list, bool *domains, bool *cliques)
{
	const json_t *r;
	size_t i;

	*domains = *cliques = false;
	json_array_foreach(json_object_get(list, "resources"), i, r) {
		const char *name = jx_str_or(r, "name", "");
		*domains |= strcmp(name, OP_NVIDIA_DOMAINS) == 0;
		*cliques |= strcmp(name, OP_NVIDIA_CLIQUES) == 0;
	}
}

static bool names_node(const json_t *list, const char *key, const char *node)
{
	const json_t *e;
	size_t i;

	json_array_foreach(list, i, e) {
		if (strcmp(jx_str_or(e, key, ""), node) == 0)
			return true;
	}
	return false;
}

static void name_of(const json_t *obj, const char *prefix, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s/%s", prefix, kube_obj_namespace(obj), kube_obj_name(obj));
}

bool op_nvidia_node_domain(const json_t *domains, const json_t *cliques, const char *node,
                           char *out, size_t cap)
{
	const json_t *d, *c;
	size_t i, k;

	out[0] = '\0';
	if (node == NULL || node[0] == '\0')
		return false;
	json_array_foreach(domains, i, d) {
		if (names_node(jx_path(d, "status.nodes"), "name", node)) {
			name_of(d, "", out, cap);
			return true;
		}
	}
	json_array_foreach(cliques, i, c) {
		const json_t *uid =
		        json_object_get(jx_path(c, "metadata.labels"), OP_NVIDIA_LABEL_DOMAIN);
		if (!names_node(json_object_get(c, "daemons"), "nodeName", node))
			continue;
		json_array_foreach(domains, k, d) {
			if (json_is_string(uid) &&
			    strcmp(jx_str_or(d, "metadata.uid", ""), json_string_value(uid)) == 0) {
				name_of(d, "", out, cap);
				return true;
			}
		}
		name_of(c, "ComputeDomainClique ", out, cap);
		return true;
	}
	return false;
}

/* Keeps only the members named in keep of object o. */
static void keep_only(json_t *o, const char *const *keep)
{
	const char *key;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(o, tmp, key, v) {
		bool kept = false;
		(void)v;
		for (const char *const *k = keep; *k && !kept; k++)
			kept = strcmp(*k, key) == 0;
		if (!kept)
			json_object_del(o, key);
	}
}

static void keep_names(json_t *list, const char *key)
{
	const char *const keep[] = {key, NULL};
	json_t *e;
	size_t i;

	json_array_foreach(list, i, e) {
		if (json_is_object(e))
			keep_only(e, keep);
	}
}

void op_nvidia_trim(json_t *obj, const void *arg)
{
	static const char *const top[] = {"apiVersion", "kind",    "metadata",
	                                  "status",     "daemons", NULL};
	static const char *const meta[] = {"name",   "namespace",         "uid", "resourceVersion",
	                                   "labels", "deletionTimestamp", NULL};
	static const char *const status[] = {"nodes", NULL};
	json_t *st;

	(void)arg;
	keep_only(obj, top);
	if (json_is_object(json_object_get(obj, "metadata")))
		keep_only(json_object_get(obj, "metadata"), meta);
	if (json_is_object(st = json_object_get(obj, "status"))) {
		keep_only(st, status);
		keep_names(json_object_get(st, "nodes"), "name");
	}
	keep_names(json_object_get(obj, "daemons"), "nodeName");
}

/* ---- the caches ---- */

struct op_nvidia {
	struct op *op;
	pthread_mutex_t mu;      /* everything below; held while the caches are read */
	bool answered;           /* discovery has answered at least once */
	int64_t answered_ms;     /* monotonic time of its last answer */
	bool domains, cliques;   /* served, as discovery said */
	char why[256];           /* the last discovery failure, "" when it answered */
	struct kube_informer *d; /* NVIDIA's ComputeDomains, while served */
	struct kube_informer *c; /* and their ComputeDomainCliques */
};

/* The upgrades and partitions of the racks that list node. */
static void enqueue_node(struct op *op, const char *node)
{
	struct kube_workqueue *uq = op_queue(op, UPGRADE_CONTROLLER);
	struct kube_workqueue *pq = op_queue(op, PART_CONTROLLER);
	json_t *racks = kube_informer_by_index(op->racks, OP_INDEX_RACK_NODE, node), *r;
	size_t i;

	json_array_foreach(racks, i, r) {
		const char *rack = kube_obj_name(r);
		struct {
			struct kube_informer *inf;
			struct kube_workqueue *q;
		} to[] = {{op->upgrades, uq}, {op->partitions, pq}};
		for (size_t t = 0; t < ARRAY_LEN(to); t++) {
			json_t *l, *o;
			size_t k;
			if (to[t].q == NULL || to[t].inf == NULL)
				continue;
			l = kube_informer_list(to[t].inf);
			json_array_foreach(l, k, o) {
				if (strcmp(jx_str_or(o, "spec.rack", ""), rack) == 0)
					kube_workqueue_add(to[t].q, kube_obj_name(o));
			}
			json_decref(l);
		}
	}
	json_decref(racks);
}

static void enqueue_obj(struct op *op, const json_t *obj)
{
	const json_t *e;
	size_t i;

	json_array_foreach(jx_path(obj, "status.nodes"), i, e)
		enqueue_node(op, jx_str_or(e, "name", ""));
	json_array_foreach(json_object_get(obj, "daemons"), i, e)
		enqueue_node(op, jx_str_or(e, "nodeName", ""));
}

static void on_add(void *ud, json_t *obj)
{
	enqueue_obj(ud, obj);
}

/* Only a change of the nodes (all the trimmed copy holds besides its
 * metadata) can free or take a tray. */
static void on_update(void *ud, json_t *old_obj, json_t *new_obj)
{
	if (json_equal(json_object_get(old_obj, "status"), json_object_get(new_obj, "status")) &&
	    json_equal(json_object_get(old_obj, "daemons"), json_object_get(new_obj, "daemons")))
		return;
	enqueue_obj(ud, old_obj);
	enqueue_obj(ud, new_obj);
}

static void on_delete(void *ud, json_t *obj, bool unknown)
{
	(void)unknown;
	enqueue_obj(ud, obj);
}

enum nv_err op_nvidia_new(struct op *op)
{
	struct op_nvidia *n = xcalloc(1, sizeof(*n));

	n->op = op;
	pthread_mutex_init(&n->mu, NULL);
	op->nv = n;
	return NV_OK;
}

static void caches_drop(struct op_nvidia *n)
{
	kube_informer_free(n->d);
	kube_informer_free(n->c);
	n->d = n->c = NULL;
}

void op_nvidia_stop(struct op *op)
{
	if (op->nv == NULL)
		return;
	pthread_mutex_lock(&op->nv->mu);
	kube_informer_stop(op->nv->d);
	kube_informer_stop(op->nv->c);
	pthread_mutex_unlock(&op->nv->mu);
}

void op_nvidia_free(struct op *op)
{
	struct op_nvidia *n = op->nv;

	if (n == NULL)
		return;
	caches_drop(n);
	pthread_mutex_destroy(&n->mu);
	free(n);
	op->nv = NULL;
}

static enum nv_err cache_start(struct op_nvidia *n, const struct kube_res *res,
                               struct kube_informer **out)
{
	struct kube_informer *inf = NULL;
	enum nv_err rc = kube_informer_new(
	        n->op->c, &(struct kube_informer_opts){.res = res, .transform = op_nvidia_trim},
	        &inf);

	if (rc == NV_OK)
		rc = kube_informer_add_handler(
		        inf, &(struct kube_handler){on_add, on_update, on_delete, n->op});
	if (rc == NV_OK)
		rc = kube_informer_start(inf);
	if (rc != NV_OK) {
		kube_informer_free(inf);
		return rc;
	}
	*out = inf;
	return NV_OK;
}

/* Asks discovery, at most every NV_RECHECK_MS once it answered (at every
 * call after a failure); starts the caches of what is served and drops
 * those of what no longer is. A failure after an answer keeps what that
 * answer said. */
static void refresh(struct op_nvidia *n)
{
	struct kube_status st;
	json_t *list = NULL;
	bool d = false, c = false;
	enum nv_err rc;

	if (n->answered && n->why[0] == '\0' && time_mono_ms() - n->answered_ms < NV_RECHECK_MS)
		return;
	memset(&st, 0, sizeof(st));
	rc = kube_request(
	        n->op->c,
	        &(struct kube_raw_req){.method = "GET",
	                               .path = "/apis/" OP_NVIDIA_GROUP "/" OP_NVIDIA_VERSION},
	        &list, &st);
	if (rc != NV_OK && rc != NV_E_NOT_FOUND) {
		if (n->why[0] == '\0')
			log_warn(NV_COMP, "cannot ask whether NVIDIA's ComputeDomains are served",
			         "group=%s/%s err=%s msg=\"%s\"", OP_NVIDIA_GROUP,
			         OP_NVIDIA_VERSION, nv_err_name(rc), st.message);
		snprintf(n->why, sizeof(n->why), "discovery of %s/%s: %.200s", OP_NVIDIA_GROUP,
		         OP_NVIDIA_VERSION, st.message[0] ? st.message : nv_err_str(rc));
		json_decref(list);
		return;
	}
	if (rc == NV_OK)
		op_nvidia_discovery_parse(list, &d, &c);
	json_decref(list);
	if (!n->answered || d != n->domains || c != n->cliques)
		log_info(NV_COMP,
		         d ? "NVIDIA's ComputeDomains are served: reading them (never writing)"
		           : "NVIDIA's ComputeDomains are not served",
		         "group=%s/%s computedomains=%d computedomaincliques=%d", OP_NVIDIA_GROUP,
		         OP_NVIDIA_VERSION, d, c);
	n->answered = true;
	n->answered_ms = time_mono_ms();
	n->why[0] = '\0';
	n->domains = d;
	n->cliques = d && c;
	if (!n->domains)
		caches_drop(n);
	if ((n->d == NULL && n->domains && cache_start(n, &RES_NV_DOMAINS, &n->d) != NV_OK) ||
	    (n->c == NULL && n->cliques && cache_start(n, &RES_NV_CLIQUES, &n->c) != NV_OK))
		snprintf(n->why, sizeof(n->why), "the caches of NVIDIA's objects did not start");
	if (!n->cliques) {
		kube_informer_free(n->c);
		n->c = NULL;
	}
}

static bool synced(struct kube_informer *inf, char *why, size_t cap, const char *what)
{
	char cause[200] = "";

	if (inf == NULL || kube_informer_synced(inf) ||
	    kube_informer_wait_synced(inf, NV_SYNC_WAIT_MS))
		return true;
	(void)kube_informer_why(inf, cause, sizeof(cause));
	snprintf(why, cap, "NVIDIA's %s are not read yet%s%s", what, cause[0] ? ": " : "", cause);
	return false;
}

enum op_nvidia_view op_nvidia_busy(struct op *op, const char *const *nodes, unsigned n,
                                   char (*busy)[OP_NVIDIA_NAME_MAX], char *why, size_t cap)
{
	struct op_nvidia *nv = op->nv;
	enum op_nvidia_view view = OP_NVIDIA_READ;
	json_t *domains = NULL, *cliques = NULL;

	why[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		busy[i][0] = '\0';
	if (nv == NULL)
		return OP_NVIDIA_ABSENT;
	pthread_mutex_lock(&nv->mu);
	refresh(nv);
	if (!nv->answered) {
		snprintf(why, cap, "%s", nv->why[0] ? nv->why : "discovery has not answered");
		view = OP_NVIDIA_UNREAD;
	} else if (nv->domains && (nv->d == NULL || (nv->cliques && nv->c == NULL))) {
		snprintf(why, cap, "%s", nv->why);
		view = OP_NVIDIA_UNREAD;
	} else if (!nv->domains) {
		view = OP_NVIDIA_ABSENT;
	} else if (!synced(nv->d, why, cap, "ComputeDomains") ||
	           !synced(nv->c, why, cap, "ComputeDomainCliques")) {
		view = OP_NVIDIA_UNREAD;
	} else {
		domains = kube_informer_list(nv->d);
		cliques = nv->c ? kube_informer_list(nv->c) : NULL;
	}
	pthread_mutex_unlock(&nv->mu);
	for (unsigned i = 0; view == OP_NVIDIA_READ && i < n; i++)
		(void)op_nvidia_node_domain(domains, cliques, nodes[i], busy[i],
		                            OP_NVIDIA_NAME_MAX);
	json_decref(domains);
	json_decref(cliques);
	return view;
}
