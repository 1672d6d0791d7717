// SPDX-License-Identifier: Apache-2.0
// Credentials for each request: a static token, a token file re-read after
// its cache time or a 401, client certificates, or an exec plugin whose
// ExecCredential is cached until it expires. Secrets are wiped when dropped.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kube_int.h"

#define EXEC_TIMEOUT_MS 60000
#define EXEC_EXPIRY_LEEWAY_MS 10000

extern char **environ;

void kube_cred_clear(struct kube_cred *c)
{
	secure_free_str(c->token);
	c->token = NULL;
	kube_blob_clear(&c->cert);
	kube_blob_clear(&c->key);
}

void kube_auth_init(struct kube_auth *a, const struct kube_config *cfg, int64_t ttl_ms)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->mu, NULL);
	a->cfg = cfg;
	a->file_ttl_ms = ttl_ms;
	kube_blob_copy(&a->file_cert, &cfg->cert);
	kube_blob_copy(&a->file_key, &cfg->key);
	a->cert_read_ms = time_mono_ms();
}

static void auth_drop_exec(struct kube_auth *a)
{
	secure_free_str(a->exec_token);
	a->exec_token = NULL;
	kube_blob_clear(&a->exec_cert);
	kube_blob_clear(&a->exec_key);
	a->exec_valid = false;
	a->exec_expiry_ms = 0;
}

void kube_auth_clear(struct kube_auth *a)
{
	secure_free_str(a->file_token);
	a->file_token = NULL;
	auth_drop_exec(a);
	kube_blob_clear(&a->file_cert);
	kube_blob_clear(&a->file_key);
	pthread_mutex_destroy(&a->mu);
}

void kube_auth_invalidate(struct kube_auth *a)
{
	pthread_mutex_lock(&a->mu);
	a->file_read_ms = INT64_MIN / 2;
	auth_drop_exec(a);
	pthread_mutex_unlock(&a->mu);
}

/* Re-reads the token file when the cached copy is older than the TTL. A
 * failed re-read keeps the old token (the kubelet may be mid-rotation). */
static enum nv_err auth_file_token(struct kube_auth *a, struct kube_status *st)
{
	char *data = NULL;
	size_t len = 0;
	int64_t now = time_mono_ms();
	enum nv_err rc;

	if (a->file_token != NULL && now - a->file_read_ms < a->file_ttl_ms)
		return NV_OK;
	rc = kube_read_file(a->cfg->token_file, KUBE_TOKEN_MAX, &data, &len);
	if (rc == NV_OK && *str_trim(data) == '\0')
		rc = NV_E_AUTH;
	if (rc != NV_OK) {
		secure_free_str(data);
		if (a->file_token != NULL) {
			log_warn("kube", "token file unreadable; keeping the cached token",
			         "path=%s err=%s", a->cfg->token_file, nv_err_name(rc));
			return NV_OK;
		}
		kube_status_set(st, 0, "", "token file %s: %s", a->cfg->token_file, nv_err_str(rc));
		return NV_E_AUTH;
	}
	secure_free_str(a->file_token);
	a->file_token = xstrdup(str_trim(data));
	secure_free_str(data);
	a->file_read_ms = now;
	return NV_OK;
}

/* Client certificate files are re-read every 5 minutes (client-go's
 * rotation period); a failed read keeps the pair we have. */
static void auth_cert_files(struct kube_auth *a)
{
	struct kube_blob cert = {0}, key = {0};
	char *data = NULL;
	size_t len = 0;

	if (a->cfg->cert_file == NULL || time_mono_ms() - a->cert_read_ms < KUBE_CERT_REREAD_MS)
		return;
	a->cert_read_ms = time_mono_ms();
	if (kube_read_file(a->cfg->cert_file, KUBE_PEM_MAX, &data, &len) != NV_OK)
		goto fail;
	cert = (struct kube_blob){(unsigned char *)data, len};
	if (kube_read_file(a->cfg->key_file, KUBE_PEM_MAX, &data, &len) != NV_OK)
		goto fail;
	key = (struct kube_blob){(unsigned char *)data, len};
	kube_blob_clear(&a->file_cert);
	kube_blob_clear(&a->file_key);
	a->file_cert = cert;
	a->file_key = key;
	return;
fail:
	kube_blob_clear(&cert);
	log_warn("kube", "client certificate files unreadable; keeping the loaded pair", "cert=%s",
	         a->cfg->cert_file);
}

