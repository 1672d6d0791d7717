/* SPDX-License-Identifier: Apache-2.0 */
/* Builders for the operator unit tests: a Rack of 18 trays, healthy agent
 * status, Ready Nodes and a matrix, all as plain JSON, the Rack and matrix
 * also as the api's parsers read them, plus a helper that evaluates the
 * rack with every tray filled in. */
#ifndef NVL72_TEST_OP_FIXTURE_H
#define NVL72_TEST_OP_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/operator_rack.h"
#include "nvl72/timeutil.h"

#define FX_NOW 1795000000000LL /* 2026-11-18 */
#define FX_CLUSTER "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3"

static inline json_t *fx_rack(int threshold)
{
	json_t *trays = json_array(), *switches = json_array();
	char node[64];
	for (int i = 1; i <= 18; i++) {
		snprintf(node, sizeof(node), "r07-t%02d", i);
		json_array_append_new(trays, json_pack("{s:i,s:s}", "index", i, "node", node));
	}
	for (int i = 1; i <= 9; i++) {
		snprintf(node, sizeof(node), "r07-s%d.oob", i);
		json_array_append_new(switches,
		                      json_pack("{s:i,s:s}", "index", i, "oobAddress", node));
	}
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:I,s:s},s:{s:s,s:o,s:o,s:{s:s,s:s},s:{s:i,s:i,s:"
	                 "b}}}",
	                 "apiVersion", "nvl72.io/v1alpha1", "kind", "Rack", "metadata", "name",
	                 "r07", "uid", "uid-r07", "generation", (json_int_t)3, "resourceVersion",
	                 "100", "spec", "platform", "gb300", "computeTrays", trays, "switchTrays",
	                 switches, "matrix", "name", "m1", "stack", "s-95", "policy",
	                 "degradedThreshold", threshold, "minHealthyTrays", 16,
	                 "cordonWhenDegraded", 1);
}

/* One stack of the matrix: the driver it names and what the schema asks. */
static inline json_t *fx_stack(const char *name, const char *driver)
{
	return json_pack("{s:s,s:{s:{s:s,s:s},s:{s:s},s:s}}", "name", name, "components", "driver",
	                 "branch", "R580", "version", driver, "kernel", "pageSize", "64k",
	                 "kubernetes", "1.34.2");
}

static inline json_t *fx_matrix(void)
{
	return json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[o,o]}}", "apiVersion", "nvl72.io/v1alpha1",
	                 "kind", "CompatibilityMatrix", "metadata", "name", "m1", "spec",
	                 "platform", "gb300", "stacks", fx_stack("s-95", "580.95.05"),
	                 fx_stack("s-173", "580.173.02"));
}

/* The api's parse of a fixture; a fixture that does not parse stops the
 * test with its errors. */
static inline void fx_parse_failed(const char *kind, const struct api_errors *e)
{
	fprintf(stderr, "fixture %s does not parse:\n", kind);
	for (unsigned i = 0; i < e->n; i++)
		fprintf(stderr, "  %s: %s\n", e->list[i].path, e->list[i].msg);
	abort();
}

static inline struct api_rack *fx_rack_spec(const json_t *rack)
{
	struct api_errors *e = calloc(1, sizeof(*e));
	struct api_rack *r = NULL;
	api_errors_init(e);
	if (api_rack_parse(rack, &r, e) != NV_OK)
		fx_parse_failed("Rack", e);
	free(e);
	return r;
}

static inline struct matrix *fx_matrix_spec(const json_t *matrix)
{
	struct api_errors *e = calloc(1, sizeof(*e));
	struct matrix *m = NULL;
	api_errors_init(e);
	if (api_matrix_parse(matrix, &m, e) != NV_OK)
		fx_parse_failed("CompatibilityMatrix", e);
	free(e);
	return m;
}

static inline void fx_time(int64_t ms, char out[TIME_RFC3339_LEN])
{
	time_format_rfc3339(ms, out);
}

