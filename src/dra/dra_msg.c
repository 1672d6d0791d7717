// SPDX-License-Identifier: Apache-2.0
// Codecs of the kubelet's plugin messages (plugin registration and the DRA
// node service) on the hand-written protobuf wire codec. Field numbers are
// those of the Kubernetes 1.34 .proto files named in include/nvl72/dra.h.
#include "nvl72/dra.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"

/* Grows an array of n elements of size bytes so element n fits: capacity
 * doubles at every power of two, so a count is all that is kept. */
static void *dra_arr_grow(void *arr, size_t n, size_t size)
{
	if (n == 0 || (n & (n - 1)) == 0)
		arr = xreallocarray(arr, n ? n * 2 : 1, size);
	memset((char *)arr + n * size, 0, size);
	return arr;
}

static enum nv_err dra_room(struct pb_reader *r, const struct pb_field *f, const char *name,
                            size_t n)
{
	if (n < DRA_ITEMS_MAX)
		return NV_OK;
	return pb_reader_fail(r, f, name, NV_E_TOO_LARGE, "more than %d entries", DRA_ITEMS_MAX);
}

static enum nv_err dra_strs_add(struct pb_reader *r, const struct pb_field *f, const char *name,
                                char ***arr, size_t *n)
{
	char *s = NULL;
	enum nv_err rc = dra_room(r, f, name, *n);
	if (rc == NV_OK)
		rc = pb_field_str(r, f, name, DRA_STR_MAX, &s);
	if (rc != NV_OK)
		return rc;
	*arr = dra_arr_grow(*arr, *n, sizeof(**arr));
	(*arr)[(*n)++] = s;
	return NV_OK;
}

static void dra_strs_free(char **arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(arr[i]);
	free(arr);
}

static void dra_put_strs(struct pb_writer *w, uint32_t num, char *const *arr, size_t n)
{
	/* A repeated string keeps its empty entries: each is there by being
	 * written. */
	for (size_t i = 0; i < n; i++)
		pb_put_bytes(w, num, arr[i] ? arr[i] : "", arr[i] ? strlen(arr[i]) : 0);
}

/* The end of a decode loop: NV_E_NOT_FOUND from the reader is the clean end. */
static enum nv_err dra_done(enum nv_err rc)
{
	return rc == NV_E_NOT_FOUND ? NV_OK : rc;
}

/* ---- pluginregistration ----------------------------------------------------- */

void dra_plugin_info_clear(struct dra_plugin_info *m)
{
	free(m->type);
	free(m->name);
	free(m->endpoint);
	dra_strs_free(m->versions, m->n_versions);
	memset(m, 0, sizeof(*m));
}

enum nv_err dra_plugin_info_decode(const void *data, size_t len, struct dra_plugin_info *out,
                                   struct pb_err *e)
{
	struct pb_reader r;
	struct pb_field f;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, data, len, "PluginInfo", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK) {
		if (f.num == 1)
			rc = pb_field_str(&r, &f, "type", DRA_STR_MAX, &out->type);
		else if (f.num == 2)
			rc = pb_field_str(&r, &f, "name", DRA_STR_MAX, &out->name);
		else if (f.num == 3)
			rc = pb_field_str(&r, &f, "endpoint", DRA_STR_MAX, &out->endpoint);
		else if (f.num == 4)
			rc = dra_strs_add(&r, &f, "supported_versions", &out->versions,
			                  &out->n_versions);
		if (rc != NV_OK)
			break;
	}
	if ((rc = dra_done(rc)) != NV_OK)
		dra_plugin_info_clear(out);
	return rc;
}

enum nv_err dra_plugin_info_encode(const struct dra_plugin_info *m, struct buf *out)
{
	struct pb_writer w;
	pb_writer_init(&w, out);
	pb_put_str(&w, 1, m->type);
	pb_put_str(&w, 2, m->name);
	pb_put_str(&w, 3, m->endpoint);
	dra_put_strs(&w, 4, m->versions, m->n_versions);
	return pb_writer_done(&w);
}

void dra_reg_status_clear(struct dra_reg_status *m)
{
	free(m->error);
	memset(m, 0, sizeof(*m));
}

enum nv_err dra_reg_status_decode(const void *data, size_t len, struct dra_reg_status *out,
                                  struct pb_err *e)
{
	struct pb_reader r;
	struct pb_field f;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, data, len, "RegistrationStatus", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK) {
		if (f.num == 1)
			rc = pb_field_bool(&r, &f, "plugin_registered", &out->registered);
		else if (f.num == 2)
			rc = pb_field_str(&r, &f, "error", DRA_STR_MAX, &out->error);
		if (rc != NV_OK)
			break;
	}
	if ((rc = dra_done(rc)) != NV_OK)
		dra_reg_status_clear(out);
	return rc;
}

