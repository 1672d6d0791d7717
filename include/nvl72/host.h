/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's host layer: what a compute tray shows (driver, GPUs' NVLink
 * fabric state, IMEX, channels) and the few things the agent changes there.
 * Everything goes through a host root, configured tool paths and an ops
 * struct, so the simulator and unit tests drive the same code as a tray. */
/* Contract. Two kinds of call. The parsers and the helpers on plain values
 * (host_*_parse, host_health_*, host_tray_*, host_imex_render, the _name
 * calls) are pure: no I/O, no blocking, thread-safe on distinct arguments;
 * names returned are static. Every call taking a struct host is one thread
 * per host (it records the last failure in h->err and keeps NVML and the
 * validation run in h): the agent makes them from its one reconcile
 * worker. Those calls read and write files under host_root and run tools
 * through h->ops on the calling thread, each run bounded by
 * tool_timeout_ms (default 5 s). Longer waits are named where they happen:
 * host_driver_step waits for the installer (install_timeout_ms, default
 * 30 min, or until cfg.stopping says the agent stops), stopping an IMEX daemon allows it 5 s to
 * exit before SIGKILL, and starting one waits 150 ms to see it stay up. Results go into caller
 * storage, which a failed call may have partly filled: read it after an
 * error only where the call says what it holds then. */
#ifndef NVL72_HOST_H
#define NVL72_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

#define HOST_GPU_MAX 8         /* NVML devices read per tray (NVL72: 4) */
#define HOST_VERSION_LEN 64    /* "580.173.02", NVML's 80-byte buffers cut */
#define HOST_UUID_LEN 96       /* "GPU-…" from NVML */
#define HOST_CLIQUE_LEN 64     /* "<uuid>.<decimal clique>" */
#define HOST_PARAMS_MAX 128    /* /proc/driver/nvidia/params lines kept */
#define HOST_IMEX_NODES_MAX 64 /* peers in one IMEX domain (NVL72: 18) */
#define HOST_HOSTNAME_LEN 256  /* a peer entry: IPv4, IPv6 or a DNS name */
#define HOST_ERRMSG_LEN 256

/* ---- driver ---- */

struct host_driver_info {
	bool loaded;                         /* /proc/driver/nvidia/version exists */
	char version[HOST_VERSION_LEN];      /* from the NVRM line */
	bool open_module;                    /* "Open Kernel Module" flavour */
	char arch[32];                       /* "aarch64", "x86_64" */
	char sys_version[HOST_VERSION_LEN];  /* /sys/module/nvidia/version */
	char nvml_driver[HOST_VERSION_LEN];  /* nvmlSystemGetDriverVersion, "" if n/a */
	char nvml_version[HOST_VERSION_LEN]; /* nvmlSystemGetNVMLVersion */
	int cuda_version;                    /* 13000 for 13.0; 0 if unknown */
};

struct host_param {
	char name[64];
	char value[128];
};

struct host_driver_params {
	size_t n;
	struct host_param p[HOST_PARAMS_MAX];
};

/* Parses /proc/driver/nvidia/version: the "NVRM version:" line only. Fills
 * version, open_module and arch; NV_E_PARSE when there is no such line. */
enum nv_err host_proc_version_parse(const char *text, size_t len, struct host_driver_info *out);
/* A bare version line ("580.95.05\n") as in /sys/module/nvidia/version. */
enum nv_err host_sys_version_parse(const char *text, size_t len, char *out, size_t outsz);
/* "Name: value" lines; malformed lines are an error, not skipped. */
enum nv_err host_params_parse(const char *text, size_t len, struct host_driver_params *out);
/* The value (borrowed from p) or NULL. */
const char *host_params_get(const struct host_driver_params *p, const char *name);
/* Compares dotted numeric versions per component ("580.142" < "580.173.02");
 * NV_E_PARSE when either is not digits and dots. */
enum nv_err host_version_cmp(const char *a, const char *b, int *out);

/* ---- GPUs and the NVLink fabric ---- */

enum host_fabric_state {
	HOST_FABRIC_NOT_SUPPORTED = 0,
	HOST_FABRIC_NOT_STARTED = 1,
	HOST_FABRIC_IN_PROGRESS = 2,
	HOST_FABRIC_COMPLETED = 3,
	HOST_FABRIC_UNKNOWN = 4, /* NVML failed or reported garbage */
};
const char *host_fabric_state_name(enum host_fabric_state s);