/* A tray with healthy agent status; heartbeat hb_ms, Ready status ready. */
static inline json_t *fx_tray(int index, const char *driver, int clique, int64_t hb_ms,
                              const char *ready)
{
	char name[64], node[64], hb[TIME_RFC3339_LEN], created[TIME_RFC3339_LEN], cl[64];
	json_t *gpus = json_array();
	snprintf(name, sizeof(name), "r07-t%02d", index);
	snprintf(node, sizeof(node), "r07-t%02d", index);
	snprintf(cl, sizeof(cl), "%s.%d", FX_CLUSTER, clique);
	fx_time(hb_ms, hb);
	fx_time(FX_NOW - 3600000, created);
	for (int g = 0; g < 4; g++)
		json_array_append_new(gpus,
		                      json_pack("{s:i,s:s,s:{s:s,s:s,s:s,s:i,s:s}}", "index", g,
		                                "vbios", "97.00", "fabric", "state", "Completed",
		                                "status", "Success", "clusterUUID", FX_CLUSTER,
		                                "cliqueId", clique, "healthSummary", "Healthy"));
	return json_pack("{s:{s:s,s:s,s:s},s:{s:s,s:i,s:s},s:{s:s,s:{s:s},s:o,s:{s:s,s:s,s:s},"
	                 "s:{s:s},s:[{s:s,s:s}]}}",
	                 "metadata", "name", name, "resourceVersion", "7", "creationTimestamp",
	                 created, "spec", "rack", "r07", "index", index, "node", node, "status",
	                 "heartbeatTime", hb, "driver", "version", driver, "gpus", gpus, "fabric",
	                 "state", "Completed", "clusterUUID", FX_CLUSTER, "cliqueID", cl, "imex",
	                 "version", driver, "conditions", "type", "Ready", "status", ready);
}

static inline json_t *fx_node(int index, bool ready)
{
	char node[64];
	snprintf(node, sizeof(node), "r07-t%02d", index);
	return json_pack("{s:{s:s,s:s,s:{s:s}},s:{},s:{s:[{s:s,s:s}]}}", "metadata", "name", node,
	                 "resourceVersion", "55", "labels", "team", "ml", "spec", "status",
	                 "conditions", "type", "Ready", "status", ready ? "True" : "False");
}

/* Everything healthy: trays[i], nodes[i] owned by the caller; spec and m
 * are rack and matrix parsed. */
struct fx_rack_objs {
	json_t *rack, *matrix;
	struct api_rack *spec;
	struct matrix *m;
	json_t *trays[18], *nodes[18];
	struct op_tray_in in[18];
	char names[18][64];
};

static inline void fx_objs_init(struct fx_rack_objs *o, int threshold)
{
	memset(o, 0, sizeof(*o));
	o->rack = fx_rack(threshold);
	o->matrix = fx_matrix();
	o->spec = fx_rack_spec(o->rack);
	o->m = fx_matrix_spec(o->matrix);
	for (int i = 0; i < 18; i++) {
		snprintf(o->names[i], sizeof(o->names[i]), "r07-t%02d", i + 1);
		o->trays[i] = fx_tray(i + 1, "580.95.05", i < 9 ? 1 : 2, FX_NOW - 10000, "True");
		o->nodes[i] = fx_node(i + 1, true);
		o->in[i] = (struct op_tray_in){.index = i + 1,
		                               .node_name = o->names[i],
		                               .tray = o->trays[i],
		                               .node = o->nodes[i],
		                               .partition = i < 9 ? "r07-a" : "r07-b"};
	}
}

static inline void fx_objs_clear(struct fx_rack_objs *o)
{
	json_decref(o->rack);
	json_decref(o->matrix);
	api_rack_free(o->spec);
	matrix_free(o->m);
	for (int i = 0; i < 18; i++) {
		json_decref(o->trays[i]);
		json_decref(o->nodes[i]);
	}
}

/* Replaces slot i's tray or node (reference taken). */
static inline void fx_set_tray(struct fx_rack_objs *o, int i, json_t *t)
{
	json_decref(o->trays[i]);
	o->trays[i] = t;
	o->in[i].tray = t;
}
static inline void fx_set_node(struct fx_rack_objs *o, int i, json_t *n)
{
	json_decref(o->nodes[i]);
	o->nodes[i] = n;
	o->in[i].node = n;
}

#endif
