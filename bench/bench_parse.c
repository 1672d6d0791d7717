// SPDX-License-Identifier: Apache-2.0
// Benchmark: parse a 64-rack inventory (racks, their 1152 compute trays and
// two partitions each) and a 50-stack compatibility matrix, then plan every
// rack's move to the newest stack. The objects are generated here; time per
// phase and peak RSS are printed, never asserted.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/timeutil.h"

enum { RACKS = 64, STACKS = 50, ROUNDS = 5 };

static json_t *stack_gen(int k)
{
	char name[32];
	char drv[32];
	char nvos[32];
	snprintf(name, sizeof(name), "gb300-s%02d", k);
	snprintf(drv, sizeof(drv), "580.%d.01", 100 + k);
	snprintf(nvos, sizeof(nvos), "25.%02d.%d", 2 + k / 5, 1000 + k / 5);
	return json_pack("{s:s, s:{s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:s, s:{s:s, s:s, s:s},"
	                 " s:{s:s, s:s}, s:s}, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s],"
	                 " s:{s:{s:i, s:i}}}",
	                 "name", name, "components", "nvos", nvos, "switchTrayFirmware", "1.4.0",
	                 "gpuFirmware", "97.00.D6.00.12", "driver", "branch", "R580", "version",
	                 drv, "flavour", "open", "imex", drv, "kernel", "arch", "arm64", "pageSize",
	                 "64k", "version", "6.8", "os", "name", "Ubuntu", "version", "24.04",
	                 "kubernetes", "1.34.2", "workloads", "cuda", "min", "12.8", "max", "13.0",
	                 "nccl", "min", "2.25.2", "max", "2.28.9", "fixedCVEs", "CVE-2026-24187",
	                 "gate", "ncclAllReduce", "floorGBps", 500, "tolerancePercent", 10);
}

// k -> k+1 moves the driver, and NVOS with it where that changes too;
// every backward edge is listed as blocked.
static json_t *matrix_gen(void)
{
	json_t *stacks = json_array();
	json_t *trans = json_array();
	for (int k = 0; k < STACKS; k++)
		json_array_append_new(stacks, stack_gen(k));
	for (int k = 0; k + 1 < STACKS; k++) {
		char a[32];
		char b[32];
		snprintf(a, sizeof(a), "gb300-s%02d", k);
		snprintf(b, sizeof(b), "gb300-s%02d", k + 1);
		json_t *comps = (k + 1) % 5 == 0 ? json_pack("[ss]", "nvos", "driver")
		                                 : json_pack("[s]", "driver");
		json_array_append_new(trans,
		                      json_pack("{s:s, s:s, s:s, s:[{s:o, s:b}]}", "from", a, "to",
		                                b, "verdict", k % 7 == 6 ? "manual" : "safe",
		                                "steps", "components", comps, "requiresDrain", 1));
		json_array_append_new(trans,
		                      json_pack("{s:s, s:s, s:s, s:s}", "from", b, "to", a,
		                                "verdict", "blocked", "notes", "no downgrade"));
	}
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:o, s:o}}", "apiVersion", API_VERSION,
	                 "kind", "CompatibilityMatrix", "metadata", "name", "gb300-bench", "spec",
	                 "platform", "gb300", "stacks", stacks, "transitions", trans);
}

static json_t *rack_gen(int r)
{
	json_t *ct = json_array();
	json_t *st = json_array();
	char name[32];
	char stack[32];
	snprintf(name, sizeof(name), "gb300-r%02d", r);
	snprintf(stack, sizeof(stack), "gb300-s%02d", r % (STACKS - 10));
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		char node[48];
		snprintf(node, sizeof(node), "%s-t%02d", name, i);
		json_array_append_new(ct, json_pack("{s:i, s:s}", "index", i, "node", node));
	}
	for (int i = 1; i <= API_SWITCH_TRAYS; i++) {
		char oob[32];
		snprintf(oob, sizeof(oob), "10.40.%d.%d", r, 100 + i);
		json_array_append_new(st, json_pack("{s:i, s:s}", "index", i, "oobAddress", oob));
	}
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:o, s:o, s:{s:s, s:s}}}", "apiVersion",
	                 API_VERSION, "kind", "Rack", "metadata", "name", name, "spec", "platform",
	                 "gb300", "computeTrays", ct, "switchTrays", st, "matrix", "name",
	                 "gb300-bench", "stack", stack);
}

static json_t *tray_gen(int r, int i)
{
	char rack[32];
	char name[48];
	snprintf(rack, sizeof(rack), "gb300-r%02d", r);
	snprintf(name, sizeof(name), "%s-t%02d", rack, i);
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i, s:s, s:{s:s},"
	                 " s:{s:s, s:[ss], s:{s:i}}}}",
	                 "apiVersion", API_VERSION, "kind", "ComputeTray", "metadata", "name", name,
	                 "spec", "rack", rack, "index", i, "node", name, "driver", "version",
	                 "580.120.01", "imex", "domain", rack, "peers", "10.0.0.1", "10.0.0.2",
	                 "channels", "count", 2048);
}

