// SPDX-License-Identifier: Apache-2.0
// The pure half of the ComputeDomain controller: placement of a domain's
// members inside one clique, its IMEX peer list, the tray and Node patches
// and the status. Everything works on plain JSON and is unit-tested.
#include <stdio.h>
#include <string.h>

#include "nvl72/api.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_domain.h"
#include "nvl72/operator_rack.h"
#include "nvl72/timeutil.h"

bool op_domain_key(const char *ns, const char *name, char out[OP_DOMAIN_KEY_MAX])
{
	int w = snprintf(out, OP_DOMAIN_KEY_MAX, "%s.%s", ns, name);
	return w > 0 && w <= 63;
}

/* Orders candidate indexes by (rack, tray index), or by tray index alone:
 * an insertion sort, as the lists hold at most 18 entries. */
static int cand_cmp(const struct op_domain_cand *c, unsigned a, unsigned b, bool rack)
{
	int r = rack ? strcmp(c[a].rack, c[b].rack) : 0;
	return r ? r : (c[a].index > c[b].index) - (c[a].index < c[b].index);
}

static void sort_by(const struct op_domain_cand *c, unsigned *m, unsigned n, bool rack)
{
	for (unsigned i = 1; i < n; i++) {
		unsigned v = m[i], j = i;
		for (; j > 0 && cand_cmp(c, m[j - 1], v, rack) > 0; j--)
			m[j] = m[j - 1];
		m[j] = v;
	}
}

static void sort_members(const struct op_domain_cand *c, unsigned *m, unsigned n)
{
	sort_by(c, m, n, true);
}

bool op_domain_tray_nvidia(const json_t *tray)
{
	return json_is_object(jx_path(tray, "status.nvidiaDRA"));
}

/* A tray NVIDIA's DRA driver manages is never picked: its IMEX daemon is
 * the driver's, and ours cannot share the driver's IMEX session. */
static bool free_pick(const struct op_domain_cand *c, const char *clique)
{
	return c->owner[0] == '\0' && c->healthy && c->selected && !c->nvidia && c->clique[0] &&
	       (clique == NULL || strcmp(c->clique, clique) == 0);
}

/* Free candidates of clique, sorted; returns how many (at most cap). */
static unsigned free_in(const struct op_domain_cand *c, unsigned n, const char *clique,
                        unsigned *out, unsigned cap)
{
	unsigned k = 0;
	for (unsigned i = 0; i < n && k < cap; i++)
		if (free_pick(&c[i], clique))
			out[k++] = i;
	sort_members(c, out, k);
	return k;
}

/* The clique with at least need free trays and the fewest of them (best
 * fit), ties to the smaller ID; NULL when none fits. */
static const char *best_clique(const struct op_domain_cand *c, unsigned n, unsigned need)
{
	const char *best = NULL;
	unsigned best_n = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!free_pick(&c[i], NULL))
			continue;
		unsigned cnt = 0;
		for (unsigned j = 0; j < n; j++)
			cnt += free_pick(&c[j], c[i].clique);
		if (cnt < need)
			continue;
		if (best == NULL || cnt < best_n ||
		    (cnt == best_n && strcmp(c[i].clique, best) < 0)) {
			best = c[i].clique;
			best_n = cnt;
		}
	}
	return best;
}

static bool moved(const struct op_domain_cand *c)
{
	return c->failure && strcmp(c->failure, OP_DOMAIN_CLIQUE_CHANGED) == 0;
}

