// SPDX-License-Identifier: Apache-2.0
// The RackPartition lifecycle decided on the parsed specs and plain JSON:
// every phase transition, restart safety (a recorded operation is polled,
// an existing partition is found by name), backend failures and retries,
// deletion, the status and the cordon patches.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_part.h"
#include "op_fixture.h"

#define DEF 32766
#define PID 7

struct pfx {
	json_t *part, *rack;
	struct api_rack_partition *spec;
	struct api_rack *rs;
	json_t *trays[18], *nodes[18];
	struct op_part_backend be;
	struct op_part_in in;
};

static json_t *part_new(const char *trays_json)
{
	json_t *p = json_pack("{s:s,s:s,s:{s:s,s:I,s:s,s:[s]},s:{s:s,s:o}}", "apiVersion",
	                      "nvl72.io/v1alpha1", "kind", "RackPartition", "metadata", "name",
	                      "tenant-a", "generation", (json_int_t)1, "resourceVersion", "40",
	                      "finalizers", OP_FINALIZER_PARTITION, "spec", "rack", "r07", "trays",
	                      json_loads(trays_json, 0, NULL));
	return p;
}

/* Parses f->part and f->rack again into the specs the eval reads, as a
 * pass of the controller does. */
static void pfx_parse(struct pfx *f)
{
	struct api_errors *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	api_rack_partition_free(f->spec);
	api_rack_free(f->rs);
	f->spec = NULL;
	f->rs = NULL;
	api_errors_init(e);
	assert_int_equal(api_rack_partition_parse(f->part, &f->spec, e), NV_OK);
	assert_int_equal(api_rack_parse(f->rack, &f->rs, e), NV_OK);
	f->in.spec = f->spec;
	f->in.rack = f->rs;
	free(e);
}

static void pfx_init(struct pfx *f, const char *trays)
{
	memset(f, 0, sizeof(*f));
	f->part = part_new(trays);
	f->rack = fx_rack(2);
	for (int i = 0; i < 18; i++) {
		f->trays[i] = fx_tray(i + 1, "580.95.05", DEF, FX_NOW, "True");
		f->nodes[i] = fx_node(i + 1, true);
		f->in.trays[i] = (struct op_part_tray){.index = i + 1,
		                                       .node = kube_obj_name(f->nodes[i]),
		                                       .tray = f->trays[i],
		                                       .node_o = f->nodes[i]};
	}
	f->in.ntrays = 18;
	f->in.part = f->part;
	pfx_parse(f);
	f->in.be = &f->be;
	f->be.configured = true;
	f->be.name = "sim";
	f->be.poll_ms = 1000;
}

static void pfx_clear(struct pfx *f)
{
	api_rack_partition_free(f->spec);
	api_rack_free(f->rs);
	json_decref(f->part);
	json_decref(f->rack);
	for (int i = 0; i < 18; i++) {
		json_decref(f->trays[i]);
		json_decref(f->nodes[i]);
	}
}

/* Tray index i (1-based) now reports clique c. */
static void pfx_clique(struct pfx *f, int i, int c)
{
	json_decref(f->trays[i - 1]);
	f->trays[i - 1] = fx_tray(i, "580.95.05", c, FX_NOW, "True");
	f->in.trays[i - 1].tray = f->trays[i - 1];
}

/* Node of tray i carries the partition and clique labels. */
static void pfx_labels(struct pfx *f, int i, const char *part, int c)
{
	char cl[64];
	snprintf(cl, sizeof(cl), "%s.%d", FX_CLUSTER, c);
	json_t *l = json_object_get(json_object_get(f->nodes[i - 1], "metadata"), "labels");
	json_object_set_new(l, OP_LABEL_PARTITION, json_string(part));
	json_object_set_new(l, OP_LABEL_CLIQUE, json_string(cl));
}