enum nv_err dra_reg_status_encode(const struct dra_reg_status *m, struct buf *out)
{
	struct pb_writer w;
	pb_writer_init(&w, out);
	pb_put_bool(&w, 1, m->registered);
	pb_put_str(&w, 2, m->error);
	return pb_writer_done(&w);
}

/* ---- dra.v1 requests -------------------------------------------------------- */

static void dra_claim_clear(struct dra_claim *c)
{
	free(c->ns);
	free(c->uid);
	free(c->name);
	memset(c, 0, sizeof(*c));
}

void dra_claims_req_clear(struct dra_claims_req *m)
{
	for (size_t i = 0; i < m->n_claims; i++)
		dra_claim_clear(&m->claims[i]);
	free(m->claims);
	memset(m, 0, sizeof(*m));
}

static enum nv_err dra_claim_decode(struct pb_reader *r, struct dra_claim *c)
{
	struct pb_field f;
	enum nv_err rc;
	while ((rc = pb_reader_next(r, &f)) == NV_OK) {
		if (f.num == 1)
			rc = pb_field_str(r, &f, "namespace", DRA_STR_MAX, &c->ns);
		else if (f.num == 2)
			rc = pb_field_str(r, &f, "uid", DRA_STR_MAX, &c->uid);
		else if (f.num == 3)
			rc = pb_field_str(r, &f, "name", DRA_STR_MAX, &c->name);
		if (rc != NV_OK)
			return rc;
	}
	return dra_done(rc);
}

enum nv_err dra_claims_req_decode(const void *data, size_t len, const char *msg,
                                  struct dra_claims_req *out, struct pb_err *e)
{
	struct pb_reader r, sub;
	struct pb_field f;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, data, len, msg ? msg : "NodePrepareResourcesRequest", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK) {
		if (f.num != 1)
			continue;
		if ((rc = dra_room(&r, &f, "claims", out->n_claims)) != NV_OK ||
		    (rc = pb_field_msg(&r, &f, "claims", "Claim", &sub)) != NV_OK)
			break;
		out->claims = dra_arr_grow(out->claims, out->n_claims, sizeof(*out->claims));
		rc = dra_claim_decode(&sub, &out->claims[out->n_claims++]);
		if (rc != NV_OK)
			break;
	}
	if ((rc = dra_done(rc)) != NV_OK)
		dra_claims_req_clear(out);
	return rc;
}

enum nv_err dra_claims_req_encode(const struct dra_claims_req *m, struct buf *out)
{
	struct pb_writer w;
	pb_writer_init(&w, out);
	for (size_t i = 0; i < m->n_claims; i++) {
		const struct dra_claim *c = &m->claims[i];
		size_t mark = pb_put_begin(&w, 1);
		pb_put_str(&w, 1, c->ns);
		pb_put_str(&w, 2, c->uid);
		pb_put_str(&w, 3, c->name);
		pb_put_end(&w, mark);
	}
	return pb_writer_done(&w);
}

/* ---- dra.v1 responses ------------------------------------------------------- */

static void dra_device_clear(struct dra_device *d)
{
	dra_strs_free(d->request_names, d->n_request_names);
	free(d->pool_name);
	free(d->device_name);
	dra_strs_free(d->cdi_device_ids, d->n_cdi_device_ids);
	memset(d, 0, sizeof(*d));
}

static void dra_prepare_result_clear(struct dra_prepare_result *p)
{
	free(p->uid);
	for (size_t i = 0; i < p->n_devices; i++)
		dra_device_clear(&p->devices[i]);
	free(p->devices);
	free(p->error);
	memset(p, 0, sizeof(*p));
}

void dra_prepare_resp_clear(struct dra_prepare_resp *m)
{
	for (size_t i = 0; i < m->n_claims; i++)
		dra_prepare_result_clear(&m->claims[i]);
	free(m->claims);
	memset(m, 0, sizeof(*m));
}

