// SPDX-License-Identifier: Apache-2.0
// Client configuration: kubeconfig files (merged first-wins, paths relative
// to the file naming them) and the in-cluster service account. Secrets are
// read into memory only; errors name the file and the offending field.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube_int.h"

void kube_blob_clear(struct kube_blob *b)
{
	if (b->data != NULL) {
		secure_wipe(b->data, b->len);
		free(b->data);
	}
	b->data = NULL;
	b->len = 0;
}

void kube_blob_copy(struct kube_blob *dst, const struct kube_blob *src)
{
	dst->data = NULL;
	dst->len = 0;
	if (src->data == NULL)
		return;
	dst->data = xmalloc(src->len + 1);
	memcpy(dst->data, src->data, src->len);
	dst->data[src->len] = 0;
	dst->len = src->len;
}

enum nv_err kube_read_file(const char *path, size_t max, char **out, size_t *len)
{
	struct buf b;
	char chunk[4096];
	enum nv_err rc = NV_OK;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? NV_E_NOT_FOUND : NV_E_IO;
	buf_init_secret(&b, max); // token files, keys, kubeconfigs with secrets
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = NV_E_IO;
			break;
		}
		if (n == 0)
			break;
		rc = buf_append(&b, chunk, (size_t)n);
		if (rc != NV_OK)
			break;
	}
	secure_wipe(chunk, sizeof(chunk));
	close(fd);
	if (rc != NV_OK) {
		buf_clear(&b);
		return rc;
	}
	*len = b.len;
	*out = buf_take(&b);
	return NV_OK;
}

char *kube_resolve_path(const char *dir, const char *path)
{
	if (path[0] == '/' || dir == NULL || dir[0] == '\0')
		return xstrdup(path);
	return xasprintf("%s/%s", dir, path);
}

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Standard or URL-safe base64, whitespace ignored, padding optional. */
enum nv_err kube_b64_decode(const char *s, struct kube_blob *out)
{
	size_t n = strlen(s), o = 0;
	unsigned char *d = xmalloc(n / 4 * 3 + 4);
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int v;
		if (c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t')
			continue;
		v = b64val(c);
		if (v < 0) {
			secure_wipe(d, n / 4 * 3 + 4);
			free(d);
			return NV_E_PARSE;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (unsigned char)((acc >> bits) & 0xff);
		}
	}
	d[o] = 0;
	out->data = d;
	out->len = o;
	return NV_OK;
}

void kube_exec_free(struct kube_exec *x)
{
	if (x == NULL)
		return;
	for (char **p = x->argv; p && *p; p++)
		free(*p);
	for (char **p = x->env; p && *p; p++)
		secure_free_str(*p);
	free(x->argv);
	free(x->env);
	free(x->command);
	free(x->api_version);
	free(x->interactive);
	free(x->dir);
	free(x);
}

void kube_config_free(struct kube_config *c)
{
	if (c == NULL)
		return;
	free(c->server);
	free(c->tls_server_name);
	free(c->proxy_url);
	kube_blob_clear(&c->ca);
	kube_blob_clear(&c->cert);
	kube_blob_clear(&c->key);
	free(c->cert_file);
	free(c->key_file);
	secure_free_str(c->token);
	free(c->token_file);
	kube_exec_free(c->exec);
	free(c->ns);
	free(c->source);
	free(c);
}

const char *kube_config_server(const struct kube_config *c)
{
	return c->server;
}

const char *kube_config_namespace(const struct kube_config *c)
{
	return c->ns ? c->ns : "default";
}

/* ---- in-cluster ---- */

TESTABLE enum nv_err kube_config_in_cluster_at(const char *sa_dir, const char *host,
                                               const char *port, struct kube_config **out,
                                               struct kube_status *st)
{
	struct kube_config *c = NULL;
	char *path = NULL, *data = NULL;
	size_t len = 0;
	enum nv_err rc;

	if (host == NULL || port == NULL || !*host || !*port) {
		kube_status_set(st, 0, "",
		                "in-cluster: KUBERNETES_SERVICE_HOST and _PORT must both be set");
		return NV_E_CONFIG;
	}
	c = xcalloc(1, sizeof(*c));
	c->server = xasprintf(strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
	c->token_file = xasprintf("%s/token", sa_dir);
	c->source = xstrdup("in-cluster");
	path = xasprintf("%s/ca.crt", sa_dir);
	rc = kube_read_file(path, KUBE_PEM_MAX, &data, &len);
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "in-cluster: cannot read %s: %s", path, nv_err_str(rc));
		goto out;
	}
	c->ca.data = (unsigned char *)data;
	c->ca.len = len;
	data = NULL;
	free(path);
	path = xasprintf("%s/namespace", sa_dir);
	if (kube_read_file(path, 256, &data, &len) == NV_OK)
		c->ns = xstrdup(str_trim(data));
	rc = NV_OK;
out:
	free(path);
	free(data);
	if (rc != NV_OK) {
		kube_config_free(c);
		return rc;
	}
	*out = c;
	return NV_OK;
}

enum nv_err kube_config_in_cluster(struct kube_config **out, struct kube_status *st)
{
	return kube_config_in_cluster_at(KUBE_SA_DIR, getenv("KUBERNETES_SERVICE_HOST"),
	                                 getenv("KUBERNETES_SERVICE_PORT"), out, st);
}
