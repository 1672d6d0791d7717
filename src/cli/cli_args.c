// SPDX-License-Identifier: Apache-2.0
// The plugin's command line as one table of verbs and one of flags: the
// parser, `--help` of the plugin and of each verb, and the reference
// section of docs/kubectl-plugin.md are all generated from them.
#include <string.h>

#include "cli_int.h"
#include "nvl72/parse.h"

#define B(v) CLI_VERB_BIT(v)
#define MUTATE (B(CLI_PAUSE) | B(CLI_RESUME) | B(CLI_ABORT))

const struct cli_verb cli_verbs[CLI__VERBS] = {
        [CLI_STATUS] =
                {"status", NULL, "[rack|upgrade [NAME]]",
                 "Show racks and upgrades as tables, or one of them in detail.",
                 "Without arguments: every Rack (Ready, observed stack, trays ready/total, "
                 "Degraded, trays under maintenance, current upgrade) and every RackUpgrade "
                 "(phase, current step, wave, approvals pending by layer and owner). With a "
                 "kind: that table only. With a kind and a NAME: the object in detail (trays; "
                 "or approvals, steps with gate evidence and the explanation). -o json prints "
                 "the objects as the apiserver returns them."},
        [CLI_APPROVE] =
                {"approve", NULL, "UPGRADE --layer LAYER",
                 "Approve (or reject) a RackUpgrade for one layer.",
                 "Creates an UpgradeApproval for UPGRADE and LAYER (firmware, fabric, node, "
                 "kubernetes or workload). The admission webhook stamps the authenticated user "
                 "into spec.approvedBy; this command never sets it. RBAC decides who may "
                 "approve: the chart's nvl72-approver ClusterRole grants it."},
        [CLI_PAUSE] = {"pause", NULL, "UPGRADE",
                       "Freeze a RackUpgrade: no new step starts, nothing is lost.",
                       "Sets spec.paused with a merge patch guarded by the object's "
                       "resourceVersion. Says so and changes nothing when it is already paused."},
        [CLI_RESUME] = {"resume", NULL, "UPGRADE", "Let a paused RackUpgrade continue.",
                        "Clears spec.paused with a merge patch guarded by the object's "
                        "resourceVersion. Says so and changes nothing when it is not paused."},
        [CLI_ABORT] =
                {"abort", NULL, "UPGRADE",
                 "End a RackUpgrade in a defined state; cannot be undone.",
                 "Sets spec.abort with a merge patch guarded by the object's resourceVersion: "
                 "the operator brings every wave to all-old or all-new and ends in Aborted. "
                 "Says so and changes nothing when it is already aborting, aborted or "
                 "completed."},
        [CLI_EXPLAIN] =
                {"explain", "explain-block", "UPGRADE",
                 "Say in one sentence why a RackUpgrade is waiting.",
                 "Reads the RackUpgrade and its Rack and names what holds it: the notice "
                 "period's end, the approvals missing and whose they are, the next window or "
                 "the freeze, the step that runs and its message (drain waits, "
                 "PodDisruptionBudgets), gate evidence, or why it halted."},
};

const struct cli_flag cli_flags[] = {
        {"kubeconfig", 0, "FILE", CLI_ALL_VERBS,
         "Kubeconfig file; otherwise $KUBECONFIG, then ~/.kube/config, as kubectl."},
        {"context", 0, "NAME", CLI_ALL_VERBS, "Kubeconfig context; otherwise current-context."},
        {"output", 'o', "FORMAT", B(CLI_STATUS),
         "\"json\": the objects as the apiserver returns them."},
        {"layer", 0, "LAYER", B(CLI_APPROVE),
         "Layer approved: firmware, fabric, node, kubernetes or workload (required)."},
        {"comment", 0, "TEXT", B(CLI_APPROVE), "Comment kept in the approval."},
        {"reject", 0, NULL, B(CLI_APPROVE), "Reject instead of approve (needs --comment)."},
        {"help", 'h', NULL, CLI_ALL_VERBS, "This help."},
};
const size_t cli_nflags = sizeof(cli_flags) / sizeof(cli_flags[0]);

static int verb_find(const char *s)
{
	for (int v = 0; v < CLI__VERBS; v++)
		if (strcmp(cli_verbs[v].name, s) == 0 ||
		    (cli_verbs[v].alias != NULL && strcmp(cli_verbs[v].alias, s) == 0))
			return v;
	return -1;
}

