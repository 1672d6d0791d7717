/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the RackUpgrade controller: from an upgrade, its status
 * (the durable record), its rack and the rack's trays, the matrix, the
 * approvals and partitions, and the time, it computes the next status and
 * the one action to perform. No API calls here; src/operator/upgrade_ctrl.c
 * writes the status first and then acts, so that a restart never repeats a
 * step. Also the maintenance-window arithmetic (weekly UTC windows with
 * freezes) the Scheduled phase uses. */
/* Contract: pure functions with no global state (no I/O, no clock: time
 * comes in as now_ms), never blocking, thread-safe on distinct arguments,
 * except op_upgrade_oob_step, which calls the out-of-band backend (see
 * there). Inputs are borrowed for the call; results go into caller
 * storage. */
#ifndef NVL72_OPERATOR_UPGRADE_H
#define NVL72_OPERATOR_UPGRADE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/matrix.h"

/* On Nodes of trays an upgrade holds: the tray's maintenance state. */
#define OP_LABEL_MAINTENANCE "nvl72.io/maintenance"

/* ---- windows ---------------------------------------------------------- */

/* How far ahead the next start is searched before giving up. */
#define OP_WINDOW_HORIZON_MS (400LL * 86400000LL)

/* Whether window w is open at wall time t (UTC). A window whose end is
 * before its start closes on the next day; end == start is a whole day. */
bool op_window_open(const struct api_window *w, int64_t t_ms);

/* The earliest time >= now_ms at which an upgrade touching layers may
 * start on rack r: inside a window that covers every layer (a window with
 * no layers covers all; a rack with no window at all is always open) and
 * outside every freeze. skip_windows (security class) ignores both windows
 * and freezes. The window's name goes to window (cap bytes; "" when none
 * applies) and a freeze that pushed the start out to freeze. -1 when no
 * start exists within OP_WINDOW_HORIZON_MS. */
int64_t op_window_next(const struct api_rack *r, uint32_t layers, int64_t now_ms, bool skip_windows,
                       char *window, size_t cap, char *freeze, size_t fcap);

/* ---- the engine ------------------------------------------------------- */

/* One compute tray of the rack as the engine sees it, from its ComputeTray
 * (spec and status) and its Node. Strings are borrowed; "" when unknown. */
struct op_upgrade_tray {
	int index; /* 1..18 */
	const char *node;
	bool present;              /* the ComputeTray exists */
	bool available;            /* tray and Node Ready, not cordoned by anyone */
	const char *driver;        /* status.driver.version, the loaded one */
	bool driver_ready;         /* condition DriverReady True */
	bool driver_failed;        /* DriverReady False with reason ChangeFailed: the
	                            * agent's step failed AGENT_DRIVER_TRIES times in
	                            * a row (Retrying before that: still waited for) */
	const char *driver_why;    /* DriverReady's message when not True, else "" */
	const char *fabric_state;  /* status.fabric.state */
	const char *fabric_health; /* status.fabric.healthSummary */
	const char *fabric_source; /* status.fabric.healthSource: summary|mask|"" */
	const char *fabric_why;    /* FabricHealthy's message when not True, else "" */
	bool has_imex;             /* spec.imex set */
	const char *imex_domain;   /* status.imex.domainState */
	const char *maint;         /* spec.maintenance.state */
	const char *maint_upgrade; /* spec.maintenance.upgrade.name */
	const char *validation_id; /* status.validation.id */
	const char *validation_phase;
	int validation_busbw; /* status.validation.busBandwidthGbps */
	const char *validation_transport;
	const char *validation_message;
	/* An NVIDIA ComputeDomain that uses the tray ("namespace/name",
	 * operator_nvidia.h), "" or NULL when none: no step that drains,
	 * changes or rolls back the tray starts while one does. */
	const char *nvidia_domain;
};

