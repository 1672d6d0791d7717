// SPDX-License-Identifier: Apache-2.0
// The validating handler: each nvl72.io object is parsed with the api
// parsers, then judged by the cross-object rules against the operator's
// caches (a node in two racks, overlapping partitions, a matrix or stack
// that does not exist, an upgrade the matrix does not allow or that needs
// an approval nobody could give, a canary or a wave that does not fit the
// rack, a second upgrade of a rack with one in flight). Denials name the
// object and the field; a Rack's stack changed outside a RackUpgrade is
// allowed with a warning.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/matrix.h"
#include "webhook_int.h"

static const char *const kind_names[WEBHOOK__KINDS] = {
        [WEBHOOK_RACKS] = "Racks",
        [WEBHOOK_PARTITIONS] = "RackPartitions",
        [WEBHOOK_MATRICES] = "CompatibilityMatrices",
        [WEBHOOK_UPGRADES] = "RackUpgrades",
        [WEBHOOK_NODES] = "Nodes",
};

/* One request's view of the caches: each list is fetched once. */
struct wh_ctx {
	struct webhook *w;
	const struct wh_request *req;
	struct wh_verdict *v;
	struct api_errors *errs;
	json_t *lists[WEBHOOK__KINDS];
};

/* The cached objects of kind (borrowed from ctx), or NULL after denying:
 * a cache that has not synced cannot vouch for anything. */
static const json_t *cached(struct wh_ctx *c, enum webhook_kind kind)
{
	if (c->lists[kind] != NULL)
		return c->lists[kind];
	json_t *l = c->w->cache->list(c->w->cache_arg, kind);
	if (!json_is_array(l)) {
		json_decref(l);
		wh_deny(c->v, 503, "ServiceUnavailable",
		        "%s \"%s\": the operator's cache of %s has not synced yet; retry shortly",
		        c->req->kind, c->req->name, kind_names[kind]);
		return NULL;
	}
	c->lists[kind] = l;
	return l;
}

/* The object of kind named name: from the list cached() fetched, else read
 * through the cache's get (it then joins the list, which owns it). */
static const json_t *find_named(struct wh_ctx *c, enum webhook_kind kind, const char *name)
{
	json_t *list = c->lists[kind], *o;
	size_t i;
	json_array_foreach(list, i, o) {
		if (strcmp(jx_str_or(o, "metadata.name", ""), name) == 0)
			return o;
	}
	if (list == NULL || name[0] == '\0' || c->w->cache->get == NULL ||
	    (o = c->w->cache->get(c->w->cache_arg, kind, name)) == NULL)
		return NULL;
	json_array_append_new(list, o);
	return o;
}

static bool spec_equal(const json_t *a, const json_t *b, const char *path)
{
	const json_t *x = jx_path(a, path);
	const json_t *y = jx_path(b, path);
	if (x == NULL || y == NULL)
		return x == y;
	return json_equal(x, y) != 0;
}

/* Adds the errors of src not yet in dst (a selector upgrade judges several
 * racks against one matrix: its own faults are told once). */
static void errors_merge(struct api_errors *dst, const struct api_errors *src)
{
	for (unsigned i = 0; i < src->n; i++)
		if (!api_errors_has(dst, src->list[i].path, src->list[i].msg))
			api_errors_add(dst, src->list[i].path, "%s", src->list[i].msg);
	dst->dropped += src->dropped;
}

/* The matrix named name, parsed; NULL with an error at path when it is not
 * cached or does not parse. */
static struct matrix *matrix_named(struct wh_ctx *c, const char *name, const char *path)
{
	const json_t *o = find_named(c, WEBHOOK_MATRICES, name);
	struct matrix *m = NULL;
	if (o == NULL) {
		api_errors_add(c->errs, path, "CompatibilityMatrix \"%s\" does not exist", name);
		return NULL;
	}
	struct api_errors *e = xcalloc(1, sizeof(*e));
	api_errors_init(e);
	if (api_matrix_parse(o, &m, e) != NV_OK)
		api_errors_add(c->errs, path, "CompatibilityMatrix \"%s\" is not valid: %s: %s",
		               name, e->n ? e->list[0].path : "", e->n ? e->list[0].msg : "");
	free(e);
	return m;
}

