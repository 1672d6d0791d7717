// SPDX-License-Identifier: Apache-2.0
// The agent's settings as one table: name, type, default, bounds, the
// environment variable that may set it, and help. Parsing, --help and the
// flag section of docs/agent.md are all read from it, so they cannot drift.
#include "nvl72/agent.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"

enum opt_type {
	OPT_STR = 0,
	OPT_LIST,     /* repeatable; collects into installer[] */
	OPT_DURATION, /* Go-style duration into an int64_t of milliseconds */
	OPT_ENUM,     /* one of choices, '|'-separated */
};

struct opt {
	const char *name;
	enum opt_type type;
	const char *def;
	int64_t min_ms, max_ms; /* durations */
	const char *choices;    /* enums */
	const char *env;        /* NULL: flag only */
	const char *help;
	size_t off;
};

#define S(f) offsetof(struct agent_config, f)
#define MS(x) ((int64_t)(x))
#define SEC(x) ((int64_t)(x)*1000)

static const struct opt opts[] = {
	{"kubeconfig", OPT_STR, "", 0, 0, NULL, NULL,
	 "kubeconfig file; otherwise $KUBECONFIG, the pod's service account, then ~/.kube/config",
	 S(kubeconfig)},
	{"context", OPT_STR, "", 0, 0, NULL, NULL, "kubeconfig context (default: the current one)",
	 S(context)},
	{"node-name", OPT_STR, "", 0, 0, NULL, "NODE_NAME",
	 "Kubernetes Node this agent runs on; its tray is the ComputeTray whose spec.node is this",
	 S(node_name)},
	{"node-ip", OPT_STR, "", 0, 0, NULL, "NODE_IP",
	 "this tray's address on the IMEX network: the IMEX bind address and status.imex.address",
	 S(node_ip)},
	{"tray", OPT_STR, "", 0, 0, NULL, "NVL72_TRAY",
	 "name of the ComputeTray to own; skips the search by --node-name", S(tray)},
	{"lease-namespace", OPT_STR, "", 0, 0, NULL, "POD_NAMESPACE",
	 "namespace of the heartbeat Lease (named like the tray); default: the client's namespace",
	 S(lease_namespace)},
	{"host-root", OPT_STR, "/", 0, 0, NULL, "NVL72_HOST_ROOT",
	 "where the host's root file system is mounted; every host path is taken under it",
	 S(host_root)},
	{"nvml-path", OPT_STR, "libnvidia-ml.so.1", 0, 0, NULL, NULL,
	 "NVML library opened with dlopen", S(nvml_path)},
	{"systemctl", OPT_STR, "/usr/bin/systemctl", 0, 0, NULL, NULL, "host systemctl",
	 S(systemctl)},
	{"modprobe", OPT_STR, "/usr/sbin/modprobe", 0, 0, NULL, NULL, "host modprobe", S(modprobe)},
	{"modinfo", OPT_STR, "/usr/sbin/modinfo", 0, 0, NULL, NULL, "host modinfo", S(modinfo)},
	{"imex-bin", OPT_STR, "/usr/bin/nvidia-imex", 0, 0, NULL, NULL,
	 "IMEX daemon, started by the agent in process mode", S(imex_bin)},
	{"imex-ctl", OPT_STR, "/usr/bin/nvidia-imex-ctl", 0, 0, NULL, NULL,
	 "IMEX status tool, run under --tool-timeout", S(imex_ctl)},
	{"imex-dir", OPT_STR, "/etc/nvidia-imex", 0, 0, NULL, NULL,
	 "IMEX configuration folder on the host (under --host-root)", S(imex_dir)},
	{"state-dir", OPT_STR, "/run/nvl72-agent", 0, 0, NULL, NULL,
	 "the agent's state on the host (under --host-root): daemon and installer pid files, "
	 "the record of the last validation run",
	 S(state_dir)},
	{"installer-arg", OPT_LIST, "", 0, 0, NULL, NULL,
	 "one argument of the driver installer command, repeated in order; {version} is "
	 "replaced by the target; none: the agent never installs a driver",
	 0},
	{"validation-command", OPT_STR, "", 0, 0, NULL, NULL,
	 "validation command run once per new spec.validation.id, with spec.validation.args as "
	 "its arguments; it prints a line busbw_gbps=GBPS (or nccl-tests' \"# Avg bus bandwidth\" "
	 "line) and optionally transport=NAME; empty: every run is reported Failed",
	 S(validation_cmd)},
	{"tool-timeout", OPT_DURATION, "5s", MS(100), SEC(600), NULL, NULL,
	 "deadline of one host tool run (systemctl, modprobe, nvidia-imex-ctl)",
	 S(tool_timeout_ms)},
	{"install-timeout", OPT_DURATION, "30m", SEC(10), SEC(24 * 3600), NULL, NULL,
	 "deadline of one driver installer run", S(install_timeout_ms)},
	{"resync-period", OPT_DURATION, "10s", SEC(1), SEC(3600), NULL, NULL,
	 "how often the host is observed again when nothing else triggers a pass", S(resync_ms)},
	{"heartbeat-period", OPT_DURATION, "5s", SEC(1), SEC(300), NULL, NULL,
	 "how often the heartbeat Lease is renewed", S(heartbeat_ms)},
	{"lease-duration", OPT_DURATION, "20s", SEC(3), SEC(3600), NULL, NULL,
	 "leaseDurationSeconds written into the heartbeat Lease; more than --heartbeat-period",
	 S(lease_duration_ms)},
	{"tray-wait", OPT_DURATION, "2m", 0, SEC(3600), NULL, NULL,
	 "how long to wait for this node's ComputeTray to exist before exiting with an error",
	 S(tray_wait_ms)},
	{"host-fm-policy", OPT_ENUM, "mask", 0, 0, "mask|report", NULL,
	 "a host Fabric Manager (or host nvidia-imex unit) that must not run: mask = stop, "
	 "disable and mask it; report = only a blocking condition",
	 S(fm_policy)},
	{"metrics-bind-address", OPT_STR, "", 0, 0, NULL, NULL,
	 "ADDR:PORT serving /metrics, /healthz and /readyz over HTTP; empty: off", S(metrics_bind)},
	{"log-level", OPT_ENUM, "info", 0, 0, "error|warn|info|debug", "NVL72_LOG_LEVEL",
	 "log level", S(log_level)},
	{"log-format", OPT_ENUM, "text", 0, 0, "text|json", NULL, "log line format", S(log_format)},
	{"log-debug", OPT_STR, "", 0, 0, NULL, NULL,
	 "components with debug logs on, comma-separated (agent,kube) or *", S(log_debug)},
};

