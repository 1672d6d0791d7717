// SPDX-License-Identifier: Apache-2.0
// Fuzz target for nvidia-imex-ctl's answers: the -q state word and the
// -N -j node report. Neither may crash, leak or read out of bounds.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nvl72/agent_host.h"
#include "nvl72/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agent_imex_domain_status st;
	enum agent_imex_daemon d;
	unsigned ready, conn;
	char why[128];

	(void)agent_imex_q_parse((const char *)data, size, &d);
	if (agent_imex_nodes_parse((const char *)data, size, &st, why, sizeof(why)) == NV_OK) {
		agent_imex_domain_count(&st, "10.42.8.11", &ready, &conn);
		if (st.n_nodes > AGENT_IMEX_NODES_MAX)
			abort();
	}
	return 0;
}
