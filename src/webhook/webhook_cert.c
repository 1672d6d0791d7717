// SPDX-License-Identifier: Apache-2.0
// The webhook's serving certificate: reused from its Secret while valid,
// otherwise a new CA and serving certificate made in memory with OpenSSL and
// stored in the Secret; the CA goes into the caBundle of both webhook
// configurations. A thread renews it in the running process, adopts what
// another replica (or cert-manager) stored, and hands the new pair to the
// server once the caBundle trusts it. Keys live only in memory and in the
// Secret, and are wiped.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "webhook_int.h"

#define CERT_PEM_MAX ((size_t)64 << 10)
#define CERT_SAN_MAX 2048
#define DAY_MS ((int64_t)86400000)

static const struct kube_res res_validating = {
        "admissionregistration.k8s.io",   "v1",  "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration", false,
};
static const struct kube_res res_mutating = {
        "admissionregistration.k8s.io", "v1",  "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration", false,
};

struct webhook_cert {
	struct kube_client *client;
	enum webhook_cert_source source;
	char *ns;
	char *secret;
	char *configuration;
	char **dns; /* NULL-terminated SANs */
	char **ips;
	int64_t valid_ms;
	int64_t renew_before_ms;
	int64_t resync_ms;
	void (*on_change)(void *arg, const char *crt_pem, const char *key_pem);
	void *on_change_arg;
	pthread_mutex_t mu; /* guards what follows, between start-up and the thread */
	char *crt;          /* PEM: the pair in the Secret */
	char *key;          /* PEM, secret */
	char *ca;           /* PEM bundle */
	int64_t not_after_ms;
	bool reused;
	char *served; /* PEM of the certificate the server was given */
	int64_t served_not_after_ms;
	/* Whether a round before this one found or made the caBundle current
	 * for ca: the apiserver has had a round's time to see it. */
	bool bundle_seen;
	const char *last_why; /* why the Secret was last refused (logged once) */
	struct kube_stop *stop;
	pthread_t thread;
	bool running;
};

/* ---- making certificates ------------------------------------------------- */

static bool ext_add(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	bool ok = e != NULL && X509_add_ext(x, e, -1) == 1;
	X509_EXTENSION_free(e);
	return ok;
}

static bool serial_random(X509 *x)
{
	unsigned char raw[16];
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return false;
	raw[0] &= 0x7f; // positive
	BIGNUM *bn = BN_bin2bn(raw, sizeof(raw), NULL);
	bool ok = bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok;
}

/* A certificate for key, signed by issuer (NULL: self-signed). */
static X509 *cert_make(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, const char *cn,
                       const char *san, int64_t valid_ms)
{
	X509 *x = X509_new();
	bool ca = san == NULL;
	bool ok = x != NULL && X509_set_version(x, 2) == 1 && serial_random(x) &&
	          X509_gmtime_adj(X509_getm_notBefore(x), -300) != NULL &&
	          X509_gmtime_adj(X509_getm_notAfter(x), (long)(valid_ms / 1000)) != NULL &&
	          X509_set_pubkey(x, key) == 1 &&
	          X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                                     (const unsigned char *)cn, -1, -1, 0) == 1;
	X509 *iss = issuer ? issuer : x;
	ok = ok && X509_set_issuer_name(x, X509_get_subject_name(iss)) == 1 &&
	     ext_add(x, iss, NID_basic_constraints,
	             ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE") &&
	     ext_add(x, iss, NID_key_usage,
	             ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature") &&
	     ext_add(x, iss, NID_subject_key_identifier, "hash") &&
	     (ca || (ext_add(x, iss, NID_ext_key_usage, "serverAuth") &&
	             ext_add(x, iss, NID_authority_key_identifier, "keyid:always") &&
	             ext_add(x, iss, NID_subject_alt_name, san))) &&
	     X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0;
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static char *bio_take(BIO *b)
{
	char *data = NULL;
	long n = BIO_get_mem_data(b, &data);
	char *out = n > 0 ? xstrndup(data, (size_t)n) : NULL;
	BIO_free(b); // a memory BIO clears its buffer when freed
	return out;
}

static char *pem_cert(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	if (b == NULL || PEM_write_bio_X509(b, x) != 1) {
		BIO_free(b);
		return NULL;
	}
	return bio_take(b);
}

static char *pem_key(EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());
	if (b == NULL || PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) != 1) {
		BIO_free(b);
		return NULL;
	}
	return bio_take(b);
}