static void plan_finish(const struct op_domain_cand *c, unsigned num, unsigned nvidia,
                        struct op_domain_plan *p)
{
	p->placed = p->n == num;
	p->addresses = true;
	p->ready = p->placed;
	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *m = &c[p->member[i]];
		p->addresses &= m->ip[0] != '\0';
		p->ready &= m->imex_ready && m->failure == NULL;
	}
	p->ready &= p->addresses;
	if (p->n > 0) {
		p->rack = c[p->member[0]].rack;
		if (p->clique == NULL)
			p->clique = c[p->member[0]].clique;
	}
	if (!p->placed) {
		p->reason = "InsufficientTrays";
		snprintf(p->message, sizeof(p->message),
		         "%u of %u trays: not enough Ready, free trays in one clique%s%s", p->n,
		         num, p->clique && p->clique[0] ? " " : "", p->clique ? p->clique : "");
		if (nvidia > 0) {
			size_t len = strlen(p->message);
			snprintf(p->message + len, sizeof(p->message) - len,
			         " (%u free trays skipped: NVIDIA's DRA driver manages their IMEX)",
			         nvidia);
		}
	} else if (!p->addresses) {
		p->reason = "NoAddress";
		snprintf(p->message, sizeof(p->message),
		         "a member has neither an IMEX address nor a Node InternalIP");
	} else {
		p->reason = "Placed";
		snprintf(p->message, sizeof(p->message), "%u trays of rack %s in clique %s", p->n,
		         p->rack, p->clique);
	}
}

void op_domain_place(const struct op_domain_cand *c, unsigned n, const char *key, int num_nodes,
                     struct op_domain_plan *out)
{
	unsigned num = num_nodes < 1                   ? 1
	               : num_nodes > API_COMPUTE_TRAYS ? API_COMPUTE_TRAYS
	                                               : (unsigned)num_nodes;
	unsigned have[API_COMPUTE_TRAYS], nh = 0, add[API_COMPUTE_TRAYS], na, nvidia = 0;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < n; i++)
		nvidia += c[i].nvidia && c[i].owner[0] == '\0' && c[i].selected;
	for (unsigned i = 0; i < n && nh < API_COMPUTE_TRAYS; i++)
		if (strcmp(c[i].owner, key) == 0)
			have[nh++] = i;
	sort_members(c, have, nh);
	if (nh > num)
		nh = num; /* the rest are released */
	memcpy(out->member, have, nh * sizeof(have[0]));
	out->n = nh;
	for (unsigned i = 0; i < nh && out->clique == NULL; i++)
		if (c[have[i]].clique[0] && !moved(&c[have[i]]))
			out->clique = c[have[i]].clique;
	if (nh == 0)
		out->clique = best_clique(c, n, num);
	if (out->clique && nh < num) {
		na = free_in(c, n, out->clique, add, API_COMPUTE_TRAYS);
		/* Members stay in one rack: a clique never spans racks, but the
		 * rack name keeps a misreported clique from mixing them. */
		for (unsigned i = 0; i < na && out->n < num; i++) {
			if (nh > 0 && strcmp(c[add[i]].rack, c[have[0]].rack) != 0)
				continue;
			out->member[out->n++] = add[i];
			out->npicked++;
		}
		sort_members(c, out->member, out->n);
	}
	plan_finish(c, num, nvidia, out);
}

static bool cond_true(const json_t *obj, const char *type)
{
	return kube_condition_is_true(obj, type);
}

const char *op_domain_member_failure(const json_t *tray, const json_t *node, const char *key)
{
	const json_t *og = jx_path(tray, "status.observedGeneration");
	const char *daemon = jx_str_or(tray, "status.imex.daemonState", "");
	bool current =
	        !json_is_integer(og) ||
	        json_integer_value(og) >= json_integer_value(jx_path(tray, "metadata.generation"));

	if (node == NULL)
		return "NodeGone";
	if (!cond_true(node, "Ready"))
		return "NodeNotReady";
	/* Ready False only for IMEX (a degraded domain) is no failure of the
	 * tray itself: judge its parts. */
	if (!cond_true(tray, "Ready")) {
		if (!cond_true(tray, "DriverReady"))
			return "TrayNotReady";
		if (!cond_true(tray, "FabricReady") || !cond_true(tray, "FabricHealthy"))
			return "FabricUnhealthy";
	}
	if (current && strcmp(jx_str_or(tray, "spec.imex.domain", ""), key) == 0 &&
	    (strcmp(daemon, "NotRunning") == 0 || strcmp(daemon, "Unavailable") == 0))
		return "IMEXDaemonDown";
	return NULL;
}