/* The backend holds our partition with these trays. */
static void pfx_found(struct pfx *f, const int *trays, int n)
{
	f->be.looked = true;
	f->be.find_err = NV_OK;
	memset(&f->be.part, 0, sizeof(f->be.part));
	snprintf(f->be.part.id, sizeof(f->be.part.id), "%d", PID);
	snprintf(f->be.part.name, sizeof(f->be.part.name), "tenant-a");
	f->be.part.has_partition_id = true;
	f->be.part.partition_id = PID;
	for (int k = 0; k < n; k++)
		for (unsigned m = 1; m <= 4; m++)
			f->be.part.gpus[f->be.part.n_gpus++] =
			        (struct fabric_gpu){.tray = (unsigned)trays[k], .module = m};
}

static void pfx_status(struct pfx *f, const char *phase, const char *pid, const char *op)
{
	char cl[64];
	snprintf(cl, sizeof(cl), "%s.%d", FX_CLUSTER, PID);
	json_object_set_new(f->part, "status",
	                    json_pack("{s:s,s:I,s:s,s:{s:s,s:s}}", "phase", phase,
	                              "observedGeneration", (json_int_t)1, "cliqueID",
	                              pid[0] ? cl : "", "backend", "partitionId", pid,
	                              "operationId", op));
}

static const int T1234[] = {1, 2, 3, 4};

static void test_op_part_decide_no_backend_stays_pending(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	f.be.configured = false;
	assert_false(op_part_wants_backend(&f.in));
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_PENDING);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_string_equal(d.reason, "NoFabricBackend");
	assert_non_null(strstr(d.message, "--fabric-backend none"));
	pfx_clear(&f);
}

static void test_op_part_decide_blocked_names_rack_and_trays(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	f.in.rack = NULL;
	op_part_decide(&f.in, &d);
	assert_string_equal(d.reason, "RackNotFound");
	assert_non_null(strstr(d.message, "rack r07 does not exist"));
	/* A Rack the parser refused counts as missing; the message says why. */
	f.in.rack_invalid = "spec.switchTrays: must have exactly 9 items";
	op_part_decide(&f.in, &d);
	assert_string_equal(d.reason, "RackNotFound");
	assert_int_equal(d.phase, API_PART_PENDING);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_string_equal(d.message,
	                    "rack r07 is invalid: spec.switchTrays: must have exactly 9 items");
	f.in.rack_invalid = NULL;
	f.in.rack = f.rs;
	json_object_del(json_object_get(f.trays[2], "status"), "gpus");
	f.in.trays[3].tray = NULL;
	op_part_decide(&f.in, &d);
	assert_string_equal(d.reason, "TraysNotReporting");
	assert_non_null(strstr(d.message, "trays 3, 4 "));
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_true(d.keep_cordons);
	f.in.ntrays = 2; /* the rack lists trays 1 and 2 only */
	op_part_decide(&f.in, &d);
	assert_string_equal(d.reason, "TrayNotInRack");
	assert_non_null(strstr(d.message, "spec.trays: trays 3, 4 are not in rack r07"));
	pfx_clear(&f);
}

static void test_op_part_decide_creates_when_absent(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	assert_true(op_part_wants_backend(&f.in));
	f.be.looked = true;
	f.be.find_err = NV_E_NOT_FOUND;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_CREATE);
	assert_int_equal(d.phase, API_PART_DRAINING);
	assert_int_equal(d.cordon, 0x1e); /* trays 1..4 cordoned first */
	assert_false(d.keep_cordons);
	assert_string_equal(d.spec.name, "tenant-a");
	assert_string_equal(d.spec.domain_uuid, FX_CLUSTER);
	assert_int_equal(d.spec.n_gpus, 16);
	assert_int_equal(d.spec.gpus[15].tray, 4);
	assert_int_equal(d.spec.gpus[15].module, 4);
	pfx_clear(&f);
}

