// SPDX-License-Identifier: Apache-2.0
// Leader election against a loopback server that keeps one Lease: a holder
// that claims a year-long leaseDurationSeconds and stops renewing is judged
// by the candidate's own duration, so the candidate takes over, and the
// claim is reported once with the holder's name.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"
#include "nvl72/kube_ctrl.h"

#define ROGUE "nvl72-agent/some-tray"

/* The apiserver's side of one Lease: GET returns it, PUT stores the body
 * with a new resourceVersion and returns it. */
struct lease_server {
	int lfd, port;
	pthread_t thread;
	pthread_mutex_t mu;
	json_t *lease;
	int rv, gets, puts;
};

static void read_request(int fd, char *out, size_t outsz)
{
	size_t n = 0;
	out[0] = '\0';
	while (n + 1 < outsz) {
		ssize_t r = read(fd, out + n, outsz - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		out[n] = '\0';
		char *end = strstr(out, "\r\n\r\n");
		if (end == NULL)
			continue;
		char *cl = strcasestr(out, "Content-Length:");
		size_t want = (size_t)(end + 4 - out) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		if (n >= want)
			break;
	}
}

static void answer(int fd, struct lease_server *s, char *req)
{
	char head[256], rv[16], *body = NULL;
	char *payload = strstr(req, "\r\n\r\n");

	pthread_mutex_lock(&s->mu);
	if (strncmp(req, "PUT ", 4) == 0 && payload != NULL) {
		json_t *in = json_loads(payload + 4, 0, NULL);
		if (in != NULL) {
			snprintf(rv, sizeof(rv), "%d", ++s->rv);
			jx_set_take(in, "metadata.resourceVersion", json_string(rv));
			json_decref(s->lease);
			s->lease = in;
		}
		s->puts++;
	} else {
		s->gets++;
	}
	body = json_dumps(s->lease, JSON_COMPACT);
	pthread_mutex_unlock(&s->mu);
	snprintf(head, sizeof(head),
	         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
	         "%zu\r\nConnection: close\r\n\r\n",
	         strlen(body));
	if (write(fd, head, strlen(head)) < 0 || write(fd, body, strlen(body)) < 0)
		fprintf(stderr, "lease server: write failed\n");
	free(body);
}

static void *serve(void *arg)
{
	struct lease_server *s = arg;
	char req[8192];

	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			break;
		read_request(fd, req, sizeof(req));
		answer(fd, s, req);
		shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	return NULL;
}

static struct kube_client *server_start(struct lease_server *s, json_int_t claimed_s)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	char text[512];
	struct kube_config *cfg = NULL;
	struct kube_client *cl = NULL;
	struct kube_status st;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->rv = 1;
	/* Renewed long ago and never again; it claims claimed_s. */
	s->lease = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:I,s:s,s:s,s:i}}", "apiVersion",
	                     "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
	                     "nvl72-operator", "namespace", "nvl72-system", "resourceVersion", "1",
	                     "spec", "holderIdentity", ROGUE, "leaseDurationSeconds", claimed_s,
	                     "acquireTime", "2026-01-01T00:00:00.000000Z", "renewTime",
	                     "2026-01-01T00:00:00.000000Z", "leaseTransitions", 3);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	listen(s->lfd, 8);
	getsockname(s->lfd, (struct sockaddr *)&sa, &len);
	s->port = ntohs(sa.sin_port);
	pthread_create(&s->thread, NULL, serve, s);
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster: {server: "
	         "\"http://127.0.0.1:%d\"}\nusers:\n- name: u\n  user: {token: t0k}\ncontexts:\n"
	         "- name: t\n  context: {cluster: c, user: u}\n",
	         s->port);
	assert_int_equal(kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st), NV_OK);
	assert_int_equal(
	        kube_client_new(cfg, &(struct kube_client_opts){.timeout_ms = 5000}, &cl, &st),
	        NV_OK);
	return cl;
}

static void server_stop(struct lease_server *s, struct kube_client *cl)
{
	kube_client_free(cl);
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	json_decref(s->lease);
	pthread_mutex_destroy(&s->mu);
}

struct run_arg {
	struct kube_leader *le;
	struct kube_stop *stop;
	enum nv_err rc;
};

