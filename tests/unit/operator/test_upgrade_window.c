// SPDX-License-Identifier: Apache-2.0
// Unit tests for the maintenance-window arithmetic: weekly UTC windows that
// close on the next day (also across the week's end), freezes overlapping
// windows, windows limited to layers, the security bypass and clock jumps.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/operator_upgrade.h"

#define MON 1794787200000LL /* 2026-11-16T00:00:00Z, a Monday */
#define DAY 86400000LL
#define HOUR 3600000LL
#define MIN 60000LL
#define ALL_LAYERS (MATRIX_BIT(MATRIX_L_NODE) | MATRIX_BIT(MATRIX_L_WORKLOAD))

enum { B_MON = 1, B_TUE = 2, B_WED = 4, B_THU = 8, B_FRI = 16, B_SAT = 32, B_SUN = 64 };

static struct api_window win(const char *name, uint8_t days, int start_h, int end_h)
{
	struct api_window w = {.days = days, .start_min = start_h * 60, .end_min = end_h * 60};
	snprintf(w.name, sizeof(w.name), "%s", name);
	return w;
}

static void test_op_window_open_overnight(void **state)
{
	(void)state;
	struct api_window w = win("night", B_TUE | B_WED, 22, 4);
	assert_false(op_window_open(&w, MON + 23 * HOUR)); /* Monday night */
	assert_false(op_window_open(&w, MON + DAY + 21 * HOUR + 59 * MIN));
	assert_true(op_window_open(&w, MON + DAY + 22 * HOUR)); /* Tuesday 22:00 */
	assert_true(op_window_open(&w, MON + 2 * DAY + 3 * HOUR + 59 * MIN));
	assert_false(op_window_open(&w, MON + 2 * DAY + 4 * HOUR)); /* Wednesday 04:00 */
	assert_true(op_window_open(&w, MON + 3 * DAY + 1 * HOUR));  /* Thursday 01:00, from Wed */
	assert_false(op_window_open(&w, MON + 4 * DAY + 1 * HOUR)); /* Friday 01:00 */
}

static void test_op_window_open_week_boundary(void **state)
{
	(void)state;
	struct api_window w = win("sunday-night", B_SUN, 22, 6);
	int64_t sun = MON + 6 * DAY, next_mon = MON + 7 * DAY;
	assert_true(op_window_open(&w, sun + 23 * HOUR));
	assert_true(op_window_open(&w, next_mon + 5 * HOUR)); /* Monday morning, opened Sunday */
	assert_false(op_window_open(&w, next_mon + 6 * HOUR));
	assert_false(op_window_open(&w, MON + 5 * HOUR + DAY)); /* Tuesday morning */
	struct api_window whole = win("saturday", B_SAT, 0, 0);
	assert_true(op_window_open(&whole, MON + 5 * DAY + 13 * HOUR));
	assert_false(op_window_open(&whole, MON + 6 * DAY + 13 * HOUR));
	/* Before the epoch's first Monday too. */
	assert_true(op_window_open(&w, -4 * DAY + 23 * HOUR)); /* 1969-12-28, a Sunday */
}

static struct api_rack *rack_new(void)
{
	struct api_rack *r = calloc(1, sizeof(*r));
	snprintf(r->meta.name, sizeof(r->meta.name), "r07");
	return r;
}

static void test_op_window_next_windows(void **state)
{
	(void)state;
	struct api_rack *r = rack_new();
	char w[64], f[64];
	assert_int_equal(
	        op_window_next(r, ALL_LAYERS, MON + HOUR, false, w, sizeof(w), f, sizeof(f)),
	        MON + HOUR); /* no window: any time */
	assert_string_equal(w, "");
	r->windows[r->nwindows++] = win("weekday-night", B_TUE | B_WED | B_THU, 22, 4);
	r->windows[r->nwindows++] = win("saturday", B_SAT, 6, 18);
	assert_int_equal(
	        op_window_next(r, ALL_LAYERS, MON + 12 * HOUR, false, w, sizeof(w), f, sizeof(f)),
	        MON + DAY + 22 * HOUR);
	assert_string_equal(w, "weekday-night");
	/* Inside a window: now. */
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON + 2 * DAY + HOUR, false, w, sizeof(w), f,
	                                sizeof(f)),
	                 MON + 2 * DAY + HOUR);
	/* Friday noon: Saturday 06:00 comes first. */
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON + 4 * DAY + 12 * HOUR, false, w,
	                                sizeof(w), f, sizeof(f)),
	                 MON + 5 * DAY + 6 * HOUR);
	assert_string_equal(w, "saturday");
	/* Saturday 19:00: across the week's end to Tuesday night. */
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON + 5 * DAY + 19 * HOUR, false, w,
	                                sizeof(w), f, sizeof(f)),
	                 MON + 8 * DAY + 22 * HOUR);
	free(r);
}

