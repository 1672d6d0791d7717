// SPDX-License-Identifier: Apache-2.0
// Unit tests for the status serialisers of every kind and for the bounded
// error list they share with validation.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_domain.h"
#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/parse.h"

// Serialises o compactly with sorted keys and drops the reference.
static char *dump_take(json_t *o)
{
	assert_non_null(o);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	assert_non_null(s);
	return s;
}

static void test_api_rack_status_to_json_fields(void **state)
{
	(void)state;
	struct api_rack_status *s = calloc(1, sizeof(*s));
	s->observed_generation = 4;
	memcpy(s->stack, "gb300-r580-95", 14);
	s->ntrays = 1;
	s->trays[0].index = 3;
	s->trays[0].ready = true;
	memcpy(s->trays[0].node, "gb300-r07-t03", 14);
	s->nskew = 1;
	s->skew[0].component = MATRIX_C_DRIVER;
	s->skew[0].nversions = 2;
	memcpy(s->skew[0].versions[0], "580.95.05", 10);
	memcpy(s->skew[0].versions[1], "580.159.03", 11);
	s->fabric = API_FABRIC_DEGRADED;
	s->ncliques = 1;
	memcpy(s->cliques[0].clique_id, "3c9a.32766", 11);
	s->cliques[0].trays = (1u << 1) | (1u << 18);
	s->cap_trays = 18;
	s->cap_ready_trays = 17;
	s->nconditions = 1;
	memcpy(s->conditions[0].type, "Ready", 6);
	s->conditions[0].status = API_COND_FALSE;
	s->conditions[0].last_transition_ms = 1795000000000;
	memcpy(s->conditions[0].reason, "TrayDown", 9);
	char *txt = dump_take(api_rack_status_to_json(s));
	assert_non_null(strstr(txt, "\"observedGeneration\":4"));
	assert_non_null(strstr(txt, "\"versionSkew\":[{\"component\":\"driver\",\"versions\":["
	                            "\"580.95.05\",\"580.159.03\"]}]"));
	assert_non_null(strstr(txt, "\"state\":\"Degraded\""));
	assert_non_null(strstr(txt, "\"trays\":[1,18]"));
	assert_non_null(strstr(txt, "\"readyTrays\":17"));
	assert_non_null(strstr(txt, "{\"lastTransitionTime\":\"2026-11-18T11:06:40Z\""));
	assert_non_null(
	        strstr(txt, "\"reason\":\"TrayDown\",\"status\":\"False\",\"type\":\"Ready\""));
	assert_null(strstr(txt, "\"upgrade\""));
	free(txt);
	free(s);
}

static void test_api_compute_tray_status_to_json_fields(void **state)
{
	(void)state;
	struct api_compute_tray_status *s = calloc(1, sizeof(*s));
	s->driver_loaded = true;
	memcpy(s->driver_version, "580.173.02", 11);
	s->ngpus = 1;
	s->gpus[0].index = 0;
	s->gpus[0].clique_id = 32766;
	s->gpus[0].health_mask = -1;
	s->gpus[0].chassis_slot = -1;
	s->gpus[0].tray_index = 3;
	memcpy(s->gpus[0].fabric_state, "Completed", 10);
	memcpy(s->gpus[0].health_source, "mask", 5);
	memcpy(s->gpus[0].vbios, "97.00.B9.00.69", 15);
	memcpy(s->fabric_health_source, "mask", 5);
	s->imex_node_index = -1;
	s->maint = API_MAINT_DRAINING;
	memcpy(s->host_fm_state, "NotInstalled", 13);
	char *txt = dump_take(api_compute_tray_status_to_json(s));
	assert_non_null(strstr(txt, "\"driver\":{\"loaded\":true,\"version\":\"580.173.02\"}"));
	assert_non_null(strstr(txt, "\"fabric\":{\"cliqueId\":32766,\"healthSource\":\"mask\","
	                            "\"state\":\"Completed\"}"));
	assert_non_null(strstr(txt, "\"vbios\":\"97.00.B9.00.69\""));
	assert_non_null(strstr(txt, "\"fabric\":{\"healthSource\":\"mask\"}"));
	assert_null(strstr(txt, "boardPartNumber"));
	assert_non_null(strstr(txt, "\"platform\":{\"trayIndex\":3}"));
	assert_non_null(strstr(txt, "\"maintenance\":{\"state\":\"Draining\"}"));
	assert_non_null(strstr(txt, "\"hostFabricManager\":{\"state\":\"NotInstalled\"}"));
	assert_null(strstr(txt, "nodeIndex"));
	assert_null(strstr(txt, "lastError"));
	free(txt);
	free(s);
}

