// SPDX-License-Identifier: Apache-2.0
// The operation and status helpers every fabric backend and the generic
// calls share: operation state names, whether an operation is over, the
// status message, and the schedule of polls while an operation runs. It
// stands below fabric.c, oob.c and the backends and calls none of them.
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fabric_int.h"
#include "nvl72/timeutil.h"

const char *fabric_op_state_name(enum fabric_op_state s)
{
	switch (s) {
	case FABRIC_OP_PENDING:
		return "pending";
	case FABRIC_OP_IN_PROGRESS:
		return "in-progress";
	case FABRIC_OP_COMPLETED:
		return "completed";
	case FABRIC_OP_FAILED:
		return "failed";
	case FABRIC_OP_CANCELLED:
		return "cancelled";
	}
	return "unknown";
}

bool fabric_op_done(enum fabric_op_state s)
{
	return s == FABRIC_OP_COMPLETED || s == FABRIC_OP_FAILED || s == FABRIC_OP_CANCELLED;
}

void fabric_status_reset(struct fabric_status *st)
{
	if (st != NULL)
		memset(st, 0, sizeof(*st));
}

void fabric_status_msg(struct fabric_status *st, const char *fmt, ...)
{
	va_list ap;

	if (st == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
}

void fabric_poll_start(struct fabric_poll *p, long interval_ms, long max_interval_ms,
                       long deadline_ms)
{
	p->end_ms = time_mono_ms() + deadline_ms;
	p->interval_ms = interval_ms;
	p->max_interval_ms = max_interval_ms;
	p->deadline_ms = deadline_ms;
}

/* Sleeps ms in slices, false when stop turned true. */
static bool nap(int64_t ms, const volatile bool *stop)
{
	int64_t end = time_mono_ms() + ms;

	while (time_mono_ms() < end) {
		if (stop != NULL && *stop)
			return false;
		time_sleep_ms(end - time_mono_ms() < 50 ? end - time_mono_ms() : 50);
	}
	return stop == NULL || !*stop;
}

enum nv_err fabric_poll_next(struct fabric_poll *p, const char *id, enum fabric_op_state s,
                             const volatile bool *stop, struct fabric_status *st)
{
	int64_t left = p->end_ms - time_mono_ms();

	if (left <= 0) {
		fabric_status_msg(st, "operation %s still %s after %ld ms", id,
		                  fabric_op_state_name(s), p->deadline_ms);
		return NV_E_TIMEOUT;
	}
	if (!nap(p->interval_ms < left ? p->interval_ms : left, stop)) {
		fabric_status_msg(st, "stopped while waiting for operation %s", id);
		return NV_E_CANCELLED;
	}
	p->interval_ms =
	        p->interval_ms * 2 > p->max_interval_ms ? p->max_interval_ms : p->interval_ms * 2;
	return NV_OK;
}
