// SPDX-License-Identifier: Apache-2.0
// simctl: creates a simulated rack (one sim root per compute tray, each with
// its host files, GPUs and loopback address) and injects faults by editing
// those state files, the same way a changing host would show them.
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#define TRAYS_MAX 72

/* What differs between the platforms a rack can be laid out as. Each value
 * is from a published capture or NVIDIA document, named beside it; where
 * none gives one, the GB300 value is kept and the comment says so (see
 * docs/agent.md, "Platform profiles"). All three NVL72 platforms have 4 GPUs
 * per compute tray (docs.nvidia.com multi-node-tuning-guide/system.html for
 * GB200 NVL72; NVIDIA/k8s-test-infra's GB300 and Vera Rubin `nvidia-smi -q -x`
 * captures, tests/e2e/go/assertions/nvidiasmi/testdata/hardware/
 * qx-gb300.xml and qx-vrnvl72.xml, each with attached_gpus 4). */
struct profile {
	const char *name, *driver, *vbios;
	/* Board part number; NULL: none written, NVML answers NOT_SUPPORTED. */
	const char *part;
	/* NVML's bus id of GPU 0..3, in NVML index order. */
	const char *pci[4];
	/* platformInfo module_id of GPU 0..3 (not the index). */
	unsigned module_of[4];
	/* nvmlSystemGetCudaDriverVersion; 0: not written (the fake's 13000). */
	unsigned cuda;
	/* Every GPU's cliqueId, unless --clique says otherwise. */
	unsigned long clique;
};

static const struct profile profiles[] = {
        /* GB300: PCI domains 8, 9, 0x18, 0x19 on bus 06, module ids 2 1 4 3
         * and VBIOS 97.10.4A.00.1A from NVIDIA/k8s-test-infra's
         * qx-gb300.xml (the GB300 VBIOS family is 97.10: DGX GB300 SW
         * 1.0.1 ships 97.10.4A.00.0C, docs.nvidia.com/dgx/
         * dgxgb200-fw-update-guide/previous-releases-gb300.html), cliqueId
         * 32766 (an unpartitioned fabric) from the same capture; driver
         * 580.95.05, a published R580 build (field reports of
         * /sys/module/nvidia/version). */
        {.name = "gb300",
         .driver = "580.95.05",
         .vbios = "97.10.4A.00.1A",
         .part = NULL,
         .pci = {"00000008:06:00.0", "00000009:06:00.0", "00000018:06:00.0", "00000019:06:00.0"},
         .module_of = {2, 1, 4, 3},
         .cuda = 0,
         .clique = 32766},
        /* GB200: NVIDIA/k8s-test-infra's qx-gb200.xml (a 4-GPU GB200 tray on
         * 580.173.02, CUDA 13.0): bus ids 00000000:{29,3F,9C,B2}:00.0, module
         * ids 2 1 4 3, VBIOS 97.00.B9.00.69, board part 900-2G548-A801-000,
         * cliqueId 2 (also what an AWS GB200 tray reports), not the 32766 of
         * the GB300 and Vera Rubin captures. */
        {.name = "gb200",
         .driver = "580.173.02",
         .vbios = "97.00.B9.00.69",
         .part = "900-2G548-A801-000",
         .pci = {"00000000:29:00.0", "00000000:3F:00.0", "00000000:9C:00.0", "00000000:B2:00.0"},
         .module_of = {2, 1, 4, 3},
         .cuda = 13000,
         .clique = 2},
        /* Vera Rubin NVL72: NVIDIA/k8s-test-infra's qx-vrnvl72.xml and
         * pkg/gpu/mocknvml/configs/mock-nvml-config-vrnvl72.yaml (a 4-GPU tray
         * on 615.23, CUDA 13.4): a two-part driver version, bus ids in PCI
         * domains 2 and 0xA, module ids 1 2 3 4 in index order, VBIOS
         * 99.00.1B.00.00, board part 699-2G558-3201-TS3, cliqueId 32766. */
        {.name = "vr200",
         .driver = "615.23",
         .vbios = "99.00.1B.00.00",
         .part = "699-2G558-3201-TS3",
         .pci = {"00000002:81:00.0", "00000002:C1:00.0", "0000000A:81:00.0", "0000000A:E1:00.0"},
         .module_of = {1, 2, 3, 4},
         .cuda = 13040,
         .clique = 32766},
};

