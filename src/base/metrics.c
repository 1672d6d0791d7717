// SPDX-License-Identifier: Apache-2.0
// The metrics registry: families of label sets with a hard cap each, updated
// from any thread and rendered in the Prometheus text format for /metrics.
#include "nvl72/metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "nvl72/alloc.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

#define METRICS_COLLECTORS_MAX 16
#define METRICS_WRITERS_MAX 16
#define METRICS_SINK_FAMILIES_MAX 128
#define METRICS_FAMILIES_MAX 4096
#define METRICS_HELP_MAX 1024
#define METRICS_REJECTED_NAME "nvl72_metrics_series_rejected_total"

struct metrics_series {
	char **values; /* one owned string per label name */
	uint64_t hash;
	struct metrics_series *hnext;
	double value; /* counters and gauges */
	double sum;   /* histograms */
	uint64_t count;
	uint64_t *bucket_counts; /* per bucket, not cumulative */
};

struct metrics_family {
	pthread_mutex_t mu;
	struct metrics_registry *reg;
	char *name;
	char *help;
	enum metrics_type type;
	char **labels;
	size_t nlabels;
	double *buckets;
	size_t nbuckets;
	size_t max_series;
	struct metrics_series **series; /* in creation order */
	size_t nseries;
	size_t series_cap;
	struct metrics_series **table; /* hash chains; size is a power of two */
	size_t table_size;
};

struct metrics_collector {
	metrics_collect_fn fn;
	void *arg;
};

struct metrics_writer {
	metrics_write_fn fn;
	void *arg;
};

struct metrics_registry {
	pthread_mutex_t mu;
	struct metrics_family **fams;
	size_t nfams;
	size_t fams_cap;
	struct metrics_collector collectors[METRICS_COLLECTORS_MAX];
	size_t ncollectors;
	struct metrics_writer writers[METRICS_WRITERS_MAX];
	size_t nwriters;
	struct metrics_family *rejected;
	double start_time_s;
	struct metrics_family *proc_cpu;
	struct metrics_family *proc_rss;
	struct metrics_family *proc_fds;
	struct metrics_family *proc_start;
};

const double metrics_reconcile_buckets[] = {
        0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3,  0.35, 0.4,  0.45, 0.5, 0.6,
        0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5,  3.0,  3.5,  4.0,  4.5, 5.0,
        6.0,   7.0,  8.0,   9.0,  10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
};
const size_t metrics_reconcile_nbuckets =
        sizeof(metrics_reconcile_buckets) / sizeof(metrics_reconcile_buckets[0]);

const double metrics_workqueue_buckets[] = {
        1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
};
const size_t metrics_workqueue_nbuckets =
        sizeof(metrics_workqueue_buckets) / sizeof(metrics_workqueue_buckets[0]);

/* ---- names, values and escaping ---------------------------------------- */

static bool name_char_ok(char c, bool first, bool colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return true;
	if (c == ':')
		return colon;
	return !first && c >= '0' && c <= '9';
}

static bool ident_valid(const char *s, bool colon)
{
	if (s == NULL || s[0] == '\0' || strlen(s) > METRICS_NAME_MAX)
		return false;
	for (size_t i = 0; s[i]; i++)
		if (!name_char_ok(s[i], i == 0, colon))
			return false;
	return true;
}

bool metrics_name_valid(const char *s)
{
	return ident_valid(s, true);
}

static bool label_name_valid(const char *s, enum metrics_type type)
{
	if (!ident_valid(s, false) || str_has_prefix(s, "__"))
		return false;
	return !(type == METRICS_HISTOGRAM && strcmp(s, "le") == 0);
}

/* Strict UTF-8: no overlongs, surrogates or code points past U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1, cp = c & 0x1fu;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, cp = c & 0x0fu;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, cp = c & 0x07u;
		} else {
			return false;
		}
		if (n > len - i - 1)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3fu);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

static enum nv_err value_check(const char *v)
{
	if (v == NULL)
		return NV_E_INVAL;
	size_t len = strnlen(v, METRICS_VALUE_MAX + 1);
	if (len > METRICS_VALUE_MAX)
		return NV_E_TOO_LARGE;
	return utf8_valid((const unsigned char *)v, len) ? NV_OK : NV_E_INVAL;
}

static enum nv_err escape_text(struct buf *out, const char *s, bool quote)
{
	enum nv_err e = NV_OK;
	for (const char *p = s; *p && e == NV_OK; p++) {
		if (*p == '\\')
			e = buf_append(out, "\\\\", 2);
		else if (*p == '\n')
			e = buf_append(out, "\\n", 2);
		else if (*p == '"' && quote)
			e = buf_append(out, "\\\"", 2);
		else
			e = buf_append_byte(out, *p);
	}
	return e;
}

enum nv_err metrics_escape_label(struct buf *out, const char *value)
{
	return escape_text(out, value, true);
}

/* Shortest text that reads back as the same double, as Go's client does. */
static enum nv_err append_double(struct buf *out, double v)
{
	if (isnan(v))
		return buf_append_str(out, "NaN");
	if (isinf(v))
		return buf_append_str(out, v > 0 ? "+Inf" : "-Inf");
	char tmp[40];
	snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		snprintf(tmp, sizeof(tmp), "%.17g", v);
	return buf_append_str(out, tmp);
}

