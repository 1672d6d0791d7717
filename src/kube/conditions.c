// SPDX-License-Identifier: Apache-2.0
// metav1.Condition handling with the apimachinery semantics: the list is a
// map keyed by type, lastTransitionTime moves only when status flips, and
// callers learn whether anything changed so no-op status writes are skipped.
#include <string.h>

#include "nvl72/kube_ctrl.h"

#include "kube_int.h"

json_t *kube_condition_find(const json_t *obj, const char *type)
{
	json_t *conds = jx_path(obj, "status.conditions"), *c;
	size_t i;

	json_array_foreach(conds, i, c) {
		if (strcmp(jx_str_or(c, "type", ""), type) == 0)
			return c;
	}
	return NULL;
}

bool kube_condition_is_true(const json_t *obj, const char *type)
{
	return strcmp(jx_str_or(kube_condition_find(obj, type), "status", ""), "True") == 0;
}

/* Sets key to a string value; true when it differed. */
static bool set_if_changed(json_t *c, const char *key, const char *val)
{
	if (strcmp(jx_str_or(c, key, "\x01"), val) == 0)
		return false;
	json_object_set_new(c, key, json_string(val));
	return true;
}

bool kube_condition_set(json_t *obj, const char *type, const char *status, const char *reason,
                        const char *message, int64_t observed_generation, int64_t now_ms)
{
	char now[TIME_RFC3339_LEN];
	json_t *conds = jx_path(obj, "status.conditions"), *c;
	bool changed = false;

	time_format_rfc3339(now_ms, now);
	if (!json_is_array(conds)) {
		conds = json_array();
		jx_set_take(obj, "status.conditions", conds);
	}
	c = kube_condition_find(obj, type);
	if (c == NULL) {
		c = json_pack("{s:s,s:s}", "type", type, "lastTransitionTime", now);
		json_array_append_new(conds, c);
		changed = true;
	}
	if (set_if_changed(c, "status", status)) {
		json_object_set_new(c, "lastTransitionTime", json_string(now));
		changed = true;
	}
	changed |= set_if_changed(c, "reason", reason ? reason : "");
	changed |= set_if_changed(c, "message", message ? message : "");
	if (json_integer_value(json_object_get(c, "observedGeneration")) != observed_generation ||
	    json_object_get(c, "observedGeneration") == NULL) {
		json_object_set_new(c, "observedGeneration", json_integer(observed_generation));
		changed = true;
	}
	return changed;
}

bool kube_condition_remove(json_t *obj, const char *type)
{
	json_t *conds = jx_path(obj, "status.conditions"), *c;
	size_t i;

	json_array_foreach(conds, i, c) {
		if (strcmp(jx_str_or(c, "type", ""), type) == 0) {
			json_array_remove(conds, i);
			return true;
		}
	}
	return false;
}
