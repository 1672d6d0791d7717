/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-safe registry of counters, gauges and histograms rendered in the
 * Prometheus text exposition format. Every family caps its number of label
 * sets, so a label fed from outside can never grow the registry unbounded. */
/* Contract: every call may be made from any thread, at the same time as
 * others. The registry and each family have a lock held only for memory
 * work, so no update blocks on I/O; metrics_registry_render also runs the
 * collectors (outside the locks) and reads /proc for the process figures.
 * Strings and arrays given in are copied; families stay the registry's. */
#ifndef NVL72_METRICS_H
#define NVL72_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

/* Upper bounds that hold for every family. */
#define METRICS_NAME_MAX 128   /* metric and label names, in bytes */
#define METRICS_LABELS_MAX 8   /* label names per family */
#define METRICS_VALUE_MAX 256  /* one label value, in bytes */
#define METRICS_BUCKETS_MAX 64 /* histogram buckets, +Inf not counted */
#define METRICS_SERIES_DEFAULT 1024
#define METRICS_SERIES_HARD_MAX 65536

enum metrics_type {
	METRICS_COUNTER = 0,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

/* What a family is; the registry copies everything it needs from it. */
struct metrics_desc {
	const char *name;
	const char *help;
	enum metrics_type type;
	/* NULL-terminated label names, or NULL for a family without labels. */
	const char *const *labels;
	/* Histograms: strictly increasing finite upper bounds; +Inf is implied. */
	const double *buckets;
	size_t nbuckets;
	/* Most label sets the family keeps; 0 means METRICS_SERIES_DEFAULT. */
	size_t max_series;
};

struct metrics_registry;
struct metrics_family;

/* Called before each render, holding no registry lock, to refresh sampled
 * values (process figures, or domain families rebuilt from a cache). Two
 * scrapes at once run it twice, concurrently. */
typedef void (*metrics_collect_fn)(void *arg);

struct metrics_registry *metrics_registry_new(void);
/* Frees the registry and all its families; NULL does nothing. No other
 * thread may still use it or its families. */
void metrics_registry_free(struct metrics_registry *r);

/* Registers a family. NV_E_INVAL for a bad name, label or bucket list,
 * NV_E_EXISTS when the name is taken. *out stays valid until the registry is
 * freed and is safe to use from any thread. */
enum nv_err metrics_family_register(struct metrics_registry *r, const struct metrics_desc *d,
                                    struct metrics_family **out);
/* The family registered under name, or NULL; borrowed from r, valid until
 * the registry is freed. */
struct metrics_family *metrics_registry_find(struct metrics_registry *r, const char *name);
/* Adds a callback run before every render (at most 16). */
enum nv_err metrics_registry_add_collector(struct metrics_registry *r, metrics_collect_fn fn,
                                           void *arg);

/* Renders every family, in registration order, label sets in creation
 * order, into out (text format 0.0.4), then the writers' families. A
 * family without any label set prints nothing, as Go's client does. out's
 * own cap bounds the result: NV_E_TOO_LARGE, with out as it was, when the
 * text does not fit. */
enum nv_err metrics_registry_render(struct metrics_registry *r, struct buf *out);

/* ---- families written at each render ---- */

/* For series derived from what their owner holds already (an informer's
 * cache): a writer computes them at every render, so nothing is kept
 * between scrapes. It declares its families on the sink it is given and
 * adds their samples in any order; each family then prints whole (HELP,
 * TYPE, its samples in the order added), after the registered families and
 * in the order declared, and one without samples prints nothing. A label
 * set added twice to a family keeps its first value. Samples count against
 * out's cap as they are added: past it, every later call fails with
 * NV_E_TOO_LARGE and so does the render. */
struct metrics_sink;
typedef void (*metrics_write_fn)(void *arg, struct metrics_sink *s);
/* Adds a writer (at most 16), run at every render after the collectors,
 * holding no registry lock. */
enum nv_err metrics_registry_add_writer(struct metrics_registry *r, metrics_write_fn fn, void *arg);
/* Declares a counter or gauge family for this render; d (borrowed until the
 * writer returns) is checked as metrics_family_register checks it, and a
 * name registered or declared already is NV_E_EXISTS. *id is the family's
 * handle on s. */
enum nv_err metrics_sink_family(struct metrics_sink *s, const struct metrics_desc *d, int *id);
/* A sample; values and errors as for metrics_gauge_set, and NV_E_RANGE
 * past the family's max_series (counted in
 * nvl72_metrics_series_rejected_total). */
enum nv_err metrics_sink_value(struct metrics_sink *s, int id, const char *const *values, double v);
/* A state set, as metrics_gauge_set_state. */
enum nv_err metrics_sink_state(struct metrics_sink *s, int id, const char *const *values,
                               const char *const *states, size_t nstates, const char *current);

/* In the calls below, values holds one label value per label name of the
 * family, in the same order (NULL for a family without labels). They fail
 * with NV_E_INVAL on a value that is not UTF-8 or on the wrong family type,
 * NV_E_TOO_LARGE on a value over METRICS_VALUE_MAX, and NV_E_RANGE when a
 * new label set would pass the family's cap (the update is dropped and
 * counted in nvl72_metrics_series_rejected_total). */

/* Creates the series at zero if it is missing (the "pre-create at start"
 * habit that keeps rate() queries defined). */
enum nv_err metrics_family_touch(struct metrics_family *f, const char *const *values);
/* Counters only; v must be >= 0. */
enum nv_err metrics_counter_add(struct metrics_family *f, const char *const *values, double v);
enum nv_err metrics_counter_inc(struct metrics_family *f, const char *const *values);
enum nv_err metrics_gauge_set(struct metrics_family *f, const char *const *values, double v);
enum nv_err metrics_gauge_add(struct metrics_family *f, const char *const *values, double v);
enum nv_err metrics_histogram_observe(struct metrics_family *f, const char *const *values,
                                      double v);
/* A state set: the family's last label names a state, and each of the
 * nstates states gets its own series, 1 for current and 0 for the others
 * (NV_E_INVAL when current is not among them). values holds the other
 * label values, one fewer than the family has labels. */
enum nv_err metrics_gauge_set_state(struct metrics_family *f, const char *const *values,
                                    const char *const *states, size_t nstates, const char *current);
/* Removes one label set (a tray that left the rack); NV_E_NOT_FOUND if it
 * was not there. */
enum nv_err metrics_family_remove(struct metrics_family *f, const char *const *values);
/* Removes every label set of the family. */
void metrics_family_reset(struct metrics_family *f);
/* Reads a counter or gauge (tests, and owners that derive values). */
enum nv_err metrics_family_get(struct metrics_family *f, const char *const *values, double *out);
size_t metrics_family_series_count(struct metrics_family *f);

/* Fills out[0..count) with start, start*factor, ...; false on bad input. */
bool metrics_buckets_exponential(double start, double factor, size_t count, double *out);

/* controller-runtime's reconcile-time buckets (0.005 s .. 60 s). */
extern const double metrics_reconcile_buckets[];
extern const size_t metrics_reconcile_nbuckets;
/* client-go's workqueue duration buckets: 1e-8 s x10 twelve times. */
extern const double metrics_workqueue_buckets[];
extern const size_t metrics_workqueue_nbuckets;

/* The families Go operators expose under the same names, so existing
 * dashboards and alerts keep working. Label order is given in comments. */
struct metrics_std {
	struct metrics_family *reconcile_total;                             /* controller, result */
	struct metrics_family *reconcile_errors_total;                      /* controller */
	struct metrics_family *terminal_reconcile_errors_total;             /* controller */
	struct metrics_family *reconcile_panics_total;                      /* controller */
	struct metrics_family *reconcile_time_seconds;                      /* controller */
	struct metrics_family *max_concurrent_reconciles;                   /* controller */
	struct metrics_family *active_workers;                              /* controller */
	struct metrics_family *workqueue_depth;                             /* name, controller */
	struct metrics_family *workqueue_adds_total;                        /* name, controller */
	struct metrics_family *workqueue_retries_total;                     /* name, controller */
	struct metrics_family *workqueue_queue_duration_seconds;            /* name, controller */
	struct metrics_family *workqueue_work_duration_seconds;             /* name, controller */
	struct metrics_family *workqueue_unfinished_work_seconds;           /* name, controller */
	struct metrics_family *workqueue_longest_running_processor_seconds; /* name, controller */
	struct metrics_family *rest_client_requests_total;                  /* code, method, host */
	struct metrics_family *rest_client_request_duration_seconds;        /* verb, host */
	struct metrics_family *leader_election_master_status;               /* name */
};

/* Registers the families above, plus process_cpu_seconds_total,
 * process_resident_memory_bytes, process_open_fds and
 * process_start_time_seconds sampled from /proc at each render. */
enum nv_err metrics_std_register(struct metrics_registry *r, struct metrics_std *out);
/* Creates the reconcile_total (every result) and errors series of one
 * controller at zero, as controller-runtime does at start. */
enum nv_err metrics_std_controller_init(struct metrics_std *m, const char *controller);

/* Appends value escaped for a label value (backslash, quote, newline). */
enum nv_err metrics_escape_label(struct buf *out, const char *value);
/* Whether s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool metrics_name_valid(const char *s);

#endif
