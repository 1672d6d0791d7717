// SPDX-License-Identifier: Apache-2.0
// A stand-in for NVIDIA's NMX-M in front of one simulated rack: the /nmx/v1
// partition, operation, GPU and chassis calls over HTTPS with basic
// authentication, a default partition that holds every GPU at first, and
// each completed change written to the trays' GPU state files as NVML
// would show it (clique and fabric state).
//
// usage: fake-nmxm --rack DIR --port N --cert PEM --key PEM --user USER:PASS
//                  [--delay MS]
//
// Like NMX-M (docs/fabric.md lists what is confirmed), a change is an
// operation that completes later (--delay, 2 s by default), a GPU is in one
// partition at most, and a create or update naming a GPU that another
// partition holds, the default one included, is refused with 409, as is a
// change to a partition whose change still runs. A GPU in no partition
// reports clique 0 (a choice of this stand-in: what NVML shows then is
// not published).
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "sim.h"

#define GPUS_MAX 72
#define PARTS_MAX 64
#define OPS_MAX 4096
#define REQ_MAX (1 << 20)
#define DEFAULT_PID 32766u
#define DEFAULT_NAME "Default Partition" /* reserved by NMX-C */

struct gpu {
	char id[32];
	char path[SIM_PATH_MAX];
	char domain[64];
	unsigned long slot, host, dev;
	int part; /* index into parts; -1: in no partition */
};

struct part {
	bool live, location;
	char id[32], name[256];
	unsigned pid;
	int busy; /* 1 + index of the operation running on it; 0 none */
};

enum op_kind { OP_CREATE, OP_SET, OP_DELETE };

struct op {
	enum op_kind kind;
	int part;
	bool set[GPUS_MAX];
	int64_t due_ms;
	bool done;
	char method[8], uri[256];
};

struct nmx {
	struct gpu g[GPUS_MAX];
	size_t ng;
	struct part p[PARTS_MAX];
	struct op *ops;
	size_t nops;
	char chassis[64];
	int64_t delay_ms;
	char auth[512]; /* "Basic …" */
};

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the GPUs of the rack ---- */

static bool gpu_load(struct nmx *n, const char *path)
{
	struct gpu *g = &n->g[n->ng];
	char v[64];

	if (!sim_exists(path) || n->ng >= GPUS_MAX)
		return false;
	memset(g, 0, sizeof(*g));
	snprintf(g->path, sizeof(g->path), "%s", path);
	if (!sim_kv_get(path, "slot", v, sizeof(v)) || !sim_parse_ul(v, 0xffff, &g->slot) ||
	    !sim_kv_get(path, "host_id", v, sizeof(v)) || !sim_parse_ul(v, 0xffff, &g->host) ||
	    !sim_kv_get(path, "module_id", v, sizeof(v)) || !sim_parse_ul(v, 0xffff, &g->dev) ||
	    !sim_kv_get(path, "cluster", g->domain, sizeof(g->domain)))
		return false;
	if (n->chassis[0] == '\0')
		sim_kv_get(path, "chassis", n->chassis, sizeof(n->chassis));
	snprintf(g->id, sizeof(g->id), "gpu-s%lu-d%lu", g->slot, g->dev);
	g->part = 0;
	n->ng++;
	return true;
}

static bool rack_load(struct nmx *n, const char *root)
{
	char rel[32], path[SIM_PATH_MAX];

	for (unsigned t = 1; t <= 18; t++)
		for (unsigned k = 0; k < 4; k++) {
			snprintf(rel, sizeof(rel), "tray-%02u/gpu/%u", t, k);
			if (sim_path(path, sizeof(path), root, rel) && sim_exists(path) &&
			    !gpu_load(n, path))
				return false;
		}
	n->p[0] =
	        (struct part){.live = true, .id = "dflt", .name = DEFAULT_NAME, .pid = DEFAULT_PID};
	return n->ng > 0;
}

static void gpu_show(const struct gpu *g, int state, unsigned clique)
{
	char v[16];

	if (clique != 0 || state == 3) {
		snprintf(v, sizeof(v), "%u", clique);
		sim_kv_set(g->path, "clique", v);
	}
	snprintf(v, sizeof(v), "%d", state);
	sim_kv_set(g->path, "state", v);
}