enum host_health_summary {
	HOST_HEALTH_NOT_SUPPORTED = 0,
	HOST_HEALTH_HEALTHY = 1,
	HOST_HEALTH_UNHEALTHY = 2,
	HOST_HEALTH_LIMITED_CAPACITY = 3,
	HOST_HEALTH_UNKNOWN = 4,
};
const char *host_health_summary_name(enum host_health_summary s);

/* The health mask, one raw field value each (see host_health_decode). */
struct host_fabric_health {
	unsigned degraded_bw;      /* 0 n/s, 1 degraded, 2 not degraded */
	unsigned route_recovery;   /* 0 n/s, 1 in progress, 2 not */
	unsigned route_unhealthy;  /* 0 n/s, 1 unhealthy, 2 healthy */
	unsigned access_timeout;   /* 0 n/s, 1 in progress, 2 not */
	unsigned incorrect_config; /* 0 n/s, 1 none, 2..8 a reason */
	unsigned partition;        /* 0 n/s, 1 assigned, 2 not assigned */
};
#define HOST_HEALTH_MASK_CLEAR 0x1AAu

void host_health_decode(uint32_t mask, struct host_fabric_health *out);
/* Whether any decoded field reports a problem (n/s fields do not count). */
bool host_health_has_fault(const struct host_fabric_health *h);
/* Comma-separated problems ("degradedBandwidth,noPartition") or "". */
void host_health_describe(const struct host_fabric_health *h, char *out, size_t outsz);

/* Where a GPU's health summary came from. nvmlGpuFabricInfo_v3_t, which
 * carries healthSummary, first appears in the NVML API 13 headers (R580);
 * API 12 drivers (R570, R575) answer only nvmlGpuFabricInfo_v2_t, which has
 * the health mask alone. */
enum host_health_source {
	HOST_HEALTH_SRC_NONE = 0, /* no v2+ structure: nothing decided */
	HOST_HEALTH_SRC_SUMMARY,  /* NVML's own healthSummary */
	HOST_HEALTH_SRC_MASK,     /* decided here from healthMask */
};
/* "summary", "mask", or "" for NONE. */
const char *host_health_source_name(enum host_health_source s);
/* The summary a decoded mask supports on its own, for drivers that report
 * none: NOT_SUPPORTED when no field is supported; LIMITED_CAPACITY when the
 * only fault is degraded bandwidth; UNHEALTHY for any other fault (those of
 * host_health_has_fault); else HEALTHY. NVML does not publish how it derives
 * its own summary, so this mapping is the project's. */
enum host_health_summary host_health_from_mask(const struct host_fabric_health *h);

struct host_gpu {
	unsigned index;
	char uuid[HOST_UUID_LEN];
	enum host_fabric_state fabric_state;
	int fabric_status;     /* nvmlReturn_t; meaningful when COMPLETED */
	bool has_cluster;      /* cluster UUID nonzero */
	char cluster_uuid[37]; /* lowercase dashed */
	uint32_t clique_id;
	bool has_health; /* NVML returned a v2+ structure */
	uint32_t health_mask;
	enum host_health_summary health_summary; /* NVML's, or from the mask */
	enum host_health_source health_source;
	struct host_fabric_health health;
	/* Inventory; "" when NVML does not give it. Sizes are the buffers
	 * nvml.h guarantees large enough (NVML_DEVICE_*_BUFFER_SIZE). */
	char vbios[32];      /* nvmlDeviceGetVbiosVersion: VBIOS_VERSION */
	char pci_bus_id[32]; /* nvmlDeviceGetPciInfo_v3 busId: PCI_BUS_ID */
	char board_part[80]; /* nvmlDeviceGetBoardPartNumber: PART_NUMBER */
	char serial[30];     /* nvmlDeviceGetSerial: SERIAL */
	bool has_platform;
	char chassis_serial[17];
	unsigned slot, tray_index, host_id, peer_type, module_id;
	int nvml_error; /* last NVML error on this GPU, 0 if none */
};

/* The tray's clique from its GPUs. NV_OK with *has_clique false when the
 * fabric is not used (NOT_SUPPORTED everywhere, or a zero cluster UUID);
 * NV_E_STATE when a GPU is not COMPLETED+Success; NV_E_CONFLICT when GPUs
 * disagree. why (optional) says which GPU and how. */
enum nv_err host_tray_clique(const struct host_gpu *gpus, size_t n, bool *has_clique,
                             char out[HOST_CLIQUE_LEN], char *why, size_t whysz);
