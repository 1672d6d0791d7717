// SPDX-License-Identifier: Apache-2.0
// NVML through dlopen: the few structures and entry points the agent uses
// are declared here with NVML's versioned layouts, so the build needs no
// NVIDIA headers or libraries and a tray without a driver still runs us.
// Layouts and names follow nvml.h as NVIDIA publishes it (NVIDIA/go-nvml
// gen/nvml/nvml.h: NVML API 12 as of 12.9 for R570/R575, API 13 from
// 13.0.39 for R580).
#include "nvl72/host.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_int.h"
#include "nvl72/base.h"

/* nvmlReturn_t values we act on. */
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

/* nvmlGpuFabricInfo_t: the unversioned, deprecated call. */
struct nvml_fabric_v1 {
	unsigned char cluster_uuid[16];
	int status;
	unsigned int clique_id;
	unsigned char state;
};

/* nvmlGpuFabricInfo_v3_t (API 13 / R580 headers on); v2, the newest an
 * API 12 driver (R570, R575) knows, is the same without health_summary. */
struct nvml_fabric_v3 {
	unsigned int version;
	unsigned char cluster_uuid[16];
	int status;
	unsigned int clique_id;
	unsigned char state;
	unsigned int health_mask;
	unsigned char health_summary;
};

/* nvmlPlatformInfo_v2_t. */
struct nvml_platform_v2 {
	unsigned int version;
	unsigned char ib_guid[16];
	unsigned char chassis_serial[16];
	unsigned char slot;
	unsigned char tray_index;
	unsigned char host_id;
	unsigned char peer_type;
	unsigned char module_id;
};

/* nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it (API 12 and 13 alike);
 * bus_id is NVML_DEVICE_PCI_BUS_ID_FMT, "%08X:%02X:%02X.0". */
struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[32];
};

/* NVML_STRUCT_VERSION: the size in the low bits, the version on top. */
#define NVML_VER(size, v) ((unsigned int)(size) | ((unsigned int)(v) << 24))
#define NVML_FABRIC_V2_SIZE 36u

struct nvml_lib {
	void *dl;
	int (*init)(void);
	int (*shutdown)(void);
	const char *(*error_string)(int);
	int (*driver_version)(char *, unsigned int);
	int (*nvml_version)(char *, unsigned int);
	int (*cuda_version)(int *);
	int (*count)(unsigned int *);
	int (*handle)(unsigned int, void **);
	int (*uuid)(void *, char *, unsigned int);
	int (*fabric_v)(void *, struct nvml_fabric_v3 *);
	int (*fabric_v1)(void *, struct nvml_fabric_v1 *);
	int (*platform)(void *, struct nvml_platform_v2 *);
	int (*vbios)(void *, char *, unsigned int);
	int (*pci)(void *, struct nvml_pci_info *);
	int (*part)(void *, char *, unsigned int);
	int (*serial)(void *, char *, unsigned int);
};

/* dlsym into a function pointer without an object-to-function cast. */
static void sym(void *dl, const char *name, void *fnp, size_t fnsz)
{
	void *s = dlsym(dl, name);

	if (fnsz == sizeof(s))
		memcpy(fnp, &s, sizeof(s));
}
#define SYM(l, field, name) sym((l)->dl, (name), &(l)->field, sizeof((l)->field))

static enum nv_err nvml_open(struct host *h, struct nvml_lib **out, char *why, size_t whysz)
{
	struct nvml_lib *l = h->nvml;