/* ---- operations ---- */

/* Whether o moves GPU i into or out of its partition; the GPUs it leaves
 * where they are do not see it. */
static bool op_moves(const struct nmx *n, const struct op *o, size_t i)
{
	bool in = o->kind != OP_DELETE && o->set[i];

	return in != (n->g[i].part == o->part);
}

static void op_apply(struct nmx *n, struct op *o)
{
	struct part *p = &n->p[o->part];

	for (size_t i = 0; i < n->ng; i++) {
		struct gpu *g = &n->g[i];
		if (!op_moves(n, o, i))
			continue;
		g->part = o->kind != OP_DELETE && o->set[i] ? o->part : -1;
		gpu_show(g, 3, g->part >= 0 ? p->pid : 0);
	}
	p->live = o->kind != OP_DELETE;
	p->busy = 0;
	o->done = true;
	fprintf(stderr, "fake-nmxm: %s %s completed\n", o->method, o->uri);
}

static void settle(struct nmx *n)
{
	int64_t t = now_ms();

	for (size_t i = 0; i < n->nops; i++)
		if (!n->ops[i].done && n->ops[i].due_ms <= t)
			op_apply(n, &n->ops[i]);
}

static json_t *op_json(const struct nmx *n, size_t i)
{
	const struct op *o = &n->ops[i];
	char id[32], lower[8];
	json_t *j;

	snprintf(id, sizeof(id), "op-%zu", i + 1);
	for (size_t k = 0; k < sizeof(lower); k++)
		lower[k] = (char)(o->method[k] >= 'A' && o->method[k] <= 'Z' ? o->method[k] + 32
		                                                             : o->method[k]);
	j = json_pack("{s:s, s:s, s:i, s:s, s:{s:s, s:s, s:b}}", "ID", id, "Status",
	              o->done ? "completed" : "in-progress", "Percentage", o->done ? 100 : 50,
	              "CurrentStep", o->done ? "done" : "applying", "Request", "Method", lower,
	              "URI", o->uri, "Cancellable", 0);
	if (o->done)
		json_object_set_new(j, "Result",
		                    json_pack("{s:{s:s}}", "Data", "ID", n->p[o->part].id));
	return j;
}

/* ---- answers ---- */

struct conn {
	SSL *ssl;
	char *req;
	size_t len;
	const char *body;
	char method[8], path[256];
};

static void reply(struct conn *c, int code, const char *extra, const char *body)
{
	char head[512];
	size_t len = strlen(body);
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
	                 code, len, extra != NULL ? extra : "");

	if (SSL_write(c->ssl, head, n) > 0 && len > 0)
		SSL_write(c->ssl, body, (int)len);
}

static void reply_json(struct conn *c, int code, const char *extra, json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);

	reply(c, code, extra, text != NULL ? text : "{}");
	free(text);
	json_decref(j);
}

static void reply_msg(struct conn *c, int code, const char *msg)
{
	reply_json(c, code, NULL, json_pack("{s:s}", "message", msg));
}

static json_t *part_json(const struct nmx *n, int k)
{
	const struct part *p = &n->p[k];
	json_t *mem = json_array();

	for (size_t i = 0; i < n->ng; i++) {
		const struct gpu *g = &n->g[i];
		if (g->part != k)
			continue;
		json_array_append_new(mem, p->location
		                                   ? json_pack("{s:s, s:i, s:I, s:I, s:I}",
		                                               "DomainUUID", g->domain, "ChassisID",
		                                               1, "SlotID", (json_int_t)g->slot,
		                                               "HostID", (json_int_t)g->host,
		                                               "DeviceID", (json_int_t)g->dev)
		                                   : json_string(g->id));
	}
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:o}", "ID", p->id, "PartitionID", (int)p->pid,
	                 "Name", p->name, "Type", p->location ? "LOCATION_BASED" : "ID_BASED",
	                 "Health", "HEALTHY", "Members", mem);
}

