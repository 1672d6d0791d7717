// SPDX-License-Identifier: Apache-2.0
// Unit tests for IMEX peers by name: the slot names, the nodes file and the
// hosts block they render to, the merge that keeps the host's own hosts
// lines, the restart-or-signal decision, and both daemon modes signalled
// (not restarted) when only a slot's address changes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"
#include "nvl72/timeutil.h"

static struct host_imex_cfg *cfg_new(enum host_imex_mode mode, size_t n)
{
	struct host_imex_cfg *c = xcalloc(1, sizeof(*c));

	c->mode = mode;
	c->by_name = true;
	snprintf(c->domain, sizeof(c->domain), "team-a.train-4");
	for (size_t i = 0; i < n; i++)
		snprintf(c->peers[i], sizeof(c->peers[i]), "10.42.8.%zu", 11 + i);
	c->n_peers = n;
	snprintf(c->bind_ip, sizeof(c->bind_ip), "10.42.8.11");
	c->grace_s = -1;
	return c;
}

static void test_host_imex_slot_name(void **state)
{
	char a[HOST_HOSTNAME_LEN], b[HOST_HOSTNAME_LEN], c[HOST_HOSTNAME_LEN];

	(void)state;
	host_imex_slot_name("team-a.train-4", 0, a);
	host_imex_slot_name("team-a.train-4", 0, b);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), strlen("nvl72-imex-12345678-00"));
	assert_int_equal(strncmp(a, HOST_IMEX_NAME_PREFIX, strlen(HOST_IMEX_NAME_PREFIX)), 0);
	assert_string_equal(a + strlen(a) - 3, "-00");
	assert_int_equal(strspn(a + 11, "0123456789abcdef"), 8);
	host_imex_slot_name("team-a.train-4", 17, b);
	assert_string_equal(b + strlen(b) - 3, "-17");
	assert_memory_equal(a, b, strlen(a) - 2);
	host_imex_slot_name("team-b.train-4", 0, c);
	assert_string_not_equal(a, c);
}

static void render(const struct host_imex_cfg *c, struct buf *cf, struct buf *nf, struct buf *hf)
{
	assert_int_equal(host_imex_render(c, "/etc/nvidia-imex/nodes_config.cfg", cf, nf, hf),
	                 NV_OK);
}

static void test_host_imex_render_by_name(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 3);
	struct buf cf, nf, hf, nodes0, hosts0;
	char n0[HOST_HOSTNAME_LEN], n1[HOST_HOSTNAME_LEN], n2[HOST_HOSTNAME_LEN], want[2048];

	(void)state;
	buf_init(&cf, 1 << 16);
	buf_init(&nf, 1 << 16);
	buf_init(&hf, 1 << 16);
	buf_init(&nodes0, 1 << 16);
	buf_init(&hosts0, 1 << 16);
	render(c, &cf, &nf, &hf);
	host_imex_slot_name(c->domain, 0, n0);
	host_imex_slot_name(c->domain, 1, n1);
	host_imex_slot_name(c->domain, 2, n2);
	snprintf(want, sizeof(want), "%s\n%s\n%s\n", n0, n1, n2);
	assert_string_equal(buf_str(&nf), want);
	snprintf(want, sizeof(want),
	         HOST_HOSTS_BEGIN " domain team-a.train-4: written by nvl72-agent, do not edit\n"
	                          "10.42.8.11\t%s\n10.42.8.12\t%s\n10.42.8.13\t%s\n" HOST_HOSTS_END
	                          "\n",
	         n0, n1, n2);
	assert_string_equal(buf_str(&hf), want);
	/* The own address stays BIND_INTERFACE_IP: IMEX picks its line by it. */
	assert_non_null(strstr(buf_str(&cf), "BIND_INTERFACE_IP=10.42.8.11\n"));
	assert_int_equal(buf_append(&nodes0, buf_str(&nf), nf.len), NV_OK);
	assert_int_equal(buf_append(&hosts0, buf_str(&hf), hf.len), NV_OK);
	/* Slot 1 gets another tray: the same nodes file, another mapping. */
	snprintf(c->peers[1], sizeof(c->peers[1]), "10.42.8.20");
	render(c, &cf, &nf, &hf);
	assert_string_equal(buf_str(&nf), buf_str(&nodes0));
	assert_string_not_equal(buf_str(&hf), buf_str(&hosts0));
	assert_non_null(strstr(buf_str(&hf), "10.42.8.20\t"));
	assert_null(strstr(buf_str(&hf), "10.42.8.12"));
	/* A fourth slot is a new nodes file. */
	snprintf(c->peers[3], sizeof(c->peers[3]), "10.42.8.14");
	c->n_peers = 4;
	render(c, &cf, &nf, &hf);
	assert_string_not_equal(buf_str(&nf), buf_str(&nodes0));
	/* A peer given as a host name: the list is written as it is. */
	snprintf(c->peers[3], sizeof(c->peers[3]), "tray-14.rack7");
	render(c, &cf, &nf, &hf);
	assert_string_equal(buf_str(&nf), "10.42.8.11\n10.42.8.20\n10.42.8.13\ntray-14.rack7\n");
	assert_int_equal(hf.len, 0);
	snprintf(c->peers[3], sizeof(c->peers[3]), "fd00::14");
	render(c, &cf, &nf, &hf);
	assert_non_null(strstr(buf_str(&hf), "fd00::14\t" HOST_IMEX_NAME_PREFIX));
	/* A bad address is still refused by name. */
	snprintf(c->peers[3], sizeof(c->peers[3]), "10.42.8.14 evil");
	assert_int_equal(host_imex_render(c, "/n", &cf, &nf, &hf), NV_E_CONFIG);
	buf_clear(&cf);
	buf_clear(&nf);
	buf_clear(&hf);
	buf_clear(&nodes0);
	buf_clear(&hosts0);
	free(c);
}