bool metrics_buckets_exponential(double start, double factor, size_t count, double *out)
{
	if (!(start > 0) || !(factor > 1) || count == 0 || out == NULL ||
	    count > METRICS_BUCKETS_MAX)
		return false;
	double v = start;
	for (size_t i = 0; i < count; i++, v *= factor)
		out[i] = v;
	return isfinite(out[count - 1]);
}

/* ---- families ------------------------------------------------------------ */

static void series_free(struct metrics_series *s, size_t nlabels)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < nlabels; i++)
		free(s->values[i]);
	free(s->values);
	free(s->bucket_counts);
	free(s);
}

static void family_free(struct metrics_family *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->nseries; i++)
		series_free(f->series[i], f->nlabels);
	for (size_t i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->series);
	free(f->table);
	free(f->buckets);
	free(f->name);
	free(f->help);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

static enum nv_err desc_check(const struct metrics_desc *d, size_t *nlabels)
{
	if (d == NULL || !metrics_name_valid(d->name) || d->help == NULL ||
	    strnlen(d->help, METRICS_HELP_MAX + 1) > METRICS_HELP_MAX ||
	    d->type > METRICS_HISTOGRAM || d->max_series > METRICS_SERIES_HARD_MAX)
		return NV_E_INVAL;
	size_t n = 0;
	for (; d->labels && d->labels[n]; n++) {
		if (n >= METRICS_LABELS_MAX || !label_name_valid(d->labels[n], d->type))
			return NV_E_INVAL;
		for (size_t k = 0; k < n; k++)
			if (strcmp(d->labels[k], d->labels[n]) == 0)
				return NV_E_INVAL;
	}
	if (d->type == METRICS_HISTOGRAM) {
		if (d->buckets == NULL || d->nbuckets == 0 || d->nbuckets > METRICS_BUCKETS_MAX)
			return NV_E_INVAL;
		for (size_t i = 0; i < d->nbuckets; i++)
			if (!isfinite(d->buckets[i]) ||
			    (i > 0 && !(d->buckets[i] > d->buckets[i - 1])))
				return NV_E_INVAL;
	}
	*nlabels = n;
	return NV_OK;
}

static struct metrics_family *family_new(const struct metrics_desc *d, size_t nlabels)
{
	struct metrics_family *f = xcalloc(1, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	f->name = xstrdup(d->name);
	f->help = xstrdup(d->help);
	f->type = d->type;
	f->nlabels = nlabels;
	f->labels = xcalloc(nlabels ? nlabels : 1, sizeof(char *));
	for (size_t i = 0; i < nlabels; i++)
		f->labels[i] = xstrdup(d->labels[i]);
	if (d->type == METRICS_HISTOGRAM) {
		f->nbuckets = d->nbuckets;
		f->buckets = xcalloc(d->nbuckets, sizeof(double));
		memcpy(f->buckets, d->buckets, d->nbuckets * sizeof(double));
	}
	f->max_series = d->max_series ? d->max_series : METRICS_SERIES_DEFAULT;
	f->table_size = 16;
	f->table = xcalloc(f->table_size, sizeof(*f->table));
	return f;
}

static struct metrics_family *registry_find_locked(struct metrics_registry *r, const char *name)
{
	for (size_t i = 0; i < r->nfams; i++)
		if (strcmp(r->fams[i]->name, name) == 0)
			return r->fams[i];
	return NULL;
}

enum nv_err metrics_family_register(struct metrics_registry *r, const struct metrics_desc *d,
                                    struct metrics_family **out)
{
	size_t nlabels = 0;
	enum nv_err e = desc_check(d, &nlabels);
	if (e)
		return e;
	pthread_mutex_lock(&r->mu);
	if (registry_find_locked(r, d->name)) {
		e = NV_E_EXISTS;
		goto out;
	}
	if (r->nfams >= METRICS_FAMILIES_MAX) {
		e = NV_E_TOO_LARGE;
		goto out;
	}
	if (r->nfams == r->fams_cap) {
		r->fams_cap = r->fams_cap ? r->fams_cap * 2 : 16;
		r->fams = xreallocarray(r->fams, r->fams_cap, sizeof(*r->fams));
	}
	struct metrics_family *f = family_new(d, nlabels);
	f->reg = r;
	r->fams[r->nfams++] = f;
	if (out)
		*out = f;
out:
	pthread_mutex_unlock(&r->mu);
	return e;
}

struct metrics_family *metrics_registry_find(struct metrics_registry *r, const char *name)
{
	pthread_mutex_lock(&r->mu);
	struct metrics_family *f = registry_find_locked(r, name);
	pthread_mutex_unlock(&r->mu);
	return f;
}

enum nv_err metrics_registry_add_collector(struct metrics_registry *r, metrics_collect_fn fn,
                                           void *arg)
{
	enum nv_err e = NV_OK;
	pthread_mutex_lock(&r->mu);
	if (r->ncollectors >= METRICS_COLLECTORS_MAX) {
		e = NV_E_TOO_LARGE;
	} else {
		r->collectors[r->ncollectors].fn = fn;
		r->collectors[r->ncollectors].arg = arg;
		r->ncollectors++;
	}
	pthread_mutex_unlock(&r->mu);
	return e;
}

/* ---- series lookup --------------------------------------------------------- */

static uint64_t values_hash(const char *const *values, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
			h = (h ^ *p) * 1099511628211ull;
		h = (h ^ 0xffu) * 1099511628211ull;
	}
	return h;
}

static bool series_match(const struct metrics_series *s, const char *const *values, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s->values[i], values[i]) != 0)
			return false;
	return true;
}

