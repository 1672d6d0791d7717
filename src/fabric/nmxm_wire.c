// SPDX-License-Identifier: Apache-2.0
// The NMX-M wire format: request bodies for partition changes and the
// parsers of its answers (accepted operations, operations, partitions,
// chassis, error bodies). Pure functions on bounded input, fuzzed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fabric_int.h"

/* Answers larger than this are refused by the parsers themselves too. */
#define WIRE_MAX_BYTES ((size_t)64 << 20)
#define WIRE_MAX_DEPTH 32

static enum nv_err load(const char *data, size_t len, json_t **out, struct jx_err *e)
{
	struct jx_limits lim = {.max_bytes = WIRE_MAX_BYTES, .max_depth = WIRE_MAX_DEPTH};

	return jx_loadb(data, len, &lim, out, e);
}

/* Copies an optional string field; NV_E_INVAL when present but not a string
 * or too long for dst. */
static enum nv_err opt_str(const json_t *o, const char *key, char *dst, size_t dstsz,
                           struct jx_err *e)
{
	const char *s = NULL;
	enum nv_err err = jx_get_str(o, key, &s, e);

	if (err == NV_E_NOT_FOUND)
		return NV_OK;
	if (err != NV_OK)
		return err;
	if (str_copy(dst, dstsz, s) != NV_OK) {
		snprintf(e->msg, sizeof(e->msg), "%s: longer than %zu bytes", key, dstsz - 1);
		return NV_E_TOO_LARGE;
	}
	return NV_OK;
}

static enum nv_err req_str(const json_t *o, const char *key, char *dst, size_t dstsz,
                           struct jx_err *e)
{
	const char *s = NULL;
	enum nv_err err = jx_get_str(o, key, &s, e);

	if (err != NV_OK)
		return err == NV_E_NOT_FOUND ? NV_E_PARSE : err;
	if (s[0] == '\0') {
		snprintf(e->msg, sizeof(e->msg), "%s: empty", key);
		return NV_E_PARSE;
	}
	if (str_copy(dst, dstsz, s) != NV_OK) {
		snprintf(e->msg, sizeof(e->msg), "%s: longer than %zu bytes", key, dstsz - 1);
		return NV_E_TOO_LARGE;
	}
	return NV_OK;
}

enum nv_err nmxm_parse_accepted(const char *data, size_t len, struct fabric_op *op,
                                struct jx_err *e)
{
	struct fabric_op o;
	json_t *root = NULL;
	enum nv_err err = load(data, len, &root, e);

	if (err != NV_OK)
		return err;
	memset(&o, 0, sizeof(o));
	o.percent = -1;
	o.state = FABRIC_OP_PENDING;
	err = req_str(root, "operationId", o.id, sizeof(o.id), e);
	if (err == NV_OK)
		*op = o;
	json_decref(root);
	return err;
}

static enum nv_err op_status(const char *s, enum fabric_op_state *out)
{
	static const struct {
		const char *word;
		enum fabric_op_state st;
	} map[] = {
	        {"pending", FABRIC_OP_PENDING},     {"in-progress", FABRIC_OP_IN_PROGRESS},
	        {"completed", FABRIC_OP_COMPLETED}, {"failed", FABRIC_OP_FAILED},
	        {"cancelled", FABRIC_OP_CANCELLED},
	};

	for (size_t i = 0; i < ARRAY_LEN(map); i++) {
		if (strcasecmp(s, map[i].word) == 0) {
			*out = map[i].st;
			return NV_OK;
		}
	}
	return NV_E_PARSE;
}

/* Result.Data may be the partition made (an object with "ID") or its id. */
static void op_result(const json_t *res, struct fabric_op *o)
{
	const json_t *data = json_object_get(res, "Data");
	const char *err = jx_str_or(res, "Error", "");
	const char *det = jx_str_or(res, "Details", "");
	const char *id = NULL;

	if (json_is_string(data))
		id = json_string_value(data);
	else if (json_is_object(data))
		id = jx_str_or(data, "ID", NULL);
	if (id != NULL && id[0] != '\0' && strlen(id) < sizeof(o->partition_id))
		str_copy(o->partition_id, sizeof(o->partition_id), id);
	if (err[0] != '\0' || det[0] != '\0')
		snprintf(o->message, sizeof(o->message), "%s%s%s", err,
		         err[0] != '\0' && det[0] != '\0' ? ": " : "", det);
}