static void *run_main(void *arg)
{
	struct run_arg *r = arg;
	r->rc = kube_leader_run(r->le, r->stop);
	return NULL;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static void test_claim_bound(void **state)
{
	(void)state;
	/* Up to four times our own duration is believed, as claimed. */
	assert_int_equal(kube_leader_claim_ms(15000, 15000), 15000);
	assert_int_equal(kube_leader_claim_ms(5000, 15000), 5000);
	assert_int_equal(kube_leader_claim_ms(60000, 15000), 60000);
	assert_int_equal(kube_leader_claim_ms(0, 15000), 0);
	/* Beyond that our own duration is used. */
	assert_int_equal(kube_leader_claim_ms(61000, 15000), 15000);
	assert_int_equal(kube_leader_claim_ms(365LL * 86400 * 1000, 15000), 15000);
}

/* A stale holder that claims a year: the candidate waits its own 3 s
 * instead, takes over, and warns once although it reads the Lease often. */
static void test_year_long_claim_is_not_believed(void **state)
{
	(void)state;
	struct lease_server s;
	struct kube_client *cl = server_start(&s, 365 * 86400);
	struct kube_leader *le = NULL;
	struct run_arg r = {.stop = kube_stop_new()};
	char *logtext = NULL;
	size_t loglen = 0;
	FILE *logf = open_memstream(&logtext, &loglen);
	pthread_t t;
	int i;

	log_set_stream(logf);
	assert_int_equal(kube_leader_new(cl,
	                                 &(struct kube_leader_opts){.ns = "nvl72-system",
	                                                            .name = "nvl72-operator",
	                                                            .identity = "replica-a",
	                                                            .lease_ms = 3000,
	                                                            .renew_deadline_ms = 2000,
	                                                            .retry_ms = 250},
	                                 &le),
	                 NV_OK);
	r.le = le;
	pthread_create(&t, NULL, run_main, &r);
	/* Bounded wait on the condition; a believed claim would never end. */
	for (i = 0; i < 600 && !kube_leader_is_leader(le); i++)
		usleep(50 * 1000);
	assert_true(kube_leader_is_leader(le));
	kube_stop_request(r.stop);
	pthread_join(t, NULL);
	assert_int_equal(r.rc, NV_OK);
	log_set_stream(stderr);
	fclose(logf);

	pthread_mutex_lock(&s.mu);
	/* Several reads of the held Lease before taking it over. */
	assert_true(s.gets >= 3);
	assert_true(s.puts >= 1);
	pthread_mutex_unlock(&s.mu);
	assert_int_equal(count(logtext, "far above ours"), 1);
	assert_non_null(strstr(logtext, "holder=\"" ROGUE "\""));
	assert_non_null(strstr(logtext, "claimed_s=31536000"));
	assert_non_null(strstr(logtext, "used_s=3"));
	free(logtext);
	kube_leader_free(le);
	kube_stop_free(r.stop);
	server_stop(&s, cl);
}

/* A claim at the bound is honoured: with 12 s claimed (our own is 3 s) the
 * candidate is still waiting once its own duration has long passed. */
static void test_claim_within_bound_is_believed(void **state)
{
	(void)state;
	struct lease_server s;
	struct kube_client *cl = server_start(&s, 12);
	struct kube_leader *le = NULL;
	struct run_arg r = {.stop = kube_stop_new()};
	pthread_t t;
	int64_t t0 = time_mono_ms();
	int gets = 0;

	assert_int_equal(kube_leader_new(cl,
	                                 &(struct kube_leader_opts){.ns = "nvl72-system",
	                                                            .name = "nvl72-operator",
	                                                            .identity = "replica-a",
	                                                            .lease_ms = 3000,
	                                                            .renew_deadline_ms = 2000,
	                                                            .retry_ms = 250},
	                                 &le),
	                 NV_OK);
	r.le = le;
	pthread_create(&t, NULL, run_main, &r);
	/* Wait until it has read the Lease after its own 3 s ran out. */
	while (time_mono_ms() - t0 < 5000 || gets < 2) {
		usleep(100 * 1000);
		pthread_mutex_lock(&s.mu);
		gets = s.gets;
		pthread_mutex_unlock(&s.mu);
	}
	assert_false(kube_leader_is_leader(le));
	kube_stop_request(r.stop);
	pthread_join(t, NULL);
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.puts, 0);
	pthread_mutex_unlock(&s.mu);
	kube_leader_free(le);
	kube_stop_free(r.stop);
	server_stop(&s, cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_claim_bound),
	        cmocka_unit_test(test_year_long_claim_is_not_believed),
	        cmocka_unit_test(test_claim_within_bound_is_believed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
