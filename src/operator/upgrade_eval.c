// SPDX-License-Identifier: Apache-2.0
// The RackUpgrade state machine, as a pure function of the upgrade, its
// status record, the rack, its trays, the matrix, approvals, partitions and
// the time: Proposed -> Notice -> AwaitingApproval -> Scheduled -> Canary ->
// Validating -> RollingOut -> Completed, with Halted, Paused and Aborted.
// Steps run in order; a step is marked Running before its action is asked
// for, and a finished step is never started again.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/oob.h"
#include "nvl72/operator_upgrade.h"
#include "nvl72/timeutil.h"

#define NEEDS_AGENT MATRIX_BIT(MATRIX_C_DRIVER)
/* Switch-tray components: the rack's nine switch trays are shared by every
 * compute tray, so these move once for the rack, before the canary. */
#define SWITCH_COMPS                                                                               \
	(MATRIX_BIT(MATRIX_C_NVOS) | MATRIX_BIT(MATRIX_C_SWITCH_TRAY_FIRMWARE) |                   \
	 MATRIX_BIT(MATRIX_C_NMX))

static const char *const act_names[] = {"None",     "Drain",   "Apply",
                                        "Validate", "Release", "OutOfBand"};

const char *op_upgrade_act_name(enum op_upgrade_act a)
{
	return (unsigned)a < 6 ? act_names[a] : "None";
}

void op_upgrade_validation_id(const struct api_rack_upgrade *u, int step, char out[64])
{
	if (u->meta.uid[0])
		snprintf(out, 64, "%.8s-s%d", u->meta.uid, step);
	else
		snprintf(out, 64, "%.40s-s%d", u->meta.name, step);
}

/* ---- small helpers ---- */

struct pass {
	const struct op_upgrade_in *in;
	struct api_rack_upgrade_status *st;
	struct op_upgrade_out *out;
	struct matrix_plan plan;
	const struct matrix_stack *target;
	const struct matrix_stack *source; /* status.fromStack's, when in the matrix */
	bool hold;                         /* paused or aborting: start no new step */
};

static void event(struct pass *p, bool warning, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void event(struct pass *p, bool warning, const char *reason, const char *fmt, ...)
{
	struct op_upgrade_out *o = p->out;
	va_list ap;
	if (o->nevents >= OP_UPGRADE_EVENTS_MAX)
		return;
	snprintf(o->events[o->nevents].reason, sizeof(o->events[0].reason), "%s", reason);
	o->events[o->nevents].warning = warning;
	va_start(ap, fmt);
	vsnprintf(o->events[o->nevents].note, sizeof(o->events[0].note), fmt, ap);
	va_end(ap);
	o->nevents++;
}

static void message(struct pass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void message(struct pass *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->st->message, sizeof(p->st->message), fmt, ap);
	va_end(ap);
}

static void phase_set(struct pass *p, enum api_upgrade_phase ph)
{
	if (p->st->phase == ph)
		return;
	p->st->phase = ph;
	p->st->phase_ms = p->in->now_ms;
}

static void wake(struct pass *p, int64_t at)
{
	if (at > 0 && (p->out->wake_ms == 0 || at < p->out->wake_ms))
		p->out->wake_ms = at;
}

static const struct op_upgrade_tray *tray_at(const struct op_upgrade_in *in, int index)
{
	for (unsigned i = 0; i < in->ntrays; i++)
		if (in->trays[i].index == index)
			return &in->trays[i];
	return NULL;
}

static uint32_t rack_trays(const struct api_rack *r)
{
	uint32_t set = 0;
	for (unsigned i = 0; i < r->ncompute; i++)
		set |= 1u << r->compute[i].index;
	return set;
}

static int count(uint32_t set)
{
	return __builtin_popcount(set);
}

static void trays_text(uint32_t set, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 1; i <= API_COMPUTE_TRAYS && len + 4 < cap; i++)
		if (set & (1u << i))
			len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? "," : "", i);
}

static void layers_text(uint32_t layers, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (unsigned l = 0; l < MATRIX_L__COUNT && len + 12 < cap; l++)
		if (layers & MATRIX_BIT(l))
			len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "",
			                        matrix_layer_name((enum matrix_layer)l));
}

static const char *stack_driver(const struct matrix_stack *s)
{
	return (s->tuple.set & MATRIX_BIT(MATRIX_C_DRIVER)) ? s->tuple.version[MATRIX_C_DRIVER].text
	                                                    : "";
}

/* Every component updated out of band (switch trays and tray firmware). */
static uint32_t oob_comps(void)
{
	uint32_t set = 0;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (oob_component_is_oob((enum matrix_component)c))
			set |= MATRIX_BIT(c);
	return set;
}

/* Stages: switch trays are shared by every compute tray, so a switch-tray
 * component moves once for the whole rack, and only when every compute
 * tray has taken the plan steps before it. The plan therefore splits into
 * stages, a new one at each switch-tray part that follows a compute-tray
 * component. A stage begins with its switch-tray parts (rack-wide, no
 * trays) and then takes every compute tray through its compute parts in
 * waves. Stage 0's rack-wide steps lead the canary's wave 0; a later
 * stage's are a wave of their own with no trays, after which its first
 * wave is the canary's trays again, with the same gate. A plan that moves
 * the switch trays before anything else has one stage. */
static unsigned stage_of(const struct matrix_plan *plan, unsigned i)
{
	unsigned stage = 0;
	bool compute = false;
	for (unsigned j = 0; j <= i && j < plan->nsteps; j++) {
		uint32_t c = plan->steps[j].components;
		if ((c & SWITCH_COMPS) && compute) {
			stage++;
			compute = false;
		}
		if (c & ~SWITCH_COMPS)
			compute = true;
	}
	return stage;
}

static unsigned stages(const struct matrix_plan *plan)
{
	return plan->nsteps ? stage_of(plan, plan->nsteps - 1) + 1 : 1;
}

/* The stage wave w belongs to: each wave with no trays after wave 0
 * begins the next stage. */
static unsigned wave_stage(const struct api_rack_upgrade_status *st, int w)
{
	unsigned stage = 0;
	for (int i = 1; i <= w && (unsigned)i < st->nwaves; i++)
		stage += st->waves[i].trays == 0;
	return stage;
}

/* The stack the plan reaches at the end of a stage (its gate is the one
 * that stage's canary trays must pass). */
static const struct matrix_stack *stage_stack(const struct pass *p, unsigned stage)
{
	const struct matrix_stack *s = p->target;
	for (unsigned i = 0; i < p->plan.nsteps; i++)
		if (stage_of(&p->plan, i) == stage)
			s = &p->in->m->stacks[p->plan.steps[i].to_stack];
	return s;
}

/* The rack-wide (switch-tray) part of plan step i, run at its stage's
 * start. */
static uint32_t rack_part(const struct matrix_plan *plan, unsigned i)
{
	return plan->steps[i].components & SWITCH_COMPS;
}

/* The Apply steps plan step i becomes in each wave of its stage, in
 * order: its out-of-band part (tray firmware), then the rest (driver and
 * above). */
static unsigned wave_parts(const struct matrix_plan *plan, unsigned i, uint32_t parts[2])
{
	uint32_t a = plan->steps[i].components & ~SWITCH_COMPS;
	unsigned n = 0;
	if (a & oob_comps())
		parts[n++] = a & oob_comps();
	if (a & ~oob_comps())
		parts[n++] = a & ~oob_comps();
	return n;
}

/* The plan step an Apply step came from (-1 when none): found by its rank
 * among the rack-wide (no trays) or the tray Apply steps of its wave, over
 * the plan steps of the wave's stage, as wave_add and stage_add made
 * them. */
