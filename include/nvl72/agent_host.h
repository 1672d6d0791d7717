/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's host layer: what a compute tray shows (driver, GPUs' NVLink
 * fabric state, IMEX, channels) and the few things the agent changes there.
 * Everything goes through a host root, configured tool paths and an ops
 * struct, so the simulator and unit tests drive the same code as a tray. */
#ifndef NVL72_AGENT_HOST_H
#define NVL72_AGENT_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

#define AGENT_GPU_MAX 8            /* NVML devices read per tray (NVL72: 4) */
#define AGENT_VERSION_LEN 64       /* "580.173.02", NVML's 80-byte buffers cut */
#define AGENT_UUID_LEN 96          /* "GPU-…" from NVML */
#define AGENT_CLIQUE_LEN 64        /* "<uuid>.<decimal clique>" */
#define AGENT_PARAMS_MAX 128       /* /proc/driver/nvidia/params lines kept */
#define AGENT_IMEX_NODES_MAX 64    /* peers in one IMEX domain (NVL72: 18) */
#define AGENT_HOSTNAME_LEN 256     /* a peer entry: IPv4, IPv6 or a DNS name */
#define AGENT_ERRMSG_LEN 256

/* ---- driver ---- */

struct agent_driver_info {
	bool loaded;                      /* /proc/driver/nvidia/version exists */
	char version[AGENT_VERSION_LEN];  /* from the NVRM line */
	bool open_module;                 /* "Open Kernel Module" flavour */
	char arch[32];                    /* "aarch64", "x86_64" */
	char sys_version[AGENT_VERSION_LEN];  /* /sys/module/nvidia/version */
	char nvml_driver[AGENT_VERSION_LEN];  /* nvmlSystemGetDriverVersion, "" if n/a */
	char nvml_version[AGENT_VERSION_LEN]; /* nvmlSystemGetNVMLVersion */
	int cuda_version;                 /* 13000 for 13.0; 0 if unknown */
};

struct agent_param {
	char name[64];
	char value[128];
};

struct agent_driver_params {
	size_t n;
	struct agent_param p[AGENT_PARAMS_MAX];
};

/* Parses /proc/driver/nvidia/version: the "NVRM version:" line only. Fills
 * version, open_module and arch; NV_E_PARSE when there is no such line. */
enum nv_err agent_proc_version_parse(const char *text, size_t len,
				     struct agent_driver_info *out);
/* A bare version line ("580.95.05\n") as in /sys/module/nvidia/version. */
enum nv_err agent_sys_version_parse(const char *text, size_t len, char *out,
				    size_t outsz);
/* "Name: value" lines; malformed lines are an error, not skipped. */
enum nv_err agent_params_parse(const char *text, size_t len,
			       struct agent_driver_params *out);
const char *agent_params_get(const struct agent_driver_params *p, const char *name);
/* Compares dotted numeric versions per component ("580.142" < "580.173.02");
 * NV_E_PARSE when either is not digits and dots. */
enum nv_err agent_version_cmp(const char *a, const char *b, int *out);

/* ---- GPUs and the NVLink fabric ---- */

enum agent_fabric_state {
	AGENT_FABRIC_NOT_SUPPORTED = 0,
	AGENT_FABRIC_NOT_STARTED = 1,
	AGENT_FABRIC_IN_PROGRESS = 2,
	AGENT_FABRIC_COMPLETED = 3,
	AGENT_FABRIC_UNKNOWN = 4,     /* NVML failed or reported garbage */
};
const char *agent_fabric_state_name(enum agent_fabric_state s);

enum agent_health_summary {
	AGENT_HEALTH_NOT_SUPPORTED = 0,
	AGENT_HEALTH_HEALTHY = 1,
	AGENT_HEALTH_UNHEALTHY = 2,
	AGENT_HEALTH_LIMITED_CAPACITY = 3,
	AGENT_HEALTH_UNKNOWN = 4,
};
const char *agent_health_summary_name(enum agent_health_summary s);

/* The health mask, one raw field value each (see agent_health_decode). */
struct agent_fabric_health {
	unsigned degraded_bw;        /* 0 n/s, 1 degraded, 2 not degraded */
	unsigned route_recovery;     /* 0 n/s, 1 in progress, 2 not */
	unsigned route_unhealthy;    /* 0 n/s, 1 unhealthy, 2 healthy */
	unsigned access_timeout;     /* 0 n/s, 1 in progress, 2 not */
	unsigned incorrect_config;   /* 0 n/s, 1 none, 2..8 a reason */
	unsigned partition;          /* 0 n/s, 1 assigned, 2 not assigned */
};
#define AGENT_HEALTH_MASK_CLEAR 0x1AAu

