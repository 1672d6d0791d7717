// SPDX-License-Identifier: Apache-2.0
// Unit tests for the web server, run against a real listener on 127.0.0.1
// with an ephemeral port: probes, /metrics, POST bodies and their cap,
// the embedded dashboard, TLS, and the websocket feed seen from a raw client.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "nvl72/metrics.h"
#include "nvl72/timeutil.h"
#include "nvl72/web.h"

/* ---- a throwaway certificate ------------------------------------------------ */

static char *bio_text(BIO *b)
{
	char *p = NULL;
	long n = BIO_get_mem_data(b, &p);
	char *s = malloc((size_t)n + 1);
	assert_non_null(s);
	memcpy(s, p, (size_t)n);
	s[n] = '\0';
	return s;
}

static void cert_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	assert_non_null(ext);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
}

/* A self-signed certificate of pk for 127.0.0.1, valid for an hour. */
static void tls_selfsigned_with(EVP_PKEY *pk, char **cert_out, char **key_out)
{
	assert_non_null(pk);
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"nvl72-test",
	                           -1, -1, 0);
	X509_set_issuer_name(x, name);
	cert_ext(x, NID_basic_constraints, "critical,CA:TRUE");
	cert_ext(x, NID_subject_alt_name, "IP:127.0.0.1");
	assert_true(X509_sign(x, pk, EVP_sha256()) > 0);
	BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
	assert_int_equal(PEM_write_bio_X509(cb, x), 1);
	assert_int_equal(PEM_write_bio_PrivateKey_traditional(kb, pk, NULL, NULL, 0, NULL, NULL),
	                 1);
	*cert_out = bio_text(cb);
	*key_out = bio_text(kb);
	BIO_free(cb);
	BIO_free(kb);
	X509_free(x);
	EVP_PKEY_free(pk);
}

/* The same with a new RSA key. */
static void tls_selfsigned(char **cert_out, char **key_out)
{
	tls_selfsigned_with(EVP_RSA_gen(2048), cert_out, key_out);
}

/* ---- fixtures ------------------------------------------------------------- */

struct fix {
	struct web_server *s;
	struct metrics_registry *reg;
	atomic_bool ready;
	int port;
};

static bool check_ready(void *arg, struct buf *why)
{
	struct fix *f = arg;
	if (atomic_load(&f->ready))
		return true;
	(void)buf_append_str(why, "informers not synced");
	return false;
}

static bool check_ping(void *arg, struct buf *why)
{
	(void)arg;
	(void)why;
	return true;
}

/* Echoes what it received, so the test sees body and token handling. */
static enum nv_err echo_handler(void *arg, const struct web_request *req, struct web_response *resp)
{
	(void)arg;
	resp->status = 201;
	return buf_printf(&resp->body,
	                  "{\"len\":%zu,\"bearer\":\"%s\",\"type\":\"%s\",\"first\":\"%c\"}",
	                  req->body_len, req->bearer ? req->bearer : "", req->content_type,
	                  req->body_len ? req->body[0] : '-');
}

static enum nv_err failing_handler(void *arg, const struct web_request *req,
                                   struct web_response *resp)
{
	(void)arg;
	(void)req;
	(void)resp;
	return NV_E_INTERNAL;
}

static enum nv_err state_handler(void *arg, const struct web_request *req,
                                 struct web_response *resp)
{
	(void)arg;
	resp->content_type = "text/plain; charset=utf-8";
	return buf_printf(&resp->body, "%s %d", req->path, req->method == WEB_GET);
}

static struct fix *fix_start(const struct web_config *over)
{
	struct fix *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	atomic_init(&f->ready, false);
	f->reg = metrics_registry_new();
	struct web_config cfg = {0};
	if (over)
		cfg = *over;
	cfg.bind_addr = "127.0.0.1";
	cfg.metrics = f->reg;
	if (cfg.body_max == 0)
		cfg.body_max = 1024;
	assert_int_equal(web_server_new(&cfg, &f->s), NV_OK);
	assert_int_equal(web_check_add(f->s, WEB_PROBE_READY, "informers", check_ready, f), NV_OK);
	assert_int_equal(web_check_add(f->s, WEB_PROBE_LIVE, "ping", check_ping, f), NV_OK);
	assert_int_equal(web_route_post(f->s, "/validate", echo_handler, NULL), NV_OK);
	assert_int_equal(web_route_post(f->s, "/validate", echo_handler, NULL), NV_E_EXISTS);
	assert_int_equal(web_route_post(f->s, "/fail", failing_handler, NULL), NV_OK);
	assert_int_equal(web_route_get(f->s, "/debug/state", state_handler, NULL), NV_OK);
	assert_int_equal(web_server_start(f->s), NV_OK);
	f->port = web_server_port(f->s);
	assert_true(f->port > 0);
	return f;
}

static void fix_stop(struct fix *f)
{
	web_server_free(f->s);
	metrics_registry_free(f->reg);
	free(f);
}

/* ---- a small HTTP client on libcurl ------------------------------------- */

struct reply {
	long status;
	struct buf body;
	struct buf headers;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
	struct buf *b = arg;
	return buf_append(b, p, sz * n) == NV_OK ? sz * n : 0;
}

static void reply_clear(struct reply *r)
{
	buf_clear(&r->body);
	buf_clear(&r->headers);
}

static CURLcode http_do(const char *url, const char *post, size_t post_len, const char *auth,
                        const char *ca_pem, struct reply *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	buf_init(&r->body, 1 << 22);
	buf_init(&r->headers, 1 << 16);
	r->status = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	h = curl_slist_append(h, "Expect:");
	h = curl_slist_append(h, "Content-Type: application/json");
	if (auth)
		h = curl_slist_append(h, auth);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (post) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)post_len);
	}
	if (ca_pem) {
		struct curl_blob blob = {(void *)(uintptr_t)ca_pem, strlen(ca_pem), CURL_BLOB_COPY};
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
	}
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return rc;
}