const char *op_domain_clique_split(struct op_domain_cand *c, unsigned n, const char *key,
                                   const json_t *dom, int64_t now_ms)
{
	const char *recorded = jx_str_or(dom, "status.cliqueID", ""), *best = NULL;
	unsigned m[API_COMPUTE_TRAYS], nm = 0, best_n = 0;

	for (unsigned i = 0; i < n && nm < API_COMPUTE_TRAYS; i++)
		if (strcmp(c[i].owner, key) == 0 && c[i].clique[0])
			m[nm++] = i;
	sort_by(c, m, nm, false);
	for (unsigned i = 0; i < nm; i++) {
		unsigned cnt = 0;
		if (recorded[0] && strcmp(c[m[i]].clique, recorded) == 0) {
			best = recorded;
			break;
		}
		for (unsigned j = 0; j < nm; j++)
			cnt += strcmp(c[m[j]].clique, c[m[i]].clique) == 0;
		if (cnt > best_n) { /* strictly more: a tie stays with the lower index */
			best = c[m[i]].clique;
			best_n = cnt;
		}
	}
	for (unsigned i = 0; i < nm && best; i++) {
		struct op_domain_cand *x = &c[m[i]];
		if (strcmp(x->clique, best) == 0)
			continue;
		x->failure = OP_DOMAIN_CLIQUE_CHANGED;
		x->failed_since_ms = op_domain_failed_since(dom, x->node, now_ms);
	}
	return best;
}

const char *op_domain_member_heartbeat(const json_t *tray, int64_t lease_renew_ms,
                                       int64_t timeout_ms, int64_t now_ms, int64_t *stale_at_ms)
{
	int64_t hb = op_tray_heartbeat_ms(tray, lease_renew_ms);
	if (stale_at_ms)
		*stale_at_ms = 0;
	if (hb <= 0 || timeout_ms <= 0)
		return NULL;
	/* The Rack controller's rule: fresh while now - hb <= timeout. */
	if (now_ms - hb > timeout_ms)
		return "HeartbeatStale";
	if (stale_at_ms)
		*stale_at_ms = hb + timeout_ms + 1;
	return NULL;
}

int64_t op_domain_failed_since(const json_t *dom, const char *node, int64_t now_ms)
{
	const json_t *e;
	int64_t t;
	size_t i;
	json_array_foreach(jx_path(dom, "status.nodes"), i, e) {
		if (strcmp(jx_str_or(e, "name", ""), node) == 0 &&
		    time_parse_rfc3339(jx_str_or(e, "failedSince", ""), &t) == NV_OK && t <= now_ms)
			return t;
	}
	return now_ms;
}

/* The lowest-index free spare of clique in rack not already taken. */
static bool spare_find(const struct op_domain_cand *c, unsigned n, const char *clique,
                       const char *rack, const unsigned *taken, unsigned ntaken, unsigned *out)
{
	unsigned cand[API_COMPUTE_TRAYS], k = free_in(c, n, clique, cand, API_COMPUTE_TRAYS);
	for (unsigned i = 0; i < k; i++) {
		bool used = strcmp(c[cand[i]].rack, rack) != 0;
		for (unsigned j = 0; j < ntaken && !used; j++)
			used = taken[j] == cand[i];
		if (!used) {
			*out = cand[i];
			return true;
		}
	}
	return false;
}

