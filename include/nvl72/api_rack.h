/* SPDX-License-Identifier: Apache-2.0 */
/* The rack side of the API: Rack (inventory and policy), ComputeTray (the
 * operator-agent contract, one per compute Node) and RackPartition (a set
 * of trays forming one NVLink partition), with their status serialisers and
 * the cross-object rules the apiserver cannot check. */
/* The contract of api.h holds: pure, parsers return structs freed with
 * their _free, serialisers return new references, errs is appended to. */
#ifndef NVL72_API_RACK_H
#define NVL72_API_RACK_H

#include "nvl72/api.h"
#include "nvl72/matrix.h"

/* ---- Rack ------------------------------------------------------------- */

struct api_rack_compute_tray {
	int index; /* 1..18 */
	char node[254];
	char serial[65];
};

struct api_rack_switch_tray {
	int index; /* 1..9 */
	char oob_address[254];
	char bmc_address[254];
	char serial[65];
};

struct api_responsibility {
	enum matrix_layer layer;
	char owner[129];
	char window_owner[254];
	char contact[257];
	int64_t notice_ms;
	bool approval_required;
};

#define API_WINDOWS_MAX 16
#define API_FREEZES_MAX 32

struct api_window {
	char name[64];
	uint8_t days;    /* bit 0 = Monday .. bit 6 = Sunday */
	int start_min;   /* minutes after midnight */
	int end_min;     /* below start_min: closes the next day */
	uint32_t layers; /* MATRIX_BIT(layer); 0 = every layer */
};

struct api_freeze {
	char name[64];
	int64_t start_ms;
	int64_t end_ms;
	char reason[513];
};

enum api_drain_mode { API_DRAIN_EVICT = 0, API_DRAIN_CHECKPOINT };
enum api_gate_failure { API_ON_GATE_HOLD = 0, API_ON_GATE_ROLL_BACK };

struct api_rack_policy {
	int max_unavailable_trays;
	int min_healthy_trays;
	int degraded_threshold;
	bool cordon_when_degraded;
	enum api_drain_mode drain_mode;
	int64_t checkpoint_deadline_ms;
	int64_t eviction_deadline_ms;
	enum api_gate_failure on_gate_failure;
};

struct api_rack {
	struct api_meta meta;
	enum matrix_platform platform;
	char chassis_serial[33];
	char site[64];
	char room[64];
	char row[64];
	char position[64];
	unsigned ncompute;
	struct api_rack_compute_tray compute[API_COMPUTE_TRAYS];
	unsigned nswitch;
	struct api_rack_switch_tray switches[API_SWITCH_TRAYS];
	char matrix_name[64];
	char matrix_stack[64];
	unsigned nresp;
	struct api_responsibility resp[MATRIX_L__COUNT];
	unsigned nwindows;
	struct api_window windows[API_WINDOWS_MAX];
	unsigned nfreezes;
	struct api_freeze freezes[API_FREEZES_MAX];
	struct api_rack_policy policy;
};

/* Validates a Rack (schema, defaults and CEL rules) into a new struct.
 * NV_E_INVALID_OBJECT with errs filled, and *out untouched, when wrong. */
enum nv_err api_rack_parse(const json_t *obj, struct api_rack **out, struct api_errors *errs);
void api_rack_free(struct api_rack *r);
/* The compute tray with that node name (borrowed from r), or NULL. */
const struct api_rack_compute_tray *api_rack_tray_by_node(const struct api_rack *r,
                                                          const char *node);

enum api_fabric_health {
	API_FABRIC_UNKNOWN = 0,
	API_FABRIC_HEALTHY,
	API_FABRIC_DEGRADED,
	API_FABRIC_UNHEALTHY,
};

struct api_rack_tray_status {
	int index;
	char node[254];
	bool ready;
	char stack[64];
	char driver_version[17];
	char clique_id[49];
	char maintenance[17];
};

struct api_skew {
	enum matrix_component component;
	unsigned nversions;
	char versions[API_COMPUTE_TRAYS][MATRIX_VERSION_LEN];
};

struct api_clique {
	char clique_id[49];
	char partition[64];
	uint32_t trays; /* bit i = tray index i */
};

