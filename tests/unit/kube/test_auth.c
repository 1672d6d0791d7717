// SPDX-License-Identifier: Apache-2.0
// Unit tests for per-request credentials: the token file cache and its
// invalidation, client certificate files re-read after their period, and
// exec plugins run for real (a small script) with their expiry.
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

static char dir[64];

static void put(const char *name, const char *text, mode_t mode)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	chmod(p, mode);
}

static struct kube_config *parse(const char *user)
{
	char text[2048];
	struct kube_config *c = NULL;
	struct kube_status st;
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster: {server: "
	         "\"https://h:1\"}\nusers:\n- name: u\n  user:\n%scontexts:\n- name: t\n"
	         "  context: {cluster: c, user: u}\n",
	         user);
	if (kube_config_parse(text, strlen(text), dir, NULL, &c, &st) != NV_OK)
		fail_msg("%s", st.message);
	return c;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kauth.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	const char *names[] = {"tok", "c.pem", "k.pem", "plugin", "runs"};
	for (size_t i = 0; i < 5; i++) {
		snprintf(cmd, sizeof(cmd), "%s/%s", dir, names[i]);
		unlink(cmd);
	}
	rmdir(dir);
	return 0;
}

static void test_kube_auth_get_token_file_cache(void **state)
{
	(void)state;
	struct kube_config *c;
	struct kube_auth a;
	struct kube_cred cr;
	struct kube_status st;
	put("tok", "first\n", 0600);
	c = parse("    tokenFile: tok\n");
	kube_auth_init(&a, c, 100);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "first");
	kube_cred_clear(&cr);
	put("tok", "second", 0600);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "first"); /* cached */
	kube_cred_clear(&cr);
	kube_auth_invalidate(&a); /* what a 401 does */
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "second");
	kube_cred_clear(&cr);
	put("tok", "third", 0600);
	time_sleep_ms(120);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "third"); /* TTL passed */
	kube_cred_clear(&cr);
	char p[256];
	snprintf(p, sizeof(p), "%s/tok", dir);
	unlink(p);
	kube_auth_invalidate(&a);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "third"); /* unreadable: keep the old one */
	kube_cred_clear(&cr);
	kube_auth_clear(&a);
	kube_config_free(c);
}

static void test_kube_auth_get_cert_files_reread(void **state)
{
	(void)state;
	struct kube_config *c;
	struct kube_auth a;
	struct kube_cred cr;
	struct kube_status st;
	put("c.pem", "CERT-1", 0600);
	put("k.pem", "KEY-1", 0600);
	c = parse("    client-certificate: c.pem\n    client-key: k.pem\n");
	kube_auth_init(&a, c, 1000);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_memory_equal(cr.cert.data, "CERT-1", 6);
	assert_null(cr.token);
	kube_cred_clear(&cr);
	put("c.pem", "CERT-2", 0600);
	put("k.pem", "KEY-2", 0600);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_memory_equal(cr.cert.data, "CERT-1", 6);
	kube_cred_clear(&cr);
	a.cert_read_ms -= KUBE_CERT_REREAD_MS; /* five minutes later */
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_memory_equal(cr.cert.data, "CERT-2", 6);
	assert_memory_equal(cr.key.data, "KEY-2", 5);
	kube_cred_clear(&cr);
	kube_auth_clear(&a);
	kube_config_free(c);
}

static void test_kube_auth_get_exec_expiry(void **state)
{
	(void)state;
	struct kube_config *c;
	struct kube_auth a;
	struct kube_cred cr;
	struct kube_status st;
	char script[512], runs[128];
	snprintf(runs, sizeof(runs), "%s/runs", dir);
	snprintf(script, sizeof(script),
	         "#!/bin/sh\necho x >> %s\n"
	         "test \"$1\" = --flag || exit 4\n"
	         "printf "
	         "'{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
	         "\"status\":{\"token\":\"%%s\",\"expirationTimestamp\":\"%%s\"}}' \"$TOK\" "
	         "\"$EXP\"\n",
	         runs);
	put("plugin", script, 0700);
	c = parse("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "
	          "./plugin\n"
	          "      args: [--flag]\n      env:\n      - {name: TOK, value: tok-1}\n"
	          "      - {name: EXP, value: \"2099-01-01T00:00:00Z\"}\n");
	kube_auth_init(&a, c, 1000);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	assert_string_equal(cr.token, "tok-1");
	kube_cred_clear(&cr);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	kube_cred_clear(&cr);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(kube_read_file(runs, 4096, &data, &len), NV_OK);
	assert_int_equal(len, 2); /* ran once */
	free(data);
	kube_auth_invalidate(&a);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_OK);
	kube_cred_clear(&cr);
	assert_int_equal(kube_read_file(runs, 4096, &data, &len), NV_OK);
	assert_int_equal(len, 4); /* ran again after the 401 */
	free(data);
	kube_auth_clear(&a);
	kube_config_free(c);

	c = parse("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "
	          "./plugin\n");
	kube_auth_init(&a, c, 1000);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_E_AUTH);
	assert_non_null(strstr(st.message, "exited with status 4"));
	kube_auth_clear(&a);
	kube_config_free(c);
	c = parse("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
	          "      command: ./no-such-plugin\n");
	kube_auth_init(&a, c, 1000);
	assert_int_equal(kube_auth_get(&a, &cr, &st), NV_E_AUTH);
	kube_auth_clear(&a);
	kube_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_auth_get_token_file_cache),
	        cmocka_unit_test(test_kube_auth_get_cert_files_reread),
	        cmocka_unit_test(test_kube_auth_get_exec_expiry),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
