// SPDX-License-Identifier: Apache-2.0
// Fuzz target for what the kubelet plugin reads: a ResourceClaim from the
// API (even first byte) checked against a fixed tray, and the record of
// prepared claims from disk (odd first byte). An accepted claim yields a
// plan within its bounds whose CDI spec renders; an accepted record
// prints and parses back to itself.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/agent.h"
#include "nvl72/base.h"
#include "nvl72/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void claim(const char *text, size_t len)
{
	struct agent_dra_view v;
	struct agent_dra_plan plan;
	unsigned ch[64];
	char err[600];
	json_t *c = NULL;
	struct buf b;
	size_t n;

	if (jx_loadb(text, len, NULL, &c, NULL) != NV_OK)
		return;
	memset(&v, 0, sizeof(v));
	str_copy(v.node, sizeof(v.node), "node-03");
	str_copy(v.domain_uid, sizeof(v.domain_uid), "8d3c1b2a-4e5f-4a6b-9c7d-0e1f2a3b4c5d");
	str_copy(v.domain_ns, sizeof(v.domain_ns), "team-a");
	str_copy(v.domain_name, sizeof(v.domain_name), "train");
	v.imex_ready = true;
	v.slots = 4;
	v.channels_all = true;
	v.channel_count = 8;
	if (agent_dra_claim_check(c, "team-a", "job", "5f0c3e1a-9b2d-4c61-8e7f-2a4b6c8d0e13", &v,
	                          &plan, err, sizeof(err)) == NV_OK) {
		if (plan.n_devices == 0 || plan.n_devices > AGENT_DRA_DEVICES_MAX ||
		    strcmp(plan.domain_uid, v.domain_uid) != 0)
			abort();
		for (size_t i = 0; i < plan.n_devices; i++)
			if (plan.devices[i].request[0] == '\0' ||
			    plan.devices[i].device[0] == '\0' ||
			    strcmp(plan.devices[i].pool, "node-03") != 0)
				abort();
		n = agent_dra_plan_channels(&plan, &v, ch, 64);
		buf_init(&b, (size_t)1 << 20);
		if (n == 0 || host_cdi_render("5f0c3e1a-9b2d-4c61-8e7f-2a4b6c8d0e13", 204, ch, n,
		                              &b) != NV_OK)
			abort();
		buf_clear(&b);
	} else if (strncmp(err, "claim team-a/job: ", 18) != 0) {
		abort(); /* every refusal names the claim */
	}
	json_decref(c);
}

static void record(const char *text, size_t len)
{
	char err[300], *out;
	json_t *r = NULL, *back = NULL;

	if (agent_dra_record_parse(text, len, &r, err, sizeof(err)) != NV_OK)
		return;
	out = json_dumps(r, JSON_SORT_KEYS);
	if (out == NULL ||
	    agent_dra_record_parse(out, strlen(out), &back, err, sizeof(err)) != NV_OK ||
	    !json_equal(r, back))
		abort();
	free(out);
	json_decref(back);
	json_decref(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0)
		claim((const char *)data + 1, size - 1);
	else
		record((const char *)data + 1, size - 1);
	return 0;
}
