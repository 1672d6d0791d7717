// SPDX-License-Identifier: Apache-2.0
// Unit tests for the flag engine: defaults, environment below argv, every
// kind and its bounds, the actions, copies and borrowed strings, and the
// --help and Markdown spellings of both layouts.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/base.h"
#include "nvl72/flags.h"

struct cfg {
	bool on;
	int workers;
	int64_t wait_ms;
	char *name;
	char *mode;
	char *args[3 + 1];
};

#define F(field) offsetof(struct cfg, field)

static const struct flag rows[] = {
        {"on", F(on), &flag_bool, "false", 0, 1, NULL, "switch"},
        {"workers", F(workers), &flag_int, "2", 1, 64, NULL, "how many"},
        {"wait", F(wait_ms), &flag_duration, "2m", 100, 24 * 3600 * 1000LL, "T_WAIT", "how long"},
        {"name", F(name), &flag_string, "", 0, 0, "T_NAME", "a name"},
        {"mode", F(mode), FLAG_ENUM("fast|slow"), "fast", 0, 0, NULL, "the mode"},
        {"arg", F(args), &flag_args, "", 0, 3, NULL, "one argument"},
};

static const struct flag_style typed = {
        .layout = FLAG_LAYOUT_TYPED,
        .units = FLAG_UNITS_SECONDS,
        .upper = false,
        .md_head = "| flag | type | default | range | env | meaning |\n|---|---|---|---|---|---|\n",
        .md_range_sep = "..",
        .md_no_default = "`\"\"`",
};

static const struct flag_style metavar = {
        .layout = FLAG_LAYOUT_METAVAR,
        .units = FLAG_UNITS_LARGEST,
        .upper = true,
        .md_head = "| flag | type | default | bounds | environment | meaning |\n"
                   "|---|---|---|---|---|---|\n",
        .md_range_sep = " to ",
        .md_no_default = "",
};

static const struct flag_set copies = {rows, ARRAY_LEN(rows), true, &metavar};

struct run {
	struct cfg c;
	enum flags_action act;
	char err[256];
	enum nv_err rc;
};

static void run(struct run *r, const char *const *argv_c, const char *const *envp_c)
{
	char *argv[16] = {0}, *envp[8] = {0};
	int argc = 0, envc = 0;

	while (argv_c[argc] != NULL)
		argv[argc] = xstrdup(argv_c[argc]), argc++;
	while (envp_c != NULL && envp_c[envc] != NULL)
		envp[envc] = xstrdup(envp_c[envc]), envc++;
	memset(&r->c, 0, sizeof(r->c));
	r->err[0] = '\0';
	assert_int_equal(flags_defaults(&copies, &r->c, r->err, sizeof(r->err)), NV_OK);
	r->rc = flags_parse(&copies, &r->c, argc, argv, envp_c ? envp : NULL, &r->act, r->err,
	                    sizeof(r->err));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	for (int i = 0; i < envc; i++)
		free(envp[i]);
}

static void test_flags_parse_defaults(void **state)
{
	struct run r;

	(void)state;
	run(&r, (const char *[]){"p", NULL}, NULL);
	assert_int_equal(r.rc, NV_OK);
	assert_int_equal(r.act, FLAGS_RUN);
	assert_false(r.c.on);
	assert_int_equal(r.c.workers, 2);
	assert_int_equal(r.c.wait_ms, 120000);
	assert_string_equal(r.c.name, "");
	assert_string_equal(r.c.mode, "fast");
	assert_null(r.c.args[0]);
	flags_clear(&copies, &r.c);
	assert_null(r.c.name);
	assert_null(r.c.mode);
}

static void test_flags_parse_values_and_env(void **state)
{
	const char *argv[] = {"p",     "--on", "--workers", "8",      "--wait=90s", "--mode=slow",
	                      "--arg", "one",  "--arg=two", "--name", "flag",       NULL};
	const char *envp[] = {"T_NAME=env", "T_WAIT=", "T_WAITX=1s", "T_WAIT=5s", NULL};
	struct run r;

	(void)state;
	run(&r, argv, envp);
	assert_int_equal(r.rc, NV_OK);
	assert_true(r.c.on);
	assert_int_equal(r.c.workers, 8);
	assert_int_equal(r.c.wait_ms, 90000);
	assert_string_equal(r.c.name, "flag");
	assert_string_equal(r.c.mode, "slow");
	assert_string_equal(r.c.args[0], "one");
	assert_string_equal(r.c.args[1], "two");
	assert_null(r.c.args[2]);
	flags_clear(&copies, &r.c);
	assert_null(r.c.args[0]);

	/* The first exact match, as getenv; an empty value counts as unset. */
	run(&r, (const char *[]){"p", NULL}, envp);
	assert_int_equal(r.rc, NV_OK);
	assert_string_equal(r.c.name, "env");
	assert_int_equal(r.c.wait_ms, 120000);
	flags_clear(&copies, &r.c);
}

