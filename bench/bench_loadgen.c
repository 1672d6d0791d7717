// SPDX-License-Identifier: Apache-2.0
// A load generator that stands in for the nvl72-agents of many racks: it
// creates Ready Nodes, then writes every ComputeTray's status as a real agent
// does (agent_status_build on a healthy observation) and renews the agents'
// heartbeat Leases, all through the project's Kubernetes client. It counts
// its own API requests so that a benchmark can tell them from the operator's.
// For RackUpgrades it acts as the agents do: a new spec.driver.version is
// installed only while spec.maintenance.state is Drained or Upgrading (a
// simulated install of --install-ms), and each new spec.validation.id is
// answered with a Succeeded run reporting --busbw GB/s.
//
// usage: bench_loadgen nodes  --kubeconfig F --racks N [--prefix P] [--threads T]
//                             [--node-shape realistic|minimal]
//        bench_loadgen agents --kubeconfig F --racks N [--lease-namespace NS]
//                             [--heartbeat S] [--driver V] [--stats FILE]
//                             [--duration S] [--workers W] [--install-ms MS]
//                             [--busbw G]
//
// `agents` prints "all-ready <wall ms>" once every expected Rack reports all
// its trays ready, "all-upgraded <wall ms>" once as many RackUpgrades as
// racks are Completed, and keeps its counters in --stats (rewritten each
// second).
// It stops on SIGINT/SIGTERM or after --duration seconds.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/agent.h"
#include "nvl72/host.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/log.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

static const struct kube_res RES_TRAYS = {"nvl72.io", "v1alpha1", "computetrays", "ComputeTray",
                                          false};
static const struct kube_res RES_RACKS = {"nvl72.io", "v1alpha1", "racks", "Rack", false};
static const struct kube_res RES_UPGRADES = {"nvl72.io", "v1alpha1", "rackupgrades", "RackUpgrade",
                                             false};

struct opts {
	const char *mode;
	const char *kubeconfig;
	const char *prefix;
	const char *lease_ns;
	const char *driver;
	const char *stats;
	const char *node_shape;
	int64_t racks, threads, heartbeat_s, duration_s, workers, install_ms, busbw;
};

struct lg {
	const struct opts *o;
	struct kube_client *c;
	struct kube_informer *trays, *racks, *upgrades;
	struct kube_workqueue *q;
	pthread_mutex_t mu;
	json_t *leases; /* tray name -> true, once its Lease exists */
	/* tray name -> {v: driver the simulated host runs, until: monotonic ms
	 * an install in progress ends, 0 when none} */
	json_t *hosts;
	atomic_uint_fast64_t requests, status_writes, lease_creates, lease_renewals, errors;
	atomic_uint_fast64_t installs, validations;
	atomic_int_fast64_t ready_wall_ms, upgraded_wall_ms;
};

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void count(struct lg *g, enum nv_err rc, const struct kube_status *st)
{
	atomic_fetch_add(&g->requests, (uint64_t)(st->attempts > 0 ? st->attempts : 1));
	if (rc != NV_OK)
		atomic_fetch_add(&g->errors, 1);
}

/* ---- nodes ---- */

/* The shape of a GPU tray's Node as the kubelet, the controller manager,
 * node-feature-discovery and NVIDIA's GPU feature discovery leave it, each
 * writing as its own field manager so that managedFields carries one entry
 * per writer, as on a real cluster. Label keys follow the prefixes those
 * components publish (feature.node.kubernetes.io/ from NFD's cpu, kernel,
 * pci, memory, storage and system sources; nvidia.com/ from GFD); values,
 * image names and digests are synthetic. docs/performance.md gives the
 * resulting sizes. */
static const char *const arm64_hwcaps[] = {
        "AES",     "ASIMD",      "ASIMDDP", "ASIMDFHM", "ASIMDHP", "ASIMDRDM", "ATOMICS", "BF16",
        "BTI",     "CPUID",      "CRC32",   "DCPODP",   "DCPOP",   "DIT",      "EVTSTRM", "FCMA",
        "FLAGM",   "FLAGM2",     "FP",      "FPHP",     "FRINT",   "I8MM",     "ILRCPC",  "JSCVT",
        "LRCPC",   "PACA",       "PACG",    "PMULL",    "RNG",     "SB",       "SHA1",    "SHA2",
        "SHA3",    "SHA512",     "SM3",     "SM4",      "SSBS",    "SVE",      "SVE2",    "SVEAES",
        "SVEBF16", "SVEBITPERM", "SVEI8MM", "SVEPMULL", "SVESHA3", "SVESM4",   "USCAT"};