static struct api_rack *rack_parse_cached(const json_t *o)
{
	struct api_errors *e = xcalloc(1, sizeof(*e));
	struct api_rack *r = NULL;
	api_errors_init(e);
	if (api_rack_parse(o, &r, e) != NV_OK)
		log_warn(WH_COMP, "cached rack does not parse; skipped", "name=%s err=\"%s: %s\"",
		         jx_str_or(o, "metadata.name", ""), e->n ? e->list[0].path : "",
		         e->n ? e->list[0].msg : "");
	free(e);
	return r;
}

/* ---- Rack ---------------------------------------------------------------- */

/* The label that makes node a control-plane Node, or NULL. kubeadm puts
 * node-role.kubernetes.io/control-plane on its control-plane Nodes; before
 * Kubernetes 1.24 it also put node-role.kubernetes.io/master, which older
 * clusters may still carry. */
static const char *control_plane_label(const json_t *node)
{
	static const char *const roles[] = {"node-role.kubernetes.io/control-plane",
	                                    "node-role.kubernetes.io/master"};
	const json_t *labels = jx_path(node, "metadata.labels");

	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (json_is_object(labels) && json_object_get(labels, roles[i]) != NULL)
			return roles[i];
	return NULL;
}

/* A Rack's Nodes get the privileged agent (host PID and network, kernel
 * modules): a control-plane Node is refused. A Node that does not exist
 * yet passes; the agent's DaemonSet excludes the role as well. Only the
 * control-plane Nodes are looked at, so a large cluster costs one pass. */
static void rack_nodes_check(struct wh_ctx *c, const struct api_rack *r)
{
	const json_t *nodes = cached(c, WEBHOOK_NODES), *n;
	const char *role;
	char path[64];
	size_t k;

	if (nodes == NULL)
		return;
	/* From the cache only: a Node it lacks is one that joins later, not
	 * worth an apiserver read per tray inside admission. */
	json_array_foreach(nodes, k, n) {
		unsigned i;
		if ((role = control_plane_label(n)) == NULL)
			continue;
		for (i = 0; i < r->ncompute; i++)
			if (strcmp(r->compute[i].node, jx_str_or(n, "metadata.name", "")) == 0)
				break;
		if (i == r->ncompute)
			continue;
		snprintf(path, sizeof(path), "spec.computeTrays[%u].node", i);
		api_errors_add(
		        c->errs, path,
		        "Node \"%s\" is a control-plane Node (label %s): the tray agent runs "
		        "privileged in the host's PID and network namespaces and is not placed "
		        "on one; list the compute tray's own Node",
		        r->compute[i].node, role);
	}
}

TESTABLE bool wh_rack_stack_recorded(const json_t *obj, const json_t *old, const json_t *upgrades)
{
	const char *stack = jx_str_or(obj, "spec.matrix.stack", "");
	const json_t *u;
	if (strcmp(jx_str_or(old, "status.stack", ""), stack) == 0)
		return true; // every tray runs it already
	u = api_rack_upgrade_latest_completed(upgrades, jx_str_or(obj, "metadata.name", ""));
	return u != NULL && strcmp(jx_str_or(u, "spec.target.stack", ""), stack) == 0 &&
	       strcmp(jx_str_or(u, "spec.target.matrix", ""),
	              jx_str_or(obj, "spec.matrix.name", "")) == 0;
}

/* The RackUpgrades for a rule that only warns: read live when the cache
 * can (the operator writes a Rack's stack right after it records the
 * upgrade Completed), else cached; NULL when neither has them, which a
 * warning may live with. Owned by the context. */
static const json_t *upgrades_for_warning(struct wh_ctx *c)
{
	const struct webhook_cache_ops *ops = c->w->cache;
	json_t *l = ops->list_live ? ops->list_live(c->w->cache_arg, WEBHOOK_UPGRADES) : NULL;
	if (!json_is_array(l)) {
		json_decref(l);
		l = ops->list(c->w->cache_arg, WEBHOOK_UPGRADES);
	}
	if (!json_is_array(l)) {
		json_decref(l);
		return NULL;
	}
	json_decref(c->lists[WEBHOOK_UPGRADES]);
	c->lists[WEBHOOK_UPGRADES] = l;
	return l;
}

/* A Rack's spec.matrix.stack changed by hand moves no tray: the trays keep
 * the drivers their specs name, and only a RackUpgrade moves them. Said as
 * a warning, unless the change only records what the rack runs (the
 * operator's own write after a Completed upgrade, or a manifest catching
 * up with it). */
