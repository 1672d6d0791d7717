// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for metric label values: arbitrary bytes become up to
// three label values, and whatever the registry accepts must render as
// one line per sample whose escaped values read back to the originals.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads one escaped value starting after its opening quote. */
static const char *unescape(const char *p, struct buf *out)
{
	for (; *p && *p != '"'; p++) {
		if (*p == '\n')
			abort(); /* a raw newline would split the sample */
		if (*p != '\\') {
			(void)buf_append_byte(out, *p);
			continue;
		}
		p++;
		if (*p == 'n')
			(void)buf_append_byte(out, '\n');
		else if (*p == '\\' || *p == '"')
			(void)buf_append_byte(out, *p);
		else
			abort(); /* no other escape is ever written */
	}
	if (*p != '"')
		abort();
	return p + 1;
}

static void check_roundtrip(const char *text, char *const vals[3])
{
	static const char *const names[] = {"rack", "tray", "gpu"};
	const char *p = strchr(text, '{');
	if (p == NULL)
		abort();
	p++;
	for (int i = 0; i < 3; i++) {
		size_t nl = strlen(names[i]);
		if (strncmp(p, names[i], nl) != 0 || p[nl] != '=' || p[nl + 1] != '"')
			abort();
		struct buf v;
		buf_init(&v, 4096);
		p = unescape(p + nl + 2, &v);
		if (strcmp(buf_str(&v), vals[i]) != 0)
			abort();
		buf_clear(&v);
		if (*p == ',')
			p++;
	}
	if (strncmp(p, "} 1\n", 4) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const labels[] = {"rack", "tray", "gpu", NULL};
	char *vals[3] = {NULL, NULL, NULL};
	size_t start = 0;
	for (int i = 0; i < 3; i++) {
		size_t end = start;
		while (end < size && data[end] != 0)
			end++;
		vals[i] = malloc(end - start + 1);
		memcpy(vals[i], data + start, end - start);
		vals[i][end - start] = '\0';
		start = end < size ? end + 1 : end;
	}
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f = NULL;
	const struct metrics_desc d = {
	        "nvl72_fuzz", "fuzz \\ help\n", METRICS_GAUGE, labels, NULL, 0, 2};
	if (metrics_family_register(r, &d, &f) != NV_OK)
		abort();
	const char *v[] = {vals[0], vals[1], vals[2]};
	if (metrics_gauge_set(f, v, 1) == NV_OK) {
		struct buf out;
		buf_init(&out, 1 << 20);
		if (metrics_registry_render(r, &out) != NV_OK)
			abort();
		check_roundtrip(buf_str(&out), vals);
		buf_clear(&out);
		if (metrics_family_remove(f, v) != NV_OK)
			abort();
	}
	metrics_registry_free(r);
	for (int i = 0; i < 3; i++)
		free(vals[i]);
	return 0;
}
