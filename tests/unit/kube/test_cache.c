// SPDX-License-Identifier: Apache-2.0
// Unit tests for the informer's cache: an object stored as compact text
// reads back equal, its index values are those of the stored version, a
// replaced key keeps its place, a reader's reference outlives a
// replacement, and the memo of parsed trees keeps the trees of keys read
// again within its idle time, within its budget, and never a tree of a
// version no longer stored.
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
	kube_cobj_unref(kube_cache_swap(c, kube_obj_name(obj), kube_cobj_new(c, obj), NULL));
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
	kube_cobj_unref(kube_cache_swap(c, "t01", NULL, NULL));
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
	kube_cobj_unref(kube_cache_swap(c, "n000", NULL, NULL));
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
	assert_null(kube_cache_swap(c, "absent", NULL, NULL));
	json_decref(a);
	kube_cache_free(c);
	kube_cache_free(NULL);
}

/* The memo's clock (monotonic ms), moved by the tests. */
static int64_t now_ms = 1000;

/* What one shared read gives, as the informer does it: the trees gone
 * unread dropped, then the kept tree (hit) or one parsed and offered. */
static json_t *shared(struct kube_cache *c, const char *key)
{
	struct kube_cobj *o;
	json_t *t;

	kube_cache_memo_expire(c, now_ms);
	t = kube_cache_tree(c, key, &o, now_ms);
	if (t != NULL) {
		assert_null(o);
		return t;
	}
	if (o == NULL)
		return NULL;
	t = kube_cobj_parse(o);
	kube_cache_keep(c, key, o, t, now_ms);
	kube_cobj_unref(o);
	return t;
}

/* The budget a tree of obj counts for. */
static size_t cost(const json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	size_t n = strlen(s) * 8;
	free(s);
	return n;
}

static void test_kube_cache_memo_off_parses_every_read(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("n1", "1", NULL), *r1, *r2;
	uint64_t hits, misses;
	size_t bytes;

	put(c, a);
	r1 = shared(c, "n1");
	r2 = shared(c, "n1");
	assert_true(r1 != r2);
	assert_true(json_equal(r1, a));
	assert_true(json_equal(r2, a));
	assert_null(shared(c, "absent"));
	kube_cache_memo_stats(c, &hits, &misses, &bytes);
	assert_int_equal(hits, 0);
	assert_int_equal(misses, 2);
	assert_int_equal(bytes, 0);
	json_decref(r1);
	json_decref(r2);
	json_decref(a);
	kube_cache_free(c);
}

/* A shared read whose tree is dropped at once: it makes the key one read
 * recently, so its next read keeps what it parses. */
static void warm(struct kube_cache *c, const char *key)
{
	json_decref(shared(c, key));
}

static void stats_are(struct kube_cache *c, uint64_t hits, uint64_t misses, size_t bytes)
{
	uint64_t h, m;
	size_t b;
	kube_cache_memo_stats(c, &h, &m, &b);
	assert_int_equal(h, hits);
	assert_int_equal(m, misses);
	assert_int_equal(b, bytes);
}

static void test_kube_cache_memo_shares_one_tree_per_version(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("n1", "1", NULL), *a2 = node("n1", "2", "r07"), *r1, *r2, *r3, *r4, *old;
	struct kube_cobj *was;

	kube_cache_memo_max(c, 1 << 20, 5000);
	now_ms = 1000;
	put(c, a);
	r1 = shared(c, "n1"); /* a first read is parsed, not kept */
	r2 = shared(c, "n1"); /* the second within 5 s is kept */
	r3 = shared(c, "n1");
	assert_true(r1 != r2);
	assert_ptr_equal(r2, r3);
	assert_true(json_equal(r2, a));
	stats_are(c, 1, 2, cost(a));

	/* A new version hands the old tree to the caller and keeps none of
	 * its own yet; readers keep theirs. */
	was = kube_cache_swap(c, "n1", kube_cobj_new(c, a2), &old);
	assert_ptr_equal(old, r2);
	json_decref(old);
	stats_are(c, 1, 2, 0);
	/* A tree parsed from a version since replaced is not kept. */
	kube_cache_keep(c, "n1", was, r1, now_ms);
	stats_are(c, 1, 2, 0);
	kube_cobj_unref(was);
	/* The key was read lately: the new version's first read keeps it. */
	r4 = shared(c, "n1");
	assert_true(json_equal(r4, a2));
	assert_true(json_equal(r2, a));
	old = shared(c, "n1");
	assert_ptr_equal(old, r4);
	json_decref(old);
	stats_are(c, 2, 3, cost(a2));

	/* A delete drops the kept tree. */
	kube_cobj_unref(kube_cache_swap(c, "n1", NULL, NULL));
	stats_are(c, 2, 3, 0);
	assert_null(shared(c, "n1"));
	json_decref(r1);
	json_decref(r2);
	json_decref(r3);
	json_decref(r4);
	json_decref(a);
	json_decref(a2);
	kube_cache_free(c);
}

