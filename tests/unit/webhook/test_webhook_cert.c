// SPDX-License-Identifier: Apache-2.0
// Unit tests for the webhook's serving certificate: what is generated (SANs,
// chain, lifetime), when a stored pair is reused and when it is not (wrong
// key, expiring, missing SAN, foreign CA), the CA kept in the bundle across
// a renewal, the health check, the renewal and serving decisions, and the
// thread's rounds against a loopback server holding the Secret and both
// webhook configurations: one replica renews in the running process, the
// other adopts its pair instead of making a third, and each hands the new
// pair to its server only once the caBundle has trusted it for a round.
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

#include "../../../src/webhook/webhook_int.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"

#define DAY_MS ((int64_t)86400000)

static const char *const ips[] = {"127.0.0.1", NULL};

static struct webhook_cert *cert_for(const char *service, int64_t valid_ms)
{
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {
	        .ns = "nvl72-system",
	        .secret = "nvl72-operator-webhook-tls",
	        .service = service,
	        .extra_ips = ips,
	        .valid_ms = valid_ms,
	};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_OK);
	return c;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void test_cert_generate_is_usable(void **state)
{
	(void)state;
	struct webhook_cert *c = cert_for("nvl72-operator", 0);
	int64_t now = time_wall_ms();
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	const char *crt = webhook_cert_pem(c);
	const char *key = webhook_cert_key_pem(c);
	const char *ca = webhook_cert_ca_pem(c);
	assert_non_null(strstr(crt, "-----BEGIN CERTIFICATE-----"));
	assert_non_null(strstr(key, "-----BEGIN PRIVATE KEY-----"));
	assert_int_equal(count(ca, "BEGIN CERTIFICATE"), 1);
	assert_false(webhook_cert_reused(c));
	// About a year, and reusable for all of it but the last 30 days.
	int64_t na = webhook_cert_not_after_ms(c);
	assert_true(na > now + 364 * DAY_MS && na < now + 366 * DAY_MS);
	int64_t got = 0;
	const char *why = NULL;
	assert_true(wh_cert_usable(c, crt, key, ca, now, &got, &why));
	assert_null(why);
	assert_true(got / 1000 == na / 1000 || got / 1000 == na / 1000 - 1);
	assert_false(wh_cert_usable(c, crt, key, ca, now + 340 * DAY_MS, &got, &why));
	assert_string_equal(why, "the certificate expires too soon");
	struct buf b;
	buf_init(&b, 256);
	assert_true(webhook_cert_check(c, &b));
	buf_clear(&b);
	webhook_cert_free(c);
}

static void test_cert_usable_refuses_mismatches(void **state)
{
	(void)state;
	struct webhook_cert *a = cert_for("nvl72-operator", 0);
	struct webhook_cert *b = cert_for("nvl72-operator", 0);
	struct webhook_cert *other = cert_for("another-service", 0);
	assert_int_equal(wh_cert_generate(a, NULL), NV_OK);
	assert_int_equal(wh_cert_generate(b, NULL), NV_OK);
	assert_int_equal(wh_cert_generate(other, NULL), NV_OK);
	int64_t now = time_wall_ms();
	int64_t na = 0;
	const char *why = NULL;
	assert_false(wh_cert_usable(a, webhook_cert_pem(a), webhook_cert_key_pem(b),
	                            webhook_cert_ca_pem(a), now, &na, &why));
	assert_string_equal(why, "tls.key does not match tls.crt");
	assert_false(wh_cert_usable(a, webhook_cert_pem(a), webhook_cert_key_pem(a),
	                            webhook_cert_ca_pem(b), now, &na, &why));
	assert_string_equal(why, "tls.crt is not signed by a current CA of ca.crt");
	// A pair made for another Service does not cover this one's names.
	assert_false(wh_cert_usable(a, webhook_cert_pem(other), webhook_cert_key_pem(other),
	                            webhook_cert_ca_pem(other), now, &na, &why));
	assert_string_equal(why, "a DNS name is missing from the certificate");
	assert_false(wh_cert_usable(a, "garbage", "garbage", "garbage", now, &na, &why));
	assert_string_equal(why, "tls.crt or tls.key does not parse");
	assert_false(wh_cert_usable(a, "", "", "", now, &na, &why));
	webhook_cert_free(a);
	webhook_cert_free(b);
	webhook_cert_free(other);
}

