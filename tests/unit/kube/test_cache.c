// SPDX-License-Identifier: Apache-2.0
// Unit tests for the informer's cache: an object stored as compact text
// reads back equal, its index values are those of the stored version, a
// replaced key keeps its place, and a reader's reference outlives a
// replacement.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

static json_t *node(const char *name, const char *rv, const char *rack)
{
	json_t *o =
	        json_pack("{s:s,s:s,s:{s:s,s:s,s:{}},s:{s:[{s:s,s:s}]},s:{s:f,s:I}}", "kind",
	                  "Node", "apiVersion", "v1", "metadata", "name", name, "resourceVersion",
	                  rv, "labels", "status", "conditions", "type", "Ready", "status", "True",
	                  "spec", "ratio", 0.25, "big", (json_int_t)9007199254740993LL);
	if (rack != NULL)
		json_object_set_new(jx_path(o, "metadata.labels"), "nvl72.io/rack",
		                    json_string(rack));
	return o;
}

static struct kube_cache *cache_with_index(void)
{
	struct kube_cache *c = kube_cache_new();
	assert_int_equal(kube_cache_add_index(c, "rack", kube_index_label, "nvl72.io/rack"), NV_OK);
	return c;
}

/* The array, then its length: argument order is unspecified. */
static json_t *by_index(struct kube_cache *c, const char *index, const char *value)
{
	size_t n;
	struct kube_cobj **v = kube_cache_index(c, index, value, &n);
	return kube_cobj_parse_all(v, n);
}

static json_t *all_of(struct kube_cache *c)
{
	size_t n;
	struct kube_cobj **v = kube_cache_all(c, &n);
	return kube_cobj_parse_all(v, n);
}

static void put(struct kube_cache *c, const json_t *obj)
{
	kube_cobj_unref(kube_cache_swap(c, kube_obj_name(obj), kube_cobj_new(c, obj)));
}

static void test_kube_cache_swap_reads_back_equal(void **state)
{
	(void)state;
	struct kube_cache *c = cache_with_index();
	json_t *n = node("t01", "7", "r1"), *back;
	size_t len;

	put(c, n);
	const struct kube_cobj *o = kube_cache_peek(c, "t01");
	assert_non_null(o);
	assert_string_equal(kube_cobj_rv(o), "7");
	/* Compact: no blank between tokens. */
	assert_null(strstr(kube_cobj_text(o, &len), ": "));
	assert_int_equal(kube_cache_bytes(c), len);
	back = kube_cobj_parse(o);
	assert_true(json_equal(back, n));
	/* Integers past 2^53 and reals keep their type and value. */
	assert_true(json_is_integer(jx_path(back, "spec.big")));
	assert_true(json_is_real(jx_path(back, "spec.ratio")));
	json_decref(back);
	json_decref(n);
	kube_cache_free(c);
}

static void test_kube_cache_index_follows_the_stored_version(void **state)
{
	(void)state;
	struct kube_cache *c = cache_with_index();
	json_t *a = node("t01", "1", "r1"), *b = node("t02", "1", "r1"),
	       *a2 = node("t01", "2", "r2");

	put(c, a);
	put(c, b);
	json_t *got = by_index(c, "rack", "r1");
	assert_int_equal(json_array_size(got), 2);
	json_decref(got);
	/* An update that keeps the value keeps the key's place in the set. */
	json_t *a1 = node("t01", "1b", "r1");
	put(c, a1);
	json_decref(a1);
	got = by_index(c, "rack", "r1");
	assert_string_equal(kube_obj_name(json_array_get(got, 0)), "t01");
	assert_string_equal(kube_obj_rv(json_array_get(got, 0)), "1b");
	json_decref(got);
	/* The keys alone, parsing nothing. */
	json_t *keys = kube_cache_index_keys(c, "rack", "r1");
	assert_int_equal(json_array_size(keys), 2);
	assert_string_equal(json_string_value(json_array_get(keys, 1)), "t02");
	json_decref(keys);
	/* t01 moves to r2: gone from r1's set, found under r2. */
	put(c, a2);
	got = by_index(c, "rack", "r1");
	assert_int_equal(json_array_size(got), 1);
	assert_string_equal(kube_obj_name(json_array_get(got, 0)), "t02");
	json_decref(got);
	got = by_index(c, "rack", "r2");
	assert_int_equal(json_array_size(got), 1);
	assert_string_equal(kube_obj_rv(json_array_get(got, 0)), "2");
	json_decref(got);
	/* A delete leaves no index entry behind; unknown names find nothing. */
	kube_cobj_unref(kube_cache_swap(c, "t01", NULL));
	got = by_index(c, "rack", "r2");
	assert_int_equal(json_array_size(got), 0);
	json_decref(got);
	got = by_index(c, "nope", "r1");
	assert_int_equal(json_array_size(got), 0);
	json_decref(got);
	assert_int_equal(kube_cache_len(c), 1);
	json_decref(a);
	json_decref(b);
	json_decref(a2);
	kube_cache_free(c);
}

static void test_kube_cache_all_keeps_insertion_order(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	char name[16];
	size_t n;

	/* Enough keys to grow the table several times. */
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		json_t *o = node(name, "1", NULL);
		put(c, o);
		json_decref(o);
	}
	json_t *o = node("n005", "2", NULL);
	put(c, o); /* replaced in place */
	json_decref(o);
	kube_cobj_unref(kube_cache_swap(c, "n000", NULL));
	json_t *all = all_of(c);
	assert_int_equal(json_array_size(all), 299);
	for (size_t i = 0; i < 299; i++) {
		snprintf(name, sizeof(name), "n%03zu", i + 1);
		assert_string_equal(kube_obj_name(json_array_get(all, i)), name);
	}
	assert_string_equal(kube_obj_rv(json_array_get(all, 4)), "2");
	json_decref(all);
	char **keys = kube_cache_keys(c, &n);
	assert_int_equal(n, 299);
	assert_string_equal(keys[0], "n001");
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	kube_cache_free(c);
}

static void test_kube_cache_reference_outlives_replacement(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("t01", "1", NULL), *b = node("t01", "2", NULL);
	struct kube_cobj *held;

	put(c, a);
	held = kube_cobj_ref(kube_cache_peek(c, "t01"));
	put(c, b);
	kube_cache_free(c);
	json_t *back = kube_cobj_parse(held);
	assert_true(json_equal(back, a));
	json_decref(back);
	kube_cobj_unref(held);
	kube_cobj_unref(NULL);
	json_decref(a);
	json_decref(b);
}

static void test_kube_cache_add_index_refused_once_filled(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("t01", "1", NULL);

	put(c, a);
	assert_int_equal(kube_cache_add_index(c, "rack", kube_index_label, "nvl72.io/rack"),
	                 NV_E_STATE);
	assert_null(kube_cache_swap(c, "absent", NULL));
	json_decref(a);
	kube_cache_free(c);
	kube_cache_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_cache_swap_reads_back_equal),
	        cmocka_unit_test(test_kube_cache_index_follows_the_stored_version),
	        cmocka_unit_test(test_kube_cache_all_keeps_insertion_order),
	        cmocka_unit_test(test_kube_cache_reference_outlives_replacement),
	        cmocka_unit_test(test_kube_cache_add_index_refused_once_filled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
