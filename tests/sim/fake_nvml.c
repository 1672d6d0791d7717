// SPDX-License-Identifier: Apache-2.0
// The simulator's libnvidia-ml.so.1: exactly the NVML entry points the agent
// uses, answering from the tray's state files under $NVL72_SIM_ROOT (one
// gpu/<n> file per GPU, the driver version from the sim host's sys files).
// Calls, layouts, buffer sizes and error codes follow nvml.h as NVIDIA
// publishes it (NVIDIA/go-nvml gen/nvml/nvml.h: API 12 as of 12.9, the
// R570/R575 drivers; API 13 from 13.0.39, R580 on).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

#define GPUS_MAX 8

/* NVML's layouts, declared independently of the agent on purpose. */
struct fabric_v1 {
	unsigned char cluster_uuid[16];
	int status;
	unsigned int clique_id;
	unsigned char state;
};

struct fabric_v3 {
	unsigned int version;
	unsigned char cluster_uuid[16];
	int status;
	unsigned int clique_id;
	unsigned char state;
	unsigned int health_mask;
	unsigned char health_summary;
};

/* nvmlPciInfo_t, filled by nvmlDeviceGetPciInfo_v3. */
struct pci_info {
	char bus_id_legacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[32];
};

struct platform_v2 {
	unsigned int version;
	unsigned char ib_guid[16];
	unsigned char chassis_serial[16];
	unsigned char slot;
	unsigned char tray_index;
	unsigned char host_id;
	unsigned char peer_type;
	unsigned char module_id;
};

#define VER(size, v) ((unsigned int)(size) | ((unsigned int)(v) << 24))

/* Exported with NVML's names and C types; prototypes keep -Wmissing-prototypes quiet. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int r);
int nvmlSystemGetDriverVersion(char *v, unsigned int len);
int nvmlSystemGetNVMLVersion(char *v, unsigned int len);
int nvmlSystemGetCudaDriverVersion(int *v);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev);
int nvmlDeviceGetUUID(void *dev, char *uuid, unsigned int len);
int nvmlDeviceGetGpuFabricInfoV(void *dev, struct fabric_v3 *f);
int nvmlDeviceGetGpuFabricInfo(void *dev, struct fabric_v1 *f);
int nvmlDeviceGetPlatformInfo(void *dev, struct platform_v2 *p);
int nvmlDeviceGetVbiosVersion(void *dev, char *version, unsigned int len);
int nvmlDeviceGetPciInfo_v3(void *dev, struct pci_info *pci);
int nvmlDeviceGetBoardPartNumber(void *dev, char *part, unsigned int len);
int nvmlDeviceGetSerial(void *dev, char *serial, unsigned int len);

static int inits;
static char handles[GPUS_MAX];

static bool gpu_file(unsigned int i, char *out, size_t outsz)
{
	char rel[32];

	snprintf(rel, sizeof(rel), "gpu/%u", i);
	return sim_path(out, outsz, sim_root(), rel);
}

static unsigned int gpu_count(void)
{
	char p[SIM_PATH_MAX];
	unsigned int n = 0;

	while (n < GPUS_MAX && gpu_file(n, p, sizeof(p)) && sim_exists(p))
		n++;
	return n;
}

int nvmlInit_v2(void)
{
	char p[SIM_PATH_MAX], v[64];

	if (sim_root() == NULL)
		return NVML_ERROR_UNKNOWN;
	if (sim_path(p, sizeof(p), sim_root(), "faults/nvml_init_fail") && sim_exists(p))
		return NVML_ERROR_UNKNOWN;
	if (!sim_driver_loaded(sim_root(), v, sizeof(v)))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	inits++;
	return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	inits--;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(int r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument Version Mismatch";
	default:
		return "Unknown Error";
	}
}

static int copy_out(char *dst, unsigned int len, const char *src)
{
	size_t n = strlen(src);

	if (dst == NULL || n + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, src, n + 1);
	return NVML_SUCCESS;
}

int nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
	char d[64];

	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (!sim_driver_loaded(sim_root(), d, sizeof(d)))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	return copy_out(v, len, d);
}

/* The NVML API level the library answers with: the GPU file's nvml_api
 * (12 or 13) when set, a pin that outlives a driver change; else the
 * loaded driver's: 13 from R580 on, 12 before (the go-nvml header history:
 * API 12 through 12.9, the R575 headers; API 13 from 13.0.39, R580). */
static unsigned int api_level(const char *gpu_file)
{
	char v[64], d[64];
	unsigned long n, major;

	if (gpu_file != NULL && sim_kv_get(gpu_file, "nvml_api", v, sizeof(v)) &&
	    sim_parse_ul(v, 99, &n) && (n == 12 || n == 13))
		return (unsigned int)n;
	if (!sim_driver_loaded(sim_root(), d, sizeof(d)))
		return 13;
	d[strcspn(d, ".")] = '\0';
	if (!sim_parse_ul(d, 9999, &major))
		return 13;
	return major >= 580 ? 13 : 12;
}

