// SPDX-License-Identifier: Apache-2.0
// The simulator's nvidia-imex: reads config.cfg and its nodes file (addresses
// or host names, resolved through the host's /etc/hosts at start and again on
// SIGUSR1), listens on its own address, and keeps real TCP connections to
// every other listed peer, so a killed daemon shows up in the others' -N
// reports. Peers swap a handshake (node map hash) and their connection rows.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

#define NODES_MAX 64
#define CONNS_MAX 256
#define IN_MAX 1024
#define OUT_MAX (256 * 1024)
#define RETRY_MS 300
#define ROW_MS 200
#define ROW_STALE_MS 1500
/* The IMEX guide (signals) says SIGUSR1 is acted on at most once every
 * 5 s; one that comes sooner is held until then. */
#define RERESOLVE_MIN_MS 5000

enum pstate { P_NEVER, P_UP, P_LOST, P_MISMATCH };

struct peer {
	char name[256];        /* the nodes file's entry: an address or a host name */
	char host[64];         /* its address now; "" while a name does not resolve */
	int out;               /* conn index of our connection to it, -1 */
	unsigned long link_id; /* which connection made it P_UP (0: none yet) */
	long long link_since;  /* wall ms of that; both kept for -N -j's simLinks */
	enum pstate st;
	char row[NODES_MAX + 1];
	char state[32];
	long long row_ms;
	long long next_try_ms;
};

struct conn {
	int fd;   /* -1: free slot */
	int peer; /* -1 until a HELLO names it */
	bool outgoing, connecting, cmd;
	char in[IN_MAX];
	size_t inlen;
};

static struct {
	char nodes_path[512], bind_ip[64], cmd_ip[64], version[64];
	unsigned port, cmd_port;
	size_t n, self;
	unsigned long hash, links;
	char hosts_path[SIM_PATH_MAX];
	long long resolved_ms;
	struct peer peers[NODES_MAX];
	struct conn conns[CONNS_MAX];
	int lfd, cfd;
} d;

static volatile sig_atomic_t stop, reresolve;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		reresolve = 1;
	else
		stop = 1;
}

static long long clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

__attribute__((format(printf, 2, 3))) static void say(const char *lvl, const char *fmt, ...)
{
	char ts[64];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%b %d %Y %H:%M:%S", &tm);
	printf("[%s] [%s] [tid %d] ", ts, lvl, (int)getpid());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* A path this daemon is handed (-c, IMEX_NODE_CONFIG_FILE), where the
 * simulated host keeps the file: the daemon runs in the host's mount
 * namespace, as the real one does, so it only knows the host's paths. */
static void host_view(char *out, size_t outsz, const char *path)
{
	if (!sim_host_path(out, outsz, sim_root(), path))
		snprintf(out, outsz, "%s", path);
}

static void cfg_line(char *line)
{
	char *eq = strchr(line, '=');
	unsigned long v;

	if (line[0] == '#' || eq == NULL)
		return;
	*eq = '\0';
	sim_rtrim(eq + 1);
	if (strcmp(line, "SERVER_PORT") == 0 && sim_parse_ul(eq + 1, 65535, &v))
		d.port = (unsigned)v;
	else if (strcmp(line, "IMEX_CMD_PORT") == 0 && sim_parse_ul(eq + 1, 65535, &v))
		d.cmd_port = (unsigned)v;
	else if (strcmp(line, "IMEX_NODE_CONFIG_FILE") == 0)
		host_view(d.nodes_path, sizeof(d.nodes_path), eq + 1);
	else if (strcmp(line, "BIND_INTERFACE_IP") == 0)
		snprintf(d.bind_ip, sizeof(d.bind_ip), "%s", eq + 1);
	else if (strcmp(line, "IMEX_CMD_BIND_INTERFACE_IP") == 0)
		snprintf(d.cmd_ip, sizeof(d.cmd_ip), "%s", eq + 1);
}

static bool config_load(const char *path)
{
	static char text[SIM_FILE_MAX];
	char full[SIM_PATH_MAX];
	char *save = NULL;

	d.port = 50000;
	d.cmd_port = 50005;
	host_view(d.nodes_path, sizeof(d.nodes_path), "/etc/nvidia-imex/nodes_config.cfg");
	host_view(d.hosts_path, sizeof(d.hosts_path), "/etc/hosts");
	host_view(full, sizeof(full), path);
	if (sim_read(full, text, sizeof(text)) < 0) {
		say("ERROR", "cannot read config file %s", path);
		return false;
	}
	for (char *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save))
		cfg_line(l);
	return true;
}

