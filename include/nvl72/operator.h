/* SPDX-License-Identifier: Apache-2.0 */
/* The operator process: one context holding the API client, the informers,
 * leader election, the controllers, the metrics registry, the event recorder
 * and the web servers (probes, metrics, dashboard, admission webhook). The
 * command line lives in src/cmd/operator_main.c; this is what it drives. */
/* Contract. One thread drives the context: op_new, op_run, op_free, in that
 * order; only op_request_stop and the getters may come from other threads.
 * op_new copies the struct op_config but not its strings nor the webhook
 * ops, which must outlive the context. It loads the client configuration
 * and, with a fabric Secret configured, reads it (one request, bounded as
 * kube.h says); of the threads it starts only the client's transport and
 * the event recorder. op_run starts the rest (informers, workers, leader
 * election, web servers) and blocks until the end; op_free joins whatever
 * still runs. The flag calls do no I/O but read the
 * environment. */
#ifndef NVL72_OPERATOR_H
#define NVL72_OPERATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/err.h"
#include "nvl72/flags.h"

struct op;
struct web_server;
struct metrics_registry;

/* How the admission webhook plugs in (implemented by the plug below,
 * op_webhook_plug_ops). The operator calls serving_cert once before it
 * starts the webhook server (PEM strings it frees with secure_free_str),
 * then register_routes on that server before starting it. Every replica
 * serves the webhook, leader or not. All of them run on the thread of
 * op_run (stopping also in op_free), and may block there (serving_cert
 * may write a Secret). */
struct op_webhook_ops {
	enum nv_err (*serving_cert)(void *arg, struct op *op, char **cert_pem, char **key_pem);
	enum nv_err (*register_routes)(void *arg, struct op *op, struct web_server *srv);
	/* Optional: called once the server is up (renewal, caBundle upkeep;
	 * a new pair goes to web_server_tls_update of that server). */
	void (*started)(void *arg, struct op *op);
	/* Optional: called before the server stops and before the client is
	 * freed, so that nothing touches either afterwards; may come twice. */
	void (*stopping)(void *arg, struct op *op);
	void *arg;
};

struct buf;
struct op_webhook_plug;
/* The admission webhook (webhook.h) wired to the operator process
 * (src/operator/op_webhook.c): the
 * certificate from the --webhook-* flags in the pod's namespace, the routes
 * over the operator's informers, the renewal, reload and caBundle upkeep
 * once serving. Usage in main:
 *     struct op_webhook_plug *wh = op_webhook_plug_new();
 *     cfg.webhook = op_webhook_plug_ops(wh);
 *     ... op_new, op_run, op_free ...
 *     op_webhook_plug_free(wh);   (after op_free: the server borrows it) */
struct op_webhook_plug *op_webhook_plug_new(void);
const struct op_webhook_ops *op_webhook_plug_ops(struct op_webhook_plug *p);
/* NULL does nothing. */
void op_webhook_plug_free(struct op_webhook_plug *p);
/* A /healthz check (web_check_fn, arg: the plug): webhook_cert_check
 * once the certificate exists, healthy before. */
bool op_webhook_plug_check(void *arg, struct buf *why);

