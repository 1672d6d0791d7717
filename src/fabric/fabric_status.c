// SPDX-License-Identifier: Apache-2.0
// The operation and status helpers every fabric backend and the generic
// calls share: operation state names, whether an operation is over, and the
// status message. It stands below fabric.c and the backends and calls
// neither.
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fabric_int.h"

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
