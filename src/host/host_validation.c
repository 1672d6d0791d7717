// SPDX-License-Identifier: Apache-2.0
// Validation runs: the configured command (an NCCL all-reduce across the
// partition on a rack, a fake in the simulator) run once per requested id,
// detached with a deadline and bounded output, its bus bandwidth parsed from
// the output. The record of the last run lives in the state dir, so a run
// cut short by kill -9 is reported as failed and a finished id never reruns.
#include "nvl72/host.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define STATE_FILE "validation.state"
#define LOG_FILE "validation.log"
#define STATE_MAX 4096
#define LINE_MAX_LEN 4096

static const char *const phase_names[] = {
        [HOST_VAL_NONE] = "None",
        [HOST_VAL_RUNNING] = "Running",
        [HOST_VAL_SUCCEEDED] = "Succeeded",
        [HOST_VAL_FAILED] = "Failed",
};

const char *host_val_phase_name(enum host_val_phase p)
{
	return (unsigned)p < ARRAY_LEN(phase_names) ? phase_names[p] : "None";
}

/* ---- the output contract ---- */

/* "812.34": digits with at most one dot, nothing else (no sign, exponent,
 * hex or inf), within range. */
static enum nv_err busbw_parse(const char *s, size_t n, double *out)
{
	char num[32];
	size_t dots = 0, digits = 0;

	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	while (n > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	if (n == 0 || n >= sizeof(num))
		return NV_E_PARSE;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.')
			dots++;
		else if (s[i] >= '0' && s[i] <= '9')
			digits++;
		else
			return NV_E_PARSE;
	}
	if (dots > 1 || digits == 0 || s[0] == '.' || s[n - 1] == '.')
		return NV_E_PARSE;
	memcpy(num, s, n);
	num[n] = '\0';
	if (parse_double(num, 0.0, HOST_VALIDATION_BUSBW_MAX, out) != NV_OK)
		return NV_E_RANGE;
	*out = round(*out * 100.0) / 100.0;
	return NV_OK;
}