static long http_method(struct fix *f, const char *method, const char *path)
{
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
	CURL *c = curl_easy_init();
	long status = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOBODY, (long)(strcmp(method, "HEAD") == 0));
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	return status;
}

static long http_get(struct fix *f, const char *path, struct reply *r)
{
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
	assert_int_equal(http_do(url, NULL, 0, NULL, NULL, r), CURLE_OK);
	return r->status;
}

static long http_post(struct fix *f, const char *path, const char *body, size_t len,
                      const char *auth, struct reply *r)
{
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
	assert_int_equal(http_do(url, body, len, auth, NULL, r), CURLE_OK);
	return r->status;
}

/* ---- HTTP tests --------------------------------------------------------------- */

static void test_web_healthz_ok(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	assert_string_equal(buf_str(&r.body), "ok");
	assert_non_null(strstr(buf_str(&r.headers), "x-content-type-options: nosniff"));
	reply_clear(&r);
	assert_int_equal(http_get(f, "/healthz?verbose", &r), 200);
	assert_string_equal(buf_str(&r.body), "[+]ping ok\nhealthz check passed\n");
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_readyz_flips(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	assert_int_equal(http_get(f, "/readyz", &r), 500);
	assert_string_equal(buf_str(&r.body),
	                    "[-]informers failed: reason withheld\nreadyz check failed\n");
	reply_clear(&r);
	assert_int_equal(http_get(f, "/readyz?verbose=1", &r), 500);
	assert_string_equal(buf_str(&r.body),
	                    "[-]informers failed: informers not synced\nreadyz check failed\n");
	reply_clear(&r);
	atomic_store(&f->ready, true);
	assert_int_equal(http_get(f, "/readyz", &r), 200);
	assert_string_equal(buf_str(&r.body), "ok");
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_metrics_served(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct metrics_std m;
	assert_int_equal(metrics_std_register(f->reg, &m), NV_OK);
	assert_int_equal(metrics_std_controller_init(&m, "rack"), NV_OK);
	const char *v[] = {"rack", "success"};
	assert_int_equal(metrics_counter_inc(m.reconcile_total, v), NV_OK);
	struct reply r;
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/validate", "{}", 2, NULL, &r), 201);
	reply_clear(&r);
	assert_int_equal(http_get(f, "/metrics", &r), 200);
	assert_non_null(strstr(
	        buf_str(&r.body),
	        "nvl72_web_requests_total{server=\"web\",handler=\"healthz\",code=\"200\"} 1\n"));
	assert_non_null(strstr(
	        buf_str(&r.body),
	        "nvl72_web_requests_total{server=\"web\",handler=\"/validate\",code=\"201\"} 1\n"));
	assert_non_null(strstr(buf_str(&r.body), "nvl72_web_ws_clients{server=\"web\"} 0\n"));
	assert_non_null(strstr(
	        buf_str(&r.body),
	        "controller_runtime_reconcile_total{controller=\"rack\",result=\"success\"} 1\n"));
	assert_non_null(strstr(buf_str(&r.body),
	                       "# TYPE controller_runtime_reconcile_errors_total counter\n"));
	assert_non_null(strstr(buf_str(&r.headers), "text/plain; version=0.0.4"));
	reply_clear(&r);
	fix_stop(f);
}

static enum nv_err metrics_authz(void *arg, const char *bearer, const char *verb, const char *path)
{
	(void)arg;
	if (strcmp(verb, "get") != 0 || strcmp(path, "/metrics") != 0)
		return NV_E_INTERNAL;
	if (bearer == NULL)
		return NV_E_UNAUTHORIZED;
	return strcmp(bearer, "prometheus") == 0 ? NV_OK : NV_E_FORBIDDEN;
}

static void test_web_metrics_authz(void **state)
{
	(void)state;
	struct web_config cfg = {.metrics_authz = metrics_authz};
	struct fix *f = fix_start(&cfg);
	char url[256];
	struct reply r;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", f->port);
	assert_int_equal(http_do(url, NULL, 0, NULL, NULL, &r), CURLE_OK);
	assert_int_equal(r.status, 401);
	reply_clear(&r);
	assert_int_equal(http_do(url, NULL, 0, "Authorization: Bearer intruder", NULL, &r),
	                 CURLE_OK);
	assert_int_equal(r.status, 403);
	reply_clear(&r);
	assert_int_equal(http_do(url, NULL, 0, "Authorization: Bearer prometheus", NULL, &r),
	                 CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(buf_str(&r.body), "nvl72_web_requests_total"));
	reply_clear(&r);
	/* Probes stay open: the kubelet sends no token. */
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	fix_stop(f);
}

static enum nv_err post_authz(void *arg, const char *bearer, const char *verb, const char *path)
{
	int *calls = arg;
	(*calls)++;
	if (strcmp(verb, "post") != 0)
		return NV_E_INTERNAL;
	if (bearer == NULL)
		return NV_E_UNAUTHORIZED;
	return strcmp(bearer, "operator") == 0 && strcmp(path, "/validate") == 0 ? NV_OK
	                                                                         : NV_E_FORBIDDEN;
}

static void test_web_post_authz(void **state)
{
	(void)state;
	int calls = 0;
	struct web_config cfg = {.post_authz = post_authz, .post_authz_arg = &calls};
	struct fix *f = fix_start(&cfg);
	struct reply r;
	/* Refused before the handler runs: no echo of the body. */
	assert_int_equal(http_post(f, "/validate", "{}", 2, NULL, &r), 401);
	assert_null(strstr(buf_str(&r.body), "\"len\""));
	reply_clear(&r);
	assert_int_equal(http_post(f, "/validate", "{}", 2, "Authorization: Bearer intruder", &r),
	                 403);
	assert_null(strstr(buf_str(&r.body), "\"len\""));
	reply_clear(&r);
	/* An unknown path is not revealed to a caller without rights. */
	assert_int_equal(http_post(f, "/nowhere", "{}", 2, NULL, &r), 401);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/nowhere", "{}", 2, "Authorization: Bearer operator", &r),
	                 403);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/validate", "{}", 2, "Authorization: Bearer operator", &r),
	                 201);
	assert_non_null(strstr(buf_str(&r.body), "\"len\":2"));
	reply_clear(&r);
	assert_int_equal(calls, 5);
	/* Reading stays open and is not asked about. */
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	assert_int_equal(calls, 5);
	fix_stop(f);
}

