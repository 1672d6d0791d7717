// SPDX-License-Identifier: Apache-2.0
// The simulator backend: partitions of a simulated rack (the folder that
// `simctl create` writes, one tray-NN/ per compute tray with a gpu/<n>
// key=value file per GPU). A change puts the member GPUs' fabric state in
// progress at once and, after a configured delay, gives them the new
// clique, as NMX-M and the GPUs' re-registration would.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric_int.h"

#define SIM_FILE_MAX 65536
#define SIM_GPU_FILES 8
#define SIM_PART_MAX 32765u
#define SIM_LIST_LEN (FABRIC_GPUS_MAX * 8)

/* GPU fabric states as the fake NVML reports them. */
#define GPU_IN_PROGRESS 2
#define GPU_COMPLETED 3

struct sim {
	char root[512];
	long delay_ms;
	uint32_t default_clique;
	int lock_fd;        /* flock: other processes using the same rack */
	pthread_mutex_t mu; /* flock does not order threads sharing lock_fd */
};

/* A sim partition record: fabric/partition-<pid>. */
struct sim_part {
	uint32_t pid;
	char name[FABRIC_NAME_LEN];
	char health[24];
	size_t n;
	struct fabric_gpu gpus[FABRIC_GPUS_MAX];
};

/* An operation record: fabric/op-<n>. */
struct sim_op {
	char id[FABRIC_ID_LEN];
	char kind[16]; /* create | update | delete */
	uint32_t pid;
	enum fabric_op_state state;
	int64_t due_ms; /* wall clock: operations outlive processes */
	size_t n_gone;  /* update: GPUs that leave the partition */
	struct fabric_gpu gone[FABRIC_GPUS_MAX];
	char message[FABRIC_MSG_LEN];
};

/* ---- small key=value files ---- */

static enum nv_err path_of(char *out, size_t outsz, const struct sim *s, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static enum nv_err path_of(char *out, size_t outsz, const struct sim *s, const char *fmt, ...)
{
	char rel[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(rel))
		return NV_E_TOO_LARGE;
	n = snprintf(out, outsz, "%s/%s", s->root, rel);
	return n > 0 && (size_t)n < outsz ? NV_OK : NV_E_TOO_LARGE;
}

static enum nv_err file_read(const char *path, struct buf *b)
{
	char chunk[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum nv_err err = NV_OK;

	if (fd < 0)
		return errno == ENOENT ? NV_E_NOT_FOUND : NV_E_IO;
	buf_reset(b);
	for (;;) {
		ssize_t r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = NV_E_IO;
		if (r <= 0)
			break;
		err = buf_append(b, chunk, (size_t)r);
		if (err != NV_OK)
			break;
	}
	close(fd);
	return err;
}

enum nv_err fabric_file_write(const char *path, const char *data, size_t len)
{
	char tmp[1200];
	bool ok = true;
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= (int)sizeof(tmp))
		return NV_E_TOO_LARGE;
	fd = mkstemp(tmp);
	if (fd < 0)
		return NV_E_IO;
	while (ok && len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		ok = w > 0;
		if (ok) {
			data += w;
			len -= (size_t)w;
		}
	}
	ok = fchmod(fd, 0644) == 0 && ok;
	ok = close(fd) == 0 && ok;
	ok = ok && rename(tmp, path) == 0;
	if (!ok)
		unlink(tmp);
	return ok ? NV_OK : NV_E_IO;
}

/* The value of key in key=value text into out; false when absent. */
static bool kv_get(const char *text, const char *key, char *out, size_t outsz)
{
	size_t kl = strlen(key);

	for (const char *p = text; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = ll - kl - 1;
			while (vl > 0 && (p[kl + vl] == '\r' || p[kl + vl] == ' '))
				vl--;
			if (vl >= outsz)
				return false;
			memcpy(out, p + kl + 1, vl);
			out[vl] = '\0';
			return true;
		}
		p = nl != NULL ? nl + 1 : p + ll;
	}
	return false;
}

static bool kv_u64(const char *text, const char *key, uint64_t max, uint64_t *out)
{
	char v[32];

	return kv_get(text, key, v, sizeof(v)) && parse_u64(v, 0, max, out) == NV_OK;
}