static void test_kube_cache_memo_drops_least_recently_read(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("n1", "1", NULL), *b = node("n2", "1", NULL), *d = node("n3", "1", NULL);
	json_t *ra, *rb, *rd, *again;

	/* Room for two of the three (same size); no idle limit to speak of. */
	kube_cache_memo_max(c, cost(a) * 2 + cost(a) / 2, (int64_t)1 << 40);
	put(c, a);
	put(c, b);
	put(c, d);
	warm(c, "n1");
	ra = shared(c, "n1");
	warm(c, "n2");
	rb = shared(c, "n2");
	json_decref(shared(c, "n1")); /* n1 read last: n2 goes first */
	warm(c, "n3");
	rd = shared(c, "n3");
	stats_are(c, 1, 6, cost(a) * 2);
	again = shared(c, "n1");
	assert_ptr_equal(again, ra);
	json_decref(again);
	again = shared(c, "n3");
	assert_ptr_equal(again, rd);
	json_decref(again);
	again = shared(c, "n2"); /* parsed anew, kept in n1's place */
	assert_true(again != rb);
	assert_true(json_equal(again, b));
	json_decref(again);
	stats_are(c, 3, 7, cost(a) * 2);
	again = shared(c, "n1");
	assert_true(again != ra);
	json_decref(again);

	/* Lowering the budget drops at once; a tree past the budget is
	 * never kept. */
	kube_cache_memo_max(c, cost(a) / 2, (int64_t)1 << 40);
	stats_are(c, 3, 8, 0);
	warm(c, "n1");
	warm(c, "n1");
	stats_are(c, 3, 10, 0);
	json_decref(ra);
	json_decref(rb);
	json_decref(rd);
	json_decref(a);
	json_decref(b);
	json_decref(d);
	kube_cache_free(c);
}

static void test_kube_cache_memo_drops_what_goes_unread(void **state)
{
	(void)state;
	struct kube_cache *c = kube_cache_new();
	json_t *a = node("n1", "1", NULL), *b = node("n2", "1", NULL), *ra, *rb, *again;

	kube_cache_memo_max(c, 1 << 20, 5000);
	put(c, a);
	put(c, b);
	now_ms = 1000;
	warm(c, "n1");
	ra = shared(c, "n1");
	now_ms = 4000;
	warm(c, "n2");
	rb = shared(c, "n2");
	stats_are(c, 0, 4, cost(a) + cost(b));
	/* n1 unread for 5 s: the next memo call drops it; n2 read at 4 s stays. */
	now_ms = 6000;
	again = shared(c, "n2");
	assert_ptr_equal(again, rb);
	json_decref(again);
	stats_are(c, 1, 4, cost(b));
	/* 5 s since n1's last read: a first read again, not kept. */
	again = shared(c, "n1");
	assert_true(again != ra);
	assert_true(json_equal(again, a));
	json_decref(again);
	stats_are(c, 1, 5, cost(b));
	/* Nothing read for 5 s: an expiry alone empties the memo. */
	now_ms = 11000;
	assert_int_equal(kube_cache_memo_expire(c, now_ms), cost(b));
	stats_are(c, 1, 5, 0);
	json_decref(ra);
	json_decref(rb);
	json_decref(a);
	json_decref(b);
	kube_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_cache_swap_reads_back_equal),
	        cmocka_unit_test(test_kube_cache_index_follows_the_stored_version),
	        cmocka_unit_test(test_kube_cache_all_keeps_insertion_order),
	        cmocka_unit_test(test_kube_cache_reference_outlives_replacement),
	        cmocka_unit_test(test_kube_cache_add_index_refused_once_filled),
	        cmocka_unit_test(test_kube_cache_memo_off_parses_every_read),
	        cmocka_unit_test(test_kube_cache_memo_shares_one_tree_per_version),
	        cmocka_unit_test(test_kube_cache_memo_drops_least_recently_read),
	        cmocka_unit_test(test_kube_cache_memo_drops_what_goes_unread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
