// SPDX-License-Identifier: Apache-2.0
// The informer: a reflector thread that lists, then watches from the list's
// resourceVersion, resumes after broken streams, relists after 410 Gone,
// and keeps an indexed cache (cache.c: compact text, parsed on read) whose
// changes are handed to the handlers.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/kube_ctrl.h"
#include "nvl72/timeutil.h"

#include "kube_int.h"

#define INF_MAX_HANDLERS 8
#define INF_KEY_MAX 512
#define INF_HEALTHY_RESET_MS 120000
/* A kept parsed tree (opts.memo_bytes) unread this long goes: the memo
 * holds what busy passes read again and again (a rack whose trays move
 * brings passes every second or two), not a resting cache, whose passes
 * come tens of seconds apart. */
#define INF_MEMO_IDLE_MS 5000
#define INF_MEMO_RELEASE_BYTES (1u << 20)

struct kube_informer {
	struct kube_client *c;
	struct kube_informer_opts o;
	char *ns, *lsel, *fsel;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct kube_cache *cache; /* under mu */
	struct kube_handler h[INF_MAX_HANDLERS];
	size_t nh;
	char *rv;
	bool synced;
	bool started;
	char why[256]; /* why the last list failed; "" once one succeeded */
	bool joined;   /* the reflector thread has been joined */
	struct kube_stop *stop;
	pthread_t thread;
	struct kube_informer_stats stats;
	size_t memo_dropped; /* since the memo was last empty (mu) */
};

void kube_index_namespace(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	(void)arg;
	out->v[out->n++] = kube_obj_namespace(obj);
}

void kube_index_label(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	json_t *v = json_object_get(jx_path(obj, "metadata.labels"), arg);

	if (json_is_string(v))
		out->v[out->n++] = json_string_value(v);
}

void kube_index_node_name(const json_t *obj, const char *arg, struct kube_index_vals *out)
{
	const char *n = jx_str_or(obj, "spec.nodeName", "");

	(void)arg;
	if (*n != '\0')
		out->v[out->n++] = n;
}

enum nv_err kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
                              struct kube_informer **out)
{
	struct kube_informer *inf;

	if (c == NULL || o == NULL || o->res == NULL)
		return NV_E_INVAL;
	inf = xcalloc(1, sizeof(*inf));
	inf->c = c;
	inf->o = *o;
	inf->ns = o->ns ? xstrdup(o->ns) : NULL;
	inf->lsel = o->label_selector ? xstrdup(o->label_selector) : NULL;
	inf->fsel = o->field_selector ? xstrdup(o->field_selector) : NULL;
	inf->o.ns = inf->ns;
	inf->o.label_selector = inf->lsel;
	inf->o.field_selector = inf->fsel;
	if (inf->o.page_size <= 0)
		inf->o.page_size = 500;
	if (inf->o.backoff_initial_ms <= 0)
		inf->o.backoff_initial_ms = 800;
	if (inf->o.backoff_max_ms <= 0)
		inf->o.backoff_max_ms = 30000;
	pthread_mutex_init(&inf->mu, NULL);
	kube_cond_init(&inf->cond);
	inf->cache = kube_cache_new();
	kube_cache_memo_max(inf->cache, o->memo_bytes, INF_MEMO_IDLE_MS);
	inf->stop = kube_stop_new();
	*out = inf;
	return NV_OK;
}

enum nv_err kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn fn,
                                    const char *arg)
{
	if (inf->started)
		return NV_E_STATE;
	return kube_cache_add_index(inf->cache, name, fn, arg);
}

enum nv_err kube_informer_add_handler(struct kube_informer *inf, const struct kube_handler *h)
{
	if (inf->started || inf->nh >= INF_MAX_HANDLERS)
		return NV_E_STATE;
	inf->h[inf->nh++] = *h;
	return NV_OK;
}

static void set_rv(struct kube_informer *inf, const char *rv)
{
	if (rv == NULL || *rv == '\0')
		return;
	pthread_mutex_lock(&inf->mu);
	free(inf->rv);
	inf->rv = xstrdup(rv);
	pthread_mutex_unlock(&inf->mu);
}

static void stat_inc(struct kube_informer *inf, uint64_t *counter)
{
	pthread_mutex_lock(&inf->mu);
	(*counter)++;
	pthread_mutex_unlock(&inf->mu);
}

