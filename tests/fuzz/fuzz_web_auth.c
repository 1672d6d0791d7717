// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for what the web server reads of a client itself:
// Authorization (bearer token), Origin against Host, and a feed client's
// first message ({"token":"..."}). A token, when found, must be non-empty
// and without blanks (a slice of the header, or a copy within the cap).
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/web/web_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *hdr = (const char *)data;
	const char *tok = NULL;
	size_t n = 0;
	if (web_bearer_parse(hdr, size, &tok, &n) == NV_OK) {
		if (n == 0 || n > WEB_TOKEN_MAX || tok < hdr || tok + n > hdr + size)
			abort();
		for (size_t i = 0; i < n; i++)
			if (tok[i] == ' ' || tok[i] == '\t' || tok[i] == '\0')
				abort();
	}
	char *t = NULL;
	if (web_auth_message_parse(hdr, size, &t) == NV_OK) {
		size_t tn = strlen(t);
		if (tn == 0 || tn > WEB_TOKEN_MAX || strpbrk(t, " \t\"") != NULL)
			abort();
		free(t);
	} else if (t != NULL) {
		abort();
	}
	/* The first NUL splits the input into Origin and Host. */
	char *text = malloc(size + 2);
	memcpy(text, data, size);
	text[size] = '\0';
	text[size + 1] = '\0';
	const char *host = text + strlen(text) + 1;
	(void)web_origin_matches(text, host);
	free(text);
	return 0;
}
