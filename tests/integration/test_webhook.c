// SPDX-License-Identifier: Apache-2.0
// Integration suite for the admission webhook against a real kube-apiserver:
// this program serves the webhook itself (informers, HTTPS on 127.0.0.1,
// the certificate manager) and proves with real `kubectl apply` that
// cross-object faults are refused with a clear message, valid objects pass,
// a rack takes one upgrade at a time, an UpgradeApproval carries the real
// requesting user and is bound to the RackUpgrade it names (an upgrade
// recreated under the same name does not inherit it), a Rack cannot leave
// an approving layer without a window owner, and the Secret and caBundle
// are filled and reused after a restart.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/webhook.h"
#include "nvl72/web.h"

#define NS "nvl72-webhook-test"
#define CFG_NAME "nvl72-webhook-test"
#define SECRET "nvl72-webhook-test-tls"
#define OUT_MAX ((size_t)256 << 10)

static const struct kube_res RACKS = {"nvl72.io", "v1alpha1", "racks", "Rack", false};
static const struct kube_res PARTS = {"nvl72.io", "v1alpha1", "rackpartitions", "RackPartition",
                                      false};
static const struct kube_res MATRICES = {"nvl72.io", "v1alpha1", "compatibilitymatrices",
                                         "CompatibilityMatrix", false};
static const struct kube_res APPROVALS = {"nvl72.io", "v1alpha1", "upgradeapprovals",
                                          "UpgradeApproval", false};
static const struct kube_res UPGRADES = {"nvl72.io", "v1alpha1", "rackupgrades", "RackUpgrade",
                                         false};

static int passed, failed;
static const char *kubectl;
static const char *kubeconfig;
static char viewer_kubeconfig[4096];

static void check(bool cond, const char *name, const char *detail)
{
	if (cond) {
		passed++;
		printf("ok - %s\n", name);
	} else {
		failed++;
		printf("not ok - %s%s%s\n", name, detail ? ": " : "", detail ? detail : "");
	}
	fflush(stdout);
}

/* ---- running kubectl ------------------------------------------------------ */

/* Runs argv with input on stdin, stdout and stderr into out; the exit
 * status, or -1 when it ran past timeout_ms (then it is killed). */