static char *merge(const char *text, const char *block)
{
	struct buf out;
	char *s;

	buf_init(&out, 1 << 16);
	assert_int_equal(host_hosts_merge(text, strlen(text), block, &out), NV_OK);
	s = xstrdup(buf_str(&out));
	buf_clear(&out);
	return s;
}

static void test_host_hosts_merge(void **state)
{
	static const char block[] =
	        HOST_HOSTS_BEGIN " domain d\n10.0.0.1\tnvl72-imex-0a0b0c0d-00\n"
	                         "10.0.0.2\tnvl72-imex-0a0b0c0d-01\n" HOST_HOSTS_END "\n";
	static const char host[] = "127.0.0.1\tlocalhost\n::1 ip6-localhost ip6-loopback\n";
	struct buf out;
	char *s, text[4096];

	(void)state;
	s = merge(host, block);
	snprintf(text, sizeof(text), "%s%s", host, block);
	assert_string_equal(s, text);
	free(s);
	/* Ours replaced where it was; the host's lines around it kept in order. */
	snprintf(text, sizeof(text),
	         "127.0.0.1 localhost\n" HOST_HOSTS_BEGIN
	         " domain old\n10.9.9.9 nvl72-imex-ffffffff-00\n" HOST_HOSTS_END
	         "\n10.1.1.1 gw # the gateway\n");
	s = merge(text, block);
	snprintf(text, sizeof(text), "127.0.0.1 localhost\n10.1.1.1 gw # the gateway\n%s", block);
	assert_string_equal(s, text);
	free(s);
	/* A stray line of ours (an unterminated block, a copy) goes; our
	 * prefix in a comment or inside another name does not. */
	s = merge(HOST_HOSTS_BEGIN " x\n10.9.9.9  NVL72-IMEX-ffffffff-01\n10.2.2.2 a "
	                           "# nvl72-imex-ffffffff-02\n10.3.3.3 my-nvl72-imex-ffffffff-03\n",
	          "");
	assert_string_equal(
	        s, "10.2.2.2 a # nvl72-imex-ffffffff-02\n10.3.3.3 my-nvl72-imex-ffffffff-03\n");
	free(s);
	/* No newline at the end: one added before our block. */
	s = merge("127.0.0.1 localhost", block);
	snprintf(text, sizeof(text), "127.0.0.1 localhost\n%s", block);
	assert_string_equal(s, text);
	free(s);
	/* Removing ours leaves exactly the host's file. */
	snprintf(text, sizeof(text), "%s%s", host, block);
	s = merge(text, "");
	assert_string_equal(s, host);
	free(s);
	s = merge("", "");
	assert_string_equal(s, "");
	free(s);
	buf_init(&out, 1 << 16);
	assert_int_equal(host_hosts_merge("a\0b\n", 4, block, &out), NV_E_PARSE);
	buf_clear(&out);
	buf_init(&out, 8);
	assert_int_equal(host_hosts_merge(host, strlen(host), block, &out), NV_E_TOO_LARGE);
	buf_clear(&out);
}