void agent_health_decode(uint32_t mask, struct agent_fabric_health *out);
/* Whether any decoded field reports a problem (n/s fields do not count). */
bool agent_health_has_fault(const struct agent_fabric_health *h);
/* Comma-separated problems ("degradedBandwidth,noPartition") or "". */
void agent_health_describe(const struct agent_fabric_health *h, char *out, size_t outsz);

struct agent_gpu {
	unsigned index;
	char uuid[AGENT_UUID_LEN];
	enum agent_fabric_state fabric_state;
	int fabric_status;                /* nvmlReturn_t; meaningful when COMPLETED */
	bool has_cluster;                 /* cluster UUID nonzero */
	char cluster_uuid[37];            /* lowercase dashed */
	uint32_t clique_id;
	bool has_health;                  /* NVML returned a v2+ structure */
	uint32_t health_mask;
	enum agent_health_summary health_summary;
	struct agent_fabric_health health;
	bool has_platform;
	char chassis_serial[17];
	unsigned slot, tray_index, host_id, peer_type, module_id;
	int nvml_error;                   /* last NVML error on this GPU, 0 if none */
};

/* The tray's clique from its GPUs. NV_OK with *has_clique false when the
 * fabric is not used (NOT_SUPPORTED everywhere, or a zero cluster UUID);
 * NV_E_STATE when a GPU is not COMPLETED+Success; NV_E_CONFLICT when GPUs
 * disagree. why (optional) says which GPU and how. */
enum nv_err agent_tray_clique(const struct agent_gpu *gpus, size_t n, bool *has_clique,
			      char out[AGENT_CLIQUE_LEN], char *why, size_t whysz);
/* The least advanced state of all GPUs (UNKNOWN wins). */
enum agent_fabric_state agent_tray_fabric_state(const struct agent_gpu *gpus, size_t n);
/* The worst health summary of the GPUs that report one (Unhealthy, then
 * LimitedCapacity, then Healthy); NOT_SUPPORTED when none does. */
enum agent_health_summary agent_tray_health_summary(const struct agent_gpu *gpus, size_t n);

/* ---- IMEX ---- */

enum agent_imex_mode {
	AGENT_IMEX_OFF = 0,   /* not this agent's business: leave the host alone */
	AGENT_IMEX_PROCESS,   /* the agent starts and watches nvidia-imex itself */
	AGENT_IMEX_HOST,      /* through the host's systemd unit */
};

/* What the spec asks for; the rendered files depend on nothing else. */
struct agent_imex_cfg {
	enum agent_imex_mode mode;
	char domain[128];                  /* a name for logs and the config comment */
	size_t n_peers;                    /* ordered: same list, same order on all */
	char peers[AGENT_IMEX_NODES_MAX][AGENT_HOSTNAME_LEN];
	char bind_ip[AGENT_HOSTNAME_LEN];  /* "" lets IMEX pick the listed local IP */
	unsigned server_port;              /* 0: 50000 */
	unsigned cmd_port;                 /* 0: 50005 */
	unsigned channels;                 /* channel nodes to create; 0: none */
	int grace_s;                       /* IMEX_NODE_DISCONNECTED_GRACE_TIME, -1 never */
};

/* Renders config.cfg (for nodes_path) and nodes_config.cfg into two buffers.
 * NV_E_CONFIG on an empty peer list, a bad entry or a duplicate. */
enum nv_err agent_imex_render(const struct agent_imex_cfg *c, const char *nodes_path,
			      struct buf *config, struct buf *nodes);

enum agent_imex_daemon {
	AGENT_IMEXD_UNKNOWN = 0,
	AGENT_IMEXD_INITIALIZING,
	AGENT_IMEXD_STARTING_AUTH_SERVER,
	AGENT_IMEXD_WAITING_FOR_PEERS,
	AGENT_IMEXD_WAITING_FOR_RECOVERY,
	AGENT_IMEXD_INIT_GPU,
	AGENT_IMEXD_READY,
	AGENT_IMEXD_SHUTTING_DOWN,
	AGENT_IMEXD_UNAVAILABLE,
	AGENT_IMEXD_NOT_RUNNING,      /* no daemon: ctl could not reach one */
};
const char *agent_imex_daemon_name(enum agent_imex_daemon s);

