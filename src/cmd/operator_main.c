// SPDX-License-Identifier: Apache-2.0
// nvl72-operator: parses the flag table, sets up logging and signals, and
// runs the operator context until SIGTERM (graceful: controllers, Lease,
// servers) or a lost election (exit 1). A second signal exits at once.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvl72/alloc.h"
#include "nvl72/log.h"
#include "nvl72/operator.h"
#include "nvl72/timeutil.h"

struct sig_ctx {
	struct op *op;
	sigset_t set;
	int64_t timeout_ms;
};

/* Signals are taken synchronously by this thread, so the stop request runs
 * in a normal thread context. */
static void *signal_main(void *arg)
{
	struct sig_ctx *s = arg;
	int sig = 0;
	while (sigwait(&s->set, &sig) != 0)
		;
	log_info("operator", "shutting down", "signal=%d timeout_ms=%lld", sig,
	         (long long)s->timeout_ms);
	op_request_stop(s->op);
	/* A second signal, or a shutdown that overruns its timeout, ends
	 * the process at once. */
	if (s->timeout_ms > 0) {
		/* EINTR (a sanitizer stopping the world at exit) is no timeout. */
		int64_t end = time_mono_ms() + s->timeout_ms, left;
		sig = -1;
		while ((left = end - time_mono_ms()) > 0) {
			struct timespec ts = {.tv_sec = left / 1000,
			                      .tv_nsec = (long)(left % 1000) * 1000000L};
			sig = sigtimedwait(&s->set, NULL, &ts);
			if (sig > 0 || errno != EINTR)
				break;
		}
	} else {
		while (sigwait(&s->set, &sig) != 0)
			;
	}
	log_warn("operator",
	         sig > 0 ? "second signal: exiting now" : "shutdown timed out: exiting now",
	         "signal=%d", sig);
	_exit(1);
	return NULL;
}

int main(int argc, char **argv)
{
	struct op_config cfg = {0};
	struct sig_ctx sc = {0};
	struct op *op = NULL;
	char err[256] = "";
	enum flags_action act;
	enum log_level lvl = LOG_LVL_INFO;
	pthread_t sig_th;
	enum nv_err rc;

	if (op_flags_parse(argc, argv, &cfg, &act, err, sizeof(err)) != NV_OK) {
		fprintf(stderr, "nvl72-operator: %s\n", err);
		return 2;
	}
	if (act == FLAGS_HELP || act == FLAGS_HELP_MARKDOWN) {
		/* --help-markdown regenerates the flags section of docs/operator.md. */
		char *h = act == FLAGS_HELP ? op_flags_help("nvl72-operator") : op_flags_markdown();
		fputs(h, stdout);
		free(h);
		return 0;
	}
	if (act == FLAGS_VERSION) {
		printf("nvl72-operator %s\n", NVL72_VERSION);
		return 0;
	}
	alloc_large_blocks_unmapped();
	(void)log_level_parse(cfg.log_level, &lvl);
	log_set_level(lvl);
	log_set_debug(cfg.log_debug);
	log_set_format(strcmp(cfg.log_format, "json") == 0 ? LOG_FMT_JSON : LOG_FMT_TEXT);
	/* The admission webhook (src/webhook/webhook*.c) plugs in through
	 * its ops; the plug outlives op, whose webhook server borrows it. */
	struct op_webhook_plug *wh = op_webhook_plug_new();
	cfg.webhook = op_webhook_plug_ops(wh);

	sigemptyset(&sc.set);
	sigaddset(&sc.set, SIGTERM);
	sigaddset(&sc.set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sc.set, NULL); /* before any thread starts */
	signal(SIGPIPE, SIG_IGN);

	if ((rc = op_new(&cfg, &op)) != NV_OK) {
		log_error("operator", "start-up failed", "err=%s", nv_err_name(rc));
		op_webhook_plug_free(wh);
		return 1;
	}
	sc.op = op;
	sc.timeout_ms = cfg.shutdown_timeout_ms;
	pthread_create(&sig_th, NULL, signal_main, &sc);
	pthread_detach(sig_th);
	rc = op_run(op);
	op_free(op);
	op_webhook_plug_free(wh);
	if (rc == NV_E_STATE)
		return 1;
	if (rc != NV_OK) {
		log_error("operator", "stopped on error", "err=%s", nv_err_name(rc));
		return 1;
	}
	return 0;
}