/* Rewrites key=value pairs in a GPU state file, keeping every other line. */
static enum nv_err kv_update(const char *path, const char *const *keys, const char *const *vals,
                             size_t n)
{
	struct buf in, out;
	bool done[4] = {false, false, false, false};
	enum nv_err err;

	buf_init(&in, SIM_FILE_MAX);
	buf_init(&out, SIM_FILE_MAX);
	err = file_read(path, &in);
	for (const char *p = buf_str(&in); err == NV_OK && *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl != NULL ? (size_t)(nl - p) : strlen(p), k;
		for (k = 0; k < n; k++) {
			size_t kl = strlen(keys[k]);
			if (ll > kl && memcmp(p, keys[k], kl) == 0 && p[kl] == '=')
				break;
		}
		if (k < n) {
			err = buf_printf(&out, "%s=%s\n", keys[k], vals[k]);
			done[k] = true;
		} else {
			err = buf_printf(&out, "%.*s\n", (int)ll, p);
		}
		p = nl != NULL ? nl + 1 : p + ll;
	}
	for (size_t k = 0; err == NV_OK && k < n; k++)
		if (!done[k])
			err = buf_printf(&out, "%s=%s\n", keys[k], vals[k]);
	if (err == NV_OK)
		err = fabric_file_write(path, buf_str(&out), out.len);
	buf_clear(&in);
	buf_clear(&out);
	return err;
}

/* ---- members ---- */

/* "3.1,3.2,4.1" (tray.module) <-> GPUs. */
static enum nv_err list_render(const struct fabric_gpu *g, size_t n, struct buf *b)
{
	enum nv_err err = NV_OK;

	for (size_t i = 0; i < n && err == NV_OK; i++)
		err = buf_printf(b, "%s%u.%u", i ? "," : "", g[i].tray, g[i].module);
	return err;
}

static enum nv_err list_parse(const char *s, struct fabric_gpu *g, size_t *n)
{
	char item[32];

	*n = 0;
	while (*s != '\0') {
		size_t len = strcspn(s, ",");
		unsigned long tray, module;
		char *dot, *end;
		if (len == 0 || len >= sizeof(item) || *n >= FABRIC_GPUS_MAX)
			return NV_E_PARSE;
		memcpy(item, s, len);
		item[len] = '\0';
		dot = strchr(item, '.');
		if (dot == NULL)
			return NV_E_PARSE;
		*dot = '\0';
		errno = 0;
		tray = strtoul(item, &end, 10);
		if (errno != 0 || *end != '\0' || tray == 0 || tray > 99)
			return NV_E_PARSE;
		module = strtoul(dot + 1, &end, 10);
		if (errno != 0 || *end != '\0' || module == 0 || module > 8)
			return NV_E_PARSE;
		memset(&g[*n], 0, sizeof(g[*n]));
		g[*n].tray = (unsigned)tray;
		g[*n].module = (unsigned)module;
		(*n)++;
		s += len + (s[len] == ',');
	}
	return NV_OK;
}

/* The GPU state file of tray.module, found by the module_id key. */
static enum nv_err gpu_file(const struct sim *s, const struct fabric_gpu *g, char *out,
                            size_t outsz)
{
	char text[4096], mod[16];

	for (unsigned i = 0; i < SIM_GPU_FILES; i++) {
		struct buf b;
		bool match;
		if (path_of(out, outsz, s, "tray-%02u/gpu/%u", g->tray, i) != NV_OK)
			return NV_E_TOO_LARGE;
		buf_init(&b, sizeof(text));
		match = file_read(out, &b) == NV_OK &&
		        kv_get(buf_str(&b), "module_id", mod, sizeof(mod)) &&
		        strtoul(mod, NULL, 10) == g->module;
		buf_clear(&b);
		if (match)
			return NV_OK;
	}
	return NV_E_NOT_FOUND;
}

static enum nv_err gpus_set(const struct sim *s, const struct fabric_gpu *g, size_t n, int state,
                            long clique)
{
	static const char *const keys[] = {"state", "clique"};
	char path[1024], st[16], cl[16];
	const char *vals[2] = {st, cl};

	snprintf(st, sizeof(st), "%d", state);
	snprintf(cl, sizeof(cl), "%ld", clique);
	for (size_t i = 0; i < n; i++) {
		enum nv_err err = gpu_file(s, &g[i], path, sizeof(path));
		if (err == NV_OK)
			err = kv_update(path, keys, vals, clique < 0 ? 1 : 2);
		if (err != NV_OK)
			return err;
	}
	return NV_OK;
}