enum agent_imex_domain {
	AGENT_IMEX_DOMAIN_UNKNOWN = 0,
	AGENT_IMEX_DOMAIN_UP,
	AGENT_IMEX_DOMAIN_DOWN,
	AGENT_IMEX_DOMAIN_DEGRADED,
};
const char *agent_imex_domain_name(enum agent_imex_domain s);

enum agent_imex_conn {
	AGENT_IMEX_CONN_UNKNOWN = 0,
	AGENT_IMEX_CONN_CONNECTED,
	AGENT_IMEX_CONN_INVALID,
	AGENT_IMEX_CONN_NEVER,
	AGENT_IMEX_CONN_RECOVERING,
	AGENT_IMEX_CONN_DISCONNECTED,
	AGENT_IMEX_CONN_AUTHENTICATING,
	AGENT_IMEX_CONN_VERSION_MISMATCH,
	AGENT_IMEX_CONN_MAP_MISMATCH,
};
const char *agent_imex_conn_name(enum agent_imex_conn s);

struct agent_imex_node {
	unsigned index;
	char host[AGENT_HOSTNAME_LEN];
	enum agent_imex_daemon status;
	size_t n_conn;                              /* entries in conn[] used */
	enum agent_imex_conn conn[AGENT_IMEX_NODES_MAX]; /* by peer index */
};

struct agent_imex_domain_status {
	enum agent_imex_domain domain;
	size_t n_nodes;
	struct agent_imex_node nodes[AGENT_IMEX_NODES_MAX]; /* sorted by index */
};

/* `nvidia-imex-ctl -q`: "READY\n" and the other state words, nothing else. */
enum nv_err agent_imex_q_parse(const char *text, size_t len, enum agent_imex_daemon *out);
/* `nvidia-imex-ctl -N -j`: bounded JSON; unknown words map to UNKNOWN, an
 * index outside the table or a wrong type is NV_E_PARSE. */
enum nv_err agent_imex_nodes_parse(const char *text, size_t len,
				   struct agent_imex_domain_status *out, char *why, size_t whysz);
/* Of the nodes other than self_host, how many are READY and how many the
 * self node's row shows CONNECTED. */
void agent_imex_domain_count(const struct agent_imex_domain_status *s, const char *self_host,
			     unsigned *peers_ready, unsigned *peers_connected);

/* ---- channels ---- */

/* The major of a character device by its full name in /proc/devices
 * ("nvidia-caps-imex-channels"); NV_E_NOT_FOUND when absent. */
enum nv_err agent_proc_devices_major(const char *text, size_t len, const char *name,
				     unsigned *major);

/* ---- running tools ---- */

struct agent_run_result {
	int exit_code;       /* -1 when killed by a signal */
	int term_signal;     /* the signal, or 0 */
	bool timed_out;      /* killed at the deadline */
	bool truncated;      /* output beyond the cap was dropped */
	struct buf out;      /* stdout and stderr, capped; caller clears */
};

/* ---- the host and its ops ---- */

struct agent_host;

/* The seam between the host logic and a real (or fake) host: NVML, running
 * a tool under a deadline, creating a device node, starting a daemon. */
struct agent_host_ops {
	const char *name;
	/* Opens NVML if needed and fills up to cap GPUs, and the NVML part of
	 * drv (may be NULL). NV_E_UNSUPPORTED when NVML cannot be loaded. */
	enum nv_err (*nvml_read)(struct agent_host *h, struct agent_gpu *gpus, size_t cap,
				 size_t *n, struct agent_driver_info *drv, char *why, size_t whysz);
	/* Runs argv[0] with argv, no shell; output capped at cap bytes.
	 * NV_OK when it ran (check exit_code), NV_E_TIMEOUT when killed at the
	 * deadline, NV_E_IO when it could not start. */
	enum nv_err (*run)(struct agent_host *h, const char *const *argv, int64_t timeout_ms,
			   size_t cap, struct agent_run_result *res);
	/* Starts argv detached (own session, output to log_path) and returns its pid. */
	enum nv_err (*spawn)(struct agent_host *h, const char *const *argv, const char *log_path,
			     pid_t *pid);
	enum nv_err (*mknod_chr)(struct agent_host *h, const char *path, unsigned major,
				 unsigned minor, unsigned mode);
};

extern const struct agent_host_ops agent_host_real_ops;

/* Where things are. Every path is inside host_root; tools are absolute
 * paths run as they are (in a container: the host's, through the mount). */
