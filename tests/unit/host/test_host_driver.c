// SPDX-License-Identifier: Apache-2.0
// Unit tests for driver change steps against a temp host: the full path,
// resuming with a fresh host object (as after kill -9) without running the
// installer again, an installer still running (found by its marker or by
// the driver lock it holds), and the refusals.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>

#include <cmocka.h>

#include "host_fixture.h"

static const char modinfo_sh[] =
        "cat \"$R/ondisk\" 2>/dev/null || { echo 'modinfo: ERROR: Module nvidia not found.' >&2; "
        "exit 1; }";
static const char installer_sh[] = "echo \"run $1\" >> \"$R/runs\"; [ -f \"$R/fail\" ] && exit 1\n"
                                   "echo \"$1\" > \"$R/ondisk\"";
static const char modprobe_sh[] =
        "if [ \"$1\" = -r ]; then\n"
        "  [ -f \"$R/busy\" ] && { echo 'modprobe: FATAL: Module nvidia is in use.' >&2; exit 1; "
        "}\n"
        "  shift; for m in \"$@\"; do rm -rf \"$R/sys/module/$m\"; done\n"
        "  rm -f \"$R/proc/driver/nvidia/version\"; exit 0\n"
        "fi\n"
        "v=$(cat \"$R/ondisk\"); mkdir -p \"$R/sys/module/nvidia\"\n"
        "echo \"$v\" > \"$R/sys/module/nvidia/version\"; echo 0 > \"$R/sys/module/nvidia/refcnt\"";
static const char systemctl_sh[] =
        "echo \"$*\" >> \"$R/calls\"\n"
        "f=\"$R/units/$3\"; [ \"$1\" = show ] && f=\"$R/units/$5\"\n"
        "case \"$1\" in\n"
        "show) cat \"$f\" 2>/dev/null || printf 'LoadState=not-found\\nActiveState=inactive\\n"
        "UnitFileState=\\n';;\n"
        "stop) sed -i 's/^ActiveState=.*/ActiveState=inactive/' \"$f\";;\n"
        "start) sed -i 's/^ActiveState=.*/ActiveState=active/' \"$f\";;\n"
        "esac";

static void tray_setup(struct fx *x)
{
	fx_init(x, NULL);
	fx_script(x, FX_MODINFO, modinfo_sh);
	fx_script(x, FX_INSTALLER, installer_sh);
	fx_script(x, FX_MODPROBE, modprobe_sh);
	fx_script(x, FX_SYSTEMCTL, systemctl_sh);
	fx_file(x, "ondisk", "1.0.0\n");
	fx_file(x, "sys/module/nvidia/version", "1.0.0\n");
	fx_file(x, "sys/module/nvidia/refcnt", "1\n");
	fx_file(x, "sys/module/nvidia_uvm/refcnt", "0\n");
	fx_file(x, "units/nvidia-persistenced.service",
	        "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n");
}

static int count_lines(struct fx *x, const char *rel)
{
	char *s = fx_slurp(x, rel);
	int n = 0;

	for (const char *p = s; p != NULL && *p != '\0'; p++)
		n += *p == '\n';
	free(s);
	return n;
}

static enum host_drv_phase step(struct host *h, bool *finished)
{
	struct host_drv_step s;
	enum nv_err rc = host_driver_step(h, "2.0.0", HOST_IMEX_PROCESS, &s);

	assert_int_equal(rc, NV_OK);
	*finished = s.finished;
	return s.phase;
}

static void test_host_driver_step_full_change(void **state)
{
	struct fx x;
	bool fin;
	char *calls;

	(void)state;
	tray_setup(&x);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_false(fin);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_INSTALLING);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_RELOADING);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_DONE);
	assert_true(fin);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_DONE);
	assert_int_equal(count_lines(&x, "runs"), 1);
	calls = fx_slurp(&x, "calls");
	assert_non_null(strstr(calls, "stop -- nvidia-persistenced.service"));
	assert_non_null(strstr(calls, "start -- nvidia-persistenced.service"));
	free(calls);
	fx_clear(&x);
}

static void test_host_driver_step_resumes_without_repeating(void **state)
{
	struct host h2;
	struct fx x;
	bool fin;

	(void)state;
	tray_setup(&x);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_INSTALLING);
	/* The agent dies here; a new one knows only what the host shows. */
	host_init(&h2, &x.h.cfg, NULL);
	assert_int_equal(step(&h2, &fin), HOST_DRV_RELOADING);
	assert_int_equal(step(&h2, &fin), HOST_DRV_DONE);
	assert_int_equal(count_lines(&x, "runs"), 1);
	host_clear(&h2);
	fx_clear(&x);
}

