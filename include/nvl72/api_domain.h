/* SPDX-License-Identifier: Apache-2.0 */
/* ComputeDomain, the tenant-facing kind: a multi-node NVLink job domain of
 * numNodes trays inside one clique. Its status has the shape of NVIDIA's
 * DRA ComputeDomain plus the node selector workloads use. */
/* The contract of api.h holds: pure, parsers return structs freed with
 * their _free, serialisers return new references, errs is appended to. */
#ifndef NVL72_API_DOMAIN_H
#define NVL72_API_DOMAIN_H

#include "nvl72/api.h"
#include "nvl72/api_rack.h"

struct api_compute_domain {
	struct api_meta meta; /* namespaced */
	int num_nodes;        /* 1..18 */
	char rack[59];        /* optional selector */
	char partition[64];
	enum api_alloc_mode alloc_mode;
	/* spec.channel.resourceClaimTemplate.name, or "<metadata.name>-channel"
	 * when absent: the template the operator keeps for the domain. */
	char claim_template[254];
	bool replace_failed_nodes; /* spec.replaceFailedNodes, default false */
};

enum nv_err api_compute_domain_parse(const json_t *obj, struct api_compute_domain **out,
                                     struct api_errors *errs);
void api_compute_domain_free(struct api_compute_domain *d);

#define API_NODE_SELECTOR_MAX 8

struct api_domain_node {
	char name[254];
	char ip_address[65];
	char clique_id[49];
	int index; /* 0..17 */
	bool ready;
};

struct api_compute_domain_status {
	int64_t observed_generation;
	bool ready;
	unsigned nnodes;
	struct api_domain_node nodes[API_COMPUTE_TRAYS];
	char rack[59];
	char partition[64];
	char clique_id[49];
	char claim_template[254]; /* status.resourceClaimTemplate.name, "" none */
	unsigned nselector;
	struct {
		char key[318];
		char value[64];
	} selector[API_NODE_SELECTOR_MAX];
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_compute_domain_status_to_json(const struct api_compute_domain_status *s);

#endif
