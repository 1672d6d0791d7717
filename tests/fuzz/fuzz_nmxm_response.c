// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the NMX-M answers the fabric backend parses: accepted
// operations, operations, partition lists, the GPU list, the chassis list
// and error bodies. None may crash, leak, read out of bounds or overfill a struct.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/fabric/fabric_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct fabric_partition *all = NULL;
	struct nmxm_gpu *gpus = NULL;
	struct fabric_op op;
	struct jx_err e;
	char msg[FABRIC_MSG_LEN];
	size_t n = 0;
	long id = 0;

	if (nmxm_parse_accepted(text, size, &op, &e) == NV_OK && strlen(op.id) == 0)
		abort();
	if (nmxm_parse_operation(text, size, &op, &e) == NV_OK &&
	    (op.state > FABRIC_OP_CANCELLED || op.percent > 100 ||
	     strlen(op.message) >= sizeof(op.message)))
		abort();
	if (nmxm_parse_partition_list(text, size, &all, &n, &e) == NV_OK) {
		if (n > FABRIC_PARTITIONS_MAX)
			abort();
		for (size_t i = 0; i < n; i++)
			if (all[i].n_gpus > FABRIC_GPUS_MAX || all[i].id[0] == '\0')
				abort();
		free(all);
	}
	if (nmxm_parse_gpu_list(text, size, &gpus, &n, &e) == NV_OK) {
		if (n > NMXM_GPUS_MAX)
			abort();
		for (size_t i = 0; i < n; i++)
			if (gpus[i].id[0] == '\0' || strlen(gpus[i].id) >= sizeof(gpus[i].id))
				abort();
		free(gpus);
	}
	if (nmxm_parse_chassis_id(text, size, "1821124000042", &id, &e) == NV_OK && id < 0)
		abort();
	nmxm_error_message(text, size, msg, sizeof(msg));
	if (strlen(msg) >= sizeof(msg))
		abort();
	return 0;
}