/* The least advanced state of all GPUs (UNKNOWN wins). */
enum host_fabric_state host_tray_fabric_state(const struct host_gpu *gpus, size_t n);
/* The worst health summary of the GPUs that report one (Unhealthy, then
 * LimitedCapacity, then Healthy); NOT_SUPPORTED when none does. */
enum host_health_summary host_tray_health_summary(const struct host_gpu *gpus, size_t n);
/* MASK when any GPU's health was decided from its mask, else SUMMARY when
 * any GPU reports one, else NONE. */
enum host_health_source host_tray_health_source(const struct host_gpu *gpus, size_t n);

/* ---- IMEX ---- */

enum host_imex_mode {
	HOST_IMEX_OFF = 0, /* not this agent's business: leave the host alone */
	HOST_IMEX_PROCESS, /* the agent starts and watches nvidia-imex itself */
	HOST_IMEX_HOST,    /* through the host's systemd unit */
};

/* What the spec asks for; the rendered files depend on nothing else. */
struct host_imex_cfg {
	enum host_imex_mode mode;
	char domain[128]; /* a name for logs and the config comment */
	size_t n_peers;   /* ordered: same list, same order on all */
	char peers[HOST_IMEX_NODES_MAX][HOST_HOSTNAME_LEN];
	char bind_ip[HOST_HOSTNAME_LEN]; /* "" lets IMEX pick the listed local IP */
	unsigned server_port;            /* 0: 50000 */
	unsigned cmd_port;               /* 0: 50005 */
	unsigned channels;               /* channel nodes to create; 0: none */
	int grace_s;                     /* IMEX_NODE_DISCONNECTED_GRACE_TIME, -1 never */
	/* The nodes file lists one stable name per slot (peers[] position)
	 * and the hosts file maps the names to peers[], so a new address in a
	 * slot is a SIGUSR1, not a restart. Needs IMEX 570.158.01 or later
	 * and a daemon that resolves through the host's /etc/hosts; taken
	 * only when every peer is an address. false: the peers themselves,
	 * restarted on every change. */
	bool by_name;
};

/* Names: "nvl72-imex-" + 8 hex digits of sha256(domain) + "-" + the slot,
 * two digits: one DNS label, the same on every member, never another
 * domain's. */
#define HOST_IMEX_NAME_PREFIX "nvl72-imex-"
void host_imex_slot_name(const char *domain, size_t slot, char out[HOST_HOSTNAME_LEN]);

/* Renders config.cfg (for nodes_path), nodes_config.cfg and the hosts
 * file block (empty unless c->by_name) into three buffers. NV_E_CONFIG on
 * an empty peer list, a bad entry or a duplicate. */
enum nv_err host_imex_render(const struct host_imex_cfg *c, const char *nodes_path,
                             struct buf *config, struct buf *nodes, struct buf *hosts);

/* A hosts file's text with the agent's part replaced by block ("": none):
 * the lines between "# BEGIN nvl72-agent IMEX" and "# END nvl72-agent IMEX"
 * markers and any line naming a HOST_IMEX_NAME_PREFIX name are dropped,
 * every other line is kept as it was, and block is appended. NV_E_PARSE
 * on a NUL byte; NV_E_TOO_LARGE past out's cap. */
#define HOST_HOSTS_BEGIN "# BEGIN nvl72-agent IMEX"
#define HOST_HOSTS_END "# END nvl72-agent IMEX"
enum nv_err host_hosts_merge(const char *text, size_t len, const char *block, struct buf *out);

/* What a running daemon was started or last signalled with. */
struct host_imex_running {
	bool alive;
	char hash[65];       /* config.cfg + nodes_config.cfg */
	char hosts_hash[65]; /* the hosts block; "" when not recorded */
	int64_t resolved_ms; /* wall time it last resolved the names (start, SIGUSR1) */
};

enum host_imex_action {
	HOST_IMEX_KEEP = 0,     /* runs with exactly these files */
	HOST_IMEX_RESTART,      /* not running, or its own config changed */
	HOST_IMEX_SIGNAL,       /* only the name mapping changed: SIGUSR1 */
	HOST_IMEX_SIGNAL_LATER, /* the same, but the last resolve is too recent */
};
/* The IMEX guide (signals): SIGUSR1 is acted on at most once per 5 s. */
#define HOST_IMEX_RESOLVE_GAP_MS 5000
/* Restart or signal: restart only when the daemon's own files (hash)
 * differ; a new hosts block alone is a signal, or a wait of *wait_ms when
 * the daemon resolved less than HOST_IMEX_RESOLVE_GAP_MS ago. */