static void test_cert_generate_short_lifetime_is_renewed(void **state)
{
	(void)state;
	// A 10-day certificate is never worth reusing with 30 days' margin.
	struct webhook_cert *c = cert_for("nvl72-operator", 10 * DAY_MS);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	int64_t na = 0;
	const char *why = NULL;
	assert_false(wh_cert_usable(c, webhook_cert_pem(c), webhook_cert_key_pem(c),
	                            webhook_cert_ca_pem(c), time_wall_ms(), &na, &why));
	assert_string_equal(why, "the certificate expires too soon");
	webhook_cert_free(c);
}

static void test_cert_generate_keeps_previous_ca(void **state)
{
	(void)state;
	struct webhook_cert *c = cert_for("nvl72-operator", 0);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	char *old_crt = xstrdup(webhook_cert_pem(c));
	char *old_key = xstrdup(webhook_cert_key_pem(c));
	char *old_ca = xstrdup(webhook_cert_ca_pem(c));
	assert_int_equal(wh_cert_generate(c, old_ca), NV_OK);
	const char *bundle = webhook_cert_ca_pem(c);
	assert_int_equal(count(bundle, "BEGIN CERTIFICATE"), 2);
	assert_non_null(strstr(bundle, old_ca));
	assert_ptr_not_equal(strstr(bundle, old_ca), bundle); // the new CA comes first
	// A replica still serving the old pair stays trusted through the bundle.
	int64_t na = 0;
	const char *why = NULL;
	assert_true(wh_cert_usable(c, old_crt, old_key, bundle, time_wall_ms(), &na, &why));
	assert_true(wh_cert_usable(c, webhook_cert_pem(c), webhook_cert_key_pem(c), bundle,
	                           time_wall_ms(), &na, &why));
	free(old_crt);
	secure_free_str(old_key);
	free(old_ca);
	webhook_cert_free(c);
}

static void test_cert_new_and_check_edges(void **state)
{
	(void)state;
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {.ns = "ns", .secret = "s", .service = ""};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_E_INVAL);
	assert_int_equal(webhook_cert_new(NULL, &c), NV_E_INVAL);
	webhook_cert_free(NULL);
	c = cert_for("svc", 0);
	struct buf b;
	buf_init(&b, 256);
	assert_false(webhook_cert_check(c, &b));
	assert_string_equal(buf_str(&b), "no serving certificate");
	// Without a client nothing is read or written.
	assert_int_equal(webhook_cert_ensure(c, NULL), NV_E_STATE);
	assert_int_equal(webhook_cert_start(c), NV_E_STATE);
	buf_clear(&b);
	webhook_cert_free(c);
	c = cert_for("svc", DAY_MS / 2);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	buf_init(&b, 256);
	assert_false(webhook_cert_check(c, &b));
	assert_non_null(strstr(buf_str(&b), "expires within a day"));
	buf_clear(&b);
	webhook_cert_stop(c); // never started: nothing to join
	webhook_cert_free(c);
}

static void test_cert_decide(void **state)
{
	(void)state;
	// The pair in the Secret is the one held and still has its margin.
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SELF, true, false), WH_CERT_KEEP);
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SECRET, true, false), WH_CERT_KEEP);
	// Another replica (or cert-manager) stored a usable pair: take it,
	// never make another one.
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SELF, true, true), WH_CERT_ADOPT);
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SECRET, true, true), WH_CERT_ADOPT);
	// Nothing usable: the operator renews what it makes, and only that.
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SELF, false, false), WH_CERT_RENEW);
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SELF, false, true), WH_CERT_RENEW);
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SECRET, false, false), WH_CERT_WAIT);
	assert_int_equal(wh_cert_decide(WEBHOOK_CERT_SECRET, false, true), WH_CERT_WAIT);
}