static struct metrics_series *series_find(struct metrics_family *f, const char *const *values,
                                          uint64_t hash)
{
	struct metrics_series *s = f->table[hash & (f->table_size - 1)];
	for (; s; s = s->hnext)
		if (s->hash == hash && series_match(s, values, f->nlabels))
			return s;
	return NULL;
}

static void table_grow(struct metrics_family *f)
{
	size_t size = f->table_size * 2;
	struct metrics_series **t = xcalloc(size, sizeof(*t));
	for (size_t i = 0; i < f->nseries; i++) {
		struct metrics_series *s = f->series[i];
		s->hnext = t[s->hash & (size - 1)];
		t[s->hash & (size - 1)] = s;
	}
	free(f->table);
	f->table = t;
	f->table_size = size;
}

static struct metrics_series *series_add(struct metrics_family *f, const char *const *values,
                                         uint64_t hash)
{
	struct metrics_series *s = xcalloc(1, sizeof(*s));
	s->values = xcalloc(f->nlabels ? f->nlabels : 1, sizeof(char *));
	for (size_t i = 0; i < f->nlabels; i++)
		s->values[i] = xstrdup(values[i]);
	s->hash = hash;
	if (f->type == METRICS_HISTOGRAM)
		s->bucket_counts = xcalloc(f->nbuckets, sizeof(uint64_t));
	if (f->nseries == f->series_cap) {
		f->series_cap = f->series_cap ? f->series_cap * 2 : 8;
		f->series = xreallocarray(f->series, f->series_cap, sizeof(*f->series));
	}
	f->series[f->nseries++] = s;
	if (f->nseries > f->table_size)
		table_grow(f);
	else {
		s->hnext = f->table[hash & (f->table_size - 1)];
		f->table[hash & (f->table_size - 1)] = s;
	}
	return s;
}

static enum nv_err values_check(const struct metrics_family *f, const char *const *values)
{
	if (f->nlabels > 0 && values == NULL)
		return NV_E_INVAL;
	for (size_t i = 0; i < f->nlabels; i++) {
		enum nv_err e = value_check(values[i]);
		if (e)
			return e;
	}
	return NV_OK;
}

static void count_rejected(struct metrics_family *f)
{
	struct metrics_family *rej = f->reg ? f->reg->rejected : NULL;
	if (rej == NULL || rej == f)
		return;
	const char *v[] = {f->name};
	(void)metrics_counter_inc(rej, v);
}

/* The same, for a family written at render time, by name. */
static void count_rejected_name(struct metrics_registry *r, const char *name)
{
	const char *v[] = {name};
	if (r->rejected != NULL)
		(void)metrics_counter_inc(r->rejected, v);
}

/* Checks the label values, locks f and looks their series up (*out is NULL
 * when there is none). On success f stays locked, and *values and *hash
 * are what a new series would be added with. */
static enum nv_err family_lock_find(struct metrics_family *f, const char *const **values,
                                    uint64_t *hash, struct metrics_series **out)
{
	static const char *const none[1] = {NULL};
	enum nv_err e = values_check(f, *values);
	if (e)
		return e;
	if (f->nlabels == 0)
		*values = none;
	*hash = values_hash(*values, f->nlabels);
	pthread_mutex_lock(&f->mu);
	*out = series_find(f, *values, *hash);
	return NV_OK;
}

/* Locks f and finds or creates the series; on success f stays locked. */
static enum nv_err family_lock_series(struct metrics_family *f, const char *const *values,
                                      struct metrics_series **out)
{
	uint64_t hash;
	struct metrics_series *s;
	enum nv_err e = family_lock_find(f, &values, &hash, &s);
	if (e)
		return e;
	if (s == NULL) {
		if (f->nseries >= f->max_series) {
			pthread_mutex_unlock(&f->mu);
			count_rejected(f);
			return NV_E_RANGE;
		}
		s = series_add(f, values, hash);
	}
	*out = s;
	return NV_OK;
}

/* ---- updates --------------------------------------------------------------- */

enum nv_err metrics_family_touch(struct metrics_family *f, const char *const *values)
{
	struct metrics_series *s = NULL;
	enum nv_err e = family_lock_series(f, values, &s);
	if (e)
		return e;
	pthread_mutex_unlock(&f->mu);
	return NV_OK;
}

static enum nv_err scalar_update(struct metrics_family *f, const char *const *values, double v,
                                 bool set)
{
	struct metrics_series *s = NULL;
	enum nv_err e = family_lock_series(f, values, &s);
	if (e)
		return e;
	if (set)
		s->value = v;
	else
		s->value += v;
	pthread_mutex_unlock(&f->mu);
	return NV_OK;
}

enum nv_err metrics_counter_add(struct metrics_family *f, const char *const *values, double v)
{
	if (f->type != METRICS_COUNTER || !(v >= 0) || isinf(v))
		return NV_E_INVAL;
	return scalar_update(f, values, v, false);
}

enum nv_err metrics_counter_inc(struct metrics_family *f, const char *const *values)
{
	return metrics_counter_add(f, values, 1.0);
}

enum nv_err metrics_gauge_set(struct metrics_family *f, const char *const *values, double v)
{
	if (f->type != METRICS_GAUGE)
		return NV_E_INVAL;
	return scalar_update(f, values, v, true);
}

enum nv_err metrics_gauge_add(struct metrics_family *f, const char *const *values, double v)
{
	if (f->type != METRICS_GAUGE)
		return NV_E_INVAL;
	return scalar_update(f, values, v, false);
}