static json_t *nfd_labels(void)
{
	json_t *l = json_object();
	char k[128];

	for (size_t i = 0; i < sizeof(arm64_hwcaps) / sizeof(arm64_hwcaps[0]); i++) {
		snprintf(k, sizeof(k), "feature.node.kubernetes.io/cpu-cpuid.%s", arm64_hwcaps[i]);
		json_object_set_new(l, k, json_string("true"));
	}
	static const char *const kv[][2] = {{"cpu-hardware_multithreading", "false"},
	                                    {"cpu-model.family", "8"},
	                                    {"cpu-model.id", "3407"},
	                                    {"cpu-model.vendor_id", "ARM"},
	                                    {"kernel-config.NO_HZ", "true"},
	                                    {"kernel-config.NO_HZ_IDLE", "true"},
	                                    {"kernel-version.full", "6.8.0-bench"},
	                                    {"kernel-version.major", "6"},
	                                    {"kernel-version.minor", "8"},
	                                    {"kernel-version.revision", "0"},
	                                    {"memory-numa", "true"},
	                                    {"network-sriov.capable", "true"},
	                                    {"pci-10de.present", "true"},
	                                    {"pci-10de.sriov.capable", "false"},
	                                    {"pci-15b3.present", "true"},
	                                    {"pci-15b3.sriov.capable", "true"},
	                                    {"pci-1a03.present", "true"},
	                                    {"rdma.available", "true"},
	                                    {"rdma.capable", "true"},
	                                    {"storage-nonrotationaldisk", "true"},
	                                    {"system-os_release.ID", "ubuntu"},
	                                    {"system-os_release.VERSION_ID", "24.04"},
	                                    {"system-os_release.VERSION_ID.major", "24"},
	                                    {"system-os_release.VERSION_ID.minor", "04"}};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		snprintf(k, sizeof(k), "feature.node.kubernetes.io/%s", kv[i][0]);
		json_object_set_new(l, k, json_string(kv[i][1]));
	}
	return l;
}

static json_t *gfd_labels(const char *driver)
{
	json_t *l = json_object();
	static const char *const kv[][2] = {{"gpu.present", "true"},
	                                    {"gpu.count", "4"},
	                                    {"gpu.product", "NVIDIA-GB200"},
	                                    {"gpu.family", "blackwell"},
	                                    {"gpu.compute.major", "10"},
	                                    {"gpu.compute.minor", "0"},
	                                    {"gpu.machine", "bench-tray"},
	                                    {"gpu.memory", "189471"},
	                                    {"gpu.mode", "compute"},
	                                    {"gpu.replicas", "1"},
	                                    {"gpu.sharing-strategy", "none"},
	                                    {"mig.capable", "false"},
	                                    {"mps.capable", "false"},
	                                    {"cuda.runtime-version.major", "13"},
	                                    {"cuda.runtime-version.minor", "0"},
	                                    {"cuda.driver-version.major", "580"},
	                                    {"gpu-driver-upgrade-state", "upgrade-done"},
	                                    {"gpu.deploy.container-toolkit", "true"},
	                                    {"gpu.deploy.dcgm", "true"},
	                                    {"gpu.deploy.dcgm-exporter", "true"},
	                                    {"gpu.deploy.device-plugin", "true"},
	                                    {"gpu.deploy.driver", "pre-installed"},
	                                    {"gpu.deploy.gpu-feature-discovery", "true"},
	                                    {"gpu.deploy.node-status-exporter", "true"},
	                                    {"gpu.deploy.operator-validator", "true"},
	                                    {"gfd.timestamp", "1764547200"}};
	char k[128];

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		snprintf(k, sizeof(k), "nvidia.com/%s", kv[i][0]);
		json_object_set_new(l, k, json_string(kv[i][1]));
	}
	json_object_set_new(l, "nvidia.com/cuda.driver-version.full", json_string(driver));
	return l;
}

static json_t *node_images(void)
{
	json_t *a = json_array();
	char name[160], digest[65];

	for (int i = 0; i < 24; i++) {
		/* A synthetic digest: 64 hex digits derived from the index. */
		for (int d = 0; d < 64; d++)
			digest[d] =
			        "0123456789abcdef"[(unsigned)(i * 31 + d * 7 + (d * d) % 13) % 16];
		digest[64] = '\0';
		snprintf(name, sizeof(name), "bench.invalid/tray-image-%02d@sha256:%s", i, digest);
		json_t *names = json_array();
		json_array_append_new(names, json_string(name));
		snprintf(name, sizeof(name), "bench.invalid/tray-image-%02d:v%d.%d.%d", i,
		         1 + i % 3, i % 7, i % 5);
		json_array_append_new(names, json_string(name));
		json_array_append_new(a, json_pack("{s:o,s:I}", "names", names, "sizeBytes",
		                                   (json_int_t)(40000000 + i * 13000000)));
	}
	return a;
}

