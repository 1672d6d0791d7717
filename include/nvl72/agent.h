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
	bool kubelet_plugin;        /* serve the DRA driver's kubelet plugin */
	char *kubelet_registry_dir; /* the kubelet's plugins_registry */
	char *kubelet_plugins_dir;  /* the kubelet's plugins folder */
	char *cdi_dir;              /* CDI specs of prepared claims */
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

/* A driver step that fails (a host tool that timed out or erred, the
 * installer, the module load) is tried again (AGENT_DRIVER_RETRY_MS). The
 * change is reported ChangeFailed, which halts a RackUpgrade's Apply step,
 * only when this many steps towards one version failed in a row; before
 * that DriverReady says Retrying. One slow systemctl on a busy host is not
 * a failed change. */
#define AGENT_DRIVER_TRIES 3
/* A failed step's retry waits this long after it, whatever pass comes
 * first (the watch event of the status it wrote comes at once): a host
 * that was busy for a moment gets the moment back. */
#define AGENT_DRIVER_RETRY_MS 2000

/* The driver change in flight, if any: what the last step did. */
struct agent_drv_report {
	bool active;              /* spec wants a version that is not loaded */
	bool waiting_maintenance; /* not Drained/Upgrading: nothing done */
	enum host_drv_phase phase;
	enum nv_err err;
	unsigned failures; /* steps that failed in a row, this one included */
	bool held;         /* no step this pass: the last one failed too recently */
	char detail[HOST_ERRMSG_LEN];
};

/* What agent_drv_tally keeps between passes. */
struct agent_drv_tally {
	unsigned fails; /* steps failed in a row towards target */
	char target[HOST_VERSION_LEN];
	int64_t at_ms;                /* monotonic time of the last failed step */
	struct agent_drv_report last; /* what it reported */
};
/* Counts the pass's driver report d, a change towards target, at now_ms
 * into t and sets d->failures to the count: a failed step adds one (the
 * first towards another target counts one); a pass without a failed step
 * (the step went on, the change is over or waits for maintenance) sets it
 * back to 0; a held pass changes nothing. */
void agent_drv_tally(struct agent_drv_tally *t, const char *target, int64_t now_ms,
                     struct agent_drv_report *d);
/* Whether the next step towards target waits at now_ms: the last failed
 * under AGENT_DRIVER_RETRY_MS ago. Then *d is its report again, held. */
bool agent_drv_hold(const struct agent_drv_tally *t, const char *target, int64_t now_ms,
                    struct agent_drv_report *d);

/* The kubelet plugin's state, as the condition KubeletPluginReady says it;
 * status "" when the plugin is off (no condition). */
struct agent_plugin_report {
	char status[8]; /* "True" or "False" */
	char reason[64];
	char message[256];
};

/* ---- NVIDIA's DRA driver on this tray ---- */

/* The driver of NVIDIA's ComputeDomain kubelet plugin
 * (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0,
 * cmd/compute-domain-kubelet-plugin/main.go, DriverName). A tray for whose
 * Node it publishes ResourceSlices is NVIDIA-managed: NVIDIA's driver runs
 * IMEX there, so the agent runs none of its own. */
#define AGENT_NVIDIA_DRIVER "compute-domain.nvidia.com"
/* The host's IMEX unit, which NVIDIA's prerequisites say to mask on such a
 * tray: its daemon and the driver's cannot hold the IMEX session together. */
#define AGENT_HOST_IMEX_UNIT "nvidia-imex.service"

enum agent_nvidia_state {
	AGENT_NVIDIA_NONE = 0, /* no slice of the driver for this Node */
	AGENT_NVIDIA_MANAGED,  /* at least one */
	AGENT_NVIDIA_UNKNOWN,  /* the slices have not been read (yet) */
};

/* What the agent knows of NVIDIA's driver on its tray, for the status. */
struct agent_nvidia_report {
	enum agent_nvidia_state state;
	unsigned nslices;
	char slice[254]; /* MANAGED: the first of the driver's slices, by name */
	char why[256];   /* UNKNOWN: why the slices are not known */
	/* spec.imex was set but is not acted on (MANAGED or UNKNOWN): its
	 * domain, for the IMEXReady condition. */
	bool imex_dropped;
	char imex_domain[128];
	/* MANAGED: the host's AGENT_HOST_IMEX_UNIT, as queried this pass. */
	bool unit_read;
	enum nv_err unit_err;
	struct host_unit_state unit;
	char unit_why[HOST_ERRMSG_LEN];
};

/* Decides state from the driver's slices for this Node (slices: an array
 * of ResourceSlices, borrowed; synced: whether it is the complete set;
 * why: the watch's last error, may be NULL) and, when the tray is
 * NVIDIA-managed or that is not known, takes spec.imex out of spec so that
 * no IMEX of ours is configured, started or stopped (the host unit
 * included), recording it in out. Pure. */
void agent_nvidia_judge(const json_t *slices, bool synced, const char *why, struct agent_spec *spec,
                        struct agent_nvidia_report *out);

struct agent_nvidia;
struct kube_client;
struct kube_workqueue;

/* Watches the ResourceSlices of AGENT_NVIDIA_DRIVER for node (one watch,
 * field selectors spec.nodeName and spec.driver; devices are not kept) and
 * adds key to q on every change. Sends no request itself; the watch runs
 * on a thread of its own until agent_nvidia_free. */
enum nv_err agent_nvidia_start(struct kube_client *c, const char *node, struct kube_workqueue *q,
                               const char *key, struct agent_nvidia **out);
