// SPDX-License-Identifier: Apache-2.0
// What the GPUs' NVLink fabric info means for the tray: the health mask
// decoded into named fields, and the tray's clique, which all four GPUs
// must agree on before anyone may build an IMEX domain on it.
#include "nvl72/host.h"

#include <stdio.h>
#include <string.h>

#include "nvl72/base.h"

static const char *const fabric_names[] = {
        [HOST_FABRIC_NOT_SUPPORTED] = "NotSupported",
        [HOST_FABRIC_NOT_STARTED] = "NotStarted",
        [HOST_FABRIC_IN_PROGRESS] = "InProgress",
        [HOST_FABRIC_COMPLETED] = "Completed",
        [HOST_FABRIC_UNKNOWN] = "Unknown",
};

static const char *const summary_names[] = {
        [HOST_HEALTH_NOT_SUPPORTED] = "NotSupported",
        [HOST_HEALTH_HEALTHY] = "Healthy",
        [HOST_HEALTH_UNHEALTHY] = "Unhealthy",
        [HOST_HEALTH_LIMITED_CAPACITY] = "LimitedCapacity",
        [HOST_HEALTH_UNKNOWN] = "Unknown",
};

const char *host_fabric_state_name(enum host_fabric_state s)
{
	return (unsigned)s < ARRAY_LEN(fabric_names) ? fabric_names[s] : "Unknown";
}

const char *host_health_summary_name(enum host_health_summary s)
{
	return (unsigned)s < ARRAY_LEN(summary_names) ? summary_names[s] : "Unknown";
}

void host_health_decode(uint32_t mask, struct host_fabric_health *out)
{
	out->degraded_bw = mask & 0x3u;
	out->route_recovery = (mask >> 2) & 0x3u;
	out->route_unhealthy = (mask >> 4) & 0x3u;
	out->access_timeout = (mask >> 6) & 0x3u;
	out->incorrect_config = (mask >> 8) & 0xfu;
	out->partition = (mask >> 12) & 0x3u;
}

bool host_health_has_fault(const struct host_fabric_health *h)
{
	return h->degraded_bw == 1 || h->route_recovery == 1 || h->route_unhealthy == 1 ||
	       h->access_timeout == 1 || h->incorrect_config >= 2 || h->partition == 2;
}

const char *host_health_source_name(enum host_health_source s)
{
	return s == HOST_HEALTH_SRC_SUMMARY ? "summary" : s == HOST_HEALTH_SRC_MASK ? "mask" : "";
}

enum host_health_summary host_health_from_mask(const struct host_fabric_health *h)
{
	bool any = h->degraded_bw || h->route_recovery || h->route_unhealthy || h->access_timeout ||
	           h->incorrect_config || h->partition;

	if (!any)
		return HOST_HEALTH_NOT_SUPPORTED;
	if (h->route_recovery == 1 || h->route_unhealthy == 1 || h->access_timeout == 1 ||
	    h->incorrect_config >= 2 || h->partition == 2)
		return HOST_HEALTH_UNHEALTHY;
	/* Traffic still flows, at less than full bandwidth. */
	if (h->degraded_bw == 1)
		return HOST_HEALTH_LIMITED_CAPACITY;
	return HOST_HEALTH_HEALTHY;
}

static const char *const incorrect_names[] = {
        [2] = "incorrectSysGuid",    [3] = "incorrectChassisSerial",  [4] = "noPartition",
        [5] = "insufficientNvlinks", [6] = "incompatibleGpuFirmware", [7] = "invalidLocation",
        [8] = "gpuStateInvalid",
};

static void describe_add(char *out, size_t outsz, const char *word)
{
	size_t n = strlen(out);

	if (n + 1 < outsz)
		snprintf(out + n, outsz - n, "%s%s", n ? "," : "", word);
}

void host_health_describe(const struct host_fabric_health *h, char *out, size_t outsz)
{
	if (outsz == 0)
		return;
	out[0] = '\0';
	if (h->degraded_bw == 1)
		describe_add(out, outsz, "degradedBandwidth");
	if (h->route_recovery == 1)
		describe_add(out, outsz, "routeRecoveryInProgress");
	if (h->route_unhealthy == 1)
		describe_add(out, outsz, "routeUnhealthy");
	if (h->access_timeout == 1)
		describe_add(out, outsz, "accessTimeoutRecovery");
	if (h->incorrect_config >= 2)
		describe_add(out, outsz,
		             h->incorrect_config < ARRAY_LEN(incorrect_names)
		                     ? incorrect_names[h->incorrect_config]
		                     : "incorrectConfiguration");
	if (h->partition == 2)
		describe_add(out, outsz, "partitionNotAssigned");
}

