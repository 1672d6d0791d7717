// SPDX-License-Identifier: Apache-2.0
// Unit tests for kubeconfig parsing: the YAML subset, field resolution,
// merging order, in-cluster configuration, and hostile inputs whose errors
// must name the offending field.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

static const char *good =
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
        "    certificate-authority-data: aGVsbG8=\n    insecure-skip-tls-verify: false\n"
        "users:\n- name: u1\n  user:\n    token: \"s3cret\"\n"
        "- name: u2\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
        "      command: ./plugin\n      args: [\"--x\", \"y\"]\n      env:\n      - {name: A, "
        "value: b}\n"
        "contexts:\n- name: a\n  context: {cluster: c1, user: u1, namespace: ops}\n"
        "- name: b\n  context: {cluster: c1, user: u2}\n";

static struct kube_config *parse_ok(const char *text, const char *ctx)
{
	struct kube_config *c = NULL;
	struct kube_status st;
	enum nv_err rc = kube_config_parse(text, strlen(text), "/etc/kc", ctx, &c, &st);
	if (rc != NV_OK)
		fail_msg("parse failed: %s", st.message);
	return c;
}

static void expect_err(const char *text, const char *ctx, enum nv_err want, const char *needle)
{
	struct kube_config *c = NULL;
	struct kube_status st;
	enum nv_err rc = kube_config_parse(text, strlen(text), "/etc/kc", ctx, &c, &st);
	if (rc != want || strstr(st.message, needle) == NULL)
		fail_msg("want %s containing \"%s\", got %s: %s", nv_err_name(want), needle,
		         nv_err_name(rc), st.message);
	assert_null(c);
}

static void test_kube_config_parse_token_context(void **state)
{
	(void)state;
	struct kube_config *c = parse_ok(good, NULL);
	assert_string_equal(c->server, "https://127.0.0.1:6443");
	assert_string_equal(c->token, "s3cret");
	assert_int_equal(c->ca.len, 5);
	assert_memory_equal(c->ca.data, "hello", 5);
	assert_false(c->insecure);
	assert_string_equal(kube_config_namespace(c), "ops");
	kube_config_free(c);
}

static void test_kube_config_parse_exec_context(void **state)
{
	(void)state;
	struct kube_config *c = parse_ok(good, "b");
	assert_non_null(c->exec);
	assert_string_equal(c->exec->argv[0], "./plugin");
	assert_string_equal(c->exec->argv[2], "y");
	assert_null(c->exec->argv[3]);
	assert_string_equal(c->exec->env[0], "A=b");
	assert_string_equal(c->exec->dir, "/etc/kc");
	assert_string_equal(kube_config_namespace(c), "default");
	kube_config_free(c);
}

static void test_kube_config_parse_hostile_types(void **state)
{
	(void)state;
	expect_err("clusters: 5\n", NULL, NV_E_CONFIG, "clusters: expected a list, got an integer");
	expect_err("current-context: a\nclusters:\n- name: c\n  cluster: {server: [1]}\n"
	           "users:\n- name: u\n  user: {}\ncontexts:\n- name: a\n  context: {cluster: c, "
	           "user: u}\n",
	           NULL, NV_E_CONFIG,
	           "clusters[0].cluster.server: expected a string, got an array");
	expect_err("users:\n- name: u\n  user: {token: 12}\n"
	           "clusters:\n- name: c\n  cluster: {server: \"https://x\"}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
	           "a", NV_E_CONFIG, "users[0].user.token: expected a string, got an integer");
	expect_err("users:\n- user: {}\n", "a", NV_E_CONFIG, "users[0].name: missing");
	expect_err("clusters:\n- name: c\n  cluster: {server: \"https://x\", "
	           "insecure-skip-tls-verify: maybe}\nusers:\n- name: u\n  user: {}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
	           "a", NV_E_CONFIG, "cluster.insecure-skip-tls-verify: expected a boolean");
}