void op_domain_replace_failed(const struct op_domain_cand *c, unsigned n, int num_nodes,
                              int64_t grace_ms, int64_t now_ms, struct op_domain_plan *p)
{
	unsigned num = num_nodes < 1                   ? 1
	               : num_nodes > API_COMPUTE_TRAYS ? API_COMPUTE_TRAYS
	                                               : (unsigned)num_nodes;
	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *x = &c[p->member[i]];
		unsigned spare;
		if (x->failure == NULL)
			continue;
		int64_t due = moved(x) ? now_ms : x->failed_since_ms + grace_ms;
		if (due > now_ms) {
			if (p->next_check_ms == 0 || due < p->next_check_ms)
				p->next_check_ms = due;
			continue;
		}
		if (!spare_find(c, n, p->clique && p->clique[0] ? p->clique : x->clique, x->rack,
		                p->replaced_to, p->nreplaced, &spare)) {
			p->unreplaced[p->nunreplaced++] = p->member[i];
			continue;
		}
		p->replaced_from[p->nreplaced] = p->member[i];
		p->replaced_to[p->nreplaced++] = spare;
		p->member[i] = spare;
	}
	if (p->nreplaced > 0) {
		sort_members(c, p->member, p->n);
		plan_finish(c, num, 0, p);
	}
}

/* The plan's members by tray index. */
static void by_index(const struct op_domain_cand *c, const struct op_domain_plan *p, unsigned *out)
{
	memcpy(out, p->member, p->n * sizeof(*out));
	sort_by(c, out, p->n, false);
}

bool op_domain_prior_slot(const json_t *dom, const char *node, unsigned *slot)
{
	const json_t *e, *idx;
	size_t i;

	json_array_foreach(jx_path(dom, "status.nodes"), i, e) {
		if (strcmp(jx_str_or(e, "name", ""), node) != 0)
			continue;
		idx = json_object_get(e, "index");
		if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
		    json_integer_value(idx) >= API_COMPUTE_TRAYS)
			return false;
		*slot = (unsigned)json_integer_value(idx);
		return true;
	}
	return false;
}

/* The plan's members in slot order (the peer-list order). IMEX names a
 * node by its line in the nodes file, and the agent maps a stable name per
 * line to the address in that slot: a member that keeps its line keeps
 * its IMEX connections across a replacement. NVIDIA's DRA driver keeps
 * its daemons' indexes the same way (the lowest free index for a new one;
 * k8s-dra-driver-gpu v0.4.0-rc.1, cmd/compute-domain-daemon/dnsnames.go). */
static void by_slot(const struct op_domain_cand *c, const struct op_domain_plan *p, unsigned *out)
{
	unsigned sorted[API_COMPUTE_TRAYS], rest[API_COMPUTE_TRAYS], nrest = 0, k = 0;
	bool used[API_COMPUTE_TRAYS] = {false};

	by_index(c, p, sorted);
	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *x = &c[sorted[i]];
		if (x->has_slot && x->slot < p->n && !used[x->slot]) {
			out[x->slot] = sorted[i];
			used[x->slot] = true;
		} else {
			rest[nrest++] = sorted[i];
		}
	}
	for (unsigned s = 0; s < p->n; s++)
		if (!used[s])
			out[s] = rest[k++];
}

json_t *op_domain_peers(const struct op_domain_cand *c, const struct op_domain_plan *p)
{
	unsigned m[API_COMPUTE_TRAYS];
	json_t *a;
	if (p->n == 0 || !p->addresses)
		return NULL;
	by_slot(c, p, m);
	a = json_array();
	for (unsigned i = 0; i < p->n; i++)
		json_array_append_new(a, json_string(c[m[i]].ip));
	return a;
}

/* The domain key obj carries in its metadata.annotations or .labels
 * (where), "" when none. */
static const char *domain_mark(const json_t *obj, const char *where)
{
	const json_t *a = jx_path(obj, where);
	const json_t *v = json_is_object(a) ? json_object_get(a, OP_LABEL_COMPUTE_DOMAIN) : NULL;
	return json_is_string(v) ? json_string_value(v) : "";
}

static const char *annotation(const json_t *obj)
{
	return domain_mark(obj, "metadata.annotations");
}