static void test_cert_usable_renew_threshold(void **state)
{
	(void)state;
	// The renewal is due exactly when renew_before or less is left.
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {.ns = "ns",
	                                  .secret = "s",
	                                  .service = "svc",
	                                  .valid_ms = 10 * DAY_MS,
	                                  .renew_before_ms = 3 * DAY_MS};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_OK);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	int64_t na = webhook_cert_not_after_ms(c), got = 0;
	const char *crt = webhook_cert_pem(c), *key = webhook_cert_key_pem(c);
	const char *ca = webhook_cert_ca_pem(c), *why = NULL;
	int64_t due = (na / 1000) * 1000 - 3 * DAY_MS; // notAfter has seconds
	assert_true(wh_cert_usable(c, crt, key, ca, due - 1000, &got, &why));
	assert_false(wh_cert_usable(c, crt, key, ca, due, &got, &why));
	assert_string_equal(why, "the certificate expires too soon");
	// Read from a Secret another party writes: usable until it expires,
	// whatever is left, and ca.crt may be absent.
	struct webhook_cert *r = NULL;
	cfg.source = WEBHOOK_CERT_SECRET;
	assert_int_equal(webhook_cert_new(&cfg, &r), NV_OK);
	assert_true(wh_cert_usable(r, crt, key, ca, due, &got, &why));
	assert_true(wh_cert_usable(r, crt, key, NULL, due, &got, &why));
	assert_false(wh_cert_usable(r, crt, key, ca, (na / 1000) * 1000, &got, &why));
	assert_string_equal(why, "the certificate has expired");
	webhook_cert_free(r);
	webhook_cert_free(c);
}

static void test_cert_serve_due(void **state)
{
	(void)state;
	int64_t now = 1000000, round = 60000;
	// Nothing new: nothing to hand over.
	assert_false(wh_cert_serve_due(false, true, now + DAY_MS, now, round));
	// New, and the caBundle has trusted its CA for a round.
	assert_true(wh_cert_serve_due(true, true, now + DAY_MS, now, round));
	// New, the caBundle only just changed: wait a round.
	assert_false(wh_cert_serve_due(true, false, now + DAY_MS, now, round));
	// ...unless the one served expires before the round after next.
	assert_true(wh_cert_serve_due(true, false, now + 2 * round, now, round));
	assert_false(wh_cert_serve_due(true, false, now + 2 * round + 1, now, round));
}

/* ---- the rounds, against a loopback apiserver ----------------------------- */

#define NS "nvl72-system"
#define SECRET "nvl72-operator-webhook-tls"
#define SECRET_PATH "/api/v1/namespaces/" NS "/secrets/" SECRET
#define VWC_PATH                                                                                   \
	"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/nvl72-operator"
#define MWC_PATH                                                                                   \
	"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/nvl72-operator"

/* The apiserver's side of one Secret and the two configurations: GET,
 * PUT guarded by resourceVersion (409 when stale), POST, JSON patch. */
struct api {
	int lfd, port;
	pthread_t thread;
	pthread_mutex_t mu;
	json_t *secret; /* NULL: absent */
	json_t *cfg[2]; /* validating, mutating */
	int rv, secret_writes, patches;
	int fail_puts; /* answer this many Secret writes with 500 */
};

static void read_request(int fd, struct buf *in)
{
	char chunk[4096];
	for (;;) {
		ssize_t r = read(fd, chunk, sizeof(chunk));
		if (r <= 0 || buf_append(in, chunk, (size_t)r) != NV_OK)
			return;
		const char *end = strstr(buf_str(in), "\r\n\r\n");
		if (end == NULL)
			continue;
		const char *cl = strcasestr(buf_str(in), "Content-Length:");
		size_t want =
		        (size_t)(end + 4 - buf_str(in)) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		if (in->len >= want)
			return;
	}
}

static json_t *status(int code, const char *reason)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
	                 "status", "Failure", "reason", reason, "code", code);
}

static void bump(struct api *a, json_t *obj)
{
	char rv[16];
	snprintf(rv, sizeof(rv), "%d", ++a->rv);
	jx_set_take(obj, "metadata.resourceVersion", json_string(rv));
}

/* Applies the "add" operations of the caBundle patch (the "test" ones
 * always hold here). */
static void json_patch_apply(json_t *cfg, const json_t *ops)
{
	size_t i;
	const json_t *op;
	json_array_foreach(ops, i, op) {
		unsigned n = 0;
		const char *path = json_string_value(json_object_get(op, "path"));
		if (strcmp(json_string_value(json_object_get(op, "op")), "add") != 0 ||
		    sscanf(path, "/webhooks/%u/clientConfig/caBundle", &n) != 1)
			continue;
		json_t *cc = json_object_get(json_array_get(json_object_get(cfg, "webhooks"), n),
		                             "clientConfig");
		json_object_set(cc, "caBundle", json_object_get(op, "value"));
	}
}

