// SPDX-License-Identifier: Apache-2.0
// Integration suite for the drain on a real apiserver with kwok acting as
// the kubelet of fake Nodes (pods on them run, and graceful deletions
// finish): the checkpoint handshake (acknowledged pods go at once, silent
// ones at their deadline), gangs, PodDisruptionBudgets, forced deletion,
// pods that stay, and cordons owned by the drain or by someone else.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/drain.h"
#include "nvl72/timeutil.h"

extern char **environ;

static int failures;
static struct kube_client *C;
static const struct kube_res PDBS = {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget",
                                     true};
#define NS "team-a"
#define WAIT_MS 90000

__attribute__((format(printf, 3, 4))) static void check(bool cond, const char *name,
                                                        const char *fmt, ...)
{
	char detail[700] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s - %s%s%s%s\n", cond ? "ok" : "not ok", name, cond ? "" : " (",
	       cond ? "" : detail, cond ? "" : ")");
	failures += !cond;
	fflush(stdout);
}

/* ---- kwok, the kubelet of the fake Nodes ---- */

static pid_t kwok_pid;

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static bool kwok_start(void)
{
	const char *bin = getenv("NVL72_K8S_BIN"), *kc = getenv("KUBECONFIG");
	const char *dir = getenv("NVL72_CLUSTER_DIR");
	char exe[1024], kcarg[1100], addr[64], logf[1024];
	posix_spawn_file_actions_t fa;
	int rc;

	if (bin == NULL || kc == NULL) {
		printf("not ok - kwok: NVL72_K8S_BIN and KUBECONFIG must be set\n");
		return false;
	}
	snprintf(exe, sizeof(exe), "%s/kwok", bin);
	snprintf(kcarg, sizeof(kcarg), "--kubeconfig=%s", kc);
	snprintf(addr, sizeof(addr), "--server-address=127.0.0.1:%d", free_port());
	snprintf(logf, sizeof(logf), "%s/%s", dir ? dir : ".", dir ? "logs/kwok.log" : "kwok.log");
	char *argv[] = {exe,
	                kcarg,
	                (char *)"--manage-all-nodes=false",
	                (char *)"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
	                (char *)"--manage-nodes-with-label-selector=",
	                (char *)"--manage-single-node=",
	                (char *)"--cidr=10.244.0.0/16",
	                (char *)"--node-ip=10.0.0.1",
	                (char *)"--node-lease-duration-seconds=40",
	                addr,
	                NULL};
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawn(&kwok_pid, exe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		printf("not ok - kwok: cannot start %s: %s\n", exe, strerror(rc));
		return false;
	}
	return true;
}

static void kwok_stop(void)
{
	if (kwok_pid > 0) {
		kill(kwok_pid, SIGTERM);
		waitpid(kwok_pid, NULL, 0);
	}
}

/* ---- objects ---- */

static void create(const struct kube_res *r, const char *ns, json_t *o)
{
	struct kube_status st;
	enum nv_err rc = kube_create(C, r, ns, o, NULL, &st);
	if (rc != NV_OK) {
		printf("not ok - create %s %s: %s\n", r->kind, jx_str_or(o, "metadata.name", ""),
		       st.message);
		exit(1);
	}
	json_decref(o);
}

static void node(const char *name, bool cordoned_by_other)
{
	json_t *n = json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:{s:s}},s:{s:b}}", "apiVersion", "v1",
	                      "kind", "Node", "metadata", "name", name, "annotations",
	                      "kwok.x-k8s.io/node", "fake", "labels", "type", "kwok", "spec",
	                      "unschedulable", cordoned_by_other);
	create(&KUBE_RES_NODES, NULL, n);
}

/* A pod bound to node; extra is merged into its metadata (labels,
 * annotations, ownerReferences). */
static void pod(const char *name, const char *on, json_t *extra)
{
	json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:[{s:s,s:s}],s:i}}", "apiVersion", "v1",
	                      "kind", "Pod", "metadata", "name", name, "namespace", NS, "spec",
	                      "nodeName", on, "containers", "name", "c", "image",
	                      "registry.example/app:1", "terminationGracePeriodSeconds", 5);
	if (extra) {
		json_object_update(json_object_get(p, "metadata"), extra);
		json_decref(extra);
	}
	create(&KUBE_RES_PODS, NS, p);
}