static enum nv_err auth_exec(struct kube_auth *a, struct kube_status *st)
{
	struct kube_cred cred = {0};
	int64_t expiry = 0;
	enum nv_err rc;

	if (a->exec_valid &&
	    (a->exec_expiry_ms == 0 || time_wall_ms() < a->exec_expiry_ms - EXEC_EXPIRY_LEEWAY_MS))
		return NV_OK;
	auth_drop_exec(a);
	rc = kube_exec_run(a->cfg->exec, a->cfg->server, &cred, &expiry, st);
	if (rc != NV_OK)
		return rc;
	a->exec_token = cred.token;
	a->exec_cert = cred.cert;
	a->exec_key = cred.key;
	a->exec_expiry_ms = expiry;
	a->exec_valid = true;
	log_debug("kube", "exec credential refreshed", "expiry_ms=%lld", (long long)expiry);
	return NV_OK;
}

enum nv_err kube_auth_get(struct kube_auth *a, struct kube_cred *cred, struct kube_status *st)
{
	const struct kube_config *cfg = a->cfg;
	enum nv_err rc = NV_OK;

	memset(cred, 0, sizeof(*cred));
	pthread_mutex_lock(&a->mu);
	if (cfg->exec != NULL) {
		rc = auth_exec(a, st);
		if (rc != NV_OK)
			goto out;
		if (a->exec_token != NULL)
			cred->token = xstrdup(a->exec_token);
		kube_blob_copy(&cred->cert, &a->exec_cert);
		kube_blob_copy(&cred->key, &a->exec_key);
	} else if (cfg->token_file != NULL && cfg->token == NULL) {
		rc = auth_file_token(a, st);
		if (rc != NV_OK)
			goto out;
		cred->token = xstrdup(a->file_token);
	} else if (cfg->token != NULL) {
		cred->token = xstrdup(cfg->token);
	}
	if (cred->cert.data == NULL && a->file_cert.data != NULL) {
		auth_cert_files(a);
		kube_blob_copy(&cred->cert, &a->file_cert);
		kube_blob_copy(&cred->key, &a->file_key);
	}
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* ---- exec plugins ---- */

enum nv_err kube_exec_parse(const char *out, size_t len, const char *want_api,
                            struct kube_cred *cred, int64_t *expiry_ms, struct kube_status *st)
{
	struct jx_err e;
	json_t *doc = NULL;
	const char *api = NULL, *tok = NULL, *cert = NULL, *key = NULL, *exp = NULL;
	struct jx_limits lim = {.max_bytes = KUBE_EXEC_OUT_MAX, .max_depth = 16};
	enum nv_err rc = NV_E_AUTH;