struct op_upgrade_in {
	const struct api_rack_upgrade *u;
	const struct api_rack *rack;         /* NULL: the rack does not exist */
	const char *rack_stack;              /* the stack the rack runs now */
	const struct matrix *m;              /* NULL: the target matrix is missing */
	const struct op_upgrade_tray *trays; /* the rack's trays, any order */
	unsigned ntrays;
	const struct api_upgrade_approval *const *approvals; /* naming this upgrade */
	unsigned napprovals;
	const struct api_rack_partition *const *partitions; /* of this rack */
	unsigned npartitions;
	bool oob_backend; /* an out-of-band backend is configured */
	/* A selector upgrade's child not yet given a slot: the parent's name.
	 * It waits in Scheduled, its window open, until the parent stamps
	 * it (OP_ANN_RACK_SLOT below). NULL: free to start. */
	const char *slot_parent;
	/* NVIDIA's ComputeDomains are served but could not be read (why):
	 * no step that drains or changes a tray starts, and the pass asks to
	 * be evaluated again after OP_UPGRADE_NVIDIA_RETRY_MS. NULL: read,
	 * or not served. */
	const char *nvidia_unread;
	int64_t now_ms;
};

/* How soon an upgrade held because NVIDIA's ComputeDomains could not be
 * read looks again (a hold on a domain that uses a tray needs no timer:
 * the domain's change requeues the upgrade). */
#define OP_UPGRADE_NVIDIA_RETRY_MS 10000
/* The reason of the event of an upgrade step held by NVIDIA's
 * ComputeDomains; its message begins with OP_UPGRADE_NVIDIA_HELD. */
#define OP_UPGRADE_NVIDIA_REASON "HeldByNVIDIAComputeDomain"
#define OP_UPGRADE_NVIDIA_HELD "held: "

enum op_upgrade_act {
	OP_UPG_NONE = 0, /* wait: for tray status, time or a human */
	OP_UPG_DRAIN,    /* maintenance Draining on trays, then drain_nodes */
	OP_UPG_APPLY,    /* spec.driver and maintenance Upgrading on trays */
	OP_UPG_VALIDATE, /* spec.validation.id on trays */
	OP_UPG_RELEASE,  /* maintenance None on trays, then drain_release */
	OP_UPG_OOB,      /* out-of-band updates: op_upgrade_oob_step, then finish */
};

const char *op_upgrade_act_name(enum op_upgrade_act a);

#define OP_UPGRADE_EVENTS_MAX 6

/* One event a pass asks for, on the upgrade it evaluated. */
struct op_upgrade_event {
	char reason[48];
	bool warning;
	char note[512];
};

/* What one pass found and asks for. */
struct op_upgrade_out {
	enum op_upgrade_act act;
	int step;                        /* the status step the action belongs to */
	uint32_t trays;                  /* bit i = tray index i */
	uint32_t components;             /* APPLY: the step's components */
	char driver[MATRIX_VERSION_LEN]; /* APPLY: the driver version to set */
	int plan_step;                   /* APPLY, OOB: the plan step, from 0 */
	/* OOB: the version each of the step's components moves to. */
	char versions[MATRIX_C__COUNT][MATRIX_VERSION_LEN];
	char validation_id[64];     /* VALIDATE */
	int64_t wake_ms;            /* > 0: evaluate again at this wall time */
	bool changed;               /* the status differs from the input */
	enum api_upgrade_phase was; /* the phase before this pass */
	/* Events of this pass: phase changes, approvals counted, gate
	 * results. */
	unsigned nevents;
	struct op_upgrade_event events[OP_UPGRADE_EVENTS_MAX];
};

/* Advances *st (parsed from the object; owned by the caller, its steps may
 * be reallocated) by one pass at in->now_ms and fills *out. A step is
 * marked Running (with its start time) in the same pass that asks for its
 * action, so the caller writes the status before acting; a Succeeded step
 * is never asked for again. */
