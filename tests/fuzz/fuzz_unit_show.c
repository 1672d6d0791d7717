// SPDX-License-Identifier: Apache-2.0
// Fuzz target for `systemctl show` output, which the agent reads to decide
// whether to stop host Fabric Manager or a colliding host IMEX unit.
#include <stddef.h>
#include <stdint.h>

#include "nvl72/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct host_unit_state s;

	(void)host_unit_show_parse((const char *)data, size, &s);
	return 0;
}
