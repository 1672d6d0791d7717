// SPDX-License-Identifier: Apache-2.0
// The kubeconfig loader: reads the files named by --kubeconfig, $KUBECONFIG
// or the home default, merges them first-wins by name, and resolves one
// context into a kube_config. Every type or reference error names its field.
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "kube_int.h"

#define KUBE_SERVER_MAX 2048
#define KC_FIELD_MAX ((size_t)64 << 10)

/* Named entries of every file, first definition wins. Each value is
 * {"v": <definition>, "dir": <file dir>, "where": "<file>: users[2]"}. */
struct kc_merge {
	json_t *sect[3];
	char *current;
	char *current_where;
};
static const char *const kc_sect_names[3] = {"clusters", "users", "contexts"};
static const char *const kc_sect_inner[3] = {"cluster", "user", "context"};

static enum nv_err kc_str(const json_t *obj, const char *field, const char *where, const char **out,
                          struct kube_status *st)
{
	json_t *v = json_object_get(obj, field);

	if (v == NULL || json_is_null(v))
		return NV_E_NOT_FOUND;
	if (!json_is_string(v)) {
		kube_status_set(st, 0, "", "%s.%s: expected a string, got %s", where, field,
		                jx_type_name(v));
		return NV_E_CONFIG;
	}
	if (json_string_length(v) > KC_FIELD_MAX) {
		kube_status_set(st, 0, "", "%s.%s: value of %zu bytes is too large", where, field,
		                json_string_length(v));
		return NV_E_CONFIG;
	}
	*out = json_string_value(v);
	return NV_OK;
}

static enum nv_err kc_bool(const json_t *obj, const char *field, const char *where, bool *out,
                           struct kube_status *st)
{
	json_t *v = json_object_get(obj, field);

	if (v == NULL || json_is_null(v))
		return NV_OK;
	if (json_is_string(v) && parse_bool(json_string_value(v), out) == NV_OK)
		return NV_OK;
	if (!json_is_boolean(v)) {
		kube_status_set(st, 0, "", "%s.%s: expected a boolean, got %s", where, field,
		                jx_type_name(v));
		return NV_E_CONFIG;
	}
	*out = json_is_true(v);
	return NV_OK;
}

static enum nv_err kc_merge_entry(struct kc_merge *m, int s, json_t *item, size_t i,
                                  const char *dir, const char *src, struct kube_status *st)
{
	char where[512];
	const char *name = NULL;
	json_t *def;
	enum nv_err rc;

	snprintf(where, sizeof(where), "%s: %s[%zu]", src, kc_sect_names[s], i);
	if (!json_is_object(item)) {
		kube_status_set(st, 0, "", "%s: expected an object, got %s", where,
		                jx_type_name(item));
		return NV_E_CONFIG;
	}
	rc = kc_str(item, "name", where, &name, st);
	if (rc == NV_E_NOT_FOUND)
		kube_status_set(st, 0, "", "%s.name: missing", where);
	if (rc != NV_OK)
		return NV_E_CONFIG;
	def = json_object_get(item, kc_sect_inner[s]);
	if (!json_is_object(def) && !(s == 1 && (def == NULL || json_is_null(def)))) {
		kube_status_set(st, 0, "", "%s.%s: expected an object, got %s", where,
		                kc_sect_inner[s], jx_type_name(def));
		return NV_E_CONFIG;
	}
	if (json_object_get(m->sect[s], name) != NULL)
		return NV_OK; /* the first file to define a name wins */
	// A copy: the document is wiped as soon as it is merged.
	json_object_set_new(m->sect[s], name,
	                    json_pack("{s:o?,s:s,s:s}", "v", def ? json_deep_copy(def) : NULL,
	                              "dir", dir ? dir : "", "where", where));
	return NV_OK;
}

static enum nv_err kc_merge_doc(struct kc_merge *m, const json_t *doc, const char *dir,
                                const char *src, struct kube_status *st)
{
	const char *cur = NULL;
	enum nv_err rc;

	if (json_is_null(doc))
		return NV_OK;
	if (!json_is_object(doc)) {
		kube_status_set(st, 0, "", "%s: expected a Config object, got %s", src,
		                jx_type_name(doc));
		return NV_E_CONFIG;
	}
	for (int s = 0; s < 3; s++) {
		json_t *list = json_object_get(doc, kc_sect_names[s]), *item;
		size_t i;
		if (list == NULL || json_is_null(list))
			continue;
		if (!json_is_array(list)) {
			kube_status_set(st, 0, "", "%s: %s: expected a list, got %s", src,
			                kc_sect_names[s], jx_type_name(list));
			return NV_E_CONFIG;
		}
		json_array_foreach(list, i, item) {
			rc = kc_merge_entry(m, s, item, i, dir, src, st);
			if (rc != NV_OK)
				return rc;
		}
	}
	char where[400];
	snprintf(where, sizeof(where), "%s: (top level)", src);
	rc = kc_str(doc, "current-context", where, &cur, st);
	if (rc == NV_E_CONFIG)
		return rc;
	if (rc == NV_OK && *cur != '\0' && m->current == NULL) {
		m->current = xstrdup(cur);
		m->current_where = xasprintf("%s: current-context", src);
	}
	return NV_OK;
}