static json_t *node_condition(const char *type, const char *status, const char *reason,
                              const char *msg, const char *now)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "reason",
	                 reason, "message", msg, "lastHeartbeatTime", now, "lastTransitionTime",
	                 now);
}

static json_t *node_status(const char *name, int64_t i, bool realistic)
{
	char now[TIME_RFC3339_LEN], ip[32], uuid[40];
	json_t *conds = json_array(), *res;

	time_format_rfc3339(time_wall_ms(), now);
	if (realistic) {
		json_array_append_new(
		        conds,
		        node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
		                       "kubelet has sufficient memory available", now));
		json_array_append_new(conds, node_condition("DiskPressure", "False",
		                                            "KubeletHasNoDiskPressure",
		                                            "kubelet has no disk pressure", now));
		json_array_append_new(
		        conds, node_condition("PIDPressure", "False", "KubeletHasSufficientPID",
		                              "kubelet has sufficient PID available", now));
	}
	/* The operator counts a tray whose Node is not Ready as down. */
	json_array_append_new(conds, node_condition("Ready", "True", "KubeletReady",
	                                            realistic ? "kubelet is posting ready status"
	                                                      : "simulated tray",
	                                            now));
	if (!realistic)
		return json_pack("{s:{s:o}}", "status", "conditions", conds);
	snprintf(ip, sizeof(ip), "10.%d.%d.%d", (int)(i / 65536 % 256), (int)(i / 256 % 256),
	         (int)(i % 256));
	snprintf(uuid, sizeof(uuid), "%08llx-0000-4000-8000-%012llx", (long long)i, (long long)i);
	res = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "cpu", "144", "ephemeral-storage",
	                "3750000000Ki", "hugepages-1Gi", "0", "hugepages-2Mi", "0",
	                "hugepages-32Mi", "0", "hugepages-64Ki", "0", "memory", "889000000Ki",
	                "nvidia.com/gpu", "4", "pods", "110");
	return json_pack("{s:s,s:s,s:{s:s},s:{s:o,s:[{s:s,s:s},{s:s,s:s}],s:O,s:o,s:{s:{s:i}},s:o,"
	                 "s:{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s},s:[{s:s,s:{s:b}},{s:s,s:{s:b}}]}}",
	                 "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "status",
	                 "conditions", conds, "addresses", "type", "InternalIP", "address", ip,
	                 "type", "Hostname", "address", name, "capacity", res, "allocatable", res,
	                 "daemonEndpoints", "kubeletEndpoint", "Port", 10250, "images",
	                 node_images(), "nodeInfo", "architecture", "arm64", "bootID", uuid,
	                 "containerRuntimeVersion", "containerd://2.2.9", "kernelVersion",
	                 "6.8.0-bench", "kubeletVersion", "v1.34.4", "machineID", uuid,
	                 "operatingSystem", "linux", "osImage", "Ubuntu 24.04 LTS",
	                 "runtimeHandlers", "name", "runc", "features", "recursiveReadOnlyMounts",
	                 true, "name", "nvidia", "features", "recursiveReadOnlyMounts", true);
}

struct node_job {
	struct lg *g;
	int64_t k, step;
};

/* One server-side apply of obj to Node name as manager. */
static enum nv_err node_apply(struct lg *g, const char *name, const char *manager, const char *sub,
                              json_t *obj)
{
	struct kube_status st;
	enum nv_err rc = kube_patch(g->c, &KUBE_RES_NODES, NULL, name,
	                            &(struct kube_patch_opts){.type = KUBE_PATCH_APPLY,
	                                                      .field_manager = manager,
	                                                      .force = true,
	                                                      .subresource = sub},
	                            obj, NULL, &st);
	count(g, rc, &st);
	if (rc != NV_OK)
		fprintf(stderr, "bench_loadgen: node %s (%s%s%s): %s (%s)\n", name, manager,
		        sub ? " " : "", sub ? sub : "", nv_err_name(rc), st.message);
	json_decref(obj);
	return rc;
}

static json_t *node_meta(const char *name, json_t *labels, json_t *annotations, json_t *spec)
{
	json_t *n = json_pack("{s:s,s:s,s:{s:s,s:o}}", "apiVersion", "v1", "kind", "Node",
	                      "metadata", "name", name, "labels", labels);
	if (annotations)
		json_object_set_new(json_object_get(n, "metadata"), "annotations", annotations);
	if (spec)
		json_object_set_new(n, "spec", spec);
	return n;
}