static void test_op_part_requested_records_or_fails(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	struct fabric_op fop = {.id = "op-3", .state = FABRIC_OP_IN_PROGRESS, .partition_id = "7"};
	struct fabric_status st = {.message = "sim: tray 3 module 1 is in partition other"};
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	f.be.looked = true;
	f.be.find_err = NV_E_NOT_FOUND;
	op_part_decide(&f.in, &d);
	op_part_requested(&d, "sim", NV_OK, &fop, NULL, 1000);
	assert_int_equal(d.phase, API_PART_REQUESTING);
	assert_string_equal(d.op_id, "op-3");
	assert_string_equal(d.backend_id, "7");
	assert_int_equal(d.requeue_ms, 1000);
	assert_false(d.retry);

	op_part_decide(&f.in, &d);
	op_part_requested(&d, "sim", NV_E_CONFLICT, &fop, &st, 1000);
	assert_int_equal(d.phase, API_PART_FAILED);
	assert_true(d.retry);
	assert_string_equal(d.reason, "BackendRefused");
	assert_string_equal(d.message, "fabric backend sim refused the create: sim: tray 3 module "
	                               "1 is in partition other (NV_E_CONFLICT)");
	assert_string_equal(d.op_id, "");
	pfx_clear(&f);
}

static void test_op_part_decide_recorded_operation_is_polled_not_recreated(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	pfx_status(&f, "Requesting", "7", "op-3");
	assert_true(op_part_wants_backend(&f.in));
	f.be.looked = true;
	f.be.op = (struct fabric_op){.id = "op-3", .state = FABRIC_OP_IN_PROGRESS, .percent = 50};
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_REQUESTING);
	assert_string_equal(d.op_id, "op-3");
	assert_int_equal(d.requeue_ms, 1000);
	assert_int_equal(d.cordon, 0x1e);
	assert_non_null(strstr(d.message, "operation op-3 in-progress (50%)"));

	/* The backend went on to the change's next step: its id is what the
	 * status records from now on, so a restart polls that one. */
	f.be.op = (struct fabric_op){.id = "op-4", .state = FABRIC_OP_PENDING, .percent = -1};
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_REQUESTING);
	assert_string_equal(d.op_id, "op-4");
	assert_non_null(strstr(d.message, "operation op-4 pending"));

	/* The backend forgot the operation: the partition is found by id. */
	f.be.op_err = NV_E_NOT_FOUND;
	pfx_found(&f, T1234, 4);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	assert_string_equal(d.op_id, "");
	pfx_clear(&f);
}

static void test_op_part_decide_failed_operation_retries(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	pfx_status(&f, "Requesting", "7", "op-3");
	f.be.looked = true;
	f.be.op = (struct fabric_op){
	        .id = "op-3", .state = FABRIC_OP_FAILED, .message = "NVSwitch tray 4 unreachable"};
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_FAILED);
	assert_true(d.retry);
	assert_string_equal(d.reason, "BackendFailed");
	assert_string_equal(d.op_id, "");
	assert_non_null(strstr(d.message, "operation op-3 failed: NVSwitch tray 4 unreachable"));

	/* Next pass: nothing at the backend, asked again. */
	pfx_status(&f, "Failed", "", "");
	memset(&f.be, 0, sizeof(f.be));
	f.be = (struct op_part_backend){.configured = true,
	                                .name = "sim",
	                                .poll_ms = 1000,
	                                .looked = true,
	                                .find_err = NV_E_NOT_FOUND};
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_CREATE);
	pfx_clear(&f);
}

static void test_op_part_decide_backend_unreachable_keeps_cordons(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	pfx_status(&f, "WaitingForFabric", "7", "");
	f.be.looked = true;
	f.be.find_err = NV_E_TRANSPORT;
	snprintf(f.be.st.message, sizeof(f.be.st.message), "connection refused");
	op_part_decide(&f.in, &d);
	assert_true(d.retry);
	assert_true(d.keep_cordons);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	assert_string_equal(d.reason, "BackendUnavailable");
	assert_non_null(strstr(d.message, "fabric backend sim: finding the partition failed: "
	                                  "connection refused (NV_E_TRANSPORT)"));
	pfx_clear(&f);
}

/* After a restart with no status at all, an existing partition is found by
 * name and waited for: no second create. */
