// SPDX-License-Identifier: Apache-2.0
// The simulator's host tools in one program, chosen by the name it is run
// as: modprobe and modinfo over the sim host's module files, systemctl over
// per-unit state files, nvl72-sim-installer, which puts a driver version
// "on disk" (slowly, or failing, when the tray's state says so), and
// nvl72-sim-validate, which stands in for an NCCL all-reduce run and prints
// the bus bandwidth the tray's state file holds.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

static const char *root;

__attribute__((format(printf, 2, 3))) static bool at(char *out, const char *fmt, ...)
{
	va_list ap;
	char rel[512];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);

	return n > 0 && (size_t)n < sizeof(rel) && sim_path(out, SIM_PATH_MAX, root, rel);
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool fault(const char *name)
{
	char p[SIM_PATH_MAX];
	return at(p, "faults/%s", name) && sim_exists(p);
}

static int modinfo_main(int argc, char **argv)
{
	char p[SIM_PATH_MAX], v[64];

	if (argc < 2 || strcmp(argv[argc - 1], "nvidia") != 0) {
		fprintf(stderr, "usage: modinfo -F version nvidia\n");
		return 1;
	}
	if (!at(p, "%s", "driver/ondisk") || sim_read(p, v, sizeof(v)) <= 0) {
		fprintf(stderr, "modinfo: ERROR: Module nvidia not found.\n");
		return 1;
	}
	printf("%s\n", sim_rtrim(v));
	return 0;
}

static long refcnt(const char *m)
{
	char p[SIM_PATH_MAX], v[32];
	unsigned long n;

	if (!at(p, "host/sys/module/%s/refcnt", m) || sim_read(p, v, sizeof(v)) <= 0 ||
	    !sim_parse_ul(sim_rtrim(v), 1UL << 30, &n))
		return 0;
	return (long)n;
}

static void module_remove(const char *m)
{
	char p[SIM_PATH_MAX];

	if (at(p, "host/sys/module/%s/refcnt", m))
		unlink(p);
	if (at(p, "host/sys/module/%s/version", m))
		unlink(p);
	if (at(p, "host/sys/module/%s", m))
		rmdir(p);
	if (strcmp(m, "nvidia") == 0 && at(p, "%s", "host/proc/driver/nvidia/version"))
		unlink(p);
}

static int module_load(void)
{
	char p[SIM_PATH_MAX], v[64], text[512];
	int n;

	if (!at(p, "%s", "driver/ondisk") || sim_read(p, v, sizeof(v)) <= 0) {
		fprintf(stderr, "modprobe: FATAL: Module nvidia not found.\n");
		return 1;
	}
	sim_rtrim(v);
	sleep_ms(100);
	n = snprintf(
	        text, sizeof(text),
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  %s  Release Build  "
	        "(sim@nvl72)  Thu Oct  2 11:04:17 UTC 2025\nGCC version:  gcc version 13.3.0\n",
	        v);
	if (!at(p, "%s", "host/proc/driver/nvidia/version") || !sim_write(p, text, (size_t)n))
		return 1;
	n = snprintf(text, sizeof(text), "%s\n", v);
	if (!at(p, "%s", "host/sys/module/nvidia/version") || !sim_write(p, text, (size_t)n))
		return 1;
	if (!at(p, "%s", "host/sys/module/nvidia/refcnt") || !sim_write(p, "0\n", 2))
		return 1;
	return 0;
}

static int modprobe_main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "-r") == 0) {
		sim_step(root, "modprobe-remove");
		for (int i = 2; i < argc; i++) {
			if ((strcmp(argv[i], "nvidia") != 0 && refcnt(argv[i]) > 0) ||
			    (strcmp(argv[i], "nvidia") == 0 && fault("driver_in_use"))) {
				fprintf(stderr, "modprobe: FATAL: Module %s is in use.\n", argv[i]);
				return 1;
			}
		}
		for (int i = 2; i < argc; i++)
			module_remove(argv[i]);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "nvidia") == 0) {
		sim_step(root, "modprobe-load");
		return module_load();
	}
	fprintf(stderr, "usage: modprobe [-r] module...\n");
	return 1;
}