/* Reads a PEM from <field>-data (base64) or <field> (a path). */
static enum nv_err kc_pem(const json_t *def, const char *field, const char *dir, const char *where,
                          struct kube_blob *out, struct kube_status *st)
{
	char dfield[64];
	const char *s = NULL;
	char *path = NULL, *data = NULL;
	size_t len = 0;
	enum nv_err rc;

	snprintf(dfield, sizeof(dfield), "%s-data", field);
	rc = kc_str(def, dfield, where, &s, st);
	if (rc == NV_OK) {
		if (kube_b64_decode(s, out) != NV_OK || out->len == 0) {
			kube_blob_clear(out);
			kube_status_set(st, 0, "", "%s.%s: not valid base64", where, dfield);
			return NV_E_CONFIG;
		}
		return NV_OK;
	}
	if (rc != NV_E_NOT_FOUND)
		return rc;
	rc = kc_str(def, field, where, &s, st);
	if (rc != NV_OK)
		return rc;
	path = kube_resolve_path(dir, s);
	rc = kube_read_file(path, KUBE_PEM_MAX, &data, &len);
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "%s.%s: cannot read %s: %s", where, field, path,
		                nv_err_str(rc));
		free(path);
		return NV_E_CONFIG;
	}
	free(path);
	out->data = (unsigned char *)data;
	out->len = len;
	return NV_OK;
}

static enum nv_err kc_cluster(struct kube_config *c, const json_t *e, struct kube_status *st)
{
	const json_t *def = json_object_get(e, "v");
	const char *dir = jx_str_or(e, "dir", ""), *s = NULL;
	char where[600];
	enum nv_err rc;

	snprintf(where, sizeof(where), "%s.cluster", jx_str_or(e, "where", ""));
	rc = kc_str(def, "server", where, &s, st);
	if (rc == NV_E_NOT_FOUND)
		kube_status_set(st, 0, "", "%s.server: missing", where);
	if (rc != NV_OK)
		return NV_E_CONFIG;
	if (strlen(s) > KUBE_SERVER_MAX ||
	    (!str_has_prefix(s, "https://") && !str_has_prefix(s, "http://"))) {
		kube_status_set(st, 0, "", "%s.server: must be an http(s) URL", where);
		return NV_E_CONFIG;
	}
	c->server = xstrdup(s);
	while (str_has_suffix(c->server, "/"))
		c->server[strlen(c->server) - 1] = '\0';
	if (kc_bool(def, "insecure-skip-tls-verify", where, &c->insecure, st) != NV_OK ||
	    kc_bool(def, "disable-compression", where, &c->disable_compression, st) != NV_OK)
		return NV_E_CONFIG;
	rc = kc_pem(def, "certificate-authority", dir, where, &c->ca, st);
	if (rc != NV_OK && rc != NV_E_NOT_FOUND)
		return rc;
	if ((rc = kc_str(def, "tls-server-name", where, &s, st)) == NV_OK)
		c->tls_server_name = xstrdup(s);
	else if (rc != NV_E_NOT_FOUND)
		return rc;
	if ((rc = kc_str(def, "proxy-url", where, &s, st)) == NV_OK)
		c->proxy_url = xstrdup(s);
	else if (rc != NV_E_NOT_FOUND)
		return rc;
	return NV_OK;
}