static enum nv_err san_build(const struct webhook_cert *c, struct buf *san)
{
	enum nv_err rc = NV_OK;
	for (size_t i = 0; c->dns[i] && rc == NV_OK; i++)
		rc = buf_printf(san, "%sDNS:%s", san->len ? "," : "", c->dns[i]);
	for (size_t i = 0; c->ips[i] && rc == NV_OK; i++)
		rc = buf_printf(san, "%sIP:%s", san->len ? "," : "", c->ips[i]);
	return rc;
}

/* A new CA and serving certificate. The CA key signs once and is wiped:
 * nothing else can ever be signed by it. prev_ca (may be NULL) is an old
 * CA kept in the bundle while replicas may still serve certificates of it. */
TESTABLE enum nv_err wh_cert_generate(struct webhook_cert *c, const char *prev_ca)
{
	enum nv_err rc = NV_E_TLS;
	struct buf san;
	EVP_PKEY *ca_key = EVP_EC_gen("P-256");
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *ca = NULL;
	X509 *leaf = NULL;
	char *ca_pem = NULL;
	buf_init(&san, CERT_SAN_MAX);
	if (ca_key == NULL || key == NULL || san_build(c, &san) != NV_OK)
		goto out;
	ca = cert_make(ca_key, NULL, NULL, "nvl72-webhook-ca", NULL, c->valid_ms + DAY_MS);
	leaf = ca ? cert_make(key, ca, ca_key, c->dns[0] ? c->dns[0] : "nvl72-webhook",
	                      buf_str(&san), c->valid_ms)
	          : NULL;
	if (leaf == NULL || (ca_pem = pem_cert(ca)) == NULL)
		goto out;
	char *crt = pem_cert(leaf);
	char *kp = pem_key(key);
	if (crt == NULL || kp == NULL) {
		free(crt);
		secure_free_str(kp);
		goto out;
	}
	free(c->crt);
	secure_free_str(c->key);
	free(c->ca);
	c->crt = crt;
	c->key = kp;
	c->ca = prev_ca ? xasprintf("%s%s", ca_pem, prev_ca) : xstrdup(ca_pem);
	c->not_after_ms = time_wall_ms() + c->valid_ms;
	c->reused = false;
	rc = NV_OK;
out:
	free(ca_pem);
	X509_free(ca);
	X509_free(leaf);
	EVP_PKEY_free(ca_key); // frees and clears the key material
	EVP_PKEY_free(key);
	buf_clear(&san);
	ERR_clear_error();
	return rc;
}

/* ---- checking a stored pair ---------------------------------------------- */