static int installer_main(int argc, char **argv)
{
	char p[SIM_PATH_MAX], line[128], v[32];
	unsigned long delay = 0;
	int fd, n;

	if (argc != 2) {
		fprintf(stderr, "usage: nvl72-sim-installer VERSION\n");
		return 2;
	}
	if (!at(p, "%s", "driver/installer.log"))
		return 2;
	fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	n = snprintf(line, sizeof(line), "run %s %d\n", argv[1], (int)getpid());
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		return 2;
	close(fd);
	printf("installing NVIDIA driver %s\n", argv[1]);
	fflush(stdout);
	if (at(p, "%s", "driver/installer_delay_ms") && sim_read(p, v, sizeof(v)) > 0)
		(void)sim_parse_ul(sim_rtrim(v), 600000, &delay);
	sleep_ms(delay);
	if (fault("installer_fail")) {
		fprintf(stderr, "E: dpkg returned an error code (1)\n");
		return 1;
	}
	n = snprintf(line, sizeof(line), "%s\n", argv[1]);
	return at(p, "%s", "driver/ondisk") && sim_write(p, line, (size_t)n) ? 0 : 1;
}

/* The validation run: `validation` (key=value: busbw_gbps, transport,
 * delay_ms, format=contract|nccl) decides what it prints, and
 * busbw_gbps@<driver version> what it reports while that driver is loaded
 * (a test's way to give one driver a bad fabric); every run is appended to
 * validation.runs so that tests can count them. */
static int validate_main(int argc, char **argv)
{
	char p[SIM_PATH_MAX], line[512], bw[32] = "900", tr[32] = "NVLink", fmt[16] = "contract";
	char v[32];
	unsigned long delay = 0;
	size_t n;
	int fd;

	if (!at(p, "%s", "validation.runs"))
		return 2;
	n = (size_t)snprintf(line, sizeof(line), "run %d", (int)getpid());
	for (int i = 1; i < argc && n < sizeof(line) - 2; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s", argv[i]);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != (ssize_t)n)
		return 2;
	close(fd);
	if (at(p, "%s", "validation")) {
		(void)sim_kv_get(p, "busbw_gbps", bw, sizeof(bw));
		(void)sim_kv_get(p, "transport", tr, sizeof(tr));
		(void)sim_kv_get(p, "format", fmt, sizeof(fmt));
		if (sim_kv_get(p, "delay_ms", v, sizeof(v)))
			(void)sim_parse_ul(v, 600000, &delay);
		char loaded[64], key[96];
		if (sim_driver_loaded(root, loaded, sizeof(loaded))) {
			snprintf(key, sizeof(key), "busbw_gbps@%s", loaded);
			(void)sim_kv_get(p, key, bw, sizeof(bw));
		}
	}
	printf("# nvl72-sim-validate: all_reduce across the partition\n");
	fflush(stdout);
	sleep_ms(delay);
	if (fault("validation_fail")) {
		fprintf(stderr, "NCCL WARN NET/IB : Got completion with error 12\n");
		return 1;
	}
	if (fault("validation_garbage")) {
		printf("\x01\x7f busbw_gbps=lots\n");
		return 0;
	}
	if (strcmp(fmt, "nccl") == 0)
		printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %s \n#\n", bw);
	else
		printf("busbw_gbps=%s\ntransport=%s\n", bw, tr);
	return 0;
}

/* The simulated host unit of IMEX runs the fake daemon next to us. */
static bool unit_is_imex(const char *unit)
{
	return strcmp(unit, "nvidia-imex.service") == 0 || strcmp(unit, "nvidia-imex") == 0;
}

static pid_t unit_pid(const char *p)
{
	char v[32];
	unsigned long pid;

	if (!sim_kv_get(p, "MainPID", v, sizeof(v)) || !sim_parse_ul(v, 1UL << 22, &pid) ||
	    pid < 2 || kill((pid_t)pid, 0) != 0)
		return 0;
	return (pid_t)pid;
}

static void imex_unit_stop(const char *p)
{
	pid_t pid = unit_pid(p);

	if (pid > 0) {
		kill(pid, SIGTERM);
		for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
			sleep_ms(10);
	}
	sim_kv_set(p, "MainPID", "0");
}

/* As the host's unit does: the daemon is handed the host's own path. */
static bool imex_unit_start(const char *p)
{
	static const char cfg[] = "/etc/nvidia-imex/config.cfg";
	char self[SIM_PATH_MAX], bin[SIM_PATH_MAX + 16], logp[SIM_PATH_MAX];
	char num[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0 || !at(logp, "%s", "host/var/log/nvidia-imex.log"))
		return false;
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(bin, sizeof(bin), "%s/nvidia-imex", self);
	sim_write(logp, "", 0);
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		int fd = open(logp, O_WRONLY | O_APPEND | O_CLOEXEC);
		setsid();
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, bin, "-c", cfg, (char *)NULL);
		_exit(127);
	}
	snprintf(num, sizeof(num), "%d", (int)pid);
	sleep_ms(100);
	return sim_kv_set(p, "MainPID", num) && kill(pid, 0) == 0;
}

