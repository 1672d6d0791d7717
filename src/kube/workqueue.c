// SPDX-License-Identifier: Apache-2.0
// The work queue of controllers: a FIFO of de-duplicated keys that are
// never processed by two workers at once, a time-ordered heap for delayed
// and rate-limited adds, per-item exponential backoff, and worker threads.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/kube_ctrl.h"

#include "kube_int.h"

struct delayed {
	int64_t ready_ms;
	char *key;
};

struct kube_workqueue {
	char *name;
	struct kube_workqueue_opts o;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char **q; /* FIFO: q[head..len) */
	size_t head, len, cap;
	json_t *dirty;      /* keys waiting in q -> when added (mono ms) */
	json_t *processing; /* keys held by a worker -> since when (mono ms) */
	json_t *failures;   /* key -> count */
	json_t *waiting;    /* key -> earliest ready_ms in the heap */
	struct delayed *heap;
	size_t nheap, capheap;
	bool shutdown;
	struct kube_workqueue_metrics m;
};

struct kube_workqueue *kube_workqueue_new(const char *name, const struct kube_workqueue_opts *o)
{
	struct kube_workqueue *q = xcalloc(1, sizeof(*q));

	q->name = xstrdup(name ? name : "queue");
	if (o != NULL)
		q->o = *o;
	if (q->o.base_delay_ms <= 0)
		q->o.base_delay_ms = 5;
	if (q->o.max_delay_ms <= 0)
		q->o.max_delay_ms = 1000000;
	pthread_mutex_init(&q->mu, NULL);
	kube_cond_init(&q->cond);
	q->dirty = json_object();
	q->processing = json_object();
	q->failures = json_object();
	q->waiting = json_object();
	return q;
}

void kube_workqueue_free(struct kube_workqueue *q)
{
	if (q == NULL)
		return;
	for (size_t i = q->head; i < q->len; i++)
		free(q->q[i]);
	for (size_t i = 0; i < q->nheap; i++)
		free(q->heap[i].key);
	free(q->q);
	free(q->heap);
	json_decref(q->dirty);
	json_decref(q->processing);
	json_decref(q->failures);
	json_decref(q->waiting);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->mu);
	free(q->name);
	free(q);
}

/* mu held. */
static void fifo_push(struct kube_workqueue *q, const char *key)
{
	if (q->head > 0 && q->head * 2 >= q->len) {
		memmove(q->q, q->q + q->head, (q->len - q->head) * sizeof(char *));
		q->len -= q->head;
		q->head = 0;
	}
	if (q->len == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->q = xreallocarray(q->q, q->cap, sizeof(char *));
	}
	q->q[q->len++] = xstrdup(key);
	pthread_cond_signal(&q->cond);
}

/* mu held. The add rules: dirty keys are not queued twice; a key being
 * processed is only marked dirty and re-queued by done. */
static void add_locked(struct kube_workqueue *q, const char *key)
{
	if (q->shutdown || json_object_get(q->dirty, key) != NULL)
		return;
	json_object_set_new(q->dirty, key, json_integer(time_mono_ms()));
	if (q->m.added != NULL)
		q->m.added(q->m.arg);
	if (json_object_get(q->processing, key) != NULL)
		return;
	fifo_push(q, key);
}

void kube_workqueue_add(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	add_locked(q, key);
	pthread_mutex_unlock(&q->mu);
}

static void heap_swap(struct delayed *a, struct delayed *b)
{
	struct delayed t = *a;
	*a = *b;
	*b = t;
}

static void heap_push(struct kube_workqueue *q, int64_t ready, const char *key)
{
	size_t i;

	if (q->nheap == q->capheap) {
		q->capheap = q->capheap ? q->capheap * 2 : 64;
		q->heap = xreallocarray(q->heap, q->capheap, sizeof(*q->heap));
	}
	i = q->nheap++;
	q->heap[i] = (struct delayed){ready, xstrdup(key)};
	while (i > 0 && q->heap[(i - 1) / 2].ready_ms > q->heap[i].ready_ms) {
		heap_swap(&q->heap[(i - 1) / 2], &q->heap[i]);
		i = (i - 1) / 2;
	}
}