static int run(char *const argv[], const char *input, struct buf *out, int64_t timeout_ms)
{
	int in[2], o[2];
	if (pipe(in) != 0 || pipe(o) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(o[1], 1);
		dup2(o[1], 2);
		close(in[0]);
		close(in[1]);
		close(o[0]);
		close(o[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	signal(SIGPIPE, SIG_IGN);
	if (input != NULL && write(in[1], input, strlen(input)) < 0)
		fprintf(stderr, "write to %s: %s\n", argv[0], strerror(errno));
	close(in[1]);
	int64_t deadline = time_mono_ms() + timeout_ms;
	char chunk[4096];
	for (;;) {
		struct pollfd p = {.fd = o[0], .events = POLLIN};
		int64_t left = deadline - time_mono_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = read(o[0], chunk, sizeof(chunk));
		if (n <= 0)
			break;
		(void)buf_append(out, chunk, (size_t)n);
	}
	close(o[0]);
	int status = 0;
	if (time_mono_ms() >= deadline) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* kubectl with the admin kubeconfig (or the viewer's), args NULL-ended. */
static int kctl(const char *as_kubeconfig, const char *input, struct buf *out, ...)
{
	char *argv[32];
	int n = 0;
	char kc[4200];
	snprintf(kc, sizeof(kc), "--kubeconfig=%s", as_kubeconfig ? as_kubeconfig : kubeconfig);
	argv[n++] = (char *)(uintptr_t)kubectl;
	argv[n++] = kc;
	va_list ap;
	va_start(ap, out);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 31)
		argv[n++] = (char *)(uintptr_t)a;
	va_end(ap);
	argv[n] = NULL;
	buf_reset(out);
	return run(argv, input, out, 60000);
}

static int apply_json(const char *as, const json_t *obj, struct buf *out)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	int rc = kctl(as, text, out, "apply", "-f", "-", NULL);
	free(text);
	return rc;
}

static json_t *load(const char *path)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (j == NULL) {
		fprintf(stderr, "%s: %s\n", path, jerr.text);
		exit(2);
	}
	return j;
}

static bool has(const struct buf *b, const char *text)
{
	return strstr(buf_str(b), text) != NULL;
}

/* ---- the webhook under test ----------------------------------------------- */

struct server {
	struct kube_client *client;
	struct webhook_informers infs;
	struct webhook *wh;
	struct webhook_cert *cert;
	struct web_server *web;
	int port;
};

static const char *const extra_ips[] = {"127.0.0.1", NULL};

static enum nv_err server_start(struct server *s, int port)
{
	struct kube_status st;
	struct webhook_cert_config cc = {
	        .client = s->client,
	        .ns = NS,
	        .secret = SECRET,
	        .service = "nvl72-operator",
	        .configuration = CFG_NAME,
	        .extra_ips = extra_ips,
	        .resync_ms = 2000,
	};
	enum nv_err rc = webhook_cert_new(&cc, &s->cert);
	if (rc == NV_OK)
		rc = webhook_cert_ensure(s->cert, &st);
	if (rc != NV_OK) {
		fprintf(stderr, "certificate: %s %s\n", nv_err_name(rc), st.message);
		return rc;
	}
	struct webhook_config wc = {.cache = &webhook_informer_cache, .cache_arg = &s->infs};
	struct web_config web = {
	        .name = "webhook",
	        .bind_addr = "127.0.0.1",
	        .port = port,
	        .tls_cert_pem = webhook_cert_pem(s->cert),
	        .tls_key_pem = webhook_cert_key_pem(s->cert),
	        .body_max = 3 << 20,
	};
	if ((rc = webhook_new(&wc, &s->wh)) != NV_OK ||
	    (rc = web_server_new(&web, &s->web)) != NV_OK ||
	    (rc = webhook_register(s->web, s->wh)) != NV_OK ||
	    (rc = web_server_start(s->web)) != NV_OK || (rc = webhook_cert_start(s->cert)) != NV_OK)
		return rc;
	s->port = web_server_port(s->web);
	return NV_OK;
}

static void server_stop(struct server *s)
{
	web_server_free(s->web);
	webhook_free(s->wh);
	webhook_cert_free(s->cert);
	s->web = NULL;
	s->wh = NULL;
	s->cert = NULL;
}

static enum nv_err informers_start(struct server *s)
{
	const struct kube_res *res[WEBHOOK__KINDS] = {
	        [WEBHOOK_RACKS] = &RACKS,          [WEBHOOK_PARTITIONS] = &PARTS,
	        [WEBHOOK_MATRICES] = &MATRICES,    [WEBHOOK_UPGRADES] = &UPGRADES,
	        [WEBHOOK_NODES] = &KUBE_RES_NODES,
	};
	// As the operator's plug: misses are read through, upgrades listed live.
	s->infs.client = s->client;
	for (int k = 0; k < WEBHOOK__KINDS; k++) {
		struct kube_informer_opts o = {.res = res[k]};
		enum nv_err rc = kube_informer_new(s->client, &o, &s->infs.inf[k]);
		if (rc == NV_OK)
			rc = kube_informer_start(s->infs.inf[k]);
		if (rc != NV_OK || !kube_informer_wait_synced(s->infs.inf[k], 30000))
			return rc != NV_OK ? rc : NV_E_TIMEOUT;
	}
	return NV_OK;
}

/* Waits until the informer of kind holds name (the webhook judges against
 * what the cache holds). */
static bool wait_cached(struct server *s, enum webhook_kind kind, const char *name)
{
	for (int i = 0; i < 200; i++) {
		json_t *o = kube_informer_get(s->infs.inf[kind], name);
		json_decref(o);
		if (o != NULL)
			return true;
		time_sleep_ms(50);
	}
	return false;
}

static char *configurations_yaml(int port)
{
	return xasprintf(
	        "apiVersion: admissionregistration.k8s.io/v1\n"
	        "kind: ValidatingWebhookConfiguration\n"
	        "metadata: {name: " CFG_NAME "}\n"
	        "webhooks:\n"
	        "- name: validate.nvl72.io\n"
	        "  admissionReviewVersions: [v1]\n"
	        "  sideEffects: None\n"
	        "  failurePolicy: Fail\n"
	        "  timeoutSeconds: 10\n"
	        "  clientConfig: {url: \"https://127.0.0.1:%d/validate\"}\n"
	        "  rules:\n"
	        "  - apiGroups: [nvl72.io]\n"
	        "    apiVersions: [v1alpha1]\n"
	        "    operations: [CREATE, UPDATE]\n"
	        "    resources: [compatibilitymatrices, racks, rackpartitions, rackupgrades]\n"
	        "    scope: \"*\"\n"
	        "---\n"
	        "apiVersion: admissionregistration.k8s.io/v1\n"
	        "kind: MutatingWebhookConfiguration\n"
	        "metadata: {name: " CFG_NAME "}\n"
	        "webhooks:\n"
	        "- name: stamp-approval.nvl72.io\n"
	        "  admissionReviewVersions: [v1]\n"
	        "  sideEffects: None\n"
	        "  failurePolicy: Fail\n"
	        "  reinvocationPolicy: Never\n"
	        "  timeoutSeconds: 10\n"
	        "  clientConfig: {url: \"https://127.0.0.1:%d/mutate\"}\n"
	        "  rules:\n"
	        "  - apiGroups: [nvl72.io]\n"
	        "    apiVersions: [v1alpha1]\n"
	        "    operations: [CREATE]\n"
	        "    resources: [upgradeapprovals]\n"
	        "    scope: Cluster\n",
	        port, port);
}

static const char *rbac_yaml =
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: ClusterRole\n"
        "metadata: {name: nvl72-webhook-test-approver}\n"
        "rules:\n"
        "- apiGroups: [nvl72.io]\n"
        "  resources: [upgradeapprovals]\n"
        "  verbs: [create, get]\n"
        "---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: ClusterRoleBinding\n"
        "metadata: {name: nvl72-webhook-test-approver}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "
        "nvl72-webhook-test-approver}\n"
        "subjects:\n"
        "- {apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}\n";

/* A kubeconfig that authenticates with the viewer's token file only. */
static bool viewer_kubeconfig_write(const char *dir, const char *server)
{
	snprintf(viewer_kubeconfig, sizeof(viewer_kubeconfig), "%s/viewer-webhook.kubeconfig", dir);
	FILE *f = fopen(viewer_kubeconfig, "w");
	if (f == NULL)
		return false;
	fprintf(f,
	        "apiVersion: v1\nkind: Config\n"
	        "clusters:\n- name: c\n  cluster:\n    server: %s\n"
	        "    certificate-authority: %s/pki/ca.crt\n"
	        "users:\n- name: viewer\n  user:\n    tokenFile: %s/pki/viewer.token\n"
	        "contexts:\n- name: v\n  context: {cluster: c, user: viewer}\n"
	        "current-context: v\n",
	        server, dir, dir);
	return fclose(f) == 0;
}

/* ---- the cases ------------------------------------------------------------ */

static json_t *rack_r08(void)
{
	json_t *r = load("tests/data/api/rack-gb300-r07.json");
	jx_set_str(r, "metadata.name", "gb300-r08");
	jx_set_str(r, "spec.chassisSerial", "1821124000043");
	json_t *trays = jx_path(r, "spec.computeTrays");
	for (size_t i = 0; i < json_array_size(trays); i++) {
		char node[32];
		snprintf(node, sizeof(node), "gb300-r08-t%02zu", i + 1);
		json_object_set_new(json_array_get(trays, i), "node", json_string(node));
	}
	json_t *sw = jx_path(r, "spec.switchTrays");
	for (size_t i = 0; i < json_array_size(sw); i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.40.8.%zu", 101 + i);
		json_object_set_new(json_array_get(sw, i), "oobAddress", json_string(a));
		snprintf(a, sizeof(a), "10.41.8.%zu", 101 + i);
		json_object_set_new(json_array_get(sw, i), "bmcAddress", json_string(a));
	}
	return r;
}

static void test_valid_objects_pass(struct server *s, struct buf *out)
{
	json_t *m = load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	int rc = apply_json(NULL, m, out);
	json_decref(m);
	check(rc == 0 && wait_cached(s, WEBHOOK_MATRICES, "gb300-2026.10"),
	      "a valid CompatibilityMatrix passes", buf_str(out));
	json_t *r = load("tests/data/api/rack-gb300-r07.json");
	rc = apply_json(NULL, r, out);
	json_decref(r);
	check(rc == 0 && wait_cached(s, WEBHOOK_RACKS, "gb300-r07"), "a valid Rack passes",
	      buf_str(out));
	const char *parts[] = {"tests/data/api/rackpartition-gb300-r07-a.json",
	                       "tests/data/api/rackpartition-gb300-r07-b.json"};
	bool ok = true;
	for (int i = 0; i < 2; i++) {
		json_t *p = load(parts[i]);
		ok = ok && apply_json(NULL, p, out) == 0 &&
		     wait_cached(s, WEBHOOK_PARTITIONS, jx_str_or(p, "metadata.name", ""));
		json_decref(p);
	}
	check(ok, "two valid RackPartitions pass", buf_str(out));
	json_t *u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	rc = apply_json(NULL, u, out);
	json_decref(u);
	check(rc == 0, "a valid RackUpgrade passes", buf_str(out));
}

static void test_refusals(struct buf *out)
{
	json_t *p = load("tests/data/api/rackpartition-gb300-r07-b.json");
	jx_set_str(p, "metadata.name", "gb300-r07-c");
	jx_set_take(p, "spec.trays", json_pack("[i, i]", 9, 10));
	int rc = apply_json(NULL, p, out);
	json_decref(p);
	check(rc != 0 && has(out, "denied the request") &&
	              has(out, "RackPartition \"gb300-r07-c\": spec.trays: tray 9 of rack "
	                       "\"gb300-r07\" is already in partition \"gb300-r07-a\""),
	      "an overlapping partition is refused with a clear message", buf_str(out));

	json_t *r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.computeTrays"), 4), "node",
	                    json_string("gb300-r07-t05"));
	rc = apply_json(NULL, r, out);
	json_decref(r);
	check(rc != 0 && has(out, "Rack \"gb300-r08\": spec.computeTrays[4].node: node "
	                          "\"gb300-r07-t05\" is already tray 5 of rack \"gb300-r07\""),
	      "a Node in two racks is refused with a clear message", buf_str(out));

	json_t *u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	jx_set_str(u, "metadata.name", "gb300-r07-r590");
	jx_set_str(u, "spec.target.stack", "gb300-r590-1");
	rc = apply_json(NULL, u, out);
	json_decref(u);
	check(rc != 0 &&
	              has(out, "RackUpgrade \"gb300-r07-r590\": spec.target.stack: stack "
	                       "\"gb300-r590-1\" is not in CompatibilityMatrix \"gb300-2026.10\""),
	      "an upgrade to a stack missing from the matrix is refused", buf_str(out));

	// An approving layer without a window owner would let nobody (before:
	// anybody) approve it: the CRD refuses it.
	r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.responsibilities"), 1), "windowOwner",
	                    json_string(""));
	rc = apply_json(NULL, r, out);
	json_decref(r);
	check(rc != 0 && has(out, "spec.responsibilities[1].windowOwner") &&
	              has(out, "windowOwner is required when approvalRequired is true"),
	      "a Rack whose approving fabric layer has an empty windowOwner is refused",
	      buf_str(out));

	r = rack_r08();
	rc = apply_json(NULL, r, out);
	json_decref(r);
	check(rc == 0, "a second rack with nodes of its own passes", buf_str(out));
}

