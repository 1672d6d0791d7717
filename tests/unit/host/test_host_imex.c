// SPDX-License-Identifier: Apache-2.0
// Unit tests for IMEX on the host: rendering, restart only on change (also
// when a crash left new files under an old daemon), both modes, the paths
// the daemon and the ctl are handed, and status through a ctl that answers,
// fails or hangs.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"

static struct host_imex_cfg *cfg_new(enum host_imex_mode mode, size_t n)
{
	struct host_imex_cfg *c = xcalloc(1, sizeof(*c));

	c->mode = mode;
	snprintf(c->domain, sizeof(c->domain), "rack7");
	for (size_t i = 0; i < n; i++)
		snprintf(c->peers[i], sizeof(c->peers[i]), "10.42.8.%zu", 11 + i);
	c->n_peers = n;
	snprintf(c->bind_ip, sizeof(c->bind_ip), "10.42.8.11");
	c->grace_s = -1;
	return c;
}

static void test_agent_imex_render_files(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 3);
	struct buf cf, nf, hf;

	(void)state;
	buf_init(&cf, 1 << 16);
	buf_init(&nf, 1 << 16);
	buf_init(&hf, 1 << 16);
	assert_int_equal(host_imex_render(c, "/etc/nvidia-imex/nodes_config.cfg", &cf, &nf, &hf),
	                 NV_OK);
	assert_string_equal(buf_str(&nf), "10.42.8.11\n10.42.8.12\n10.42.8.13\n");
	assert_int_equal(hf.len, 0); /* addresses: nothing for the hosts file */
	assert_non_null(strstr(buf_str(&cf), "SERVER_PORT=50000\n"));
	assert_non_null(strstr(buf_str(&cf), "IMEX_CMD_PORT=50005\n"));
	assert_non_null(strstr(buf_str(&cf), "IMEX_CMD_ENABLED=1\n"));
	assert_non_null(strstr(buf_str(&cf), "DAEMONIZE=0\n"));
	assert_non_null(strstr(buf_str(&cf), "IMEX_NODE_DISCONNECTED_GRACE_TIME=-1\n"));
	assert_non_null(
	        strstr(buf_str(&cf), "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"));
	buf_clear(&cf);
	buf_clear(&nf);
	buf_clear(&hf);
	free(c);
}

static void test_agent_imex_render_rejects(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 3);
	struct buf cf, nf, hf;

	(void)state;
	buf_init(&cf, 1 << 16);
	buf_init(&nf, 1 << 16);
	buf_init(&hf, 1 << 16);
	snprintf(c->peers[2], sizeof(c->peers[2]), "10.42.8.11");
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_E_CONFIG);
	snprintf(c->peers[2], sizeof(c->peers[2]), "10.42.8.13\nevil");
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_E_CONFIG);
	snprintf(c->peers[2], sizeof(c->peers[2]), "10.42.8.13");
	snprintf(c->bind_ip, sizeof(c->bind_ip), "10.42.8.99");
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_E_CONFIG);
	c->bind_ip[0] = '\0';
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_OK);
	c->n_peers = 0;
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_E_CONFIG);
	buf_clear(&cf);
	buf_clear(&nf);
	buf_clear(&hf);
	free(c);
}

static void test_host_imex_apply_process_restarts_on_change(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 3);
	struct host_imex_apply a, b;
	struct fx x;
	pid_t pid;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX, "exec sleep 30");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.changed);
	assert_true(a.restarted);
	assert_true(a.pid > 0);
	assert_int_equal(strlen(a.hash), 64);
	/* Same spec: nothing written, nothing restarted. */
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.changed);
	assert_false(b.restarted);
	assert_int_equal(b.pid, a.pid);
	/* A pid file of an older agent ("pid starttime hash"): the same
	 * daemon, neither restarted nor signalled. */
	{
		char *rec = fx_slurp(&x, "run/nvl72-agent/imex.pid");
		*strchr(strchr(strchr(rec, ' ') + 1, ' ') + 1, ' ') = '\0';
		fx_file(&x, "run/nvl72-agent/imex.pid", rec);
		free(rec);
	}
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.restarted || b.signalled);
	assert_int_equal(b.pid, a.pid);
	/* A new peer list: new files and a new daemon. */
	c->n_peers = 4;
	snprintf(c->peers[3], sizeof(c->peers[3]), "10.42.8.14");
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_true(b.changed);
	assert_true(b.restarted);
	assert_int_not_equal(b.pid, a.pid);
	assert_false(host_pid_alive(a.pid));
	/* The daemon died: started again, files untouched. */
	host_pid_stop(b.pid, 1000);
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_false(a.changed);
	assert_true(a.restarted);
	assert_int_equal(host_imex_pid(&x.h, &pid, NULL), NV_OK);
	assert_int_equal(pid, a.pid);
	assert_int_equal(host_imex_stop(&x.h, HOST_IMEX_PROCESS), NV_OK);
	assert_false(host_pid_alive(a.pid));
	assert_int_equal(host_imex_pid(&x.h, &pid, NULL), NV_E_NOT_FOUND);
	fx_clear(&x);
	free(c);
}

