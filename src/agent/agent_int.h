/* SPDX-License-Identifier: Apache-2.0 */
/* Between the agent's loop (agent.c) and its kubelet plugin
 * (agent_plugin.c): the loop hands the plugin what each pass learned of
 * the tray and reads back the plugin's state for the status. */
/* Private to src/agent/. Threads: agent_plugin_update runs on the reconcile
 * worker, agent_plugin_report on any thread, agent_plugin_free on the
 * thread that ran agent_run, after the workers stopped. */
#ifndef NVL72_AGENT_INT_H
#define NVL72_AGENT_INT_H

#include <jansson.h>

#include "nvl72/agent.h"

struct kube_client;
struct kube_stop;
struct metrics_registry;

struct agent_plugin_opts {
	const struct agent_config *cfg;
	struct kube_client *c;        /* borrowed, shared with the agent */
	struct metrics_registry *reg; /* the agent's metrics */
	struct kube_stop *stop;       /* the agent's; ends the test hook's pause */
	/* The tray as the cache holds it now (a new reference, or NULL). */
	json_t *(*tray_get)(void *arg);
	/* The plugin's state changed: a pass should write the status. */
	void (*changed)(void *arg);
	void *arg;
};

struct agent_plugin;

/* Reads the prepare pause of the test hook (docs/agent.md); starts
 * nothing. */
struct agent_plugin *agent_plugin_new(const struct agent_plugin_opts *o);
/* After a pass: the tray as it is now. Starts the sockets and the slice
 * publisher once the kubelet's registration folder exists (the first start
 * only; a failure is retried on the next pass), and republishes the slice
 * when v differs from the last view. */
void agent_plugin_update(struct agent_plugin *p, const struct agent_dra_view *v);
/* The state for the KubeletPluginReady condition. */
void agent_plugin_report(struct agent_plugin *p, struct agent_plugin_report *out);
/* Stops the sockets (removing them), the slice publisher and its watch;
 * frees. NULL does nothing. */
void agent_plugin_free(struct agent_plugin *p);

#endif
