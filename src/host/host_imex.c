// SPDX-License-Identifier: Apache-2.0
// IMEX on the host: both config files and the hosts file block rendered
// from the spec and written atomically, the daemon restarted only when its
// own files differ and signalled to resolve its peers' names again when
// only their addresses changed (process mode: our own detached child; host
// mode: the systemd unit), and its status read through nvidia-imex-ctl.
#include "nvl72/host.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"
#include "nvl72/timeutil.h"

#define IMEX_FILE_MAX ((size_t)64 << 10)
#define HOSTS_FILE_MAX ((size_t)1 << 20)
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

/* sha256 of the given parts, in hex; "" when OpenSSL fails. */
static void sha256_hex(const char *const *parts, const size_t *lens, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;

	out[0] = '\0';
	for (size_t i = 0; ok && i < n; i++)
		ok = EVP_DigestUpdate(ctx, parts[i], lens[i]) == 1;
	if (ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1) {
		for (unsigned int i = 0; i < mdlen && i < 32; i++)
			snprintf(out + 2 * i, 3, "%02x", md[i]);
	}
	EVP_MD_CTX_free(ctx);
}

void host_imex_slot_name(const char *domain, size_t slot, char out[HOST_HOSTNAME_LEN])
{
	size_t len = strlen(domain);
	char hex[65];

	sha256_hex(&domain, &len, 1, hex);
	snprintf(out, HOST_HOSTNAME_LEN, HOST_IMEX_NAME_PREFIX "%.8s-%02zu", hex, slot);
}

/* A hosts file maps addresses only: a peer list naming hosts itself is
 * written as it is, on every member alike. */
static bool peers_are_addresses(const struct host_imex_cfg *c)
{
	unsigned char a[sizeof(struct in6_addr)];

	for (size_t i = 0; i < c->n_peers; i++)
		if (inet_pton(AF_INET, c->peers[i], a) != 1 &&
		    inet_pton(AF_INET6, c->peers[i], a) != 1)
			return false;
	return true;
}

/* The nodes file lists the slot names, the same lines on every member (the
 * IMEX guide: identical files, or "Node map mismatch"); the hosts block maps
 * each to the address now in that slot. The compute-domain daemon of
 * NVIDIA's DRA driver does the same with fixed names and its container's
 * /etc/hosts (k8s-dra-driver-gpu v0.4.0-rc.1, cmd/compute-domain-daemon/
 * dnsnames.go: WriteNodesConfig, updateHostsFile). */
static enum nv_err render_names(const struct host_imex_cfg *c, struct buf *nodes, struct buf *hosts)
{
	char name[HOST_HOSTNAME_LEN];
	enum nv_err rc;

	rc = buf_printf(hosts, HOST_HOSTS_BEGIN " domain %s: written by nvl72-agent, do not edit\n",
	                c->domain[0] ? c->domain : "-");
	for (size_t i = 0; rc == NV_OK && i < c->n_peers; i++) {
		host_imex_slot_name(c->domain, i, name);
		rc = buf_printf(nodes, "%s\n", name);
		if (rc == NV_OK)
			rc = buf_printf(hosts, "%s\t%s\n", c->peers[i], name);
	}
	if (rc == NV_OK)
		rc = buf_printf(hosts, HOST_HOSTS_END "\n");
	return rc;
}

enum nv_err host_imex_render(const struct host_imex_cfg *c, const char *nodes_path,
                             struct buf *config, struct buf *nodes, struct buf *hosts)
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
	buf_reset(hosts);
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
	if (rc == NV_OK && c->by_name && peers_are_addresses(c))
		return render_names(c, nodes, hosts);
	for (size_t i = 0; rc == NV_OK && i < c->n_peers; i++)
		rc = buf_printf(nodes, "%s\n", c->peers[i]);
	return rc;
}