static void test_host_imex_apply_repairs_crash_between_write_and_restart(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 2);
	struct host_imex_apply a, b;
	struct fx x;
	char *nodes;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX, "exec sleep 30");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	/* An agent wrote the new list and died before restarting IMEX. */
	fx_file(&x, "etc/nvidia-imex/nodes_config.cfg", "10.42.8.11\n10.42.8.12\n10.42.8.13\n");
	c->n_peers = 3;
	snprintf(c->peers[2], sizeof(c->peers[2]), "10.42.8.13");
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_true(b.restarted);
	assert_int_not_equal(a.pid, b.pid);
	nodes = fx_slurp(&x, "etc/nvidia-imex/nodes_config.cfg");
	assert_string_equal(nodes, "10.42.8.11\n10.42.8.12\n10.42.8.13\n");
	free(nodes);
	host_imex_stop(&x.h, HOST_IMEX_PROCESS);
	fx_clear(&x);
	free(c);
}

static void test_host_imex_apply_daemon_exits(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 2);
	struct host_imex_apply a;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX, "echo 'No matching network interface found'; exit 1");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_E_STATE);
	assert_non_null(strstr(x.h.err, "exited right after start"));
	fx_clear(&x);
	free(c);
}

/* systemctl that keeps unit state in $R/unit and logs every call. */
static const char systemctl_sh[] =
        "echo \"$*\" >> \"$R/calls\"\n"
        "case \"$1\" in\n"
        "show) cat \"$R/unit\" 2>/dev/null || printf 'LoadState=not-found\\nActiveState=inactive\\n"
        "UnitFileState=\\n';;\n"
        "restart|start) sed -i 's/^ActiveState=.*/ActiveState=active/' \"$R/unit\";;\n"
        "stop) sed -i 's/^ActiveState=.*/ActiveState=inactive/' \"$R/unit\";;\n"
        "esac";

static void test_host_imex_apply_host_mode(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_HOST, 2);
	struct host_imex_apply a;
	struct fx x;
	char *calls, *cfg;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_SYSTEMCTL, systemctl_sh);
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_E_STATE);
	fx_file(&x, "unit", "LoadState=loaded\nActiveState=inactive\nUnitFileState=enabled\n");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.restarted);
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_false(a.restarted);
	calls = fx_slurp(&x, "calls");
	assert_non_null(strstr(calls, "restart -- nvidia-imex.service"));
	assert_null(strstr(strstr(calls, "restart") + 1, "restart"));
	cfg = fx_slurp(&x, "etc/nvidia-imex/config.cfg");
	assert_non_null(strstr(cfg, "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"));
	assert_non_null(strstr(cfg, "DAEMONIZE=1\n"));
	assert_int_equal(host_imex_stop(&x.h, HOST_IMEX_HOST), NV_OK);
	free(calls);
	calls = fx_slurp(&x, "calls");
	assert_non_null(strstr(calls, "stop -- nvidia-imex.service"));
	free(calls);
	free(cfg);
	fx_clear(&x);
	free(c);
}

/* What the IMEX code hands its tools: the last spawn's and run's argv. */
static struct {
	char spawn[4][PATH_MAX_HOST], run[8][PATH_MAX_HOST], log[PATH_MAX_HOST];
} seen;

static void argv_keep(char (*dst)[PATH_MAX_HOST], size_t cap, const char *const *argv)
{
	bool end = false;

	for (size_t i = 0; i < cap; i++) {
		end = end || argv[i] == NULL;
		snprintf(dst[i], PATH_MAX_HOST, "%s", end ? "" : argv[i]);
	}
}

static size_t argv_len(const char *const *argv)
{
	size_t n = 0;

	while (argv[n] != NULL)
		n++;
	return n;
}

