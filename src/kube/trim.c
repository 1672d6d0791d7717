// SPDX-License-Identifier: Apache-2.0
// What the informers' caches keep of an object. A GPU tray's Node carries
// about a hundred labels from node-feature-discovery and the GPU feature
// discovery, the image list, and managedFields from every writer; the
// operator reads a handful of fields of it. These transforms delete the
// rest before the object is stored, so the cache costs what is reconciled.
#include <string.h>

#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"

/* Deletes every member of obj (an object) whose key is not in keep. */
static void keep_only(json_t *obj, const char *const *keep)
{
	const char *k;
	json_t *v;
	void *tmp;

	if (!json_is_object(obj))
		return;
	json_object_foreach_safe(obj, tmp, k, v) {
		size_t i = 0;
		while (keep[i] != NULL && strcmp(keep[i], k) != 0)
			i++;
		if (keep[i] == NULL)
			json_object_del(obj, k);
	}
}

static bool has_prefix(const char *const *prefixes, const char *k)
{
	for (size_t i = 0; prefixes != NULL && prefixes[i] != NULL; i++)
		if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* Deletes the keys of map (labels or annotations) neither a prefix nor sel
 * admits; an empty map goes as well. */
static void keep_keys(json_t *meta, const char *field, const char *const *prefixes,
                      const struct kube_selector *sel)
{
	json_t *map = json_object_get(meta, field), *v;
	const char *k;
	void *tmp;

	if (!json_is_object(map))
		return;
	json_object_foreach_safe(map, tmp, k, v) {
		if (!has_prefix(prefixes, k) && !kube_selector_names(sel, k))
			json_object_del(map, k);
	}
	if (json_object_size(map) == 0)
		json_object_del(meta, field);
}

static const char *const META_KEEP[] = {
        "name",   "namespace",   "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
        "labels", "annotations", NULL};

void kube_transform_node(json_t *obj, const void *arg)
{
	static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};
	static const char *const spec[] = {"unschedulable", "taints", NULL};
	static const char *const status[] = {"addresses", "conditions", NULL};
	static const char *const cond[] = {
	        "type", "status", "reason", "message", "lastTransitionTime", NULL};
	const struct kube_node_keep *keep = arg;
	json_t *meta = json_object_get(obj, "metadata");
	json_t *conds, *c, *ready = NULL;
	size_t i;

	keep_only(obj, top);
	keep_only(meta, META_KEEP);
	keep_keys(meta, "labels", keep ? keep->label_prefixes : NULL, keep ? keep->selector : NULL);
	keep_keys(meta, "annotations", keep ? keep->annotation_prefixes : NULL, NULL);
	keep_only(json_object_get(obj, "spec"), spec);
	keep_only(json_object_get(obj, "status"), status);
	conds = jx_path(obj, "status.conditions");
	if (!json_is_array(conds))
		return;
	json_array_foreach(conds, i, c) {
		if (strcmp(jx_str_or(c, "type", ""), "Ready") == 0) {
			ready = json_incref(c);
			break;
		}
	}
	json_array_clear(conds);
	if (ready != NULL) {
		keep_only(ready, cond);
		json_array_append_new(conds, ready);
	}
}

void kube_transform_lease(json_t *obj, const void *arg)
{
	static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
	static const char *const meta[] = {"name", "namespace", "uid", "resourceVersion", NULL};
	static const char *const spec[] = {"holderIdentity", "renewTime", "leaseDurationSeconds",
	                                   NULL};

	(void)arg;
	keep_only(obj, top);
	keep_only(json_object_get(obj, "metadata"), meta);
	keep_only(json_object_get(obj, "spec"), spec);
}
