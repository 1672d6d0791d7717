// SPDX-License-Identifier: Apache-2.0
// The event recorder: events.k8s.io/v1 Events written by one thread from a
// bounded queue, with client-go's aggregation: a repeat within 6 minutes
// opens a series, later repeats only count locally and are written at most
// every 30 minutes and when the series ends, so a flapping object cannot
// flood the apiserver.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvl72/kube_ctrl.h"

#include "kube_int.h"

#define EV_QUEUE_MAX 1000
#define EV_SERIES_WINDOW_MS (6 * 60 * 1000)
#define EV_SERIES_REFRESH_MS (30 * 60 * 1000)
#define EV_NOTE_MAX 1024
#define EV_FIELD_MAX 128
#define EV_CACHE_MAX 4096

struct ev_job {
	struct ev_job *next;
	char *key;     /* aggregation key */
	json_t *event; /* the Event to create */
	int64_t wall_ms;
};

/* One aggregated event: the object in the API and its local count. */
struct ev_series {
	char *key;
	char ns[256];
	char name[320];
	int64_t count;
	int64_t last_wall_ms;  /* last occurrence */
	int64_t last_write_ms; /* monotonic */
	bool dirty;            /* count not yet written */
};

struct kube_recorder {
	struct kube_client *c;
	char *controller, *instance;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct ev_job *head, *tail;
	size_t qlen;
	bool busy;
	bool stopping;
	struct ev_series **series; /* open series; only the event thread */
	size_t nseries;
	pthread_t thread;
	struct kube_recorder_stats stats;
};

static void micro_now(int64_t wall_ms, char out[40])
{
	kube_format_micro(wall_ms * 1000, out);
}

static void trunc_copy(char *dst, size_t dstsz, const char *src)
{
	snprintf(dst, dstsz, "%s", src ? src : "");
}

static enum nv_err ev_create(struct kube_recorder *r, struct ev_series *s, json_t *ev)
{
	struct kube_status st;
	enum nv_err rc = kube_create(r->c, &KUBE_RES_EVENTS, s->ns, ev, NULL, &st);

	if (rc != NV_OK)
		log_warn("kube", "event not recorded", "ns=%s name=%s err=%s msg=\"%s\"", s->ns,
		         s->name, nv_err_name(rc), st.message);
	return rc;
}

static enum nv_err ev_patch_series(struct kube_recorder *r, struct ev_series *s)
{
	struct kube_status st;
	char t[40];
	json_t *p;
	enum nv_err rc;

	micro_now(s->last_wall_ms, t);
	p = json_pack("{s:{s:I,s:s}}", "series", "count", (json_int_t)s->count, "lastObservedTime",
	              t);
	rc = kube_patch(r->c, &KUBE_RES_EVENTS, s->ns, s->name,
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, p, NULL, &st);
	json_decref(p);
	s->dirty = false;
	s->last_write_ms = time_mono_ms();
	if (rc != NV_OK)
		log_warn("kube", "event series not updated", "ns=%s name=%s err=%s", s->ns, s->name,
		         nv_err_name(rc));
	return rc;
}

static void stat_add(struct kube_recorder *r, uint64_t *counter)
{
	pthread_mutex_lock(&r->mu);
	(*counter)++;
	pthread_mutex_unlock(&r->mu);
}

static struct ev_series *ev_find(struct kube_recorder *r, const char *key)
{
	for (size_t i = 0; i < r->nseries; i++)
		if (strcmp(r->series[i]->key, key) == 0)
			return r->series[i];
	return NULL;
}

static void ev_forget(struct kube_recorder *r, size_t i)
{
	free(r->series[i]->key);
	free(r->series[i]);
	r->series[i] = r->series[--r->nseries];
}

static struct ev_series *ev_new_series(struct kube_recorder *r, const char *key)
{
	struct ev_series *s = xcalloc(1, sizeof(*s));

	if (r->nseries == EV_CACHE_MAX)
		ev_forget(r, 0); /* full: an old series just stops aggregating */
	if (r->series == NULL)
		r->series = xcalloc(EV_CACHE_MAX, sizeof(*r->series));
	s->key = xstrdup(key);
	r->series[r->nseries++] = s;
	return s;
}

