// SPDX-License-Identifier: Apache-2.0
// The pure half of the kubelet plugin of imex.nvl72.io: the tray as the
// plugin sees it, the node's ResourceSlice, the checks a ResourceClaim must
// pass before its IMEX channel is prepared, and the record of prepared
// claims. No I/O here; agent_plugin.c serves and stores what this decides.
#include "nvl72/agent.h"

#include <stdio.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/json.h"

/* The opaque configuration the operator's ResourceClaimTemplate carries
 * (the contract: ImexChannelConfig of nvl72.io/v1alpha1). */
#define CONFIG_API_VERSION "nvl72.io/v1alpha1"
#define CONFIG_KIND "ImexChannelConfig"
/* resource.k8s.io/v1 caps a string attribute at 64 bytes (k8s.io/api
 * resource/v1 types.go, DeviceAttributeMaxValueLength). */
#define ATTR_STRING_MAX 64

/* ---- the view ---- */

static void domain_split(const char *key, struct agent_dra_view *v)
{
	const char *dot = strchr(key, '.');

	/* "<namespace>.<name>": a namespace is a DNS label, so the first dot
	 * ends it. */
	if (dot == NULL || dot == key || (size_t)(dot - key) >= sizeof(v->domain_ns))
		return;
	memcpy(v->domain_ns, key, (size_t)(dot - key));
	v->domain_ns[dot - key] = '\0';
	(void)str_copy(v->domain_name, sizeof(v->domain_name), dot + 1);
}

void agent_dra_view_build(const json_t *tray, const struct agent_spec *spec,
                          const struct host_obs *obs, const char *node, struct agent_dra_view *v)
{
	const char *uid = jx_str_or(tray, "spec.imex.domainUID", "");

	memset(v, 0, sizeof(*v));
	(void)str_copy(v->node, sizeof(v->node), node);
	(void)str_copy(v->rack, sizeof(v->rack), jx_str_or(tray, "spec.rack", ""));
	(void)str_copy(v->partition, sizeof(v->partition),
	               jx_str_or(tray, "metadata.labels.nvl72\\.io/partition", ""));
	v->tray = json_integer_value(jx_path(tray, "spec.index"));
	v->slots = AGENT_DRA_SLOTS_DEFAULT;
	if (spec->has_imex && uid[0] != '\0' &&
	    str_copy(v->domain_uid, sizeof(v->domain_uid), uid) == NV_OK)
		domain_split(jx_str_or(tray, "spec.imex.domain", ""), v);
	if (spec->has_imex) {
		v->channels_all = spec->channels_all;
		v->channel_count = spec->channel_count;
		v->n_channel_ids = spec->n_channel_ids;
		memcpy(v->channel_ids, spec->channel_ids, sizeof(v->channel_ids));
	}
	if (obs == NULL)
		return;
	if (obs->n_gpus > 0)
		v->slots = obs->n_gpus < AGENT_DRA_SLOTS_MAX ? (unsigned)obs->n_gpus
		                                             : AGENT_DRA_SLOTS_MAX;
	if (obs->has_clique)
		(void)str_copy(v->clique, sizeof(v->clique), obs->clique);
	v->imex_ready = v->domain_uid[0] != '\0' && obs->imex_read && obs->imex_part.err == NV_OK &&
	                obs->imex.daemon == HOST_IMEXD_READY &&
	                obs->imex.dom.domain == HOST_IMEX_DOMAIN_UP;
}

/* ---- the ResourceSlice ---- */

enum nv_err agent_dra_slice_name(const char *node, char *out, size_t outsz)
{
	int n = snprintf(out, outsz, "%s-%s", node, AGENT_DRA_DRIVER);

	return n < 0 || (size_t)n >= outsz || n > 253 || node[0] == '\0' ? NV_E_TOO_LARGE : NV_OK;
}

