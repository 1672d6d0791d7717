// SPDX-License-Identifier: Apache-2.0
// Unit tests for validation runs: the output contract (our line, nccl-tests'
// summary, garbage), the state record, and runs of a small script against a
// temp host: once per id, failures, the deadline, the output cap, a run cut
// by an agent restart, and a record adopted from the stored status.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"

#define FX_VALIDATE 6

static enum nv_err parse(const char *text, double *bw, char *tr, char *why)
{
	return host_validation_output_parse(text, strlen(text), bw, tr,
	                                    HOST_VALIDATION_TRANSPORT_LEN, why, HOST_ERRMSG_LEN);
}

static void test_agent_validation_output_parse_contract(void **state)
{
	char tr[HOST_VALIDATION_TRANSPORT_LEN], why[HOST_ERRMSG_LEN];
	double bw = 0;

	(void)state;
	assert_int_equal(parse("warming up\nbusbw_gbps=812.345\ntransport=NVLink\n", &bw, tr, why),
	                 NV_OK);
	assert_true(bw > 812.34 && bw < 812.36); /* rounded to 0.01 */
	assert_string_equal(tr, "NVLink");
	assert_int_equal(parse("busbw_gbps=900\r\n", &bw, tr, why), NV_OK);
	assert_true(bw == 900.0);
	assert_string_equal(tr, "");
	/* The last line of a kind counts. */
	assert_int_equal(parse("busbw_gbps=1\nbusbw_gbps=2.5", &bw, tr, why), NV_OK);
	assert_true(bw == 2.5);
}

static void test_agent_validation_output_parse_nccl_tests(void **state)
{
	static const char nccl[] =
	        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor)\n"
	        "#       size         count      type   redop    root     time   algbw   busbw\n"
	        "  8589934592    2147483648     float     sum      -1    19823  433.3  853.1\n"
	        "# Out of bounds values : 0 OK\n"
	        "# Avg bus bandwidth    : 812.34 \n"
	        "#\n";
	char tr[HOST_VALIDATION_TRANSPORT_LEN], why[HOST_ERRMSG_LEN], both[1024];
	double bw = 0;

	(void)state;
	assert_int_equal(parse(nccl, &bw, tr, why), NV_OK);
	assert_true(bw > 812.33 && bw < 812.35);
	/* A wrapper's own line wins over the tool's summary. */
	snprintf(both, sizeof(both), "%sbusbw_gbps=700\ntransport=NVLS\n", nccl);
	assert_int_equal(parse(both, &bw, tr, why), NV_OK);
	assert_true(bw == 700.0);
	assert_string_equal(tr, "NVLS");
	/* Wrong results are a failed run whatever the bandwidth. */
	assert_int_equal(parse("# Out of bounds values : 12 FAILED\n# Avg bus bandwidth : 800\n",
	                       &bw, tr, why),
	                 NV_E_PARSE);
	assert_non_null(strstr(why, "12 FAILED"));
}

static void test_agent_validation_output_parse_garbage(void **state)
{
	static const char *const bad[] = {
	        "",
	        "all good\n",
	        "busbw_gbps=\n",
	        "busbw_gbps=lots\n",
	        "busbw_gbps=-5\n",
	        "busbw_gbps=1e3\n",
	        "busbw_gbps=0x10\n",
	        "busbw_gbps=inf\n",
	        "busbw_gbps=nan\n",
	        "busbw_gbps=1.2.3\n",
	        "busbw_gbps=100001\n",
	        "busbw_gbps=900\ntransport=NV Link\n",
	        "busbw_gbps=900\ntransport=\n",
	        "# Avg bus bandwidth    : N/A\n",
	};
	char tr[HOST_VALIDATION_TRANSPORT_LEN], why[HOST_ERRMSG_LEN];
	double bw = -1;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		why[0] = '\0';
		assert_int_equal(parse(bad[i], &bw, tr, why), NV_E_PARSE);
		assert_true(strlen(why) > 10);
	}
	assert_true(bw == -1); /* untouched on failure */
	assert_int_equal(parse("nothing\n", &bw, tr, why), NV_E_PARSE);
	assert_non_null(strstr(why, "no busbw_gbps"));
	assert_int_equal(host_validation_output_parse("busbw_gbps=1\0x", 14, &bw, tr, sizeof(tr),
	                                              why, sizeof(why)),
	                 NV_E_PARSE);
	assert_non_null(strstr(why, "NUL"));
}

