// SPDX-License-Identifier: Apache-2.0
// Driver changes, one idempotent step per call. Each call looks at the host
// (loaded and on-disk versions, holders, a live installer, module use
// counts) and does the next thing, so a restarted agent picks up where a
// killed one stopped without repeating what is already done.
#include "nvl72/host.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define PERSISTENCED_UNIT "nvidia-persistenced.service"
#define IMEX_UNIT "nvidia-imex.service"
#define INSTALLER_ARGS_MAX 32

/* Dependents first: `modprobe -r` takes them in this order. */
static const char *const driver_modules[] = {
        "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem", "gdrdrv", "nvidia",
};

static const char *const phase_names[] = {
        [HOST_DRV_DONE] = "Done",
        [HOST_DRV_STOPPING_HOLDERS] = "StoppingHolders",
        [HOST_DRV_INSTALLING] = "Installing",
        [HOST_DRV_INSTALLER_RUNNING] = "InstallerRunning",
        [HOST_DRV_RELOADING] = "Reloading",
        [HOST_DRV_REBOOT_REQUIRED] = "RebootRequired",
        [HOST_DRV_FAILED] = "Failed",
};

const char *host_drv_phase_name(enum host_drv_phase p)
{
	return (unsigned)p < ARRAY_LEN(phase_names) ? phase_names[p] : "Unknown";
}

static bool module_loaded(struct host *h, const char *m)
{
	char rel[128], full[PATH_MAX_HOST];

	snprintf(rel, sizeof(rel), "/sys/module/%s", m);
	return host_path(h, rel, full, sizeof(full)) == NV_OK && access(full, F_OK) == 0;
}

/* refcnt of a loaded module; -1 when unreadable. */
static long module_refcnt(struct host *h, const char *m)
{
	char rel[128];
	struct buf b;
	int64_t v;

	snprintf(rel, sizeof(rel), "/sys/module/%s/refcnt", m);
	if (host_read(h, rel, 64, &b) != NV_OK)
		return -1;
	if (parse_i64(str_trim(b.data ? b.data : (char[]){""}), 0, 1 << 30, &v) != NV_OK)
		v = -1;
	buf_clear(&b);
	return (long)v;
}

/* In use: a dependent with users, or nvidia held by more than them. */
static bool driver_in_use(struct host *h, char *why, size_t whysz)
{
	long deps = 0;

	for (size_t i = 0; i + 1 < ARRAY_LEN(driver_modules); i++) {
		const char *m = driver_modules[i];
		long rc;
		if (!module_loaded(h, m))
			continue;
		deps++;
		rc = module_refcnt(h, m);
		if (rc != 0) {
			snprintf(why, whysz, "module %s is in use (refcnt %ld)", m, rc);
			return true;
		}
	}
	if (module_loaded(h, "nvidia")) {
		long rc = module_refcnt(h, "nvidia");
		if (rc < 0 || rc > deps) {
			snprintf(why, whysz, "module nvidia is in use (refcnt %ld)", rc);
			return true;
		}
	}
	return false;
}

static void loaded_version(struct host *h, char *out, size_t outsz)
{
	struct buf b;

	out[0] = '\0';
	if (host_read(h, "/sys/module/nvidia/version", 256, &b) != NV_OK)
		return;
	if (host_sys_version_parse(buf_str(&b), b.len, out, outsz) != NV_OK)
		out[0] = '\0';
	buf_clear(&b);
}

enum nv_err host_driver_ondisk(struct host *h, char *out, size_t outsz)
{
	const char *argv[] = {h->cfg.modinfo, "-F", "version", "nvidia", NULL};
	struct host_run_result res;
	enum nv_err rc;

	out[0] = '\0';
	rc = h->ops->run(h, argv, h->cfg.tool_timeout_ms, 4096, &res);
	if (rc == NV_OK && res.exit_code == 0 &&
	    host_sys_version_parse(buf_str(&res.out), res.out.len, out, outsz) != NV_OK) {
		host_fail(h, "modinfo printed no version");
		rc = NV_E_PARSE;
	}
	buf_clear(&res.out);
	if (rc == NV_E_TIMEOUT)
		host_fail(h, "modinfo timed out");
	return rc;
}

static void marker_path(struct host *h, char *out, size_t outsz)
{
	char rel[PATH_MAX_HOST];

	snprintf(rel, sizeof(rel), "%s/driver-install.pid", h->cfg.state_dir);
	if (host_path(h, rel, out, outsz) != NV_OK)
		out[0] = '\0';
}