static json_t *attr_str(const char *s)
{
	/* A value the API would refuse would cost the whole slice: a longer
	 * one (a ComputeDomain name past 64 bytes) is published empty. */
	return json_pack("{s:s}", "string", strlen(s) <= ATTR_STRING_MAX ? s : "");
}

static json_t *device_json(const struct agent_dra_view *v, unsigned slot)
{
	char name[32];

	snprintf(name, sizeof(name), "slot-%u", slot);
	return json_pack("{s:s,s:{s:o,s:o,s:o,s:{s:b},s:o,s:o,s:o,s:{s:I},s:{s:I}}}", "name", name,
	                 "attributes", "domain", attr_str(v->domain_uid), "domainNamespace",
	                 attr_str(v->domain_ns), "domainName", attr_str(v->domain_name),
	                 "imexReady", "bool", v->imex_ready, "clique", attr_str(v->clique), "rack",
	                 attr_str(v->rack), "partition", attr_str(v->partition), "tray", "int",
	                 (json_int_t)v->tray, "channel", "int", (json_int_t)0);
}

json_t *agent_dra_slice_build(const struct agent_dra_view *v, int64_t generation)
{
	char name[300];
	json_t *devs, *slice;

	if (agent_dra_slice_name(v->node, name, sizeof(name)) != NV_OK)
		return NULL;
	devs = json_array();
	for (unsigned i = 0; i < v->slots; i++)
		json_array_append_new(devs, device_json(v, i));
	slice = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:{s:s,s:I,s:i},s:o}}", "apiVersion",
	                  "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name", name,
	                  "spec", "driver", AGENT_DRA_DRIVER, "nodeName", v->node, "pool", "name",
	                  v->node, "generation", (json_int_t)generation, "resourceSliceCount", 1,
	                  "devices", devs);
	return slice;
}

/* The devices as name + attributes only, in order. */
static json_t *devices_owned(const json_t *slice)
{
	json_t *out = json_array(), *d;
	size_t i;

	json_array_foreach(jx_path(slice, "spec.devices"), i, d) {
		json_t *attrs = json_object_get(d, "attributes");
		json_array_append_new(out,
		                      json_pack("{s:O?,s:O?}", "name", json_object_get(d, "name"),
		                                "attributes", attrs));
	}
	return out;
}

bool agent_dra_slice_differs(const json_t *stored, const json_t *desired)
{
	static const char *const paths[] = {"spec.driver", "spec.nodeName", "spec.pool.name",
	                                    "spec.pool.resourceSliceCount"};
	json_t *a, *b;
	bool differ = false;

	if (stored == NULL || desired == NULL)
		return stored != desired;
	for (size_t i = 0; i < ARRAY_LEN(paths) && !differ; i++) {
		const json_t *x = jx_path(stored, paths[i]), *y = jx_path(desired, paths[i]);
		differ = x == NULL || y == NULL || !json_equal(x, y);
	}
	if (differ)
		return true;
	a = devices_owned(stored);
	b = devices_owned(desired);
	differ = !json_equal(a, b);
	json_decref(a);
	json_decref(b);
	return differ;
}

/* ---- checking a claim ---- */

static bool str_in(const json_t *arr, const char *s)
{
	const json_t *it;
	size_t i;

	json_array_foreach(arr, i, it) {
		if (json_is_string(it) && strcmp(json_string_value(it), s) == 0)
			return true;
	}
	return false;
}

/* This node's results by this driver, into the plan. */
static enum nv_err claim_results(const json_t *claim, const struct agent_dra_view *v,
                                 struct agent_dra_plan *p, char *why, size_t whysz)
{
	const json_t *r;
	size_t i;