static void *nodes_main(void *arg)
{
	struct node_job *j = arg;
	struct lg *g = j->g;
	bool real = strcmp(g->o->node_shape, "realistic") == 0;
	char name[128], cidr[32];

	for (int64_t i = j->k; i < g->o->racks * 18; i += j->step) {
		snprintf(name, sizeof(name), "%s-r%02lld-t%02lld", g->o->prefix,
		         (long long)(i / 18 + 1), (long long)(i % 18 + 1));
		json_t *kl = json_pack("{s:s}", "kubernetes.io/arch", "arm64");
		if (real) {
			json_object_set_new(kl, "beta.kubernetes.io/arch", json_string("arm64"));
			json_object_set_new(kl, "beta.kubernetes.io/os", json_string("linux"));
			json_object_set_new(kl, "kubernetes.io/hostname", json_string(name));
			json_object_set_new(kl, "kubernetes.io/os", json_string("linux"));
		}
		json_t *ka =
		        real ? json_pack("{s:s}",
		                         "volumes.kubernetes.io/controller-managed-attach-detach",
		                         "true")
		             : NULL;
		if (node_apply(g, name, "kubelet", NULL, node_meta(name, kl, ka, NULL)) != NV_OK)
			continue;
		if (real) {
			snprintf(cidr, sizeof(cidr), "10.%d.%d.0/24", (int)(128 + i / 256 % 128),
			         (int)(i % 256));
			json_t *spec = json_pack("{s:s,s:[s]}", "podCIDR", cidr, "podCIDRs", cidr);
			(void)node_apply(
			        g, name, "kube-controller-manager", NULL,
			        node_meta(name, json_object(),
			                  json_pack("{s:s}", "node.alpha.kubernetes.io/ttl", "0"),
			                  spec));
			(void)node_apply(g, name, "nfd-master", NULL,
			                 node_meta(name, nfd_labels(), NULL, NULL));
			(void)node_apply(g, name, "gpu-feature-discovery", NULL,
			                 node_meta(name, gfd_labels(g->o->driver), NULL, NULL));
		}
		json_t *status = node_status(name, i, real);
		if (!real) {
			struct kube_status st;
			enum nv_err rc =
			        kube_patch(g->c, &KUBE_RES_NODES, NULL, name,
			                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE,
			                                             .subresource = "status"},
			                   status, NULL, &st);
			json_decref(status);
			count(g, rc, &st);
			if (rc != NV_OK)
				fprintf(stderr, "bench_loadgen: node %s status: %s (%s)\n", name,
				        nv_err_name(rc), st.message);
		} else {
			(void)node_apply(g, name, "kubelet", "status", status);
		}
	}
	return NULL;
}

static int run_nodes(struct lg *g)
{
	int64_t n = g->o->threads;
	pthread_t th[16];
	struct node_job jobs[16];

	for (int64_t k = 0; k < n; k++) {
		jobs[k] = (struct node_job){g, k, n};
		pthread_create(&th[k], NULL, nodes_main, &jobs[k]);
	}
	for (int64_t k = 0; k < n; k++)
		pthread_join(th[k], NULL);
	printf("nodes %lld requests %llu errors %llu\n", (long long)(g->o->racks * 18),
	       (unsigned long long)atomic_load(&g->requests),
	       (unsigned long long)atomic_load(&g->errors));
	return atomic_load(&g->errors) == 0 ? 0 : 1;
}

/* ---- one tray's healthy observation ---- */