/* Sends req on a plain connection and returns the status of the answer,
 * or 0 when none came within 5 s. */
static int raw_status(int port, const char *req)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	char resp[256];
	ssize_t n = read(fd, resp, sizeof(resp) - 1);
	close(fd);
	if (n < 12)
		return 0;
	resp[n] = '\0';
	int status = 0;
	return sscanf(resp, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

/* An authorizer that takes a while, as a TokenReview to a slow API server
 * does: it waits until the test lets it go. */
struct slow_authz {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool go;
	int asked;
};

static enum nv_err slow_authz(void *arg, const char *bearer, const char *verb, const char *path)
{
	struct slow_authz *a = arg;
	(void)bearer;
	(void)verb;
	(void)path;
	pthread_mutex_lock(&a->mu);
	a->asked++;
	pthread_cond_broadcast(&a->cv);
	while (!a->go)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
	return NV_E_UNAUTHORIZED;
}

static void test_web_authz_off_the_service_thread(void **state)
{
	(void)state;
	struct slow_authz a = {.go = false};
	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	struct web_config cfg = {.post_authz = slow_authz,
	                         .post_authz_arg = &a,
	                         .authz_workers = 1,
	                         .authz_queue_max = 1};
	struct fix *f = fix_start(&cfg);
	/* One POST parks on the one worker, which does not answer yet. */
	int fd = -1;
	{
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons((uint16_t)f->port)};
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		static const char req[] =
		        "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
		assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	}
	pthread_mutex_lock(&a.mu);
	while (a.asked == 0)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	/* The service thread serves others meanwhile. */
	struct reply r;
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	/* The queue holds one: the next POST is refused at once, 429. */
	assert_int_equal(http_post(f, "/validate", "{}", 2, NULL, &r), 429);
	reply_clear(&r);
	/* Let it answer: the parked POST gets its 401. */
	pthread_mutex_lock(&a.mu);
	a.go = true;
	pthread_cond_broadcast(&a.cv);
	pthread_mutex_unlock(&a.mu);
	char resp[256];
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = read(fd, resp, sizeof(resp) - 1);
	assert_true(n >= 12);
	resp[n] = '\0';
	assert_int_equal(strncmp(resp, "HTTP/1.1 401", 12), 0);
	close(fd);
	/* A refused POST is answered although its (huge) body never comes. */
	assert_int_equal(raw_status(f->port, "POST /validate HTTP/1.1\r\nHost: x\r\n"
	                                     "Content-Length: 100000000\r\n\r\n"),
	                 401);
	fix_stop(f);
	pthread_cond_destroy(&a.cv);
	pthread_mutex_destroy(&a.mu);
}

/* A client that closes while its request is parked leaves nothing
 * behind: the answer, when it comes, finds no one (ASan watches). */
static void test_web_authz_client_gone(void **state)
{
	(void)state;
	struct slow_authz a = {.go = false};
	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	struct web_config cfg = {.metrics_authz = slow_authz, .metrics_authz_arg = &a};
	struct fix *f = fix_start(&cfg);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	pthread_mutex_lock(&a.mu);
	while (a.asked == 0)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	close(fd);
	/* The close is seen (probes go on), then the answer arrives. */
	struct reply r;
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	pthread_mutex_lock(&a.mu);
	a.go = true;
	pthread_cond_broadcast(&a.cv);
	pthread_mutex_unlock(&a.mu);
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	fix_stop(f);
	pthread_cond_destroy(&a.cv);
	pthread_mutex_destroy(&a.mu);
}

static void test_web_post_echo_and_bearer(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	const char *body = "{\"kind\":\"AdmissionReview\"}";
	assert_int_equal(http_post(f, "/validate", body, strlen(body),
	                           "Authorization: bearer  abc.DEF-123_~+/= ", &r),
	                 201);
	assert_string_equal(buf_str(&r.body), "{\"len\":26,\"bearer\":\"abc.DEF-123_~+/"
	                                      "=\",\"type\":\"application/json\",\"first\":\"{\"}");
	reply_clear(&r);
	/* Another scheme carries no bearer token. */
	assert_int_equal(http_post(f, "/validate", "x", 1, "Authorization: Basic dXNlcjpwdw==", &r),
	                 201);
	assert_non_null(strstr(buf_str(&r.body), "\"bearer\":\"\""));
	reply_clear(&r);
	/* Empty body: no body callbacks, the handler still runs. */
	assert_int_equal(http_post(f, "/validate", "", 0, NULL, &r), 201);
	assert_non_null(strstr(buf_str(&r.body), "\"len\":0"));
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_post_body_cap_413(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	char *big = malloc(64 * 1024);
	assert_non_null(big);
	memset(big, 'a', 64 * 1024);
	assert_int_equal(http_post(f, "/validate", big, 1024, NULL, &r), 201);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/validate", big, 1025, NULL, &r), 413);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/validate", big, 64 * 1024, NULL, &r), 413);
	reply_clear(&r);
	/* The server keeps serving afterwards. */
	assert_int_equal(http_post(f, "/validate", big, 10, NULL, &r), 201);
	reply_clear(&r);
	free(big);
	fix_stop(f);
}