static void test_kube_config_parse_missing_refs(void **state)
{
	(void)state;
	expect_err(good, "nope", NV_E_CONFIG, "no context named \"nope\"");
	expect_err(
	        "current-context: a\ncontexts:\n- name: a\n  context: {cluster: gone, user: u}\n",
	        NULL, NV_E_CONFIG, "contexts[0].context.cluster: no cluster named \"gone\"");
	expect_err("clusters: []\n", NULL, NV_E_CONFIG, "current-context: not set");
	expect_err("current-context: a\nclusters:\n- name: c\n  cluster: {server: \"https://x\"}\n"
	           "users:\n- name: u\n  user: {client-certificate-data: aGk=}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
	           NULL, NV_E_CONFIG, "users[0].user.client-key: missing");
	expect_err("current-context: a\nclusters:\n- name: c\n  cluster: {server: \"https://x\", "
	           "certificate-authority: /nonexistent/ca.crt}\nusers:\n- name: u\n  user: {}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
	           NULL, NV_E_CONFIG,
	           "cluster.certificate-authority: cannot read /nonexistent/ca.crt");
	expect_err("current-context: a\nclusters:\n- name: c\n  cluster: {server: \"ftp://x\"}\n"
	           "users:\n- name: u\n  user: {}\ncontexts:\n- name: a\n  context: {cluster: c, "
	           "user: u}\n",
	           NULL, NV_E_CONFIG, "cluster.server: must be an http(s) URL");
	expect_err("current-context: a\nclusters:\n- name: c\n  cluster: {server: \"https://x\"}\n"
	           "users:\n- name: u\n  user: {auth-provider: {name: gcp}}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n",
	           NULL, NV_E_UNSUPPORTED, "users[0].user.auth-provider: not supported");
}

static void test_kube_config_parse_huge_and_hostile_yaml(void **state)
{
	(void)state;
	size_t n = 300 << 10;
	char *big = malloc(n + 64);
	int k = snprintf(big, 64, "users:\n- name: u\n  user:\n    token: ");
	memset(big + k, 'A', n);
	big[k + (int)n] = '\0';
	char *bigdup = strdup(big);
	free(big);
	expect_err(bigdup, "a", NV_E_CONFIG, "users[0].user.token: value of");
	free(bigdup);
	expect_err("a: &x [1]\nb: *x\n", NULL, NV_E_CONFIG, "b: YAML aliases are not allowed");
	char deep[200];
	memset(deep, '[', 100);
	deep[100] = '\0';
	expect_err(deep, NULL, NV_E_CONFIG, "nested deeper than");
	expect_err("a: [1, 2\n", NULL, NV_E_CONFIG, "YAML syntax error");
	expect_err("- 1\n- 2\n", NULL, NV_E_CONFIG, "expected a Config object");
	char *huge = calloc(1, (2 << 20) + 1);
	memset(huge, ' ', 2 << 20);
	struct kube_config *c = NULL;
	struct kube_status st;
	assert_int_equal(kube_config_parse(huge, 2 << 20, NULL, NULL, &c, &st), NV_E_TOO_LARGE);
	free(huge);
}

static void test_kube_config_load_merges_first_wins(void **state)
{
	(void)state;
	char dir[] = "/tmp/kctest.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char p1[128], p2[128], env[300], tok[128];
	snprintf(p1, sizeof(p1), "%s/one", dir);
	snprintf(p2, sizeof(p2), "%s/two", dir);
	snprintf(tok, sizeof(tok), "%s/tok", dir);
	FILE *f = fopen(p1, "w");
	fprintf(f, "users:\n- name: u\n  user: {tokenFile: tok}\n");
	fclose(f);
	f = fopen(p2, "w");
	fprintf(f, "current-context: a\nusers:\n- name: u\n  user: {token: later}\n"
	           "clusters:\n- name: c\n  cluster: {server: \"https://two\"}\n"
	           "contexts:\n- name: a\n  context: {cluster: c, user: u}\n");
	fclose(f);
	snprintf(env, sizeof(env), "%s:%s/missing:%s", p1, dir, p2);
	setenv("KUBECONFIG", env, 1);
	struct kube_config *c = NULL;
	struct kube_status st;
	assert_int_equal(kube_config_load(NULL, &c, &st), NV_OK);
	assert_string_equal(c->server, "https://two");
	assert_null(c->token);
	assert_string_equal(c->token_file, tok);
	kube_config_free(c);
	setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b", 1);
	assert_int_equal(kube_config_load(NULL, &c, &st), NV_E_CONFIG);
	assert_non_null(strstr(st.message, "KUBECONFIG"));
	unsetenv("KUBECONFIG");
	unlink(p1);
	unlink(p2);
	rmdir(dir);
}

