// SPDX-License-Identifier: Apache-2.0
// Unit tests for the metrics registry: exact exposition text on small
// registries, label escaping and validation, and the per-family cap.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include "nvl72/metrics.h"

/* Renders r and compares the whole text with want. */
static void assert_render(struct metrics_registry *r, const char *want)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(metrics_registry_render(r, &b), NV_OK);
	assert_string_equal(buf_str(&b), want);
	buf_clear(&b);
}

static void test_metrics_render_counter_gauge_exact(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"controller", "result", NULL};
	struct metrics_family *c = NULL, *g = NULL;
	const struct metrics_desc dc = {"controller_runtime_reconcile_total",
	                                "Reconcile calls by outcome.",
	                                METRICS_COUNTER,
	                                l,
	                                NULL,
	                                0,
	                                0};
	const struct metrics_desc dg = {
	        "nvl72_tray_ready", "1 when the tray is Ready.", METRICS_GAUGE, NULL, NULL, 0, 0};
	assert_int_equal(metrics_family_register(r, &dc, &c), NV_OK);
	assert_int_equal(metrics_family_register(r, &dg, &g), NV_OK);
	assert_int_equal(metrics_family_register(r, &dg, NULL), NV_E_EXISTS);
	const char *ok[] = {"rack", "success"};
	const char *err[] = {"rack", "error"};
	assert_int_equal(metrics_counter_inc(c, ok), NV_OK);
	assert_int_equal(metrics_counter_add(c, ok, 2), NV_OK);
	assert_int_equal(metrics_family_touch(c, err), NV_OK);
	assert_int_equal(metrics_counter_add(c, ok, -1), NV_E_INVAL);
	assert_int_equal(metrics_gauge_set(c, ok, 1), NV_E_INVAL);
	assert_int_equal(metrics_gauge_set(g, NULL, 0.25), NV_OK);
	assert_render(
	        r, "# HELP controller_runtime_reconcile_total Reconcile calls by outcome.\n"
	           "# TYPE controller_runtime_reconcile_total counter\n"
	           "controller_runtime_reconcile_total{controller=\"rack\",result=\"success\"} 3\n"
	           "controller_runtime_reconcile_total{controller=\"rack\",result=\"error\"} 0\n"
	           "# HELP nvl72_tray_ready 1 when the tray is Ready.\n"
	           "# TYPE nvl72_tray_ready gauge\n"
	           "nvl72_tray_ready 0.25\n");
	double v = 0;
	assert_int_equal(metrics_family_get(c, ok, &v), NV_OK);
	assert_true(v > 2.99 && v < 3.01);
	metrics_registry_free(r);
}

static void test_metrics_render_histogram_exact(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"name", NULL};
	static const double b[] = {0.1, 1, 10};
	struct metrics_family *h = NULL;
	const struct metrics_desc d = {"workqueue_work_duration_seconds",
	                               "How long processing takes",
	                               METRICS_HISTOGRAM,
	                               l,
	                               b,
	                               3,
	                               0};
	assert_int_equal(metrics_family_register(r, &d, &h), NV_OK);
	const char *v[] = {"rack"};
	assert_int_equal(metrics_histogram_observe(h, v, 0.05), NV_OK);
	assert_int_equal(metrics_histogram_observe(h, v, 1), NV_OK);
	assert_int_equal(metrics_histogram_observe(h, v, 100), NV_OK);
	assert_render(r, "# HELP workqueue_work_duration_seconds How long processing takes\n"
	                 "# TYPE workqueue_work_duration_seconds histogram\n"
	                 "workqueue_work_duration_seconds_bucket{name=\"rack\",le=\"0.1\"} 1\n"
	                 "workqueue_work_duration_seconds_bucket{name=\"rack\",le=\"1\"} 2\n"
	                 "workqueue_work_duration_seconds_bucket{name=\"rack\",le=\"10\"} 2\n"
	                 "workqueue_work_duration_seconds_bucket{name=\"rack\",le=\"+Inf\"} 3\n"
	                 "workqueue_work_duration_seconds_sum{name=\"rack\"} 101.05\n"
	                 "workqueue_work_duration_seconds_count{name=\"rack\"} 3\n");
	metrics_registry_free(r);
}

