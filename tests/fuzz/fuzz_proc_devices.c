// SPDX-License-Identifier: Apache-2.0
// Fuzz target for /proc/devices: finding a character device class's major
// by its full name must stay inside the input and the major's range.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nvl72/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned major = 0;

	if (host_proc_devices_major((const char *)data, size, "nvidia-caps-imex-channels",
	                            &major) == NV_OK &&
	    major > 4095)
		abort();
	return 0;
}
