// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the CR parsers: the first byte picks the kind, the
// rest is the object's JSON. A valid object also goes through the checks
// that need only itself, and every error list is formatted.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/api_domain.h"
#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void rack_one(const json_t *j, struct api_errors *e)
{
	struct api_rack *r = NULL;
	if (api_rack_parse(j, &r, e) != NV_OK)
		return;
	const struct api_rack *others[] = {r};
	(void)api_rack_check_unique(r, others, 1, e);
	api_rack_free(r);
}

static void partition_one(const json_t *j, struct api_errors *e)
{
	struct api_rack_partition *p = NULL;
	if (api_rack_partition_parse(j, &p, e) != NV_OK)
		return;
	const struct api_rack_partition *others[] = {p, p};
	(void)api_rack_partition_check(p, NULL, others, 2, e);
	api_rack_partition_free(p);
}

static void domain_one(const json_t *j, struct api_errors *e)
{
	struct api_compute_domain *d = NULL;
	if (api_compute_domain_parse(j, &d, e) != NV_OK)
		return;
	api_compute_domain_free(d);
}

/* A RackUpgrade status that parses writes back to JSON that parses to the
 * same JSON again: the record survives restarts. */
static void status_one(const json_t *st, struct api_errors *e)
{
	struct api_rack_upgrade_status *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	if (api_rack_upgrade_status_parse(st, a, e) == NV_OK) {
		json_t *x = api_rack_upgrade_status_to_json(a), *y = NULL;
		if (api_rack_upgrade_status_parse(x, b, e) != NV_OK)
			abort();
		y = api_rack_upgrade_status_to_json(b);
		if (!json_equal(x, y))
			abort();
		json_decref(x);
		json_decref(y);
		api_rack_upgrade_status_clear(b);
		api_rack_upgrade_status_clear(a);
	}
	free(a);
	free(b);
}

static void upgrade_one(const json_t *j, struct api_errors *e)
{
	struct api_rack_upgrade *u = NULL;
	struct api_upgrade_approval *a = NULL;
	if (api_rack_upgrade_parse(j, &u, e) == NV_OK)
		api_rack_upgrade_free(u);
	if (api_upgrade_approval_parse(j, &a, e) == NV_OK)
		api_upgrade_approval_free(a);
	status_one(json_object_get(j, "status"), e);
}

static void kind_one(uint8_t kind, const json_t *j, struct api_errors *e)
{
	struct api_compute_tray *t = NULL;
	struct matrix *m = NULL;
	switch (kind % 6) {
	case 0:
		rack_one(j, e);
		break;
	case 1:
		if (api_compute_tray_parse(j, &t, e) == NV_OK)
			api_compute_tray_free(t);
		break;
	case 2:
		partition_one(j, e);
		break;
	case 3:
		domain_one(j, e);
		break;
	case 4:
		upgrade_one(j, e);
		break;
	default:
		if (api_matrix_parse(j, &m, e) == NV_OK)
			matrix_free(m);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	json_error_t jerr;
	json_t *j = json_loadb((const char *)data + 1, size - 1, 0, &jerr);
	if (j == NULL)
		return 0;
	struct api_errors *e = malloc(sizeof(*e));
	api_errors_init(e);
	kind_one(data[0], j, e);
	struct buf b;
	buf_init(&b, 1 << 16);
	(void)api_errors_format(e, &b);
	buf_clear(&b);
	free(e);
	json_decref(j);
	return 0;
}