static void test_metrics_escape_label_and_help(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"node", NULL};
	struct metrics_family *g = NULL;
	const struct metrics_desc d = {
	        "nvl72_x", "line one\nback\\slash \"q\"", METRICS_GAUGE, l, NULL, 0, 0};
	assert_int_equal(metrics_family_register(r, &d, &g), NV_OK);
	const char *v[] = {"a\"b\\c\nd é"};
	assert_int_equal(metrics_gauge_set(g, v, 1), NV_OK);
	assert_render(r, "# HELP nvl72_x line one\\nback\\\\slash \"q\"\n"
	                 "# TYPE nvl72_x gauge\n"
	                 "nvl72_x{node=\"a\\\"b\\\\c\\nd é\"} 1\n");
	metrics_registry_free(r);
}

static void test_metrics_register_rejects_bad_desc(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const bad_label[] = {"__reserved", NULL};
	static const char *const le_label[] = {"le", NULL};
	static const char *const dup[] = {"a", "a", NULL};
	static const double unsorted[] = {1, 0.5};
	const struct metrics_desc ds[] = {
	        {"9starts_with_digit", "h", METRICS_GAUGE, NULL, NULL, 0, 0},
	        {"has-dash", "h", METRICS_GAUGE, NULL, NULL, 0, 0},
	        {"ok_name", "h", METRICS_GAUGE, bad_label, NULL, 0, 0},
	        {"ok_name", "h", METRICS_HISTOGRAM, le_label, unsorted, 1, 0},
	        {"ok_name", "h", METRICS_GAUGE, dup, NULL, 0, 0},
	        {"ok_name", "h", METRICS_HISTOGRAM, NULL, unsorted, 2, 0},
	        {"ok_name", "h", METRICS_HISTOGRAM, NULL, NULL, 0, 0},
	        {"ok_name", NULL, METRICS_GAUGE, NULL, NULL, 0, 0},
	        {"ok_name", "h", METRICS_GAUGE, NULL, NULL, 0, METRICS_SERIES_HARD_MAX + 1},
	};
	for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++)
		assert_int_equal(metrics_family_register(r, &ds[i], NULL), NV_E_INVAL);
	assert_null(metrics_registry_find(r, "ok_name"));
	metrics_registry_free(r);
}

static void test_metrics_values_rejects_bad_utf8_and_long(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"v", NULL};
	struct metrics_family *g = NULL;
	const struct metrics_desc d = {"nvl72_v", "h", METRICS_GAUGE, l, NULL, 0, 0};
	assert_int_equal(metrics_family_register(r, &d, &g), NV_OK);
	const char *bad[] = {"\xc0\xaf"};
	assert_int_equal(metrics_gauge_set(g, bad, 1), NV_E_INVAL);
	const char *surrogate[] = {"\xed\xa0\x80"};
	assert_int_equal(metrics_gauge_set(g, surrogate, 1), NV_E_INVAL);
	char longv[METRICS_VALUE_MAX + 2];
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	const char *lv[] = {longv};
	assert_int_equal(metrics_gauge_set(g, lv, 1), NV_E_TOO_LARGE);
	assert_int_equal(metrics_gauge_set(g, NULL, 1), NV_E_INVAL);
	assert_int_equal(metrics_family_series_count(g), 0);
	metrics_registry_free(r);
}

