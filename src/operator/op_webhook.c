// SPDX-License-Identifier: Apache-2.0
// The webhook's plug into the operator process (struct op_webhook_ops of
// operator.h): the serving certificate from the operator's flags, the routes
// over the operator's informers, and once serving the certificate's thread,
// whose new pairs go to the running webhook server.
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/kube.h"
#include "nvl72/operator.h"
#include "nvl72/web.h"
#include "nvl72/webhook.h"

struct op_webhook_plug {
	struct op_webhook_ops ops;
	char bind_ip[128]; /* an IP the webhook binds to, as a SAN */
	struct webhook_informers infs;
	struct webhook_cert *cert;
	struct webhook *hook;
	struct web_server *srv; /* borrowed from op; NULL once it stops */
};

/* The namespace of the Secret: the pod's, else the client's. */
static const char *plug_namespace(struct op *op)
{
	const char *ns = getenv("POD_NAMESPACE");
	return ns && ns[0] ? ns : kube_client_namespace(op_client(op));
}

/* A webhook bound to one IP address (a local run, whose configurations
 * name https://127.0.0.1:<port> in clientConfig.url) is also reached by
 * that address: it goes into the certificate. */
static const char *plug_bind_ip(struct op_webhook_plug *p, const char *addr)
{
	unsigned char raw[16];
	int port = 0;
	if (addr == NULL || parse_hostport(addr, p->bind_ip, sizeof(p->bind_ip), &port) != NV_OK)
		return NULL;
	bool v4 = inet_pton(AF_INET, p->bind_ip, raw) == 1;
	bool v6 = !v4 && inet_pton(AF_INET6, p->bind_ip, raw) == 1;
	if (!(v4 || v6) || strcmp(p->bind_ip, "0.0.0.0") == 0 || strcmp(p->bind_ip, "::") == 0)
		return NULL;
	return p->bind_ip;
}

/* On the certificate's thread: new connections get the new pair. */
static void plug_cert_changed(void *arg, const char *crt_pem, const char *key_pem)
{
	struct op_webhook_plug *p = arg;
	if (p->srv != NULL)
		(void)web_server_tls_update(p->srv, crt_pem, key_pem);
}

static enum nv_err plug_serving_cert(void *arg, struct op *op, char **cert_pem, char **key_pem)
{
	struct op_webhook_plug *p = arg;
	const struct op_config *cfg = op_config_of(op);
	const char *ips[] = {plug_bind_ip(p, cfg->webhook_addr), NULL};
	bool from_secret =
	        cfg->webhook_cert_source && strcmp(cfg->webhook_cert_source, "secret") == 0;
	struct webhook_cert_config cc = {
	        .client = op_client(op),
	        .source = from_secret ? WEBHOOK_CERT_SECRET : WEBHOOK_CERT_SELF,
	        .ns = plug_namespace(op),
	        .secret = cfg->webhook_secret,
	        .service = cfg->webhook_service,
	        .configuration = cfg->webhook_configuration && cfg->webhook_configuration[0]
	                                 ? cfg->webhook_configuration
	                                 : NULL,
	        .extra_ips = ips,
	        .valid_ms = cfg->webhook_cert_validity_ms,
	        .renew_before_ms = cfg->webhook_cert_renew_before_ms,
	        .resync_ms = cfg->webhook_cert_check_interval_ms,
	        .on_change = plug_cert_changed,
	        .on_change_arg = p,
	};
	struct kube_status st;
	enum nv_err rc = p->cert ? NV_OK : webhook_cert_new(&cc, &p->cert);
	if (rc == NV_OK)
		rc = webhook_cert_ensure(p->cert, &st);
	if (rc != NV_OK)
		return rc;
	*cert_pem = xstrdup(webhook_cert_pem(p->cert));
	*key_pem = xstrdup(webhook_cert_key_pem(p->cert));
	return NV_OK;
}

static enum nv_err plug_register(void *arg, struct op *op, struct web_server *srv)
{
	struct op_webhook_plug *p = arg;
	p->infs.inf[WEBHOOK_RACKS] = op_informer(op, "racks");
	p->infs.inf[WEBHOOK_PARTITIONS] = op_informer(op, "rackpartitions");
	p->infs.inf[WEBHOOK_MATRICES] = op_informer(op, "compatibilitymatrices");
	p->infs.inf[WEBHOOK_UPGRADES] = op_informer(op, "rackupgrades");
	p->infs.inf[WEBHOOK_NODES] = op_informer(op, "nodes");
	p->infs.client = op_client(op);
	struct webhook_config wc = {
	        .cache = &webhook_informer_cache, .cache_arg = &p->infs, .metrics = op_metrics(op)};
	enum nv_err rc = p->hook ? NV_OK : webhook_new(&wc, &p->hook);
	if (rc == NV_OK)
		rc = webhook_register(srv, p->hook);
	if (rc == NV_OK)
		p->srv = srv;
	return rc;
}

static void plug_started(void *arg, struct op *op)
{
	struct op_webhook_plug *p = arg;
	(void)op;
	if (p->cert != NULL && webhook_cert_start(p->cert) != NV_OK)
		log_warn("webhook", "certificate renewal and caBundle upkeep not started", NULL);
}

static void plug_stopping(void *arg, struct op *op)
{
	struct op_webhook_plug *p = arg;
	(void)op;
	webhook_cert_stop(p->cert); // joins the thread: on_change is not called after
	p->srv = NULL;
}

struct op_webhook_plug *op_webhook_plug_new(void)
{
	struct op_webhook_plug *p = xcalloc(1, sizeof(*p));
	p->ops.serving_cert = plug_serving_cert;
	p->ops.register_routes = plug_register;
	p->ops.started = plug_started;
	p->ops.stopping = plug_stopping;
	p->ops.arg = p;
	return p;
}

const struct op_webhook_ops *op_webhook_plug_ops(struct op_webhook_plug *p)
{
	return &p->ops;
}

void op_webhook_plug_free(struct op_webhook_plug *p)
{
	if (p == NULL)
		return;
	webhook_cert_free(p->cert);
	webhook_free(p->hook);
	free(p);
}

bool op_webhook_plug_check(void *arg, struct buf *why)
{
	struct op_webhook_plug *p = arg;
	// Before the webhook starts there is nothing to expire.
	return p == NULL || p->cert == NULL || webhook_cert_check(p->cert, why);
}