static void test_op_part_decide_found_by_name_then_converges(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	json_t *obj;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	pfx_found(&f, T1234, 4);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	assert_string_equal(d.backend_id, "7");
	assert_string_equal(d.clique, FX_CLUSTER ".7");
	assert_int_equal(d.requeue_ms, 1000);
	assert_int_equal(d.cordon, 0x1e);
	assert_non_null(strstr(d.message, "0 of 4 member trays report clique"));

	for (int i = 1; i <= 3; i++)
		pfx_clique(&f, i, PID);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	assert_int_equal(d.converged, 0x0e);
	assert_non_null(strstr(d.message, "3 of 4 member trays report clique " FX_CLUSTER ".7; "
	                                  "waiting for trays 4"));

	pfx_clique(&f, 4, PID);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_REFRESHING_IMEX);
	assert_true(d.fabric_converged);
	assert_false(d.imex_ready);
	assert_int_equal(d.cordon, 0); /* the fabric is done: cordons lifted */
	assert_int_equal(d.requeue_ms, 0);
	assert_string_equal(d.imex_reason, "LabelsPending");

	for (int i = 1; i <= 4; i++)
		pfx_labels(&f, i, "tenant-a", PID);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_ACTIVE);
	assert_true(d.ready);

	/* Active in status: steady, the backend is not asked again. */
	obj = json_deep_copy(f.part);
	op_part_status_apply(obj, &f.in, &d, FX_NOW);
	json_decref(f.part);
	f.part = obj;
	f.in.part = obj;
	assert_false(op_part_wants_backend(&f.in));
	f.be.looked = false;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_ACTIVE);
	assert_true(d.ready);
	assert_int_equal(d.action, OP_PART_NOTHING);
	pfx_clear(&f);
}

static void test_op_part_decide_imex_of_a_domain_gates_active(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2]");
	int t12[] = {1, 2};
	pfx_found(&f, t12, 2);
	for (int i = 1; i <= 2; i++) {
		pfx_clique(&f, i, PID);
		pfx_labels(&f, i, "tenant-a", PID);
	}
	jx_set_str(f.trays[1], "spec.imex.domain", "team-a.cd");
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_REFRESHING_IMEX);
	assert_string_equal(d.imex_reason, "IMEXNotReady");
	assert_non_null(strstr(d.imex_message, "team-a.cd on Node r07-t02"));
	jx_set_str(f.trays[1], "status.imex.daemonState", "Ready");
	jx_set_str(f.trays[1], "status.imex.domainState", "Up");
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_ACTIVE);
	pfx_clear(&f);
}

static void test_op_part_decide_member_change_updates_and_drains_leavers(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,5,6]");
	json_object_set_new(json_object_get(f.part, "metadata"), "generation", json_integer(2));
	pfx_status(&f, "Active", "7", "");
	json_object_set_new(json_object_get(f.part, "status"), "trays",
	                    json_pack("[{s:i},{s:i},{s:i},{s:i}]", "index", 1, "index", 2, "index",
	                              3, "index", 4));
	for (int i = 1; i <= 4; i++)
		pfx_clique(&f, i, PID);
	assert_true(op_part_wants_backend(&f.in)); /* a new generation */
	pfx_found(&f, T1234, 4);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_UPDATE);
	assert_string_equal(d.backend_id, "7");
	assert_int_equal(d.spec.n_gpus, 16);
	/* members 1, 2, 5, 6 and the leavers 3, 4 */
	assert_int_equal(d.cordon,
	                 (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 6));

	/* Updated, but tray 3 still reports the clique. */
	int t1256[] = {1, 2, 5, 6};
	pfx_found(&f, t1256, 4);
	pfx_clique(&f, 4, DEF);
	pfx_clique(&f, 5, PID);
	pfx_clique(&f, 6, PID);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	assert_false(d.fabric_converged);
	assert_non_null(strstr(d.message, "trays 3 leaving the partition have not settled"));
	assert_true(d.cordon & (1u << 3));
	/* Tray 3 changing (state InProgress) is not settled yet either. */
	pfx_clique(&f, 3, DEF);
	jx_set_str(json_array_get(jx_path(f.trays[2], "status.gpus"), 0), "fabric.state",
	           "InProgress");
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_WAITING_FOR_FABRIC);
	pfx_clique(&f, 3, DEF);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_REFRESHING_IMEX);
	pfx_clear(&f);
}