	if (l != NULL) {
		*out = l;
		return NV_OK;
	}
	l = xcalloc(1, sizeof(*l));
	l->dl = dlopen(h->cfg.nvml_path, RTLD_NOW | RTLD_LOCAL);
	if (l->dl == NULL) {
		if (why != NULL)
			snprintf(why, whysz, "cannot load %s", h->cfg.nvml_path);
		free(l);
		return NV_E_UNSUPPORTED;
	}
	SYM(l, init, "nvmlInit_v2");
	SYM(l, shutdown, "nvmlShutdown");
	SYM(l, error_string, "nvmlErrorString");
	SYM(l, driver_version, "nvmlSystemGetDriverVersion");
	SYM(l, nvml_version, "nvmlSystemGetNVMLVersion");
	SYM(l, cuda_version, "nvmlSystemGetCudaDriverVersion");
	SYM(l, count, "nvmlDeviceGetCount_v2");
	SYM(l, handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(l, uuid, "nvmlDeviceGetUUID");
	SYM(l, fabric_v, "nvmlDeviceGetGpuFabricInfoV");
	SYM(l, fabric_v1, "nvmlDeviceGetGpuFabricInfo");
	SYM(l, platform, "nvmlDeviceGetPlatformInfo");
	SYM(l, vbios, "nvmlDeviceGetVbiosVersion");
	SYM(l, pci, "nvmlDeviceGetPciInfo_v3");
	SYM(l, part, "nvmlDeviceGetBoardPartNumber");
	SYM(l, serial, "nvmlDeviceGetSerial");
	if (l->init == NULL || l->shutdown == NULL || l->count == NULL || l->handle == NULL) {
		if (why != NULL)
			snprintf(why, whysz, "%s lacks the NVML entry points", h->cfg.nvml_path);
		dlclose(l->dl);
		free(l);
		return NV_E_UNSUPPORTED;
	}
	h->nvml = l;
	*out = l;
	return NV_OK;
}

void host_nvml_close(struct host *h)
{
	struct nvml_lib *l = h->nvml;

	if (l == NULL)
		return;
	dlclose(l->dl);
	free(l);
	h->nvml = NULL;
}

static const char *nvml_err(const struct nvml_lib *l, int r)
{
	const char *s = l->error_string ? l->error_string(r) : NULL;
	return s ? s : "NVML error";
}

/* Copies an NVML string buffer (maybe unterminated) of len bytes. */
static void nvml_str(char *out, size_t outsz, const char *in, size_t len)
{
	size_t n = strnlen(in, len);

	if (n >= outsz)
		n = outsz - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? in[i] : '?';
	out[n] = '\0';
}

static void fabric_uuid(struct host_gpu *g, const unsigned char u[16])
{
	g->has_cluster = false;
	for (size_t i = 0; i < 16; i++)
		g->has_cluster |= u[i] != 0;
	snprintf(g->cluster_uuid, sizeof(g->cluster_uuid),
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
	         u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
	         u[15]);
}

static enum host_fabric_state fabric_state(unsigned char s)
{
	return s <= HOST_FABRIC_COMPLETED ? (enum host_fabric_state)s : HOST_FABRIC_UNKNOWN;
}

/* nvmlDeviceGetGpuFabricInfoV with v3, then v2. The header documents
 * only SUCCESS and NOT_SUPPORTED for this call; for a version it does not
 * know, nvml.h's enum names NVML_ERROR_ARGUMENT_VERSION_MISMATCH ("the
 * provided version is invalid/unsupported"). A v2 answer is never worse than
 * an error, so any failure but NOT_SUPPORTED (no fabric) tries v2. */
static int fabric_query(const struct nvml_lib *l, void *dev, struct nvml_fabric_v3 *f, bool *v3)
{
	int r;

	memset(f, 0, sizeof(*f));
	f->version = NVML_VER(sizeof(*f), 3);
	r = l->fabric_v(dev, f);
	*v3 = r == NVML_SUCCESS;
	if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED)
		return r;
	memset(f, 0, sizeof(*f));
	f->version = NVML_VER(NVML_FABRIC_V2_SIZE, 2);
	return l->fabric_v(dev, f);
}

/* The summary NVML gives (v3, when supported), else one from the mask. */
static void gpu_health_set(struct host_gpu *g, const struct nvml_fabric_v3 *f, bool v3)
{
	g->health_mask = f->health_mask;
	host_health_decode(f->health_mask, &g->health);
	if (v3 && f->health_summary != HOST_HEALTH_NOT_SUPPORTED) {
		g->health_source = HOST_HEALTH_SRC_SUMMARY;
		g->health_summary = f->health_summary <= HOST_HEALTH_LIMITED_CAPACITY
		                            ? (enum host_health_summary)f->health_summary
		                            : HOST_HEALTH_UNKNOWN;
		return;
	}
	g->health_source = HOST_HEALTH_SRC_MASK;
	g->health_summary = host_health_from_mask(&g->health);
}

static void gpu_fabric_read(const struct nvml_lib *l, void *dev, struct host_gpu *g)
{
	struct nvml_fabric_v3 f;
	int r = NVML_ERROR_NOT_SUPPORTED;
	bool v3 = false;

	memset(&f, 0, sizeof(f));
	if (l->fabric_v != NULL) {
		r = fabric_query(l, dev, &f, &v3);
		g->has_health = r == NVML_SUCCESS;
	} else if (l->fabric_v1 != NULL) {
		struct nvml_fabric_v1 o;
		memset(&o, 0, sizeof(o));
		r = l->fabric_v1(dev, &o);
		memcpy(f.cluster_uuid, o.cluster_uuid, 16);
		f.status = o.status;
		f.clique_id = o.clique_id;
		f.state = o.state;
	}
	if (r == NVML_ERROR_NOT_SUPPORTED) {
		g->fabric_state = HOST_FABRIC_NOT_SUPPORTED;
		return;
	}
	if (r != NVML_SUCCESS) {
		g->fabric_state = HOST_FABRIC_UNKNOWN;
		g->nvml_error = r;
		return;
	}
	g->fabric_state = fabric_state(f.state);
	g->fabric_status = f.status;
	g->clique_id = f.clique_id;
	fabric_uuid(g, f.cluster_uuid);
	if (g->has_health)
		gpu_health_set(g, &f, v3);
}

/* A string query into out (outsz bytes, NVML's buffer size at most 96);
 * out stays "" when the call is missing or fails (NOT_SUPPORTED on boards
 * without the field, per nvml.h). */