static bool transport_ok(const char *s, size_t n)
{
	if (n == 0 || n >= HOST_VALIDATION_TRANSPORT_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *p, size_t *plen)
{
	*plen = strlen(p);
	return n >= *plen && memcmp(s, p, *plen) == 0;
}

/* nccl-tests: "# Avg bus bandwidth    : 812.34" and
 * "# Out of bounds values : 0 OK". The value after the colon, or NULL. */
static const char *nccl_value(const char *s, size_t n, const char *label, size_t *vlen)
{
	size_t pl, i;

	if (!has_prefix(s, n, label, &pl))
		return NULL;
	for (i = pl; i < n && (s[i] == ' ' || s[i] == '\t'); i++)
		;
	if (i >= n || s[i] != ':')
		return NULL;
	*vlen = n - i - 1;
	return s + i + 1;
}

static enum nv_err oob_check(const char *v, size_t n, char *why, size_t whysz)
{
	char tmp[64];

	snprintf(tmp, sizeof(tmp), "%.*s", (int)(n < 63 ? n : 63), v);
	str_trim(tmp);
	if (strstr(tmp, "FAILED") == NULL)
		return NV_OK;
	snprintf(why, whysz, "nccl-tests reports wrong results: out of bounds values %s", tmp);
	return NV_E_PARSE;
}

enum nv_err host_validation_output_parse(const char *text, size_t len, double *busbw_gbps,
                                         char *transport, size_t transportsz, char *why,
                                         size_t whysz)
{
	bool have_kv = false, have_nccl = false;
	double kv = 0, nccl = 0;
	char tr[HOST_VALIDATION_TRANSPORT_LEN] = "";
	size_t pos = 0, lineno = 0;

	why[0] = '\0';
	if (text == NULL)
		len = 0;
	if (memchr(text ? text : "", '\0', len) != NULL) {
		snprintf(why, whysz, "validation output contains a NUL byte: not text");
		return NV_E_PARSE;
	}
	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos), *v;
		size_t n = nl ? (size_t)(nl - s) : len - pos, pl, vl;
		pos += n + (nl ? 1 : 0);
		lineno++;
		if (n > 0 && s[n - 1] == '\r')
			n--;
		if (has_prefix(s, n, "busbw_gbps=", &pl)) {
			if (busbw_parse(s + pl, n - pl, &kv) != NV_OK) {
				snprintf(why, whysz,
				         "line %zu: busbw_gbps \"%.*s\" is not a number from 0 to "
				         "%.0f",
				         lineno, (int)(n - pl < 40 ? n - pl : 40), s + pl,
				         HOST_VALIDATION_BUSBW_MAX);
				return NV_E_PARSE;
			}
			have_kv = true;
		} else if (has_prefix(s, n, "transport=", &pl)) {
			if (!transport_ok(s + pl, n - pl)) {
				snprintf(why, whysz,
				         "line %zu: transport \"%.*s\" must be 1 to %d letters, "
				         "digits, '-', '_' or '.'",
				         lineno, (int)(n - pl < 40 ? n - pl : 40), s + pl,
				         HOST_VALIDATION_TRANSPORT_LEN - 1);
				return NV_E_PARSE;
			}
			memcpy(tr, s + pl, n - pl);
			tr[n - pl] = '\0';
		} else if ((v = nccl_value(s, n, "# Avg bus bandwidth", &vl)) != NULL) {
			if (busbw_parse(v, vl, &nccl) != NV_OK) {
				snprintf(why, whysz,
				         "line %zu: nccl-tests average bus bandwidth \"%.*s\" is "
				         "not a number",
				         lineno, (int)(vl < 40 ? vl : 40), v);
				return NV_E_PARSE;
			}
			have_nccl = true;
		} else if ((v = nccl_value(s, n, "# Out of bounds values", &vl)) != NULL) {
			if (oob_check(v, vl, why, whysz) != NV_OK)
				return NV_E_PARSE;
		}
	}
	if (!have_kv && !have_nccl) {
		snprintf(why, whysz,
		         "validation output has no busbw_gbps=<number> line and no nccl-tests "
		         "\"# Avg bus bandwidth\" line");
		return NV_E_PARSE;
	}
	*busbw_gbps = have_kv ? kv : nccl;
	str_copy(transport, transportsz, tr);
	return NV_OK;
}

/* ---- the state file ---- */

static void one_line(char *dst, size_t dstsz, const char *src)
{
	size_t i;

	for (i = 0; src[i] != '\0' && i + 1 < dstsz; i++)
		dst[i] = (src[i] == '\n' || src[i] == '\r' || (unsigned char)src[i] < 0x20)
		                 ? ' '
		                 : src[i];
	if (dstsz > 0)
		dst[i] = '\0';
}

static enum nv_err state_field(struct host_val_result *o, const char *k, const char *v,
                               long long *pid, unsigned long long *pid_start)
{
	int64_t n;
	uint64_t u;

	if (strcmp(k, "id") == 0)
		return str_copy(o->id, sizeof(o->id), v);
	if (strcmp(k, "phase") == 0) {
		for (size_t i = HOST_VAL_RUNNING; i < ARRAY_LEN(phase_names); i++)
			if (strcmp(v, phase_names[i]) == 0) {
				o->phase = (enum host_val_phase)i;
				return NV_OK;
			}
		return NV_E_PARSE;
	}
	if (strcmp(k, "busbw_gbps") == 0) {
		o->has_busbw = true;
		return busbw_parse(v, strlen(v), &o->busbw_gbps);
	}
	if (strcmp(k, "transport") == 0)
		return transport_ok(v, strlen(v)) ? str_copy(o->transport, sizeof(o->transport), v)
		                                  : NV_E_PARSE;
	if (strcmp(k, "start_ms") == 0 || strcmp(k, "end_ms") == 0) {
		if (parse_i64(v, 0, INT64_MAX / 2, &n) != NV_OK)
			return NV_E_PARSE;
		*(k[0] == 's' ? &o->start_ms : &o->end_ms) = n;
		return NV_OK;
	}
	if (strcmp(k, "pid") == 0) {
		if (parse_i64(v, 0, INT32_MAX, &n) != NV_OK)
			return NV_E_PARSE;
		*pid = n;
		return NV_OK;
	}
	if (strcmp(k, "pid_start") == 0) {
		if (parse_u64(v, 0, UINT64_MAX, &u) != NV_OK)
			return NV_E_PARSE;
		*pid_start = u;
		return NV_OK;
	}
	if (strcmp(k, "message") == 0) {
		one_line(o->message, sizeof(o->message), v);
		return NV_OK;
	}
	return NV_OK; /* a key from a newer agent */
}

