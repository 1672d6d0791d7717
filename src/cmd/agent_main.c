// SPDX-License-Identifier: Apache-2.0
// nvl72-agent: the per-tray node agent. Reads its flags and environment
// from the agent's one configuration table, connects to the API server
// (--kubeconfig or in-cluster), finds its ComputeTray and runs the loop
// until SIGTERM or SIGINT; a second signal exits at once.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvl72/agent.h"
#include "nvl72/base.h"
#include "nvl72/kube.h"

extern char **environ;

static int print_buf(enum nv_err (*fn)(struct buf *))
{
	struct buf b;
	int rc;

	buf_init(&b, 1 << 20);
	rc = fn(&b) == NV_OK && fwrite(buf_str(&b), 1, b.len, stdout) == b.len ? 0 : 1;
	buf_clear(&b);
	return rc;
}

static bool logging_setup(const struct agent_config *c)
{
	enum log_level lvl;

	if (!log_level_parse(c->log_level, &lvl))
		return false;
	log_set_level(lvl);
	log_set_format(strcmp(c->log_format, "json") == 0 ? LOG_FMT_JSON : LOG_FMT_TEXT);
	log_set_debug(c->log_debug);
	return true;
}

/* The first SIGTERM/SIGINT asks for a clean stop; a second one ends the
 * process at once, as controller-runtime does. */
static void *signal_main(void *arg)
{
	struct kube_stop *stop = arg;
	sigset_t set;
	int sig, seen = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (seen++ > 0) {
			log_warn("agent", "second signal: exiting now", "signal=%d", sig);
			_exit(1);
		}
		log_info("agent", "signal received: stopping", "signal=%d", sig);
		kube_stop_request(stop);
	}
	return NULL;
}

static int run(const struct agent_config *cfg)
{
	struct kube_config_opts ko = {.kubeconfig = cfg->kubeconfig[0] ? cfg->kubeconfig : NULL,
	                              .context = cfg->context[0] ? cfg->context : NULL};
	struct kube_config *kc = NULL;
	struct kube_client *client = NULL;
	struct kube_status st;
	struct kube_stop *stop;
	struct agent *a = NULL;
	struct agent_stats stats;
	char why[512];
	pthread_t sig_thread;
	enum nv_err rc;

	rc = kube_config_load(&ko, &kc, &st);
	if (rc != NV_OK) {
		fprintf(stderr, "nvl72-agent: cannot load a Kubernetes configuration: %s (%s)\n",
		        st.message[0] ? st.message : nv_err_str(rc), nv_err_name(rc));
		return 1;
	}
	rc = kube_client_new(kc, &(struct kube_client_opts){.component = "nvl72-agent"}, &client,
	                     &st);
	if (rc != NV_OK) {
		fprintf(stderr, "nvl72-agent: cannot create the API client: %s (%s)\n",
		        st.message[0] ? st.message : nv_err_str(rc), nv_err_name(rc));
		return 1;
	}
	/* Never freed: the signal thread may still hold it while we exit. */
	stop = kube_stop_new();
	if (pthread_create(&sig_thread, NULL, signal_main, stop) == 0)
		pthread_detach(sig_thread);
	rc = agent_new(cfg, client, stop, &a, why, sizeof(why));
	if (rc != NV_OK) {
		if (rc != NV_E_CANCELLED)
			fprintf(stderr, "nvl72-agent: %s (%s)\n", why, nv_err_name(rc));
		return rc == NV_E_CANCELLED ? 0 : 1;
	}
	rc = agent_run(a);
	agent_stats_get(a, &stats);
	log_info("agent", "stopped",
	         "tray=%s reconciles=%llu status_writes=%llu "
	         "status_unchanged=%llu lease_renewals=%llu err=%s",
	         agent_tray_name(a), (unsigned long long)stats.reconciles,
	         (unsigned long long)stats.status_writes, (unsigned long long)stats.status_skipped,
	         (unsigned long long)stats.lease_renewals, nv_err_name(rc));
	agent_free(a);
	return rc == NV_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct agent_config cfg;
	enum agent_config_action act;
	char err[512];
	sigset_t set;
	int rc;

	agent_config_init(&cfg);
	if (agent_config_parse(&cfg, argc, argv, environ, &act, err, sizeof(err)) != NV_OK) {
		fprintf(stderr, "nvl72-agent: %s\n", err);
		agent_config_clear(&cfg);
		return 2;
	}
	if (act != AGENT_CONFIG_RUN) {
		rc = act == AGENT_CONFIG_HELP ? print_buf(agent_config_usage)
		     : act == AGENT_CONFIG_HELP_MARKDOWN
		             ? print_buf(agent_config_markdown)
		             : printf("nvl72-agent %s\n", NVL72_VERSION) < 0;
		agent_config_clear(&cfg);
		return rc;
	}
	if (!logging_setup(&cfg)) {
		fprintf(stderr, "nvl72-agent: --log-level: \"%s\" is not a level\n", cfg.log_level);
		agent_config_clear(&cfg);
		return 2;
	}
	/* Signals go to the signal thread only; every thread inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = run(&cfg);
	agent_config_clear(&cfg);
	return rc;
}
