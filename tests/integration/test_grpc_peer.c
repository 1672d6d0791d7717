// SPDX-License-Identifier: Apache-2.0
// The gRPC server against the kubelet's own clients: two servers (plugin
// registration and the DRA node service) on unix sockets, called by the Go
// test peer of tests/grpcpeer, which uses k8s.io/kubelet's generated clients
// on grpc-go as the kubelet does. The peer's "ok - ..." lines are checks.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvl72/dra.h"
#include "nvl72/grpc.h"

struct plugin {
	char dir[64];
	char reg_path[128];
	char dra_path[128];
	atomic_int notified; /* 1: registered, 2: refused */
};

static enum grpc_code h_get_info(void *arg, struct grpc_call *call)
{
	struct plugin *p = arg;
	char *versions[] = {(char *)"v1.DRAPlugin", (char *)"v1beta1.DRAPlugin"};
	struct dra_plugin_info info = {.type = (char *)"DRAPlugin",
	                               .name = (char *)"imex.nvl72.io",
	                               .endpoint = p->dra_path,
	                               .versions = versions,
	                               .n_versions = 2};
	return dra_plugin_info_encode(&info, &call->resp) == NV_OK ? GRPC_OK : GRPC_INTERNAL;
}

static enum grpc_code h_notify(void *arg, struct grpc_call *call)
{
	struct plugin *p = arg;
	struct dra_reg_status st;
	struct pb_err e;
	if (dra_reg_status_decode(call->req, call->req_len, &st, &e) != NV_OK) {
		(void)buf_append_str(&call->status_msg, e.msg);
		return GRPC_INVALID_ARGUMENT;
	}
	atomic_store(&p->notified, st.registered ? 1 : 2);
	dra_reg_status_clear(&st);
	return GRPC_OK; /* RegistrationStatusResponse has no fields */
}

static enum grpc_code claims_decode(struct grpc_call *call, const char *msg,
                                    struct dra_claims_req *req)
{
	struct pb_err e;
	if (dra_claims_req_decode(call->req, call->req_len, msg, req, &e) == NV_OK)
		return GRPC_OK;
	(void)buf_append_str(&call->status_msg, e.msg);
	return GRPC_INVALID_ARGUMENT;
}

/* One device per claim, named after its UID, with a CDI id of its own. */
static enum grpc_code h_prepare(void *arg, struct grpc_call *call)
{
	struct dra_claims_req req;
	enum grpc_code code = claims_decode(call, "NodePrepareResourcesRequest", &req);
	(void)arg;
	if (code != GRPC_OK)
		return code;
	char *reqname = (char *)"channel";
	struct dra_prepare_resp resp = {.n_claims = req.n_claims};
	struct dra_device *devs = calloc(req.n_claims + 1, sizeof(*devs));
	char **cdi = calloc(req.n_claims + 1, sizeof(*cdi));
	resp.claims = calloc(req.n_claims + 1, sizeof(*resp.claims));
	for (size_t i = 0; i < req.n_claims; i++) {
		size_t n = strlen(req.claims[i].uid ? req.claims[i].uid : "") + 32;
		cdi[i] = malloc(n);
		(void)snprintf(cdi[i], n, "imex.nvl72.io/channel=%s",
		               req.claims[i].uid ? req.claims[i].uid : "");
		devs[i] = (struct dra_device){.request_names = &reqname,
		                              .n_request_names = 1,
		                              .pool_name = (char *)"node-a",
		                              .device_name = req.claims[i].uid,
		                              .cdi_device_ids = &cdi[i],
		                              .n_cdi_device_ids = 1};
		resp.claims[i] = (struct dra_prepare_result){
		        .uid = req.claims[i].uid, .devices = &devs[i], .n_devices = 1};
	}
	code = dra_prepare_resp_encode(&resp, &call->resp) == NV_OK ? GRPC_OK : GRPC_INTERNAL;
	for (size_t i = 0; i < req.n_claims; i++)
		free(cdi[i]);
	free(cdi);
	free(devs);
	free(resp.claims);
	dra_claims_req_clear(&req);
	return code;
}