static bool gpu_in(const struct fabric_gpu *g, const struct fabric_gpu *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i].tray == g->tray && set[i].module == g->module)
			return true;
	return false;
}

/* ---- records ---- */

static enum nv_err part_load(const struct sim *s, uint32_t pid, struct sim_part *p)
{
	char path[1024], list[SIM_LIST_LEN];
	struct buf b;
	enum nv_err err;

	if (path_of(path, sizeof(path), s, "fabric/partition-%" PRIu32, pid) != NV_OK)
		return NV_E_TOO_LARGE;
	buf_init(&b, SIM_FILE_MAX);
	err = file_read(path, &b);
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	if (err == NV_OK && (!kv_get(buf_str(&b), "name", p->name, sizeof(p->name)) ||
	                     !kv_get(buf_str(&b), "health", p->health, sizeof(p->health))))
		err = NV_E_PARSE;
	if (err == NV_OK) {
		list[0] = '\0';
		kv_get(buf_str(&b), "gpus", list, sizeof(list));
		err = list_parse(list, p->gpus, &p->n);
	}
	buf_clear(&b);
	return err;
}

static enum nv_err part_save(const struct sim *s, const struct sim_part *p)
{
	char path[1024];
	struct buf b;
	enum nv_err err;

	if (path_of(path, sizeof(path), s, "fabric/partition-%" PRIu32, p->pid) != NV_OK)
		return NV_E_TOO_LARGE;
	buf_init(&b, SIM_FILE_MAX);
	err = buf_printf(&b, "name=%s\nhealth=%s\ngpus=", p->name, p->health);
	if (err == NV_OK)
		err = list_render(p->gpus, p->n, &b);
	if (err == NV_OK)
		err = buf_append_str(&b, "\n");
	if (err == NV_OK)
		err = fabric_file_write(path, buf_str(&b), b.len);
	buf_clear(&b);
	return err;
}

/* The last partition and operation numbers handed out (fabric/counter). */
static void counters(const struct sim *s, uint64_t *pid, uint64_t *opn)
{
	char path[1024];
	struct buf b;

	*pid = *opn = 0;
	if (path_of(path, sizeof(path), s, "fabric/counter") != NV_OK)
		return;
	buf_init(&b, 4096);
	if (file_read(path, &b) == NV_OK) {
		kv_u64(buf_str(&b), "partition", SIM_PART_MAX, pid);
		kv_u64(buf_str(&b), "op", UINT64_MAX - 1, opn);
	}
	buf_clear(&b);
}

/* The pids of all partition records, ascending. */
static size_t part_ids(const struct sim *s, uint32_t *ids, size_t max)
{
	uint64_t last, unused;
	size_t n = 0;

	counters(s, &last, &unused);
	for (uint32_t pid = 1; pid <= last && n < max; pid++) {
		char path[1024];
		if (path_of(path, sizeof(path), s, "fabric/partition-%" PRIu32, pid) == NV_OK &&
		    access(path, F_OK) == 0)
			ids[n++] = pid;
	}
	return n;
}

static enum nv_err op_load(const struct sim *s, const char *id, struct sim_op *op)
{
	char path[1024], v[SIM_LIST_LEN];
	uint64_t pid = 0, due = 0, state = 0;
	struct buf b;
	enum nv_err err;

	if (path_of(path, sizeof(path), s, "fabric/%s", id) != NV_OK)
		return NV_E_TOO_LARGE;
	buf_init(&b, SIM_FILE_MAX);
	err = file_read(path, &b);
	memset(op, 0, sizeof(*op));
	str_copy(op->id, sizeof(op->id), id);
	if (err == NV_OK && (!kv_get(buf_str(&b), "kind", op->kind, sizeof(op->kind)) ||
	                     !kv_u64(buf_str(&b), "partition", SIM_PART_MAX, &pid) ||
	                     !kv_u64(buf_str(&b), "due_ms", INT64_MAX, &due) ||
	                     !kv_u64(buf_str(&b), "state", FABRIC_OP_CANCELLED, &state)))
		err = NV_E_PARSE;
	if (err == NV_OK) {
		op->pid = (uint32_t)pid;
		op->due_ms = (int64_t)due;
		op->state = (enum fabric_op_state)state;
		kv_get(buf_str(&b), "message", op->message, sizeof(op->message));
		v[0] = '\0';
		kv_get(buf_str(&b), "gone", v, sizeof(v));
		err = list_parse(v, op->gone, &op->n_gone);
	}
	buf_clear(&b);
	return err;
}