/* Whether the cached gb300-r07 has a windowOwner for layer node. */
static bool cached_node_owner(struct server *s)
{
	json_t *o = kube_informer_get(s->infs.inf[WEBHOOK_RACKS], "gb300-r07");
	bool has_owner = false;
	size_t i;
	json_t *e;
	json_array_foreach(jx_path(o, "spec.responsibilities"), i, e)
		if (strcmp(jx_str_or(e, "layer", ""), "node") == 0)
			has_owner = jx_str_or(e, "windowOwner", "")[0] != '\0';
	json_decref(o);
	return has_owner;
}

static bool wait_node_owner(struct server *s, bool want)
{
	for (int i = 0; i < 200; i++) {
		if (cached_node_owner(s) == want)
			return true;
		time_sleep_ms(50);
	}
	return false;
}

/* The node layer (approvalRequired false) without a window owner: an
 * upgrade over a manual edge, which asks node to approve too, is refused,
 * since no approval of node could count. */
static void test_manual_edge_needs_owner(struct server *s, struct buf *out)
{
	json_t *r = load("tests/data/api/rack-gb300-r07.json");
	json_t *resp = jx_path(r, "spec.responsibilities");
	json_object_del(json_array_get(resp, 2), "windowOwner");
	int rc = apply_json(NULL, r, out);
	check(rc == 0 && wait_node_owner(s, false),
	      "a Rack may leave the node layer (approvalRequired false) without a window owner",
	      buf_str(out));
	json_t *u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	jx_set_str(u, "metadata.name", "gb300-r07-manual");
	rc = apply_json(NULL, u, out);
	json_decref(u);
	check(rc != 0 && has(out, "RackUpgrade \"gb300-r07-manual\": spec.target.stack: the move "
	                          "from \"gb300-r580-95\" needs an approval of layer node, but "
	                          "rack \"gb300-r07\" names no windowOwner for it"),
	      "an upgrade over a manual edge needing an approval nobody could give is refused",
	      buf_str(out));
	json_decref(r);
	r = load("tests/data/api/rack-gb300-r07.json");
	rc = apply_json(NULL, r, out);
	json_decref(r);
	check(rc == 0 && wait_node_owner(s, true), "the Rack gets its node window owner back",
	      buf_str(out));
}

