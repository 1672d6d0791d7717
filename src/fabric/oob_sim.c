// SPDX-License-Identifier: Apache-2.0
// The simulator's out-of-band backend: component versions of a simulated
// rack's switch and compute trays, kept in the rack folder simctl made
// (oob/state), with every accepted update counted per target so tests can
// prove each step ran once. An update stays in progress for the configured
// delay, then the target runs the new version, or fails when the file
// oob/fail.<component>.<target> exists.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric_int.h"
#include "oob_int.h"

#define STATE_MAX 65536
#define ENTRIES_MAX 1024
#define KEY_LEN 64
#define VAL_LEN 160

struct osim {
	char root[512];
	long delay_ms;
	int lock_fd;
	pthread_mutex_t mu;
};

/* oob/state as a table: next=<n>, v.<component>.<target>=<version>,
 * n.<component>.<target>=<updates>, op.<n>=<state> <due_ms> <component>
 * <target> <version>. */
struct table {
	size_t n;
	char key[ENTRIES_MAX][KEY_LEN];
	char val[ENTRIES_MAX][VAL_LEN];
};

static enum nv_err path_of(const struct osim *s, const char *rel, char *out, size_t outsz)
{
	int n = snprintf(out, outsz, "%s/oob/%s", s->root, rel);
	return n > 0 && (size_t)n < outsz ? NV_OK : NV_E_TOO_LARGE;
}

static enum nv_err table_load(const struct osim *s, struct table *t)
{
	char path[1100], line[KEY_LEN + VAL_LEN + 4];
	FILE *f;

	t->n = 0;
	if (path_of(s, "state", path, sizeof(path)) != NV_OK)
		return NV_E_TOO_LARGE;
	f = fopen(path, "re");
	if (f == NULL)
		return errno == ENOENT ? NV_OK : NV_E_IO;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *eq = strchr(line, '=');
		line[strcspn(line, "\n")] = '\0';
		if (eq == NULL || t->n >= ENTRIES_MAX || (size_t)(eq - line) >= KEY_LEN ||
		    strlen(eq + 1) >= VAL_LEN) {
			fclose(f);
			return NV_E_PARSE;
		}
		*eq = '\0';
		str_copy(t->key[t->n], KEY_LEN, line);
		str_copy(t->val[t->n], VAL_LEN, eq + 1);
		t->n++;
	}
	fclose(f);
	return NV_OK;
}

static enum nv_err table_save(const struct osim *s, const struct table *t)
{
	char path[1100];
	struct buf b;
	enum nv_err rc = NV_OK;

	buf_init(&b, STATE_MAX * 4);
	for (size_t i = 0; i < t->n && rc == NV_OK; i++) {
		rc = buf_append_str(&b, t->key[i]);
		if (rc == NV_OK)
			rc = buf_append_byte(&b, '=');
		if (rc == NV_OK)
			rc = buf_append_str(&b, t->val[i]);
		if (rc == NV_OK)
			rc = buf_append_byte(&b, '\n');
	}
	if (rc == NV_OK)
		rc = path_of(s, "state", path, sizeof(path));
	if (rc == NV_OK)
		rc = fabric_file_write(path, b.data ? b.data : "", b.len);
	buf_clear(&b);
	return rc;
}

static const char *table_get(const struct table *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->key[i], key) == 0)
			return t->val[i];
	return NULL;
}

static enum nv_err table_set(struct table *t, const char *key, const char *val)
{
	size_t i;

	for (i = 0; i < t->n && strcmp(t->key[i], key) != 0; i++)
		;
	if (i == t->n) {
		if (t->n >= ENTRIES_MAX)
			return NV_E_TOO_LARGE;
		t->n++;
	}
	str_copy(t->key[i], KEY_LEN, key);
	return str_copy(t->val[i], VAL_LEN, val);
}

static void target_key(char *out, size_t outsz, const char *prefix, enum matrix_component c,
                       const struct oob_target *t)
{
	char name[32];

	oob_target_name(t, name, sizeof(name));
	snprintf(out, outsz, "%s.%s.%s", prefix, matrix_component_name(c), name);
}

/* op.<n>: "<state> <due_ms> <component> <kind> <index> <version>". */
static bool op_parse(const char *id, const char *v, struct oob_op *op, int64_t *due)
{
	char comp[40], kind[16], ver[MATRIX_VERSION_LEN];
	unsigned st, idx;
	long long d;

	if (v == NULL ||
	    sscanf(v, "%u %lld %39s %15s %u %63s", &st, &d, comp, kind, &idx, ver) != 6 ||
	    st > FABRIC_OP_CANCELLED || !matrix_component_parse(comp, &op->component))
		return false;
	memset(op->message, 0, sizeof(op->message));
	str_copy(op->id, sizeof(op->id), id);
	op->state = (enum fabric_op_state)st;
	op->target.kind = strcmp(kind, "switch") == 0 ? OOB_SWITCH_TRAY : OOB_COMPUTE_TRAY;
	op->target.index = idx;
	str_copy(op->version, sizeof(op->version), ver);
	*due = d;
	return true;
}