static int unit_show(const char *p, const char *unit)
{
	char ls[32], as[32], fs[32];

	if (!sim_exists(p)) {
		printf("LoadState=not-found\nActiveState=inactive\nUnitFileState=\n");
		return 0;
	}
	if (!sim_kv_get(p, "LoadState", ls, sizeof(ls)))
		snprintf(ls, sizeof(ls), "loaded");
	if (!sim_kv_get(p, "ActiveState", as, sizeof(as)))
		snprintf(as, sizeof(as), "inactive");
	if (!sim_kv_get(p, "UnitFileState", fs, sizeof(fs)))
		snprintf(fs, sizeof(fs), "disabled");
	if (unit_is_imex(unit) && strcmp(as, "active") == 0 && unit_pid(p) == 0)
		snprintf(as, sizeof(as), "failed");
	printf("LoadState=%s\nActiveState=%s\nUnitFileState=%s\n", ls, as, fs);
	return 0;
}

static int unit_verb(const char *p, const char *verb, const char *unit)
{
	char ls[32] = "";
	bool masked;

	if (!sim_exists(p)) {
		fprintf(stderr, "Failed to %s %s: Unit %s not found.\n", verb, unit, unit);
		return 5;
	}
	if (strcmp(verb, "stop") == 0 || strcmp(verb, "start") == 0 ||
	    strcmp(verb, "restart") == 0) {
		char step[96];
		snprintf(step, sizeof(step), "systemctl-%s-%s", verb, unit);
		sim_step(root, step);
	}
	masked = sim_kv_get(p, "LoadState", ls, sizeof(ls)) && strcmp(ls, "masked") == 0;
	if (masked && (strcmp(verb, "start") == 0 || strcmp(verb, "restart") == 0 ||
	               strcmp(verb, "enable") == 0)) {
		fprintf(stderr, "Failed to %s %s: Unit %s is masked.\n", verb, unit, unit);
		return 1;
	}
	if (unit_is_imex(unit) && (strcmp(verb, "stop") == 0 || strcmp(verb, "restart") == 0 ||
	                           (strcmp(verb, "start") == 0 && unit_pid(p) == 0)))
		imex_unit_stop(p);
	if (unit_is_imex(unit) && (strcmp(verb, "start") == 0 || strcmp(verb, "restart") == 0) &&
	    unit_pid(p) == 0 && !imex_unit_start(p)) {
		sim_kv_set(p, "ActiveState", "failed");
		fprintf(stderr, "Job for %s failed.\n", unit);
		return 1;
	}
	if (strcmp(verb, "start") == 0 || strcmp(verb, "restart") == 0)
		return sim_kv_set(p, "ActiveState", "active") ? 0 : 1;
	if (strcmp(verb, "stop") == 0)
		return sim_kv_set(p, "ActiveState", "inactive") ? 0 : 1;
	if (strcmp(verb, "enable") == 0)
		return sim_kv_set(p, "UnitFileState", "enabled") ? 0 : 1;
	if (strcmp(verb, "disable") == 0)
		return sim_kv_set(p, "UnitFileState", "disabled") ? 0 : 1;
	if (strcmp(verb, "mask") == 0)
		return sim_kv_set(p, "LoadState", "masked") &&
		                       sim_kv_set(p, "UnitFileState", "masked")
		               ? 0
		               : 1;
	if (strcmp(verb, "unmask") == 0)
		return sim_kv_set(p, "LoadState", "loaded") &&
		                       sim_kv_set(p, "UnitFileState", "disabled")
		               ? 0
		               : 1;
	fprintf(stderr, "Unknown command verb %s.\n", verb);
	return 1;
}