/* An upgrade of rack without a canary (a partition belongs to one rack). */
static json_t *upgrade_of(const char *name, const char *rack)
{
	json_t *u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	jx_set_str(u, "metadata.name", name);
	jx_set_str(u, "spec.rack", rack);
	json_object_del(json_object_get(u, "spec"), "canary");
	return u;
}

/* One upgrade per rack: gb300-r07 has gb300-r07-r580-173 in flight (no
 * status yet: Proposed, as no operator runs here). */
static void test_one_upgrade_per_rack(struct server *s, struct buf *out)
{
	json_t *u = upgrade_of("gb300-r07-again", "gb300-r07");
	int rc = apply_json(NULL, u, out);
	check(rc != 0 && has(out, "denied the request") &&
	              has(out, "RackUpgrade \"gb300-r07-again\": spec.rack: rack \"gb300-r07\" "
	                       "already has an upgrade in flight: RackUpgrade "
	                       "\"gb300-r07-r580-173\" (phase Proposed)"),
	      "a second upgrade of a rack is refused, naming the one in flight", buf_str(out));
	json_t *u8 = upgrade_of("gb300-r08-r580-173", "gb300-r08");
	rc = apply_json(NULL, u8, out);
	json_decref(u8);
	check(rc == 0, "an upgrade of another rack passes", buf_str(out));
	// At once, before any cache could have seen it: the list is read live.
	u8 = upgrade_of("gb300-r08-again", "gb300-r08");
	rc = apply_json(NULL, u8, out);
	json_decref(u8);
	check(rc != 0 && has(out, "rack \"gb300-r08\" already has an upgrade in flight: "
	                          "RackUpgrade \"gb300-r08-r580-173\""),
	      "an upgrade created a moment ago already holds its rack", buf_str(out));
	// Once the first is Completed the rack takes the next one.
	struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .subresource = "status"};
	json_t *done = json_pack("{s:{s:s}}", "status", "phase", "Completed");
	struct kube_status st;
	enum nv_err e =
	        kube_patch(s->client, &UPGRADES, NULL, "gb300-r07-r580-173", &po, done, NULL, &st);
	json_decref(done);
	rc = e == NV_OK ? apply_json(NULL, u, out) : -1;
	check(rc == 0, "after the first completes, the next upgrade of the rack passes",
	      e == NV_OK ? buf_str(out) : st.message);
	json_decref(u);
	// The racks are left as found, for the approval tests that follow.
	static const char *const made[] = {"gb300-r07-again", "gb300-r08-r580-173"};
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		(void)kube_delete(s->client, &UPGRADES, NULL, made[i], NULL, &st);
}

