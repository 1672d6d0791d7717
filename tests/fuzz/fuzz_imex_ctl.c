// SPDX-License-Identifier: Apache-2.0
// Fuzz target for nvidia-imex-ctl's answers: the -q state word and the
// -N -j node report. Neither may crash, leak or read out of bounds.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nvl72/host.h"
#include "nvl72/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct host_imex_domain_status st;
	enum host_imex_daemon d;
	unsigned ready, conn;
	char why[128];

	(void)host_imex_q_parse((const char *)data, size, &d);
	if (host_imex_nodes_parse((const char *)data, size, &st, why, sizeof(why)) == NV_OK) {
		host_imex_domain_count(&st, "10.42.8.11", &ready, &conn);
		if (st.n_nodes > HOST_IMEX_NODES_MAX)
			abort();
	}
	return 0;
}