enum nv_err metrics_gauge_set_state(struct metrics_family *f, const char *const *values,
                                    const char *const *states, size_t nstates, const char *current)
{
	const char *full[METRICS_LABELS_MAX];
	size_t n = f->nlabels;
	bool found = false;
	if (f->type != METRICS_GAUGE || n == 0 || (n > 1 && values == NULL) || current == NULL)
		return NV_E_INVAL;
	for (size_t i = 0; i < nstates; i++)
		found = found || strcmp(states[i], current) == 0;
	if (!found)
		return NV_E_INVAL;
	for (size_t i = 0; i + 1 < n; i++)
		full[i] = values[i];
	enum nv_err e = NV_OK;
	for (size_t i = 0; i < nstates && e == NV_OK; i++) {
		full[n - 1] = states[i];
		e = metrics_gauge_set(f, full, strcmp(states[i], current) == 0 ? 1.0 : 0.0);
	}
	return e;
}

enum nv_err metrics_histogram_observe(struct metrics_family *f, const char *const *values, double v)
{
	if (f->type != METRICS_HISTOGRAM || isnan(v))
		return NV_E_INVAL;
	struct metrics_series *s = NULL;
	enum nv_err e = family_lock_series(f, values, &s);
	if (e)
		return e;
	for (size_t i = 0; i < f->nbuckets; i++) {
		if (v <= f->buckets[i]) {
			s->bucket_counts[i]++;
			break;
		}
	}
	s->count++;
	s->sum += v;
	pthread_mutex_unlock(&f->mu);
	return NV_OK;
}

enum nv_err metrics_family_get(struct metrics_family *f, const char *const *values, double *out)
{
	static const char *const none[1] = {NULL};
	enum nv_err e = values_check(f, values);
	if (e)
		return e;
	if (f->nlabels == 0)
		values = none;
	uint64_t hash = values_hash(values, f->nlabels);
	pthread_mutex_lock(&f->mu);
	struct metrics_series *s = series_find(f, values, hash);
	if (s == NULL)
		e = NV_E_NOT_FOUND;
	else
		*out = f->type == METRICS_HISTOGRAM ? (double)s->count : s->value;
	pthread_mutex_unlock(&f->mu);
	return e;
}

static void chain_unlink(struct metrics_family *f, struct metrics_series *s)
{
	struct metrics_series **pp = &f->table[s->hash & (f->table_size - 1)];
	while (*pp && *pp != s)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = s->hnext;
}

enum nv_err metrics_family_remove(struct metrics_family *f, const char *const *values)
{
	uint64_t hash;
	struct metrics_series *s;
	enum nv_err e = family_lock_find(f, &values, &hash, &s);
	if (e)
		return e;
	if (s == NULL) {
		e = NV_E_NOT_FOUND;
		goto out;
	}
	chain_unlink(f, s);
	for (size_t i = 0; i < f->nseries; i++) {
		if (f->series[i] == s) {
			memmove(&f->series[i], &f->series[i + 1],
			        (f->nseries - i - 1) * sizeof(*f->series));
			f->nseries--;
			break;
		}
	}
	series_free(s, f->nlabels);
out:
	pthread_mutex_unlock(&f->mu);
	return e;
}

void metrics_family_reset(struct metrics_family *f)
{
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nseries; i++)
		series_free(f->series[i], f->nlabels);
	f->nseries = 0;
	memset(f->table, 0, f->table_size * sizeof(*f->table));
	pthread_mutex_unlock(&f->mu);
}

size_t metrics_family_series_count(struct metrics_family *f)
{
	pthread_mutex_lock(&f->mu);
	size_t n = f->nseries;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* ---- rendering ----------------------------------------------------------- */

static const char *type_name(enum metrics_type t)
{
	switch (t) {
	case METRICS_COUNTER:
		return "counter";
	case METRICS_GAUGE:
		return "gauge";
	case METRICS_HISTOGRAM:
		return "histogram";
	}
	return "untyped";
}

/* name{a="x",b="y",le="0.5"} with le added when le_text is not NULL. */
static enum nv_err render_name_labels(struct buf *out, const struct metrics_family *f,
                                      const struct metrics_series *s, const char *suffix,
                                      const char *le_text)
{
	enum nv_err e = buf_printf(out, "%s%s", f->name, suffix);
	if (e || (f->nlabels == 0 && le_text == NULL))
		return e;
	e = buf_append_byte(out, '{');
	for (size_t i = 0; i < f->nlabels && e == NV_OK; i++) {
		e = buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		if (e == NV_OK)
			e = escape_text(out, s->values[i], true);
		if (e == NV_OK)
			e = buf_append_byte(out, '"');
	}
	if (e == NV_OK && le_text)
		e = buf_printf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le_text);
	if (e == NV_OK)
		e = buf_append_byte(out, '}');
	return e;
}

static enum nv_err render_sample(struct buf *out, const struct metrics_family *f,
                                 const struct metrics_series *s, const char *suffix,
                                 const char *le_text, double v)
{
	enum nv_err e = render_name_labels(out, f, s, suffix, le_text);
	if (e == NV_OK)
		e = buf_append_byte(out, ' ');
	if (e == NV_OK)
		e = append_double(out, v);
	if (e == NV_OK)
		e = buf_append_byte(out, '\n');
	return e;
}

