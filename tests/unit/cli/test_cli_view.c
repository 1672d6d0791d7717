// SPDX-License-Identifier: Apache-2.0
// Unit tests for the plugin's tables and command line: rows show the
// columns they name, flags reach only the verbs that take them, and every
// verb has a help page from the one table.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/cli/cli_int.h"
#include "nvl72/json.h"

static char *render_racks(json_t *racks)
{
	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(cli_racks_table(racks, &b), NV_OK);
	json_decref(racks);
	return buf_take(&b);
}

static void test_cli_racks_table_row(void **state)
{
	(void)state;
	json_t *r = json_pack("[{s:{s:s},s:{s:s,s:{s:i,s:i},s:[{s:s},{s:s},{s:s}],s:{s:s},s:[{s:s,"
	                      "s:s},{s:s,s:s}]}}]",
	                      "metadata", "name", "r07", "status", "stack", "s-95", "capacity",
	                      "trays", 18, "readyTrays", 16, "trays", "maintenance", "None",
	                      "maintenance", "Cordoned", "maintenance", "Draining", "upgrade",
	                      "name", "up1", "conditions", "type", "Ready", "status", "True",
	                      "type", "Degraded", "status", "True");
	char *s = render_racks(r);
	assert_string_equal(s, "RACK   READY   STACK   TRAYS   DEGRADED   CORDONED   UPGRADE\n"
	                       "r07    True    s-95    16/18   True       2          up1\n");
	free(s);
}

static void test_cli_racks_table_without_status(void **state)
{
	(void)state;
	char *s = render_racks(json_pack("[{s:{s:s}}]", "metadata", "name", "new"));
	assert_non_null(strstr(s, "new    Unknown   -       0/0     Unknown    0          -\n"));
	free(s);
}

static void test_cli_upgrades_table_step_wave_pending(void **state)
{
	(void)state;
	struct buf b;
	json_t *ups =
	        json_pack("[{s:{s:s},s:{s:s,s:{s:s}},s:{s:s,s:[s,s],s:[{s:s,s:s}],s:[{},{}],"
	                  "s:[{s:s,s:s,s:i},{s:s,s:s,s:i}]}}]",
	                  "metadata", "name", "up1", "spec", "rack", "r07", "target", "stack",
	                  "s-173", "status", "phase", "RollingOut", "requiredApprovals", "fabric",
	                  "workload", "approvals", "layer", "fabric", "decision", "Approved",
	                  "waves", "steps", "action", "Apply", "phase", "Succeeded", "wave", 1,
	                  "action", "Drain", "phase", "Running", "wave", 2);
	json_t *racks =
	        json_pack("[{s:{s:s},s:{s:[{s:s,s:s}]}}]", "metadata", "name", "r07", "spec",
	                  "responsibilities", "layer", "workload", "owner", "ml-training");
	buf_init(&b, 1 << 16);
	assert_int_equal(cli_upgrades_table(ups, racks, &b), NV_OK);
	assert_string_equal(
	        buf_str(&b),
	        "UPGRADE   RACK   TARGET   PHASE        STEP        WAVE   PENDING APPROVALS\n"
	        "up1       r07    s-173    RollingOut   2/2 Drain   2/2    workload=ml-training\n");
	buf_clear(&b);
	json_decref(ups);
	json_decref(racks);
}

static enum nv_err parse(struct cli_args *a, char *err, const char *const *words)
{
	char *argv[16];
	int argc = 0;
	while (words[argc] != NULL && argc < 16) {
		argv[argc] = (char *)words[argc];
		argc++;
	}
	return cli_args_parse(argc, argv, a, err, 256);
}

static void test_cli_args_parse_approve(void **state)
{
	(void)state;
	struct cli_args a;
	char err[256];
	const char *w[] = {"kubectl-nvl72",
	                   "approve",
	                   "up1",
	                   "--layer=fabric",
	                   "--comment",
	                   "ok by us",
	                   "--reject",
	                   "--kubeconfig",
	                   "kc",
	                   NULL};
	assert_int_equal(parse(&a, err, w), NV_OK);
	assert_int_equal(a.verb, CLI_APPROVE);
	assert_int_equal(a.npos, 1);
	assert_string_equal(a.pos[0], "up1");
	assert_string_equal(a.layer, "fabric");
	assert_string_equal(a.comment, "ok by us");
	assert_true(a.reject);
	assert_string_equal(a.kubeconfig, "kc");
}

static void test_cli_args_parse_alias_and_output(void **state)
{
	(void)state;
	struct cli_args a;
	char err[256];
	const char *w1[] = {"k", "explain-block", "up1", NULL};
	const char *w2[] = {"k", "status", "rack", "r07", "-ojson", NULL};
	const char *w3[] = {"k", "status", "-o", "json", NULL};
	assert_int_equal(parse(&a, err, w1), NV_OK);
	assert_int_equal(a.verb, CLI_EXPLAIN);
	assert_int_equal(parse(&a, err, w2), NV_OK);
	assert_string_equal(a.output, "json");
	assert_int_equal(a.npos, 2);
	assert_int_equal(parse(&a, err, w3), NV_OK);
	assert_string_equal(a.output, "json");
}

static void test_cli_args_parse_errors_name_the_problem(void **state)
{
	(void)state;
	struct cli_args a;
	char err[256];
	const char *w1[] = {"k", "pause", "up1", "--layer", "fabric", NULL};
	const char *w2[] = {"k", "frobnicate", NULL};
	const char *w3[] = {"k", "approve", "up1", "--layer", NULL};
	const char *w4[] = {"k", "status", "--color", NULL};
	assert_int_equal(parse(&a, err, w1), NV_E_INVAL);
	assert_string_equal(err, "--layer does not apply to pause (see pause --help)");
	assert_int_equal(parse(&a, err, w2), NV_E_INVAL);
	assert_string_equal(err, "unknown command \"frobnicate\" (see --help)");
	assert_int_equal(parse(&a, err, w3), NV_E_INVAL);
	assert_string_equal(err, "--layer needs a value (LAYER)");
	assert_int_equal(parse(&a, err, w4), NV_E_INVAL);
	assert_string_equal(err, "unknown flag --color (see --help)");
}

static void test_cli_help_every_verb_and_its_flags(void **state)
{
	(void)state;
	for (int v = -1; v < CLI__VERBS; v++) {
		struct buf b;
		buf_init(&b, 1 << 16);
		cli_help(v, &b);
		if (v < 0) {
			for (int k = 0; k < CLI__VERBS; k++)
				assert_non_null(strstr(buf_str(&b), cli_verbs[k].name));
		} else {
			assert_non_null(strstr(buf_str(&b), cli_verbs[v].summary));
			assert_non_null(strstr(buf_str(&b), "--kubeconfig FILE"));
			assert_true((strstr(buf_str(&b), "--layer LAYER") != NULL) ==
			            (v == CLI_APPROVE));
			assert_true((strstr(buf_str(&b), "--output FORMAT") != NULL) ==
			            (v == CLI_STATUS));
		}
		buf_clear(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cli_racks_table_row),
	        cmocka_unit_test(test_cli_racks_table_without_status),
	        cmocka_unit_test(test_cli_upgrades_table_step_wave_pending),
	        cmocka_unit_test(test_cli_args_parse_approve),
	        cmocka_unit_test(test_cli_args_parse_alias_and_output),
	        cmocka_unit_test(test_cli_args_parse_errors_name_the_problem),
	        cmocka_unit_test(test_cli_help_every_verb_and_its_flags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
