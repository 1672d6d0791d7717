// SPDX-License-Identifier: Apache-2.0
// The flag engine both binaries configure themselves with: defaults,
// environment and argv parsed into a config struct through its table, and
// the table printed as --help and as the Markdown of the docs.
#include "nvl72/flags.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/parse.h"

#define HOUR_MS (3600 * 1000LL)

const struct flag_type flag_bool = {FLAG_KIND_BOOL, "bool", NULL};
const struct flag_type flag_string = {FLAG_KIND_STRING, "string", NULL};
const struct flag_type flag_int = {FLAG_KIND_INT, "int", NULL};
const struct flag_type flag_duration = {FLAG_KIND_DURATION, "duration", NULL};
const struct flag_type flag_args = {FLAG_KIND_ARGS, "arg", NULL};

static void *field_at(void *cfg, const struct flag *f)
{
	return (char *)cfg + f->offset;
}

static bool is_copy(const struct flag_set *s, const struct flag *f)
{
	return f->type->kind == FLAG_KIND_ARGS ||
	       (s->copy && (f->type->kind == FLAG_KIND_STRING || f->type->kind == FLAG_KIND_ENUM));
}

static bool choice_ok(const char *choices, const char *v)
{
	size_t n = strlen(v);
	const char *p = choices;

	while (n > 0 && p != NULL) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && strncmp(p, v, n) == 0)
			return true;
		p = bar ? bar + 1 : NULL;
	}
	return false;
}

static enum nv_err string_set(const struct flag_set *s, void *field, const char *v,
                              const char *from, char *err, size_t errsz)
{
	if (strlen(v) > FLAG_VALUE_MAX) {
		snprintf(err, errsz, "%s: value longer than %d bytes", from, FLAG_VALUE_MAX);
		return NV_E_CONFIG;
	}
	if (s->copy) {
		char **p = field;
		free(*p);
		*p = xstrdup(v);
	} else {
		*(const char **)field = v;
	}
	return NV_OK;
}

static enum nv_err duration_set(const struct flag *f, void *field, const char *v, const char *from,
                                char *err, size_t errsz)
{
	int64_t ms;

	if (parse_duration_ms(v, &ms) != NV_OK) {
		snprintf(err, errsz, "%s: \"%s\" is not a duration (like 500ms, 10s, 5m)", from, v);
		return NV_E_CONFIG;
	}
	if (ms < f->min || ms > f->max) {
		snprintf(err, errsz, "%s: %s is outside [%lld ms, %lld ms]", from, v,
		         (long long)f->min, (long long)f->max);
		return NV_E_CONFIG;
	}
	*(int64_t *)field = ms;
	return NV_OK;
}

static enum nv_err args_add(const struct flag *f, void *field, const char *v, const char *from,
                            char *err, size_t errsz)
{
	char **items = field;
	size_t n = 0;

	while (n < (size_t)f->max && items[n] != NULL)
		n++;
	if (n >= (size_t)f->max || strlen(v) > FLAG_ARG_MAX) {
		snprintf(err, errsz, "%s: at most %lld arguments of %d bytes", from,
		         (long long)f->max, FLAG_ARG_MAX);
		return NV_E_CONFIG;
	}
	items[n] = xstrdup(v);
	return NV_OK;
}

/* Sets f from v; from names the source ("--tool-timeout", "$NODE_NAME"). */
static enum nv_err value_set(const struct flag_set *s, const struct flag *f, void *cfg,
                             const char *v, const char *from, char *err, size_t errsz)
{
	void *field = field_at(cfg, f);
	int64_t n = 0;
	bool b = false;
	enum nv_err rc = NV_E_INTERNAL;

	switch (f->type->kind) {
	case FLAG_KIND_BOOL:
		if ((rc = parse_bool(v, &b)) == NV_OK)
			*(bool *)field = b;
		break;
	case FLAG_KIND_INT:
		if ((rc = parse_i64(v, f->min, f->max, &n)) == NV_OK)
			*(int *)field = (int)n;
		break;
	case FLAG_KIND_DURATION:
		return duration_set(f, field, v, from, err, errsz);
	case FLAG_KIND_ENUM:
		if (!choice_ok(f->type->choices, v)) {
			snprintf(err, errsz, "%s: \"%s\" is not one of %s", from, v,
			         f->type->choices);
			return NV_E_CONFIG;
		}
		/* fall through */
	case FLAG_KIND_STRING:
		return string_set(s, field, v, from, err, errsz);
	case FLAG_KIND_ARGS:
		return args_add(f, field, v, from, err, errsz);
	}
	if (rc != NV_OK) {
		snprintf(err, errsz, "%s: bad value \"%s\" (%s)", from, v, nv_err_str(rc));
		return NV_E_CONFIG;
	}
	return NV_OK;
}