static json_t *get_pod(const char *name)
{
	struct kube_status st;
	json_t *p = NULL;
	return kube_get(C, &KUBE_RES_PODS, NS, name, &p, &st) == NV_OK ? p : NULL;
}

static json_t *get_node(const char *name)
{
	struct kube_status st;
	json_t *n = NULL;
	return kube_get(C, &KUBE_RES_NODES, NULL, name, &n, &st) == NV_OK ? n : NULL;
}

static const char *ann(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(jx_path(o, "metadata.annotations"), key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void pod_annotate(const char *name, const char *key, const char *value)
{
	struct kube_status st;
	const struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, value);
	if (kube_patch(C, &KUBE_RES_PODS, NS, name, &po, patch, NULL, &st) != NV_OK)
		printf("# annotate %s: %s\n", name, st.message);
	json_decref(patch);
}

enum pod_state { POD_GONE, POD_RUNNING };

/* Waits until the pod is gone or running (by kwok). */
static bool wait_pod(const char *name, enum pod_state want)
{
	int64_t end = time_mono_ms() + WAIT_MS;
	while (time_mono_ms() < end) {
		json_t *p = get_pod(name);
		bool ok = want == POD_GONE
		                  ? p == NULL
		                  : p && strcmp(jx_str_or(p, "status.phase", ""), "Running") == 0;
		json_decref(p);
		if (ok)
			return true;
		time_sleep_ms(200);
	}
	return false;
}

static bool pod_exists_untouched(const char *name)
{
	json_t *p = get_pod(name);
	bool ok = p && jx_path(p, "metadata.deletionTimestamp") == NULL;
	json_decref(p);
	return ok;
}

static bool pod_going(const char *name)
{
	json_t *p = get_pod(name);
	bool ok = p == NULL || jx_path(p, "metadata.deletionTimestamp") != NULL;
	json_decref(p);
	return ok;
}

static enum nv_err pass(struct kube_client *c, const char *const *nodes, unsigned n,
                        const struct drain_policy *p, struct drain_result *res)
{
	struct kube_status st;
	enum nv_err rc = drain_nodes(c, nodes, n, p, time_wall_ms(), res, &st);
	if (rc != NV_OK)
		printf("# drain_nodes: %s: %s\n", nv_err_name(rc), st.message);
	else
		printf("# pass: %s\n", res->message);
	return rc;
}

/* Passes until done, waiting as the result says (kwok finishes the
 * deletions). */
static bool drain_until_done(const char *const *nodes, unsigned n, const struct drain_policy *p,
                             struct drain_result *res)
{
	int64_t end = time_mono_ms() + WAIT_MS;
	while (time_mono_ms() < end) {
		if (pass(C, nodes, n, p, res) != NV_OK)
			return false;
		if (res->done)
			return true;
		int64_t wait = res->next_check_ms - time_wall_ms();
		time_sleep_ms(wait < 100 ? 100 : wait > 2000 ? 2000 : wait);
	}
	return false;
}

/* ---- the checkpoint handshake, gangs and pods that stay ---- */

static void test_checkpoint(void)
{
	const char *nodes[] = {"drain-n1", "drain-n2"};
	const struct drain_policy pol = {.mode = API_DRAIN_CHECKPOINT,
	                                 .checkpoint_deadline_ms = 8000,
	                                 .owner = "rackupgrade/it1",
	                                 .started_ms = time_wall_ms()};
	struct drain_result res;
	char slow_deadline[64] = "", g0_deadline[64] = "";

	node("drain-n1", false);
	node("drain-n2", false);
	pod("ack", "drain-n1", NULL);
	pod("slow", "drain-n1", NULL);
	pod("ds-agent", "drain-n1",
	    json_pack("{s:[{s:s,s:s,s:s,s:s,s:b}]}", "ownerReferences", "apiVersion", "apps/v1",
	              "kind", "DaemonSet", "name", "agent", "uid",
	              "0b1e7a4c-5d2f-4e8a-9c3b-6f1d2a7e8c90", "controller", 1));
	pod("static-web", "drain-n1",
	    json_pack("{s:{s:s}}", "annotations", "kubernetes.io/config.mirror", "5d41402abc4b"));
	pod("g0", "drain-n1", json_pack("{s:{s:s}}", "labels", DRAIN_LABEL_GANG, "job-g"));
	pod("g1", "drain-n2", json_pack("{s:{s:s}}", "labels", DRAIN_LABEL_GANG, "job-g"));
	const char *all[] = {"ack", "slow", "ds-agent", "static-web", "g0", "g1"};
	bool running = true;
	for (unsigned i = 0; i < 6; i++)
		running &= wait_pod(all[i], POD_RUNNING);
	check(running, "kwok runs the pods bound to its fake Nodes", "a pod did not reach Running");

	/* First pass: cordon, ask. */
	check(pass(C, nodes, 2, &pol, &res) == NV_OK && !res.done && res.waiting_ack == 4 &&
	              res.evicted == 0 && res.pods == 4,
	      "checkpoint pass 1 asks the four workload pods and evicts none",
	      "done=%d waiting=%d evicted=%d pods=%d: %s", res.done, res.waiting_ack, res.evicted,
	      res.pods, res.message);
	json_t *n1 = get_node("drain-n1");
	check(n1 && json_is_true(jx_path(n1, "spec.unschedulable")) &&
	              strcmp(ann(n1, DRAIN_ANN_CORDONED_BY) ? ann(n1, DRAIN_ANN_CORDONED_BY) : "",
	                     "rackupgrade/it1") == 0,
	      "the drain cordons its nodes and names itself", "node: %s",
	      n1 ? "not cordoned by rackupgrade/it1" : "missing");
	json_decref(n1);
	json_t *p = get_pod("slow");
	if (p && ann(p, DRAIN_ANN_CHECKPOINT))
		snprintf(slow_deadline, sizeof(slow_deadline), "%s", ann(p, DRAIN_ANN_CHECKPOINT));
	json_decref(p);
	p = get_pod("g0");
	if (p && ann(p, DRAIN_ANN_CHECKPOINT))
		snprintf(g0_deadline, sizeof(g0_deadline), "%s", ann(p, DRAIN_ANN_CHECKPOINT));
	json_decref(p);
	check(slow_deadline[0] && g0_deadline[0], "workload pods carry the checkpoint request",
	      "slow=%s g0=%s", slow_deadline, g0_deadline);
	json_t *ds = get_pod("ds-agent"), *mirror = get_pod("static-web");
	check(ds && mirror && !ann(ds, DRAIN_ANN_CHECKPOINT) && !ann(mirror, DRAIN_ANN_CHECKPOINT),
	      "DaemonSet and mirror pods are not asked", "one of them carries the request");
	json_decref(ds);
	json_decref(mirror);

	/* A fresh client with a longer deadline continues: no new request, the
	 * deadline written first stands. */
	{
		struct kube_config *cfg = NULL;
		struct kube_client *c2 = NULL;
		struct kube_status st;
		struct drain_policy longer = pol;
		longer.checkpoint_deadline_ms = 600000;
		time_sleep_ms(1100); /* a re-request would write a later second */
		if (kube_config_load(NULL, &cfg, &st) == NV_OK &&
		    kube_client_new(cfg, NULL, &c2, &st) == NV_OK) {
			enum nv_err rc = pass(c2, nodes, 2, &longer, &res);
			p = get_pod("slow");
			check(rc == NV_OK && res.waiting_ack == 4 && p &&
			              strcmp(ann(p, DRAIN_ANN_CHECKPOINT), slow_deadline) == 0,
			      "a fresh client continuing the drain keeps the first deadline",
			      "rc=%d waiting=%d deadline now %s, first %s", rc, res.waiting_ack,
			      p ? ann(p, DRAIN_ANN_CHECKPOINT) : "-", slow_deadline);
			json_decref(p);
		} else {
			check(false, "a fresh client continuing the drain keeps the first deadline",
			      "client: %s", st.message);
		}
		kube_client_free(c2);
	}

	/* ack acknowledges: it goes on the next pass, the others wait. */
	pod_annotate("ack", DRAIN_ANN_CHECKPOINT_ACK, "saved step 1200");
	pass(C, nodes, 2, &pol, &res);
	check(res.evicted == 1 && pod_going("ack") && pod_exists_untouched("slow"),
	      "an acknowledged pod is evicted on the pass after its acknowledgement",
	      "evicted=%d: %s", res.evicted, res.message);
	check(wait_pod("ack", POD_GONE), "the evicted pod is gone (kwok ends it)",
	      "still there after %d ms", WAIT_MS);

	/* Half a gang acknowledges: both stay. */
	pod_annotate("g0", DRAIN_ANN_CHECKPOINT_ACK, "1");
	pass(C, nodes, 2, &pol, &res);
	check(res.evicted == 0 && res.held == 1 && pod_exists_untouched("g0") &&
	              strstr(res.message, "held with their gang") != NULL,
	      "a gang member that acknowledged waits for the rest of its gang",
	      "evicted=%d held=%d: %s", res.evicted, res.held, res.message);
	pod_annotate("g1", DRAIN_ANN_CHECKPOINT_ACK, "1");
	pass(C, nodes, 2, &pol, &res);
	check(res.evicted == 2 && pod_going("g0") && pod_going("g1"),
	      "the gang is evicted together once every member acknowledged", "evicted=%d: %s",
	      res.evicted, res.message);

	/* slow never answers: kept until its deadline, evicted after it. */
	int64_t deadline = 0;
	time_parse_rfc3339(slow_deadline, &deadline);
	if (time_wall_ms() < deadline - 1000) {
		pass(C, nodes, 2, &pol, &res);
		check(pod_exists_untouched("slow") && res.waiting_ack == 1 &&
		              res.next_check_ms <= deadline,
		      "a silent pod stays until its deadline, and the next check is no later",
		      "waiting=%d next=%lld deadline=%lld", res.waiting_ack,
		      (long long)res.next_check_ms, (long long)deadline);
	}
	while (time_wall_ms() < deadline)
		time_sleep_ms(deadline - time_wall_ms());
	pass(C, nodes, 2, &pol, &res);
	check(res.evicted == 1 && pod_going("slow"), "a silent pod is evicted at its deadline",
	      "evicted=%d: %s", res.evicted, res.message);

	check(drain_until_done(nodes, 2, &pol, &res) && res.pods == 0 && res.terminating == 0,
	      "the drain reports done once the evicted pods are gone", "%s", res.message);
	check(pod_exists_untouched("ds-agent") && pod_exists_untouched("static-web"),
	      "the DaemonSet pod and the mirror pod stay", "one of them was evicted");

	struct kube_status st;
	check(drain_release(C, nodes, 2, "rackupgrade/it1", NULL, &st) == NV_OK,
	      "drain_release succeeds", "%s", st.message);
	n1 = get_node("drain-n1");
	check(n1 && !json_is_true(jx_path(n1, "spec.unschedulable")) &&
	              ann(n1, DRAIN_ANN_CORDONED_BY) == NULL,
	      "drain_release uncordons its nodes and drops its mark", "still cordoned or marked");
	json_decref(n1);
}

/* ---- PodDisruptionBudgets, force, a foreign cordon ---- */

/* The disruption controller is not part of the test control plane: the
 * budget's status is written here as it would write it. */
static void pdb(const char *name, const char *app, int pods)
{
	struct kube_status st;
	const struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .subresource = "status"};
	json_t *b = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:i,s:{s:{s:s}}}}", "apiVersion",
	                      "policy/v1", "kind", "PodDisruptionBudget", "metadata", "name", name,
	                      "namespace", NS, "spec", "minAvailable", pods, "selector",
	                      "matchLabels", "app", app),
	       *got = NULL, *status;
	if (kube_create(C, &PDBS, NS, b, &got, &st) != NV_OK) {
		printf("not ok - create PodDisruptionBudget %s: %s\n", name, st.message);
		exit(1);
	}
	status = json_pack("{s:{s:I,s:i,s:i,s:i,s:i}}", "status", "observedGeneration",
	                   (json_int_t)json_integer_value(jx_path(got, "metadata.generation")),
	                   "disruptionsAllowed", 0, "currentHealthy", pods, "desiredHealthy", pods,
	                   "expectedPods", pods);
	if (kube_patch(C, &PDBS, NS, name, &po, status, NULL, &st) != NV_OK)
		printf("# PodDisruptionBudget %s status: %s\n", name, st.message);
	json_decref(status);
	json_decref(got);
	json_decref(b);
}

