// SPDX-License-Identifier: Apache-2.0
// Replays canned apiserver answers (tests/data/kube/) from a loopback HTTP
// server through the real transport, request and watch code: throttling
// with Retry-After, Status decoding, caps, and broken watch streams.
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

struct canned {
	int lfd, port;
	const char *files[4];
	int nfiles, served;
	char last_req[4096];
	pthread_t thread;
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

static void *serve(void *arg)
{
	struct canned *c = arg;
	for (int i = 0; i < c->nfiles; i++) {
		int fd = accept(c->lfd, NULL, NULL);
		if (fd < 0)
			break;
		read_request(fd, c->last_req, sizeof(c->last_req));
		char path[256], *data = NULL;
		size_t len = 0;
		if (c->files[i][0] == '/')
			snprintf(path, sizeof(path), "%s", c->files[i]);
		else
			snprintf(path, sizeof(path), "tests/data/kube/%s", c->files[i]);
		if (kube_read_file(path, 16 << 20, &data, &len) == NV_OK) {
			for (size_t off = 0; off < len;) {
				ssize_t w = write(fd, data + off, len - off);
				if (w <= 0)
					break;
				off += (size_t)w;
			}
		}
		free(data);
		c->served++;
		shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	return NULL;
}

/* A listening loopback socket; its port in *port. */
static int listen_loopback(int backlog, int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	listen(fd, backlog);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* A client of http://127.0.0.1:port with a token. */
static struct kube_client *client_of(int port, const struct kube_client_opts *o)
{
	char text[512];
	struct kube_config *cfg = NULL;
	struct kube_client *cl = NULL;
	struct kube_status st;
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster: {server: "
	         "\"http://127.0.0.1:%d\"}\nusers:\n- name: u\n  user: {token: t0k}\ncontexts:\n"
	         "- name: t\n  context: {cluster: c, user: u}\n",
	         port);
	assert_int_equal(kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st), NV_OK);
	assert_int_equal(kube_client_new(cfg, o, &cl, &st), NV_OK);
	return cl;
}

static struct kube_client *start(struct canned *c, size_t max_body, const char *f0, const char *f1)
{
	memset(c, 0, sizeof(*c));
	c->files[c->nfiles++] = f0;
	if (f1)
		c->files[c->nfiles++] = f1;
	c->lfd = listen_loopback(4, &c->port);
	pthread_create(&c->thread, NULL, serve, c);
	struct kube_client_opts o = {
	        .max_body = max_body, .backoff_base_ms = 10, .timeout_ms = 5000};
	return client_of(c->port, &o);
}

static void stop(struct canned *c, struct kube_client *cl)
{
	kube_client_free(cl);
	shutdown(c->lfd, SHUT_RDWR);
	pthread_join(c->thread, NULL);
	close(c->lfd);
}

static void test_kube_get_retries_429_after_retry_after(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "429-retry-after.http", "200-configmap.http");
	struct kube_status st;
	json_t *o = NULL;
	int64_t t0 = time_mono_ms();
	assert_int_equal(kube_get(cl, &KUBE_RES_CONFIGMAPS, "default", "cm1", &o, &st), NV_OK);
	assert_true(time_mono_ms() - t0 >= 950);
	assert_int_equal(st.attempts, 2);
	assert_string_equal(jx_str_or(o, "data.k", ""), "v");
	assert_non_null(strstr(c.last_req, "GET /api/v1/namespaces/default/configmaps/cm1 "));
	assert_non_null(strstr(c.last_req, "User-Agent: nvl72-operator/"));
	assert_non_null(strstr(c.last_req, "Authorization: Bearer t0k"));
	json_decref(o);
	stop(&c, cl);
}

static void test_kube_get_retries_503_with_retry_after(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "503-retry-after.http", "200-configmap.http");
	struct kube_status st;
	json_t *o = NULL;
	assert_int_equal(kube_get(cl, &KUBE_RES_CONFIGMAPS, "default", "cm1", &o, &st), NV_OK);
	assert_int_equal(st.attempts, 2);
	json_decref(o);
	stop(&c, cl);
}