static struct delayed heap_pop(struct kube_workqueue *q)
{
	struct delayed top = q->heap[0];
	size_t i = 0;

	q->heap[0] = q->heap[--q->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < q->nheap && q->heap[l].ready_ms < q->heap[m].ready_ms)
			m = l;
		if (r < q->nheap && q->heap[r].ready_ms < q->heap[m].ready_ms)
			m = r;
		if (m == i)
			break;
		heap_swap(&q->heap[m], &q->heap[i]);
		i = m;
	}
	return top;
}

void kube_workqueue_add_after(struct kube_workqueue *q, const char *key, int64_t delay_ms)
{
	int64_t ready = time_mono_ms() + delay_ms;
	json_t *w;

	if (delay_ms <= 0) {
		kube_workqueue_add(q, key);
		return;
	}
	pthread_mutex_lock(&q->mu);
	if (!q->shutdown && q->m.retried != NULL)
		q->m.retried(q->m.arg);
	w = json_object_get(q->waiting, key);
	if (!q->shutdown && (w == NULL || json_integer_value(w) > ready)) {
		json_object_set_new(q->waiting, key, json_integer(ready));
		heap_push(q, ready, key);
		pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->mu);
}

void kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key)
{
	json_int_t n;
	int64_t delay;

	pthread_mutex_lock(&q->mu);
	n = json_integer_value(json_object_get(q->failures, key));
	json_object_set_new(q->failures, key, json_integer(n + 1));
	pthread_mutex_unlock(&q->mu);
	delay = q->o.base_delay_ms;
	for (json_int_t i = 0; i < n && delay < q->o.max_delay_ms; i++)
		delay *= 2;
	if (delay > q->o.max_delay_ms)
		delay = q->o.max_delay_ms;
	kube_workqueue_add_after(q, key, delay);
}

void kube_workqueue_forget(struct kube_workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	json_object_del(q->failures, key);
	pthread_mutex_unlock(&q->mu);
}

int kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key)
{
	json_int_t n;

	pthread_mutex_lock(&q->mu);
	n = json_integer_value(json_object_get(q->failures, key));
	pthread_mutex_unlock(&q->mu);
	return (int)n;
}

/* mu held. Moves due delayed keys into the FIFO; returns the wait until
 * the next one (or 1 s). */
static int64_t promote_due(struct kube_workqueue *q)
{
	int64_t now = time_mono_ms();

	while (q->nheap > 0 && q->heap[0].ready_ms <= now) {
		struct delayed d = heap_pop(q);
		json_t *w = json_object_get(q->waiting, d.key);
		if (w != NULL && json_integer_value(w) == d.ready_ms) {
			json_object_del(q->waiting, d.key);
			add_locked(q, d.key);
		}
		free(d.key);
	}
	if (q->nheap == 0)
		return 1000;
	return q->heap[0].ready_ms - now;
}

char *kube_workqueue_get(struct kube_workqueue *q)
{
	char *key = NULL;

	pthread_mutex_lock(&q->mu);
	while (!q->shutdown) {
		int64_t wait = promote_due(q);
		if (q->head < q->len) {
			int64_t now = time_mono_ms();
			json_t *added;

			key = q->q[q->head++];
			added = json_object_get(q->dirty, key);
			if (added != NULL && q->m.waited != NULL)
				q->m.waited(q->m.arg,
				            (double)(now - json_integer_value(added)) / 1000.0);
			json_object_del(q->dirty, key);
			json_object_set_new(q->processing, key, json_integer(now));
			break;
		}
		kube_cond_wait_ms(&q->cond, &q->mu, wait);
	}
	pthread_mutex_unlock(&q->mu);
	return key;
}

