// SPDX-License-Identifier: Apache-2.0
// What the plugin's views read out of the JSON the apiserver returns:
// conditions, tray sets, durations, approvals, pending layers and the
// current step of an upgrade. The tables, the detail pages and the
// explanation all stand on these, and these on none of them.
#include <string.h>

#include "cli_int.h"
#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/parse.h"

const char *cli_cond_status(const json_t *obj, const char *type)
{
	return jx_str_or(kube_condition_find(obj, type), "status", "Unknown");
}

const char *cli_cond_message(const json_t *obj, const char *type)
{
	return jx_str_or(kube_condition_find(obj, type), "message", "");
}

void cli_trays_str(const json_t *arr, char *out, size_t outsz)
{
	struct buf b;
	size_t n = json_array_size(arr);
	buf_init(&b, 256);
	for (size_t i = 0; i < n;) {
		json_int_t lo = json_integer_value(json_array_get(arr, i)), hi = lo;
		size_t j = i + 1;
		while (j < n && json_integer_value(json_array_get(arr, j)) == hi + 1)
			hi = json_integer_value(json_array_get(arr, j++));
		(void)buf_printf(&b, hi > lo ? "%s%lld-%lld" : "%s%lld", i ? "," : "",
		                 (long long)lo, (long long)hi);
		i = j;
	}
	(void)str_copy(out, outsz, b.len ? buf_str(&b) : "-");
	buf_clear(&b);
}

void cli_duration(int64_t ms, char *out, size_t outsz)
{
	int64_t s = ms / 1000, d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60;
	if (d > 0)
		snprintf(out, outsz, h ? "%lldd%lldh" : "%lldd", (long long)d, (long long)h);
	else if (h > 0)
		snprintf(out, outsz, m ? "%lldh%lldm" : "%lldh", (long long)h, (long long)m);
	else if (m > 0)
		snprintf(out, outsz, "%lldm", (long long)m);
	else
		snprintf(out, outsz, "%llds", (long long)s);
}

const json_t *cli_rack_resp(const json_t *rack, const char *layer)
{
	const json_t *r = jx_path(rack, "spec.responsibilities");
	for (size_t i = 0; i < json_array_size(r); i++)
		if (strcmp(jx_str_or(json_array_get(r, i), "layer", ""), layer) == 0)
			return json_array_get(r, i);
	return NULL;
}

bool cli_approval_has(const json_t *status, const char *layer, const char *decision,
                      const char **user)
{
	const json_t *a = json_object_get(status, "approvals");
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *x = json_array_get(a, i);
		if (strcmp(jx_str_or(x, "layer", ""), layer) == 0 &&
		    strcmp(jx_str_or(x, "decision", "Approved"), decision) == 0) {
			if (user != NULL)
				*user = jx_str_or(x, "user", NULL);
			return true;
		}
	}
	return false;
}

void cli_pending_str(const json_t *status, const json_t *rack, bool groups, struct buf *out)
{
	const json_t *req = json_object_get(status, "requiredApprovals");
	size_t n = 0;
	for (size_t i = 0; i < json_array_size(req); i++) {
		const char *layer = json_string_value(json_array_get(req, i));
		const json_t *resp = NULL;
		if (layer == NULL || cli_approval_has(status, layer, "Approved", NULL))
			continue;
		resp = cli_rack_resp(rack, layer);
		(void)buf_printf(out, "%s%s", n++ ? (groups ? " and " : ",") : "", layer);
		if (groups && resp != NULL)
			(void)buf_printf(out, " (owner %s, window owner %s)",
			                 jx_str_or(resp, "owner", "?"),
			                 jx_str_or(resp, "windowOwner", "?"));
		else if (resp != NULL)
			(void)buf_printf(out, "=%s", jx_str_or(resp, "owner", "?"));
	}
	if (n == 0)
		(void)buf_append_str(out, groups ? "no layer" : "-");
}

size_t cli_nsteps(const json_t *status)
{
	return json_array_size(json_object_get(status, "steps"));
}

const json_t *cli_current_step(const json_t *status)
{
	static const char *const prefer[] = {"Running", "Failed", "Pending"};
	/* Rolling back, the canary's failed gate stays Failed as evidence: the
	 * rollback's next step is the one that matters. */
	static const char *const back[] = {"Running", "Pending", "Failed"};
	const char *const *order =
	        strcmp(jx_str_or(status, "phase", ""), "RollingBack") == 0 ? back : prefer;
	const json_t *steps = json_object_get(status, "steps");
	for (size_t p = 0; p < 3; p++)
		for (size_t i = 0; i < json_array_size(steps); i++) {
			const json_t *s = json_array_get(steps, i);
			if (strcmp(jx_str_or(s, "phase", "Pending"), order[p]) == 0)
				return s;
		}
	return NULL;
}
