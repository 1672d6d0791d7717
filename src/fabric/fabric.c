// SPDX-License-Identifier: Apache-2.0
// The NVLink partition interface: the registry of compiled-in backends, the
// configuration and its validation, and the generic calls, including the
// operation wait loop that every backend shares.
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_int.h"

#define SECRET_MAX ((size_t)1 << 20)

static const void *const backends[] = {
        &fabric_nmxm_ops,
        &fabric_sim_ops,
};
static char names[64];
static const struct fabric_registry registry = {backends, ARRAY_LEN(backends), names,
                                                sizeof(names)};
_Static_assert(offsetof(struct fabric_backend_ops, name) == 0, "the registry reads the name");

struct fabric_backend {
	const struct fabric_backend_ops *ops;
	void *state;
	long poll_interval_ms;
	long poll_max_interval_ms;
	long op_deadline_ms;
};

const char *fabric_member_kind_name(enum fabric_member_kind k)
{
	return k == FABRIC_MEMBERS_GPU_ID ? "gpu-id" : "location";
}

const char *fabric_health_name(enum fabric_health h)
{
	switch (h) {
	case FABRIC_HEALTH_HEALTHY:
		return "HEALTHY";
	case FABRIC_HEALTH_DEGRADED:
		return "DEGRADED";
	case FABRIC_HEALTH_DEGRADED_BANDWIDTH:
		return "DEGRADED_BANDWIDTH";
	case FABRIC_HEALTH_UNHEALTHY:
		return "UNHEALTHY";
	case FABRIC_HEALTH_NEW:
		return "NEW";
	default:
		return "UNKNOWN";
	}
}

void fabric_spec_init(struct fabric_partition_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->kind = FABRIC_MEMBERS_LOCATION;
	s->chassis_id = -1;
}

enum nv_err fabric_spec_add_tray(struct fabric_partition_spec *s, unsigned tray, unsigned slot,
                                 unsigned host_id)
{
	if (tray == 0)
		return NV_E_INVAL;
	for (size_t i = 0; i < s->n_gpus; i++)
		if (s->gpus[i].tray == tray)
			return NV_E_EXISTS;
	if (s->n_gpus + 4 > FABRIC_GPUS_MAX)
		return NV_E_TOO_LARGE;
	for (unsigned m = 1; m <= 4; m++) {
		struct fabric_gpu *g = &s->gpus[s->n_gpus++];
		memset(g, 0, sizeof(*g));
		g->tray = tray;
		g->module = m;
		g->slot = slot;
		g->host_id = host_id;
	}
	return NV_OK;
}

/* ---- configuration ---- */

void fabric_config_init(struct fabric_config *c)
{
	memset(c, 0, sizeof(*c));
	str_copy(c->backend, sizeof(c->backend), "nmx-m");
	c->connect_timeout_ms = 5000;
	c->request_timeout_ms = 30000;
	c->retries = 3;
	c->retry_base_ms = 200;
	c->poll_interval_ms = 1000;
	c->poll_max_interval_ms = 10000;
	c->op_deadline_ms = 600000;
	c->max_body = (size_t)4 << 20;
	c->sim_delay_ms = 2000;
	c->sim_default_clique = FABRIC_DEFAULT_CLIQUE;
}

static void secret_free(char **p, size_t len)
{
	if (*p != NULL) {
		secure_wipe(*p, len);
		free(*p);
		*p = NULL;
	}
}

void fabric_config_clear(struct fabric_config *c)
{
	secret_free(&c->ca_pem, c->ca_pem_len);
	c->ca_pem_len = 0;
	secure_free_str(c->username);
	secure_free_str(c->password);
	secure_free_str(c->token);
	c->username = c->password = c->token = NULL;
}

static void set_str_secret(char **slot, const char *data, size_t len)
{
	if (*slot != NULL)
		secure_free_str(*slot);
	*slot = xstrndup(data, len);
}

enum nv_err fabric_config_set_secret(struct fabric_config *c, const char *key, const char *data,
                                     size_t len)
{
	if (key == NULL || data == NULL)
		return NV_E_INVAL;
	if (len > SECRET_MAX)
		return NV_E_TOO_LARGE;
	/* Secrets often end with the newline of the file they came from. */
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r') &&
	       strcmp(key, "ca.crt") != 0)
		len--;
	if (strcmp(key, "username") == 0) {
		set_str_secret(&c->username, data, len);
	} else if (strcmp(key, "password") == 0) {
		set_str_secret(&c->password, data, len);
	} else if (strcmp(key, "token") == 0) {
		set_str_secret(&c->token, data, len);
	} else if (strcmp(key, "ca.crt") == 0) {
		secret_free(&c->ca_pem, c->ca_pem_len);
		c->ca_pem = xstrndup(data, len);
		c->ca_pem_len = len;
	} else {
		return NV_E_INVAL;
	}
	return NV_OK;
}