static json_t *with_rv(const json_t *obj, json_t *patch)
{
	json_t *meta = json_object_get(patch, "metadata");
	if (meta == NULL) {
		meta = json_object();
		json_object_set_new(patch, "metadata", meta);
	}
	json_object_set_new(meta, "resourceVersion",
	                    json_string(jx_str_or(obj, "metadata.resourceVersion", "")));
	return patch;
}

/* Whether the tray's spec.imex.channels already asks for channels. */
static bool channels_ok(const json_t *cur, enum op_domain_channels channels)
{
	const char *mode = jx_str_or(cur, "channels.allocationMode", "Single");
	if (channels == OP_CHANNELS_ALL)
		return strcmp(mode, "All") == 0;
	json_t *one = json_pack("[i]", 0);
	bool ok = strcmp(mode, "Single") == 0 && json_equal(jx_path(cur, "channels.ids"), one);
	json_decref(one);
	return ok;
}

json_t *op_domain_tray_patch(const json_t *tray, const char *key, const char *uid,
                             const json_t *peers, enum op_domain_channels channels)
{
	json_t *patch = json_object(), *want, *cur = jx_path(tray, "spec.imex");
	if (uid == NULL)
		uid = "";

	if (strcmp(annotation(tray), key) != 0)
		json_object_set_new(
		        patch, "metadata",
		        json_pack("{s:{s:s}}", "annotations", OP_LABEL_COMPUTE_DOMAIN, key));
	if (peers) {
		want = json_pack(
		        "{s:s,s:s,s:O,s:o}", "mode", "process", "domain", key, "peers", peers,
		        "channels",
		        channels == OP_CHANNELS_ALL
		                ? json_pack("{s:s,s:n}", "allocationMode", "All", "ids")
		                : json_pack("{s:s,s:[i]}", "allocationMode", "Single", "ids", 0));
		/* The uid tells the agent which domain's claims the tray's
		 * devices serve: a domain deleted and made again under its name
		 * is another domain. */
		if (uid[0])
			json_object_set_new(want, "domainUID", json_string(uid));
		if (!json_is_object(cur) || !json_equal(json_object_get(cur, "peers"), peers) ||
		    strcmp(jx_str_or(cur, "domain", ""), key) != 0 ||
		    strcmp(jx_str_or(cur, "domainUID", ""), uid) != 0 ||
		    strcmp(jx_str_or(cur, "mode", "process"), "process") != 0 ||
		    !channels_ok(cur, channels))
			json_object_set_new(patch, "spec", json_pack("{s:o}", "imex", want));
		else
			json_decref(want);
	}
	if (json_object_size(patch) == 0) {
		json_decref(patch);
		return NULL;
	}
	return with_rv(tray, patch);
}

json_t *op_domain_tray_release_patch(const json_t *tray, const char *key)
{
	json_t *patch;
	bool ours = strcmp(annotation(tray), key) == 0;
	bool imex = strcmp(jx_str_or(tray, "spec.imex.domain", ""), key) == 0;
	if (!ours && !imex)
		return NULL;
	patch = json_object();
	if (ours)
		json_object_set_new(patch, "metadata",
		                    json_pack("{s:{s:n}}", "annotations", OP_LABEL_COMPUTE_DOMAIN));
	if (imex)
		json_object_set_new(patch, "spec", json_pack("{s:n}", "imex"));
	return with_rv(tray, patch);
}

json_t *op_domain_node_patch(const json_t *node, const char *key, bool member)
{
	const json_t *l = jx_path(node, "metadata.labels");
	const json_t *v = json_is_object(l) ? json_object_get(l, OP_LABEL_COMPUTE_DOMAIN) : NULL;
	const char *cur = json_is_string(v) ? json_string_value(v) : NULL;

	if (member && (cur == NULL || strcmp(cur, key) != 0))
		return json_pack("{s:{s:{s:s}}}", "metadata", "labels", OP_LABEL_COMPUTE_DOMAIN,
		                 key);
	if (!member && cur && strcmp(cur, key) == 0)
		return json_pack("{s:{s:{s:n}}}", "metadata", "labels", OP_LABEL_COMPUTE_DOMAIN);
	return NULL;
}

