// SPDX-License-Identifier: Apache-2.0
// Unit tests for the logger: levels, per-component debug, one line per
// event, and the JSON form.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/log.h"

static char *captured;
static size_t captured_len;
static FILE *stream;

static int setup(void **state)
{
	(void)state;
	stream = open_memstream(&captured, &captured_len);
	log_set_stream(stream);
	log_set_level(LOG_LVL_INFO);
	log_set_format(LOG_FMT_TEXT);
	log_set_debug("");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	log_set_stream(NULL);
	fclose(stream);
	free(captured);
	captured = NULL;
	return 0;
}

static int evaluated;
static int count_eval(void)
{
	return ++evaluated;
}

static void test_log_level_filters_before_evaluating(void **state)
{
	(void)state;
	evaluated = 0;
	log_debug("kube", "hidden", "n=%d", count_eval());
	fflush(stream);
	assert_int_equal(evaluated, 0);
	assert_int_equal(captured_len, 0);
	log_info("kube", "shown", "n=%d", count_eval());
	fflush(stream);
	assert_int_equal(evaluated, 1);
	assert_non_null(strstr(captured, " info  kube: shown n=1\n"));
}

static void test_log_set_debug_per_component(void **state)
{
	(void)state;
	log_set_debug("agent,imex");
	assert_true(log_enabled(LOG_LVL_DEBUG, "agent"));
	assert_true(log_enabled(LOG_LVL_DEBUG, "imex"));
	assert_false(log_enabled(LOG_LVL_DEBUG, "age"));
	assert_false(log_enabled(LOG_LVL_DEBUG, "kube"));
	log_set_debug("*");
	assert_true(log_enabled(LOG_LVL_DEBUG, "kube"));
	log_set_debug("");
	assert_false(log_enabled(LOG_LVL_DEBUG, "kube"));
}

static void test_log_write_one_line_per_event(void **state)
{
	(void)state;
	log_warn("agent", "imex said\nsomething", "node=%s err=\"%s\"", "tray-01", "a\nb");
	fflush(stream);
	assert_non_null(strstr(captured, "imex said\\nsomething node=tray-01 err=\"a\\nb\""));
	assert_int_equal(strchr(captured, '\n') - captured, (long)captured_len - 1);
}

static void test_log_write_json_fields(void **state)
{
	(void)state;
	log_set_format(LOG_FMT_JSON);
	log_error("rack", "say \"hi\"", "rack=%s reason=\"%s\" lone", "r1", "two words");
	fflush(stream);
	assert_non_null(strstr(captured, "\"level\":\"error\",\"comp\":\"rack\","
	                                 "\"msg\":\"say \\\"hi\\\"\",\"rack\":\"r1\","
	                                 "\"reason\":\"two words\",\"extra\":\"lone\"}\n"));
}

static void test_log_level_parse_names(void **state)
{
	(void)state;
	enum log_level l;
	assert_true(log_level_parse("debug", &l));
	assert_int_equal(l, LOG_LVL_DEBUG);
	assert_false(log_level_parse("verbose", &l));
	assert_string_equal(log_level_name(LOG_LVL_WARN), "warn");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_log_level_filters_before_evaluating, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_log_set_debug_per_component, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_log_write_one_line_per_event, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_log_write_json_fields, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_log_level_parse_names, setup, teardown),
	};
	return cmocka_run_group_tests_name("base/log", tests, NULL, NULL);
}