static json_t *gpu_json(const struct nmx *n, const struct gpu *g)
{
	json_t *j = json_pack("{s:s, s:s, s:{s:i, s:s, s:I, s:I}, s:I}", "ID", g->id, "DomainUUID",
	                      g->domain, "LocationInfo", "ChassisID", 1, "ChassisSerialNumber",
	                      n->chassis, "SlotID", (json_int_t)g->slot, "HostID",
	                      (json_int_t)g->host, "DeviceID", (json_int_t)g->dev);
	if (g->part >= 0)
		json_object_set_new(j, "PartitionID", json_integer(n->p[g->part].pid));
	return j;
}

static int part_by_id(const struct nmx *n, const char *id)
{
	for (int k = 0; k < PARTS_MAX; k++)
		if (n->p[k].live && strcmp(n->p[k].id, id) == 0)
			return k;
	return -1;
}

static void get(struct nmx *n, struct conn *c)
{
	const char *path = c->path;
	json_t *all = json_array();
	int k;
	size_t i;

	if (strcmp(path, "/nmx/v1/partitions") == 0) {
		for (k = 0; k < PARTS_MAX; k++)
			if (n->p[k].live)
				json_array_append_new(all, part_json(n, k));
	} else if (strcmp(path, "/nmx/v1/gpus") == 0) {
		for (i = 0; i < n->ng; i++)
			json_array_append_new(all, gpu_json(n, &n->g[i]));
	} else if (strcmp(path, "/nmx/v1/chassis") == 0) {
		json_array_append_new(all, json_pack("{s:s, s:i, s:s}", "ID", "chassis-1",
		                                     "InternalID", 1, "SerialNumber", n->chassis));
	} else if (strcmp(path, "/nmx/v1/operations") == 0) {
		for (i = 0; i < n->nops; i++)
			json_array_append_new(all, op_json(n, i));
	} else if (strncmp(path, "/nmx/v1/partitions/", 19) == 0 &&
	           (k = part_by_id(n, path + 19)) >= 0) {
		json_decref(all);
		reply_json(c, 200, NULL, part_json(n, k));
		return;
	} else if (sscanf(path, "/nmx/v1/operations/op-%zu", &i) == 1 && i >= 1 && i <= n->nops) {
		json_decref(all);
		reply_json(c, 200, NULL, op_json(n, i - 1));
		return;
	} else {
		json_decref(all);
		reply_msg(c, 404, "not found");
		return;
	}
	reply_json(c, 200, NULL, all);
}

/* ---- changes ---- */

static int gpu_named(const struct nmx *n, const json_t *m)
{
	for (size_t i = 0; i < n->ng; i++) {
		const struct gpu *g = &n->g[i];
		if (json_is_string(m) && strcmp(json_string_value(m), g->id) == 0)
			return (int)i;
		if (json_is_object(m) &&
		    json_integer_value(json_object_get(m, "SlotID")) == (json_int_t)g->slot &&
		    json_integer_value(json_object_get(m, "HostID")) == (json_int_t)g->host &&
		    json_integer_value(json_object_get(m, "DeviceID")) == (json_int_t)g->dev &&
		    json_integer_value(json_object_get(m, "ChassisID")) == 1 &&
		    json_is_string(json_object_get(m, "DomainUUID")) &&
		    strcasecmp(json_string_value(json_object_get(m, "DomainUUID")), g->domain) == 0)
			return (int)i;
	}
	return -1;
}

/* Starts a change of partition k with members mem (NULL: delete); false
 * (answered) when refused. */