static enum nv_err why_set(char *why, size_t whysz, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static enum nv_err why_set(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && whysz > 0) {
		va_start(ap, fmt);
		vsnprintf(why, whysz, fmt, ap);
		va_end(ap);
	}
	return NV_E_CONFIG;
}

static bool has_ctl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static enum nv_err validate_nmxm(const struct fabric_config *c, char *why, size_t whysz)
{
	bool https = str_has_prefix(c->endpoint, "https://");
	bool http = str_has_prefix(c->endpoint, "http://");
	bool basic = c->username != NULL || c->password != NULL;

	if (c->endpoint[0] == '\0')
		return why_set(why, whysz, "endpoint: required for the nmx-m backend");
	if (!https && !http)
		return why_set(why, whysz, "endpoint: must start with https://");
	if (http && !c->allow_http)
		return why_set(why, whysz,
		               "endpoint: plain http:// sends credentials in the clear; "
		               "use https:// (or allow_http for a lab)");
	if (has_ctl(c->endpoint) || strchr(c->endpoint, ' ') != NULL ||
	    c->endpoint[strlen(https ? "https://" : "http://")] == '\0')
		return why_set(why, whysz, "endpoint: not a URL");
	if (basic && (c->username == NULL || c->password == NULL || c->username[0] == '\0'))
		return why_set(
		        why, whysz,
		        "credentials: basic authentication needs both username and password");
	if (basic && c->token != NULL)
		return why_set(why, whysz,
		               "credentials: give either username/password or token, not both");
	if (!basic && c->token == NULL)
		return why_set(why, whysz,
		               "credentials: none given; the Secret needs username and password "
		               "(or token)");
	if (c->username != NULL && strchr(c->username, ':') != NULL)
		return why_set(why, whysz, "credentials: username may not contain ':'");
	if ((c->username != NULL && has_ctl(c->username)) ||
	    (c->password != NULL && has_ctl(c->password)) ||
	    (c->token != NULL && has_ctl(c->token)))
		return why_set(why, whysz, "credentials: control characters are not allowed");
	if (c->ca_pem != NULL && strstr(c->ca_pem, "-----BEGIN CERTIFICATE-----") == NULL)
		return why_set(why, whysz, "ca.crt: no PEM certificate in it");
	return NV_OK;
}

static enum nv_err validate_ranges(const struct fabric_config *c, char *why, size_t whysz)
{
	static const struct {
		const char *name;
		size_t off;
		long min, max;
	} r[] = {
	        {"connect_timeout_ms", offsetof(struct fabric_config, connect_timeout_ms), 10,
	         600000},
	        {"request_timeout_ms", offsetof(struct fabric_config, request_timeout_ms), 10,
	         3600000},
	        {"retry_base_ms", offsetof(struct fabric_config, retry_base_ms), 1, 60000},
	        {"poll_interval_ms", offsetof(struct fabric_config, poll_interval_ms), 1, 600000},
	        {"poll_max_interval_ms", offsetof(struct fabric_config, poll_max_interval_ms), 1,
	         3600000},
	        {"op_deadline_ms", offsetof(struct fabric_config, op_deadline_ms), 1, 86400000},
	        {"sim_delay_ms", offsetof(struct fabric_config, sim_delay_ms), 0, 3600000},
	};

	for (size_t i = 0; i < ARRAY_LEN(r); i++) {
		long v;
		memcpy(&v, (const char *)c + r[i].off, sizeof(v));
		if (v < r[i].min || v > r[i].max)
			return why_set(why, whysz, "%s: %ld is outside [%ld, %ld]", r[i].name, v,
			               r[i].min, r[i].max);
	}
	if (c->poll_max_interval_ms < c->poll_interval_ms)
		return why_set(why, whysz, "poll_max_interval_ms: below poll_interval_ms");
	if (c->retries < 0 || c->retries > 10)
		return why_set(why, whysz, "retries: %d is outside [0, 10]", c->retries);
	if (c->max_body < 1024 || c->max_body > ((size_t)256 << 20))
		return why_set(why, whysz, "max_body: %zu is outside [1 KiB, 256 MiB]",
		               c->max_body);
	return NV_OK;
}

enum nv_err fabric_config_validate(const struct fabric_config *c, char *why, size_t whysz)
{
	enum nv_err err;