static const struct cli_flag *flag_find(const char *a, size_t len, bool shorthand)
{
	for (size_t i = 0; i < cli_nflags; i++) {
		if (shorthand ? (len == 1 && cli_flags[i].shorthand == a[0])
		              : (strlen(cli_flags[i].name) == len &&
		                 strncmp(cli_flags[i].name, a, len) == 0))
			return &cli_flags[i];
	}
	return NULL;
}

static void flag_store(struct cli_args *a, const struct cli_flag *f, const char *v)
{
	if (strcmp(f->name, "kubeconfig") == 0)
		a->kubeconfig = v;
	else if (strcmp(f->name, "context") == 0)
		a->context = v;
	else if (strcmp(f->name, "output") == 0)
		a->output = v;
	else if (strcmp(f->name, "layer") == 0)
		a->layer = v;
	else if (strcmp(f->name, "comment") == 0)
		a->comment = v;
	else if (strcmp(f->name, "reject") == 0)
		a->reject = true;
	else if (strcmp(f->name, "help") == 0)
		a->help = true;
}

/* One flag at argv[*i]; takes its value from the next word when needed. */
static enum nv_err flag_parse(int argc, char **argv, int *i, struct cli_args *a,
                              const struct cli_flag **used, char *err, size_t errsz)
{
	const char *s = argv[*i];
	bool shorthand = s[1] != '-';
	const char *name = s + (shorthand ? 1 : 2);
	const char *eq = shorthand ? (name[0] && name[1] ? name + 1 : NULL) : strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct cli_flag *f = flag_find(name, len, shorthand);
	const char *v = NULL;
	if (f == NULL) {
		snprintf(err, errsz, "unknown flag %.*s (see --help)", (int)(name - s + (long)len),
		         s);
		return NV_E_INVAL;
	}
	if (f->arg == NULL && eq != NULL) {
		snprintf(err, errsz, "--%s takes no value", f->name);
		return NV_E_INVAL;
	}
	if (f->arg != NULL) {
		if (eq != NULL)
			v = eq + (shorthand && eq[0] != '=' ? 0 : 1);
		else if (*i + 1 < argc)
			v = argv[++*i];
		else {
			snprintf(err, errsz, "--%s needs a value (%s)", f->name, f->arg);
			return NV_E_INVAL;
		}
	}
	flag_store(a, f, v);
	*used = f;
	return NV_OK;
}

enum nv_err cli_args_parse(int argc, char **argv, struct cli_args *a, char *err, size_t errsz)
{
	const struct cli_flag *used[32];
	size_t nused = 0;
	memset(a, 0, sizeof(*a));
	a->verb = -1;
	a->output = "";
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--version") == 0) {
			a->version = true;
		} else if (s[0] == '-' && s[1] != '\0') {
			const struct cli_flag *f = NULL;
			enum nv_err rc = flag_parse(argc, argv, &i, a, &f, err, errsz);
			if (rc != NV_OK)
				return rc;
			if (nused < sizeof(used) / sizeof(used[0]))
				used[nused++] = f;
		} else if (a->verb < 0) {
			if ((a->verb = verb_find(s)) < 0) {
				snprintf(err, errsz, "unknown command \"%s\" (see --help)", s);
				return NV_E_INVAL;
			}
		} else if (a->npos < 2) {
			a->pos[a->npos++] = s;
		} else {
			snprintf(err, errsz, "%s: unexpected argument \"%s\"",
			         cli_verbs[a->verb].name, s);
			return NV_E_INVAL;
		}
	}
	for (size_t k = 0; k < nused && a->verb >= 0; k++)
		// cppcheck-suppress uninitvar ; used[k] is set for every k below nused
		if (!(used[k]->verbs & CLI_VERB_BIT(a->verb))) {
			snprintf(err, errsz, "--%s does not apply to %s (see %s --help)",
			         used[k]->name, cli_verbs[a->verb].name, cli_verbs[a->verb].name);
			return NV_E_INVAL;
		}
	return NV_OK;
}