static json_t *status_nodes(const struct op_domain_cand *c, const struct op_domain_plan *p)
{
	unsigned m[API_COMPUTE_TRAYS];
	json_t *a = json_array();
	by_slot(c, p, m);
	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *x = &c[m[i]];
		json_t *o = json_pack("{s:s,s:i,s:s}", "name", x->node, "index", (int)i, "status",
		                      x->imex_ready && !x->failure ? "Ready" : "NotReady");
		if (x->failure) {
			char since[TIME_RFC3339_LEN];
			time_format_rfc3339(x->failed_since_ms, since);
			json_object_set_new(o, "reason", json_string(x->failure));
			json_object_set_new(o, "failedSince", json_string(since));
			for (unsigned k = 0; k < p->nunreplaced; k++)
				if (p->unreplaced[k] == m[i])
					json_object_set_new(o, "replacement",
					                    json_string("NoSpare"));
		}
		if (x->ip[0])
			json_object_set_new(o, "ipAddress", json_string(x->ip));
		if (x->clique[0])
			json_object_set_new(o, "cliqueID", json_string(x->clique));
		json_array_append_new(a, o);
	}
	return a;
}

/* The Ready condition: who is not ready yet, by node name. */
static void ready_message(const struct op_domain_cand *c, const struct op_domain_plan *p, char *msg,
                          size_t cap)
{
	size_t len = 0;
	unsigned waiting = 0;
	msg[0] = '\0';
	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *x = &c[p->member[i]];
		if (x->imex_ready && !x->failure)
			continue;
		waiting++;
		if (len + 1 < cap) {
			bool mv = moved(x);
			int w = snprintf(msg + len, cap - len, "%s%s%s%s%s%s%s",
			                 len ? ", " : "IMEX not ready on ", x->node,
			                 x->failure ? " (" : "", x->failure ? x->failure : "",
			                 mv ? ": now in clique " : "", mv ? x->clique : "",
			                 x->failure ? ")" : "");
			len += w > 0 ? (size_t)w : 0;
		}
	}
	if (waiting == 0)
		snprintf(msg, cap, "%u IMEX daemons Ready, domain Up", p->n);
}

void op_domain_status_apply(json_t *obj, const char *key, const struct op_domain_cand *c,
                            const struct op_domain_plan *p, int64_t now_ms)
{
	json_t *st = json_object_get(obj, "status");
	int64_t gen = (int64_t)json_integer_value(jx_path(obj, "metadata.generation"));
	char msg[512];

	if (!json_is_object(st)) {
		st = json_object();
		json_object_set_new(obj, "status", st);
	}
	json_object_set_new(st, "observedGeneration", json_integer(gen));
	json_object_set_new(st, "status", json_string(p->ready ? "Ready" : "NotReady"));
	json_object_set_new(st, "nodes", status_nodes(c, p));
	json_object_set_new(st, "nodeSelector", json_pack("{s:s}", OP_LABEL_COMPUTE_DOMAIN, key));
	if (p->rack)
		json_object_set_new(st, "rack", json_string(p->rack));
	else
		json_object_del(st, "rack");
	if (p->n > 0 && p->clique && p->clique[0])
		json_object_set_new(st, "cliqueID", json_string(p->clique));
	else
		json_object_del(st, "cliqueID");
	(void)kube_condition_set(obj, "Placed", p->placed && p->addresses ? "True" : "False",
	                         p->reason, p->message, gen, now_ms);
	if (!p->placed || !p->addresses) {
		(void)kube_condition_set(obj, "Ready", "False", "NotPlaced", p->message, gen,
		                         now_ms);
		return;
	}
	ready_message(c, p, msg, sizeof(msg));
	bool split = false;
	for (unsigned i = 0; i < p->n; i++)
		split |= moved(&c[p->member[i]]);
	if (split) { /* say first what no IMEX restart can fix */
		char all[sizeof(msg) + 128];
		snprintf(all, sizeof(all),
		         "members split across cliques, the domain's is %.64s; %s",
		         p->clique ? p->clique : "", msg);
		memcpy(msg, all, sizeof(msg) - 1); /* cut, as every message here */
		msg[sizeof(msg) - 1] = '\0';
	}
	(void)kube_condition_set(obj, "Ready", p->ready ? "True" : "False",
	                         p->ready ? "IMEXReady"
	                         : split  ? "CliqueSplit"
	                                  : "IMEXNotReady",
	                         msg, gen, now_ms);
}

