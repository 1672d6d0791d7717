// SPDX-License-Identifier: Apache-2.0
// The NMX-M backend: a small REST client on one reused curl handle that
// creates, changes and deletes NVLink partitions and polls the operations
// NMX-M answers with. TLS is verified unless told otherwise; credentials
// live in one wiped header and never reach a log line.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "fabric_int.h"

#define LOCATION_MAX 512
#define RETRY_CAP_MS 30000
/* Marks an operation id of ours: once NMX-M's operation behind it
 * completed, GPUs left in no partition go back to the default one. */
#define RESTORE_PREFIX "restore:"

struct nmxm {
	CURL *easy;
	pthread_mutex_t mu;      /* one request at a time on the handle */
	char base[512];          /* endpoint without a trailing '/' */
	struct curl_slist *hdrs; /* Accept, Content-Type, Authorization */
	char *ca_pem;            /* owned copy; NULL: system CAs */
	size_t ca_pem_len;
	bool insecure;
	long connect_timeout_ms, request_timeout_ms, retry_base_ms;
	int retries;
	struct buf resp; /* the last response body, capped */
	bool too_large;
	char location[LOCATION_MAX]; /* the last Location header */
	int retry_after_s;           /* the last Retry-After, -1 none */
	CURLcode last_cc;            /* of the last attempt */
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct nmxm *s = ud;
	size_t n = size * nmemb;

	if (buf_append(&s->resp, ptr, n) != NV_OK) {
		s->too_large = true;
		return 0;
	}
	return n;
}

static bool hdr_value(const char *line, size_t n, const char *name, const char **v, size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return false;
	*v = line + k + 1;
	*vlen = n - k - 1;
	while (*vlen > 0 && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*vlen)--;
	}
	while (*vlen > 0 &&
	       ((*v)[*vlen - 1] == '\r' || (*v)[*vlen - 1] == '\n' || (*v)[*vlen - 1] == ' '))
		(*vlen)--;
	return true;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
	struct nmxm *s = ud;
	size_t n = size * nmemb, vlen = 0;
	const char *v = NULL;
	int64_t secs;

	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		s->location[0] = '\0';
		s->retry_after_s = -1;
	} else if (hdr_value(line, n, "Location", &v, &vlen) && vlen < sizeof(s->location)) {
		memcpy(s->location, v, vlen);
		s->location[vlen] = '\0';
	} else if (hdr_value(line, n, "Retry-After", &v, &vlen) &&
	           parse_i64_n(v, vlen, 0, 3600, &secs) == NV_OK) {
		s->retry_after_s = (int)secs;
	}
	return n;
}

/* "Authorization: Basic base64(user:pass)" or "Bearer token"; the caller
 * wipes and frees it. */
static char *auth_header(const struct fabric_config *c)
{
	if (c->token != NULL)
		return xasprintf("Authorization: Bearer %s", c->token);
	size_t ul = strlen(c->username), pl = strlen(c->password), rawlen = ul + 1 + pl;
	unsigned char *raw = xmalloc(rawlen + 1);
	size_t enclen = 4 * ((rawlen + 2) / 3) + 1;
	char *enc = xmalloc(enclen), *h;

	memcpy(raw, c->username, ul);
	raw[ul] = ':';
	memcpy(raw + ul + 1, c->password, pl);
	EVP_EncodeBlock((unsigned char *)enc, raw, (int)rawlen);
	h = xasprintf("Authorization: Basic %s", enc);
	secure_wipe(raw, rawlen);
	secure_wipe(enc, enclen);
	free(raw);
	free(enc);
	return h;
}