static enum nv_err dra_device_decode(struct pb_reader *r, struct dra_device *d)
{
	struct pb_field f;
	enum nv_err rc;
	while ((rc = pb_reader_next(r, &f)) == NV_OK) {
		if (f.num == 1)
			rc = dra_strs_add(r, &f, "request_names", &d->request_names,
			                  &d->n_request_names);
		else if (f.num == 2)
			rc = pb_field_str(r, &f, "pool_name", DRA_STR_MAX, &d->pool_name);
		else if (f.num == 3)
			rc = pb_field_str(r, &f, "device_name", DRA_STR_MAX, &d->device_name);
		else if (f.num == 4)
			rc = dra_strs_add(r, &f, "cdi_device_ids", &d->cdi_device_ids,
			                  &d->n_cdi_device_ids);
		if (rc != NV_OK)
			return rc;
	}
	return dra_done(rc);
}

/* NodePrepareResourceResponse: devices=1, error=2. */
static enum nv_err dra_prepare_result_decode(struct pb_reader *r, struct dra_prepare_result *p)
{
	struct pb_reader sub;
	struct pb_field f;
	enum nv_err rc;
	while ((rc = pb_reader_next(r, &f)) == NV_OK) {
		if (f.num == 1) {
			if ((rc = dra_room(r, &f, "devices", p->n_devices)) != NV_OK ||
			    (rc = pb_field_msg(r, &f, "devices", "Device", &sub)) != NV_OK)
				return rc;
			p->devices = dra_arr_grow(p->devices, p->n_devices, sizeof(*p->devices));
			rc = dra_device_decode(&sub, &p->devices[p->n_devices++]);
		} else if (f.num == 2) {
			rc = pb_field_str(r, &f, "error", DRA_STR_MAX, &p->error);
		}
		if (rc != NV_OK)
			return rc;
	}
	return dra_done(rc);
}

/* A map entry (key=1, value=2) of NodePrepareResourcesResponse.claims. The
 * value's fields go into res, which the caller clears; a value sent in
 * several pieces merges, as protobuf merges a message field. */
static enum nv_err dra_prepare_entry_decode(struct pb_reader *r, struct dra_prepare_result *res)
{
	struct pb_reader sub;
	struct pb_field f;
	enum nv_err rc;
	while ((rc = pb_reader_next(r, &f)) == NV_OK) {
		if (f.num == 1)
			rc = pb_field_str(r, &f, "key", DRA_STR_MAX, &res->uid);
		else if (f.num == 2 &&
		         (rc = pb_field_msg(r, &f, "value", "NodePrepareResourceResponse", &sub)) ==
		                 NV_OK)
			rc = dra_prepare_result_decode(&sub, res);
		if (rc != NV_OK)
			return rc;
	}
	return dra_done(rc);
}

/* The index of the entry with key uid (NULL and "" are the same key), or n. */
static size_t dra_key_find(const void *arr, size_t n, size_t size, size_t key_off, const char *uid)
{
	for (size_t i = 0; i < n; i++) {
		const char *k = *(char *const *)((const char *)arr + i * size + key_off);
		if (strcmp(k ? k : "", uid ? uid : "") == 0)
			return i;
	}
	return n;
}

enum nv_err dra_prepare_resp_decode(const void *data, size_t len, struct dra_prepare_resp *out,
                                    struct pb_err *e)
{
	struct pb_reader r, sub;
	struct pb_field f;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, data, len, "NodePrepareResourcesResponse", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK) {
		struct dra_prepare_result res = {0};
		if (f.num != 1)
			continue;
		if ((rc = pb_field_msg(&r, &f, "claims", "ClaimsEntry", &sub)) != NV_OK)
			break;
		if ((rc = dra_prepare_entry_decode(&sub, &res)) != NV_OK) {
			dra_prepare_result_clear(&res);
			break;
		}
		size_t i = dra_key_find(out->claims, out->n_claims, sizeof(*out->claims),
		                        offsetof(struct dra_prepare_result, uid), res.uid);
		if (i == out->n_claims && (rc = dra_room(&r, &f, "claims", i)) != NV_OK) {
			dra_prepare_result_clear(&res);
			break;
		}
		if (i == out->n_claims)
			out->claims = dra_arr_grow(out->claims, out->n_claims++, sizeof(res));
		else
			dra_prepare_result_clear(&out->claims[i]);
		out->claims[i] = res;
	}
	if ((rc = dra_done(rc)) != NV_OK)
		dra_prepare_resp_clear(out);
	return rc;
}

