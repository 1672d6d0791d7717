// SPDX-License-Identifier: Apache-2.0
// Selector upgrades: one RackUpgrade for the racks a label selector picks.
// Each rack moves through a child upgrade of its own (the whole engine of
// upgrade_eval.c, its notice, approvals and window included); this pass
// only picks the racks, hands out maxParallelRacks slots, passes pause and
// abort on, and sums the children up. Pure: upgrade_ctrl.c reads the
// caches, writes the status and performs the acts.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/operator_upgrade.h"
#include "nvl72/timeutil.h"

void op_fleet_child_name(const char *parent, const char *rack, char out[64])
{
	size_t pl = strlen(parent), rl = strlen(rack);
	if (pl + 1 + rl <= 63) {
		snprintf(out, 64, "%.*s-%.*s", (int)pl, parent, (int)rl, rack);
		return;
	}
	uint32_t h = 2166136261u;
	for (const char *s = parent; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	h = (h ^ '/') * 16777619u;
	for (const char *s = rack; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	/* 27 + '-' + rack + '-' + 8 hex digits = 63 at most. */
	size_t pp = pl < 27 ? pl : 27;
	size_t rp = 63 - 1 - 8 - 1 - pp;
	if (rp > rl)
		rp = rl;
	while (pp > 1 && (parent[pp - 1] == '-' || parent[pp - 1] == '.'))
		pp--;
	while (rp > 1 && rack[rp - 1] == '-')
		rp--;
	snprintf(out, 64, "%.*s-%.*s-%08x", (int)pp, parent, (int)rp, rack, h);
}

struct fpass {
	const struct op_fleet_in *in;
	struct api_rack_upgrade_status *st;
	struct op_fleet_out *out;
};

static void event(struct fpass *p, bool warning, const char *reason, const char *fmt, ...)
{
	struct op_fleet_out *o = p->out;
	if (o->nevents >= OP_UPGRADE_EVENTS_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	snprintf(o->events[o->nevents].reason, sizeof(o->events[0].reason), "%s", reason);
	o->events[o->nevents].warning = warning;
	vsnprintf(o->events[o->nevents].note, sizeof(o->events[0].note), fmt, ap);
	va_end(ap);
	o->nevents++;
}

static void act(struct fpass *p, enum op_fleet_act_kind kind, unsigned rack)
{
	struct op_fleet_out *o = p->out;
	if (o->nacts < API_UPGRADE_RACKS_MAX) {
		o->acts[o->nacts].kind = kind;
		o->acts[o->nacts].rack = rack;
		o->nacts++;
	}
}

static void wake(struct fpass *p, int64_t at)
{
	if (p->out->wake_ms == 0 || at < p->out->wake_ms)
		p->out->wake_ms = at;
}

static void phase_set(struct fpass *p, enum api_upgrade_phase ph)
{
	if (p->st->phase != ph) {
		p->st->phase = ph;
		p->st->phase_ms = p->in->now_ms;
	}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first pass: the racks the selector picks now, in name order. */
static bool pick(struct fpass *p)
{
	const struct op_fleet_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	if (in->nracks == 0) {
		phase_set(p, API_PHASE_HALTED);
		snprintf(st->message, sizeof(st->message),
		         "no Rack has every label of spec.rackSelector.matchLabels; label the "
		         "racks to upgrade and the upgrade picks them");
		return false;
	}
	if (in->nracks > API_UPGRADE_RACKS_MAX) {
		phase_set(p, API_PHASE_HALTED);
		snprintf(st->message, sizeof(st->message),
		         "spec.rackSelector picks %u racks; one upgrade moves at most %d: narrow "
		         "the selector",
		         in->nracks, API_UPGRADE_RACKS_MAX);
		return false;
	}
	const char **names = xcalloc(in->nracks, sizeof(*names));
	for (unsigned i = 0; i < in->nracks; i++)
		names[i] = in->racks[i];
	qsort(names, in->nracks, sizeof(*names), by_name);
	st->racks = xcalloc(in->nracks, sizeof(*st->racks));
	st->nracks = in->nracks;
	char list[400] = "";
	size_t used = 0;
	for (unsigned i = 0; i < in->nracks; i++) {
		struct api_upgrade_rack *r = &st->racks[i];
		snprintf(r->name, sizeof(r->name), "%s", names[i]);
		op_fleet_child_name(in->u->meta.name, r->name, r->upgrade);
		r->time_ms = in->now_ms;
		if (used < sizeof(list) - 1)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
			                         i ? ", " : "", r->name);
	}
	free(names);
	int max = in->u->max_parallel_racks > 0 ? in->u->max_parallel_racks : 1;
	event(p, false, "RacksPicked", "%u racks, at most %d at a time: %s", st->nracks, max, list);
	return true;
}

static const struct op_fleet_child *child_of(const struct op_fleet_in *in,
                                             const struct api_upgrade_rack *r)
{
	for (unsigned i = 0; i < in->nchildren; i++)
		if (strcmp(in->children[i].name, r->upgrade) == 0 &&
		    strcmp(in->children[i].rack, r->name) == 0)
			return &in->children[i];
	return NULL;
}

static void rack_phase(struct fpass *p, struct api_upgrade_rack *r, enum api_upgrade_phase ph)
{
	if (!r->has_phase || r->refused || r->phase != ph)
		r->time_ms = p->in->now_ms;
	r->has_phase = true;
	r->refused = false;
	r->phase = ph;
}

static bool rack_final(const struct api_upgrade_rack *r)
{
	return r->has_phase && !r->refused && api_upgrade_phase_final(r->phase);
}

static bool rack_halted(const struct api_upgrade_rack *r)
{
	return r->refused || (r->has_phase && r->phase == API_PHASE_HALTED);
}

/* Whether the rack holds one of the slots: it was given one (or runs
 * steps as if it had) and has neither ended nor halted. */
static bool rack_running(const struct api_upgrade_rack *r, const struct op_fleet_child *c)
{
	if (rack_final(r) || rack_halted(r) || !r->has_phase)
		return false;
	if (r->slot_ms != 0 || (c != NULL && c->granted))
		return true;
	return r->phase == API_PHASE_CANARY || r->phase == API_PHASE_VALIDATING ||
	       r->phase == API_PHASE_ROLLING_OUT || r->phase == API_PHASE_ROLLING_BACK;
}

/* Mirrors rack i's child and asks for what it lacks. */
static void rack_pass(struct fpass *p, unsigned i)
{
	const struct op_fleet_in *in = p->in;
	struct api_upgrade_rack *r = &p->st->racks[i];
	const struct op_fleet_child *c = child_of(in, r);

	if (c != NULL) {
		rack_phase(p, r, c->has_phase ? c->phase : API_PHASE_PROPOSED);
		snprintf(r->message, sizeof(r->message), "%s", c->message ? c->message : "");
		if (api_upgrade_phase_final(r->phase))
			return;
		if (in->u->abort && !c->abort)
			act(p, OP_FLEET_ABORT, i);
		else if (!in->u->abort && in->u->paused && !c->paused)
			act(p, OP_FLEET_PAUSE, i);
		else if (!in->u->abort && !in->u->paused && c->paused && c->paused_by_parent)
			act(p, OP_FLEET_RESUME, i);
		else if (r->slot_ms != 0 && !c->granted)
			act(p, OP_FLEET_GRANT, i); /* recorded, not stamped yet */
		return;
	}
	if (r->has_phase && !r->refused) {
		/* It was there and is gone: a person deleted it. It is not made
		 * again, which would start the rack over. */
		if (!api_upgrade_phase_final(r->phase)) {
			snprintf(r->message, sizeof(r->message),
			         "RackUpgrade %s was deleted in phase %s; it is not created again",
			         r->upgrade, api_upgrade_phase_name(r->phase));
			rack_phase(p, r, API_PHASE_ABORTED);
		}
		return;
	}
	if (in->u->abort) {
		snprintf(r->message, sizeof(r->message), "aborted before its upgrade was created");
		rack_phase(p, r, API_PHASE_ABORTED);
		return;
	}
	if (r->refused && in->now_ms < r->time_ms + OP_FLEET_RETRY_MS) {
		wake(p, r->time_ms + OP_FLEET_RETRY_MS);
		return;
	}
	act(p, OP_FLEET_CREATE, i);
}

static bool acted(const struct op_fleet_out *o, unsigned rack)
{
	for (unsigned k = 0; k < o->nacts; k++)
		if (o->acts[k].rack == rack)
			return true;
	return false;
}

/* Free slots go to children waiting in Scheduled with their window open,
 * in rack order. */
static void slots(struct fpass *p)
{
	const struct op_fleet_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	unsigned max = in->u->max_parallel_racks > 0 ? (unsigned)in->u->max_parallel_racks : 1;
	unsigned running = 0;
	bool halted = false;

	if (in->u->abort || in->u->paused)
		return;
	for (unsigned i = 0; i < st->nracks; i++) {
		running += rack_running(&st->racks[i], child_of(in, &st->racks[i]));
		halted |= rack_halted(&st->racks[i]);
	}
	if (halted && in->u->on_rack_halt == API_ON_RACK_HALT_STOP)
		return;
	for (unsigned i = 0; i < st->nracks && running < max; i++) {
		struct api_upgrade_rack *r = &st->racks[i];
		const struct op_fleet_child *c = child_of(in, r);
		if (r->slot_ms != 0 || c == NULL || !c->has_phase ||
		    c->phase != API_PHASE_SCHEDULED || c->granted || c->scheduled_start_ms == 0 ||
		    c->scheduled_start_ms > in->now_ms || acted(p->out, i))
			continue;
		r->slot_ms = in->now_ms;
		if (st->start_ms == 0)
			st->start_ms = in->now_ms;
		running++;
		act(p, OP_FLEET_GRANT, i);
		event(p, false, "RackStarted", "rack %s: RackUpgrade %s may start (%u of %u slots)",
		      r->name, r->upgrade, running, max);
	}
}

/* Appends ", name" (or "name") to the list of one kind in the message. */
static void list_add(char *buf, size_t cap, const char *name)
{
	size_t n = strlen(buf);
	if (n + 3 < cap)
		snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", name);
}

static void summary(struct fpass *p)
{
	const struct op_fleet_in *in = p->in;
	struct api_rack_upgrade_status *st = p->st;
	char run[256] = "", wait[256] = "", halt[256] = "", other[256] = "";
	unsigned done = 0, ended = 0, running = 0, waiting = 0, halted = 0;

	for (unsigned i = 0; i < st->nracks; i++) {
		const struct api_upgrade_rack *r = &st->racks[i];
		if (rack_final(r)) {
			ended++;
			if (r->phase == API_PHASE_COMPLETED) {
				done++;
			} else {
				char x[96];
				snprintf(x, sizeof(x), "%s (%s)", r->name,
				         api_upgrade_phase_name(r->phase));
				list_add(other, sizeof(other), x);
			}
		} else if (rack_halted(r)) {
			char x[96];
			halted++;
			snprintf(x, sizeof(x), "%s (%s)", r->name,
			         r->refused ? "Refused" : api_upgrade_phase_name(r->phase));
			list_add(halt, sizeof(halt), x);
		} else if (rack_running(r, child_of(in, r))) {
			running++;
			list_add(run, sizeof(run), r->name);
		} else {
			waiting++;
			list_add(wait, sizeof(wait), r->name);
		}
	}
	bool stop = halted > 0 && in->u->on_rack_halt == API_ON_RACK_HALT_STOP;
	if (ended == st->nracks) {
		phase_set(p, in->u->abort         ? API_PHASE_ABORTED
		             : done == st->nracks ? API_PHASE_COMPLETED
		                                  : API_PHASE_HALTED);
		if (api_upgrade_phase_final(st->phase) && st->completion_ms == 0)
			st->completion_ms = in->now_ms;
	} else if (in->u->abort) {
		phase_set(p, API_PHASE_ROLLING_OUT);
	} else if (in->u->paused) {
		phase_set(p, API_PHASE_PAUSED);
	} else if (halted > 0 && (stop || running + waiting == 0)) {
		phase_set(p, API_PHASE_HALTED);
	} else {
		phase_set(p, API_PHASE_ROLLING_OUT);
	}
	int n = snprintf(st->message, sizeof(st->message), "%s%u of %u racks Completed",
	                 in->u->abort && ended < st->nracks ? "aborting: " : "", done, st->nracks);
	const struct {
		const char *label;
		const char *list;
	} parts[] = {
	        {"running", run},
	        {"waiting", wait},
	        {"halted", halt},
	        {"ended otherwise", other},
	};
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
		if (parts[k].list[0] != '\0' && n >= 0 && (size_t)n < sizeof(st->message))
			n += snprintf(st->message + n, sizeof(st->message) - (size_t)n, "; %s: %s",
			              parts[k].label, parts[k].list);
	if (stop && !in->u->abort && ended < st->nracks && n >= 0 &&
	    (size_t)n < sizeof(st->message))
		snprintf(st->message + n, sizeof(st->message) - (size_t)n,
		         "; spec.onRackHalt is Stop: no other rack starts");
}

void op_fleet_eval(const struct op_fleet_in *in, struct api_rack_upgrade_status *st,
                   struct op_fleet_out *out)
{
	struct fpass p = {.in = in, .st = st, .out = out};
	json_t *before = api_rack_upgrade_status_to_json(st), *after;
	enum api_upgrade_phase was = st->phase;

	memset(out, 0, sizeof(*out));
	if (!api_upgrade_phase_final(was)) {
		st->observed_generation = in->u->meta.generation;
		if (st->nracks > 0 || pick(&p)) {
			for (unsigned i = 0; i < st->nracks; i++)
				rack_pass(&p, i);
			slots(&p);
			summary(&p);
		}
	}
	if (st->phase != was)
		event(&p, st->phase == API_PHASE_HALTED, api_upgrade_phase_name(st->phase),
		      "%s -> %s: %s", api_upgrade_phase_name(was),
		      api_upgrade_phase_name(st->phase), st->message);
	after = api_rack_upgrade_status_to_json(st);
	out->changed = !json_equal(before, after);
	json_decref(before);
	json_decref(after);
}

void op_fleet_refused(struct api_rack_upgrade_status *st, unsigned i, const char *why,
                      int64_t now_ms)
{
	if (i >= st->nracks)
		return;
	struct api_upgrade_rack *r = &st->racks[i];
	r->refused = true;
	r->has_phase = false;
	r->time_ms = now_ms;
	snprintf(r->message, sizeof(r->message), "not created: %s", why);
}
