// SPDX-License-Identifier: Apache-2.0
// Integration suite for configuration and credentials against a real
// kube-apiserver: each kubeconfig variant must authenticate for real (the
// identity is read back with a SelfSubjectReview), and bad ones must fail.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"

static int failures;
static char cdir[512], server[128], tmpdir[64];

static void check(bool cond, const char *name, const char *detail)
{
	if (cond) {
		printf("ok - %s\n", name);
	} else {
		failures++;
		printf("not ok - %s (%s)\n", name, detail ? detail : "");
	}
	fflush(stdout);
}

static char *slurp(const char *rel)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", cdir, rel);
	FILE *f = fopen(path, "r");
	static char bufs[4][4096];
	static int k;
	char *b = bufs[k++ % 4];
	size_t n = f ? fread(b, 1, 4095, f) : 0;
	b[n] = '\0';
	if (f)
		fclose(f);
	return str_trim(b);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	fputs(text, f);
	fclose(f);
	chmod(tmp, mode);
	rename(tmp, path);
}

/* Asks the apiserver who we are. */
static enum nv_err whoami(struct kube_client *c, char *user, size_t usz, struct kube_status *st)
{
	json_t *body = json_pack("{s:s,s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
	                         "SelfSubjectReview"),
	       *out = NULL;
	struct kube_raw_req r = {.method = "POST",
	                         .path = "/apis/authentication.k8s.io/v1/selfsubjectreviews",
	                         .content_type = "application/json",
	                         .body = body};
	enum nv_err rc = kube_request(c, &r, &out, st);
	if (rc == NV_OK)
		snprintf(user, usz, "%s", jx_str_or(out, "status.userInfo.username", "?"));
	json_decref(out);
	json_decref(body);
	return rc;
}

static struct kube_client *client_with(const char *cluster_extra, const char *user_yaml,
                                       int64_t ttl_ms, struct kube_status *st)
{
	char text[16384];
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_client_opts o = {.token_file_ttl_ms = ttl_ms};

	snprintf(text, sizeof(text),
	         "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  "
	         "cluster:\n"
	         "    server: %s\n    certificate-authority: %s/pki/ca.crt\n%susers:\n- name: u\n  "
	         "user:\n%s"
	         "contexts:\n- name: t\n  context: {cluster: c, user: u}\n",
	         server, cdir, cluster_extra, user_yaml);
	if (kube_config_parse(text, strlen(text), tmpdir, NULL, &cfg, st) != NV_OK)
		return NULL;
	if (kube_client_new(cfg, &o, &c, st) != NV_OK)
		return NULL;
	return c;
}

static struct kube_client *client_from(const char *user_yaml, int64_t ttl_ms,
                                       struct kube_status *st)
{
	return client_with("", user_yaml, ttl_ms, st);
}

static void expect_user(struct kube_client *c, const char *want, const char *name)
{
	struct kube_status st = {0};
	char user[128] = "";
	enum nv_err rc = c ? whoami(c, user, sizeof(user), &st) : NV_E_CONFIG;
	char detail[800];
	snprintf(detail, sizeof(detail), "err=%s user=%s msg=%s", nv_err_name(rc), user,
	         st.message);
	check(rc == NV_OK && !strcmp(user, want), name, detail);
}