static char **str_at(struct agent_config *c, const struct opt *o)
{
	return (char **)(void *)((char *)c + o->off);
}

static int64_t *ms_at(struct agent_config *c, const struct opt *o)
{
	return (int64_t *)(void *)((char *)c + o->off);
}

void agent_config_init(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		const struct opt *o = &opts[i];
		if (o->type == OPT_STR || o->type == OPT_ENUM)
			*str_at(c, o) = xstrdup(o->def);
		else if (o->type == OPT_DURATION)
			(void)parse_duration_ms(o->def, ms_at(c, o));
	}
}

void agent_config_clear(struct agent_config *c)
{
	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		const struct opt *o = &opts[i];
		if (o->type == OPT_STR || o->type == OPT_ENUM) {
			free(*str_at(c, o));
			*str_at(c, o) = NULL;
		}
	}
	for (size_t i = 0; i < c->n_installer; i++)
		free(c->installer[i]);
	memset(c->installer, 0, sizeof(c->installer));
	c->n_installer = 0;
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

/* Sets o from v; from names the source ("--tool-timeout", "$NODE_NAME"). */
static enum nv_err opt_set(struct agent_config *c, const struct opt *o, const char *v,
			   const char *from, char *err, size_t errsz)
{
	int64_t ms;

	switch (o->type) {
	case OPT_ENUM:
		if (!choice_ok(o->choices, v)) {
			snprintf(err, errsz, "%s: \"%s\" is not one of %s", from, v, o->choices);
			return NV_E_CONFIG;
		}
		/* fall through */
	case OPT_STR:
		if (strlen(v) > 4096) {
			snprintf(err, errsz, "%s: value longer than 4096 bytes", from);
			return NV_E_CONFIG;
		}
		free(*str_at(c, o));
		*str_at(c, o) = xstrdup(v);
		return NV_OK;
	case OPT_DURATION:
		if (parse_duration_ms(v, &ms) != NV_OK) {
			snprintf(err, errsz, "%s: \"%s\" is not a duration (like 500ms, 10s, 5m)",
				 from, v);
			return NV_E_CONFIG;
		}
		if (ms < o->min_ms || ms > o->max_ms) {
			snprintf(err, errsz, "%s: %s is outside [%lld ms, %lld ms]", from, v,
				 (long long)o->min_ms, (long long)o->max_ms);
			return NV_E_CONFIG;
		}
		*ms_at(c, o) = ms;
		return NV_OK;
	case OPT_LIST:
		if (c->n_installer >= AGENT_INSTALLER_ARGS_MAX || strlen(v) > 255) {
			snprintf(err, errsz, "%s: at most %d arguments of 255 bytes", from,
				 AGENT_INSTALLER_ARGS_MAX);
			return NV_E_CONFIG;
		}
		c->installer[c->n_installer++] = xstrdup(v);
		return NV_OK;
	}
	return NV_E_INTERNAL;
}