/* The driver lock, driver-install.lock in the state dir, guards every
 * driver step and the installer a step starts. The marker alone cannot: a
 * pid names a process only while it lives (a reused pid, or one seen from
 * another PID namespace, names another), and checking the marker and then
 * starting an installer are two steps, so two agents on one tray (the old
 * and the new pod of a rollout) could both find none and both start one.
 * flock is taken before the check and the installer inherits the locked
 * fd, so the kernel holds it exactly as long as the installer and what it
 * forks live, whatever happens to the agent. NV_E_BUSY: held elsewhere. */
static enum nv_err driver_lock(struct host *h, int *out)
{
	char rel[PATH_MAX_HOST], full[PATH_MAX_HOST];
	enum nv_err rc;
	int fd;

	*out = -1;
	snprintf(rel, sizeof(rel), "%s/driver-install.lock", h->cfg.state_dir);
	if (host_path(h, rel, full, sizeof(full)) != NV_OK ||
	    host_path(h, h->cfg.state_dir, rel, sizeof(rel)) != NV_OK)
		return NV_E_TOO_LARGE;
	rc = host_mkdirs(rel, 0755);
	if (rc != NV_OK) {
		host_fail(h, "cannot create the state dir %s", rel);
		return rc;
	}
	fd = open(full, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		host_fail(h, "cannot open the driver lock %s: %s", full, strerror(errno));
		return NV_E_IO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return NV_E_BUSY;
		host_fail(h, "cannot lock %s: %s", full, strerror(e));
		return NV_E_IO;
	}
	*out = fd;
	return NV_OK;
}

/* An installer started by an earlier agent that is still running. With
 * the lock held, that is one started by an agent that took no lock. */
static bool installer_running(struct host *h, pid_t *pid)
{
	char path[PATH_MAX_HOST];
	unsigned long long st;
	long long p;
	struct buf b;
	bool alive = false;

	marker_path(h, path, sizeof(path));
	if (host_file_read(path, 256, &b) != NV_OK)
		return false;
	if (sscanf(buf_str(&b), "%lld %llu", &p, &st) == 2 && p > 0 && p <= INT32_MAX)
		alive = host_pid_alive((pid_t)p) && host_pid_starttime((pid_t)p) == st;
	buf_clear(&b);
	if (alive)
		*pid = (pid_t)p;
	else
		(void)unlink(path);
	return alive;
}

/* installer argv with "{version}" replaced; strings in store. */
static enum nv_err installer_argv(struct host *h, const char *target,
                                  const char *argv[INSTALLER_ARGS_MAX + 1],
                                  char store[INSTALLER_ARGS_MAX][256])
{
	size_t i;

	for (i = 0; h->cfg.installer[i] != NULL; i++) {
		const char *a = h->cfg.installer[i], *v = strstr(a, "{version}");
		int n;
		if (i == INSTALLER_ARGS_MAX)
			return NV_E_CONFIG;
		if (v == NULL)
			n = snprintf(store[i], 256, "%s", a);
		else
			n = snprintf(store[i], 256, "%.*s%s%s", (int)(v - a), a, target, v + 9);
		if (n < 0 || n >= 256)
			return NV_E_CONFIG;
		argv[i] = store[i];
	}
	argv[i] = NULL;
	return i > 0 ? NV_OK : NV_E_CONFIG;
}

/* Runs the installer detached from our process group, so that if we are
 * killed it still finishes. Its marker is written before it starts, and it
 * holds the driver lock (lock) from then on, so the next agent always
 * finds a running installer and waits for it. */
static enum nv_err install_run(struct host *h, const char *target, const int *lock,
                               struct host_drv_step *o)
{
	char store[INSTALLER_ARGS_MAX][256], marker[PATH_MAX_HOST], logp[PATH_MAX_HOST];
	char rel[PATH_MAX_HOST];
	const char *argv[INSTALLER_ARGS_MAX + 1];
	int64_t deadline = time_mono_ms() + h->cfg.install_timeout_ms;
	struct host_pid_rec rec = {.path = marker, .tag = target};
	struct host_spawn_gate gate = {.record = host_pid_record, .arg = &rec, .hold_fd = lock};
	int status = 0;
	pid_t pid;
	enum nv_err rc;