static void test_op_window_next_layers(void **state)
{
	(void)state;
	struct api_rack *r = rack_new();
	char w[64], f[64];
	r->windows[r->nwindows] = win("saturday", B_SAT, 6, 18);
	r->windows[r->nwindows++].layers = MATRIX_BIT(MATRIX_L_NODE);
	/* A window for the node layer only cannot start an upgrade that also
	 * touches workloads. */
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON, false, w, sizeof(w), f, sizeof(f)), -1);
	assert_int_equal(op_window_next(r, MATRIX_BIT(MATRIX_L_NODE), MON, false, w, sizeof(w), f,
	                                sizeof(f)),
	                 MON + 5 * DAY + 6 * HOUR);
	free(r);
}

static void test_op_window_next_freezes(void **state)
{
	(void)state;
	struct api_rack *r = rack_new();
	char w[64], f[64];
	r->windows[r->nwindows++] = win("weekday-night", B_TUE | B_WED, 22, 4);
	/* A freeze over the start of Tuesday's window: the rest of it. */
	r->freezes[0] = (struct api_freeze){.name = "deploy",
	                                    .start_ms = MON + DAY + 20 * HOUR,
	                                    .end_ms = MON + 2 * DAY + 2 * HOUR};
	r->nfreezes = 1;
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON, false, w, sizeof(w), f, sizeof(f)),
	                 MON + 2 * DAY + 2 * HOUR);
	assert_string_equal(w, "weekday-night");
	assert_string_equal(f, "deploy");
	/* A freeze over the whole of Tuesday's window: Wednesday's. */
	r->freezes[0].end_ms = MON + 2 * DAY + 5 * HOUR;
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON, false, w, sizeof(w), f, sizeof(f)),
	                 MON + 2 * DAY + 22 * HOUR);
	/* Two freezes back to back. */
	r->freezes[1] = (struct api_freeze){
	        .name = "year-end", .start_ms = MON + 2 * DAY + 5 * HOUR, .end_ms = MON + 30 * DAY};
	r->nfreezes = 2;
	int64_t t = op_window_next(r, ALL_LAYERS, MON, false, w, sizeof(w), f, sizeof(f));
	assert_true(t >= MON + 30 * DAY);
	assert_true(op_window_open(&r->windows[0], t));
	assert_string_equal(f, "year-end");
	/* The security class ignores windows and freezes. */
	assert_int_equal(
	        op_window_next(r, ALL_LAYERS, MON + 10 * DAY, true, w, sizeof(w), f, sizeof(f)),
	        MON + 10 * DAY);
	/* No window, only a freeze: its end. */
	r->nwindows = 0;
	assert_int_equal(
	        op_window_next(r, ALL_LAYERS, MON + 3 * DAY, false, w, sizeof(w), f, sizeof(f)),
	        MON + 30 * DAY);
	free(r);
}

static void test_op_window_next_clock_jumps(void **state)
{
	(void)state;
	struct api_rack *r = rack_new();
	char w[64], f[64];
	r->windows[r->nwindows++] = win("weekday-night", B_TUE, 22, 4);
	int64_t a =
	        op_window_next(r, ALL_LAYERS, MON + 12 * HOUR, false, w, sizeof(w), f, sizeof(f));
	/* The clock steps back a day: the same opening, found again. */
	int64_t b = op_window_next(r, ALL_LAYERS, MON - DAY, false, w, sizeof(w), f, sizeof(f));
	assert_int_equal(a, MON + DAY + 22 * HOUR);
	assert_int_equal(b, a);
	/* The clock jumps into the window: now; past it: next week's. */
	assert_int_equal(op_window_next(r, ALL_LAYERS, a + HOUR, false, w, sizeof(w), f, sizeof(f)),
	                 a + HOUR);
	assert_int_equal(
	        op_window_next(r, ALL_LAYERS, a + 7 * HOUR, false, w, sizeof(w), f, sizeof(f)),
	        a + 7 * DAY);
	/* A freeze past the horizon never yields a start. */
	r->freezes[0] = (struct api_freeze){.name = "forever",
	                                    .start_ms = MON,
	                                    .end_ms = MON + OP_WINDOW_HORIZON_MS + 10 * DAY};
	r->nfreezes = 1;
	assert_int_equal(op_window_next(r, ALL_LAYERS, MON, false, w, sizeof(w), f, sizeof(f)), -1);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_window_open_overnight),
	        cmocka_unit_test(test_op_window_open_week_boundary),
	        cmocka_unit_test(test_op_window_next_windows),
	        cmocka_unit_test(test_op_window_next_layers),
	        cmocka_unit_test(test_op_window_next_freezes),
	        cmocka_unit_test(test_op_window_next_clock_jumps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