static const struct opt *opt_find(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_LEN(opts); i++)
		if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
			return &opts[i];
	return NULL;
}

static enum nv_err apply_env(struct agent_config *c, char *const *envp, char *err, size_t errsz)
{
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
		const char *eq = strchr(envp[i], '=');
		if (eq == NULL)
			continue;
		for (size_t j = 0; j < ARRAY_LEN(opts); j++) {
			const struct opt *o = &opts[j];
			char from[80];
			enum nv_err rc;
			if (o->env == NULL || strlen(o->env) != (size_t)(eq - envp[i]) ||
			    strncmp(o->env, envp[i], (size_t)(eq - envp[i])) != 0 || eq[1] == '\0')
				continue;
			snprintf(from, sizeof(from), "$%s", o->env);
			rc = opt_set(c, o, eq + 1, from, err, errsz);
			if (rc != NV_OK)
				return rc;
		}
	}
	return NV_OK;
}

/* What running needs beyond each value's own bounds. */
static enum nv_err check_run(const struct agent_config *c, char *err, size_t errsz)
{
	if (c->node_name[0] == '\0' && c->tray[0] == '\0') {
		snprintf(err, errsz, "--node-name (or $NODE_NAME) or --tray is required");
		return NV_E_CONFIG;
	}
	if (c->lease_duration_ms <= c->heartbeat_ms) {
		snprintf(err, errsz, "--lease-duration must be longer than --heartbeat-period");
		return NV_E_CONFIG;
	}
	char host[256];
	int port;

	if (agent_config_metrics_addr(c, host, sizeof(host), &port) != NV_OK) {
		snprintf(err, errsz, "--metrics-bind-address: expected ADDR:PORT, got \"%s\"",
			 c->metrics_bind);
		return NV_E_CONFIG;
	}
	return NV_OK;
}

enum nv_err agent_config_parse(struct agent_config *c, int argc, char *const *argv,
			       char *const *envp, enum agent_config_action *action, char *err,
			       size_t errsz)
{
	enum nv_err rc = apply_env(c, envp, err, errsz);

	*action = AGENT_CONFIG_RUN;
	for (int i = 1; rc == NV_OK && i < argc; i++) {
		const char *a = argv[i], *name, *eq, *v;
		const struct opt *o;
		char from[80];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*action = AGENT_CONFIG_HELP;
			return NV_OK;
		}
		if (strcmp(a, "--help-markdown") == 0) {
			*action = AGENT_CONFIG_HELP_MARKDOWN;
			return NV_OK;
		}
		if (strcmp(a, "--version") == 0) {
			*action = AGENT_CONFIG_VERSION;
			return NV_OK;
		}
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errsz, "unexpected argument \"%s\" (flags start with --)", a);
			return NV_E_CONFIG;
		}
		name = a + 2;
		eq = strchr(name, '=');
		o = opt_find(name, eq ? (size_t)(eq - name) : strlen(name));
		if (o == NULL) {
			snprintf(err, errsz, "unknown flag --%.*s (see --help)",
				 (int)(eq ? (size_t)(eq - name) : strlen(name)), name);
			return NV_E_CONFIG;
		}
		if (eq != NULL) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			snprintf(err, errsz, "--%s needs a value", o->name);
			return NV_E_CONFIG;
		}
		snprintf(from, sizeof(from), "--%s", o->name);
		rc = opt_set(c, o, v, from, err, errsz);
	}
	if (rc == NV_OK)
		rc = check_run(c, err, errsz);
	return rc;
}