	json_array_foreach(jx_path(claim, "status.allocation.devices.results"), i, r) {
		struct agent_dra_dev *d;
		if (strcmp(jx_str_or(r, "driver", ""), AGENT_DRA_DRIVER) != 0 ||
		    strcmp(jx_str_or(r, "pool", ""), v->node) != 0)
			continue;
		if (p->n_devices == AGENT_DRA_DEVICES_MAX) {
			snprintf(why, whysz, "more than %d devices of %s allocated on %s",
			         AGENT_DRA_DEVICES_MAX, AGENT_DRA_DRIVER, v->node);
			return NV_E_TOO_LARGE;
		}
		d = &p->devices[p->n_devices];
		if (str_copy(d->request, sizeof(d->request), jx_str_or(r, "request", "")) !=
		            NV_OK ||
		    str_copy(d->pool, sizeof(d->pool), v->node) != NV_OK ||
		    str_copy(d->device, sizeof(d->device), jx_str_or(r, "device", "")) != NV_OK ||
		    d->request[0] == '\0' || d->device[0] == '\0') {
			snprintf(why, whysz,
			         "status.allocation.devices.results[%zu]: request or device "
			         "missing or "
			         "too long",
			         i);
			return NV_E_INVAL;
		}
		p->n_devices++;
	}
	if (p->n_devices == 0) {
		snprintf(why, whysz,
		         "status.allocation.devices.results has no device of driver %s in pool %s",
		         AGENT_DRA_DRIVER, v->node);
		return NV_E_INVAL;
	}
	return NV_OK;
}

/* The last opaque config of this driver that applies to one of the plan's
 * requests (no requests: all): a claim's own configs follow its class's in
 * the allocation and so win (k8s.io/api resource/v1, DeviceAllocationResult
 * .config). */
static const json_t *claim_config(const json_t *claim, const struct agent_dra_plan *p)
{
	const json_t *c, *found = NULL;
	size_t i;

	json_array_foreach(jx_path(claim, "status.allocation.devices.config"), i, c) {
		const json_t *reqs = json_object_get(c, "requests");
		bool applies = json_array_size(reqs) == 0;
		if (strcmp(jx_str_or(c, "opaque.driver", ""), AGENT_DRA_DRIVER) != 0)
			continue;
		for (size_t k = 0; k < p->n_devices && !applies; k++)
			applies = str_in(reqs, p->devices[k].request);
		if (applies)
			found = c;
	}
	return found;
}

static enum nv_err claim_params(const json_t *cfg, struct agent_dra_plan *p, char *why,
                                size_t whysz)
{
	const json_t *par = jx_path(cfg, "opaque.parameters");
	const char *api = jx_str_or(par, "apiVersion", ""), *kind = jx_str_or(par, "kind", "");
	const char *uid = jx_str_or(par, "domainUID", ""),
	           *mode = jx_str_or(par, "allocationMode", "");

	if (strcmp(api, CONFIG_API_VERSION) != 0 || strcmp(kind, CONFIG_KIND) != 0) {
		snprintf(why, whysz, "opaque parameters are %.64s %.64s, not %s %s", api, kind,
		         CONFIG_API_VERSION, CONFIG_KIND);
		return NV_E_INVAL;
	}
	if (uid[0] == '\0' || str_copy(p->domain_uid, sizeof(p->domain_uid), uid) != NV_OK) {
		snprintf(why, whysz, "opaque parameters: domainUID is empty or too long");
		return NV_E_INVAL;
	}
	if (mode[0] == '\0' || strcmp(mode, "Single") == 0)
		p->all = false;
	else if (strcmp(mode, "All") == 0)
		p->all = true;
	else {
		snprintf(why, whysz, "opaque parameters: allocationMode %.32s is not Single or All",
		         mode);
		return NV_E_INVAL;
	}
	return NV_OK;
}