/* A change or a deletion that reaches a tray an NVIDIA ComputeDomain uses
 * is not requested: the message names the domain, cordons stay as they
 * are; unread NVIDIA ComputeDomains hold it too, and look again soon. */
static void test_op_part_decide_nvidia_domain_holds(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	char want[300];
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	f.be.looked = true;
	f.be.find_err = NV_E_NOT_FOUND;
	f.in.trays[2].nvidia_domain = "team-nv/nv-a"; /* tray 3 */
	f.in.trays[7].nvidia_domain = "team-nv/nv-b"; /* tray 8: not reached */
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_PENDING);
	assert_true(d.keep_cordons);
	assert_int_equal(d.requeue_ms, 0); /* the domain's change requeues it */
	assert_string_equal(d.reason, OP_PART_NVIDIA_REASON);
	snprintf(want, sizeof(want),
	         "held: tray 3 (Node %s) is in NVIDIA ComputeDomain team-nv/nv-a; the partition "
	         "change starts once NVIDIA's driver releases it",
	         f.in.trays[2].node);
	assert_string_equal(d.message, want);
	/* Released: the change goes ahead. */
	f.in.trays[2].nvidia_domain = "";
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_CREATE);
	/* Unread. */
	f.in.nvidia_unread = "discovery of resource.nvidia.com/v1beta1: timeout";
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.requeue_ms, OP_PART_NVIDIA_RETRY_MS);
	assert_non_null(strstr(d.message, "held: NVIDIA's ComputeDomains are served but not read "
	                                  "(discovery of resource.nvidia.com/v1beta1: timeout)"));
	f.in.nvidia_unread = NULL;

	/* An update reaches the trays that leave: tray 4 leaves, NVIDIA's. */
	json_decref(f.part);
	f.part = part_new("[1,2,3]");
	f.in.part = f.part;
	pfx_parse(&f);
	pfx_status(&f, "Active", "7", "");
	pfx_found(&f, T1234, 4);
	f.in.trays[3].nvidia_domain = "team-nv/nv-c";
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_ACTIVE);
	assert_non_null(strstr(d.message, "tray 4 ("));
	assert_non_null(strstr(d.message, "team-nv/nv-c"));

	/* A deletion too, and it stays Deleting. */
	jx_set_str(f.part, "metadata.deletionTimestamp", "2026-11-18T10:00:00Z");
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_DELETING);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_non_null(strstr(d.message, "the partition deletion starts once"));
	f.in.trays[3].nvidia_domain = NULL;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_DELETE);
	pfx_clear(&f);
}

static void test_op_part_decide_delete(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	jx_set_str(f.part, "metadata.deletionTimestamp", "2026-11-18T10:00:00Z");
	pfx_status(&f, "Active", "7", "");
	for (int i = 1; i <= 4; i++)
		pfx_clique(&f, i, PID);
	assert_true(op_part_wants_backend(&f.in));
	pfx_found(&f, T1234, 4);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.phase, API_PART_DELETING);
	assert_int_equal(d.action, OP_PART_DELETE);
	assert_string_equal(d.backend_id, "7");
	assert_int_equal(d.cordon, 0x1e);

	/* A change still runs at the backend: not a failure, look again soon. */
	struct fabric_status busy = {.message = "sim: partition 7 has a change in progress"};
	op_part_requested(&d, "sim", NV_E_BUSY, NULL, &busy, 1000);
	assert_false(d.retry);
	assert_int_equal(d.phase, API_PART_DELETING);
	assert_int_equal(d.requeue_ms, 1000);
	assert_string_equal(d.op_id, "");
	struct fabric_op fop = {.id = "op-9", .state = FABRIC_OP_IN_PROGRESS};
	op_part_requested(&d, "sim", NV_OK, &fop, NULL, 1000);
	assert_int_equal(d.phase, API_PART_DELETING);
	assert_string_equal(d.op_id, "op-9");

	/* Deleted at the backend; the GPUs have not moved back yet. */
	pfx_status(&f, "Deleting", "7", "op-9");
	f.be.op = (struct fabric_op){.id = "op-9", .state = FABRIC_OP_COMPLETED};
	f.be.find_err = NV_E_NOT_FOUND;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_non_null(strstr(d.message, "waiting for trays 1, 2, 3, 4 to report"));
	/* Out of the clique but still changing: not released yet. */
	for (int i = 1; i <= 4; i++) {
		pfx_clique(&f, i, DEF);
		jx_set_str(json_array_get(jx_path(f.trays[i - 1], "status.gpus"), 3),
		           "fabric.state", "InProgress");
	}
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	for (int i = 1; i <= 4; i++)
		pfx_clique(&f, i, DEF);
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_RELEASE);

	/* Without a backend: released only when nothing was ever requested. */
	f.be.configured = false;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_string_equal(d.reason, "NoFabricBackend");
	pfx_status(&f, "Pending", "", "");
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_RELEASE);
	pfx_clear(&f);
}