enum host_imex_action host_imex_decide(const struct host_imex_running *run, const char *hash,
                                       const char *hosts_hash, int64_t now_ms, int64_t *wait_ms);

enum host_imex_daemon {
	HOST_IMEXD_UNKNOWN = 0,
	HOST_IMEXD_INITIALIZING,
	HOST_IMEXD_STARTING_AUTH_SERVER,
	HOST_IMEXD_WAITING_FOR_PEERS,
	HOST_IMEXD_WAITING_FOR_RECOVERY,
	HOST_IMEXD_INIT_GPU,
	HOST_IMEXD_READY,
	HOST_IMEXD_SHUTTING_DOWN,
	HOST_IMEXD_UNAVAILABLE,
	HOST_IMEXD_NOT_RUNNING, /* no daemon: ctl could not reach one */
};
const char *host_imex_daemon_name(enum host_imex_daemon s);

enum host_imex_domain {
	HOST_IMEX_DOMAIN_UNKNOWN = 0,
	HOST_IMEX_DOMAIN_UP,
	HOST_IMEX_DOMAIN_DOWN,
	HOST_IMEX_DOMAIN_DEGRADED,
};
const char *host_imex_domain_name(enum host_imex_domain s);

enum host_imex_conn {
	HOST_IMEX_CONN_UNKNOWN = 0,
	HOST_IMEX_CONN_CONNECTED,
	HOST_IMEX_CONN_INVALID,
	HOST_IMEX_CONN_NEVER,
	HOST_IMEX_CONN_RECOVERING,
	HOST_IMEX_CONN_DISCONNECTED,
	HOST_IMEX_CONN_AUTHENTICATING,
	HOST_IMEX_CONN_VERSION_MISMATCH,
	HOST_IMEX_CONN_MAP_MISMATCH,
};
const char *host_imex_conn_name(enum host_imex_conn s);

struct host_imex_node {
	unsigned index;
	char host[HOST_HOSTNAME_LEN];
	enum host_imex_daemon status;
	size_t n_conn;                                 /* entries in conn[] used */
	enum host_imex_conn conn[HOST_IMEX_NODES_MAX]; /* by peer index */
};

struct host_imex_domain_status {
	enum host_imex_domain domain;
	size_t n_nodes;
	struct host_imex_node nodes[HOST_IMEX_NODES_MAX]; /* sorted by index */
};

/* `nvidia-imex-ctl -q`: "READY\n" and the other state words, nothing else. */
enum nv_err host_imex_q_parse(const char *text, size_t len, enum host_imex_daemon *out);
/* `nvidia-imex-ctl -N -j`: bounded JSON; unknown words map to UNKNOWN, an
 * index outside the table or a wrong type is NV_E_PARSE. */
enum nv_err host_imex_nodes_parse(const char *text, size_t len, struct host_imex_domain_status *out,
                                  char *why, size_t whysz);
/* Of the nodes other than self_host, how many are READY and how many the
 * self node's row shows CONNECTED. */
void host_imex_domain_count(const struct host_imex_domain_status *s, const char *self_host,
                            unsigned *peers_ready, unsigned *peers_connected);

/* ---- channels ---- */

/* The major of a character device by its full name in /proc/devices
 * ("nvidia-caps-imex-channels"); NV_E_NOT_FOUND when absent. */
enum nv_err host_proc_devices_major(const char *text, size_t len, const char *name,
                                    unsigned *major);

/* ---- running tools ---- */

struct host_run_result {
	int exit_code;   /* -1 when killed by a signal */
	int term_signal; /* the signal, or 0 */
	bool timed_out;  /* killed at the deadline */
	bool truncated;  /* output beyond the cap was dropped */
	struct buf out;  /* stdout and stderr, capped; caller clears */
};

/* ---- the host and its ops ---- */

struct host;

/* What a detached child waits for before it executes: the caller records
 * the pid (a marker, a pid file) so that whoever comes after us finds it. */
struct host_spawn_gate {
	enum nv_err (*record)(void *arg, pid_t pid);
	void *arg;
	/* An fd (a held lock) that the child keeps open across exec as fd 4,
	 * so that it lives exactly as long as the child and what it forks;
	 * NULL: the child keeps none of ours. */
	const int *hold_fd;
};

/* The seam between the host logic and a real (or fake) host: NVML, running
 * a tool under a deadline, creating a device node, starting a daemon. The
 * calls run on the thread of the host call that makes them. */
