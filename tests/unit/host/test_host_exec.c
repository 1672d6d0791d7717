// SPDX-License-Identifier: Apache-2.0
// Unit tests for running tools: output capture and its cap, exit codes, a
// hung tool killed at the deadline with its helpers, and pid checks.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
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
	};
	return cmocka_run_group_tests_name("agent/host_exec", tests, NULL, NULL);
}