static enum nv_err op_save(const struct sim *s, const struct sim_op *op)
{
	char path[1024];
	struct buf b;
	enum nv_err err;

	if (path_of(path, sizeof(path), s, "fabric/%s", op->id) != NV_OK)
		return NV_E_TOO_LARGE;
	buf_init(&b, SIM_FILE_MAX);
	err = buf_printf(&b,
	                 "kind=%s\npartition=%" PRIu32 "\ndue_ms=%" PRId64 "\nstate=%d\n"
	                 "message=%s\ngone=",
	                 op->kind, op->pid, op->due_ms, (int)op->state, op->message);
	if (err == NV_OK)
		err = list_render(op->gone, op->n_gone, &b);
	if (err == NV_OK)
		err = buf_append_str(&b, "\n");
	if (err == NV_OK)
		err = fabric_file_write(path, buf_str(&b), b.len);
	buf_clear(&b);
	return err;
}

/* Hands out the next operation number and, when pid is not NULL, the
 * next partition number. */
static enum nv_err next_ids(const struct sim *s, uint32_t *pid, uint64_t *opn)
{
	char path[1024], text[128];
	uint64_t p, o;

	if (path_of(path, sizeof(path), s, "fabric/counter") != NV_OK)
		return NV_E_TOO_LARGE;
	counters(s, &p, &o);
	if (pid != NULL && p >= SIM_PART_MAX)
		return NV_E_TOO_LARGE;
	if (pid != NULL)
		*pid = (uint32_t)++p;
	*opn = ++o;
	snprintf(text, sizeof(text), "partition=%" PRIu64 "\nop=%" PRIu64 "\n", p, o);
	return fabric_file_write(path, text, strlen(text));
}

/* ---- operations ---- */

/* Applies a due operation to the GPUs and the records. */
static enum nv_err op_finish(const struct sim *s, struct sim_op *op)
{
	struct sim_part p;
	char path[1024];
	enum nv_err err = part_load(s, op->pid, &p);

	if (err != NV_OK) {
		op->state = FABRIC_OP_FAILED;
		snprintf(op->message, sizeof(op->message), "partition %" PRIu32 " vanished",
		         op->pid);
		return op_save(s, op);
	}
	if (strcmp(op->kind, "delete") == 0) {
		err = gpus_set(s, p.gpus, p.n, GPU_COMPLETED, (long)s->default_clique);
		if (err == NV_OK &&
		    path_of(path, sizeof(path), s, "fabric/partition-%" PRIu32, p.pid) == NV_OK)
			unlink(path);
	} else {
		err = gpus_set(s, op->gone, op->n_gone, GPU_COMPLETED, (long)s->default_clique);
		if (err == NV_OK)
			err = gpus_set(s, p.gpus, p.n, GPU_COMPLETED, (long)p.pid);
		if (err == NV_OK) {
			str_copy(p.health, sizeof(p.health), "HEALTHY");
			err = part_save(s, &p);
		}
	}
	if (err != NV_OK)
		return err;
	op->state = FABRIC_OP_COMPLETED;
	str_copy(op->message, sizeof(op->message), "done");
	log_info("fabric", "sim partition change applied", "op=%s kind=%s partition=%" PRIu32,
	         op->id, op->kind, op->pid);
	return op_save(s, op);
}

/* Finishes every operation whose delay has passed, so the GPUs end in the
 * same state whether or not anyone polls. */
static enum nv_err settle(const struct sim *s)
{
	uint64_t last, unused, first;

	counters(s, &unused, &last);
	first = last > 256 ? last - 256 : 1; /* older ones were settled long ago */
	for (uint64_t n = first; n <= last; n++) {
		char id[32];
		struct sim_op op;
		snprintf(id, sizeof(id), "op-%" PRIu64, n);
		if (op_load(s, id, &op) != NV_OK || fabric_op_done(op.state) ||
		    time_wall_ms() < op.due_ms)
			continue;
		enum nv_err err = op_finish(s, &op);
		if (err != NV_OK)
			return err;
	}
	return NV_OK;
}