static void test_agent_validation_state_parse_roundtrip_and_garbage(void **state)
{
	static const char rec[] = "id=canary-1\nphase=Succeeded\nstart_ms=1000\nend_ms=2000\n"
	                          "busbw_gbps=812.50\ntransport=NVLink\nmessage=ok\nfuture=1\n";
	struct host_val_result r;
	long long pid = -1;
	unsigned long long ps = 1;

	(void)state;
	assert_int_equal(host_validation_state_parse(rec, strlen(rec), &r, &pid, &ps), NV_OK);
	assert_string_equal(r.id, "canary-1");
	assert_int_equal(r.phase, HOST_VAL_SUCCEEDED);
	assert_true(r.has_busbw && r.busbw_gbps == 812.5);
	assert_int_equal(r.start_ms, 1000);
	assert_int_equal(r.end_ms, 2000);
	assert_int_equal(pid, 0);
	assert_int_equal(ps, 0);
	assert_int_equal(host_validation_state_parse("phase=Running\n", 14, &r, &pid, &ps),
	                 NV_E_PARSE);
	assert_int_equal(host_validation_state_parse("id=x\nphase=Maybe\n", 17, &r, &pid, &ps),
	                 NV_E_PARSE);
	assert_int_equal(
	        host_validation_state_parse("id=x\nphase=Failed\npid=-3\n", 24, &r, &pid, &ps),
	        NV_E_PARSE);
	assert_int_equal(host_validation_state_parse("garbage\n", 8, &r, &pid, &ps), NV_E_PARSE);
}

/* ---- runs ---- */

static void setup(struct fx *x, const char *body)
{
	fx_init(x, NULL);
	x->h.cfg.validation_cmd = x->tool[FX_VALIDATE];
	snprintf(x->tool[FX_VALIDATE], sizeof(x->tool[FX_VALIDATE]), "%s/validate", x->bin);
	fx_script(x, FX_VALIDATE, body);
}

static void req_init(struct host_val_request *r, const char *id, int64_t timeout_ms)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->timeout_ms = timeout_ms;
}

/* Steps until the run is no longer Running (10 s at most: a busy machine). */
static void run_to_end(struct host *h, const struct host_val_request *req,
                       struct host_val_result *out)
{
	int64_t deadline = time_mono_ms() + 10000;

	do {
		assert_int_equal(host_validation_step(h, req, NULL, out), NV_OK);
		if (out->phase != HOST_VAL_RUNNING)
			return;
		time_sleep_ms(20);
	} while (time_mono_ms() < deadline);
	fail_msg("validation run did not end");
}

static int runs(struct fx *x)
{
	char *s = fx_slurp(x, "runs");
	int n = 0;

	for (const char *p = s; p != NULL && *p != '\0'; p++)
		n += *p == '\n';
	free(s);
	return n;
}

static void test_host_validation_step_once_per_id(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct fx x;
	char *args;

	(void)state;
	setup(&x, "echo \"$*\" >> \"$R/runs\"; echo busbw_gbps=$(cat \"$R/bw\"); "
	          "echo transport=NVLink");
	fx_file(&x, "bw", "812.5\n");
	req_init(&req, "canary-1", 10000);
	snprintf(req.args[req.n_args++], HOST_VALIDATION_ARG_LEN, "--partition");
	snprintf(req.args[req.n_args++], HOST_VALIDATION_ARG_LEN, "canary a");
	assert_int_equal(host_validation_step(&x.h, &req, NULL, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_RUNNING);
	assert_string_equal(v.id, "canary-1");
	assert_true(v.start_ms > 0);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_SUCCEEDED);
	assert_true(v.has_busbw && v.busbw_gbps == 812.5);
	assert_string_equal(v.transport, "NVLink");
	assert_true(v.end_ms >= v.start_ms);
	args = fx_slurp(&x, "runs");
	assert_string_equal(args, "--partition canary a\n");
	free(args);
	/* The same id again, even from a new agent: the record answers. */
	assert_int_equal(host_validation_step(&x.h, &req, NULL, &v), NV_OK);
	{
		struct host h2;
		host_init(&h2, &x.h.cfg, NULL);
		assert_int_equal(host_validation_step(&h2, &req, NULL, &v), NV_OK);
		host_clear(&h2);
	}
	assert_int_equal(v.phase, HOST_VAL_SUCCEEDED);
	assert_int_equal(runs(&x), 1);
	/* A new id is a new run with the figure of now. */
	fx_file(&x, "bw", "640\n");
	req_init(&req, "canary-2", 10000);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_SUCCEEDED);
	assert_string_equal(v.id, "canary-2");
	assert_true(v.busbw_gbps == 640.0);
	assert_int_equal(runs(&x), 2);
	/* No request: nothing starts, the record is still reported. */
	assert_int_equal(host_validation_step(&x.h, NULL, NULL, &v), NV_OK);
	assert_string_equal(v.id, "canary-2");
	assert_int_equal(runs(&x), 2);
	fx_clear(&x);
}