/* name's address as glibc's "files" source answers from the host's hosts
 * file: the first line listing it (IPv4 only, as the simulated trays). */
static bool hosts_lookup(const char *name, char *out, size_t outsz)
{
	static char text[SIM_FILE_MAX];
	char *save = NULL;

	if (sim_read(d.hosts_path, text, sizeof(text)) < 0)
		return false;
	for (char *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(l, '#'), *fs = NULL, *addr, *tok;
		struct in_addr ia;

		if (hash != NULL)
			*hash = '\0';
		addr = strtok_r(l, " \t", &fs);
		if (addr == NULL || inet_pton(AF_INET, addr, &ia) != 1)
			continue;
		while ((tok = strtok_r(NULL, " \t", &fs)) != NULL) {
			if (strcasecmp(tok, name) == 0) {
				snprintf(out, outsz, "%s", addr);
				return true;
			}
		}
	}
	return false;
}

static bool is_address(const char *s)
{
	struct in_addr ia;

	return inet_pton(AF_INET, s, &ia) == 1;
}

/* The address entry j has now: itself, or its name looked up; "" if none. */
static void resolve(size_t j, char *out, size_t outsz)
{
	const char *name = d.peers[j].name;

	if (is_address(name))
		snprintf(out, outsz, "%s", name);
	else if (!hosts_lookup(name, out, outsz))
		out[0] = '\0';
}

static bool nodes_load(void)
{
	static char text[SIM_FILE_MAX];
	char *save = NULL;

	if (sim_read(d.nodes_path, text, sizeof(text)) < 0) {
		say("ERROR", "cannot read node config file %s", d.nodes_path);
		return false;
	}
	d.hash = 5381;
	for (const char *p = text; *p != '\0'; p++)
		d.hash = d.hash * 33u + (unsigned char)*p;
	for (char *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		sim_rtrim(l);
		if (l[0] == '\0')
			continue;
		if (d.n == NODES_MAX)
			return false;
		snprintf(d.peers[d.n].name, sizeof(d.peers[d.n].name), "%s", l);
		if (!is_address(l))
			say("INFO", "Treating node config entry '%s' as a host name.", l);
		resolve(d.n, d.peers[d.n].host, sizeof(d.peers[d.n].host));
		d.n++;
	}
	d.resolved_ms = now_ms();
	return d.n > 0;
}

/* Our own address: the configured bind IP, else the tray's from the sim. */
static bool identify(void)
{
	char p[SIM_PATH_MAX];

	if (d.bind_ip[0] == '\0' && !(sim_path(p, sizeof(p), sim_root(), "tray.env") &&
	                              sim_kv_get(p, "ip", d.bind_ip, sizeof(d.bind_ip))))
		d.bind_ip[0] = '\0';
	for (size_t i = 0; i < d.n; i++) {
		if (strcmp(d.peers[i].host, d.bind_ip) == 0) {
			d.self = i;
			say("INFO", "Identified this node as ID %zu", i);
			return true;
		}
	}
	say("ERROR", "No matching network interface found for any IP addresses in the node "
	             "configuration file");
	return false;
}

static bool driver_loaded(void)
{
	return sim_driver_loaded(sim_root(), d.version, sizeof(d.version));
}

static bool addr_of(const char *ip, unsigned port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1;
}