	if (h->cfg.installer == NULL || installer_argv(h, target, argv, store) != NV_OK) {
		snprintf(o->detail, sizeof(o->detail), "no usable installer command is configured");
		return NV_E_CONFIG;
	}
	marker_path(h, marker, sizeof(marker));
	snprintf(rel, sizeof(rel), "%s/driver-install.log", h->cfg.state_dir);
	if (host_path(h, rel, logp, sizeof(logp)) != NV_OK ||
	    host_path(h, h->cfg.state_dir, rel, sizeof(rel)) != NV_OK)
		return NV_E_TOO_LARGE;
	rc = host_mkdirs(rel, 0755);
	if (rc == NV_OK)
		rc = h->ops->spawn(h, argv, logp, &gate, &pid);
	if (rc != NV_OK && rec.err != 0) {
		/* Never started: without its marker nobody after us would know. */
		snprintf(o->detail, sizeof(o->detail),
		         "cannot write the installer marker %.180s: %s", marker, strerror(rec.err));
		return rc;
	}
	if (rc != NV_OK) {
		snprintf(o->detail, sizeof(o->detail), "cannot start %.200s", argv[0]);
		return rc;
	}
	log_info("agent", "driver installer started", "pid=%d target=%s", (int)pid, target);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (h->cfg.stopping != NULL && h->cfg.stopping(h->cfg.stopping_arg)) {
			/* The marker stays: the next agent waits for this installer
			 * and goes on from what it leaves on disk. */
			log_info("agent", "stopping; the driver installer keeps running",
			         "pid=%d target=%s", (int)pid, target);
			snprintf(o->detail, sizeof(o->detail),
			         "installer pid %d left running: the agent is stopping", (int)pid);
			return NV_E_CANCELLED;
		}
		if (time_mono_ms() > deadline) {
			kill(-pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			(void)unlink(marker);
			snprintf(o->detail, sizeof(o->detail), "installer timed out");
			return NV_E_TIMEOUT;
		}
		time_sleep_ms(20);
	}
	(void)unlink(marker);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(o->detail, sizeof(o->detail), "installer failed (status %d); see %.180s",
		         WIFEXITED(status) ? WEXITSTATUS(status) : -1, logp);
		return NV_E_IO;
	}
	return NV_OK;
}

/* Stops what holds the GPUs. *did tells whether anything was running. */
static enum nv_err holders_stop(struct host *h, enum host_imex_mode mode, bool *did)
{
	struct host_unit_state us;
	pid_t pid;
	enum nv_err rc;

	*did = false;
	if (mode == HOST_IMEX_PROCESS && host_imex_pid(h, &pid, NULL) == NV_OK) {
		*did = true;
		rc = host_imex_stop(h, mode);
		if (rc != NV_OK)
			return rc;
	}
	/* A host IMEX unit holds the GPUs whichever mode we run IMEX in. */
	static const char *const units[] = {IMEX_UNIT, PERSISTENCED_UNIT};
	for (size_t i = 0; i < ARRAY_LEN(units); i++) {
		rc = host_unit_query(h, units[i], &us);
		if (rc != NV_OK)
			return rc;
		if (us.active != HOST_UNIT_ACTIVE && us.active != HOST_UNIT_ACTIVATING)
			continue;
		*did = true;
		rc = host_unit_action(h, "stop", units[i]);
		if (rc != NV_OK)
			return rc;
	}
	return NV_OK;
}

static enum nv_err reload(struct host *h, struct host_drv_step *o)
{
	const char *argv[ARRAY_LEN(driver_modules) + 3] = {h->cfg.modprobe, "-r"};
	const char *load[] = {h->cfg.modprobe, "nvidia", NULL};
	struct host_run_result res;
	size_t n = 2;
	enum nv_err rc;

	host_nvml_close(h);
	for (size_t i = 0; i < ARRAY_LEN(driver_modules); i++)
		if (module_loaded(h, driver_modules[i]))
			argv[n++] = driver_modules[i];
	argv[n] = NULL;
	if (n > 2) {
		rc = host_tool_run(h, argv, 4096, &res);
		buf_clear(&res.out);
		if (rc != NV_OK) {
			snprintf(o->detail, sizeof(o->detail), "unload refused: %.220s", h->err);
			return NV_E_BUSY;
		}
	}
	rc = host_tool_run(h, load, 4096, &res);
	buf_clear(&res.out);
	if (rc != NV_OK)
		snprintf(o->detail, sizeof(o->detail), "load failed: %.220s", h->err);
	return rc;
}

static enum nv_err step_finish(struct host *h, struct host_drv_step *o)
{
	struct host_driver_info d;
	struct host_unit_state us;