static void test_pdb_and_foreign_cordon(void)
{
	const char *nodes[] = {"drain-n3", "drain-n4"};
	const struct drain_policy pol = {.mode = API_DRAIN_EVICT, .owner = "rackupgrade/it2"};
	struct drain_result res;
	struct kube_status st;

	node("drain-n3", true); /* cordoned by someone else beforehand */
	node("drain-n4", false);
	pod("web-0", "drain-n3", json_pack("{s:{s:s}}", "labels", "app", "web"));
	pod("web-1", "drain-n4", json_pack("{s:{s:s}}", "labels", "app", "web"));
	check(wait_pod("web-0", POD_RUNNING) && wait_pod("web-1", POD_RUNNING),
	      "the guarded pods run", "not Running");
	pdb("web", "web", 2);

	int64_t before = time_wall_ms();
	check(pass(C, nodes, 2, &pol, &res) == NV_OK && !res.done && res.blocked == 2 &&
	              res.evicted == 0 && res.next_check_ms > before,
	      "a PodDisruptionBudget that forbids eviction holds the drain",
	      "done=%d blocked=%d evicted=%d next=%lld: %s", res.done, res.blocked, res.evicted,
	      (long long)res.next_check_ms, res.message);
	check(strstr(res.message, "eviction refused by a PodDisruptionBudget") != NULL &&
	              strstr(res.message, "pod " NS "/web-") != NULL &&
	              strstr(res.message, "needs 2 healthy pods") != NULL,
	      "the result names the pod and the budget's refusal", "%s", res.message);
	check(pod_exists_untouched("web-0") && pod_exists_untouched("web-1"),
	      "pods guarded by the budget stay", "one was deleted");

	/* Forced: deleted without the Eviction API, and the result says so. */
	struct drain_policy forced = pol;
	forced.force = true;
	const char *n4[] = {"drain-n4"};
	check(pass(C, n4, 1, &forced, &res) == NV_OK && res.evicted == 1 && res.blocked == 0 &&
	              strstr(res.message, "forced") != NULL && pod_going("web-1"),
	      "a forced drain deletes past the budget and says so", "evicted=%d: %s", res.evicted,
	      res.message);

	/* The budget goes: the drain proceeds. */
	check(kube_delete(C, &PDBS, NS, "web", &(struct kube_delete_opts){.grace_period_s = -1},
	                  &st) == NV_OK,
	      "delete the PodDisruptionBudget", "%s", st.message);
	check(drain_until_done(nodes, 2, &pol, &res), "without the budget the drain completes",
	      "%s", res.message);
	check(!pod_exists_untouched("web-0"), "the guarded pod was evicted",
	      "web-0 is still there");

	check(drain_release(C, nodes, 2, "rackupgrade/it2", NULL, &st) == NV_OK,
	      "drain_release of the second drain succeeds", "%s", st.message);
	json_t *n3 = get_node("drain-n3"), *n4n = get_node("drain-n4");
	check(n3 && json_is_true(jx_path(n3, "spec.unschedulable")),
	      "a node cordoned by someone else stays cordoned after drain_release",
	      "drain-n3 was uncordoned");
	check(n4n && !json_is_true(jx_path(n4n, "spec.unschedulable")),
	      "the drain's own cordon is lifted", "drain-n4 still cordoned");
	json_decref(n3);
	json_decref(n4n);
}