static void fire(struct kube_informer *inf, json_t *old, json_t *obj, bool deleted, bool unknown)
{
	for (size_t i = 0; i < inf->nh; i++) {
		const struct kube_handler *h = &inf->h[i];
		if (deleted && h->on_delete)
			h->on_delete(h->ud, obj, unknown);
		else if (!deleted && old && h->on_update)
			h->on_update(h->ud, old, obj);
		else if (!deleted && !old && h->on_add)
			h->on_add(h->ud, obj);
	}
}

/* Drops the kept trees gone unread (mu held). A memo that had grown past
 * a MiB and is empty now marks the end of a burst of passes: its heap
 * pages go back (once, outside the lock: *release). */
static void memo_expire(struct kube_informer *inf, int64_t now_ms, bool *release)
{
	uint64_t hits, misses;
	size_t kept;

	inf->memo_dropped += kube_cache_memo_expire(inf->cache, now_ms);
	kube_cache_memo_stats(inf->cache, &hits, &misses, &kept);
	*release = kept == 0 && inf->memo_dropped >= INF_MEMO_RELEASE_BYTES;
	if (kept == 0)
		inf->memo_dropped = 0;
}

/* Applies one object (added or modified); skips exact replays. Only this
 * thread changes the cache, so what it peeked is still there to swap. The
 * handlers get the old object's kept tree, or one parsed from the cache's
 * text. */
static void apply_upsert(struct kube_informer *inf, const char *key, json_t *obj)
{
	const struct kube_cobj *cur;
	struct kube_cobj *o, *old;
	json_t *old_obj = NULL;
	bool same;

	pthread_mutex_lock(&inf->mu);
	cur = kube_cache_peek(inf->cache, key);
	same = cur != NULL && strcmp(kube_cobj_rv(cur), kube_obj_rv(obj)) == 0;
	pthread_mutex_unlock(&inf->mu);
	if (same)
		return;
	o = kube_cobj_new(inf->cache, obj);
	pthread_mutex_lock(&inf->mu);
	old = kube_cache_swap(inf->cache, key, o, &old_obj);
	pthread_mutex_unlock(&inf->mu);
	if (old != NULL && old_obj == NULL && inf->nh > 0)
		old_obj = kube_cobj_parse(old);
	kube_cobj_unref(old);
	if (old == NULL || old_obj != NULL)
		fire(inf, old_obj, obj, false, false);
	json_decref(old_obj);
}

static void apply_delete(struct kube_informer *inf, const char *key, json_t *final, bool unknown)
{
	struct kube_cobj *old;
	json_t *last = NULL;

	pthread_mutex_lock(&inf->mu);
	old = kube_cache_swap(inf->cache, key, NULL, &last);
	pthread_mutex_unlock(&inf->mu);
	if (final != NULL) {
		json_decref(last);
		last = json_incref(final);
	}
	if (old != NULL && inf->nh > 0) {
		if (last == NULL)
			last = kube_cobj_parse(old);
		fire(inf, NULL, last, true, unknown);
	}
	kube_cobj_unref(old);
	json_decref(last);
}

/* What the cache keeps of obj: no managedFields (nothing reads them, and
 * they are often most of an object), then the informer's transform. */
static void trim(struct kube_informer *inf, json_t *obj)
{
	if (!inf->o.keep_managed_fields)
		json_object_del(json_object_get(obj, "metadata"), "managedFields");
	if (inf->o.transform != NULL)
		inf->o.transform(obj, inf->o.transform_arg);
}

static enum nv_err on_event(void *ud, enum kube_event_type type, json_t *obj)
{
	struct kube_informer *inf = ud;
	char key[INF_KEY_MAX];

	if (type == KUBE_EV_BOOKMARK) {
		bool release;
		stat_inc(inf, &inf->stats.bookmarks);
		pthread_mutex_lock(&inf->mu); /* a quiet cache's chance to expire */
		memo_expire(inf, time_mono_ms(), &release);
		pthread_mutex_unlock(&inf->mu);
		if (release)
			alloc_release_free();
		set_rv(inf, kube_obj_rv(obj));
		return NV_OK;
	}
	if (kube_obj_key(obj, key, sizeof(key)) != NV_OK)
		return NV_OK;
	trim(inf, obj);
	stat_inc(inf, &inf->stats.events);
	if (type == KUBE_EV_DELETED)
		apply_delete(inf, key, obj, false);
	else
		apply_upsert(inf, key, obj);
	set_rv(inf, kube_obj_rv(obj));
	return NV_OK;
}

/* One listed item, stored as it is read: a list never stands whole in
 * memory. */