static void nmxm_close(void *state)
{
	struct nmxm *s = state;

	if (s == NULL)
		return;
	if (s->easy != NULL)
		curl_easy_cleanup(s->easy);
	for (struct curl_slist *h = s->hdrs; h != NULL; h = h->next)
		secure_wipe(h->data, strlen(h->data));
	curl_slist_free_all(s->hdrs);
	if (s->ca_pem != NULL) {
		secure_wipe(s->ca_pem, s->ca_pem_len);
		free(s->ca_pem);
	}
	buf_clear(&s->resp);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static enum nv_err nmxm_open(const struct fabric_config *c, void **state, struct fabric_status *st)
{
	struct nmxm *s = xcalloc(1, sizeof(*s));
	char *auth;
	size_t n;

	pthread_once(&curl_once, curl_init_once);
	pthread_mutex_init(&s->mu, NULL);
	s->easy = curl_easy_init();
	if (s->easy == NULL) {
		log_error("fabric", "curl_easy_init failed; out of memory", NULL);
		abort();
	}
	str_copy(s->base, sizeof(s->base), c->endpoint);
	n = strlen(s->base);
	while (n > 0 && s->base[n - 1] == '/')
		s->base[--n] = '\0';
	if (c->ca_pem != NULL) {
		s->ca_pem = xmalloc(c->ca_pem_len + 1);
		memcpy(s->ca_pem, c->ca_pem, c->ca_pem_len);
		s->ca_pem[c->ca_pem_len] = '\0';
		s->ca_pem_len = c->ca_pem_len;
	}
	s->insecure = c->insecure_skip_verify;
	s->connect_timeout_ms = c->connect_timeout_ms;
	s->request_timeout_ms = c->request_timeout_ms;
	s->retry_base_ms = c->retry_base_ms;
	s->retries = c->retries;
	buf_init(&s->resp, c->max_body);
	s->hdrs = curl_slist_append(NULL, "Accept: application/json");
	s->hdrs = curl_slist_append(s->hdrs, "Content-Type: application/json");
	auth = auth_header(c);
	s->hdrs = curl_slist_append(s->hdrs, auth);
	secure_free_str(auth);
	if (s->hdrs == NULL) {
		log_error("fabric", "curl_slist_append failed; out of memory", NULL);
		abort();
	}
	if (s->insecure)
		log_warn("fabric", "NMX-M TLS verification is off", "endpoint=%s", s->base);
	(void)st;
	*state = s;
	return NV_OK;
}

static enum nv_err map_http(long code)
{
	switch (code) {
	case 400:
		return NV_E_INVAL;
	case 401:
		return NV_E_UNAUTHORIZED;
	case 403:
		return NV_E_FORBIDDEN;
	case 404:
		return NV_E_NOT_FOUND;
	case 409:
		return NV_E_CONFLICT;
	case 422:
		return NV_E_INVALID_OBJECT;
	case 429:
		return NV_E_THROTTLED;
	default:
		return code >= 500 && code <= 599 ? NV_E_SERVER : NV_E_HTTP;
	}
}

static enum nv_err map_curl(CURLcode cc, bool too_large)
{
	switch (cc) {
	case CURLE_OK:
		return NV_OK;
	case CURLE_WRITE_ERROR:
		return too_large ? NV_E_TOO_LARGE : NV_E_TRANSPORT;
	case CURLE_OPERATION_TIMEDOUT:
		return NV_E_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_USE_SSL_FAILED:
		return NV_E_TLS;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return NV_E_CONFIG;
	default:
		return NV_E_TRANSPORT;
	}
}

static void setup(struct nmxm *s, const char *method, const char *url, const char *body)
{
	CURL *e = s->easy;

	curl_easy_reset(e); /* keeps the connection cache */
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->hdrs);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "nvl72-operator/" NVL72_VERSION);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, s->request_timeout_ms);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, s->insecure ? 0L : 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, s->insecure ? 0L : 2L);
	if (s->ca_pem != NULL) {
		struct curl_blob blob = {
		        .data = s->ca_pem, .len = s->ca_pem_len, .flags = CURL_BLOB_NOCOPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body != NULL ? body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)(body != NULL ? strlen(body) : 0));
	}
}

/* One attempt. *code is the HTTP status (0 when none came). */
static enum nv_err try_once(struct nmxm *s, const char *method, const char *url, const char *body,
                            long *code, struct fabric_status *st)
{
	CURLcode cc;
	enum nv_err err;

	buf_reset(&s->resp);
	s->too_large = false;
	s->errbuf[0] = '\0';
	*code = 0;
	setup(s, method, url, body);
	cc = curl_easy_perform(s->easy);
	s->last_cc = cc;
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, code);
	err = map_curl(cc, s->too_large);
	if (err == NV_E_TOO_LARGE)
		fabric_status_msg(st, "response larger than %zu bytes", s->resp.max);
	else if (err != NV_OK)
		fabric_status_msg(st, "%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(cc));
	return err;
}

/* Whether a failed attempt may be sent again. A POST (create) is repeated
 * only when the server cannot have acted on it: no connection was made, or
 * it answered 429 or 503; otherwise a retry could make a second partition. */