/* The answer to one request: *code and a new reference to its body. */
static json_t *api_answer(struct api *a, const char *method, const char *path, json_t *body,
                          int *code)
{
	*code = 200;
	int k = strcmp(path, VWC_PATH) == 0 ? 0 : strcmp(path, MWC_PATH) == 0 ? 1 : -1;
	if (k >= 0 && strcmp(method, "PATCH") == 0) {
		json_patch_apply(a->cfg[k], body);
		a->patches++;
	}
	if (k >= 0)
		return json_incref(a->cfg[k]);
	if (strcmp(path, SECRET_PATH) == 0 && strcmp(method, "GET") == 0) {
		*code = a->secret ? 200 : 404;
		return a->secret ? json_deep_copy(a->secret) : status(404, "NotFound");
	}
	if (strcmp(path, SECRET_PATH) == 0 && strcmp(method, "PUT") == 0 && a->fail_puts > 0) {
		a->fail_puts--;
		*code = 500;
		return status(500, "InternalError");
	}
	if (strcmp(path, SECRET_PATH) == 0 && strcmp(method, "PUT") == 0) {
		const char *want =
		        a->secret ? jx_str_or(a->secret, "metadata.resourceVersion", "") : "";
		if (a->secret == NULL ||
		    strcmp(jx_str_or(body, "metadata.resourceVersion", ""), want)) {
			*code = 409;
			return status(409, "Conflict");
		}
	} else if (strcmp(method, "POST") == 0 && strstr(path, "/secrets") != NULL) {
		if (a->secret != NULL) {
			*code = 409;
			return status(409, "AlreadyExists");
		}
		*code = 201;
	} else {
		*code = 404;
		return status(404, "NotFound");
	}
	json_decref(a->secret);
	a->secret = json_deep_copy(body);
	bump(a, a->secret);
	a->secret_writes++;
	return json_deep_copy(a->secret);
}

static void *api_serve(void *arg)
{
	struct api *a = arg;
	for (;;) {
		int fd = accept(a->lfd, NULL, NULL);
		if (fd < 0)
			break;
		struct buf in, out;
		buf_init(&in, 1 << 20);
		buf_init(&out, 1 << 20);
		read_request(fd, &in);
		char method[16] = "", path[512] = "";
		sscanf(buf_str(&in), "%15s %511s", method, path);
		char *q = strchr(path, '?');
		if (q)
			*q = '\0';
		const char *payload = strstr(buf_str(&in), "\r\n\r\n");
		json_t *body = payload ? json_loads(payload + 4, 0, NULL) : NULL;
		int code = 0;
		pthread_mutex_lock(&a->mu);
		json_t *resp = api_answer(a, method, path, body, &code);
		pthread_mutex_unlock(&a->mu);
		char *text = json_dumps(resp, JSON_COMPACT);
		(void)buf_printf(
		        &out,
		        "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: "
		        "%zu\r\nConnection: close\r\n\r\n%s",
		        code, strlen(text), text);
		if (write(fd, out.data, out.len) < 0)
			fprintf(stderr, "api: write failed\n");
		free(text);
		json_decref(resp);
		json_decref(body);
		buf_clear(&in);
		buf_clear(&out);
		shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	return NULL;
}

static json_t *config_new(const char *kind, const char *hook)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:[{s:s, s:{s:s}}]}", "apiVersion",
	                 "admissionregistration.k8s.io/v1", "kind", kind, "metadata", "name",
	                 "nvl72-operator", "webhooks", "name", hook, "clientConfig", "url",
	                 "https://127.0.0.1:9443/validate");
}

