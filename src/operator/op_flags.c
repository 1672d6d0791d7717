// SPDX-License-Identifier: Apache-2.0
// The operator's configuration as one declarative table: every flag with its
// type, default, bounds, environment variable and help. The flag engine
// (nvl72/flags.h) parses it and prints --help and the flags section of
// docs/operator.md from it; the checks across flags are here.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvl72/buf.h"
#include "nvl72/fabric.h"
#include "nvl72/flags.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/log.h"
#include "nvl72/oob.h"
#include "nvl72/operator.h"

#define H (3600 * 1000LL)
/* Where a flag lands in struct op_config. */
#define CFG(field) offsetof(struct op_config, field)
/* The engine's types, as the rows name them. */
#define OP_FLAG_BOOL (&flag_bool)
#define OP_FLAG_STRING (&flag_string)
#define OP_FLAG_INT (&flag_int)
#define OP_FLAG_DURATION (&flag_duration)

const struct flag op_flags[] = {
        {"kubeconfig", CFG(kubeconfig), OP_FLAG_STRING, "", 0, 0, NULL,
         "Kubeconfig file; empty: $KUBECONFIG, then in-cluster, then ~/.kube/config."},
        {"leader-elect", CFG(leader_elect), OP_FLAG_BOOL, "false", 0, 1, NULL,
         "Campaign for a Lease and reconcile only while holding it; without it this replica leads "
         "at once."},
        {"leader-election-id", CFG(leader_election_id), OP_FLAG_STRING, "nvl72-operator", 0, 0,
         NULL, "Name of the leader election Lease."},
        {"leader-election-namespace", CFG(leader_election_ns), OP_FLAG_STRING, "", 0, 0,
         "POD_NAMESPACE", "Namespace of the Lease; empty: the client's namespace."},
        {"leader-election-lease-duration", CFG(lease_ms), OP_FLAG_DURATION, "15s", 2000, 600000,
         NULL, "How long a standby waits after the last renewal it saw before taking over."},
        {"leader-election-renew-deadline", CFG(renew_deadline_ms), OP_FLAG_DURATION, "10s", 1000,
         600000, NULL,
         "How long the leader retries renewing before it stops leading (less than the lease "
         "duration)."},
        {"leader-election-retry-period", CFG(retry_ms), OP_FLAG_DURATION, "2s", 200, 60000, NULL,
         "Interval between attempts to acquire or renew the Lease."},
        {"identity", CFG(identity), OP_FLAG_STRING, "", 0, 0, "POD_NAME",
         "Leader identity prefix; a random suffix is added. Empty: the host name."},
        {"metrics-bind-address", CFG(metrics_addr), OP_FLAG_STRING, ":8080", 0, 0, NULL,
         "Address of /metrics, as [host]:port; \"0\" turns it off."},
        {"metrics-require-token", CFG(metrics_require_token), OP_FLAG_BOOL, "false", 0, 1, NULL,
         "Serve /metrics, on the metrics and the webhook port alike, only to a bearer token "
         "that a TokenReview authenticates and a SubjectAccessReview allows \"get\" on the "
         "non-resource URL /metrics (401/403 otherwise); off: anyone who reaches the port may "
         "scrape."},
        {"health-probe-bind-address", CFG(probe_addr), OP_FLAG_STRING, ":8081", 0, 0, NULL,
         "Address of /healthz and /readyz; \"0\" turns it off."},
        {"dashboard-bind-address", CFG(dashboard_addr), OP_FLAG_STRING, ":8082", 0, 0, NULL,
         "Address of the dashboard and its websocket feed; \"0\" turns it off. The page loads "
         "without a token; its feed and every POST need a bearer token that a TokenReview "
         "authenticates and a SubjectAccessReview allows (\"get\" on /ws, \"post\" on the "
         "path), and a ComputeDomain reaches only a reader allowed to list computedomains "
         "in its namespace."},
        {"dashboard-anonymous-read", CFG(dashboard_anonymous_read), OP_FLAG_BOOL, "false", 0, 1,
         NULL,
         "Serve the dashboard feed, every namespace's ComputeDomains included, to anyone who "
         "reaches the port, without a token (POSTs still need one). For a local demo; never on "
         "a shared cluster."},
        {"webhook-bind-address", CFG(webhook_addr), OP_FLAG_STRING, ":9443", 0, 0, NULL,
         "Address of the HTTPS admission webhook; \"0\" turns it off."},
        {"webhook-service", CFG(webhook_service), OP_FLAG_STRING, "nvl72-operator", 0, 0, NULL,
         "Service in front of the webhook (names in the serving certificate)."},
        {"webhook-secret", CFG(webhook_secret), OP_FLAG_STRING, "nvl72-operator-webhook-tls", 0, 0,
         NULL, "Secret holding the webhook's serving certificate and CA."},
        {"webhook-configuration", CFG(webhook_configuration), OP_FLAG_STRING, "nvl72-operator", 0,
         0, NULL, "Webhook configurations whose caBundle the operator keeps current."},
        {"webhook-cert-source", CFG(webhook_cert_source), FLAG_ENUM("self|secret"), "self", 0, 0,
         NULL,
         "Who makes the webhook's serving certificate: self (the operator generates it, stores "
         "it in --webhook-secret, renews it while running and keeps the caBundle of "
         "--webhook-configuration current) or secret (another party, such as cert-manager, "
         "writes the Secret and the caBundle; the operator only reads the Secret and serves "
         "what it holds)."},
        {"webhook-cert-validity", CFG(webhook_cert_validity_ms), OP_FLAG_DURATION, "8760h", 10000,
         3650 * 24 * H, NULL,
         "Lifetime of a serving certificate the operator makes (its CA lives a day longer)."},
        {"webhook-cert-renew-before", CFG(webhook_cert_renew_before_ms), OP_FLAG_DURATION, "720h",
         2000, 3650 * 24 * H, NULL,
         "A serving certificate the operator made is renewed, in the running process, once it "
         "has this little left; less than --webhook-cert-validity, more than twice "
         "--webhook-cert-check-interval."},
        {"webhook-cert-check-interval", CFG(webhook_cert_check_interval_ms), OP_FLAG_DURATION, "1m",
         1000, H, NULL,
         "How often each replica reads the webhook Secret again (adopting a certificate "
         "another replica or cert-manager stored, renewing one that is due, reloading the "
         "server) and checks the caBundle."},
        {"agent-lease-namespace", CFG(agent_lease_ns), OP_FLAG_STRING, "", 0, 0, NULL,
         "Namespace of the agents' heartbeat Leases; empty: the leader election namespace."},
        {"agent-node-selector", CFG(agent_node_selector), OP_FLAG_STRING, "", 0, 0, NULL,
         "Label selector of the Nodes the agent DaemonSet runs on (the chart passes its own); a "
         "Rack's tray whose Node it does not select is reported AgentNotScheduled, naming the "
         "missing label. Labels the operator sets itself count as present. Empty: no check."},
        {"tray-heartbeat-timeout", CFG(heartbeat_timeout_ms), OP_FLAG_DURATION, "2m", 0, 24 * H,
         NULL,
         "A tray whose agent gave no sign of life for this long counts as down; 0 turns the check "
         "off."},
        {"domain-replace-grace", CFG(domain_replace_grace_ms), OP_FLAG_DURATION, "2m", 0, 24 * H,
         NULL,
         "How long a failed member of a ComputeDomain with spec.replaceFailedNodes stays before a "
         "spare replaces it."},
        {"rack-status-interval", CFG(rack_status_interval_ms), OP_FLAG_DURATION, "1s", 0, 60000,
         NULL,
         "Least time between two status writes of one Rack: changes inside it (an upgrade moves "
         "each tray's maintenance, readiness and driver in quick succession) go out together at "
         "its end; a change after a quiet interval, or one that flips a condition's status, goes "
         "out at once. 0 writes every change at once."},
        {"rack-workers", CFG(rack_workers), OP_FLAG_INT, "2", 1, 64, NULL,
         "Workers of the Rack controller: Racks reconciled at once."},
        {"domain-workers", CFG(domain_workers), OP_FLAG_INT, "2", 1, 64, NULL,
         "Workers of the ComputeDomain controller: ComputeDomains reconciled at once."},
        {"partition-workers", CFG(partition_workers), OP_FLAG_INT, "2", 1, 64, NULL,
         "Workers of the RackPartition controller: RackPartitions reconciled at once."},
        {"upgrade-workers", CFG(upgrade_workers), OP_FLAG_INT, "2", 1, 64, NULL,
         "Workers of the RackUpgrade controller: RackUpgrades reconciled at once."},
        {"parsed-cache-mib", CFG(parsed_cache_mib), OP_FLAG_INT, "16", 0, 4096, NULL,
         "Memory, in MiB, for parsed ComputeTrays and Nodes that the Rack, RackPartition and "
         "RackUpgrade passes read again within 5 s (a rack whose trays move), shared between "
         "them instead of parsed for each pass: counted as 8 times their JSON text, the least "
         "recently read out first, and each dropped after 5 s unread. 0 parses on every read."},
        {"cache-sync-timeout", CFG(cache_sync_timeout_ms), OP_FLAG_DURATION, "2m", 1000, H, NULL,
         "How long a new leader waits for its caches before it gives up leading."},
        {"graceful-shutdown-timeout", CFG(shutdown_timeout_ms), OP_FLAG_DURATION, "30s", 0,
         10 * 60000, NULL, "How long in-flight reconciles may take to finish on SIGTERM."},
        {"shutdown-delay", CFG(shutdown_delay_ms), OP_FLAG_DURATION, "0s", 0, 60000, NULL,
         "After SIGTERM, keep serving the webhook and /metrics this long, /readyz failing, so "
         "that the Service drops this replica before its listeners close."},
        {"fabric-backend", CFG(fabric_backend), OP_FLAG_STRING, "none", 0, 0, NULL,
         "NVLink partition backend for RackPartitions: nmx-m, sim (tests), or none (partitions "
         "stay Pending with a condition saying so)."},
        {"fabric-endpoint", CFG(fabric_endpoint), OP_FLAG_STRING, "", 0, 0, NULL,
         "NMX-M base URL, https://host[:port]; required with --fabric-backend nmx-m."},
        {"fabric-secret", CFG(fabric_secret), OP_FLAG_STRING, "", 0, 0, NULL,
         "Secret namespace/name with the backend's username and password or token, and "
         "ca.crt; read once at start with a GET, kept in memory only."},
        {"fabric-sim-root", CFG(fabric_sim_root), OP_FLAG_STRING, "", 0, 0, NULL,
         "With --fabric-backend sim: the rack folder written by simctl create."},
        {"fabric-sim-delay", CFG(fabric_sim_delay_ms), OP_FLAG_DURATION, "2s", 0, 600000, NULL,
         "With --fabric-backend sim: how long a partition change stays in progress."},
        {"fabric-poll-interval", CFG(fabric_poll_ms), OP_FLAG_DURATION, "1s", 100, 60000, NULL,
         "How often a partition whose change runs at the backend is looked at again."},
        {"oob-backend", CFG(oob_backend), OP_FLAG_STRING, "none", 0, 0, NULL,
         "Out-of-band backend for the switch-tray and tray-firmware steps of RackUpgrades: sim "
         "(tests) or none (an upgrade whose plan needs one halts before touching a tray)."},
        {"oob-sim-root", CFG(oob_sim_root), OP_FLAG_STRING, "", 0, 0, NULL,
         "With --oob-backend sim: the rack folder written by simctl create."},
        {"oob-sim-delay", CFG(oob_sim_delay_ms), OP_FLAG_DURATION, "2s", 0, 600000, NULL,
         "With --oob-backend sim: how long an update stays in progress."},
        {"log-level", CFG(log_level), OP_FLAG_STRING, "info", 0, 0, NULL,
         "error, warn, info or debug."},
        {"log-debug", CFG(log_debug), OP_FLAG_STRING, "", 0, 0, NULL,
         "Components with debug logs on, comma-separated (operator,rack,kube,web), or \"*\"."},
        {"log-format", CFG(log_format), OP_FLAG_STRING, "text", 0, 0, NULL, "text or json."},
};
const size_t op_nflags = sizeof(op_flags) / sizeof(op_flags[0]);

