// SPDX-License-Identifier: Apache-2.0
// Unit tests for running tools: output capture and its cap, exit codes, a
// hung tool killed at the deadline with its helpers, pid checks, and a gated
// child that keeps one held lock and nothing else of ours.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host_fixture.h"

static void test_agent_run_captures_output(void **state)
{
	struct host_run_result r;
	struct fx x;
	const char *argv[] = {NULL, "hello", NULL};

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_MODINFO, "echo \"out $1\"; echo err >&2; exit 3");
	argv[0] = x.tool[FX_MODINFO];
	assert_int_equal(x.h.ops->run(&x.h, argv, 2000, 1024, &r), NV_OK);
	assert_int_equal(r.exit_code, 3);
	assert_non_null(strstr(buf_str(&r.out), "out hello"));
	assert_non_null(strstr(buf_str(&r.out), "err"));
	assert_false(r.timed_out);
	buf_clear(&r.out);
	fx_clear(&x);
}

static void test_agent_run_caps_output(void **state)
{
	struct host_run_result r;
	struct fx x;
	const char *argv[] = {NULL, NULL};

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_MODINFO,
	          "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done");
	argv[0] = x.tool[FX_MODINFO];
	assert_int_equal(x.h.ops->run(&x.h, argv, 5000, 100, &r), NV_OK);
	assert_true(r.truncated);
	assert_int_equal(r.out.len, 100);
	assert_int_equal(r.exit_code, 0);
	buf_clear(&r.out);
	fx_clear(&x);
}

static void test_agent_run_kills_a_hung_tool(void **state)
{
	struct host_run_result r;
	struct fx x;
	const char *argv[] = {NULL, NULL};
	int64_t t0;

	(void)state;
	fx_init(&x, NULL);
	/* The helper keeps the pipe open too: the whole group must die. */
	fx_script(&x, FX_MODINFO, "sleep 30 & sleep 30");
	argv[0] = x.tool[FX_MODINFO];
	t0 = time_mono_ms();
	assert_int_equal(x.h.ops->run(&x.h, argv, 300, 1024, &r), NV_E_TIMEOUT);
	assert_true(time_mono_ms() - t0 < 2000);
	assert_true(r.timed_out);
	buf_clear(&r.out);
	fx_clear(&x);
}

static void test_agent_run_returns_when_a_helper_keeps_the_pipe(void **state)
{
	struct host_run_result r;
	struct fx x;
	const char *argv[] = {NULL, NULL};
	int64_t t0;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_MODINFO, "sleep 30 & echo done");
	argv[0] = x.tool[FX_MODINFO];
	t0 = time_mono_ms();
	assert_int_equal(x.h.ops->run(&x.h, argv, 5000, 1024, &r), NV_OK);
	assert_true(time_mono_ms() - t0 < 2000);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(buf_str(&r.out), "done\n");
	buf_clear(&r.out);
	fx_clear(&x);
}

static void test_agent_run_missing_tool(void **state)
{
	struct host_run_result r;
	struct fx x;
	const char *argv[] = {"/nonexistent/tool", NULL};

	(void)state;
	fx_init(&x, NULL);
	assert_int_equal(x.h.ops->run(&x.h, argv, 1000, 1024, &r), NV_E_IO);
	buf_clear(&r.out);
	fx_clear(&x);
}

static void test_agent_spawn_and_stop(void **state)
{
	struct fx x;
	char logp[600];
	const char *argv[] = {NULL, NULL};
	pid_t pid;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX, "echo started; exec sleep 30");
	argv[0] = x.tool[FX_IMEX];
	snprintf(logp, sizeof(logp), "%s/log", x.dir);
	assert_int_equal(x.h.ops->spawn(&x.h, argv, logp, NULL, &pid), NV_OK);
	assert_true(host_pid_alive(pid));
	assert_true(host_pid_starttime(pid) > 0);
	host_pid_stop(pid, 2000);
	assert_false(host_pid_alive(pid));
	assert_int_equal(host_pid_starttime(pid), 0);
	assert_false(host_pid_alive(-1));
	fx_clear(&x);
}

struct gate_probe {
	const char *done; /* the file the child's argv creates */
	enum nv_err answer;
	bool ran_before_record;
	pid_t seen;
};

static enum nv_err gate_record(void *arg, pid_t pid)
{
	struct gate_probe *g = arg;
	struct stat st;

	/* The child is alive, and has not executed argv yet. */
	g->seen = pid;
	time_sleep_ms(100);
	g->ran_before_record = stat(g->done, &st) == 0 || !host_pid_alive(pid);
	return g->answer;
}