/* The tray's side: membership now, the namespace, IMEX. */
static enum nv_err claim_tray(const char *ns, const struct agent_dra_plan *p,
                              const struct agent_dra_view *v, char *why, size_t whysz)
{
	if (v->domain_uid[0] == '\0') {
		snprintf(why, whysz, "this tray (%.100s) is in no ComputeDomain, not in %s",
		         v->node, p->domain_uid);
		return NV_E_INVAL;
	}
	if (strcmp(v->domain_uid, p->domain_uid) != 0) {
		snprintf(why, whysz,
		         "this tray (%.80s) is in ComputeDomain %s/%.80s (%.40s), not in %.40s",
		         v->node, v->domain_ns, v->domain_name, v->domain_uid, p->domain_uid);
		return NV_E_INVAL;
	}
	if (strcmp(ns, v->domain_ns) != 0) {
		snprintf(why, whysz,
		         "namespace %.63s is not the namespace of ComputeDomain %s/%.100s", ns,
		         v->domain_ns, v->domain_name);
		return NV_E_INVAL;
	}
	if (!v->imex_ready) {
		snprintf(why, whysz,
		         "the IMEX daemon of this tray (%.100s) is not READY for ComputeDomain "
		         "%s/%.100s",
		         v->node, v->domain_ns, v->domain_name);
		return NV_E_STATE;
	}
	if (p->all && !v->channels_all && v->n_channel_ids == 0) {
		snprintf(why, whysz,
		         "allocationMode All, but spec.imex.channels of this tray names none");
		return NV_E_STATE;
	}
	return NV_OK;
}

enum nv_err agent_dra_claim_check(const json_t *claim, const char *ns, const char *name,
                                  const char *uid, const struct agent_dra_view *v,
                                  struct agent_dra_plan *out, char *err, size_t errsz)
{
	struct agent_dra_plan p;
	const char *have = jx_str_or(claim, "metadata.uid", "");
	const json_t *cfg;
	char why[400] = "";
	enum nv_err rc = NV_E_INVAL;

	memset(&p, 0, sizeof(p));
	if (strcmp(have, uid) != 0)
		snprintf(why, sizeof(why), "its UID is %.64s, not %.64s (the claim was replaced)",
		         have, uid);
	else if (!json_is_object(jx_path(claim, "status.allocation")))
		snprintf(why, sizeof(why), "it is not allocated (no status.allocation)");
	else if ((rc = claim_results(claim, v, &p, why, sizeof(why))) != NV_OK)
		;
	else if ((cfg = claim_config(claim, &p)) == NULL) {
		snprintf(why, sizeof(why),
		         "status.allocation.devices.config has no opaque config of driver %s",
		         AGENT_DRA_DRIVER);
		rc = NV_E_INVAL;
	} else if ((rc = claim_params(cfg, &p, why, sizeof(why))) == NV_OK)
		rc = claim_tray(ns, &p, v, why, sizeof(why));
	if (rc != NV_OK) {
		snprintf(err, errsz, "claim %s/%s: %s", ns, name, why);
		return rc == NV_OK ? NV_E_INVAL : rc;
	}
	*out = p;
	return NV_OK;
}

size_t agent_dra_plan_channels(const struct agent_dra_plan *p, const struct agent_dra_view *v,
                               unsigned *out, size_t cap)
{
	size_t n = 0;

	if (cap == 0)
		return 0;
	if (!p->all) {
		out[0] = 0;
		return 1;
	}
	if (v->channels_all) {
		for (unsigned c = 0; c < v->channel_count && n < cap; c++)
			out[n++] = c;
		return n;
	}
	for (size_t i = 0; i < v->n_channel_ids && n < cap; i++)
		out[n++] = v->channel_ids[i];
	return n;
}

/* ---- the record ---- */

static bool strs_ok(const json_t *arr, size_t min, size_t max)
{
	const json_t *it;
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) < min || json_array_size(arr) > max)
		return false;
	json_array_foreach(arr, i, it) {
		if (!json_is_string(it) || json_string_length(it) == 0)
			return false;
	}
	return true;
}

