// SPDX-License-Identifier: Apache-2.0
// The simulator backend on a temporary simulated rack: a partition change
// shows in progress first, then moves the member GPUs (and only them) to
// the new clique; updates, deletes, overlaps and restarts behave as on NMX-M.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

#define TRAYS 4

extern char **environ;

struct rack {
	char root[256];
};

/* The rack the way `simctl create` writes it: the real tool when it has
 * been built, else the same files written here. */
static bool simctl_create(const char *root)
{
	const char *tool = "build/sim/bin/simctl";
	char *argv[] = {(char *)tool,      (char *)"create", (char *)root,
	                (char *)"--trays", (char *)"4",      NULL};
	int status = 0;
	pid_t pid;
	posix_spawn_file_actions_t fa;

	if (access(tool, X_OK) != 0)
		return false;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	bool ok = posix_spawn(&pid, tool, &fa, NULL, argv, environ) == 0 &&
	          waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	posix_spawn_file_actions_destroy(&fa);
	return ok;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void rack_by_hand(const char *root)
{
	static const unsigned module_of[4] = {2, 1, 4, 3};
	char p[512], text[512];

	for (unsigned t = 1; t <= TRAYS; t++) {
		snprintf(p, sizeof(p), "%s/tray-%02u", root, t);
		assert_int_equal(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/tray-%02u/gpu", root, t);
		assert_int_equal(mkdir(p, 0755), 0);
		for (unsigned g = 0; g < 4; g++) {
			snprintf(text, sizeof(text),
			         "uuid=GPU-%08x-1d3a-4c8e-9a71-0f5d2c3b%04x\nstate=3\nstatus=0\n"
			         "cluster=3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3\nclique=32766\n"
			         "health_mask=0x1AA\nsummary=1\nchassis=1821124000042\nslot=%"
			         "u\ntray=%u\n"
			         "host_id=1\npeer_type=2\nmodule_id=%u\n",
			         0x6b0e0000u + t, g, t, t, module_of[g]);
			snprintf(p, sizeof(p), "%s/tray-%02u/gpu/%u", root, t, g);
			write_file(p, text);
		}
	}
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct rack *r = calloc(1, sizeof(*r));

	snprintf(r->root, sizeof(r->root), "/tmp/nvl72-fabric-sim-XXXXXX");
	assert_non_null(mkdtemp(r->root));
	if (!simctl_create(r->root))
		rack_by_hand(r->root);
	*state = r;
	return 0;
}

static int teardown(void **state)
{
	struct rack *r = *state;

	nftw(r->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(r);
	return 0;
}

static struct fabric_backend *open_sim(const struct rack *r, long delay_ms)
{
	struct fabric_config c;
	struct fabric_backend *b = NULL;
	struct fabric_status st;

	fabric_config_init(&c);
	snprintf(c.backend, sizeof(c.backend), "sim");
	snprintf(c.sim_root, sizeof(c.sim_root), "%s", r->root);
	c.sim_delay_ms = delay_ms;
	c.poll_interval_ms = 10;
	c.poll_max_interval_ms = 50;
	c.op_deadline_ms = 5000;
	assert_int_equal(fabric_backend_new(&c, &b, &st), NV_OK);
	fabric_config_clear(&c);
	return b;
}

/* A key of the GPU file whose module_id is module, on a tray. */
static long gpu_key(const struct rack *r, unsigned tray, unsigned module, const char *key)
{
	char p[512], line[256], want[32];
	long val = -1;
	bool mine = false;

	snprintf(want, sizeof(want), "module_id=%u", module);
	for (unsigned g = 0; g < 4 && !mine; g++) {
		snprintf(p, sizeof(p), "%s/tray-%02u/gpu/%u", r->root, tray, g);
		FILE *f = fopen(p, "r");
		assert_non_null(f);
		val = -1;
		while (fgets(line, sizeof(line), f) != NULL) {
			line[strcspn(line, "\n")] = '\0';
			if (strcmp(line, want) == 0)
				mine = true;
			if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == '=')
				val = strtol(line + strlen(key) + 1, NULL, 10);
		}
		fclose(f);
	}
	assert_true(mine);
	return val;
}

static void assert_tray(const struct rack *r, unsigned tray, long state, long clique)
{
	for (unsigned m = 1; m <= 4; m++) {
		assert_int_equal(gpu_key(r, tray, m, "state"), state);
		assert_int_equal(gpu_key(r, tray, m, "clique"), clique);
	}
}

static void spec_of(struct fabric_partition_spec *sp, const char *name, unsigned a, unsigned b)
{
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "%s", name);
	snprintf(sp->rack, sizeof(sp->rack), "r01");
	assert_int_equal(fabric_spec_add_tray(sp, a, 0, 0), NV_OK);
	if (b != 0)
		assert_int_equal(fabric_spec_add_tray(sp, b, 0, 0), NV_OK);
}

static void read_whole(const char *path, char *out, size_t outsz)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, outsz - 1, f);
	out[n] = '\0';
	fclose(f);
}