struct observed {
	int n;
	char method[2][16];
	long code[2];
	bool watch;
	double seconds;
};

static void observe(void *arg, const struct kube_exchange *ex)
{
	struct observed *o = arg;
	if (o->n < 2) {
		snprintf(o->method[o->n], sizeof(o->method[0]), "%s", ex->method);
		o->code[o->n] = ex->code;
	}
	o->watch |= ex->watch;
	o->seconds += ex->seconds;
	o->n++;
}

/* Every attempt reaches the observer (the rest_client_* metrics): a 429 and
 * its retry are two exchanges, each with its method and code. */
static void test_kube_observer_sees_each_attempt(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "429-retry-after.http", "200-configmap.http");
	struct observed seen = {0};
	struct kube_status st;
	char host[32];
	json_t *o = NULL;
	kube_client_observe(cl, observe, &seen);
	snprintf(host, sizeof(host), "127.0.0.1:%d", c.port);
	assert_string_equal(kube_client_host(cl), host);
	assert_int_equal(kube_get(cl, &KUBE_RES_CONFIGMAPS, "default", "cm1", &o, &st), NV_OK);
	assert_int_equal(seen.n, 2);
	assert_string_equal(seen.method[0], "GET");
	assert_int_equal(seen.code[0], 429);
	assert_string_equal(seen.method[1], "GET");
	assert_int_equal(seen.code[1], 200);
	assert_false(seen.watch);
	assert_true(seen.seconds > 0);
	json_decref(o);
	stop(&c, cl);
}

static void test_kube_create_500_is_not_repeated(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "500-internal.http", NULL);
	struct kube_status st;
	json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "x");
	assert_int_equal(kube_create(cl, &KUBE_RES_CONFIGMAPS, "default", o, NULL, &st),
	                 NV_E_SERVER);
	assert_int_equal(st.attempts, 1);
	assert_int_equal(st.http_code, 500);
	assert_string_equal(st.reason, "InternalError");
	assert_string_equal(st.message, "etcd leader changed");
	json_decref(o);
	stop(&c, cl);
}

static void test_kube_update_409_is_a_conflict(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "409-conflict.http", NULL);
	struct kube_status st;
	json_t *o = json_pack("{s:{s:s,s:s}}", "metadata", "name", "cm1", "resourceVersion", "1");
	assert_int_equal(kube_update(cl, &KUBE_RES_CONFIGMAPS, "default", o, NULL, NULL, &st),
	                 NV_E_CONFLICT);
	assert_false(nv_err_retryable(NV_E_CONFLICT));
	assert_int_equal(st.attempts, 1);
	assert_non_null(strstr(c.last_req, "PUT /api/v1/namespaces/default/configmaps/cm1 "));
	assert_non_null(strstr(c.last_req, "\"resourceVersion\":\"1\""));
	json_decref(o);
	stop(&c, cl);
}

static void test_kube_create_422_reports_causes(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "422-causes.http", NULL);
	struct kube_status st;
	json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "Bad_Name");
	assert_int_equal(kube_create(cl, &KUBE_RES_CONFIGMAPS, "default", o, NULL, &st),
	                 NV_E_INVALID_OBJECT);
	assert_non_null(strstr(st.causes, "metadata.name: Invalid value"));
	json_decref(o);
	stop(&c, cl);
}

static void test_kube_get_garbage_json_is_parse_error(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 0, "200-garbage.http", NULL);
	struct kube_status st;
	json_t *o = NULL;
	assert_int_equal(kube_get(cl, &KUBE_RES_CONFIGMAPS, "default", "cm1", &o, &st), NV_E_PARSE);
	assert_null(o);
	assert_non_null(strstr(st.message, "response body"));
	stop(&c, cl);
}

static void test_kube_get_body_over_cap(void **state)
{
	(void)state;
	struct canned c;
	struct kube_client *cl = start(&c, 64, "200-configmap.http", NULL);
	struct kube_status st;
	json_t *o = NULL;
	assert_int_equal(kube_get(cl, &KUBE_RES_CONFIGMAPS, "default", "cm1", &o, &st),
	                 NV_E_TOO_LARGE);
	stop(&c, cl);
}