static const char *entry_bad(const json_t *e)
{
	const json_t *d, *c;
	size_t i;

	if (!json_is_object(e))
		return "not an object";
	if (!json_is_string(json_object_get(e, "namespace")) ||
	    !json_is_string(json_object_get(e, "name")))
		return "namespace or name";
	if (!strs_ok(json_object_get(e, "cdiDeviceIDs"), 1, 1))
		return "cdiDeviceIDs";
	if (!json_is_array(json_object_get(e, "devices")) ||
	    json_array_size(json_object_get(e, "devices")) == 0 ||
	    json_array_size(json_object_get(e, "devices")) > AGENT_DRA_DEVICES_MAX)
		return "devices";
	json_array_foreach(json_object_get(e, "devices"), i, d) {
		if (!strs_ok(json_object_get(d, "requestNames"), 1, 8) ||
		    !json_is_string(json_object_get(d, "poolName")) ||
		    !json_is_string(json_object_get(d, "deviceName")))
			return "devices";
	}
	if (!json_is_array(json_object_get(e, "channels")) ||
	    json_array_size(json_object_get(e, "channels")) == 0 ||
	    json_array_size(json_object_get(e, "channels")) > HOST_CDI_CHANNELS_MAX)
		return "channels";
	json_array_foreach(json_object_get(e, "channels"), i, c) {
		if (!json_is_integer(c) || json_integer_value(c) < 0 ||
		    json_integer_value(c) > 0xFFFFF)
			return "channels";
	}
	c = json_object_get(e, "major");
	if (!json_is_integer(c) || json_integer_value(c) <= 0 || json_integer_value(c) > 0xFFF)
		return "major";
	return NULL;
}

enum nv_err agent_dra_record_parse(const char *data, size_t len, json_t **out, char *err,
                                   size_t errsz)
{
	struct jx_limits lim = {.max_bytes = (size_t)8 << 20, .max_depth = 8};
	struct jx_err je;
	json_t *root = NULL, *claims, *e;
	const char *uid, *bad;
	enum nv_err rc = jx_loadb(data, len, &lim, &root, &je);

	if (rc != NV_OK) {
		snprintf(err, errsz, "not JSON: %s", je.msg);
		return rc;
	}
	claims = json_object_get(root, "claims");
	if (!json_is_object(claims) || json_object_size(claims) > AGENT_DRA_CLAIMS_MAX) {
		snprintf(err, errsz, "claims: not an object of at most %d entries",
		         AGENT_DRA_CLAIMS_MAX);
		json_decref(root);
		return NV_E_PARSE;
	}
	json_object_foreach(claims, uid, e) {
		if ((bad = entry_bad(e)) != NULL) {
			snprintf(err, errsz, "claims.%.128s: %s is missing or malformed", uid, bad);
			json_decref(root);
			return NV_E_PARSE;
		}
	}
	*out = root;
	return NV_OK;
}

json_t *agent_dra_record_entry(const char *ns, const char *name, const char *uid,
                               const struct agent_dra_plan *p, const unsigned *channels,
                               size_t n_channels, unsigned major, int64_t now_ms)
{
	char id[300], ts[TIME_RFC3339_LEN];
	json_t *devs = json_array(), *chs = json_array();

	snprintf(id, sizeof(id), "%s=%s", HOST_CDI_KIND, uid);
	time_format_rfc3339(now_ms, ts);
	for (size_t i = 0; i < p->n_devices; i++)
		json_array_append_new(devs, json_pack("{s:[s],s:s,s:s}", "requestNames",
		                                      p->devices[i].request, "poolName",
		                                      p->devices[i].pool, "deviceName",
		                                      p->devices[i].device));
	for (size_t i = 0; i < n_channels; i++)
		json_array_append_new(chs, json_integer((json_int_t)channels[i]));
	return json_pack("{s:s,s:s,s:s,s:s,s:[s],s:o,s:o,s:I,s:s}", "namespace", ns, "name", name,
	                 "domainUID", p->domain_uid, "allocationMode", p->all ? "All" : "Single",
	                 "cdiDeviceIDs", id, "devices", devs, "channels", chs, "major",
	                 (json_int_t)major, "preparedAt", ts);
}