static int no_passphrase(char *b, int size, int rwflag, void *u)
{
	(void)b;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

static int64_t asn1_time_ms(const ASN1_TIME *t)
{
	struct tm tm;
	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return 0;
	return (int64_t)timegm(&tm) * 1000;
}

/* Every certificate of the bundle into a store; false when none parses or
 * one has expired. */
static bool store_load(X509_STORE *st, const char *bundle, int64_t now_ms)
{
	BIO *b = BIO_new_mem_buf(bundle, -1);
	X509 *x = NULL;
	unsigned n = 0;
	bool ok = b != NULL;
	while (ok && (x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL) {
		ok = asn1_time_ms(X509_get0_notAfter(x)) > now_ms &&
		     X509_STORE_add_cert(st, x) == 1;
		X509_free(x);
		n++;
	}
	BIO_free(b);
	ERR_clear_error();
	return ok && n > 0;
}

static bool chain_ok(X509 *leaf, const char *ca, int64_t now_ms)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	bool ok = st && ctx && store_load(st, ca, now_ms) &&
	          X509_STORE_CTX_init(ctx, st, leaf, NULL) == 1 && X509_verify_cert(ctx) == 1;
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

/* Whether crt/key/ca can be served for another renew_before_ms (made
 * here) or at all (read from a Secret another party writes, where ca may
 * be NULL): the key fits, the chain verifies, every SAN is covered. why
 * says what is not. */
TESTABLE bool wh_cert_usable(const struct webhook_cert *c, const char *crt, const char *key,
                             const char *ca, int64_t now_ms, int64_t *not_after_ms,
                             const char **why)
{
	bool own = c->source == WEBHOOK_CERT_SELF;
	BIO *cb = BIO_new_mem_buf(crt, -1);
	BIO *kb = BIO_new_mem_buf(key, -1);
	X509 *x = cb ? PEM_read_bio_X509(cb, NULL, no_passphrase, NULL) : NULL;
	EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL) : NULL;
	int64_t na = x ? asn1_time_ms(X509_get0_notAfter(x)) : 0;
	*why = NULL;
	if (x == NULL || k == NULL)
		*why = "tls.crt or tls.key does not parse";
	else if (X509_check_private_key(x, k) != 1)
		*why = "tls.key does not match tls.crt";
	else if (own && na - now_ms <= c->renew_before_ms)
		*why = "the certificate expires too soon";
	else if (!own && na <= now_ms)
		*why = "the certificate has expired";
	else if ((own || ca != NULL) && (ca == NULL || !chain_ok(x, ca, now_ms)))
		*why = "tls.crt is not signed by a current CA of ca.crt";
	for (size_t i = 0; *why == NULL && c->dns[i]; i++)
		if (X509_check_host(x, c->dns[i], 0, X509_CHECK_FLAG_NO_WILDCARDS, NULL) != 1)
			*why = "a DNS name is missing from the certificate";
	for (size_t i = 0; *why == NULL && c->ips[i]; i++)
		if (X509_check_ip_asc(x, c->ips[i], 0) != 1)
			*why = "an IP address is missing from the certificate";
	X509_free(x);
	EVP_PKEY_free(k);
	BIO_free(cb);
	BIO_free(kb);
	ERR_clear_error();
	if (*why == NULL)
		*not_after_ms = na;
	return *why == NULL;
}

/* The first certificate of a bundle that is still valid for more than a
 * day, as PEM (caller frees), to keep beside a new CA; NULL if none. */
static char *ca_keep(const char *bundle, int64_t now_ms)
{
	BIO *b = bundle ? BIO_new_mem_buf(bundle, -1) : NULL;
	X509 *x = b ? PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
	char *out = NULL;
	if (x != NULL && asn1_time_ms(X509_get0_notAfter(x)) - now_ms > DAY_MS)
		out = pem_cert(x);
	X509_free(x);
	BIO_free(b);
	ERR_clear_error();
	return out;
}

/* ---- the Secret ----------------------------------------------------------- */

static void secret_wipe(json_t *secret)
{
	json_t *data = json_object_get(secret, "data");
	const char *k;
	json_t *v;
	json_object_foreach(data, k, v)
		if (json_is_string(v))
			secure_wipe((char *)(uintptr_t)json_string_value(v), json_string_length(v));
}

static char *secret_field(const json_t *secret, const char *field)
{
	const char *b64 =
	        json_string_value(json_object_get(json_object_get(secret, "data"), field));
	char *out = NULL;
	size_t len = 0;
	if (b64 == NULL || b64_decode(b64, CERT_PEM_MAX, &out, &len) != NV_OK)
		return NULL;
	return out;
}

/* Takes the Secret's pair when it is usable; *changed when it is not the
 * pair held. */
static bool secret_adopt(struct webhook_cert *c, const json_t *secret, bool *changed,
                         const char **why)
{
	char *crt = secret_field(secret, "tls.crt");
	char *key = secret_field(secret, "tls.key");
	char *ca = secret_field(secret, "ca.crt");
	int64_t na = 0;
	bool need_ca = c->source == WEBHOOK_CERT_SELF;
	bool ok = crt && key && (ca || !need_ca) &&
	          wh_cert_usable(c, crt, key, ca, time_wall_ms(), &na, why);
	if (!crt || !key || (!ca && need_ca))
		*why = need_ca ? "tls.crt, tls.key or ca.crt is missing"
		               : "tls.crt or tls.key is missing";
	if (ok) {
		*changed = c->crt == NULL || strcmp(c->crt, crt) != 0 || c->ca == NULL ||
		           strcmp(c->ca, ca ? ca : "") != 0;
		free(c->crt);
		secure_free_str(c->key);
		free(c->ca);
		c->crt = crt;
		c->key = key;
		c->ca = ca ? ca : xstrdup("");
		c->not_after_ms = na;
		c->reused = true;
		return true;
	}
	free(crt);
	secure_free_str(key);
	free(ca);
	return false;
}

static enum nv_err secret_put(struct webhook_cert *c, json_t *secret, bool exists,
                              struct kube_status *st)
{
	struct buf b;
	json_t *data = json_object();
	enum nv_err rc = NV_OK;
	const char *names[] = {"tls.crt", "tls.key", "ca.crt"};
	const char *vals[] = {c->crt, c->key, c->ca};
	buf_init_secret(&b, CERT_PEM_MAX * 2);
	for (size_t i = 0; i < 3 && rc == NV_OK; i++) {
		buf_reset(&b);
		rc = b64_encode(vals[i], strlen(vals[i]), &b);
		json_object_set_new(data, names[i], json_string(buf_str(&b)));
	}
	buf_clear(&b);
	secret_wipe(secret);
	json_object_set_new(secret, "data", data);
	json_object_del(secret, "stringData");
	if (rc != NV_OK)
		return rc;
	if (exists)
		rc = kube_update(c->client, &KUBE_RES_SECRETS, c->ns, secret, NULL, NULL, st);
	else
		rc = kube_create(c->client, &KUBE_RES_SECRETS, c->ns, secret, NULL, st);
	secret_wipe(secret);
	return rc;
}

static json_t *secret_new(const struct webhook_cert *c)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s}", "apiVersion", "v1", "kind",
	                 "Secret", "metadata", "name", c->secret, "namespace", c->ns, "labels",
	                 "app.kubernetes.io/component", "operator", "type", "Opaque");
}