struct host_ops {
	const char *name;
	/* Opens NVML if needed and fills up to cap GPUs, and the NVML part of
	 * drv (may be NULL). NV_E_UNSUPPORTED when NVML cannot be loaded. */
	enum nv_err (*nvml_read)(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n,
	                         struct host_driver_info *drv, char *why, size_t whysz);
	/* Runs argv[0] with argv, no shell; output capped at cap bytes.
	 * NV_OK when it ran (check exit_code), NV_E_TIMEOUT when killed at the
	 * deadline, NV_E_IO when it could not start. */
	enum nv_err (*run)(struct host *h, const char *const *argv, int64_t timeout_ms, size_t cap,
	                   struct host_run_result *res);
	/* Starts argv detached (own session, output to log_path) and returns its
	 * pid. With a gate, argv is not executed until gate->record(pid) has
	 * returned NV_OK; if it fails, or we die first, argv never runs. */
	enum nv_err (*spawn)(struct host *h, const char *const *argv, const char *log_path,
	                     const struct host_spawn_gate *gate, pid_t *pid);
	enum nv_err (*mknod_chr)(struct host *h, const char *path, unsigned major, unsigned minor,
	                         unsigned mode);
};

extern const struct host_ops host_real_ops;

/* Which file system the configured tools see, and so which path of a host
 * file they are handed (argv, the IMEX config's IMEX_NODE_CONFIG_FILE).
 * The agent's own reads and writes always go through host_root. */
enum host_tool_ns {
	/* The host's mount namespace: run on the tray itself, or in a pod
	 * through wrappers that nsenter into the host's (the agent image).
	 * They get the host's own path: "/etc/nvidia-imex/config.cfg". */
	HOST_TOOL_NS_HOST = 0,
	/* The agent's own: they get the path under host_root, as the agent
	 * opens it ("/host/etc/nvidia-imex/config.cfg" in a pod). */
	HOST_TOOL_NS_AGENT,
};

/* Where things are. Every path is inside host_root; tools are absolute
 * paths run as they are, in the namespace tool_ns says. */
struct host_cfg {
	const char *host_root;        /* "/" on a tray, "/host" in a pod; default "/" */
	enum host_tool_ns tool_ns;    /* default HOST_TOOL_NS_HOST */
	const char *nvml_path;        /* default "libnvidia-ml.so.1" */
	const char *systemctl;        /* default "/usr/bin/systemctl" */
	const char *modprobe;         /* default "/usr/sbin/modprobe" */
	const char *modinfo;          /* default "/usr/sbin/modinfo" */
	const char *imex_bin;         /* default "/usr/bin/nvidia-imex" */
	const char *imex_ctl;         /* default "/usr/bin/nvidia-imex-ctl" */
	const char *imex_dir;         /* in host root; default "/etc/nvidia-imex" */
	const char *hosts_file;       /* in host root; default "/etc/hosts" */
	const char *state_dir;        /* in host root; default "/run/nvl72-agent" */
	const char *const *installer; /* argv; "{version}" is replaced; NULL: none */
	const char *validation_cmd;   /* validation command; NULL or "": none */
	int64_t tool_timeout_ms;      /* systemctl, modprobe, imex-ctl; default 5000 */
	int64_t install_timeout_ms;   /* default 30 min */
	/* Polled during the installer wait: true ends the wait and leaves the
	 * installer running for the next agent to adopt. NULL: never. */
	bool (*stopping)(void *arg);
	void *stopping_arg;
};

struct host {
	struct host_cfg cfg;
	const struct host_ops *ops;
	void *nvml;                /* the real backend's NVML state */
	char err[HOST_ERRMSG_LEN]; /* the last failure, for conditions */
	pid_t val_pid;             /* the validation run this process started, 0: none */
	int64_t val_deadline_ms;   /* its deadline on the monotonic clock */
};

/* Copies cfg (strings are borrowed and must outlive h) filling defaults;
 * ops NULL is host_real_ops. host_clear closes NVML (h NULL does nothing). */
void host_init(struct host *h, const struct host_cfg *cfg, const struct host_ops *ops);
void host_clear(struct host *h);
/* host_root + path into out: the host file as the agent opens it.
 * NV_E_TOO_LARGE when it does not fit. */
enum nv_err host_path(const struct host *h, const char *path, char *out, size_t outsz);
/* The same host file as the tools see it (see enum host_tool_ns): path
 * itself, made absolute, for HOST_TOOL_NS_HOST; host_path for
 * HOST_TOOL_NS_AGENT. Whatever names a host file to a tool or to a file a
 * tool reads goes through this, never through host_path. */