enum nv_err dra_prepare_resp_encode(const struct dra_prepare_resp *m, struct buf *out)
{
	struct pb_writer w;
	pb_writer_init(&w, out);
	for (size_t i = 0; i < m->n_claims; i++) {
		const struct dra_prepare_result *p = &m->claims[i];
		size_t entry = pb_put_begin(&w, 1);
		pb_put_str(&w, 1, p->uid);
		size_t value = pb_put_begin(&w, 2);
		for (size_t j = 0; j < p->n_devices; j++) {
			const struct dra_device *d = &p->devices[j];
			size_t dev = pb_put_begin(&w, 1);
			dra_put_strs(&w, 1, d->request_names, d->n_request_names);
			pb_put_str(&w, 2, d->pool_name);
			pb_put_str(&w, 3, d->device_name);
			dra_put_strs(&w, 4, d->cdi_device_ids, d->n_cdi_device_ids);
			pb_put_end(&w, dev);
		}
		pb_put_str(&w, 2, p->error);
		pb_put_end(&w, value);
		pb_put_end(&w, entry);
	}
	return pb_writer_done(&w);
}

static void dra_unprepare_result_clear(struct dra_unprepare_result *u)
{
	free(u->uid);
	free(u->error);
	memset(u, 0, sizeof(*u));
}

void dra_unprepare_resp_clear(struct dra_unprepare_resp *m)
{
	for (size_t i = 0; i < m->n_claims; i++)
		dra_unprepare_result_clear(&m->claims[i]);
	free(m->claims);
	memset(m, 0, sizeof(*m));
}

/* A map entry of NodeUnprepareResourcesResponse.claims: key=1, value=2
 * (NodeUnprepareResourceResponse{error=1}). */
static enum nv_err dra_unprepare_entry_decode(struct pb_reader *r, struct dra_unprepare_result *res)
{
	struct pb_reader sub;
	struct pb_field f, g;
	enum nv_err rc;
	while ((rc = pb_reader_next(r, &f)) == NV_OK) {
		if (f.num == 1) {
			rc = pb_field_str(r, &f, "key", DRA_STR_MAX, &res->uid);
		} else if (f.num == 2 &&
		           (rc = pb_field_msg(r, &f, "value", "NodeUnprepareResourceResponse",
		                              &sub)) == NV_OK) {
			while ((rc = pb_reader_next(&sub, &g)) == NV_OK)
				if (g.num == 1 && (rc = pb_field_str(&sub, &g, "error", DRA_STR_MAX,
				                                     &res->error)) != NV_OK)
					break;
			rc = dra_done(rc);
		}
		if (rc != NV_OK)
			return rc;
	}
	return dra_done(rc);
}

enum nv_err dra_unprepare_resp_decode(const void *data, size_t len, struct dra_unprepare_resp *out,
                                      struct pb_err *e)
{
	struct pb_reader r, sub;
	struct pb_field f;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	pb_reader_init(&r, data, len, "NodeUnprepareResourcesResponse", e);
	while ((rc = pb_reader_next(&r, &f)) == NV_OK) {
		struct dra_unprepare_result res = {0};
		if (f.num != 1)
			continue;
		if ((rc = pb_field_msg(&r, &f, "claims", "ClaimsEntry", &sub)) != NV_OK)
			break;
		if ((rc = dra_unprepare_entry_decode(&sub, &res)) != NV_OK) {
			dra_unprepare_result_clear(&res);
			break;
		}
		size_t i = dra_key_find(out->claims, out->n_claims, sizeof(*out->claims),
		                        offsetof(struct dra_unprepare_result, uid), res.uid);
		if (i == out->n_claims && (rc = dra_room(&r, &f, "claims", i)) != NV_OK) {
			dra_unprepare_result_clear(&res);
			break;
		}
		if (i == out->n_claims)
			out->claims = dra_arr_grow(out->claims, out->n_claims++, sizeof(res));
		else
			dra_unprepare_result_clear(&out->claims[i]);
		out->claims[i] = res;
	}
	if ((rc = dra_done(rc)) != NV_OK)
		dra_unprepare_resp_clear(out);
	return rc;
}

enum nv_err dra_unprepare_resp_encode(const struct dra_unprepare_resp *m, struct buf *out)
{
	struct pb_writer w;
	pb_writer_init(&w, out);
	for (size_t i = 0; i < m->n_claims; i++) {
		size_t entry = pb_put_begin(&w, 1);
		pb_put_str(&w, 1, m->claims[i].uid);
		size_t value = pb_put_begin(&w, 2);
		pb_put_str(&w, 1, m->claims[i].error);
		pb_put_end(&w, value);
		pb_put_end(&w, entry);
	}
	return pb_writer_done(&w);
}