TESTABLE enum wh_cert_step wh_cert_decide(enum webhook_cert_source source, bool stored_usable,
                                          bool stored_changed)
{
	if (stored_usable)
		return stored_changed ? WH_CERT_ADOPT : WH_CERT_KEEP;
	// Only the party that writes the Secret renews what is in it.
	return source == WEBHOOK_CERT_SELF ? WH_CERT_RENEW : WH_CERT_WAIT;
}

/* The pair held, kept aside while a new one is tried. */
struct held {
	char *crt, *key, *ca;
	int64_t not_after_ms;
	bool reused;
};

static void held_take(struct webhook_cert *c, struct held *h)
{
	*h = (struct held){c->crt, c->key, c->ca, c->not_after_ms, c->reused};
	c->crt = c->key = c->ca = NULL;
}

/* Puts h back (restore) or drops it. */
static void held_done(struct webhook_cert *c, struct held *h, bool restore)
{
	if (restore) {
		free(c->crt);
		secure_free_str(c->key);
		free(c->ca);
		c->crt = h->crt;
		c->key = h->key;
		c->ca = h->ca;
		c->not_after_ms = h->not_after_ms;
		c->reused = h->reused;
		return;
	}
	free(h->crt);
	secure_free_str(h->key);
	free(h->ca);
}