static void op_out(const struct sim_op *o, struct fabric_op *op)
{
	memset(op, 0, sizeof(*op));
	str_copy(op->id, sizeof(op->id), o->id);
	op->state = o->state;
	op->percent = o->state == FABRIC_OP_COMPLETED ? 100
	              : o->state == FABRIC_OP_PENDING ? 0
	                                              : 50;
	snprintf(op->partition_id, sizeof(op->partition_id), "%" PRIu32, o->pid);
	str_copy(op->message, sizeof(op->message), o->message);
}

/* ---- locking ---- */

static enum nv_err lock(struct sim *s, struct fabric_status *st)
{
	pthread_mutex_lock(&s->mu);
	if (flock(s->lock_fd, LOCK_EX) != 0) {
		pthread_mutex_unlock(&s->mu);
		fabric_status_msg(st, "sim: cannot lock the fabric state");
		return NV_E_IO;
	}
	enum nv_err err = settle(s);
	if (err != NV_OK) {
		flock(s->lock_fd, LOCK_UN);
		pthread_mutex_unlock(&s->mu);
		fabric_status_msg(st, "sim: cannot apply due operations: %s", nv_err_str(err));
	}
	return err;
}

static void unlock(struct sim *s)
{
	flock(s->lock_fd, LOCK_UN);
	pthread_mutex_unlock(&s->mu);
}

static enum nv_err sim_open(const struct fabric_config *c, void **state, struct fabric_status *st)
{
	struct sim *s = xcalloc(1, sizeof(*s));
	char path[1024];
	struct stat sb;