static uint32_t hash32(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static void obs_fill(struct host_obs *o, const struct agent_spec *s, const char *driver)
{
	uint32_t rh = hash32(s->rack), th = hash32(s->name);

	memset(o, 0, sizeof(*o));
	o->driver.loaded = true;
	str_copy(o->driver.version, sizeof(o->driver.version), driver);
	o->driver.open_module = true;
	o->driver.cuda_version = 13000;
	o->n_gpus = 4;
	for (unsigned i = 0; i < 4; i++) {
		struct host_gpu *gp = &o->gpus[i];
		gp->index = i;
		snprintf(gp->uuid, sizeof(gp->uuid), "GPU-%08x-%04x-4000-8000-%012x", th, i, rh);
		gp->fabric_state = HOST_FABRIC_COMPLETED;
		gp->has_cluster = true;
		snprintf(gp->cluster_uuid, sizeof(gp->cluster_uuid),
		         "%08x-0000-4000-8000-000000000001", rh);
		gp->clique_id = 32766;
		gp->has_health = true;
		gp->health_mask = HOST_HEALTH_MASK_CLEAR;
		gp->health_summary = HOST_HEALTH_HEALTHY;
		host_health_decode(gp->health_mask, &gp->health);
		gp->has_platform = true;
		snprintf(gp->chassis_serial, sizeof(gp->chassis_serial), "%08x", rh);
		gp->tray_index = 0;
		gp->slot = 0;
		gp->host_id = 1;
		gp->module_id = i + 1;
	}
	o->fabric = HOST_FABRIC_COMPLETED;
	o->health = HOST_HEALTH_HEALTHY;
	o->has_clique = true;
	snprintf(o->clique, sizeof(o->clique), "%s.%u", o->gpus[0].cluster_uuid,
	         o->gpus[0].clique_id);
	o->fm.active = HOST_UNIT_NOT_FOUND;
	if (s->has_imex) {
		o->imex_read = true;
		o->imex.daemon = HOST_IMEXD_READY;
		o->imex.nodes_ok = true;
		o->imex.dom.domain = HOST_IMEX_DOMAIN_UP;
		o->imex.dom.n_nodes = s->imex.n_peers;
		for (size_t i = 0; i < s->imex.n_peers; i++) {
			struct host_imex_node *nd = &o->imex.dom.nodes[i];
			nd->index = (unsigned)i;
			str_copy(nd->host, sizeof(nd->host), s->imex.peers[i]);
			nd->status = HOST_IMEXD_READY;
			nd->n_conn = s->imex.n_peers;
			for (size_t k = 0; k < s->imex.n_peers; k++)
				nd->conn[k] = HOST_IMEX_CONN_CONNECTED;
		}
		o->imex_channel_count = s->channel_count;
	}
}

/* ---- agents ---- */

static void lease_ensure(struct lg *g, const struct agent_spec *s)
{
	char now[40];
	struct kube_status st;
	json_t *l;
	enum nv_err rc;

	pthread_mutex_lock(&g->mu);
	bool have = json_object_get(g->leases, s->name) != NULL;
	pthread_mutex_unlock(&g->mu);
	if (have)
		return;
	kube_format_micro(time_wall_ms() * 1000, now);
	l = json_pack("{s:s,s:s,s:{s:s,s:s,s:[{s:s,s:s,s:s,s:s}]},s:{s:s,s:i,s:s,s:s}}",
	              "apiVersion", "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
	              s->name, "namespace", g->o->lease_ns, "ownerReferences", "apiVersion",
	              "nvl72.io/v1alpha1", "kind", "ComputeTray", "name", s->name, "uid", s->uid,
	              "spec", "holderIdentity", s->name, "leaseDurationSeconds",
	              (int)(g->o->heartbeat_s * 3), "acquireTime", now, "renewTime", now);
	rc = kube_create(g->c, &KUBE_RES_LEASES, g->o->lease_ns, l, NULL, &st);
	json_decref(l);
	count(g, rc, &st);
	if (rc == NV_OK || rc == NV_E_EXISTS) {
		atomic_fetch_add(&g->lease_creates, rc == NV_OK);
		pthread_mutex_lock(&g->mu);
		json_object_set_new(g->leases, s->name, json_true());
		pthread_mutex_unlock(&g->mu);
	}
}

/* The driver change as src/agent/agent.c makes it, without the host: the
 * version the tray ran when first seen stays until the spec asks for
 * another in Drained or Upgrading; then an install of --install-ms ends with
 * the new version loaded. Fills d, the loaded version, and how long until
 * the install ends (0: nothing to wait for). */
static void driver_sim(struct lg *g, const struct agent_spec *s, struct agent_drv_report *d,
                       char *loaded, size_t cap, int64_t *wait_ms)
{
	int64_t now = time_mono_ms(), until;
	json_t *h;

	*wait_ms = 0;
	pthread_mutex_lock(&g->mu);
	h = json_object_get(g->hosts, s->name);
	if (h == NULL && !s->has_driver) {
		str_copy(loaded, cap, g->o->driver);
		pthread_mutex_unlock(&g->mu);
		return;
	}
	if (h == NULL) {
		h = json_pack("{s:s,s:I}", "v", s->driver_version, "until", (json_int_t)0);
		json_object_set_new(g->hosts, s->name, h);
	}
	until = json_integer_value(json_object_get(h, "until"));
	if (s->has_driver && strcmp(jx_str_or(h, "v", ""), s->driver_version) != 0) {
		d->active = true;
		if (strcmp(s->maint_state, "Drained") != 0 &&
		    strcmp(s->maint_state, "Upgrading") != 0) {
			d->waiting_maintenance = true;
		} else if (until == 0 || now < until) {
			if (until == 0) {
				until = now + g->o->install_ms;
				json_object_set_new(h, "until", json_integer(until));
				atomic_fetch_add(&g->installs, 1);
			}
			d->phase = HOST_DRV_INSTALLING;
			snprintf(d->detail, sizeof(d->detail), "running the installer for %s",
			         s->driver_version);
			*wait_ms = until - now;
		} else {
			json_object_set_new(h, "v", json_string(s->driver_version));
			json_object_set_new(h, "until", json_integer(0));
			d->active = false;
		}
	}
	str_copy(loaded, cap, jx_str_or(h, "v", ""));
	pthread_mutex_unlock(&g->mu);
}

/* status.validation: the stored record, or a Succeeded run for a new
 * spec.validation.id once no driver change is in flight (the agent never
 * validates during one). */
static void validation_sim(struct lg *g, const struct agent_spec *s, const json_t *old,
                           bool drv_active, struct host_val_result *v)
{
	agent_validation_from_status(old, v);
	if (!s->has_validation || drv_active || strcmp(v->id, s->validation.id) == 0)
		return;
	memset(v, 0, sizeof(*v));
	str_copy(v->id, sizeof(v->id), s->validation.id);
	v->phase = HOST_VAL_SUCCEEDED;
	v->has_busbw = true;
	v->busbw_gbps = (double)g->o->busbw;
	str_copy(v->transport, sizeof(v->transport), "NVLS");
	v->start_ms = v->end_ms = time_wall_ms();
	str_copy(v->message, sizeof(v->message), "simulated all-reduce");
	atomic_fetch_add(&g->validations, 1);
}

static struct kube_result tray_reconcile(void *ud, const char *key)
{
	struct lg *g = ud;
	struct agent_spec spec;
	struct host_obs obs;
	struct agent_report rep;
	struct kube_status st;
	char err[256], lease[320], ts[TIME_RFC3339_LEN];
	char loaded[HOST_VERSION_LEN];
	json_t *t = kube_informer_get(g->trays, key), *old, *want, *patch;
	enum nv_err rc = NV_OK;
	int64_t wait_ms;

	if (t == NULL) {
		pthread_mutex_lock(&g->mu);
		json_object_del(g->leases, key);
		pthread_mutex_unlock(&g->mu);
		return (struct kube_result){0};
	}
	(void)agent_spec_parse(t, "127.0.0.1", &spec, err, sizeof(err));
	lease_ensure(g, &spec);
	memset(&rep, 0, sizeof(rep));
	driver_sim(g, &spec, &rep.drv, loaded, sizeof(loaded), &wait_ms);
	obs_fill(&obs, &spec, loaded);
	snprintf(lease, sizeof(lease), "%s/%s", g->o->lease_ns, spec.name);
	rep.spec = &spec;
	rep.spec_error = err;
	rep.node_ip = "127.0.0.1";
	rep.obs = &obs;
	str_copy(rep.ondisk, sizeof(rep.ondisk), obs.driver.version);
	rep.imex_applied = spec.has_imex;
	str_copy(rep.imex_hash, sizeof(rep.imex_hash), spec.has_imex ? "0123456789abcdef" : "");
	rep.lease = lease;
	old = jx_path(t, "status");
	validation_sim(g, &spec, old, rep.drv.active, &rep.validation);
	want = agent_status_build(&rep, old, time_wall_ms());
	if (agent_status_differs(json_is_object(old) ? old : NULL, want)) {
		time_format_rfc3339(time_wall_ms(), ts);
		json_object_set_new(want, "heartbeatTime", json_string(ts));
		patch = json_pack("{s:o}", "status",
		                  jx_merge_patch_diff(json_is_object(old) ? old : NULL, want));
		rc = kube_patch(g->c, &RES_TRAYS, NULL, spec.name,
		                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE,
		                                          .subresource = "status"},
		                patch, NULL, &st);
		json_decref(patch);
		count(g, rc, &st);
		if (rc == NV_OK)
			atomic_fetch_add(&g->status_writes, 1);
	}
	json_decref(want);
	json_decref(t);
	if (rc == NV_OK && wait_ms > 0)
		return (struct kube_result){.requeue_after_ms = wait_ms};
	return (struct kube_result){.err = rc == NV_E_NOT_FOUND ? NV_OK : rc};
}

