// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the compatibility matrix: a CompatibilityMatrix
// object is parsed and, when valid, every verdict and a bounded set of plans
// are computed; the same bytes also go through version and range parsing.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/api_upgrade.h"
#include "nvl72/matrix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void versions_exercise(const uint8_t *data, size_t size)
{
	char a[MATRIX_RANGE_LEN];
	char b[MATRIX_RANGE_LEN];
	size_t half = size / 2;
	size_t la = half < sizeof(a) - 1 ? half : sizeof(a) - 1;
	size_t lb = size - half < sizeof(b) - 1 ? size - half : sizeof(b) - 1;
	memcpy(a, data, la);
	a[la] = '\0';
	memcpy(b, data + half, lb);
	b[lb] = '\0';
	struct matrix_version va;
	struct matrix_version vb;
	struct matrix_range r;
	if (matrix_version_parse(a, &va) == NV_OK && matrix_version_parse(b, &vb) == NV_OK) {
		int c = matrix_version_cmp(&va, &vb);
		if (c != -matrix_version_cmp(&vb, &va))
			__builtin_trap();
	}
	if (matrix_range_parse(a, &r) == NV_OK && matrix_version_parse(b, &vb) == NV_OK) {
		char out[MATRIX_RANGE_LEN];
		(void)matrix_range_contains(&r, &vb);
		matrix_range_format(&r, out, sizeof(out));
	}
}

static void matrix_exercise(const struct matrix *m)
{
	static struct matrix_plan p;
	for (unsigned i = 0; i < m->nstacks; i++) {
		for (unsigned j = 0; j < m->nstacks; j++) {
			struct matrix_verdict_info vi;
			(void)matrix_verdict_get(m, m->stacks[i].name, m->stacks[j].name, &vi);
			if (i < 6 && j < 6)
				(void)matrix_plan_build(m, m->stacks[i].name, m->stacks[j].name,
				                        MATRIX_PLAN_MULTI_HOP, &p);
		}
		struct matrix_workload_check w;
		(void)matrix_stack_check_workload(&m->stacks[i], "12.8", "2.27.7", &w);
	}
	unsigned idx[4];
	if (m->nstacks > 0 && m->stacks[0].nfixed > 0)
		(void)matrix_cve_fixed_by(m, m->stacks[0].fixed_cves[0], idx, 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	versions_exercise(data, size);
	json_error_t jerr;
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL)
		return 0;
	struct api_errors *errs = malloc(sizeof(*errs));
	struct matrix *m = NULL;
	api_errors_init(errs);
	if (api_matrix_parse(j, &m, errs) == NV_OK) {
		matrix_exercise(m);
		matrix_free(m);
	}
	free(errs);
	json_decref(j);
	return 0;
}
