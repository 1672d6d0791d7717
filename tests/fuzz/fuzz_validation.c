// SPDX-License-Identifier: Apache-2.0
// Fuzz target for what a validation run leaves behind: the command's output
// (our busbw_gbps/transport lines and nccl-tests' summary) and the agent's
// record of the run in its state dir.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/host.h"
#include "nvl72/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char tr[HOST_VALIDATION_TRANSPORT_LEN], why[HOST_ERRMSG_LEN];
	struct host_val_result r;
	long long pid;
	unsigned long long ps;
	double bw = -1;

	if (host_validation_output_parse((const char *)data, size, &bw, tr, sizeof(tr), why,
	                                 sizeof(why)) == NV_OK) {
		if (!(bw >= 0 && bw <= HOST_VALIDATION_BUSBW_MAX) || strlen(tr) >= sizeof(tr))
			abort();
	} else if (why[0] == '\0') {
		abort(); /* every refusal says why */
	}
	if (host_validation_state_parse((const char *)data, size, &r, &pid, &ps) == NV_OK) {
		if (r.id[0] == '\0' || r.phase == HOST_VAL_NONE || pid < 0 ||
		    strlen(r.message) >= sizeof(r.message) ||
		    (r.has_busbw &&
		     !(r.busbw_gbps >= 0 && r.busbw_gbps <= HOST_VALIDATION_BUSBW_MAX)))
			abort();
	}
	return 0;
}