static enum nv_err op_from_json(const json_t *root, struct fabric_op *o, struct jx_err *e)
{
	const char *status = NULL;
	const json_t *pct, *res;
	enum nv_err err;

	memset(o, 0, sizeof(*o));
	o->percent = -1;
	if (!json_is_object(root)) {
		snprintf(e->msg, sizeof(e->msg), "operation: expected an object, got %s",
		         jx_type_name(root));
		return NV_E_PARSE;
	}
	err = req_str(root, "ID", o->id, sizeof(o->id), e);
	if (err != NV_OK)
		return err;
	err = jx_get_str(root, "Status", &status, e);
	if (err != NV_OK)
		return err == NV_E_NOT_FOUND ? NV_E_PARSE : err;
	if (op_status(status, &o->state) != NV_OK) {
		snprintf(e->msg, sizeof(e->msg), "Status: unknown value \"%.64s\"", status);
		return NV_E_PARSE;
	}
	pct = json_object_get(root, "Percentage");
	if (json_is_number(pct)) {
		double v = json_number_value(pct);
		o->percent = v >= 0 && v <= 100 ? (int)v : -1;
	}
	err = opt_str(root, "CurrentStep", o->message, sizeof(o->message), e);
	if (err == NV_E_TOO_LARGE)
		err = NV_OK; /* a long step description is only cut */
	if (err != NV_OK)
		return err;
	res = json_object_get(root, "Result");
	if (json_is_object(res))
		op_result(res, o);
	return NV_OK;
}

enum nv_err nmxm_parse_operation(const char *data, size_t len, struct fabric_op *op,
                                 struct jx_err *e)
{
	struct fabric_op o;
	json_t *root = NULL;
	enum nv_err err = load(data, len, &root, e);

	if (err != NV_OK)
		return err;
	err = op_from_json(root, &o, e);
	if (err == NV_OK)
		*op = o;
	json_decref(root);
	return err;
}

static enum fabric_health health_of(const char *s)
{
	static const struct {
		const char *word;
		enum fabric_health h;
	} map[] = {
	        {"HEALTHY", FABRIC_HEALTH_HEALTHY},
	        {"DEGRADED", FABRIC_HEALTH_DEGRADED},
	        {"DEGRADED_BANDWIDTH", FABRIC_HEALTH_DEGRADED_BANDWIDTH},
	        {"UNHEALTHY", FABRIC_HEALTH_UNHEALTHY},
	        {"NEW", FABRIC_HEALTH_NEW},
	};

	for (size_t i = 0; s != NULL && i < ARRAY_LEN(map); i++)
		if (strcmp(s, map[i].word) == 0)
			return map[i].h;
	return FABRIC_HEALTH_UNKNOWN;
}

static enum nv_err member_loc(const json_t *m, struct fabric_gpu *g, struct jx_err *e)
{
	int64_t slot = 0, host = 0, dev = 0;
	enum nv_err err;

	err = jx_get_int(m, "SlotID", 0, 0xffff, &slot, e);
	if (err == NV_OK)
		err = jx_get_int(m, "HostID", 0, 0xffff, &host, e);
	if (err == NV_OK)
		err = jx_get_int(m, "DeviceID", 0, 0xffff, &dev, e);
	if (err != NV_OK)
		return err == NV_E_NOT_FOUND ? NV_E_PARSE : err;
	g->slot = (unsigned)slot;
	g->host_id = (unsigned)host;
	g->module = (unsigned)dev;
	return NV_OK;
}

/* Members: an array of GPU id strings or of location objects; an object
 * wrapping such an array under "locations", "ids" or "gpus" is accepted too. */