struct seen {
	char log[8][64];
	int n;
};

static enum nv_err record(void *ud, enum kube_event_type t, json_t *o)
{
	struct seen *s = ud;
	if (s->n < 8)
		snprintf(s->log[s->n++], 64, "%s:%s:%s", kube_event_type_name(t), kube_obj_name(o),
		         kube_obj_rv(o));
	return NV_OK;
}

static enum nv_err watch_file(const char *file, size_t max_event, struct seen *s, char **rv,
                              struct kube_status *st)
{
	struct canned c;
	struct kube_client *cl = start(&c, 0, file, NULL);
	struct kube_watch_opts o = {
	        .resource_version = "200", .timeout_s = 5, .max_event = max_event};
	enum nv_err rc = kube_watch(cl, &KUBE_RES_CONFIGMAPS, "default", &o, record, s, rv, st);
	assert_non_null(strstr(c.last_req, "watch=1&allowWatchBookmarks=true&timeoutSeconds=5&"
	                                   "resourceVersion=200"));
	stop(&c, cl);
	return rc;
}

static void test_kube_watch_events_across_chunks(void **state)
{
	(void)state;
	struct seen s = {0};
	struct kube_status st;
	char *rv = NULL;
	assert_int_equal(watch_file("watch-events.http", 0, &s, &rv, &st), NV_OK);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.log[0], "ADDED:a:201");
	assert_string_equal(s.log[1], "MODIFIED:a:202");
	assert_string_equal(s.log[2], "DELETED:a:203");
	assert_string_equal(s.log[3], "BOOKMARK::250");
	assert_string_equal(rv, "250");
	free(rv);
}

static void test_kube_watch_truncated_chunk(void **state)
{
	(void)state;
	struct seen s = {0};
	struct kube_status st;
	char *rv = NULL;
	assert_int_equal(watch_file("watch-truncated.http", 0, &s, &rv, &st), NV_E_TRANSPORT);
	assert_int_equal(s.n, 1);
	assert_string_equal(rv, "301"); /* resume after the last whole event */
	assert_non_null(strstr(st.message, "ended inside an event"));
	free(rv);
}

static void test_kube_watch_oversized_event(void **state)
{
	(void)state;
	struct seen s = {0};
	struct kube_status st;
	char *rv = NULL;
	assert_int_equal(watch_file("watch-oversized.http", 1024, &s, &rv, &st), NV_E_TOO_LARGE);
	assert_int_equal(s.n, 1);
	assert_string_equal(rv, "401");
	free(rv);
}

static void test_kube_watch_garbage(void **state)
{
	(void)state;
	struct seen s = {0};
	struct kube_status st;
	char *rv = NULL;
	assert_int_equal(watch_file("watch-garbage.http", 0, &s, &rv, &st), NV_E_PARSE);
	assert_int_equal(s.n, 1);
	assert_non_null(strstr(st.message, "expected '{'"));
	free(rv);
}

static void test_kube_watch_error_410(void **state)
{
	(void)state;
	struct seen s = {0};
	struct kube_status st;
	char *rv = NULL;
	assert_int_equal(watch_file("watch-410.http", 0, &s, &rv, &st), NV_E_GONE);
	assert_int_equal(st.http_code, 410);
	assert_string_equal(st.reason, "Expired");
	assert_false(nv_err_retryable(NV_E_GONE));
	free(rv);
}

/* Nothing listens: a write that never left is retried, then reported. */
static void test_kube_create_unsent_is_retried(void **state)
{
	(void)state;
	const char *text = "current-context: t\nclusters:\n- name: c\n  cluster: {server: "
	                   "\"http://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {}\ncontexts:\n"
	                   "- name: t\n  context: {cluster: c, user: u}\n";
	struct kube_config *cfg = NULL;
	struct kube_client *cl = NULL;
	struct kube_status st;
	struct kube_client_opts o = {.max_retries = 2, .backoff_base_ms = 5};
	assert_int_equal(kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st), NV_OK);
	assert_int_equal(kube_client_new(cfg, &o, &cl, &st), NV_OK);
	json_t *obj = json_pack("{s:{s:s}}", "metadata", "name", "x");
	assert_int_equal(kube_create(cl, &KUBE_RES_CONFIGMAPS, "default", obj, NULL, &st),
	                 NV_E_TRANSPORT);
	assert_int_equal(st.attempts, 3);
	assert_int_equal(st.http_code, 0);
	json_decref(obj);
	kube_client_free(cl);
}