static int plan_step_of(const struct matrix_plan *plan, const struct api_rack_upgrade_status *st,
                        const struct api_upgrade_step *s)
{
	bool rack = s->trays == 0;
	unsigned rank = 0, stage = wave_stage(st, s->wave);
	uint32_t parts[2];
	for (unsigned i = 0; i < st->nsteps && &st->steps[i] != s; i++)
		rank += st->steps[i].wave == s->wave && st->steps[i].action == API_ACT_APPLY &&
		        (st->steps[i].trays == 0) == rack;
	for (unsigned i = 0; i < plan->nsteps; i++) {
		if (stage_of(plan, i) != stage)
			continue;
		unsigned n = rack ? rack_part(plan, i) != 0 : wave_parts(plan, i, parts);
		if (rank < n)
			return (int)i;
		rank -= n;
	}
	return -1;
}

/* A failed canary gate with onGateFailure RollBack adds one wave that
 * moves the canary's trays back to the source stack: its RollBack step
 * marks it, and it is always the last wave. -1 when there is none. */
static int rollback_wave(const struct api_rack_upgrade_status *st)
{
	for (unsigned i = 0; i < st->nsteps; i++)
		if (st->steps[i].action == API_ACT_ROLL_BACK)
			return st->steps[i].wave;
	return -1;
}

/* The stack whose gate a gate step holds its trays to: the source stack
 * in the rollback wave, else the stack its stage reaches. */
static const struct matrix_stack *gate_stack(const struct pass *p, const struct api_upgrade_step *s)
{
	int rb = rollback_wave(p->st);
	if (rb >= 0 && s->wave >= rb && p->source != NULL)
		return p->source;
	return stage_stack(p, wave_stage(p->st, s->wave));
}

/* ---- Proposed: plan, notice, approvals needed ---- */

/* The layers an upgrade touches: those of its components, and the
 * workload layer when it drains trays (the workloads are stopped). */
static uint32_t touched(const struct pass *p)
{
	return api_upgrade_touched_layers(&p->plan);
}

static const struct api_responsibility *resp_of(const struct api_rack *r, enum matrix_layer l)
{
	for (unsigned i = 0; i < r->nresp; i++)
		if (r->resp[i].layer == l)
			return &r->resp[i];
	return NULL;
}

static void announce(struct pass *p)
{
	const struct op_upgrade_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	int64_t notice = 0;
	char layers[64], cves[256] = "";
	size_t len = 0;

	st->has_plan = true;
	st->plan = p->plan;
	st->plan.layers = touched(p);
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++) {
		const struct api_responsibility *r = resp_of(in->rack, (enum matrix_layer)l);
		if ((touched(p) & MATRIX_BIT(l)) && r != NULL && r->notice_ms > notice)
			notice = r->notice_ms;
	}
	/* Approvable layers, and every touched one over a manual edge. */
	st->required_approvals = api_upgrade_required_layers(in->rack, in->u->cls, &p->plan);
	st->notice_start_ms = in->now_ms;
	st->notice_end_ms = in->now_ms + notice;
	layers_text(touched(p), layers, sizeof(layers));
	for (unsigned i = 0; i < in->u->ncves && len + 40 < sizeof(cves); i++)
		len += (size_t)snprintf(cves + len, sizeof(cves) - len, "%s%s", i ? ", " : "",
		                        in->u->cves[i]);
	st->nconditions = 1;
	memset(&st->conditions[0], 0, sizeof(st->conditions[0]));
	snprintf(st->conditions[0].type, sizeof(st->conditions[0].type), "Announced");
	st->conditions[0].status = API_COND_TRUE;
	st->conditions[0].observed_generation = in->u->meta.generation;
	st->conditions[0].last_transition_ms = in->now_ms;
	snprintf(st->conditions[0].reason, sizeof(st->conditions[0].reason), "%s",
	         in->u->cls == API_UPGRADE_SECURITY ? "SecurityUpgrade" : "RoutineUpgrade");
	if (in->u->cls == API_UPGRADE_SECURITY)
		snprintf(st->conditions[0].message, sizeof(st->conditions[0].message),
		         "security upgrade for %.200s: %.250s", cves, in->u->reason);
	else
		snprintf(st->conditions[0].message, sizeof(st->conditions[0].message),
		         "routine upgrade touching %s%s%.400s", layers,
		         in->u->reason[0] ? ": " : "", in->u->reason);
	phase_set(p, API_PHASE_NOTICE);
	event(p, false, "Announced", "%s -> %s touches %s; notice %llds%s%s", st->from_stack,
	      in->u->target_stack, layers, (long long)(notice / 1000),
	      in->u->cls == API_UPGRADE_SECURITY ? "; security upgrade for " : "",
	      in->u->cls == API_UPGRADE_SECURITY ? cves : "");
}

/* ---- AwaitingApproval ---- */

static struct api_upgrade_approval_ref *ref_for(struct api_rack_upgrade_status *st,
                                                enum matrix_layer l)
{
	for (unsigned i = 0; i < st->napprovals; i++)
		if (st->approvals[i].layer == l)
			return &st->approvals[i];
	return NULL;
}

/* true when every required layer is approved. */
static bool approvals(struct pass *p)
{
	const struct op_upgrade_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	uint32_t have = 0;
	char missing[64];

	for (unsigned i = 0; i < in->napprovals; i++) {
		const struct api_upgrade_approval *a = in->approvals[i];
		if (!(st->required_approvals & MATRIX_BIT(a->layer)) ||
		    strcmp(a->upgrade, in->u->meta.name) != 0)
			continue;
		if (a->not_before_ms > in->now_ms && !a->rejected) {
			wake(p, a->not_before_ms);
			continue;
		}
		struct api_upgrade_approval_ref *r = ref_for(st, a->layer);
		if (r == NULL && st->napprovals < 10) {
			r = &st->approvals[st->napprovals++];
			memset(r, 0, sizeof(*r));
			r->layer = a->layer;
			snprintf(r->name, sizeof(r->name), "%.63s", a->meta.name);
			snprintf(r->user, sizeof(r->user), "%s", a->approved_by);
			r->rejected = a->rejected;
			r->time_ms = in->now_ms;
			event(p, a->rejected, a->rejected ? "ApprovalRejected" : "ApprovalCounted",
			      "%s layer %s by %s (%s)", matrix_layer_name(a->layer),
			      a->rejected ? "rejected" : "approved",
			      a->approved_by[0] ? a->approved_by : "an unknown user", a->meta.name);
		}
		if (r && r->rejected) {
			phase_set(p, API_PHASE_HALTED);
			message(p, "the %s layer was rejected by %s in %s: %s",
			        matrix_layer_name(r->layer),
			        r->user[0] ? r->user : "an unknown user", r->name, a->comment);
			return false;
		}
		have |= MATRIX_BIT(a->layer);
	}
	if ((have & st->required_approvals) == st->required_approvals)
		return true;
	layers_text(st->required_approvals & ~have, missing, sizeof(missing));
	uint32_t none = api_rack_ownerless_layers(in->rack, st->required_approvals & ~have);
	if (none == 0) {
		message(p, "waiting for an UpgradeApproval for: %s", missing);
		return false;
	}
	char owners[64];
	layers_text(none, owners, sizeof(owners));
	message(p,
	        "waiting for an UpgradeApproval for: %s (no windowOwner on rack \"%s\" for %s: "
	        "none can count until spec.responsibilities names one)",
	        missing, in->rack ? in->rack->meta.name : "", owners);
	return false;
}

/* ---- Scheduled ---- */

