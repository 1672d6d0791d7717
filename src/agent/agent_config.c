// SPDX-License-Identifier: Apache-2.0
// The agent's settings as one table: name, type, default, bounds, the
// environment variable that may set it, and help. The flag engine
// (nvl72/flags.h) parses it and prints --help and the flag section of
// docs/agent.md from it, so they cannot drift; what running needs is here.
#include "nvl72/agent.h"

#include <stddef.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/flags.h"

#define S(f) offsetof(struct agent_config, f)
#define MS(x) ((int64_t)(x))
#define SEC(x) ((int64_t)(x)*1000)

static const struct flag opts[] = {
        {"kubeconfig", S(kubeconfig), &flag_string, "", 0, 0, NULL,
         "kubeconfig file; otherwise $KUBECONFIG, the pod's service account, then ~/.kube/config"},
        {"context", S(context), &flag_string, "", 0, 0, NULL,
         "kubeconfig context (default: the current one)"},
        {"node-name", S(node_name), &flag_string, "", 0, 0, "NODE_NAME",
         "Kubernetes Node this agent runs on; its tray is the ComputeTray whose spec.node is this"},
        {"node-ip", S(node_ip), &flag_string, "", 0, 0, "NODE_IP",
         "this tray's address on the IMEX network: the IMEX bind address and status.imex.address"},
        {"tray", S(tray), &flag_string, "", 0, 0, "NVL72_TRAY",
         "name of the ComputeTray to own; skips the search by --node-name"},
        {"lease-namespace", S(lease_namespace), &flag_string, "", 0, 0, "POD_NAMESPACE",
         "namespace of the heartbeat Lease (named like the tray); default: the client's namespace"},
        {"host-root", S(host_root), &flag_string, "/", 0, 0, "NVL72_HOST_ROOT",
         "where the host's root file system is mounted; every host path is taken under it"},
        {"tool-namespace", S(tool_ns), FLAG_ENUM("host|agent"), "host", 0, 0, NULL,
         "where the host tools (--systemctl to --imex-ctl, the installer) run, and so which path "
         "of a host file they are handed: host = in the host's mount namespace (on the tray, or "
         "through the agent image's nsenter wrappers), the host's own path; agent = in the "
         "agent's, the path under --host-root"},
        {"nvml-path", S(nvml_path), &flag_string, "libnvidia-ml.so.1", 0, 0, NULL,
         "NVML library opened with dlopen"},
        {"systemctl", S(systemctl), &flag_string, "/usr/bin/systemctl", 0, 0, NULL,
         "host systemctl"},
        {"modprobe", S(modprobe), &flag_string, "/usr/sbin/modprobe", 0, 0, NULL, "host modprobe"},
        {"modinfo", S(modinfo), &flag_string, "/usr/sbin/modinfo", 0, 0, NULL, "host modinfo"},
        {"imex-bin", S(imex_bin), &flag_string, "/usr/bin/nvidia-imex", 0, 0, NULL,
         "IMEX daemon, started by the agent in process mode"},
        {"imex-ctl", S(imex_ctl), &flag_string, "/usr/bin/nvidia-imex-ctl", 0, 0, NULL,
         "IMEX status tool, run under --tool-timeout"},
        {"imex-dir", S(imex_dir), &flag_string, "/etc/nvidia-imex", 0, 0, NULL,
         "IMEX configuration folder on the host (under --host-root)"},
        {"state-dir", S(state_dir), &flag_string, "/run/nvl72-agent", 0, 0, NULL,
         "the agent's state on the host (under --host-root): daemon and installer pid files, the "
         "driver lock, the record of the last validation run, the prepared DRA claims"},
        {"installer-arg", S(installer), &flag_args, "", 0, AGENT_INSTALLER_ARGS_MAX, NULL,
         "one argument of the driver installer command, repeated in order; {version} is replaced "
         "by the target; none: the agent never installs a driver"},
        {"validation-command", S(validation_cmd), &flag_string, "", 0, 0, NULL,
         "validation command run once per new spec.validation.id, with spec.validation.args as "
         "its arguments; it prints a line busbw_gbps=GBPS (or nccl-tests' \"# Avg bus bandwidth\" "
         "line) and optionally transport=NAME; empty: every run is reported Failed"},
        {"tool-timeout", S(tool_timeout_ms), &flag_duration, "5s", MS(100), SEC(600), NULL,
         "deadline of one host tool run (systemctl, modprobe, nvidia-imex-ctl)"},
        {"install-timeout", S(install_timeout_ms), &flag_duration, "30m", SEC(10), SEC(24 * 3600),
         NULL, "deadline of one driver installer run"},
        {"resync-period", S(resync_ms), &flag_duration, "10s", SEC(1), SEC(3600), NULL,
         "how often the host is observed again when nothing else triggers a pass"},
        {"heartbeat-period", S(heartbeat_ms), &flag_duration, "5s", SEC(1), SEC(300), NULL,
         "how often the heartbeat Lease is renewed"},
        {"lease-duration", S(lease_duration_ms), &flag_duration, "20s", SEC(3), SEC(3600), NULL,
         "leaseDurationSeconds written into the heartbeat Lease; more than --heartbeat-period"},
        {"tray-wait", S(tray_wait_ms), &flag_duration, "2m", 0, SEC(3600), NULL,
         "how long to wait for this node's ComputeTray to exist before exiting with an error"},
        {"host-fm-policy", S(fm_policy), FLAG_ENUM("mask|report"), "mask", 0, 0, NULL,
         "a host Fabric Manager (or host nvidia-imex unit) that must not run: mask = stop, "
         "disable and mask it; report = only a blocking condition"},
        {"kubelet-plugin", S(kubelet_plugin), &flag_bool, "true", 0, 0, NULL,
         "serve the kubelet plugin of the DRA driver imex.nvl72.io (registration and DRA sockets, "
         "CDI specs of prepared claims, this node's ResourceSlice); false: no sockets, no slices"},
        {"kubelet-registry-dir", S(kubelet_registry_dir), &flag_string,
         "/var/lib/kubelet/plugins_registry", 0, 0, NULL,
         "the kubelet's plugin registration folder (not under --host-root): the registration "
         "socket imex.nvl72.io-reg.sock goes here once the folder exists"},
        {"kubelet-plugins-dir", S(kubelet_plugins_dir), &flag_string, "/var/lib/kubelet/plugins", 0,
         0, NULL,
         "the kubelet's plugin folder (not under --host-root): the DRA socket is "
         "imex.nvl72.io/dra.sock in it, a path the kubelet must see the same"},
        {"cdi-dir", S(cdi_dir), &flag_string, "/var/run/cdi", 0, 0, NULL,
         "where CDI specs of prepared claims are written (not under --host-root), a folder the "
         "container runtime reads"},
        {"metrics-bind-address", S(metrics_bind), &flag_string, "", 0, 0, NULL,
         "ADDR:PORT serving /metrics, /healthz and /readyz over HTTP; empty: off"},
        {"metrics-require-token", S(metrics_require_token), &flag_bool, "false", 0, 0, NULL,
         "serve /metrics only to a bearer token that a TokenReview authenticates and a "
         "SubjectAccessReview allows \"get\" on /metrics (401/403 otherwise), as the operator "
         "does; needs create on tokenreviews and subjectaccessreviews; the probes stay open"},
        {"log-level", S(log_level), FLAG_ENUM("error|warn|info|debug"), "info", 0, 0,
         "NVL72_LOG_LEVEL", "log level"},
        {"log-format", S(log_format), FLAG_ENUM("text|json"), "text", 0, 0, NULL,
         "log line format"},
        {"log-debug", S(log_debug), &flag_string, "", 0, 0, NULL,
         "components with debug logs on, comma-separated (agent,kube) or *"},
};

