/* SPDX-License-Identifier: Apache-2.0 */
/* The flag engine: a binary's configuration is one table of rows (name,
 * type, default, bounds, environment variable, help) over its config
 * struct, and this engine parses argv and the environment into it and
 * prints --help and the Markdown table of the docs from it. */
#ifndef NVL72_FLAGS_H
#define NVL72_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

enum flag_kind {
	FLAG_KIND_BOOL = 0, /* bool; a bare --name means true */
	FLAG_KIND_STRING,   /* const char * (borrowed) or char * (a copy, see flag_set) */
	FLAG_KIND_INT,      /* int within [min, max] */
	FLAG_KIND_DURATION, /* Go-style duration into an int64_t of ms within [min, max] */
	FLAG_KIND_ENUM,     /* a string that is one of the type's choices */
	FLAG_KIND_ARGS,     /* repeatable: char *field[max + 1], copies, NULL-terminated */
};

/* What a row's value is. An enum's type carries its words. */
struct flag_type {
	enum flag_kind kind;
	const char *word;    /* in --help and the table: "int", "duration" */
	const char *choices; /* enums: '|'-separated */
};

extern const struct flag_type flag_bool, flag_string, flag_int, flag_duration, flag_args;
/* An enum type taking the words of choices, e.g. FLAG_ENUM("text|json"). */
#define FLAG_ENUM(choices) (&(const struct flag_type){FLAG_KIND_ENUM, "enum", (choices)})

/* One flag. Every string value is at most FLAG_VALUE_MAX bytes. */
struct flag {
	const char *name; /* without "--" */
	size_t offset;    /* of the field it sets in the config struct */
	const struct flag_type *type;
	const char *def;  /* default, as typed on the command line */
	int64_t min, max; /* ints: the value; durations: ms; args: max is the most values */
	const char *env;  /* environment variable that sets it below the flag, or NULL */
	const char *help;
};

#define FLAG_VALUE_MAX 4096
#define FLAG_ARG_MAX 255 /* bytes of one value of a repeated flag */

enum flag_layout {
	/*   --name type (default "d", range b, env E)
	 *       help */
	FLAG_LAYOUT_TYPED = 0,
	/*   --name=TYPE
	 *       help (default d) [b] [$E] */
	FLAG_LAYOUT_METAVAR,
};

enum flag_units {
	/* Seconds, the upper bound in hours when whole hours: 0s..24h, 2s..600s;
	 * milliseconds when a bound is not whole seconds. */
	FLAG_UNITS_SECONDS = 0,
	/* Each bound in its largest whole unit: 100ms..10m. */
	FLAG_UNITS_LARGEST,
};

/* How a binary spells its --help and its Markdown table. */
struct flag_style {
	enum flag_layout layout;
	enum flag_units units;
	bool upper;                /* type words in capitals */
	const char *md_head;       /* the table's header row and rule, with newlines */
	const char *md_range_sep;  /* between two bounds in the table: ".." or " to " */
	const char *md_no_default; /* the default cell of a flag whose default is "" */
};

/* A table and how it behaves. With copy, strings and enums are char *
 * copies that flags_clear frees; without, they are const char * borrowed
 * from argv, the environment and the table, which must outlive the config.
 * Repeated flags are always copies. */
struct flag_set {
	const struct flag *rows;
	size_t n;
	bool copy;
	const struct flag_style *style;
};

enum flags_action {
	FLAGS_RUN = 0,
	FLAGS_HELP,          /* --help or -h */
	FLAGS_HELP_MARKDOWN, /* --help-markdown */
	FLAGS_VERSION,       /* --version */
};

/* Sets every field of cfg to its row's default (a repeated flag to none).
 * NV_E_CONFIG with err when a default does not parse. */
enum nv_err flags_defaults(const struct flag_set *s, void *cfg, char *err, size_t errsz);
/* Frees the copies in cfg and sets their fields to NULL. */
void flags_clear(const struct flag_set *s, void *cfg);
/* Applies the rows' environment variables found in envp (NULL-terminated
 * "NAME=value" strings, or NULL for none; an empty value counts as unset),
 * then argv[1..argc): "--name=value" or "--name value", a bare "--name" for
 * a bool. Stops at the first --help, -h, --help-markdown or --version,
 * which it returns in action. NV_E_CONFIG with err, which names the flag or
 * variable and says why, on the first bad value or argument. */
enum nv_err flags_parse(const struct flag_set *s, void *cfg, int argc, char *const *argv,
                        char *const *envp, enum flags_action *action, char *err, size_t errsz);
/* The --help lines of the rows (no head or tail), appended to out. */
enum nv_err flags_help(const struct flag_set *s, struct buf *out);
/* The Markdown table of the rows, appended to out. */
enum nv_err flags_markdown(const struct flag_set *s, struct buf *out);

#endif