static void test_metrics_cap_rejects_new_series_and_counts(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"gpu", NULL};
	struct metrics_family *g = NULL;
	const struct metrics_desc d = {"nvl72_gpu_fabric_state", "h", METRICS_GAUGE, l, NULL, 0, 4};
	assert_int_equal(metrics_family_register(r, &d, &g), NV_OK);
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "gpu%d", i);
		const char *v[] = {name};
		assert_int_equal(metrics_gauge_set(g, v, i), i < 4 ? NV_OK : NV_E_RANGE);
	}
	const char *old[] = {"gpu2"};
	assert_int_equal(metrics_gauge_set(g, old, 7), NV_OK);
	assert_int_equal(metrics_family_series_count(g), 4);
	struct metrics_family *rej =
	        metrics_registry_find(r, "nvl72_metrics_series_rejected_total");
	assert_non_null(rej);
	const char *rv[] = {"nvl72_gpu_fabric_state"};
	double n = 0;
	assert_int_equal(metrics_family_get(rej, rv, &n), NV_OK);
	assert_true(n > 5.9 && n < 6.1);
	/* Removing a series makes room again. */
	assert_int_equal(metrics_family_remove(g, old), NV_OK);
	assert_int_equal(metrics_family_remove(g, old), NV_E_NOT_FOUND);
	const char *nv[] = {"gpu9"};
	assert_int_equal(metrics_gauge_set(g, nv, 9), NV_OK);
	metrics_family_reset(g);
	assert_int_equal(metrics_family_series_count(g), 0);
	metrics_registry_free(r);
}

static void test_metrics_many_series_lookup(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"rack", "tray", NULL};
	struct metrics_family *c = NULL;
	const struct metrics_desc d = {"nvl72_t", "h", METRICS_COUNTER, l, NULL, 0, 5000};
	assert_int_equal(metrics_family_register(r, &d, &c), NV_OK);
	char rack[16], tray[16];
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 64 * 18; i++) {
			snprintf(rack, sizeof(rack), "r%d", i / 18);
			snprintf(tray, sizeof(tray), "%d", i % 18);
			const char *v[] = {rack, tray};
			assert_int_equal(metrics_counter_inc(c, v), NV_OK);
		}
	}
	assert_int_equal(metrics_family_series_count(c), 64 * 18);
	const char *v[] = {"r63", "17"};
	double n = 0;
	assert_int_equal(metrics_family_get(c, v, &n), NV_OK);
	assert_true(n > 1.9 && n < 2.1);
	metrics_registry_free(r);
}

