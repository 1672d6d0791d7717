// SPDX-License-Identifier: Apache-2.0
// Unit tests for the watch framer and event decoder: values split at any
// byte, several values per chunk, braces inside strings, the size cap, and
// garbage between values.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

static const char *stream =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a}{\\\"\",\"resourceVersion\":"
        "\"1\"}}}\n"
        "  "
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"2\"}"
        "}}"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}\r\n";

static int drain(struct kube_framer *f, json_t **got, int max)
{
	struct jx_err e;
	int n = 0;
	json_t *v = NULL;
	while (n < max && kube_framer_next(f, &v, &e) == NV_OK)
		got[n++] = v;
	return n;
}

static void test_kube_framer_next_every_split(void **state)
{
	(void)state;
	size_t len = strlen(stream);
	for (size_t step = 1; step <= len; step += (step < 8 ? 1 : 13)) {
		struct kube_framer f;
		json_t *got[8];
		int n = 0;
		kube_framer_init(&f, 4096);
		for (size_t off = 0; off < len; off += step) {
			size_t k = len - off < step ? len - off : step;
			assert_int_equal(kube_framer_feed(&f, stream + off, k), NV_OK);
			n += drain(&f, got + n, 8 - n);
		}
		assert_int_equal(n, 3);
		assert_string_equal(jx_str_or(got[0], "object.metadata.name", ""), "a}{\"");
		assert_string_equal(jx_str_or(got[2], "type", ""), "BOOKMARK");
		assert_false(kube_framer_partial(&f));
		for (int i = 0; i < n; i++)
			json_decref(got[i]);
		kube_framer_clear(&f);
	}
}

static void test_kube_framer_next_oversized(void **state)
{
	(void)state;
	struct kube_framer f;
	struct jx_err e;
	json_t *v = NULL;
	char big[300];
	memset(big, 'x', sizeof(big));
	kube_framer_init(&f, 128);
	assert_int_equal(kube_framer_feed(&f, "{\"a\":\"", 6), NV_OK);
	assert_int_equal(kube_framer_next(&f, &v, &e), NV_E_NOT_FOUND);
	assert_true(kube_framer_partial(&f));
	assert_int_equal(kube_framer_feed(&f, big, sizeof(big)), NV_OK);
	assert_int_equal(kube_framer_next(&f, &v, &e), NV_E_TOO_LARGE);
	assert_non_null(strstr(e.msg, "larger than 128"));
	kube_framer_clear(&f);
}

static void test_kube_framer_next_garbage(void **state)
{
	(void)state;
	struct kube_framer f;
	struct jx_err e;
	json_t *v = NULL;
	kube_framer_init(&f, 128);
	assert_int_equal(kube_framer_feed(&f, "\n\nnull\n", 7), NV_OK);
	assert_int_equal(kube_framer_next(&f, &v, &e), NV_E_PARSE);
	kube_framer_clear(&f);
	kube_framer_init(&f, 128);
	assert_int_equal(kube_framer_feed(&f, "{\"a\":tru}", 9), NV_OK);
	assert_int_equal(kube_framer_next(&f, &v, &e), NV_E_PARSE);
	kube_framer_clear(&f);
}

static void test_kube_watch_event_decode_types(void **state)
{
	(void)state;
	struct jx_err e;
	enum kube_event_type t;
	json_t *obj = NULL;
	json_t *ev = json_pack("{s:s,s:{}}", "type", "DELETED", "object");
	assert_int_equal(kube_watch_event_decode(ev, &t, &obj, &e), NV_OK);
	assert_int_equal(t, KUBE_EV_DELETED);
	json_decref(ev);
	ev = json_pack("{s:s,s:{}}", "type", "RESYNC", "object");
	assert_int_equal(kube_watch_event_decode(ev, &t, &obj, &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "RESYNC"));
	json_decref(ev);
	ev = json_pack("{s:s,s:i}", "type", "ADDED", "object", 1);
	assert_int_equal(kube_watch_event_decode(ev, &t, &obj, &e), NV_E_INVAL);
	assert_non_null(strstr(e.msg, "object: expected an object"));
	json_decref(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_framer_next_every_split),
	        cmocka_unit_test(test_kube_framer_next_oversized),
	        cmocka_unit_test(test_kube_framer_next_garbage),
	        cmocka_unit_test(test_kube_watch_event_decode_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