static void args_free(void *field, const struct flag *f)
{
	char **items = field;

	for (size_t i = 0; i < (size_t)f->max && items[i] != NULL; i++) {
		free(items[i]);
		items[i] = NULL;
	}
}

enum nv_err flags_defaults(const struct flag_set *s, void *cfg, char *err, size_t errsz)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct flag *f = &s->rows[i];
		char from[96];
		enum nv_err rc;

		if (f->type->kind == FLAG_KIND_ARGS) {
			args_free(field_at(cfg, f), f);
			continue;
		}
		snprintf(from, sizeof(from), "--%s", f->name);
		if ((rc = value_set(s, f, cfg, f->def, from, err, errsz)) != NV_OK)
			return rc;
	}
	return NV_OK;
}

void flags_clear(const struct flag_set *s, void *cfg)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct flag *f = &s->rows[i];

		if (f->type->kind == FLAG_KIND_ARGS) {
			args_free(field_at(cfg, f), f);
		} else if (is_copy(s, f)) {
			char **p = field_at(cfg, f);
			free(*p);
			*p = NULL;
		}
	}
}

static const struct flag *flag_find(const struct flag_set *s, const char *name, size_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->rows[i].name) == len && strncmp(s->rows[i].name, name, len) == 0)
			return &s->rows[i];
	return NULL;
}

/* The value of name in envp, as getenv would find it; NULL when absent. */
static const char *env_find(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

static enum nv_err env_apply(const struct flag_set *s, void *cfg, char *const *envp, char *err,
                             size_t errsz)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct flag *f = &s->rows[i];
		const char *v = f->env != NULL ? env_find(envp, f->env) : NULL;
		char from[96];
		enum nv_err rc;

		if (v == NULL || v[0] == '\0')
			continue;
		snprintf(from, sizeof(from), "$%s", f->env);
		if ((rc = value_set(s, f, cfg, v, from, err, errsz)) != NV_OK)
			return rc;
	}
	return NV_OK;
}

static enum flags_action action_of(const char *a)
{
	if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
		return FLAGS_HELP;
	if (strcmp(a, "--help-markdown") == 0)
		return FLAGS_HELP_MARKDOWN;
	if (strcmp(a, "--version") == 0)
		return FLAGS_VERSION;
	return FLAGS_RUN;
}

enum nv_err flags_parse(const struct flag_set *s, void *cfg, int argc, char *const *argv,
                        char *const *envp, enum flags_action *action, char *err, size_t errsz)
{
	enum nv_err rc = env_apply(s, cfg, envp, err, errsz);

	*action = FLAGS_RUN;
	for (int i = 1; rc == NV_OK && i < argc; i++) {
		const char *a = argv[i], *name = a + 2, *eq, *v;
		const struct flag *f;
		char from[96];
		size_t len;

		if ((*action = action_of(a)) != FLAGS_RUN)
			return NV_OK;
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errsz, "unexpected argument \"%s\" (flags start with --)", a);
			return NV_E_CONFIG;
		}
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		if ((f = flag_find(s, name, len)) == NULL) {
			snprintf(err, errsz, "unknown flag --%.*s (see --help)", (int)len, name);
			return NV_E_CONFIG;
		}
		if (eq != NULL) {
			v = eq + 1;
		} else if (f->type->kind == FLAG_KIND_BOOL) {
			v = "true";
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			snprintf(err, errsz, "--%s needs a value", f->name);
			return NV_E_CONFIG;
		}
		snprintf(from, sizeof(from), "--%s", f->name);
		rc = value_set(s, f, cfg, v, from, err, errsz);
	}
	return rc;
}

/* ---- --help and Markdown ---- */

/* "250ms", "5s", "10m" or "24h". */
static void ms_largest(int64_t ms, char *out, size_t outsz)
{
	long long v = (long long)ms;

	if (v % HOUR_MS == 0 && v > 0)
		snprintf(out, outsz, "%lldh", v / HOUR_MS);
	else if (v % 60000 == 0 && v > 0)
		snprintf(out, outsz, "%lldm", v / 60000);
	else if (v % 1000 == 0)
		snprintf(out, outsz, "%llds", v / 1000);
	else
		snprintf(out, outsz, "%lldms", v);
}