static void test_metrics_std_register_names(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_std m;
	assert_int_equal(metrics_std_register(r, &m), NV_OK);
	assert_int_equal(metrics_std_controller_init(&m, "rack"), NV_OK);
	const char *wq[] = {"rack", "rack"};
	assert_int_equal(metrics_gauge_set(m.workqueue_depth, wq, 3), NV_OK);
	assert_int_equal(metrics_histogram_observe(m.workqueue_queue_duration_seconds, wq, 2e-8),
	                 NV_OK);
	const char *le[] = {"nvl72-operator"};
	assert_int_equal(metrics_gauge_set(m.leader_election_master_status, le, 1), NV_OK);
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(metrics_registry_render(r, &b), NV_OK);
	const char *want[] = {
	        "controller_runtime_reconcile_total{controller=\"rack\",result=\"requeue_after\"} "
	        "0\n",
	        "controller_runtime_reconcile_errors_total{controller=\"rack\"} 0\n",
	        "workqueue_depth{name=\"rack\",controller=\"rack\"} 3\n",
	        "workqueue_queue_duration_seconds_bucket{name=\"rack\",controller=\"rack\",le=\"1e-"
	        "08\"} 0\n",
	        "workqueue_queue_duration_seconds_bucket{name=\"rack\",controller=\"rack\",le=\"1e-"
	        "07\"} 1\n",
	        "leader_election_master_status{name=\"nvl72-operator\"} 1\n",
	        "# TYPE process_cpu_seconds_total counter\n",
	        "process_resident_memory_bytes ",
	        "process_open_fds ",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_non_null(strstr(buf_str(&b), want[i]));
	buf_clear(&b);
	metrics_registry_free(r);
}

static void test_metrics_gauge_set_state(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	static const char *const l[] = {"tray", "state", NULL};
	static const char *const states[] = {"None", "Cordoned", "Draining"};
	struct metrics_family *g = NULL;
	const struct metrics_desc d = {
	        "nvl72_tray_maintenance_state", "Maintenance state.", METRICS_GAUGE, l, NULL, 0, 0};
	assert_int_equal(metrics_family_register(r, &d, &g), NV_OK);
	const char *v[] = {"t03"};
	assert_int_equal(metrics_gauge_set_state(g, v, states, 3, "None"), NV_OK);
	assert_int_equal(metrics_gauge_set_state(g, v, states, 3, "Draining"), NV_OK);
	assert_int_equal(metrics_gauge_set_state(g, v, states, 3, "Exploded"), NV_E_INVAL);
	assert_render(r, "# HELP nvl72_tray_maintenance_state Maintenance state.\n"
	                 "# TYPE nvl72_tray_maintenance_state gauge\n"
	                 "nvl72_tray_maintenance_state{tray=\"t03\",state=\"None\"} 0\n"
	                 "nvl72_tray_maintenance_state{tray=\"t03\",state=\"Cordoned\"} 0\n"
	                 "nvl72_tray_maintenance_state{tray=\"t03\",state=\"Draining\"} 1\n");
	metrics_registry_free(r);
}

static void test_metrics_render_respects_out_cap(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *g = NULL;
	const struct metrics_desc d = {"nvl72_g", "h", METRICS_GAUGE, NULL, NULL, 0, 0};
	assert_int_equal(metrics_family_register(r, &d, &g), NV_OK);
	assert_int_equal(metrics_gauge_set(g, NULL, 1), NV_OK);
	struct buf b;
	buf_init(&b, 20);
	assert_int_equal(buf_append_str(&b, "keep"), NV_OK);
	assert_int_equal(metrics_registry_render(r, &b), NV_E_TOO_LARGE);
	assert_string_equal(buf_str(&b), "keep");
	buf_clear(&b);
	metrics_registry_free(r);
}

static void test_metrics_buckets_exponential(void **state)
{
	(void)state;
	double b[12];
	assert_true(metrics_buckets_exponential(1e-8, 10, 12, b));
	assert_true(b[11] > 999 && b[11] < 1001);
	assert_false(metrics_buckets_exponential(0, 10, 3, b));
	assert_false(metrics_buckets_exponential(1, 1, 3, b));
	assert_int_equal(metrics_reconcile_nbuckets, 40);
	assert_int_equal(metrics_workqueue_nbuckets, 12);
}

struct hammer {
	struct metrics_family *c;
	struct metrics_family *h;
	struct metrics_registry *r;
};

static void *hammer_updates(void *arg)
{
	struct hammer *hm = arg;
	char tray[16];
	for (int i = 0; i < 20000; i++) {
		snprintf(tray, sizeof(tray), "%d", i % 18);
		const char *v[] = {tray};
		if (metrics_counter_inc(hm->c, v) != NV_OK ||
		    metrics_histogram_observe(hm->h, v, (double)(i % 7)) != NV_OK)
			abort();
	}
	return NULL;
}

static void *hammer_render(void *arg)
{
	struct hammer *hm = arg;
	struct buf b;
	buf_init(&b, 1 << 22);
	for (int i = 0; i < 200; i++) {
		buf_reset(&b);
		if (metrics_registry_render(hm->r, &b) != NV_OK)
			abort();
	}
	buf_clear(&b);
	return NULL;
}

static void test_metrics_concurrent_updates_and_render(void **state)
{
	(void)state;
	static const char *const l[] = {"tray", NULL};
	static const double b[] = {1, 2, 4};
	struct hammer hm = {.r = metrics_registry_new()};
	const struct metrics_desc dc = {"nvl72_c", "h", METRICS_COUNTER, l, NULL, 0, 0};
	const struct metrics_desc dh = {"nvl72_h", "h", METRICS_HISTOGRAM, l, b, 3, 0};
	assert_int_equal(metrics_family_register(hm.r, &dc, &hm.c), NV_OK);
	assert_int_equal(metrics_family_register(hm.r, &dh, &hm.h), NV_OK);
	pthread_t t[5];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer_updates, &hm), 0);
	assert_int_equal(pthread_create(&t[4], NULL, hammer_render, &hm), 0);
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	double total = 0, n = 0;
	char tray[16];
	for (int i = 0; i < 18; i++) {
		snprintf(tray, sizeof(tray), "%d", i);
		const char *v[] = {tray};
		assert_int_equal(metrics_family_get(hm.c, v, &n), NV_OK);
		total += n;
	}
	assert_true(total > 79999.5 && total < 80000.5);
	metrics_registry_free(hm.r);
}