static enum nv_err render_histogram(struct buf *out, const struct metrics_family *f,
                                    const struct metrics_series *s)
{
	enum nv_err e = NV_OK;
	uint64_t cum = 0;
	struct buf le;
	buf_init(&le, 64);
	for (size_t i = 0; i < f->nbuckets && e == NV_OK; i++) {
		cum += s->bucket_counts[i];
		buf_reset(&le);
		e = append_double(&le, f->buckets[i]);
		if (e == NV_OK)
			e = render_sample(out, f, s, "_bucket", buf_str(&le), (double)cum);
	}
	if (e == NV_OK)
		e = render_sample(out, f, s, "_bucket", "+Inf", (double)s->count);
	if (e == NV_OK)
		e = render_sample(out, f, s, "_sum", NULL, s->sum);
	if (e == NV_OK)
		e = render_sample(out, f, s, "_count", NULL, (double)s->count);
	buf_clear(&le);
	return e;
}

static enum nv_err render_family(struct buf *out, struct metrics_family *f)
{
	pthread_mutex_lock(&f->mu);
	/* Like Go's client, a family without any label set prints nothing. */
	if (f->nseries == 0) {
		pthread_mutex_unlock(&f->mu);
		return NV_OK;
	}
	enum nv_err e = buf_printf(out, "# HELP %s ", f->name);
	if (e == NV_OK)
		e = escape_text(out, f->help, false);
	if (e == NV_OK)
		e = buf_printf(out, "\n# TYPE %s %s\n", f->name, type_name(f->type));
	for (size_t i = 0; i < f->nseries && e == NV_OK; i++) {
		const struct metrics_series *s = f->series[i];
		if (f->type == METRICS_HISTOGRAM)
			e = render_histogram(out, f, s);
		else
			e = render_sample(out, f, s, "", NULL, s->value);
	}
	pthread_mutex_unlock(&f->mu);
	return e;
}

static enum nv_err sink_render(struct metrics_registry *r, const struct metrics_writer *wrs,
                               size_t nwrs, struct buf *out);

enum nv_err metrics_registry_render(struct metrics_registry *r, struct buf *out)
{
	struct metrics_collector cols[METRICS_COLLECTORS_MAX];
	pthread_mutex_lock(&r->mu);
	size_t ncols = r->ncollectors;
	memcpy(cols, r->collectors, ncols * sizeof(cols[0]));
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < ncols; i++)
		cols[i].fn(cols[i].arg);

	size_t start = out->len;
	enum nv_err e = NV_OK;
	pthread_mutex_lock(&r->mu);
	struct metrics_writer wrs[METRICS_WRITERS_MAX];
	size_t nwrs = r->nwriters;
	memcpy(wrs, r->writers, nwrs * sizeof(wrs[0]));
	for (size_t i = 0; i < r->nfams && e == NV_OK; i++) {
		e = render_family(out, r->fams[i]);
	}
	pthread_mutex_unlock(&r->mu);
	if (e == NV_OK && nwrs > 0)
		e = sink_render(r, wrs, nwrs, out);
	if (e) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	return e;
}

/* ---- families written at render time ------------------------------------ */

/* Where a label set already printed sits in its family's text. */
struct sink_seen {
	uint64_t hash; /* 0: empty slot */
	size_t off, len;
};

struct sink_family {
	const struct metrics_desc *d; /* while its writer runs */
	char *name, *help;            /* for the print after it */
	enum metrics_type type;
	size_t nlabels;
	size_t max_series;
	size_t nseries;
	struct buf text; /* the samples, as they will print */
	struct sink_seen *seen;
	size_t seen_cap; /* a power of two, or 0 */
};

struct metrics_sink {
	struct metrics_registry *r;
	struct sink_family fams[METRICS_SINK_FAMILIES_MAX];
	size_t nfams;
	size_t room;       /* bytes the samples may still take in the response */
	struct buf labels; /* scratch: one sample's label set */
	enum nv_err err;   /* the response cap was reached */
};

enum nv_err metrics_registry_add_writer(struct metrics_registry *r, metrics_write_fn fn, void *arg)
{
	enum nv_err e = NV_OK;
	pthread_mutex_lock(&r->mu);
	if (r->nwriters >= METRICS_WRITERS_MAX) {
		e = NV_E_TOO_LARGE;
	} else {
		r->writers[r->nwriters].fn = fn;
		r->writers[r->nwriters].arg = arg;
		r->nwriters++;
	}
	pthread_mutex_unlock(&r->mu);
	return e;
}

enum nv_err metrics_sink_family(struct metrics_sink *s, const struct metrics_desc *d, int *id)
{
	size_t nlabels = 0;
	enum nv_err e = desc_check(d, &nlabels);
	if (e == NV_OK && d->type == METRICS_HISTOGRAM)
		e = NV_E_INVAL;
	if (e)
		return e;
	for (size_t i = 0; i < s->nfams; i++)
		if (strcmp(s->fams[i].name, d->name) == 0)
			return NV_E_EXISTS;
	pthread_mutex_lock(&s->r->mu);
	bool taken = registry_find_locked(s->r, d->name) != NULL;
	pthread_mutex_unlock(&s->r->mu);
	if (taken)
		return NV_E_EXISTS;
	if (s->nfams >= METRICS_SINK_FAMILIES_MAX)
		return NV_E_TOO_LARGE;
	struct sink_family *f = &s->fams[s->nfams];
	memset(f, 0, sizeof(*f));
	f->d = d;
	f->name = xstrdup(d->name);
	f->help = xstrdup(d->help);
	f->type = d->type;
	f->nlabels = nlabels;
	f->max_series = d->max_series ? d->max_series : METRICS_SERIES_DEFAULT;
	buf_init(&f->text, SIZE_MAX);
	*id = (int)s->nfams++;
	return NV_OK;
}