static enum grpc_code h_unprepare(void *arg, struct grpc_call *call)
{
	struct dra_claims_req req;
	enum grpc_code code = claims_decode(call, "NodeUnprepareResourcesRequest", &req);
	(void)arg;
	if (code != GRPC_OK)
		return code;
	struct dra_unprepare_resp resp = {.n_claims = req.n_claims};
	resp.claims = calloc(req.n_claims + 1, sizeof(*resp.claims));
	for (size_t i = 0; i < req.n_claims; i++) {
		if (req.claims[i].uid && strcmp(req.claims[i].uid, "fail") == 0) {
			(void)buf_append_str(&call->status_msg, "100% not ready: tray \xc3\xa9");
			code = GRPC_FAILED_PRECONDITION;
		}
		resp.claims[i].uid = req.claims[i].uid;
	}
	if (code == GRPC_OK && dra_unprepare_resp_encode(&resp, &call->resp) != NV_OK)
		code = GRPC_INTERNAL;
	free(resp.claims);
	dra_claims_req_clear(&req);
	return code;
}

/* Runs argv with stdout into out (at most cap - 1 bytes), stderr passed on;
 * returns the exit status. */
static int run_capture(char *const argv[], char *out, size_t cap)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		(void)dup2(pfd[1], 1);
		(void)close(pfd[0]);
		(void)close(pfd[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	(void)close(pfd[1]);
	size_t len = 0;
	ssize_t n;
	char drain[512];
	/* Past cap the rest is read and dropped, so the child never blocks. */
	while ((n = len < cap - 1 ? read(pfd[0], out + len, cap - 1 - len)
	                          : read(pfd[0], drain, sizeof(drain))) > 0)
		if (len < cap - 1)
			len += (size_t)n;
	out[len] = '\0';
	(void)close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_grpc_peer_kubelet_clients(void **state)
{
	struct plugin p = {0};
	struct grpc_server *reg, *dra;
	char out[4096], peer[4096];
	(void)state;

	/* The peer first: building it is the slow part of a first run. */
	char *build[] = {(char *)"bash", (char *)"tests/grpcpeer/build.sh", NULL};
	assert_int_equal(run_capture(build, out, sizeof(out)), 0);
	char *nl = strrchr(out, '\n');
	if (nl && nl[1] == '\0')
		*nl = '\0';
	nl = strrchr(out, '\n');
	(void)snprintf(peer, sizeof(peer), "%s", nl ? nl + 1 : out);

	(void)snprintf(p.dir, sizeof(p.dir), "/tmp/nvl72-grpc-peer.XXXXXX");
	assert_non_null(mkdtemp(p.dir));
	(void)snprintf(p.reg_path, sizeof(p.reg_path), "%s/imex.nvl72.io-reg.sock", p.dir);
	(void)snprintf(p.dra_path, sizeof(p.dra_path), "%s/dra.sock", p.dir);
	const struct grpc_method reg_rows[] = {
	        {DRA_PATH_GET_INFO, h_get_info, &p},
	        {DRA_PATH_NOTIFY, h_notify, &p},
	};
	const struct grpc_method dra_rows[] = {
	        {DRA_PATH_PREPARE, h_prepare, NULL},
	        {DRA_PATH_UNPREPARE, h_unprepare, NULL},
	};
	struct grpc_config rc = {.name = "registration",
	                         .socket_path = p.reg_path,
	                         .methods = reg_rows,
	                         .n_methods = 2};
	struct grpc_config dc = {
	        .name = "dra", .socket_path = p.dra_path, .methods = dra_rows, .n_methods = 2};
	assert_int_equal(grpc_server_new(&rc, &reg), NV_OK);
	assert_int_equal(grpc_server_new(&dc, &dra), NV_OK);
	assert_int_equal(grpc_server_start(reg), NV_OK);
	assert_int_equal(grpc_server_start(dra), NV_OK);

	(void)fflush(stdout);
	char *args[] = {peer, (char *)"-reg", p.reg_path, NULL};
	int st = run_capture(args, out, sizeof(out));
	(void)fputs(out, stdout); /* the peer's checks */
	assert_int_equal(st, 0);
	assert_int_equal(atomic_load(&p.notified), 1);

	grpc_server_free(reg);
	grpc_server_free(dra);
	assert_int_equal(rmdir(p.dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_grpc_peer_kubelet_clients),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
