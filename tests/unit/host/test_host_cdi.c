// SPDX-License-Identifier: Apache-2.0
// Unit tests for the CDI specs of prepared IMEX channel claims: the
// rendered spec's fields, the atomic write into a real folder, removal,
// and the UIDs refused as device names.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvl72/base.h"
#include "nvl72/host.h"
#include "nvl72/json.h"

#define UID "5f0c3e1a-9b2d-4c61-8e7f-2a4b6c8d0e13"

static json_t *render(const unsigned *ch, size_t n)
{
	struct buf b;
	json_t *o = NULL;

	buf_init(&b, 1 << 20);
	assert_int_equal(host_cdi_render(UID, 234, ch, n, &b), NV_OK);
	assert_int_equal(jx_loadb(buf_str(&b), b.len, NULL, &o, NULL), NV_OK);
	buf_clear(&b);
	return o;
}

static void test_host_cdi_render_single(void **state)
{
	unsigned ch[] = {0};
	json_t *o = render(ch, 1);
	const json_t *n;

	(void)state;
	assert_string_equal(jx_str_or(o, "cdiVersion", ""), "0.5.0");
	assert_string_equal(jx_str_or(o, "kind", ""), "imex.nvl72.io/channel");
	assert_int_equal(json_array_size(jx_path(o, "devices")), 1);
	assert_string_equal(jx_str_or(o, "devices[0].name", ""), UID);
	assert_int_equal(json_array_size(jx_path(o, "devices[0].containerEdits.deviceNodes")), 1);
	n = jx_path(o, "devices[0].containerEdits.deviceNodes[0]");
	assert_string_equal(jx_str_or(n, "path", ""), "/dev/nvidia-caps-imex-channels/channel0");
	assert_string_equal(jx_str_or(n, "type", ""), "c");
	assert_int_equal(json_integer_value(json_object_get(n, "major")), 234);
	assert_int_equal(json_integer_value(json_object_get(n, "minor")), 0);
	assert_string_equal(jx_str_or(n, "permissions", ""), "rw");
	assert_int_equal(json_integer_value(json_object_get(n, "fileMode")), 0666);
	json_decref(o);
}

static void test_host_cdi_render_all(void **state)
{
	unsigned ch[] = {0, 1, 2, 7};
	json_t *o = render(ch, 4);
	const json_t *n;

	(void)state;
	assert_int_equal(json_array_size(jx_path(o, "devices[0].containerEdits.deviceNodes")), 4);
	n = jx_path(o, "devices[0].containerEdits.deviceNodes[3]");
	assert_string_equal(jx_str_or(n, "path", ""), "/dev/nvidia-caps-imex-channels/channel7");
	assert_int_equal(json_integer_value(json_object_get(n, "minor")), 7);
	json_decref(o);
}

static void test_host_cdi_render_refusals(void **state)
{
	unsigned ch[] = {0};
	struct buf b;

	(void)state;
	buf_init(&b, 1 << 20);
	assert_int_equal(host_cdi_render("", 234, ch, 1, &b), NV_E_INVAL);
	assert_int_equal(host_cdi_render("../../etc/passwd", 234, ch, 1, &b), NV_E_INVAL);
	assert_int_equal(host_cdi_render("a b", 234, ch, 1, &b), NV_E_INVAL);
	assert_int_equal(host_cdi_render(UID, 0, ch, 1, &b), NV_E_INVAL);
	assert_int_equal(host_cdi_render(UID, 234, ch, 0, &b), NV_E_INVAL);
	assert_int_equal(b.len, 0);
	buf_clear(&b);
}

static void test_host_cdi_write_remove(void **state)
{
	char dir[] = "/tmp/nvl72-cdi.XXXXXX", sub[64], path[256];
	struct stat st;
	bool removed = true;
	DIR *d;
	struct dirent *e;
	size_t n = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* The folder is made when missing (/var/run/cdi after a reboot). */
	snprintf(sub, sizeof(sub), "%s/cdi", dir);
	assert_false(host_cdi_exists(sub, UID));
	assert_int_equal(host_cdi_write(sub, UID, "{}\n", 3), NV_OK);
	assert_true(host_cdi_exists(sub, UID));
	assert_int_equal(host_cdi_path(sub, UID, path, sizeof(path)), NV_OK);
	assert_non_null(strstr(path, "/cdi/imex.nvl72.io-" UID ".json"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(st.st_size, 3);
	/* No temp file is left beside it. */
	d = opendir(sub);
	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	assert_int_equal(n, 1);
	assert_int_equal(host_cdi_remove(sub, UID, &removed), NV_OK);
	assert_true(removed);
	assert_false(host_cdi_exists(sub, UID));
	/* Removing what is gone is no error. */
	assert_int_equal(host_cdi_remove(sub, UID, &removed), NV_OK);
	assert_false(removed);
	assert_int_equal(host_cdi_remove(sub, "../x", &removed), NV_E_INVAL);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_cdi_render_single),
	        cmocka_unit_test(test_host_cdi_render_all),
	        cmocka_unit_test(test_host_cdi_render_refusals),
	        cmocka_unit_test(test_host_cdi_write_remove),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