enum nv_err agent_config_metrics_addr(const struct agent_config *c, char *host, size_t hostsz,
				      int *port)
{
	char h[256];
	int p;

	if (c->metrics_bind[0] == '\0') {
		if (hostsz == 0)
			return NV_E_CONFIG;
		host[0] = '\0';
		*port = -1;
		return NV_OK;
	}
	/* "0" is off for the operator's flags; here only "" is. */
	if (parse_hostport(c->metrics_bind, h, sizeof(h), &p) != NV_OK || p < 0 ||
	    str_copy(host, hostsz, h) != NV_OK)
		return NV_E_CONFIG;
	*port = p;
	return NV_OK;
}

enum agent_fm_policy agent_config_fm_policy(const struct agent_config *c)
{
	return strcmp(c->fm_policy, "report") == 0 ? AGENT_FM_REPORT : AGENT_FM_MASK;
}

static const char *type_word(const struct opt *o)
{
	switch (o->type) {
	case OPT_DURATION:
		return "DURATION";
	case OPT_ENUM:
		return o->choices;
	case OPT_LIST:
		return "ARG";
	case OPT_STR:
		break;
	}
	return "STRING";
}

static void fmt_ms(int64_t ms, char *out, size_t outsz)
{
	if (ms % 3600000 == 0 && ms > 0)
		snprintf(out, outsz, "%lldh", (long long)(ms / 3600000));
	else if (ms % 60000 == 0 && ms > 0)
		snprintf(out, outsz, "%lldm", (long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(out, outsz, "%llds", (long long)(ms / 1000));
	else
		snprintf(out, outsz, "%lldms", (long long)ms);
}

enum nv_err agent_config_usage(struct buf *out)
{
	enum nv_err rc = buf_append_str(out, "usage: nvl72-agent [FLAGS]\n\n"
					     "Owns this tray's ComputeTray: makes the host match "
					     "its spec and reports the host in\n"
					     "its status, with a heartbeat Lease. A flag wins over "
					     "its environment variable.\n\n");

	for (size_t i = 0; rc == NV_OK && i < ARRAY_LEN(opts); i++) {
		const struct opt *o = &opts[i];
		char flag[96], lo[32], hi[32];
		snprintf(flag, sizeof(flag), "--%s=%s", o->name, type_word(o));
		rc = buf_printf(out, "  %s\n      %s", flag, o->help);
		if (rc == NV_OK && o->def[0] != '\0')
			rc = buf_printf(out, " (default %s)", o->def);
		if (rc == NV_OK && o->type == OPT_DURATION) {
			fmt_ms(o->min_ms, lo, sizeof(lo));
			fmt_ms(o->max_ms, hi, sizeof(hi));
			rc = buf_printf(out, " [%s..%s]", lo, hi);
		}
		if (rc == NV_OK && o->env != NULL)
			rc = buf_printf(out, " [$%s]", o->env);
		if (rc == NV_OK)
			rc = buf_append_str(out, "\n");
	}
	if (rc == NV_OK)
		rc = buf_append_str(out, "  --help, --help-markdown, --version\n");
	return rc;
}

enum nv_err agent_config_markdown(struct buf *out)
{
	enum nv_err rc =
		buf_append_str(out, "| flag | type | default | bounds | environment | meaning |\n"
				    "|---|---|---|---|---|---|\n");

	for (size_t i = 0; rc == NV_OK && i < ARRAY_LEN(opts); i++) {
		const struct opt *o = &opts[i];
		char bounds[80] = "", lo[32], hi[32], env[64] = "";
		if (o->type == OPT_DURATION) {
			fmt_ms(o->min_ms, lo, sizeof(lo));
			fmt_ms(o->max_ms, hi, sizeof(hi));
			snprintf(bounds, sizeof(bounds), "%s to %s", lo, hi);
		} else if (o->type == OPT_LIST) {
			snprintf(bounds, sizeof(bounds), "repeatable, up to %d",
				 AGENT_INSTALLER_ARGS_MAX);
		} else if (o->type == OPT_ENUM) {
			/* A '|' would end the table cell. */
			str_copy(bounds, sizeof(bounds), o->choices);
			for (char *p = bounds; *p; p++)
				if (*p == '|')
					*p = '/';
		}
		if (o->env != NULL)
			snprintf(env, sizeof(env), "`%s`", o->env);
		rc = buf_printf(out, "| `--%s` | %s | %s%s%s | %s | %s | %s |\n", o->name,
				o->type == OPT_ENUM ? "ENUM" : type_word(o), o->def[0] ? "`" : "",
				o->def, o->def[0] ? "`" : "", bounds, env, o->help);
	}
	return rc;
}