static void test_host_validation_step_no_command(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct fx x;

	(void)state;
	setup(&x, "exit 0");
	x.h.cfg.validation_cmd = "";
	req_init(&req, "v1", 10000);
	assert_int_equal(host_validation_step(&x.h, &req, NULL, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_string_equal(v.message, "no validation command configured");
	assert_false(v.has_busbw);
	fx_clear(&x);
}

static void test_host_validation_step_failures(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct fx x;

	(void)state;
	setup(&x, "cat \"$R/out\"; exit $(cat \"$R/rc\")");
	fx_file(&x, "out", "NCCL WARN NET/IB : Got completion with error 12\n");
	fx_file(&x, "rc", "3\n");
	req_init(&req, "exit", 10000);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_non_null(strstr(v.message, "exited with 3"));
	assert_non_null(strstr(v.message, "completion with error 12"));
	fx_file(&x, "out", "\x01\x7f busbw_gbps=lots\n");
	fx_file(&x, "rc", "0\n");
	req_init(&req, "garbage", 10000);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_false(v.has_busbw);
	assert_non_null(strstr(v.message, "no busbw_gbps"));
	fx_clear(&x);
}

static void test_host_validation_step_timeout(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct fx x;
	int64_t t0 = time_mono_ms();

	(void)state;
	setup(&x, "sleep 30; echo busbw_gbps=1");
	req_init(&req, "slow", 300);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_non_null(strstr(v.message, "timed out"));
	assert_true(time_mono_ms() - t0 < 10000);
	fx_clear(&x);
}

static void test_host_validation_step_output_cap(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct fx x;

	(void)state;
	setup(&x, "yes 'busbw_gbps=1 and a long line of chatter' | head -c 400000; "
	          "echo; echo busbw_gbps=9");
	req_init(&req, "chatty", 10000);
	run_to_end(&x.h, &req, &v);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_non_null(strstr(v.message, "exceeds"));
	fx_clear(&x);
}

static void test_host_validation_step_restart_during_run(void **state)
{
	struct host_val_request req;
	struct host_val_result v;
	struct host h2;
	struct fx x;
	pid_t pid;

	(void)state;
	setup(&x, "echo run >> \"$R/runs\"; sleep 30; echo busbw_gbps=1");
	req_init(&req, "cut", 60000);
	assert_int_equal(host_validation_step(&x.h, &req, NULL, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_RUNNING);
	pid = x.h.val_pid;
	assert_true(pid > 0);
	for (int i = 0; i < 500 && runs(&x) == 0; i++)
		time_sleep_ms(10);
	assert_int_equal(runs(&x), 1);
	/* The agent is killed here; a new one finds the record in flight. */
	host_init(&h2, &x.h.cfg, NULL);
	assert_int_equal(host_validation_step(&h2, &req, NULL, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_string_equal(v.message, "agent restarted during the run");
	assert_string_equal(v.id, "cut");
	assert_true(v.end_ms > 0);
	/* What was left of the run is gone, and it is never run again. */
	for (int i = 0; i < 200 && host_pid_alive(pid); i++)
		time_sleep_ms(10);
	assert_false(host_pid_alive(pid));
	x.h.val_pid = 0;
	assert_int_equal(host_validation_step(&h2, &req, NULL, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	time_sleep_ms(100);
	assert_int_equal(runs(&x), 1);
	host_clear(&h2);
	fx_clear(&x);
}

static void test_host_validation_step_adopts_reported(void **state)
{
	struct host_val_request req;
	struct host_val_result v, rep = {0};
	struct fx x;

	(void)state;
	setup(&x, "echo run >> \"$R/runs\"; echo busbw_gbps=1");
	/* No record on the host (a reboot cleared /run), the status has it. */
	snprintf(rep.id, sizeof(rep.id), "done-before");
	rep.phase = HOST_VAL_SUCCEEDED;
	rep.has_busbw = true;
	rep.busbw_gbps = 812.0;
	rep.start_ms = 1000;
	rep.end_ms = 2000;
	req_init(&req, "done-before", 10000);
	assert_int_equal(host_validation_step(&x.h, &req, &rep, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_SUCCEEDED);
	assert_true(v.busbw_gbps == 812.0);
	assert_int_equal(runs(&x), 0);
	/* A stored Running one was cut by that reboot. */
	fx_clear(&x);
	setup(&x, "echo run >> \"$R/runs\"; echo busbw_gbps=1");
	rep.phase = HOST_VAL_RUNNING;
	assert_int_equal(host_validation_step(&x.h, &req, &rep, &v), NV_OK);
	assert_int_equal(v.phase, HOST_VAL_FAILED);
	assert_string_equal(v.message, "agent restarted during the run");
	assert_int_equal(runs(&x), 0);
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_validation_output_parse_contract),
	        cmocka_unit_test(test_agent_validation_output_parse_nccl_tests),
	        cmocka_unit_test(test_agent_validation_output_parse_garbage),
	        cmocka_unit_test(test_agent_validation_state_parse_roundtrip_and_garbage),
	        cmocka_unit_test(test_host_validation_step_once_per_id),
	        cmocka_unit_test(test_host_validation_step_no_command),
	        cmocka_unit_test(test_host_validation_step_failures),
	        cmocka_unit_test(test_host_validation_step_timeout),
	        cmocka_unit_test(test_host_validation_step_output_cap),
	        cmocka_unit_test(test_host_validation_step_restart_during_run),
	        cmocka_unit_test(test_host_validation_step_adopts_reported),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