struct list_pass {
	struct kube_informer *inf;
	json_t *seen; /* key -> true */
};

static enum nv_err list_item(void *ud, json_t *item)
{
	struct list_pass *lp = ud;
	const struct kube_res *r = lp->inf->o.res;
	char k[INF_KEY_MAX];

	/* Lists omit these per item; watches carry them. Keep one shape. */
	if (json_object_get(item, "kind") == NULL)
		json_object_set_new(item, "kind", json_string(r->kind ? r->kind : ""));
	if (json_object_get(item, "apiVersion") == NULL)
		json_object_set_new(item, "apiVersion",
		                    *r->group ? json_sprintf("%s/%s", r->group, r->version)
		                              : json_string(r->version));
	if (kube_obj_key(item, k, sizeof(k)) != NV_OK)
		return NV_OK;
	trim(lp->inf, item);
	json_object_set_new(lp->seen, k, json_true());
	apply_upsert(lp->inf, k, item);
	return NV_OK;
}

/* After a full list: tombstoned deletes for what it did not hold. */
static void drop_unseen(struct kube_informer *inf, const json_t *seen)
{
	char **keys;
	size_t n;

	pthread_mutex_lock(&inf->mu);
	keys = kube_cache_keys(inf->cache, &n);
	pthread_mutex_unlock(&inf->mu);
	for (size_t i = 0; i < n; i++) {
		if (json_object_get(seen, keys[i]) == NULL)
			apply_delete(inf, keys[i], NULL, true);
		free(keys[i]);
	}
	free(keys);
}

/* One full list, in pages, applied item by item. A consistent read, not
 * resourceVersion "0": the apiserver's watch cache ignores the page limit
 * and answers such a list in one body (1,152 GPU trays' Nodes are 22 MB,
 * 4,986 are 95 MB, past the client's body cap), where a consistent read is
 * served in pages. */
static enum nv_err do_list(struct kube_informer *inf, struct kube_status *st)
{
	struct kube_list_opts lo = {.label_selector = inf->lsel,
	                            .field_selector = inf->fsel,
	                            .limit = inf->o.page_size,
	                            .stop = inf->stop};
	struct list_pass lp = {inf, json_object()};
	char *rv = NULL;
	enum nv_err rc = kube_list_each(inf->c, inf->o.res, inf->ns, &lo, list_item, &lp, &rv, st);

	if (rc == NV_OK) {
		stat_inc(inf, &inf->stats.lists);
		drop_unseen(inf, lp.seen);
		set_rv(inf, rv);
		alloc_release_free();
		pthread_mutex_lock(&inf->mu);
		inf->synced = true;
		pthread_cond_broadcast(&inf->cond);
		pthread_mutex_unlock(&inf->mu);
	}
	json_decref(lp.seen);
	free(rv);
	return rc;
}

/* The wait before the next list or watch attempt: the backoff step
 * (jittered up to 2x, reset after 2 min healthy), but never less than the
 * Retry-After of the failed attempt (retry_after_s < 0: none), so a watch
 * refused with 429 is not repeated sooner than the apiserver asked. */
TESTABLE int64_t kube_backoff_next(struct kube_backoff *b, int retry_after_s, int64_t now_ms)
{
	if (b->healthy_since && now_ms - b->healthy_since > INF_HEALTHY_RESET_MS)
		b->cur_ms = b->initial_ms;
	b->healthy_since = 0;
	int64_t wait = kube_rand_range(b->cur_ms, 2 * b->cur_ms);
	b->cur_ms = b->cur_ms * 2 > b->max_ms ? b->max_ms : b->cur_ms * 2;
	if (retry_after_s > 0 && wait < (int64_t)retry_after_s * 1000)
		wait = (int64_t)retry_after_s * 1000;
	return wait;
}

/* Sleeps the next backoff step; true when stopped. */
static bool backoff_sleep(struct kube_informer *inf, struct kube_backoff *b,
                          const struct kube_status *st)
{
	return kube_stop_sleep(inf->stop, kube_backoff_next(b, st->retry_after_s, time_mono_ms()));
}

static enum nv_err watch_once(struct kube_informer *inf, struct kube_status *st, bool *short_watch)
{
	char rv[256];
	struct kube_watch_opts wo = {.label_selector = inf->lsel,
	                             .field_selector = inf->fsel,
	                             .resource_version = rv,
	                             .timeout_s = inf->o.watch_timeout_s,
	                             .stop = inf->stop};
	uint64_t before = inf->stats.events + inf->stats.bookmarks;
	int64_t t0 = time_mono_ms();
	enum nv_err rc;

