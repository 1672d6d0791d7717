// SPDX-License-Identifier: Apache-2.0
// The read side of the kubectl plugin: racks and upgrades as aligned
// tables (the `status` verb) and one object in detail. Pure functions of
// the JSON the apiserver returns, so the output is unit-tested as text.
#include <string.h>

#include "cli_int.h"
#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/parse.h"

/* ---- tables ----------------------------------------------------------- */

/* Rows are JSON arrays of strings; the first is the header. Columns are
 * padded to their widest cell, three spaces apart, like kubectl get. */
static enum nv_err table_render(const json_t *rows, struct buf *out)
{
	size_t w[16] = {0};
	size_t ncol = json_array_size(json_array_get(rows, 0));
	enum nv_err rc = NV_OK;
	if (ncol > 16)
		return NV_E_INVAL;
	for (size_t r = 0; r < json_array_size(rows); r++)
		for (size_t c = 0; c < ncol; c++) {
			size_t l = strlen(
			        json_string_value(json_array_get(json_array_get(rows, r), c)));
			w[c] = l > w[c] ? l : w[c];
		}
	for (size_t r = 0; r < json_array_size(rows) && rc == NV_OK; r++) {
		for (size_t c = 0; c < ncol && rc == NV_OK; c++) {
			const char *s =
			        json_string_value(json_array_get(json_array_get(rows, r), c));
			if (c + 1 < ncol)
				rc = buf_printf(out, "%-*s   ", (int)w[c], s);
			else
				rc = buf_printf(out, "%s\n", s);
		}
	}
	return rc;
}

static size_t count_cordoned(const json_t *rack)
{
	const json_t *trays = jx_path(rack, "status.trays");
	size_t n = 0;
	for (size_t i = 0; i < json_array_size(trays); i++) {
		const char *m = jx_str_or(json_array_get(trays, i), "maintenance", "None");
		n += strcmp(m, "None") != 0 && m[0] != '\0';
	}
	return n;
}

static json_t *rack_row(const json_t *r)
{
	const json_t *trays = jx_path(r, "status.trays");
	json_int_t ready = json_integer_value(jx_path(r, "status.capacity.readyTrays"));
	json_int_t total = json_integer_value(jx_path(r, "status.capacity.trays"));
	char tr[32], cord[16];
	if (total == 0)
		total = (json_int_t)json_array_size(jx_path(r, "spec.computeTrays"));
	if (ready == 0)
		for (size_t i = 0; i < json_array_size(trays); i++)
			ready += json_is_true(json_object_get(json_array_get(trays, i), "ready"));
	snprintf(tr, sizeof(tr), "%lld/%lld", (long long)ready, (long long)total);
	snprintf(cord, sizeof(cord), "%zu", count_cordoned(r));
	return json_pack("[sssssss]", jx_str_or(r, "metadata.name", "?"),
	                 cli_cond_status(r, "Ready"), jx_str_or(r, "status.stack", "-"), tr,
	                 cli_cond_status(r, "Degraded"), cord,
	                 jx_str_or(r, "status.upgrade.name", "-"));
}

enum nv_err cli_racks_table(const json_t *racks, struct buf *out)
{
	json_t *rows = json_pack("[[sssssss]]", "RACK", "READY", "STACK", "TRAYS", "DEGRADED",
	                         "CORDONED", "UPGRADE");
	for (size_t i = 0; i < json_array_size(racks); i++)
		json_array_append_new(rows, rack_row(json_array_get(racks, i)));
	enum nv_err rc = table_render(rows, out);
	json_decref(rows);
	return rc;
}

static const json_t *rack_named(const json_t *racks, const char *name)
{
	for (size_t i = 0; i < json_array_size(racks); i++)
		if (strcmp(jx_str_or(json_array_get(racks, i), "metadata.name", ""), name) == 0)
			return json_array_get(racks, i);
	return NULL;
}

/* "4/12 Drain" and "2/8" for the current step and its wave. */
static void step_cells(const json_t *st, char *step, size_t stepsz, char *wave, size_t wavesz)
{
	const json_t *cur = cli_current_step(st);
	const json_t *steps = json_object_get(st, "steps");
	size_t pos = 0;
	for (size_t i = 0; i < json_array_size(steps); i++)
		if (json_array_get(steps, i) == cur)
			pos = i + 1;
	snprintf(step, stepsz, "-");
	snprintf(wave, wavesz, "-");
	if (cur == NULL)
		return;
	snprintf(step, stepsz, "%zu/%zu %s", pos, json_array_size(steps),
	         jx_str_or(cur, "action", "?"));
	if (json_integer_value(json_object_get(cur, "wave")) > 0)
		snprintf(wave, wavesz, "%lld/%zu",
		         (long long)json_integer_value(json_object_get(cur, "wave")),
		         json_array_size(json_object_get(st, "waves")));
}

static json_t *upgrade_row(const json_t *u, const json_t *racks)
{
	const json_t *st = json_object_get(u, "status");
	const json_t *rack = rack_named(racks, jx_str_or(u, "spec.rack", ""));
	char step[96], wave[32];
	struct buf pend;
	json_t *row = NULL;
	buf_init(&pend, 1024);
	cli_pending_str(st, rack, false, &pend);
	step_cells(st, step, sizeof(step), wave, sizeof(wave));
	row = json_pack("[sssssss]", jx_str_or(u, "metadata.name", "?"),
	                jx_str_or(u, "spec.rack", "(selector)"),
	                jx_str_or(u, "spec.target.stack", "?"), jx_str_or(st, "phase", "-"), step,
	                wave, buf_str(&pend));
	buf_clear(&pend);
	return row;
}

enum nv_err cli_upgrades_table(const json_t *upgrades, const json_t *racks, struct buf *out)
{
	json_t *rows = json_pack("[[sssssss]]", "UPGRADE", "RACK", "TARGET", "PHASE", "STEP",
	                         "WAVE", "PENDING APPROVALS");
	for (size_t i = 0; i < json_array_size(upgrades); i++)
		json_array_append_new(rows, upgrade_row(json_array_get(upgrades, i), racks));
	enum nv_err rc = table_render(rows, out);
	json_decref(rows);
	return rc;
}