static void gpu_str_read(int (*fn)(void *, char *, unsigned int), void *dev, char *out,
                         size_t outsz)
{
	char b[96];

	out[0] = '\0';
	if (fn == NULL || outsz > sizeof(b))
		return;
	memset(b, 0, sizeof(b));
	if (fn(dev, b, (unsigned int)outsz) == NVML_SUCCESS)
		nvml_str(out, outsz, b, outsz);
}

/* VBIOS, PCI bus id, board part number and serial: what the rack's
 * firmware-skew check and the dashboard show of each GPU. */
static void gpu_inventory_read(const struct nvml_lib *l, void *dev, struct host_gpu *g)
{
	struct nvml_pci_info p;

	gpu_str_read(l->vbios, dev, g->vbios, sizeof(g->vbios));
	gpu_str_read(l->part, dev, g->board_part, sizeof(g->board_part));
	gpu_str_read(l->serial, dev, g->serial, sizeof(g->serial));
	if (l->pci == NULL)
		return;
	memset(&p, 0, sizeof(p));
	if (l->pci(dev, &p) == NVML_SUCCESS)
		nvml_str(g->pci_bus_id, sizeof(g->pci_bus_id), p.bus_id, sizeof(p.bus_id));
}

static void gpu_platform_read(const struct nvml_lib *l, void *dev, struct host_gpu *g)
{
	struct nvml_platform_v2 p;

	if (l->platform == NULL)
		return;
	memset(&p, 0, sizeof(p));
	p.version = NVML_VER(sizeof(p), 2);
	if (l->platform(dev, &p) != NVML_SUCCESS)
		return;
	g->has_platform = true;
	nvml_str(g->chassis_serial, sizeof(g->chassis_serial), (const char *)p.chassis_serial,
	         sizeof(p.chassis_serial));
	g->slot = p.slot;
	g->tray_index = p.tray_index;
	g->host_id = p.host_id;
	g->peer_type = p.peer_type;
	g->module_id = p.module_id;
}

static void driver_fill(const struct nvml_lib *l, struct host_driver_info *d)
{
	char v[80];

	memset(v, 0, sizeof(v));
	if (l->driver_version != NULL && l->driver_version(v, sizeof(v)) == NVML_SUCCESS)
		nvml_str(d->nvml_driver, sizeof(d->nvml_driver), v, sizeof(v));
	memset(v, 0, sizeof(v));
	if (l->nvml_version != NULL && l->nvml_version(v, sizeof(v)) == NVML_SUCCESS)
		nvml_str(d->nvml_version, sizeof(d->nvml_version), v, sizeof(v));
	if (l->cuda_version == NULL || l->cuda_version(&d->cuda_version) != NVML_SUCCESS)
		d->cuda_version = 0;
}

static enum nv_err gpus_fill(const struct nvml_lib *l, struct host_gpu *gpus, size_t cap, size_t *n,
                             char *why, size_t whysz)
{
	unsigned int count = 0;
	int r = l->count(&count);

	if (r != NVML_SUCCESS) {
		if (why != NULL)
			snprintf(why, whysz, "device count: %s", nvml_err(l, r));
		return NV_E_IO;
	}
	if (count > cap) {
		if (why != NULL)
			snprintf(why, whysz, "%u GPUs, at most %zu expected", count, cap);
		return NV_E_TOO_LARGE;
	}
	for (unsigned int i = 0; i < count; i++) {
		struct host_gpu *g = &gpus[i];
		char u[96];
		void *dev = NULL;

		memset(g, 0, sizeof(*g));
		g->index = i;
		r = l->handle(i, &dev);
		if (r != NVML_SUCCESS) {
			g->fabric_state = HOST_FABRIC_UNKNOWN;
			g->nvml_error = r;
			continue;
		}
		memset(u, 0, sizeof(u));
		if (l->uuid != NULL && l->uuid(dev, u, sizeof(u)) == NVML_SUCCESS)
			nvml_str(g->uuid, sizeof(g->uuid), u, sizeof(u));
		gpu_fabric_read(l, dev, g);
		gpu_platform_read(l, dev, g);
		gpu_inventory_read(l, dev, g);
	}
	*n = count;
	return NV_OK;
}

/* One init/shutdown per read: a driver reload between reads leaves no
 * stale handles behind. */
enum nv_err host_nvml_real_read(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n,
                                struct host_driver_info *drv, char *why, size_t whysz)
{
	struct nvml_lib *l;
	enum nv_err rc;
	int r;

	rc = nvml_open(h, &l, why, whysz);
	if (rc != NV_OK)
		return rc;
	r = l->init();
	if (r != NVML_SUCCESS) {
		if (why != NULL)
			snprintf(why, whysz, "nvmlInit: %s", nvml_err(l, r));
		return r == NVML_ERROR_DRIVER_NOT_LOADED ? NV_E_STATE : NV_E_IO;
	}
	if (drv != NULL)
		driver_fill(l, drv);
	rc = NV_OK;
	if (gpus != NULL)
		rc = gpus_fill(l, gpus, cap, n, why, whysz);
	(void)l->shutdown();
	return rc;
}