static void test_web_post_huge_body_413_at_once(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	size_t n = 4u << 20;
	char *big = malloc(n);
	assert_non_null(big);
	memset(big, 'b', n);
	struct reply r;
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/validate", f->port);
	/* The server may hang up before the body is sent; the status, when
	 * curl got to read it, must be 413. */
	CURLcode rc = http_do(url, big, n, NULL, NULL, &r);
	print_message("huge body: curl=%d status=%ld\n", (int)rc, r.status);
	if (rc == CURLE_OK)
		assert_int_equal(r.status, 413);
	reply_clear(&r);
	free(big);
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_not_found_and_methods(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	assert_int_equal(http_get(f, "/nope", &r), 404);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/nope", "{}", 2, NULL, &r), 404);
	reply_clear(&r);
	assert_int_equal(http_get(f, "/validate", &r), 405);
	reply_clear(&r);
	assert_int_equal(http_get(f, "/debug/state", &r), 200);
	assert_string_equal(buf_str(&r.body), "/debug/state 1");
	assert_non_null(strstr(buf_str(&r.headers), "content-type: text/plain"));
	reply_clear(&r);
	assert_int_equal(http_post(f, "/debug/state", "{}", 2, NULL, &r), 405);
	reply_clear(&r);
	assert_int_equal(http_method(f, "DELETE", "/validate"), 405);
	assert_int_equal(http_method(f, "PUT", "/healthz"), 405);
	assert_int_equal(http_get(f, "/ws", &r), 426);
	reply_clear(&r);
	assert_int_equal(http_post(f, "/fail", "{}", 2, NULL, &r), 500);
	assert_string_equal(buf_str(&r.body), "{\"error\":\"internal error\"}");
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_dashboard_assets(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct reply r;
	assert_int_equal(http_get(f, "/", &r), 200);
	assert_non_null(strstr(buf_str(&r.body), "<html"));
	assert_non_null(strstr(buf_str(&r.headers), "content-type: text/html"));
	assert_non_null(strstr(buf_str(&r.headers), "content-security-policy: default-src 'self'"));
	reply_clear(&r);
	assert_int_equal(http_get(f, "/app.js", &r), 200);
	assert_non_null(strstr(buf_str(&r.headers), "text/javascript"));
	assert_non_null(strstr(buf_str(&r.body), "WebSocket"));
	reply_clear(&r);
	assert_int_equal(http_get(f, "/style.css", &r), 200);
	reply_clear(&r);
	fix_stop(f);
}

static void test_web_tls_serves_https(void **state)
{
	(void)state;
	char *cert = NULL, *key = NULL;
	tls_selfsigned(&cert, &key);
	struct web_config cfg = {.tls_cert_pem = cert, .tls_key_pem = key};
	struct fix *f = fix_start(&cfg);
	char url[256];
	struct reply r;
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", f->port);
	assert_int_equal(http_do(url, NULL, 0, NULL, cert, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(buf_str(&r.body), "ok");
	reply_clear(&r);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/validate", f->port);
	assert_int_equal(http_do(url, "{}", 2, "Authorization: Bearer t0k", cert, &r), CURLE_OK);
	assert_int_equal(r.status, 201);
	assert_non_null(strstr(buf_str(&r.body), "\"bearer\":\"t0k\""));
	reply_clear(&r);
	/* Plain HTTP on the TLS port gets nowhere. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", f->port);
	CURLcode prc = http_do(url, NULL, 0, NULL, NULL, &r);
	assert_false(prc == CURLE_OK && r.status == 200);
	reply_clear(&r);
	fix_stop(f);
	free(cert);
	free(key);
}

/* ---- a raw TLS client ---------------------------------------------------- */

struct tls_conn {
	int fd;
	SSL *ssl;
};

/* Connects and handshakes without verifying: the test compares the
 * certificate it was served itself. */
static void tls_dial(SSL_CTX *ctx, int port, struct tls_conn *t)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	t->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(t->fd >= 0);
	assert_int_equal(connect(t->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	t->ssl = SSL_new(ctx);
	assert_non_null(t->ssl);
	SSL_set_fd(t->ssl, t->fd);
	assert_int_equal(SSL_connect(t->ssl), 1);
}

static void tls_close(struct tls_conn *t)
{
	SSL_free(t->ssl);
	close(t->fd);
}

/* Whether the connection was served the certificate in pem. */
static bool tls_served(const struct tls_conn *t, const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *want = PEM_read_bio_X509(b, NULL, NULL, NULL);
	X509 *got = SSL_get1_peer_certificate(t->ssl);
	bool same = want && got && X509_cmp(want, got) == 0;
	X509_free(want);
	X509_free(got);
	BIO_free(b);
	return same;
}

/* GET /healthz on the connection: its status line. */
static bool tls_healthz_ok(struct tls_conn *t)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char resp[512];
	if (SSL_write(t->ssl, req, (int)strlen(req)) <= 0)
		return false;
	int n = SSL_read(t->ssl, resp, (int)sizeof(resp) - 1);
	if (n <= 0)
		return false;
	resp[n] = '\0';
	return strncmp(resp, "HTTP/1.1 200", 12) == 0;
}

static void test_web_server_tls_update_serves_new_connections(void **state)
{
	(void)state;
	char *cert1 = NULL, *key1 = NULL, *cert2 = NULL, *key2 = NULL;
	tls_selfsigned(&cert1, &key1);
	/* Another key type: no slot of the old pair may stay behind. */
	tls_selfsigned_with(EVP_EC_gen("P-256"), &cert2, &key2);
	struct web_config cfg = {.tls_cert_pem = cert1, .tls_key_pem = key1};
	struct fix *f = fix_start(&cfg);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	struct tls_conn before, after;
	tls_dial(ctx, f->port, &before);
	assert_true(tls_served(&before, cert1));

	assert_int_equal(web_server_tls_update(f->s, cert2, key2), NV_OK);
	tls_dial(ctx, f->port, &after);
	assert_true(tls_served(&after, cert2));
	assert_true(tls_healthz_ok(&after));
	/* The connection open before the change keeps its session. */
	assert_true(tls_healthz_ok(&before));
	tls_close(&after);
	/* Verified through libcurl against the new certificate only. */
	char url[256];
	struct reply r;
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", f->port);
	assert_int_equal(http_do(url, NULL, 0, NULL, cert2, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_clear(&r);
	assert_int_not_equal(http_do(url, NULL, 0, NULL, cert1, &r), CURLE_OK);
	reply_clear(&r);

	/* A key that does not fit is refused; the pair served stays. */
	assert_int_equal(web_server_tls_update(f->s, cert1, key2), NV_E_TLS);
	assert_int_equal(web_server_tls_update(f->s, "garbage", "garbage"), NV_E_TLS);
	tls_dial(ctx, f->port, &after);
	assert_true(tls_served(&after, cert2));
	tls_close(&after);
	/* And back to the first pair, on the same listener. */
	assert_int_equal(web_server_tls_update(f->s, cert1, key1), NV_OK);
	tls_dial(ctx, f->port, &after);
	assert_true(tls_served(&after, cert1));
	tls_close(&after);
	tls_close(&before);
	SSL_CTX_free(ctx);
	fix_stop(f);

	/* A plain HTTP server has no pair to replace. */
	struct fix *plain = fix_start(NULL);
	assert_int_equal(web_server_tls_update(plain->s, cert1, key1), NV_E_STATE);
	fix_stop(plain);
	free(cert1);
	free(key1);
	free(cert2);
	free(key2);
}

static void test_web_config_rejected(void **state)
{
	(void)state;
	struct web_server *s = NULL;
	struct web_config cfg = {.tls_cert_pem = "x"};
	assert_int_equal(web_server_new(&cfg, &s), NV_E_INVAL);
	cfg = (struct web_config){.port = 70000};
	assert_int_equal(web_server_new(&cfg, &s), NV_E_INVAL);
	cfg = (struct web_config){.bind_addr = "127.0.0.1"};
	assert_int_equal(web_server_new(&cfg, &s), NV_OK);
	assert_int_equal(web_route_post(s, "relative", echo_handler, NULL), NV_E_INVAL);
	assert_int_equal(web_publish(s, "fleet", "{}"), NV_E_STATE);
	web_server_stop(s);
	web_server_free(s);
	web_server_free(NULL);
}

static void test_web_port_taken_fails_start(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct web_server *s = NULL;
	struct web_config cfg = {.bind_addr = "127.0.0.1", .port = f->port};
	assert_int_equal(web_server_new(&cfg, &s), NV_OK);
	assert_int_equal(web_server_start(s), NV_E_IO);
	assert_int_equal(web_server_port(s), -1);
	web_server_free(s);
	fix_stop(f);
}

static void test_web_tls_bad_key_fails_start(void **state)
{
	(void)state;
	struct web_server *s = NULL;
	struct web_config cfg = {.bind_addr = "127.0.0.1",
	                         .tls_cert_pem = "not a certificate",
	                         .tls_key_pem = "not a key"};
	assert_int_equal(web_server_new(&cfg, &s), NV_OK);
	assert_int_equal(web_server_start(s), NV_E_TLS);
	web_server_free(s);
}

/* ---- a raw websocket client -------------------------------------------------------- */

#define WSC_BUF (1 << 20)

struct wsc {
	int fd;
	unsigned char *buf; /* WSC_BUF bytes */
	size_t len;
};

static void wsc_close(struct wsc *c)
{
	close(c->fd);
	free(c->buf);
	c->buf = NULL;
}

static bool wsc_fill(struct wsc *c, int timeout_ms)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (c->len == WSC_BUF || poll(&p, 1, timeout_ms) <= 0)
		return false;
	ssize_t n = read(c->fd, c->buf + c->len, WSC_BUF - c->len);
	if (n <= 0)
		return false;
	c->len += (size_t)n;
	return true;
}

/* Connects and upgrades, with extra header lines (each ending in \r\n) or
 * NULL; returns the HTTP status of the handshake. */
static int wsc_open_hdr(struct wsc *c, int port, const char *origin, const char *extra)
{
	memset(c, 0, sizeof(*c));
	c->buf = malloc(WSC_BUF);
	assert_non_null(c->buf);
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(c->fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	char req[1024];
	int n = snprintf(req, sizeof(req),
	                 "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
	                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	                 "Sec-WebSocket-Version: 13\r\n%s%s%s%s\r\n",
	                 port, origin ? "Origin: " : "", origin ? origin : "", origin ? "\r\n" : "",
	                 extra ? extra : "");
	assert_int_equal(write(c->fd, req, (size_t)n), n);
	unsigned char *end = NULL;
	while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL)
		if (!wsc_fill(c, 3000))
			return 0;
	int status = 0;
	if (memcmp(c->buf, "HTTP/1.1 ", 9) == 0)
		status = (int)strtol((const char *)c->buf + 9, NULL, 10);
	if (status == 101)
		assert_non_null(
		        memmem(c->buf, (size_t)(end - c->buf), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", 28));
	size_t hl = (size_t)(end - c->buf) + 4;
	memmove(c->buf, c->buf + hl, c->len - hl);
	c->len -= hl;
	return status;
}

static int wsc_open(struct wsc *c, int port, const char *origin)
{
	return wsc_open_hdr(c, port, origin, NULL);
}

/* Sends one masked text frame, as a client must. */
static void wsc_send(struct wsc *c, const char *text)
{
	size_t n = strlen(text), hl = n < 126 ? 6 : 8;
	unsigned char *f = malloc(hl + n);
	static const unsigned char key[4] = {0x12, 0x34, 0x56, 0x78};
	assert_non_null(f);
	assert_true(n < 65536);
	f[0] = 0x81;
	if (n < 126) {
		f[1] = (unsigned char)(0x80 | n);
	} else {
		f[1] = 0x80 | 126;
		f[2] = (unsigned char)(n >> 8);
		f[3] = (unsigned char)n;
	}
	memcpy(f + hl - 4, key, 4);
	for (size_t i = 0; i < n; i++)
		f[hl + i] = (unsigned char)text[i] ^ key[i % 4];
	assert_int_equal(write(c->fd, f, hl + n), (ssize_t)(hl + n));
	free(f);
}

/* Reads one unfragmented frame; returns its opcode, or -1 on timeout. */
static int wsc_frame(struct wsc *c, char *out, size_t cap, int timeout_ms)
{
	for (;;) {
		if (c->len >= 2) {
			size_t plen = c->buf[1] & 0x7f, hl = 2;
			if (plen == 126 && c->len >= 4) {
				plen = (size_t)c->buf[2] << 8 | c->buf[3];
				hl = 4;
			} else if (plen == 127 && c->len >= 10) {
				plen = 0;
				for (int i = 0; i < 8; i++)
					plen = plen << 8 | c->buf[2 + i];
				hl = 10;
			}
			if ((plen < 126 || hl > 2) && c->len >= hl + plen) {
				int op = c->buf[0] & 0x0f;
				size_t k = plen < cap - 1 ? plen : cap - 1;
				memcpy(out, c->buf + hl, k);
				out[k] = '\0';
				memmove(c->buf, c->buf + hl + plen, c->len - hl - plen);
				c->len -= hl + plen;
				return op;
			}
		}
		if (!wsc_fill(c, timeout_ms))
			return -1;
	}
}

static void wait_clients(struct web_server *s, size_t want)
{
	for (int i = 0; i < 300 && web_client_count(s) != want; i++)
		time_sleep_ms(10);
	assert_int_equal(web_client_count(s), want);
}

static void test_web_ws_replay_and_live(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	assert_int_equal(web_publish(f->s, "fleet", "{\"racks\":[]}"), NV_OK);
	assert_int_equal(web_publish(f->s, "rack/r01", "{\"v\":1}"), NV_OK);
	assert_int_equal(web_publish(f->s, "fleet", "{\"racks\":[1]}"), NV_OK);
	assert_int_equal(web_publish(f->s, "bad topic", "{}"), NV_E_INVAL);
	struct wsc c;
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	char msg[4096];
	/* Retained messages come first, oldest first, latest per topic. */
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 3000), 1);
	assert_string_equal(
	        msg, "{\"topic\":\"rack/r01\",\"seq\":2,\"retained\":true,\"data\":{\"v\":1}}");
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 3000), 1);
	assert_string_equal(
	        msg, "{\"topic\":\"fleet\",\"seq\":3,\"retained\":true,\"data\":{\"racks\":[1]}}");
	wait_clients(f->s, 1);
	assert_int_equal(web_publish_transient(f->s, "event", "{\"reason\":\"TrayDown\"}"), NV_OK);
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 3000), 1);
	assert_string_equal(msg, "{\"topic\":\"event\",\"seq\":4,\"retained\":false,\"data\":{"
	                         "\"reason\":\"TrayDown\"}}");
	assert_int_equal(web_unpublish(f->s, "rack/r01"), NV_OK);
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 3000), 1);
	assert_string_equal(msg,
	                    "{\"topic\":\"rack/r01\",\"seq\":5,\"retained\":false,\"data\":null}");
	/* A second client sees only what is still retained. */
	struct wsc c2;
	assert_int_equal(wsc_open(&c2, f->port, NULL), 101);
	assert_int_equal(wsc_frame(&c2, msg, sizeof(msg), 3000), 1);
	assert_non_null(strstr(msg, "\"topic\":\"fleet\""));
	assert_int_equal(wsc_frame(&c2, msg, sizeof(msg), 200), -1);
	wsc_close(&c);
	wsc_close(&c2);
	wait_clients(f->s, 0);
	fix_stop(f);
}