static struct kube_client *api_start(struct api *a)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	char text[512];
	struct kube_config *cfg = NULL;
	struct kube_client *cl = NULL;
	struct kube_status st;
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->mu, NULL);
	// The chart's Secret: created empty.
	a->secret = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s}", "apiVersion", "v1", "kind", "Secret",
	                      "metadata", "name", SECRET, "namespace", NS, "type", "Opaque");
	bump(a, a->secret);
	a->cfg[0] = config_new("ValidatingWebhookConfiguration", "validate.nvl72.io");
	a->cfg[1] = config_new("MutatingWebhookConfiguration", "stamp-approval.nvl72.io");
	a->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(a->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	listen(a->lfd, 8);
	getsockname(a->lfd, (struct sockaddr *)&sa, &len);
	a->port = ntohs(sa.sin_port);
	pthread_create(&a->thread, NULL, api_serve, a);
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster: {server: "
	         "\"http://127.0.0.1:%d\"}\nusers:\n- name: u\n  user: {token: t0k}\ncontexts:\n"
	         "- name: t\n  context: {cluster: c, user: u}\n",
	         a->port);
	assert_int_equal(kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st), NV_OK);
	assert_int_equal(
	        kube_client_new(cfg, &(struct kube_client_opts){.timeout_ms = 5000}, &cl, &st),
	        NV_OK);
	return cl;
}

static void api_stop(struct api *a, struct kube_client *cl)
{
	kube_client_free(cl);
	shutdown(a->lfd, SHUT_RDWR);
	pthread_join(a->thread, NULL);
	close(a->lfd);
	json_decref(a->secret);
	json_decref(a->cfg[0]);
	json_decref(a->cfg[1]);
	pthread_mutex_destroy(&a->mu);
}

/* A Secret's field, decoded (caller frees); NULL when absent. */
static char *api_secret_field(struct api *a, const char *field)
{
	char *out = NULL;
	size_t len = 0;
	pthread_mutex_lock(&a->mu);
	const char *b64 =
	        json_string_value(json_object_get(json_object_get(a->secret, "data"), field));
	if (b64 == NULL || b64_decode(b64, 1 << 20, &out, &len) != NV_OK)
		out = NULL;
	pthread_mutex_unlock(&a->mu);
	return out;
}

/* Whether both configurations carry the Secret's ca.crt. */
static bool api_bundles_current(struct api *a)
{
	char *ca = api_secret_field(a, "ca.crt");
	struct buf want;
	buf_init(&want, 1 << 20);
	bool ok = ca != NULL && b64_encode(ca, strlen(ca), &want) == NV_OK;
	pthread_mutex_lock(&a->mu);
	for (int k = 0; k < 2 && ok; k++)
		ok = strcmp(jx_str_or(json_array_get(json_object_get(a->cfg[k], "webhooks"), 0),
		                      "clientConfig.caBundle", ""),
		            buf_str(&want)) == 0;
	pthread_mutex_unlock(&a->mu);
	buf_clear(&want);
	free(ca);
	return ok;
}

/* What a replica's server was told. */
struct served {
	int changes;
	char *crt;
};

static void on_change(void *arg, const char *crt_pem, const char *key_pem)
{
	struct served *s = arg;
	assert_non_null(strstr(key_pem, "PRIVATE KEY"));
	free(s->crt);
	s->crt = xstrdup(crt_pem);
	s->changes++;
}

static struct webhook_cert *replica(struct kube_client *cl, enum webhook_cert_source source,
                                    struct served *srv)
{
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {
	        .client = cl,
	        .source = source,
	        .ns = NS,
	        .secret = SECRET,
	        .service = "nvl72-operator",
	        .configuration = "nvl72-operator",
	        .extra_ips = ips,
	        // Due two seconds into a four-second life; a round is short,
	        // so the one served never counts as about to expire.
	        .valid_ms = 4000,
	        .renew_before_ms = 2000,
	        .resync_ms = 100,
	        .on_change = on_change,
	        .on_change_arg = srv,
	};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_OK);
	return c;
}

