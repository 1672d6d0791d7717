// SPDX-License-Identifier: Apache-2.0
// Unit tests for the agent's configuration table: defaults, environment
// below flags, bounds and clear errors, the repeated installer argument,
// and the --help and Markdown renderings that come from the same table.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/agent.h"
#include "nvl72/base.h"

struct parsed {
	struct agent_config c;
	enum agent_config_action act;
	char err[512];
	enum nv_err rc;
};

/* Copies the literals into writable strings, as main's argv would be. */
static void parse(struct parsed *p, const char *const *argv_c, const char *const *envp_c)
{
	char *argv[16] = {0}, *envp[16] = {0};
	int argc = 0, envc = 0;

	while (argv_c[argc] != NULL)
		argv[argc] = xstrdup(argv_c[argc]), argc++;
	while (envp_c != NULL && envp_c[envc] != NULL)
		envp[envc] = xstrdup(envp_c[envc]), envc++;
	agent_config_init(&p->c);
	p->err[0] = '\0';
	p->rc = agent_config_parse(&p->c, argc, argv, envp_c ? envp : NULL, &p->act, p->err,
	                           sizeof(p->err));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	for (int i = 0; i < envc; i++)
		free(envp[i]);
}

static void test_agent_config_parse_defaults(void **state)
{
	const char *argv[] = {"nvl72-agent", "--node-name", "n1", NULL};
	struct parsed p;

	(void)state;
	parse(&p, argv, NULL);
	assert_int_equal(p.rc, NV_OK);
	assert_int_equal(p.act, AGENT_CONFIG_RUN);
	assert_string_equal(p.c.node_name, "n1");
	assert_string_equal(p.c.host_root, "/");
	assert_string_equal(p.c.imex_ctl, "/usr/bin/nvidia-imex-ctl");
	assert_int_equal(p.c.tool_timeout_ms, 5000);
	assert_int_equal(p.c.resync_ms, 10000);
	assert_int_equal(p.c.install_timeout_ms, 30 * 60 * 1000);
	assert_int_equal(agent_config_fm_policy(&p.c), AGENT_FM_MASK);
	assert_string_equal(p.c.tool_ns, "host");
	assert_false(agent_config_tools_in_agent_ns(&p.c));
	assert_int_equal(p.c.n_installer, 0);
	assert_false(p.c.metrics_require_token);
	agent_config_clear(&p.c);
	parse(&p, (const char *[]){"a", "--node-name", "n1", "--metrics-require-token", NULL},
	      NULL);
	assert_int_equal(p.rc, NV_OK);
	assert_true(p.c.metrics_require_token);
	agent_config_clear(&p.c);
}

static void test_agent_config_parse_env_below_flags(void **state)
{
	const char *argv[] = {"nvl72-agent", "--node-ip=10.0.0.9", "--resync-period", "30s", NULL};
	const char *envp[] = {"NODE_NAME=tray-node", "NODE_IP=10.0.0.1", "POD_NAMESPACE=nvl72",
	                      "UNRELATED=x",         "NODE_IP",          NULL};
	struct parsed p;

	(void)state;
	parse(&p, argv, envp);
	assert_int_equal(p.rc, NV_OK);
	assert_string_equal(p.c.node_name, "tray-node");
	assert_string_equal(p.c.node_ip, "10.0.0.9");
	assert_string_equal(p.c.lease_namespace, "nvl72");
	assert_int_equal(p.c.resync_ms, 30000);
	agent_config_clear(&p.c);
}

static void test_agent_config_parse_installer_repeats(void **state)
{
	const char *argv[] = {"nvl72-agent",
	                      "--tray",
	                      "r1-t01",
	                      "--installer-arg",
	                      "/usr/bin/run",
	                      "--installer-arg=--version={version}",
	                      "--host-fm-policy",
	                      "report",
	                      "--tool-namespace=agent",
	                      NULL};
	struct parsed p;

	(void)state;
	parse(&p, argv, NULL);
	assert_int_equal(p.rc, NV_OK);
	assert_int_equal(p.c.n_installer, 2);
	assert_string_equal(p.c.installer[0], "/usr/bin/run");
	assert_string_equal(p.c.installer[1], "--version={version}");
	assert_null(p.c.installer[2]);
	assert_int_equal(agent_config_fm_policy(&p.c), AGENT_FM_REPORT);
	assert_true(agent_config_tools_in_agent_ns(&p.c));
	agent_config_clear(&p.c);
}