static void test_host_driver_step_in_use_needs_reboot(void **state)
{
	struct host_drv_step s;
	struct fx x;
	bool fin;

	(void)state;
	tray_setup(&x);
	fx_file(&x, "sys/module/nvidia_uvm/refcnt", "2\n");
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_INSTALLING);
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_REBOOT_REQUIRED);
	assert_true(s.finished);
	assert_non_null(strstr(s.detail, "nvidia_uvm"));
	/* Refused by modprobe although the counts looked free. */
	fx_file(&x, "sys/module/nvidia_uvm/refcnt", "0\n");
	fx_file(&x, "busy", "");
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_REBOOT_REQUIRED);
	assert_non_null(strstr(s.detail, "in use"));
	fx_clear(&x);
}

static void test_host_driver_step_installer_fails(void **state)
{
	struct host_drv_step s;
	struct fx x;
	bool fin;

	(void)state;
	tray_setup(&x);
	fx_file(&x, "fail", "");
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_E_IO);
	assert_int_equal(s.phase, HOST_DRV_FAILED);
	assert_true(s.finished);
	assert_non_null(strstr(s.detail, "installer failed"));
	assert_int_equal(host_driver_step(&x.h, "2.x", HOST_IMEX_PROCESS, &s), NV_E_INVAL);
	fx_clear(&x);
}

static void test_host_driver_step_waits_for_live_installer(void **state)
{
	const char *argv[] = {"/bin/sleep", "30", NULL};
	char line[128];
	struct fx x;
	pid_t pid;
	bool fin;

	(void)state;
	tray_setup(&x);
	fx_file(&x, "units/nvidia-persistenced.service",
	        "LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n");
	assert_int_equal(x.h.ops->spawn(&x.h, argv, NULL, NULL, &pid), NV_OK);
	snprintf(line, sizeof(line), "%d %llu 2.0.0\n", (int)pid, host_pid_starttime(pid));
	fx_file(&x, "run/nvl72-agent/driver-install.pid", line);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_INSTALLER_RUNNING);
	assert_int_equal(count_lines(&x, "runs"), 0);
	host_pid_stop(pid, 1000);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_INSTALLING);
	assert_int_equal(count_lines(&x, "runs"), 1);
	fx_clear(&x);
}

static bool stop_now(void *arg)
{
	return *(bool *)arg;
}

/* A stopping agent leaves its installer running with the marker in place;
 * the next agent waits for it and finishes the change without a rerun. */
static void test_host_driver_step_stop_leaves_installer(void **state)
{
	struct host_drv_step s;
	struct host_cfg cfg;
	struct host h2;
	bool stopping = true, fin;
	struct fx x;
	char *marker;

	(void)state;
	tray_setup(&x);
	fx_script(&x, FX_INSTALLER,
	          "echo \"run $1\" >> \"$R/runs\"\n"
	          "while [ ! -f \"$R/go\" ]; do sleep 0.02; done; echo \"$1\" > \"$R/ondisk\"");
	cfg = x.h.cfg;
	cfg.stopping = stop_now;
	cfg.stopping_arg = &stopping;
	host_clear(&x.h);
	host_init(&x.h, &cfg, NULL);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_INSTALLER_RUNNING);
	assert_false(s.finished);
	assert_non_null(strstr(s.detail, "the agent is stopping"));
	marker = fx_slurp(&x, "run/nvl72-agent/driver-install.pid");
	assert_non_null(marker);
	free(marker);

	/* The next agent, not stopping, finds the installer and waits. */
	stopping = false;
	host_init(&h2, &cfg, NULL);
	assert_int_equal(step(&h2, &fin), HOST_DRV_INSTALLER_RUNNING);
	fx_file(&x, "go", "");
	while (step(&h2, &fin) == HOST_DRV_INSTALLER_RUNNING)
		time_sleep_ms(20);
	while (!fin)
		(void)step(&h2, &fin);
	assert_int_equal(step(&h2, &fin), HOST_DRV_DONE);
	assert_int_equal(count_lines(&x, "runs"), 1);
	host_clear(&h2);
	fx_clear(&x);
}