struct agent_host_cfg {
	const char *host_root;       /* "/" on a tray, "/host" in a pod; default "/" */
	const char *nvml_path;       /* default "libnvidia-ml.so.1" */
	const char *systemctl;       /* default "/usr/bin/systemctl" */
	const char *modprobe;        /* default "/usr/sbin/modprobe" */
	const char *modinfo;         /* default "/usr/sbin/modinfo" */
	const char *imex_bin;        /* default "/usr/bin/nvidia-imex" */
	const char *imex_ctl;        /* default "/usr/bin/nvidia-imex-ctl" */
	const char *imex_dir;        /* in host root; default "/etc/nvidia-imex" */
	const char *state_dir;       /* in host root; default "/run/nvl72-agent" */
	const char *const *installer; /* argv; "{version}" is replaced; NULL: none */
	const char *validation_cmd;  /* validation command; NULL or "": none */
	int64_t tool_timeout_ms;     /* systemctl, modprobe, imex-ctl; default 5000 */
	int64_t install_timeout_ms;  /* default 30 min */
};

struct agent_host {
	struct agent_host_cfg cfg;
	const struct agent_host_ops *ops;
	void *nvml;                  /* the real backend's NVML state */
	char err[AGENT_ERRMSG_LEN];  /* the last failure, for conditions */
	pid_t val_pid;               /* the validation run this process started, 0: none */
	int64_t val_deadline_ms;     /* its deadline on the monotonic clock */
};

/* Copies cfg (strings are borrowed and must outlive h) filling defaults. */
void agent_host_init(struct agent_host *h, const struct agent_host_cfg *cfg,
		     const struct agent_host_ops *ops);
void agent_host_clear(struct agent_host *h);
/* host_root + path into out; NV_E_TOO_LARGE when it does not fit. */
enum nv_err agent_host_path(const struct agent_host *h, const char *path, char *out,
			    size_t outsz);
/* Reads a host file, at most max bytes (more is NV_E_TOO_LARGE). */
enum nv_err agent_host_read(const struct agent_host *h, const char *path, size_t max,
			    struct buf *out);
/* Writes a host file atomically: temp in the same folder, fsync, rename,
 * fsync of the folder. Creates missing folders (0755). */
enum nv_err agent_host_write_atomic(const struct agent_host *h, const char *path,
				    const char *data, size_t len, unsigned mode);

/* Driver: the proc and sys files, then NVML when it loads. Not loaded is
 * NV_OK with loaded false. */
enum nv_err agent_host_driver_read(struct agent_host *h, struct agent_driver_info *out);
enum nv_err agent_host_params_read(struct agent_host *h, struct agent_driver_params *out);
/* What is on disk (`modinfo -F version nvidia`); "" when none. */
enum nv_err agent_host_driver_ondisk(struct agent_host *h, char *out, size_t outsz);
enum nv_err agent_host_gpus_read(struct agent_host *h, struct agent_gpu *gpus, size_t cap,
				 size_t *n);

/* What kind of host this is, as NVIDIA's own components decide it: host
 * Fabric Manager belongs only where NVSwitches are local (HGX), never on
 * an NVL72 compute tray, where both tests are false. */
struct agent_host_kind {
	bool local_nvswitch;    /* /proc/driver/nvidia-nvswitch/devices/ not empty */
	bool switch_via_cx;     /* an InfiniBand device's VPD names SW_MNG */
	bool driver_container;  /* the GPU Operator's driver container is ready */
};
enum nv_err agent_host_kind_read(struct agent_host *h, struct agent_host_kind *out);
bool agent_host_kind_wants_fm(const struct agent_host_kind *k);

/* ---- systemd units (host Fabric Manager, host nvidia-imex, persistenced) ---- */

enum agent_unit_active {
	AGENT_UNIT_UNKNOWN = 0,
	AGENT_UNIT_ACTIVE,
	AGENT_UNIT_INACTIVE,       /* also "failed" */
	AGENT_UNIT_ACTIVATING,
	AGENT_UNIT_NOT_FOUND,      /* no such unit on this host */
};

struct agent_unit_state {
	enum agent_unit_active active;
	bool enabled;
	bool masked;
};

enum agent_unit_want {
	AGENT_UNIT_WANT_RUNNING = 0, /* enabled and started */
	AGENT_UNIT_WANT_STOPPED,     /* stopped (left enabled) */
	AGENT_UNIT_WANT_MASKED,      /* stopped, disabled and masked */
};

