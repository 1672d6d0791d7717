// SPDX-License-Identifier: Apache-2.0
// Unit tests for the work queue: de-duplication, the processing set,
// delayed adds, per-item exponential backoff, forget, shutdown, workers.
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/base.h"
#include "nvl72/kube_ctrl.h"

static void test_kube_workqueue_add_dedupes(void **state)
{
	(void)state;
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	kube_workqueue_add(q, "a");
	kube_workqueue_add(q, "b");
	kube_workqueue_add(q, "a");
	assert_int_equal(kube_workqueue_len(q), 2);
	char *k = kube_workqueue_get(q);
	assert_string_equal(k, "a");
	/* Re-added while processing: queued again only at done. */
	kube_workqueue_add(q, "a");
	assert_int_equal(kube_workqueue_len(q), 1);
	kube_workqueue_done(q, k);
	assert_int_equal(kube_workqueue_len(q), 2);
	free(k);
	k = kube_workqueue_get(q);
	assert_string_equal(k, "b");
	kube_workqueue_done(q, k);
	free(k);
	kube_workqueue_free(q);
}

struct wq_seen {
	int added, retried, waited, worked;
	double waited_s, worked_s;
};

static void seen_added(void *arg)
{
	((struct wq_seen *)arg)->added++;
}
static void seen_retried(void *arg)
{
	((struct wq_seen *)arg)->retried++;
}
static void seen_waited(void *arg, double s)
{
	((struct wq_seen *)arg)->waited++;
	((struct wq_seen *)arg)->waited_s += s;
}
static void seen_worked(void *arg, double s)
{
	((struct wq_seen *)arg)->worked++;
	((struct wq_seen *)arg)->worked_s += s;
}

/* What the workqueue_* metrics are built from: a duplicate add is no add,
 * a delayed add is a retry, queue and work times are measured, and the
 * keys held by workers show as unfinished work. */
static void test_kube_workqueue_reports_metrics(void **state)
{
	(void)state;
	struct wq_seen seen = {0};
	struct kube_workqueue_metrics m = {.arg = &seen,
	                                   .added = seen_added,
	                                   .retried = seen_retried,
	                                   .waited = seen_waited,
	                                   .worked = seen_worked};
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	double unfinished, longest;
	kube_workqueue_set_metrics(q, &m);
	kube_workqueue_add(q, "a");
	kube_workqueue_add(q, "a");
	assert_int_equal(seen.added, 1);
	kube_workqueue_add_after(q, "b", 30);
	assert_int_equal(seen.retried, 1);
	char *k = kube_workqueue_get(q);
	int64_t ta = time_mono_ms(); /* a is held since before this */
	assert_string_equal(k, "a");
	assert_int_equal(seen.waited, 1);
	kube_workqueue_in_progress(q, &unfinished, &longest);
	assert_true(unfinished >= 0 && longest >= 0);
	char *k2 = kube_workqueue_get(q); /* b, once its 30 ms are up */
	assert_string_equal(k2, "b");
	assert_int_equal(seen.added, 2);
	assert_true(seen.waited_s >= 0.0);
	int64_t tb = time_mono_ms();
	kube_workqueue_in_progress(q, &unfinished, &longest);
	assert_true(tb - ta >= 20); /* b waited out most of its 30 ms meanwhile */
	assert_true(longest * 1000 >= (double)(tb - ta));
	assert_true(unfinished >= longest);
	int64_t td = time_mono_ms();
	kube_workqueue_done(q, k);
	kube_workqueue_done(q, k2);
	assert_int_equal(seen.worked, 2);
	assert_true(seen.worked_s * 1000 >= (double)(td - ta));
	kube_workqueue_in_progress(q, &unfinished, &longest);
	assert_true(unfinished == 0 && longest == 0);
	free(k);
	free(k2);
	kube_workqueue_free(q);
}

static void test_kube_workqueue_add_after_orders_by_time(void **state)
{
	(void)state;
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	int64_t t0 = time_mono_ms();
	kube_workqueue_add_after(q, "late", 120);
	kube_workqueue_add_after(q, "early", 40);
	kube_workqueue_add_after(q, "early", 500); /* a later duplicate is ignored */
	char *k = kube_workqueue_get(q);
	assert_string_equal(k, "early");
	assert_true(time_mono_ms() - t0 >= 40);
	kube_workqueue_done(q, k);
	free(k);
	k = kube_workqueue_get(q);
	assert_string_equal(k, "late");
	assert_true(time_mono_ms() - t0 >= 120);
	kube_workqueue_done(q, k);
	free(k);
	kube_workqueue_free(q);
}