static void test_sim_create_moves_members_only(void **state)
{
	struct rack *r = *state;
	struct fabric_backend *b = open_sim(r, 300);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *p = malloc(sizeof(*p));
	struct fabric_status st;
	struct fabric_op op, seen;
	char before[4096], after[4096], path[512], clique[FABRIC_CLIQUE_LEN];

	snprintf(path, sizeof(path), "%s/tray-03/gpu/0", r->root);
	read_whole(path, before, sizeof(before));
	spec_of(sp, "canary", 1, 2);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_IN_PROGRESS);
	/* the operator sees the change in progress before it completes */
	assert_tray(r, 1, 2, 32766);
	assert_tray(r, 2, 2, 32766);
	assert_int_equal(fabric_op_poll(b, op.id, &seen, &st), NV_OK);
	assert_int_equal(seen.state, FABRIC_OP_IN_PROGRESS);

	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_COMPLETED);
	assert_int_equal(fabric_partition_get(b, op.partition_id, p, &st), NV_OK);
	assert_int_equal(p->partition_id, 1);
	assert_int_equal(p->n_gpus, 8);
	assert_int_equal(p->health, FABRIC_HEALTH_HEALTHY);
	assert_tray(r, 1, 3, (long)p->partition_id);
	assert_tray(r, 2, 3, (long)p->partition_id);
	assert_tray(r, 3, 3, 32766);
	assert_tray(r, 4, 3, 32766);
	read_whole(path, after, sizeof(after));
	assert_string_equal(before, after);
	/* the other keys of a member's file survive */
	assert_int_equal(gpu_key(r, 1, 2, "slot"), 1);
	assert_int_equal(gpu_key(r, 1, 2, "module_id"), 2);
	assert_int_equal(fabric_partition_clique(p, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3", clique),
	                 NV_OK);
	assert_string_equal(clique, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.1");
	fabric_backend_free(b);
	free(sp);
	free(p);
}

static void test_sim_update_and_delete(void **state)
{
	struct rack *r = *state;
	struct fabric_backend *b = open_sim(r, 50);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *all = NULL;
	struct fabric_status st;
	struct fabric_op op, op2;
	size_t n = 0;

	spec_of(sp, "tenant-a", 1, 2);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	char id[FABRIC_ID_LEN];
	snprintf(id, sizeof(id), "%s", op.partition_id);

	spec_of(sp, "tenant-a", 2, 3);
	assert_int_equal(fabric_partition_update(b, id, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_partition_update(b, id, sp, &op2, &st), NV_E_BUSY);
	assert_tray(r, 1, 2, 1);
	assert_tray(r, 3, 2, 32766);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_tray(r, 1, 3, 32766);
	assert_tray(r, 2, 3, 1);
	assert_tray(r, 3, 3, 1);
	assert_tray(r, 4, 3, 32766);

	assert_int_equal(fabric_partition_delete(b, id, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	for (unsigned t = 1; t <= TRAYS; t++)
		assert_tray(r, t, 3, 32766);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_OK);
	assert_int_equal(n, 0);
	free(all);
	assert_int_equal(fabric_partition_delete(b, id, &op, &st), NV_E_NOT_FOUND);
	fabric_backend_free(b);
	free(sp);
}

static void test_sim_rejects_overlap_duplicates_and_unknown_trays(void **state)
{
	struct rack *r = *state;
	struct fabric_backend *b = open_sim(r, 0);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_status st;
	struct fabric_op op;

	spec_of(sp, "a", 1, 2);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	spec_of(sp, "b", 2, 3);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_E_CONFLICT);
	assert_non_null(strstr(st.message, "tray 2"));
	spec_of(sp, "a", 3, 0);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_E_EXISTS);
	spec_of(sp, "c", 9, 0);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_E_NOT_FOUND);
	assert_tray(r, 3, 3, 32766);
	assert_tray(r, 4, 3, 32766);
	assert_int_equal(fabric_op_poll(b, "op-999", &op, &st), NV_E_NOT_FOUND);
	assert_int_equal(fabric_op_poll(b, "nonsense", &op, &st), NV_E_NOT_FOUND);
	fabric_backend_free(b);
	free(sp);
}