/* A new pair, written over the Secret read (NULL: none exists), keeping
 * the CA of the certificate being served in the bundle. A pair that could
 * not be stored is dropped: the one held stays, and so does the Secret's
 * agreement with what is served. */
static enum nv_err renew(struct webhook_cert *c, json_t *secret, struct kube_status *st)
{
	char *old = NULL;
	struct held h;
	if (secret != NULL) {
		char *prev = secret_field(secret, "ca.crt");
		old = ca_keep(prev, time_wall_ms());
		free(prev);
	}
	held_take(c, &h);
	enum nv_err rc = wh_cert_generate(c, old);
	free(old);
	if (rc == NV_OK) {
		json_t *fresh = secret ? NULL : secret_new(c);
		rc = secret_put(c, secret ? secret : fresh, secret != NULL, st);
		json_decref(fresh);
	}
	held_done(c, &h, rc != NV_OK);
	if (rc == NV_OK)
		log_info(WH_COMP, "serving certificate stored", "secret=%s/%s not_after_s=%lld",
		         c->ns, c->secret, (long long)(c->not_after_ms / 1000));
	return rc;
}

/* One read-decide-write round on the Secret; NV_E_CONFLICT / NV_E_EXISTS
 * when another replica wrote first, NV_E_NOT_FOUND when it holds nothing
 * usable and is not ours to write. *step says what was done. */
static enum nv_err ensure_once(struct webhook_cert *c, struct kube_status *st,
                               enum wh_cert_step *step)
{
	json_t *secret = NULL;
	const char *why = NULL;
	bool changed = false;
	enum nv_err rc = kube_get(c->client, &KUBE_RES_SECRETS, c->ns, c->secret, &secret, st);
	bool exists = rc == NV_OK;
	if (rc != NV_OK && rc != NV_E_NOT_FOUND)
		return rc;
	bool usable = exists && secret_adopt(c, secret, &changed, &why);
	*step = wh_cert_decide(c->source, usable, changed);
	if (!exists)
		why = "the Secret does not exist";
	rc = NV_OK;
	if (*step == WH_CERT_RENEW) {
		log_info(WH_COMP, "generating a serving certificate", "secret=%s/%s why=\"%s\"",
		         c->ns, c->secret, why);
		rc = renew(c, secret, st);
	} else if (*step == WH_CERT_WAIT) {
		if (why != c->last_why)
			log_warn(WH_COMP,
			         "no usable serving certificate in the Secret; waiting for it",
			         "secret=%s/%s why=\"%s\"", c->ns, c->secret, why);
		rc = NV_E_NOT_FOUND;
	}
	c->last_why = usable ? NULL : why;
	if (secret != NULL)
		secret_wipe(secret);
	json_decref(secret);
	return rc;
}

/* ensure_once until it settles (three tries when other replicas race). */
static enum nv_err ensure_locked(struct webhook_cert *c, struct kube_status *st,
                                 enum wh_cert_step *step)
{
	enum nv_err rc = NV_OK;
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = ensure_once(c, st, step);
		if (rc != NV_E_CONFLICT && rc != NV_E_EXISTS)
			break;
		log_info(WH_COMP, "another replica wrote the certificate first; reading it",
		         "secret=%s/%s", c->ns, c->secret);
	}
	return rc;
}

static enum nv_err sync_ca_locked(struct webhook_cert *c, struct kube_status *st, bool *patched);

/* How long the start waits for a Secret another party writes. */
#define SECRET_WAIT_MS ((int64_t)60000)

