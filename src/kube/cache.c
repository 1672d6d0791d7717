// SPDX-License-Identifier: Apache-2.0
// The informer's cache. Each object is kept as the compact JSON text of what
// the transform left of it, with its resourceVersion and index values taken
// when it is stored, and a read parses the text into a new tree. A jansson
// tree costs several times its compact text (CACHE_TREE_COST), so a cache
// of trees was most of the operator's memory; the text is immutable and
// reference counted, so a reader takes it under the informer's lock and
// parses it outside. A cache given a memo budget also keeps, for shared
// reads, the parsed trees of the keys read again within its idle time, up
// to the budget (least recently read first out), while they are read.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/log.h"

#include "kube_int.h"

#define CACHE_MAX_INDEXES 8

struct kube_cobj {
	atomic_uint refs;
	size_t len;    /* of the text */
	size_t rv_at;  /* data + rv_at: the resourceVersion */
	size_t ivs_at; /* data + ivs_at: per index, a count byte and that many strings */
	char data[];   /* the text, NUL, the resourceVersion, NUL, the index values */
};

/* A tree costs about this many times its compact text (jansson's nodes
 * and glibc's chunk headers: 7.3 to 7.6 measured on a ComputeTray and a
 * trimmed Node). */
#define CACHE_TREE_COST 8

/* One key of the table: chained by hash, and linked in insertion order,
 * which lists keep (jansson objects kept it before). tree, when set, is
 * obj parsed, on the memo's list (least recently read first); read_ms:
 * the key's last shared read (0: none), whatever version it read. */
struct cent {
	struct cent *hnext;
	struct cent *prev, *next;
	struct kube_cobj *obj;
	json_t *tree;
	struct cent *mprev, *mnext;
	int64_t read_ms;
	uint64_t hash;
	char key[];
};

struct cidx {
	char *name;
	kube_index_fn fn;
	char *arg;
	json_t *map; /* value -> {key: true}, keys in the order they came */
};

struct kube_cache {
	struct cent **table; /* size a power of two */
	size_t tsize;
	size_t n;
	size_t bytes; /* of every object's text */
	struct cent *head, *tail;
	struct cidx idx[CACHE_MAX_INDEXES];
	size_t nidx;
	size_t memo_max, memo_bytes; /* budget and cost of the kept trees */
	int64_t memo_idle_ms;        /* a tree unread this long goes */
	struct cent *mhead, *mtail;
	uint64_t memo_hits, memo_misses;
};

/* ---- stored objects ---- */

/* Out of memory, or a broken invariant: nothing a caller could handle. */
static void cache_abort(const char *what)
{
	log_error("kube", "informer cache failed", "what=\"%s\"", what);
	abort();
}

struct kube_cobj *kube_cobj_new(const struct kube_cache *c, const json_t *obj)
{
	struct kube_index_vals vals[CACHE_MAX_INDEXES];
	const char *rv = kube_obj_rv(obj);
	size_t rvlen = strlen(rv), ivlen = 0, len, at;
	char *text = json_dumps(obj, JSON_COMPACT);
	struct kube_cobj *o;

	if (text == NULL)
		cache_abort("cannot serialise an object");
	len = strlen(text);
	for (size_t i = 0; i < c->nidx; i++) {
		memset(&vals[i], 0, sizeof(vals[i]));
		c->idx[i].fn(obj, c->idx[i].arg, &vals[i]);
		ivlen++;
		for (size_t k = 0; k < vals[i].n; k++)
			ivlen += strlen(vals[i].v[k]) + 1;
	}
	o = xmalloc(sizeof(*o) + len + 1 + rvlen + 1 + ivlen);
	atomic_init(&o->refs, 1);
	o->len = len;
	memcpy(o->data, text, len + 1);
	free(text);
	o->rv_at = len + 1;
	memcpy(o->data + o->rv_at, rv, rvlen + 1);
	o->ivs_at = at = o->rv_at + rvlen + 1;
	for (size_t i = 0; i < c->nidx; i++) {
		o->data[at++] = (char)vals[i].n;
		for (size_t k = 0; k < vals[i].n; k++) {
			size_t n = strlen(vals[i].v[k]) + 1;
			memcpy(o->data + at, vals[i].v[k], n);
			at += n;
		}
	}
	return o;
}

