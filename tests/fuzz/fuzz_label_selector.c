// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for label selectors: arbitrary bytes as the text of
// --agent-node-selector. Whatever parses is matched against a Node's labels,
// and the requirement reported as unmet must itself parse and be unmet.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/kube_ctrl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_selector *s = NULL, *again = NULL;
	char *text = malloc(size + 1), err[200], unmet[400], unmet2[400];
	json_t *labels = json_pack("{s:s,s:s,s:s}", "nvl72.io/rack", "gb300-r07", "tier", "gpu",
	                           "empty", "");

	memcpy(text, data, size);
	text[size] = '\0';
	if (kube_selector_parse(text, &s, err, sizeof(err)) == NV_OK &&
	    !kube_selector_match(s, labels, unmet, sizeof(unmet))) {
		if (kube_selector_parse(unmet, &again, err, sizeof(err)) != NV_OK ||
		    kube_selector_match(again, labels, unmet2, sizeof(unmet2)))
			abort(); /* the text of a requirement must mean that requirement */
		kube_selector_free(again);
	}
	kube_selector_free(s);
	json_decref(labels);
	free(text);
	return 0;
}