static void rack_stack_warn(struct wh_ctx *c)
{
	const json_t *obj = c->req->object, *old = c->req->old_object;
	const char *from = jx_str_or(old, "spec.matrix.stack", "");
	const char *to = jx_str_or(obj, "spec.matrix.stack", "");
	const char *runs = jx_str_or(old, "status.stack", "");
	if (old == NULL || strcmp(from, to) == 0 ||
	    wh_rack_stack_recorded(obj, old, upgrades_for_warning(c)))
		return;
	if (runs[0] == '\0' || strcmp(runs, "mixed") == 0)
		runs = from;
	wh_warn(c->v,
	        "Rack \"%s\": spec.matrix.stack changes from %s to %s outside a RackUpgrade; trays "
	        "already running %s are not moved by this (a RackUpgrade moves them)",
	        c->req->name, from, to, runs);
}

static void validate_rack(struct wh_ctx *c)
{
	struct api_rack *r = NULL;
	struct matrix *m = NULL;
	const json_t *racks = NULL;
	const json_t *matrices = NULL;
	if (api_rack_parse(c->req->object, &r, c->errs) != NV_OK)
		goto out;
	if ((racks = cached(c, WEBHOOK_RACKS)) == NULL ||
	    (matrices = cached(c, WEBHOOK_MATRICES)) == NULL)
		goto out;
	size_t i;
	const json_t *o;
	// One other rack parsed at a time: a rack struct is tens of kilobytes.
	json_array_foreach(racks, i, o) {
		if (strcmp(jx_str_or(o, "metadata.name", ""), r->meta.name) == 0)
			continue;
		struct api_rack *other = rack_parse_cached(o);
		const struct api_rack *others[] = {other};
		if (other != NULL)
			(void)api_rack_check_unique(r, others, 1, c->errs);
		api_rack_free(other);
	}
	m = matrix_named(c, r->matrix_name, "spec.matrix.name");
	if (m != NULL)
		(void)api_rack_check_matrix(r, m, c->errs);
	rack_nodes_check(c, r);
	if (c->v->allowed && c->errs->n == 0)
		rack_stack_warn(c);
out:
	matrix_free(m);
	api_rack_free(r);
}

/* ---- RackPartition ------------------------------------------------------- */

static void validate_partition(struct wh_ctx *c)
{
	struct api_rack_partition *p = NULL;
	struct api_rack *rack = NULL;
	const struct api_rack_partition **others = NULL;
	unsigned n = 0;
	const json_t *racks = NULL;
	const json_t *parts = NULL;
	if (api_rack_partition_parse(c->req->object, &p, c->errs) != NV_OK)
		goto out;
	if ((racks = cached(c, WEBHOOK_RACKS)) == NULL ||
	    (parts = cached(c, WEBHOOK_PARTITIONS)) == NULL)
		goto out;
	const json_t *ro = find_named(c, WEBHOOK_RACKS, p->rack);
	if (ro != NULL)
		rack = rack_parse_cached(ro);
	others = xcalloc(json_array_size(parts) + 1, sizeof(*others));
	size_t i;
	const json_t *o;
	json_array_foreach(parts, i, o) {
		// Only partitions of the same rack can overlap.
		if (strcmp(jx_str_or(o, "spec.rack", ""), p->rack) != 0)
			continue;
		struct api_rack_partition *x = NULL;
		struct api_errors *e = xcalloc(1, sizeof(*e));
		api_errors_init(e);
		if (api_rack_partition_parse(o, &x, e) == NV_OK)
			others[n++] = x;
		free(e);
	}
	(void)api_rack_partition_check(p, rack, others, n, c->errs);
out:
	for (unsigned k = 0; k < n; k++)
		api_rack_partition_free((struct api_rack_partition *)others[k]);
	free(others);
	api_rack_free(rack);
	api_rack_partition_free(p);
}

/* ---- CompatibilityMatrix ------------------------------------------------- */

static void validate_matrix(struct wh_ctx *c)
{
	struct matrix *m = NULL;
	// The parser also checks that each transition's intermediate tuples
	// are stacks of the matrix, which no CEL rule can.
	if (api_matrix_parse(c->req->object, &m, c->errs) == NV_OK)
		matrix_free(m);
}

/* ---- RackUpgrade --------------------------------------------------------- */

/* The stacks the rack's trays run: each tray's observed stack, else the
 * rack's common one, else the stack its spec asks for (a rack not yet
 * observed). A tray matching no stack is left to the upgrade reconciler,
 * which sees live state. */