struct slow {
	int n;
	bool in_order;
};

static enum nv_err slow_consumer(void *ud, enum kube_event_type t, json_t *o)
{
	struct slow *s = ud;
	char want[32];
	(void)t;
	if (s->n == 0)
		time_sleep_ms(400); /* let the undelivered bytes pile up past the pause mark */
	snprintf(want, sizeof(want), "%d", 1000 + s->n);
	s->in_order = s->in_order && strcmp(kube_obj_rv(o), want) == 0;
	s->n++;
	return NV_OK;
}

/* 4 MiB of events behind a slow first handler call: the stream is paused
 * and resumed, and nothing is lost or reordered. */
static void test_kube_watch_backpressure(void **state)
{
	(void)state;
	char path[] = "/tmp/kwatch-big.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	char pad[1001];
	memset(pad, 'p', 1000);
	pad[1000] = '\0';
	fputs("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n", f);
	for (int i = 0; i < 4000; i++)
		fprintf(f,
		        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"o%d\","
		        "\"resourceVersion\":\"%d\"},\"data\":{\"p\":\"%s\"}}}\n",
		        i, 1000 + i, pad);
	fclose(f);
	struct canned c;
	struct kube_client *cl = start(&c, 0, path, NULL);
	struct slow s = {0, true};
	struct kube_status st;
	struct kube_watch_opts o = {.timeout_s = 5};
	char *rv = NULL;
	assert_int_equal(
	        kube_watch(cl, &KUBE_RES_CONFIGMAPS, NULL, &o, slow_consumer, &s, &rv, &st), NV_OK);
	assert_int_equal(s.n, 4000);
	assert_true(s.in_order);
	assert_string_equal(rv, "4999");
	struct kube_client_stats cs;
	kube_client_stats(cl, &cs);
	assert_true(cs.stream_pauses >= 1);
	free(rv);
	stop(&c, cl);
	unlink(path);
}

/* A server that reads every request and answers none (a connection gone
 * silent), except, when answer_probe, the liveness probe's GET /version. */
struct hush {
	int lfd, port, nfds, fds[8];
	bool answer_probe;
	char reqs[8][256]; /* request line and Authorization presence */
	pthread_mutex_t mu;
	pthread_t thread;
};

static void *hush_serve(void *arg)
{
	struct hush *h = arg;
	char req[4096];
	for (;;) {
		int fd = accept(h->lfd, NULL, NULL);
		if (fd < 0)
			break;
		read_request(fd, req, sizeof(req));
		pthread_mutex_lock(&h->mu);
		if (h->nfds < 8) {
			char *eol = strstr(req, "\r\n");
			snprintf(h->reqs[h->nfds], sizeof(h->reqs[0]), "%.*s auth=%d",
			         eol ? (int)(eol - req) : 0, req,
			         strcasestr(req, "Authorization:") != NULL);
			h->fds[h->nfds++] = fd;
		} else {
			close(fd);
		}
		pthread_mutex_unlock(&h->mu);
		if (h->answer_probe && strncmp(req, "GET /version ", 13) == 0) {
			static const char ans[] =
			        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			        "Content-Length: 2\r\n\r\n{}";
			assert_true(write(fd, ans, sizeof(ans) - 1) == (ssize_t)(sizeof(ans) - 1));
		}
	}
	return NULL;
}

static struct kube_client *hush_start(struct hush *h, bool answer_probe, int64_t timeout_ms)
{
	struct kube_client_opts o = {
	        .timeout_ms = timeout_ms, .read_idle_ms = 300, .probe_timeout_ms = 300};