/* The bounds of an int or a duration, lo sep hi; "" for other kinds. */
static void range(const struct flag_set *s, const struct flag *f, const char *sep, char *out,
                  size_t cap)
{
	long long lo = (long long)f->min, hi = (long long)f->max;
	char a[32], b[32];

	out[0] = '\0';
	if (f->type->kind == FLAG_KIND_INT) {
		snprintf(out, cap, "%lld%s%lld", lo, sep, hi);
	} else if (f->type->kind != FLAG_KIND_DURATION) {
		return;
	} else if (s->style->units == FLAG_UNITS_LARGEST) {
		ms_largest(f->min, a, sizeof(a));
		ms_largest(f->max, b, sizeof(b));
		snprintf(out, cap, "%s%s%s", a, sep, b);
	} else if (hi % HOUR_MS == 0 && lo % 1000 == 0) {
		snprintf(out, cap, "%llds%s%lldh", lo / 1000, sep, hi / HOUR_MS);
	} else if (hi % 1000 == 0 && lo % 1000 == 0) {
		snprintf(out, cap, "%llds%s%llds", lo / 1000, sep, hi / 1000);
	} else {
		snprintf(out, cap, "%lldms%s%lldms", lo, sep, hi);
	}
}

/* The type word; in --help an enum shows its choices instead. */
static void type_word(const struct flag_set *s, const struct flag *f, bool help, char *out,
                      size_t cap)
{
	if (help && f->type->kind == FLAG_KIND_ENUM) {
		str_copy(out, cap, f->type->choices);
		return;
	}
	str_copy(out, cap, f->type->word);
	for (char *p = out; s->style->upper && *p; p++)
		*p = (char)toupper((unsigned char)*p);
}

static enum nv_err help_row(const struct flag_set *s, const struct flag *f, struct buf *out)
{
	char type[128], rng[64];
	bool def = f->def[0] != '\0', env = f->env != NULL;

	type_word(s, f, true, type, sizeof(type));
	range(s, f, "..", rng, sizeof(rng));
	if (s->style->layout == FLAG_LAYOUT_TYPED)
		return buf_printf(out, "  --%s %s (default \"%s\"%s%s%s%s)\n      %s\n", f->name,
		                  type, f->def, rng[0] ? ", range " : "", rng, env ? ", env " : "",
		                  env ? f->env : "", f->help);
	return buf_printf(out, "  --%s=%s\n      %s%s%s%s%s%s%s%s%s%s\n", f->name, type, f->help,
	                  def ? " (default " : "", f->def, def ? ")" : "", rng[0] ? " [" : "", rng,
	                  rng[0] ? "]" : "", env ? " [$" : "", env ? f->env : "", env ? "]" : "");
}

enum nv_err flags_help(const struct flag_set *s, struct buf *out)
{
	enum nv_err rc = NV_OK;

	for (size_t i = 0; rc == NV_OK && i < s->n; i++)
		rc = help_row(s, &s->rows[i], out);
	return rc;
}

/* The bounds cell: the range, an enum's choices ('|' would end the cell)
 * or how often a repeated flag may be given. */
static void md_bounds(const struct flag_set *s, const struct flag *f, char *out, size_t cap)
{
	if (f->type->kind == FLAG_KIND_ENUM) {
		str_copy(out, cap, f->type->choices);
		for (char *p = out; *p; p++)
			if (*p == '|')
				*p = '/';
	} else if (f->type->kind == FLAG_KIND_ARGS) {
		snprintf(out, cap, "repeatable, up to %lld", (long long)f->max);
	} else {
		range(s, f, s->style->md_range_sep, out, cap);
	}
}

enum nv_err flags_markdown(const struct flag_set *s, struct buf *out)
{
	enum nv_err rc = buf_append_str(out, s->style->md_head);

	for (size_t i = 0; rc == NV_OK && i < s->n; i++) {
		const struct flag *f = &s->rows[i];
		char type[32], bnd[128];
		bool def = f->def[0] != '\0', env = f->env != NULL;

		type_word(s, f, false, type, sizeof(type));
		md_bounds(s, f, bnd, sizeof(bnd));
		rc = buf_printf(out, "| `--%s` | %s | %s%s%s | %s | %s%s%s | %s |\n", f->name, type,
		                def ? "`" : "", def ? f->def : s->style->md_no_default,
		                def ? "`" : "", bnd, env ? "`" : "", env ? f->env : "",
		                env ? "`" : "", f->help);
	}
	return rc;
}