static enum nv_err kc_strv(const json_t *arr, const char *where, const char *field, char ***out,
                           bool env, struct kube_status *st)
{
	size_t n = json_array_size(arr), i;
	json_t *v;
	char **list = xcalloc(n + 2, sizeof(char *));

	json_array_foreach(arr, i, v) {
		const char *name = NULL, *val = NULL;
		char iw[700];
		snprintf(iw, sizeof(iw), "%s.%s[%zu]", where, field, i);
		if (!env && json_is_string(v)) {
			list[i] = xstrdup(json_string_value(v));
			continue;
		}
		if (env && json_is_object(v) && kc_str(v, "name", iw, &name, st) == NV_OK &&
		    kc_str(v, "value", iw, &val, st) == NV_OK) {
			list[i] = xasprintf("%s=%s", name, val);
			continue;
		}
		kube_status_set(st, 0, "", "%s: expected %s", iw,
		                env ? "{name, value} strings" : "a string");
		for (size_t j = 0; j < i; j++)
			free(list[j]);
		free(list);
		return NV_E_CONFIG;
	}
	*out = list;
	return NV_OK;
}

static enum nv_err kc_exec(struct kube_config *c, const json_t *x, const char *dir,
                           const char *where, struct kube_status *st)
{
	struct kube_exec *e = xcalloc(1, sizeof(*e));
	const char *s = NULL;
	json_t *args = json_object_get(x, "args"), *env = json_object_get(x, "env");
	char **argv = NULL;
	enum nv_err rc = NV_E_CONFIG;

	c->exec = e;
	e->dir = xstrdup(dir);
	if (kc_str(x, "command", where, &s, st) != NV_OK || *s == '\0') {
		kube_status_set(st, 0, "", "%s.command: missing", where);
		goto out;
	}
	e->command = xstrdup(s);
	if (kc_str(x, "apiVersion", where, &s, st) != NV_OK) {
		kube_status_set(st, 0, "", "%s.apiVersion: missing", where);
		goto out;
	}
	if (strcmp(s, "client.authentication.k8s.io/v1") != 0 &&
	    strcmp(s, "client.authentication.k8s.io/v1beta1") != 0) {
		kube_status_set(st, 0, "", "%s.apiVersion: %s is not supported", where, s);
		goto out;
	}
	e->api_version = xstrdup(s);
	e->interactive =
	        xstrdup(kc_str(x, "interactiveMode", where, &s, st) == NV_OK ? s : "IfAvailable");
	if (kc_bool(x, "provideClusterInfo", where, &e->provide_cluster_info, st) != NV_OK)
		goto out;
	if (args != NULL && !json_is_array(args)) {
		kube_status_set(st, 0, "", "%s.args: expected a list, got %s", where,
		                jx_type_name(args));
		goto out;
	}
	if (env != NULL && !json_is_null(env) && !json_is_array(env)) {
		kube_status_set(st, 0, "", "%s.env: expected a list, got %s", where,
		                jx_type_name(env));
		goto out;
	}
	if (kc_strv(args, where, "args", &argv, false, st) != NV_OK ||
	    kc_strv(env, where, "env", &e->env, true, st) != NV_OK)
		goto out;
	/* argv[0] is the command, then the arguments. */
	e->argv = xcalloc(json_array_size(args) + 2, sizeof(char *));
	e->argv[0] = xstrdup(e->command);
	for (size_t i = 0; argv[i] != NULL; i++)
		e->argv[i + 1] = argv[i];
	rc = NV_OK;
out:
	for (size_t i = 0; rc != NV_OK && argv != NULL && argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
	return rc;
}

static enum nv_err kc_user(struct kube_config *c, const json_t *e, struct kube_status *st)
{
	static const char *const unsupported[] = {"auth-provider", "act-as", "as", "username",
	                                          "password"};
	const json_t *def = json_object_get(e, "v");
	const char *dir = jx_str_or(e, "dir", ""), *s = NULL;
	json_t *x;
	char where[600];
	enum nv_err rc;

	snprintf(where, sizeof(where), "%s.user", jx_str_or(e, "where", ""));
	if (def == NULL)
		return NV_OK;
	for (size_t i = 0; i < ARRAY_LEN(unsupported); i++) {
		if (json_object_get(def, unsupported[i]) != NULL) {
			kube_status_set(st, 0, "", "%s.%s: not supported", where, unsupported[i]);
			return NV_E_UNSUPPORTED;
		}
	}
	if ((rc = kc_str(def, "token", where, &s, st)) == NV_OK)
		c->token = xstrdup(s);
	else if (rc != NV_E_NOT_FOUND)
		return rc;
	if ((rc = kc_str(def, "tokenFile", where, &s, st)) == NV_OK)
		c->token_file = kube_resolve_path(dir, s);
	else if (rc != NV_E_NOT_FOUND)
		return rc;
	rc = kc_pem(def, "client-certificate", dir, where, &c->cert, st);
	if (rc != NV_OK && rc != NV_E_NOT_FOUND)
		return rc;
	rc = kc_pem(def, "client-key", dir, where, &c->key, st);
	if (rc != NV_OK && rc != NV_E_NOT_FOUND)
		return rc;
	if (json_is_string(json_object_get(def, "client-certificate")) &&
	    json_is_string(json_object_get(def, "client-key")) &&
	    !json_object_get(def, "client-certificate-data") &&
	    !json_object_get(def, "client-key-data")) {
		c->cert_file = kube_resolve_path(dir, jx_str_or(def, "client-certificate", ""));
		c->key_file = kube_resolve_path(dir, jx_str_or(def, "client-key", ""));
	}
	if ((c->cert.data == NULL) != (c->key.data == NULL)) {
		kube_status_set(st, 0, "", "%s.%s: missing (a client certificate needs its key)",
		                where, c->cert.data ? "client-key" : "client-certificate");
		return NV_E_CONFIG;
	}
	x = json_object_get(def, "exec");
	if (x != NULL && !json_is_null(x)) {
		char xw[640];
		snprintf(xw, sizeof(xw), "%s.exec", where);
		if (!json_is_object(x)) {
			kube_status_set(st, 0, "", "%s: expected an object, got %s", xw,
			                jx_type_name(x));
			return NV_E_CONFIG;
		}
		return kc_exec(c, x, dir, xw, st);
	}
	return NV_OK;
}

/* Looks up a named entry a context refers to; field is "cluster"/"user". */
static enum nv_err kc_ref(const struct kc_merge *m, int s, const json_t *ctx, const char *cwhere,
                          const json_t **out, struct kube_status *st)
{
	const char *field = kc_sect_inner[s], *name = NULL;
	enum nv_err rc = kc_str(ctx, field, cwhere, &name, st);

	if (rc == NV_E_NOT_FOUND)
		kube_status_set(st, 0, "", "%s.%s: missing", cwhere, field);
	if (rc != NV_OK)
		return NV_E_CONFIG;
	*out = json_object_get(m->sect[s], name);
	if (*out == NULL) {
		kube_status_set(st, 0, "", "%s.%s: no %s named \"%s\"", cwhere, field, field, name);
		return NV_E_CONFIG;
	}
	return NV_OK;
}

static enum nv_err kc_build(const struct kc_merge *m, const char *context, struct kube_config **out,
                            struct kube_status *st)
{
	struct kube_config *c = xcalloc(1, sizeof(*c));
	const json_t *ce, *ctx, *cl = NULL, *us = NULL;
	const char *ns = NULL;
	char cwhere[600];
	enum nv_err rc = NV_E_CONFIG;

	if (context == NULL)
		context = m->current;
	if (context == NULL) {
		kube_status_set(st, 0, "", "current-context: not set and no context was given");
		goto out;
	}
	ce = json_object_get(m->sect[2], context);
	if (ce == NULL) {
		kube_status_set(st, 0, "", "%s: no context named \"%s\"",
		                m->current_where && context == m->current ? m->current_where
		                                                          : "context",
		                context);
		goto out;
	}
	ctx = json_object_get(ce, "v");
	snprintf(cwhere, sizeof(cwhere), "%s.context", jx_str_or(ce, "where", ""));
	if ((rc = kc_ref(m, 0, ctx, cwhere, &cl, st)) != NV_OK ||
	    (rc = kc_ref(m, 1, ctx, cwhere, &us, st)) != NV_OK ||
	    (rc = kc_cluster(c, cl, st)) != NV_OK || (rc = kc_user(c, us, st)) != NV_OK)
		goto out;
	rc = kc_str(ctx, "namespace", cwhere, &ns, st);
	if (rc == NV_OK && *ns)
		c->ns = xstrdup(ns);
	else if (rc == NV_E_CONFIG)
		goto out;
	c->source = xasprintf("kubeconfig context %s", context);
	if (c->insecure)
		log_warn("kube",
		         "TLS verification of the apiserver is off (insecure-skip-tls-verify): "
		         "anyone on the path can read this client's token",
		         "cluster=\"%s\" context=\"%s\" server=%s where=\"%s\"",
		         jx_str_or(ctx, "cluster", ""), context, c->server,
		         jx_str_or(cl, "where", ""));
	rc = NV_OK;
out:
	if (rc != NV_OK) {
		kube_config_free(c);
		return rc;
	}
	*out = c;
	return NV_OK;
}

static void kc_merge_init(struct kc_merge *m)
{
	memset(m, 0, sizeof(*m));
	for (int s = 0; s < 3; s++)
		m->sect[s] = json_object();
}

static void kc_merge_clear(struct kc_merge *m)
{
	for (int s = 0; s < 3; s++) {
		jx_wipe(m->sect[s]);
		json_decref(m->sect[s]);
	}
	free(m->current);
	free(m->current_where);
}

static enum nv_err kc_merge_text(struct kc_merge *m, const char *data, size_t len, const char *dir,
                                 const char *src, struct kube_status *st)
{
	char err[400];
	json_t *doc = NULL;
	enum nv_err rc = kube_yaml_load(data, len, &doc, err, sizeof(err));

	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "%s: %s", src, err);
		return rc == NV_E_TOO_LARGE ? rc : NV_E_CONFIG;
	}
	rc = kc_merge_doc(m, doc, dir, src, st);
	jx_wipe(doc);
	json_decref(doc);
	return rc;
}