/* ---- release ends the handshake ---- */

static void test_release_clears_handshake(void)
{
	const char *nodes[] = {"drain-n5"};
	const struct drain_policy pol = {.mode = API_DRAIN_CHECKPOINT,
	                                 .checkpoint_deadline_ms = 600000,
	                                 .owner = "rackupgrade/it4"};
	struct drain_result res;
	struct kube_status st;

	node("drain-n5", false);
	pod("keep", "drain-n5", NULL);
	check(wait_pod("keep", POD_RUNNING), "the pod of an abandoned drain runs", "not Running");
	pass(C, nodes, 1, &pol, &res);
	pod_annotate("keep", DRAIN_ANN_CHECKPOINT_ACK, "too late");
	json_t *p = get_pod("keep");
	bool asked = p && ann(p, DRAIN_ANN_CHECKPOINT) != NULL;
	json_decref(p);
	/* The upgrade is aborted before the next pass: release. */
	check(asked && drain_release(C, nodes, 1, "rackupgrade/it4", NULL, &st) == NV_OK,
	      "an abandoned drain is released", "asked=%d: %s", asked, st.message);
	p = get_pod("keep");
	check(p && jx_path(p, "metadata.deletionTimestamp") == NULL &&
	              ann(p, DRAIN_ANN_CHECKPOINT) == NULL &&
	              ann(p, DRAIN_ANN_CHECKPOINT_ACK) == NULL,
	      "drain_release drops the handshake from the pods that stayed",
	      "the pod still carries it or is going");
	json_decref(p);
}

