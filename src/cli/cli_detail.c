// SPDX-License-Identifier: Apache-2.0
// `kubectl nvl72 status rack|upgrade NAME`: one object in detail, as
// "Field: value" lines followed by its trays or its steps, and for an
// upgrade the approvals by layer and owner, gate evidence and the sentence
// of cli_explain. Pure functions of the objects.
#include <string.h>

#include "cli_int.h"
#include "nvl72/json.h"

static void field(struct buf *out, const char *key, const char *value)
{
	(void)buf_printf(out, "%-18s %s\n", key, value && value[0] ? value : "-");
}

static void rack_trays(struct buf *out, const json_t *rack)
{
	const json_t *trays = jx_path(rack, "status.trays");
	if (json_array_size(trays) == 0) {
		(void)buf_append_str(out, "Trays:             no status yet\n");
		return;
	}
	(void)buf_printf(out, "Trays:\n  %-5s %-24s %-6s %-24s %-10s %s\n", "INDEX", "NODE",
	                 "READY", "STACK", "DRIVER", "MAINTENANCE");
	for (size_t i = 0; i < json_array_size(trays); i++) {
		const json_t *t = json_array_get(trays, i);
		(void)buf_printf(out, "  %-5lld %-24s %-6s %-24s %-10s %s\n",
		                 (long long)json_integer_value(json_object_get(t, "index")),
		                 jx_str_or(t, "node", "-"),
		                 json_is_true(json_object_get(t, "ready")) ? "yes" : "no",
		                 jx_str_or(t, "stack", "-"), jx_str_or(t, "driverVersion", "-"),
		                 jx_str_or(t, "maintenance", "None"));
	}
}

enum nv_err cli_rack_detail(const json_t *rack, struct buf *out)
{
	char line[512];
	field(out, "Rack:", jx_str_or(rack, "metadata.name", ""));
	field(out, "Platform:", jx_str_or(rack, "spec.platform", ""));
	snprintf(line, sizeof(line), "%s (matrix %s)", jx_str_or(rack, "spec.matrix.stack", "-"),
	         jx_str_or(rack, "spec.matrix.name", "-"));
	field(out, "Desired stack:", line);
	field(out, "Observed stack:", jx_str_or(rack, "status.stack", ""));
	snprintf(line, sizeof(line), "%s %s", cli_cond_status(rack, "Ready"),
	         cli_cond_message(rack, "Ready"));
	field(out, "Ready:", line);
	snprintf(line, sizeof(line), "%s %s", cli_cond_status(rack, "Degraded"),
	         cli_cond_message(rack, "Degraded"));
	field(out, "Degraded:", line);
	field(out, "Fabric:", jx_str_or(rack, "status.fabric.state", ""));
	snprintf(line, sizeof(line), "%lld/%lld trays ready, %lld/%lld GPUs healthy",
	         (long long)json_integer_value(jx_path(rack, "status.capacity.readyTrays")),
	         (long long)json_integer_value(jx_path(rack, "status.capacity.trays")),
	         (long long)json_integer_value(jx_path(rack, "status.capacity.healthyGPUs")),
	         (long long)json_integer_value(jx_path(rack, "status.capacity.gpus")));
	field(out, "Capacity:", line);
	snprintf(line, sizeof(line), "%s %s", jx_str_or(rack, "status.upgrade.name", "-"),
	         jx_str_or(rack, "status.upgrade.phase", ""));
	field(out, "Upgrade:", line);
	snprintf(line, sizeof(line), "in window: %s, in freeze: %s, next window: %s",
	         json_is_true(jx_path(rack, "status.maintenance.inWindow")) ? "yes" : "no",
	         json_is_true(jx_path(rack, "status.maintenance.inFreeze")) ? "yes" : "no",
	         jx_str_or(rack, "status.maintenance.nextWindowStart", "-"));
	field(out, "Maintenance:", line);
	rack_trays(out, rack);
	return out->len < out->max ? NV_OK : NV_E_TOO_LARGE;
}