static void test_web_ws_large_message(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct wsc c;
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	wait_clients(f->s, 1);
	size_t n = 40000;
	char *json = malloc(n + 3);
	assert_non_null(json);
	json[0] = '"';
	memset(json + 1, 'x', n);
	json[n + 1] = '"';
	json[n + 2] = '\0';
	assert_int_equal(web_publish(f->s, "rack/big", json), NV_OK);
	char *msg = malloc(n + 256);
	assert_non_null(msg);
	assert_int_equal(wsc_frame(&c, msg, n + 256, 3000), 1);
	assert_int_equal(
	        strlen(msg),
	        n + 2 + strlen("{\"topic\":\"rack/big\",\"seq\":1,\"retained\":true,\"data\":}"));
	free(msg);
	free(json);
	wsc_close(&c);
	fix_stop(f);
}

static void test_web_ws_other_origin_refused(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct wsc c;
	assert_int_not_equal(wsc_open(&c, f->port, "http://evil.example"), 101);
	wsc_close(&c);
	char origin[64];
	snprintf(origin, sizeof(origin), "http://127.0.0.1:%d", f->port);
	assert_int_equal(wsc_open(&c, f->port, origin), 101);
	wsc_close(&c);
	fix_stop(f);
}

static void slow_client_dropped(const struct web_config *cfg)
{
	struct fix *f = fix_start(cfg);
	struct wsc slow, fast;
	assert_int_equal(wsc_open(&slow, f->port, NULL), 101);
	int rcv = 4096;
	setsockopt(slow.fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	assert_int_equal(wsc_open(&fast, f->port, NULL), 101);
	wait_clients(f->s, 2);
	size_t n = 256 * 1024;
	char *json = malloc(n + 3);
	assert_non_null(json);
	json[0] = '"';
	memset(json + 1, 'y', n);
	json[n + 1] = '"';
	json[n + 2] = '\0';
	char *msg = malloc(n + 256);
	assert_non_null(msg);
	int64_t worst_us = 0;
	for (int i = 0; i < 64; i++) {
		int64_t t0 = time_mono_us();
		assert_int_equal(web_publish_transient(f->s, "event", json), NV_OK);
		int64_t dt = time_mono_us() - t0;
		worst_us = dt > worst_us ? dt : worst_us;
		/* The fast client keeps up. */
		assert_int_equal(wsc_frame(&fast, msg, n + 256, 3000), 1);
	}
	/* The publisher never waited on the slow reader. */
	assert_true(worst_us < 500000);
	wait_clients(f->s, 1);
	struct metrics_family *dropped =
	        metrics_registry_find(f->reg, "nvl72_web_ws_dropped_total");
	assert_non_null(dropped);
	const char *sv[] = {"web"};
	double nd = 0;
	assert_int_equal(metrics_family_get(dropped, sv, &nd), NV_OK);
	assert_true(nd > 0.9 && nd < 1.1);
	free(msg);
	free(json);
	wsc_close(&slow);
	wsc_close(&fast);
	fix_stop(f);
}

static void test_web_ws_slow_client_dropped(void **state)
{
	(void)state;
	struct web_config cfg = {.queue_max = 4, .msg_max = 1 << 20};
	slow_client_dropped(&cfg);
}

static void test_web_ws_slow_client_dropped_by_bytes(void **state)
{
	(void)state;
	struct web_config cfg = {
	        .queue_max = 100000, .msg_max = 1 << 20, .queue_bytes_max = 1 << 20};
	slow_client_dropped(&cfg);
}

struct pub_arg {
	struct web_server *s;
	int id;
};

static void *publisher(void *arg)
{
	struct pub_arg *a = arg;
	char topic[32], json[64];
	for (int i = 0; i < 200; i++) {
		snprintf(topic, sizeof(topic), "tray/r01/%d", a->id);
		snprintf(json, sizeof(json), "{\"n\":%d}", i);
		if (web_publish(a->s, topic, json) != NV_OK)
			abort();
	}
	return NULL;
}

/* Four threads publish at once: the client gets every message once, in
 * strictly increasing seq order. */
static void test_web_ws_concurrent_publishers(void **state)
{
	(void)state;
	struct web_config cfg = {.queue_max = 10000};
	struct fix *f = fix_start(&cfg);
	struct wsc c;
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	wait_clients(f->s, 1);
	pthread_t t[4];
	struct pub_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct pub_arg){f->s, i};
		assert_int_equal(pthread_create(&t[i], NULL, publisher, &args[i]), 0);
	}
	char msg[512];
	long last = 0;
	for (int i = 0; i < 800; i++) {
		assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 3000), 1);
		const char *p = strstr(msg, "\"seq\":");
		assert_non_null(p);
		long seq = strtol(p + 6, NULL, 10);
		assert_true(seq > last);
		last = seq;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(last, 800);
	wsc_close(&c);
	fix_stop(f);
}