enum nv_err webhook_cert_ensure(struct webhook_cert *c, struct kube_status *st)
{
	enum nv_err rc = NV_OK;
	enum wh_cert_step step = WH_CERT_KEEP;
	int64_t until = time_mono_ms() + SECRET_WAIT_MS;
	if (c->client == NULL)
		return NV_E_STATE;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		rc = ensure_locked(c, st, &step);
		// cert-manager may not have issued it yet: a fresh install.
		if (rc != NV_E_NOT_FOUND || c->source == WEBHOOK_CERT_SELF ||
		    time_mono_ms() >= until || kube_stop_sleep(c->stop, 2000))
			break;
	}
	if (rc == NV_OK) {
		if (step != WH_CERT_RENEW)
			log_info(WH_COMP, "serving certificate reused", "secret=%s/%s", c->ns,
			         c->secret);
		free(c->served);
		c->served = xstrdup(c->crt);
		c->served_not_after_ms = c->not_after_ms;
	}
	pthread_mutex_unlock(&c->mu);
	if (rc != NV_OK) {
		log_error(WH_COMP, "no serving certificate", "secret=%s/%s err=%s msg=\"%s\"",
		          c->ns, c->secret, nv_err_name(rc), st ? st->message : "");
		return rc;
	}
	// A configuration missing now (created after the operator, or being
	// reinstalled) gets its caBundle from the thread later.
	if (c->configuration != NULL && c->source == WEBHOOK_CERT_SELF)
		(void)webhook_cert_sync_ca(c, NULL);
	return NV_OK;
}

/* ---- caBundle ------------------------------------------------------------- */

static enum nv_err sync_one(struct webhook_cert *c, const struct kube_res *res, const char *want,
                            struct kube_status *st, bool *patched)
{
	json_t *cfg = NULL;
	json_t *patch = NULL;
	enum nv_err rc = kube_get(c->client, res, NULL, c->configuration, &cfg, st);
	if (rc != NV_OK)
		goto out;
	json_t *hooks = json_object_get(cfg, "webhooks");
	patch = json_array();
	for (size_t i = 0; i < json_array_size(hooks); i++) {
		const json_t *h = json_array_get(hooks, i);
		const char *have = jx_str_or(h, "clientConfig.caBundle", "");
		if (strcmp(have, want) == 0)
			continue;
		char path[96];
		// The test keeps a concurrent reorder from misplacing the bundle.
		snprintf(path, sizeof(path), "/webhooks/%zu/name", i);
		json_array_append_new(patch, json_pack("{s:s, s:s, s:s}", "op", "test", "path",
		                                       path, "value", jx_str_or(h, "name", "")));
		snprintf(path, sizeof(path), "/webhooks/%zu/clientConfig/caBundle", i);
		json_array_append_new(patch, json_pack("{s:s, s:s, s:s}", "op", "add", "path", path,
		                                       "value", want));
	}
	if (json_array_size(patch) == 0)
		goto out;
	struct kube_patch_opts po = {.type = KUBE_PATCH_JSON};
	rc = kube_patch(c->client, res, NULL, c->configuration, &po, patch, NULL, st);
	if (rc == NV_OK) {
		*patched = true;
		log_info(WH_COMP, "caBundle updated", "kind=%s name=%s webhooks=%zu", res->kind,
		         c->configuration, json_array_size(patch) / 2);
	}
out:
	json_decref(patch);
	json_decref(cfg);
	return rc;
}

/* Both configurations; one that does not exist is skipped (NV_E_NOT_FOUND
 * when either is missing, after the other was synced). */
static enum nv_err sync_ca_locked(struct webhook_cert *c, struct kube_status *st, bool *patched)
{
	struct buf want;
	enum nv_err rc = NV_E_STATE;
	*patched = false;
	if (c->ca == NULL || c->configuration == NULL || c->client == NULL)
		return rc;
	buf_init(&want, CERT_PEM_MAX * 2);
	rc = b64_encode(c->ca, strlen(c->ca), &want);
	enum nv_err r2 = rc;
	if (rc == NV_OK) {
		rc = sync_one(c, &res_validating, buf_str(&want), st, patched);
		r2 = sync_one(c, &res_mutating, buf_str(&want), st, patched);
	}
	buf_clear(&want);
	if (rc == NV_OK)
		rc = r2;
	if (rc != NV_OK)
		log_warn(WH_COMP, "caBundle not current", "name=%s err=%s", c->configuration,
		         nv_err_name(rc));
	return rc;
}