/* ---- families written at render time ---- */

struct writer_case {
	int calls;
	enum nv_err declare_err; /* of a second declaration of a taken name */
	enum nv_err bad_value;   /* of a sample with a value that is not UTF-8 */
	enum nv_err over_cap;    /* of a third series in a family capped at two */
};

static void write_two(void *arg, struct metrics_sink *s)
{
	static const char *const tl[] = {"rack", "tray", NULL};
	static const char *const ml[] = {"tray", "state", NULL};
	static const char *const states[] = {"None", "Draining"};
	const struct metrics_desc ready = {
	        "nvl72_tray_ready", "1 when \\ready.", METRICS_GAUGE, tl, NULL, 0, 2};
	const struct metrics_desc maint = {
	        "nvl72_tray_maintenance_state", "State set.", METRICS_GAUGE, ml, NULL, 0, 0};
	const struct metrics_desc empty = {
	        "nvl72_nothing", "Never sampled.", METRICS_GAUGE, NULL, NULL, 0, 0};
	const struct metrics_desc taken = {
	        "nvl72_registered", "x", METRICS_GAUGE, NULL, NULL, 0, 0};
	struct writer_case *c = arg;
	int fr = -1, fm = -1, fe = -1, ft = -1;

	c->calls++;
	assert_int_equal(metrics_sink_family(s, &ready, &fr), NV_OK);
	assert_int_equal(metrics_sink_family(s, &maint, &fm), NV_OK);
	assert_int_equal(metrics_sink_family(s, &empty, &fe), NV_OK);
	c->declare_err = metrics_sink_family(s, &taken, &ft);
	assert_int_equal(metrics_sink_family(s, &ready, &ft), NV_E_EXISTS);
	/* Families interleave; each prints whole, in the order declared. */
	assert_int_equal(metrics_sink_value(s, fr, (const char *[]){"r1", "t\"1"}, 1), NV_OK);
	assert_int_equal(metrics_sink_state(s, fm, (const char *[]){"t1"}, states, 2, "Draining"),
	                 NV_OK);
	/* The same label set again keeps the first value. */
	assert_int_equal(metrics_sink_value(s, fr, (const char *[]){"r1", "t\"1"}, 7), NV_OK);
	assert_int_equal(metrics_sink_value(s, fr, (const char *[]){"r1", "t2"}, 0.5), NV_OK);
	c->over_cap = metrics_sink_value(s, fr, (const char *[]){"r1", "t3"}, 1);
	c->bad_value = metrics_sink_state(s, fm, (const char *[]){"\xff"}, states, 2, "None");
	assert_int_equal(metrics_sink_state(s, fm, (const char *[]){"t2"}, states, 2, "Gone"),
	                 NV_E_INVAL);
	assert_int_equal(metrics_sink_value(s, 99, NULL, 1), NV_E_INVAL);
}