static uint64_t text_hash(const char *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h ? h : 1;
}

/* The slot of the label set in labels in f's table of printed ones:
 * found (hash set) when it was printed already, else the empty slot where
 * it goes. */
static struct sink_seen *sink_slot(struct sink_family *f, const struct buf *labels, uint64_t h)
{
	if (2 * (f->nseries + 1) > f->seen_cap) {
		size_t cap = f->seen_cap ? f->seen_cap * 2 : 64;
		struct sink_seen *t = xcalloc(cap, sizeof(*t));
		for (size_t i = 0; i < f->seen_cap; i++) {
			if (f->seen[i].hash == 0)
				continue;
			size_t j = f->seen[i].hash & (cap - 1);
			while (t[j].hash != 0)
				j = (j + 1) & (cap - 1);
			t[j] = f->seen[i];
		}
		free(f->seen);
		f->seen = t;
		f->seen_cap = cap;
	}
	size_t j = h & (f->seen_cap - 1);
	for (; f->seen[j].hash != 0; j = (j + 1) & (f->seen_cap - 1)) {
		const struct sink_seen *e = &f->seen[j];
		if (e->hash == h && e->len == labels->len &&
		    memcmp(f->text.data + e->off, buf_str(labels), e->len) == 0)
			break;
	}
	return &f->seen[j];
}

/* {a="x",b="y"} of values into s->labels ("" for a family without
 * labels); extra is one more label (a state set's), or NULL. */
static enum nv_err sink_labels(struct metrics_sink *s, const struct sink_family *f,
                               const char *const *values, const char *extra)
{
	size_t n = f->nlabels - (extra != NULL);
	enum nv_err e = NV_OK;
	buf_reset(&s->labels);
	if (f->nlabels == 0)
		return NV_OK;
	for (size_t i = 0; i < f->nlabels && e == NV_OK; i++) {
		const char *v = i < n ? values[i] : extra;
		if ((e = value_check(v)) != NV_OK)
			return e;
		e = buf_printf(&s->labels, "%s%s=\"", i ? "," : "{", f->d->labels[i]);
		if (e == NV_OK)
			e = escape_text(&s->labels, v, true);
		if (e == NV_OK)
			e = buf_append_byte(&s->labels, '"');
	}
	if (e == NV_OK)
		e = buf_append_byte(&s->labels, '}');
	return e;
}

/* Prints one sample of f with the label set in s->labels, unless that
 * set was printed already (the first value stands). */
static enum nv_err sink_emit(struct metrics_sink *s, struct sink_family *f, double v)
{
	uint64_t h = text_hash(buf_str(&s->labels), s->labels.len);
	struct sink_seen *slot = sink_slot(f, &s->labels, h);
	if (slot->hash != 0)
		return NV_OK;
	if (f->nseries >= f->max_series) {
		count_rejected_name(s->r, f->name);
		return NV_E_RANGE;
	}
	size_t before = f->text.len, off = before + strlen(f->name);
	enum nv_err e = buf_append_str(&f->text, f->name);
	if (e == NV_OK)
		e = buf_append(&f->text, buf_str(&s->labels), s->labels.len);
	if (e == NV_OK)
		e = buf_append_byte(&f->text, ' ');
	if (e == NV_OK)
		e = append_double(&f->text, v);
	if (e == NV_OK)
		e = buf_append_byte(&f->text, '\n');
	if (e == NV_OK && f->text.len - before > s->room)
		e = NV_E_TOO_LARGE;
	if (e) {
		f->text.len = before;
		if (f->text.data)
			f->text.data[before] = '\0';
		s->err = NV_E_TOO_LARGE;
		return NV_E_TOO_LARGE;
	}
	*slot = (struct sink_seen){h, off, s->labels.len};
	s->room -= f->text.len - before;
	f->nseries++;
	return NV_OK;
}

static struct sink_family *sink_get(struct metrics_sink *s, int id)
{
	if (s->err || id < 0 || (size_t)id >= s->nfams)
		return NULL;
	return &s->fams[id];
}

enum nv_err metrics_sink_value(struct metrics_sink *s, int id, const char *const *values, double v)
{
	struct sink_family *f = sink_get(s, id);
	if (f == NULL)
		return s->err ? s->err : NV_E_INVAL;
	if (f->nlabels > 0 && values == NULL)
		return NV_E_INVAL;
	enum nv_err e = sink_labels(s, f, values, NULL);
	return e ? e : sink_emit(s, f, v);
}

enum nv_err metrics_sink_state(struct metrics_sink *s, int id, const char *const *values,
                               const char *const *states, size_t nstates, const char *current)
{
	struct sink_family *f = sink_get(s, id);
	size_t cur = nstates;
	if (f == NULL)
		return s->err ? s->err : NV_E_INVAL;
	if (f->nlabels == 0 || (f->nlabels > 1 && values == NULL) || states == NULL ||
	    current == NULL)
		return NV_E_INVAL;
	for (size_t i = 0; i < nstates; i++)
		if (strcmp(states[i], current) == 0)
			cur = i;
	if (cur == nstates)
		return NV_E_INVAL;
	for (size_t i = 0; i < nstates; i++) {
		enum nv_err e = sink_labels(s, f, values, states[i]);
		if (e == NV_OK)
			e = sink_emit(s, f, i == cur ? 1 : 0);
		if (e)
			return e;
	}
	return NV_OK;
}