static const struct flag_style op_style = {
        .layout = FLAG_LAYOUT_TYPED,
        .units = FLAG_UNITS_SECONDS,
        .upper = false,
        .md_head = "| flag | type | default | range | env | meaning |\n"
                   "|---|---|---|---|---|---|\n",
        .md_range_sep = "..",
        .md_no_default = "`\"\"`",
};

static const struct flag_set op_set = {
        op_flags,
        sizeof(op_flags) / sizeof(op_flags[0]),
        false, /* strings point into argv, the environment and the table */
        &op_style,
};

static enum nv_err flags_check(const struct op_config *cfg, char *err, size_t errsz)
{
	enum log_level lvl;
	if (!log_level_parse(cfg->log_level, &lvl)) {
		snprintf(err, errsz, "--log-level: \"%s\" is not error, warn, info or debug",
		         cfg->log_level);
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->log_format, "text") != 0 && strcmp(cfg->log_format, "json") != 0) {
		snprintf(err, errsz, "--log-format: \"%s\" is not text or json", cfg->log_format);
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->fabric_backend, "none") != 0 &&
	    fabric_backend_find(cfg->fabric_backend) == NULL) {
		snprintf(err, errsz, "--fabric-backend: \"%s\" is not %s or none",
		         cfg->fabric_backend, fabric_backend_names());
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->fabric_backend, "nmx-m") == 0 && cfg->fabric_endpoint[0] == '\0') {
		snprintf(err, errsz, "--fabric-endpoint: required with --fabric-backend nmx-m");
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->fabric_backend, "sim") == 0 && cfg->fabric_sim_root[0] == '\0') {
		snprintf(err, errsz, "--fabric-sim-root: required with --fabric-backend sim");
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->oob_backend, "none") != 0 && oob_backend_find(cfg->oob_backend) == NULL) {
		snprintf(err, errsz, "--oob-backend: \"%s\" is not %s or none", cfg->oob_backend,
		         oob_backend_names());
		return NV_E_CONFIG;
	}
	if (strcmp(cfg->oob_backend, "sim") == 0 && cfg->oob_sim_root[0] == '\0') {
		snprintf(err, errsz, "--oob-sim-root: required with --oob-backend sim");
		return NV_E_CONFIG;
	}
	/* A renewed pair is served within two checks of its renewal. */
	if (!(cfg->webhook_cert_renew_before_ms < cfg->webhook_cert_validity_ms &&
	      cfg->webhook_cert_renew_before_ms > 2 * cfg->webhook_cert_check_interval_ms)) {
		snprintf(err, errsz,
		         "webhook certificate: need validity > renew-before > 2 x check interval");
		return NV_E_CONFIG;
	}
	/* client-go's rule: lease > renew deadline > 1.2 x retry period. */
	if (!(cfg->lease_ms > cfg->renew_deadline_ms &&
	      cfg->renew_deadline_ms * 10 > cfg->retry_ms * 12)) {
		snprintf(err, errsz,
		         "leader election: need lease duration > renew deadline > "
		         "1.2 x retry period");
		return NV_E_CONFIG;
	}
	if (cfg->agent_node_selector && cfg->agent_node_selector[0]) {
		struct kube_selector *sel = NULL;
		char why[200];

		if (kube_selector_parse(cfg->agent_node_selector, &sel, why, sizeof(why)) !=
		    NV_OK) {
			snprintf(err, errsz, "--agent-node-selector: \"%s\": %s",
			         cfg->agent_node_selector, why);
			return NV_E_CONFIG;
		}
		kube_selector_free(sel);
	}
	return NV_OK;
}

