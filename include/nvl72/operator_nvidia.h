/* SPDX-License-Identifier: Apache-2.0 */
/* NVIDIA's DRA driver on the same cluster, as the operator sees it: which
 * trays NVIDIA's ComputeDomains use, read (never written) from NVIDIA's
 * API group while its CRDs are served, so that upgrades and partition
 * changes hold instead of changing a tray under NVIDIA's workload. The
 * reading itself (discovery, the caches) is src/operator/op_nvidia.c; the
 * pure parts are here. */
/* Contract: pure functions with no global state, never blocking,
 * thread-safe on distinct arguments; objects are borrowed for the call. */
#ifndef NVL72_OPERATOR_NVIDIA_H
#define NVL72_OPERATOR_NVIDIA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* NVIDIA's API (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
 * NVIDIA/k8s-dra-driver-gpu, tag v25.12.0,
 * api/nvidia.com/resource/v1beta1/api.go: GroupName, Version; the kinds
 * ComputeDomain and ComputeDomainClique, plurals as its CRDs name them). */
#define OP_NVIDIA_GROUP "resource.nvidia.com"
#define OP_NVIDIA_VERSION "v1beta1"
#define OP_NVIDIA_DOMAINS "computedomains"
#define OP_NVIDIA_CLIQUES "computedomaincliques"
/* On a ComputeDomainClique: the UID of its ComputeDomain (same repository,
 * cmd/compute-domain-daemon/common.go, computeDomainLabelKey). */
#define OP_NVIDIA_LABEL_DOMAIN "resource.nvidia.com/computeDomain"
/* "namespace/name" of an NVIDIA ComputeDomain, or of a clique object. */
#define OP_NVIDIA_NAME_MAX 320

/* Reads an APIResourceList of resource.nvidia.com/v1beta1 (the discovery
 * document): whether computedomains and computedomaincliques are served. */
void op_nvidia_discovery_parse(const json_t *list, bool *domains, bool *cliques);

/* The NVIDIA ComputeDomain that uses node, from the cached domains and
 * cliques (arrays, either may be NULL): one whose status.nodes[] names the
 * node, else the domain (by UID, OP_NVIDIA_LABEL_DOMAIN) of a
 * ComputeDomainClique whose daemons[] names it; newer releases of the
 * driver list members only in the cliques. "namespace/name" into out (cap
 * bytes); for a clique whose domain is not among domains,
 * "ComputeDomainClique <namespace>/<name>" instead. false, out "", when no
 * NVIDIA ComputeDomain uses node. */
bool op_nvidia_node_domain(const json_t *domains, const json_t *cliques, const char *node,
                           char *out, size_t cap);

/* The cache's copy of an NVIDIA ComputeDomain or ComputeDomainClique,
 * trimmed in place to what op_nvidia_node_domain reads: metadata (name,
 * namespace, uid, resourceVersion, labels), the nodes' names of
 * status.nodes[] and of daemons[]. A kube_transform_fn; arg unused. */
void op_nvidia_trim(json_t *obj, const void *arg);

#endif
