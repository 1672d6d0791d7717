/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's Kubernetes half: its configuration (one declarative table that
 * also writes --help and the docs), the tray's spec as the agent reads it,
 * the status it builds from one host observation, and the loop that keeps
 * both in step with a heartbeat Lease. The host half is host.h. */
/* Contract. Everything but the agent itself is pure and never blocks:
 * the configuration calls work on caller storage (one thread per config;
 * they read the environment only through envp), and the spec and status
 * calls read borrowed objects and fill caller storage or return new
 * references. The agent: agent_new blocks while it looks for the tray,
 * agent_run blocks until stop, and the rest may be called from any thread
 * while it runs (see each). */
#ifndef NVL72_AGENT_H
#define NVL72_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "nvl72/host.h"
#include "nvl72/buf.h"
#include "nvl72/err.h"
#include "nvl72/flags.h"

/* ---- configuration ---- */

#define AGENT_INSTALLER_ARGS_MAX 32

enum agent_fm_policy {
	AGENT_FM_MASK = 0, /* stop, disable and mask a host FM that must not run */
	AGENT_FM_REPORT,   /* only report it, as a blocking condition */
};

/* Every setting of the agent. Strings are owned (agent_config_clear). */
struct agent_config {
	char *kubeconfig;
	char *context;
	char *node_name;
	char *node_ip;
	char *tray;
	char *lease_namespace;
	char *host_root;
	char *tool_ns; /* "host" or "agent": where the host tools run */
	char *nvml_path;
	char *systemctl;
	char *modprobe;
	char *modinfo;
	char *imex_bin;
	char *imex_ctl;
	char *imex_dir;
	char *state_dir;
	char *installer[AGENT_INSTALLER_ARGS_MAX + 1]; /* NULL-terminated */
	size_t n_installer;
	char *validation_cmd; /* "" (none) or the validation command */
	int64_t tool_timeout_ms;
	int64_t install_timeout_ms;
	int64_t resync_ms;
	int64_t heartbeat_ms;
	int64_t lease_duration_ms;
	int64_t tray_wait_ms;
	char *fm_policy;            /* "mask" or "report" */
	char *metrics_bind;         /* "ADDR:PORT" or "" (off) */
	bool metrics_require_token; /* /metrics only for tokens allowed "get" on it */
	char *log_level;
	char *log_format;
	char *log_debug;
};

/* Fills the defaults of the table. */
void agent_config_init(struct agent_config *c);
void agent_config_clear(struct agent_config *c);

enum agent_config_action {
	AGENT_CONFIG_RUN = FLAGS_RUN,
	AGENT_CONFIG_HELP = FLAGS_HELP,
	AGENT_CONFIG_HELP_MARKDOWN = FLAGS_HELP_MARKDOWN,
	AGENT_CONFIG_VERSION = FLAGS_VERSION,
};

/* Applies the environment variables of the table (envp: NULL-terminated
 * "NAME=value" strings, or NULL for none), then argv[1..argc), with the
 * flag engine (nvl72/flags.h): "--name=value" or "--name value"; booleans
 * also bare "--name". Stops at --help, --help-markdown or --version (the
 * action). Errors name the flag or variable and say why, in err. Checks
 * bounds and, to run, that what is required is there. */
enum nv_err agent_config_parse(struct agent_config *c, int argc, char *const *argv,
                               char *const *envp, enum agent_config_action *action, char *err,
                               size_t errsz);
enum agent_fm_policy agent_config_fm_policy(const struct agent_config *c);
/* --tool-namespace=agent: the tools see the agent's mount namespace. */
bool agent_config_tools_in_agent_ns(const struct agent_config *c);
/* --metrics-bind-address as a host (without brackets; "" for every address)
 * and a port; port -1 when it is empty (off). NV_E_CONFIG when it is not
 * ADDR:PORT. */
enum nv_err agent_config_metrics_addr(const struct agent_config *c, char *host, size_t hostsz,
                                      int *port);

/* --help text and the Markdown table of docs/agent.md, both from the table. */
enum nv_err agent_config_usage(struct buf *out);
enum nv_err agent_config_markdown(struct buf *out);

/* ---- the tray's spec, as the agent acts on it ---- */

enum agent_activation { AGENT_ACTIVATE_RELOAD = 0, AGENT_ACTIVATE_REBOOT };

struct agent_spec {
	int64_t generation;
	char name[254];
	char node[254];
	char rack[64];
	char uid[64];
	bool has_driver;
	char driver_version[HOST_VERSION_LEN];
	enum agent_activation activation;
	bool has_imex;
	struct host_imex_cfg imex; /* bind_ip is --node-ip */
	/* spec.imex.domainUID: the uid of the ComputeDomain the tray is a
	 * member of (the imex.nvl72.io devices' domain attribute); "" when
	 * none or when spec.imex names no ComputeDomain. */
	char imex_domain_uid[64];
	unsigned channel_count;
	bool channels_all; /* allocationMode All: nodes for every channel */
	size_t n_channel_ids;
	unsigned channel_ids[64];
	char maint_state[16]; /* "None" when absent */
	bool has_upgrade_step;
	int upgrade_step;
	bool has_validation;
	struct host_val_request validation;
};

