// SPDX-License-Identifier: Apache-2.0
// The printed name of an out-of-band target ("switch-3", "compute-12"),
// shared by the generic calls in oob.c and the backends, below both.
#include <stdio.h>

#include "nvl72/oob.h"

void oob_target_name(const struct oob_target *t, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s-%u", t->kind == OOB_SWITCH_TRAY ? "switch" : "compute", t->index);
}
