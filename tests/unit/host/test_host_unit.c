// SPDX-License-Identifier: Apache-2.0
// Unit tests for host systemd units: the show parser and the reconcile
// rules (host Fabric Manager off on NVL72, or reported when not allowed).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"

#define FM "nvidia-fabricmanager.service"

static const char systemctl_sh[] =
        "echo \"$*\" >> \"$R/calls\"\n"
        "f=\"$R/units/$3\"; [ \"$1\" = show ] && f=\"$R/units/$5\"\n"
        "case \"$1\" in\n"
        "show) cat \"$f\" 2>/dev/null || printf 'LoadState=not-found\\nActiveState=inactive\\n"
        "UnitFileState=\\n';;\n"
        "stop) sed -i 's/^ActiveState=.*/ActiveState=inactive/' \"$f\";;\n"
        "disable) sed -i 's/^UnitFileState=.*/UnitFileState=disabled/' \"$f\";;\n"
        "mask) sed -i 's/^LoadState=.*/LoadState=masked/; "
        "s/^UnitFileState=.*/UnitFileState=masked/'"
        " \"$f\";;\n"
        "*) exit 1;;\n"
        "esac";

static void test_agent_unit_show_parse_states(void **state)
{
	struct host_unit_state s;
	static const char a[] = "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n";
	static const char m[] = "LoadState=masked\nActiveState=inactive\nUnitFileState=masked\n";
	static const char n[] = "ActiveState=inactive\nLoadState=not-found\nUnitFileState=\n";

	(void)state;
	assert_int_equal(host_unit_show_parse(a, sizeof(a) - 1, &s), NV_OK);
	assert_int_equal(s.active, HOST_UNIT_ACTIVE);
	assert_true(s.enabled);
	assert_false(s.masked);
	assert_int_equal(host_unit_show_parse(m, sizeof(m) - 1, &s), NV_OK);
	assert_int_equal(s.active, HOST_UNIT_INACTIVE);
	assert_true(s.masked);
	assert_int_equal(host_unit_show_parse(n, sizeof(n) - 1, &s), NV_OK);
	assert_int_equal(s.active, HOST_UNIT_NOT_FOUND);
	assert_int_equal(host_unit_show_parse("", 0, &s), NV_E_PARSE);
	assert_int_equal(host_unit_show_parse("garbage\n", 8, &s), NV_E_PARSE);
}

static void test_host_unit_reconcile_masks_fm(void **state)
{
	struct host_unit_state s;
	bool changed;
	struct fx x;
	char *calls;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_SYSTEMCTL, systemctl_sh);
	fx_file(&x, "units/" FM, "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n");
	assert_int_equal(host_unit_reconcile(&x.h, FM, HOST_UNIT_WANT_MASKED, false, &changed),
	                 NV_E_STATE);
	assert_false(changed);
	assert_non_null(strstr(x.h.err, "policy does not allow"));
	assert_int_equal(host_unit_reconcile(&x.h, FM, HOST_UNIT_WANT_MASKED, true, &changed),
	                 NV_OK);
	assert_true(changed);
	assert_int_equal(host_unit_query(&x.h, FM, &s), NV_OK);
	assert_true(s.masked);
	assert_int_equal(s.active, HOST_UNIT_INACTIVE);
	assert_int_equal(host_unit_reconcile(&x.h, FM, HOST_UNIT_WANT_MASKED, true, &changed),
	                 NV_OK);
	assert_false(changed);
	calls = fx_slurp(&x, "calls");
	assert_non_null(strstr(calls, "stop -- " FM "\ndisable -- " FM "\nmask -- " FM "\n"));
	free(calls);
	fx_clear(&x);
}

static void test_host_unit_reconcile_absent_unit(void **state)
{
	bool changed = true;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_SYSTEMCTL, systemctl_sh);
	assert_int_equal(host_unit_reconcile(&x.h, FM, HOST_UNIT_WANT_MASKED, true, &changed),
	                 NV_OK);
	assert_false(changed);
	assert_int_equal(host_unit_reconcile(&x.h, FM, HOST_UNIT_WANT_RUNNING, true, &changed),
	                 NV_E_NOT_FOUND);
	assert_int_equal(
	        host_unit_reconcile(&x.h, "bad/unit", HOST_UNIT_WANT_MASKED, true, &changed),
	        NV_E_INVAL);
	assert_int_equal(host_unit_reconcile(&x.h, "-evil", HOST_UNIT_WANT_MASKED, true, &changed),
	                 NV_E_INVAL);
	fx_clear(&x);
}

static void test_host_unit_query_tool_fails(void **state)
{
	struct host_unit_state s;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_script(&x, FX_SYSTEMCTL, "echo 'Failed to connect to bus' >&2; exit 1");
	assert_int_equal(host_unit_query(&x.h, FM, &s), NV_E_IO);
	assert_non_null(strstr(x.h.err, "Failed to connect to bus"));
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_unit_show_parse_states),
	        cmocka_unit_test(test_host_unit_reconcile_masks_fm),
	        cmocka_unit_test(test_host_unit_reconcile_absent_unit),
	        cmocka_unit_test(test_host_unit_query_tool_fails),
	};
	return cmocka_run_group_tests_name("agent/host_unit", tests, NULL, NULL);
}