enum host_fabric_state host_tray_fabric_state(const struct host_gpu *gpus, size_t n)
{
	/* Order of "worse": unknown, then not supported aside, the lowest step. */
	enum host_fabric_state worst = HOST_FABRIC_COMPLETED;
	bool any_supported = false;

	if (n == 0)
		return HOST_FABRIC_UNKNOWN;
	for (size_t i = 0; i < n; i++) {
		enum host_fabric_state s = gpus[i].fabric_state;
		if (s == HOST_FABRIC_UNKNOWN || (unsigned)s > HOST_FABRIC_UNKNOWN)
			return HOST_FABRIC_UNKNOWN;
		if (s == HOST_FABRIC_NOT_SUPPORTED)
			continue;
		any_supported = true;
		if (s < worst)
			worst = s;
	}
	return any_supported ? worst : HOST_FABRIC_NOT_SUPPORTED;
}

enum host_health_summary host_tray_health_summary(const struct host_gpu *gpus, size_t n)
{
	/* Rank: higher is worse; NOT_SUPPORTED and UNKNOWN do not count. */
	static const int rank[] = {
	        [HOST_HEALTH_NOT_SUPPORTED] = 0,    [HOST_HEALTH_HEALTHY] = 1,
	        [HOST_HEALTH_LIMITED_CAPACITY] = 2, [HOST_HEALTH_UNHEALTHY] = 3,
	        [HOST_HEALTH_UNKNOWN] = 0,
	};
	enum host_health_summary worst = HOST_HEALTH_NOT_SUPPORTED;

	for (size_t i = 0; i < n; i++) {
		enum host_health_summary s = gpus[i].health_summary;
		if (gpus[i].has_health && (unsigned)s < ARRAY_LEN(rank) && rank[s] > rank[worst])
			worst = s;
	}
	return worst;
}

enum host_health_source host_tray_health_source(const struct host_gpu *gpus, size_t n)
{
	enum host_health_source src = HOST_HEALTH_SRC_NONE;

	for (size_t i = 0; i < n; i++) {
		if (!gpus[i].has_health)
			continue;
		if (gpus[i].health_source == HOST_HEALTH_SRC_MASK)
			return HOST_HEALTH_SRC_MASK;
		if (gpus[i].health_source == HOST_HEALTH_SRC_SUMMARY)
			src = HOST_HEALTH_SRC_SUMMARY;
	}
	return src;
}

static void why_gpu(char *why, size_t whysz, const struct host_gpu *g, const char *what)
{
	if (why != NULL && whysz > 0)
		snprintf(why, whysz, "GPU %u (%s): %s", g->index, g->uuid, what);
}

/* Whether one GPU's fabric info can name a clique; sets *usable. */
static enum nv_err gpu_clique_check(const struct host_gpu *g, bool *usable, char *why, size_t whysz)
{
	*usable = false;
	if (g->fabric_state == HOST_FABRIC_NOT_SUPPORTED)
		return NV_OK;
	if (g->fabric_state != HOST_FABRIC_COMPLETED) {
		why_gpu(why, whysz, g, host_fabric_state_name(g->fabric_state));
		return NV_E_STATE;
	}
	if (g->fabric_status != 0) {
		why_gpu(why, whysz, g, "fabric registration failed");
		return NV_E_STATE;
	}
	*usable = g->has_cluster;
	return NV_OK;
}

enum nv_err host_tray_clique(const struct host_gpu *gpus, size_t n, bool *has_clique,
                             char out[HOST_CLIQUE_LEN], char *why, size_t whysz)
{
	char first[HOST_CLIQUE_LEN] = "";
	size_t with = 0;
	enum nv_err rc;

	if (n == 0) {
		if (why != NULL && whysz > 0)
			snprintf(why, whysz, "no GPUs");
		return NV_E_STATE;
	}
	for (size_t i = 0; i < n; i++) {
		char mine[HOST_CLIQUE_LEN];
		bool usable;

		rc = gpu_clique_check(&gpus[i], &usable, why, whysz);
		if (rc != NV_OK)
			return rc;
		if (!usable)
			continue;
		snprintf(mine, sizeof(mine), "%s.%u", gpus[i].cluster_uuid, gpus[i].clique_id);
		if (with++ == 0) {
			memcpy(first, mine, sizeof(first));
		} else if (strcmp(first, mine) != 0) {
			char w[160];
			snprintf(w, sizeof(w), "clique %s differs from %s", mine, first);
			why_gpu(why, whysz, &gpus[i], w);
			return NV_E_CONFLICT;
		}
	}
	if (with != 0 && with != n) {
		if (why != NULL && whysz > 0)
			snprintf(why, whysz, "%zu of %zu GPUs report a clique", with, n);
		return NV_E_CONFLICT;
	}
	*has_clique = with != 0;
	memcpy(out, first, HOST_CLIQUE_LEN);
	return NV_OK;
}
