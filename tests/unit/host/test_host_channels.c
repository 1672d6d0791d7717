// SPDX-License-Identifier: Apache-2.0
// Unit tests for IMEX channel nodes: the major comes from /proc/devices by
// its full name, nodes are made through the ops seam, wrong ones replaced.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

#include "host_fixture.h"

static unsigned made, last_major;

/* Records the call and leaves a regular file where the node would be. */
static enum nv_err fake_mknod(struct host *h, const char *path, unsigned major, unsigned minor,
                              unsigned mode)
{
	(void)h;
	(void)minor;
	assert_int_equal(mode, 0666);
	fx_write(path, "", 0666);
	made++;
	last_major = major;
	return NV_OK;
}

static const struct host_ops fake_ops = {
        .name = "test",
        .run = NULL,
        .mknod_chr = fake_mknod,
};

static const char devices[] = "Character devices:\n195 nvidia\n235 nvidia-caps\n"
                              "236 nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n";

static void test_host_channels_ensure_uses_class_major(void **state)
{
	struct host_ops ops = fake_ops;
	unsigned created;
	struct fx x;

	(void)state;
	ops.run = host_real_ops.run;
	fx_init(&x, &ops);
	made = 0;
	assert_int_equal(host_channels_ensure(&x.h, 4, &created), NV_E_NOT_FOUND);
	fx_file(&x, "proc/devices", "Character devices:\n195 nvidia\n235 nvidia-caps\n");
	assert_int_equal(host_channels_ensure(&x.h, 4, &created), NV_E_NOT_FOUND);
	assert_non_null(strstr(x.h.err, "nvidia-caps-imex-channels"));
	fx_file(&x, "proc/devices", devices);
	assert_int_equal(host_channels_ensure(&x.h, 4, &created), NV_OK);
	assert_int_equal(created, 4);
	assert_int_equal(made, 4);
	assert_int_equal(last_major, 236);
	assert_int_equal(host_channels_ensure(&x.h, 0, &created), NV_OK);
	assert_int_equal(created, 0);
	fx_clear(&x);
}

static void test_host_channels_ensure_real_nodes(void **state)
{
	char p[700];
	unsigned created;
	struct stat st;
	struct fx x;

	(void)state;
	if (geteuid() != 0)
		skip();
	fx_init(&x, NULL);
	fx_file(&x, "proc/devices", devices);
	assert_int_equal(host_channels_ensure(&x.h, 2, &created), NV_OK);
	assert_int_equal(created, 2);
	assert_int_equal(host_channels_ensure(&x.h, 2, &created), NV_OK);
	assert_int_equal(created, 0);
	/* After a reload the class may get another major: nodes are remade. */
	fx_file(&x, "proc/devices", "Character devices:\n240 nvidia-caps-imex-channels\n");
	assert_int_equal(host_channels_ensure(&x.h, 2, &created), NV_OK);
	assert_int_equal(created, 2);
	snprintf(p, sizeof(p), "%s/dev/nvidia-caps-imex-channels/channel1", x.root);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(major(st.st_rdev), 240);
	assert_int_equal(minor(st.st_rdev), 1);
	assert_int_equal(st.st_mode & 0777, 0666);
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_channels_ensure_uses_class_major),
	        cmocka_unit_test(test_host_channels_ensure_real_nodes),
	};
	return cmocka_run_group_tests_name("agent/host_channels", tests, NULL, NULL);
}
