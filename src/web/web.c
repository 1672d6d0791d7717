// SPDX-License-Identifier: Apache-2.0
// The web server's life cycle: configuration, routes, the libwebsockets
// context and the service thread that owns every connection.
#include "web_int.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/log.h"
#include "nvl72/metrics.h"
#include "nvl72/parse.h"

/* Only one protocol: it serves HTTP and, after an upgrade on /ws, the feed.
 * A client may ask for it by name or send no subprotocol at all. */
#define WEB_PROTOCOL "nvl72.feed.v1"

static const lws_retry_bo_t web_retry = {
        .secs_since_valid_ping = 30,
        .secs_since_valid_hangup = 45,
};

/* On the service thread, in each TLS handshake: a pair set by
 * web_server_tls_update replaces the one the context was made with, for
 * this connection. Those already open keep theirs. */
static int web_tls_cert_cb(SSL *ssl, void *arg)
{
	struct web_server *s = arg;
	pthread_mutex_lock(&s->tls_mu);
	if (s->tls_x != NULL) {
		SSL_certs_clear(ssl);
		if (SSL_use_cert_and_key(ssl, s->tls_x, s->tls_k, NULL, 1) != 1)
			ERR_clear_error();
	}
	pthread_mutex_unlock(&s->tls_mu);
	return 1;
}

static int web_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
	struct web_session *pss = user;
	switch (reason) {
	case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
		/* user is the vhost's SSL_CTX, made once at start. */
		SSL_CTX_set_cert_cb(user, web_tls_cert_cb, web_server_of(wsi));
		return 0;
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		/* Woken by a worker's answer, a publisher, or both. */
		web_authz_drain(web_server_of(wsi));
		return web_feed_callback(wsi, reason, pss, in, len);
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
	case LWS_CALLBACK_ESTABLISHED:
	case LWS_CALLBACK_SERVER_WRITEABLE:
	case LWS_CALLBACK_RECEIVE:
	case LWS_CALLBACK_CLOSED:
		return web_feed_callback(wsi, reason, pss, in, len);
	default:
		return web_http_callback(wsi, reason, pss, in, len);
	}
}