static void test_approval_stamped(struct server *s, struct buf *out)
{
	(void)s;
	json_t *a = load("tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json");
	jx_set_take(a, "spec.approvedBy",
	            json_pack("{s:s, s:s, s:[s]}", "username", "fabric-lead", "uid", "forged",
	                      "groups", "fabric-owners"));
	char *text = json_dumps(a, JSON_COMPACT);
	int rc = kctl(NULL, rbac_yaml, out, "apply", "-f", "-", NULL);
	rc = rc == 0 ? kctl(viewer_kubeconfig, text, out, "create", "-f", "-", NULL) : rc;
	free(text);
	json_decref(a);
	check(rc == 0, "the viewer may create an UpgradeApproval", buf_str(out));
	json_t *got = NULL;
	struct kube_status st;
	enum nv_err e =
	        kube_get(s->client, &APPROVALS, NULL, "gb300-r07-r580-173-fabric", &got, &st);
	const json_t *groups = jx_path(got, "spec.approvedBy.groups");
	bool in_group = false;
	for (size_t i = 0; i < json_array_size(groups); i++)
		in_group = in_group || strcmp(json_string_value(json_array_get(groups, i)),
		                              "nvl72:viewers") == 0;
	char detail[512];
	char *by = got ? json_dumps(jx_path(got, "spec.approvedBy"), JSON_COMPACT) : NULL;
	snprintf(detail, sizeof(detail), "%s %s", nv_err_name(e), by ? by : "");
	free(by);
	check(e == NV_OK && strcmp(jx_str_or(got, "spec.approvedBy.username", ""), "viewer") == 0 &&
	              strcmp(jx_str_or(got, "spec.approvedBy.uid", ""), "viewer-uid") == 0 &&
	              in_group && json_array_size(groups) == 2,
	      "the approval carries the real requesting user, not the claimed one", detail);
	json_t *u = NULL;
	(void)kube_get(s->client, &UPGRADES, NULL, "gb300-r07-r580-173", &u, &st);
	const char *uid = jx_str_or(u, "metadata.uid", "");
	snprintf(detail, sizeof(detail), "upgradeRef %s/%s/%s, upgrade uid %s",
	         jx_str_or(got, "spec.upgradeRef.uid", ""),
	         jx_str_or(got, "spec.upgradeRef.target.matrix", ""),
	         jx_str_or(got, "spec.upgradeRef.target.stack", ""), uid);
	check(uid[0] && strcmp(jx_str_or(got, "spec.upgradeRef.uid", ""), uid) == 0 &&
	              strcmp(jx_str_or(got, "spec.upgradeRef.target.matrix", ""),
	                     "gb300-2026.10") == 0 &&
	              strcmp(jx_str_or(got, "spec.upgradeRef.target.stack", ""),
	                     "gb300-r580-173") == 0,
	      "the approval is bound to the RackUpgrade's UID and target", detail);
	json_decref(u);
	json_decref(got);
	// An approval of an upgrade that does not exist cannot be bound.
	a = load("tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json");
	jx_set_str(a, "metadata.name", "nowhere-fabric");
	jx_set_str(a, "spec.upgrade", "nowhere");
	text = json_dumps(a, JSON_COMPACT);
	rc = kctl(viewer_kubeconfig, text, out, "create", "-f", "-", NULL);
	free(text);
	json_decref(a);
	check(rc != 0 && has(out, "spec.upgrade: RackUpgrade \"nowhere\" does not exist"),
	      "an approval of a RackUpgrade that does not exist is refused", buf_str(out));
}