struct rack_opts {
	unsigned long trays, ip_base, clique;
	const char *driver, *cluster, *chassis, *vbios;
	const struct profile *profile;
	bool clique_set;
};

static int usage(void)
{
	fprintf(stderr,
	        "usage: simctl create RACKDIR [--profile gb200|gb300|vr200] [--trays N]\n"
	        "                       [--driver V] [--ip-base N] [--cluster UUID]\n"
	        "                       [--clique N] [--chassis SERIAL] [--vbios VERSION]\n"
	        "                       (profile: the platform's tray shape, default gb300;\n"
	        "                       --driver, --vbios and --clique override its defaults)\n"
	        "       simctl gpu TRAYDIR IDX|all KEY=VALUE...   (state status clique cluster\n"
	        "                       health_mask summary fabric_error vbios pci part\n"
	        "                       serial nvml_api=12|13 ...)\n"
	        "       simctl fault TRAYDIR NAME on|off   (imex_ctl_hang imex_ctl_garbage\n"
	        "                       installer_fail nvml_init_fail driver_in_use\n"
	        "                       validation_fail validation_garbage)\n"
	        "       simctl in-use TRAYDIR REFCNT        (users of nvidia_uvm)\n"
	        "       simctl installer-delay TRAYDIR MS\n"
	        "       simctl step-delay TRAYDIR STEP MS [TIMES]   (modprobe-remove\n"
	        "                       modprobe-load systemctl-VERB-UNIT imex-start\n"
	        "                       imex-stop; each step is logged to steps.log, then\n"
	        "                       waits MS; with TIMES, only its next TIMES runs)\n"
	        "       simctl imex-kill TRAYDIR\n"
	        "       simctl pids DIR [NAME]   (processes of the trays under DIR: their\n"
	        "                       $NVL72_SIM_ROOT is DIR or below; NAME: only that\n"
	        "                       command)\n"
	        "       simctl busbw TRAYDIR|RACKDIR GBPS [DRIVER]   (what the validation\n"
	        "                       run reports; a rack folder sets every tray; with\n"
	        "                       DRIVER, only while that driver version is loaded)\n"
	        "       simctl validation TRAYDIR KEY=VALUE...   (busbw_gbps transport\n"
	        "                       delay_ms format=contract|nccl)\n");
	return 2;
}

static bool put(const char *dir, const char *rel, const char *text)
{
	char p[SIM_PATH_MAX];
	return sim_path(p, sizeof(p), dir, rel) && sim_write(p, text, strlen(text));
}

static bool tray_host(const char *dir, const struct rack_opts *o, unsigned long t)
{
	char text[1024];

	snprintf(text, sizeof(text),
	         "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  %s  Release Build  "
	         "(sim@nvl72)  Thu Oct  2 11:04:17 UTC 2025\nGCC version:  gcc version 13.3.0\n",
	         o->driver);
	if (!put(dir, "host/proc/driver/nvidia/version", text))
		return false;
	snprintf(text, sizeof(text), "%s\n", o->driver);
	if (!put(dir, "host/sys/module/nvidia/version", text) || !put(dir, "driver/ondisk", text) ||
	    !put(dir, "host/sys/module/nvidia/refcnt", "1\n") ||
	    !put(dir, "host/sys/module/nvidia_uvm/refcnt", "0\n"))
		return false;
	if (!put(dir, "host/proc/driver/nvidia/params",
	         "ModifyDeviceFiles: 1\nDeviceFileMode: 438\nImexChannelCount: 2048\n"
	         "CreateImexChannel0: 0\nRegistryDwords: \"\"\n"))
		return false;
	/* Dynamic majors differ per tray, as they may between real hosts. */
	snprintf(text, sizeof(text),
	         "Character devices:\n  1 mem\n  5 /dev/tty\n195 nvidia\n%lu nvidia-caps\n"
	         "%lu nvidia-caps-imex-channels\n%lu nvidia-uvm\n\nBlock devices:\n  7 loop\n",
	         200 + 3 * t, 201 + 3 * t, 202 + 3 * t);
	return put(dir, "host/proc/devices", text) &&
	       put(dir, "units/nvidia-persistenced.service",
	           "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n") &&
	       put(dir, "units/nvidia-imex.service",
	           "LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n");
}