/* A member whose agent went silent does not hold a deletion for ever: it
 * is waited for until its heartbeat is silent_ms old, then the partition is
 * released with the tray named; a member still heartbeating is waited for. */
static void test_op_part_decide_delete_silent_member(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	jx_set_str(f.part, "metadata.deletionTimestamp", "2026-11-18T10:00:00Z");
	pfx_status(&f, "Deleting", "7", "op-9");
	f.be.looked = true;
	f.be.op = (struct fabric_op){.id = "op-9", .state = FABRIC_OP_COMPLETED};
	f.be.find_err = NV_E_NOT_FOUND;
	for (int i = 1; i <= 4; i++) {
		pfx_clique(&f, i, i == 2 ? PID : DEF);
		f.in.trays[i - 1].heartbeat_ms = FX_NOW - 1000;
	}
	f.in.now_ms = FX_NOW;
	f.in.silent_ms = 120000;
	/* Tray 2 still reports the old clique, and its agent is alive. */
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_non_null(strstr(d.message, "waiting for trays 2 to report"));
	assert_int_equal(d.silent, 0);
	assert_int_equal(d.requeue_ms, 119001); /* when it would turn silent */
	/* Its agent falls silent: released, tray 2 named. */
	f.in.now_ms = FX_NOW + 120000;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_RELEASE);
	assert_int_equal(d.silent, 1u << 2);
	assert_non_null(strstr(d.message, "released without a report from trays 2, whose agents "
	                                  "have been silent for over 120s"));
	/* With the bound off (heartbeat timeout 0), the deletion waits. */
	f.in.silent_ms = 0;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_NOTHING);
	/* An agent that never reported is silent at once. */
	f.in.silent_ms = 120000;
	f.in.now_ms = FX_NOW;
	f.in.trays[1].heartbeat_ms = 0;
	op_part_decide(&f.in, &d);
	assert_int_equal(d.action, OP_PART_RELEASE);
	pfx_clear(&f);
}

static void test_op_part_status_apply_shape_and_no_change(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	json_t *a, *b, *patch;
	(void)state;
	pfx_init(&f, "[1,2]");
	f.be.looked = true;
	f.be.find_err = NV_E_NOT_FOUND;
	op_part_decide(&f.in, &d);
	struct fabric_op fop = {.id = "op-1", .partition_id = "7"};
	op_part_requested(&d, "sim", NV_OK, &fop, NULL, 1000);
	a = json_deep_copy(f.part);
	op_part_status_apply(a, &f.in, &d, FX_NOW);
	assert_string_equal(jx_str_or(a, "status.phase", ""), "Requesting");
	assert_string_equal(jx_str_or(a, "status.backend.operationId", ""), "op-1");
	assert_string_equal(jx_str_or(a, "status.backend.partitionId", ""), "7");
	assert_int_equal(json_integer_value(jx_path(a, "status.trayCount")), 2);
	assert_int_equal(json_integer_value(jx_path(a, "status.observedGeneration")), 1);
	assert_int_equal(json_array_size(jx_path(a, "status.trays")), 2);
	json_t *ready = kube_condition_find(a, "Ready");
	assert_string_equal(jx_str_or(ready, "status", ""), "False");
	assert_string_equal(jx_str_or(ready, "reason", ""), "Requesting");
	assert_int_equal(json_integer_value(json_object_get(ready, "observedGeneration")), 1);
	assert_non_null(kube_condition_find(a, "FabricConverged"));
	assert_non_null(kube_condition_find(a, "IMEXReady"));

	/* The same decision later: nothing to write. */
	b = json_deep_copy(a);
	op_part_status_apply(b, &f.in, &d, FX_NOW + 60000);
	patch = op_rack_status_patch(a, b);
	assert_null(patch);
	json_decref(a);
	json_decref(b);
	pfx_clear(&f);
}