/* Runs the writers into one sink, then prints its families whole after
 * what out holds. */
static enum nv_err sink_render(struct metrics_registry *r, const struct metrics_writer *wrs,
                               size_t nwrs, struct buf *out)
{
	struct metrics_sink *s = xcalloc(1, sizeof(*s));
	enum nv_err e;

	s->r = r;
	s->room = out->max - out->len;
	buf_init(&s->labels, METRICS_LABELS_MAX * (METRICS_NAME_MAX + 2 * METRICS_VALUE_MAX + 4));
	for (size_t i = 0; i < nwrs && s->err == NV_OK; i++)
		wrs[i].fn(wrs[i].arg, s);
	e = s->err;
	for (size_t i = 0; i < s->nfams; i++) {
		struct sink_family *f = &s->fams[i];
		if (e == NV_OK && f->nseries > 0) {
			e = buf_printf(out, "# HELP %s ", f->name);
			if (e == NV_OK)
				e = escape_text(out, f->help, false);
			if (e == NV_OK)
				e = buf_printf(out, "\n# TYPE %s %s\n", f->name,
				               type_name(f->type));
			if (e == NV_OK)
				e = buf_append(out, buf_str(&f->text), f->text.len);
		}
		buf_clear(&f->text);
		free(f->seen);
		free(f->name);
		free(f->help);
	}
	buf_clear(&s->labels);
	free(s);
	return e;
}

/* ---- the registry -------------------------------------------------------- */