	o->phase = HOST_DRV_DONE;
	o->finished = true;
	if (host_driver_read(h, &d) == NV_OK && d.nvml_driver[0] != '\0' &&
	    strcmp(d.nvml_driver, o->loaded) != 0) {
		o->phase = HOST_DRV_FAILED;
		snprintf(o->detail, sizeof(o->detail), "NVML reports %s, the module %s",
		         d.nvml_driver, o->loaded);
		return NV_E_STATE;
	}
	/* Bring back the persistence daemon we stopped; IMEX is the caller's. */
	if (host_unit_query(h, PERSISTENCED_UNIT, &us) == NV_OK && us.enabled &&
	    us.active == HOST_UNIT_INACTIVE)
		(void)host_unit_action(h, "start", PERSISTENCED_UNIT);
	snprintf(o->detail, sizeof(o->detail), "driver %s is loaded", o->loaded);
	return NV_OK;
}

static enum nv_err step_fail(struct host_drv_step *o, enum host_drv_phase p, enum nv_err rc)
{
	o->phase = p;
	o->finished = true;
	return rc;
}

/* The step under the driver lock: lock is handed to an installer we start. */
static enum nv_err step_locked(struct host *h, const char *target, enum host_imex_mode imex_mode,
                               const int *lock, struct host_drv_step *o)
{
	enum nv_err rc;
	bool did;
	pid_t pid;

	if (installer_running(h, &pid)) {
		o->phase = HOST_DRV_INSTALLER_RUNNING;
		snprintf(o->detail, sizeof(o->detail), "installer pid %d still running", (int)pid);
		return NV_OK;
	}
	rc = holders_stop(h, imex_mode, &did);
	if (rc != NV_OK || did) {
		o->phase = HOST_DRV_STOPPING_HOLDERS;
		snprintf(o->detail, sizeof(o->detail), "%s",
		         rc ? h->err : "stopped IMEX and holders");
		return rc;
	}
	rc = host_driver_ondisk(h, o->ondisk, sizeof(o->ondisk));
	if (rc != NV_OK)
		return rc;
	if (strcmp(o->ondisk, target) != 0) {
		o->phase = HOST_DRV_INSTALLING;
		rc = install_run(h, target, lock, o);
		if (rc == NV_E_CANCELLED) {
			o->phase = HOST_DRV_INSTALLER_RUNNING;
			rc = NV_OK;
		} else if (rc != NV_OK)
			rc = step_fail(o, HOST_DRV_FAILED, rc);
		else
			snprintf(o->detail, sizeof(o->detail), "installed %s", target);
		return rc;
	}
	if (driver_in_use(h, o->detail, sizeof(o->detail)))
		return step_fail(o, HOST_DRV_REBOOT_REQUIRED, NV_OK);
	o->phase = HOST_DRV_RELOADING;
	rc = reload(h, o);
	if (rc == NV_E_BUSY)
		rc = step_fail(o, HOST_DRV_REBOOT_REQUIRED, NV_OK);
	else if (rc != NV_OK)
		rc = step_fail(o, HOST_DRV_FAILED, rc);
	return rc;
}

enum nv_err host_driver_step(struct host *h, const char *target, enum host_imex_mode imex_mode,
                             struct host_drv_step *out)
{
	struct host_drv_step o = {0};
	enum nv_err rc;
	pid_t pid;
	int cmp, lock = -1;

	if (host_version_cmp(target, target, &cmp) != NV_OK)
		return NV_E_INVAL;
	loaded_version(h, o.loaded, sizeof(o.loaded));
	if (strcmp(o.loaded, target) == 0) {
		rc = step_finish(h, &o);
		goto out;
	}
	rc = driver_lock(h, &lock);
	if (rc == NV_E_BUSY) {
		/* An installer (an earlier agent's) or another agent's step. */
		o.phase = HOST_DRV_INSTALLER_RUNNING;
		if (installer_running(h, &pid))
			snprintf(o.detail, sizeof(o.detail), "installer pid %d still running",
			         (int)pid);
		else
			snprintf(o.detail, sizeof(o.detail),
			         "the driver lock is held: an installer or another agent runs");
		rc = NV_OK;
		goto out;
	}
	if (rc != NV_OK) {
		snprintf(o.detail, sizeof(o.detail), "%s", h->err);
		rc = step_fail(&o, HOST_DRV_FAILED, rc);
		goto out;
	}
	rc = step_locked(h, target, imex_mode, &lock, &o);
out:
	if (lock >= 0)
		close(lock);
	*out = o;
	return rc;
}