static void op_render(const struct oob_op *op, int64_t due, char *out, size_t outsz)
{
	snprintf(out, outsz, "%u %lld %s %s %u %s", (unsigned)op->state, (long long)due,
	         matrix_component_name(op->component),
	         op->target.kind == OOB_SWITCH_TRAY ? "switch" : "compute", op->target.index,
	         op->version);
}

static void op_message(struct oob_op *op)
{
	char tname[32];

	oob_target_name(&op->target, tname, sizeof(tname));
	snprintf(op->message, sizeof(op->message), "%s on %s to %s: %s",
	         matrix_component_name(op->component), tname, op->version,
	         op->state == FABRIC_OP_COMPLETED ? "done"
	         : op->state == FABRIC_OP_FAILED  ? "failed (injected by oob/fail.* in the sim)"
	                                          : "in progress");
}

/* Ends the operations whose time has come. */
static enum nv_err settle(const struct osim *s, struct table *t)
{
	int64_t now = time_wall_ms();

	for (size_t i = 0; i < t->n; i++) {
		struct oob_op op;
		int64_t due;
		char path[1100], fail[128], tname[32], val[VAL_LEN], vkey[KEY_LEN];
		if (strncmp(t->key[i], "op.", 3) != 0 ||
		    !op_parse(t->key[i] + 3, t->val[i], &op, &due) ||
		    op.state != FABRIC_OP_IN_PROGRESS || due > now)
			continue;
		oob_target_name(&op.target, tname, sizeof(tname));
		snprintf(fail, sizeof(fail), "fail.%s.%s", matrix_component_name(op.component),
		         tname);
		if (path_of(s, fail, path, sizeof(path)) == NV_OK && access(path, F_OK) == 0) {
			op.state = FABRIC_OP_FAILED;
		} else {
			op.state = FABRIC_OP_COMPLETED;
			target_key(vkey, sizeof(vkey), "v", op.component, &op.target);
			if (table_set(t, vkey, op.version) != NV_OK)
				return NV_E_TOO_LARGE;
		}
		op_render(&op, due, val, sizeof(val));
		str_copy(t->val[i], VAL_LEN, val);
	}
	return NV_OK;
}

/* Locks the rack's oob state and loads it, settled. */
static enum nv_err begin(struct osim *s, struct table *t, struct fabric_status *st)
{
	enum nv_err rc;

	pthread_mutex_lock(&s->mu);
	if (flock(s->lock_fd, LOCK_EX) != 0) {
		pthread_mutex_unlock(&s->mu);
		fabric_status_msg(st, "sim: cannot lock the oob state");
		return NV_E_IO;
	}
	rc = table_load(s, t);
	if (rc == NV_OK)
		rc = settle(s, t);
	if (rc != NV_OK) {
		flock(s->lock_fd, LOCK_UN);
		pthread_mutex_unlock(&s->mu);
		fabric_status_msg(st, "sim: oob/state unreadable: %s", nv_err_str(rc));
	}
	return rc;
}

static enum nv_err end(struct osim *s, struct table *t, bool save)
{
	enum nv_err rc = save ? table_save(s, t) : NV_OK;

	flock(s->lock_fd, LOCK_UN);
	pthread_mutex_unlock(&s->mu);
	free(t);
	return rc;
}

static enum nv_err osim_open(const struct oob_config *c, void **state, struct fabric_status *st)
{
	struct osim *s = xcalloc(1, sizeof(*s));
	char path[1100];
	struct stat sb;

