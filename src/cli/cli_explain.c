// SPDX-License-Identifier: Apache-2.0
// Why is this upgrade waiting: one sentence derived from a RackUpgrade's
// status (phase, notice end, approvals and their owners, schedule, windows
// and freezes, the current step's message, gate evidence, the halt reason)
// and its Rack. A pure function, so that every phase is unit-tested on
// plain JSON.
#include <string.h>

#include "cli_int.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

/* A message from status, without its trailing period, so that it can sit
 * inside the sentence. */
static void put_msg(struct buf *out, const char *msg)
{
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '.' || msg[n - 1] == ' ' || msg[n - 1] == '\n'))
		n--;
	(void)buf_append(out, msg, n);
}

/* " at T (in 2d3h)" or " at T (2h ago)" for an RFC 3339 time. */
static void put_when(struct buf *out, const char *ts, int64_t now_ms)
{
	int64_t t = 0;
	char d[32];
	(void)buf_printf(out, "%s", ts);
	if (time_parse_rfc3339(ts, &t) != NV_OK)
		return;
	cli_duration(t > now_ms ? t - now_ms : now_ms - t, d, sizeof(d));
	(void)buf_printf(out, t > now_ms ? " (in %s)" : " (%s ago)", d);
}

/* "step 4 of 12 (Drain, trays 3-4, wave 2)". */
static void put_step(struct buf *out, const json_t *status, const json_t *step)
{
	const json_t *steps = json_object_get(status, "steps");
	size_t pos = 0;
	char trays[64];
	for (size_t i = 0; i < json_array_size(steps); i++)
		if (json_array_get(steps, i) == step)
			pos = i + 1;
	cli_trays_str(json_object_get(step, "trays"), trays, sizeof(trays));
	(void)buf_printf(out, "step %zu of %zu (%s, trays %s", pos, json_array_size(steps),
	                 jx_str_or(step, "action", "?"), trays);
	if (json_integer_value(json_object_get(step, "wave")) > 0)
		(void)buf_printf(out, ", wave %lld",
		                 (long long)json_integer_value(json_object_get(step, "wave")));
	(void)buf_append_str(out, ")");
}

/* Gate evidence as "fabric Completed, IMEX UP, bus bandwidth 812 GB/s
 * against a floor of 800 GB/s (5% tolerance)". */
static void put_evidence(struct buf *out, const json_t *ev)
{
	(void)buf_printf(out,
	                 "fabric %s, IMEX domain %s, bus bandwidth %lld GB/s against a "
	                 "floor of %lld GB/s (%lld%% tolerance)",
	                 jx_str_or(ev, "fabricState", "unknown"),
	                 jx_str_or(ev, "imexDomainState", "unknown"),
	                 (long long)json_integer_value(json_object_get(ev, "busBandwidthGBps")),
	                 (long long)json_integer_value(json_object_get(ev, "floorGBps")),
	                 (long long)json_integer_value(json_object_get(ev, "tolerancePercent")));
}

static bool contains(const char *s, const char *needle)
{
	return strcasestr(s, needle) != NULL;
}

/* What the current step waits on, from its phase and message. */
static void put_step_wait(struct buf *out, const json_t *status, const json_t *step)
{
	const char *msg = jx_str_or(step, "message", "");
	const char *phase = jx_str_or(step, "phase", "Pending");
	const json_t *ev = json_object_get(step, "evidence");
	put_step(out, status, step);
	if (strcmp(phase, "Pending") == 0) {
		(void)buf_append_str(out, " has not started yet");
	} else if (contains(msg, "PodDisruptionBudget") || contains(msg, "disruption budget")) {
		(void)buf_append_str(out, " is blocked by a PodDisruptionBudget: ");
		put_msg(out, msg);
	} else if (contains(msg, "checkpoint")) {
		(void)buf_append_str(out, " is waiting for pods to checkpoint: ");
		put_msg(out, msg);
	} else if (strcmp(jx_str_or(step, "action", ""), "Drain") == 0) {
		(void)buf_append_str(out, " is draining");
		if (msg[0] != '\0') {
			(void)buf_append_str(out, ": ");
			put_msg(out, msg);
		}
	} else {
		(void)buf_printf(out, " is %s", phase);
		if (msg[0] != '\0') {
			(void)buf_append_str(out, ": ");
			put_msg(out, msg);
		}
	}
	if (ev != NULL && strcmp(jx_str_or(step, "action", ""), "Validate") == 0) {
		(void)buf_append_str(out, "; evidence so far: ");
		put_evidence(out, ev);
	}
}