/* `systemctl show -p LoadState,ActiveState,UnitFileState`: KEY=value lines. */
enum nv_err agent_unit_show_parse(const char *text, size_t len, struct agent_unit_state *out);
enum nv_err agent_host_unit_query(struct agent_host *h, const char *unit,
				  struct agent_unit_state *out);
/* Brings the unit to want when allowed; else NV_E_STATE when it differs
 * (the caller turns that into a blocking condition). *changed tells
 * whether anything was done. A unit that does not exist is fine for
 * STOPPED and MASKED. */
enum nv_err agent_host_unit_reconcile(struct agent_host *h, const char *unit,
				      enum agent_unit_want want, bool allowed, bool *changed);
enum nv_err agent_host_unit_action(struct agent_host *h, const char *verb, const char *unit);

/* ---- IMEX on the host ---- */

struct agent_imex_apply {
	bool changed;          /* the files' content changed */
	bool restarted;        /* the daemon was (re)started */
	char hash[65];         /* sha256 of config.cfg + nodes_config.cfg */
	char nodes_hash[65];   /* sha256 of nodes_config.cfg: equal on all members */
	pid_t pid;             /* process mode: the daemon's pid */
};

/* Writes both files when their content differs, then makes the daemon run
 * with exactly those files: restarts it when the hash it was started with
 * differs (so a crash between the write and the restart is repaired). */
enum nv_err agent_host_imex_apply(struct agent_host *h, const struct agent_imex_cfg *c,
				  struct agent_imex_apply *out);
/* Stops the daemon of either mode; nothing running is NV_OK. */
enum nv_err agent_host_imex_stop(struct agent_host *h, enum agent_imex_mode mode);
/* Process mode: the daemon's pid from the state dir when it is alive. */
enum nv_err agent_host_imex_pid(struct agent_host *h, pid_t *pid, char hash[65]);

struct agent_imex_status {
	enum agent_imex_daemon daemon;     /* from -q */
	bool nodes_ok;                     /* -N -j answered and parsed */
	struct agent_imex_domain_status dom;
	char err[AGENT_ERRMSG_LEN];        /* why a query failed ("timed out after 2000 ms") */
};
/* Both queries under the tool timeout; a hung ctl is killed and reported
 * as NV_E_TIMEOUT with what was learned so far in out. */
enum nv_err agent_host_imex_status(struct agent_host *h, struct agent_imex_status *out);

/* Creates /dev/nvidia-caps-imex-channels/channel0..count-1 with the major
 * from /proc/devices; a node with the wrong major is replaced. */
enum nv_err agent_host_channels_ensure(struct agent_host *h, unsigned count,
				       unsigned *created);

/* ---- driver change ---- */

enum agent_drv_phase {
	AGENT_DRV_DONE = 0,          /* loaded == target */
	AGENT_DRV_STOPPING_HOLDERS,
	AGENT_DRV_INSTALLING,        /* the installer ran in this step */
	AGENT_DRV_INSTALLER_RUNNING, /* one from an earlier agent is still running */
	AGENT_DRV_RELOADING,
	AGENT_DRV_REBOOT_REQUIRED,   /* installed; the running module is in use */
	AGENT_DRV_FAILED,
};
const char *agent_drv_phase_name(enum agent_drv_phase p);

struct agent_drv_step {
	enum agent_drv_phase phase;  /* what this call did or found */
	bool finished;               /* DONE, REBOOT_REQUIRED or FAILED */
	char loaded[AGENT_VERSION_LEN];
	char ondisk[AGENT_VERSION_LEN];
	char detail[AGENT_ERRMSG_LEN];
};

/* One idempotent step towards target, chosen from the host alone: loaded
 * and on-disk versions, a live installer from an earlier run, module use
 * counts. Call again until finished; safe to resume after kill -9. */
enum nv_err agent_host_driver_step(struct agent_host *h, const char *target,
				   enum agent_imex_mode imex_mode, struct agent_drv_step *out);

/* ---- validation runs ---- */

/* The output contract of a validation command: a line `busbw_gbps=<number>`
 * (the all-reduce bus bandwidth in GB/s, as nccl-tests reports busbw) and
 * optionally `transport=<name>`; nccl-tests' own summary line
 * `# Avg bus bandwidth    : 812.34` is accepted too, so the real tool works
 * behind a thin wrapper. Everything else is ignored. */
