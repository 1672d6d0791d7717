// SPDX-License-Identifier: Apache-2.0
// Parsers for what the host prints: the driver's proc and sys files,
// /proc/devices, and nvidia-imex-ctl's answers. All of them take bytes that
// may be truncated or hostile, copy into fixed-size fields, and fail clearly.
#include "nvl72/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/json.h"

#define IMEX_JSON_MAX ((size_t)1 << 20)

/* Yields the next line of [*p, end) without its newline. */
static bool line_next(const char **p, const char *end, const char **ls, size_t *ll)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	*ls = *p;
	*ll = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
	*p = nl ? nl + 1 : end;
	if (*ll > 0 && (*ls)[*ll - 1] == '\r')
		(*ll)--;
	return true;
}

/* Digits and dots, 1 to 4 components of at most 9 digits each. */
static bool is_version(const char *s, size_t len)
{
	size_t dots = 0, digits = 0;

	if (len == 0 || len >= HOST_VERSION_LEN || s[0] < '0' || s[0] > '9' || s[len - 1] < '0' ||
	    s[len - 1] > '9')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			if (s[i - 1] == '.' || ++dots > 3)
				return false;
			digits = 0;
		} else if (s[i] < '0' || s[i] > '9' || ++digits > 9) {
			return false;
		}
	}
	return true;
}

/* Copies [s, s+len) trimmed of spaces into out; false when it does not fit. */
static bool field_copy(char *out, size_t outsz, const char *s, size_t len)
{
	while (len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len >= outsz || memchr(s, '\0', len) != NULL)
		return false;
	memcpy(out, s, len);
	out[len] = '\0';
	return true;
}

/* Splits an NVRM line body on runs of two or more spaces. */
static size_t nvrm_split(const char *s, size_t len, const char *seg[8], size_t seglen[8])
{
	size_t n = 0, i = 0;

	while (i < len && n < 8) {
		size_t start, end;
		while (i < len && s[i] == ' ')
			i++;
		start = i;
		while (i < len && !(s[i] == ' ' && i + 1 < len && s[i + 1] == ' ') &&
		       !(s[i] == ' ' && i + 1 == len))
			i++;
		end = i;
		if (end > start) {
			seg[n] = s + start;
			seglen[n++] = end - start;
		}
	}
	return n;
}

static void nvrm_arch(const char *s, size_t len, struct host_driver_info *out)
{
	char head[128];
	const char *a = NULL;

	if (!field_copy(head, sizeof(head), s, len))
		return;
	out->open_module = strstr(head, "Open Kernel Module") != NULL;
	if (out->open_module) {
		a = strstr(head, " for ");
		a = a ? a + 5 : NULL;
	} else if (str_has_prefix(head, "NVIDIA UNIX ")) {
		a = head + 12;
	}
	if (a != NULL) {
		size_t n = strcspn(a, " ");
		if (n > 0 && n < sizeof(out->arch)) {
			memcpy(out->arch, a, n);
			out->arch[n] = '\0';
		}
	}
}

enum nv_err host_proc_version_parse(const char *text, size_t len, struct host_driver_info *out)
{
	static const char pfx[] = "NVRM version:";
	const char *p = text, *end, *ls;
	size_t ll;

	if (text == NULL)
		return NV_E_INVAL;
	end = text + len;
	while (line_next(&p, end, &ls, &ll)) {
		const char *seg[8];
		size_t seglen[8], n;
		struct host_driver_info d = {0};

		if (ll < sizeof(pfx) - 1 || memcmp(ls, pfx, sizeof(pfx) - 1) != 0)
			continue;
		n = nvrm_split(ls + sizeof(pfx) - 1, ll - (sizeof(pfx) - 1), seg, seglen);
		for (size_t i = 0; i + 1 < n; i++) {
			if (!is_version(seg[i + 1], seglen[i + 1]))
				continue;
			if (memmem(seg[i], seglen[i], "Kernel Module", 13) == NULL)
				continue;
			memcpy(d.version, seg[i + 1], seglen[i + 1]);
			d.version[seglen[i + 1]] = '\0';
			nvrm_arch(seg[i], seglen[i], &d);
			d.loaded = true;
			*out = d;
			return NV_OK;
		}
		return NV_E_PARSE;
	}
	return NV_E_PARSE;
}