static void test_op_part_drain_policy_from_rack(void **state)
{
	struct pfx f;
	struct drain_policy pol;
	char owner[128], began[TIME_RFC3339_LEN];
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	op_part_drain_policy(&f.in, FX_NOW, owner, sizeof(owner), &pol);
	assert_string_equal(pol.owner, "rackpartition/tenant-a");
	assert_ptr_equal(pol.owner, owner);
	assert_int_equal(pol.mode, API_DRAIN_EVICT); /* the Rack says nothing */
	assert_int_equal(pol.checkpoint_deadline_ms, 30 * 60000);
	assert_false(pol.force);
	assert_int_equal(pol.started_ms, FX_NOW);

	json_object_set_new(
	        json_object_get(json_object_get(f.rack, "spec"), "policy"), "drain",
	        json_pack("{s:s,s:s}", "mode", "Checkpoint", "checkpointDeadline", "10m"));
	pfx_parse(&f);
	/* Already Draining: the drain began when the phase did. */
	pfx_status(&f, "Draining", "", "");
	fx_time(FX_NOW - 90000, began);
	json_object_set_new(json_object_get(f.part, "status"), "lastTransitionTime",
	                    json_string(began));
	op_part_drain_policy(&f.in, FX_NOW, owner, sizeof(owner), &pol);
	assert_int_equal(pol.mode, API_DRAIN_CHECKPOINT);
	assert_int_equal(pol.checkpoint_deadline_ms, 10 * 60000);
	assert_int_equal(pol.started_ms, FX_NOW - 90000);

	/* Without a Rack: the defaults. */
	f.in.rack = NULL;
	op_part_drain_policy(&f.in, FX_NOW, owner, sizeof(owner), &pol);
	assert_int_equal(pol.mode, API_DRAIN_EVICT);
	assert_int_equal(pol.checkpoint_deadline_ms, 30 * 60000);
	pfx_clear(&f);
}

static void test_op_part_drained_holds_the_request(void **state)
{
	struct pfx f;
	struct op_part_decision d;
	struct drain_result r;
	(void)state;
	pfx_init(&f, "[1,2,3,4]");
	f.be.looked = true;
	f.be.find_err = NV_E_NOT_FOUND;

	/* Pods still waiting for their checkpoint: no request, look again at
	 * the drain's next check. */
	op_part_decide(&f.in, &d);
	memset(&r, 0, sizeof(r));
	r.pods = 3;
	r.waiting_ack = 2;
	r.terminating = 1;
	r.next_check_ms = FX_NOW + 7000;
	snprintf(r.message, sizeof(r.message), "draining 4 nodes: 3 pods to move");
	op_part_drained(&d, &r, FX_NOW);
	assert_int_equal(d.action, OP_PART_NOTHING);
	assert_int_equal(d.phase, API_PART_DRAINING);
	assert_string_equal(d.reason, "Draining");
	assert_int_equal(d.requeue_ms, 7000);
	assert_int_equal(d.cordon, 0x1e); /* the cordons stay */
	assert_non_null(strstr(d.message, "waiting for 4 pods"));
	assert_non_null(strstr(d.message, "before the create"));
	assert_non_null(strstr(d.message, "3 pods to move"));

	/* A PodDisruptionBudget refused: the reason and message say so, and the
	 * Ready condition carries both. */
	op_part_decide(&f.in, &d);
	memset(&r, 0, sizeof(r));
	r.pods = 1;
	r.blocked = 1;
	r.next_check_ms = FX_NOW + 30000;
	snprintf(r.message, sizeof(r.message),
	         "pod team-a/web-0: eviction refused by a PodDisruptionBudget: no");
	op_part_drained(&d, &r, FX_NOW);
	assert_string_equal(d.reason, "DrainBlocked");
	assert_non_null(strstr(d.message, "waiting for 1 pod on the member Nodes"));
	assert_non_null(strstr(d.message, "blocked by a PodDisruptionBudget"));
	assert_non_null(strstr(d.message, "team-a/web-0"));
	op_part_status_apply(f.part, &f.in, &d, FX_NOW);
	const json_t *ready = kube_condition_find(f.part, "Ready");
	assert_string_equal(jx_str_or(ready, "status", ""), "False");
	assert_string_equal(jx_str_or(ready, "reason", ""), "DrainBlocked");
	assert_non_null(strstr(jx_str_or(ready, "message", ""), "team-a/web-0"));
	assert_string_equal(jx_str_or(f.part, "status.phase", ""), "Draining");

	/* Drained: the decision stands and the create goes out. */
	op_part_decide(&f.in, &d);
	memset(&r, 0, sizeof(r));
	r.done = true;
	op_part_drained(&d, &r, FX_NOW);
	assert_int_equal(d.action, OP_PART_CREATE);
	assert_string_equal(d.reason, "Draining");
	assert_int_equal(d.requeue_ms, 0);
	pfx_clear(&f);
}

