// SPDX-License-Identifier: Apache-2.0
// Unit tests for the operator's flag table: parsing, defaults from the
// environment, bounds and the election rule, and the generated flags
// section of docs/operator.md, which must match the table.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/operator.h"

/* A writable argument (argv is char **). */
#define A(s) ((char[]){s})

static enum nv_err parse(int argc, char **argv, struct op_config *cfg, char *err)
{
	enum flags_action action;
	memset(cfg, 0, sizeof(*cfg));
	return op_flags_parse(argc, argv, cfg, &action, err, 256);
}

static void test_op_flags_parse_defaults_and_values(void **state)
{
	(void)state;
	struct op_config cfg;
	char err[256] = "";
	char *argv[] = {A("op"),
	                A("--leader-elect"),
	                A("--metrics-bind-address=127.0.0.1:0"),
	                A("--rack-workers"),
	                A("4"),
	                A("--tray-heartbeat-timeout=90s"),
	                NULL};
	setenv("POD_NAMESPACE", "nvl72-system", 1);
	assert_int_equal(parse(6, argv, &cfg, err), NV_OK);
	assert_true(cfg.leader_elect);
	assert_string_equal(cfg.metrics_addr, "127.0.0.1:0");
	assert_int_equal(cfg.rack_workers, 4);
	assert_int_equal(cfg.heartbeat_timeout_ms, 90000);
	assert_int_equal(cfg.lease_ms, 15000);
	assert_int_equal(cfg.renew_deadline_ms, 10000);
	assert_int_equal(cfg.retry_ms, 2000);
	assert_string_equal(cfg.leader_election_ns, "nvl72-system");
	assert_string_equal(cfg.probe_addr, ":8081");
	unsetenv("POD_NAMESPACE");
}