enum nv_err host_tool_path(const struct host *h, const char *path, char *out, size_t outsz);
/* Reads a host file, at most max bytes (more is NV_E_TOO_LARGE). */
enum nv_err host_read(const struct host *h, const char *path, size_t max, struct buf *out);
/* Writes a host file atomically: temp in the same folder, fsync, rename,
 * fsync of the folder. Creates missing folders (0755). */
enum nv_err host_write_atomic(const struct host *h, const char *path, const char *data, size_t len,
                              unsigned mode);

/* Driver: the proc and sys files, then NVML when it loads. Not loaded is
 * NV_OK with loaded false. */
enum nv_err host_driver_read(struct host *h, struct host_driver_info *out);
enum nv_err host_params_read(struct host *h, struct host_driver_params *out);
/* What is on disk (`modinfo -F version nvidia`); "" when none. */
enum nv_err host_driver_ondisk(struct host *h, char *out, size_t outsz);
enum nv_err host_gpus_read(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n);

/* What kind of host this is, as NVIDIA's own components decide it: host
 * Fabric Manager belongs only where NVSwitches are local (HGX), never on
 * an NVL72 compute tray, where both tests are false. */
struct host_kind {
	bool local_nvswitch;   /* /proc/driver/nvidia-nvswitch/devices/ not empty */
	bool switch_via_cx;    /* an InfiniBand device's VPD names SW_MNG */
	bool driver_container; /* the GPU Operator's driver container is ready */
};
enum nv_err host_kind_read(struct host *h, struct host_kind *out);
bool host_kind_wants_fm(const struct host_kind *k);

/* ---- systemd units (host Fabric Manager, host nvidia-imex, persistenced) ---- */

enum host_unit_active {
	HOST_UNIT_UNKNOWN = 0,
	HOST_UNIT_ACTIVE,
	HOST_UNIT_INACTIVE, /* also "failed" */
	HOST_UNIT_ACTIVATING,
	HOST_UNIT_NOT_FOUND, /* no such unit on this host */
};

struct host_unit_state {
	enum host_unit_active active;
	bool enabled;
	bool masked;
};

enum host_unit_want {
	HOST_UNIT_WANT_RUNNING = 0, /* enabled and started */
	HOST_UNIT_WANT_STOPPED,     /* stopped (left enabled) */
	HOST_UNIT_WANT_MASKED,      /* stopped, disabled and masked */
};

/* `systemctl show -p LoadState,ActiveState,UnitFileState`: KEY=value lines. */
enum nv_err host_unit_show_parse(const char *text, size_t len, struct host_unit_state *out);
enum nv_err host_unit_query(struct host *h, const char *unit, struct host_unit_state *out);
/* Brings the unit to want when allowed; else NV_E_STATE when it differs
 * (the caller turns that into a blocking condition). *changed tells
 * whether anything was done. A unit that does not exist is fine for
 * STOPPED and MASKED. */
enum nv_err host_unit_reconcile(struct host *h, const char *unit, enum host_unit_want want,
                                bool allowed, bool *changed);
enum nv_err host_unit_action(struct host *h, const char *verb, const char *unit);
/* `systemctl kill --kill-whom=main --signal=SIG -- unit` (SIG like "SIGUSR1"). */
enum nv_err host_unit_signal(struct host *h, const char *unit, const char *sig);

/* ---- IMEX on the host ---- */

struct host_imex_apply {
	bool changed;        /* the files' content changed */
	bool restarted;      /* the daemon was (re)started */
	bool signalled;      /* the daemon was sent SIGUSR1 to resolve again */
	int64_t retry_ms;    /* > 0: a signal is due in that many ms */
	char hash[65];       /* sha256 of config.cfg + nodes_config.cfg */
	char nodes_hash[65]; /* sha256 of nodes_config.cfg + hosts block: equal on all members */
	pid_t pid;           /* process mode: the daemon's pid */
};

/* Writes the files (and the hosts block) when their content differs, then
 * makes the daemon run with exactly those: host_imex_decide on what it was
 * started or signalled with, as recorded, so a crash between the write and
 * the restart or signal is repaired by the next call. */
enum nv_err host_imex_apply(struct host *h, const struct host_imex_cfg *c,
                            struct host_imex_apply *out);