static void test_web_stop_with_clients_connected(void **state)
{
	(void)state;
	struct fix *f = fix_start(NULL);
	struct wsc c;
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	wait_clients(f->s, 1);
	assert_int_equal(web_publish(f->s, "fleet", "{}"), NV_OK);
	web_server_stop(f->s);
	assert_int_equal(web_publish(f->s, "fleet", "{}"), NV_E_STATE);
	web_server_stop(f->s);
	wsc_close(&c);
	fix_stop(f);
}

/* ---- reading authorised ------------------------------------------------------------ */

/* "reader" may read, scopes team-a and team-c; "outsider" may read, no
 * scope; "stranger" is not allowed to read; anything else is unknown. */
static enum nv_err read_authz(void *arg, const char *bearer, const char *verb, const char *path)
{
	atomic_int *calls = arg;
	atomic_fetch_add(calls, 1);
	if (strcmp(verb, "get") != 0)
		return NV_E_INTERNAL;
	if (bearer == NULL)
		return NV_E_UNAUTHORIZED;
	if (strcmp(bearer, "reader") == 0 || strcmp(bearer, "outsider") == 0)
		return strcmp(path, "/ws") == 0 || strcmp(path, "/debug/state") == 0
		               ? NV_OK
		               : NV_E_FORBIDDEN;
	return strcmp(bearer, "stranger") == 0 ? NV_E_FORBIDDEN : NV_E_UNAUTHORIZED;
}