/* Per GPU: the profile's bus id, module id, VBIOS (one for all) and part
 * number. No serial: NVML then answers NOT_SUPPORTED, as for a board
 * without one. The slot rule (trays 1-10 in slots 1-10, the others nine
 * slots up, past the switch trays) is the simulator's own: the captures
 * give one slot/tray pair each (GB200 14/4, GB300 25/15, VR 2/1), which no
 * published rule explains, so it is the same for every profile. */
static bool tray_gpus(const char *dir, const struct rack_opts *o, unsigned long t)
{
	const struct profile *pr = o->profile;
	char text[1024], extra[128], rel[32];

	for (unsigned g = 0; g < 4; g++) {
		int n = 0;
		extra[0] = '\0';
		if (pr->part != NULL)
			n = snprintf(extra, sizeof(extra), "part=%s\n", pr->part);
		if (pr->cuda != 0 && n >= 0 && (size_t)n < sizeof(extra))
			snprintf(extra + n, sizeof(extra) - (size_t)n, "cuda=%u\n", pr->cuda);
		snprintf(text, sizeof(text),
		         "uuid=GPU-%08lx-1d3a-4c8e-9a71-0f5d2c3b%04x\nstate=3\nstatus=0\n"
		         "cluster=%s\nclique=%lu\nhealth_mask=0x1AA\nsummary=1\nchassis=%s\n"
		         "slot=%lu\ntray=%lu\nhost_id=1\npeer_type=2\nmodule_id=%u\n"
		         "pci=%s\nvbios=%s\n%s",
		         0x6b0e0000UL + t, g, o->cluster, o->clique, o->chassis,
		         t <= 10 ? t : t + 9, t, pr->module_of[g], pr->pci[g], o->vbios, extra);
		snprintf(rel, sizeof(rel), "gpu/%u", g);
		if (!put(dir, rel, text))
			return false;
	}
	return true;
}

static const struct profile *profile_find(const char *name)
{
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (strcmp(profiles[i].name, name) == 0)
			return &profiles[i];
	return NULL;
}

static int rack_create(int argc, char **argv)
{
	struct rack_opts o = {.trays = 18,
	                      .ip_base = 10,
	                      .cluster = "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3",
	                      .chassis = "1821124000042",
	                      .profile = &profiles[0]};
	char dir[SIM_PATH_MAX], text[128], name[16];

	for (int i = 3; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		bool ok = true;
		if (strcmp(k, "--trays") == 0)
			ok = sim_parse_ul(v, TRAYS_MAX, &o.trays) && o.trays > 0;
		else if (strcmp(k, "--ip-base") == 0)
			ok = sim_parse_ul(v, 253, &o.ip_base);
		else if (strcmp(k, "--clique") == 0)
			ok = (o.clique_set = sim_parse_ul(v, 0xffffffffUL, &o.clique));
		else if (strcmp(k, "--profile") == 0)
			ok = (o.profile = profile_find(v)) != NULL;
		else if (strcmp(k, "--driver") == 0)
			o.driver = v;
		else if (strcmp(k, "--cluster") == 0)
			o.cluster = v;
		else if (strcmp(k, "--chassis") == 0)
			o.chassis = v;
		else if (strcmp(k, "--vbios") == 0) {
			/* NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE is 32 with the NUL. */
			o.vbios = v;
			ok = v[0] != '\0' && strlen(v) < 32 && strchr(v, '\n') == NULL;
		} else
			ok = false;
		if (!ok)
			return usage();
	}
	if (o.ip_base + o.trays > 254)
		return usage();
	if (o.driver == NULL)
		o.driver = o.profile->driver;
	if (o.vbios == NULL)
		o.vbios = o.profile->vbios;
	if (!o.clique_set)
		o.clique = o.profile->clique;
	for (unsigned long t = 1; t <= o.trays; t++) {
		snprintf(name, sizeof(name), "tray-%02lu", t);
		if (!sim_path(dir, sizeof(dir), argv[2], name) || !sim_mkdirs(dir))
			return 1;
		snprintf(text, sizeof(text), "ip=127.0.0.%lu\nindex=%lu\nprofile=%s\n",
		         o.ip_base + t, t, o.profile->name);
		if (!put(dir, "tray.env", text) || !tray_host(dir, &o, t) ||
		    !tray_gpus(dir, &o, t) || !put(dir, "faults/.keep", ""))
			return 1;
		printf("%s 127.0.0.%lu\n", dir, o.ip_base + t);
	}
	return 0;
}