/* Stops the daemon of either mode; nothing running is NV_OK. */
enum nv_err host_imex_stop(struct host *h, enum host_imex_mode mode);
/* Process mode: the daemon's pid from the state dir when it is alive. */
enum nv_err host_imex_pid(struct host *h, pid_t *pid, char hash[65]);

struct host_imex_status {
	enum host_imex_daemon daemon; /* from -q */
	bool nodes_ok;                /* -N -j answered and parsed */
	struct host_imex_domain_status dom;
	char err[HOST_ERRMSG_LEN]; /* why a query failed ("timed out after 2000 ms") */
};
/* Both queries under the tool timeout; a hung ctl is killed and reported
 * as NV_E_TIMEOUT with what was learned so far in out. */
enum nv_err host_imex_status(struct host *h, struct host_imex_status *out);

/* Creates /dev/nvidia-caps-imex-channels/channel0..count-1 with the major
 * from /proc/devices; a node with the wrong major is replaced. */
enum nv_err host_channels_ensure(struct host *h, unsigned count, unsigned *created);
/* The major of the IMEX channel class from /proc/devices, read now. */
enum nv_err host_channel_major(struct host *h, unsigned *major);

/* ---- CDI specs of prepared channel claims ---- */
/* The CDI folder is a path of the agent's own (the container runtime's
 * folder mounted at the same place), not under the host root, so these
 * take it instead of a struct host; the file calls are safe from any
 * thread on distinct claims. */

/* The CDI vendor and kind of the kubelet plugin's specs: files are
 * "<cdi dir>/imex.nvl72.io-<claim UID>.json", device ids
 * "imex.nvl72.io/channel=<claim UID>". */
#define HOST_CDI_VENDOR "imex.nvl72.io"
#define HOST_CDI_KIND "imex.nvl72.io/channel"
#define HOST_CDI_CHANNELS_MAX 4096
/* The spec file of a claim. NV_E_INVAL when the UID is not a CDI device
 * name (letters, digits, '-', '_', '.', ':'; at most 128 bytes). */
enum nv_err host_cdi_path(const char *cdi_dir, const char *claim_uid, char *out, size_t outsz);
/* Pure: the spec of one device named by the claim UID whose container
 * edits are the character devices /dev/nvidia-caps-imex-channels/channel<N>
 * (major, minor N, rw, mode 0666) for each of channels, appended to out. */
enum nv_err host_cdi_render(const char *claim_uid, unsigned major, const unsigned *channels,
                            size_t n_channels, struct buf *out);
/* Writes a claim's spec atomically (temp file, fsync, rename, fsync of the
 * folder), making the folder when missing. */
enum nv_err host_cdi_write(const char *cdi_dir, const char *claim_uid, const char *data,
                           size_t len);
/* Removes a claim's spec; none there is NV_OK with removed false. */
enum nv_err host_cdi_remove(const char *cdi_dir, const char *claim_uid, bool *removed);
bool host_cdi_exists(const char *cdi_dir, const char *claim_uid);

/* ---- driver change ---- */

enum host_drv_phase {
	HOST_DRV_DONE = 0, /* loaded == target */
	HOST_DRV_STOPPING_HOLDERS,
	HOST_DRV_INSTALLING,        /* the installer ran in this step */
	HOST_DRV_INSTALLER_RUNNING, /* one from an earlier agent is still running */
	HOST_DRV_RELOADING,
	HOST_DRV_REBOOT_REQUIRED, /* installed; the running module is in use */
	HOST_DRV_FAILED,
};
const char *host_drv_phase_name(enum host_drv_phase p);

struct host_drv_step {
	enum host_drv_phase phase; /* what this call did or found */
	bool finished;             /* DONE, REBOOT_REQUIRED or FAILED */
	char loaded[HOST_VERSION_LEN];
	char ondisk[HOST_VERSION_LEN];
	char detail[HOST_ERRMSG_LEN];
};

/* One idempotent step towards target, chosen from the host alone: loaded
 * and on-disk versions, a live installer from an earlier run, module use
 * counts. Call again until finished; safe to resume after kill -9. */
enum nv_err host_driver_step(struct host *h, const char *target, enum host_imex_mode imex_mode,
                             struct host_drv_step *out);

/* ---- validation runs ---- */

/* The output contract of a validation command: a line `busbw_gbps=<number>`
 * (the all-reduce bus bandwidth in GB/s, as nccl-tests reports busbw) and
 * optionally `transport=<name>`; nccl-tests' own summary line
 * `# Avg bus bandwidth    : 812.34` is accepted too, so the real tool works
 * behind a thin wrapper. Everything else is ignored. */
