// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the admission webhook: the first byte picks the
// handler (validating or mutating), the rest is the AdmissionReview body.
// The rules run against a small fixed cache (one rack, two partitions, a
// matrix), so decoding, parsing, the cross-object checks and the response
// writer all see hostile input.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/base.h"
#include "nvl72/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *lists[WEBHOOK__KINDS];
static struct webhook *hook;

static json_t *fixed_list(void *arg, enum webhook_kind kind)
{
	(void)arg;
	return json_incref(lists[kind]);
}

static const struct webhook_cache_ops fixed_ops = {.list = fixed_list};

/* Objects from the test data when run from the repository root; an empty
 * cache otherwise. */
static json_t *one(const char *path)
{
	json_t *a = json_array();
	json_t *o = json_load_file(path, 0, NULL);
	if (o != NULL)
		json_array_append_new(a, o);
	return a;
}

static void init(void)
{
	log_set_level(LOG_LVL_ERROR);
	lists[WEBHOOK_RACKS] = one("tests/data/api/rack-gb300-r07.json");
	lists[WEBHOOK_PARTITIONS] = one("tests/data/api/rackpartition-gb300-r07-a.json");
	lists[WEBHOOK_MATRICES] = one("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	// The upgrade approvals name, with the UID the apiserver would give it.
	lists[WEBHOOK_UPGRADES] = one("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	json_t *u = json_array_get(lists[WEBHOOK_UPGRADES], 0);
	if (u != NULL)
		json_object_set_new(json_object_get(u, "metadata"), "uid",
		                    json_string("3b1f6a52-0c1d-4e8f-9a7b-1c2d3e4f5a6b"));
	struct webhook_config cfg = {.cache = &fixed_ops, .review_max = 1 << 20};
	if (webhook_new(&cfg, &hook) != NV_OK)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (hook == NULL)
		init();
	if (size < 1)
		return 0;
	enum webhook_mode mode = data[0] & 1 ? WEBHOOK_MUTATE : WEBHOOK_VALIDATE;
	// The web server hands handlers a NUL-terminated body.
	char *body = malloc(size);
	memcpy(body, data + 1, size - 1);
	body[size - 1] = '\0';
	struct buf out;
	int status = 0;
	buf_init(&out, 4 << 20);
	// Every input gets an answer: a response review or a JSON error.
	if (webhook_review(hook, mode, "application/json", body, size - 1, &status, &out) !=
	            NV_OK ||
	    status < 200 || status > 599 || out.len == 0)
		abort();
	json_t *answer = json_loadb(out.data, out.len, 0, NULL);
	if (answer == NULL)
		abort();
	json_decref(answer);
	buf_clear(&out);
	free(body);
	return 0;
}