enum nv_err op_flags_parse(int argc, char **argv, struct op_config *cfg, enum flags_action *action,
                           char *err, size_t errsz)
{
	enum nv_err rc = flags_defaults(&op_set, cfg, err, errsz);

	*action = FLAGS_RUN;
	if (rc == NV_OK)
		rc = flags_parse(&op_set, cfg, argc, argv, environ, action, err, errsz);
	if (rc == NV_OK && *action == FLAGS_RUN)
		rc = flags_check(cfg, err, errsz);
	return rc;
}

char *op_flags_help(const char *prog)
{
	struct buf b;
	buf_init(&b, 1 << 16);
	(void)buf_printf(&b,
	                 "usage: %s [flags]\n\nThe nvl72-operator: reconciles NVL72 racks and "
	                 "their trays.\n\n",
	                 prog);
	(void)flags_help(&op_set, &b);
	(void)buf_append_str(&b, "  --help\n      This text.\n  --help-markdown\n      The flags "
	                         "as the Markdown table of docs/operator.md.\n"
	                         "  --version\n      Print the version and exit.\n");
	return buf_take(&b);
}

char *op_flags_markdown(void)
{
	struct buf b;
	buf_init(&b, 1 << 16);
	(void)flags_markdown(&op_set, &b);
	return buf_take(&b);
}