enum nv_err kube_config_parse(const char *data, size_t len, const char *dir, const char *context,
                              struct kube_config **out, struct kube_status *st)
{
	struct kc_merge m;
	enum nv_err rc;

	kube_status_set(st, 0, "", "%s", "");
	kc_merge_init(&m);
	rc = kc_merge_text(&m, data, len, dir, "kubeconfig", st);
	if (rc == NV_OK)
		rc = kc_build(&m, context, out, st);
	kc_merge_clear(&m);
	return rc;
}

static enum nv_err kc_merge_file(struct kc_merge *m, const char *path, bool must,
                                 struct kube_status *st)
{
	char *data = NULL, *dir = xstrdup(path), *slash = strrchr(dir, '/');
	size_t len = 0;
	enum nv_err rc = kube_read_file(path, KUBECONFIG_MAX_BYTES, &data, &len);

	if (slash != NULL)
		*slash = '\0';
	else
		dir[0] = '\0';
	if (rc == NV_E_NOT_FOUND && !must) {
		rc = NV_OK;
	} else if (rc != NV_OK) {
		kube_status_set(st, 0, "", "%s: cannot read: %s", path, nv_err_str(rc));
		rc = rc == NV_E_TOO_LARGE ? rc : NV_E_CONFIG;
	} else {
		rc = kc_merge_text(m, data, len, slash ? dir : NULL, path, st);
	}
	if (data != NULL)
		secure_wipe(data, len);
	free(data);
	free(dir);
	return rc;
}