static void test_agent_config_parse_errors(void **state)
{
	static const struct {
		const char *argv[5];
		const char *msg;
	} cases[] = {
	        {{"a", NULL}, "--node-name (or $NODE_NAME) or --tray is required"},
	        {{"a", "--node-name", "n", "--bogus", NULL}, "unknown flag --bogus"},
	        {{"a", "--node-name", "n", "--tool-timeout=1h", NULL},
	         "--tool-timeout: 1h is outside"},
	        {{"a", "--node-name", "n", "--resync-period=soon", NULL}, "is not a duration"},
	        {{"a", "--node-name", "n", "--log-level=loud", NULL}, "\"loud\" is not one of"},
	        {{"a", "--node-name", "n", "--tool-namespace=pod", NULL},
	         "--tool-namespace: \"pod\" is not one of host|agent"},
	        {{"a", "--node-name", "n", "--heartbeat-period", NULL},
	         "--heartbeat-period needs a value"},
	        {{"a", "--node-name", "n", "stray", NULL}, "unexpected argument \"stray\""},
	        {{"a", "--tray=x", "--heartbeat-period=30s", "--lease-duration=20s", NULL},
	         "--lease-duration must be longer"},
	        {{"a", "--tray=x", "--metrics-bind-address=9400", NULL}, "expected ADDR:PORT"},
	        {{"a", "--tray=x", "--metrics-bind-address=[::1]", NULL}, "expected ADDR:PORT"},
	        {{"a", "--tray=x", "--metrics-bind-address=h:99999", NULL}, "expected ADDR:PORT"},
	        {{"a", "--tray=x", "--metrics-bind-address=0", NULL}, "expected ADDR:PORT"},
	        {{"a", "--tray=x", "--cdi-dir=cdi", NULL},
	         "--cdi-dir: not an absolute path: \"cdi\""},
	        {{"a", "--tray=x",
	          "--kubelet-plugins-dir=/var/lib/kubelet/a-folder-name-long-enough-that-the-dra-"
	          "socket-path-would-not-fit-in-sun-path-of-a-unix-socket",
	          NULL},
	         "the socket path would be longer than a unix socket allows"},
	};
	const char *envp[] = {"NVL72_LOG_LEVEL=chatty", NULL};
	struct parsed p;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		parse(&p, cases[i].argv, NULL);
		assert_int_equal(p.rc, NV_E_CONFIG);
		if (strstr(p.err, cases[i].msg) == NULL)
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, p.err, cases[i].msg);
		agent_config_clear(&p.c);
	}
	parse(&p, (const char *[]){"a", "--tray=x", NULL}, envp);
	assert_int_equal(p.rc, NV_E_CONFIG);
	assert_non_null(strstr(p.err, "$NVL72_LOG_LEVEL"));
	agent_config_clear(&p.c);
}

/* The metrics server's address, IPv6 in brackets included. */
static void test_agent_config_metrics_addr_forms(void **state)
{
	static const struct {
		const char *flag, *host;
		int port;
	} cases[] = {
	        {"--metrics-bind-address=[::1]:9400", "::1", 9400},
	        {"--metrics-bind-address=127.0.0.1:0", "127.0.0.1", 0},
	        {"--metrics-bind-address=:9400", "", 9400},
	        {"--metrics-bind-address=", "", -1},
	};
	struct parsed p;
	char host[64];
	int port;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		parse(&p, (const char *[]){"a", "--tray=x", cases[i].flag, NULL}, NULL);
		assert_int_equal(p.rc, NV_OK);
		assert_int_equal(agent_config_metrics_addr(&p.c, host, sizeof(host), &port), NV_OK);
		assert_string_equal(host, cases[i].host);
		assert_int_equal(port, cases[i].port);
		agent_config_clear(&p.c);
	}
}

static void test_agent_config_parse_actions(void **state)
{
	struct parsed p;

	(void)state;
	parse(&p, (const char *[]){"a", "--help", NULL}, NULL);
	assert_int_equal(p.rc, NV_OK);
	assert_int_equal(p.act, AGENT_CONFIG_HELP);
	agent_config_clear(&p.c);
	parse(&p, (const char *[]){"a", "--help-markdown", NULL}, NULL);
	assert_int_equal(p.act, AGENT_CONFIG_HELP_MARKDOWN);
	agent_config_clear(&p.c);
	parse(&p, (const char *[]){"a", "--version", NULL}, NULL);
	assert_int_equal(p.act, AGENT_CONFIG_VERSION);
	agent_config_clear(&p.c);
}

static void test_agent_config_usage_lists_every_flag(void **state)
{
	static const char *const flags[] = {
	        "--node-name",     "--node-ip",        "--lease-namespace",
	        "--host-root",     "--nvml-path",      "--systemctl",
	        "--modprobe",      "--modinfo",        "--imex-bin",
	        "--imex-ctl",      "--installer-arg",  "--tool-timeout",
	        "--resync-period", "--log-level",      "--kubeconfig",
	        "--tray",          "--tool-namespace", "--metrics-require-token"};
	struct buf help, md;

	(void)state;
	buf_init(&help, 1 << 20);
	buf_init(&md, 1 << 20);
	assert_int_equal(agent_config_usage(&help), NV_OK);
	assert_int_equal(agent_config_markdown(&md), NV_OK);
	for (size_t i = 0; i < ARRAY_LEN(flags); i++) {
		char cell[64];
		snprintf(cell, sizeof(cell), "| `%s` |", flags[i]);
		assert_non_null(strstr(buf_str(&help), flags[i]));
		assert_non_null(strstr(buf_str(&md), cell));
	}
	assert_non_null(strstr(buf_str(&help), "[$NODE_NAME]"));
	assert_non_null(strstr(buf_str(&md), "| `5s` | 100ms to 10m |"));
	assert_non_null(strstr(buf_str(&md), "| mask/report |"));
	/* Every table row has the same number of cells: no stray '|'. */
	for (const char *l = buf_str(&md); *l;) {
		const char *nl = strchr(l, '\n');
		int bars = 0;
		for (const char *c = l; c < nl; c++)
			bars += *c == '|';
		assert_int_equal(bars, 7);
		l = nl + 1;
	}
	buf_clear(&help);
	buf_clear(&md);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_config_parse_defaults),
	        cmocka_unit_test(test_agent_config_parse_env_below_flags),
	        cmocka_unit_test(test_agent_config_parse_installer_repeats),
	        cmocka_unit_test(test_agent_config_parse_errors),
	        cmocka_unit_test(test_agent_config_metrics_addr_forms),
	        cmocka_unit_test(test_agent_config_parse_actions),
	        cmocka_unit_test(test_agent_config_usage_lists_every_flag),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