static enum nv_err scope_authz(void *arg, const char *bearer, const char *scope)
{
	(void)arg;
	if (strcmp(bearer, "reader") == 0 &&
	    (strcmp(scope, "team-a") == 0 || strcmp(scope, "team-c") == 0))
		return NV_OK;
	return NV_E_FORBIDDEN;
}

static struct fix *fix_reading(atomic_int *calls)
{
	struct web_config cfg = {
	        .read_authz = read_authz, .read_authz_arg = calls, .scope_authz = scope_authz};
	struct fix *f = fix_start(&cfg);
	assert_int_equal(web_publish(f->s, "fleet", "{\"racks\":[]}"), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "domains/team-a", "team-a", "[1]", true), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "domains/team-b", "team-b", "[2]", true), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "domains/x", "bad scope", "[]", true),
	                 NV_E_INVAL);
	return f;
}

/* The next frame's text, which must be of opcode 1. */
static const char *next_text(struct wsc *c, char *msg, size_t cap)
{
	assert_int_equal(wsc_frame(c, msg, cap, 3000), 1);
	return msg;
}

/* A browser sends its token as the first message: until then it gets
 * only the request for it; then the replay, less the scope it may not
 * read, and live messages of its scopes only, a new scope once judged. */
static void test_web_ws_read_token_message_and_scopes(void **state)
{
	(void)state;
	atomic_int calls;
	atomic_init(&calls, 0);
	struct fix *f = fix_reading(&calls);
	struct wsc c;
	char msg[4096];
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	assert_string_equal(next_text(&c, msg, sizeof(msg)),
	                    "{\"topic\":\"auth\",\"seq\":0,\"retained\":false,"
	                    "\"data\":{\"required\":true}}");
	wait_clients(f->s, 1);
	assert_int_equal(web_publish(f->s, "fleet", "{\"racks\":[0]}"), NV_OK);
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 300), -1);
	assert_int_equal(atomic_load(&calls), 0);
	wsc_send(&c, "{\"token\":\"reader\"}");
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"data\":{\"allowed\":true}"));
	/* Oldest first: team-a, team-b (withheld), then fleet's latest. */
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"topic\":\"domains/team-a\""));
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"racks\":[0]"));
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 300), -1);
	assert_int_equal(atomic_load(&calls), 1);
	/* Live: team-b and its removal never reach it; team-a does. */
	assert_int_equal(web_publish_scoped(f->s, "domains/team-b", "team-b", "[3]", true), NV_OK);
	assert_int_equal(web_unpublish(f->s, "domains/team-b"), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "event", "team-b", "{\"n\":1}", false), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "domains/team-a", "team-a", "[4]", true), NV_OK);
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"data\":[4]"));
	/* A namespace that appears later is judged, then its retained value
	 * sent; one it may not read never is. */
	assert_int_equal(web_publish_scoped(f->s, "domains/team-d", "team-d", "[5]", true), NV_OK);
	assert_int_equal(web_publish_scoped(f->s, "domains/team-c", "team-c", "[6]", true), NV_OK);
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"topic\":\"domains/team-c\""));
	assert_non_null(strstr(msg, "\"data\":[6]"));
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 300), -1);
	/* Later messages of the same scope need no new question. */
	assert_int_equal(web_publish_scoped(f->s, "domains/team-c", "team-c", "[7]", true), NV_OK);
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"data\":[7]"));
	/* What it sends after that is ignored. */
	wsc_send(&c, "{\"token\":\"stranger\"}");
	assert_int_equal(web_publish(f->s, "fleet", "{\"racks\":[9]}"), NV_OK);
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"racks\":[9]"));
	assert_int_equal(atomic_load(&calls), 1);
	wsc_close(&c);
	/* One allowed to read and no scope sees no tenant data at all. */
	assert_int_equal(wsc_open_hdr(&c, f->port, NULL, "Authorization: Bearer outsider\r\n"),
	                 101);
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"allowed\":true"));
	assert_non_null(strstr(next_text(&c, msg, sizeof(msg)), "\"topic\":\"fleet\""));
	assert_int_equal(wsc_frame(&c, msg, sizeof(msg), 300), -1);
	wsc_close(&c);
	wait_clients(f->s, 0);
	fix_stop(f);
}

