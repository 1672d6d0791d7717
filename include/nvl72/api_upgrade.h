/* SPDX-License-Identifier: Apache-2.0 */
/* The upgrade side of the API: CompatibilityMatrix (parsed straight into a
 * struct matrix), RackUpgrade and UpgradeApproval, their status, and the
 * checks against a matrix that the admission webhook runs on an upgrade. */
/* The contract of api.h holds: pure, parsers return structs freed with
 * their _free (a matrix with matrix_free, a status with
 * api_rack_upgrade_status_clear), serialisers return new references, errs
 * is appended to. */
#ifndef NVL72_API_UPGRADE_H
#define NVL72_API_UPGRADE_H

#include "nvl72/api.h"
#include "nvl72/matrix.h"

struct api_rack;

/* ---- CompatibilityMatrix --------------------------------------------- */

/* Validates a CompatibilityMatrix object and builds the engine from its
 * spec (the matrix is named after metadata.name). Besides the schema and
 * its CEL rules this checks what the apiserver cannot: that the tuple
 * after every step but the last of each transition is itself a stack.
 * NV_E_INVALID_OBJECT (errs filled, *out untouched) when anything is
 * wrong; the caller frees *out with matrix_free. */
enum nv_err api_matrix_parse(const json_t *obj, struct matrix **out, struct api_errors *errs);