/* The approvals still missing, with who must give them. */
static void explain_approval(struct buf *out, const char *name, const json_t *st,
                             const json_t *rack)
{
	const json_t *req = json_object_get(st, "requiredApprovals");
	const char *user = NULL;
	for (size_t i = 0; i < json_array_size(req); i++) {
		const char *layer = json_string_value(json_array_get(req, i));
		if (layer != NULL && cli_approval_has(st, layer, "Rejected", &user)) {
			(void)buf_printf(out,
			                 "%s is blocked: the %s layer's approval was "
			                 "rejected by %s",
			                 name, layer, user ? user : "its owner");
			return;
		}
	}
	(void)buf_printf(out, "%s is waiting for approval of ", name);
	cli_pending_str(st, rack, true, out);
	(void)buf_printf(out,
	                 "; an owner approves with `kubectl nvl72 approve %s --layer "
	                 "LAYER`",
	                 name);
}

/* A freeze of the rack's spec that holds now, or NULL. */
static const json_t *freeze_now(const json_t *rack, int64_t now_ms)
{
	const json_t *fr = jx_path(rack, "spec.maintenance.freezes");
	for (size_t i = 0; i < json_array_size(fr); i++) {
		const json_t *f = json_array_get(fr, i);
		int64_t a = 0, b = 0;
		if (time_parse_rfc3339(jx_str_or(f, "start", ""), &a) == NV_OK &&
		    time_parse_rfc3339(jx_str_or(f, "end", ""), &b) == NV_OK && a <= now_ms &&
		    now_ms < b)
			return f;
	}
	return NULL;
}

static void explain_scheduled(struct buf *out, const char *name, const json_t *u,
                              const json_t *rack, int64_t now_ms)
{
	const json_t *st = json_object_get(u, "status");
	const json_t *f = freeze_now(rack, now_ms);
	const char *start = jx_str_or(st, "scheduledStart", "");
	const char *next = jx_str_or(rack, "status.maintenance.nextWindowStart", "");
	const char *earliest = jx_str_or(u, "spec.earliestStart", "");
	int64_t t = 0;
	if (f != NULL) {
		(void)buf_printf(out, "%s is scheduled but rack %s is in the %s freeze until ",
		                 name, jx_str_or(rack, "metadata.name", "?"),
		                 jx_str_or(f, "name", "?"));
		put_when(out, jx_str_or(f, "end", "?"), now_ms);
		if (jx_str_or(f, "reason", "")[0] != '\0') {
			(void)buf_append_str(out, ": ");
			put_msg(out, jx_str_or(f, "reason", ""));
		}
	} else if (earliest[0] != '\0' && time_parse_rfc3339(earliest, &t) == NV_OK && t > now_ms) {
		(void)buf_printf(out, "%s may not start before its earliest start ", name);
		put_when(out, earliest, now_ms);
	} else if (start[0] != '\0') {
		(void)buf_printf(out, "%s is scheduled to start at ", name);
		put_when(out, start, now_ms);
		if (jx_str_or(st, "window", "")[0] != '\0')
			(void)buf_printf(out, " in the %s window", jx_str_or(st, "window", ""));
	} else if (next[0] != '\0') {
		(void)buf_printf(out,
		                 "%s is waiting for the next maintenance window, which "
		                 "opens at ",
		                 name);
		put_when(out, next, now_ms);
	} else {
		(void)buf_printf(out,
		                 "%s is waiting for a maintenance window of rack %s "
		                 "that allows every layer of its plan",
		                 name, jx_str_or(u, "spec.rack", "?"));
	}
}