void op_upgrade_eval(const struct op_upgrade_in *in, struct api_rack_upgrade_status *st,
                     struct op_upgrade_out *out);

/* Records the end of a step whose outcome only the caller knows (a drain
 * done, a release made): phase Succeeded or Failed with a message. */
void op_upgrade_step_finish(struct api_rack_upgrade_status *st, int step, enum api_step_phase phase,
                            const char *message, int64_t now_ms);

/* ---- out-of-band steps ------------------------------------------------ */

struct oob_backend;

/* What one pass over an out-of-band step did. */
struct op_upgrade_oob_result {
	bool recorded;    /* operations started: write the status before polling them */
	bool done;        /* every target runs every component's version */
	bool failed;      /* an operation failed: message says which and why */
	unsigned started; /* operations started in this pass */
	unsigned running; /* targets with an operation in progress */
	unsigned targets; /* targets of the step */
	char message[512];
};

/* One pass over the out-of-band Apply step s that a->act == OP_UPG_OOB
 * asked for: on each target (the rack's nine switch trays when s->trays is
 * 0, else the step's compute trays) it polls the operation recorded in
 * s->ops, and starts the next component's update (in component order) when
 * the last one completed, recording its id in s->ops. Operations started in
 * this pass are not polled in it: the caller writes the status first. An
 * error of the backend itself (not a failed operation) is returned with
 * r->message filled and s unchanged for the targets not reached. Blocks
 * for its backend calls, each bounded as oob.h says; it never waits for
 * an operation to end. */
enum nv_err op_upgrade_oob_step(struct oob_backend *b, struct api_upgrade_step *s,
                                const struct op_upgrade_out *a, struct op_upgrade_oob_result *r);

/* ---- selector upgrades ------------------------------------------------- */

/* A selector upgrade (spec.rackSelector) moves each rack it picks through
 * a child RackUpgrade of its own, owned by it and labelled with its name;
 * at most spec.maxParallelRacks children run at once. A child waits in
 * Scheduled, its window open, until the parent gives it a slot: the
 * annotation below, stamped with the time. */
#define OP_LABEL_UPGRADE_PARENT "nvl72.io/parent-upgrade"
#define OP_ANN_RACK_SLOT "nvl72.io/rack-slot"
/* On a child the parent paused (so that resuming the parent resumes only
 * those, never one a person paused). */
#define OP_ANN_PAUSED_BY_PARENT "nvl72.io/paused-by-parent"
/* How long a refused child's creation waits before it is tried again (the
 * rack's other upgrade may have ended). */
#define OP_FLEET_RETRY_MS 60000

/* The child upgrade of parent for rack: "<parent>-<rack>" when that fits
 * in 63 characters, else both cut short and an FNV-1a hash of the pair
 * appended, so that distinct pairs keep distinct names. */
void op_fleet_child_name(const char *parent, const char *rack, char out[64]);

/* One child upgrade as the cache holds it. */
struct op_fleet_child {
	const char *name;
	const char *rack; /* its spec.rack */
	bool has_phase;   /* status.phase set and known */
	enum api_upgrade_phase phase;
	bool granted; /* carries OP_ANN_RACK_SLOT */
	bool paused;
	bool paused_by_parent; /* carries OP_ANN_PAUSED_BY_PARENT */
	bool abort;
	int64_t scheduled_start_ms; /* status.scheduledStart; 0 unset */
	const char *message;        /* status.message */
};

struct op_fleet_in {
	const struct api_rack_upgrade *u; /* the selector upgrade */
	const char *const *racks;         /* the Racks its selector picks now, by name */
	unsigned nracks;
	const struct op_fleet_child *children; /* the upgrades it owns, any order */
	unsigned nchildren;
	int64_t now_ms;
};