/* Waits up to timeout_ms for the first list; whether it came. */
bool agent_nvidia_wait(struct agent_nvidia *n, int64_t timeout_ms);
/* One pass's view: agent_nvidia_judge over the cache, then, on an
 * NVIDIA-managed tray, the host's AGENT_HOST_IMEX_UNIT queried through h
 * (read only; the unit is never started, stopped or masked). n may be NULL
 * (the watch did not start): the state is then UNKNOWN. Blocks for the
 * unit query, bounded by the host's tool timeout. */
void agent_nvidia_pass(struct agent_nvidia *n, struct host *h, struct agent_spec *spec,
                       struct agent_nvidia_report *out);
/* Stops the watch and frees. NULL does nothing. */
void agent_nvidia_free(struct agent_nvidia *n);

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
	struct agent_plugin_report plugin;
	struct agent_nvidia_report nvidia; /* NVIDIA's DRA driver on this tray */
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

/* ---- the kubelet plugin of the DRA driver imex.nvl72.io ---- */
/* The pure half: what the plugin knows of its tray, the ResourceSlice it
 * publishes, the checks a claim must pass before it is prepared, and the
 * record of prepared claims. The services themselves run inside the agent
 * (agent_run) and are described in docs/agent.md. */

#define AGENT_DRA_DRIVER "imex.nvl72.io"
#define AGENT_DRA_SLOTS_DEFAULT 4 /* devices when the tray reports no GPU */
#define AGENT_DRA_SLOTS_MAX 16
#define AGENT_DRA_DEVICES_MAX 16  /* allocation results of one claim kept */
#define AGENT_DRA_CLAIMS_MAX 1024 /* claims in the record */

/* The tray as the plugin acts on it, from one pass. */
struct agent_dra_view {
	char node[254];
	char domain_uid[64]; /* spec.imex.domainUID; "" when in none */
	char domain_ns[64];  /* of spec.imex.domain "<namespace>.<name>" */
	char domain_name[254];
	bool imex_ready; /* daemon READY and domain Up, for domain_uid */
	char clique[HOST_CLIQUE_LEN];
	char rack[64];
	char partition[64]; /* the tray's nvl72.io/partition label; "" none */
	int64_t tray;       /* spec.index */
	unsigned slots;     /* devices: the GPUs reported, else 4 */
	bool channels_all;  /* spec: every channel below channel_count */
	unsigned channel_count;
	size_t n_channel_ids;
	unsigned channel_ids[64];
};

/* Fills v from a tray, its parsed spec and one observation (obs may be
 * NULL: nothing observed yet). */
void agent_dra_view_build(const json_t *tray, const struct agent_spec *spec,
                          const struct host_obs *obs, const char *node, struct agent_dra_view *v);

/* "<node>-imex.nvl72.io"; NV_E_TOO_LARGE past a DNS subdomain's 253. */
enum nv_err agent_dra_slice_name(const char *node, char *out, size_t outsz);
/* The node's ResourceSlice (resource.k8s.io/v1) for v: pool = the node,
 * devices slot-0..slot-(slots-1), every attribute of the contract always
 * present. New reference; NULL when the node name is too long. */
json_t *agent_dra_slice_build(const struct agent_dra_view *v, int64_t generation);
/* Whether a stored slice differs from a built one in what the plugin owns:
 * driver, node, pool name and count, and each device's name and
 * attributes (not the generation or metadata). */
bool agent_dra_slice_differs(const json_t *stored, const json_t *desired);

/* What preparing a claim gives it, once the claim passed the checks. */
struct agent_dra_plan {
	size_t n_devices;
	struct agent_dra_dev {
		char request[128];
		char pool[254];
		char device[128];
	} devices[AGENT_DRA_DEVICES_MAX];
	bool all; /* allocationMode All: every channel of the tray's spec */
	char domain_uid[64];
};

/* Checks a ResourceClaim read from the API (claim) against what the kubelet
 * asked for (ns, name, uid) and the tray (v), as the contract says: the
 * UID, an allocation on this node's pool by this driver, the opaque
 * ImexChannelConfig, membership in that ComputeDomain now, the domain's
 * namespace, IMEX READY. NV_E_INVAL (or NV_E_STATE when the tray is not
 * ready yet) with err naming the claim ("claim team-a/job: ...") and why. */
enum nv_err agent_dra_claim_check(const json_t *claim, const char *ns, const char *name,
                                  const char *uid, const struct agent_dra_view *v,
                                  struct agent_dra_plan *out, char *err, size_t errsz);
/* The channels a plan gets, at most cap: 0 for Single; for All every
 * channel of the tray's spec (0..count-1, or its ids). */
size_t agent_dra_plan_channels(const struct agent_dra_plan *p, const struct agent_dra_view *v,
                               unsigned *out, size_t cap);

/* The record of prepared claims (a JSON object {"claims": {UID: entry}} in
 * the state dir). Parsing checks every entry; a bad one fails the whole
 * record with err naming the claim UID and field. New reference. */
enum nv_err agent_dra_record_parse(const char *data, size_t len, json_t **out, char *err,
                                   size_t errsz);
/* One entry: the claim, the plan, the channels, the major, the time. New
 * reference. */
json_t *agent_dra_record_entry(const char *ns, const char *name, const char *uid,
                               const struct agent_dra_plan *p, const unsigned *channels,
                               size_t n_channels, unsigned major, int64_t now_ms);

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