static enum nv_err members_from_json(const json_t *mem, struct fabric_partition *p,
                                     struct jx_err *e)
{
	static const char *const wrap[] = {"locations", "ids", "gpus"};
	size_t i;
	json_t *m;

	if (json_is_object(mem)) {
		const json_t *inner = NULL;
		for (i = 0; i < ARRAY_LEN(wrap) && inner == NULL; i++)
			inner = json_object_get(mem, wrap[i]);
		mem = inner;
	}
	if (mem == NULL || json_is_null(mem))
		return NV_OK;
	if (!json_is_array(mem)) {
		snprintf(e->msg, sizeof(e->msg), "Members: expected an array, got %s",
		         jx_type_name(mem));
		return NV_E_PARSE;
	}
	if (json_array_size(mem) > FABRIC_GPUS_MAX) {
		snprintf(e->msg, sizeof(e->msg), "Members: more than %d GPUs", FABRIC_GPUS_MAX);
		return NV_E_TOO_LARGE;
	}
	json_array_foreach(mem, i, m) {
		struct fabric_gpu *g = &p->gpus[p->n_gpus];
		memset(g, 0, sizeof(*g));
		if (json_is_string(m)) {
			if (str_copy(g->uuid, sizeof(g->uuid), json_string_value(m)) != NV_OK) {
				snprintf(e->msg, sizeof(e->msg), "Members[%zu]: id too long", i);
				return NV_E_TOO_LARGE;
			}
			p->kind = FABRIC_MEMBERS_GPU_ID;
		} else if (json_is_object(m)) {
			enum nv_err err = member_loc(m, g, e);
			const char *dom = jx_str_or(m, "DomainUUID", "");
			if (err != NV_OK)
				return err;
			if (p->domain_uuid[0] == '\0' && strlen(dom) < sizeof(p->domain_uuid))
				str_copy(p->domain_uuid, sizeof(p->domain_uuid), dom);
			p->kind = FABRIC_MEMBERS_LOCATION;
		} else {
			snprintf(e->msg, sizeof(e->msg),
			         "Members[%zu]: expected a string or object", i);
			return NV_E_PARSE;
		}
		p->n_gpus++;
	}
	return NV_OK;
}

enum nv_err nmxm_partition_from_json(const json_t *o, struct fabric_partition *p, struct jx_err *e)
{
	int64_t pid = 0;
	const char *type;
	enum nv_err err;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(o)) {
		snprintf(e->msg, sizeof(e->msg), "partition: expected an object, got %s",
		         jx_type_name(o));
		return NV_E_PARSE;
	}
	err = req_str(o, "ID", p->id, sizeof(p->id), e);
	if (err == NV_OK)
		err = opt_str(o, "Name", p->name, sizeof(p->name), e);
	if (err != NV_OK)
		return err;
	err = jx_get_int(o, "PartitionID", 0, UINT32_MAX, &pid, e);
	if (err == NV_OK) {
		p->has_partition_id = true;
		p->partition_id = (uint32_t)pid;
	} else if (err != NV_E_NOT_FOUND) {
		return err;
	}
	p->health = health_of(jx_str_or(o, "Health", NULL));
	type = jx_str_or(o, "Type", "");
	p->kind = strcmp(type, "ID_BASED") == 0 ? FABRIC_MEMBERS_GPU_ID : FABRIC_MEMBERS_LOCATION;
	return members_from_json(json_object_get(o, "Members"), p, e);
}

/* A JSON array of at most max elements of size bytes each, every element
 * parsed by item into a zeroed array with one spare slot. An element's
 * error is prefixed "<label>[i]: ". */
typedef enum nv_err (*item_fn)(const json_t *o, void *dst, struct jx_err *e);

static enum nv_err parse_array(const char *data, size_t len, const char *what, const char *label,
                               size_t max, size_t size, item_fn item, void **out, size_t *n,
                               struct jx_err *e)
{
	char *all = NULL;
	json_t *root = NULL, *o;
	enum nv_err err = load(data, len, &root, e);
	size_t i;

