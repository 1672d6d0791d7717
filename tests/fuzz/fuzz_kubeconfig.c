// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the kubeconfig parser: arbitrary bytes through the
// YAML conversion, merging and context resolution. Any crash, leak or
// sanitizer report is a bug; errors are the expected outcome.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kube/kube_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_config *c = NULL;
	struct kube_status st;
	char *text = malloc(size + 1);

	memcpy(text, data, size);
	text[size] = '\0';
	log_set_level(LOG_LVL_ERROR);
	/* Relative file references resolve under a directory that has none. */
	if (kube_config_parse(text, size, "/nonexistent", NULL, &c, &st) == NV_OK) {
		(void)kube_config_server(c);
		(void)kube_config_namespace(c);
		kube_config_free(c);
	}
	free(text);
	return 0;
}