void kube_workqueue_done(struct kube_workqueue *q, const char *key)
{
	json_t *since;

	pthread_mutex_lock(&q->mu);
	since = json_object_get(q->processing, key);
	if (since != NULL && q->m.worked != NULL)
		q->m.worked(q->m.arg,
		            (double)(time_mono_ms() - json_integer_value(since)) / 1000.0);
	json_object_del(q->processing, key);
	if (json_object_get(q->dirty, key) != NULL && !q->shutdown)
		fifo_push(q, key);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->mu);
}

void kube_workqueue_shutdown(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->mu);
}

void kube_workqueue_reopen(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = false;
	pthread_mutex_unlock(&q->mu);
}

bool kube_workqueue_shutting_down(struct kube_workqueue *q)
{
	bool s;

	pthread_mutex_lock(&q->mu);
	s = q->shutdown;
	pthread_mutex_unlock(&q->mu);
	return s;
}

size_t kube_workqueue_len(struct kube_workqueue *q)
{
	size_t n;

	pthread_mutex_lock(&q->mu);
	n = q->len - q->head;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void kube_workqueue_set_metrics(struct kube_workqueue *q, const struct kube_workqueue_metrics *m)
{
	pthread_mutex_lock(&q->mu);
	q->m = m != NULL ? *m : (struct kube_workqueue_metrics){0};
	pthread_mutex_unlock(&q->mu);
}

void kube_workqueue_in_progress(struct kube_workqueue *q, double *unfinished_s, double *longest_s)
{
	int64_t now = time_mono_ms(), sum = 0, longest = 0;
	const char *k;
	json_t *v;

	pthread_mutex_lock(&q->mu);
	json_object_foreach(q->processing, k, v) {
		int64_t d = now - json_integer_value(v);
		sum += d;
		if (d > longest)
			longest = d;
	}
	pthread_mutex_unlock(&q->mu);
	*unfinished_s = (double)sum / 1000.0;
	*longest_s = (double)longest / 1000.0;
}

/* ---- workers ---- */

struct kube_workers {
	struct kube_workqueue *q;
	kube_reconcile_fn fn;
	void *ud;
	int n;
	pthread_t *threads;
};

static void handle_result(struct kube_workers *w, const char *key, struct kube_result r)
{
	if (r.err != NV_OK && r.terminal) {
		log_error("kube", "reconcile failed terminally", "queue=%s key=%s err=%s",
		          w->q->name, key, nv_err_name(r.err));
		kube_workqueue_forget(w->q, key);
	} else if (r.err != NV_OK) {
		log_info("kube", "reconcile failed; requeued with backoff",
		         "queue=%s key=%s err=%s "
		         "requeues=%d",
		         w->q->name, key, nv_err_name(r.err),
		         kube_workqueue_num_requeues(w->q, key));
		kube_workqueue_add_rate_limited(w->q, key);
	} else if (r.requeue_after_ms > 0) {
		kube_workqueue_forget(w->q, key);
		kube_workqueue_add_after(w->q, key, r.requeue_after_ms);
	} else {
		kube_workqueue_forget(w->q, key);
	}
}

static void *worker_main(void *arg)
{
	struct kube_workers *w = arg;
	char *key;

	while ((key = kube_workqueue_get(w->q)) != NULL) {
		struct kube_result r = w->fn(w->ud, key);
		handle_result(w, key, r);
		kube_workqueue_done(w->q, key);
		free(key);
	}
	return NULL;
}

struct kube_workers *kube_workers_start(struct kube_workqueue *q, int n, kube_reconcile_fn fn,
                                        void *ud)
{
	struct kube_workers *w = xcalloc(1, sizeof(*w));

	w->q = q;
	w->fn = fn;
	w->ud = ud;
	w->threads = xcalloc((size_t)(n > 0 ? n : 1), sizeof(pthread_t));
	for (int i = 0; i < (n > 0 ? n : 1); i++) {
		if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
			break;
		w->n++;
	}
	return w;
}

void kube_workers_stop(struct kube_workers *w)
{
	if (w == NULL)
		return;
	kube_workqueue_shutdown(w->q);
	for (int i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	free(w->threads);
	free(w);
}