static void test_api_partition_and_domain_status_to_json(void **state)
{
	(void)state;
	struct api_rack_partition_status *p = calloc(1, sizeof(*p));
	p->phase = API_PART_WAITING_FOR_FABRIC;
	p->tray_count = 9;
	memcpy(p->backend_operation_id, "op-7", 5);
	char *txt = dump_take(api_rack_partition_status_to_json(p));
	assert_non_null(strstr(txt, "\"phase\":\"WaitingForFabric\""));
	assert_non_null(strstr(txt, "\"backend\":{\"operationId\":\"op-7\"}"));
	free(txt);
	free(p);
	struct api_compute_domain_status *d = calloc(1, sizeof(*d));
	d->ready = false;
	d->nnodes = 1;
	memcpy(d->nodes[0].name, "gb300-r07-t01", 14);
	d->nodes[0].index = 0;
	d->nselector = 1;
	memcpy(d->selector[0].key, "nvl72.io/compute-domain", 24);
	memcpy(d->selector[0].value, "llm-pretrain", 13);
	txt = dump_take(api_compute_domain_status_to_json(d));
	assert_null(strstr(txt, "resourceClaimTemplate")); /* none yet */
	free(txt);
	memcpy(d->claim_template, "llm-pretrain-channel", 21);
	txt = dump_take(api_compute_domain_status_to_json(d));
	assert_non_null(
	        strstr(txt, "\"resourceClaimTemplate\":{\"name\":\"llm-pretrain-channel\"}"));
	assert_non_null(strstr(txt, "\"status\":\"NotReady\""));
	assert_non_null(strstr(txt, "{\"cliqueID\":\"\",\"index\":0,\"name\":\"gb300-r07-t01\","
	                            "\"status\":\"NotReady\"}"));
	assert_non_null(
	        strstr(txt, "\"nodeSelector\":{\"nvl72.io/compute-domain\":\"llm-pretrain\"}"));
	free(txt);
	free(d);
}

static void test_api_matrix_and_approval_status_to_json(void **state)
{
	(void)state;
	struct api_matrix_status m;
	memset(&m, 0, sizeof(m));
	m.stack_count = 4;
	m.transition_count = 7;
	m.racks = 2;
	char *txt = dump_take(api_matrix_status_to_json(&m));
	assert_string_equal(
	        txt, "{\"conditions\":[],\"racks\":2,\"stackCount\":4,\"transitionCount\":7}");
	free(txt);
	struct api_upgrade_approval_status a;
	memset(&a, 0, sizeof(a));
	a.counted = true;
	a.observed_generation = 1;
	txt = dump_take(api_upgrade_approval_status_to_json(&a));
	assert_string_equal(txt, "{\"conditions\":[],\"counted\":true,\"observedGeneration\":1}");
	free(txt);
}

static void test_api_errors_add_bounded(void **state)
{
	(void)state;
	struct api_errors *e = malloc(sizeof(*e));
	api_errors_init(e);
	for (int i = 0; i < API_ERRORS_MAX + 5; i++)
		api_errors_add(e, "spec.x", "error %d", i);
	assert_int_equal(e->n, API_ERRORS_MAX);
	assert_int_equal(e->dropped, 5);
	assert_true(api_errors_has(e, "spec.x", "error 63"));
	assert_false(api_errors_has(e, "spec.x", "error 64"));
	assert_false(api_errors_has(e, "spec.y", NULL));
	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(api_errors_format(e, &b), NV_OK);
	assert_true(str_has_suffix(buf_str(&b), "spec.x: error 63; and 5 more"));
	buf_clear(&b);
	buf_init(&b, 16);
	assert_int_equal(api_errors_format(e, &b), NV_E_TOO_LARGE);
	buf_clear(&b);
	char longpath[600];
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	api_errors_init(e);
	api_errors_add(e, longpath, "%s", longpath);
	assert_int_equal(strlen(e->list[0].path), API_PATH_LEN - 1);
	assert_int_equal(strlen(e->list[0].msg), API_MSG_LEN - 1);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_rack_status_to_json_fields),
	        cmocka_unit_test(test_api_compute_tray_status_to_json_fields),
	        cmocka_unit_test(test_api_partition_and_domain_status_to_json),
	        cmocka_unit_test(test_api_matrix_and_approval_status_to_json),
	        cmocka_unit_test(test_api_errors_add_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