static void test_flags_parse_errors_say_why(void **state)
{
	static const struct {
		const char *argv[6];
		const char *msg;
	} cases[] = {
	        {{"p", "--workers=0", NULL}, "--workers: bad value \"0\" (value out of range)"},
	        {{"p", "--on=maybe", NULL}, "--on: bad value \"maybe\""},
	        {{"p", "--wait=soon", NULL}, "--wait: \"soon\" is not a duration (like 500ms"},
	        {{"p", "--wait=1ms", NULL}, "--wait: 1ms is outside [100 ms, 86400000 ms]"},
	        {{"p", "--mode=odd", NULL}, "--mode: \"odd\" is not one of fast|slow"},
	        {{"p", "--arg=1", "--arg=2", "--arg=3", "--arg=4", NULL},
	         "--arg: at most 3 arguments of 255 bytes"},
	        {{"p", "--nope=1", NULL}, "unknown flag --nope (see --help)"},
	        {{"p", "stray", NULL}, "unexpected argument \"stray\" (flags start with --)"},
	        {{"p", "--workers", NULL}, "--workers needs a value"},
	};
	struct run r;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		run(&r, cases[i].argv, NULL);
		assert_int_equal(r.rc, NV_E_CONFIG);
		if (strstr(r.err, cases[i].msg) == NULL)
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, r.err, cases[i].msg);
		flags_clear(&copies, &r.c);
	}
	run(&r, (const char *[]){"p", NULL}, (const char *[]){"T_WAIT=later", NULL});
	assert_int_equal(r.rc, NV_E_CONFIG);
	assert_non_null(strstr(r.err, "$T_WAIT: \"later\" is not a duration"));
	flags_clear(&copies, &r.c);
}

static void test_flags_parse_value_too_long(void **state)
{
	static char arg[FLAG_VALUE_MAX + 16];
	struct run r;

	(void)state;
	snprintf(arg, sizeof(arg), "--name=");
	memset(arg + 7, 'x', FLAG_VALUE_MAX + 1);
	run(&r, (const char *[]){"p", arg, NULL}, NULL);
	assert_int_equal(r.rc, NV_E_CONFIG);
	assert_string_equal(r.err, "--name: value longer than 4096 bytes");
	flags_clear(&copies, &r.c);
}

static void test_flags_parse_actions_end_the_parse(void **state)
{
	struct run r;

	(void)state;
	run(&r, (const char *[]){"p", "--workers=3", "--help", "--nope", NULL}, NULL);
	assert_int_equal(r.rc, NV_OK);
	assert_int_equal(r.act, FLAGS_HELP);
	assert_int_equal(r.c.workers, 3);
	flags_clear(&copies, &r.c);
	run(&r, (const char *[]){"p", "-h", NULL}, NULL);
	assert_int_equal(r.act, FLAGS_HELP);
	flags_clear(&copies, &r.c);
	run(&r, (const char *[]){"p", "--help-markdown", NULL}, NULL);
	assert_int_equal(r.act, FLAGS_HELP_MARKDOWN);
	flags_clear(&copies, &r.c);
	run(&r, (const char *[]){"p", "--version", NULL}, NULL);
	assert_int_equal(r.act, FLAGS_VERSION);
	flags_clear(&copies, &r.c);
	/* What comes before the action must still be right. */
	run(&r, (const char *[]){"p", "--nope", "--help", NULL}, NULL);
	assert_int_equal(r.rc, NV_E_CONFIG);
	flags_clear(&copies, &r.c);
}

struct borrowed {
	const char *name;
	int64_t wait_ms;
};

static void test_flags_parse_borrows_without_copy(void **state)
{
	static const struct flag brows[] = {
	        {"name", offsetof(struct borrowed, name), &flag_string, "dflt", 0, 0, "B_NAME",
	         "n"},
	        {"wait", offsetof(struct borrowed, wait_ms), &flag_duration, "1s", 0, 60000, NULL,
	         "w"},
	};
	static const struct flag_set set = {brows, ARRAY_LEN(brows), false, &typed};
	char a0[] = "p", a1[] = "--name=given";
	char *argv[] = {a0, a1, NULL};
	char e0[] = "B_NAME=env";
	char *envp[] = {e0, NULL};
	struct borrowed b = {0};
	enum flags_action act;
	char err[128];

	(void)state;
	assert_int_equal(flags_defaults(&set, &b, err, sizeof(err)), NV_OK);
	assert_string_equal(b.name, "dflt");
	assert_int_equal(flags_parse(&set, &b, 1, argv, envp, &act, err, sizeof(err)), NV_OK);
	assert_ptr_equal(b.name, e0 + strlen("B_NAME="));
	assert_int_equal(flags_parse(&set, &b, 2, argv, envp, &act, err, sizeof(err)), NV_OK);
	assert_ptr_equal(b.name, a1 + strlen("--name="));
	flags_clear(&set, &b);
	assert_ptr_equal(b.name, a1 + strlen("--name="));
}