/* "  -o, --output FORMAT" */
static void flag_usage(const struct cli_flag *f, char *out, size_t outsz)
{
	char sh[8] = "    ";
	if (f->shorthand)
		snprintf(sh, sizeof(sh), "-%c, ", f->shorthand);
	snprintf(out, outsz, "%s--%s%s%s", sh, f->name, f->arg ? " " : "", f->arg ? f->arg : "");
}

static void flags_help(unsigned mask, struct buf *out)
{
	char u[64];
	for (size_t i = 0; i < cli_nflags; i++) {
		if ((cli_flags[i].verbs & mask) == 0)
			continue;
		flag_usage(&cli_flags[i], u, sizeof(u));
		(void)buf_printf(out, "  %-24s %s\n", u, cli_flags[i].help);
	}
}

/* text broken into lines of at most 78 columns. */
static void put_wrapped(struct buf *out, const char *text)
{
	size_t col = 0;
	while (*text != '\0') {
		size_t w = strcspn(text, " ");
		if (col > 0 && col + 1 + w > 78) {
			(void)buf_append_str(out, "\n");
			col = 0;
		} else if (col > 0) {
			(void)buf_append_str(out, " ");
			col++;
		}
		(void)buf_append(out, text, w);
		col += w;
		text += w;
		while (*text == ' ')
			text++;
	}
	(void)buf_append_str(out, "\n");
}

void cli_help(int verb, struct buf *out)
{
	if (verb < 0 || verb >= CLI__VERBS) {
		(void)buf_append_str(
		        out, "kubectl nvl72: the human verbs of nvl72-operator.\n\n"
		             "Usage:\n  kubectl nvl72 COMMAND [ARGS] [flags]\n\nCommands:\n");
		for (int v = 0; v < CLI__VERBS; v++)
			(void)buf_printf(out, "  %-9s %s\n", cli_verbs[v].name,
			                 cli_verbs[v].summary);
		(void)buf_append_str(out, "\nFlags of every command:\n");
		for (size_t i = 0; i < cli_nflags; i++)
			if (cli_flags[i].verbs == CLI_ALL_VERBS) {
				char u[64];
				flag_usage(&cli_flags[i], u, sizeof(u));
				(void)buf_printf(out, "  %-24s %s\n", u, cli_flags[i].help);
			}
		(void)buf_append_str(out, "\nRun `kubectl nvl72 COMMAND --help` for a command.\n");
		return;
	}
	const struct cli_verb *v = &cli_verbs[verb];
	(void)buf_printf(out, "%s\n\nUsage:\n  kubectl nvl72 %s %s [flags]\n", v->summary, v->name,
	                 v->args);
	if (v->alias)
		(void)buf_printf(out, "  (also: kubectl nvl72 %s)\n", v->alias);
	(void)buf_append_str(out, "\n");
	put_wrapped(out, v->help);
	(void)buf_append_str(out, "\nFlags:\n");
	flags_help(CLI_VERB_BIT(verb), out);
}

void cli_help_markdown(struct buf *out)
{
	for (int verb = 0; verb < CLI__VERBS; verb++) {
		const struct cli_verb *v = &cli_verbs[verb];
		(void)buf_printf(out, "### `kubectl nvl72 %s %s`\n\n", v->name, v->args);
		if (v->alias)
			(void)buf_printf(out, "Also `kubectl nvl72 %s`. ", v->alias);
		(void)buf_printf(out, "%s %s\n\n", v->summary, v->help);
		size_t n = 0;
		for (size_t i = 0; i < cli_nflags; i++) {
			char u[64];
			if (!(cli_flags[i].verbs & CLI_VERB_BIT(verb)) ||
			    cli_flags[i].verbs == CLI_ALL_VERBS)
				continue;
			flag_usage(&cli_flags[i], u, sizeof(u));
			(void)buf_printf(out, "- `%s`: %s\n", str_trim(u), cli_flags[i].help);
			n++;
		}
		if (n > 0)
			(void)buf_append_str(out, "\n");
	}
	(void)buf_append_str(out, "### Flags of every command\n\n");
	for (size_t i = 0; i < cli_nflags; i++) {
		char u[64];
		if (cli_flags[i].verbs != CLI_ALL_VERBS)
			continue;
		flag_usage(&cli_flags[i], u, sizeof(u));
		(void)buf_printf(out, "- `%s`: %s\n", str_trim(u), cli_flags[i].help);
	}
}