static const struct lws_protocols web_protocols[] = {
        {WEB_PROTOCOL, web_callback, sizeof(struct web_session), 4096, 0, NULL, 0},
        {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* lws speaks through this; its lines keep their own prefix. */
static void web_lws_log(int level, const char *line)
{
	char msg[256];
	size_t n = strnlen(line, sizeof(msg) - 1);
	memcpy(msg, line, n);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		n--;
	msg[n] = '\0';
	if (level & LLL_ERR)
		log_error("lws", msg, NULL);
	else
		log_warn("lws", msg, NULL);
}

static size_t or_default(size_t v, size_t def)
{
	return v ? v : def;
}

enum nv_err web_server_new(const struct web_config *cfg, struct web_server **out)
{
	if (cfg == NULL || cfg->port < 0 || cfg->port > 65535 ||
	    (cfg->tls_cert_pem == NULL) != (cfg->tls_key_pem == NULL))
		return NV_E_INVAL;
	if (cfg->name && (cfg->name[0] == '\0' || strlen(cfg->name) > 64))
		return NV_E_INVAL;
	struct web_server *s = xcalloc(1, sizeof(*s));
	s->name = xstrdup(cfg->name ? cfg->name : "web");
	s->bind_addr = cfg->bind_addr ? xstrdup(cfg->bind_addr) : NULL;
	s->port_cfg = cfg->port;
	s->cert_pem = cfg->tls_cert_pem ? xstrdup(cfg->tls_cert_pem) : NULL;
	s->key_pem = cfg->tls_key_pem ? xstrdup(cfg->tls_key_pem) : NULL;
	s->tls = s->cert_pem != NULL;
	s->metrics = cfg->metrics;
	s->body_max = or_default(cfg->body_max, WEB_BODY_MAX_DEFAULT);
	s->response_max = or_default(cfg->response_max, WEB_RESPONSE_MAX_DEFAULT);
	s->msg_max = or_default(cfg->msg_max, WEB_MSG_MAX_DEFAULT);
	s->queue_max = or_default(cfg->queue_max, WEB_QUEUE_MAX_DEFAULT);
	s->queue_bytes_max = or_default(cfg->queue_bytes_max, WEB_QUEUE_BYTES_DEFAULT);
	s->clients_max = or_default(cfg->clients_max, WEB_CLIENTS_MAX_DEFAULT);
	s->topics_max = or_default(cfg->topics_max, WEB_TOPICS_MAX_DEFAULT);
	s->ws_any_origin = cfg->ws_any_origin;
	s->metrics_authz = cfg->metrics_authz;
	s->metrics_authz_arg = cfg->metrics_authz_arg;
	s->post_authz = cfg->post_authz;
	s->post_authz_arg = cfg->post_authz_arg;
	s->read_authz = cfg->read_authz;
	s->read_authz_arg = cfg->read_authz_arg;
	s->scope_authz = cfg->read_authz ? cfg->scope_authz : NULL;
	s->scope_authz_arg = cfg->scope_authz_arg;
	s->authz_workers = or_default(cfg->authz_workers, WEB_AUTHZ_WORKERS_DEFAULT);
	if (s->authz_workers > WEB_AUTHZ_WORKERS_MAX)
		s->authz_workers = WEB_AUTHZ_WORKERS_MAX;
	s->authz_queue_max = or_default(cfg->authz_queue_max, WEB_AUTHZ_QUEUE_DEFAULT);
	s->port = -1;
	atomic_init(&s->stopping, false);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->tls_mu, NULL);
	pthread_mutex_init(&s->authz_mu, NULL);
	pthread_cond_init(&s->authz_cv, NULL);
	lws_set_log_level(LLL_ERR | LLL_WARN, web_lws_log);
	*out = s;
	return NV_OK;
}

static bool path_valid(const char *path)
{
	return path && path[0] == '/' && strlen(path) < WEB_PATH_MAX;
}

static enum nv_err route_add(struct web_server *s, enum web_method m, const char *path,
                             web_handler_fn fn, void *arg)
{
	if (!path_valid(path) || fn == NULL || s->ctx)
		return NV_E_INVAL;
	for (size_t i = 0; i < s->nroutes; i++)
		if (s->routes[i].method == m && strcmp(s->routes[i].path, path) == 0)
			return NV_E_EXISTS;
	if (s->nroutes >= WEB_ROUTES_MAX)
		return NV_E_TOO_LARGE;
	struct web_route *r = &s->routes[s->nroutes++];
	r->method = m;
	r->path = xstrdup(path);
	r->fn = fn;
	r->arg = arg;
	return NV_OK;
}

enum nv_err web_route_post(struct web_server *s, const char *path, web_handler_fn fn, void *arg)
{
	return route_add(s, WEB_POST, path, fn, arg);
}

enum nv_err web_route_get(struct web_server *s, const char *path, web_handler_fn fn, void *arg)
{
	return route_add(s, WEB_GET, path, fn, arg);
}

enum nv_err web_check_add(struct web_server *s, enum web_probe probe, const char *name,
                          web_check_fn fn, void *arg)
{
	if (name == NULL || name[0] == '\0' || strlen(name) > 64 || fn == NULL ||
	    probe > WEB_PROBE_READY || s->ctx)
		return NV_E_INVAL;
	for (size_t i = 0; i < s->nchecks; i++)
		if (s->checks[i].probe == probe && strcmp(s->checks[i].name, name) == 0)
			return NV_E_EXISTS;
	if (s->nchecks >= WEB_CHECKS_MAX)
		return NV_E_TOO_LARGE;
	struct web_check *c = &s->checks[s->nchecks++];
	c->probe = probe;
	c->name = xstrdup(name);
	c->fn = fn;
	c->arg = arg;
	return NV_OK;
}

/* Refuses encrypted keys instead of prompting on a terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

/* Parses a PEM pair whose key fits its certificate; NV_E_TLS otherwise. */
static enum nv_err tls_pem_parse(const char *cert, const char *key, X509 **x_out, EVP_PKEY **k_out)
{
	enum nv_err e = NV_E_TLS;
	BIO *cb = BIO_new_mem_buf(cert, -1);
	BIO *kb = BIO_new_mem_buf(key, -1);
	X509 *x = cb ? PEM_read_bio_X509(cb, NULL, no_passphrase, NULL) : NULL;
	EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL) : NULL;
	if (x && k && X509_check_private_key(x, k) == 1) {
		*x_out = x;
		*k_out = k;
		x = NULL;
		k = NULL;
		e = NV_OK;
	}
	X509_free(x);
	EVP_PKEY_free(k);
	BIO_free(cb);
	BIO_free(kb);
	ERR_clear_error();
	return e;
}