static char *render(const struct flag_style *style, bool md)
{
	struct flag_set set = {rows, ARRAY_LEN(rows), true, style};
	struct buf b;

	buf_init(&b, 1 << 16);
	assert_int_equal(md ? flags_markdown(&set, &b) : flags_help(&set, &b), NV_OK);
	return buf_take(&b);
}

static void test_flags_help_typed(void **state)
{
	char *h = render(&typed, false);

	(void)state;
	assert_non_null(strstr(h, "  --on bool (default \"false\")\n      switch\n"));
	assert_non_null(
	        strstr(h, "  --workers int (default \"2\", range 1..64)\n      how many\n"));
	assert_non_null(strstr(h, "  --wait duration (default \"2m\", range 100ms..86400000ms, "
	                          "env T_WAIT)\n      how long\n"));
	assert_non_null(strstr(h, "  --name string (default \"\", env T_NAME)\n"));
	assert_non_null(strstr(h, "  --mode fast|slow (default \"fast\")\n"));
	free(h);
}

static void test_flags_help_metavar(void **state)
{
	char *h = render(&metavar, false);

	(void)state;
	assert_non_null(strstr(h, "  --on=BOOL\n      switch (default false)\n"));
	assert_non_null(strstr(h, "  --workers=INT\n      how many (default 2) [1..64]\n"));
	assert_non_null(strstr(h, "  --wait=DURATION\n      how long (default 2m) [100ms..24h] "
	                          "[$T_WAIT]\n"));
	assert_non_null(strstr(h, "  --name=STRING\n      a name [$T_NAME]\n"));
	assert_non_null(strstr(h, "  --mode=fast|slow\n      the mode (default fast)\n"));
	assert_non_null(strstr(h, "  --arg=ARG\n      one argument\n"));
	free(h);
}

static void test_flags_markdown_both_styles(void **state)
{
	char *t = render(&typed, true), *m = render(&metavar, true);

	(void)state;
	assert_true(str_has_prefix(t, typed.md_head));
	assert_non_null(strstr(t, "| `--workers` | int | `2` | 1..64 |  | how many |\n"));
	assert_non_null(strstr(t, "| `--name` | string | `\"\"` |  | `T_NAME` | a name |\n"));
	assert_true(str_has_prefix(m, metavar.md_head));
	assert_non_null(strstr(m, "| `--wait` | DURATION | `2m` | 100ms to 24h | `T_WAIT` |"));
	assert_non_null(strstr(m, "| `--mode` | ENUM | `fast` | fast/slow |  | the mode |\n"));
	assert_non_null(
	        strstr(m, "| `--arg` | ARG |  | repeatable, up to 3 |  | one argument |\n"));
	free(t);
	free(m);
}

static void test_flags_units(void **state)
{
	static const struct flag d[] = {
	        {"a", 0, &flag_duration, "1s", 0, 24 * 3600 * 1000LL, NULL, "h"},
	        {"b", 0, &flag_duration, "1s", 2000, 600000, NULL, "h"},
	        {"c", 0, &flag_duration, "1s", 200, 60000, NULL, "h"},
	};
	struct flag_set seconds = {d, ARRAY_LEN(d), false, &typed};
	struct flag_set largest = {d, ARRAY_LEN(d), false, &metavar};
	struct buf b;

	(void)state;
	buf_init(&b, 1 << 12);
	assert_int_equal(flags_help(&seconds, &b), NV_OK);
	assert_non_null(strstr(buf_str(&b), "range 0s..24h"));
	assert_non_null(strstr(buf_str(&b), "range 2s..600s"));
	assert_non_null(strstr(buf_str(&b), "range 200ms..60000ms"));
	buf_reset(&b);
	assert_int_equal(flags_help(&largest, &b), NV_OK);
	assert_non_null(strstr(buf_str(&b), "[0s..24h]"));
	assert_non_null(strstr(buf_str(&b), "[2s..10m]"));
	assert_non_null(strstr(buf_str(&b), "[200ms..1m]"));
	buf_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_flags_parse_defaults),
	        cmocka_unit_test(test_flags_parse_values_and_env),
	        cmocka_unit_test(test_flags_parse_errors_say_why),
	        cmocka_unit_test(test_flags_parse_value_too_long),
	        cmocka_unit_test(test_flags_parse_actions_end_the_parse),
	        cmocka_unit_test(test_flags_parse_borrows_without_copy),
	        cmocka_unit_test(test_flags_help_typed),
	        cmocka_unit_test(test_flags_help_metavar),
	        cmocka_unit_test(test_flags_markdown_both_styles),
	        cmocka_unit_test(test_flags_units),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