static void test_op_flags_parse_errors_name_the_flag(void **state)
{
	(void)state;
	struct op_config cfg;
	char err[256];
	char *a1[] = {A("op"), A("--rack-workers=0"), NULL};
	assert_int_equal(parse(2, a1, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--rack-workers"));
	char *a2[] = {A("op"), A("--nope"), NULL};
	assert_int_equal(parse(2, a2, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--nope"));
	char *a3[] = {A("op"), A("--leader-election-renew-deadline=20s"), NULL};
	assert_int_equal(parse(2, a3, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "renew deadline"));
	char *a4[] = {A("op"), A("--log-level=loud"), NULL};
	assert_int_equal(parse(2, a4, &cfg, err), NV_E_CONFIG);
	char *a5[] = {A("op"), A("--tray-heartbeat-timeout"), NULL};
	assert_int_equal(parse(2, a5, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "needs a value"));
	char *a6[] = {A("op"), A("--agent-node-selector=nvl72.io/rack in nvl72"), NULL};
	assert_int_equal(parse(2, a6, &cfg, err), NV_E_CONFIG);
	assert_non_null(
	        strstr(err, "--agent-node-selector: \"nvl72.io/rack in nvl72\": at offset"));
	char *a7[] = {A("op"), A("--agent-node-selector=nvl72.io/rack,a in (b,c)"), NULL};
	assert_int_equal(parse(2, a7, &cfg, err), NV_OK);
}

static void test_op_flags_parse_webhook_cert(void **state)
{
	(void)state;
	struct op_config cfg;
	char err[256] = "";
	char *a0[] = {A("op"), NULL};
	assert_int_equal(parse(1, a0, &cfg, err), NV_OK);
	assert_string_equal(cfg.webhook_cert_source, "self");
	assert_int_equal(cfg.webhook_cert_validity_ms, 365LL * 86400000);
	assert_int_equal(cfg.webhook_cert_renew_before_ms, 30LL * 86400000);
	assert_int_equal(cfg.webhook_cert_check_interval_ms, 60000);
	// The integration suite's short life: renewed every few seconds.
	char *a1[] = {A("op"),
	              A("--webhook-cert-source=secret"),
	              A("--webhook-cert-validity=30s"),
	              A("--webhook-cert-renew-before=22s"),
	              A("--webhook-cert-check-interval=1s"),
	              NULL};
	assert_int_equal(parse(5, a1, &cfg, err), NV_OK);
	assert_string_equal(cfg.webhook_cert_source, "secret");
	assert_int_equal(cfg.webhook_cert_validity_ms, 30000);
	assert_int_equal(cfg.webhook_cert_renew_before_ms, 22000);
	assert_int_equal(cfg.webhook_cert_check_interval_ms, 1000);
	char *b0[] = {A("op"), A("--webhook-cert-source=cert-manager"), NULL};
	assert_int_equal(parse(2, b0, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--webhook-cert-source"));
	// Renewal must come before expiry, and leave two checks to serve it.
	char *b1[] = {A("op"), A("--webhook-cert-validity=720h"), NULL};
	assert_int_equal(parse(2, b1, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "validity > renew-before"));
	char *b2[] = {A("op"), A("--webhook-cert-renew-before=90s"),
	              A("--webhook-cert-check-interval=1m"), NULL};
	assert_int_equal(parse(3, b2, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "2 x check interval"));
}

static void test_op_flags_parse_fabric(void **state)
{
	(void)state;
	struct op_config cfg;
	char err[256];
	char *a0[] = {A("op"), NULL};
	assert_int_equal(parse(1, a0, &cfg, err), NV_OK);
	assert_string_equal(cfg.fabric_backend, "none");
	assert_int_equal(cfg.fabric_poll_ms, 1000);
	assert_int_equal(cfg.fabric_sim_delay_ms, 2000);
	char *a1[] = {A("op"), A("--fabric-backend=nmx"), NULL};
	assert_int_equal(parse(2, a1, &cfg, err), NV_E_CONFIG);
	assert_string_equal(err, "--fabric-backend: \"nmx\" is not nmx-m, sim or none");
	char *a2[] = {A("op"), A("--fabric-backend=nmx-m"), NULL};
	assert_int_equal(parse(2, a2, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--fabric-endpoint: required"));
	char *a3[] = {A("op"), A("--fabric-backend=sim"), NULL};
	assert_int_equal(parse(2, a3, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--fabric-sim-root: required"));
	char *a4[] = {A("op"),
	              A("--fabric-backend=sim"),
	              A("--fabric-sim-root=/r"),
	              A("--fabric-sim-delay=8s"),
	              A("--fabric-poll-interval=500ms"),
	              NULL};
	assert_int_equal(parse(5, a4, &cfg, err), NV_OK);
	assert_string_equal(cfg.fabric_sim_root, "/r");
	assert_int_equal(cfg.fabric_sim_delay_ms, 8000);
	assert_int_equal(cfg.fabric_poll_ms, 500);
	char *a5[] = {A("op"), A("--fabric-poll-interval=10ms"), NULL};
	assert_int_equal(parse(2, a5, &cfg, err), NV_E_CONFIG);
	assert_non_null(strstr(err, "--fabric-poll-interval"));
}

/* Each controller has its own worker count, 2 by default, 1..64. */
static void test_op_flags_parse_workers(void **state)
{
	(void)state;
	struct op_config cfg;
	char err[256];
	static const char *const names[] = {"rack-workers", "domain-workers", "partition-workers",
	                                    "upgrade-workers"};
	char *a0[] = {A("op"), NULL};
	assert_int_equal(parse(1, a0, &cfg, err), NV_OK);
	assert_int_equal(cfg.rack_workers, 2);
	assert_int_equal(cfg.domain_workers, 2);
	assert_int_equal(cfg.partition_workers, 2);
	assert_int_equal(cfg.upgrade_workers, 2);
	char *a1[] = {A("op"),
	              A("--rack-workers=5"),
	              A("--domain-workers=1"),
	              A("--partition-workers=64"),
	              A("--upgrade-workers"),
	              A("7"),
	              NULL};
	assert_int_equal(parse(6, a1, &cfg, err), NV_OK);
	assert_int_equal(cfg.rack_workers, 5);
	assert_int_equal(cfg.domain_workers, 1);
	assert_int_equal(cfg.partition_workers, 64);
	assert_int_equal(cfg.upgrade_workers, 7);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char lo[64], hi[64], want[64];
		snprintf(lo, sizeof(lo), "--%s=0", names[i]);
		snprintf(hi, sizeof(hi), "--%s=65", names[i]);
		snprintf(want, sizeof(want), "--%s", names[i]);
		char *b0[] = {A("op"), lo, NULL}, *b1[] = {A("op"), hi, NULL};
		assert_int_equal(parse(2, b0, &cfg, err), NV_E_CONFIG);
		assert_non_null(strstr(err, want));
		assert_int_equal(parse(2, b1, &cfg, err), NV_E_CONFIG);
		assert_non_null(strstr(err, want));
	}
}

/* The section between the markers in docs/operator.md is the table. */
static void test_op_flags_markdown_matches_docs(void **state)
{
	(void)state;
	FILE *f = fopen("docs/operator.md", "rb");
	assert_non_null(f);
	static char doc[1 << 17];
	size_t n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = '\0';
	const char *b = strstr(doc, "<!-- flags:begin -->\n");
	const char *e = strstr(doc, "<!-- flags:end -->");
	assert_non_null(b);
	assert_non_null(e);
	b += strlen("<!-- flags:begin -->\n");
	char *md = op_flags_markdown();
	if (strlen(md) != (size_t)(e - b) || strncmp(md, b, (size_t)(e - b)) != 0)
		fail_msg("docs/operator.md flags section differs from the table; "
		         "regenerate it with nvl72-operator --help-markdown");
	/* --help lists every flag too. */
	char *help = op_flags_help("nvl72-operator");
	for (size_t i = 0; i < op_nflags; i++) {
		char needle[96];
		snprintf(needle, sizeof(needle), "--%s ", op_flags[i].name);
		assert_non_null(strstr(help, needle));
	}
	free(help);
	free(md);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_flags_parse_defaults_and_values),
	        cmocka_unit_test(test_op_flags_parse_errors_name_the_flag),
	        cmocka_unit_test(test_op_flags_parse_workers),
	        cmocka_unit_test(test_op_flags_parse_fabric),
	        cmocka_unit_test(test_op_flags_parse_webhook_cert),
	        cmocka_unit_test(test_op_flags_markdown_matches_docs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