	kube_informer_last_rv(inf, rv, sizeof(rv));
	stat_inc(inf, &inf->stats.watches);
	rc = kube_watch(inf->c, inf->o.res, inf->ns, &wo, on_event, inf, NULL, st);
	*short_watch =
	        time_mono_ms() - t0 < 1000 && before == inf->stats.events + inf->stats.bookmarks;
	return rc;
}

/* A failed list, said once per cause: a kind of a group the API server
 * does not serve (404) is a CustomResourceDefinition not installed, which
 * no retry mends; the reason is kept for kube_informer_why. */
static void list_failed(struct kube_informer *inf, enum nv_err rc, const struct kube_status *st)
{
	const struct kube_res *r = inf->o.res;
	char why[sizeof(inf->why)];
	bool crd = st->http_code == 404 && r->group != NULL && r->group[0] != '\0';

	if (crd)
		snprintf(why, sizeof(why),
		         "CustomResourceDefinition %s.%s is not installed (apply crds/; the chart "
		         "installs it unless --skip-crds)",
		         r->resource, r->group);
	else
		snprintf(why, sizeof(why), "list failed: %s: %.200s", nv_err_name(rc), st->message);
	pthread_mutex_lock(&inf->mu);
	bool again = strcmp(inf->why, why) == 0;
	memcpy(inf->why, why, sizeof(why));
	pthread_mutex_unlock(&inf->mu);
	if (crd && !again)
		log_error("kube", "resource not served", "resource=%s group=%s why=\"%s\"",
		          r->resource, r->group, why);
	else if (!crd)
		log_warn("kube", "list failed", "resource=%s err=%s msg=\"%s\"", r->resource,
		         nv_err_name(rc), st->message);
}

static void *reflector(void *arg)
{
	struct kube_informer *inf = arg;
	struct kube_backoff b = {inf->o.backoff_initial_ms, inf->o.backoff_initial_ms,
	                         inf->o.backoff_max_ms, 0};
	struct kube_status st;
	bool need_list = true, short_watch = false;
	enum nv_err rc;

	while (!kube_stop_requested(inf->stop)) {
		if (need_list) {
			rc = do_list(inf, &st);
			if (rc != NV_OK) {
				list_failed(inf, rc, &st);
				if (backoff_sleep(inf, &b, &st))
					break;
				continue;
			}
			pthread_mutex_lock(&inf->mu);
			inf->why[0] = '\0';
			pthread_mutex_unlock(&inf->mu);
			need_list = false;
		}
		if (b.healthy_since == 0)
			b.healthy_since = time_mono_ms();
		rc = watch_once(inf, &st, &short_watch);
		if (kube_stop_requested(inf->stop))
			break;
		if (rc == NV_E_GONE) {
			stat_inc(inf, &inf->stats.gone);
			log_info("kube", "watch expired; relisting", "resource=%s msg=\"%s\"",
			         inf->o.res->resource, st.message);
			need_list = true;
			continue;
		}
		if (rc == NV_OK && !short_watch)
			continue;
		log_info("kube", "watch ended; resuming after backoff",
		         "resource=%s err=%s msg=\"%s\"", inf->o.res->resource,
		         rc == NV_OK ? "short watch" : nv_err_name(rc), st.message);
		if (backoff_sleep(inf, &b, &st))
			break;
	}
	return NULL;
}

enum nv_err kube_informer_start(struct kube_informer *inf)
{
	if (inf->started)
		return NV_E_STATE;
	if (pthread_create(&inf->thread, NULL, reflector, inf) != 0)
		return NV_E_INTERNAL;
	inf->started = true;
	return NV_OK;
}

bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ms)
{
	int64_t end = time_mono_ms() + timeout_ms;
	bool ok;

	pthread_mutex_lock(&inf->mu);
	while (!inf->synced && !kube_stop_requested(inf->stop) && time_mono_ms() < end)
		kube_cond_wait_ms(&inf->cond, &inf->mu, end - time_mono_ms());
	ok = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	return ok;
}

bool kube_informer_synced(struct kube_informer *inf)
{
	return kube_informer_wait_synced(inf, 0);
}

bool kube_informer_why(struct kube_informer *inf, char *out, size_t cap)
{
	bool any;

	pthread_mutex_lock(&inf->mu);
	any = inf->why[0] != '\0';
	if (cap > 0)
		snprintf(out, cap, "%s", inf->why);
	pthread_mutex_unlock(&inf->mu);
	return any;
}