/* Whether the operator's rule counts the stored approval name for the
 * stored upgrade on rack gb300-r07; why gets the reason when not. */
static bool stored_counts(struct server *s, const char *name, char *why, size_t cap)
{
	json_t *ao = NULL, *uo = NULL, *ro = NULL;
	struct api_upgrade_approval *a = NULL;
	struct api_rack_upgrade *u = NULL;
	struct api_rack *r = NULL;
	struct api_errors e;
	bool ok = false;
	api_errors_init(&e);
	snprintf(why, cap, "could not read or parse the objects");
	if (kube_get(s->client, &APPROVALS, NULL, name, &ao, NULL) == NV_OK &&
	    kube_get(s->client, &UPGRADES, NULL, "gb300-r07-r580-173", &uo, NULL) == NV_OK &&
	    kube_get(s->client, &RACKS, NULL, "gb300-r07", &ro, NULL) == NV_OK &&
	    api_upgrade_approval_parse(ao, &a, &e) == NV_OK &&
	    api_rack_upgrade_parse(uo, &u, &e) == NV_OK && api_rack_parse(ro, &r, &e) == NV_OK)
		ok = api_upgrade_approval_counts(a, u, r, why, cap);
	api_upgrade_approval_free(a);
	api_rack_upgrade_free(u);
	api_rack_free(r);
	json_decref(ao);
	json_decref(uo);
	json_decref(ro);
	return ok;
}

/* The RackUpgrade deleted and created again under the same name with a new
 * target: the old approval stays bound to the first one. */
static void test_approval_not_inherited(struct server *s, struct buf *out)
{
	char why[512], why2[512], detail[1200];
	json_t *u = NULL;
	(void)kube_get(s->client, &UPGRADES, NULL, "gb300-r07-r580-173", &u, NULL);
	char uid1[64];
	snprintf(uid1, sizeof(uid1), "%s", jx_str_or(u, "metadata.uid", ""));
	json_decref(u);
	int rc = kctl(NULL, NULL, out, "delete", "rackupgrade", "gb300-r07-r580-173", "--wait",
	              "--timeout=60s", NULL);
	check(rc == 0, "delete the RackUpgrade that was approved", buf_str(out));
	u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	jx_set_str(u, "spec.target.stack", "gb300-r580-159");
	rc = apply_json(NULL, u, out);
	json_decref(u);
	check(rc == 0, "create it again under the same name, towards gb300-r580-159", buf_str(out));
	// The webhook stamps from its cache: wait until it holds the new one.
	bool fresh = false;
	for (int i = 0; i < 200 && !fresh; i++) {
		json_t *o = kube_informer_get(s->infs.inf[WEBHOOK_UPGRADES], "gb300-r07-r580-173");
		fresh = o != NULL && strcmp(jx_str_or(o, "metadata.uid", ""), uid1) != 0;
		json_decref(o);
		if (!fresh)
			time_sleep_ms(50);
	}
	json_t *a = load("tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json");
	jx_set_str(a, "metadata.name", "gb300-r07-r580-173-fabric-again");
	char *text = json_dumps(a, JSON_COMPACT);
	rc = kctl(viewer_kubeconfig, text, out, "create", "-f", "-", NULL);
	free(text);
	json_decref(a);
	check(fresh && rc == 0, "the viewer approves the new upgrade", buf_str(out));
	bool old_counts = stored_counts(s, "gb300-r07-r580-173-fabric", why, sizeof(why));
	snprintf(detail, sizeof(detail), "old approval: %s", why);
	check(!old_counts && strstr(why, "it approved an earlier upgrade of that name") != NULL,
	      "the old approval does not count for the upgrade created again", detail);
	// The new one is bound to it; only the viewer's groups keep it out
	// (fabric's window owner is nvl72:platform).
	(void)stored_counts(s, "gb300-r07-r580-173-fabric-again", why2, sizeof(why2));
	snprintf(detail, sizeof(detail), "new approval: %s", why2);
	check(strstr(why2, "viewer is not in group nvl72:platform") != NULL,
	      "the new approval is bound to the new upgrade and judged on its window owner",
	      detail);
}