static unsigned rack_from_stacks(const json_t *ro, const struct api_rack *r,
                                 const char *out[MATRIX_TRAYS_MAX])
{
	unsigned n = 0;
	const json_t *trays = jx_path(ro, "status.trays");
	for (size_t i = 0; i < json_array_size(trays) && n < MATRIX_TRAYS_MAX; i++) {
		const char *s = jx_str_or(json_array_get(trays, i), "stack", "");
		if (s[0] != '\0')
			out[n++] = s;
	}
	const char *common = jx_str_or(ro, "status.stack", "");
	if (n == 0 && common[0] != '\0' && strcmp(common, "mixed") != 0)
		out[n++] = common;
	if (n == 0 && r->matrix_stack[0] != '\0')
		out[n++] = r->matrix_stack;
	return n;
}

struct upgrade_job {
	const struct api_rack_upgrade *u;
	const struct matrix *m; /* NULL: target matrix missing */
	bool check_plan;
	bool check_wave;
};

static void upgrade_one_rack(struct wh_ctx *c, const struct upgrade_job *j, const json_t *ro)
{
	const struct api_rack_upgrade *u = j->u;
	struct api_rack *r = rack_parse_cached(ro);
	if (r == NULL) {
		api_errors_add(c->errs, "spec.rack", "rack \"%s\" is not valid",
		               jx_str_or(ro, "metadata.name", ""));
		return;
	}
	if (j->check_plan && j->m != NULL) {
		if (j->m->platform != r->platform)
			api_errors_add(c->errs, "spec.target.matrix",
			               "CompatibilityMatrix \"%s\" is for %s but rack \"%s\" is %s",
			               j->m->name, matrix_platform_name(j->m->platform),
			               r->meta.name, matrix_platform_name(r->platform));
		const char *from[MATRIX_TRAYS_MAX];
		unsigned n = rack_from_stacks(ro, r, from);
		struct api_errors *e = xcalloc(1, sizeof(*e));
		api_errors_init(e);
		(void)api_rack_upgrade_check_matrix(u, j->m, from, n, c->w->plan_flags, e);
		// The layers its plan needs approved must each have a window
		// owner: an approval counts only from one (the Rack's CRD
		// demands it where approvalRequired is set; a manual edge asks
		// for more layers, which only the matrix knows).
		(void)api_rack_upgrade_check_owners(u, j->m, r, from, n, c->w->plan_flags, e);
		(void)api_rack_upgrade_check_rollback(u, j->m, r, from, n, c->w->plan_flags, e);
		errors_merge(c->errs, e);
		free(e);
	}
	if (j->check_wave && u->wave_size > r->policy.max_unavailable_trays)
		api_errors_add(c->errs, "spec.waveSize",
		               "%d trays per wave exceeds maxUnavailableTrays (%d) of rack \"%s\"",
		               u->wave_size, r->policy.max_unavailable_trays, r->meta.name);
	api_rack_free(r);
}

static void upgrade_canary(struct wh_ctx *c, const struct api_rack_upgrade *u)
{
	const json_t *po = find_named(c, WEBHOOK_PARTITIONS, u->canary_partition);
	if (po == NULL) {
		api_errors_add(c->errs, "spec.canary.partition",
		               "RackPartition \"%s\" does not exist", u->canary_partition);
		return;
	}
	const char *prack = jx_str_or(po, "spec.rack", "");
	bool ok = u->rack[0] != '\0' ? strcmp(prack, u->rack) == 0 : false;
	const json_t *ro = u->rack[0] == '\0' ? find_named(c, WEBHOOK_RACKS, prack) : NULL;
	if (ro != NULL)
		ok = api_rack_upgrade_selects(u, ro);
	if (!ok)
		api_errors_add(c->errs, "spec.canary.partition",
		               "RackPartition \"%s\" belongs to rack \"%s\", not to %s%s%s",
		               u->canary_partition, prack, u->rack[0] ? "rack \"" : "",
		               u->rack[0] ? u->rack : "a rack the selector matches",
		               u->rack[0] ? "\"" : "");
}

static void upgrade_racks(struct wh_ctx *c, const struct upgrade_job *j, const json_t *racks)
{
	const struct api_rack_upgrade *u = j->u;
	if (u->rack[0] != '\0') {
		const json_t *ro = find_named(c, WEBHOOK_RACKS, u->rack);
		if (ro == NULL)
			api_errors_add(c->errs, "spec.rack", "rack \"%s\" does not exist", u->rack);
		else
			upgrade_one_rack(c, j, ro);
		return;
	}
	size_t i;
	const json_t *ro;
	json_array_foreach(racks, i, ro)
		if (api_rack_upgrade_selects(u, ro))
			upgrade_one_rack(c, j, ro);
}