/* ---- the domain's IMEX channel through DRA ---- */

json_t *op_domain_device_class(void)
{
	return json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:{s:s}}]}}", "apiVersion", "resource.k8s.io/v1",
	                 "kind", "DeviceClass", "metadata", "name", OP_DRA_DEVICE_CLASS, "spec",
	                 "selectors", "cel", "expression",
	                 "device.driver == \"" OP_DRA_DRIVER "\"");
}

/* The shape is resource.k8s.io/v1's (Kubernetes 1.34, k8s.io/api v0.34
 * resource/v1/types.go): a DeviceRequest names its devices in `exactly`
 * (ExactDeviceRequest: deviceClassName, selectors of CEL, allocationMode
 * ExactCount with count), and DeviceClaimConfiguration carries `requests`
 * and an `opaque` {driver, parameters}. The parameters are the driver's
 * own, read by the agent's kubelet plugin. */
json_t *op_domain_claim_template(const json_t *dom, const char *key, const char *name,
                                 enum op_domain_channels channels)
{
	const char *uid = jx_str_or(dom, "metadata.uid", "");
	const char *ns = jx_str_or(dom, "metadata.namespace", "");
	const char *dname = jx_str_or(dom, "metadata.name", "");
	char cel[320], domain[320];

	snprintf(cel, sizeof(cel),
	         "device.attributes[\"%s\"].domain == \"%.64s\" && "
	         "device.attributes[\"%s\"].imexReady",
	         OP_DRA_DRIVER, uid, OP_DRA_DRIVER);
	snprintf(domain, sizeof(domain), "%.63s/%.253s", ns, dname);
	json_t *owner = json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", API_VERSION, "kind",
	                          "ComputeDomain", "name", dname, "uid", uid, "controller", 1,
	                          "blockOwnerDeletion", 1);
	json_t *params =
	        json_pack("{s:s,s:s,s:s,s:s,s:s}", "apiVersion", API_VERSION, "kind",
	                  OP_DRA_CONFIG_KIND, "domainUID", uid, "domain", domain, "allocationMode",
	                  channels == OP_CHANNELS_ALL ? "All" : "Single");
	json_t *request =
	        json_pack("{s:s,s:{s:s,s:s,s:i,s:[{s:{s:s}}]}}", "name", OP_DRA_REQUEST, "exactly",
	                  "deviceClassName", OP_DRA_DEVICE_CLASS, "allocationMode", "ExactCount",
	                  "count", 1, "selectors", "cel", "expression", cel);
	json_t *config = json_pack("{s:[s],s:{s:s,s:o}}", "requests", OP_DRA_REQUEST, "opaque",
	                           "driver", OP_DRA_DRIVER, "parameters", params);
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:[o]},s:{s:{s:{s:[o],s:[o]}}}}",
	                 "apiVersion", "resource.k8s.io/v1", "kind", "ResourceClaimTemplate",
	                 "metadata", "name", name, "namespace", ns, "labels",
	                 OP_LABEL_COMPUTE_DOMAIN, key, "ownerReferences", owner, "spec", "spec",
	                 "devices", "requests", request, "config", config);
}