struct kube_cobj *kube_cobj_ref(struct kube_cobj *o)
{
	if (o != NULL)
		atomic_fetch_add(&o->refs, 1);
	return o;
}

void kube_cobj_unref(struct kube_cobj *o)
{
	if (o != NULL && atomic_fetch_sub(&o->refs, 1) == 1)
		free(o);
}

const char *kube_cobj_rv(const struct kube_cobj *o)
{
	return o->data + o->rv_at;
}

const char *kube_cobj_text(const struct kube_cobj *o, size_t *len)
{
	if (len != NULL)
		*len = o->len;
	return o->data;
}

json_t *kube_cobj_parse(const struct kube_cobj *o)
{
	json_error_t je;
	json_t *v = json_loadb(o->data, o->len, 0, &je);

	/* The text is our own serialisation of a parsed object. */
	if (v == NULL)
		cache_abort("a cached object does not parse");
	return v;
}

/* Index i's values of o: the first, and the count. */
static const char *cobj_ivals(const struct kube_cobj *o, size_t i, size_t *n)
{
	const char *p = o->data + o->ivs_at;

	for (;; i--) {
		size_t cnt = (unsigned char)*p++;
		if (i == 0) {
			*n = cnt;
			return p;
		}
		while (cnt-- > 0)
			p += strlen(p) + 1;
	}
}

/* ---- the table ---- */

static uint64_t key_hash(const char *k)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a */

	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ULL;
	return h;
}

struct kube_cache *kube_cache_new(void)
{
	struct kube_cache *c = xcalloc(1, sizeof(*c));

	c->tsize = 64;
	c->table = xcalloc(c->tsize, sizeof(*c->table));
	return c;
}

void kube_cache_free(struct kube_cache *c)
{
	struct cent *e, *next;

	if (c == NULL)
		return;
	for (e = c->head; e != NULL; e = next) {
		next = e->next;
		json_decref(e->tree);
		kube_cobj_unref(e->obj);
		free(e);
	}
	for (size_t i = 0; i < c->nidx; i++) {
		free(c->idx[i].name);
		free(c->idx[i].arg);
		json_decref(c->idx[i].map);
	}
	free(c->table);
	free(c);
}

enum nv_err kube_cache_add_index(struct kube_cache *c, const char *name, kube_index_fn fn,
                                 const char *arg)
{
	if (c->n > 0 || c->nidx >= CACHE_MAX_INDEXES || fn == NULL || name == NULL)
		return NV_E_STATE;
	c->idx[c->nidx++] =
	        (struct cidx){xstrdup(name), fn, arg ? xstrdup(arg) : NULL, json_object()};
	return NV_OK;
}

static struct cent *find(const struct kube_cache *c, const char *key, uint64_t h)
{
	struct cent *e = c->table[h & (c->tsize - 1)];

	while (e != NULL && (e->hash != h || strcmp(e->key, key) != 0))
		e = e->hnext;
	return e;
}

static void grow(struct kube_cache *c)
{
	size_t size = c->tsize * 2;
	struct cent **t = xcalloc(size, sizeof(*t));

	for (struct cent *e = c->head; e != NULL; e = e->next) {
		e->hnext = t[e->hash & (size - 1)];
		t[e->hash & (size - 1)] = e;
	}
	free(c->table);
	c->table = t;
	c->tsize = size;
}

/* Whether v is among index i's values of o (NULL: none). */
static bool has_ival(const struct kube_cobj *o, size_t i, const char *v)
{
	size_t n;
	const char *p = o ? cobj_ivals(o, i, &n) : NULL;

	for (; o != NULL && n > 0; n--, p += strlen(p) + 1)
		if (strcmp(p, v) == 0)
			return true;
	return false;
}

/* Moves key in the index sets from old's values to new's (either may be
 * NULL). A value both have keeps key where it was in its set, so the order
 * by_index gives does not change with every update. */