struct metrics_registry *metrics_registry_new(void)
{
	static const char *const rej_labels[] = {"family", NULL};
	struct metrics_registry *r = xcalloc(1, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	const struct metrics_desc d = {
	        .name = METRICS_REJECTED_NAME,
	        .help = "Updates dropped because a family reached its cap on label sets.",
	        .type = METRICS_COUNTER,
	        .labels = rej_labels,
	        .max_series = METRICS_FAMILIES_MAX,
	};
	enum nv_err e = metrics_family_register(r, &d, &r->rejected);
	if (e) {
		/* The descriptor is a constant: this cannot fail. */
		abort();
	}
	return r;
}

void metrics_registry_free(struct metrics_registry *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->nfams; i++)
		family_free(r->fams[i]);
	free(r->fams);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* ---- the standard families -------------------------------------------------- */

struct std_entry {
	size_t offset; /* of the family pointer in struct metrics_std */
	const char *name;
	const char *help;
	enum metrics_type type;
	const char *const *labels;
	const double *buckets;
	size_t nbuckets;
};

static const char *const l_ctrl[] = {"controller", NULL};
static const char *const l_ctrl_result[] = {"controller", "result", NULL};
static const char *const l_wq[] = {"name", "controller", NULL};
static const char *const l_rest[] = {"code", "method", "host", NULL};
static const char *const l_rest_dur[] = {"verb", "host", NULL};
static const char *const l_name[] = {"name", NULL};

static const double rest_buckets[] = {
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
};

#define NBUCKETS(a) (sizeof(a) / sizeof((a)[0]))
#define STD(field, n, h, t, l)                                                                     \
	{                                                                                          \
		offsetof(struct metrics_std, field), n, h, t, l, NULL, 0                           \
	}
#define STD_H(field, n, h, l, b, nb)                                                               \
	{                                                                                          \
		offsetof(struct metrics_std, field), n, h, METRICS_HISTOGRAM, l, b, nb             \
	}

static const struct std_entry std_table[] = {
        STD(reconcile_total, "controller_runtime_reconcile_total",
            "Reconcile calls finished, by controller and outcome.", METRICS_COUNTER, l_ctrl_result),
        STD(reconcile_errors_total, "controller_runtime_reconcile_errors_total",
            "Reconcile calls that returned an error, by controller.", METRICS_COUNTER, l_ctrl),
        STD(terminal_reconcile_errors_total, "controller_runtime_terminal_reconcile_errors_total",
            "Reconcile errors that will not be retried, by controller.", METRICS_COUNTER, l_ctrl),
        STD(reconcile_panics_total, "controller_runtime_reconcile_panics_total",
            "Reconcile calls stopped by an internal failure, by controller.", METRICS_COUNTER,
            l_ctrl),
        STD_H(reconcile_time_seconds, "controller_runtime_reconcile_time_seconds",
              "Seconds one reconcile call took, by controller.", l_ctrl, metrics_reconcile_buckets,
              NBUCKETS(metrics_reconcile_buckets)),
        STD(max_concurrent_reconciles, "controller_runtime_max_concurrent_reconciles",
            "Most reconcile calls a controller runs at once.", METRICS_GAUGE, l_ctrl),
        STD(active_workers, "controller_runtime_active_workers",
            "Workers of a controller busy with a reconcile now.", METRICS_GAUGE, l_ctrl),
        STD(workqueue_depth, "workqueue_depth", "Items waiting in the work queue now.",
            METRICS_GAUGE, l_wq),
        STD(workqueue_adds_total, "workqueue_adds_total", "Items added to the work queue.",
            METRICS_COUNTER, l_wq),
        STD(workqueue_retries_total, "workqueue_retries_total",
            "Items put back in the work queue after a failure or a requeue.", METRICS_COUNTER,
            l_wq),
        STD_H(workqueue_queue_duration_seconds, "workqueue_queue_duration_seconds",
              "Seconds an item waited in the work queue before a worker took it.", l_wq,
              metrics_workqueue_buckets, NBUCKETS(metrics_workqueue_buckets)),
        STD_H(workqueue_work_duration_seconds, "workqueue_work_duration_seconds",
              "Seconds a worker spent on one item.", l_wq, metrics_workqueue_buckets,
              NBUCKETS(metrics_workqueue_buckets)),
        STD(workqueue_unfinished_work_seconds, "workqueue_unfinished_work_seconds",
            "Seconds spent so far on items still being worked on.", METRICS_GAUGE, l_wq),
        STD(workqueue_longest_running_processor_seconds,
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running item in progress has taken so far.", METRICS_GAUGE, l_wq),
        STD(rest_client_requests_total, "rest_client_requests_total",
            "Requests to the Kubernetes API, by status code, method and host.", METRICS_COUNTER,
            l_rest),
        STD_H(rest_client_request_duration_seconds, "rest_client_request_duration_seconds",
              "Seconds a request to the Kubernetes API took, by verb and host.", l_rest_dur,
              rest_buckets, NBUCKETS(rest_buckets)),
        STD(leader_election_master_status, "leader_election_master_status",
            "1 while this replica holds the named lease, 0 while it stands by.", METRICS_GAUGE,
            l_name),
};

/* Reads a small /proc file whole; the cap keeps it bounded. */
static bool proc_read(const char *path, char *out, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, out, cap - 1);
	close(fd);
	if (n <= 0)
		return false;
	out[n] = '\0';
	return true;
}

static void process_collect(void *arg)
{
	struct metrics_registry *r = arg;
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		             (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
		/* Sampled, so set rather than added; the kernel keeps it
		 * monotonic. */
		(void)scalar_update(r->proc_cpu, NULL, cpu, true);
	}
	char statm[128];
	if (proc_read("/proc/self/statm", statm, sizeof(statm))) {
		char *sp = strchr(statm, ' ');
		char *end = sp ? strchr(sp + 1, ' ') : NULL;
		uint64_t pages = 0;
		if (end) {
			*end = '\0';
			if (parse_u64(sp + 1, 0, UINT64_MAX / 65536, &pages) == NV_OK)
				(void)metrics_gauge_set(r->proc_rss, NULL,
				                        (double)pages *
				                                (double)sysconf(_SC_PAGESIZE));
		}
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		double n = 0;
		for (struct dirent *de = readdir(d); de; de = readdir(d))
			if (de->d_name[0] != '.')
				n++;
		closedir(d);
		(void)metrics_gauge_set(r->proc_fds, NULL, n - 1); /* opendir's own */
	}
	(void)metrics_gauge_set(r->proc_start, NULL, r->start_time_s);
}

static enum nv_err process_register(struct metrics_registry *r)
{
	const struct metrics_desc descs[] = {
	        {"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
	         METRICS_COUNTER, NULL, NULL, 0, 1},
	        {"process_resident_memory_bytes", "Bytes of memory resident for this process.",
	         METRICS_GAUGE, NULL, NULL, 0, 1},
	        {"process_open_fds", "File descriptors this process holds open.", METRICS_GAUGE,
	         NULL, NULL, 0, 1},
	        {"process_start_time_seconds",
	         "Unix time, in seconds, when the metrics registry of this process was set up.",
	         METRICS_GAUGE, NULL, NULL, 0, 1},
	};
	struct metrics_family **dst[] = {&r->proc_cpu, &r->proc_rss, &r->proc_fds, &r->proc_start};
	for (size_t i = 0; i < sizeof(descs) / sizeof(descs[0]); i++) {
		enum nv_err e = metrics_family_register(r, &descs[i], dst[i]);
		if (e)
			return e;
	}
	r->start_time_s = (double)time_wall_ms() / 1000.0;
	return metrics_registry_add_collector(r, process_collect, r);
}

enum nv_err metrics_std_register(struct metrics_registry *r, struct metrics_std *out)
{
	struct metrics_std m;
	memset(&m, 0, sizeof(m));
	for (size_t i = 0; i < sizeof(std_table) / sizeof(std_table[0]); i++) {
		const struct std_entry *t = &std_table[i];
		const struct metrics_desc d = {
		        .name = t->name,
		        .help = t->help,
		        .type = t->type,
		        .labels = t->labels,
		        .buckets = t->buckets,
		        .nbuckets = t->nbuckets,
		};
		struct metrics_family **slot = (struct metrics_family **)((char *)&m + t->offset);
		enum nv_err e = metrics_family_register(r, &d, slot);
		if (e)
			return e;
	}
	enum nv_err e = process_register(r);
	if (e)
		return e;
	*out = m;
	return NV_OK;
}

enum nv_err metrics_std_controller_init(struct metrics_std *m, const char *controller)
{
	static const char *const results[] = {"error", "requeue", "requeue_after", "success"};
	enum nv_err e = NV_OK;
	for (size_t i = 0; i < 4 && e == NV_OK; i++) {
		const char *v[] = {controller, results[i]};
		e = metrics_family_touch(m->reconcile_total, v);
	}
	const char *c[] = {controller};
	if (e == NV_OK)
		e = metrics_family_touch(m->reconcile_errors_total, c);
	if (e == NV_OK)
		e = metrics_family_touch(m->terminal_reconcile_errors_total, c);
	if (e == NV_OK)
		e = metrics_family_touch(m->reconcile_panics_total, c);
	return e;
}