/* Whether every member want sets is in have with the same value; lists
 * must have the same length and match item by item. */
static bool json_subset(const json_t *want, const json_t *have)
{
	const char *k;
	json_t *v;
	size_t i;

	if (have == NULL)
		return false;
	if (json_is_object(want)) {
		if (!json_is_object(have))
			return false;
		json_object_foreach((json_t *)want, k, v)
			if (!json_subset(v, json_object_get(have, k)))
				return false;
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(have) || json_array_size(have) != json_array_size(want))
			return false;
		json_array_foreach(want, i, v)
			if (!json_subset(v, json_array_get(have, i)))
				return false;
		return true;
	}
	return json_equal(want, have);
}

static const json_t *controller_of(const json_t *obj)
{
	const json_t *r;
	size_t i;
	json_array_foreach(jx_path(obj, "metadata.ownerReferences"), i, r)
		if (json_is_true(json_object_get(r, "controller")))
			return r;
	return NULL;
}

enum op_claim_verdict op_domain_claim_judge(const json_t *have, const json_t *want, char *why,
                                            size_t cap)
{
	const json_t *mine = controller_of(want), *ctl = controller_of(have);
	const char *key = domain_mark(want, "metadata.labels");
	const char *uid = jx_str_or(mine, "uid", ""), *name = jx_str_or(mine, "name", "");

	why[0] = '\0';
	if (ctl == NULL) {
		snprintf(why, cap, "has no controller owner reference");
		return OP_CLAIM_FOREIGN;
	}
	if (strcmp(jx_str_or(ctl, "uid", ""), uid) != 0) {
		bool cd = strcmp(jx_str_or(ctl, "kind", ""), "ComputeDomain") == 0 &&
		          strncmp(jx_str_or(ctl, "apiVersion", ""), API_GROUP "/",
		                  strlen(API_GROUP "/")) == 0;
		if (cd && strcmp(jx_str_or(ctl, "name", ""), name) == 0) {
			snprintf(why, cap, "was left by an earlier ComputeDomain %s (uid %.64s)",
			         name, jx_str_or(ctl, "uid", ""));
			return OP_CLAIM_DIFFERS;
		}
		if (cd)
			snprintf(why, cap, "belongs to ComputeDomain %s/%s",
			         kube_obj_namespace(have), jx_str_or(ctl, "name", ""));
		else
			snprintf(why, cap, "is controlled by %s %s", jx_str_or(ctl, "kind", "?"),
			         jx_str_or(ctl, "name", "?"));
		return OP_CLAIM_FOREIGN;
	}
	if (strcmp(domain_mark(have, "metadata.labels"), key) != 0) {
		snprintf(why, cap, "has not the label %s=%s", OP_LABEL_COMPUTE_DOMAIN, key);
		return OP_CLAIM_DIFFERS;
	}
	if (!json_subset(jx_path(want, "spec.spec"), jx_path(have, "spec.spec"))) {
		snprintf(why, cap, "has a spec other than the domain's");
		return OP_CLAIM_DIFFERS;
	}
	return OP_CLAIM_MATCHES;
}

void op_domain_claim_status_apply(json_t *obj, const struct op_domain_claim *c, int64_t now_ms)
{
	json_t *st = json_object_get(obj, "status");
	int64_t gen = (int64_t)json_integer_value(jx_path(obj, "metadata.generation"));

	if (!json_is_object(st)) {
		st = json_object();
		json_object_set_new(obj, "status", st);
	}
	if (c->name && c->name[0])
		json_object_set_new(st, "resourceClaimTemplate",
		                    json_pack("{s:s}", "name", c->name));
	else
		json_object_del(st, "resourceClaimTemplate");
	(void)kube_condition_set(obj, OP_COND_CLAIM_TEMPLATE, c->ready ? "True" : "False",
	                         c->reason ? c->reason : "Unknown", c->message, gen, now_ms);
}