static void on_tray(void *ud, json_t *obj)
{
	struct lg *g = ud;
	kube_workqueue_add(g->q, kube_obj_name(obj));
}
static void on_tray_upd(void *ud, json_t *o, json_t *n)
{
	(void)o;
	on_tray(ud, n);
}
static void on_tray_del(void *ud, json_t *obj, bool fsu)
{
	(void)fsu;
	on_tray(ud, obj);
}

/* "18 of 18 trays ready" with both numbers equal and Ready True. */
static bool rack_all_ready(const json_t *r)
{
	json_t *c = kube_condition_find(r, "Ready");
	unsigned a = 0, b = 0;
	if (c == NULL || strcmp(jx_str_or(c, "status", ""), "True") != 0)
		return false;
	return sscanf(jx_str_or(c, "message", ""), "%u of %u", &a, &b) == 2 && a == b && a > 0;
}

static void on_rack(void *ud, json_t *obj)
{
	struct lg *g = ud;
	json_t *all, *r;
	size_t i;
	int64_t ready = 0;

	(void)obj;
	if (atomic_load(&g->ready_wall_ms) != 0)
		return;
	all = kube_informer_list(g->racks);
	json_array_foreach(all, i, r)
		ready += rack_all_ready(r);
	json_decref(all);
	if (ready >= g->o->racks) {
		int64_t zero = 0, now = time_wall_ms();
		if (atomic_compare_exchange_strong(&g->ready_wall_ms, &zero, now)) {
			printf("all-ready %lld\n", (long long)now);
			fflush(stdout);
		}
	}
}
static void on_rack_upd(void *ud, json_t *o, json_t *n)
{
	(void)o;
	on_rack(ud, n);
}

