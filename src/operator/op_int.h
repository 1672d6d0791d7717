/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/operator/: what the process wiring (op.c) drives besides
 * the controller table: the domain metrics (op_metrics.c). Included by
 * op.c and op_metrics.c only; the context the controllers share is
 * op_ctx.h. No unit test or fuzz target includes it. */
#ifndef NVL72_OP_INT_H
#define NVL72_OP_INT_H

#include <stdbool.h>

#include "op_ctx.h"

/* The label the leading replica puts on its own pod (op.c); the chart's
 * dashboard Service selects it. */
#define OP_LEADER_LABEL "nvl72.io/operator-leader"

/* op_metrics.c */
enum nv_err op_metrics_register(struct op *op);
void op_metrics_leading(struct op *op, bool leading);

#endif