enum nv_err host_validation_state_parse(const char *text, size_t len, struct host_val_result *out,
                                        long long *pid, unsigned long long *pid_start)
{
	struct host_val_result o = {0};
	long long p = 0;
	unsigned long long ps = 0;
	size_t pos = 0;

	if (text == NULL || len > STATE_MAX || memchr(text, '\0', len) != NULL)
		return NV_E_PARSE;
	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos), *eq;
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		char k[32], v[HOST_ERRMSG_LEN];
		pos += n + (nl ? 1 : 0);
		if (n == 0)
			continue;
		eq = memchr(s, '=', n);
		if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof(k) ||
		    n - (size_t)(eq - s) - 1 >= sizeof(v))
			return NV_E_PARSE;
		memcpy(k, s, (size_t)(eq - s));
		k[eq - s] = '\0';
		memcpy(v, eq + 1, n - (size_t)(eq - s) - 1);
		v[n - (size_t)(eq - s) - 1] = '\0';
		if (state_field(&o, k, v, &p, &ps) != NV_OK)
			return NV_E_PARSE;
	}
	if (o.id[0] == '\0' || o.phase == HOST_VAL_NONE)
		return NV_E_PARSE;
	*out = o;
	*pid = p;
	*pid_start = ps;
	return NV_OK;
}

static void state_path(struct host *h, const char *name, char *out, size_t outsz)
{
	char rel[PATH_MAX_HOST];

	snprintf(rel, sizeof(rel), "%s/%s", h->cfg.state_dir, name);
	if (host_path(h, rel, out, outsz) != NV_OK)
		out[0] = '\0';
}

/* The record, or false when there is none (or it is unreadable: a torn
 * file is treated as no record and the caller falls back to the status). */
static bool state_load(struct host *h, struct host_val_result *o, long long *pid,
                       unsigned long long *pid_start)
{
	char path[PATH_MAX_HOST];
	struct buf b;
	bool ok;

	state_path(h, STATE_FILE, path, sizeof(path));
	if (path[0] == '\0' || host_file_read(path, STATE_MAX, &b) != NV_OK)
		return false;
	ok = host_validation_state_parse(buf_str(&b), b.len, o, pid, pid_start) == NV_OK;
	if (!ok)
		log_warn("agent", "unreadable validation record ignored", "path=%s", path);
	buf_clear(&b);
	return ok;
}

static enum nv_err state_save(struct host *h, const struct host_val_result *o, pid_t pid)
{
	char path[PATH_MAX_HOST], dir[PATH_MAX_HOST], text[STATE_MAX], msg[HOST_ERRMSG_LEN];
	size_t n = 0;
	int w;

	state_path(h, STATE_FILE, path, sizeof(path));
	if (path[0] == '\0' || host_path(h, h->cfg.state_dir, dir, sizeof(dir)) != NV_OK)
		return NV_E_TOO_LARGE;
	(void)host_mkdirs(dir, 0755);
	one_line(msg, sizeof(msg), o->message);
	w = snprintf(text, sizeof(text), "id=%s\nphase=%s\nstart_ms=%lld\nend_ms=%lld\n", o->id,
	             host_val_phase_name(o->phase), (long long)o->start_ms, (long long)o->end_ms);
	n += (size_t)w;
	if (o->has_busbw)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "busbw_gbps=%.2f\n",
		                      o->busbw_gbps);
	if (o->transport[0] != '\0')
		n += (size_t)snprintf(text + n, sizeof(text) - n, "transport=%s\n", o->transport);
	if (pid > 0)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "pid=%d\npid_start=%llu\n",
		                      (int)pid, host_pid_starttime(pid));
	n += (size_t)snprintf(text + n, sizeof(text) - n, "message=%s\n", msg);
	return host_file_write_atomic(path, text, n, 0644);
}