static enum nv_err rec_spawn(struct host *h, const char *const *argv, const char *log_path,
                             const struct host_spawn_gate *gate, pid_t *pid)
{
	assert_true(argv_len(argv) < 4);
	argv_keep(seen.spawn, 4, argv);
	snprintf(seen.log, sizeof(seen.log), "%s", log_path ? log_path : "");
	return host_real_ops.spawn(h, argv, log_path, gate, pid);
}

static enum nv_err rec_run(struct host *h, const char *const *argv, int64_t timeout_ms, size_t cap,
                           struct host_run_result *res)
{
	assert_true(argv_len(argv) < 8);
	argv_keep(seen.run, 8, argv);
	return host_real_ops.run(h, argv, timeout_ms, cap, res);
}

static const char ctl_ready_sh[] =
        "case \"$3\" in -q) echo READY;; -N) printf '%s' '{\"status\":\"UP\",\"nodes\":"
        "{\"0\":{\"status\":\"READY\",\"host\":\"10.42.8.11\",\"connections\":{\"0\":"
        "{\"status\":\"CONNECTED\"}}}}}';; esac";

/* Process mode as in the agent's pod: the host root is a folder (here a
 * temp dir standing for /host) and the tools run in the host's mount
 * namespace. The daemon, its config and the ctl name the host's own
 * paths; the agent's own files (config, pid file, log) land under the
 * root. With the tools in the agent's namespace, every path is joined. */
static void test_host_imex_tools_get_host_paths(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 2);
	struct host_imex_status *st = xcalloc(1, sizeof(*st));
	struct host_ops ops = host_real_ops;
	struct host_imex_apply a;
	char want[PATH_MAX_HOST], *cfg, *pidf;
	long long recorded = 0;
	struct fx x;

	(void)state;
	ops.spawn = rec_spawn;
	ops.run = rec_run;
	fx_init(&x, &ops);
	fx_script(&x, FX_IMEX, "exec sleep 30");
	fx_script(&x, FX_IMEX_CTL, ctl_ready_sh);
	assert_int_equal(x.h.cfg.tool_ns, HOST_TOOL_NS_HOST);
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.restarted);
	assert_string_equal(seen.spawn[0], x.tool[FX_IMEX]);
	assert_string_equal(seen.spawn[1], "-c");
	assert_string_equal(seen.spawn[2], "/etc/nvidia-imex/config.cfg");
	snprintf(want, sizeof(want), "%s/run/nvl72-agent/imex.log", x.root);
	assert_string_equal(seen.log, want);
	cfg = fx_slurp(&x, "etc/nvidia-imex/config.cfg");
	assert_non_null(cfg);
	assert_non_null(strstr(cfg, "\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"));
	assert_null(strstr(cfg, x.root));
	free(cfg);
	pidf = fx_slurp(&x, "run/nvl72-agent/imex.pid");
	assert_non_null(pidf);
	assert_int_equal(sscanf(pidf, "%lld", &recorded), 1);
	assert_int_equal(recorded, a.pid);
	free(pidf);
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	assert_int_equal(st->daemon, HOST_IMEXD_READY);
	assert_string_equal(seen.run[0], x.tool[FX_IMEX_CTL]);
	assert_string_equal(seen.run[1], "-c");
	assert_string_equal(seen.run[2], "/etc/nvidia-imex/config.cfg");
	assert_string_equal(seen.run[3], "-N");

	/* Tools in the agent's namespace: they open what the agent opens. The
	 * config names another nodes path, so the daemon is restarted. */
	x.h.cfg.tool_ns = HOST_TOOL_NS_AGENT;
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.changed);
	assert_true(a.restarted);
	snprintf(want, sizeof(want), "%s/etc/nvidia-imex/config.cfg", x.root);
	assert_string_equal(seen.spawn[2], want);
	cfg = fx_slurp(&x, "etc/nvidia-imex/config.cfg");
	snprintf(want, sizeof(want),
	         "\nIMEX_NODE_CONFIG_FILE=%s/etc/nvidia-imex/nodes_config.cfg\n", x.root);
	assert_non_null(strstr(cfg, want));
	free(cfg);
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	snprintf(want, sizeof(want), "%s/etc/nvidia-imex/config.cfg", x.root);
	assert_string_equal(seen.run[2], want);
	assert_int_equal(host_imex_stop(&x.h, HOST_IMEX_PROCESS), NV_OK);
	free(st);
	fx_clear(&x);
	free(c);
}