#define HOST_VALIDATION_ID_LEN 64
#define HOST_VALIDATION_ARGS_MAX 16
#define HOST_VALIDATION_ARG_LEN 256
#define HOST_VALIDATION_TRANSPORT_LEN 32
#define HOST_VALIDATION_OUTPUT_MAX (256 * 1024) /* more kills the run */
#define HOST_VALIDATION_BUSBW_MAX 100000.0

enum host_val_phase {
	HOST_VAL_NONE = 0, /* no run recorded */
	HOST_VAL_RUNNING,
	HOST_VAL_SUCCEEDED,
	HOST_VAL_FAILED,
};
const char *host_val_phase_name(enum host_val_phase p);

/* What spec.validation asks for. */
struct host_val_request {
	char id[HOST_VALIDATION_ID_LEN];
	int64_t timeout_ms;
	size_t n_args;
	char args[HOST_VALIDATION_ARGS_MAX][HOST_VALIDATION_ARG_LEN];
};

/* One run as status.validation reports it. */
struct host_val_result {
	char id[HOST_VALIDATION_ID_LEN];
	enum host_val_phase phase;
	bool has_busbw;
	double busbw_gbps; /* rounded to 0.01 */
	char transport[HOST_VALIDATION_TRANSPORT_LEN];
	int64_t start_ms; /* wall clock; 0: unknown */
	int64_t end_ms;   /* wall clock; 0: still running */
	char message[HOST_ERRMSG_LEN];
};

/* Parses a validation command's output (see the contract above). A
 * busbw_gbps line wins over the nccl-tests summary; the last of each kind
 * counts. NV_E_PARSE with why filled when no figure is there or a figure,
 * a transport or the bytes themselves (a NUL) are not what the contract
 * says; nccl-tests' "# Out of bounds values : N FAILED" is an error too. */
enum nv_err host_validation_output_parse(const char *text, size_t len, double *busbw_gbps,
                                         char *transport, size_t transportsz, char *why,
                                         size_t whysz);

/* The record of the last run in the state dir (`validation.state`:
 * key=value lines, with the pid and start time of a run in flight). */
enum nv_err host_validation_state_parse(const char *text, size_t len, struct host_val_result *out,
                                        long long *pid, unsigned long long *pid_start);

/* One step of validation runs, decided from the state file: finishes or
 * times out the run this process started, reports a run left by a killed
 * agent as Failed ("agent restarted during the run") and kills what is left
 * of it, and starts req when its id is not the recorded one (req NULL:
 * start nothing). reported (may be NULL) is the tray's stored
 * status.validation, adopted when the state file is gone (a reboot wipes
 * /run) so that a finished id is never run again. *out is the record after
 * the step; phase NONE when there is none. */
enum nv_err host_validation_step(struct host *h, const struct host_val_request *req,
                                 const struct host_val_result *reported,
                                 struct host_val_result *out);

/* ---- one observation of the whole host ---- */

/* One part of an observation: NV_OK, or the error and why. */
struct host_obs_part {
	enum nv_err err;
	char why[HOST_ERRMSG_LEN];
};

/* Everything the tray's status reports, read in one pass. A part that
 * fails is recorded with its reason and the rest is still read, so a bad
 * host file or a hung tool becomes a condition, never a missing status. */
struct host_obs {
	struct host_driver_info driver;
	struct host_obs_part driver_part;
	unsigned imex_channel_count; /* from the module parameters; 0 if unknown */
	size_t n_gpus;
	struct host_gpu gpus[HOST_GPU_MAX];
	struct host_obs_part gpus_part;
	enum host_fabric_state fabric;   /* worst of the GPUs */
	enum host_health_summary health; /* worst of the GPUs */
	enum host_health_source health_source;
	bool has_clique;
	char clique[HOST_CLIQUE_LEN];
	struct host_obs_part clique_part; /* NV_E_STATE / NV_E_CONFLICT and the GPU */
	struct host_kind kind;
	struct host_unit_state fm;    /* host Fabric Manager */
	struct host_obs_part fm_part; /* NV_E_STATE when it runs where it must not */
	bool imex_read;               /* IMEX was queried (mode not OFF) */
	struct host_imex_status imex;
	struct host_obs_part imex_part;
};

/* Reads the host once. imex_mode OFF skips the IMEX queries. Always NV_OK
 * unless an argument is bad; look at the parts. */
enum nv_err host_observe(struct host *h, enum host_imex_mode imex_mode, struct host_obs *out);

#endif
