// SPDX-License-Identifier: Apache-2.0
// ComputeDomain and RackPartition: the two kinds that carve a rack's
// NVLink domain (partitions for tenants and canaries, compute domains for
// jobs), their status, and the rules between them and their rack.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_domain.h"

enum nv_err api_rack_partition_parse(const json_t *obj, struct api_rack_partition **out,
                                     struct api_errors *errs)
{
	struct api_ctx c;
	struct api_rack_partition *p = xcalloc(1, sizeof(*p));
	bool meta_ok;
	p->canary_eligible = true;
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "RackPartition", false, &p->meta, &meta_ok);
	if (meta_ok &&
	    (strlen(p->meta.name) > 63 || !api_str_matches(API_S_DNS_LABEL, p->meta.name)))
		api_fail_at(&c, "metadata.name",
		            "metadata.name must be a DNS label: it is used as a Node label value");
	if (!spec)
		goto out;
	size_t old = api_path_push(&c, "spec");
	(void)api_get_string(&c, spec, "rack", true, 1, 58, API_S_DNS_LABEL, p->rack,
	                     sizeof(p->rack));
	(void)api_get_tray_set(&c, spec, "trays", true, 1, &p->trays);
	(void)api_get_string(&c, spec, "tenant", false, 0, 63, API_S_TENANT, p->tenant,
	                     sizeof(p->tenant));
	(void)api_get_bool(&c, spec, "canaryEligible", &p->canary_eligible);
	api_path_pop(&c, old);
out:
	if (api_ctx_failed(&c)) {
		free(p);
		return NV_E_INVALID_OBJECT;
	}
	*out = p;
	return NV_OK;
}

void api_rack_partition_free(struct api_rack_partition *p)
{
	free(p);
}

/* spec.channel.resourceClaimTemplate, named as in NVIDIA's ComputeDomain
 * (resource.nvidia.com/v1beta1: ComputeDomainChannelSpec.ResourceClaimTemplate
 * with a required Name; NVIDIA/k8s-dra-driver-gpu, now
 * kubernetes-sigs/dra-driver-nvidia-gpu, api/nvidia.com/resource/v1beta1/
 * computedomain.go). */
static void claim_template_parse(struct api_ctx *c, const json_t *channel,
                                 struct api_compute_domain *d)
{
	const json_t *o = NULL;
	if (!api_get_object(c, channel, "resourceClaimTemplate", false, &o))
		return;
	size_t old = api_path_push(c, "resourceClaimTemplate");
	(void)api_get_string(c, o, "name", true, 1, 253, API_S_DNS_SUBDOMAIN, d->claim_template,
	                     sizeof(d->claim_template));
	api_path_pop(c, old);
}

static void domain_spec_parse(struct api_ctx *c, const json_t *spec, struct api_compute_domain *d)
{
	int64_t v = 0;
	int e = 0;
	const json_t *o = NULL;
	if (api_get_int(c, spec, "numNodes", true, 1, API_COMPUTE_TRAYS, &v))
		d->num_nodes = (int)v;
	if (api_get_object(c, spec, "selector", false, &o)) {
		size_t old = api_path_push(c, "selector");
		(void)api_get_string(c, o, "rack", false, 0, 58, API_S_DNS_LABEL, d->rack,
		                     sizeof(d->rack));
		(void)api_get_string(c, o, "partition", false, 0, 63, API_S_DNS_LABEL, d->partition,
		                     sizeof(d->partition));
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "channel", false, &o)) {
		size_t old = api_path_push(c, "channel");
		if (api_get_enum(c, o, "allocationMode", false, api_alloc_mode_names, 2, &e))
			d->alloc_mode = (enum api_alloc_mode)e;
		claim_template_parse(c, o, d);
		api_path_pop(c, old);
	}
	(void)api_get_bool(c, spec, "replaceFailedNodes", &d->replace_failed_nodes);
}

enum nv_err api_compute_domain_parse(const json_t *obj, struct api_compute_domain **out,
                                     struct api_errors *errs)
{
	struct api_ctx c;
	struct api_compute_domain *d = xcalloc(1, sizeof(*d));
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "ComputeDomain", true, &d->meta, NULL);
	if (spec) {
		size_t old = api_path_push(&c, "spec");
		domain_spec_parse(&c, spec, d);
		api_path_pop(&c, old);
	}
	/* metadata.name is at most 253 bytes; the CRD keeps it to 63. */
	if (d->claim_template[0] == '\0')
		snprintf(d->claim_template, sizeof(d->claim_template), "%.245s-channel",
		         d->meta.name);
	if (api_ctx_failed(&c)) {
		free(d);
		return NV_E_INVALID_OBJECT;
	}
	*out = d;
	return NV_OK;
}

void api_compute_domain_free(struct api_compute_domain *d)
{
	free(d);
}

json_t *api_compute_domain_status_to_json(const struct api_compute_domain_status *s)
{
	json_t *o = json_object();
	json_t *nodes = json_array();
	json_t *sel = json_object();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration", json_integer(s->observed_generation));
	json_object_set_new(o, "status", json_string(s->ready ? "Ready" : "NotReady"));
	for (unsigned i = 0; i < s->nnodes && i < API_COMPUTE_TRAYS; i++) {
		const struct api_domain_node *n = &s->nodes[i];
		json_t *x = json_object();
		json_object_set_new(x, "name", json_string(n->name));
		api_json_set_str(x, "ipAddress", n->ip_address);
		// An empty clique (off-fabric) is kept: DRA reports it that way.
		json_object_set_new(x, "cliqueID", json_string(n->clique_id));
		json_object_set_new(x, "index", json_integer(n->index));
		json_object_set_new(x, "status", json_string(n->ready ? "Ready" : "NotReady"));
		json_array_append_new(nodes, x);
	}
	json_object_set_new(o, "nodes", nodes);
	api_json_set_str(o, "rack", s->rack);
	api_json_set_str(o, "partition", s->partition);
	api_json_set_str(o, "cliqueID", s->clique_id);
	if (s->claim_template[0])
		json_object_set_new(o, "resourceClaimTemplate",
		                    json_pack("{s:s}", "name", s->claim_template));
	for (unsigned i = 0; i < s->nselector && i < API_NODE_SELECTOR_MAX; i++)
		json_object_set_new(sel, s->selector[i].key, json_string(s->selector[i].value));
	json_object_set_new(o, "nodeSelector", sel);
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}