/* The close code of the next frame, which must be a close; -1 if none. */
static int close_code(struct wsc *c)
{
	char msg[256];
	int op;
	while ((op = wsc_frame(c, msg, sizeof(msg), 3000)) == 1)
		; /* the request for a token */
	if (op != 8)
		return -1;
	return (unsigned char)msg[0] << 8 | (unsigned char)msg[1];
}

static void test_web_ws_read_refusals(void **state)
{
	(void)state;
	atomic_int calls;
	atomic_init(&calls, 0);
	struct fix *f = fix_reading(&calls);
	struct wsc c;
	struct {
		const char *header, *message;
		int code;
	} cases[] = {
	        {NULL, "{\"token\":\"forged\"}", 4401},
	        {NULL, "{\"token\":\"stranger\"}", 4403},
	        {"Authorization: Bearer stranger\r\n", NULL, 4403},
	        {NULL, "token=reader", 4400},
	        {NULL, "{\"token\":\"reader\",\"more\":1}", 4400},
	        {NULL, "{\"token\":\"read er\"}", 4400},
	        {NULL, "{\"token\":\"\"}", 4400},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(wsc_open_hdr(&c, f->port, NULL, cases[i].header), 101);
		if (cases[i].message)
			wsc_send(&c, cases[i].message);
		assert_int_equal(close_code(&c), cases[i].code);
		wsc_close(&c);
	}
	/* A first message past the cap is refused while it arrives. */
	size_t big = WEB_AUTH_MSG_MAX + 16;
	char *text = malloc(big + 1);
	assert_non_null(text);
	memset(text, 'a', big);
	text[big] = '\0';
	assert_int_equal(wsc_open(&c, f->port, NULL), 101);
	wsc_send(&c, text);
	assert_int_equal(close_code(&c), 4400);
	wsc_close(&c);
	free(text);
	wait_clients(f->s, 0);
	/* GET routes are asked too; the page, its assets and probes are not. */
	struct reply r;
	assert_int_equal(http_get(f, "/debug/state", &r), 401);
	reply_clear(&r);
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/debug/state", f->port);
	assert_int_equal(http_do(url, NULL, 0, "Authorization: Bearer reader", NULL, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_clear(&r);
	int before = atomic_load(&calls);
	assert_int_equal(http_get(f, "/", &r), 200);
	reply_clear(&r);
	assert_int_equal(http_get(f, "/app.js", &r), 200);
	reply_clear(&r);
	assert_int_equal(http_get(f, "/healthz", &r), 200);
	reply_clear(&r);
	assert_int_equal(atomic_load(&calls), before);
	fix_stop(f);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_web_healthz_ok),
	        cmocka_unit_test(test_web_readyz_flips),
	        cmocka_unit_test(test_web_metrics_served),
	        cmocka_unit_test(test_web_metrics_authz),
	        cmocka_unit_test(test_web_post_authz),
	        cmocka_unit_test(test_web_authz_off_the_service_thread),
	        cmocka_unit_test(test_web_authz_client_gone),
	        cmocka_unit_test(test_web_post_echo_and_bearer),
	        cmocka_unit_test(test_web_post_body_cap_413),
	        cmocka_unit_test(test_web_post_huge_body_413_at_once),
	        cmocka_unit_test(test_web_not_found_and_methods),
	        cmocka_unit_test(test_web_dashboard_assets),
	        cmocka_unit_test(test_web_tls_serves_https),
	        cmocka_unit_test(test_web_server_tls_update_serves_new_connections),
	        cmocka_unit_test(test_web_config_rejected),
	        cmocka_unit_test(test_web_port_taken_fails_start),
	        cmocka_unit_test(test_web_tls_bad_key_fails_start),
	        cmocka_unit_test(test_web_ws_replay_and_live),
	        cmocka_unit_test(test_web_ws_large_message),
	        cmocka_unit_test(test_web_ws_other_origin_refused),
	        cmocka_unit_test(test_web_ws_slow_client_dropped),
	        cmocka_unit_test(test_web_ws_slow_client_dropped_by_bytes),
	        cmocka_unit_test(test_web_ws_concurrent_publishers),
	        cmocka_unit_test(test_web_stop_with_clients_connected),
	        cmocka_unit_test(test_web_ws_read_token_message_and_scopes),
	        cmocka_unit_test(test_web_ws_read_refusals),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