/* Records one occurrence: a new Event, the start of a series, or a count. */
static void ev_record(struct kube_recorder *r, struct ev_job *j)
{
	struct ev_series *s = ev_find(r, j->key);

	if (s != NULL && j->wall_ms - s->last_wall_ms < EV_SERIES_WINDOW_MS) {
		s->count++;
		s->last_wall_ms = j->wall_ms;
		if (s->count == 2) {
			bool ok = ev_patch_series(r, s) == NV_OK;
			stat_add(r, ok ? &r->stats.series_updates : &r->stats.failed);
		} else {
			s->dirty = true;
		}
		return;
	}
	if (s == NULL)
		s = ev_new_series(r, j->key);
	trunc_copy(s->ns, sizeof(s->ns), jx_str_or(j->event, "metadata.namespace", "default"));
	trunc_copy(s->name, sizeof(s->name), jx_str_or(j->event, "metadata.name", ""));
	s->count = 1;
	s->dirty = false;
	s->last_wall_ms = j->wall_ms;
	s->last_write_ms = time_mono_ms();
	stat_add(r, ev_create(r, s, j->event) == NV_OK ? &r->stats.created : &r->stats.failed);
}

/* Writes counts that waited 30 minutes, closes series idle for 6, and on
 * shutdown writes every pending count. */
static void ev_sweep(struct kube_recorder *r, bool final)
{
	int64_t now_wall = time_wall_ms(), now = time_mono_ms();

	for (size_t i = 0; i < r->nseries;) {
		struct ev_series *s = r->series[i];
		bool ended = now_wall - s->last_wall_ms >= EV_SERIES_WINDOW_MS;
		if (s->dirty && (final || ended || now - s->last_write_ms >= EV_SERIES_REFRESH_MS))
			stat_add(r, ev_patch_series(r, s) == NV_OK ? &r->stats.series_updates
			                                           : &r->stats.failed);
		if (ended)
			ev_forget(r, i);
		else
			i++;
	}
}

static void *ev_main(void *arg)
{
	struct kube_recorder *r = arg;
	int64_t last_sweep = time_mono_ms();

	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (r->head == NULL && !r->stopping && time_mono_ms() - last_sweep < 1000)
			kube_cond_wait_ms(&r->cond, &r->mu, 1000);
		struct ev_job *j = r->head;
		if (j == NULL && r->stopping)
			break;
		if (j != NULL) {
			r->head = j->next;
			if (r->head == NULL)
				r->tail = NULL;
			r->qlen--;
		}
		r->busy = true;
		pthread_mutex_unlock(&r->mu);
		if (j != NULL) {
			ev_record(r, j);
			free(j->key);
			json_decref(j->event);
			free(j);
		} else {
			ev_sweep(r, false);
			last_sweep = time_mono_ms();
		}
		pthread_mutex_lock(&r->mu);
		r->busy = false;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->mu);
	ev_sweep(r, true);
	return NULL;
}

struct kube_recorder *kube_recorder_new(struct kube_client *c, const char *controller,
                                        const char *instance)
{
	struct kube_recorder *r = xcalloc(1, sizeof(*r));
	char host[256] = "unknown";

	gethostname(host, sizeof(host) - 1);
	r->c = c;
	r->controller = xstrndup(controller ? controller : "nvl72.io/operator", EV_FIELD_MAX);
	r->instance = instance ? xstrndup(instance, EV_FIELD_MAX)
	                       : xasprintf("%.60s-%.60s", r->controller, host);
	pthread_mutex_init(&r->mu, NULL);
	kube_cond_init(&r->cond);
	if (pthread_create(&r->thread, NULL, ev_main, r) != 0) {
		log_error("kube", "cannot start the event thread", NULL);
		abort();
	}
	return r;
}