static bool schedule(struct pass *p)
{
	const struct op_upgrade_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	bool security = in->u->cls == API_UPGRADE_SECURITY;
	int64_t from =
	        in->now_ms > in->u->earliest_start_ms ? in->now_ms : in->u->earliest_start_ms;
	char win[64], frz[64], ts[TIME_RFC3339_LEN];
	int64_t at = op_window_next(in->rack, touched(p), from, security, win, sizeof(win), frz,
	                            sizeof(frz));
	if (at < 0) {
		st->scheduled_start_ms = 0;
		message(p,
		        "no maintenance window of rack %s covers the layers touched within "
		        "400 days",
		        in->rack->meta.name);
		return false;
	}
	st->scheduled_start_ms = at;
	snprintf(st->window, sizeof(st->window), "%s", win);
	if (at > in->now_ms) {
		time_format_rfc3339(at, ts);
		message(p, "scheduled for %s%s%s%s%s", ts, win[0] ? " in window " : "", win,
		        frz[0] ? " after freeze " : "", frz);
		wake(p, at);
		return false;
	}
	return true;
}

/* ---- steps ---- */

static struct api_upgrade_step *step_add(struct api_rack_upgrade_status *st, int wave,
                                         enum api_step_action a, uint32_t comps, uint32_t trays)
{
	if (st->nsteps >= API_UPGRADE_STEPS_MAX)
		return NULL;
	st->steps = xrealloc(st->steps, (st->nsteps + 1) * sizeof(*st->steps));
	struct api_upgrade_step *s = &st->steps[st->nsteps];
	memset(s, 0, sizeof(*s));
	s->index = (int)st->nsteps++;
	s->wave = wave;
	s->action = a;
	s->components = comps;
	s->trays = trays;
	s->phase = API_STEP_PENDING;
	return s;
}

/* A wave of compute trays in the current stage (that of the last wave;
 * stage 0 for the first). The first wave of each stage runs the gate. */
static void wave_add(struct pass *p, uint32_t trays)
{
	struct api_rack_upgrade_status *st = p->st;
	int w = (int)st->nwaves;
	unsigned stage = w ? wave_stage(st, w - 1) : 0;
	bool first = w == 0 || st->waves[w - 1].trays == 0;
	if (st->nwaves >= API_UPGRADE_WAVES_MAX)
		return;
	st->waves[st->nwaves++] =
	        (struct api_upgrade_wave){.index = w, .trays = trays, .phase = API_STEP_PENDING};
	for (unsigned i = 0; w == 0 && i < p->plan.nsteps; i++)
		if (stage_of(&p->plan, i) == 0 && rack_part(&p->plan, i))
			(void)step_add(st, w, API_ACT_APPLY, rack_part(&p->plan, i), 0);
	if (p->plan.needs_drain)
		(void)step_add(st, w, API_ACT_DRAIN, 0, trays);
	for (unsigned i = 0; i < p->plan.nsteps; i++) {
		uint32_t parts[2];
		unsigned n = stage_of(&p->plan, i) == stage ? wave_parts(&p->plan, i, parts) : 0;
		for (unsigned k = 0; k < n; k++)
			(void)step_add(st, w, API_ACT_APPLY, parts[k], trays);
	}
	(void)step_add(st, w, API_ACT_WAIT_FABRIC, 0, trays);
	(void)step_add(st, w, API_ACT_WAIT_IMEX, 0, trays);
	if (first) {
		(void)step_add(st, w, API_ACT_VALIDATE, 0, trays);
		(void)step_add(st, w, API_ACT_SOAK, 0, trays);
	}
	(void)step_add(st, w, API_ACT_UNCORDON, 0, trays);
}

/* The rack-wide wave that begins the next stage: its switch-tray parts,
 * once for the rack, with no tray in maintenance. */
static void stage_add(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	int w = (int)st->nwaves;
	unsigned stage = wave_stage(st, w - 1) + 1;
	if (st->nwaves >= API_UPGRADE_WAVES_MAX)
		return;
	st->waves[st->nwaves++] =
	        (struct api_upgrade_wave){.index = w, .trays = 0, .phase = API_STEP_PENDING};
	for (unsigned i = 0; i < p->plan.nsteps; i++)
		if (stage_of(&p->plan, i) == stage && rack_part(&p->plan, i))
			(void)step_add(st, w, API_ACT_APPLY, rack_part(&p->plan, i), 0);
}

static bool step_done(const struct api_upgrade_step *s)
{
	return s->phase == API_STEP_SUCCEEDED || s->phase == API_STEP_SKIPPED;
}

/* The first step not done; while rolling back, of the rollback wave (the
 * canary wave's failed gate stays Failed, as evidence). */
static struct api_upgrade_step *current(struct api_rack_upgrade_status *st)
{
	int rb = rollback_wave(st);
	for (unsigned i = 0; i < st->nsteps; i++)
		if (st->steps[i].wave >= rb && !step_done(&st->steps[i]))
			return &st->steps[i];
	return NULL;
}

static void step_end(struct pass *p, struct api_upgrade_step *s, enum api_step_phase ph,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void step_end(struct pass *p, struct api_upgrade_step *s, enum api_step_phase ph,
                     const char *fmt, ...)
{
	va_list ap;
	s->phase = ph;
	if (s->start_ms == 0)
		s->start_ms = p->in->now_ms;
	s->completion_ms = p->in->now_ms;
	va_start(ap, fmt);
	vsnprintf(s->message, sizeof(s->message), fmt, ap);
	va_end(ap);
}

void op_upgrade_step_finish(struct api_rack_upgrade_status *st, int step, enum api_step_phase phase,
                            const char *msg, int64_t now_ms)
{
	if (step < 0 || (unsigned)step >= st->nsteps)
		return;
	struct api_upgrade_step *s = &st->steps[step];
	if (s->phase != API_STEP_RUNNING)
		return;
	s->phase = phase;
	s->completion_ms = now_ms;
	snprintf(s->message, sizeof(s->message), "%s", msg ? msg : "");
	/* The steps the controller finishes (Drain, Uncordon) may be the last
	 * of their wave, which the engine's pass then never revisits: the
	 * wave ends here. */
	if (s->wave < 0 || (unsigned)s->wave >= st->nwaves)
		return;
	struct api_upgrade_wave *w = &st->waves[s->wave];
	bool last = (unsigned)step + 1 == st->nsteps || st->steps[step + 1].wave != s->wave;
	if (phase == API_STEP_FAILED || last) {
		w->phase = phase == API_STEP_FAILED ? API_STEP_FAILED : API_STEP_SUCCEEDED;
		w->completion_ms = now_ms;
	}
}

/* The driver an Apply step sets: that of the stack its plan step reaches. */
static const char *apply_driver(struct pass *p, const struct api_upgrade_step *s)
{
	if (s->action == API_ACT_ROLL_BACK)
		return p->source ? stack_driver(p->source) : "";
	int i = plan_step_of(&p->plan, p->st, s);
	if (i < 0)
		return stack_driver(p->target);
	return stack_driver(&p->in->m->stacks[p->plan.steps[i].to_stack]);
}

enum verdict { V_WAIT, V_DONE, V_FAILED };

static enum verdict apply_check(struct pass *p, struct api_upgrade_step *s)
{
	const char *drv = apply_driver(p, s);
	uint32_t left = 0;
	char list[64];
	if (!(s->components & NEEDS_AGENT)) {
		step_end(p, s, API_STEP_SKIPPED,
		         "no agent component in the step: not run by this "
		         "version");
		return V_DONE;
	}
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		if (!(s->trays & (1u << i)))
			continue;
		const struct op_upgrade_tray *t = tray_at(p->in, i);
		if (t && t->driver_failed) {
			step_end(p, s, API_STEP_FAILED,
			         "the driver change to %s failed on tray %d%s%.400s", drv, i,
			         t->driver_why && t->driver_why[0] ? ": " : "",
			         t->driver_why ? t->driver_why : "");
			return V_FAILED;
		}
		if (t == NULL || strcmp(t->driver, drv) != 0 || !t->driver_ready)
			left |= 1u << i;
	}
	if (left == 0) {
		step_end(p, s, API_STEP_SUCCEEDED, "driver %s loaded on %d trays", drv,
		         count(s->trays));
		return V_DONE;
	}
	trays_text(left, list, sizeof(list));
	snprintf(s->message, sizeof(s->message), "waiting for driver %s on trays %s", drv, list);
	p->out->act = OP_UPG_APPLY;
	p->out->step = s->index;
	p->out->trays = s->trays;
	p->out->components = s->components;
	snprintf(p->out->driver, sizeof(p->out->driver), "%s", drv);
	return V_WAIT;
}