/* Merges the files of a ':'-separated list; missing ones are skipped as
 * client-go does, but at least one must exist. */
static enum nv_err kc_merge_list(struct kc_merge *m, const char *list, struct kube_status *st)
{
	char *copy = xstrdup(list), *p = copy;
	enum nv_err rc = NV_OK;
	bool any = false;

	while (p != NULL && rc == NV_OK) {
		char *next = strchr(p, ':');
		if (next != NULL)
			*next++ = '\0';
		if (*p != '\0') {
			if (access(p, F_OK) == 0)
				any = true;
			rc = kc_merge_file(m, p, false, st);
		}
		p = next;
	}
	if (rc == NV_OK && !any) {
		kube_status_set(st, 0, "", "KUBECONFIG: none of \"%s\" exists", list);
		rc = NV_E_CONFIG;
	}
	free(copy);
	return rc;
}

enum nv_err kube_config_load(const struct kube_config_opts *o, struct kube_config **out,
                             struct kube_status *st)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	struct kc_merge m;
	char *path = NULL;
	enum nv_err rc;

	kube_status_set(st, 0, "", "%s", "");
	kc_merge_init(&m);
	if (o != NULL && o->kubeconfig != NULL) {
		rc = kc_merge_file(&m, o->kubeconfig, true, st);
	} else if (env != NULL && *env != '\0') {
		rc = kc_merge_list(&m, env, st);
	} else if ((o == NULL || !o->no_in_cluster) && getenv("KUBERNETES_SERVICE_HOST") &&
	           getenv("KUBERNETES_SERVICE_PORT")) {
		kc_merge_clear(&m);
		return kube_config_in_cluster(out, st);
	} else {
		struct passwd pw, *pwp = NULL;
		char pwbuf[1024];
		if ((home == NULL || *home == '\0') &&
		    getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp != NULL)
			home = pw.pw_dir;
		path = xasprintf("%s/.kube/config", home ? home : "");
		rc = kc_merge_file(&m, path, true, st);
	}
	if (rc == NV_OK)
		rc = kc_build(&m, o ? o->context : NULL, out, st);
	free(path);
	kc_merge_clear(&m);
	return rc;
}