void kube_informer_stop(struct kube_informer *inf)
{
	if (inf == NULL)
		return;
	kube_stop_request(inf->stop);
	if (inf->started && !inf->joined) {
		pthread_join(inf->thread, NULL);
		inf->joined = true;
	}
}

void kube_informer_free(struct kube_informer *inf)
{
	if (inf == NULL)
		return;
	kube_informer_stop(inf);
	kube_cache_free(inf->cache);
	kube_stop_free(inf->stop);
	pthread_cond_destroy(&inf->cond);
	pthread_mutex_destroy(&inf->mu);
	free(inf->rv);
	free(inf->ns);
	free(inf->lsel);
	free(inf->fsel);
	free(inf);
}

json_t *kube_informer_get(struct kube_informer *inf, const char *key)
{
	struct kube_cobj *o;
	json_t *v;

	pthread_mutex_lock(&inf->mu);
	o = kube_cobj_ref(kube_cache_peek(inf->cache, key));
	pthread_mutex_unlock(&inf->mu);
	if (o == NULL)
		return NULL;
	v = kube_cobj_parse(o);
	kube_cobj_unref(o);
	return v;
}

const json_t *kube_informer_get_shared(struct kube_informer *inf, const char *key)
{
	struct kube_cobj *o;
	bool release;
	json_t *t;
	int64_t now = time_mono_ms();

	pthread_mutex_lock(&inf->mu);
	memo_expire(inf, now, &release);
	t = kube_cache_tree(inf->cache, key, &o, now);
	pthread_mutex_unlock(&inf->mu);
	if (release)
		alloc_release_free();
	if (t != NULL || o == NULL)
		return t;
	t = kube_cobj_parse(o);
	pthread_mutex_lock(&inf->mu);
	kube_cache_keep(inf->cache, key, o, t, time_mono_ms());
	pthread_mutex_unlock(&inf->mu);
	kube_cobj_unref(o);
	return t;
}

void kube_shared_put(const json_t *obj)
{
	json_decref((json_t *)obj);
}

json_t *kube_informer_list(struct kube_informer *inf)
{
	struct kube_cobj **v;
	size_t n;

	pthread_mutex_lock(&inf->mu);
	v = kube_cache_all(inf->cache, &n);
	pthread_mutex_unlock(&inf->mu);
	return kube_cobj_parse_all(v, n);
}

json_t *kube_informer_by_index(struct kube_informer *inf, const char *index, const char *value)
{
	struct kube_cobj **v;
	size_t n;

	pthread_mutex_lock(&inf->mu);
	v = kube_cache_index(inf->cache, index, value, &n);
	pthread_mutex_unlock(&inf->mu);
	return kube_cobj_parse_all(v, n);
}

json_t *kube_informer_index_keys(struct kube_informer *inf, const char *index, const char *value)
{
	json_t *keys;

	pthread_mutex_lock(&inf->mu);
	keys = kube_cache_index_keys(inf->cache, index, value);
	pthread_mutex_unlock(&inf->mu);
	return keys;
}

void kube_informer_foreach(struct kube_informer *inf, kube_visit_fn fn, void *ud)
{
	struct kube_cobj **v;
	size_t n, i;

	pthread_mutex_lock(&inf->mu);
	v = kube_cache_all(inf->cache, &n);
	pthread_mutex_unlock(&inf->mu);
	for (i = 0; i < n; i++) {
		json_t *o = kube_cobj_parse(v[i]);
		bool more = fn(ud, o);
		json_decref(o);
		kube_cobj_unref(v[i]);
		if (!more)
			break;
	}
	for (i++; i < n; i++)
		kube_cobj_unref(v[i]);
	free(v);
}

void kube_informer_last_rv(struct kube_informer *inf, char *out, size_t outsz)
{
	pthread_mutex_lock(&inf->mu);
	snprintf(out, outsz, "%s", inf->rv ? inf->rv : "");
	pthread_mutex_unlock(&inf->mu);
}

void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *out)
{
	pthread_mutex_lock(&inf->mu);
	*out = inf->stats;
	out->objects = kube_cache_len(inf->cache);
	out->bytes = kube_cache_bytes(inf->cache);
	kube_cache_memo_stats(inf->cache, &out->memo_hits, &out->memo_misses, &out->memo_bytes);
	pthread_mutex_unlock(&inf->mu);
}