/* ---- one upgrade per rack ------------------------------------------------ */

/* Whether the upgrade object o moves rack ro: its spec.rack names it, or
 * every label of its selector is on the rack (as api_rack_upgrade_selects judges). */
static bool upgrade_covers(const json_t *o, const json_t *ro)
{
	const char *rack = jx_str_or(o, "spec.rack", "");
	if (rack[0] != '\0')
		return strcmp(rack, jx_str_or(ro, "metadata.name", "")) == 0;
	json_t *want = jx_path(o, "spec.rackSelector.matchLabels");
	const json_t *labels = jx_path(ro, "metadata.labels");
	const char *key;
	json_t *val;
	if (!json_is_object(want))
		return false;
	json_object_foreach(want, key, val) {
		const char *have = json_string_value(json_object_get(labels, key));
		if (have == NULL || !json_is_string(val) ||
		    strcmp(have, json_string_value(val)) != 0)
			return false;
	}
	return true;
}

/* Whether child names parent (a RackUpgrade with its uid) among its
 * owners: a selector upgrade's per-rack upgrades are its own. */
static bool upgrade_owned_by(const json_t *child, const json_t *parent)
{
	const char *uid = jx_str_or(parent, "metadata.uid", "");
	const json_t *refs = jx_path(child, "metadata.ownerReferences");
	for (size_t i = 0; uid[0] != '\0' && i < json_array_size(refs); i++) {
		const json_t *r = json_array_get(refs, i);
		if (strcmp(jx_str_or(r, "kind", ""), "RackUpgrade") == 0 &&
		    strcmp(jx_str_or(r, "uid", ""), uid) == 0)
			return true;
	}
	return false;
}

TESTABLE const json_t *wh_upgrade_in_flight_on(const json_t *u, const json_t *ro,
                                               const json_t *upgrades)
{
	const char *name = jx_str_or(u, "metadata.name", "");
	size_t i;
	const json_t *o;
	json_array_foreach(upgrades, i, o) {
		if (strcmp(jx_str_or(o, "metadata.name", ""), name) == 0 ||
		    !api_rack_upgrade_in_flight(o) || !upgrade_covers(o, ro) ||
		    upgrade_owned_by(u, o) || upgrade_owned_by(o, u))
			continue;
		return o;
	}
	return NULL;
}

/* The RackUpgrades to judge against: read live when the cache can (an
 * upgrade created a moment ago counts), else the cached ones. The list
 * joins the context, which owns it. */
static const json_t *upgrades_now(struct wh_ctx *c)
{
	const struct webhook_cache_ops *ops = c->w->cache;
	json_t *live = ops->list_live ? ops->list_live(c->w->cache_arg, WEBHOOK_UPGRADES) : NULL;
	if (!json_is_array(live)) {
		json_decref(live);
		return cached(c, WEBHOOK_UPGRADES);
	}
	json_decref(c->lists[WEBHOOK_UPGRADES]);
	c->lists[WEBHOOK_UPGRADES] = live;
	return live;
}

/* Refuses an upgrade of a rack that has another one in flight. */
static void upgrade_one_per_rack(struct wh_ctx *c, const struct api_rack_upgrade *u,
                                 const json_t *racks, const json_t *upgrades)
{
	const json_t *obj = c->req->object;
	size_t i;
	const json_t *ro;
	json_array_foreach(racks, i, ro) {
		const char *rack = jx_str_or(ro, "metadata.name", "");
		bool target = u->rack[0] != '\0' ? strcmp(rack, u->rack) == 0
		                                 : api_rack_upgrade_selects(u, ro);
		const json_t *o = target ? wh_upgrade_in_flight_on(obj, ro, upgrades) : NULL;
		if (o == NULL)
			continue;
		const char *phase = jx_str_or(o, "status.phase", "");
		api_errors_add(c->errs, u->rack[0] != '\0' ? "spec.rack" : "spec.rackSelector",
		               "rack \"%s\" already has an upgrade in flight: RackUpgrade \"%s\" "
		               "(phase %s); one upgrade per rack at a time",
		               rack, jx_str_or(o, "metadata.name", ""),
		               phase[0] != '\0' ? phase : "Proposed");
	}
}