/* ---- the Node's label in the cordon's write ---- */

static char *node_rv(const char *name, json_t **obj)
{
	json_t *n = NULL;
	struct kube_status st;
	char *rv;
	if (kube_get(C, &KUBE_RES_NODES, NULL, name, &n, &st) != NV_OK)
		return xstrdup("");
	rv = xstrdup(jx_str_or(n, "metadata.resourceVersion", ""));
	if (obj)
		*obj = n;
	else
		json_decref(n);
	return rv;
}

struct node_writes {
	int modified;
	json_t *first; /* the first such write's object */
	json_t *prev;  /* the version before the next event */
};

/* What a drain or a release writes of a Node. */
static bool drain_fields_equal(const json_t *a, const json_t *b)
{
	static const char *const paths[] = {"spec.unschedulable", "metadata.labels",
	                                    "metadata.annotations"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (!json_equal(jx_path(a, paths[i]), jx_path(b, paths[i])))
			return false;
	return true;
}

/* Counts the updates that change what a drain writes: kwok's own status
 * updates of the Node (its heartbeat) come in the same watch. */
static enum nv_err count_write(void *ud, enum kube_event_type type, json_t *obj)
{
	struct node_writes *w = ud;
	if (type != KUBE_EV_MODIFIED)
		return NV_OK;
	if ((w->prev == NULL || !drain_fields_equal(w->prev, obj)) && w->modified++ == 0)
		w->first = json_incref(obj);
	json_decref(w->prev);
	w->prev = json_incref(obj);
	return NV_OK;
}

/* The writes to node after the version prev (its resourceVersion rv) that
 * change its cordon, labels or annotations: the watch replays them from
 * the apiserver's cache, and the server ends it after a second. */
static struct node_writes writes_since(const char *node, const char *rv, const json_t *prev)
{
	char sel[96];
	struct node_writes w = {.prev = json_incref((json_t *)prev)};
	struct kube_status st;
	snprintf(sel, sizeof(sel), "metadata.name=%s", node);
	const struct kube_watch_opts o = {.field_selector = sel,
	                                  .resource_version = rv,
	                                  .timeout_s = 1,
	                                  .no_bookmarks = true};
	(void)kube_watch(C, &KUBE_RES_NODES, NULL, &o, count_write, &w, NULL, &st);
	json_decref(w.prev);
	w.prev = NULL;
	return w;
}

/* A drain that carries a label sets it and the cordon in one write, also
 * when it starts from a stale cached copy (the conflict makes it read the
 * Node); the release removes both in one write. */
static void test_label_with_cordon(void)
{
	const char *nodes[] = {"drain-n6"};
	json_t *stale = NULL, *fresh = NULL, *before = NULL,
	       *label = json_pack("{s:s}", "nvl72.io/maintenance", "Draining");
	json_t *unlabel = json_pack("{s:n}", "nvl72.io/maintenance");
	json_t *other = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "other", "x");
	struct drain_result res;
	struct kube_status st;
	struct node_writes w;
	char *rv;

	node("drain-n6", false);
	free(node_rv("drain-n6", &stale));
	/* Someone else writes: the copy in hand is stale now. */
	check(kube_patch(C, &KUBE_RES_NODES, NULL, "drain-n6",
	                 &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, other, NULL,
	                 &st) == NV_OK,
	      "another writer labels the Node", "%s", st.message);
	rv = node_rv("drain-n6", &before);
	const json_t *cached[] = {stale};
	struct drain_policy pol = {.mode = API_DRAIN_EVICT,
	                           .owner = "rackupgrade/it6",
	                           .write = {.cached = cached, .labels = label}};
	check(pass(C, nodes, 1, &pol, &res) == NV_OK && res.done,
	      "a drain from a stale cached Node completes", "done=%d", res.done);
	w = writes_since("drain-n6", rv, before);
	check(w.modified == 1 && json_is_true(jx_path(w.first, "spec.unschedulable")) &&
	              strcmp(jx_str_or(w.first, "metadata.labels.nvl72\\.io/maintenance", ""),
	                     "Draining") == 0 &&
	              strcmp(jx_str_or(w.first, "metadata.labels.other", ""), "x") == 0,
	      "the cordon and the label are one write, keeping the other writer's label",
	      "%d writes; first: unschedulable=%d", w.modified,
	      json_is_true(jx_path(w.first, "spec.unschedulable")));
	json_decref(w.first);
	free(rv);

	rv = node_rv("drain-n6", &fresh);
	const json_t *now[] = {fresh};
	const struct drain_node_write rw = {.cached = now, .labels = unlabel};
	check(drain_release(C, nodes, 1, "rackupgrade/it6", &rw, &st) == NV_OK,
	      "the release with a label removal succeeds", "%s", st.message);
	w = writes_since("drain-n6", rv, fresh);
	check(w.modified == 1 && !json_is_true(jx_path(w.first, "spec.unschedulable")) &&
	              jx_path(w.first, "metadata.labels.nvl72\\.io/maintenance") == NULL,
	      "the uncordon and the label's removal are one write", "%d writes", w.modified);
	json_decref(w.first);
	free(rv);
	json_decref(stale);
	json_decref(before);
	json_decref(fresh);
	json_decref(label);
	json_decref(unlabel);
	json_decref(other);
}