struct api_rack_status {
	int64_t observed_generation;
	char stack[64];
	unsigned ntrays;
	struct api_rack_tray_status trays[API_COMPUTE_TRAYS];
	unsigned nskew;
	struct api_skew skew[MATRIX_C__COUNT];
	enum api_fabric_health fabric;
	char cluster_uuid[37];
	unsigned ncliques;
	struct api_clique cliques[API_COMPUTE_TRAYS];
	int cap_trays;
	int cap_ready_trays;
	int cap_unavailable_trays;
	int cap_gpus;
	int cap_healthy_gpus;
	char upgrade_name[64];
	char upgrade_phase[21];
	bool in_window;
	bool in_freeze;
	int64_t next_window_ms;
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_rack_status_to_json(const struct api_rack_status *s);

/* ---- ComputeTray ------------------------------------------------------ */

enum api_flavour { API_FLAVOUR_OPEN = 0, API_FLAVOUR_PROPRIETARY };
enum api_imex_mode { API_IMEX_PROCESS = 0, API_IMEX_HOST };
/* Channel device nodes: those in the ids, or every one below the count. */
enum api_alloc_mode { API_ALLOC_SINGLE = 0, API_ALLOC_ALL };
enum api_activation { API_ACTIVATE_RELOAD = 0, API_ACTIVATE_REBOOT };
enum api_maint_state {
	API_MAINT_NONE = 0,
	API_MAINT_CORDONED,
	API_MAINT_DRAINING,
	API_MAINT_DRAINED,
	API_MAINT_UPGRADING,
};

#define API_DRIVER_PARAMS_MAX 32
#define API_IMEX_CHANNEL_IDS_MAX 64
#define API_VALIDATION_ARGS_MAX 16
#define API_VALIDATION_TIMEOUT_DEFAULT_S 600

struct api_driver_param {
	char key[72];
	char value[129];
};

struct api_compute_tray {
	struct api_meta meta;
	char rack[59];
	int index;
	char node[254];
	bool has_driver;
	struct matrix_driver driver;
	enum api_flavour flavour;
	enum api_activation activation;
	unsigned nparams;
	struct api_driver_param params[API_DRIVER_PARAMS_MAX];
	bool has_imex;
	enum api_imex_mode imex_mode;
	char imex_domain[254];
	char imex_domain_uid[37]; /* spec.imex.domainUID: the ComputeDomain's uid, "" none */
	unsigned npeers;
	char peers[API_COMPUTE_TRAYS][254]; /* ordered: line number = node id */
	int imex_port;
	int imex_command_port;
	int channel_count;
	enum api_alloc_mode channel_alloc;
	unsigned nchannel_ids;
	int channel_ids[API_IMEX_CHANNEL_IDS_MAX];
	enum api_maint_state maint;
	char maint_reason[513];
	char maint_requestor[254];
	char maint_upgrade[64];
	bool has_maint_step; /* spec.maintenance.upgrade.step is set */
	int maint_step;
	uint32_t maint_components; /* MATRIX_BIT set */
	/* spec.validation: a new id asks the agent for a new validation run. */
	bool has_validation;
	char validation_id[64];
	int validation_timeout_s; /* 10..86400, default 600 */
	unsigned nvalidation_args;
	char validation_args[API_VALIDATION_ARGS_MAX][256];
};

enum nv_err api_compute_tray_parse(const json_t *obj, struct api_compute_tray **out,
                                   struct api_errors *errs);
void api_compute_tray_free(struct api_compute_tray *t);
const char *api_maint_state_name(enum api_maint_state s);

struct api_gpu_status {
	int index;
	char uuid[65];
	char pci_bus_id[33];
	char product[97];
	char vbios[33];
	char board_part_number[81];
	char serial[31];
	char fabric_state[17]; /* NotSupported|NotStarted|InProgress|Completed */
	char fabric_status[65];
	char cluster_uuid[37];
	int64_t clique_id;   /* -1: unknown */
	int64_t health_mask; /* -1: unknown */
	char health_summary[17];
	char health_source[9]; /* summary|mask; "" unknown */
	int chassis_slot;      /* -1: unknown */
	int tray_index;
	char chassis_serial[33];
};

enum api_validation_phase {
	API_VALIDATION_NONE = 0, /* no status.validation */
	API_VALIDATION_RUNNING,
	API_VALIDATION_SUCCEEDED,
	API_VALIDATION_FAILED,
};

/* status.validation: the agent's record of the run of one id. */
struct api_tray_validation {
	char id[64];
	enum api_validation_phase phase;
	bool has_busbw;
	double busbw_gbps; /* all-reduce bus bandwidth, GB/s as nccl-tests reports busbw */
	char transport[32];
	int64_t start_ms;      /* 0: unknown */
	int64_t completion_ms; /* 0: not finished */
	char message[1025];
};

const char *api_validation_phase_name(enum api_validation_phase p);
/* Reads status.validation of a ComputeTray object (the whole object, as
 * from the cache) into caller storage. NV_OK with phase NONE when there is
 * none;
 * NV_E_INVALID_OBJECT with errs filled when it is malformed. For the
 * upgrade gate: a run counts when id is the one asked for and phase is
 * Succeeded; compare busbw_gbps with the matrix's floor. */
enum nv_err api_tray_validation_parse(const json_t *tray, struct api_tray_validation *out,
                                      struct api_errors *errs);

struct api_compute_tray_status {
	int64_t observed_generation;
	int64_t heartbeat_ms;
	char agent_version[65];
	bool driver_loaded;
	char driver_version[17];
	char driver_branch[9];
	char driver_flavour[17];
	char on_disk_version[17];
	char cuda_version[17];
	unsigned ngpus;
	struct api_gpu_status gpus[API_GPUS_PER_TRAY];
	char fabric_state[17];
	char cluster_uuid[37];
	char clique_id[49];
	char fabric_health[17];
	char fabric_health_source[9]; /* summary|mask */
	char imex_mode[9];
	char imex_address[254];
	char imex_version[17];
	char imex_daemon_state[25];
	char imex_domain_state[17];
	int imex_node_index; /* -1: unknown */
	int imex_peers_connected;
	int imex_peers_total;
	char imex_config_hash[65];
	char host_fm_state[17];
	enum api_maint_state maint;
	int maint_step;
	char maint_message[1025];
	int64_t last_error_ms;
	char last_error_reason[65];
	char last_error_message[4097];
	struct api_tray_validation validation; /* phase NONE: omitted */
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_compute_tray_status_to_json(const struct api_compute_tray_status *s);

/* ---- RackPartition ---------------------------------------------------- */

enum api_partition_phase {
	API_PART_PENDING = 0,
	API_PART_DRAINING,
	API_PART_REQUESTING,
	API_PART_WAITING_FOR_FABRIC,
	API_PART_REFRESHING_IMEX,
	API_PART_ACTIVE,
	API_PART_FAILED,
	API_PART_DELETING,
};

struct api_rack_partition {
	struct api_meta meta;
	char rack[59];
	uint32_t trays; /* bit i = tray index i (1..18) */
	char tenant[64];
	bool canary_eligible;
};

enum nv_err api_rack_partition_parse(const json_t *obj, struct api_rack_partition **out,
                                     struct api_errors *errs);
void api_rack_partition_free(struct api_rack_partition *p);

struct api_rack_partition_status {
	int64_t observed_generation;
	enum api_partition_phase phase;
	int tray_count;
	char clique_id[49];
	char backend_partition_id[129];
	char backend_operation_id[129];
	unsigned ntrays;
	struct {
		int index;
		char node[254];
		char clique_id[49];
		bool ready;
	} trays[API_COMPUTE_TRAYS];
	int64_t last_transition_ms;
	char message[1025];
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_rack_partition_status_to_json(const struct api_rack_partition_status *s);

/* ---- cross-object rules ---------------------------------------------- */

/* A node may be a tray of one rack only, and a switch tray's out-of-band
 * address belongs to one rack. r is checked against the other racks (an
 * entry with r's name is the old version of r and is skipped). */
enum nv_err api_rack_check_unique(const struct api_rack *r, const struct api_rack *const *others,
                                  unsigned n, struct api_errors *errs);

/* The rack's spec.matrix names m, its stack is in m, and the platforms
 * agree. */
enum nv_err api_rack_check_matrix(const struct api_rack *r, const struct matrix *m,
                                  struct api_errors *errs);

/* Partitions of one rack never overlap; p's rack must exist (rack may be
 * NULL when it does not). Entries named like p are its old version. */
enum nv_err api_rack_partition_check(const struct api_rack_partition *p,
                                     const struct api_rack *rack,
                                     const struct api_rack_partition *const *others, unsigned n,
                                     struct api_errors *errs);

#endif
