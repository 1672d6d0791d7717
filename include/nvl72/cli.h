/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-nvl72, the kubectl plugin: the verb and flag table that drives
 * parsing and every --help page, the pure functions that turn API objects
 * into tables and the one-sentence explanation of a waiting upgrade, and
 * cli_run, which does one invocation against the apiserver. */
/* Contract: everything but cli_run is pure (no I/O, never blocking,
 * thread-safe on distinct arguments); objects are borrowed and text is
 * appended to the caller's buffer. cli_run is a program's main: it sets
 * the process's log level, makes its own client and blocks for its
 * requests, each bounded as kube.h says. */
#ifndef NVL72_CLI_H
#define NVL72_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

/* ---- the table ---- */

enum cli_verb_id {
	CLI_STATUS = 0,
	CLI_APPROVE,
	CLI_PAUSE,
	CLI_RESUME,
	CLI_ABORT,
	CLI_EXPLAIN,
	CLI__VERBS,
};

#define CLI_VERB_BIT(v) (1u << (v))
#define CLI_ALL_VERBS ((1u << CLI__VERBS) - 1u)

struct cli_verb {
	const char *name;
	const char *alias;   /* NULL: none */
	const char *args;    /* positional arguments, for usage lines */
	const char *summary; /* one line */
	const char *help;    /* a paragraph */
};

struct cli_flag {
	const char *name; /* long name, without "--" */
	char shorthand;   /* 0: none */
	const char *arg;  /* value placeholder; NULL: a switch */
	unsigned verbs;   /* CLI_VERB_BIT set the flag applies to */
	const char *help;
};

extern const struct cli_verb cli_verbs[CLI__VERBS];
extern const struct cli_flag cli_flags[];
extern const size_t cli_nflags;

/* What one command line asks for. Strings point into argv. */
struct cli_args {
	int verb; /* enum cli_verb_id; -1: none given */
	bool help;
	bool version;
	const char *pos[2];
	unsigned npos;
	const char *kubeconfig;
	const char *context;
	const char *output; /* "" or "json" */
	const char *layer;
	const char *comment;
	bool reject;
};

/* Parses argv (argv[0] is the program). NV_E_INVAL with err filled on an
 * unknown verb or flag, a missing value or too many arguments. */
enum nv_err cli_args_parse(int argc, char **argv, struct cli_args *a, char *err, size_t errsz);

/* The help page of the plugin (verb < 0) or of one verb. */
void cli_help(int verb, struct buf *out);
/* The verbs and flags as the Markdown of docs/kubectl-plugin.md. */
void cli_help_markdown(struct buf *out);

/* ---- pure views of API objects ---- */

/* Why the RackUpgrade u is waiting (or why it is not), as one sentence that
 * ends with a period and a newline. rack is u's Rack (may be NULL: owners
 * and windows are then left out); now_ms is the wall clock. */
enum nv_err cli_explain(const json_t *u, const json_t *rack, int64_t now_ms, struct buf *out);

/* The table of racks (a RackList's items). */
enum nv_err cli_racks_table(const json_t *racks, struct buf *out);
/* The table of upgrades; racks (may be NULL) name the window owners of
 * missing approvals. */
enum nv_err cli_upgrades_table(const json_t *upgrades, const json_t *racks, struct buf *out);
/* One rack in detail. */
enum nv_err cli_rack_detail(const json_t *rack, struct buf *out);
/* One upgrade in detail, ending with its explanation. */
enum nv_err cli_upgrade_detail(const json_t *u, const json_t *rack, int64_t now_ms,
                               struct buf *out);

/* The current step of an upgrade's status: the first Running, Failed or
 * Pending step, in that order of preference (Running, Pending, Failed
 * while RollingBack); NULL when there is none.
 * Borrowed from status. */
const json_t *cli_current_step(const json_t *status);

/* ---- running ---- */

/* One invocation: parses argv, talks to the apiserver, writes to out and
 * err. Returns the exit code (0 done, 1 failed, 2 usage). */
int cli_run(int argc, char **argv, FILE *out, FILE *err);

#endif