struct op_config {
	const char *kubeconfig; /* "" : the usual search */
	bool leader_elect;
	const char *leader_election_id; /* Lease name */
	const char *leader_election_ns; /* "": POD_NAMESPACE, else the client's */
	const char *identity;           /* "": POD_NAME_<random>, or host_<random> */
	int64_t lease_ms;
	int64_t renew_deadline_ms;
	int64_t retry_ms;
	const char *metrics_addr;   /* "[host]:port"; "0" turns it off */
	bool metrics_require_token; /* /metrics only for tokens allowed "get" on it */
	const char *probe_addr;
	const char *dashboard_addr;
	bool dashboard_anonymous_read; /* the feed to anyone: for make demo only */
	const char *webhook_addr;
	const char *webhook_service;
	const char *webhook_secret;
	const char *webhook_configuration;
	const char *webhook_cert_source;        /* self | secret (cert-manager) */
	int64_t webhook_cert_validity_ms;       /* of a certificate made here */
	int64_t webhook_cert_renew_before_ms;   /* renew with this much left */
	int64_t webhook_cert_check_interval_ms; /* the Secret and caBundle, this often */
	const char *agent_lease_ns;             /* agents' heartbeat Leases; "": as the election */
	const char *agent_node_selector; /* Nodes the agent DaemonSet selects; "": no check */
	int64_t heartbeat_timeout_ms;    /* 0: never stale */
	int64_t domain_replace_grace_ms; /* a failed domain member waits this long */
	int64_t rack_status_interval_ms; /* least time between a Rack's status writes */
	int parsed_cache_mib;            /* shared parsed trays and Nodes */
	int rack_workers;                /* workers of each controller */
	int domain_workers;
	int partition_workers;
	int upgrade_workers;
	int64_t cache_sync_timeout_ms;
	int64_t shutdown_timeout_ms;
	int64_t shutdown_delay_ms;            /* keep serving the webhook this long after SIGTERM */
	const char *fabric_backend;           /* none | nmx-m | sim */
	const char *fabric_endpoint;          /* NMX-M base URL */
	const char *fabric_secret;            /* "namespace/name" of the credentials, "" none */
	const char *fabric_sim_root;          /* sim: the rack folder of simctl */
	int64_t fabric_sim_delay_ms;          /* sim: how long a change runs */
	int64_t fabric_poll_ms;               /* look at a running change this often */
	const char *oob_backend;              /* none | sim: switch-tray and firmware updates */
	const char *oob_sim_root;             /* sim: the rack folder of simctl */
	int64_t oob_sim_delay_ms;             /* sim: how long an update runs */
	const char *log_level;                /* error | warn | info | debug */
	const char *log_debug;                /* components with debug on, "" none */
	const char *log_format;               /* text | json */
	const struct op_webhook_ops *webhook; /* NULL: not built in */
};

/* Builds the context: loads the client configuration and creates (but does
 * not start) informers, queue, recorder, metrics and web servers. */
enum nv_err op_new(const struct op_config *cfg, struct op **out);
/* Serves and campaigns until op_request_stop (returns NV_OK once everything
 * stopped and the Lease is released) or until leadership is lost
 * (NV_E_STATE: the process should exit non-zero). */
enum nv_err op_run(struct op *op);
/* From any thread (not a signal handler): begins the graceful shutdown. */
void op_request_stop(struct op *op);
void op_free(struct op *op);

/* For the webhook module: the client and the caches it may read, and the
 * registry its counters join, borrowed from op. The client and the
 * registry live until op_free; the informers only until op_run returns
 * (NULL afterwards, and for an unknown resource). */
struct kube_client *op_client(struct op *op);
struct metrics_registry *op_metrics(struct op *op);
struct kube_informer *op_informer(struct op *op, const char *resource);
const struct op_config *op_config_of(const struct op *op);

/* ---- the flag table ---- */

/* The rows of the flag engine (nvl72/flags.h), one per flag. */
extern const struct flag op_flags[];
extern const size_t op_nflags;

/* Sets cfg to the table's defaults, then parses the environment and argv
 * into it (strings point into argv, the environment or the table). Stops
 * at --help, --help-markdown or --version, which it returns in action;
 * otherwise checks the rules across flags. Errors name the flag in err. */
enum nv_err op_flags_parse(int argc, char **argv, struct op_config *cfg, enum flags_action *action,
                           char *err, size_t errsz);
/* The Markdown table of docs/operator.md's generated section, into a new
 * string the caller frees. */
char *op_flags_markdown(void);
/* The plain --help text, into a new string the caller frees. */
char *op_flags_help(const char *prog);

#endif