static void test_cert_rounds_renew_adopt_and_serve(void **state)
{
	(void)state;
	struct api a;
	struct kube_client *cl = api_start(&a);
	struct served sa = {0}, sb = {0};
	struct webhook_cert *ra = replica(cl, WEBHOOK_CERT_SELF, &sa);
	struct webhook_cert *rb = replica(cl, WEBHOOK_CERT_SELF, &sb);
	struct kube_status st;

	// Start: a fills the chart's empty Secret and both caBundles; b reuses.
	assert_int_equal(webhook_cert_ensure(ra, &st), NV_OK);
	assert_int_equal(webhook_cert_ensure(rb, &st), NV_OK);
	char *first = api_secret_field(&a, "tls.crt");
	char *first_ca = api_secret_field(&a, "ca.crt");
	assert_non_null(first);
	assert_string_equal(webhook_cert_pem(rb), first);
	assert_true(api_bundles_current(&a));
	assert_int_equal(a.secret_writes, 1);

	// b's rounds keep it until it is due, then renew it in the process.
	char *now_crt = NULL;
	int64_t until = time_mono_ms() + 10000;
	int rounds = 0;
	for (;;) {
		assert_int_equal(wh_cert_round(rb), NV_OK);
		rounds++;
		free(now_crt);
		now_crt = api_secret_field(&a, "tls.crt");
		if (strcmp(now_crt, first) != 0 || time_mono_ms() > until)
			break;
		time_sleep_ms(50);
		assert_int_equal(sb.changes, 0);
	}
	assert_string_not_equal(now_crt, first);
	assert_true(rounds > 1);
	assert_int_equal(a.secret_writes, 2);
	// The new CA first, the one of the pair still served after it; both
	// configurations trust both, and b still serves the old pair.
	char *bundle = api_secret_field(&a, "ca.crt");
	assert_int_equal(count(bundle, "BEGIN CERTIFICATE"), 2);
	assert_non_null(strstr(bundle, first_ca));
	assert_ptr_not_equal(strstr(bundle, first_ca), bundle);
	assert_true(api_bundles_current(&a));
	assert_int_equal(sb.changes, 0);
	// A round later the apiserver has had time to see the bundle.
	assert_int_equal(wh_cert_round(rb), NV_OK);
	assert_int_equal(sb.changes, 1);
	assert_string_equal(sb.crt, now_crt);

	// a adopts b's pair instead of making a third, and serves it a round
	// after it saw the bundle that trusts it.
	int patches = a.patches;
	assert_int_equal(wh_cert_round(ra), NV_OK);
	assert_int_equal(sa.changes, 0);
	assert_int_equal(wh_cert_round(ra), NV_OK);
	assert_int_equal(sa.changes, 1);
	assert_string_equal(sa.crt, now_crt);
	assert_int_equal(a.secret_writes, 2);
	assert_int_equal(a.patches, patches);
	// Steady: rounds change nothing and write nothing.
	assert_int_equal(wh_cert_round(ra), NV_OK);
	assert_int_equal(wh_cert_round(rb), NV_OK);
	assert_int_equal(sa.changes + sb.changes, 2);
	assert_int_equal(a.secret_writes, 2);
	assert_int_equal(a.patches, patches);

	webhook_cert_free(ra);
	webhook_cert_free(rb);
	free(first);
	free(first_ca);
	free(now_crt);
	free(bundle);
	free(sa.crt);
	free(sb.crt);
	api_stop(&a, cl);
}

/* A renewal whose write fails changes nothing: the pair held, the caBundle
 * and what is served stay, and the next round tries again. */
static void test_cert_round_unstored_pair_is_dropped(void **state)
{
	(void)state;
	struct api a;
	struct kube_client *cl = api_start(&a);
	struct served sv = {0};
	struct webhook_cert *r = replica(cl, WEBHOOK_CERT_SELF, &sv);
	struct kube_status st;
	assert_int_equal(webhook_cert_ensure(r, &st), NV_OK);
	char *first = xstrdup(webhook_cert_pem(r));
	int patches = a.patches;
	pthread_mutex_lock(&a.mu);
	a.fail_puts = 1000;
	pthread_mutex_unlock(&a.mu);
	// Rounds until one has tried to renew (the due pair), bounded.
	int64_t until = time_mono_ms() + 10000;
	enum nv_err rc = NV_OK;
	while ((rc = wh_cert_round(r)) == NV_OK && time_mono_ms() < until)
		time_sleep_ms(50);
	assert_int_equal(rc, NV_E_SERVER);
	assert_int_equal(wh_cert_round(r), NV_E_SERVER);
	assert_string_equal(webhook_cert_pem(r), first);
	assert_int_equal(a.patches, patches);
	assert_int_equal(sv.changes, 0);
	assert_int_equal(a.secret_writes, 1);
	// The API answers again: the next round stores a pair, and serves it
	// a round after the caBundle took its CA.
	pthread_mutex_lock(&a.mu);
	a.fail_puts = 0;
	pthread_mutex_unlock(&a.mu);
	assert_int_equal(wh_cert_round(r), NV_OK);
	assert_int_equal(a.secret_writes, 2);
	assert_int_equal(sv.changes, 0);
	assert_int_equal(wh_cert_round(r), NV_OK);
	assert_int_equal(sv.changes, 1);
	assert_string_not_equal(sv.crt, first);
	webhook_cert_free(r);
	free(first);
	free(sv.crt);
	api_stop(&a, cl);
}