#define AGENT_VALIDATION_ID_LEN 64
#define AGENT_VALIDATION_ARGS_MAX 16
#define AGENT_VALIDATION_ARG_LEN 256
#define AGENT_VALIDATION_TRANSPORT_LEN 32
#define AGENT_VALIDATION_OUTPUT_MAX (256 * 1024) /* more kills the run */
#define AGENT_VALIDATION_BUSBW_MAX 100000.0

enum agent_val_phase {
	AGENT_VAL_NONE = 0, /* no run recorded */
	AGENT_VAL_RUNNING,
	AGENT_VAL_SUCCEEDED,
	AGENT_VAL_FAILED,
};
const char *agent_val_phase_name(enum agent_val_phase p);

/* What spec.validation asks for. */
struct agent_val_request {
	char id[AGENT_VALIDATION_ID_LEN];
	int64_t timeout_ms;
	size_t n_args;
	char args[AGENT_VALIDATION_ARGS_MAX][AGENT_VALIDATION_ARG_LEN];
};

/* One run as status.validation reports it. */
struct agent_val_result {
	char id[AGENT_VALIDATION_ID_LEN];
	enum agent_val_phase phase;
	bool has_busbw;
	double busbw_gbps;                /* rounded to 0.01 */
	char transport[AGENT_VALIDATION_TRANSPORT_LEN];
	int64_t start_ms;                 /* wall clock; 0: unknown */
	int64_t end_ms;                   /* wall clock; 0: still running */
	char message[AGENT_ERRMSG_LEN];
};

/* Parses a validation command's output (see the contract above). A
 * busbw_gbps line wins over the nccl-tests summary; the last of each kind
 * counts. NV_E_PARSE with why filled when no figure is there or a figure,
 * a transport or the bytes themselves (a NUL) are not what the contract
 * says; nccl-tests' "# Out of bounds values : N FAILED" is an error too. */
enum nv_err agent_validation_output_parse(const char *text, size_t len, double *busbw_gbps,
					  char *transport, size_t transportsz, char *why,
					  size_t whysz);

/* The record of the last run in the state dir (`validation.state`:
 * key=value lines, with the pid and start time of a run in flight). */
enum nv_err agent_validation_state_parse(const char *text, size_t len,
					 struct agent_val_result *out, long long *pid,
					 unsigned long long *pid_start);

/* One step of validation runs, decided from the state file: finishes or
 * times out the run this process started, reports a run left by a killed
 * agent as Failed ("agent restarted during the run") and kills what is left
 * of it, and starts req when its id is not the recorded one (req NULL:
 * start nothing). reported (may be NULL) is the tray's stored
 * status.validation, adopted when the state file is gone (a reboot wipes
 * /run) so that a finished id is never run again. *out is the record after
 * the step; phase NONE when there is none. */
enum nv_err agent_host_validation_step(struct agent_host *h, const struct agent_val_request *req,
				       const struct agent_val_result *reported,
				       struct agent_val_result *out);

/* ---- one observation of the whole host ---- */

/* One part of an observation: NV_OK, or the error and why. */
struct agent_obs_part {
	enum nv_err err;
	char why[AGENT_ERRMSG_LEN];
};

/* Everything the tray's status reports, read in one pass. A part that
 * fails is recorded with its reason and the rest is still read, so a bad
 * host file or a hung tool becomes a condition, never a missing status. */
struct agent_host_obs {
	struct agent_driver_info driver;
	struct agent_obs_part driver_part;
	unsigned imex_channel_count;       /* from the module parameters; 0 if unknown */
	size_t n_gpus;
	struct agent_gpu gpus[AGENT_GPU_MAX];
	struct agent_obs_part gpus_part;
	enum agent_fabric_state fabric;    /* worst of the GPUs */
	enum agent_health_summary health;  /* worst of the GPUs */
	bool has_clique;
	char clique[AGENT_CLIQUE_LEN];
	struct agent_obs_part clique_part; /* NV_E_STATE / NV_E_CONFLICT and the GPU */
	struct agent_host_kind kind;
	struct agent_unit_state fm;        /* host Fabric Manager */
	struct agent_obs_part fm_part;     /* NV_E_STATE when it runs where it must not */
	bool imex_read;                    /* IMEX was queried (mode not OFF) */
	struct agent_imex_status imex;
	struct agent_obs_part imex_part;
};

/* Reads the host once. imex_mode OFF skips the IMEX queries. Always NV_OK
 * unless an argument is bad; look at the parts. */
enum nv_err agent_host_observe(struct agent_host *h, enum agent_imex_mode imex_mode,
			       struct agent_host_obs *out);

#endif