/* ---- out-of-band steps ---- */

static const char *comp_first(uint32_t set)
{
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (set & MATRIX_BIT(c))
			return matrix_component_name((enum matrix_component)c);
	return "";
}

/* The components of set whose version plan step i changes. */
static uint32_t oob_changes(const struct pass *p, int i, uint32_t set)
{
	const struct matrix_stack *from = &p->in->m->stacks[p->plan.steps[i].from_stack];
	const struct matrix_stack *to = &p->in->m->stacks[p->plan.steps[i].to_stack];
	uint32_t out = 0;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if ((set & MATRIX_BIT(c)) &&
		    strcmp(from->tuple.version[c].text, to->tuple.version[c].text) != 0)
			out |= MATRIX_BIT(c);
	return out;
}

/* Why an out-of-band step cannot run (V_FAILED, the step ended), or that
 * nothing is to do without a backend (V_DONE, Skipped); V_WAIT: it runs. */
static enum verdict oob_blocker(struct pass *p, struct api_upgrade_step *s, int i)
{
	uint32_t comps = s->components & oob_comps(), change;
	if (i < 0) {
		step_end(p, s, API_STEP_FAILED, "no plan step matches this out-of-band step");
		return V_FAILED;
	}
	if (p->in->oob_backend)
		return V_WAIT;
	change = oob_changes(p, i, comps);
	if (change == 0) {
		step_end(p, s, API_STEP_SKIPPED, "%s already at the target version",
		         comp_first(comps));
		return V_DONE;
	}
	step_end(p, s, API_STEP_FAILED,
	         "plan step %d needs an out-of-band backend (component %s); none configured", i + 1,
	         comp_first(change));
	return V_FAILED;
}

static enum verdict oob_check(struct pass *p, struct api_upgrade_step *s)
{
	int i = plan_step_of(&p->plan, p->st, s);
	enum verdict v = oob_blocker(p, s, i);
	const struct matrix_stack *to;
	if (v != V_WAIT)
		return v;
	to = &p->in->m->stacks[p->plan.steps[i].to_stack];
	p->out->act = OP_UPG_OOB;
	p->out->step = s->index;
	p->out->trays = s->trays;
	p->out->components = s->components & oob_comps();
	p->out->plan_step = i;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (p->out->components & MATRIX_BIT(c))
			snprintf(p->out->versions[c], sizeof(p->out->versions[c]), "%s",
			         to->tuple.version[c].text);
	if (s->message[0] == '\0')
		snprintf(s->message, sizeof(s->message),
		         "plan step %d: out-of-band update of %s%s on %s", i + 1,
		         comp_first(p->out->components),
		         count(p->out->components) > 1 ? " and more" : "",
		         s->trays ? "the wave's compute trays" : "the rack's switch trays");
	return V_WAIT;
}

/* The first out-of-band component of a later stage's plan step that needs
 * a backend this operator lacks (0 when none): found before the canary, so
 * that an upgrade never stops between stages for want of one. */
static int oob_later_missing(const struct pass *p, uint32_t *comp)
{
	for (unsigned i = 0; i < p->plan.nsteps && !p->in->oob_backend; i++) {
		uint32_t c = oob_changes(p, (int)i, p->plan.steps[i].components & oob_comps());
		if (stage_of(&p->plan, i) > 0 && c != 0) {
			*comp = c;
			return (int)i + 1;
		}
	}
	return 0;
}

/* At the canary's start, before any tray is touched: an out-of-band step
 * that cannot run fails now (those of a later stage too, which have no
 * step yet), and the upgrade halts. */
static bool oob_precheck(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	uint32_t comp = 0;
	int later;
	for (unsigned k = 0; k < st->nsteps; k++) {
		struct api_upgrade_step *s = &st->steps[k];
		if (s->wave != 0 || s->action != API_ACT_APPLY || s->phase != API_STEP_PENDING ||
		    !(s->components & oob_comps()))
			continue;
		if (oob_blocker(p, s, plan_step_of(&p->plan, st, s)) != V_FAILED)
			continue;
		st->waves[0].phase = API_STEP_FAILED;
		st->waves[0].start_ms = st->waves[0].completion_ms = p->in->now_ms;
		phase_set(p, API_PHASE_HALTED);
		message(p, "step %d (Apply, wave 0) failed: %s", s->index, s->message);
		return false;
	}
	if ((later = oob_later_missing(p, &comp)) != 0) {
		st->waves[0].phase = API_STEP_FAILED;
		st->waves[0].start_ms = st->waves[0].completion_ms = p->in->now_ms;
		phase_set(p, API_PHASE_HALTED);
		message(p,
		        "plan step %d (stage %u) needs an out-of-band backend (component %s); none "
		        "configured",
		        later, stage_of(&p->plan, (unsigned)later - 1) + 1, comp_first(comp));
		return false;
	}
	return true;
}

/* Healthy whether NVML said so or the agent decided it from the health
 * mask (healthSource "mask": drivers of NVML API 12, R570 and R575, give no
 * summary); both arrive as healthSummary "Healthy". */
static bool fabric_ok(const struct op_upgrade_tray *t)
{
	return t && strcmp(t->fabric_state, "Completed") == 0 &&
	       strcmp(t->fabric_health, "Healthy") == 0;
}

/* A fault that waiting cannot clear: the fabric has settled (Completed)
 * and its health, NVML's summary or the agent's reading of the mask (one
 * mask fault already makes the tray Unhealthy), is Unhealthy or
 * LimitedCapacity. A state or health still unknown (NotSupported, not yet
 * reported, the fabric still training) may yet become Healthy. */
static bool fabric_faulted(const struct op_upgrade_tray *t)
{
	return t && strcmp(t->fabric_state, "Completed") == 0 &&
	       (strcmp(t->fabric_health, "Unhealthy") == 0 ||
	        strcmp(t->fabric_health, "LimitedCapacity") == 0);
}

/* Appends to msg (cap bytes) why the first of trays whose fabric is not
 * ok is not, as its agent says ("tray 3: GPU 2: Unhealthy from the health
 * mask (routeUnhealthy)"), or, when all are ok, how many were decided from
 * the health mask. */
static void fabric_note(const struct pass *p, uint32_t trays, char *msg, size_t cap)
{
	size_t len = strlen(msg);
	int masked = 0;

	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		const struct op_upgrade_tray *t = tray_at(p->in, i);
		if (!(trays & (1u << i)) || t == NULL)
			continue;
		if (!fabric_ok(t)) {
			if (t->fabric_why && t->fabric_why[0])
				snprintf(msg + len, cap - len, " (tray %d: %s)", i, t->fabric_why);
			else
				snprintf(msg + len, cap - len, " (tray %d: fabric %s, health %s)",
				         i, t->fabric_state[0] ? t->fabric_state : "unknown",
				         t->fabric_health[0] ? t->fabric_health : "unknown");
			return;
		}
		masked += t->fabric_source && strcmp(t->fabric_source, "mask") == 0;
	}
	if (masked > 0)
		snprintf(msg + len, cap - len, " (%d from the health mask)", masked);
}

static bool imex_ok(const struct op_upgrade_tray *t)
{
	return t && (!t->has_imex || strcmp(t->imex_domain, "Up") == 0);
}