static int gpu_set(int argc, char **argv)
{
	char p[SIM_PATH_MAX], rel[32];
	unsigned long idx = 0;
	bool all = strcmp(argv[3], "all") == 0;

	if (!all && !sim_parse_ul(argv[3], 7, &idx))
		return usage();
	for (unsigned long g = all ? 0 : idx; g <= (all ? 3 : idx); g++) {
		snprintf(rel, sizeof(rel), "gpu/%lu", g);
		if (!sim_path(p, sizeof(p), argv[2], rel) || !sim_exists(p))
			return 1;
		for (int i = 4; i < argc; i++) {
			char kv[256], *eq;
			snprintf(kv, sizeof(kv), "%s", argv[i]);
			eq = strchr(kv, '=');
			if (eq == NULL)
				return usage();
			*eq = '\0';
			if (!sim_kv_set(p, kv, eq + 1))
				return 1;
		}
	}
	return 0;
}

static int fault_set(const char *dir, const char *name, const char *onoff)
{
	char p[SIM_PATH_MAX], rel[128];

	if (strchr(name, '/') != NULL)
		return usage();
	snprintf(rel, sizeof(rel), "faults/%s", name);
	if (!sim_path(p, sizeof(p), dir, rel))
		return 1;
	if (strcmp(onoff, "on") == 0)
		return sim_write(p, "1\n", 2) ? 0 : 1;
	if (strcmp(onoff, "off") == 0)
		return remove(p) == 0 || !sim_exists(p) ? 0 : 1;
	return usage();
}

static int imex_kill(const char *dir)
{
	char p[SIM_PATH_MAX], text[256];
	unsigned long pid;

	if (!sim_path(p, sizeof(p), dir, "host/run/nvl72-agent/imex.pid") ||
	    sim_read(p, text, sizeof(text)) <= 0)
		return 1;
	text[strcspn(text, " ")] = '\0';
	if (!sim_parse_ul(text, 1UL << 22, &pid) || pid < 2)
		return 1;
	return kill((pid_t)pid, SIGKILL) == 0 ? 0 : 1;
}

/* Whether pid runs with NVL72_SIM_ROOT at dir or below it. Host tools are
 * handed host paths, which name no tray, so their environment tells. */
static bool pid_in(const char *pid, const char *dir)
{
	static char env[SIM_FILE_MAX];
	char p[300];
	size_t dl = strlen(dir), kl = strlen(SIM_ENV "=");
	long n;

	snprintf(p, sizeof(p), "/proc/%s/environ", pid);
	n = sim_read(p, env, sizeof(env));
	for (long i = 0; i < n; i += (long)strlen(env + i) + 1) {
		const char *e = env + i;
		if (strncmp(e, SIM_ENV "=", kl) == 0)
			return strncmp(e + kl, dir, dl) == 0 &&
			       (e[kl + dl] == '\0' || e[kl + dl] == '/');
	}
	return false;
}

static int pids_list(const char *dir, const char *name)
{
	char self[32], p[300], comm[64];
	struct dirent *de;
	DIR *d = opendir("/proc");
	size_t dl = strlen(dir);

	if (d == NULL || dl == 0)
		return 1;
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	while ((de = readdir(d)) != NULL) {
		char want[SIM_PATH_MAX];
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || strcmp(de->d_name, self) == 0)
			continue;
		snprintf(want, sizeof(want), "%.*s", (int)dl, dir);
		if (!pid_in(de->d_name, want))
			continue;
		snprintf(p, sizeof(p), "/proc/%s/comm", de->d_name);
		if (name != NULL &&
		    (sim_read(p, comm, sizeof(comm)) <= 0 || strcmp(sim_rtrim(comm), name) != 0))
			continue;
		printf("%s\n", de->d_name);
	}
	closedir(d);
	return 0;
}

