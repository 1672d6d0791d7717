// SPDX-License-Identifier: Apache-2.0
// Maintenance windows: weekly recurrences in UTC (a window may close on the
// next day) and freezes, and the earliest time an upgrade may start. Pure
// arithmetic on wall milliseconds, so the clock is the caller's.
#include <stdio.h>
#include <string.h>

#include "nvl72/operator_upgrade.h"

#define DAY_MS 86400000LL
#define MIN_MS 60000LL

/* Monday = 0; 1970-01-01 was a Thursday. */
static int weekday(int64_t day)
{
	int64_t w = (day + 3) % 7;
	return (int)(w < 0 ? w + 7 : w);
}

static int64_t day_of(int64_t t_ms)
{
	return t_ms >= 0 ? t_ms / DAY_MS : -((-t_ms + DAY_MS - 1) / DAY_MS);
}

static bool day_set(const struct api_window *w, int64_t day)
{
	return (w->days >> weekday(day)) & 1u;
}

bool op_window_open(const struct api_window *w, int64_t t_ms)
{
	int64_t day = day_of(t_ms);
	int64_t min = (t_ms - day * DAY_MS) / MIN_MS;
	if (w->start_min == w->end_min)
		return day_set(w, day);
	if (w->start_min < w->end_min)
		return day_set(w, day) && min >= w->start_min && min < w->end_min;
	return (day_set(w, day) && min >= w->start_min) ||
	       (day_set(w, day - 1) && min < w->end_min);
}

static bool covers(const struct api_window *w, uint32_t layers)
{
	return w->layers == 0 || (w->layers & layers) == layers;
}

/* The first opening of w strictly after t, or -1. */
static int64_t next_open(const struct api_window *w, int64_t t_ms)
{
	int64_t day = day_of(t_ms);
	for (int64_t d = day; d <= day + 8; d++) {
		int64_t at = d * DAY_MS + (int64_t)w->start_min * MIN_MS;
		if (at > t_ms && day_set(w, d))
			return at;
	}
	return -1;
}

static const struct api_freeze *freeze_at(const struct api_rack *r, int64_t t_ms)
{
	for (unsigned i = 0; i < r->nfreezes; i++)
		if (t_ms >= r->freezes[i].start_ms && t_ms < r->freezes[i].end_ms)
			return &r->freezes[i];
	return NULL;
}

int64_t op_window_next(const struct api_rack *r, uint32_t layers, int64_t now_ms, bool skip_windows,
                       char *window, size_t cap, char *freeze, size_t fcap)
{
	int64_t t = now_ms;
	unsigned usable = 0;

	if (cap)
		window[0] = '\0';
	if (fcap)
		freeze[0] = '\0';
	if (skip_windows)
		return now_ms;
	for (unsigned i = 0; i < r->nwindows; i++)
		usable += covers(&r->windows[i], layers);
	if (r->nwindows > 0 && usable == 0)
		return -1;
	/* Each round either returns or moves t forward past a freeze or to a
	 * window's opening, so the loop ends at the horizon. */
	while (t - now_ms <= OP_WINDOW_HORIZON_MS) {
		const struct api_freeze *f = freeze_at(r, t);
		int64_t best = -1;
		if (f) {
			if (fcap)
				snprintf(freeze, fcap, "%s", f->name);
			t = f->end_ms;
			continue;
		}
		if (r->nwindows == 0)
			return t;
		for (unsigned i = 0; i < r->nwindows; i++) {
			const struct api_window *w = &r->windows[i];
			if (!covers(w, layers))
				continue;
			if (op_window_open(w, t)) {
				if (cap)
					snprintf(window, cap, "%s", w->name);
				return t;
			}
			int64_t n = next_open(w, t);
			if (n > 0 && (best < 0 || n < best))
				best = n;
		}
		if (best < 0)
			return -1;
		t = best;
	}
	return -1;
}
