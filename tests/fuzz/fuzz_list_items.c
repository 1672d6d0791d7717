// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for reading a List body item by item (kube_list_scan),
// as an informer's list does with every page the apiserver sends.
#include <stddef.h>
#include <stdint.h>

#include "../../src/kube/kube_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum nv_err item(void *ud, json_t *obj)
{
	(void)kube_obj_rv(obj);
	(*(size_t *)ud)++;
	return NV_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jx_err e;
	json_t *meta = NULL;
	size_t n = 0;

	if (kube_list_scan((const char *)data, size, item, &n, &meta, &e) == NV_OK)
		(void)jx_str_or(meta, "continue", "");
	json_decref(meta);
	return 0;
}
