// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the host's hosts file: replacing the agent's block must
// stay inside the input, keep the host's own lines, and be idempotent.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a line of text starts with the begin marker. */
static bool has_marker(const char *text, size_t len)
{
	size_t m = strlen(HOST_HOSTS_BEGIN);

	for (size_t off = 0; off < len;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		if (n >= m && memcmp(text + off, HOST_HOSTS_BEGIN, m) == 0)
			return true;
		off += n + 1;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char block[] = HOST_HOSTS_BEGIN " domain d\n10.0.0.1\t" HOST_IMEX_NAME_PREFIX
	                                             "0a0b0c0d-00\n" HOST_HOSTS_END "\n";
	struct buf once, twice, gone;

	buf_init(&once, (size_t)4 << 20);
	buf_init(&twice, (size_t)4 << 20);
	buf_init(&gone, (size_t)4 << 20);
	if (host_hosts_merge((const char *)data, size, block, &once) == NV_OK) {
		/* Merging again changes nothing; removing leaves no line of ours. */
		if (host_hosts_merge(buf_str(&once), once.len, block, &twice) != NV_OK ||
		    twice.len != once.len || memcmp(buf_str(&once), buf_str(&twice), once.len) != 0)
			abort();
		if (host_hosts_merge(buf_str(&once), once.len, "", &gone) != NV_OK ||
		    has_marker(buf_str(&gone), gone.len))
			abort();
	}
	buf_clear(&once);
	buf_clear(&twice);
	buf_clear(&gone);
	return 0;
}