/* Checks the pair before libwebsockets sees it, so that a bad certificate
 * is told apart from a port that cannot be bound. */
static enum nv_err tls_pem_check(const char *cert, const char *key)
{
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	enum nv_err e = tls_pem_parse(cert, key, &x, &k);
	X509_free(x);
	EVP_PKEY_free(k);
	return e;
}

enum nv_err web_server_tls_update(struct web_server *s, const char *cert_pem, const char *key_pem)
{
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	if (s == NULL || !s->tls || cert_pem == NULL || key_pem == NULL)
		return NV_E_STATE;
	enum nv_err e = tls_pem_parse(cert_pem, key_pem, &x, &k);
	if (e != NV_OK) {
		log_error(WEB_COMP, "new TLS certificate or key refused; serving the old one",
		          "server=%s", s->name);
		return e;
	}
	pthread_mutex_lock(&s->tls_mu);
	X509 *old_x = s->tls_x;
	EVP_PKEY *old_k = s->tls_k;
	s->tls_x = x;
	s->tls_k = k;
	/* Not yet started: the context is made with the new pair. */
	if (s->cert_pem != NULL) {
		secure_free_str(s->cert_pem);
		secure_free_str(s->key_pem);
		s->cert_pem = xstrdup(cert_pem);
		s->key_pem = xstrdup(key_pem);
	}
	pthread_mutex_unlock(&s->tls_mu);
	X509_free(old_x);
	EVP_PKEY_free(old_k); // frees and clears the key material
	log_info(WEB_COMP, "TLS certificate replaced for new connections", "server=%s", s->name);
	return NV_OK;
}

static void *web_thread_main(void *arg)
{
	struct web_server *s = arg;
	while (!atomic_load(&s->stopping))
		if (lws_service(s->ctx, 0) < 0)
			break;
	return NULL;
}

static void context_info_fill(struct web_server *s, struct lws_context_creation_info *info)
{
	memset(info, 0, sizeof(*info));
	info->port = s->port_cfg;
	info->iface = s->bind_addr;
	info->protocols = web_protocols;
	info->user = s;
	info->options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
	                LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND |
	                LWS_SERVER_OPTION_VALIDATE_UTF8;
	if (s->bind_addr && strchr(s->bind_addr, ':') == NULL)
		info->options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	/* Room for a service-account token in Authorization. */
	info->max_http_header_data = 16384;
	info->retry_and_idle_policy = &web_retry;
	info->alpn = "http/1.1";
	info->vhost_name = "default";
	if (s->cert_pem) {
		info->options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		info->server_ssl_cert_mem = s->cert_pem;
		info->server_ssl_cert_mem_len = (unsigned)strlen(s->cert_pem);
		info->server_ssl_private_key_mem = s->key_pem;
		info->server_ssl_private_key_mem_len = (unsigned)strlen(s->key_pem);
	}
}