/* Canary, Validating and RollingOut: the step that holds the upgrade. */
static void explain_running(struct buf *out, const char *name, const char *phase, const json_t *st)
{
	const json_t *step = cli_current_step(st);
	const char *part = jx_str_or(st, "canary.partition", "");
	if (strcmp(phase, "Canary") == 0)
		(void)buf_printf(out, "%s is running its canary on %s%s", name,
		                 part[0] ? "partition " : "the canary trays", part);
	else if (strcmp(phase, "Validating") == 0)
		(void)buf_printf(out, "%s is validating the canary against the matrix's gate",
		                 name);
	else if (strcmp(phase, "RollingBack") == 0)
		(void)buf_printf(out,
		                 "%s is moving the canary back to %s: its gate failed and the "
		                 "Rack's onGateFailure is RollBack",
		                 name, jx_str_or(st, "fromStack", "the source stack"));
	else
		(void)buf_printf(out, "%s is rolling out in waves", name);
	if (step == NULL) {
		(void)buf_append_str(out, "; no step is running or pending yet");
		return;
	}
	(void)buf_append_str(out, ": ");
	put_step_wait(out, st, step);
}

/* The last step that failed, for a Halted upgrade. */
static const json_t *failed_step(const json_t *st)
{
	const json_t *steps = json_object_get(st, "steps");
	const json_t *found = NULL;
	for (size_t i = 0; i < json_array_size(steps); i++)
		if (strcmp(jx_str_or(json_array_get(steps, i), "phase", ""), "Failed") == 0)
			found = json_array_get(steps, i);
	return found;
}

static void explain_halted(struct buf *out, const char *name, const json_t *st)
{
	const json_t *step = failed_step(st);
	const char *msg = jx_str_or(st, "message", "");
	(void)buf_printf(out, "%s is halted", name);
	if (msg[0] != '\0') {
		(void)buf_append_str(out, ": ");
		put_msg(out, msg);
	}
	if (step != NULL) {
		const json_t *ev = json_object_get(step, "evidence");
		(void)buf_append_str(out, msg[0] ? "; " : ": ");
		put_step(out, st, step);
		(void)buf_append_str(out, " failed");
		if (ev != NULL) {
			(void)buf_append_str(out, " with ");
			put_evidence(out, ev);
		} else if (jx_str_or(step, "message", "")[0] != '\0') {
			(void)buf_append_str(out, ": ");
			put_msg(out, jx_str_or(step, "message", ""));
		}
	}
	(void)buf_printf(out,
	                 "; it holds with its evidence kept until the cause is fixed or "
	                 "`kubectl nvl72 abort %s`",
	                 name);
}

static void explain_notice(struct buf *out, const char *name, const json_t *st, const json_t *rack,
                           int64_t now_ms)
{
	const char *end = jx_str_or(st, "noticeEndTime", "");
	(void)buf_printf(out, "%s is serving its notice period", name);
	if (end[0] != '\0') {
		(void)buf_append_str(out, " until ");
		put_when(out, end, now_ms);
	}
	if (json_array_size(json_object_get(st, "requiredApprovals")) > 0) {
		(void)buf_append_str(out, ", and then needs approval of ");
		cli_pending_str(st, rack, true, out);
	}
}