static int validation_set(const char *dir, int argc, char **argv)
{
	char p[SIM_PATH_MAX];

	if (!sim_path(p, sizeof(p), dir, "validation"))
		return 1;
	for (int i = 0; i < argc; i++) {
		char kv[128], *eq;
		snprintf(kv, sizeof(kv), "%s", argv[i]);
		eq = strchr(kv, '=');
		if (eq == NULL || eq == kv || strchr(eq + 1, '\n') != NULL)
			return usage();
		*eq = '\0';
		if (!sim_kv_set(p, kv, eq + 1))
			return 1;
	}
	return 0;
}

/* "812.5": digits and at most one dot, as the validation contract allows. */
static bool gbps_ok(const char *s)
{
	size_t dots = 0, digits = 0;

	for (const char *c = s; *c != '\0'; c++) {
		if (*c == '.')
			dots++;
		else if (*c >= '0' && *c <= '9')
			digits++;
		else
			return false;
	}
	return digits > 0 && digits <= 9 && dots <= 1 && s[0] != '.';
}

/* A tray folder (it has tray.env), or a rack folder: every tray-NN in it.
 * With driver, only while that driver version is loaded. */
static int busbw_set(const char *dir, const char *gbps, const char *driver)
{
	char p[SIM_PATH_MAX], kv[128], name[16];
	char *args[1] = {kv};
	int set = 0;

	if (!gbps_ok(gbps) || (driver && (driver[0] == '\0' || strlen(driver) > 63 ||
	                                  strpbrk(driver, "=@ \t\n") != NULL)))
		return usage();
	if (driver)
		snprintf(kv, sizeof(kv), "busbw_gbps@%s=%s", driver, gbps);
	else
		snprintf(kv, sizeof(kv), "busbw_gbps=%s", gbps);
	if (sim_path(p, sizeof(p), dir, "tray.env") && sim_exists(p))
		return validation_set(dir, 1, args);
	for (int t = 1; t <= TRAYS_MAX; t++) {
		char tray[SIM_PATH_MAX];
		snprintf(name, sizeof(name), "tray-%02d", t);
		if (!sim_path(tray, sizeof(tray), dir, name) || !sim_exists(tray))
			continue;
		if (validation_set(tray, 1, args) != 0)
			return 1;
		set++;
	}
	return set > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	char text[64];

	if (argc >= 3 && strcmp(argv[1], "create") == 0)
		return rack_create(argc, argv);
	if (argc >= 5 && strcmp(argv[1], "gpu") == 0)
		return gpu_set(argc, argv);
	if (argc == 5 && strcmp(argv[1], "fault") == 0)
		return fault_set(argv[2], argv[3], argv[4]);
	if (argc == 4 &&
	    (strcmp(argv[1], "in-use") == 0 || strcmp(argv[1], "installer-delay") == 0)) {
		unsigned long n;
		if (!sim_parse_ul(argv[3], 1UL << 30, &n))
			return usage();
		snprintf(text, sizeof(text), "%lu\n", n);
		return put(argv[2],
		           argv[1][0] == 'i' && argv[1][1] == 'n' && argv[1][2] == '-'
		                   ? "host/sys/module/nvidia_uvm/refcnt"
		                   : "driver/installer_delay_ms",
		           text)
		               ? 0
		               : 1;
	}
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "step-delay") == 0) {
		unsigned long n, times = 0;
		char rel[160];
		if (!sim_parse_ul(argv[4], 600000, &n) || strchr(argv[3], '/') != NULL ||
		    strlen(argv[3]) > 100 ||
		    (argc == 6 && (!sim_parse_ul(argv[5], 1000000, &times) || times == 0)))
			return usage();
		if (argc == 6)
			snprintf(text, sizeof(text), "%lu %lu\n", n, times);
		else
			snprintf(text, sizeof(text), "%lu\n", n);
		snprintf(rel, sizeof(rel), "delays/%s", argv[3]);
		return put(argv[2], rel, text) ? 0 : 1;
	}
	if (argc == 3 && strcmp(argv[1], "imex-kill") == 0)
		return imex_kill(argv[2]);
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "pids") == 0)
		return pids_list(argv[2], argc == 4 ? argv[3] : NULL);
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "busbw") == 0)
		return busbw_set(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc >= 4 && strcmp(argv[1], "validation") == 0)
		return validation_set(argv[2], argc - 3, argv + 3);
	return usage();
}