	if (err != NV_OK)
		return err;
	if (!json_is_array(root)) {
		snprintf(e->msg, sizeof(e->msg), "%s: expected an array, got %s", what,
		         jx_type_name(root));
		err = NV_E_PARSE;
		goto out;
	}
	if (json_array_size(root) > max) {
		snprintf(e->msg, sizeof(e->msg), "%s: more than %zu", what, max);
		err = NV_E_TOO_LARGE;
		goto out;
	}
	all = xcalloc(json_array_size(root) + 1, size);
	json_array_foreach(root, i, o) {
		err = item(o, all + i * size, e);
		if (err != NV_OK) {
			char inner[sizeof(e->msg) - 32];
			str_copy(inner, sizeof(inner), e->msg);
			snprintf(e->msg, sizeof(e->msg), "%s[%zu]: %s", label, i, inner);
			goto out;
		}
	}
	*out = all;
	*n = json_array_size(root);
	all = NULL;
out:
	free(all);
	json_decref(root);
	return err;
}

static enum nv_err partition_item(const json_t *o, void *dst, struct jx_err *e)
{
	return nmxm_partition_from_json(o, dst, e);
}

enum nv_err nmxm_parse_partition_list(const char *data, size_t len, struct fabric_partition **out,
                                      size_t *n, struct jx_err *e)
{
	void *all = NULL;
	enum nv_err err = parse_array(data, len, "partitions", "", FABRIC_PARTITIONS_MAX,
	                              sizeof(struct fabric_partition), partition_item, &all, n, e);

	if (err == NV_OK)
		*out = all;
	return err;
}

enum nv_err nmxm_parse_chassis_id(const char *data, size_t len, const char *serial, long *out,
                                  struct jx_err *e)
{
	json_t *root = NULL, *c;
	enum nv_err err = load(data, len, &root, e);
	size_t i;

	if (err != NV_OK)
		return err;
	err = NV_E_NOT_FOUND;
	snprintf(e->msg, sizeof(e->msg), "no chassis with serial number %.32s", serial);
	if (!json_is_array(root)) {
		snprintf(e->msg, sizeof(e->msg), "chassis: expected an array, got %s",
		         jx_type_name(root));
		err = NV_E_PARSE;
		goto out;
	}
	json_array_foreach(root, i, c) {
		int64_t id;
		if (strcmp(jx_str_or(c, "SerialNumber", ""), serial) != 0)
			continue;
		err = jx_get_int(c, "InternalID", 0, INT32_MAX, &id, e);
		if (err == NV_OK)
			*out = (long)id;
		else if (err == NV_E_NOT_FOUND)
			err = NV_E_PARSE;
		break;
	}
out:
	json_decref(root);
	return err;
}

/* LocationInfo's integer ids; absent ones stay as they are. */
static enum nv_err gpu_location(const json_t *loc, struct nmxm_gpu *g, struct jx_err *e)
{
	int64_t v;
	enum nv_err err;

	if (loc == NULL || json_is_null(loc))
		return NV_OK;
	if (!json_is_object(loc)) {
		snprintf(e->msg, sizeof(e->msg), "LocationInfo: expected an object, got %s",
		         jx_type_name(loc));
		return NV_E_PARSE;
	}
	if ((err = jx_get_int(loc, "ChassisID", 0, INT32_MAX, &v, e)) == NV_OK)
		g->chassis_id = (long)v;
	else if (err != NV_E_NOT_FOUND)
		return err;
	if ((err = jx_get_int(loc, "SlotID", 0, 0xffff, &v, e)) == NV_OK)
		g->slot = (unsigned)v;
	else if (err != NV_E_NOT_FOUND)
		return err;
	if ((err = jx_get_int(loc, "HostID", 0, 0xffff, &v, e)) == NV_OK)
		g->host_id = (unsigned)v;
	else if (err != NV_E_NOT_FOUND)
		return err;
	return NV_OK;
}

static enum nv_err gpu_from_json(const json_t *o, struct nmxm_gpu *g, struct jx_err *e)
{
	int64_t dev;
	enum nv_err err;