static enum verdict wait_check(struct pass *p, struct api_upgrade_step *s,
                               bool (*ok)(const struct op_upgrade_tray *), const char *what)
{
	uint32_t left = 0;
	char list[64];
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++)
		if ((s->trays & (1u << i)) && !ok(tray_at(p->in, i)))
			left |= 1u << i;
	if (left == 0) {
		step_end(p, s, API_STEP_SUCCEEDED, "%s on %d trays", what, count(s->trays));
		return V_DONE;
	}
	trays_text(left, list, sizeof(list));
	snprintf(s->message, sizeof(s->message), "waiting for %s on trays %s", what, list);
	return V_WAIT;
}

/* Waits while any tray's fabric may still become Healthy; once none may
 * and a tray has a settled fault, the step fails (the upgrade halts)
 * naming the tray and its GPU, instead of waiting for ever. */
static enum verdict fabric_wait_check(struct pass *p, struct api_upgrade_step *s)
{
	uint32_t pending = 0, faulted = 0;
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		const struct op_upgrade_tray *t = tray_at(p->in, i);
		if (!(s->trays & (1u << i)) || fabric_ok(t))
			continue;
		if (fabric_faulted(t))
			faulted |= 1u << i;
		else
			pending |= 1u << i;
	}
	if (pending == 0 && faulted != 0) {
		char list[64], why[sizeof(s->message)];
		trays_text(faulted, list, sizeof(list));
		snprintf(why, sizeof(why), "fabric fault on trays %s", list);
		fabric_note(p, faulted, why, sizeof(why));
		step_end(p, s, API_STEP_FAILED, "%s", why);
		return V_FAILED;
	}
	enum verdict v = wait_check(p, s, fabric_ok, "fabric Completed and Healthy");
	fabric_note(p, s->trays, s->message, sizeof(s->message));
	return v;
}

static void evidence_base(struct pass *p, struct api_upgrade_step *s, bool *fab, bool *imex)
{
	struct api_gate_evidence *e = &s->evidence;
	bool any_imex = false;
	*fab = *imex = true;
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		if (!(s->trays & (1u << i)))
			continue;
		const struct op_upgrade_tray *t = tray_at(p->in, i);
		*fab &= fabric_ok(t);
		*imex &= imex_ok(t);
		any_imex |= t && t->has_imex;
	}
	e->set = true;
	snprintf(e->fabric_state, sizeof(e->fabric_state), "%s", *fab ? "Completed" : "NotReady");
	snprintf(e->imex_domain_state, sizeof(e->imex_domain_state), "%s",
	         !any_imex ? "NotConfigured"
	         : *imex   ? "Up"
	                   : "NotUp");
	const struct matrix_gate *g = &gate_stack(p, s)->gate;
	e->floor_gbps = g->floor_gbps;
	e->tolerance_pct = g->tolerance_pct;
	snprintf(e->transport, sizeof(e->transport), "%s", g->transport);
}

static enum verdict gate_end(struct pass *p, struct api_upgrade_step *s, bool passed,
                             const char *why)
{
	s->evidence.passed = passed;
	snprintf(s->evidence.report, sizeof(s->evidence.report), "%s", why);
	step_end(p, s, passed ? API_STEP_SUCCEEDED : API_STEP_FAILED, "gate %s: %s",
	         passed ? "passed" : "failed", why);
	event(p, !passed, passed ? "GatePassed" : "GateFailed", "%s trays: %s",
	      rollback_wave(p->st) >= 0 ? "rolled-back canary" : "canary", why);
	return passed ? V_DONE : V_FAILED;
}

static enum verdict validate_check(struct pass *p, struct api_upgrade_step *s)
{
	const struct matrix_gate *g = &gate_stack(p, s)->gate;
	char id[64], why[512];
	bool fab, imex;
	int min = -1;
	uint32_t left = 0;

	evidence_base(p, s, &fab, &imex);
	if (g->fabric_completed && !fab) {
		snprintf(why, sizeof(why), "fabric not Completed and Healthy on every canary tray");
		fabric_note(p, s->trays, why, sizeof(why));
		return gate_end(p, s, false, why);
	}
	if (g->imex_domain_up && !imex)
		return gate_end(p, s, false, "IMEX domain not Up on every canary tray");
	if (!g->has_nccl)
		return gate_end(p, s, true,
		                "fabric and IMEX checks passed; the gate has no "
		                "bandwidth floor");
	op_upgrade_validation_id(p->in->u, s->index, id);
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		if (!(s->trays & (1u << i)))
			continue;
		const struct op_upgrade_tray *t = tray_at(p->in, i);
		if (t == NULL || strcmp(t->validation_id, id) != 0 ||
		    strcmp(t->validation_phase, "Running") == 0 || t->validation_phase[0] == '\0') {
			left |= 1u << i;
			continue;
		}
		if (strcmp(t->validation_phase, "Succeeded") != 0) {
			snprintf(why, sizeof(why), "validation run %s failed on tray %d: %s", id, i,
			         t->validation_message);
			return gate_end(p, s, false, why);
		}
		if (min < 0 || t->validation_busbw < min)
			min = t->validation_busbw;
		if (t->validation_transport[0])
			snprintf(s->evidence.transport, sizeof(s->evidence.transport), "%s",
			         t->validation_transport);
	}
	if (left) {
		char list[64];
		trays_text(left, list, sizeof(list));
		snprintf(s->message, sizeof(s->message),
		         "validation run %s in progress on trays %s", id, list);
		p->out->act = OP_UPG_VALIDATE;
		p->out->step = s->index;
		p->out->trays = s->trays;
		snprintf(p->out->validation_id, sizeof(p->out->validation_id), "%s", id);
		return V_WAIT;
	}
	s->evidence.busbw_gbps = min;
	bool passed = matrix_gate_passes(g, min);
	snprintf(why, sizeof(why),
	         "bus bandwidth %d GB/s (min over %d trays) %s floor %d GB/s - %d%%", min,
	         count(s->trays), passed ? ">=" : "<", g->floor_gbps, g->tolerance_pct);
	return gate_end(p, s, passed, why);
}

static enum verdict soak_check(struct pass *p, struct api_upgrade_step *s)
{
	int64_t soak = p->in->u->canary_soak_ms ? p->in->u->canary_soak_ms
	                                        : gate_stack(p, s)->gate.soak_ms;
	/* A soak is a length of observation. A wall clock stepped back past
	 * its start would stretch it by the step; it starts again from now. */
	if (p->in->now_ms < s->start_ms)
		s->start_ms = p->in->now_ms;
	if (p->in->now_ms < s->start_ms + soak) {
		snprintf(s->message, sizeof(s->message), "soaking for %llds",
		         (long long)(soak / 1000));
		wake(p, s->start_ms + soak);
		return V_WAIT;
	}
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++)
		if ((s->trays & (1u << i)) && !fabric_ok(tray_at(p->in, i))) {
			step_end(p, s, API_STEP_FAILED, "tray %d lost its fabric during the soak",
			         i);
			return V_FAILED;
		}
	step_end(p, s, API_STEP_SUCCEEDED, "soaked %llds", (long long)(soak / 1000));
	return V_DONE;
}

static enum verdict step_check(struct pass *p, struct api_upgrade_step *s)
{
	switch (s->action) {
	case API_ACT_DRAIN:
	case API_ACT_UNCORDON:
		p->out->act = s->action == API_ACT_DRAIN ? OP_UPG_DRAIN : OP_UPG_RELEASE;
		p->out->step = s->index;
		p->out->trays = s->trays;
		return V_WAIT; /* the caller finishes it */
	case API_ACT_APPLY:
		if (s->components & oob_comps())
			return oob_check(p, s);
		return apply_check(p, s);
	case API_ACT_ROLL_BACK:
		return apply_check(p, s);
	case API_ACT_WAIT_FABRIC:
		return fabric_wait_check(p, s);
	case API_ACT_WAIT_IMEX:
		return wait_check(p, s, imex_ok, "IMEX domain Up");
	case API_ACT_VALIDATE:
		return validate_check(p, s);
	case API_ACT_SOAK:
		return soak_check(p, s);
	default:
		step_end(p, s, API_STEP_SKIPPED, "not run by this version");
		return V_DONE;
	}
}