/* sha256 of a, a NUL, and b, in hex. */
static void imex_hash(const struct buf *a, const struct buf *b, char out[65])
{
	const char *parts[] = {buf_str(a), "", buf_str(b)};
	const size_t lens[] = {a->len, 1, b->len};

	sha256_hex(parts, lens, 3, out);
}

/* The marker lines and any line whose names include one of ours. */
static bool hosts_line_ours(const char *l, size_t n)
{
	size_t i = 0;

	if ((n >= strlen(HOST_HOSTS_BEGIN) &&
	     memcmp(l, HOST_HOSTS_BEGIN, strlen(HOST_HOSTS_BEGIN)) == 0) ||
	    (n >= strlen(HOST_HOSTS_END) && memcmp(l, HOST_HOSTS_END, strlen(HOST_HOSTS_END)) == 0))
		return true;
	/* "address name [alias...] [# comment]": look at the names. */
	while (i < n && l[i] != '#' && l[i] != ' ' && l[i] != '\t')
		i++;
	while (i < n && l[i] != '#') {
		size_t t;
		while (i < n && (l[i] == ' ' || l[i] == '\t'))
			i++;
		t = i;
		while (i < n && l[i] != '#' && l[i] != ' ' && l[i] != '\t')
			i++;
		if (i - t > strlen(HOST_IMEX_NAME_PREFIX) &&
		    strncasecmp(l + t, HOST_IMEX_NAME_PREFIX, strlen(HOST_IMEX_NAME_PREFIX)) == 0)
			return true;
	}
	return false;
}

enum nv_err host_hosts_merge(const char *text, size_t len, const char *block, struct buf *out)
{
	enum nv_err rc = NV_OK;

	buf_reset(out);
	if (memchr(text, '\0', len) != NULL)
		return NV_E_PARSE;
	for (size_t off = 0; off < len && rc == NV_OK;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		if (!hosts_line_ours(text + off, n)) {
			rc = buf_append(out, text + off, n);
			if (rc == NV_OK)
				rc = buf_append_byte(out, '\n');
		}
		off += n + 1;
	}
	if (rc == NV_OK)
		rc = buf_append_str(out, block);
	return rc;
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

enum host_imex_action host_imex_decide(const struct host_imex_running *run, const char *hash,
                                       const char *hosts_hash, int64_t now_ms, int64_t *wait_ms)
{
	int64_t since = now_ms - run->resolved_ms;

	*wait_ms = 0;
	if (!run->alive || strcmp(run->hash, hash) != 0)
		return HOST_IMEX_RESTART;
	if (strcmp(run->hosts_hash, hosts_hash) == 0)
		return HOST_IMEX_KEEP;
	if (run->resolved_ms > 0 && since >= 0 && since < HOST_IMEX_RESOLVE_GAP_MS) {
		*wait_ms = HOST_IMEX_RESOLVE_GAP_MS - since;
		return HOST_IMEX_SIGNAL_LATER;
	}
	return HOST_IMEX_SIGNAL;
}

/* "HASH HOSTS_HASH RESOLVED_MS" of a record; an older agent wrote HASH
 * alone, which reads as no hosts block recorded. */
static bool running_parse(const char *s, struct host_imex_running *r)
{
	long long ms = 0;
	int n = sscanf(s, "%64s %64s %lld", r->hash, r->hosts_hash, &ms);

	if (n < 1)
		return false;
	if (n < 3 || strcmp(r->hosts_hash, "-") == 0) {
		r->hosts_hash[0] = '\0';
		ms = 0;
	}
	r->resolved_ms = ms;
	return true;
}

static void running_tag(char *out, size_t cap, const char *hash, const char *hosts_hash)
{
	snprintf(out, cap, "%s %s %lld", hash, hosts_hash[0] ? hosts_hash : "-",
	         (long long)time_wall_ms());
}

static enum nv_err running_write(const char *path, const char *prefix, const char *hash,
                                 const char *hosts_hash)
{
	char line[256], tag[192];
	int n;

	running_tag(tag, sizeof(tag), hash, hosts_hash);
	n = snprintf(line, sizeof(line), "%s%s\n", prefix, tag);

	if (n < 0 || (size_t)n >= sizeof(line))
		return NV_E_TOO_LARGE;
	return host_file_write_atomic(path, line, (size_t)n, 0644) == NV_OK ? NV_OK : NV_E_IO;
}

/* The pid file: "pid starttime HASH HOSTS_HASH RESOLVED_MS"; the start
 * time guards against pid reuse. */
static enum nv_err pid_read(struct host *h, pid_t *pid, struct host_imex_running *run)
{
	char path[PATH_MAX_HOST];
	unsigned long long st;
	long long p;
	int off = 0;
	struct buf b;
	enum nv_err rc;