/* Reads what the agent needs from a ComputeTray with the api's parser
 * (api_compute_tray_parse); node_ip is this tray's IMEX address.
 * NV_E_INVALID_OBJECT with err filled ("spec.imex.peers: must ...", the
 * errors joined by "; ") when the tray fails the CRD's checks: a failing
 * spec.driver, spec.imex, spec.maintenance or spec.validation is then
 * dropped and the rest kept; an error anywhere else leaves nothing to act
 * on. */
enum nv_err agent_spec_parse(const json_t *tray, const char *node_ip, struct agent_spec *out,
                             char *err, size_t errsz);

/* ---- status ---- */

/* The driver change in flight, if any: what the last step did. */
struct agent_drv_report {
	bool active;              /* spec wants a version that is not loaded */
	bool waiting_maintenance; /* not Drained/Upgrading: nothing done */
	enum host_drv_phase phase;
	enum nv_err err;
	char detail[HOST_ERRMSG_LEN];
};

/* What one reconcile learned, from which the status is built. */
struct agent_report {
	const struct agent_spec *spec;
	const char *spec_error; /* "" or why the spec was refused */
	const char *node_ip;
	const struct host_obs *obs;
	const struct host_driver_params *params; /* may be NULL */
	char ondisk[HOST_VERSION_LEN];
	struct agent_drv_report drv;
	bool imex_applied; /* apply ran and succeeded */
	enum nv_err imex_apply_err;
	char imex_apply_why[HOST_ERRMSG_LEN];
	char imex_hash[65]; /* nodes hash: equal on all members */
	enum nv_err channels_err;
	char channels_why[HOST_ERRMSG_LEN];
	size_t n_channels_created; /* of spec's ids, those whose node exists */
	unsigned channels_created[64];
	enum nv_err fm_err; /* from the unit reconcile */
	char fm_why[HOST_ERRMSG_LEN];
	bool fm_masked;
	const char *lease;                 /* "ns/name" of the heartbeat */
	struct host_val_result validation; /* phase NONE: no run recorded */
};

/* The whole status object for rep, merged with old (the stored status, may
 * be NULL): conditions keep their lastTransitionTime unless their status
 * flips, lastError keeps its time while it stays the same error. No
 * heartbeatTime: the caller stamps it on write. New reference. */
json_t *agent_status_build(const struct agent_report *rep, const json_t *old, int64_t now_ms);
/* status.validation of a stored status (may be NULL) as the agent's
 * record; phase NONE when absent or unreadable. */
void agent_validation_from_status(const json_t *status, struct host_val_result *out);
/* Whether a and b differ in anything but heartbeatTime. */
bool agent_status_differs(const json_t *a, const json_t *b);

/* ---- the agent ---- */

struct agent;
struct kube_client;
struct kube_stop;

struct agent_stats {
	uint64_t reconciles;
	uint64_t status_writes;
	uint64_t status_skipped;
	uint64_t lease_renewals;
	uint64_t lease_failures;
};

/* Finds the tray (by --tray, else the ComputeTray whose spec.node is
 * --node-name, waiting up to tray_wait_ms for it to appear) and prepares
 * the loop. Takes the client on every path. why says what went wrong.
 * cfg and stop are borrowed and must outlive the agent. Blocks for its
 * lookups (bounded as kube.h says) and the waits between them, until the
 * tray is found, tray_wait_ms passes, a credential is refused, or stop is
 * set (NV_E_CANCELLED). */
enum nv_err agent_new(const struct agent_config *cfg, struct kube_client *client,
                      struct kube_stop *stop, struct agent **out, char *why, size_t whysz);
/* Runs until stop is requested: informer, one reconcile worker, the Lease
 * heartbeat and the optional metrics server. Returns when everything has
 * stopped. Blocks the calling thread until stop is requested (from any
 * thread) or a part fails to start; it then requests stop itself, so the
 * stop is spent. A pass in flight ends first, which may be a driver
 * install of up to install_timeout_ms. */
enum nv_err agent_run(struct agent *a);
/* Borrowed from a, valid until agent_free. */
const char *agent_tray_name(const struct agent *a);
/* A snapshot, from any thread. */
void agent_stats_get(struct agent *a, struct agent_stats *out);
/* After agent_run has returned (or instead of it): frees the agent and its
 * client. NULL does nothing. */
void agent_free(struct agent *a);

#endif