/* Required layers, each with its state and owner. */
static void upgrade_approvals(struct buf *out, const json_t *st, const json_t *rack)
{
	const json_t *req = json_object_get(st, "requiredApprovals");
	if (json_array_size(req) == 0) {
		field(out, "Approvals:", "none required");
		return;
	}
	(void)buf_append_str(out, "Approvals:\n");
	for (size_t i = 0; i < json_array_size(req); i++) {
		const char *layer = json_string_value(json_array_get(req, i));
		const json_t *resp = layer ? cli_rack_resp(rack, layer) : NULL;
		const char *user = NULL;
		const char *state = "pending";
		if (layer == NULL)
			continue;
		if (cli_approval_has(st, layer, "Rejected", &user))
			state = "rejected";
		else if (cli_approval_has(st, layer, "Approved", &user))
			state = "approved";
		(void)buf_printf(out, "  %-11s %-9s owner %s, window owner %s%s%s\n", layer, state,
		                 jx_str_or(resp, "owner", "?"), jx_str_or(resp, "windowOwner", "?"),
		                 user ? ", by " : "", user ? user : "");
	}
}

static void upgrade_steps(struct buf *out, const json_t *st)
{
	const json_t *steps = json_object_get(st, "steps");
	if (json_array_size(steps) == 0)
		return;
	(void)buf_printf(out, "Steps:\n  %-4s %-4s %-10s %-8s %-9s %s\n", "#", "WAVE", "ACTION",
	                 "TRAYS", "PHASE", "MESSAGE");
	for (size_t i = 0; i < json_array_size(steps); i++) {
		const json_t *s = json_array_get(steps, i);
		const json_t *ev = json_object_get(s, "evidence");
		char trays[64];
		cli_trays_str(json_object_get(s, "trays"), trays, sizeof(trays));
		(void)buf_printf(out, "  %-4zu %-4lld %-10s %-8s %-9s %s\n", i + 1,
		                 (long long)json_integer_value(json_object_get(s, "wave")),
		                 jx_str_or(s, "action", "?"), trays,
		                 jx_str_or(s, "phase", "Pending"), jx_str_or(s, "message", ""));
		if (ev != NULL)
			(void)buf_printf(
			        out,
			        "       gate: fabric %s, IMEX domain %s, bus bandwidth "
			        "%lld GB/s, floor %lld GB/s (%lld%% tolerance), %s\n",
			        jx_str_or(ev, "fabricState", "?"),
			        jx_str_or(ev, "imexDomainState", "?"),
			        (long long)json_integer_value(
			                json_object_get(ev, "busBandwidthGBps")),
			        (long long)json_integer_value(json_object_get(ev, "floorGBps")),
			        (long long)json_integer_value(
			                json_object_get(ev, "tolerancePercent")),
			        json_is_true(json_object_get(ev, "passed")) ? "passed" : "failed");
	}
}

enum nv_err cli_upgrade_detail(const json_t *u, const json_t *rack, int64_t now_ms, struct buf *out)
{
	const json_t *st = json_object_get(u, "status");
	char line[512];
	field(out, "Upgrade:", jx_str_or(u, "metadata.name", ""));
	field(out, "Rack:", jx_str_or(u, "spec.rack", "(selector)"));
	snprintf(line, sizeof(line), "%s -> %s (matrix %s)", jx_str_or(st, "fromStack", "?"),
	         jx_str_or(u, "spec.target.stack", "?"), jx_str_or(u, "spec.target.matrix", "?"));
	field(out, "Stacks:", line);
	field(out, "Class:", jx_str_or(u, "spec.class", "routine"));
	snprintf(line, sizeof(line), "%s%s%s", jx_str_or(st, "phase", "-"),
	         json_is_true(jx_path(u, "spec.paused")) ? " (spec.paused)" : "",
	         json_is_true(jx_path(u, "spec.abort")) ? " (spec.abort)" : "");
	field(out, "Phase:", line);
	field(out, "Since:", jx_str_or(st, "phaseTime", ""));
	field(out, "Message:", jx_str_or(st, "message", ""));
	field(out, "Notice ends:", jx_str_or(st, "noticeEndTime", ""));
	upgrade_approvals(out, st, rack);
	snprintf(line, sizeof(line), "%s %s", jx_str_or(st, "scheduledStart", "-"),
	         jx_str_or(st, "window", ""));
	field(out, "Scheduled:", line);
	cli_trays_str(jx_path(st, "canary.trays"), line, sizeof(line));
	field(out, "Canary:",
	      jx_str_or(st, "canary.partition", "")[0] ? jx_str_or(st, "canary.partition", "")
	                                               : line);
	snprintf(line, sizeof(line), "%zu", json_array_size(json_object_get(st, "waves")));
	field(out, "Waves:", line);
	upgrade_steps(out, st);
	(void)buf_append_str(out, "Why: ");
	return cli_explain(u, rack, now_ms, out);
}