static int listen_on(const char *ip, unsigned port)
{
	struct sockaddr_in sa;
	int one = 1, fd;

	if (!addr_of(ip, port, &sa))
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int conn_add(int fd, bool outgoing, bool cmd)
{
	for (int i = 0; i < CONNS_MAX; i++) {
		struct conn *c = &d.conns[i];
		if (c->fd >= 0)
			continue;
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->peer = -1;
		c->outgoing = outgoing;
		c->cmd = cmd;
		return i;
	}
	close(fd);
	return -1;
}

static void conn_close(int i)
{
	struct conn *c = &d.conns[i];

	if (c->outgoing && c->peer >= 0 && d.peers[c->peer].out == i) {
		struct peer *p = &d.peers[c->peer];
		p->out = -1;
		if (p->st == P_UP) {
			p->st = P_LOST;
			say("ERROR",
			    "Node disconnect event detected for node %d with address %s, "
			    "attempting to reconnect",
			    c->peer, p->host);
		}
		p->next_try_ms = now_ms() + RETRY_MS;
	}
	close(c->fd);
	c->fd = -1;
}

/* Drops every connection with peer j (its address changed): the next
 * dial goes to the new address. */
static void peer_forget(size_t j)
{
	struct peer *p = &d.peers[j];

	p->st = P_NEVER; /* not a disconnect of a known peer: no event */
	for (int i = 0; i < CONNS_MAX; i++)
		if (d.conns[i].fd >= 0 && !d.conns[i].cmd && d.conns[i].peer == (int)j)
			conn_close(i);
	p->out = -1;
	p->row[0] = '\0';
	p->row_ms = 0;
	p->link_id = 0;
	p->next_try_ms = 0;
	snprintf(p->state, sizeof(p->state), "UNKNOWN");
}

/* SIGUSR1, as the IMEX guide describes it: the nodes file is not read
 * again, but its host names are resolved again; a peer whose address
 * changed is reconnected at the new one, every other connection stays. */
static void peers_reresolve(void)
{
	if (now_ms() - d.resolved_ms < RERESOLVE_MIN_MS)
		return; /* held, reresolve stays set */
	reresolve = 0;
	d.resolved_ms = now_ms();
	say("INFO", "SIGUSR1: resolving the node configuration's host names again");
	for (size_t j = 0; j < d.n; j++) {
		char addr[64];
		if (j == d.self)
			continue;
		resolve(j, addr, sizeof(addr));
		if (strcmp(addr, d.peers[j].host) == 0)
			continue;
		say("INFO", "Node %zu (%s) moved from %s to %s", j, d.peers[j].name,
		    d.peers[j].host[0] ? d.peers[j].host : "-", addr[0] ? addr : "-");
		peer_forget(j);
		snprintf(d.peers[j].host, sizeof(d.peers[j].host), "%s", addr);
	}
}

static void send_line(int i, const char *s)
{
	/* Lines are small; a peer too slow to take one is dropped. */
	if (send(d.conns[i].fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
		conn_close(i);
}

static void hello_send(int i)
{
	char line[160];

	snprintf(line, sizeof(line), "HELLO %zu %lu %s\n", d.self, d.hash, d.version);
	send_line(i, line);
}

static void dial(size_t j)
{
	struct sockaddr_in sa, src;
	int fd, ci;

	d.peers[j].next_try_ms = now_ms() + RETRY_MS;
	if (d.peers[j].host[0] == '\0' || !addr_of(d.peers[j].host, d.port, &sa))
		return;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* From our own address, as IMEX binds to its interface: the peer
	 * checks it against the node we claim to be. */
	if (addr_of(d.bind_ip, 0, &src))
		(void)bind(fd, (struct sockaddr *)&src, sizeof(src));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return;
	}
	ci = conn_add(fd, true, false);
	if (ci < 0)
		return;
	d.conns[ci].peer = (int)j;
	d.conns[ci].connecting = true;
	d.peers[j].out = ci;
}

static char my_cell(size_t j)
{
	if (j == d.self)
		return 'C';
	switch (d.peers[j].st) {
	case P_UP:
		return 'C';
	case P_LOST:
		return 'R';
	case P_MISMATCH:
		return 'M';
	default:
		return 'N';
	}
}

static void my_row(char *row)
{
	for (size_t j = 0; j < d.n; j++)
		row[j] = my_cell(j);
	row[d.n] = '\0';
}

static bool node_available(size_t j)
{
	const struct peer *p = &d.peers[j];

	if (j == d.self)
		return true;
	return p->st == P_UP && p->row_ms != 0 && now_ms() - p->row_ms < ROW_STALE_MS;
}

/* Row of node j as this daemon knows it; all 'I' when unreachable. */
static void node_row(size_t j, char *row)
{
	if (j == d.self) {
		my_row(row);
		return;
	}
	if (node_available(j) && strlen(d.peers[j].row) == d.n) {
		memcpy(row, d.peers[j].row, d.n + 1);
		return;
	}
	memset(row, 'I', d.n);
	row[d.n] = '\0';
}

static const char *domain_state(void)
{
	char row[NODES_MAX + 1];
	size_t up = 0;
	bool full = true;

	for (size_t j = 0; j < d.n; j++) {
		if (!node_available(j)) {
			full = false;
			continue;
		}
		up++;
		node_row(j, row);
		full = full && strspn(row, "C") == d.n;
	}
	if (full)
		return "UP";
	return up <= 1 && d.n > 1 ? "DOWN" : "DEGRADED";
}

static const char *cell_word(char c)
{
	switch (c) {
	case 'C':
		return "CONNECTED";
	case 'R':
		return "RECOVERING";
	case 'M':
		return "MAP_MISMATCH";
	case 'N':
		return "NEVER_CONNECTED";
	default:
		return "INVALID";
	}
}

static size_t out_add(char *out, size_t used, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static size_t out_add(char *out, size_t used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (used >= OUT_MAX)
		return used;
	va_start(ap, fmt);
	n = vsnprintf(out + used, OUT_MAX - used, fmt, ap);
	va_end(ap);
	if (n < 0)
		return used;
	return used + (size_t)n < OUT_MAX ? used + (size_t)n : OUT_MAX - 1;
}

static const char *node_state(size_t j)
{
	if (j == d.self)
		return "READY";
	return node_available(j) ? d.peers[j].state : "UNAVAILABLE";
}

static size_t report_json(char *out)
{
	char row[NODES_MAX + 1];
	size_t u = out_add(out, 0, "{\"nodes\":{");

	for (size_t j = 0; j < d.n; j++) {
		node_row(j, row);
		const struct peer *p = &d.peers[j];
		u = out_add(out, u,
		            "%s\"%zu\":{\"status\":\"%s\",\"host\":\"%s\",\"hostName\":\"%s\","
		            "\"connections\":{",
		            j ? "," : "", j, node_state(j), p->host[0] ? p->host : p->name,
		            strcmp(p->name, p->host) != 0 ? p->name : "N/A");
		for (size_t k = 0; k < d.n; k++)
			u = out_add(out, u,
			            "%s\"%zu\":{\"host\":\"%s\",\"status\":\"%s\",\"changed\":%s}",
			            k ? "," : "", k, d.peers[k].host, cell_word(row[k]),
			            row[k] == 'C' ? "false" : "true");
		u = out_add(out, u, "}}");
	}
	/* Not in the real output: which connection this daemon holds to each
	 * peer it is connected to, so a test can tell a kept connection from
	 * a new one. */
	u = out_add(out, u, "},\"simLinks\":{");
	for (size_t j = 0, k = 0; j < d.n; j++) {
		const struct peer *p = &d.peers[j];
		if (j == d.self || p->st != P_UP)
			continue;
		u = out_add(out, u,
		            "%s\"%zu\":{\"name\":\"%s\",\"host\":\"%s\",\"id\":%lu,\"since\":%lld}",
		            k++ ? "," : "", j, p->name, p->host, p->link_id, p->link_since);
	}
	return out_add(out, u, "},\"timestamp\":\"%lld\",\"status\":\"%s\"}\n", now_ms(),
	               domain_state());
}

static size_t report_text(char *out)
{
	char row[NODES_MAX + 1];
	size_t u = out_add(out, 0, "Nodes:\n");

	for (size_t j = 0; j < d.n; j++)
		u = out_add(out, u, "Node #%-3zu - %-15s - %-20s - Version: %s\n", j,
		            d.peers[j].host[0] ? d.peers[j].host : d.peers[j].name, node_state(j),
		            d.version);
	u = out_add(out, u, "\n Nodes From\\To ");
	for (size_t k = 0; k < d.n; k++)
		u = out_add(out, u, " %-3zu", k);
	u = out_add(out, u, "\n");
	for (size_t j = 0; j < d.n; j++) {
		node_row(j, row);
		u = out_add(out, u, "       %-8zu", j);
		for (size_t k = 0; k < d.n; k++)
			u = out_add(out, u, " %c  ", row[k] == 'M' ? '!' : row[k]);
		u = out_add(out, u, "\n");
	}
	return out_add(out, u, "\nDomain State: %s\n", domain_state());
}

static void cmd_answer(int i, const char *line)
{
	static char out[OUT_MAX];
	size_t n;

	if (strcmp(line, "Q") == 0)
		n = (size_t)snprintf(out, sizeof(out), "READY\n");
	else if (strcmp(line, "NJ") == 0)
		n = report_json(out);
	else if (strcmp(line, "N") == 0)
		n = report_text(out);
	else
		n = (size_t)snprintf(out, sizeof(out), "Unknown command\n");
	/* Blocking write: the ctl reads until we close. */
	fcntl(d.conns[i].fd, F_SETFL, 0);
	for (size_t off = 0; off < n;) {
		ssize_t w = send(d.conns[i].fd, out + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	conn_close(i);
}

/* Whether an incoming connection comes from the address node idx has now:
 * a daemon left in a slot that another tray took (same node map, old
 * address) is turned away, not taken for that node. */
static bool from_node(int i, size_t idx)
{
	static char refused[NODES_MAX][64];
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char from[64];

	if (getpeername(d.conns[i].fd, (struct sockaddr *)&sa, &sl) != 0 ||
	    inet_ntop(AF_INET, &sa.sin_addr, from, sizeof(from)) == NULL)
		return false;
	if (strcmp(from, d.peers[idx].host) == 0)
		return true;
	if (strcmp(refused[idx], from) != 0) {
		say("ERROR", "Connection from %s claims node %zu, which is %s: refused", from, idx,
		    d.peers[idx].host[0] ? d.peers[idx].host : "unresolved");
		snprintf(refused[idx], sizeof(refused[idx]), "%s", from);
	}
	return false;
}

static void hello_recv(int i, const char *line)
{
	struct conn *c = &d.conns[i];
	unsigned long hash;
	size_t idx;
	char ver[64];

	if (sscanf(line, "HELLO %zu %lu %63s", &idx, &hash, ver) != 3) {
		conn_close(i);
		return;
	}
	/* A different node map: tell the dialer, trust nothing it says. */
	if (hash != d.hash) {
		if (!c->outgoing) {
			hello_send(i);
		} else if (d.peers[c->peer].st != P_MISMATCH) {
			d.peers[c->peer].st = P_MISMATCH;
			say("ERROR", "Node map mismatch with node %d, communication disabled",
			    c->peer);
		}
		return;
	}
	if (idx >= d.n || idx == d.self || (c->outgoing && (int)idx != c->peer)) {
		conn_close(i);
		return;
	}
	if (!c->outgoing && !from_node(i, idx)) {
		conn_close(i);
		return;
	}
	if (!c->outgoing) {
		c->peer = (int)idx;
		hello_send(i);
		return;
	}
	if (d.peers[idx].st != P_UP) {
		say("INFO", "Connection established to node %zu (%s)", idx, d.peers[idx].host);
		d.peers[idx].link_id = ++d.links;
		d.peers[idx].link_since = clock_ms(CLOCK_REALTIME);
	}
	d.peers[idx].st = P_UP;
}

static void row_recv(int i, const char *line)
{
	char state[32], row[NODES_MAX + 1];
	size_t idx;

	(void)i;
	if (sscanf(line, "ROW %zu %31s %64s", &idx, state, row) != 3 || idx >= d.n ||
	    idx == d.self || strlen(row) != d.n)
		return;
	snprintf(d.peers[idx].state, sizeof(d.peers[idx].state), "%s", state);
	memcpy(d.peers[idx].row, row, d.n + 1);
	d.peers[idx].row_ms = now_ms();
}

static void line_recv(int i, char *line)
{
	if (d.conns[i].cmd)
		cmd_answer(i, line);
	else if (strncmp(line, "HELLO ", 6) == 0)
		hello_recv(i, line);
	else if (strncmp(line, "ROW ", 4) == 0)
		row_recv(i, line);
}

static void conn_readable(int i)
{
	struct conn *c = &d.conns[i];
	ssize_t r = read(c->fd, c->in + c->inlen, IN_MAX - c->inlen);
	char *nl;

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(i);
		return;
	}
	c->inlen += (size_t)r;
	while (c->fd >= 0 && (nl = memchr(c->in, '\n', c->inlen)) != NULL) {
		char line[IN_MAX];
		size_t ll = (size_t)(nl - c->in);
		memcpy(line, c->in, ll);
		line[ll] = '\0';
		sim_rtrim(line);
		memmove(c->in, nl + 1, c->inlen - ll - 1);
		c->inlen -= ll + 1;
		line_recv(i, line);
	}
	if (c->fd >= 0 && c->inlen == IN_MAX)
		conn_close(i); /* a line longer than any we speak */
}

static void conn_event(int i, short rev)
{
	struct conn *c = &d.conns[i];
	int err = 0;
	socklen_t el = sizeof(err);

	if (c->connecting) {
		if (!(rev & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
			conn_close(i);
			return;
		}
		c->connecting = false;
		hello_send(i);
		return;
	}
	if (rev & (POLLIN | POLLERR | POLLHUP))
		conn_readable(i);
}

static void accept_all(int lfd, bool cmd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		conn_add(fd, false, cmd);
	}
}

static void rows_send(void)
{
	char row[NODES_MAX + 1], line[NODES_MAX + 64];

	my_row(row);
	snprintf(line, sizeof(line), "ROW %zu READY %s\n", d.self, row);
	for (int i = 0; i < CONNS_MAX; i++) {
		const struct conn *c = &d.conns[i];
		if (c->fd < 0 || c->cmd || c->connecting || c->peer < 0)
			continue;
		if (c->outgoing && d.peers[c->peer].st != P_UP)
			continue;
		send_line(i, line);
	}
}

static void loop_once(long long *next_row)
{
	struct pollfd pf[CONNS_MAX + 2];
	int map[CONNS_MAX + 2], n = 2;
	long long now = now_ms();

	if (reresolve)
		peers_reresolve();
	for (size_t j = 0; j < d.n; j++)
		if (j != d.self && d.peers[j].out < 0 && now >= d.peers[j].next_try_ms)
			dial(j);
	if (now >= *next_row) {
		*next_row = now + ROW_MS;
		rows_send();
	}
	pf[0] = (struct pollfd){.fd = d.lfd, .events = POLLIN};
	pf[1] = (struct pollfd){.fd = d.cfd, .events = POLLIN};
	for (int i = 0; i < CONNS_MAX; i++) {
		if (d.conns[i].fd < 0)
			continue;
		pf[n] = (struct pollfd){.fd = d.conns[i].fd,
		                        .events =
		                                (short)(d.conns[i].connecting ? POLLOUT : POLLIN)};
		map[n++] = i;
	}
	if (poll(pf, (nfds_t)n, 50) <= 0)
		return;
	if (pf[0].revents & POLLIN)
		accept_all(d.lfd, false);
	if (pf[1].revents & POLLIN)
		accept_all(d.cfd, true);
	for (int k = 2; k < n; k++)
		if (pf[k].revents != 0 && d.conns[map[k]].fd == pf[k].fd)
			conn_event(map[k], pf[k].revents);
}

static bool setup(const char *cfg)
{
	for (int i = 0; i < CONNS_MAX; i++)
		d.conns[i].fd = -1;
	for (size_t j = 0; j < NODES_MAX; j++) {
		d.peers[j].out = -1;
		snprintf(d.peers[j].state, sizeof(d.peers[j].state), "UNKNOWN");
	}
	if (!config_load(cfg) || !nodes_load())
		return false;
	if (!driver_loaded()) {
		say("ERROR", "NVIDIA driver is not loaded; IMEX cannot start");
		return false;
	}
	if (!identify())
		return false;
	d.lfd = listen_on(d.bind_ip, d.port);
	d.cfd = listen_on(d.cmd_ip[0] ? d.cmd_ip : "127.0.0.1", d.cmd_port);
	if (d.lfd < 0 || d.cfd < 0) {
		say("ERROR", "cannot listen on %s:%u / command port %u: %s", d.bind_ip, d.port,
		    d.cmd_port, strerror(errno));
		return false;
	}
	sim_step(sim_root(), "imex-start");
	say("INFO", "IMEX version %s is running with the following configuration options",
	    d.version);
	say("INFO", "IMEX library communication bind port = %u", d.port);
	return true;
}

int main(int argc, char **argv)
{
	const char *cfg = "/etc/nvidia-imex/config.cfg";
	long long next_row = 0;
	struct sigaction sa = {0};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			cfg = argv[++i];
	}
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!setup(cfg))
		return 1;
	while (!stop)
		loop_once(&next_row);
	sim_step(sim_root(), "imex-stop");
	say("INFO", "IMEX daemon shutting down");
	for (int i = 0; i < CONNS_MAX; i++)
		if (d.conns[i].fd >= 0)
			close(d.conns[i].fd);
	return 0;
}