static void index_update(struct kube_cache *c, const char *key, const struct kube_cobj *old,
                         const struct kube_cobj *new_obj)
{
	for (size_t i = 0; i < c->nidx; i++) {
		size_t n;
		const char *v;
		for (v = old ? cobj_ivals(old, i, &n) : NULL; old != NULL && n > 0;
		     n--, v += strlen(v) + 1) {
			json_t *set = json_object_get(c->idx[i].map, v);
			if (set == NULL || has_ival(new_obj, i, v))
				continue;
			json_object_del(set, key);
			if (json_object_size(set) == 0)
				json_object_del(c->idx[i].map, v);
		}
		for (v = new_obj ? cobj_ivals(new_obj, i, &n) : NULL; new_obj != NULL && n > 0;
		     n--, v += strlen(v) + 1) {
			json_t *set = json_object_get(c->idx[i].map, v);
			if (set == NULL) {
				set = json_object();
				json_object_set_new(c->idx[i].map, v, set);
			}
			if (json_object_get(set, key) == NULL)
				json_object_set_new(set, key, json_true());
		}
	}
}

/* ---- the memo of parsed trees ---- */

static size_t tree_cost(const struct cent *e)
{
	return e->obj->len * CACHE_TREE_COST;
}

static void memo_unlink(struct kube_cache *c, struct cent *e)
{
	if (e->mprev)
		e->mprev->mnext = e->mnext;
	else
		c->mhead = e->mnext;
	if (e->mnext)
		e->mnext->mprev = e->mprev;
	else
		c->mtail = e->mprev;
	e->mprev = e->mnext = NULL;
}

static void memo_append(struct kube_cache *c, struct cent *e)
{
	e->mnext = NULL;
	e->mprev = c->mtail;
	if (c->mtail)
		c->mtail->mnext = e;
	else
		c->mhead = e;
	c->mtail = e;
}

/* Takes e's tree off the memo: the reference goes to the caller (NULL:
 * none was kept). */
static json_t *memo_take(struct kube_cache *c, struct cent *e)
{
	json_t *t = e->tree;

	if (t == NULL)
		return NULL;
	memo_unlink(c, e);
	c->memo_bytes -= tree_cost(e);
	e->tree = NULL;
	return t;
}

void kube_cache_memo_max(struct kube_cache *c, size_t bytes, int64_t idle_ms)
{
	c->memo_max = bytes;
	c->memo_idle_ms = idle_ms;
	while (c->memo_bytes > c->memo_max && c->mhead != NULL)
		json_decref(memo_take(c, c->mhead));
}

size_t kube_cache_memo_expire(struct kube_cache *c, int64_t now_ms)
{
	size_t was = c->memo_bytes;

	while (c->mhead != NULL && c->memo_idle_ms > 0 &&
	       now_ms - c->mhead->read_ms >= c->memo_idle_ms)
		json_decref(memo_take(c, c->mhead));
	return was - c->memo_bytes;
}

void kube_cache_keep(struct kube_cache *c, const char *key, const struct kube_cobj *o, json_t *tree,
                     int64_t now_ms)
{
	struct cent *e = find(c, key, key_hash(key));

	if (e == NULL || e->obj != o || e->tree != NULL || tree == NULL ||
	    tree_cost(e) > c->memo_max)
		return;
	/* Kept from a key's second read within the idle time on: a key read
	 * once in a while costs nothing. */
	if (e->read_ms == 0 || now_ms - e->read_ms >= c->memo_idle_ms) {
		e->read_ms = now_ms;
		return;
	}
	e->tree = json_incref(tree);
	e->read_ms = now_ms;
	c->memo_bytes += tree_cost(e);
	memo_append(c, e);
	while (c->memo_bytes > c->memo_max && c->mhead != e)
		json_decref(memo_take(c, c->mhead));
}

json_t *kube_cache_tree(struct kube_cache *c, const char *key, struct kube_cobj **o, int64_t now_ms)
{
	struct cent *e = find(c, key, key_hash(key));

	*o = NULL;
	if (e == NULL)
		return NULL;
	if (e->tree != NULL) {
		c->memo_hits++;
		e->read_ms = now_ms;
		memo_unlink(c, e);
		memo_append(c, e);
		return json_incref(e->tree);
	}
	c->memo_misses++;
	*o = kube_cobj_ref(e->obj);
	return NULL;
}

void kube_cache_memo_stats(const struct kube_cache *c, uint64_t *hits, uint64_t *misses,
                           size_t *bytes)
{
	*hits = c->memo_hits;
	*misses = c->memo_misses;
	*bytes = c->memo_bytes;
}