enum nv_err host_sys_version_parse(const char *text, size_t len, char *out, size_t outsz)
{
	const char *p = text, *ls;
	size_t ll;
	char v[HOST_VERSION_LEN];

	if (text == NULL || !line_next(&p, text + len, &ls, &ll))
		return NV_E_PARSE;
	if (!field_copy(v, sizeof(v), ls, ll) || !is_version(v, strlen(v)))
		return NV_E_PARSE;
	return str_copy(out, outsz, v);
}

static bool is_param_name(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

static enum nv_err param_line(const char *ls, size_t ll, struct host_driver_params *p)
{
	const char *colon = memchr(ls, ':', ll);
	struct host_param *pp;
	size_t nl;

	if (colon == NULL)
		return NV_E_PARSE;
	nl = (size_t)(colon - ls);
	if (!is_param_name(ls, nl) || nl >= sizeof(pp->name))
		return NV_E_PARSE;
	if (p->n == HOST_PARAMS_MAX)
		return NV_E_TOO_LARGE;
	pp = &p->p[p->n];
	memcpy(pp->name, ls, nl);
	pp->name[nl] = '\0';
	if (!field_copy(pp->value, sizeof(pp->value), colon + 1, ll - nl - 1))
		return NV_E_TOO_LARGE;
	p->n++;
	return NV_OK;
}

enum nv_err host_params_parse(const char *text, size_t len, struct host_driver_params *out)
{
	struct host_driver_params *p;
	const char *cur = text, *ls;
	enum nv_err rc = NV_OK;
	size_t ll;

	if (text == NULL || out == NULL)
		return NV_E_INVAL;
	p = xcalloc(1, sizeof(*p));
	while (rc == NV_OK && line_next(&cur, text + len, &ls, &ll))
		if (ll > 0)
			rc = param_line(ls, ll, p);
	if (rc == NV_OK)
		*out = *p;
	free(p);
	return rc;
}

const char *host_params_get(const struct host_driver_params *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->p[i].name, name) == 0)
			return p->p[i].value;
	return NULL;
}

enum nv_err host_version_cmp(const char *a, const char *b, int *out)
{
	if (!is_version(a, strlen(a)) || !is_version(b, strlen(b)))
		return NV_E_PARSE;
	while (*a != '\0' || *b != '\0') {
		int64_t x = 0, y = 0;
		size_t na = strcspn(a, "."), nb = strcspn(b, ".");
		if (na > 0 && parse_i64_n(a, na, 0, INT32_MAX, &x) != NV_OK)
			return NV_E_PARSE;
		if (nb > 0 && parse_i64_n(b, nb, 0, INT32_MAX, &y) != NV_OK)
			return NV_E_PARSE;
		if (x != y) {
			*out = x < y ? -1 : 1;
			return NV_OK;
		}
		a += na + (a[na] == '.');
		b += nb + (b[nb] == '.');
	}
	*out = 0;
	return NV_OK;
}

enum nv_err host_proc_devices_major(const char *text, size_t len, const char *name, unsigned *major)
{
	const char *p = text, *ls;
	size_t ll, nlen = strlen(name);
	bool chr = false;

	if (text == NULL)
		return NV_E_INVAL;
	while (line_next(&p, text + len, &ls, &ll)) {
		size_t i = 0, d;
		int64_t v;

		if (ll == 18 && memcmp(ls, "Character devices:", 18) == 0) {
			chr = true;
			continue;
		}
		if (ll == 14 && memcmp(ls, "Block devices:", 14) == 0)
			break;
		if (!chr)
			continue;
		while (i < ll && ls[i] == ' ')
			i++;
		d = i;
		while (i < ll && ls[i] >= '0' && ls[i] <= '9')
			i++;
		if (i == d || i >= ll || ls[i] != ' ')
			continue;
		if (ll - i - 1 != nlen || memcmp(ls + i + 1, name, nlen) != 0)
			continue;
		if (parse_i64_n(ls + d, i - d, 0, 4095, &v) != NV_OK)
			return NV_E_PARSE;
		*major = (unsigned)v;
		return NV_OK;
	}
	return NV_E_NOT_FOUND;
}