static bool may_retry(const struct nmxm *s, const char *method, enum nv_err err, long code)
{
	bool post = strcmp(method, "POST") == 0;
	bool unsent =
	        s->last_cc == CURLE_COULDNT_CONNECT || s->last_cc == CURLE_COULDNT_RESOLVE_HOST;

	if (err == NV_E_TRANSPORT || err == NV_E_TIMEOUT)
		return !post || unsent;
	if (err == NV_E_THROTTLED)
		return true;
	if (err == NV_E_SERVER)
		return !post || code == 503;
	return false;
}

/* Sends a request with retries and maps the answer. The body stays in
 * s->resp for the caller. want is the success status (200 or 202). */
static enum nv_err request(struct nmxm *s, const char *method, const char *path, const char *body,
                           long want, struct fabric_status *st)
{
	char url[1024];
	long code = 0;
	enum nv_err err;

	if (snprintf(url, sizeof(url), "%s%s", s->base, path) >= (int)sizeof(url)) {
		fabric_status_msg(st, "URL too long");
		return NV_E_TOO_LARGE;
	}
	for (int attempt = 0;; attempt++) {
		if (st != NULL)
			st->attempts = attempt + 1;
		err = try_once(s, method, url, body, &code, st);
		if (st != NULL)
			st->http_code = code;
		if (err == NV_OK && (code == want || (want == 202 && (code == 200 || code == 201))))
			break;
		if (err == NV_OK) {
			err = map_http(code);
			char msg[FABRIC_MSG_LEN];
			nmxm_error_message(s->resp.data, s->resp.len, msg, sizeof(msg));
			fabric_status_msg(st, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
		}
		log_debug("fabric", "NMX-M request failed",
		          "method=%s path=%s code=%ld err=%s try=%d", method, path, code,
		          nv_err_name(err), attempt + 1);
		if (attempt >= s->retries || !may_retry(s, method, err, code))
			break;
		int64_t wait = s->retry_base_ms << (attempt < 16 ? attempt : 16);
		if (s->retry_after_s >= 0 && (int64_t)s->retry_after_s * 1000 > wait)
			wait = (int64_t)s->retry_after_s * 1000;
		time_sleep_ms(wait < RETRY_CAP_MS ? wait : RETRY_CAP_MS);
	}
	log_debug("fabric", "NMX-M request", "method=%s path=%s code=%ld err=%s", method, path,
	          code, nv_err_name(err));
	return err;
}

static enum nv_err parse_fail(enum nv_err err, const char *what, const struct jx_err *e,
                              struct fabric_status *st)
{
	fabric_status_msg(st, "NMX-M %s answer: %s", what, e->msg);
	return err == NV_E_TOO_LARGE ? NV_E_TOO_LARGE : NV_E_PARSE;
}

/* GET /nmx/v1/partitions; the caller holds the mutex. */
static enum nv_err parts_fetch(struct nmxm *s, struct fabric_partition **out, size_t *n,
                               struct fabric_status *st)
{
	struct jx_err e;
	enum nv_err err = request(s, "GET", "/nmx/v1/partitions", NULL, 200, st);

	if (err == NV_OK) {
		err = nmxm_parse_partition_list(buf_str(&s->resp), s->resp.len, out, n, &e);
		if (err != NV_OK)
			err = parse_fail(err, "partition list", &e, st);
	}
	return err;
}

/* GET /nmx/v1/gpus; the caller holds the mutex. */
static enum nv_err gpus_fetch(struct nmxm *s, struct nmxm_gpu **out, size_t *n,
                              struct fabric_status *st)
{
	struct jx_err e;
	enum nv_err err = request(s, "GET", "/nmx/v1/gpus", NULL, 200, st);

	if (err == NV_OK) {
		err = nmxm_parse_gpu_list(buf_str(&s->resp), s->resp.len, out, n, &e);
		if (err != NV_OK)
			err = parse_fail(err, "GPU list", &e, st);
	}
	return err;
}

static enum nv_err nmxm_list(void *state, struct fabric_partition **out, size_t *n,
                             struct fabric_status *st)
{
	struct nmxm *s = state;
	enum nv_err err;

	pthread_mutex_lock(&s->mu);
	err = parts_fetch(s, out, n, st);
	pthread_mutex_unlock(&s->mu);
	return err;
}

static enum nv_err id_path(char *out, size_t outsz, const char *prefix, const char *id,
                           struct nmxm *s)
{
	char *esc = curl_easy_escape(s->easy, id, 0);
	int n;

	if (esc == NULL)
		return NV_E_INVAL;
	n = snprintf(out, outsz, "%s/%s", prefix, esc);
	curl_free(esc);
	return n > 0 && (size_t)n < outsz ? NV_OK : NV_E_TOO_LARGE;
}

static enum nv_err nmxm_get(void *state, const char *id, struct fabric_partition *out,
                            struct fabric_status *st)
{
	struct nmxm *s = state;
	char path[512];
	json_t *root = NULL;
	struct jx_err e;
	enum nv_err err;

	pthread_mutex_lock(&s->mu);
	err = id_path(path, sizeof(path), "/nmx/v1/partitions", id, s);
	if (err == NV_OK)
		err = request(s, "GET", path, NULL, 200, st);
	if (err == NV_OK) {
		struct jx_limits lim = {.max_bytes = s->resp.max, .max_depth = 32};
		err = jx_loadb(buf_str(&s->resp), s->resp.len, &lim, &root, &e);
		if (err == NV_OK)
			err = nmxm_partition_from_json(root, out, &e);
		if (err != NV_OK)
			err = parse_fail(err, "partition", &e, st);
	}
	pthread_mutex_unlock(&s->mu);
	json_decref(root);
	return err;
}

/* After a 202: the operation id from the body, or the Location header. */
static enum nv_err accepted(struct nmxm *s, struct fabric_op *op, struct fabric_status *st)
{
	struct jx_err e;
	enum nv_err err = nmxm_parse_accepted(buf_str(&s->resp), s->resp.len, op, &e);
	const char *slash = strrchr(s->location, '/');

	if (err == NV_OK)
		return NV_OK;
	if (slash != NULL && strstr(s->location, "/operations/") != NULL && slash[1] != '\0' &&
	    strlen(slash + 1) < sizeof(op->id)) {
		memset(op, 0, sizeof(*op));
		op->percent = -1;
		str_copy(op->id, sizeof(op->id), slash + 1);
		return NV_OK;
	}
	return parse_fail(err, "accepted", &e, st);
}

static bool ascii_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* Checks what NMX-M needs of a spec that the generic checks do not. */
static enum nv_err spec_check(const struct fabric_partition_spec *spec, struct fabric_status *st)
{
	if (!ascii_ok(spec->name) || !ascii_ok(spec->domain_uuid)) {
		fabric_status_msg(st, "spec: name and domain must be printable ASCII");
		return NV_E_INVAL;
	}
	for (size_t i = 0; i < spec->n_gpus; i++) {
		const struct fabric_gpu *g = &spec->gpus[i];
		if (g->slot == 0 || g->module == 0) {
			fabric_status_msg(st, "spec: GPU %zu (tray %u) has no slot/module", i,
			                  g->tray);
			return NV_E_INVAL;
		}
	}
	if (spec->kind == FABRIC_MEMBERS_LOCATION && spec->domain_uuid[0] == '\0') {
		fabric_status_msg(st, "spec: location members need the domain UUID");
		return NV_E_INVAL;
	}
	if (spec->kind == FABRIC_MEMBERS_LOCATION && spec->chassis_id < 0 &&
	    (spec->chassis_serial[0] == '\0' || !ascii_ok(spec->chassis_serial))) {
		fabric_status_msg(st, "spec: location members need a chassis id or serial");
		return NV_E_INVAL;
	}
	return NV_OK;
}

/* The chassis id for location members: given, or looked up by serial. */
static enum nv_err chassis_id(struct nmxm *s, const struct fabric_partition_spec *spec, long *out,
                              struct fabric_status *st)
{
	struct jx_err e;
	enum nv_err err;

	if (spec->kind != FABRIC_MEMBERS_LOCATION || spec->chassis_id >= 0) {
		*out = spec->chassis_id;
		return NV_OK;
	}
	err = request(s, "GET", "/nmx/v1/chassis", NULL, 200, st);
	if (err != NV_OK)
		return err;
	err = nmxm_parse_chassis_id(buf_str(&s->resp), s->resp.len, spec->chassis_serial, out, &e);
	if (err == NV_E_NOT_FOUND)
		fabric_status_msg(st, "%s", e.msg);
	else if (err != NV_OK)
		err = parse_fail(err, "chassis list", &e, st);
	return err;
}

/* What NMX-M has now: its partitions and GPUs, and the GPU at each place
 * of a spec (member[i] for spec->gpus[i]). */
struct plan {
	struct fabric_partition *parts;
	size_t nparts;
	struct nmxm_gpu *gpus;
	size_t ngpus;
	const struct nmxm_gpu *member[FABRIC_GPUS_MAX];
	size_t nmember;
};

static void plan_free(struct plan *p)
{
	free(p->parts);
	free(p->gpus);
	memset(p, 0, sizeof(*p));
}

static const struct nmxm_gpu *plan_gpu_of(const struct plan *p, const struct fabric_partition *part,
                                          const struct fabric_gpu *m);

/* Domain UUIDs compare equal when either side does not give one. */
static bool same_domain(const char *a, const char *b)
{
	return a[0] == '\0' || b[0] == '\0' || strcasecmp(a, b) == 0;
}

/* The domain of a partition: its first member's that NMX-M lists; "". */
static const char *part_domain(const struct plan *p, const struct fabric_partition *part)
{
	for (size_t i = 0; i < part->n_gpus; i++) {
		const struct nmxm_gpu *g = plan_gpu_of(p, part, &part->gpus[i]);
		if (g != NULL && g->domain_uuid[0] != '\0')
			return g->domain_uuid;
	}
	return part->domain_uuid;
}

/* The partition NMX-C reserves for GPUs in no user partition, of the
 * domain given ("": any); each NVLink domain has its own. */
static const struct fabric_partition *plan_default(const struct plan *p, const char *domain)
{
	for (size_t i = 0; i < p->nparts; i++)
		if (p->parts[i].has_partition_id &&
		    p->parts[i].partition_id == FABRIC_DEFAULT_CLIQUE &&
		    same_domain(part_domain(p, &p->parts[i]), domain))
			return &p->parts[i];
	return NULL;
}

/* The NMX-M GPU a member of part names: by NMX-M id, or by place in the
 * partition's domain (slots repeat from one rack to the next). */
static const struct nmxm_gpu *plan_gpu_of(const struct plan *p, const struct fabric_partition *part,
                                          const struct fabric_gpu *m)
{
	for (size_t i = 0; i < p->ngpus; i++) {
		const struct nmxm_gpu *g = &p->gpus[i];
		if (m->uuid[0] != '\0' ? strcmp(m->uuid, g->id) == 0
		                       : m->slot == g->slot && m->host_id == g->host_id &&
		                                 m->module == g->device &&
		                                 same_domain(g->domain_uuid, part->domain_uuid))
			return g;
	}
	return NULL;
}

static bool part_has(const struct plan *p, const struct fabric_partition *part,
                     const struct nmxm_gpu *g)
{
	for (size_t i = 0; i < part->n_gpus; i++)
		if (plan_gpu_of(p, part, &part->gpus[i]) == g)
			return true;
	return false;
}

static bool plan_is_member(const struct plan *p, const struct nmxm_gpu *g)
{
	for (size_t i = 0; i < p->nmember; i++)
		if (p->member[i] == g)
			return true;
	return false;
}

/* Reads partitions and GPUs and finds each member of spec (when not NULL)
 * among the GPUs by chassis, slot, host and device. */
static enum nv_err plan_load(struct nmxm *s, const struct fabric_partition_spec *spec, long chassis,
                             struct plan *p, struct fabric_status *st)
{
	enum nv_err err;

	memset(p, 0, sizeof(*p));
	err = parts_fetch(s, &p->parts, &p->nparts, st);
	if (err == NV_OK)
		err = gpus_fetch(s, &p->gpus, &p->ngpus, st);
	for (size_t i = 0; err == NV_OK && spec != NULL && i < spec->n_gpus; i++) {
		const struct fabric_gpu *m = &spec->gpus[i];
		for (size_t k = 0; k < p->ngpus && p->member[i] == NULL; k++) {
			const struct nmxm_gpu *g = &p->gpus[k];
			if (g->slot == m->slot && g->host_id == m->host_id &&
			    g->device == m->module &&
			    (chassis < 0 || g->chassis_id < 0 || g->chassis_id == chassis) &&
			    same_domain(g->domain_uuid, spec->domain_uuid))
				p->member[i] = g;
		}
		if (p->member[i] == NULL) {
			fabric_status_msg(st,
			                  "NMX-M lists no GPU at chassis %ld slot %u host %u "
			                  "device %u (tray %u)",
			                  chassis, m->slot, m->host_id, m->module, m->tray);
			err = NV_E_NOT_FOUND;
		}
		p->nmember = i + 1;
	}
	if (err != NV_OK)
		plan_free(p);
	return err;
}

/* PUT of the default partition with ids as its members, or its DELETE
 * when none are left (as NVIDIA's own client does). */
static enum nv_err default_set(struct nmxm *s, const struct fabric_partition *def,
                               const char (*ids)[FABRIC_ID_LEN], size_t n, struct fabric_op *op,
                               struct fabric_status *st)
{
	char path[512];
	char *body = NULL;
	enum nv_err err = id_path(path, sizeof(path), "/nmx/v1/partitions", def->id, s);

	if (err == NV_OK && n > 0) {
		json_t *doc = nmxm_render_ids(ids, n);
		body = jx_dumps(doc);
		json_decref(doc);
	}
	if (err == NV_OK)
		err = request(s, n > 0 ? "PUT" : "DELETE", path, body, 202, st);
	if (err == NV_OK)
		err = accepted(s, op, st);
	free(body);
	return err;
}

/* The first step of a change that adds GPUs still in the default
 * partition: take them out of it. NV_E_NOT_FOUND when none are in it. */
static enum nv_err default_leave(struct nmxm *s, const struct plan *p,
                                 const struct fabric_partition_spec *spec, struct fabric_op *op,
                                 struct fabric_status *st)
{
	const struct fabric_partition *def = plan_default(p, spec->domain_uuid);
	char(*keep)[FABRIC_ID_LEN] = NULL;
	size_t nkeep = 0, nleave = 0;
	enum nv_err err = NV_OK;

	if (def == NULL)
		return NV_E_NOT_FOUND;
	keep = xcalloc(def->n_gpus + 1, sizeof(*keep));
	for (size_t i = 0; i < def->n_gpus && err == NV_OK; i++) {
		const struct fabric_gpu *m = &def->gpus[i];
		const struct nmxm_gpu *g = plan_gpu_of(p, def, m);
		if (g != NULL && plan_is_member(p, g))
			nleave++;
		else if (m->uuid[0] != '\0' || g != NULL)
			str_copy(keep[nkeep++], sizeof(keep[0]), m->uuid[0] ? m->uuid : g->id);
		else {
			fabric_status_msg(st,
			                  "default partition member at slot %u device %u is "
			                  "not among NMX-M's GPUs",
			                  m->slot, m->module);
			err = NV_E_PARSE;
		}
	}
	if (err == NV_OK && nleave == 0)
		err = NV_E_NOT_FOUND;
	if (err == NV_OK)
		err = default_set(s, def, (const char(*)[FABRIC_ID_LEN])keep, nkeep, op, st);
	if (err == NV_OK) {
		snprintf(op->message, sizeof(op->message),
		         "removing %zu GPUs from the default partition", nleave);
		log_info("fabric", "GPUs leave the default partition",
		         "rack=%s partition=%s gpus=%zu op=%s", spec->rack, spec->name, nleave,
		         op->id);
	}
	free(keep);
	return err;
}

/* The last step of a change that took GPUs out of a user partition: the
 * GPUs of the domain ("": any) now in no partition go back to its default
 * partition. *sent tells whether a change was asked (its operation then in
 * op). */
static enum nv_err default_restore(struct nmxm *s, const char *domain, struct fabric_op *op,
                                   bool *sent, struct fabric_status *st)
{
	struct plan p;
	const struct fabric_partition *def;
	char(*ids)[FABRIC_ID_LEN] = NULL;
	size_t n = 0, back = 0;
	enum nv_err err = plan_load(s, NULL, -1, &p, st);

	*sent = false;
	if (err != NV_OK)
		return err;
	def = plan_default(&p, domain);
	ids = xcalloc(p.ngpus + (def ? def->n_gpus : 0) + 1, sizeof(*ids));
	for (size_t i = 0; def != NULL && i < def->n_gpus; i++) {
		const struct nmxm_gpu *g = plan_gpu_of(&p, def, &def->gpus[i]);
		const char *id = def->gpus[i].uuid[0] ? def->gpus[i].uuid : g ? g->id : "";
		if (id[0] != '\0')
			str_copy(ids[n++], sizeof(ids[0]), id);
	}
	for (size_t i = 0; i < p.ngpus; i++) {
		bool placed = false;
		for (size_t k = 0; k < p.nparts && !placed; k++)
			placed = part_has(&p, &p.parts[k], &p.gpus[i]);
		if (!placed && same_domain(p.gpus[i].domain_uuid, domain)) {
			str_copy(ids[n++], sizeof(ids[0]), p.gpus[i].id);
			back++;
		}
	}
	if (back > 0 && def == NULL) {
		log_warn("fabric",
		         "GPUs in no partition and no default partition to return them to",
		         "gpus=%zu", back);
	} else if (back > 0) {
		struct fabric_op next;
		err = default_set(s, def, (const char(*)[FABRIC_ID_LEN])ids, n, &next, st);
		if (err == NV_OK) {
			*sent = true;
			*op = next;
			snprintf(op->message, sizeof(op->message),
			         "returning %zu GPUs to the default partition", back);
			log_info("fabric", "GPUs return to the default partition", "gpus=%zu op=%s",
			         back, op->id);
		}
	}
	free(ids);
	plan_free(&p);
	return err;
}

/* Whether a domain UUID from NMX-M may go into an operation id. */
static bool domain_ok(const char *d)
{
	size_t n = strlen(d);

	if (n == 0 || n > 64)
		return false;
	for (; *d != '\0'; d++)
		if (!((*d >= '0' && *d <= '9') || (*d >= 'a' && *d <= 'f') ||
		      (*d >= 'A' && *d <= 'F') || *d == '-'))
			return false;
	return true;
}

/* Marks an accepted operation whose end is followed by default_restore of
 * the domain: "restore:[<domain>:]<operation>". The change runs already,
 * so this never fails: an id too long stays as it is, with a warning. */
static void restore_after(struct fabric_op *op, const char *domain)
{
	char id[FABRIC_ID_LEN];
	bool dom = domain_ok(domain);
	int n = snprintf(id, sizeof(id), "%s%s%s%s", RESTORE_PREFIX, dom ? domain : "",
	                 dom ? ":" : "", op->id);

	if (n >= (int)sizeof(id) && dom)
		n = snprintf(id, sizeof(id), "%s%s", RESTORE_PREFIX, op->id);
	if (n >= (int)sizeof(id)) {
		log_warn("fabric", "operation id too long to mark: GPUs it frees are not returned",
		         "op=%s", op->id);
		return;
	}
	str_copy(op->id, sizeof(op->id), id);
}

/* The body of a create (id NULL) or update; GPU-ID members get NMX-M's
 * own GPU ids from the plan. */
static char *members_body(const struct fabric_partition_spec *spec, const struct plan *p,
                          long chassis, bool create)
{
	struct fabric_partition_spec *copy = NULL;
	json_t *doc;
	char *body;

	if (spec->kind == FABRIC_MEMBERS_GPU_ID) {
		copy = xmalloc(sizeof(*copy));
		*copy = *spec;
		for (size_t i = 0; i < copy->n_gpus; i++)
			str_copy(copy->gpus[i].uuid, sizeof(copy->gpus[i].uuid), p->member[i]->id);
		spec = copy;
	}
	doc = nmxm_render_members(spec, chassis, create);
	body = jx_dumps(doc);
	json_decref(doc);
	free(copy);
	return body;
}

/* POST (create, id NULL) or PUT (update) of a member list, after taking
 * joining GPUs out of the default partition: when some are in it, that is
 * the change asked for now, and the caller asks again once it is done. */
static enum nv_err send_members(struct nmxm *s, const char *id,
                                const struct fabric_partition_spec *spec, struct fabric_op *op,
                                struct fabric_status *st)
{
	char path[512] = "/nmx/v1/partitions";
	char *body = NULL;
	long chassis = -1;
	struct plan p;
	enum nv_err err = spec_check(spec, st);

	if (err != NV_OK)
		return err;
	memset(&p, 0, sizeof(p));
	pthread_mutex_lock(&s->mu);
	err = chassis_id(s, spec, &chassis, st);
	if (err == NV_OK)
		err = plan_load(s, spec, chassis, &p, st);
	if (err != NV_OK)
		goto out;
	err = default_leave(s, &p, spec, op, st);
	if (err != NV_E_NOT_FOUND) /* the first step was asked, or failed */
		goto out;
	err = id != NULL ? id_path(path, sizeof(path), "/nmx/v1/partitions", id, s) : NV_OK;
	if (err != NV_OK)
		goto out;
	body = members_body(spec, &p, chassis, id == NULL);
	if (body == NULL) {
		fabric_status_msg(st, "could not serialise the request");
		err = NV_E_INTERNAL;
		goto out;
	}
	err = request(s, id == NULL ? "POST" : "PUT", path, body, 202, st);
	if (err == NV_OK)
		err = accepted(s, op, st);
	if (err == NV_OK && id != NULL)
		restore_after(op, spec->domain_uuid);
out:
	pthread_mutex_unlock(&s->mu);
	plan_free(&p);
	free(body);
	return err;
}

static enum nv_err nmxm_create(void *state, const struct fabric_partition_spec *spec,
                               struct fabric_op *op, struct fabric_status *st)
{
	return send_members(state, NULL, spec, op, st);
}

static enum nv_err nmxm_update(void *state, const char *id,
                               const struct fabric_partition_spec *spec, struct fabric_op *op,
                               struct fabric_status *st)
{
	return send_members(state, id, spec, op, st);
}

/* A delete; the partition's domain (read first) scopes the return of its
 * GPUs to the default partition afterwards. */
static enum nv_err nmxm_remove(void *state, const char *id, struct fabric_op *op,
                               struct fabric_status *st)
{
	struct nmxm *s = state;
	char path[512], domain[FABRIC_UUID_LEN] = "";
	struct plan p;
	enum nv_err err;

	pthread_mutex_lock(&s->mu);
	err = plan_load(s, NULL, -1, &p, st);
	for (size_t k = 0; err == NV_OK && k < p.nparts; k++)
		if (strcmp(p.parts[k].id, id) == 0)
			str_copy(domain, sizeof(domain), part_domain(&p, &p.parts[k]));
	if (err == NV_OK)
		plan_free(&p);
	if (err == NV_OK)
		err = id_path(path, sizeof(path), "/nmx/v1/partitions", id, s);
	if (err == NV_OK)
		err = request(s, "DELETE", path, NULL, 202, st);
	if (err == NV_OK)
		err = accepted(s, op, st);
	if (err == NV_OK)
		restore_after(op, domain);
	pthread_mutex_unlock(&s->mu);
	return err;
}

/* One look at an operation. An id made by restore_after polls NMX-M's
 * operation; once that completed, the GPUs left in no partition are given
 * back to the default partition, and op then describes that change (a new
 * id, in progress), which the caller records and polls in turn. */
static enum nv_err nmxm_poll(void *state, const char *op_id, struct fabric_op *op,
                             struct fabric_status *st)
{
	struct nmxm *s = state;
	size_t pl = strlen(RESTORE_PREFIX);
	bool restore = strncmp(op_id, RESTORE_PREFIX, pl) == 0, sent = false;
	const char *raw = restore ? op_id + pl : op_id, *colon = strchr(raw, ':');
	char path[512], domain[FABRIC_UUID_LEN] = "";
	struct jx_err e;
	enum nv_err err;

	if (restore && colon != NULL && (size_t)(colon - raw) < sizeof(domain)) {
		snprintf(domain, sizeof(domain), "%.*s", (int)(colon - raw), raw);
		raw = colon + 1;
	}
	err = raw[0] != '\0' ? NV_OK : NV_E_INVAL;
	pthread_mutex_lock(&s->mu);
	if (err == NV_OK)
		err = id_path(path, sizeof(path), "/nmx/v1/operations", raw, s);
	if (err == NV_OK)
		err = request(s, "GET", path, NULL, 200, st);
	if (err == NV_OK) {
		err = nmxm_parse_operation(buf_str(&s->resp), s->resp.len, op, &e);
		if (err != NV_OK)
			err = parse_fail(err, "operation", &e, st);
	}
	if (err == NV_OK)
		str_copy(op->id, sizeof(op->id), op_id);
	if (err == NV_OK && restore && op->state == FABRIC_OP_COMPLETED) {
		struct fabric_op next = *op;
		err = default_restore(s, domain, &next, &sent, st);
		if (err == NV_OK && sent) {
			*op = next;
			op->state = FABRIC_OP_IN_PROGRESS;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return err;
}

const struct fabric_backend_ops fabric_nmxm_ops = {
        .name = "nmx-m",
        .open = nmxm_open,
        .close = nmxm_close,
        .list = nmxm_list,
        .get = nmxm_get,
        .create = nmxm_create,
        .update = nmxm_update,
        .remove = nmxm_remove,
        .poll = nmxm_poll,
};