	memset(h, 0, sizeof(*h));
	h->answer_probe = answer_probe;
	pthread_mutex_init(&h->mu, NULL);
	h->lfd = listen_loopback(8, &h->port);
	pthread_create(&h->thread, NULL, hush_serve, h);
	return client_of(h->port, &o);
}

static void hush_stop(struct hush *h, struct kube_client *cl)
{
	kube_client_free(cl);
	shutdown(h->lfd, SHUT_RDWR);
	pthread_join(h->thread, NULL);
	close(h->lfd);
	for (int i = 0; i < h->nfds; i++)
		close(h->fds[i]);
	pthread_mutex_destroy(&h->mu);
}

static const struct kube_raw_req GET_CM = {
        .method = "GET", .path = "/api/v1/namespaces/default/configmaps/cm1", .no_retry = true};

/* Nothing read for read_idle_ms with a request in flight: a probe without
 * credentials goes out; unanswered too, the request ends as timed out,
 * saying why, long before its own 60 s timeout. */
static void test_kube_silent_connection_is_dropped(void **state)
{
	(void)state;
	struct hush h;
	struct kube_client *cl = hush_start(&h, false, 60000);
	struct kube_status st;
	struct kube_client_stats cs;
	json_t *o = NULL;

	assert_int_equal(kube_request(cl, &GET_CM, &o, &st), NV_E_TIMEOUT);
	assert_null(o);
	assert_int_equal(st.http_code, 0);
	assert_non_null(strstr(st.message, "the apiserver connection went silent"));
	kube_client_stats(cl, &cs);
	assert_int_equal(cs.probes, 1);
	assert_int_equal(cs.redials, 1);
	pthread_mutex_lock(&h.mu);
	assert_int_equal(h.nfds, 2);
	assert_string_equal(h.reqs[0],
	                    "GET /api/v1/namespaces/default/configmaps/cm1 HTTP/1.1 auth=1");
	assert_string_equal(h.reqs[1], "GET /version HTTP/1.1 auth=0"); /* never the token */
	pthread_mutex_unlock(&h.mu);
	hush_stop(&h, cl);
}

/* An answered probe proves the server alive: nothing is dropped, and the
 * slow request ends at its own timeout. */
static void test_kube_answered_probe_keeps_transfers(void **state)
{
	(void)state;
	struct hush h;
	struct kube_client *cl = hush_start(&h, true, 1500);
	struct kube_status st;
	struct kube_client_stats cs;
	json_t *o = NULL;

	assert_int_equal(kube_request(cl, &GET_CM, &o, &st), NV_E_TIMEOUT);
	assert_null(strstr(st.message, "went silent"));
	kube_client_stats(cl, &cs);
	assert_true(cs.probes >= 1);
	assert_int_equal(cs.redials, 0);
	hush_stop(&h, cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_get_retries_429_after_retry_after),
	        cmocka_unit_test(test_kube_get_retries_503_with_retry_after),
	        cmocka_unit_test(test_kube_observer_sees_each_attempt),
	        cmocka_unit_test(test_kube_create_500_is_not_repeated),
	        cmocka_unit_test(test_kube_update_409_is_a_conflict),
	        cmocka_unit_test(test_kube_create_422_reports_causes),
	        cmocka_unit_test(test_kube_get_garbage_json_is_parse_error),
	        cmocka_unit_test(test_kube_get_body_over_cap),
	        cmocka_unit_test(test_kube_watch_events_across_chunks),
	        cmocka_unit_test(test_kube_watch_truncated_chunk),
	        cmocka_unit_test(test_kube_watch_oversized_event),
	        cmocka_unit_test(test_kube_watch_garbage),
	        cmocka_unit_test(test_kube_watch_error_410),
	        cmocka_unit_test(test_kube_watch_backpressure),
	        cmocka_unit_test(test_kube_create_unsent_is_retried),
	        cmocka_unit_test(test_kube_silent_connection_is_dropped),
	        cmocka_unit_test(test_kube_answered_probe_keeps_transfers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
