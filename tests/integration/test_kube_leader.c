// SPDX-License-Identifier: Apache-2.0
// Integration suite for leader election: two processes contend for one
// Lease on a real apiserver; kill -9 of the leader must let the other take
// over within one lease duration (measured and printed), and a clean stop
// must release the lease so a successor takes it at once.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"

#define LEASE "itest-leader"

static int failures;

__attribute__((format(printf, 3, 4))) static void check(bool cond, const char *name,
                                                        const char *fmt, ...)
{
	char detail[400] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s - %s%s%s%s\n", cond ? "ok" : "not ok", name, cond ? "" : " (",
	       cond ? "" : detail, cond ? "" : ")");
	failures += !cond;
	fflush(stdout);
}

static struct kube_client *client(void)
{
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_status st;
	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &c, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		exit(1);
	}
	return c;
}

/* ---- child: one contender ---- */

static const char *child_id;

static void on_started(void *ud)
{
	(void)ud;
	printf("LEADER %s %lld\n", child_id, (long long)time_mono_ms());
	fflush(stdout);
}

static void on_stopped(void *ud)
{
	(void)ud;
	printf("STOPPED %s %lld\n", child_id, (long long)time_mono_ms());
	fflush(stdout);
}

static void *sig_thread(void *arg)
{
	sigset_t set;
	int sig;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
	kube_stop_request(arg);
	return NULL;
}

static int child_main(const char *id)
{
	sigset_t set;
	pthread_t t;
	struct kube_stop *stop = kube_stop_new();
	struct kube_leader *le = NULL;

	child_id = id;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_create(&t, NULL, sig_thread, stop);
	struct kube_client *c = client();
	struct kube_leader_opts o = {.ns = "default",
	                             .name = LEASE,
	                             .identity = id,
	                             .on_started = on_started,
	                             .on_stopped = on_stopped};
	if (kube_leader_new(c, &o, &le) != NV_OK)
		return 2;
	enum nv_err rc = kube_leader_run(le, stop);
	kube_leader_free(le);
	kube_client_free(c);
	pthread_kill(t, SIGTERM); /* wakes the signal thread if still waiting */
	pthread_join(t, NULL);
	kube_stop_free(stop);
	return rc == NV_OK ? 0 : 1;
}

/* ---- parent ---- */

struct proc {
	pid_t pid;
	int fd;
	char buf[4096];
	size_t len;
	long long leader_ms, stopped_ms;
};

static void spawn(struct proc *p, const char *id)
{
	int fds[2];
	memset(p, 0, sizeof(*p));
	p->leader_ms = p->stopped_ms = -1;
	if (pipe(fds) != 0)
		exit(1);
	p->pid = fork();
	if (p->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/proc/self/exe", "leader-child", "--child", id, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	p->fd = fds[0];
}

/* The time stamp of a complete "TAG id ms" line, or -1. */
static long long stamp(const char *buf, const char *tag)
{
	const char *l = strstr(buf, tag), *nl, *sp;
	if (l == NULL || (nl = strchr(l, '\n')) == NULL)
		return -1;
	sp = nl;
	while (sp > l && *sp != ' ')
		sp--;
	int64_t v = -1;
	if (parse_i64_n(sp + 1, (size_t)(nl - sp - 1), 0, INT64_MAX, &v) != NV_OK)
		return -1;
	return v;
}

/* Reads what the children print, for up to ms or until cond holds. */
static void pump(struct proc **ps, int n, int64_t ms, long long *until)
{
	int64_t end = time_mono_ms() + ms;
	do {
		struct pollfd f[4];
		for (int i = 0; i < n; i++)
			f[i] = (struct pollfd){ps[i]->fd, POLLIN, 0};
		poll(f, (nfds_t)n, 50);
		for (int i = 0; i < n; i++) {
			struct proc *p = ps[i];
			if (!(f[i].revents & POLLIN) || p->len + 1 >= sizeof(p->buf))
				continue;
			ssize_t r = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
			if (r <= 0)
				continue;
			p->len += (size_t)r;
			p->buf[p->len] = '\0';
			p->leader_ms = stamp(p->buf, "LEADER ");
			p->stopped_ms = stamp(p->buf, "STOPPED ");
		}
	} while (time_mono_ms() < end && (until == NULL || *until < 0));
}

static int reap(struct proc *p)
{
	int status = 0;
	close(p->fd);
	while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static void test_takeover_and_release(void)
{
	struct proc a, b, c;
	struct proc *all[3] = {&a, &b, &c};
	spawn(&a, "contender-a");
	pump(all, 1, 20000, &a.leader_ms);
	check(a.leader_ms >= 0, "the first contender acquires the lease", "%s", a.buf);
	spawn(&b, "contender-b");
	pump(all, 2, 5000, NULL);
	check(b.leader_ms < 0, "the second contender waits while the leader renews", "%s", b.buf);

	long long killed = (long long)time_mono_ms();
	kill(a.pid, SIGKILL);
	reap(&a);
	pump(&all[1], 1, 30000, &b.leader_ms);
	long long takeover = b.leader_ms - killed;
	printf("# leader takeover after kill -9: %lld ms (lease duration 15000 ms, retry 2000 "
	       "ms)\n",
	       takeover);
	check(b.leader_ms >= 0 && takeover <= 15000,
	      "kill -9 of the leader: the other acquires within one lease duration",
	      "takeover %lld ms", takeover);

	struct kube_client *cl = client();
	struct kube_status st;
	json_t *lease = NULL;
	kube_get(cl, &KUBE_RES_LEASES, "default", LEASE, &lease, &st);
	check(!strcmp(jx_str_or(lease, "spec.holderIdentity", ""), "contender-b") &&
	              json_integer_value(jx_path(lease, "spec.leaseTransitions")) >= 1 &&
	              json_integer_value(jx_path(lease, "spec.leaseDurationSeconds")) == 15,
	      "the lease names the new holder and counts the transition", "%s",
	      jx_str_or(lease, "spec.holderIdentity", "?"));
	json_decref(lease);

	spawn(&c, "contender-c");
	pump(&all[1], 2, 3000, NULL);
	long long term = (long long)time_mono_ms();
	kill(b.pid, SIGTERM);
	pump(&all[1], 2, 10000, &c.leader_ms);
	int status = reap(&b);
	long long succ = c.leader_ms - term;
	printf("# successor after a clean stop: %lld ms\n", succ);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0 && b.stopped_ms >= 0,
	      "a stopped leader exits cleanly after calling on_stopped", "status %d", status);
	check(c.leader_ms >= 0 && succ < 5000,
	      "the lease is released on shutdown so a successor takes it at once",
	      "successor after %lld ms", succ);
	kill(c.pid, SIGTERM);
	reap(&c);
	kube_client_free(cl);
}

static void test_option_validation(void)
{
	struct kube_client *cl = client();
	struct kube_leader *le = NULL;
	struct kube_leader_opts bad = {.name = "x", .lease_ms = 10000, .renew_deadline_ms = 10000};
	check(kube_leader_new(cl, &bad, &le) == NV_E_CONFIG,
	      "lease duration must exceed the renew deadline", "%s", "");
	struct kube_leader_opts bad2 = {.name = "x", .renew_deadline_ms = 2000, .retry_ms = 2000};
	check(kube_leader_new(cl, &bad2, &le) == NV_E_CONFIG,
	      "renew deadline must exceed 1.2 x the retry period", "%s", "");
	kube_client_free(cl);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	test_option_validation();
	test_takeover_and_release();
	printf("%s - leader suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