	str_copy(s->root, sizeof(s->root), c->sim_root);
	s->delay_ms = c->sim_delay_ms;
	if (stat(s->root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		fabric_status_msg(st, "sim_root %s: not a folder", s->root);
		free(s);
		return NV_E_NOT_FOUND;
	}
	snprintf(path, sizeof(path), "%s/oob", s->root);
	if ((mkdir(path, 0755) != 0 && errno != EEXIST) ||
	    path_of(s, "lock", path, sizeof(path)) != NV_OK ||
	    (s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		fabric_status_msg(st, "sim_root %s: cannot create oob/", s->root);
		free(s);
		return NV_E_IO;
	}
	pthread_mutex_init(&s->mu, NULL);
	*state = s;
	return NV_OK;
}

static void osim_close(void *state)
{
	struct osim *s = state;

	if (s == NULL)
		return;
	close(s->lock_fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* An update of the same target to the same version in flight, or NULL. */
static bool op_in_flight(const struct table *t, enum matrix_component c,
                         const struct oob_target *tg, const char *version, struct oob_op *out)
{
	for (size_t i = 0; i < t->n; i++) {
		struct oob_op op;
		int64_t due;
		if (strncmp(t->key[i], "op.", 3) == 0 &&
		    op_parse(t->key[i] + 3, t->val[i], &op, &due) &&
		    op.state == FABRIC_OP_IN_PROGRESS && op.component == c &&
		    op.target.kind == tg->kind && op.target.index == tg->index &&
		    strcmp(op.version, version) == 0) {
			*out = op;
			return true;
		}
	}
	return false;
}

static enum nv_err osim_update(void *state, enum matrix_component comp, const struct oob_target *tg,
                               const char *version, struct oob_op *op, struct fabric_status *st)
{
	struct osim *s = state;
	struct table *t = xcalloc(1, sizeof(*t));
	struct oob_op o = {0};
	char vkey[KEY_LEN], nkey[KEY_LEN], okey[KEY_LEN], val[VAL_LEN];
	const char *have;
	uint64_t next = 1, count = 0;
	enum nv_err rc = begin(s, t, st);

	if (rc != NV_OK) {
		free(t);
		return rc;
	}
	if (op_in_flight(t, comp, tg, version, &o)) {
		op_message(&o);
		*op = o;
		return end(s, t, false);
	}
	if (table_get(t, "next") != NULL)
		(void)parse_u64(table_get(t, "next"), 1, UINT64_MAX / 2, &next);
	target_key(vkey, sizeof(vkey), "v", comp, tg);
	target_key(nkey, sizeof(nkey), "n", comp, tg);
	have = table_get(t, vkey);
	o.component = comp;
	o.target = *tg;
	str_copy(o.version, sizeof(o.version), version);
	snprintf(o.id, sizeof(o.id), "oob-%" PRIu64, next);
	if (have != NULL && strcmp(have, version) == 0) {
		o.state = FABRIC_OP_COMPLETED; /* nothing to do, nothing counted */
	} else {
		o.state = FABRIC_OP_IN_PROGRESS;
		if (table_get(t, nkey) != NULL)
			(void)parse_u64(table_get(t, nkey), 0, UINT64_MAX / 2, &count);
		snprintf(val, sizeof(val), "%" PRIu64, count + 1);
		rc = table_set(t, nkey, val);
	}
	snprintf(okey, sizeof(okey), "op.oob-%" PRIu64, next);
	op_render(&o, time_wall_ms() + s->delay_ms, val, sizeof(val));
	if (rc == NV_OK)
		rc = table_set(t, okey, val);
	snprintf(val, sizeof(val), "%" PRIu64, next + 1);
	if (rc == NV_OK)
		rc = table_set(t, "next", val);
	if (rc != NV_OK) {
		fabric_status_msg(st, "sim: oob/state is full");
		(void)end(s, t, false);
		return rc;
	}
	rc = end(s, t, true);
	if (rc != NV_OK) {
		fabric_status_msg(st, "sim: cannot write oob/state");
		return rc;
	}
	op_message(&o);
	*op = o;
	return NV_OK;
}

static enum nv_err osim_version(void *state, enum matrix_component comp,
                                const struct oob_target *tg, char *out, size_t outsz,
                                struct fabric_status *st)
{
	struct osim *s = state;
	struct table *t = xcalloc(1, sizeof(*t));
	char vkey[KEY_LEN], tname[32];
	const char *have;
	enum nv_err rc = begin(s, t, st);

	if (rc != NV_OK) {
		free(t);
		return rc;
	}
	target_key(vkey, sizeof(vkey), "v", comp, tg);
	have = table_get(t, vkey);
	if (have == NULL) {
		oob_target_name(tg, tname, sizeof(tname));
		fabric_status_msg(st, "sim: no %s version known on %s", matrix_component_name(comp),
		                  tname);
		rc = NV_E_NOT_FOUND;
	} else {
		rc = str_copy(out, outsz, have);
	}
	/* Settling may have ended operations: keep that. */
	enum nv_err rc2 = end(s, t, true);
	return rc != NV_OK ? rc : rc2;
}

static enum nv_err osim_poll(void *state, const char *op_id, struct oob_op *op,
                             struct fabric_status *st)
{
	struct osim *s = state;
	struct table *t = xcalloc(1, sizeof(*t));
	struct oob_op o;
	char okey[KEY_LEN];
	int64_t due;
	enum nv_err rc;

	if (strlen(op_id) + 4 > sizeof(okey) ||
	    snprintf(okey, sizeof(okey), "op.%.*s", (int)(sizeof(okey) - 4), op_id) < 0) {
		free(t);
		fabric_status_msg(st, "sim: no operation %.64s", op_id);
		return NV_E_NOT_FOUND;
	}
	rc = begin(s, t, st);
	if (rc != NV_OK) {
		free(t);
		return rc;
	}
	if (!op_parse(op_id, table_get(t, okey), &o, &due)) {
		fabric_status_msg(st, "sim: no operation %.64s", op_id);
		(void)end(s, t, true);
		return NV_E_NOT_FOUND;
	}
	rc = end(s, t, true);
	if (rc != NV_OK)
		return rc;
	op_message(&o);
	*op = o;
	return NV_OK;
}

const struct oob_backend_ops oob_sim_ops = {
        .name = "sim",
        .open = osim_open,
        .close = osim_close,
        .update = osim_update,
        .version = osim_version,
        .poll = osim_poll,
};