	if (why != NULL && whysz > 0)
		why[0] = '\0';
	if (fabric_backend_find(c->backend) == NULL)
		return why_set(why, whysz, "backend: \"%s\" is not one of %s", c->backend,
		               fabric_backend_names());
	err = validate_ranges(c, why, whysz);
	if (err != NV_OK)
		return err;
	if (strcmp(c->backend, "nmx-m") == 0)
		return validate_nmxm(c, why, whysz);
	if (c->sim_root[0] == '\0')
		return why_set(why, whysz, "sim_root: required for the sim backend");
	if (c->sim_default_clique == 0 || c->sim_default_clique > FABRIC_DEFAULT_CLIQUE)
		return why_set(why, whysz, "sim_default_clique: outside [1, 32766]");
	return NV_OK;
}

/* ---- registry and generic calls ---- */

const struct fabric_backend_ops *fabric_backend_find(const char *name)
{
	return fabric_registry_find(&registry, name);
}

const char *fabric_backend_names(void)
{
	return fabric_registry_names(&registry);
}

enum nv_err fabric_backend_new(const struct fabric_config *c, struct fabric_backend **out,
                               struct fabric_status *st)
{
	char why[256];
	struct fabric_backend *b;
	void *state = NULL;
	enum nv_err err;

	fabric_status_reset(st);
	err = fabric_config_validate(c, why, sizeof(why));
	if (err != NV_OK) {
		fabric_status_msg(st, "%s", why);
		log_error("fabric", "invalid fabric configuration", "backend=%s err=\"%s\"",
		          c->backend, why);
		return err;
	}
	const struct fabric_backend_ops *ops = fabric_backend_find(c->backend);
	err = ops->open(c, &state, st);
	if (err != NV_OK)
		return err;
	b = xcalloc(1, sizeof(*b));
	b->ops = ops;
	b->state = state;
	b->poll_interval_ms = c->poll_interval_ms;
	b->poll_max_interval_ms = c->poll_max_interval_ms;
	b->op_deadline_ms = c->op_deadline_ms;
	*out = b;
	return NV_OK;
}

void fabric_backend_free(struct fabric_backend *b)
{
	if (b == NULL)
		return;
	b->ops->close(b->state);
	free(b);
}

const char *fabric_backend_name(const struct fabric_backend *b)
{
	return b->ops->name;
}

static bool id_ok(const char *id, struct fabric_status *st)
{
	size_t n = id != NULL ? strnlen(id, FABRIC_ID_LEN) : 0;

	if (n == 0 || n >= FABRIC_ID_LEN || has_ctl(id) || strchr(id, '/') != NULL ||
	    strchr(id, '?') != NULL || strchr(id, '#') != NULL || strcmp(id, "..") == 0 ||
	    strcmp(id, ".") == 0) {
		fabric_status_msg(st, "invalid id");
		return false;
	}
	return true;
}

enum nv_err fabric_partition_list(struct fabric_backend *b, struct fabric_partition **out,
                                  size_t *n, struct fabric_status *st)
{
	fabric_status_reset(st);
	return b->ops->list(b->state, out, n, st);
}

enum nv_err fabric_partition_get(struct fabric_backend *b, const char *id,
                                 struct fabric_partition *out, struct fabric_status *st)
{
	fabric_status_reset(st);
	if (!id_ok(id, st))
		return NV_E_INVAL;
	return b->ops->get(b->state, id, out, st);
}

enum nv_err fabric_partition_find(struct fabric_backend *b, const char *name,
                                  struct fabric_partition *out, struct fabric_status *st)
{
	struct fabric_partition *all = NULL;
	size_t n = 0;
	enum nv_err err = fabric_partition_list(b, &all, &n, st);

	if (err != NV_OK)
		return err;
	err = NV_E_NOT_FOUND;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(all[i].name, name) == 0) {
			*out = all[i];
			err = NV_OK;
			break;
		}
	}
	free(all);
	return err;
}

static enum nv_err spec_ok(const struct fabric_partition_spec *s, struct fabric_status *st)
{
	if (s->name[0] == '\0' || has_ctl(s->name)) {
		fabric_status_msg(st, "spec.name: required, printable");
		return NV_E_INVAL;
	}
	if (s->n_gpus == 0 || s->n_gpus > FABRIC_GPUS_MAX) {
		fabric_status_msg(st, "spec: %zu member GPUs, expected 1..%d", s->n_gpus,
		                  FABRIC_GPUS_MAX);
		return NV_E_INVAL;
	}
	for (size_t i = 0; i < s->n_gpus; i++)
		for (size_t j = i + 1; j < s->n_gpus; j++)
			if (s->gpus[i].tray != 0 && s->gpus[i].tray == s->gpus[j].tray &&
			    s->gpus[i].module == s->gpus[j].module) {
				fabric_status_msg(st, "spec: tray %u module %u listed twice",
				                  s->gpus[i].tray, s->gpus[i].module);
				return NV_E_INVAL;
			}
	return NV_OK;
}