/* Creates the context, then the listening vhost on its own: a vhost that
 * cannot bind is then undone by lws_context_destroy, which frees what lws
 * 4.1 leaks when the whole context creation fails. */
static enum nv_err context_open(struct web_server *s)
{
	struct lws_context_creation_info info;
	context_info_fill(s, &info);
	struct lws_vhost *vh = NULL;
	s->ctx = lws_create_context(&info);
	if (s->ctx)
		vh = lws_create_vhost(s->ctx, &info);
	/* The TLS context holds its own copy: keep the key no longer. */
	secure_free_str(s->cert_pem);
	secure_free_str(s->key_pem);
	s->cert_pem = s->key_pem = NULL;
	if (vh == NULL) {
		log_error(WEB_COMP, "cannot listen", "server=%s addr=%s port=%d", s->name,
		          s->bind_addr ? s->bind_addr : "*", s->port_cfg);
		if (s->ctx)
			lws_context_destroy(s->ctx);
		s->ctx = NULL;
		/* The certificate passed its check: what failed is the socket. */
		return NV_E_IO;
	}
	s->port = lws_get_vhost_listen_port(vh);
	return NV_OK;
}

enum nv_err web_server_start(struct web_server *s)
{
	if (s->ctx || atomic_load(&s->stopping))
		return NV_E_STATE;
	enum nv_err e = web_metrics_setup(s);
	if (e)
		return e;
	if (s->tls && tls_pem_check(s->cert_pem, s->key_pem) != NV_OK) {
		log_error(WEB_COMP, "TLS certificate or key refused", NULL);
		return NV_E_TLS;
	}
	e = context_open(s);
	if (e)
		return e;
	if ((e = web_authz_start(s)) != NV_OK) {
		lws_context_destroy(s->ctx);
		s->ctx = NULL;
		return e;
	}
	pthread_mutex_lock(&s->mu);
	s->accepting = true;
	pthread_mutex_unlock(&s->mu);
	if (pthread_create(&s->thread, NULL, web_thread_main, s) != 0) {
		web_authz_stop(s);
		lws_context_destroy(s->ctx);
		s->ctx = NULL;
		return NV_E_INTERNAL;
	}
	s->thread_started = true;
	log_info(WEB_COMP, "serving", "server=%s addr=%s port=%d tls=%s", s->name,
	         s->bind_addr ? s->bind_addr : "*", s->port, s->tls ? "yes" : "no");
	return NV_OK;
}

int web_server_port(const struct web_server *s)
{
	return s->port;
}

void web_server_stop(struct web_server *s)
{
	if (s == NULL || s->ctx == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->accepting = false;
	pthread_mutex_unlock(&s->mu);
	atomic_store(&s->stopping, true);
	/* The workers first: each wakes the service thread when it answers,
	 * so that thread must still be there. */
	web_authz_stop(s);
	if (s->thread_started) {
		lws_cancel_service(s->ctx);
		pthread_join(s->thread, NULL);
		s->thread_started = false;
	}
	/* Closes every connection; their callbacks run here, on this thread,
	 * now that the service thread is gone. */
	lws_context_destroy(s->ctx);
	s->ctx = NULL;
	s->port = -1;
	web_authz_clear(s);
	web_feed_clear(s);
	log_info(WEB_COMP, "stopped", "server=%s", s->name);
}

void web_server_free(struct web_server *s)
{
	if (s == NULL)
		return;
	web_server_stop(s);
	for (size_t i = 0; i < s->nroutes; i++)
		free(s->routes[i].path);
	for (size_t i = 0; i < s->nchecks; i++)
		free(s->checks[i].name);
	free(s->bind_addr);
	free(s->name);
	secure_free_str(s->cert_pem);
	secure_free_str(s->key_pem);
	X509_free(s->tls_x);
	EVP_PKEY_free(s->tls_k);
	pthread_mutex_destroy(&s->tls_mu);
	pthread_cond_destroy(&s->authz_cv);
	pthread_mutex_destroy(&s->authz_mu);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