int nvmlSystemGetNVMLVersion(char *v, unsigned int len)
{
	char d[64], out[80], f[SIM_PATH_MAX];

	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (!sim_driver_loaded(sim_root(), d, sizeof(d)))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	/* "13.580.65": the API level, then the driver version. The level is
	 * the library's, so GPU 0's file stands for all. */
	snprintf(out, sizeof(out), "%u.%s", api_level(gpu_file(0, f, sizeof(f)) ? f : NULL), d);
	return copy_out(v, len, out);
}

/* GPU 0's cuda key (simctl create --profile writes it: 13040 for a 615.23
 * tray, CUDA 13.4), else 13000, the CUDA 13.0 of the R580 captures. */
int nvmlSystemGetCudaDriverVersion(int *v)
{
	char f[SIM_PATH_MAX], s[32];
	unsigned long n = 13000;

	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (v == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (gpu_file(0, f, sizeof(f)) && sim_kv_get(f, "cuda", s, sizeof(s)) &&
	    !sim_parse_ul(s, 99999, &n))
		n = 13000;
	*v = (int)n;
	return NVML_SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (n == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = gpu_count();
	return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev)
{
	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (dev == NULL || i >= gpu_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = &handles[i];
	return NVML_SUCCESS;
}

/* The GPU's state file, or false for a handle that is not ours. */
static bool dev_file(void *dev, char *out, size_t outsz)
{
	char *h = dev;

	if (inits == 0 || h < handles || h >= handles + GPUS_MAX)
		return false;
	return gpu_file((unsigned int)(h - handles), out, outsz);
}

static unsigned long kv_num(const char *file, const char *key, unsigned long max, unsigned long def)
{
	char v[64];
	unsigned long n;

	if (!sim_kv_get(file, key, v, sizeof(v)) || !sim_parse_ul(v, max, &n))
		return def;
	return n;
}

int nvmlDeviceGetUUID(void *dev, char *uuid, unsigned int len)
{
	char f[SIM_PATH_MAX], u[96];

	if (!dev_file(dev, f, sizeof(f)))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!sim_kv_get(f, "uuid", u, sizeof(u)))
		return NVML_ERROR_UNKNOWN;
	return copy_out(uuid, len, u);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "3c9a5e21-7f04-..." into 16 bytes; all zero when absent or malformed. */
static void uuid_bytes(const char *file, unsigned char out[16])
{
	unsigned char b[16] = {0};
	char s[64];
	size_t n = 0;

	memset(out, 0, 16);
	if (!sim_kv_get(file, "cluster", s, sizeof(s)))
		return;
	for (const char *p = s; *p != '\0'; p++) {
		int v = hexval(*p);
		if (*p == '-')
			continue;
		if (v < 0 || n == 32)
			return;
		b[n / 2] = (unsigned char)(b[n / 2] | (n % 2 ? v : v << 4));
		n++;
	}
	if (n == 32)
		memcpy(out, b, 16);
}

/* Fills the common fields; the fault key fabric_error makes the call fail.
 * *api is the library's API level for this GPU. */
static int fabric_fill(void *dev, unsigned char uuid[16], int *status, unsigned int *clique,
                       unsigned char *state, unsigned int *mask, unsigned char *summary,
                       unsigned int *api)
{
	char f[SIM_PATH_MAX];
	unsigned long err;

	if (!dev_file(dev, f, sizeof(f)))
		return NVML_ERROR_INVALID_ARGUMENT;
	*api = api_level(f);
	err = kv_num(f, "fabric_error", 1000, 0);
	if (err != 0)
		return (int)err;
	uuid_bytes(f, uuid);
	*status = (int)kv_num(f, "status", 1000, 0);
	*clique = (unsigned int)kv_num(f, "clique", 0xffffffffUL, 32766);
	*state = (unsigned char)kv_num(f, "state", 255, 3);
	*mask = (unsigned int)kv_num(f, "health_mask", 0xffffffffUL, 0x1AA);
	/* API 12 defines the mask's first four fields only (bits 0..7); the
	 * incorrect-configuration and partition fields come with API 13. */
	if (*api < 13)
		*mask &= 0xFFu;
	*summary = (unsigned char)kv_num(f, "summary", 255, 1);
	return NVML_SUCCESS;
}

/* v2 and, from API 13, v3. A version the library does not know is
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH, nvml.h's code for "the provided
 * version is invalid/unsupported"; an API 12 library knows no v3. */
int nvmlDeviceGetGpuFabricInfoV(void *dev, struct fabric_v3 *f)
{
	unsigned int mask = 0, api = 13;
	unsigned char summary = 0;
	int r;

	if (f == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (f->version != VER(sizeof(*f), 3) && f->version != VER(36, 2))
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	r = fabric_fill(dev, f->cluster_uuid, &f->status, &f->clique_id, &f->state, &mask, &summary,
	                &api);
	if (r == NVML_SUCCESS && api < 13 && f->version == VER(sizeof(*f), 3))
		r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (r != NVML_SUCCESS)
		return r;
	f->health_mask = mask;
	if (f->version == VER(sizeof(*f), 3))
		f->health_summary = summary;
	return NVML_SUCCESS;
}

int nvmlDeviceGetGpuFabricInfo(void *dev, struct fabric_v1 *f)
{
	unsigned int mask, api;
	unsigned char summary;

	if (f == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	return fabric_fill(dev, f->cluster_uuid, &f->status, &f->clique_id, &f->state, &mask,
	                   &summary, &api);
}

int nvmlDeviceGetPlatformInfo(void *dev, struct platform_v2 *p)
{
	char f[SIM_PATH_MAX], serial[32];
	size_t n;

	if (p == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (p->version != VER(sizeof(*p), 2))
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (!dev_file(dev, f, sizeof(f)))
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(p->chassis_serial, 0, sizeof(p->chassis_serial));
	if (sim_kv_get(f, "chassis", serial, sizeof(serial))) {
		n = strlen(serial);
		memcpy(p->chassis_serial, serial, n < 16 ? n : 16);
	}
	memset(p->ib_guid, 0, sizeof(p->ib_guid));
	p->slot = (unsigned char)kv_num(f, "slot", 255, 0);
	p->tray_index = (unsigned char)kv_num(f, "tray", 255, 0);
	p->host_id = (unsigned char)kv_num(f, "host_id", 255, 1);
	p->peer_type = (unsigned char)kv_num(f, "peer_type", 255, 2);
	p->module_id = (unsigned char)kv_num(f, "module_id", 255, 1);
	return NVML_SUCCESS;
}

/* A string key of the GPU's file into buf. missing is what NVML answers
 * when the board has no such field. */
static int str_query(void *dev, const char *key, char *buf, unsigned int len, int missing)
{
	char f[SIM_PATH_MAX], v[128];

	if (buf == NULL || !dev_file(dev, f, sizeof(f)))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!sim_kv_get(f, key, v, sizeof(v)))
		return missing;
	return copy_out(buf, len, v);
}

/* "For all products": a GPU file without vbios is an unexpected error. */
int nvmlDeviceGetVbiosVersion(void *dev, char *version, unsigned int len)
{
	return str_query(dev, "vbios", version, len, NVML_ERROR_UNKNOWN);
}

/* NOT_SUPPORTED "if the needed VBIOS fields have not been filled". */
int nvmlDeviceGetBoardPartNumber(void *dev, char *part, unsigned int len)
{
	return str_query(dev, "part", part, len, NVML_ERROR_NOT_SUPPORTED);
}

/* NOT_SUPPORTED "if the device does not support this feature". */
int nvmlDeviceGetSerial(void *dev, char *serial, unsigned int len)
{
	return str_query(dev, "serial", serial, len, NVML_ERROR_NOT_SUPPORTED);
}

/* "DDDDDDDD:BB:DD.0" (NVML_DEVICE_PCI_BUS_ID_FMT, "%08X:%02X:%02X.0") into
 * its numbers; false on anything else. */
static bool pci_parse(const char *s, unsigned long *dom, unsigned long *bus, unsigned long *devn)
{
	char d[9], b[3], v[3];

	if (strlen(s) != 16 || s[8] != ':' || s[11] != ':' || strcmp(s + 14, ".0") != 0)
		return false;
	memcpy(d, s, 8);
	d[8] = '\0';
	memcpy(b, s + 9, 2);
	b[2] = '\0';
	memcpy(v, s + 12, 2);
	v[2] = '\0';
	for (const char *p = s; p < s + 14; p++)
		if (*p != ':' && hexval(*p) < 0)
			return false;
	*dom = strtoul(d, NULL, 16);
	*bus = strtoul(b, NULL, 16);
	*devn = strtoul(v, NULL, 16);
	return *bus <= 0xff && *devn <= 31;
}

/* The GPU's pci key. pciDeviceId and pciSubSystemId stay 0: the simulator
 * models no particular board's ids. */
int nvmlDeviceGetPciInfo_v3(void *dev, struct pci_info *pci)
{
	char f[SIM_PATH_MAX], v[64];
	unsigned long dom, bus, devn;

	if (pci == NULL || !dev_file(dev, f, sizeof(f)))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!sim_kv_get(f, "pci", v, sizeof(v)) || !pci_parse(v, &dom, &bus, &devn))
		return NVML_ERROR_UNKNOWN;
	memset(pci, 0, sizeof(*pci));
	pci->domain = (unsigned int)dom;
	pci->bus = (unsigned int)bus;
	pci->device = (unsigned int)devn;
	snprintf(pci->bus_id, sizeof(pci->bus_id), "%08X:%02X:%02X.0", pci->domain, pci->bus,
	         pci->device);
	/* NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, "%04X:%02X:%02X.0". */
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04X:%02X:%02X.0",
	         pci->domain & 0xffffu, pci->bus, pci->device);
	return NVML_SUCCESS;
}