/* The Secret's ca.crt (base64, as stored) and both caBundles. */
static bool bundles_current(struct server *s, char *ca_b64, size_t cap, char *rvs, size_t rvcap)
{
	json_t *sec = NULL;
	bool ok = kube_get(s->client, &KUBE_RES_SECRETS, NS, SECRET, &sec, NULL) == NV_OK;
	const char *ca = jx_str_or(sec, "data.ca\\.crt", "");
	ok = ok && ca[0] && jx_str_or(sec, "data.tls\\.crt", "")[0] &&
	     jx_str_or(sec, "data.tls\\.key", "")[0];
	snprintf(ca_b64, cap, "%s", ca);
	rvs[0] = '\0';
	const struct kube_res vres = {"admissionregistration.k8s.io", "v1",
	                              "validatingwebhookconfigurations",
	                              "ValidatingWebhookConfiguration", false};
	const struct kube_res mres = {"admissionregistration.k8s.io", "v1",
	                              "mutatingwebhookconfigurations",
	                              "MutatingWebhookConfiguration", false};
	const struct kube_res *res[] = {&vres, &mres};
	for (int i = 0; i < 2 && ok; i++) {
		json_t *cfg = NULL;
		ok = kube_get(s->client, res[i], NULL, CFG_NAME, &cfg, NULL) == NV_OK &&
		     strcmp(jx_str_or(cfg, "webhooks[0].clientConfig.caBundle", ""), ca) == 0;
		size_t l = strlen(rvs);
		snprintf(rvs + l, rvcap - l, "%s/", kube_obj_rv(cfg) ? kube_obj_rv(cfg) : "");
		json_decref(cfg);
	}
	json_decref(sec);
	return ok;
}

static void test_restart_reuses_secret(struct server *s, struct buf *out)
{
	char ca1[8192], ca2[8192], rv1[128], rv2[128];
	bool ok = bundles_current(s, ca1, sizeof(ca1), rv1, sizeof(rv1));
	check(ok, "the Secret holds tls.crt, tls.key and ca.crt and both caBundles match it", NULL);
	char *pem1 = xstrdup(webhook_cert_pem(s->cert));
	int port = s->port;
	server_stop(s);
	enum nv_err rc = server_start(s, port);
	check(rc == NV_OK && webhook_cert_reused(s->cert) &&
	              strcmp(pem1, webhook_cert_pem(s->cert)) == 0,
	      "a restart reuses the certificate from the Secret", nv_err_name(rc));
	free(pem1);
	ok = bundles_current(s, ca2, sizeof(ca2), rv2, sizeof(rv2));
	check(ok && strcmp(ca1, ca2) == 0 && strcmp(rv1, rv2) == 0,
	      "the restart rewrites neither the Secret's CA nor the webhook configurations", rv2);
	json_t *p = load("tests/data/api/rackpartition-gb300-r07-b.json");
	jx_set_str(p, "metadata.name", "gb300-r07-d");
	int r = apply_json(NULL, p, out);
	json_decref(p);
	check(r != 0 && has(out, "is already in partition"),
	      "after the restart the webhook still refuses an overlap", buf_str(out));
}

struct racer {
	struct kube_client *client;
	struct webhook_cert *cert;
	enum nv_err rc;
};

static void *race_one(void *arg)
{
	struct racer *r = arg;
	struct webhook_cert_config cc = {
	        .client = r->client,
	        .ns = NS,
	        .secret = "nvl72-webhook-race-tls",
	        .service = "nvl72-operator",
	        .extra_ips = extra_ips,
	};
	r->rc = webhook_cert_new(&cc, &r->cert);
	if (r->rc == NV_OK)
		r->rc = webhook_cert_ensure(r->cert, NULL);
	return NULL;
}

/* Two replicas starting at once on the chart's empty Secret end up serving
 * the same certificate. */