static void test_metrics_sink_writes_families_whole(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	const struct metrics_desc reg = {
	        "nvl72_registered", "A registered gauge.", METRICS_GAUGE, NULL, NULL, 0, 0};
	struct metrics_family *g = NULL;
	struct writer_case c = {0};

	assert_int_equal(metrics_family_register(r, &reg, &g), NV_OK);
	assert_int_equal(metrics_gauge_set(g, NULL, 3), NV_OK);
	assert_int_equal(metrics_registry_add_writer(r, write_two, &c), NV_OK);
	assert_render(r, "# HELP nvl72_registered A registered gauge.\n"
	                 "# TYPE nvl72_registered gauge\n"
	                 "nvl72_registered 3\n"
	                 "# HELP nvl72_tray_ready 1 when \\\\ready.\n"
	                 "# TYPE nvl72_tray_ready gauge\n"
	                 "nvl72_tray_ready{rack=\"r1\",tray=\"t\\\"1\"} 1\n"
	                 "nvl72_tray_ready{rack=\"r1\",tray=\"t2\"} 0.5\n"
	                 "# HELP nvl72_tray_maintenance_state State set.\n"
	                 "# TYPE nvl72_tray_maintenance_state gauge\n"
	                 "nvl72_tray_maintenance_state{tray=\"t1\",state=\"None\"} 0\n"
	                 "nvl72_tray_maintenance_state{tray=\"t1\",state=\"Draining\"} 1\n");
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.declare_err, NV_E_EXISTS);
	assert_int_equal(c.bad_value, NV_E_INVAL);
	assert_int_equal(c.over_cap, NV_E_RANGE);
	/* Nothing is kept: the next render runs the writer again, and the
	 * rejected series was counted. */
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(metrics_registry_render(r, &b), NV_OK);
	assert_int_equal(c.calls, 2);
	assert_non_null(strstr(buf_str(&b), "nvl72_metrics_series_rejected_total{family="
	                                    "\"nvl72_tray_ready\"} 1\n"));
	buf_clear(&b);
	metrics_registry_free(r);
}

static void write_many(void *arg, struct metrics_sink *s)
{
	static const char *const l[] = {"gpu", NULL};
	const struct metrics_desc d = {"nvl72_gpu_x", "Many.", METRICS_GAUGE,          l,
	                               NULL,          0,       METRICS_SERIES_HARD_MAX};
	enum nv_err *last = arg;
	char v[16];
	int f = -1;

	assert_int_equal(metrics_sink_family(s, &d, &f), NV_OK);
	for (int i = 0; i < 5000 && (*last = NV_OK) == NV_OK; i++) {
		snprintf(v, sizeof(v), "%d", i);
		if ((*last = metrics_sink_value(s, f, (const char *[]){v}, i)) != NV_OK)
			break;
	}
}

static void test_metrics_sink_respects_out_cap(void **state)
{
	(void)state;
	struct metrics_registry *r = metrics_registry_new();
	enum nv_err last = NV_OK;
	struct buf b;

	assert_int_equal(metrics_registry_add_writer(r, write_many, &last), NV_OK);
	buf_init(&b, 1 << 20);
	assert_int_equal(metrics_registry_render(r, &b), NV_OK);
	assert_int_equal(last, NV_OK);
	assert_non_null(strstr(buf_str(&b), "nvl72_gpu_x{gpu=\"4999\"} 4999\n"));
	buf_clear(&b);
	/* 5000 samples do not fit 4 KiB: the render fails and leaves out as
	 * it was. */
	buf_init(&b, 4096);
	assert_int_equal(buf_append_str(&b, "kept"), NV_OK);
	assert_int_equal(metrics_registry_render(r, &b), NV_E_TOO_LARGE);
	assert_int_equal(last, NV_E_TOO_LARGE);
	assert_string_equal(buf_str(&b), "kept");
	buf_clear(&b);
	metrics_registry_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_metrics_render_counter_gauge_exact),
	        cmocka_unit_test(test_metrics_render_histogram_exact),
	        cmocka_unit_test(test_metrics_escape_label_and_help),
	        cmocka_unit_test(test_metrics_register_rejects_bad_desc),
	        cmocka_unit_test(test_metrics_values_rejects_bad_utf8_and_long),
	        cmocka_unit_test(test_metrics_cap_rejects_new_series_and_counts),
	        cmocka_unit_test(test_metrics_many_series_lookup),
	        cmocka_unit_test(test_metrics_std_register_names),
	        cmocka_unit_test(test_metrics_gauge_set_state),
	        cmocka_unit_test(test_metrics_render_respects_out_cap),
	        cmocka_unit_test(test_metrics_buckets_exponential),
	        cmocka_unit_test(test_metrics_concurrent_updates_and_render),
	        cmocka_unit_test(test_metrics_sink_writes_families_whole),
	        cmocka_unit_test(test_metrics_sink_respects_out_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