/* A change finishes even when the process that asked for it went away. */
static void test_sim_change_completes_without_its_poller(void **state)
{
	struct rack *r = *state;
	struct fabric_backend *b = open_sim(r, 100);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *all = NULL;
	struct fabric_status st;
	struct fabric_op op;
	size_t n = 0;

	spec_of(sp, "restart", 4, 0);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	fabric_backend_free(b);
	time_sleep_ms(150);
	b = open_sim(r, 100);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_OK);
	assert_int_equal(n, 1);
	assert_string_equal(all[0].name, "restart");
	assert_int_equal(all[0].health, FABRIC_HEALTH_HEALTHY);
	assert_tray(r, 4, 3, (long)all[0].partition_id);
	free(all);
	assert_int_equal(fabric_op_poll(b, op.id, &op, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_COMPLETED);
	fabric_backend_free(b);
	free(sp);
}

/* NVML's v1 fabric info, as the fake library lays it out. */
struct nvml_fabric_v1 {
	unsigned char cluster_uuid[16];
	int status;
	unsigned int clique_id;
	unsigned char state;
};

/* The simulator's NVML library, when built, reads what the backend wrote. */
static void test_sim_fake_nvml_sees_the_new_clique(void **state)
{
	struct rack *r = *state;
	void *lib = dlopen("build/sim/lib/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void), (*shut)(void), (*count)(unsigned *), (*handle)(unsigned, void **);
	int (*fabric)(void *, struct nvml_fabric_v1 *);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_status st;
	struct fabric_op op;
	char tray[512];

	if (lib == NULL) {
		free(sp);
		skip();
	}
	*(void **)&init = dlsym(lib, "nvmlInit_v2");
	*(void **)&shut = dlsym(lib, "nvmlShutdown");
	*(void **)&count = dlsym(lib, "nvmlDeviceGetCount_v2");
	*(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&fabric = dlsym(lib, "nvmlDeviceGetGpuFabricInfo");
	assert_true(init && shut && count && handle && fabric);

	struct fabric_backend *b = open_sim(r, 0);
	spec_of(sp, "nvml", 2, 0);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	for (unsigned t = 1; t <= 3; t++) {
		unsigned n = 0;
		snprintf(tray, sizeof(tray), "%s/tray-%02u", r->root, t);
		setenv("NVL72_SIM_ROOT", tray, 1);
		assert_int_equal(init(), 0);
		assert_int_equal(count(&n), 0);
		assert_int_equal(n, 4);
		for (unsigned g = 0; g < n; g++) {
			void *dev = NULL;
			struct nvml_fabric_v1 f;
			assert_int_equal(handle(g, &dev), 0);
			assert_int_equal(fabric(dev, &f), 0);
			assert_int_equal(f.state, 3);
			assert_int_equal(f.clique_id, t == 2 ? 1u : 32766u);
		}
		shut();
	}
	unsetenv("NVL72_SIM_ROOT");
	fabric_backend_free(b);
	dlclose(lib);
	free(sp);
}

static void test_sim_open_needs_a_rack_folder(void **state)
{
	(void)state;
	struct fabric_config c;
	struct fabric_backend *b = NULL;
	struct fabric_status st;

	fabric_config_init(&c);
	snprintf(c.backend, sizeof(c.backend), "sim");
	snprintf(c.sim_root, sizeof(c.sim_root), "/nonexistent/rack");
	assert_int_equal(fabric_backend_new(&c, &b, &st), NV_E_NOT_FOUND);
	assert_null(b);
	assert_non_null(strstr(st.message, "not a folder"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_sim_create_moves_members_only, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_sim_update_and_delete, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_sim_rejects_overlap_duplicates_and_unknown_trays, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_sim_change_completes_without_its_poller, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_sim_fake_nvml_sees_the_new_clique, setup,
	                                        teardown),
	        cmocka_unit_test(test_sim_open_needs_a_rack_folder),
	};
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