static json_t *partition_gen(int r, int half)
{
	char rack[32];
	char name[48];
	snprintf(rack, sizeof(rack), "gb300-r%02d", r);
	snprintf(name, sizeof(name), "%s-%c", rack, half ? 'b' : 'a');
	json_t *trays = json_array();
	for (int i = 1 + 9 * half; i <= 9 + 9 * half; i++)
		json_array_append_new(trays, json_integer(i));
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:o}}", "apiVersion", API_VERSION, "kind",
	                 "RackPartition", "metadata", "name", name, "spec", "rack", rack, "trays",
	                 trays);
}

struct texts {
	char *matrix;
	char *racks[RACKS];
	char *trays[RACKS * API_COMPUTE_TRAYS];
	char *parts[RACKS * 2];
};

static char *dump_take(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		abort();
	return s;
}

static void texts_gen(struct texts *t)
{
	t->matrix = dump_take(matrix_gen());
	for (int r = 0; r < RACKS; r++) {
		t->racks[r] = dump_take(rack_gen(r));
		for (int i = 0; i < API_COMPUTE_TRAYS; i++)
			t->trays[r * API_COMPUTE_TRAYS + i] = dump_take(tray_gen(r, i + 1));
		t->parts[2 * r] = dump_take(partition_gen(r, 0));
		t->parts[2 * r + 1] = dump_take(partition_gen(r, 1));
	}
}

static json_t *load(const char *s)
{
	json_error_t jerr;
	json_t *j = json_loads(s, 0, &jerr);
	if (j == NULL) {
		fprintf(stderr, "bench: generated JSON does not load: %s\n", jerr.text);
		exit(1);
	}
	return j;
}

// One full pass; returns how many objects failed (0 expected).
static int pass_run(const struct texts *t, struct api_errors *e, int64_t us[3])
{
	int bad = 0;
	int64_t t0 = time_mono_us();
	struct matrix *m = NULL;
	json_t *j = load(t->matrix);
	bad += api_matrix_parse(j, &m, e) != NV_OK;
	json_decref(j);
	int64_t t1 = time_mono_us();
	struct api_rack **racks = calloc(RACKS, sizeof(*racks));
	for (int r = 0; r < RACKS; r++) {
		j = load(t->racks[r]);
		bad += api_rack_parse(j, &racks[r], e) != NV_OK;
		json_decref(j);
		for (int i = 0; i < API_COMPUTE_TRAYS; i++) {
			struct api_compute_tray *ct = NULL;
			j = load(t->trays[r * API_COMPUTE_TRAYS + i]);
			bad += api_compute_tray_parse(j, &ct, e) != NV_OK;
			api_compute_tray_free(ct);
			json_decref(j);
		}
		for (int p = 0; p < 2; p++) {
			struct api_rack_partition *rp = NULL;
			j = load(t->parts[2 * r + p]);
			bad += api_rack_partition_parse(j, &rp, e) != NV_OK;
			api_rack_partition_free(rp);
			json_decref(j);
		}
	}
	int64_t t2 = time_mono_us();
	struct matrix_plan *plan = malloc(sizeof(*plan));
	for (int r = 0; m != NULL && r < RACKS; r++)
		bad += matrix_plan_build(m, racks[r]->matrix_stack, "gb300-s49",
		                         MATRIX_PLAN_MULTI_HOP, plan) != NV_OK;
	int64_t t3 = time_mono_us();
	us[0] += t1 - t0;
	us[1] += t2 - t1;
	us[2] += t3 - t2;
	free(plan);
	for (int r = 0; r < RACKS; r++)
		api_rack_free(racks[r]);
	free(racks);
	matrix_free(m);
	return bad;
}

int main(void)
{
	struct texts *t = calloc(1, sizeof(*t));
	struct api_errors *e = malloc(sizeof(*e));
	int64_t us[3] = {0, 0, 0};
	int bad = 0;
	size_t bytes = 0;
	texts_gen(t);
	bytes += strlen(t->matrix);
	for (int i = 0; i < RACKS; i++)
		bytes +=
		        strlen(t->racks[i]) + strlen(t->parts[2 * i]) + strlen(t->parts[2 * i + 1]);
	for (int i = 0; i < RACKS * API_COMPUTE_TRAYS; i++)
		bytes += strlen(t->trays[i]);
	for (int round = 0; round < ROUNDS; round++) {
		api_errors_init(e);
		bad += pass_run(t, e, us);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("bench_parse: %d racks (%d trays, %d partitions), %d-stack matrix, %zu bytes of "
	       "JSON\n",
	       RACKS, RACKS * API_COMPUTE_TRAYS, RACKS * 2, STACKS, bytes);
	printf("matrix_parse_ms=%.3f inventory_parse_ms=%.3f plans_ms=%.3f (mean of %d rounds)\n",
	       (double)us[0] / 1000.0 / ROUNDS, (double)us[1] / 1000.0 / ROUNDS,
	       (double)us[2] / 1000.0 / ROUNDS, ROUNDS);
	printf("peak_rss_kb=%ld failures=%d\n", ru.ru_maxrss, bad);
	for (unsigned i = 0; i < e->n && i < 5; i++)
		fprintf(stderr, "%s: %s\n", e->list[i].path, e->list[i].msg);
	free(t->matrix);
	for (int i = 0; i < RACKS; i++) {
		free(t->racks[i]);
		free(t->parts[2 * i]);
		free(t->parts[2 * i + 1]);
	}
	for (int i = 0; i < RACKS * API_COMPUTE_TRAYS; i++)
		free(t->trays[i]);
	free(t);
	free(e);
	return bad == 0 ? 0 : 1;
}