	memset(g, 0, sizeof(*g));
	g->chassis_id = -1;
	if (!json_is_object(o)) {
		snprintf(e->msg, sizeof(e->msg), "gpu: expected an object, got %s",
		         jx_type_name(o));
		return NV_E_PARSE;
	}
	err = req_str(o, "ID", g->id, sizeof(g->id), e);
	if (err == NV_OK)
		err = opt_str(o, "DomainUUID", g->domain_uuid, sizeof(g->domain_uuid), e);
	if (err == NV_OK)
		err = gpu_location(json_object_get(o, "LocationInfo"), g, e);
	if (err != NV_OK)
		return err;
	err = jx_get_int(o, "DeviceID", 0, 0xffff, &dev, e);
	if (err == NV_OK)
		g->device = (unsigned)dev;
	return err == NV_E_NOT_FOUND ? NV_OK : err;
}

static enum nv_err gpu_item(const json_t *o, void *dst, struct jx_err *e)
{
	return gpu_from_json(o, dst, e);
}

enum nv_err nmxm_parse_gpu_list(const char *data, size_t len, struct nmxm_gpu **out, size_t *n,
                                struct jx_err *e)
{
	void *all = NULL;
	enum nv_err err = parse_array(data, len, "gpus", "gpus", NMXM_GPUS_MAX,
	                              sizeof(struct nmxm_gpu), gpu_item, &all, n, e);

	if (err == NV_OK)
		*out = all;
	return err;
}

static const char *err_field(const json_t *o)
{
	static const char *const keys[] = {"message", "Message", "detail", "Details",
	                                   "error",   "Error",   "title"};

	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		const json_t *v = json_object_get(o, keys[i]);
		if (json_is_string(v) && json_string_length(v) > 0)
			return json_string_value(v);
		if (json_is_object(v)) {
			const char *inner = err_field(v);
			if (inner != NULL)
				return inner;
		}
	}
	return NULL;
}

/* Printable ASCII only, runs of space squeezed, so a message is one line. */
static void clean_copy(char *out, size_t outsz, const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len && n + 1 < outsz; i++) {
		char c = s[i];
		if (c < 0x20 || c > 0x7e)
			c = ' ';
		if (c == ' ' && (n == 0 || out[n - 1] == ' '))
			continue;
		out[n++] = c;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}

void nmxm_error_message(const char *data, size_t len, char *out, size_t outsz)
{
	json_t *root = NULL;
	struct jx_err e;
	const char *msg = NULL;

	if (outsz == 0)
		return;
	out[0] = '\0';
	if (data == NULL || len == 0)
		return;
	if (load(data, len, &root, &e) == NV_OK && json_is_object(root))
		msg = err_field(root);
	if (msg != NULL)
		clean_copy(out, outsz, msg, strlen(msg));
	else
		clean_copy(out, outsz < 201 ? outsz : 201, data, len);
	json_decref(root);
}

json_t *nmxm_render_members(const struct fabric_partition_spec *s, long chassis_id, bool with_name)
{
	json_t *body = json_object(), *mem = json_array();

	for (size_t i = 0; i < s->n_gpus; i++) {
		const struct fabric_gpu *g = &s->gpus[i];
		if (s->kind == FABRIC_MEMBERS_GPU_ID) {
			json_array_append_new(mem, json_string(g->uuid));
			continue;
		}
		json_array_append_new(
		        mem, json_pack("{s:s, s:I, s:I, s:I, s:I}", "DomainUUID", s->domain_uuid,
		                       "ChassisID", (json_int_t)chassis_id, "SlotID",
		                       (json_int_t)g->slot, "HostID", (json_int_t)g->host_id,
		                       "DeviceID", (json_int_t)g->module));
	}
	if (with_name)
		json_object_set_new(body, "Name", json_string(s->name));
	json_object_set_new(body, "Members", mem);
	return body;
}

json_t *nmxm_render_ids(const char (*ids)[FABRIC_ID_LEN], size_t n)
{
	json_t *mem = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(mem, json_string(ids[i]));
	return json_pack("{s:o}", "Members", mem);
}