static void test_host_imex_decide(void **state)
{
	struct host_imex_running run = {.alive = true, .resolved_ms = 100000};
	int64_t wait;

	(void)state;
	snprintf(run.hash, sizeof(run.hash), "aaaa");
	snprintf(run.hosts_hash, sizeof(run.hosts_hash), "1111");
	assert_int_equal(host_imex_decide(&run, "aaaa", "1111", 200000, &wait), HOST_IMEX_KEEP);
	assert_int_equal(wait, 0);
	/* Its own files changed: only a restart applies them. */
	assert_int_equal(host_imex_decide(&run, "bbbb", "1111", 200000, &wait), HOST_IMEX_RESTART);
	assert_int_equal(host_imex_decide(&run, "bbbb", "2222", 200000, &wait), HOST_IMEX_RESTART);
	/* Only the mapping: a signal, or a wait for the rest of the 5 s. */
	assert_int_equal(host_imex_decide(&run, "aaaa", "2222", 200000, &wait), HOST_IMEX_SIGNAL);
	assert_int_equal(host_imex_decide(&run, "aaaa", "2222", 102000, &wait),
	                 HOST_IMEX_SIGNAL_LATER);
	assert_int_equal(wait, 3000);
	assert_int_equal(
	        host_imex_decide(&run, "aaaa", "2222", 100000 + HOST_IMEX_RESOLVE_GAP_MS, &wait),
	        HOST_IMEX_SIGNAL);
	/* A clock that went back, or no time recorded: signal now. */
	assert_int_equal(host_imex_decide(&run, "aaaa", "2222", 50000, &wait), HOST_IMEX_SIGNAL);
	run.resolved_ms = 0;
	assert_int_equal(host_imex_decide(&run, "aaaa", "2222", 1000, &wait), HOST_IMEX_SIGNAL);
	/* No hosts hash recorded (an older agent's record): signal once. */
	run.hosts_hash[0] = '\0';
	assert_int_equal(host_imex_decide(&run, "aaaa", "2222", 200000, &wait), HOST_IMEX_SIGNAL);
	run.alive = false;
	assert_int_equal(host_imex_decide(&run, "aaaa", "1111", 200000, &wait), HOST_IMEX_RESTART);
}

/* Rewrites the last field (the resolve time) of a record as long ago. */
static void record_age(struct fx *x, const char *rel)
{
	char *s = fx_slurp(x, rel), *sp = strrchr(s, ' ');

	assert_non_null(sp);
	snprintf(sp, 8, " 1000\n");
	fx_file(x, rel, s);
	free(s);
}

/* The same record with its hosts hash (the field before the time) set. */
static void record_hosts(struct fx *x, const char *rel, const char *hosts_hash)
{
	char *s = fx_slurp(x, rel), *end = strrchr(s, ' '), out[512];

	*end = '\0';
	*strrchr(s, ' ') = '\0';
	snprintf(out, sizeof(out), "%s %s %s", s, hosts_hash, end + 1);
	fx_file(x, rel, out);
	free(s);
}

static bool wait_file(struct fx *x, const char *rel, const char *needle)
{
	for (int i = 0; i < 500; i++) {
		char *s = fx_slurp(x, rel);
		bool ok = s != NULL && strstr(s, needle) != NULL;
		free(s);
		if (ok)
			return true;
		time_sleep_ms(10);
	}
	return false;
}

#define PIDF "run/nvl72-agent/imex.pid"

/* A daemon that counts the SIGUSR1s it gets. */
static const char daemon_sh[] = "trap 'echo usr1 >> \"$R/usr1\"' USR1\n"
                                "while :; do sleep 0.05; done";

