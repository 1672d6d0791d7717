// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the driver's host files: /proc/driver/nvidia/version,
// /sys/module/nvidia/version, /proc/driver/nvidia/params and version
// comparison on whatever came out of them.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/host.h"
#include "nvl72/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct host_driver_params params;
	struct host_driver_info d = {0};
	char v[HOST_VERSION_LEN];
	int c;

	if (host_proc_version_parse((const char *)data, size, &d) == NV_OK) {
		if (strlen(d.version) >= sizeof(d.version) ||
		    host_version_cmp(d.version, "580.95.05", &c) != NV_OK)
			abort();
	}
	if (host_sys_version_parse((const char *)data, size, v, sizeof(v)) == NV_OK)
		(void)host_version_cmp(v, "615.23", &c);
	if (host_params_parse((const char *)data, size, &params) == NV_OK &&
	    params.n > HOST_PARAMS_MAX)
		abort();
	return 0;
}
