// SPDX-License-Identifier: Apache-2.0
// Integration suite for an operator start that fails half-way, against a
// real apiserver, under ASan+UBSan: the informers are running and feeding
// the controllers' queues when leader election refuses its settings, and
// op_run's early return followed by op_free must end cleanly every time.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/operator.h"

#define NODES 40
#define ROUNDS 12

static int passed, failed;

__attribute__((format(printf, 3, 4))) static void check(bool cond, const char *name,
                                                        const char *fmt, ...)
{
	char detail[400] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s - %s%s%s%s\n", cond ? "ok" : "not ok", name, cond ? "" : " (",
	       cond ? "" : detail, cond ? "" : ")");
	if (cond)
		passed++;
	else
		failed++;
	fflush(stdout);
}

/* Nodes labelled into one rack: the Node informer's handler queues the
 * rack for each of them as its first list arrives. */
static int nodes_create(void)
{
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_status st;
	int made = 0;

	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &c, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		exit(1);
	}
	for (int i = 0; i < NODES; i++) {
		char body[256];
		json_t *obj, *out = NULL;
		snprintf(body, sizeof(body),
		         "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
		         "\"opstart-%02d\",\"labels\":{\"nvl72.io/rack\":\"opstart\"}}}",
		         i);
		obj = json_loads(body, 0, NULL);
		enum nv_err rc = kube_create(c, &KUBE_RES_NODES, NULL, obj, &out, &st);
		made += rc == NV_OK || rc == NV_E_EXISTS;
		json_decref(obj);
		json_decref(out);
	}
	kube_client_free(c);
	return made;
}

int main(void)
{
	const char *kc = getenv("KUBECONFIG");
	static char a0[] = "nvl72-operator", a1[] = "--kubeconfig", a3[] = "--leader-elect=true",
	            a4[] = "--health-probe-bind-address=127.0.0.1:0",
	            a5[] = "--metrics-bind-address=127.0.0.1:0",
	            a6[] = "--dashboard-bind-address=127.0.0.1:0",
	            a7[] = "--webhook-bind-address=0";
	char *argv[] = {a0, a1, (char *)(uintptr_t)(kc ? kc : ""), a3, a4, a5, a6, a7, NULL};
	int n = nodes_create(), clean = 0;
	char err[256];

	check(n == NODES, "the labelled Nodes exist", "%d of %d", n, NODES);
	for (int r = 0; r < ROUNDS; r++) {
		struct op_config cfg;
		enum flags_action act;
		struct op *op = NULL;
		enum nv_err rc;

		memset(&cfg, 0, sizeof(cfg));
		if (op_flags_parse((int)ARRAY_LEN(argv) - 1, argv, &cfg, &act, err, sizeof(err)) !=
		    NV_OK) {
			check(false, "the flags parse", "%s", err);
			break;
		}
		/* Settings the flag checks refuse, so that leader election fails
		 * after the servers and informers have started. */
		cfg.renew_deadline_ms = cfg.lease_ms;
		if (op_new(&cfg, &op) != NV_OK) {
			check(false, "op_new", "round %d", r);
			break;
		}
		rc = op_run(op);
		op_free(op);
		clean += rc == NV_E_CONFIG;
	}
	check(clean == ROUNDS,
	      "an operator start that fails after its informers started returns and frees "
	      "cleanly",
	      "%d of %d rounds returned NV_E_CONFIG", clean, ROUNDS);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
