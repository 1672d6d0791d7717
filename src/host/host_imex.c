// SPDX-License-Identifier: Apache-2.0
// IMEX on the host: both config files rendered from the spec and written
// atomically, the daemon restarted only when the files it runs with differ
// (process mode: our own detached child; host mode: the systemd unit), and
// its status read through nvidia-imex-ctl under the tool deadline.
#include "nvl72/host.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define IMEX_FILE_MAX ((size_t)64 << 10)
#define IMEX_UNIT "nvidia-imex.service"
#define IMEX_OUT_MAX ((size_t)256 << 10)
#define IMEX_STOP_GRACE_MS 5000

static bool peer_ok(const char *p)
{
	size_t n = strlen(p);

	if (n == 0 || n >= HOST_HOSTNAME_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

static enum nv_err peers_check(const struct host_imex_cfg *c)
{
	bool bind_listed = c->bind_ip[0] == '\0';

	if (c->n_peers == 0 || c->n_peers > HOST_IMEX_NODES_MAX)
		return NV_E_CONFIG;
	for (size_t i = 0; i < c->n_peers; i++) {
		if (!peer_ok(c->peers[i]))
			return NV_E_CONFIG;
		for (size_t j = 0; j < i; j++)
			if (strcmp(c->peers[i], c->peers[j]) == 0)
				return NV_E_CONFIG;
		if (strcmp(c->peers[i], c->bind_ip) == 0)
			bind_listed = true;
	}
	/* IMEX refuses to start when its own address is not in the list. */
	return bind_listed && (c->bind_ip[0] == '\0' || peer_ok(c->bind_ip)) ? NV_OK : NV_E_CONFIG;
}

enum nv_err host_imex_render(const struct host_imex_cfg *c, const char *nodes_path,
                             struct buf *config, struct buf *nodes)
{
	const char *cmd_ip = c->bind_ip[0] ? c->bind_ip : "127.0.0.1";
	enum nv_err rc;

	if (c->grace_s < -1 || c->server_port > 65535 || c->cmd_port > 65535 ||
	    strchr(c->domain, '\n') != NULL || strchr(nodes_path, '\n') != NULL)
		return NV_E_CONFIG;
	rc = peers_check(c);
	if (rc != NV_OK)
		return rc;
	buf_reset(config);
	buf_reset(nodes);
	rc = buf_printf(config,
	                "# IMEX domain %s: written by nvl72-agent, changes are overwritten.\n"
	                "DAEMONIZE=%d\n"
	                "SERVER_PORT=%u\n"
	                "IMEX_NODE_CONFIG_FILE=%s\n"
	                "IMEX_CMD_ENABLED=1\n"
	                "IMEX_CMD_BIND_INTERFACE_IP=%s\n"
	                "IMEX_CMD_PORT=%u\n"
	                "IMEX_WAIT_FOR_QUORUM=RECOVERY\n"
	                "IMEX_NODE_DISCONNECTED_GRACE_TIME=%d\n"
	                "LOG_LEVEL=4\n",
	                c->domain[0] ? c->domain : "-", c->mode == HOST_IMEX_HOST ? 1 : 0,
	                c->server_port ? c->server_port : 50000u, nodes_path, cmd_ip,
	                c->cmd_port ? c->cmd_port : 50005u, c->grace_s);
	if (rc == NV_OK && c->bind_ip[0] != '\0')
		rc = buf_printf(config, "BIND_INTERFACE_IP=%s\n", c->bind_ip);
	for (size_t i = 0; rc == NV_OK && i < c->n_peers; i++)
		rc = buf_printf(nodes, "%s\n", c->peers[i]);
	return rc;
}

/* sha256 of config (when not NULL), a NUL, and nodes, in hex. */
static void imex_hash(const struct buf *config, const struct buf *nodes, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	out[0] = '\0';
	if (ctx == NULL)
		return;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	    (config == NULL || (EVP_DigestUpdate(ctx, buf_str(config), config->len) == 1 &&
	                        EVP_DigestUpdate(ctx, "", 1) == 1)) &&
	    EVP_DigestUpdate(ctx, buf_str(nodes), nodes->len) == 1 &&
	    EVP_DigestFinal_ex(ctx, md, &mdlen) == 1) {
		for (unsigned int i = 0; i < mdlen && i < 32; i++)
			snprintf(out + 2 * i, 3, "%02x", md[i]);
	}
	EVP_MD_CTX_free(ctx);
}

/* Writes path (in the IMEX dir) when its content differs from want. */
static enum nv_err imex_file_sync(struct host *h, const char *name, const struct buf *want,
                                  bool *changed)
{
	char rel[PATH_MAX_HOST];
	struct buf have;
	enum nv_err rc;
	bool same;

	snprintf(rel, sizeof(rel), "%s/%s", h->cfg.imex_dir, name);
	rc = host_read(h, rel, IMEX_FILE_MAX, &have);
	same = rc == NV_OK && have.len == want->len &&
	       memcmp(buf_str(&have), buf_str(want), want->len) == 0;
	if (rc == NV_OK)
		buf_clear(&have);
	if (same)
		return NV_OK;
	rc = host_write_atomic(h, rel, buf_str(want), want->len, 0644);
	if (rc != NV_OK) {
		host_fail(h, "writing %s: %s", rel, nv_err_str(rc));
		return rc;
	}
	*changed = true;
	return NV_OK;
}

/* A file of the IMEX dir as the tools we run (the daemon in process mode,
 * the ctl) see it: the host's own path when they run in its namespace. */
static enum nv_err imex_tool_path(struct host *h, const char *name, char *out, size_t outsz)
{
	char rel[PATH_MAX_HOST];
	enum nv_err rc;

	snprintf(rel, sizeof(rel), "%s/%s", h->cfg.imex_dir, name);
	rc = host_tool_path(h, rel, out, outsz);
	if (rc != NV_OK)
		host_fail(h, "%s/%s: path too long", h->cfg.imex_dir, name);
	return rc;
}

static void state_path(const struct host *h, const char *name, char *out, size_t outsz)
{
	char rel[PATH_MAX_HOST];

	snprintf(rel, sizeof(rel), "%s/%s", h->cfg.state_dir, name);
	if (host_path(h, rel, out, outsz) != NV_OK)
		out[0] = '\0';
}

enum nv_err host_imex_pid(struct host *h, pid_t *pid, char hash[65])
{
	char path[PATH_MAX_HOST], hs[65];
	unsigned long long st;
	long long p;
	struct buf b;
	enum nv_err rc;

	state_path(h, "imex.pid", path, sizeof(path));
	rc = host_file_read(path, 256, &b);
	if (rc != NV_OK)
		return rc;
	/* "pid starttime hash": the start time guards against pid reuse. */
	if (sscanf(buf_str(&b), "%lld %llu %64s", &p, &st, hs) != 3 || p <= 0 || p > INT32_MAX) {
		buf_clear(&b);
		return NV_E_PARSE;
	}
	buf_clear(&b);
	if (!host_pid_alive((pid_t)p) || host_pid_starttime((pid_t)p) != st)
		return NV_E_NOT_FOUND;
	*pid = (pid_t)p;
	if (hash != NULL)
		memcpy(hash, hs, 65);
	return NV_OK;
}

static enum nv_err process_start(struct host *h, const char *hash, pid_t *out)
{
	char cfgp[PATH_MAX_HOST], logp[PATH_MAX_HOST], pidp[PATH_MAX_HOST];
	char line[PATH_MAX_HOST];
	const char *argv[] = {h->cfg.imex_bin, "-c", cfgp, NULL};
	/* On disk before the daemon may run: an agent killed right after the
	 * start leaves a daemon its successor knows about. */
	struct host_pid_rec rec = {.path = pidp, .tag = hash};
	struct host_spawn_gate gate = {.record = host_pid_record, .arg = &rec};
	pid_t pid;
	enum nv_err rc;

	/* The daemon is handed its config as it sees it; the log and the pid
	 * file are the agent's to open and write. */
	rc = imex_tool_path(h, "config.cfg", cfgp, sizeof(cfgp));
	if (rc != NV_OK)
		return rc;
	state_path(h, "imex.log", logp, sizeof(logp));
	state_path(h, "imex.pid", pidp, sizeof(pidp));
	rc = host_path(h, h->cfg.state_dir, line, sizeof(line));
	if (rc == NV_OK)
		rc = host_mkdirs(line, 0755);
	if (rc != NV_OK)
		return rc;
	rc = h->ops->spawn(h, argv, logp, &gate, &pid);
	if (rc != NV_OK) {
		host_fail(h, "cannot start %s%s", h->cfg.imex_bin,
		          rec.written ? "" : " (cannot write its pid file)");
		return rc;
	}
	/* IMEX exits at once on a bad config (own address not listed, port
	 * taken): catch that here rather than at the next status read. */
	time_sleep_ms(150);
	if (!host_pid_alive(pid)) {
		host_fail(h, "%s exited right after start; see %s", h->cfg.imex_bin, logp);
		return NV_E_STATE;
	}
	*out = pid;
	return NV_OK;
}

static enum nv_err process_apply(struct host *h, const char *hash, bool force,
                                 struct host_imex_apply *out)
{
	char running[65];
	pid_t pid;

	if (host_imex_pid(h, &pid, running) == NV_OK) {
		if (!force && strcmp(running, hash) == 0) {
			out->pid = pid;
			return NV_OK;
		}
		log_info("agent", "restarting nvidia-imex for a new configuration",
		         "pid=%d hash=%.12s", (int)pid, hash);
		host_pid_stop(pid, IMEX_STOP_GRACE_MS);
	}
	out->restarted = true;
	return process_start(h, hash, &out->pid);
}

static enum nv_err host_apply(struct host *h, const char *hash, bool force,
                              struct host_imex_apply *out)
{
	char stamp[PATH_MAX_HOST];
	struct host_unit_state us;
	struct buf b;
	bool same = false;
	enum nv_err rc;

	state_path(h, "imex-host.hash", stamp, sizeof(stamp));
	if (host_file_read(stamp, 128, &b) == NV_OK) {
		same = strcmp(buf_str(&b), hash) == 0;
		buf_clear(&b);
	}
	rc = host_unit_query(h, IMEX_UNIT, &us);
	if (rc != NV_OK)
		return rc;
	if (us.active == HOST_UNIT_NOT_FOUND) {
		host_fail(h, "host mode but %s is not installed", IMEX_UNIT);
		return NV_E_STATE;
	}
	if (!force && same && us.active == HOST_UNIT_ACTIVE)
		return NV_OK;
	rc = host_unit_action(h, "restart", IMEX_UNIT);
	if (rc != NV_OK)
		return rc;
	out->restarted = true;
	return host_file_write_atomic(stamp, hash, strlen(hash), 0644);
}

enum nv_err host_imex_apply(struct host *h, const struct host_imex_cfg *c,
                            struct host_imex_apply *out)
{
	char nodes_path[PATH_MAX_HOST];
	struct host_imex_apply r = {0};
	struct buf config, nodes;
	enum nv_err rc;

	if (c->mode == HOST_IMEX_OFF)
		return NV_E_INVAL;
	/* The daemon reads the nodes path as it sees it: in process mode as
	 * our tools do (the host's own path when they run in its namespace,
	 * under the host root when in ours); in host mode the host's systemd
	 * starts it, always in the host's namespace. */
	if (c->mode == HOST_IMEX_PROCESS) {
		rc = imex_tool_path(h, "nodes_config.cfg", nodes_path, sizeof(nodes_path));
	} else {
		char rel[PATH_MAX_HOST];
		snprintf(rel, sizeof(rel), "%s/nodes_config.cfg", h->cfg.imex_dir);
		rc = host_own_path(rel, nodes_path, sizeof(nodes_path));
		if (rc != NV_OK)
			host_fail(h, "%s: path too long", rel);
	}
	if (rc != NV_OK)
		return rc;
	buf_init(&config, IMEX_FILE_MAX);
	buf_init(&nodes, IMEX_FILE_MAX);
	rc = host_imex_render(c, nodes_path, &config, &nodes);
	if (rc != NV_OK) {
		host_fail(h, "IMEX config for domain %s is invalid", c->domain);
		goto out;
	}
	imex_hash(&config, &nodes, r.hash);
	imex_hash(NULL, &nodes, r.nodes_hash);
	/* Nodes first: a daemon started in between must not read a config
	 * that points at a stale list. */
	rc = imex_file_sync(h, "nodes_config.cfg", &nodes, &r.changed);
	if (rc == NV_OK)
		rc = imex_file_sync(h, "config.cfg", &config, &r.changed);
	if (rc != NV_OK)
		goto out;
	if (c->mode == HOST_IMEX_PROCESS)
		rc = process_apply(h, r.hash, false, &r);
	else
		rc = host_apply(h, r.hash, false, &r);
	if (rc == NV_OK)
		*out = r;
out:
	buf_clear(&config);
	buf_clear(&nodes);
	return rc;
}

enum nv_err host_imex_stop(struct host *h, enum host_imex_mode mode)
{
	char path[PATH_MAX_HOST];
	pid_t pid;
	enum nv_err rc = NV_OK;

	if (mode == HOST_IMEX_PROCESS) {
		if (host_imex_pid(h, &pid, NULL) == NV_OK)
			host_pid_stop(pid, IMEX_STOP_GRACE_MS);
		state_path(h, "imex.pid", path, sizeof(path));
	} else if (mode == HOST_IMEX_HOST) {
		struct host_unit_state us;
		rc = host_unit_query(h, IMEX_UNIT, &us);
		if (rc == NV_OK && us.active != HOST_UNIT_NOT_FOUND &&
		    us.active != HOST_UNIT_INACTIVE)
			rc = host_unit_action(h, "stop", IMEX_UNIT);
		state_path(h, "imex-host.hash", path, sizeof(path));
	} else {
		return NV_OK;
	}
	if (rc == NV_OK)
		(void)unlink(path);
	return rc;
}

/* Runs the ctl with args; NV_OK when it answered (any exit code). */
static enum nv_err ctl_run(struct host *h, const char *a1, const char *a2,
                           struct host_run_result *res)
{
	char cfgp[PATH_MAX_HOST];
	const char *argv[] = {h->cfg.imex_ctl, "-c", cfgp, a1, a2, NULL};
	enum nv_err rc;

	memset(res, 0, sizeof(*res));
	rc = imex_tool_path(h, "config.cfg", cfgp, sizeof(cfgp));
	if (rc != NV_OK)
		return rc;
	rc = h->ops->run(h, argv, h->cfg.tool_timeout_ms, IMEX_OUT_MAX, res);
	if (rc == NV_E_TIMEOUT)
		host_fail(h, "nvidia-imex-ctl %s%s%s timed out after %lld ms", a1, a2 ? " " : "",
		          a2 ? a2 : "", (long long)h->cfg.tool_timeout_ms);
	else if (rc != NV_OK)
		host_fail(h, "nvidia-imex-ctl could not be started");
	return rc;
}

enum nv_err host_imex_status(struct host *h, struct host_imex_status *out)
{
	struct host_run_result res;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	rc = ctl_run(h, "-q", NULL, &res);
	if (rc == NV_OK && host_imex_q_parse(buf_str(&res.out), res.out.len, &out->daemon) != NV_OK)
		out->daemon = res.exit_code != 0 ? HOST_IMEXD_NOT_RUNNING : HOST_IMEXD_UNKNOWN;
	buf_clear(&res.out);
	if (rc != NV_OK) {
		str_copy(out->err, sizeof(out->err), h->err);
		return rc;
	}
	if (out->daemon == HOST_IMEXD_NOT_RUNNING)
		return NV_OK;
	rc = ctl_run(h, "-N", "-j", &res);
	if (rc == NV_OK && res.exit_code == 0) {
		rc = host_imex_nodes_parse(buf_str(&res.out), res.out.len, &out->dom, out->err,
		                           sizeof(out->err));
		out->nodes_ok = rc == NV_OK;
		if (rc != NV_OK)
			host_fail(h, "nvidia-imex-ctl -N -j: %s", out->err);
	} else if (rc == NV_OK) {
		snprintf(out->err, sizeof(out->err), "nvidia-imex-ctl -N -j exited with %d",
		         res.exit_code);
	} else {
		str_copy(out->err, sizeof(out->err), h->err);
	}
	buf_clear(&res.out);
	return rc;
}