static void wait_gone(pid_t pid)
{
	for (int i = 0; i < 200 && host_pid_alive(pid); i++)
		time_sleep_ms(10);
}

/* argv runs only after the gate recorded the pid; a failed record means it
 * never runs at all. */
static void test_agent_spawn_gate(void **state)
{
	struct gate_probe g = {.answer = NV_OK};
	struct host_spawn_gate gate = {.record = gate_record, .arg = &g};
	char done[600], logp[600];
	const char *argv[] = {"/usr/bin/touch", done, NULL};
	struct stat st;
	pid_t pid = 0;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	snprintf(done, sizeof(done), "%s/ran", x.dir);
	snprintf(logp, sizeof(logp), "%s/log", x.dir);
	g.done = done;
	assert_int_equal(x.h.ops->spawn(&x.h, argv, logp, &gate, &pid), NV_OK);
	assert_int_equal(pid, g.seen);
	assert_false(g.ran_before_record);
	wait_gone(pid);
	assert_int_equal(stat(done, &st), 0);

	assert_int_equal(unlink(done), 0);
	g.answer = NV_E_IO;
	pid = 0;
	assert_int_equal(x.h.ops->spawn(&x.h, argv, logp, &gate, &pid), NV_E_IO);
	assert_int_equal(pid, 0);
	assert_false(g.ran_before_record);
	assert_false(host_pid_alive(g.seen));
	assert_int_not_equal(stat(done, &st), 0);

	argv[0] = "/nonexistent/tool";
	g.answer = NV_OK;
	assert_int_equal(x.h.ops->spawn(&x.h, argv, logp, &gate, &pid), NV_E_IO);
	fx_clear(&x);
}

static bool lock_taken(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	bool taken;

	assert_true(fd >= 0);
	taken = flock(fd, LOCK_EX | LOCK_NB) != 0;
	if (taken)
		assert_int_equal(errno, EWOULDBLOCK);
	close(fd);
	return taken;
}

/* hold_fd reaches the executed child as fd 4, and only it: the lock then
 * lives as long as the child, not as long as us. */
static void test_agent_spawn_gate_holds_fd(void **state)
{
	struct gate_probe g = {.answer = NV_OK};
	const char *argv[] = {"/bin/sleep", "30", NULL};
	char lockp[600], logp[600], fdp[64], link[600], cmd[64];
	struct host_spawn_gate gate = {.record = gate_record, .arg = &g};
	struct buf b;
	pid_t pid = 0;
	ssize_t n;
	struct fx x;
	int fd;

	(void)state;
	fx_init(&x, NULL);
	snprintf(lockp, sizeof(lockp), "%s/lock", x.dir);
	snprintf(logp, sizeof(logp), "%s/log", x.dir);
	g.done = logp;
	fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	gate.hold_fd = &fd;
	assert_int_equal(x.h.ops->spawn(&x.h, argv, logp, &gate, &pid), NV_OK);
	close(fd);
	snprintf(cmd, sizeof(cmd), "/proc/%d/cmdline", (int)pid);
	for (int i = 0; i < 200; i++) {
		bool exec_done = host_file_read(cmd, 64, &b) == NV_OK && b.data != NULL &&
		                 strcmp(b.data, "/bin/sleep") == 0;
		buf_clear(&b);
		if (exec_done)
			break;
		time_sleep_ms(10);
	}
	snprintf(fdp, sizeof(fdp), "/proc/%d/fd/4", (int)pid);
	n = readlink(fdp, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = '\0';
	assert_string_equal(link, lockp);
	snprintf(fdp, sizeof(fdp), "/proc/%d/fd/3", (int)pid);
	assert_int_not_equal(access(fdp, F_OK), 0);
	snprintf(fdp, sizeof(fdp), "/proc/%d/fd/5", (int)pid);
	assert_int_not_equal(access(fdp, F_OK), 0);
	assert_true(lock_taken(lockp));
	host_pid_stop(pid, 1000);
	assert_false(lock_taken(lockp));
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_run_captures_output),
	        cmocka_unit_test(test_agent_run_caps_output),
	        cmocka_unit_test(test_agent_run_kills_a_hung_tool),
	        cmocka_unit_test(test_agent_run_returns_when_a_helper_keeps_the_pipe),
	        cmocka_unit_test(test_agent_run_missing_tool),
	        cmocka_unit_test(test_agent_spawn_and_stop),
	        cmocka_unit_test(test_agent_spawn_gate),
	        cmocka_unit_test(test_agent_spawn_gate_holds_fd),
	};
	return cmocka_run_group_tests_name("agent/host_exec", tests, NULL, NULL);
}