static void on_upgrade(void *ud, json_t *obj)
{
	struct lg *g = ud;
	json_t *all, *u;
	size_t i;
	int64_t done = 0;

	(void)obj;
	if (atomic_load(&g->upgraded_wall_ms) != 0)
		return;
	all = kube_informer_list(g->upgrades);
	json_array_foreach(all, i, u)
		done += strcmp(jx_str_or(u, "status.phase", ""), "Completed") == 0;
	json_decref(all);
	if (done >= g->o->racks) {
		int64_t zero = 0, now = time_wall_ms();
		if (atomic_compare_exchange_strong(&g->upgraded_wall_ms, &zero, now)) {
			printf("all-upgraded %lld\n", (long long)now);
			fflush(stdout);
		}
	}
}
static void on_upgrade_upd(void *ud, json_t *o, json_t *n)
{
	(void)o;
	on_upgrade(ud, n);
}

static void lease_renew_all(struct lg *g)
{
	json_t *names;
	const char *name;
	json_t *v;
	char now[40];

	pthread_mutex_lock(&g->mu);
	names = json_copy(g->leases);
	pthread_mutex_unlock(&g->mu);
	json_object_foreach(names, name, v) {
		struct kube_status st;
		json_t *p;
		enum nv_err rc;
		if (stop_flag)
			break;
		kube_format_micro(time_wall_ms() * 1000, now);
		p = json_pack("{s:{s:s}}", "spec", "renewTime", now);
		rc = kube_patch(g->c, &KUBE_RES_LEASES, g->o->lease_ns, name,
		                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, p, NULL, &st);
		json_decref(p);
		count(g, rc, &st);
		if (rc == NV_OK)
			atomic_fetch_add(&g->lease_renewals, 1);
	}
	json_decref(names);
}

static void stats_write(struct lg *g)
{
	struct kube_informer_stats a = {0}, b = {0}, c = {0};
	char tmp[4096];
	FILE *f;

	if (g->o->stats == NULL || g->trays == NULL || g->racks == NULL || g->upgrades == NULL)
		return;
	kube_informer_stats(g->trays, &a);
	kube_informer_stats(g->racks, &b);
	kube_informer_stats(g->upgrades, &c);
	snprintf(tmp, sizeof(tmp), "%s.tmp", g->o->stats);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	/* Lists and watches of the informers are requests too. */
	fprintf(f,
	        "requests %llu\nstatus_writes %llu\nlease_creates %llu\nlease_renewals %llu\n"
	        "errors %llu\nready_wall_ms %lld\ninstalls %llu\nvalidations %llu\n"
	        "upgraded_wall_ms %lld\n",
	        (unsigned long long)(atomic_load(&g->requests) + a.lists + a.watches + b.lists +
	                             b.watches + c.lists + c.watches),
	        (unsigned long long)atomic_load(&g->status_writes),
	        (unsigned long long)atomic_load(&g->lease_creates),
	        (unsigned long long)atomic_load(&g->lease_renewals),
	        (unsigned long long)atomic_load(&g->errors),
	        (long long)atomic_load(&g->ready_wall_ms),
	        (unsigned long long)atomic_load(&g->installs),
	        (unsigned long long)atomic_load(&g->validations),
	        (long long)atomic_load(&g->upgraded_wall_ms));
	fclose(f);
	(void)rename(tmp, g->o->stats);
}