	str_copy(s->root, sizeof(s->root), c->sim_root);
	s->delay_ms = c->sim_delay_ms;
	s->default_clique = c->sim_default_clique;
	s->lock_fd = -1;
	if (stat(s->root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		fabric_status_msg(st, "sim_root %s: not a folder", s->root);
		free(s);
		return NV_E_NOT_FOUND;
	}
	if (path_of(path, sizeof(path), s, "fabric") != NV_OK ||
	    (mkdir(path, 0755) != 0 && errno != EEXIST) ||
	    path_of(path, sizeof(path), s, "fabric/lock") != NV_OK ||
	    (s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		fabric_status_msg(st, "sim_root %s: cannot create fabric/", s->root);
		free(s);
		return NV_E_IO;
	}
	pthread_mutex_init(&s->mu, NULL);
	*state = s;
	return NV_OK;
}

static void sim_close(void *state)
{
	struct sim *s = state;

	if (s == NULL)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void part_out(const struct sim_part *p, struct fabric_partition *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%" PRIu32, p->pid);
	str_copy(out->name, sizeof(out->name), p->name);
	out->has_partition_id = true;
	out->partition_id = p->pid;
	out->health = strcmp(p->health, "HEALTHY") == 0 ? FABRIC_HEALTH_HEALTHY : FABRIC_HEALTH_NEW;
	out->kind = FABRIC_MEMBERS_LOCATION;
	out->n_gpus = p->n;
	memcpy(out->gpus, p->gpus, p->n * sizeof(p->gpus[0]));
}

static enum nv_err sim_list(void *state, struct fabric_partition **out, size_t *n,
                            struct fabric_status *st)
{
	struct sim *s = state;
	uint32_t ids[FABRIC_PARTITIONS_MAX];
	struct fabric_partition *all;
	struct sim_part p;
	size_t k;
	enum nv_err err = lock(s, st);

	if (err != NV_OK)
		return err;
	k = part_ids(s, ids, ARRAY_LEN(ids));
	all = xcalloc(k + 1, sizeof(*all));
	for (size_t i = 0; i < k && err == NV_OK; i++) {
		err = part_load(s, ids[i], &p);
		if (err == NV_OK)
			part_out(&p, &all[i]);
	}
	unlock(s);
	if (err != NV_OK) {
		free(all);
		fabric_status_msg(st, "sim: unreadable partition record");
		return err;
	}
	*out = all;
	*n = k;
	return NV_OK;
}

static enum nv_err pid_of(const char *id, uint32_t *pid, struct fabric_status *st)
{
	uint64_t v;

	if (parse_u64(id, 1, SIM_PART_MAX, &v) != NV_OK) {
		fabric_status_msg(st, "sim: no partition %s", id);
		return NV_E_NOT_FOUND;
	}
	*pid = (uint32_t)v;
	return NV_OK;
}

static enum nv_err sim_get(void *state, const char *id, struct fabric_partition *out,
                           struct fabric_status *st)
{
	struct sim *s = state;
	struct sim_part p;
	uint32_t pid;
	enum nv_err err = pid_of(id, &pid, st);

	if (err == NV_OK)
		err = lock(s, st);
	if (err != NV_OK)
		return err;
	err = part_load(s, pid, &p);
	unlock(s);
	if (err == NV_OK)
		part_out(&p, out);
	else
		fabric_status_msg(st, "sim: no partition %s", id);
	return err;
}

/* Refuses a change while another one on the same partition is running. */
static bool busy(const struct sim *s, uint32_t pid)
{
	uint64_t last, unused;

	counters(s, &unused, &last);
	for (uint64_t n = last > 256 ? last - 256 : 1; n <= last; n++) {
		char id[32];
		struct sim_op op;
		snprintf(id, sizeof(id), "op-%" PRIu64, n);
		if (op_load(s, id, &op) == NV_OK && op.pid == pid && !fabric_op_done(op.state))
			return true;
	}
	return false;
}

/* Members must exist and belong to no other partition. */
static enum nv_err members_check(const struct sim *s, const struct fabric_partition_spec *spec,
                                 uint32_t self, struct fabric_status *st)
{
	uint32_t ids[FABRIC_PARTITIONS_MAX];
	size_t k = part_ids(s, ids, ARRAY_LEN(ids));
	char path[1024];
	struct sim_part p;

	for (size_t i = 0; i < spec->n_gpus; i++) {
		if (gpu_file(s, &spec->gpus[i], path, sizeof(path)) != NV_OK) {
			fabric_status_msg(st, "sim: no GPU module %u on tray %u",
			                  spec->gpus[i].module, spec->gpus[i].tray);
			return NV_E_NOT_FOUND;
		}
	}
	for (size_t j = 0; j < k; j++) {
		if (ids[j] == self || part_load(s, ids[j], &p) != NV_OK)
			continue;
		if (self == 0 && strcmp(p.name, spec->name) == 0) {
			fabric_status_msg(st, "sim: a partition named %s exists (id %" PRIu32 ")",
			                  p.name, p.pid);
			return NV_E_EXISTS;
		}
		for (size_t i = 0; i < spec->n_gpus; i++)
			if (gpu_in(&spec->gpus[i], p.gpus, p.n)) {
				fabric_status_msg(st, "sim: tray %u module %u is in partition %s",
				                  spec->gpus[i].tray, spec->gpus[i].module, p.name);
				return NV_E_CONFLICT;
			}
	}
	return NV_OK;
}

/* Records an operation and puts the affected GPUs in progress. */
static enum nv_err op_start(struct sim *s, const char *kind, const struct sim_part *p,
                            const struct fabric_gpu *gone, size_t n_gone, struct fabric_op *out)
{
	struct sim_op op;
	uint64_t n;
	enum nv_err err = next_ids(s, NULL, &n);

	if (err != NV_OK)
		return err;
	memset(&op, 0, sizeof(op));
	snprintf(op.id, sizeof(op.id), "op-%" PRIu64, n);
	str_copy(op.kind, sizeof(op.kind), kind);
	op.pid = p->pid;
	op.state = FABRIC_OP_IN_PROGRESS;
	op.due_ms = time_wall_ms() + s->delay_ms;
	str_copy(op.message, sizeof(op.message), "configuring the NVLink fabric");
	op.n_gone = n_gone;
	if (n_gone > 0)
		memcpy(op.gone, gone, n_gone * sizeof(gone[0]));
	err = op_save(s, &op);
	if (err == NV_OK)
		err = gpus_set(s, p->gpus, p->n, GPU_IN_PROGRESS, -1);
	if (err == NV_OK)
		err = gpus_set(s, gone, n_gone, GPU_IN_PROGRESS, -1);
	if (err == NV_OK)
		op_out(&op, out);
	return err;
}

static enum nv_err sim_create(void *state, const struct fabric_partition_spec *spec,
                              struct fabric_op *op, struct fabric_status *st)
{
	struct sim *s = state;
	struct sim_part p;
	uint64_t unused;
	enum nv_err err = lock(s, st);

	if (err != NV_OK)
		return err;
	err = members_check(s, spec, 0, st);
	if (err == NV_OK) {
		memset(&p, 0, sizeof(p));
		err = next_ids(s, &p.pid, &unused);
	}
	if (err == NV_OK) {
		str_copy(p.name, sizeof(p.name), spec->name);
		str_copy(p.health, sizeof(p.health), "NEW");
		p.n = spec->n_gpus;
		memcpy(p.gpus, spec->gpus, p.n * sizeof(p.gpus[0]));
		err = part_save(s, &p);
	}
	if (err == NV_OK)
		err = op_start(s, "create", &p, NULL, 0, op);
	unlock(s);
	return err;
}

static enum nv_err sim_update(void *state, const char *id, const struct fabric_partition_spec *spec,
                              struct fabric_op *op, struct fabric_status *st)
{
	struct sim *s = state;
	struct fabric_gpu gone[FABRIC_GPUS_MAX];
	size_t n_gone = 0;
	struct sim_part p;
	uint32_t pid;
	enum nv_err err = pid_of(id, &pid, st);

	if (err == NV_OK)
		err = lock(s, st);
	if (err != NV_OK)
		return err;
	err = part_load(s, pid, &p);
	if (err != NV_OK) {
		fabric_status_msg(st, "sim: no partition %s", id);
	} else if (busy(s, pid)) {
		fabric_status_msg(st, "sim: partition %s has a change in progress", id);
		err = NV_E_BUSY;
	}
	if (err == NV_OK)
		err = members_check(s, spec, pid, st);
	if (err == NV_OK) {
		for (size_t i = 0; i < p.n; i++)
			if (!gpu_in(&p.gpus[i], spec->gpus, spec->n_gpus))
				gone[n_gone++] = p.gpus[i];
		p.n = spec->n_gpus;
		memcpy(p.gpus, spec->gpus, p.n * sizeof(p.gpus[0]));
		str_copy(p.health, sizeof(p.health), "NEW");
		err = part_save(s, &p);
	}
	if (err == NV_OK)
		err = op_start(s, "update", &p, gone, n_gone, op);
	unlock(s);
	return err;
}

static enum nv_err sim_remove(void *state, const char *id, struct fabric_op *op,
                              struct fabric_status *st)
{
	struct sim *s = state;
	struct sim_part p;
	uint32_t pid;
	enum nv_err err = pid_of(id, &pid, st);

	if (err == NV_OK)
		err = lock(s, st);
	if (err != NV_OK)
		return err;
	err = part_load(s, pid, &p);
	if (err != NV_OK) {
		fabric_status_msg(st, "sim: no partition %s", id);
	} else if (busy(s, pid)) {
		fabric_status_msg(st, "sim: partition %s has a change in progress", id);
		err = NV_E_BUSY;
	}
	if (err == NV_OK)
		err = op_start(s, "delete", &p, NULL, 0, op);
	unlock(s);
	return err;
}

static enum nv_err sim_poll(void *state, const char *op_id, struct fabric_op *op,
                            struct fabric_status *st)
{
	struct sim *s = state;
	struct sim_op o;
	enum nv_err err;

	if (!str_has_prefix(op_id, "op-")) {
		fabric_status_msg(st, "sim: no operation %s", op_id);
		return NV_E_NOT_FOUND;
	}
	err = lock(s, st);
	if (err != NV_OK)
		return err;
	err = op_load(s, op_id, &o);
	unlock(s);
	if (err != NV_OK) {
		fabric_status_msg(st, "sim: no operation %s", op_id);
		return err == NV_E_PARSE ? NV_E_PARSE : NV_E_NOT_FOUND;
	}
	op_out(&o, op);
	return NV_OK;
}

const struct fabric_backend_ops fabric_sim_ops = {
        .name = "sim",
        .open = sim_open,
        .close = sim_close,
        .list = sim_list,
        .get = sim_get,
        .create = sim_create,
        .update = sim_update,
        .remove = sim_remove,
        .poll = sim_poll,
};