static void validate_upgrade(struct wh_ctx *c)
{
	struct api_rack_upgrade *u = NULL;
	struct matrix *m = NULL;
	const json_t *racks = NULL;
	const json_t *parts = NULL;
	const json_t *matrices = NULL;
	const json_t *upgrades = NULL;
	if (api_rack_upgrade_parse(c->req->object, &u, c->errs) != NV_OK)
		goto out;
	// An update is judged on what it changes: pausing or aborting an
	// upgrade never waits on the matrix.
	const json_t *obj = c->req->object;
	const json_t *old = c->req->old_object;
	bool create = old == NULL;
	struct upgrade_job j = {
	        .u = u,
	        .check_plan = create || !spec_equal(obj, old, "spec.target") ||
	                      !spec_equal(obj, old, "spec.rack") ||
	                      !spec_equal(obj, old, "spec.rackSelector") ||
	                      !spec_equal(obj, old, "spec.cves") ||
	                      !spec_equal(obj, old, "spec.class"),
	        .check_wave =
	                u->wave_size > 0 && (create || !spec_equal(obj, old, "spec.waveSize") ||
	                                     !spec_equal(obj, old, "spec.rack")),
	};
	bool check_canary = u->canary_partition[0] != '\0' &&
	                    (create || !spec_equal(obj, old, "spec.canary.partition"));
	bool check_flight = create || !spec_equal(obj, old, "spec.rack") ||
	                    !spec_equal(obj, old, "spec.rackSelector");
	if (!j.check_plan && !j.check_wave && !check_canary && !check_flight)
		goto out; // paused, aborted, forced: nothing to look up
	if ((racks = cached(c, WEBHOOK_RACKS)) == NULL ||
	    (parts = cached(c, WEBHOOK_PARTITIONS)) == NULL ||
	    (matrices = cached(c, WEBHOOK_MATRICES)) == NULL ||
	    (check_flight && (upgrades = upgrades_now(c)) == NULL))
		goto out;
	if (j.check_plan) {
		m = matrix_named(c, u->target_matrix, "spec.target.matrix");
		if (m != NULL && matrix_stack_find(m, u->target_stack) == NULL)
			api_errors_add(c->errs, "spec.target.stack",
			               "stack \"%s\" is not in CompatibilityMatrix \"%s\"",
			               u->target_stack, m->name);
		else if (m != NULL)
			j.m = m;
	}
	if (j.check_plan || j.check_wave)
		upgrade_racks(c, &j, racks);
	if (check_canary)
		upgrade_canary(c, u);
	if (check_flight)
		upgrade_one_per_rack(c, u, racks, upgrades);
out:
	matrix_free(m);
	api_rack_upgrade_free(u);
}

/* ---- dispatch ------------------------------------------------------------ */

struct wh_rule {
	const char *resource;
	void (*fn)(struct wh_ctx *c);
};

static const struct wh_rule rules[] = {
        {"racks", validate_rack},
        {"rackpartitions", validate_partition},
        {"compatibilitymatrices", validate_matrix},
        {"rackupgrades", validate_upgrade},
};

void wh_validate(struct webhook *w, const struct wh_request *req, struct wh_verdict *v)
{
	const struct wh_rule *rule = NULL;
	for (size_t i = 0; i < ARRAY_LEN(rules) && strcmp(req->group, API_GROUP) == 0; i++)
		if (strcmp(req->resource, rules[i].resource) == 0)
			rule = &rules[i];
	bool create = strcmp(req->operation, "CREATE") == 0;
	bool update = strcmp(req->operation, "UPDATE") == 0;
	if (rule == NULL || !(create || update))
		return; // not ours to judge: the configuration does not send it
	// Metadata-only updates (finalizers, labels) and objects on their way
	// out always pass, so a deletion can always finish.
	if (update && (spec_equal(req->object, req->old_object, "spec") ||
	               jx_path(req->object, "metadata.deletionTimestamp") != NULL))
		return;
	struct wh_ctx c = {.w = w, .req = req, .v = v};
	c.errs = xcalloc(1, sizeof(*c.errs));
	api_errors_init(c.errs);
	// The object judged is the request's; CREATE has no old object.
	struct wh_request r2 = *req;
	if (create)
		r2.old_object = NULL;
	c.req = &r2;
	rule->fn(&c);
	if (v->allowed && c.errs->n + c.errs->dropped > 0)
		wh_deny_errors(v, req, c.errs);
	for (size_t k = 0; k < WEBHOOK__KINDS; k++)
		json_decref(c.lists[k]);
	free(c.errs);
}