struct kube_cobj *kube_cache_peek(const struct kube_cache *c, const char *key)
{
	struct cent *e = find(c, key, key_hash(key));

	return e ? e->obj : NULL;
}

static void unlink_entry(struct kube_cache *c, struct cent *e)
{
	struct cent **pp = &c->table[e->hash & (c->tsize - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	c->n--;
}

struct kube_cobj *kube_cache_swap(struct kube_cache *c, const char *key, struct kube_cobj *o,
                                  json_t **old_tree)
{
	uint64_t h = key_hash(key);
	struct cent *e = find(c, key, h);
	struct kube_cobj *old = NULL;
	json_t *t;

	if (old_tree != NULL)
		*old_tree = NULL;
	if (e != NULL) {
		t = memo_take(c, e);
		if (old_tree != NULL)
			*old_tree = t;
		else
			json_decref(t);
		old = e->obj;
		index_update(c, key, old, o);
		c->bytes -= old->len;
		if (o == NULL) {
			unlink_entry(c, e);
			free(e);
			return old;
		}
		e->obj = o;
		c->bytes += o->len;
		return old;
	} else if (o != NULL) {
		size_t klen = strlen(key) + 1;
		if (c->n >= c->tsize)
			grow(c);
		e = xmalloc(sizeof(*e) + klen);
		memcpy(e->key, key, klen);
		e->hash = h;
		e->obj = o;
		e->tree = NULL;
		e->mprev = e->mnext = NULL;
		e->read_ms = 0;
		e->hnext = c->table[h & (c->tsize - 1)];
		c->table[h & (c->tsize - 1)] = e;
		e->next = NULL;
		e->prev = c->tail;
		if (c->tail)
			c->tail->next = e;
		else
			c->head = e;
		c->tail = e;
		c->n++;
	} else {
		return NULL;
	}
	c->bytes += o->len;
	index_update(c, key, NULL, o);
	return NULL;
}

size_t kube_cache_len(const struct kube_cache *c)
{
	return c->n;
}

size_t kube_cache_bytes(const struct kube_cache *c)
{
	return c->bytes;
}

struct kube_cobj **kube_cache_all(const struct kube_cache *c, size_t *n)
{
	struct kube_cobj **v = xcalloc(c->n + 1, sizeof(*v));
	size_t k = 0;

	for (const struct cent *e = c->head; e != NULL; e = e->next)
		v[k++] = kube_cobj_ref(e->obj);
	*n = k;
	return v;
}

struct kube_cobj **kube_cache_index(const struct kube_cache *c, const char *index,
                                    const char *value, size_t *n)
{
	json_t *set = NULL, *t;
	struct kube_cobj **v;
	const char *key;
	size_t k = 0;

	for (size_t i = 0; i < c->nidx; i++)
		if (strcmp(c->idx[i].name, index) == 0)
			set = json_object_get(c->idx[i].map, value);
	v = xcalloc(json_object_size(set) + 1, sizeof(*v));
	json_object_foreach(set, key, t) {
		const struct cent *e = find(c, key, key_hash(key));
		if (e != NULL)
			v[k++] = kube_cobj_ref(e->obj);
	}
	*n = k;
	return v;
}

json_t *kube_cache_index_keys(const struct kube_cache *c, const char *index, const char *value)
{
	json_t *keys = json_array(), *set = NULL, *t;
	const char *key;

	for (size_t i = 0; i < c->nidx; i++)
		if (strcmp(c->idx[i].name, index) == 0)
			set = json_object_get(c->idx[i].map, value);
	json_object_foreach(set, key, t)
		json_array_append_new(keys, json_string(key));
	return keys;
}

char **kube_cache_keys(const struct kube_cache *c, size_t *n)
{
	char **v = xcalloc(c->n + 1, sizeof(*v));
	size_t k = 0;

	for (const struct cent *e = c->head; e != NULL; e = e->next)
		v[k++] = xstrdup(e->key);
	*n = k;
	return v;
}

json_t *kube_cobj_parse_all(struct kube_cobj **v, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, kube_cobj_parse(v[i]));
		kube_cobj_unref(v[i]);
	}
	free(v);
	return arr;
}