enum nv_err webhook_cert_sync_ca(struct webhook_cert *c, struct kube_status *st)
{
	bool patched = false;
	pthread_mutex_lock(&c->mu);
	enum nv_err rc = sync_ca_locked(c, st, &patched);
	if (rc == NV_OK || rc == NV_E_NOT_FOUND)
		c->bundle_seen = true;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* ---- the round ------------------------------------------------------------ */

TESTABLE bool wh_cert_serve_due(bool differs, bool bundle_settled, int64_t served_not_after_ms,
                                int64_t now_ms, int64_t resync_ms)
{
	if (!differs)
		return false;
	// Waiting longer for the caBundle cannot help a certificate that
	// expires before the round after next.
	return bundle_settled || served_not_after_ms - now_ms <= 2 * resync_ms;
}

/* Whether the apiserver trusts ca by now: a round before this one found
 * the caBundle current (or the configurations absent), and so does this
 * one. Configurations managed by someone else (cert-manager's CA injector
 * with a long-lived CA) or none at all: always. */
static bool bundle_settled(struct webhook_cert *c, struct kube_status *st)
{
	bool patched = false;
	if (c->source != WEBHOOK_CERT_SELF || c->configuration == NULL)
		return true;
	enum nv_err rc = sync_ca_locked(c, st, &patched);
	if (rc != NV_OK && rc != NV_E_NOT_FOUND)
		return false;
	bool settled = c->bundle_seen && !patched;
	c->bundle_seen = true;
	return settled;
}

TESTABLE enum nv_err wh_cert_round(struct webhook_cert *c)
{
	struct kube_status st = {0};
	enum wh_cert_step step = WH_CERT_KEEP;
	char *crt = NULL;
	char *key = NULL;
	pthread_mutex_lock(&c->mu);
	enum nv_err rc = ensure_locked(c, &st, &step);
	// Waiting for another party's pair was logged once, when it began.
	if (rc != NV_OK && step != WH_CERT_WAIT)
		log_warn(WH_COMP, "serving certificate not checked",
		         "secret=%s/%s err=%s msg=\"%s\"", c->ns, c->secret, nv_err_name(rc),
		         st.message);
	if (rc == NV_OK && step == WH_CERT_ADOPT)
		log_info(WH_COMP, "serving certificate adopted from the Secret", "secret=%s/%s",
		         c->ns, c->secret);
	if (step == WH_CERT_RENEW || step == WH_CERT_ADOPT)
		c->bundle_seen = false;
	bool differs = c->crt != NULL && (c->served == NULL || strcmp(c->served, c->crt) != 0);
	bool settled = bundle_settled(c, &st);
	if (wh_cert_serve_due(differs, settled, c->served_not_after_ms, time_wall_ms(),
	                      c->resync_ms)) {
		crt = xstrdup(c->crt);
		key = xstrdup(c->key);
		free(c->served);
		c->served = xstrdup(c->crt);
		c->served_not_after_ms = c->not_after_ms;
	}
	pthread_mutex_unlock(&c->mu);
	if (crt != NULL) {
		log_info(WH_COMP, "serving the new certificate", "secret=%s/%s", c->ns, c->secret);
		if (c->on_change != NULL)
			c->on_change(c->on_change_arg, crt, key);
	}
	free(crt);
	secure_free_str(key);
	return rc;
}

static void *resync_main(void *arg)
{
	struct webhook_cert *c = arg;
	while (!kube_stop_sleep(c->stop, c->resync_ms))
		(void)wh_cert_round(c);
	return NULL;
}

enum nv_err webhook_cert_start(struct webhook_cert *c)
{
	if (c->running || c->crt == NULL || c->client == NULL)
		return NV_E_STATE;
	if (pthread_create(&c->thread, NULL, resync_main, c) != 0)
		return NV_E_INTERNAL;
	c->running = true;
	return NV_OK;
}

void webhook_cert_stop(struct webhook_cert *c)
{
	if (c == NULL || !c->running)
		return;
	kube_stop_request(c->stop);
	pthread_join(c->thread, NULL);
	c->running = false;
}

/* ---- lifecycle ------------------------------------------------------------ */

static char **strv_dup(const char *const *v, const char *first, const char *second)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **out = xcalloc(n + 3, sizeof(*out));
	size_t k = 0;
	if (first)
		out[k++] = xstrdup(first);
	if (second)
		out[k++] = xstrdup(second);
	for (size_t i = 0; i < n; i++)
		out[k++] = xstrdup(v[i]);
	return out;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

enum nv_err webhook_cert_new(const struct webhook_cert_config *cfg, struct webhook_cert **out)
{
	if (cfg == NULL || cfg->ns == NULL || cfg->secret == NULL || cfg->service == NULL ||
	    cfg->ns[0] == '\0' || cfg->secret[0] == '\0' || cfg->service[0] == '\0')
		return NV_E_INVAL;
	struct webhook_cert *c = xcalloc(1, sizeof(*c));
	char *svc = xasprintf("%s.%s.svc", cfg->service, cfg->ns);
	char *fqdn = xasprintf("%s.%s.svc.cluster.local", cfg->service, cfg->ns);
	c->client = cfg->client;
	c->source = cfg->source;
	c->on_change = cfg->on_change;
	c->on_change_arg = cfg->on_change_arg;
	c->ns = xstrdup(cfg->ns);
	c->secret = xstrdup(cfg->secret);
	c->configuration = cfg->configuration ? xstrdup(cfg->configuration) : NULL;
	c->dns = strv_dup(cfg->extra_dns, svc, fqdn);
	c->ips = strv_dup(cfg->extra_ips, NULL, NULL);
	c->valid_ms = cfg->valid_ms > 0 ? cfg->valid_ms : 365 * DAY_MS;
	c->renew_before_ms = cfg->renew_before_ms > 0 ? cfg->renew_before_ms : 30 * DAY_MS;
	c->resync_ms = cfg->resync_ms > 0 ? cfg->resync_ms : 60000;
	c->stop = kube_stop_new();
	pthread_mutex_init(&c->mu, NULL);
	free(svc);
	free(fqdn);
	*out = c;
	return NV_OK;
}

void webhook_cert_free(struct webhook_cert *c)
{
	if (c == NULL)
		return;
	webhook_cert_stop(c);
	kube_stop_free(c->stop);
	pthread_mutex_destroy(&c->mu);
	secure_free_str(c->key);
	free(c->crt);
	free(c->ca);
	free(c->served);
	free(c->ns);
	free(c->secret);
	free(c->configuration);
	strv_free(c->dns);
	strv_free(c->ips);
	free(c);
}

const char *webhook_cert_pem(const struct webhook_cert *c)
{
	return c->crt;
}

const char *webhook_cert_key_pem(const struct webhook_cert *c)
{
	return c->key;
}

const char *webhook_cert_ca_pem(const struct webhook_cert *c)
{
	return c->ca;
}

int64_t webhook_cert_not_after_ms(const struct webhook_cert *c)
{
	return c->not_after_ms;
}

bool webhook_cert_reused(const struct webhook_cert *c)
{
	return c->reused;
}

bool webhook_cert_check(void *arg, struct buf *why)
{
	struct webhook_cert *c = arg;
	pthread_mutex_lock(&c->mu);
	bool have = c->served != NULL || c->crt != NULL;
	int64_t left = (c->served ? c->served_not_after_ms : c->not_after_ms) - time_wall_ms();
	pthread_mutex_unlock(&c->mu);
	if (!have) {
		(void)buf_append_str(why, "no serving certificate");
		return false;
	}
	if (left < DAY_MS) {
		(void)buf_append_str(why, "the serving certificate expires within a day and has "
		                          "not been renewed (see the webhook log)");
		return false;
	}
	return true;
}