enum nv_err fabric_partition_create(struct fabric_backend *b,
                                    const struct fabric_partition_spec *spec, struct fabric_op *op,
                                    struct fabric_status *st)
{
	enum nv_err err;

	fabric_status_reset(st);
	err = spec_ok(spec, st);
	if (err != NV_OK)
		return err;
	err = b->ops->create(b->state, spec, op, st);
	if (err == NV_OK)
		log_info("fabric", "partition create requested",
		         "rack=%s partition=%s op=%s gpus=%zu", spec->rack, spec->name, op->id,
		         spec->n_gpus);
	return err;
}

enum nv_err fabric_partition_update(struct fabric_backend *b, const char *id,
                                    const struct fabric_partition_spec *spec, struct fabric_op *op,
                                    struct fabric_status *st)
{
	enum nv_err err;

	fabric_status_reset(st);
	if (!id_ok(id, st))
		return NV_E_INVAL;
	err = spec_ok(spec, st);
	if (err != NV_OK)
		return err;
	err = b->ops->update(b->state, id, spec, op, st);
	if (err == NV_OK)
		log_info("fabric", "partition update requested", "rack=%s partition=%s id=%s op=%s",
		         spec->rack, spec->name, id, op->id);
	return err;
}

enum nv_err fabric_partition_delete(struct fabric_backend *b, const char *id, struct fabric_op *op,
                                    struct fabric_status *st)
{
	enum nv_err err;

	fabric_status_reset(st);
	if (!id_ok(id, st))
		return NV_E_INVAL;
	err = b->ops->remove(b->state, id, op, st);
	if (err == NV_OK)
		log_info("fabric", "partition delete requested", "id=%s op=%s", id, op->id);
	return err;
}

enum nv_err fabric_op_poll(struct fabric_backend *b, const char *op_id, struct fabric_op *op,
                           struct fabric_status *st)
{
	fabric_status_reset(st);
	if (!id_ok(op_id, st))
		return NV_E_INVAL;
	return b->ops->poll(b->state, op_id, op, st);
}

static enum nv_err op_end(struct fabric_op *op, struct fabric_status *st)
{
	switch (op->state) {
	case FABRIC_OP_COMPLETED:
		return NV_OK;
	case FABRIC_OP_CANCELLED:
		fabric_status_msg(st, "operation %s was cancelled: %s", op->id, op->message);
		return NV_E_CANCELLED;
	default:
		fabric_status_msg(st, "operation %s failed: %s", op->id,
		                  op->message[0] ? op->message : "no reason given");
		return NV_E_STATE;
	}
}

enum nv_err fabric_op_wait(struct fabric_backend *b, struct fabric_op *op,
                           const volatile bool *stop, struct fabric_status *st)
{
	struct fabric_poll pl;
	char id[FABRIC_ID_LEN];
	enum nv_err err;

	fabric_poll_start(&pl, b->poll_interval_ms, b->poll_max_interval_ms, b->op_deadline_ms);
	str_copy(id, sizeof(id), op->id);
	for (;;) {
		struct fabric_op cur;
		if (!fabric_op_done(op->state)) {
			err = fabric_op_poll(b, id, &cur, st);
			if (err == NV_OK && cur.id[0] != '\0' && strcmp(cur.id, id) != 0) {
				log_info("fabric", "operation goes on as another", "op=%s next=%s",
				         id, cur.id);
				str_copy(id, sizeof(id), cur.id);
			}
			if (err == NV_OK)
				*op = cur;
			else if (!nv_err_retryable(err))
				return err;
			else
				log_warn("fabric", "operation poll failed, will retry",
				         "op=%s err=%s msg=\"%s\"", id, nv_err_name(err),
				         st != NULL ? st->message : "");
		}
		if (fabric_op_done(op->state)) {
			log_info("fabric", "operation ended", "op=%s state=%s", id,
			         fabric_op_state_name(op->state));
			return op_end(op, st);
		}
		err = fabric_poll_next(&pl, id, op->state, stop, st);
		if (err != NV_OK)
			return err;
	}
}

enum nv_err fabric_partition_clique(const struct fabric_partition *p, const char *cluster_uuid,
                                    char out[FABRIC_CLIQUE_LEN])
{
	int n;

	if (!p->has_partition_id)
		return NV_E_STATE;
	if (cluster_uuid == NULL || cluster_uuid[0] == '\0')
		return NV_E_INVAL;
	n = snprintf(out, FABRIC_CLIQUE_LEN, "%s.%u", cluster_uuid, (unsigned)p->partition_id);
	return n > 0 && n < FABRIC_CLIQUE_LEN ? NV_OK : NV_E_TOO_LARGE;
}