/* ---- NVIDIA's ComputeDomains ---- */

/* The trays a step changes under a workload: a drain's, an apply's (every
 * tray of the rack for a rack-wide one, which moves the switch trays that
 * carry every tray's NVLink), a rollback's. 0 for the rest. */
static uint32_t disrupts(const struct pass *p, const struct api_upgrade_step *s)
{
	switch (s->action) {
	case API_ACT_CORDON:
	case API_ACT_DRAIN:
	case API_ACT_ROLL_BACK:
		return s->trays;
	case API_ACT_APPLY:
		return s->trays ? s->trays : rack_trays(p->in->rack);
	default:
		return 0;
	}
}

/* Whether the pending step s must not start: a tray it would disrupt is
 * used by an NVIDIA ComputeDomain (or NVIDIA's ComputeDomains are served
 * but unread), whose workload the operator neither drains nor checkpoints.
 * Its message names the domain, and an event marks each new reason. */
static bool nvidia_holds(struct pass *p, struct api_upgrade_step *s)
{
	const struct op_upgrade_tray *t = NULL;
	uint32_t reach = disrupts(p, s), busy = 0;
	char msg[sizeof(s->message)], list[64];

	if (reach == 0)
		return false;
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		const struct op_upgrade_tray *x = (reach & (1u << i)) ? tray_at(p->in, i) : NULL;
		if (x == NULL || x->nvidia_domain == NULL || x->nvidia_domain[0] == '\0')
			continue;
		busy |= 1u << i;
		if (t == NULL)
			t = x;
	}
	trays_text(busy, list, sizeof(list));
	if (t != NULL)
		snprintf(msg, sizeof(msg),
		         OP_UPGRADE_NVIDIA_HELD "tray %d (Node %.63s) is in NVIDIA ComputeDomain "
		                                "%.200s%s%s%s; the %s starts once NVIDIA's driver "
		                                "releases %s",
		         t->index, t->node, t->nvidia_domain,
		         count(busy) > 1 ? " (trays of the step in NVIDIA ComputeDomains: " : "",
		         count(busy) > 1 ? list : "", count(busy) > 1 ? ")" : "",
		         api_step_action_name(s->action), count(busy) > 1 ? "them" : "it");
	else if (p->in->nvidia_unread != NULL)
		snprintf(msg, sizeof(msg),
		         OP_UPGRADE_NVIDIA_HELD "NVIDIA's ComputeDomains are served but not read "
		                                "(%.300s): the %s starts once they are",
		         p->in->nvidia_unread, api_step_action_name(s->action));
	else
		return false;
	if (p->in->nvidia_unread != NULL && t == NULL)
		wake(p, p->in->now_ms + OP_UPGRADE_NVIDIA_RETRY_MS);
	if (strcmp(msg, s->message) != 0) {
		snprintf(s->message, sizeof(s->message), "%s", msg);
		event(p, true, OP_UPGRADE_NVIDIA_REASON, "step %d (%s, wave %d): %s", s->index,
		      api_step_action_name(s->action), s->wave, msg);
	}
	return true;
}

/* Runs the steps in order until one waits: V_DONE when every step is
 * done, V_FAILED when one failed. */
static enum verdict steps_run(struct pass *p)
{
	struct api_upgrade_step *s;
	while ((s = current(p->st)) != NULL) {
		struct api_upgrade_wave *w = &p->st->waves[s->wave];
		if (s->phase == API_STEP_FAILED)
			return V_FAILED;
		if (s->phase == API_STEP_PENDING) {
			if (p->hold || nvidia_holds(p, s))
				return V_WAIT;
			/* A hold's message does not outlive it. */
			if (strncmp(s->message, OP_UPGRADE_NVIDIA_HELD,
			            strlen(OP_UPGRADE_NVIDIA_HELD)) == 0)
				s->message[0] = '\0';
			s->phase = API_STEP_RUNNING;
			s->start_ms = p->in->now_ms;
			if (w->phase == API_STEP_PENDING) {
				w->phase = API_STEP_RUNNING;
				w->start_ms = p->in->now_ms;
			}
		}
		if (s->wave == 0 && s->action == API_ACT_VALIDATE &&
		    p->st->phase == API_PHASE_CANARY)
			phase_set(p, API_PHASE_VALIDATING);
		enum verdict v = step_check(p, s);
		if (v == V_FAILED) {
			w->phase = API_STEP_FAILED;
			w->completion_ms = p->in->now_ms;
		}
		if (v != V_DONE)
			return v;
		if ((unsigned)s->index + 1 == p->st->nsteps ||
		    p->st->steps[s->index + 1].wave != s->wave) {
			w->phase = API_STEP_SUCCEEDED;
			w->completion_ms = p->in->now_ms;
		}
	}
	return V_DONE;
}

/* ---- canary and waves ---- */

static bool canary_pick(struct pass *p)
{
	const struct op_upgrade_in *in = p->in;
	const struct api_rack_partition *best = NULL;
	for (unsigned i = 0; i < in->npartitions; i++) {
		const struct api_rack_partition *c = in->partitions[i];
		if (strcmp(c->rack, in->rack->meta.name) != 0)
			continue;
		if (in->u->canary_partition[0]) {
			if (strcmp(c->meta.name, in->u->canary_partition) == 0)
				best = c;
		} else if (c->canary_eligible &&
		           (best == NULL || count(c->trays) < count(best->trays) ||
		            (count(c->trays) == count(best->trays) &&
		             strcmp(c->meta.name, best->meta.name) < 0))) {
			best = c;
		}
	}
	if (best == NULL) {
		if (in->u->canary_partition[0])
			message(p, "canary RackPartition %s of rack %s not found",
			        in->u->canary_partition, in->rack->meta.name);
		else
			message(p,
			        "rack %s has no canaryEligible RackPartition and "
			        "spec.canary.partition is empty",
			        in->rack->meta.name);
		return false;
	}
	snprintf(p->st->canary_partition, sizeof(p->st->canary_partition), "%.63s",
	         best->meta.name);
	p->st->canary_trays = best->trays & rack_trays(in->rack);
	wave_add(p, p->st->canary_trays);
	return true;
}

/* The trays the current stage has taken in waves so far. */
static uint32_t waved(const struct api_rack_upgrade_status *st)
{
	uint32_t set = 0;
	for (unsigned i = st->nwaves; i-- > 0;) {
		if (i > 0 && st->waves[i].trays == 0)
			break;
		set |= st->waves[i].trays;
	}
	return set;
}

/* The next wave: remaining trays in index order, never more than
 * maxUnavailableTrays down at once (counting trays already down) and
 * never fewer than minHealthyTrays available. false when none fits now. */
static bool wave_next(struct pass *p, uint32_t remaining)
{
	const struct op_upgrade_in *in = p->in;
	const struct api_rack_policy *pol = &in->rack->policy;
	int size = in->u->wave_size > 0 && in->u->wave_size < pol->max_unavailable_trays
	                   ? in->u->wave_size
	                   : pol->max_unavailable_trays;
	int down = 0, avail = 0, picked = 0, cost = 0;
	uint32_t wave = 0;
	for (unsigned i = 0; i < in->rack->ncompute; i++) {
		const struct op_upgrade_tray *t = tray_at(in, in->rack->compute[i].index);
		if (t && t->available)
			avail++;
		else
			down++;
	}
	for (int i = 1; i <= API_COMPUTE_TRAYS && picked < size; i++) {
		if (!(remaining & (1u << i)))
			continue;
		const struct op_upgrade_tray *t = tray_at(in, i);
		int c = t && t->available ? 1 : 0;
		if (down + cost + c > pol->max_unavailable_trays ||
		    avail - cost - c < pol->min_healthy_trays)
			break;
		cost += c;
		picked++;
		wave |= 1u << i;
	}
	if (wave == 0) {
		message(p,
		        "waiting for capacity: %d of %u trays down, maxUnavailableTrays %d, "
		        "minHealthyTrays %d",
		        down, in->rack->ncompute, pol->max_unavailable_trays,
		        pol->min_healthy_trays);
		return false;
	}
	wave_add(p, wave);
	return true;
}