static bool change(struct nmx *n, struct conn *c, enum op_kind kind, int k, const json_t *mem)
{
	struct op *o = &n->ops[n->nops];
	char msg[384], head[96], id[32];
	const json_t *m;
	size_t i;

	if (n->nops >= OPS_MAX || n->p[k].busy) {
		reply_msg(c, 409, "the partition has a change in progress");
		return false;
	}
	memset(o, 0, sizeof(*o));
	if (kind != OP_DELETE && !json_is_array(mem)) {
		reply_msg(c, 400, "Members: expected an array");
		return false;
	}
	json_array_foreach(mem, i, m) {
		int g = gpu_named(n, m);
		if (g < 0 || (kind == OP_SET && json_is_object(m) != n->p[k].location)) {
			snprintf(msg, sizeof(msg), "Members[%zu]: %s", i,
			         g < 0 ? "no such GPU" : "the member type is fixed at creation");
			reply_msg(c, g < 0 ? 400 : 409, msg);
			return false;
		}
		if (n->g[g].part != -1 && n->g[g].part != k) {
			snprintf(msg, sizeof(msg), "GPU %s is in partition %s", n->g[g].id,
			         n->p[n->g[g].part].name);
			reply_msg(c, 409, msg);
			return false;
		}
		o->set[g] = true;
	}
	o->kind = kind;
	o->part = k;
	o->due_ms = now_ms() + n->delay_ms;
	snprintf(o->method, sizeof(o->method), "%s", c->method);
	snprintf(o->uri, sizeof(o->uri), "%s", c->path);
	n->p[k].busy = (int)++n->nops;
	for (i = 0; i < n->ng; i++)
		if (op_moves(n, o, i))
			gpu_show(&n->g[i], 2, 0);
	snprintf(id, sizeof(id), "op-%zu", n->nops);
	snprintf(head, sizeof(head), "Location: /nmx/v1/operations/%s\r\n", id);
	reply_json(c, 202, head, json_pack("{s:s}", "operationId", id));
	fprintf(stderr, "fake-nmxm: %s %s accepted as %s\n", c->method, c->path, id);
	return true;
}

static void create(struct nmx *n, struct conn *c, const json_t *doc)
{
	const char *name = json_string_value(json_object_get(doc, "Name"));
	const json_t *mem = json_object_get(doc, "Members");
	int k, free_k = -1;

	if (name == NULL || name[0] == '\0' || strlen(name) > 255) {
		reply_msg(c, 400, "Name: required, at most 255 characters");
		return;
	}
	for (k = 0; k < PARTS_MAX; k++) {
		const struct part *p = &n->p[k];
		if ((p->live || p->busy) && strcmp(p->name, name) == 0) {
			reply_msg(c, 409, "a partition of that name exists");
			return;
		}
		if (!p->live && !p->busy && free_k < 0 && k > 0)
			free_k = k;
	}
	if (free_k < 0) {
		reply_msg(c, 409, "no room for another partition");
		return;
	}
	if (json_array_size(mem) == 0) {
		reply_msg(c, 400, "Members: at least one GPU");
		return;
	}
	n->p[free_k].location = json_is_object(json_array_get(mem, 0));
	if (!change(n, c, OP_CREATE, free_k, mem))
		return;
	struct part *p = &n->p[free_k];
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->id, sizeof(p->id), "p-%d", free_k);
	p->pid = (unsigned)free_k;
}

static void route(struct nmx *n, struct conn *c)
{
	json_t *doc = NULL;
	int k = -1;

	if (strcmp(c->method, "GET") == 0) {
		get(n, c);
		return;
	}
	doc = json_loads(c->body, 0, NULL);
	if (strncmp(c->path, "/nmx/v1/partitions/", 19) == 0)
		k = part_by_id(n, c->path + 19);
	if (strcmp(c->method, "POST") == 0 && strcmp(c->path, "/nmx/v1/partitions") == 0)
		create(n, c, doc);
	else if (k >= 0 && strcmp(c->method, "PUT") == 0)
		change(n, c, OP_SET, k, json_object_get(doc, "Members"));
	else if (k >= 0 && strcmp(c->method, "DELETE") == 0)
		change(n, c, OP_DELETE, k, NULL);
	else
		reply_msg(c, 404, "no such partition");
	json_decref(doc);
}

/* ---- the connection ---- */

/* Reads one request into c; false when it is not one. */
static bool request_read(struct conn *c)
{
	c->req = malloc(REQ_MAX + 1);
	c->len = 0;
	while (c->req != NULL && c->len < REQ_MAX) {
		int r = SSL_read(c->ssl, c->req + c->len, (int)(REQ_MAX - c->len));
		if (r <= 0)
			return false;
		c->len += (size_t)r;
		c->req[c->len] = '\0';
		char *end = strstr(c->req, "\r\n\r\n");
		if (end == NULL)
			continue;
		const char *cl = strcasestr(c->req, "\r\nContent-Length:");
		unsigned long body = 0;
		char num[24] = "";
		if (cl != NULL) {
			snprintf(num, sizeof(num), "%.*s", (int)strcspn(cl + 17, "\r"), cl + 17);
			if (!sim_parse_ul(sim_rtrim(num + strspn(num, " ")), REQ_MAX, &body))
				return false;
		}
		if (c->len < (size_t)(end + 4 - c->req) + body)
			continue;
		c->body = end + 4;
		return sscanf(c->req, "%7s %255s", c->method, c->path) == 2;
	}
	return false;
}