static const struct flag_style agent_style = {
        .layout = FLAG_LAYOUT_METAVAR,
        .units = FLAG_UNITS_LARGEST,
        .upper = true,
        .md_head = "| flag | type | default | bounds | environment | meaning |\n"
                   "|---|---|---|---|---|---|\n",
        .md_range_sep = " to ",
        .md_no_default = "",
};

static const struct flag_set agent_set = {opts, ARRAY_LEN(opts), true, &agent_style};

void agent_config_init(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	(void)flags_defaults(&agent_set, c, NULL, 0);
}

void agent_config_clear(struct agent_config *c)
{
	flags_clear(&agent_set, c);
	c->n_installer = 0;
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

	if (c->kubelet_plugin) {
		/* sun_path holds 108 bytes (unix(7)). */
		const char *const dirs[] = {c->kubelet_registry_dir, c->kubelet_plugins_dir,
		                            c->cdi_dir};
		const char *const names[] = {"--kubelet-registry-dir", "--kubelet-plugins-dir",
		                             "--cdi-dir"};
		for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
			if (dirs[i][0] != '/') {
				snprintf(err, errsz, "%s: not an absolute path: \"%s\"", names[i],
				         dirs[i]);
				return NV_E_CONFIG;
			}
		}
		if (strlen(c->kubelet_registry_dir) + sizeof("/" AGENT_DRA_DRIVER "-reg.sock") >
		            108 ||
		    strlen(c->kubelet_plugins_dir) + sizeof("/" AGENT_DRA_DRIVER "/dra.sock") >
		            108) {
			snprintf(err, errsz,
			         "--kubelet-registry-dir or --kubelet-plugins-dir: the socket "
			         "path would be longer than a unix socket allows (107 bytes)");
			return NV_E_CONFIG;
		}
	}

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
	enum flags_action act;
	enum nv_err rc = flags_parse(&agent_set, c, argc, argv, envp, &act, err, errsz);

	c->n_installer = 0;
	while (c->installer[c->n_installer] != NULL)
		c->n_installer++;
	*action = (enum agent_config_action)act;
	if (rc == NV_OK && act == FLAGS_RUN)
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

bool agent_config_tools_in_agent_ns(const struct agent_config *c)
{
	return strcmp(c->tool_ns, "agent") == 0;
}

enum agent_fm_policy agent_config_fm_policy(const struct agent_config *c)
{
	return strcmp(c->fm_policy, "report") == 0 ? AGENT_FM_REPORT : AGENT_FM_MASK;
}

enum nv_err agent_config_usage(struct buf *out)
{
	enum nv_err rc = buf_append_str(out, "usage: nvl72-agent [FLAGS]\n\n"
	                                     "Owns this tray's ComputeTray: makes the host match "
	                                     "its spec and reports the host in\n"
	                                     "its status, with a heartbeat Lease. A flag wins over "
	                                     "its environment variable.\n\n");

	if (rc == NV_OK)
		rc = flags_help(&agent_set, out);
	if (rc == NV_OK)
		rc = buf_append_str(out, "  --help, --help-markdown, --version\n");
	return rc;
}

enum nv_err agent_config_markdown(struct buf *out)
{
	return flags_markdown(&agent_set, out);
}