/* Host mode: the host's systemd starts the daemon, always in the host's
 * namespace, so its config names the host's own nodes path even when our
 * tools run in the agent's; the ctl is ours and gets our view. */
static void test_host_imex_host_mode_daemon_reads_host_path(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_HOST, 2);
	struct host_imex_status *st = xcalloc(1, sizeof(*st));
	struct host_ops ops = host_real_ops;
	struct host_imex_apply a;
	char want[PATH_MAX_HOST], *cfg;
	struct fx x;

	(void)state;
	ops.run = rec_run;
	fx_init(&x, &ops);
	x.h.cfg.tool_ns = HOST_TOOL_NS_AGENT;
	fx_script(&x, FX_SYSTEMCTL, systemctl_sh);
	fx_script(&x, FX_IMEX_CTL, ctl_ready_sh);
	fx_file(&x, "unit", "LoadState=loaded\nActiveState=inactive\nUnitFileState=enabled\n");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	cfg = fx_slurp(&x, "etc/nvidia-imex/config.cfg");
	assert_non_null(strstr(cfg, "\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"));
	free(cfg);
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	snprintf(want, sizeof(want), "%s/etc/nvidia-imex/config.cfg", x.root);
	assert_string_equal(seen.run[2], want);
	x.h.cfg.tool_ns = HOST_TOOL_NS_HOST;
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	assert_string_equal(seen.run[2], "/etc/nvidia-imex/config.cfg");
	free(st);
	fx_clear(&x);
	free(c);
}

static void test_host_imex_status_answers(void **state)
{
	struct host_imex_status *st = xcalloc(1, sizeof(*st));
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX_CTL,
	          "case \"$3\" in -q) echo READY;; -N) printf '%s' '{\"status\":\"UP\",\"nodes\":"
	          "{\"0\":{\"status\":\"READY\",\"host\":\"10.0.0.1\",\"connections\":{\"0\":"
	          "{\"status\":\"CONNECTED\"}}}}}';; esac");
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	assert_int_equal(st->daemon, HOST_IMEXD_READY);
	assert_true(st->nodes_ok);
	assert_int_equal(st->dom.domain, HOST_IMEX_DOMAIN_UP);
	fx_script(&x, FX_IMEX_CTL, "echo 'Connection refused' >&2; exit 1");
	assert_int_equal(host_imex_status(&x.h, st), NV_OK);
	assert_int_equal(st->daemon, HOST_IMEXD_NOT_RUNNING);
	fx_script(&x, FX_IMEX_CTL, "case \"$3\" in -q) echo READY;; -N) echo '{garbage';; esac");
	assert_int_equal(host_imex_status(&x.h, st), NV_E_PARSE);
	assert_false(st->nodes_ok);
	assert_true(st->err[0] != '\0');
	free(st);
	fx_clear(&x);
}

static void test_host_imex_status_hung_ctl(void **state)
{
	struct host_imex_status *st = xcalloc(1, sizeof(*st));
	struct fx x;
	int64_t t0;

	(void)state;
	fx_init(&x, NULL);
	x.h.cfg.tool_timeout_ms = 300;
	fx_script(&x, FX_IMEX_CTL, "exec sleep 30");
	t0 = time_mono_ms();
	assert_int_equal(host_imex_status(&x.h, st), NV_E_TIMEOUT);
	assert_true(time_mono_ms() - t0 < 2000);
	assert_non_null(strstr(st->err, "timed out after 300 ms"));
	free(st);
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_imex_render_files),
	        cmocka_unit_test(test_agent_imex_render_rejects),
	        cmocka_unit_test(test_host_imex_apply_process_restarts_on_change),
	        cmocka_unit_test(test_host_imex_apply_repairs_crash_between_write_and_restart),
	        cmocka_unit_test(test_host_imex_apply_daemon_exits),
	        cmocka_unit_test(test_host_imex_apply_host_mode),
	        cmocka_unit_test(test_host_imex_tools_get_host_paths),
	        cmocka_unit_test(test_host_imex_host_mode_daemon_reads_host_path),
	        cmocka_unit_test(test_host_imex_status_answers),
	        cmocka_unit_test(test_host_imex_status_hung_ctl),
	};
	return cmocka_run_group_tests_name("agent/host_imex", tests, NULL, NULL);
}