/* ---- rolling back ---- */

/* What in wave 0 moved that a RollBack step cannot move back: an
 * out-of-band part (switch or tray firmware) that ran. 0 when none. */
static uint32_t rollback_blocker(const struct api_rack_upgrade_status *st)
{
	for (unsigned i = 0; i < st->nsteps; i++) {
		const struct api_upgrade_step *s = &st->steps[i];
		if (s->wave == 0 && s->action == API_ACT_APPLY && s->phase == API_STEP_SUCCEEDED &&
		    (s->components & (oob_comps() | SWITCH_COMPS)))
			return s->components & (oob_comps() | SWITCH_COMPS);
	}
	return 0;
}

/* The canary's gate failed and the Rack says RollBack: the rest of wave 0
 * is skipped and a wave of the canary's trays takes them back to the
 * source stack, with the same drain, wait and gate steps (the source
 * stack's gate), then out of maintenance. false when it cannot, with the
 * reason in an event; the upgrade then holds. */
static bool rollback_begin(struct pass *p, struct api_upgrade_step *failed)
{
	struct api_rack_upgrade_status *st = p->st;
	char why[MATRIX_PROBLEM_LEN + 160];
	uint32_t trays = st->canary_trays, moved;
	int w = (int)st->nwaves, at = failed->index; /* step_add moves the steps */

	if (p->in->rack->policy.on_gate_failure != API_ON_GATE_ROLL_BACK ||
	    (failed->action != API_ACT_VALIDATE && failed->action != API_ACT_SOAK) ||
	    rollback_wave(st) >= 0)
		return false;
	if (failed->wave != 0) {
		event(p, true, "RollBackRefused",
		      "the gate of wave %d failed; RollBack moves back the canary of the first "
		      "stage only: held",
		      failed->wave);
		return false;
	}
	if (p->source == NULL ||
	    api_upgrade_rollback_check(p->in->m, st->from_stack, p->in->u->target_stack,
	                               MATRIX_PLAN_MULTI_HOP, why, sizeof(why)) != NV_OK) {
		event(p, true, "RollBackRefused", "%s: held",
		      p->source ? why : "the source stack is not in the matrix");
		return false;
	}
	if ((moved = rollback_blocker(st)) != 0) {
		event(p, true, "RollBackRefused",
		      "wave 0 moved %s out of band, which a RollBack step does not move back: held",
		      comp_first(moved));
		return false;
	}
	if (st->nwaves >= API_UPGRADE_WAVES_MAX || st->nsteps + 8 > API_UPGRADE_STEPS_MAX) {
		event(p, true, "RollBackRefused",
		      "no room left in the status for the rollback's "
		      "wave: held");
		return false;
	}
	for (unsigned i = (unsigned)at + 1; i < st->nsteps; i++)
		if (st->steps[i].wave == 0 && st->steps[i].phase == API_STEP_PENDING)
			step_end(p, &st->steps[i], API_STEP_SKIPPED, "rolled back");
	st->waves[st->nwaves++] =
	        (struct api_upgrade_wave){.index = w, .trays = trays, .phase = API_STEP_PENDING};
	if (p->plan.needs_drain)
		(void)step_add(st, w, API_ACT_DRAIN, 0, trays);
	(void)step_add(st, w, API_ACT_ROLL_BACK, NEEDS_AGENT, trays);
	(void)step_add(st, w, API_ACT_WAIT_FABRIC, 0, trays);
	(void)step_add(st, w, API_ACT_WAIT_IMEX, 0, trays);
	(void)step_add(st, w, API_ACT_VALIDATE, 0, trays);
	(void)step_add(st, w, API_ACT_SOAK, 0, trays);
	(void)step_add(st, w, API_ACT_UNCORDON, 0, trays);
	phase_set(p, API_PHASE_ROLLING_BACK);
	trays_text(trays, why, sizeof(why));
	event(p, true, "RollBackStarted",
	      "the canary's gate failed (step %d): trays %s move back to %s (onGateFailure: "
	      "RollBack)",
	      at, why, st->from_stack);
	return true;
}

/* ---- the phases ---- */

static void rollout(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	for (int round = 0; round < API_UPGRADE_WAVES_MAX + 1; round++) {
		enum verdict v = steps_run(p);
		if (v == V_FAILED && rollback_begin(p, current(st)))
			continue;
		if (v == V_FAILED) {
			struct api_upgrade_step *s = current(st);
			phase_set(p, API_PHASE_HALTED);
			message(p, "step %d (%s, wave %d) failed: %s", s->index,
			        api_step_action_name(s->action), s->wave, s->message);
			return;
		}
		if (v == V_WAIT) {
			struct api_upgrade_step *s = current(st);
			if (s)
				message(p, "wave %d: %s", s->wave,
				        s->message[0] ? s->message : "next step");
			return;
		}
		if (rollback_wave(st) >= 0) {
			char list[64];
			trays_text(st->canary_trays, list, sizeof(list));
			phase_set(p, API_PHASE_ROLLED_BACK);
			st->completion_ms = p->in->now_ms;
			message(p,
			        "the canary's gate failed; trays %s run %s again and passed its "
			        "gate",
			        list, st->from_stack);
			return;
		}
		if (st->phase == API_PHASE_CANARY || st->phase == API_PHASE_VALIDATING)
			phase_set(p, API_PHASE_ROLLING_OUT);
		uint32_t remaining = rack_trays(p->in->rack) & ~waved(st);
		unsigned stage = wave_stage(st, (int)st->nwaves - 1);
		if (remaining == 0 && stage + 1 < stages(&p->plan)) {
			if (p->hold)
				return;
			stage_add(p);
			event(p, false, "StageStarted",
			      "stage %u of %u: every tray took the steps before it; "
			      "the switch trays move now",
			      stage + 2, stages(&p->plan));
			continue;
		}
		if (remaining == 0) {
			phase_set(p, API_PHASE_COMPLETED);
			st->completion_ms = p->in->now_ms;
			message(p, "every tray runs %s", p->in->u->target_stack);
			return;
		}
		if (p->hold)
			return;
		/* A later stage's first wave: the canary's trays, gated again. */
		if (st->waves[st->nwaves - 1].trays == 0 && (remaining & st->canary_trays)) {
			wave_add(p, remaining & st->canary_trays);
			continue;
		}
		if (!wave_next(p, remaining))
			return;
	}
}

/* Abort: a running step finishes; then the trays of the wave in progress
 * get their Uncordon step, the rest is skipped, and the upgrade ends. */
static void abort_run(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	struct api_upgrade_step *s = current(st);
	if (s && s->phase == API_STEP_RUNNING && s->action != API_ACT_UNCORDON) {
		p->hold = true;
		(void)steps_run(p);
		if ((s = current(st)) != NULL && s->phase == API_STEP_RUNNING) {
			message(p, "aborting: step %d finishes first", s->index);
			return;
		}
	}
	if (s && s->phase == API_STEP_FAILED)
		s = s + 1 < st->steps + st->nsteps ? s + 1 : NULL;
	for (; s && s < st->steps + st->nsteps; s++) {
		if (s->phase != API_STEP_PENDING && s->phase != API_STEP_RUNNING)
			continue;
		bool held = false;
		for (unsigned i = 0; i < (unsigned)s->index; i++)
			held |= st->steps[i].wave == s->wave &&
			        st->steps[i].phase != API_STEP_PENDING &&
			        st->steps[i].phase != API_STEP_SKIPPED;
		if (s->action == API_ACT_UNCORDON && held) {
			if (s->phase == API_STEP_PENDING) {
				s->phase = API_STEP_RUNNING;
				s->start_ms = p->in->now_ms;
			}
			p->out->act = OP_UPG_RELEASE;
			p->out->step = s->index;
			p->out->trays = s->trays;
			message(p, "aborting: releasing trays of wave %d", s->wave);
			return;
		}
		if (s->phase == API_STEP_PENDING)
			step_end(p, s, API_STEP_SKIPPED, "aborted");
	}
	phase_set(p, API_PHASE_ABORTED);
	st->completion_ms = p->in->now_ms;
	message(p, "aborted; every tray is out of maintenance");
}