static void test_two_replicas_race(struct server *s, struct buf *out)
{
	int rc = kctl(NULL, NULL, out, "create", "secret", "generic", "nvl72-webhook-race-tls",
	              "-n", NS, NULL);
	struct racer r[2] = {{.client = s->client}, {.client = s->client}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, race_one, &r[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	check(rc == 0 && r[0].rc == NV_OK && r[1].rc == NV_OK &&
	              strcmp(webhook_cert_pem(r[0].cert), webhook_cert_pem(r[1].cert)) == 0,
	      "two replicas racing on an empty Secret serve the same certificate", buf_str(out));
	for (int i = 0; i < 2; i++)
		webhook_cert_free(r[i].cert);
}

/* The apiserver takes a moment to see a new configuration: wait until an
 * overlap is refused by the webhook (bounded). */
static bool wait_webhook_live(struct buf *out)
{
	for (int i = 0; i < 60; i++) {
		int rc = kctl(NULL, NULL, out, "get", "validatingwebhookconfiguration", CFG_NAME,
		              "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}", NULL);
		if (rc == 0 && out->len > 0)
			return true;
		time_sleep_ms(500);
	}
	return false;
}

/* The apiserver picks a changed configuration up within a moment: a
 * server-side dry run of a rack naming no matrix is refused once it calls
 * the webhook (bounded). */
static bool wait_validating_live(struct buf *out)
{
	json_t *r = rack_r08();
	jx_set_str(r, "spec.matrix.name", "no-such-matrix");
	char *text = json_dumps(r, JSON_COMPACT);
	bool live = false;
	for (int i = 0; i < 60 && !live; i++) {
		int rc = kctl(NULL, text, out, "apply", "--dry-run=server", "-f", "-", NULL);
		live = rc != 0 && has(out, "denied the request");
		if (!live)
			time_sleep_ms(500);
	}
	free(text);
	json_decref(r);
	return live;
}

int main(void)
{
	const char *dir = getenv("NVL72_CLUSTER_DIR");
	kubectl = getenv("KUBECTL");
	kubeconfig = getenv("KUBECONFIG");
	if (dir == NULL || kubectl == NULL || kubeconfig == NULL) {
		fprintf(stderr, "needs KUBECONFIG, KUBECTL and NVL72_CLUSTER_DIR "
		                "(tests/integration/run.sh)\n");
		return 2;
	}
	log_set_level(LOG_LVL_WARN);
	struct buf out;
	buf_init(&out, OUT_MAX);
	struct server s = {0};
	struct kube_config *cfg = NULL;
	struct kube_status st;
	struct kube_config_opts co = {.kubeconfig = kubeconfig, .no_in_cluster = true};
	if (kube_config_load(&co, &cfg, &st) != NV_OK ||
	    !viewer_kubeconfig_write(dir, kube_config_server(cfg)) ||
	    kube_client_new(cfg, NULL, &s.client, &st) != NV_OK) {
		fprintf(stderr, "client: %s\n", st.message);
		return 2;
	}
	int rc = kctl(NULL, NULL, &out, "apply", "-f", "crds/", NULL);
	rc = rc == 0 ? kctl(NULL, NULL, &out, "wait", "--for=condition=Established",
	                    "--timeout=60s", "crd", "--all", NULL)
	             : rc;
	check(rc == 0, "the CRDs are applied and established", buf_str(&out));
	rc = kctl(NULL, NULL, &out, "create", "namespace", NS, NULL);
	check(rc == 0, "the test namespace is created", buf_str(&out));
	enum nv_err e = informers_start(&s);
	check(e == NV_OK, "informers on racks, partitions, matrices and upgrades synced",
	      nv_err_name(e));
	// The chart creates the Secret empty; the operator only updates it.
	rc = kctl(NULL, NULL, &out, "create", "secret", "generic", SECRET, "-n", NS, NULL);
	check(rc == 0, "the empty Secret is created as the chart does", buf_str(&out));
	e = e == NV_OK ? server_start(&s, 0) : e;
	check(e == NV_OK, "the webhook serves HTTPS on 127.0.0.1", nv_err_name(e));
	if (e != NV_OK)
		goto out;
	char *yaml = configurations_yaml(s.port);
	rc = kctl(NULL, yaml, &out, "apply", "-f", "-", NULL);
	free(yaml);
	// The resync thread fills the caBundle of the new configurations.
	check(rc == 0 && wait_webhook_live(&out),
	      "the webhook configurations are created and their caBundle filled", buf_str(&out));
	check(wait_validating_live(&out), "the apiserver calls the validating webhook",
	      buf_str(&out));
	test_valid_objects_pass(&s, &out);
	test_refusals(&out);
	test_manual_edge_needs_owner(&s, &out);
	test_one_upgrade_per_rack(&s, &out);
	test_approval_stamped(&s, &out);
	test_approval_not_inherited(&s, &out);
	test_restart_reuses_secret(&s, &out);
	test_two_replicas_race(&s, &out);
out:
	// Fail-closed webhooks must not outlive their server.
	(void)kctl(NULL, NULL, &out, "delete",
	           "validatingwebhookconfiguration,mutatingwebhookconfiguration", CFG_NAME,
	           "--ignore-not-found", NULL);
	server_stop(&s);
	for (int k = 0; k < WEBHOOK__KINDS; k++)
		kube_informer_free(s.infs.inf[k]);
	kube_client_free(s.client);
	buf_clear(&out);
	unlink(viewer_kubeconfig);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