static int run_agents(struct lg *g)
{
	struct kube_workers *w = NULL;
	int64_t start = time_mono_ms(), next_hb;
	int rc = 1;

	g->q = kube_workqueue_new("loadgen", NULL);
	if (kube_informer_new(g->c, &(struct kube_informer_opts){.res = &RES_TRAYS}, &g->trays) !=
	            NV_OK ||
	    kube_informer_new(g->c, &(struct kube_informer_opts){.res = &RES_RACKS}, &g->racks) !=
	            NV_OK ||
	    kube_informer_new(g->c, &(struct kube_informer_opts){.res = &RES_UPGRADES},
	                      &g->upgrades) != NV_OK)
		goto out;
	kube_informer_add_handler(g->trays,
	                          &(struct kube_handler){on_tray, on_tray_upd, on_tray_del, g});
	kube_informer_add_handler(g->racks, &(struct kube_handler){on_rack, on_rack_upd, NULL, g});
	kube_informer_add_handler(g->upgrades,
	                          &(struct kube_handler){on_upgrade, on_upgrade_upd, NULL, g});
	if (kube_informer_start(g->trays) != NV_OK || kube_informer_start(g->racks) != NV_OK ||
	    kube_informer_start(g->upgrades) != NV_OK)
		goto out;
	w = kube_workers_start(g->q, (int)g->o->workers, tray_reconcile, g);
	next_hb = time_mono_ms() + g->o->heartbeat_s * 1000;
	while (!stop_flag &&
	       (g->o->duration_s == 0 || time_mono_ms() - start < g->o->duration_s * 1000)) {
		stats_write(g);
		if (time_mono_ms() >= next_hb) {
			next_hb += g->o->heartbeat_s * 1000;
			lease_renew_all(g);
		}
		struct timespec ts = {0, 250 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	rc = 0;
	stats_write(g);
out:
	/* Informers first: their handlers feed the queue the workers drain. */
	kube_informer_free(g->trays);
	kube_informer_free(g->racks);
	kube_informer_free(g->upgrades);
	kube_workers_stop(w);
	kube_workqueue_free(g->q);
	return rc;
}

/* ---- main ---- */

static int usage(void)
{
	fprintf(stderr, "usage: bench_loadgen nodes|agents --kubeconfig F --racks N [--prefix P]\n"
	                "       [--threads T] [--node-shape realistic|minimal] [--lease-namespace "
	                "NS] [--heartbeat S] [--driver V]\n"
	                "       [--stats FILE] [--duration S] [--workers W] [--install-ms MS]\n"
	                "       [--busbw G]\n");
	return 2;
}

static int int_arg(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	if (v == NULL || parse_i64(v, lo, hi, out) != NV_OK) {
		fprintf(stderr, "bench_loadgen: %s: expected an integer in [%lld, %lld]\n", flag,
		        (long long)lo, (long long)hi);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.prefix = "bench",
	                 .lease_ns = "nvl72-system",
	                 .driver = "580.95.05",
	                 .node_shape = "realistic",
	                 .racks = 1,
	                 .threads = 4,
	                 .heartbeat_s = 20,
	                 .workers = 4,
	                 .install_ms = 2000,
	                 .busbw = 900};
	struct lg g = {.o = &o};
	struct kube_config *cfg = NULL;
	struct kube_status st;
	int bad = 0, rc;

	if (argc < 2)
		return usage();
	o.mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		i++;
		if (strcmp(a, "--kubeconfig") == 0 && v)
			o.kubeconfig = v;
		else if (strcmp(a, "--prefix") == 0 && v)
			o.prefix = v;
		else if (strcmp(a, "--lease-namespace") == 0 && v)
			o.lease_ns = v;
		else if (strcmp(a, "--driver") == 0 && v)
			o.driver = v;
		else if (strcmp(a, "--stats") == 0 && v)
			o.stats = v;
		else if (strcmp(a, "--node-shape") == 0 && v &&
		         (strcmp(v, "realistic") == 0 || strcmp(v, "minimal") == 0))
			o.node_shape = v;
		else if (strcmp(a, "--racks") == 0)
			bad |= int_arg(a, v, 1, 300, &o.racks);
		else if (strcmp(a, "--threads") == 0)
			bad |= int_arg(a, v, 1, 16, &o.threads);
		else if (strcmp(a, "--heartbeat") == 0)
			bad |= int_arg(a, v, 1, 3600, &o.heartbeat_s);
		else if (strcmp(a, "--duration") == 0)
			bad |= int_arg(a, v, 0, 86400, &o.duration_s);
		else if (strcmp(a, "--workers") == 0)
			bad |= int_arg(a, v, 1, 64, &o.workers);
		else if (strcmp(a, "--install-ms") == 0)
			bad |= int_arg(a, v, 0, 600000, &o.install_ms);
		else if (strcmp(a, "--busbw") == 0)
			bad |= int_arg(a, v, 0, 100000, &o.busbw);
		else
			return usage();
	}
	if (bad || (strcmp(o.mode, "nodes") != 0 && strcmp(o.mode, "agents") != 0))
		return usage();
	log_set_level(LOG_LVL_WARN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	pthread_mutex_init(&g.mu, NULL);
	g.leases = json_object();
	g.hosts = json_object();
	if (kube_config_load(&(struct kube_config_opts){.kubeconfig = o.kubeconfig}, &cfg, &st) !=
	            NV_OK ||
	    kube_client_new(cfg, &(struct kube_client_opts){.component = "nvl72-bench-loadgen"},
	                    &g.c, &st) != NV_OK) {
		fprintf(stderr, "bench_loadgen: %s\n", st.message);
		return 1;
	}
	rc = strcmp(o.mode, "nodes") == 0 ? run_nodes(&g) : run_agents(&g);
	kube_client_free(g.c);
	json_decref(g.leases);
	json_decref(g.hosts);
	return rc;
}