/* The phase to go back to after a pause. */
static enum api_upgrade_phase resumed(const struct api_rack_upgrade_status *st)
{
	const struct api_upgrade_step *s = NULL;
	for (unsigned i = 0; i < st->nsteps && s == NULL; i++)
		if (!step_done(&st->steps[i]))
			s = &st->steps[i];
	if (st->nsteps == 0)
		return API_PHASE_NOTICE;
	if (rollback_wave(st) >= 0)
		return API_PHASE_ROLLING_BACK;
	if (s == NULL || s->wave > 0)
		return API_PHASE_ROLLING_OUT;
	return s->action >= API_ACT_VALIDATE ? API_PHASE_VALIDATING : API_PHASE_CANARY;
}

/* spec.retry raised on a Halted upgrade: a failed Drain step (its
 * deadline passed while something refused to leave) starts again with a
 * fresh deadline; any other failed step (a gate, an operation) stays
 * failed. Whether the upgrade goes on. */
static bool retry(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	struct api_upgrade_step *s = current(st);
	long long want = (long long)p->in->u->retry;

	if (want <= st->retried)
		return false;
	st->retried = want;
	if (s == NULL || s->phase != API_STEP_FAILED || s->action != API_ACT_DRAIN) {
		event(p, true, "RetryRefused",
		      "spec.retry=%lld: only a failed Drain step is retried; the upgrade halted at "
		      "step %d (%s)",
		      want, s ? s->index : -1, s ? api_step_action_name(s->action) : "none");
		return false;
	}
	s->phase = API_STEP_PENDING;
	s->start_ms = 0;
	s->completion_ms = 0;
	snprintf(s->message, sizeof(s->message), "retried (spec.retry=%lld)", want);
	st->waves[s->wave].phase = API_STEP_RUNNING;
	st->waves[s->wave].completion_ms = 0;
	phase_set(p, resumed(st));
	event(p, false, "Retried",
	      "step %d (Drain, wave %d) starts again with a fresh deadline "
	      "(spec.retry=%lld)",
	      s->index, s->wave, want);
	return true;
}

static void phases(struct pass *p)
{
	struct api_rack_upgrade_status *st = p->st;
	bool security = p->in->u->cls == API_UPGRADE_SECURITY;
	char ts[TIME_RFC3339_LEN];

	if (st->phase == API_PHASE_PROPOSED)
		announce(p);
	if (st->phase == API_PHASE_NOTICE) {
		if (p->in->now_ms < st->notice_end_ms) {
			time_format_rfc3339(st->notice_end_ms, ts);
			message(p, "notice period until %s", ts);
			wake(p, st->notice_end_ms);
			return;
		}
		phase_set(p, security ? API_PHASE_SCHEDULED : API_PHASE_AWAITING_APPROVAL);
	}
	if (st->phase == API_PHASE_AWAITING_APPROVAL) {
		if (!approvals(p))
			return;
		phase_set(p, API_PHASE_SCHEDULED);
	}
	if (st->phase == API_PHASE_SCHEDULED) {
		if (p->hold || !schedule(p))
			return;
		if (p->in->slot_parent != NULL) {
			message(p,
			        "window open; waiting for one of the rack slots of RackUpgrade %s "
			        "(spec.maxParallelRacks)",
			        p->in->slot_parent);
			return;
		}
		st->start_ms = p->in->now_ms;
		if (!canary_pick(p))
			return;
		phase_set(p, API_PHASE_CANARY);
		if (!oob_precheck(p))
			return;
	}
	if (st->phase == API_PHASE_CANARY || st->phase == API_PHASE_VALIDATING ||
	    st->phase == API_PHASE_ROLLING_OUT || st->phase == API_PHASE_ROLLING_BACK)
		rollout(p);
}

static bool plan_load(struct pass *p)
{
	const struct op_upgrade_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	if (in->rack == NULL) {
		message(p, "rack %s not found", in->u->rack);
		return false;
	}
	if (in->m == NULL) {
		message(p, "CompatibilityMatrix %s not found", in->u->target_matrix);
		return false;
	}
	if (st->from_stack[0] == '\0')
		snprintf(st->from_stack, sizeof(st->from_stack), "%s",
		         in->rack_stack ? in->rack_stack : "");
	p->target = matrix_stack_find(in->m, in->u->target_stack);
	p->source = matrix_stack_find(in->m, st->from_stack);
	if (p->target == NULL || st->from_stack[0] == '\0' ||
	    matrix_plan_build(in->m, st->from_stack, in->u->target_stack, MATRIX_PLAN_MULTI_HOP,
	                      &p->plan) != NV_OK) {
		message(p, "no plan from stack \"%s\" to %s in %s", st->from_stack,
		        in->u->target_stack, in->m->name);
		return false;
	}
	if (stages(&p->plan) > API_UPGRADE_STAGES_MAX) {
		phase_set(p, API_PHASE_HALTED);
		message(p,
		        "the move %s -> %s takes %u stages (switch-tray steps between compute-tray "
		        "steps); at most %d are run: upgrade through an intermediate stack first",
		        st->from_stack, in->u->target_stack, stages(&p->plan),
		        API_UPGRADE_STAGES_MAX);
		return false;
	}
	if (p->plan.verdict == MATRIX_BLOCKED) {
		phase_set(p, API_PHASE_HALTED);
		message(p, "the move %s -> %s is blocked: %s", st->from_stack, in->u->target_stack,
		        p->plan.problem);
		return false;
	}
	return true;
}

void op_upgrade_eval(const struct op_upgrade_in *in, struct api_rack_upgrade_status *st,
                     struct op_upgrade_out *out)
{
	struct pass p = {.in = in, .st = st, .out = out};
	json_t *before = api_rack_upgrade_status_to_json(st), *after;
	enum api_upgrade_phase was = st->phase;

	memset(out, 0, sizeof(*out));
	out->step = -1;
	out->was = was;
	if (!api_upgrade_phase_final(was)) {
		st->observed_generation = in->u->meta.generation;
		if (plan_load(&p)) {
			if (in->u->abort) {
				abort_run(&p);
			} else if (was == API_PHASE_HALTED && !retry(&p)) {
				/* hold: evidence kept, trays stay where they are */
			} else {
				p.hold = in->u->paused;
				if (was == API_PHASE_PAUSED && !in->u->paused)
					phase_set(&p, resumed(st));
				if (st->phase == API_PHASE_PAUSED)
					(void)steps_run(&p);
				else
					phases(&p);
				if (in->u->paused && st->phase != API_PHASE_HALTED &&
				    !api_upgrade_phase_final(st->phase)) {
					phase_set(&p, API_PHASE_PAUSED);
					message(&p, "paused: no new step starts");
				}
			}
		}
	}
	if (st->phase != was)
		event(&p,
		      st->phase == API_PHASE_HALTED || st->phase == API_PHASE_ROLLING_BACK ||
		              st->phase == API_PHASE_ROLLED_BACK,
		      api_upgrade_phase_name(st->phase), "%s -> %s: %s",
		      api_upgrade_phase_name(was), api_upgrade_phase_name(st->phase), st->message);
	after = api_rack_upgrade_status_to_json(st);
	out->changed = !json_equal(before, after);
	json_decref(before);
	json_decref(after);
}