	memset(cred, 0, sizeof(*cred));
	*expiry_ms = 0;
	if (jx_loadb(out, len, &lim, &doc, &e) != NV_OK) {
		kube_status_set(st, 0, "", "exec plugin output: %s", e.msg);
		goto out;
	}
	if (jx_get_str(doc, "apiVersion", &api, &e) != NV_OK || strcmp(api, want_api) != 0) {
		kube_status_set(st, 0, "", "exec plugin output: apiVersion: want %s", want_api);
		goto out;
	}
	if (strcmp(jx_str_or(doc, "kind", ""), "ExecCredential") != 0) {
		kube_status_set(st, 0, "", "exec plugin output: kind: want ExecCredential");
		goto out;
	}
	jx_get_str(doc, "status.token", &tok, &e);
	jx_get_str(doc, "status.clientCertificateData", &cert, &e);
	jx_get_str(doc, "status.clientKeyData", &key, &e);
	if ((tok == NULL || *tok == '\0') && (cert == NULL || key == NULL)) {
		kube_status_set(st, 0, "",
		                "exec plugin output: status: neither token nor "
		                "clientCertificateData+clientKeyData");
		goto out;
	}
	if (jx_get_str(doc, "status.expirationTimestamp", &exp, &e) == NV_OK &&
	    time_parse_rfc3339(exp, expiry_ms) != NV_OK) {
		kube_status_set(st, 0, "",
		                "exec plugin output: status.expirationTimestamp: "
		                "not RFC 3339");
		goto out;
	}
	if (tok != NULL && *tok != '\0')
		cred->token = xstrdup(tok);
	if (cert != NULL && key != NULL) {
		struct kube_blob c = {(unsigned char *)(uintptr_t)cert, strlen(cert)};
		struct kube_blob k = {(unsigned char *)(uintptr_t)key, strlen(key)};
		kube_blob_copy(&cred->cert, &c);
		kube_blob_copy(&cred->key, &k);
	}
	rc = NV_OK;
out:
	jx_wipe(doc); /* the token and key strings; jansson frees without wiping */
	json_decref(doc);
	return rc;
}

static char **exec_envp(const struct kube_exec *x, const char *server)
{
	size_t n = 0, m = 0, k = 0;
	char **envp;
	json_t *info = json_pack("{s:s,s:s,s:{s:b}}", "apiVersion", x->api_version, "kind",
	                         "ExecCredential", "spec", "interactive", 0);
	char *s;

	if (x->provide_cluster_info)
		jx_set_str(info, "spec.cluster.server", server);
	s = jx_dumps(info);
	json_decref(info);
	while (environ[n] != NULL)
		n++;
	while (x->env != NULL && x->env[m] != NULL)
		m++;
	envp = xcalloc(n + m + 2, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		if (!str_has_prefix(environ[i], "KUBERNETES_EXEC_INFO="))
			envp[k++] = xstrdup(environ[i]);
	for (size_t i = 0; i < m; i++)
		envp[k++] = xstrdup(x->env[i]);
	envp[k++] = xasprintf("KUBERNETES_EXEC_INFO=%s", s);
	free(s);
	return envp;
}

static void exec_envp_free(char **envp)
{
	for (char **p = envp; *p != NULL; p++)
		secure_free_str(*p);
	free(envp);
}

/* Reads the child's stdout into b until EOF or the deadline. */
static enum nv_err exec_collect(int fd, struct buf *b)
{
	int64_t deadline = time_mono_ms() + EXEC_TIMEOUT_MS;
	char chunk[4096];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - time_mono_ms();
		if (left <= 0)
			return NV_E_TIMEOUT;
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? NV_E_TIMEOUT : NV_E_IO;
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? NV_OK : NV_E_IO;
		if (buf_append(b, chunk, (size_t)n) != NV_OK)
			return NV_E_TOO_LARGE;
	}
}

static enum nv_err exec_spawn(const struct kube_exec *x, const char *server, pid_t *pid, int *rfd)
{
	posix_spawn_file_actions_t fa;
	char **envp = exec_envp(x, server);
	char *cmd = strchr(x->command, '/') ? kube_resolve_path(x->dir, x->command)
	                                    : xstrdup(x->command);
	int p[2] = {-1, -1}, r;

	if (pipe2(p, O_CLOEXEC) != 0) {
		exec_envp_free(envp);
		free(cmd);
		return NV_E_IO;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	r = strchr(cmd, '/') ? posix_spawn(pid, cmd, &fa, NULL, x->argv, envp)
	                     : posix_spawnp(pid, cmd, &fa, NULL, x->argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	exec_envp_free(envp);
	free(cmd);
	if (r != 0) {
		close(p[0]);
		return NV_E_NOT_FOUND;
	}
	*rfd = p[0];
	return NV_OK;
}

enum nv_err kube_exec_run(const struct kube_exec *x, const char *server, struct kube_cred *cred,
                          int64_t *expiry_ms, struct kube_status *st)
{
	struct buf b;
	pid_t pid = -1;
	int fd = -1, status = 0;
	enum nv_err rc;

	if (strcmp(x->interactive, "Always") == 0) {
		kube_status_set(st, 0, "",
		                "exec plugin %s: interactiveMode Always needs a "
		                "terminal, which a controller never has",
		                x->command);
		return NV_E_AUTH;
	}
	rc = exec_spawn(x, server, &pid, &fd);
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "exec plugin %s: cannot start: %s", x->command,
		                nv_err_str(rc));
		return NV_E_AUTH;
	}
	buf_init_secret(&b, KUBE_EXEC_OUT_MAX);
	rc = exec_collect(fd, &b);
	close(fd);
	if (rc != NV_OK)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc == NV_OK && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		kube_status_set(st, 0, "", "exec plugin %s: exited with status %d", x->command,
		                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		rc = NV_E_AUTH;
	} else if (rc != NV_OK) {
		kube_status_set(st, 0, "", "exec plugin %s: %s", x->command, nv_err_str(rc));
		rc = NV_E_AUTH;
	} else {
		rc = kube_exec_parse(buf_str(&b), b.len, x->api_version, cred, expiry_ms, st);
	}
	buf_clear(&b);
	return rc;
}