static void test_op_part_cordon_patch_only_ours(void **state)
{
	json_t *n = fx_node(3, true), *p;
	(void)state;
	p = op_part_cordon_patch(n, "tenant-a", true);
	assert_non_null(p);
	assert_true(json_is_true(jx_path(p, "spec.unschedulable")));
	assert_string_equal(json_string_value(json_object_get(jx_path(p, "metadata.annotations"),
	                                                      DRAIN_ANN_CORDONED_BY)),
	                    "rackpartition/tenant-a");
	assert_string_equal(jx_str_or(p, "metadata.resourceVersion", ""), "55");
	assert_null(op_part_cordon_patch(n, "tenant-a", false)); /* not ours */
	json_decref(p);

	json_object_set_new(json_object_get(n, "metadata"), "annotations",
	                    json_pack("{s:s}", DRAIN_ANN_CORDONED_BY, "rack/r07"));
	json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
	assert_null(op_part_cordon_patch(n, "tenant-a", true));  /* someone else's cordon */
	assert_null(op_part_cordon_patch(n, "tenant-a", false)); /* never lifted by us */
	json_object_set_new(json_object_get(n, "metadata"), "annotations",
	                    json_pack("{s:s}", DRAIN_ANN_CORDONED_BY, "rackpartition/tenant-a"));
	p = op_part_cordon_patch(n, "tenant-a", false);
	assert_non_null(p);
	assert_true(json_is_null(jx_path(p, "spec.unschedulable")));
	json_decref(p);
	json_decref(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_part_decide_no_backend_stays_pending),
	        cmocka_unit_test(test_op_part_decide_blocked_names_rack_and_trays),
	        cmocka_unit_test(test_op_part_decide_creates_when_absent),
	        cmocka_unit_test(test_op_part_requested_records_or_fails),
	        cmocka_unit_test(test_op_part_decide_recorded_operation_is_polled_not_recreated),
	        cmocka_unit_test(test_op_part_decide_failed_operation_retries),
	        cmocka_unit_test(test_op_part_decide_backend_unreachable_keeps_cordons),
	        cmocka_unit_test(test_op_part_decide_found_by_name_then_converges),
	        cmocka_unit_test(test_op_part_decide_imex_of_a_domain_gates_active),
	        cmocka_unit_test(test_op_part_decide_member_change_updates_and_drains_leavers),
	        cmocka_unit_test(test_op_part_decide_nvidia_domain_holds),
	        cmocka_unit_test(test_op_part_decide_delete),
	        cmocka_unit_test(test_op_part_decide_delete_silent_member),
	        cmocka_unit_test(test_op_part_status_apply_shape_and_no_change),
	        cmocka_unit_test(test_op_part_drain_policy_from_rack),
	        cmocka_unit_test(test_op_part_drained_holds_the_request),
	        cmocka_unit_test(test_op_part_cordon_patch_only_ours),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