bool kube_recorder_flush(struct kube_recorder *r, int64_t timeout_ms)
{
	int64_t end = time_mono_ms() + timeout_ms;
	bool empty;

	pthread_mutex_lock(&r->mu);
	while ((r->head != NULL || r->busy) && time_mono_ms() < end)
		kube_cond_wait_ms(&r->cond, &r->mu, end - time_mono_ms());
	empty = r->head == NULL && !r->busy;
	pthread_mutex_unlock(&r->mu);
	return empty;
}

void kube_recorder_free(struct kube_recorder *r)
{
	if (r == NULL)
		return;
	kube_recorder_flush(r, 5000);
	pthread_mutex_lock(&r->mu);
	r->stopping = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	while (r->head != NULL) {
		struct ev_job *j = r->head;
		r->head = j->next;
		free(j->key);
		json_decref(j->event);
		free(j);
	}
	while (r->nseries > 0)
		ev_forget(r, 0);
	free(r->series);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->mu);
	free(r->controller);
	free(r->instance);
	free(r);
}

void kube_recorder_stats(struct kube_recorder *r, struct kube_recorder_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->stats;
	pthread_mutex_unlock(&r->mu);
}

/* The aggregation key: everything that makes two events "the same". */
static char *ev_key(const json_t *reg, const char *type, const char *reason, const char *action)
{
	return xasprintf("%s|%s|%s|%s|%s|%s|%s", jx_str_or(reg, "metadata.uid", ""),
	                 jx_str_or(reg, "kind", ""), kube_obj_namespace(reg), kube_obj_name(reg),
	                 type, reason, action);
}

static json_t *ev_build(struct kube_recorder *r, const json_t *reg, const char *type,
                        const char *reason, const char *action, const char *note, int64_t wall_ms)
{
	char t[40], name[320];
	const char *ns = kube_obj_namespace(reg);
	json_t *ref = json_object();

	micro_now(wall_ms, t);
	snprintf(name, sizeof(name), "%.253s.%llx", kube_obj_name(reg),
	         (unsigned long long)time_wall_ms() * 1000000ULL +
	                 (unsigned long long)(time_mono_us() % 1000000));
	static const char *const fields[] = {"apiVersion", "kind"};
	for (size_t i = 0; i < ARRAY_LEN(fields); i++)
		if (json_is_string(json_object_get(reg, fields[i])))
			json_object_set(ref, fields[i], json_object_get(reg, fields[i]));
	json_object_set_new(ref, "name", json_string(kube_obj_name(reg)));
	if (*ns)
		json_object_set_new(ref, "namespace", json_string(ns));
	if (*jx_str_or(reg, "metadata.uid", ""))
		json_object_set_new(ref, "uid", json_string(jx_str_or(reg, "metadata.uid", "")));
	return json_pack("{s:s,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:s%,s:s,s:o}", "apiVersion",
	                 "events.k8s.io/v1", "kind", "Event", "metadata", "name", name, "namespace",
	                 *ns ? ns : "default", "eventTime", t, "reportingController", r->controller,
	                 "reportingInstance", r->instance, "action", action, "reason", reason,
	                 "note", note, strlen(note), "type", type, "regarding", ref);
}

void kube_recorder_eventf(struct kube_recorder *r, const json_t *regarding, const char *type,
                          const char *reason, const char *action, const char *fmt, ...)
{
	char note[EV_NOTE_MAX + 1], rs[EV_FIELD_MAX + 1], ac[EV_FIELD_MAX + 1];
	int64_t now = time_wall_ms();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	trunc_copy(rs, sizeof(rs), reason);
	trunc_copy(ac, sizeof(ac), action);
	struct ev_job *j = xcalloc(1, sizeof(*j));
	j->key = ev_key(regarding, type, rs, ac);
	j->event = ev_build(r, regarding, type, rs, ac, note, now);
	j->wall_ms = now;
	pthread_mutex_lock(&r->mu);
	if (r->qlen >= EV_QUEUE_MAX || r->stopping) {
		r->stats.dropped++;
		pthread_mutex_unlock(&r->mu);
		free(j->key);
		json_decref(j->event);
		free(j);
		return;
	}
	if (r->tail)
		r->tail->next = j;
	else
		r->head = j;
	r->tail = j;
	r->qlen++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
}