static void test_host_imex_by_name_signals_not_restarts(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_PROCESS, 4);
	struct host_imex_apply a, b;
	char *hosts, *rec, old_hosts[65];
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_IMEX, daemon_sh);
	fx_file(&x, "etc/hosts", "127.0.0.1 localhost\n");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.restarted);
	assert_false(a.signalled);
	hosts = fx_slurp(&x, "etc/hosts");
	assert_int_equal(strncmp(hosts, "127.0.0.1 localhost\n" HOST_HOSTS_BEGIN, 20 + 24), 0);
	assert_non_null(strstr(hosts, "10.42.8.14\tnvl72-imex-"));
	free(hosts);
	rec = fx_slurp(&x, PIDF);
	assert_int_equal(sscanf(rec, "%*d %*u %*64s %64s", old_hosts), 1);
	free(rec);
	/* The member in slot 2 is replaced, seconds after the start: the
	 * mapping is written, the signal waits for IMEX's 5 s. */
	snprintf(c->peers[2], sizeof(c->peers[2]), "10.42.8.30");
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.restarted);
	assert_false(b.signalled);
	assert_true(b.retry_ms > 0 && b.retry_ms <= HOST_IMEX_RESOLVE_GAP_MS);
	assert_true(b.changed);
	hosts = fx_slurp(&x, "etc/hosts");
	assert_non_null(strstr(hosts, "10.42.8.30\t"));
	assert_null(strstr(hosts, "10.42.8.13"));
	free(hosts);
	/* Once the 5 s are past: the same daemon, signalled once. */
	record_age(&x, PIDF);
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.restarted);
	assert_true(b.signalled);
	assert_false(b.changed);
	assert_int_equal(b.pid, a.pid);
	assert_true(wait_file(&x, "usr1", "usr1"));
	assert_true(host_pid_alive(a.pid));
	/* Nothing new: nothing sent. */
	record_age(&x, PIDF);
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.restarted || b.signalled);
	/* An agent that died after writing the hosts file and before the
	 * signal left the old hash in the record: the next pass signals. */
	record_hosts(&x, PIDF, old_hosts);
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_false(b.changed);
	assert_true(b.signalled);
	assert_int_equal(b.pid, a.pid);
	assert_true(wait_file(&x, "usr1", "usr1\nusr1\n"));
	/* A fifth slot changes the daemon's own nodes file: a restart. */
	snprintf(c->peers[4], sizeof(c->peers[4]), "10.42.8.15");
	c->n_peers = 5;
	assert_int_equal(host_imex_apply(&x.h, c, &b), NV_OK);
	assert_true(b.restarted);
	assert_int_not_equal(b.pid, a.pid);
	assert_false(host_pid_alive(a.pid));
	/* Stopped: the host's hosts file is as it was. */
	assert_int_equal(host_imex_stop(&x.h, HOST_IMEX_PROCESS), NV_OK);
	hosts = fx_slurp(&x, "etc/hosts");
	assert_string_equal(hosts, "127.0.0.1 localhost\n");
	free(hosts);
	fx_clear(&x);
	free(c);
}

static const char systemctl_sh[] =
        "echo \"$*\" >> \"$R/calls\"\n"
        "case \"$1\" in\n"
        "show) cat \"$R/unit\";;\n"
        "restart|start) sed -i 's/^ActiveState=.*/ActiveState=active/' \"$R/unit\";;\n"
        "stop) sed -i 's/^ActiveState=.*/ActiveState=inactive/' \"$R/unit\";;\n"
        "esac";

static void test_host_imex_by_name_host_mode(void **state)
{
	struct host_imex_cfg *c = cfg_new(HOST_IMEX_HOST, 3);
	struct host_imex_apply a;
	char *calls;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_SYSTEMCTL, systemctl_sh);
	fx_file(&x, "unit", "LoadState=loaded\nActiveState=inactive\nUnitFileState=enabled\n");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_true(a.restarted);
	record_age(&x, "run/nvl72-agent/imex-host.hash");
	snprintf(c->peers[1], sizeof(c->peers[1]), "10.42.8.40");
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_false(a.restarted);
	assert_true(a.signalled);
	calls = fx_slurp(&x, "calls");
	assert_non_null(
	        strstr(calls, "kill --kill-whom=main --signal=SIGUSR1 -- nvidia-imex.service"));
	assert_null(strstr(strstr(calls, "restart") + 1, "restart"));
	free(calls);
	/* An older agent's record (the hash alone) is read, not refused. */
	calls = fx_slurp(&x, "run/nvl72-agent/imex-host.hash");
	*strchr(calls, ' ') = '\0';
	fx_file(&x, "run/nvl72-agent/imex-host.hash", calls);
	free(calls);
	assert_int_equal(host_imex_apply(&x.h, c, &a), NV_OK);
	assert_false(a.restarted);
	assert_true(a.signalled);
	fx_clear(&x);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_imex_slot_name),
	        cmocka_unit_test(test_host_imex_render_by_name),
	        cmocka_unit_test(test_host_hosts_merge),
	        cmocka_unit_test(test_host_imex_decide),
	        cmocka_unit_test(test_host_imex_by_name_signals_not_restarts),
	        cmocka_unit_test(test_host_imex_by_name_host_mode),
	};
	return cmocka_run_group_tests_name("host/imex_names", tests, NULL, NULL);
}