/* `systemctl kill --signal=SIG UNIT`: the signal to the unit's main
 * process (all that the simulated units have). */
static int unit_kill(const char *p, const char *unit, const char *sig)
{
	pid_t pid = unit_is_imex(unit) ? unit_pid(p) : 0;
	int signo = strcmp(sig, "SIGUSR1") == 0 || strcmp(sig, "USR1") == 0   ? SIGUSR1
	            : strcmp(sig, "SIGTERM") == 0 || strcmp(sig, "TERM") == 0 ? SIGTERM
	                                                                      : 0;

	if (signo == 0) {
		fprintf(stderr, "Failed to parse signal string %s.\n", sig);
		return 1;
	}
	if (pid <= 0) /* systemd: nothing to signal is not an error */
		return 0;
	sim_step(root, signo == SIGUSR1 ? "systemctl-kill-usr1" : "systemctl-kill-term");
	return kill(pid, signo) == 0 ? 0 : 1;
}

static int systemctl_main(int argc, char **argv)
{
	const char *verb = NULL, *unit = NULL, *sig = "SIGTERM";
	char p[SIM_PATH_MAX];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
			i++;
		else if (strncmp(argv[i], "--signal=", 9) == 0)
			sig = argv[i] + 9;
		else if (strcmp(argv[i], "--") == 0 || argv[i][0] == '-')
			continue;
		else if (verb == NULL)
			verb = argv[i];
		else
			unit = argv[i];
	}
	if (verb == NULL || unit == NULL || strchr(unit, '/') != NULL || !at(p, "units/%s", unit)) {
		fprintf(stderr, "usage: systemctl VERB [--] UNIT\n");
		return 1;
	}
	if (strcmp(verb, "kill") == 0)
		return sim_exists(p) ? unit_kill(p, unit, sig) : 5;
	return strcmp(verb, "show") == 0 ? unit_show(p, unit) : unit_verb(p, verb, unit);
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/');

	name = name ? name + 1 : argv[0];
	root = sim_root();
	if (root == NULL) {
		fprintf(stderr, "%s: %s is not set\n", name, SIM_ENV);
		return 2;
	}
	if (strcmp(name, "modinfo") == 0)
		return modinfo_main(argc, argv);
	if (strcmp(name, "modprobe") == 0)
		return modprobe_main(argc, argv);
	if (strcmp(name, "systemctl") == 0)
		return systemctl_main(argc, argv);
	if (strcmp(name, "nvl72-sim-installer") == 0)
		return installer_main(argc, argv);
	if (strcmp(name, "nvl72-sim-validate") == 0)
		return validate_main(argc, argv);
	fprintf(stderr, "%s: unknown simulated tool\n", name);
	return 2;
}