enum op_fleet_act_kind {
	OP_FLEET_CREATE = 1, /* create the rack's child */
	OP_FLEET_GRANT,      /* stamp OP_ANN_RACK_SLOT on it */
	OP_FLEET_PAUSE,      /* spec.paused true, with OP_ANN_PAUSED_BY_PARENT */
	OP_FLEET_RESUME,     /* spec.paused false, the annotation removed */
	OP_FLEET_ABORT,      /* spec.abort true */
};

struct op_fleet_out {
	bool changed; /* the status differs from the input */
	unsigned nacts;
	struct {
		enum op_fleet_act_kind kind;
		unsigned rack; /* index in st->racks */
	} acts[API_UPGRADE_RACKS_MAX];
	int64_t wake_ms; /* > 0: evaluate again at this wall time */
	unsigned nevents;
	struct op_upgrade_event events[OP_UPGRADE_EVENTS_MAX];
};

/* Advances the selector upgrade's status *st (owned by the caller; its
 * racks may be reallocated) by one pass: picks the racks once (the first
 * pass, in name order, at most API_UPGRADE_RACKS_MAX), mirrors each
 * child's phase and message, gives free slots to children waiting in
 * Scheduled with their window open (in rack order; a slot is recorded in
 * the status before the child is stamped, so a pass that reads its own
 * status back never gives more), passes the parent's paused and abort on,
 * and sums the children up in the parent's phase. A Halted or Refused
 * rack frees its slot unless spec.onRackHalt is Stop, which starts no
 * other rack while one is halted. The caller writes the status, then
 * performs out->acts; a refused creation it records with
 * op_fleet_refused. */
void op_fleet_eval(const struct op_fleet_in *in, struct api_rack_upgrade_status *st,
                   struct op_fleet_out *out);

/* Records that the apiserver refused rack i's child (why: its message). */
void op_fleet_refused(struct api_rack_upgrade_status *st, unsigned i, const char *why,
                      int64_t now_ms);

/* ---- the rack's stack after Completed ---------------------------------- */

/* The condition of a Completed RackUpgrade that records what became of the
 * Rack's spec.matrix: True once it names the upgrade's target (reason
 * Applied when the operator moved it, AlreadySet when it named it
 * already), False when a later upgrade of the rack completed first
 * (Superseded) or the apiserver refused the write (Refused). Present: the
 * Rack is left alone from then on, so a person's later change of the stack
 * (which the webhook warns about) is never undone. */
#define OP_UPGRADE_COND_RACK_STACK "RackStackSet"

enum op_upgrade_stack_act {
	OP_STACK_NONE = 0, /* not Completed, no rack, or the condition is there */
	OP_STACK_RECORD,   /* write the condition only */
	OP_STACK_APPLY,    /* apply the target to the Rack's spec.matrix, then record */
};

struct op_upgrade_stack_out {
	enum op_upgrade_stack_act act;
	char from[64];             /* APPLY: the stack the Rack's spec names now */
	struct api_condition cond; /* RECORD, APPLY: the condition to write */
};

/* What a pass of upgrade u (its status st, as this pass leaves it) does
 * about its rack's spec.matrix (rack: NULL when the Rack does not exist)
 * once u is Completed. upgrades is every cached RackUpgrade (an array,
 * borrowed; u's own entry may be older than st): a Completed upgrade of
 * the same rack that completed later (api_rack_upgrade_latest_completed's
 * order) supersedes u. now_ms stamps the condition. */
void op_upgrade_stack_next(const struct api_rack_upgrade *u,
                           const struct api_rack_upgrade_status *st, const struct api_rack *rack,
                           const json_t *upgrades, int64_t now_ms,
                           struct op_upgrade_stack_out *out);

/* Puts c into st's conditions: replaces the one of its type, else appends
 * (dropped when all API_CONDITIONS_MAX are taken). */
void op_upgrade_condition_put(struct api_rack_upgrade_status *st, const struct api_condition *c);

/* The validation id requested for a step: "<uid prefix>-<step>". */
void op_upgrade_validation_id(const struct api_rack_upgrade *u, int step, char out[64]);

#endif