/* ---- running ---- */

static void finish(struct host_val_result *o, enum host_val_phase phase, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void finish(struct host_val_result *o, enum host_val_phase phase, const char *fmt, ...)
{
	va_list ap;

	o->phase = phase;
	o->end_ms = time_wall_ms();
	va_start(ap, fmt);
	vsnprintf(o->message, sizeof(o->message), fmt, ap);
	va_end(ap);
}

static void kill_ours(struct host *h)
{
	int status;

	if (h->val_pid <= 0)
		return;
	kill(-h->val_pid, SIGKILL);
	(void)waitpid(h->val_pid, &status, 0);
	h->val_pid = 0;
}

/* The last non-empty line of the output, for a failure's message. */
static void last_line(const char *s, size_t n, char *out, size_t outsz)
{
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		n--;
	size_t start = n;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	snprintf(out, outsz, "%.*s", (int)(n - start > 160 ? 160 : n - start), s + start);
	one_line(out, outsz, out);
}

static void collect(struct host *h, struct host_val_result *o, int status)
{
	char logp[PATH_MAX_HOST], line[200], why[HOST_ERRMSG_LEN];
	struct buf b;
	enum nv_err rc;

	state_path(h, LOG_FILE, logp, sizeof(logp));
	rc = host_file_read(logp, HOST_VALIDATION_OUTPUT_MAX, &b);
	if (rc == NV_E_TOO_LARGE) {
		finish(o, HOST_VAL_FAILED, "validation output exceeds %d bytes",
		       HOST_VALIDATION_OUTPUT_MAX);
		return;
	}
	if (rc != NV_OK)
		buf_init(&b, 1);
	last_line(buf_str(&b), b.len, line, sizeof(line));
	if (WIFSIGNALED(status))
		finish(o, HOST_VAL_FAILED, "validation command killed by signal %d: %s",
		       WTERMSIG(status), line);
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		finish(o, HOST_VAL_FAILED, "validation command exited with %d: %s",
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1, line);
	else if (host_validation_output_parse(buf_str(&b), b.len, &o->busbw_gbps, o->transport,
	                                      sizeof(o->transport), why, sizeof(why)) != NV_OK)
		finish(o, HOST_VAL_FAILED, "%s", why);
	else {
		o->has_busbw = true;
		finish(o, HOST_VAL_SUCCEEDED, "bus bandwidth %.2f GB/s%s%s", o->busbw_gbps,
		       o->transport[0] ? " over " : "", o->transport);
	}
	buf_clear(&b);
}

/* The run this process started: done, over its deadline or its output cap,
 * or still going. Returns whether the record changed. */
static bool poll_ours(struct host *h, struct host_val_result *o, int64_t timeout_s)
{
	char logp[PATH_MAX_HOST];
	struct stat sb;
	int status = 0;
	pid_t r = waitpid(h->val_pid, &status, WNOHANG);

	if (r == h->val_pid) {
		h->val_pid = 0;
		collect(h, o, status);
		return true;
	}
	if (r < 0 && errno == ECHILD) {
		h->val_pid = 0;
		finish(o, HOST_VAL_FAILED, "validation command vanished");
		return true;
	}
	if (time_mono_ms() >= h->val_deadline_ms) {
		kill_ours(h);
		finish(o, HOST_VAL_FAILED, "validation command timed out after %lld s",
		       (long long)timeout_s);
		return true;
	}
	state_path(h, LOG_FILE, logp, sizeof(logp));
	if (stat(logp, &sb) == 0 && sb.st_size > HOST_VALIDATION_OUTPUT_MAX) {
		kill_ours(h);
		finish(o, HOST_VAL_FAILED, "validation output exceeds %d bytes",
		       HOST_VALIDATION_OUTPUT_MAX);
		return true;
	}
	return false;
}

/* A run recorded as in flight that this process did not start: an earlier
 * agent was killed. Whatever is left of it is stopped; the run failed. */
static void reap_orphan(struct host_val_result *o, long long pid, unsigned long long pid_start)
{
	if (pid > 0 && host_pid_alive((pid_t)pid) && host_pid_starttime((pid_t)pid) == pid_start)
		kill(-(pid_t)pid, SIGKILL);
	finish(o, HOST_VAL_FAILED, "agent restarted during the run");
}

static void start(struct host *h, const struct host_val_request *req, struct host_val_result *o)
{
	const char *argv[HOST_VALIDATION_ARGS_MAX + 2];
	char logp[PATH_MAX_HOST];
	size_t n = 0;
	pid_t pid = 0;

	memset(o, 0, sizeof(*o));
	str_copy(o->id, sizeof(o->id), req->id);
	o->start_ms = time_wall_ms();
	if (h->cfg.validation_cmd == NULL || h->cfg.validation_cmd[0] == '\0') {
		finish(o, HOST_VAL_FAILED, "no validation command configured");
		return;
	}
	argv[n++] = h->cfg.validation_cmd;
	for (size_t i = 0; i < req->n_args && i < HOST_VALIDATION_ARGS_MAX; i++)
		argv[n++] = req->args[i];
	argv[n] = NULL;
	/* Recorded before it starts: a kill -9 from here on reads as a cut run. */
	o->phase = HOST_VAL_RUNNING;
	snprintf(o->message, sizeof(o->message), "running %s", argv[0]);
	if (state_save(h, o, 0) != NV_OK) {
		finish(o, HOST_VAL_FAILED, "cannot write the validation record in %s",
		       h->cfg.state_dir);
		return;
	}
	state_path(h, LOG_FILE, logp, sizeof(logp));
	(void)unlink(logp);
	if (logp[0] == '\0' || h->ops->spawn(h, argv, logp, NULL, &pid) != NV_OK) {
		finish(o, HOST_VAL_FAILED, "cannot start %s", argv[0]);
		return;
	}
	h->val_pid = pid;
	h->val_deadline_ms = time_mono_ms() + req->timeout_ms;
	(void)state_save(h, o, pid);
	log_info("agent", "validation run started", "id=%s pid=%d cmd=%s", o->id, (int)pid,
	         argv[0]);
}

enum nv_err host_validation_step(struct host *h, const struct host_val_request *req,
                                 const struct host_val_result *reported,
                                 struct host_val_result *out)
{
	struct host_val_result o = {0};
	long long pid = 0;
	unsigned long long pid_start = 0;
	bool have = state_load(h, &o, &pid, &pid_start), dirty = false, ended = false;
	int64_t timeout_s = req ? req->timeout_ms / 1000 : 0;

	if (!have && reported != NULL && reported->id[0] != '\0' &&
	    reported->phase != HOST_VAL_NONE) {
		o = *reported; /* the host forgot (reboot); the API did not */
		have = dirty = true;
	}
	if (have && o.phase == HOST_VAL_RUNNING) {
		if (h->val_pid > 0 && pid == h->val_pid)
			ended = poll_ours(h, &o, timeout_s);
		else {
			reap_orphan(&o, pid, pid_start);
			ended = true;
		}
		dirty |= ended;
	}
	if (req != NULL && req->id[0] != '\0' && (!have || strcmp(req->id, o.id) != 0)) {
		if (h->val_pid > 0)
			kill_ours(h); /* superseded by a newer id */
		start(h, req, &o);
		have = dirty = true;
		ended = o.phase != HOST_VAL_RUNNING;
	}
	if (dirty && have && o.phase != HOST_VAL_RUNNING && state_save(h, &o, 0) != NV_OK)
		log_warn("agent", "cannot write the validation record", "id=%s", o.id);
	if (ended)
		log_info("agent", "validation run ended", "id=%s phase=%s msg=\"%s\"", o.id,
		         host_val_phase_name(o.phase), o.message);
	*out = o;
	return NV_OK;
}