struct api_matrix_status {
	int64_t observed_generation;
	unsigned stack_count;
	unsigned transition_count;
	unsigned racks;
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_matrix_status_to_json(const struct api_matrix_status *s);

/* ---- RackUpgrade ------------------------------------------------------ */

enum api_upgrade_class {
	API_UPGRADE_ROUTINE = 0,
	API_UPGRADE_SECURITY,
};

#define API_UPGRADE_CVES_MAX 32
#define API_SELECTOR_LABELS_MAX 16

struct api_label {
	char key[318];
	char value[64];
};

/* spec.onRackHalt: whether one rack's halt stops a selector upgrade from
 * starting the others. */
enum api_on_rack_halt {
	API_ON_RACK_HALT_CONTINUE = 0,
	API_ON_RACK_HALT_STOP,
};

/* The most racks one selector upgrade picks (status.racks[]). */
#define API_UPGRADE_RACKS_MAX 256

struct api_rack_upgrade {
	struct api_meta meta;
	char rack[59]; /* one of rack and selector */
	unsigned nselector;
	struct api_label selector[API_SELECTOR_LABELS_MAX];
	int max_parallel_racks; /* selector upgrades: 0 is unset (one rack at a time) */
	enum api_on_rack_halt on_rack_halt;
	char target_matrix[64];
	char target_stack[64];
	enum api_upgrade_class cls;
	char reason[2049];
	unsigned ncves;
	char cves[API_UPGRADE_CVES_MAX][MATRIX_CVE_LEN];
	int64_t earliest_start_ms; /* 0: unset */
	char canary_partition[64];
	int64_t canary_soak_ms; /* 0: the matrix gate's soak */
	int wave_size;          /* 0: unset */
	bool paused;
	bool abort;
	bool force;
	int64_t retry; /* spec.retry: raised by a person to retry a failed Drain */
};

enum nv_err api_rack_upgrade_parse(const json_t *obj, struct api_rack_upgrade **out,
                                   struct api_errors *errs);
/* Whether the Rack object rack carries every label of u's selector (a
 * selector of no labels picks every rack). */
bool api_rack_upgrade_selects(const struct api_rack_upgrade *u, const json_t *rack);
void api_rack_upgrade_free(struct api_rack_upgrade *u);

enum api_upgrade_phase {
	API_PHASE_PROPOSED = 0,
	API_PHASE_NOTICE,
	API_PHASE_AWAITING_APPROVAL,
	API_PHASE_SCHEDULED,
	API_PHASE_CANARY,
	API_PHASE_VALIDATING,
	API_PHASE_ROLLING_OUT,
	API_PHASE_COMPLETED,
	API_PHASE_HALTED,
	API_PHASE_PAUSED,
	API_PHASE_ABORTED,
	API_PHASE_ROLLING_BACK, /* a failed canary gate: the canary moves back */
	API_PHASE_ROLLED_BACK,  /* and is back on the source stack */
};

const char *api_upgrade_phase_name(enum api_upgrade_phase p);
/* Whether p ends an upgrade: Completed, Aborted (recorded only once every
 * tray is out of maintenance) and RolledBack (the canary back on the
 * source stack, out of maintenance). Every other phase, Halted and Paused
 * included, leaves the upgrade in flight: it holds trays or may still move
 * them. */
bool api_upgrade_phase_final(enum api_upgrade_phase p);
/* The same for a phase's name as status fields hold it ("" is not). */
bool api_upgrade_phase_name_final(const char *phase);
/* The phase a status.phase names, into *out; false for a name this build
 * does not know (*out untouched). */
bool api_upgrade_phase_from_name(const char *name, enum api_upgrade_phase *out);
/* Whether the RackUpgrade object obj is in flight: its status.phase is not
 * final. No status or no phase (the operator has not seen it yet) is
 * Proposed; a phase this build does not know counts as in flight, so a
 * newer operator's phase never lets a second upgrade of a rack in. */
bool api_rack_upgrade_in_flight(const json_t *obj);
/* The RackUpgrade among upgrades (an array of objects, borrowed; NULL is
 * none) that completed last on rack: spec.rack names it, status.phase is
 * Completed, and its status.completionTime is the latest (a missing or
 * unreadable time counts as the earliest; on a tie the greater name wins,
 * so every caller picks the same one). Its spec.target is the stack the
 * rack's trays were last moved to. NULL when none; borrowed from upgrades. */
const json_t *api_rack_upgrade_latest_completed(const json_t *upgrades, const char *rack);

enum api_step_phase {
	API_STEP_PENDING = 0,
	API_STEP_RUNNING,
	API_STEP_SUCCEEDED,
	API_STEP_FAILED,
	API_STEP_SKIPPED,
};

enum api_step_action {
	API_ACT_CORDON = 0,
	API_ACT_DRAIN,
	API_ACT_APPLY,
	API_ACT_WAIT_FABRIC,
	API_ACT_WAIT_IMEX,
	API_ACT_VALIDATE,
	API_ACT_SOAK,
	API_ACT_UNCORDON,
	API_ACT_ROLL_BACK,
};

/* The CRD's name of a step action ("Cordon" .. "RollBack"), the one table
 * the parser, the status writer, logs and metric labels share. */
const char *api_step_action_name(enum api_step_action a);

/* Gate evidence of a Validate step. */
struct api_gate_evidence {
	bool set;
	char fabric_state[17];
	char imex_domain_state[17];
	int busbw_gbps;
	int floor_gbps;
	int tolerance_pct;
	char transport[17];
	bool passed;
	char report[513];
};

/* One out-of-band update an Apply step started on one target (the latest
 * per target): recorded before it is polled, so that a restarted operator
 * polls the same operation instead of starting another. */
#define API_UPGRADE_STEP_OPS_MAX 18

struct api_upgrade_oob_op {
	enum matrix_component component;
	char target[17];           /* "switch-3", "compute-12" */
	char id[128];              /* the backend's operation id */
	enum api_step_phase phase; /* Running, Succeeded or Failed */
};

struct api_upgrade_step {
	int index;
	int wave;
	enum api_step_action action;
	uint32_t components; /* MATRIX_BIT set */
	uint32_t trays;      /* bit i = tray index i (1..18) */
	enum api_step_phase phase;
	int64_t start_ms;
	int64_t completion_ms;
	char message[513];
	struct api_gate_evidence evidence;
	unsigned nops; /* out-of-band Apply steps: their operations */
	struct api_upgrade_oob_op ops[API_UPGRADE_STEP_OPS_MAX];
};

struct api_upgrade_wave {
	int index;
	uint32_t trays;
	enum api_step_phase phase;
	int64_t start_ms;
	int64_t completion_ms;
};

struct api_upgrade_approval_ref {
	enum matrix_layer layer;
	char name[64];
	char user[254];
	bool rejected;
	int64_t time_ms;
};

#define API_UPGRADE_STEPS_MAX 256
/* A plan runs in stages (the switch trays move between them, see
 * docs/upgrades.md); each takes at most 19 waves: a rack-wide one, the
 * canary's and one per other tray. */
#define API_UPGRADE_STAGES_MAX 4
#define API_UPGRADE_WAVES_MAX (API_UPGRADE_STAGES_MAX * 19)

/* A selector upgrade's record of one rack it picked: the child upgrade
 * that moves it and what that child last reported. */
struct api_upgrade_rack {
	char name[59];
	char upgrade[64];
	bool has_phase; /* the child was seen; phase is its status.phase */
	enum api_upgrade_phase phase;
	bool refused;      /* the apiserver refused to create the child */
	int64_t slot_ms;   /* when the rack was given one of maxParallelRacks' slots */
	int64_t time_ms;   /* when this entry's phase last changed */
	char message[257]; /* the child's status.message, or why it was refused */
};

/* The durable record of a RackUpgrade. The plan is the matrix plan from the
 * rack's stack; steps are owned by the struct (nsteps of them). */
struct api_rack_upgrade_status {
	int64_t observed_generation;
	enum api_upgrade_phase phase;
	int64_t phase_ms;
	char message[1025];
	char from_stack[64];
	bool has_plan;
	struct matrix_plan plan;
	int64_t notice_start_ms;
	int64_t notice_end_ms;
	uint32_t required_approvals; /* MATRIX_BIT(layer) */
	unsigned napprovals;
	struct api_upgrade_approval_ref approvals[10];
	int64_t scheduled_start_ms;
	char window[64];
	char canary_partition[64];
	uint32_t canary_trays;
	unsigned nwaves;
	struct api_upgrade_wave waves[API_UPGRADE_WAVES_MAX];
	unsigned nsteps;
	struct api_upgrade_step *steps;
	int64_t start_ms;
	int64_t completion_ms;
	int64_t retried; /* the last spec.retry acted on */
	/* Selector upgrades: the racks picked, in name order (owned, nracks
	 * of them). */
	unsigned nracks;
	struct api_upgrade_rack *racks;
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

/* The status object; plan steps and steps past the CRD's bounds are cut. */
json_t *api_rack_upgrade_status_to_json(const struct api_rack_upgrade_status *s);

/* Reads a RackUpgrade's status (the object at .status; NULL or absent is
 * the zero status of a new upgrade) back into *out, checked against the
 * CRD's schema, so that the record survives restarts: what
 * api_rack_upgrade_status_to_json wrote parses back to the same struct.
 * The plan comes back as written (components and flags; the stack indices
 * are left 0: rebuild the plan from the matrix for those). steps[i].index
 * must be i. NV_E_INVALID_OBJECT with errs filled (paths start at
 * "status") and *out untouched when wrong; otherwise the caller releases
 * *out with api_rack_upgrade_status_clear. */
enum nv_err api_rack_upgrade_status_parse(const json_t *status, struct api_rack_upgrade_status *out,
                                          struct api_errors *errs);
/* Frees the steps and zeroes s; s NULL does nothing. */
void api_rack_upgrade_status_clear(struct api_rack_upgrade_status *s);

/* ---- UpgradeApproval -------------------------------------------------- */

/* The most groups an approval records (the CRD's bound). */
#define API_APPROVAL_GROUPS_MAX 64

struct api_upgrade_approval {
	struct api_meta meta;
	char upgrade[64];
	enum matrix_layer layer;
	bool rejected;
	char comment[2049];
	int64_t not_before_ms;
	char approved_by[254]; /* stamped by the webhook */
	char approved_by_uid[129];
	unsigned ngroups;
	char groups[API_APPROVAL_GROUPS_MAX][254];
	/* spec.upgradeRef, stamped by the webhook from the RackUpgrade it
	 * found at creation; "" when the approval was not stamped. */
	char upgrade_uid[64];
	char upgrade_matrix[64];
	char upgrade_stack[64];
};

enum nv_err api_upgrade_approval_parse(const json_t *obj, struct api_upgrade_approval **out,
                                       struct api_errors *errs);
void api_upgrade_approval_free(struct api_upgrade_approval *a);

struct api_upgrade_approval_status {
	int64_t observed_generation;
	bool counted;
	char message[1025];
	unsigned nconditions;
	struct api_condition conditions[API_CONDITIONS_MAX];
};

json_t *api_upgrade_approval_status_to_json(const struct api_upgrade_approval_status *s);

/* ---- checks against the matrix ---------------------------------------- */

/* An upgrade against the matrix it targets: spec.target.matrix names m,
 * spec.target.stack is one of its stacks, and for each stack the rack's
 * trays run now (from_stacks, n of them; duplicates are fine) there is a
 * plan that is not blocked and whose intermediate tuples are all stacks.
 * A security upgrade's CVEs must each be fixed by the target stack.
 * Returns NV_E_INVALID_OBJECT with errs filled when a rule fails. */
enum nv_err api_rack_upgrade_check_matrix(const struct api_rack_upgrade *u, const struct matrix *m,
                                          const char *const *from_stacks, unsigned n,
                                          unsigned plan_flags, struct api_errors *errs);

/* The layers (MATRIX_BIT masks) an upgrade of class cls over plan p needs
 * approved on rack r: each touched layer (the plan's, and workload when it
 * drains trays) whose responsibility has approvalRequired, and every
 * touched layer when the plan takes a manual edge; none for a security
 * upgrade. */
uint32_t api_upgrade_touched_layers(const struct matrix_plan *p);
uint32_t api_upgrade_required_layers(const struct api_rack *r, enum api_upgrade_class cls,
                                     const struct matrix_plan *p);

/* The layers of mask that no approval can count for on rack r: those
 * without a responsibility entry or with an empty windowOwner. */
uint32_t api_rack_ownerless_layers(const struct api_rack *r, uint32_t mask);

/* Whether a failed canary gate of the move from -> to can roll back
 * (onGateFailure: RollBack): every edge of the forward plan is marked
 * reversible and the matrix lists an allowed move back. NV_OK, or
 * NV_E_UNSUPPORTED with why (cap bytes) saying what is missing;
 * NV_E_NOT_FOUND for a stack m lacks. */
enum nv_err api_upgrade_rollback_check(const struct matrix *m, const char *from, const char *to,
                                       unsigned plan_flags, char *why, size_t cap);

/* An upgrade of a rack whose policy rolls back on a failed gate
 * (onGateFailure: RollBack) is refused at spec.target.stack when, from any
 * of the stacks its trays run, api_upgrade_rollback_check says it could
 * not. Plans that do not build are left to api_rack_upgrade_check_matrix. */
enum nv_err api_rack_upgrade_check_rollback(const struct api_rack_upgrade *u,
                                            const struct matrix *m, const struct api_rack *r,
                                            const char *const *from_stacks, unsigned n,
                                            unsigned plan_flags, struct api_errors *errs);

/* An upgrade whose plan from any of the stacks the rack's trays run
 * (from_stacks, n) needs an approval of a layer that has no windowOwner on
 * r is refused at spec.target.stack: nobody could approve it. Plans that do
 * not build are left to api_rack_upgrade_check_matrix. */
enum nv_err api_rack_upgrade_check_owners(const struct api_rack_upgrade *u, const struct matrix *m,
                                          const struct api_rack *r, const char *const *from_stacks,
                                          unsigned n, unsigned plan_flags, struct api_errors *errs);

/* Whether approval a may count for upgrade u on rack r (NULL: the rack is
 * unknown, nothing counts). It counts only when it names u, carries the
 * stamp of u's metadata.uid and spec.target (a RackUpgrade deleted and
 * recreated under the same name is another upgrade), was created no
 * earlier than u, and its stamped user is a member of the windowOwner
 * group of its layer on r. A layer with no windowOwner (no entry, or an
 * empty one) counts no approval at all: nobody owns its window. When it
 * does not count, why (cap bytes) says which rule failed. */
bool api_upgrade_approval_counts(const struct api_upgrade_approval *a,
                                 const struct api_rack_upgrade *u, const struct api_rack *r,
                                 char *why, size_t cap);

/* An approval for a layer the upgrade's plan does not need, or for an
 * upgrade that is already over, is refused. */
enum nv_err api_upgrade_approval_check(const struct api_upgrade_approval *a,
                                       const struct api_rack_upgrade *u,
                                       const struct api_rack_upgrade_status *us,
                                       struct api_errors *errs);

#endif