	memset(run, 0, sizeof(*run));
	state_path(h, "imex.pid", path, sizeof(path));
	rc = host_file_read(path, 512, &b);
	if (rc != NV_OK)
		return rc;
	if (sscanf(buf_str(&b), "%lld %llu %n", &p, &st, &off) != 2 || off <= 0 || p <= 0 ||
	    p > INT32_MAX || !running_parse(buf_str(&b) + off, run)) {
		buf_clear(&b);
		return NV_E_PARSE;
	}
	buf_clear(&b);
	if (!host_pid_alive((pid_t)p) || host_pid_starttime((pid_t)p) != st)
		return NV_E_NOT_FOUND;
	*pid = (pid_t)p;
	run->alive = true;
	return NV_OK;
}

enum nv_err host_imex_pid(struct host *h, pid_t *pid, char hash[65])
{
	struct host_imex_running run;
	enum nv_err rc = pid_read(h, pid, &run);

	if (rc == NV_OK && hash != NULL)
		memcpy(hash, run.hash, 65);
	return rc;
}

static enum nv_err pid_write(const char *path, pid_t pid, const char *hash, const char *hosts_hash)
{
	char tag[192];
	struct host_pid_rec rec = {.path = path, .tag = tag};

	running_tag(tag, sizeof(tag), hash, hosts_hash);
	return host_pid_record(&rec, pid);
}

static enum nv_err process_start(struct host *h, const char *hash, const char *hosts_hash,
                                 pid_t *out)
{
	char cfgp[PATH_MAX_HOST], logp[PATH_MAX_HOST], pidp[PATH_MAX_HOST];
	char line[PATH_MAX_HOST];
	const char *argv[] = {h->cfg.imex_bin, "-c", cfgp, NULL};
	/* On disk before the daemon may run: an agent killed right after the
	 * start leaves a daemon its successor knows about. A new daemon
	 * resolves the names at start, so the time is its first resolve. */
	char tag[192];
	struct host_pid_rec rec = {.path = pidp, .tag = tag};
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
	running_tag(tag, sizeof(tag), hash, hosts_hash);
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

/* SIGUSR1 makes IMEX resolve its peers' names again and reconnect to those
 * whose address changed, keeping every other connection (the IMEX guide,
 * signals; NVIDIA's compute-domain daemon sends it on every change of its
 * hosts file: k8s-dra-driver-gpu v0.4.0-rc.1, cmd/compute-domain-daemon/
 * main.go, IMEXDaemonUpdateLoopWithDNSNames). The record is written after
 * the signal: a crash in between signals again, never misses one. */
static enum nv_err process_signal(struct host *h, pid_t pid, const char *hash,
                                  const char *hosts_hash)
{
	char pidp[PATH_MAX_HOST];

	if (kill(pid, SIGUSR1) != 0)
		return errno == ESRCH ? NV_E_NOT_FOUND : NV_E_IO;
	log_info("agent", "nvidia-imex told to resolve its peers again", "pid=%d hosts=%.12s",
	         (int)pid, hosts_hash);
	state_path(h, "imex.pid", pidp, sizeof(pidp));
	return pid_write(pidp, pid, hash, hosts_hash);
}

static enum nv_err process_apply(struct host *h, const char *hash, const char *hosts_hash,
                                 struct host_imex_apply *out)
{
	struct host_imex_running run;
	enum host_imex_action act;
	pid_t pid = 0;

	if (pid_read(h, &pid, &run) != NV_OK)
		run.alive = false;
	act = host_imex_decide(&run, hash, hosts_hash, time_wall_ms(), &out->retry_ms);
	out->pid = pid;
	if (act == HOST_IMEX_KEEP || act == HOST_IMEX_SIGNAL_LATER)
		return NV_OK;
	if (act == HOST_IMEX_SIGNAL) {
		enum nv_err rc = process_signal(h, pid, hash, hosts_hash);
		out->signalled = rc == NV_OK;
		if (rc != NV_E_NOT_FOUND)
			return rc;
		/* It exited between the read and the signal: start it. */
	} else if (run.alive) {
		log_info("agent", "restarting nvidia-imex for a new configuration",
		         "pid=%d hash=%.12s", (int)pid, hash);
		host_pid_stop(pid, IMEX_STOP_GRACE_MS);
	}
	out->restarted = true;
	return process_start(h, hash, hosts_hash, &out->pid);
}

/* Host mode: the unit's record is "HASH HOSTS_HASH RESOLVED_MS". */
static enum nv_err host_apply(struct host *h, const char *hash, const char *hosts_hash,
                              struct host_imex_apply *out)
{
	char stamp[PATH_MAX_HOST];
	struct host_imex_running run;
	struct host_unit_state us;
	enum host_imex_action act;
	struct buf b;
	enum nv_err rc;

	memset(&run, 0, sizeof(run));
	state_path(h, "imex-host.hash", stamp, sizeof(stamp));
	if (host_file_read(stamp, 256, &b) == NV_OK) {
		if (!running_parse(buf_str(&b), &run))
			memset(&run, 0, sizeof(run));
		buf_clear(&b);
	}
	rc = host_unit_query(h, IMEX_UNIT, &us);
	if (rc != NV_OK)
		return rc;
	if (us.active == HOST_UNIT_NOT_FOUND) {
		host_fail(h, "host mode but %s is not installed", IMEX_UNIT);
		return NV_E_STATE;
	}
	run.alive = us.active == HOST_UNIT_ACTIVE;
	act = host_imex_decide(&run, hash, hosts_hash, time_wall_ms(), &out->retry_ms);
	if (act == HOST_IMEX_KEEP || act == HOST_IMEX_SIGNAL_LATER)
		return NV_OK;
	if (act == HOST_IMEX_SIGNAL) {
		rc = host_unit_signal(h, IMEX_UNIT, "SIGUSR1");
		out->signalled = rc == NV_OK;
	} else {
		rc = host_unit_action(h, "restart", IMEX_UNIT);
		out->restarted = rc == NV_OK;
	}
	if (rc != NV_OK)
		return rc;
	return running_write(stamp, "", hash, hosts_hash);
}

/* Puts block into the hosts file in place of the agent's part; the rest
 * of the host's file stays as it is. A missing file with nothing to add
 * stays missing. */
static enum nv_err hosts_sync(struct host *h, const char *block, bool *changed)
{
	struct buf have, want;
	enum nv_err rc = host_read(h, h->cfg.hosts_file, HOSTS_FILE_MAX, &have);

	if (rc == NV_E_NOT_FOUND) {
		if (block[0] == '\0')
			return NV_OK;
		buf_init(&have, 1);
	} else if (rc != NV_OK) {
		host_fail(h, "reading %s: %s", h->cfg.hosts_file, nv_err_str(rc));
		return rc;
	}
	buf_init(&want, HOSTS_FILE_MAX + IMEX_FILE_MAX);
	rc = host_hosts_merge(buf_str(&have), have.len, block, &want);
	if (rc != NV_OK)
		host_fail(h, "%s: %s", h->cfg.hosts_file,
		          rc == NV_E_PARSE ? "holds a NUL byte" : "too large");
	if (rc == NV_OK &&
	    (want.len != have.len || memcmp(buf_str(&want), buf_str(&have), want.len) != 0)) {
		rc = host_write_atomic(h, h->cfg.hosts_file, buf_str(&want), want.len, 0644);
		if (rc != NV_OK)
			host_fail(h, "writing %s: %s", h->cfg.hosts_file, nv_err_str(rc));
		else
			*changed = true;
	}
	buf_clear(&have);
	buf_clear(&want);
	return rc;
}

/* The nodes path the daemon reads: in process mode as our tools see it
 * (the host's own path when they run in its namespace, under the host
 * root when in ours); in host mode the host's systemd starts it, always in
 * the host's namespace. */
static enum nv_err daemon_nodes_path(struct host *h, enum host_imex_mode mode, char *out,
                                     size_t outsz)
{
	char rel[PATH_MAX_HOST];
	enum nv_err rc;

	if (mode == HOST_IMEX_PROCESS)
		return imex_tool_path(h, "nodes_config.cfg", out, outsz);
	snprintf(rel, sizeof(rel), "%s/nodes_config.cfg", h->cfg.imex_dir);
	rc = host_own_path(rel, out, outsz);
	if (rc != NV_OK)
		host_fail(h, "%s: path too long", rel);
	return rc;
}

enum nv_err host_imex_apply(struct host *h, const struct host_imex_cfg *c,
                            struct host_imex_apply *out)
{
	char nodes_path[PATH_MAX_HOST], hosts_hash[65];
	struct host_imex_apply r = {0};
	struct buf config, nodes, hosts;
	enum nv_err rc;

	if (c->mode == HOST_IMEX_OFF)
		return NV_E_INVAL;
	rc = daemon_nodes_path(h, c->mode, nodes_path, sizeof(nodes_path));
	if (rc != NV_OK)
		return rc;
	buf_init(&config, IMEX_FILE_MAX);
	buf_init(&nodes, IMEX_FILE_MAX);
	buf_init(&hosts, IMEX_FILE_MAX);
	rc = host_imex_render(c, nodes_path, &config, &nodes, &hosts);
	if (rc != NV_OK) {
		host_fail(h, "IMEX config for domain %s is invalid", c->domain);
		goto out;
	}
	imex_hash(&config, &nodes, r.hash);
	imex_hash(&nodes, &hosts, r.nodes_hash);
	/* No names, nothing to resolve: "" matches a record without a hosts
	 * hash (an older agent's), so such a daemon is left alone. */
	hosts_hash[0] = '\0';
	if (hosts.len > 0) {
		const char *hp = buf_str(&hosts);
		sha256_hex(&hp, &hosts.len, 1, hosts_hash);
	}
	/* The addresses first, then the nodes, then the config: a daemon
	 * started in between never reads a config that points at a stale
	 * list, nor a list of names not yet mapped. */
	rc = hosts_sync(h, buf_str(&hosts), &r.changed);
	if (rc == NV_OK)
		rc = imex_file_sync(h, "nodes_config.cfg", &nodes, &r.changed);
	if (rc == NV_OK)
		rc = imex_file_sync(h, "config.cfg", &config, &r.changed);
	if (rc != NV_OK)
		goto out;
	if (c->mode == HOST_IMEX_PROCESS)
		rc = process_apply(h, r.hash, hosts_hash, &r);
	else
		rc = host_apply(h, r.hash, hosts_hash, &r);
	if (rc == NV_OK)
		*out = r;
out:
	buf_clear(&config);
	buf_clear(&nodes);
	buf_clear(&hosts);
	return rc;
}

enum nv_err host_imex_stop(struct host *h, enum host_imex_mode mode)
{
	char path[PATH_MAX_HOST];
	bool changed = false;
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
	/* No daemon resolves the names any more: the host's file loses them. */
	if (rc == NV_OK)
		rc = hosts_sync(h, "", &changed);
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