static void test_kube_config_in_cluster_at(void **state)
{
	(void)state;
	char dir[] = "/tmp/kcsa.XXXXXX";
	char p[128];
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/ca.crt", dir);
	FILE *f = fopen(p, "w");
	fputs("-----BEGIN CERTIFICATE-----\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/namespace", dir);
	f = fopen(p, "w");
	fputs("nvl72-system\n", f);
	fclose(f);
	struct kube_config *c = NULL;
	struct kube_status st;
	assert_int_equal(kube_config_in_cluster_at(dir, "fd00::1", "443", &c, &st), NV_OK);
	assert_string_equal(c->server, "https://[fd00::1]:443");
	assert_string_equal(kube_config_namespace(c), "nvl72-system");
	assert_non_null(strstr(c->token_file, "/token"));
	kube_config_free(c);
	assert_int_equal(kube_config_in_cluster_at(dir, "10.0.0.1", NULL, &c, &st), NV_E_CONFIG);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ca.crt", dir);
	unlink(p);
	rmdir(dir);
}

static void test_kube_b64_decode_variants(void **state)
{
	(void)state;
	struct kube_blob b = {0};
	assert_int_equal(kube_b64_decode("aGVs\nbG8", &b), NV_OK);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "hello", 5);
	kube_blob_clear(&b);
	assert_int_equal(kube_b64_decode("a$b", &b), NV_E_PARSE);
}

static void test_kube_exec_parse_credential(void **state)
{
	(void)state;
	struct kube_cred cred;
	struct kube_status st;
	int64_t exp = 0;
	const char *ok = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
	                 "\"ExecCredential\",\"status\":{\"token\":\"t0k\",\"expirationTimestamp\":"
	                 "\"2030-01-01T00:00:00Z\"}}";
	assert_int_equal(kube_exec_parse(ok, strlen(ok), "client.authentication.k8s.io/v1", &cred,
	                                 &exp, &st),
	                 NV_OK);
	assert_string_equal(cred.token, "t0k");
	assert_true(exp > 0);
	kube_cred_clear(&cred);
	assert_int_equal(kube_exec_parse(ok, strlen(ok), "client.authentication.k8s.io/v1beta1",
	                                 &cred, &exp, &st),
	                 NV_E_AUTH);
	assert_non_null(strstr(st.message, "apiVersion"));
	const char *none = "{\"apiVersion\":\"v\",\"kind\":\"ExecCredential\",\"status\":{}}";
	assert_int_equal(kube_exec_parse(none, strlen(none), "v", &cred, &exp, &st), NV_E_AUTH);
	assert_int_equal(kube_exec_parse("junk", 4, "v", &cred, &exp, &st), NV_E_AUTH);
}

/* Turning TLS verification off is allowed but never silent: one warning
 * that names the kubeconfig's cluster (and never the token). */
static void test_kube_config_parse_insecure_warns_naming_cluster(void **state)
{
	(void)state;
	static const char *insecure =
	        "current-context: a\n"
	        "clusters:\n- name: lab-east\n  cluster:\n    server: https://10.0.0.1:6443\n"
	        "    insecure-skip-tls-verify: true\n"
	        "users:\n- name: u\n  user: {token: \"t0ken-value\"}\n"
	        "contexts:\n- name: a\n  context: {cluster: lab-east, user: u}\n";
	char *text = NULL;
	size_t len = 0;
	FILE *logf = open_memstream(&text, &len);
	log_set_level(LOG_LVL_INFO);
	log_set_stream(logf);
	struct kube_config *c = parse_ok(insecure, NULL);
	assert_true(c->insecure);
	kube_config_free(c);
	c = parse_ok(good, NULL);
	kube_config_free(c);
	log_set_stream(stderr);
	fclose(logf);
	assert_non_null(strstr(text, "insecure-skip-tls-verify"));
	assert_non_null(strstr(text, "cluster=\"lab-east\""));
	assert_non_null(strstr(text, "server=https://10.0.0.1:6443"));
	assert_non_null(strstr(text, "clusters[0]"));
	assert_null(strstr(text, "t0ken-value"));
	// Only the insecure configuration warns: the good one names c1 nowhere.
	assert_null(strstr(text, "cluster=\"c1\""));
	const char *nl = strchr(text, '\n');
	assert_non_null(nl);
	assert_int_equal(nl[1], '\0');
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_config_parse_token_context),
	        cmocka_unit_test(test_kube_config_parse_exec_context),
	        cmocka_unit_test(test_kube_config_parse_hostile_types),
	        cmocka_unit_test(test_kube_config_parse_missing_refs),
	        cmocka_unit_test(test_kube_config_parse_huge_and_hostile_yaml),
	        cmocka_unit_test(test_kube_config_load_merges_first_wins),
	        cmocka_unit_test(test_kube_config_in_cluster_at),
	        cmocka_unit_test(test_kube_b64_decode_variants),
	        cmocka_unit_test(test_kube_exec_parse_credential),
	        cmocka_unit_test(test_kube_config_parse_insecure_warns_naming_cluster),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