static const char *const imexd_names[] = {
        [HOST_IMEXD_UNKNOWN] = "UNKNOWN",
        [HOST_IMEXD_INITIALIZING] = "INITIALIZING",
        [HOST_IMEXD_STARTING_AUTH_SERVER] = "STARTING_AUTH_SERVER",
        [HOST_IMEXD_WAITING_FOR_PEERS] = "WAITING_FOR_PEERS",
        [HOST_IMEXD_WAITING_FOR_RECOVERY] = "WAITING_FOR_RECOVERY",
        [HOST_IMEXD_INIT_GPU] = "INIT_GPU",
        [HOST_IMEXD_READY] = "READY",
        [HOST_IMEXD_SHUTTING_DOWN] = "SHUTTING_DOWN",
        [HOST_IMEXD_UNAVAILABLE] = "UNAVAILABLE",
        [HOST_IMEXD_NOT_RUNNING] = "NOT_RUNNING",
};

static const char *const domain_names[] = {
        [HOST_IMEX_DOMAIN_UNKNOWN] = "UNKNOWN",
        [HOST_IMEX_DOMAIN_UP] = "UP",
        [HOST_IMEX_DOMAIN_DOWN] = "DOWN",
        [HOST_IMEX_DOMAIN_DEGRADED] = "DEGRADED",
};

static const char *const conn_names[] = {
        [HOST_IMEX_CONN_UNKNOWN] = "UNKNOWN",
        [HOST_IMEX_CONN_CONNECTED] = "CONNECTED",
        [HOST_IMEX_CONN_INVALID] = "INVALID",
        [HOST_IMEX_CONN_NEVER] = "NEVER_CONNECTED",
        [HOST_IMEX_CONN_RECOVERING] = "RECOVERING",
        [HOST_IMEX_CONN_DISCONNECTED] = "DISCONNECTED",
        [HOST_IMEX_CONN_AUTHENTICATING] = "AUTHENTICATING",
        [HOST_IMEX_CONN_VERSION_MISMATCH] = "VERSION_MISMATCH",
        [HOST_IMEX_CONN_MAP_MISMATCH] = "MAP_MISMATCH",
};

const char *host_imex_daemon_name(enum host_imex_daemon s)
{
	return (unsigned)s < ARRAY_LEN(imexd_names) ? imexd_names[s] : "UNKNOWN";
}

const char *host_imex_domain_name(enum host_imex_domain s)
{
	return (unsigned)s < ARRAY_LEN(domain_names) ? domain_names[s] : "UNKNOWN";
}

const char *host_imex_conn_name(enum host_imex_conn s)
{
	return (unsigned)s < ARRAY_LEN(conn_names) ? conn_names[s] : "UNKNOWN";
}

/* Index of s in names[0..n), or 0 (the UNKNOWN slot) when absent. */
static unsigned word_lookup(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 1; i < n; i++)
		if (names[i] != NULL && strcmp(names[i], s) == 0)
			return (unsigned)i;
	return 0;
}

enum nv_err host_imex_q_parse(const char *text, size_t len, enum host_imex_daemon *out)
{
	char w[32];
	unsigned v;

	if (text == NULL)
		return NV_E_INVAL;
	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (!field_copy(w, sizeof(w), text, len) || w[0] == '\0' || strchr(w, '\n'))
		return NV_E_PARSE;
	v = word_lookup(imexd_names, ARRAY_LEN(imexd_names), w);
	if (v == 0 || v == HOST_IMEXD_NOT_RUNNING)
		return NV_E_PARSE;
	*out = (enum host_imex_daemon)v;
	return NV_OK;
}