/* Sets the Secret's data to another pair, as cert-manager would. */
static void api_secret_put_pair(struct api *a, struct webhook_cert *from)
{
	struct buf b;
	json_t *data = json_object();
	const char *names[] = {"tls.crt", "tls.key", "ca.crt"};
	const char *vals[] = {webhook_cert_pem(from), webhook_cert_key_pem(from),
	                      webhook_cert_ca_pem(from)};
	buf_init(&b, 1 << 20);
	for (int i = 0; i < 3; i++) {
		buf_reset(&b);
		assert_int_equal(b64_encode(vals[i], strlen(vals[i]), &b), NV_OK);
		json_object_set_new(data, names[i], json_string(buf_str(&b)));
	}
	buf_clear(&b);
	pthread_mutex_lock(&a->mu);
	json_object_set_new(a->secret, "data", data);
	bump(a, a->secret);
	pthread_mutex_unlock(&a->mu);
}

static void test_cert_rounds_from_secret_only_read(void **state)
{
	(void)state;
	struct api a;
	struct kube_client *cl = api_start(&a);
	struct served s = {0};
	struct webhook_cert *issuer = cert_for("nvl72-operator", 0);
	struct webhook_cert *again = cert_for("nvl72-operator", 0);
	struct webhook_cert *r = replica(cl, WEBHOOK_CERT_SECRET, &s);
	struct kube_status st;
	assert_int_equal(wh_cert_generate(issuer, NULL), NV_OK);
	assert_int_equal(wh_cert_generate(again, NULL), NV_OK);
	api_secret_put_pair(&a, issuer);

	assert_int_equal(webhook_cert_ensure(r, &st), NV_OK);
	assert_string_equal(webhook_cert_pem(r), webhook_cert_pem(issuer));
	assert_int_equal(wh_cert_round(r), NV_OK);
	assert_int_equal(s.changes, 0);
	// Renewed behind its back: served from the round that sees it, since
	// the caBundle is not the operator's to wait for.
	api_secret_put_pair(&a, again);
	assert_int_equal(wh_cert_round(r), NV_OK);
	assert_int_equal(s.changes, 1);
	assert_string_equal(s.crt, webhook_cert_pem(again));
	// Emptied: nothing usable, keep serving, write nothing.
	pthread_mutex_lock(&a.mu);
	json_object_del(a.secret, "data");
	pthread_mutex_unlock(&a.mu);
	assert_int_equal(wh_cert_round(r), NV_E_NOT_FOUND);
	assert_int_equal(s.changes, 1);
	assert_int_equal(a.secret_writes, 0);
	assert_int_equal(a.patches, 0);

	webhook_cert_free(r);
	webhook_cert_free(issuer);
	webhook_cert_free(again);
	free(s.crt);
	api_stop(&a, cl);
}

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cert_generate_is_usable),
	        cmocka_unit_test(test_cert_usable_refuses_mismatches),
	        cmocka_unit_test(test_cert_generate_short_lifetime_is_renewed),
	        cmocka_unit_test(test_cert_generate_keeps_previous_ca),
	        cmocka_unit_test(test_cert_new_and_check_edges),
	        cmocka_unit_test(test_cert_decide),
	        cmocka_unit_test(test_cert_usable_renew_threshold),
	        cmocka_unit_test(test_cert_serve_due),
	        cmocka_unit_test(test_cert_rounds_renew_adopt_and_serve),
	        cmocka_unit_test(test_cert_round_unstored_pair_is_dropped),
	        cmocka_unit_test(test_cert_rounds_from_secret_only_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