static bool authorized(const struct nmx *n, const struct conn *c)
{
	const char *h = strcasestr(c->req, "\r\nAuthorization:");
	size_t want = strlen(n->auth);

	if (h == NULL)
		return false;
	h += 16;
	h += strspn(h, " ");
	return strncmp(h, n->auth, want) == 0 && (h[want] == '\r' || h[want] == ' ');
}

static void serve_one(struct nmx *n, SSL_CTX *ctx, int fd)
{
	struct conn c = {.ssl = SSL_new(ctx)};
	struct timeval tv = {.tv_sec = 5};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SSL_set_fd(c.ssl, fd);
	if (SSL_accept(c.ssl) == 1 && request_read(&c)) {
		char *q = strchr(c.path, '?');
		if (q != NULL)
			*q = '\0';
		if (!authorized(n, &c))
			reply(&c, 401, "WWW-Authenticate: Basic realm=\"kong\"\r\n",
			      "{\"message\":\"Unauthorized\"}");
		else
			route(n, &c);
	}
	SSL_shutdown(c.ssl);
	SSL_free(c.ssl);
	free(c.req);
	close(fd);
}

static int listen_on(unsigned long port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int usage(void)
{
	fprintf(stderr, "usage: fake-nmxm --rack DIR --port N --cert PEM --key PEM "
	                "--user USER:PASS [--delay MS]\n");
	return 2;
}

static bool auth_set(struct nmx *n, const char *userpass)
{
	unsigned char enc[400];
	size_t len = strlen(userpass);

	if (len == 0 || len > 290 || strchr(userpass, ':') == NULL)
		return false;
	EVP_EncodeBlock(enc, (const unsigned char *)userpass, (int)len);
	snprintf(n->auth, sizeof(n->auth), "Basic %s", (const char *)enc);
	return true;
}

int main(int argc, char **argv)
{
	static struct nmx n;
	const char *rack = NULL, *cert = NULL, *key = NULL, *user = NULL;
	unsigned long port = 0, delay = 2000;
	SSL_CTX *ctx;
	int lfd;

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (strcmp(k, "--rack") == 0)
			rack = v;
		else if (strcmp(k, "--cert") == 0)
			cert = v;
		else if (strcmp(k, "--key") == 0)
			key = v;
		else if (strcmp(k, "--user") == 0)
			user = v;
		else if (strcmp(k, "--port") == 0    ? !sim_parse_ul(v, 65535, &port)
		         : strcmp(k, "--delay") == 0 ? !sim_parse_ul(v, 600000, &delay)
		                                     : true)
			return usage();
	}
	if (rack == NULL || cert == NULL || key == NULL || user == NULL || port == 0 ||
	    !auth_set(&n, user))
		return usage();
	n.delay_ms = (int64_t)delay;
	n.ops = calloc(OPS_MAX, sizeof(*n.ops));
	if (n.ops == NULL || !rack_load(&n, rack)) {
		fprintf(stderr, "fake-nmxm: cannot read the GPUs of %s\n", rack);
		return 1;
	}
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	lfd = listen_on(port);
	if (lfd < 0) {
		fprintf(stderr, "fake-nmxm: cannot listen on 127.0.0.1:%lu: %s\n", port,
		        strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	fprintf(stderr, "fake-nmxm: %zu GPUs, listening on 127.0.0.1:%lu\n", n.ng, port);
	while (!stopping) {
		struct pollfd pf = {.fd = lfd, .events = POLLIN};
		settle(&n);
		if (poll(&pf, 1, 100) <= 0)
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			settle(&n);
			serve_one(&n, ctx, fd);
		}
	}
	close(lfd);
	SSL_CTX_free(ctx);
	free(n.ops);
	return 0;
}