__attribute__((format(printf, 3, 4))) static void why_set(char *why, size_t whysz, const char *fmt,
                                                          ...)
{
	va_list ap;

	if (why == NULL || whysz == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
}

/* A decimal object key "0".."63" as a node index. */
static bool node_key(const char *k, unsigned *idx)
{
	int v;

	if (parse_int(k, 0, HOST_IMEX_NODES_MAX - 1, &v) != NV_OK)
		return false;
	*idx = (unsigned)v;
	return true;
}

static enum nv_err imex_conns_parse(json_t *conns, struct host_imex_node *nd, char *why,
                                    size_t whysz)
{
	const char *k;
	json_t *v;

	json_object_foreach(conns, k, v) {
		unsigned ci;
		const char *st;

		if (!node_key(k, &ci) || !json_is_object(v)) {
			why_set(why, whysz, "node %s: bad connection entry %.32s", nd->host, k);
			return NV_E_PARSE;
		}
		st = json_string_value(json_object_get(v, "status"));
		if (st == NULL) {
			why_set(why, whysz, "node %s: connection %.32s has no status", nd->host, k);
			return NV_E_PARSE;
		}
		nd->conn[ci] =
		        (enum host_imex_conn)word_lookup(conn_names, ARRAY_LEN(conn_names), st);
		if (ci + 1 > nd->n_conn)
			nd->n_conn = ci + 1;
	}
	return NV_OK;
}

static enum nv_err imex_node_parse(const char *key, json_t *v, struct host_imex_node *nd, char *why,
                                   size_t whysz)
{
	const char *st, *host;
	json_t *conns;

	if (!node_key(key, &nd->index) || !json_is_object(v)) {
		why_set(why, whysz, "bad node entry %.32s", key);
		return NV_E_PARSE;
	}
	st = json_string_value(json_object_get(v, "status"));
	host = json_string_value(json_object_get(v, "host"));
	if (st == NULL || host == NULL) {
		why_set(why, whysz, "node %.32s: status or host missing", key);
		return NV_E_PARSE;
	}
	if (str_copy(nd->host, sizeof(nd->host), host) != NV_OK) {
		why_set(why, whysz, "node %.32s: host too long", key);
		return NV_E_PARSE;
	}
	nd->status = (enum host_imex_daemon)word_lookup(imexd_names, ARRAY_LEN(imexd_names), st);
	conns = json_object_get(v, "connections");
	if (conns == NULL)
		return NV_OK;
	if (!json_is_object(conns)) {
		why_set(why, whysz, "node %.32s: connections is not an object", key);
		return NV_E_PARSE;
	}
	return imex_conns_parse(conns, nd, why, whysz);
}

static int node_cmp(const void *a, const void *b)
{
	const struct host_imex_node *x = a, *y = b;
	return (x->index > y->index) - (x->index < y->index);
}

enum nv_err host_imex_nodes_parse(const char *text, size_t len, struct host_imex_domain_status *out,
                                  char *why, size_t whysz)
{
	const struct jx_limits lim = {IMEX_JSON_MAX, 8};
	struct host_imex_domain_status *s = NULL;
	struct jx_err je = {{0}};
	json_t *root = NULL, *nodes, *v;
	const char *k, *st;
	enum nv_err rc;

	rc = jx_loadb(text, len, &lim, &root, &je);
	if (rc != NV_OK) {
		why_set(why, whysz, "%s", je.msg);
		goto out;
	}
	rc = NV_E_PARSE;
	st = json_string_value(json_object_get(root, "status"));
	nodes = json_object_get(root, "nodes");
	if (!json_is_object(root) || st == NULL || !json_is_object(nodes)) {
		why_set(why, whysz, "not an IMEX node report (status, nodes)");
		goto out;
	}
	if (json_object_size(nodes) > HOST_IMEX_NODES_MAX) {
		why_set(why, whysz, "more nodes than an IMEX domain holds");
		rc = NV_E_TOO_LARGE;
		goto out;
	}
	s = xcalloc(1, sizeof(*s));
	s->domain = (enum host_imex_domain)word_lookup(domain_names, ARRAY_LEN(domain_names), st);
	json_object_foreach(nodes, k, v) {
		rc = imex_node_parse(k, v, &s->nodes[s->n_nodes], why, whysz);
		if (rc != NV_OK)
			goto out;
		s->n_nodes++;
	}
	qsort(s->nodes, s->n_nodes, sizeof(s->nodes[0]), node_cmp);
	*out = *s;
	rc = NV_OK;
out:
	free(s);
	json_decref(root);
	return rc;
}

void host_imex_domain_count(const struct host_imex_domain_status *s, const char *self_host,
                            unsigned *peers_ready, unsigned *peers_connected)
{
	const struct host_imex_node *self = NULL;

	*peers_ready = 0;
	*peers_connected = 0;
	for (size_t i = 0; i < s->n_nodes; i++)
		if (self_host != NULL && strcmp(s->nodes[i].host, self_host) == 0)
			self = &s->nodes[i];
	for (size_t i = 0; i < s->n_nodes; i++) {
		const struct host_imex_node *nd = &s->nodes[i];
		if (nd == self)
			continue;
		if (nd->status == HOST_IMEXD_READY)
			(*peers_ready)++;
		if (self != NULL && nd->index < self->n_conn &&
		    self->conn[nd->index] == HOST_IMEX_CONN_CONNECTED)
			(*peers_connected)++;
	}
}