static void test_kube_workqueue_rate_limited_backoff(void **state)
{
	(void)state;
	struct kube_workqueue_opts o = {.base_delay_ms = 5, .max_delay_ms = 40};
	struct kube_workqueue *q = kube_workqueue_new("t", &o);
	int64_t waits[6];
	for (int i = 0; i < 6; i++) {
		int64_t t0 = time_mono_ms();
		kube_workqueue_add_rate_limited(q, "x");
		char *k = kube_workqueue_get(q);
		waits[i] = time_mono_ms() - t0;
		kube_workqueue_done(q, k);
		free(k);
	}
	assert_int_equal(kube_workqueue_num_requeues(q, "x"), 6);
	assert_true(waits[0] >= 5 && waits[1] >= 10 && waits[2] >= 20 && waits[3] >= 40);
	assert_true(waits[5] < 200); /* capped at 40 ms */
	kube_workqueue_forget(q, "x");
	assert_int_equal(kube_workqueue_num_requeues(q, "x"), 0);
	kube_workqueue_free(q);
}

static void test_kube_workqueue_defaults_5ms_to_1000s(void **state)
{
	(void)state;
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	for (int i = 0; i < 40; i++)
		kube_workqueue_add_rate_limited(q, "y");
	assert_int_equal(kube_workqueue_num_requeues(q, "y"), 40);
	assert_int_equal(kube_workqueue_len(q), 0); /* all still waiting */
	kube_workqueue_free(q);
}

static void test_kube_workqueue_shutdown_unblocks(void **state)
{
	(void)state;
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	kube_workqueue_add(q, "z");
	kube_workqueue_shutdown(q);
	assert_null(kube_workqueue_get(q));
	kube_workqueue_add(q, "w");
	assert_true(kube_workqueue_shutting_down(q));
	kube_workqueue_free(q);
}

/* A new term's workers get a working queue: what was queued stays, adds
 * count again. */
static void test_kube_workqueue_reopen_after_shutdown(void **state)
{
	(void)state;
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	char *k1, *k2;
	kube_workqueue_add(q, "z");
	kube_workqueue_shutdown(q);
	kube_workqueue_add(q, "w"); /* ignored while shut down */
	kube_workqueue_reopen(q);
	assert_false(kube_workqueue_shutting_down(q));
	kube_workqueue_add(q, "v");
	assert_int_equal(kube_workqueue_len(q), 2);
	k1 = kube_workqueue_get(q);
	k2 = kube_workqueue_get(q);
	assert_string_equal(k1, "z");
	assert_string_equal(k2, "v");
	kube_workqueue_done(q, k1);
	kube_workqueue_done(q, k2);
	free(k1);
	free(k2);
	kube_workqueue_free(q);
}

struct counter {
	atomic_int calls;
	atomic_int concurrent, max_concurrent;
	atomic_int fails_left;
};

static struct kube_result reconcile(void *ud, const char *key)
{
	struct counter *c = ud;
	(void)key;
	int now = atomic_fetch_add(&c->concurrent, 1) + 1;
	int prev = atomic_load(&c->max_concurrent);
	while (now > prev && !atomic_compare_exchange_weak(&c->max_concurrent, &prev, now))
		;
	time_sleep_ms(2);
	atomic_fetch_add(&c->calls, 1);
	atomic_fetch_sub(&c->concurrent, 1);
	if (strcmp(key, "flaky") == 0 && atomic_fetch_sub(&c->fails_left, 1) > 0)
		return (struct kube_result){.err = NV_E_CONFLICT};
	return (struct kube_result){0};
}

static void test_kube_workers_start_processes_and_retries(void **state)
{
	(void)state;
	struct counter c = {0};
	atomic_store(&c.fails_left, 3);
	struct kube_workqueue *q = kube_workqueue_new("t", NULL);
	struct kube_workers *w = kube_workers_start(q, 4, reconcile, &c);
	char key[16];
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		kube_workqueue_add(q, key);
	}
	kube_workqueue_add(q, "flaky");
	for (int i = 0; i < 200 && atomic_load(&c.calls) < 24; i++)
		time_sleep_ms(10);
	assert_int_equal(atomic_load(&c.calls), 24); /* 20 + flaky 3 failures + 1 success */
	assert_true(atomic_load(&c.max_concurrent) > 1);
	assert_int_equal(kube_workqueue_num_requeues(q, "flaky"), 0); /* forgotten on success */
	kube_workers_stop(w);
	kube_workqueue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_workqueue_add_dedupes),
	        cmocka_unit_test(test_kube_workqueue_reports_metrics),
	        cmocka_unit_test(test_kube_workqueue_add_after_orders_by_time),
	        cmocka_unit_test(test_kube_workqueue_rate_limited_backoff),
	        cmocka_unit_test(test_kube_workqueue_defaults_5ms_to_1000s),
	        cmocka_unit_test(test_kube_workqueue_shutdown_unblocks),
	        cmocka_unit_test(test_kube_workqueue_reopen_after_shutdown),
	        cmocka_unit_test(test_kube_workers_start_processes_and_retries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