/* ---- bad input ---- */

static void test_bad_input(void)
{
	const char *nodes[] = {"drain-n1"};
	const char *none[] = {"drain-missing"};
	const struct drain_policy noowner = {.mode = API_DRAIN_EVICT};
	const struct drain_policy pol = {.mode = API_DRAIN_EVICT, .owner = "rackupgrade/it3"};
	struct drain_result res;
	struct kube_status st;

	check(drain_nodes(C, nodes, 1, &noowner, time_wall_ms(), &res, &st) == NV_E_INVAL &&
	              strstr(st.message, "owner") != NULL,
	      "a drain without an owner is refused", "%s", st.message);
	check(drain_nodes(C, none, 1, &pol, time_wall_ms(), &res, &st) == NV_E_NOT_FOUND &&
	              strstr(st.message, "drain-missing") != NULL,
	      "a missing node is an error naming it", "%s", st.message);
	check(drain_release(C, none, 1, "rackupgrade/it3", NULL, &st) == NV_OK,
	      "releasing a node that is gone is not an error", "%s", st.message);
}

int main(void)
{
	struct kube_config *cfg = NULL;
	struct kube_status st;

	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &C, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		return 1;
	}
	if (!kwok_start())
		return 1;
	create(&KUBE_RES_NAMESPACES, NULL,
	       json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
	                 "name", NS));
	test_checkpoint();
	test_pdb_and_foreign_cordon();
	test_release_clears_handshake();
	test_label_with_cordon();
	test_bad_input();
	kwok_stop();
	kube_client_free(C);
	printf("%s - drain suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