/* The sentence for one phase; false for a phase this plugin does not know. */
static bool explain_phase(struct buf *out, const char *name, const char *phase, const json_t *u,
                          const json_t *rack, int64_t now_ms)
{
	const json_t *st = json_object_get(u, "status");
	const char *msg = jx_str_or(st, "message", "");
	if (strcmp(phase, "Proposed") == 0) {
		(void)buf_printf(out, "%s is Proposed: the operator has not planned it yet", name);
		if (msg[0] != '\0') {
			(void)buf_append_str(out, " (");
			put_msg(out, msg);
			(void)buf_append_str(out, ")");
		}
	} else if (strcmp(phase, "Notice") == 0) {
		explain_notice(out, name, st, rack, now_ms);
	} else if (strcmp(phase, "AwaitingApproval") == 0) {
		explain_approval(out, name, st, rack);
	} else if (strcmp(phase, "Scheduled") == 0) {
		explain_scheduled(out, name, u, rack, now_ms);
	} else if (strcmp(phase, "Canary") == 0 || strcmp(phase, "Validating") == 0 ||
	           strcmp(phase, "RollingOut") == 0 || strcmp(phase, "RollingBack") == 0) {
		explain_running(out, name, phase, st);
	} else if (strcmp(phase, "Halted") == 0) {
		explain_halted(out, name, st);
	} else if (strcmp(phase, "Paused") == 0) {
		(void)buf_printf(out,
		                 "%s is paused by spec.paused and no new step starts until "
		                 "`kubectl nvl72 resume %s`",
		                 name, name);
	} else if (strcmp(phase, "Completed") == 0) {
		(void)buf_printf(out, "%s is not waiting: it completed", name);
		if (jx_str_or(st, "completionTime", "")[0] != '\0') {
			(void)buf_append_str(out, " at ");
			put_when(out, jx_str_or(st, "completionTime", ""), now_ms);
		}
	} else if (strcmp(phase, "Aborted") == 0 || strcmp(phase, "RolledBack") == 0) {
		(void)buf_printf(
		        out, "%s is not waiting: %s", name,
		        strcmp(phase, "Aborted") == 0
		                ? "it was aborted"
		                : "the canary's gate failed and its trays were rolled back "
		                  "to the source stack");
		if (msg[0] != '\0') {
			(void)buf_append_str(out, " (");
			put_msg(out, msg);
			(void)buf_append_str(out, ")");
		}
	} else {
		return false;
	}
	return true;
}

enum nv_err cli_explain(const json_t *u, const json_t *rack, int64_t now_ms, struct buf *out)
{
	const char *name = jx_str_or(u, "metadata.name", "");
	const char *phase = jx_str_or(u, "status.phase", "");
	bool paused = json_is_true(jx_path(u, "spec.paused"));
	bool abort = json_is_true(jx_path(u, "spec.abort"));
	if (!json_is_object(u) || name[0] == '\0')
		return NV_E_INVAL;
	if (phase[0] == '\0') {
		(void)buf_printf(out,
		                 "%s has no status yet: no nvl72-operator has picked it up "
		                 "(is the operator running and leading?)",
		                 name);
	} else if (abort && !api_upgrade_phase_name_final(phase)) {
		(void)buf_printf(out,
		                 "%s is being aborted (spec.abort is set) and the operator "
		                 "is bringing each wave to a defined state from phase %s",
		                 name, phase);
	} else if (paused && strcmp(phase, "Paused") != 0 && !api_upgrade_phase_name_final(phase)) {
		(void)buf_printf(out,
		                 "%s is pausing (spec.paused is set) and the operator has "
		                 "not yet recorded it, still in phase %s",
		                 name, phase);
	} else if (!explain_phase(out, name, phase, u, rack, now_ms)) {
		(void)buf_printf(out,
		                 "%s is in phase %s, which this version of kubectl-nvl72 "
		                 "does not know",
		                 name, phase);
		if (jx_str_or(u, "status.message", "")[0] != '\0') {
			(void)buf_append_str(out, ": ");
			put_msg(out, jx_str_or(u, "status.message", ""));
		}
	}
	return buf_append_str(out, ".\n");
}