/* Opens the driver lock and tries to take it: true when it is free. */
static bool lock_free(struct fx *x, int *fd)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/run/nvl72-agent/driver-install.lock", x->root);
	if (access(p, F_OK) != 0)
		fx_file(x, "run/nvl72-agent/driver-install.lock", "");
	*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(*fd >= 0);
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return true;
	assert_int_equal(errno, EWOULDBLOCK);
	close(*fd);
	*fd = -1;
	return false;
}

/* A driver lock held elsewhere (another agent's step, an installer whose
 * marker is gone) stops the step before it touches the host. */
static void test_host_driver_step_lock_held_waits(void **state)
{
	struct host_drv_step s;
	struct fx x;
	bool fin;
	int fd;

	(void)state;
	tray_setup(&x);
	assert_true(lock_free(&x, &fd));
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_INSTALLER_RUNNING);
	assert_false(s.finished);
	assert_non_null(strstr(s.detail, "driver lock is held"));
	assert_null(fx_slurp(&x, "calls"));
	close(fd);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	fx_clear(&x);
}

/* The installer holds the lock after the agent that started it is gone, so
 * the next agent waits for it even when its marker is lost (as it would
 * be with a reused pid), and it runs once. */
static void test_host_driver_step_installer_holds_lock(void **state)
{
	struct host_drv_step s;
	struct host_cfg cfg;
	struct host h2;
	bool stopping = true, fin;
	char marker[600];
	struct fx x;
	int fd;

	(void)state;
	tray_setup(&x);
	fx_script(&x, FX_INSTALLER,
	          "echo \"run $1\" >> \"$R/runs\"\n"
	          "while [ ! -f \"$R/go\" ]; do sleep 0.02; done; echo \"$1\" > \"$R/ondisk\"");
	cfg = x.h.cfg;
	cfg.stopping = stop_now;
	cfg.stopping_arg = &stopping;
	host_clear(&x.h);
	host_init(&x.h, &cfg, NULL);
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_INSTALLER_RUNNING);
	assert_false(lock_free(&x, &fd));
	snprintf(marker, sizeof(marker), "%s/run/nvl72-agent/driver-install.pid", x.root);
	assert_int_equal(unlink(marker), 0);

	stopping = false;
	host_init(&h2, &cfg, NULL);
	assert_int_equal(host_driver_step(&h2, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_INSTALLER_RUNNING);
	assert_non_null(strstr(s.detail, "driver lock is held"));
	fx_file(&x, "go", "");
	while (step(&h2, &fin) == HOST_DRV_INSTALLER_RUNNING)
		time_sleep_ms(20);
	while (!fin)
		(void)step(&h2, &fin);
	assert_int_equal(step(&h2, &fin), HOST_DRV_DONE);
	assert_int_equal(count_lines(&x, "runs"), 1);
	assert_true(lock_free(&x, &fd));
	close(fd);
	host_clear(&h2);
	fx_clear(&x);
}

/* A marker that cannot be written fails the step, naming it, and the
 * installer never runs. */
static void test_host_driver_step_marker_unwritable(void **state)
{
	struct host_drv_step s;
	struct fx x;
	bool fin;

	(void)state;
	tray_setup(&x);
	fx_file(&x, "run/nvl72-agent/driver-install.pid/keep", "");
	assert_int_equal(step(&x.h, &fin), HOST_DRV_STOPPING_HOLDERS);
	assert_int_not_equal(host_driver_step(&x.h, "2.0.0", HOST_IMEX_PROCESS, &s), NV_OK);
	assert_int_equal(s.phase, HOST_DRV_FAILED);
	assert_true(s.finished);
	assert_non_null(strstr(s.detail, "cannot write the installer marker"));
	assert_non_null(strstr(s.detail, "driver-install.pid"));
	assert_int_equal(count_lines(&x, "runs"), 0);
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_driver_step_full_change),
	        cmocka_unit_test(test_host_driver_step_resumes_without_repeating),
	        cmocka_unit_test(test_host_driver_step_in_use_needs_reboot),
	        cmocka_unit_test(test_host_driver_step_installer_fails),
	        cmocka_unit_test(test_host_driver_step_waits_for_live_installer),
	        cmocka_unit_test(test_host_driver_step_stop_leaves_installer),
	        cmocka_unit_test(test_host_driver_step_lock_held_waits),
	        cmocka_unit_test(test_host_driver_step_installer_holds_lock),
	        cmocka_unit_test(test_host_driver_step_marker_unwritable),
	};
	return cmocka_run_group_tests_name("agent/host_driver", tests, NULL, NULL);
}