static void b64(const char *in, char *out, size_t outsz)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0;
	for (size_t i = 0; i < n && o + 5 < outsz; i += 3) {
		unsigned v = (unsigned)(unsigned char)in[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned)(unsigned char)in[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

static void test_client_cert(void)
{
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_status st;
	enum nv_err rc = kube_config_load(NULL, &cfg, &st);
	if (rc == NV_OK)
		rc = kube_client_new(cfg, NULL, &c, &st);
	check(rc == NV_OK, "load the client-certificate kubeconfig from KUBECONFIG", st.message);
	expect_user(c, "admin", "client certificate and key files authenticate as admin");
	kube_client_free(c);

	char yaml[12000], crt[4096], key[4096];
	b64(slurp("pki/admin.crt"), crt, sizeof(crt));
	b64(slurp("pki/admin.key"), key, sizeof(key));
	snprintf(yaml, sizeof(yaml), "    client-certificate-data: %s\n    client-key-data: %s\n",
	         crt, key);
	c = client_from(yaml, 0, &st);
	expect_user(c, "admin", "inline client certificate and key data authenticate as admin");
	kube_client_free(c);
}

static void test_bearer_token(void)
{
	struct kube_status st;
	char yaml[512];
	snprintf(yaml, sizeof(yaml), "    token: %s\n", slurp("pki/admin.token"));
	struct kube_client *c = client_from(yaml, 0, &st);
	expect_user(c, "admin-token", "bearer token authenticates");
	kube_client_free(c);
	c = client_from("    token: not-a-valid-token\n", 0, &st);
	char user[64];
	enum nv_err rc = whoami(c, user, sizeof(user), &st);
	check(rc == NV_E_UNAUTHORIZED && st.http_code == 401, "a wrong token is unauthorized",
	      st.message);
	kube_client_free(c);
}

static void test_token_file_rotation(void)
{
	struct kube_status st;
	char path[128], yaml[300];
	snprintf(path, sizeof(path), "%s/token", tmpdir);
	write_file(path, slurp("pki/admin.token"), 0600);
	snprintf(yaml, sizeof(yaml), "    tokenFile: token\n");
	struct kube_client *c = client_from(yaml, 300, &st);
	expect_user(c, "admin-token", "token file (relative to the kubeconfig) authenticates");
	write_file(path, slurp("pki/viewer.token"), 0600);
	expect_user(c, "admin-token",
	            "a rewritten token file is not re-read within its cache time");
	time_sleep_ms(400);
	expect_user(c, "viewer",
	            "a token file rewritten mid-run is picked up after its cache time");
	kube_client_free(c);

	/* A 401 drops the cached token at once, however fresh. */
	write_file(path, "stale-token", 0600);
	c = client_from(yaml, 600000, &st);
	char user[64];
	enum nv_err rc = whoami(c, user, sizeof(user), &st);
	check(rc == NV_E_UNAUTHORIZED, "a bad token in the file is unauthorized", st.message);
	write_file(path, slurp("pki/admin.token"), 0600);
	rc = whoami(c, user, sizeof(user), &st);
	check(rc == NV_OK && !strcmp(user, "admin-token") && st.attempts == 2,
	      "after a 401 the token file is re-read and the request retried once", st.message);
	kube_client_free(c);
}

static int count_runs(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, ch;
	while (f && (ch = fgetc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

static void test_exec_plugin(void)
{
	struct kube_status st;
	char script[256], runs[256], text[2048], yaml[800];
	snprintf(script, sizeof(script), "%s/plugin.sh", tmpdir);
	snprintf(runs, sizeof(runs), "%s/runs", tmpdir);
	/* Prints a token valid for $TTL seconds and counts its runs. */
	snprintf(
	        text, sizeof(text),
	        "#!/bin/sh\n"
	        "echo run >> %s\n"
	        "case \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 3;; esac\n"
	        "exp=$(date -u -d \"+$TTL seconds\" +%%Y-%%m-%%dT%%H:%%M:%%SZ)\n"
	        "printf "
	        "'{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
	        "\"status\":{\"token\":\"%%s\",\"expirationTimestamp\":\"%%s\"}}' \"$TOKEN\" "
	        "\"$exp\"\n",
	        runs);
	write_file(script, text, 0700);
	snprintf(yaml, sizeof(yaml),
	         "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
	         "      command: ./plugin.sh\n      interactiveMode: Never\n      env:\n"
	         "      - {name: TOKEN, value: \"%s\"}\n      - {name: TTL, value: \"12\"}\n",
	         slurp("pki/admin.token"));
	struct kube_client *c = client_from(yaml, 0, &st);
	expect_user(c, "admin-token", "exec plugin credential authenticates");
	expect_user(c, "admin-token", "exec plugin credential is reused while valid");
	check(count_runs(runs) == 1, "the plugin ran once for two requests", NULL);
	time_sleep_ms(2600);
	expect_user(c, "admin-token", "exec plugin credential is refreshed near its expiry");
	check(count_runs(runs) == 2, "the plugin ran again after the credential expired", NULL);
	kube_client_free(c);

	c = client_from("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
	                "      command: /bin/false\n",
	                0, &st);
	char user[64];
	enum nv_err rc = whoami(c, user, sizeof(user), &st);
	check(rc == NV_E_AUTH && strstr(st.message, "exited with status 1"),
	      "a failing exec plugin is an auth error naming the plugin", st.message);
	kube_client_free(c);
}

static void test_bad_configs(void)
{
	struct kube_status st;
	struct kube_client *c = client_from("    token: [1, 2]\n", 0, &st);
	check(c == NULL && strstr(st.message, "users[0].user.token: expected a string"),
	      "a token of the wrong type is rejected naming the field", st.message);
	c = client_from("    tokenFile: /nonexistent/token\n", 0, &st);
	char user[64];
	enum nv_err rc = c ? whoami(c, user, sizeof(user), &st) : NV_E_CONFIG;
	check(rc == NV_E_AUTH && strstr(st.message, "/nonexistent/token"),
	      "a missing token file fails naming the file", st.message);
	kube_client_free(c);

	/* No CA and no insecure flag: the self-signed server must be refused. */
	char text[1024];
	struct kube_config *cfg = NULL;
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster: "
	         "{server: \"%s\"}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: t\n"
	         "  context: {cluster: c, user: u}\n",
	         server);
	rc = kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st);
	if (rc == NV_OK)
		rc = kube_client_new(cfg, NULL, &c, &st);
	rc = rc == NV_OK ? whoami(c, user, sizeof(user), &st) : rc;
	check(rc == NV_E_TLS, "TLS is verified unless insecure-skip-tls-verify is set", st.message);
	kube_client_free(c);
}

static void test_tls_server_name(void)
{
	struct kube_status st;
	char yaml[512];
	snprintf(yaml, sizeof(yaml), "    token: %s\n", slurp("pki/admin.token"));
	struct kube_client *c =
	        client_with("    tls-server-name: kubernetes.default.svc\n", yaml, 0, &st);
	expect_user(c, "admin-token", "tls-server-name verifies the certificate under that name");
	kube_client_free(c);
	c = client_with("    tls-server-name: not-in-the-cert.example\n", yaml, 0, &st);
	char user[64];
	enum nv_err rc = c ? whoami(c, user, sizeof(user), &st) : NV_E_CONFIG;
	check(rc == NV_E_TLS, "a tls-server-name the certificate does not carry is refused",
	      st.message);
	kube_client_free(c);
}

int main(void)
{
	const char *d = getenv("NVL72_CLUSTER_DIR");
	if (d == NULL) {
		printf("not ok - NVL72_CLUSTER_DIR is not set\n");
		return 1;
	}
	snprintf(cdir, sizeof(cdir), "%s", d);
	snprintf(server, sizeof(server), "https://127.0.0.1:%s", slurp("apiserver-port"));
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kube-auth.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	test_client_cert();
	test_bearer_token();
	test_token_file_rotation();
	test_exec_plugin();
	test_bad_configs();
	test_tls_server_name();
	/* The scratch directory held tokens: remove it. */
	static const char *const files[] = {"token", "token.tmp", "plugin.sh", "runs"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[128];
		snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
		unlink(p);
	}
	rmdir(tmpdir);
	printf("%s - auth suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
