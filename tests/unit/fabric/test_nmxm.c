// SPDX-License-Identifier: Apache-2.0
// The NMX-M backend against a small NMX-M stand-in on 127.0.0.1: partition
// create/update/delete with their asynchronous operations (completed,
// failed, never finishing), 401, 5xx with retries, garbage and oversized
// answers, TLS refusal, and credentials kept out of the logs; and a stand-in
// that models NMX-M's default partition, so that GPUs leave it before a
// create and return to it after a delete, also across a restart.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

enum mode {
	M_OK = 0,
	M_OP_FAIL,  /* the operation fails */
	M_OP_NEVER, /* the operation never ends */
	M_401,
	M_503_TWICE, /* two 503s, then fine */
	M_500_ALWAYS,
	M_GARBAGE,
	M_HUGE,
	M_POST_500, /* reads answer, a create fails half way */
	M_MODEL,    /* the stateful model below */
};

/* The model: 16 GPUs, four trays at chassis 7 slots 11-14, devices 1-4,
 * all in the default partition at first. Like NMX-M, it refuses a create
 * or an update naming a GPU that is in another partition (the default one
 * included), or a change to a partition whose change still runs. A change
 * takes effect at the second poll of its operation. */
#define MG 16
#define MPARTS 8
#define MOPS 32
enum mop_kind { MOP_CREATE, MOP_SET, MOP_DELETE };
struct model {
	int part_of[MG]; /* index into parts; -1: in no partition */
	struct mpart {
		bool live;
		int pid;
		char name[64];
		int busy; /* 1 + index of the op running on it; 0 none */
	} parts[MPARTS];
	struct mop {
		enum mop_kind kind;
		int part, polls;
		bool set[MG];
		bool done;
	} ops[MOPS];
	int nops;
	int posts, puts, deletes;
	bool domains; /* GPUs name their domain: slot 14 another one */
};

struct srv {
	int lfd, port;
	pthread_t th;
	enum mode mode;
	int list_hits, op_hits;
	int requests;
	char last_line[300];
	char last_body[8192];
	char last_auth[256];
	char methods[1024]; /* "POST /nmx/v1/partitions;GET …;" */
	pthread_mutex_t mu;
	struct model m;
};

static const char PARTS[] =
        "[{\"ID\":\"p-a\",\"PartitionID\":32766,\"Name\":\"Default "
        "Partition\",\"Type\":\"UNDEFINED\","
        "\"Health\":\"HEALTHY\",\"Members\":[],\"CreatedAt\":\"x\",\"UpdatedAt\":\"y\"},"
        "{\"ID\":\"p-b\",\"PartitionID\":3,\"Name\":\"tenant-a\",\"Type\":\"LOCATION_BASED\","
        "\"Health\":\"DEGRADED\",\"Members\":[{\"DomainUUID\":\"3c9a5e21-7f04-4b6d-8e2a-"
        "91d0c4f7a6b3\","
        "\"ChassisID\":7,\"SlotID\":12,\"HostID\":1,\"DeviceID\":2}],\"Extra\":{\"a\":1}}]";

static void respond(int fd, int code, const char *extra, const char *body, size_t len)
{
	char head[512];
	int n = snprintf(
	        head, sizeof(head),
	        "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
	        "Connection: close\r\n%s\r\n",
	        code, len, extra ? extra : "");
	if (write(fd, head, (size_t)n) < 0)
		return;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, body + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

static void respond_str(int fd, int code, const char *extra, const char *body)
{
	respond(fd, code, extra, body, strlen(body));
}

/* Reads one request; false for a TLS hello or a closed socket. */
static bool read_req(int fd, char *req, size_t reqsz, const char **body)
{
	size_t n = 0;

	req[0] = '\0';
	while (n + 1 < reqsz) {
		ssize_t r = read(fd, req + n, reqsz - 1 - n);
		if (r <= 0)
			return false;
		if (n == 0 && (unsigned char)req[0] == 0x16)
			return false;
		n += (size_t)r;
		req[n] = '\0';
		char *end = strstr(req, "\r\n\r\n");
		if (end == NULL)
			continue;
		char *cl = strcasestr(req, "Content-Length:");
		size_t want = (size_t)(end + 4 - req) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		*body = end + 4;
		if (n >= want)
			return true;
	}
	return false;
}

static void route_op(struct srv *s, int fd, const char *id)
{
	char text[1024];
	int hit = ++s->op_hits;
	const char *status = "in-progress", *result = "";

	if (s->mode == M_OK && hit >= 2) {
		status = "completed";
		result = ",\"Result\":{\"Data\":{\"ID\":\"p-new\"}}";
	} else if (s->mode == M_OP_FAIL && hit >= 2) {
		status = "failed";
		result = ",\"Result\":{\"Error\":\"INVALID_LOCATION\",\"Details\":\"slot 99 is "
		         "empty\"}";
	}
	snprintf(text, sizeof(text),
	         "{\"ID\":\"%s\",\"Status\":\"%s\",\"Percentage\":%d,\"CurrentStep\":\"step %d\","
	         "\"CreatedAt\":\"a\",\"UpdatedAt\":\"b\",\"Request\":{\"Method\":\"post\",\"URI\":"
	         "\"/x\","
	         "\"Cancellable\":false}%s}",
	         id, status, hit * 10, hit, result);
	respond_str(fd, 200, NULL, text);
}

static void route_list(struct srv *s, int fd)
{
	int hit = ++s->list_hits;

	switch (s->mode) {
	case M_401:
		respond_str(fd, 401, "WWW-Authenticate: Basic realm=\"kong\"\r\n",
		            "{\"message\":\"Invalid authentication credentials\"}");
		return;
	case M_503_TWICE:
		if (hit <= 2) {
			respond_str(fd, 503, NULL, "<html>busy</html>");
			return;
		}
		break;
	case M_500_ALWAYS:
		respond_str(fd, 500, NULL, "{\"error\":{\"message\":\"database locked\"}}");
		return;
	case M_GARBAGE:
		respond_str(fd, 200, NULL, "[{\"ID\": \"p-a\", \"PartitionID\": ");
		return;
	case M_HUGE: {
		size_t len = 64 << 10;
		char *big = malloc(len);
		memset(big, ' ', len);
		big[0] = '[';
		big[len - 1] = ']';
		respond(fd, 200, NULL, big, len);
		free(big);
		return;
	}
	default:
		break;
	}
	respond_str(fd, 200, NULL, PARTS);
}

static int mgpu_slot(int i)
{
	return 11 + i / 4;
}

static int mgpu_dev(int i)
{
	return 1 + i % 4;
}

static void mgpu_id(int i, char *out, size_t outsz)
{
	snprintf(out, outsz, "g-%d-%d", mgpu_slot(i), mgpu_dev(i));
}

static void model_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->parts[0] = (struct mpart){.live = true, .pid = 32766, .name = "Default Partition"};
	for (int i = 0; i < MG; i++)
		m->part_of[i] = 0;
}

/* The GPU a member names (an id string or a location object); -1 none. */
static int model_gpu(const json_t *v)
{
	char id[32];

	for (int i = 0; i < MG; i++) {
		mgpu_id(i, id, sizeof(id));
		if (json_is_string(v) && strcmp(json_string_value(v), id) == 0)
			return i;
		if (json_is_object(v) &&
		    json_integer_value(json_object_get(v, "SlotID")) == mgpu_slot(i) &&
		    json_integer_value(json_object_get(v, "DeviceID")) == mgpu_dev(i))
			return i;
	}
	return -1;
}

static void model_apply(struct model *m, struct mop *o)
{
	struct mpart *p = &m->parts[o->part];

	for (int i = 0; i < MG; i++) {
		if (o->kind == MOP_DELETE && m->part_of[i] == o->part)
			m->part_of[i] = -1;
		else if (o->kind != MOP_DELETE && o->set[i])
			m->part_of[i] = o->part;
		else if (o->kind == MOP_SET && m->part_of[i] == o->part)
			m->part_of[i] = -1;
	}
	p->live = o->kind != MOP_DELETE;
	p->busy = 0;
	o->done = true;
}

static void model_part_json(const struct model *m, int k, char *out, size_t outsz)
{
	const struct mpart *p = &m->parts[k];
	char id[32];
	size_t n = (size_t)snprintf(out, outsz,
	                            "{\"ID\":\"p%d\",\"PartitionID\":%d,\"Name\":\"%s\","
	                            "\"Type\":\"ID_BASED\",\"Health\":\"HEALTHY\",\"Members\":[",
	                            k, p->pid, p->name);
	bool first = true;

	for (int i = 0; i < MG && n < outsz; i++) {
		if (m->part_of[i] != k)
			continue;
		mgpu_id(i, id, sizeof(id));
		n += (size_t)snprintf(out + n, outsz - n, "%s\"%s\"", first ? "" : ",", id);
		first = false;
	}
	if (n < outsz)
		snprintf(out + n, outsz - n, "]}");
}

static void model_get(struct srv *s, int fd, const char *path)
{
	struct model *m = &s->m;
	char text[16384], one[2048];
	size_t n = 0;
	int k;

	if (strcmp(path, "/nmx/v1/gpus") == 0) {
		n = (size_t)snprintf(text, sizeof(text), "[");
		for (int i = 0; i < MG; i++) {
			mgpu_id(i, one, sizeof(one));
			const char *dom = !m->domains ? ""
			                  : mgpu_slot(i) == 14
			                          ? ",\"DomainUUID\":\"b0b0\""
			                          : ",\"DomainUUID\":\"3c9a5e21-7f04-4b6d-8e2a-"
			                            "91d0c4f7a6b3\"";
			n += (size_t)snprintf(
			        text + n, sizeof(text) - n,
			        "%s{\"ID\":\"%s\"%s,\"LocationInfo\":{\"ChassisID\":7,"
			        "\"SlotID\":%d,\"HostID\":1},\"DeviceID\":%d}",
			        i ? "," : "", one, dom, mgpu_slot(i), mgpu_dev(i));
		}
		snprintf(text + n, sizeof(text) - n, "]");
		respond_str(fd, 200, NULL, text);
	} else if (strcmp(path, "/nmx/v1/partitions") == 0) {
		n = (size_t)snprintf(text, sizeof(text), "[");
		for (k = 0; k < MPARTS; k++) {
			if (!m->parts[k].live)
				continue;
			model_part_json(m, k, one, sizeof(one));
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", n > 1 ? "," : "",
			                      one);
		}
		snprintf(text + n, sizeof(text) - n, "]");
		respond_str(fd, 200, NULL, text);
	} else if (sscanf(path, "/nmx/v1/partitions/p%d", &k) == 1 && k >= 0 && k < MPARTS &&
	           m->parts[k].live) {
		model_part_json(m, k, one, sizeof(one));
		respond_str(fd, 200, NULL, one);
	} else if (sscanf(path, "/nmx/v1/operations/op-%d", &k) == 1 && k >= 1 && k <= m->nops) {
		struct mop *o = &m->ops[k - 1];
		if (!o->done && ++o->polls >= 2)
			model_apply(m, o);
		char result[64] = "";
		if (o->done && o->kind == MOP_CREATE)
			snprintf(result, sizeof(result), ",\"Result\":{\"Data\":{\"ID\":\"p%d\"}}",
			         o->part);
		snprintf(text, sizeof(text),
		         "{\"ID\":\"op-%d\",\"Status\":\"%s\",\"Percentage\":%d,"
		         "\"CurrentStep\":\"x\"%s}",
		         k, o->done ? "completed" : "in-progress", o->done ? 100 : 50, result);
		respond_str(fd, 200, NULL, text);
	} else {
		respond_str(fd, 404, NULL, "{\"message\":\"not found\"}");
	}
}

/* Starts a change of partition k; its members (not for a delete) may only
 * be GPUs in no partition or already in k. */
static bool model_change(struct srv *s, int fd, enum mop_kind kind, int k, const json_t *mem)
{
	struct model *m = &s->m;
	struct mop *o = &m->ops[m->nops];
	char head[96], body[64];
	size_t i;
	json_t *v;

	if (m->parts[k].busy) {
		respond_str(fd, 409, NULL, "{\"message\":\"partition has a change in progress\"}");
		return false;
	}
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->part = k;
	json_array_foreach(mem, i, v) {
		int g = model_gpu(v);
		if (g < 0 || (m->part_of[g] != -1 && m->part_of[g] != k)) {
			respond_str(fd, 409, NULL, "{\"message\":\"GPU is in another partition\"}");
			return false;
		}
		o->set[g] = true;
	}
	m->nops++;
	m->parts[k].busy = m->nops;
	snprintf(head, sizeof(head), "Location: /nmx/v1/operations/op-%d\r\n", m->nops);
	snprintf(body, sizeof(body), "{\"operationId\":\"op-%d\"}", m->nops);
	respond_str(fd, 202, head, body);
	return true;
}

/* A create: a free record, a name no other partition has. */
static void model_create(struct srv *s, int fd, const json_t *doc)
{
	struct model *m = &s->m;
	const char *name = json_string_value(json_object_get(doc, "Name"));
	int k, free_k = -1;

	m->posts++;
	for (k = 1; k < MPARTS; k++) {
		const struct mpart *p = &m->parts[k];
		if ((p->live || p->busy) && name && strcmp(p->name, name) == 0) {
			respond_str(fd, 409, NULL, "{\"message\":\"name is taken\"}");
			return;
		}
		if (!p->live && !p->busy && free_k < 0)
			free_k = k;
	}
	if (name == NULL || free_k < 0) {
		respond_str(fd, 400, NULL, "{\"message\":\"no name, or no room\"}");
		return;
	}
	if (model_change(s, fd, MOP_CREATE, free_k, json_object_get(doc, "Members"))) {
		m->parts[free_k].pid = free_k;
		snprintf(m->parts[free_k].name, sizeof(m->parts[free_k].name), "%s", name);
	}
}

static void model_route(struct srv *s, int fd, const char *method, const char *path,
                        const char *body)
{
	struct model *m = &s->m;
	json_t *doc = json_loads(body, 0, NULL);
	const json_t *mem = json_object_get(doc, "Members");
	int k = -1;

	if (strcmp(method, "GET") == 0) {
		model_get(s, fd, path);
	} else if (strcmp(method, "POST") == 0 && strcmp(path, "/nmx/v1/partitions") == 0) {
		model_create(s, fd, doc);
	} else if (sscanf(path, "/nmx/v1/partitions/p%d", &k) == 1 && k >= 0 && k < MPARTS &&
	           m->parts[k].live) {
		bool put = strcmp(method, "PUT") == 0;
		if (put)
			m->puts++;
		else
			m->deletes++;
		model_change(s, fd, put ? MOP_SET : MOP_DELETE, k, put ? mem : NULL);
	} else {
		respond_str(fd, 404, NULL, "{\"message\":\"no such partition\"}");
	}
	json_decref(doc);
}

static void route(struct srv *s, int fd, const char *method, const char *path, const char *body)
{
	const char *accepted = "Location: /nmx/v1/operations/op-1\r\n";

	if (s->mode == M_MODEL)
		model_route(s, fd, method, path, body);
	else if (strcmp(method, "GET") == 0 && strcmp(path, "/nmx/v1/partitions") == 0)
		route_list(s, fd);
	else if (strcmp(method, "GET") == 0 && strcmp(path, "/nmx/v1/gpus") == 0)
		model_get(s, fd, path);
	else if (strcmp(method, "GET") == 0 && strcmp(path, "/nmx/v1/chassis") == 0)
		respond_str(fd, 200, NULL,
		            "[{\"SerialNumber\":\"999\",\"InternalID\":1},"
		            "{\"SerialNumber\":\"1821124000042\",\"InternalID\":7}]");
	else if (strcmp(method, "GET") == 0 && strncmp(path, "/nmx/v1/operations/", 19) == 0)
		route_op(s, fd, path + 19);
	else if (strcmp(method, "GET") == 0 && strcmp(path, "/nmx/v1/partitions/p-new") == 0)
		respond_str(fd, 200, NULL,
		            "{\"ID\":\"p-new\",\"PartitionID\":9,\"Name\":\"canary\",\"Type\":\"ID_"
		            "BASED\","
		            "\"Health\":\"HEALTHY\",\"Members\":[\"GPU-1\",\"GPU-2\"]}");
	else if (strcmp(method, "POST") == 0 && s->mode == M_POST_500)
		respond_str(fd, 500, NULL, "{\"message\":\"create crashed half way\"}");
	else if (strcmp(method, "POST") == 0 && strcmp(path, "/nmx/v1/partitions") == 0)
		respond_str(fd, 202, accepted, "{\"operationId\":\"op-1\"}");
	else if (strcmp(method, "PUT") == 0 && strcmp(path, "/nmx/v1/partitions/p-new") == 0)
		respond_str(fd, 202, "Location: /nmx/v1/operations/op-2\r\n", "");
	else if (strcmp(method, "DELETE") == 0 && strcmp(path, "/nmx/v1/partitions/p-new") == 0)
		respond_str(fd, 202, NULL, "{\"operationId\":\"op-3\"}");
	else
		respond_str(fd, 404, NULL, "{\"message\":\"no such partition\"}");
}

static void *serve(void *arg)
{
	struct srv *s = arg;
	static char req[65536];

	for (;;) {
		const char *body = "";
		char method[16] = "", path[256] = "";
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			break;
		if (!read_req(fd, req, sizeof(req), &body)) {
			respond_str(fd, 400, NULL, "not TLS here");
			close(fd);
			continue;
		}
		sscanf(req, "%15s %255s", method, path);
		pthread_mutex_lock(&s->mu);
		s->requests++;
		snprintf(s->last_line, sizeof(s->last_line), "%s %s", method, path);
		snprintf(s->last_body, sizeof(s->last_body), "%s", body);
		size_t ml = strlen(s->methods);
		snprintf(s->methods + ml, sizeof(s->methods) - ml, "%s %s;", method, path);
		const char *auth = strcasestr(req, "\r\nAuthorization:");
		if (auth != NULL)
			snprintf(s->last_auth, sizeof(s->last_auth), "%.*s",
			         (int)strcspn(auth + 2, "\r"), auth + 2);
		route(s, fd, method, path, body);
		pthread_mutex_unlock(&s->mu);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

static struct srv *srv_start(enum mode m)
{
	struct srv *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	s->mode = m;
	model_init(&s->m);
	pthread_mutex_init(&s->mu, NULL);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 16), 0);
	getsockname(s->lfd, (struct sockaddr *)&sa, &len);
	s->port = ntohs(sa.sin_port);
	pthread_create(&s->th, NULL, serve, s);
	return s;
}

static void srv_stop(struct srv *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	close(s->lfd);
	pthread_join(s->th, NULL);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void cfg_for(struct fabric_config *c, const struct srv *s, const char *scheme)
{
	fabric_config_init(c);
	snprintf(c->endpoint, sizeof(c->endpoint), "%s://127.0.0.1:%d/", scheme, s->port);
	c->allow_http = true;
	assert_int_equal(fabric_config_set_secret(c, "username", "rw-user\n", 8), NV_OK);
	assert_int_equal(fabric_config_set_secret(c, "password", "s3cret-pw", 9), NV_OK);
	c->retry_base_ms = 5;
	c->poll_interval_ms = 5;
	c->poll_max_interval_ms = 20;
	c->op_deadline_ms = 5000;
	c->connect_timeout_ms = 2000;
	c->request_timeout_ms = 5000;
}

static struct fabric_backend *open_backend(struct fabric_config *c)
{
	struct fabric_backend *b = NULL;
	struct fabric_status st;

	assert_int_equal(fabric_backend_new(c, &b, &st), NV_OK);
	fabric_config_clear(c);
	assert_string_equal(fabric_backend_name(b), "nmx-m");
	return b;
}

static void spec_two_trays(struct fabric_partition_spec *sp)
{
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "canary");
	snprintf(sp->rack, sizeof(sp->rack), "r07");
	snprintf(sp->domain_uuid, sizeof(sp->domain_uuid), "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3");
	snprintf(sp->chassis_serial, sizeof(sp->chassis_serial), "1821124000042");
	assert_int_equal(fabric_spec_add_tray(sp, 3, 12, 1), NV_OK);
	assert_int_equal(fabric_spec_add_tray(sp, 4, 13, 1), NV_OK);
}

static void test_nmxm_create_polls_until_completed(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_OK);
	struct fabric_config c;
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *p = malloc(sizeof(*p));
	struct fabric_status st;
	struct fabric_op op;
	char clique[FABRIC_CLIQUE_LEN], *logtext = NULL;
	size_t loglen = 0;
	FILE *logf = open_memstream(&logtext, &loglen);

	log_set_stream(logf);
	log_set_level(LOG_LVL_DEBUG);
	log_set_debug("*");
	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	spec_two_trays(sp);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_string_equal(op.id, "op-1");
	assert_int_equal(op.state, FABRIC_OP_PENDING);
	assert_string_equal(s->last_line, "POST /nmx/v1/partitions");
	assert_non_null(strstr(s->last_body, "\"Name\":\"canary\""));
	assert_non_null(strstr(s->last_body, "\"ChassisID\":7"));
	assert_non_null(strstr(s->last_body, "\"SlotID\":13"));
	assert_non_null(strstr(s->last_body, "\"DeviceID\":4"));
	/* base64("rw-user:s3cret-pw"): the newline of the Secret's file is gone */
	assert_string_equal(s->last_auth, "Authorization: Basic cnctdXNlcjpzM2NyZXQtcHc=");

	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_COMPLETED);
	assert_string_equal(op.partition_id, "p-new");
	assert_true(s->op_hits >= 2);
	assert_int_equal(fabric_partition_get(b, op.partition_id, p, &st), NV_OK);
	assert_int_equal(p->partition_id, 9);
	assert_int_equal(p->kind, FABRIC_MEMBERS_GPU_ID);
	assert_int_equal(p->n_gpus, 2);
	assert_int_equal(fabric_partition_clique(p, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3", clique),
	                 NV_OK);
	assert_string_equal(clique, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.9");

	fabric_backend_free(b);
	fflush(logf);
	assert_non_null(strstr(logtext, "partition create requested"));
	assert_null(strstr(logtext, "s3cret"));
	assert_null(strstr(logtext, "cnctdXNlcjpzM2NyZXQtcHc"));
	log_set_stream(stderr);
	log_set_debug("");
	log_set_level(LOG_LVL_WARN);
	fclose(logf);
	free(logtext);
	free(sp);
	free(p);
	srv_stop(s);
}

static void test_nmxm_update_and_delete_return_operations(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_OK);
	struct fabric_config c;
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_status st;
	struct fabric_op op;

	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "canary");
	sp->kind = FABRIC_MEMBERS_GPU_ID;
	assert_int_equal(fabric_spec_add_tray(sp, 5, 0, 0), NV_OK);
	assert_int_equal(fabric_partition_update(b, "p-new", sp, &op, &st), NV_E_INVAL);
	assert_non_null(strstr(st.message, "slot/module"));
	/* GPU-ID members are NMX-M's own GPU ids, found by place, never the
	 * NVML "GPU-…" UUIDs of the trays */
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "canary");
	sp->kind = FABRIC_MEMBERS_GPU_ID;
	assert_int_equal(fabric_spec_add_tray(sp, 5, 12, 1), NV_OK);
	snprintf(sp->gpus[0].uuid, sizeof(sp->gpus[0].uuid), "GPU-6b0e0005-1d3a");
	assert_int_equal(fabric_partition_update(b, "p-new", sp, &op, &st), NV_OK);
	/* from the Location header; the GPUs that leave go back afterwards */
	assert_string_equal(op.id, "restore:op-2");
	assert_string_equal(s->last_line, "PUT /nmx/v1/partitions/p-new");
	assert_string_equal(s->last_body,
	                    "{\"Members\":[\"g-12-1\",\"g-12-2\",\"g-12-3\",\"g-12-4\"]}");
	sp->gpus[3].slot = 99;
	assert_int_equal(fabric_partition_update(b, "p-new", sp, &op, &st), NV_E_NOT_FOUND);
	assert_non_null(strstr(st.message, "no GPU at chassis -1 slot 99"));
	assert_int_equal(fabric_partition_delete(b, "p-new", &op, &st), NV_OK);
	assert_string_equal(op.id, "restore:op-3");
	assert_string_equal(s->last_line, "DELETE /nmx/v1/partitions/p-new");
	assert_int_equal(fabric_partition_delete(b, "p-gone", &op, &st), NV_E_NOT_FOUND);
	assert_int_equal(st.http_code, 404);
	assert_string_equal(st.message, "HTTP 404: no such partition");
	assert_int_equal(fabric_partition_delete(b, "../x", &op, &st), NV_E_INVAL);
	fabric_backend_free(b);
	free(sp);
	srv_stop(s);
}

static void test_nmxm_wait_reports_failed_operation(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_OP_FAIL);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_op op = {.id = "op-9", .state = FABRIC_OP_PENDING};

	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_E_STATE);
	assert_int_equal(op.state, FABRIC_OP_FAILED);
	assert_non_null(strstr(st.message, "INVALID_LOCATION: slot 99 is empty"));
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_wait_stops_at_deadline(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_OP_NEVER);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_op op = {.id = "op-5", .state = FABRIC_OP_PENDING};

	cfg_for(&c, s, "http");
	c.op_deadline_ms = 300;
	struct fabric_backend *b = open_backend(&c);
	int64_t t0 = time_mono_ms();
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_E_TIMEOUT);
	int64_t took = time_mono_ms() - t0;
	assert_true(took >= 290 && took < 3000);
	assert_int_equal(op.state, FABRIC_OP_IN_PROGRESS);
	assert_true(s->op_hits >= 3);
	assert_non_null(strstr(st.message, "still in-progress"));
	/* a stop request ends the wait at once */
	volatile bool stop = true;
	assert_int_equal(fabric_op_wait(b, &op, &stop, &st), NV_E_CANCELLED);
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_401_is_not_retried(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_401);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_E_UNAUTHORIZED);
	assert_int_equal(st.attempts, 1);
	assert_int_equal(st.http_code, 401);
	assert_string_equal(st.message, "HTTP 401: Invalid authentication credentials");
	assert_null(all);
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_5xx_is_retried(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_503_TWICE);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_OK);
	assert_int_equal(st.attempts, 3);
	assert_int_equal(n, 2);
	assert_string_equal(all[1].name, "tenant-a");
	assert_int_equal(all[1].partition_id, 3);
	assert_int_equal(all[1].health, FABRIC_HEALTH_DEGRADED);
	assert_int_equal(all[1].kind, FABRIC_MEMBERS_LOCATION);
	assert_int_equal(all[1].n_gpus, 1);
	assert_int_equal(all[1].gpus[0].slot, 12);
	assert_int_equal(all[1].gpus[0].module, 2);
	assert_string_equal(all[1].domain_uuid, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3");
	assert_string_equal(all[0].domain_uuid, "");
	free(all);

	struct fabric_partition p;
	assert_int_equal(fabric_partition_find(b, "tenant-a", &p, &st), NV_OK);
	assert_string_equal(p.id, "p-b");
	assert_int_equal(fabric_partition_find(b, "nope", &p, &st), NV_E_NOT_FOUND);
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_5xx_gives_up_after_retries(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_500_ALWAYS);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "http");
	c.retries = 2;
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_E_SERVER);
	assert_int_equal(st.attempts, 3);
	assert_int_equal(s->list_hits, 3);
	assert_string_equal(st.message, "HTTP 500: database locked");
	assert_true(nv_err_retryable(NV_E_SERVER));

	/* a create that failed on the server is not sent twice */
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_op op;
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "once");
	sp->kind = FABRIC_MEMBERS_GPU_ID;
	assert_int_equal(fabric_spec_add_tray(sp, 1, 12, 1), NV_OK);
	pthread_mutex_lock(&s->mu);
	s->mode = M_POST_500;
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_E_SERVER);
	assert_int_equal(st.attempts, 1);
	assert_string_equal(st.message, "HTTP 500: create crashed half way");
	free(sp);
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_garbage_json_is_a_parse_error(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_GARBAGE);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "http");
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_E_PARSE);
	assert_non_null(strstr(st.message, "partition list"));
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_oversized_body_is_refused(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_HUGE);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "http");
	c.max_body = 4096;
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_E_TOO_LARGE);
	assert_int_equal(st.attempts, 1);
	assert_non_null(strstr(st.message, "larger than 4096"));
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_https_to_plain_server_fails_tls(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_OK);
	struct fabric_config c;
	struct fabric_status st;
	struct fabric_partition *all = NULL;
	size_t n = 0;

	cfg_for(&c, s, "https");
	c.allow_http = false;
	c.retries = 0;
	struct fabric_backend *b = open_backend(&c);
	assert_int_equal(fabric_partition_list(b, &all, &n, &st), NV_E_TLS);
	assert_int_equal(st.http_code, 0);
	fabric_backend_free(b);
	srv_stop(s);
}

/* ---- against the model of the default partition ---- */

static void spec_slots(struct fabric_partition_spec *sp, const char *name, unsigned a, unsigned b)
{
	fabric_spec_init(sp);
	snprintf(sp->name, sizeof(sp->name), "%s", name);
	snprintf(sp->domain_uuid, sizeof(sp->domain_uuid), "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3");
	sp->chassis_id = 7;
	assert_int_equal(fabric_spec_add_tray(sp, a - 10, a, 1), NV_OK);
	assert_int_equal(fabric_spec_add_tray(sp, b - 10, b, 1), NV_OK);
}

/* Every GPU of the model is in exactly one partition, and the GPUs at
 * these slots (0: none) are in user partition k. */
static void assert_placed(struct srv *s, int k, unsigned a, unsigned b)
{
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < MG; i++) {
		bool in = (unsigned)mgpu_slot(i) == a || (unsigned)mgpu_slot(i) == b;
		assert_true(s->m.part_of[i] >= 0);
		assert_int_equal(s->m.part_of[i], in ? k : 0);
	}
	pthread_mutex_unlock(&s->mu);
}

/* The HTTP status of a POST /nmx/v1/partitions sent by hand. */
static int raw_post(int port, const char *body)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char req[512], ans[256] = "";
	int fd = socket(AF_INET, SOCK_STREAM, 0), code = 0;

	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int n = snprintf(
	        req, sizeof(req),
	        "POST /nmx/v1/partitions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
	        strlen(body), body);
	assert_int_equal(write(fd, req, (size_t)n), n);
	assert_true(read(fd, ans, sizeof(ans) - 1) > 0);
	close(fd);
	sscanf(ans, "HTTP/1.1 %d", &code);
	return code;
}

static struct fabric_backend *model_backend(struct srv *s)
{
	struct fabric_config c;

	cfg_for(&c, s, "http");
	return open_backend(&c);
}

static void test_nmxm_default_partition_create_move_delete(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_MODEL);
	struct fabric_backend *b = model_backend(s);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *p = malloc(sizeof(*p));
	struct fabric_status st;
	struct fabric_op op;

	/* create: first the GPUs leave the default partition, then the
	 * partition is made of them */
	spec_slots(sp, "tenant-a", 11, 12);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_string_equal(s->last_line, "PUT /nmx/v1/partitions/p0");
	assert_non_null(strstr(op.message, "removing 8 GPUs from the default partition"));
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(s->m.part_of[0], -1);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_string_equal(s->last_line, "POST /nmx/v1/partitions");
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_string_equal(op.partition_id, "p1");
	assert_int_equal(fabric_partition_get(b, "p1", p, &st), NV_OK);
	assert_int_equal(p->partition_id, 1);
	assert_int_equal(p->n_gpus, 8);
	assert_placed(s, 1, 11, 12);
	assert_int_equal(s->m.posts, 1);

	/* move to slots 12 and 13: 13 leaves the default, then the update,
	 * then slot 11 goes back to the default partition */
	spec_slots(sp, "tenant-a", 12, 13);
	assert_int_equal(fabric_partition_update(b, "p1", sp, &op, &st), NV_OK);
	assert_string_equal(s->last_line, "PUT /nmx/v1/partitions/p0");
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(fabric_partition_update(b, "p1", sp, &op, &st), NV_OK);
	assert_string_equal(s->last_line, "PUT /nmx/v1/partitions/p1");
	assert_true(strncmp(op.id, "restore:", 8) == 0);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_string_equal(s->last_line, "GET /nmx/v1/operations/op-5");
	assert_int_equal(s->m.nops, 5);
	assert_placed(s, 1, 12, 13);

	/* delete: the partition goes, its GPUs return to the default one */
	assert_int_equal(fabric_partition_delete(b, "p1", &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_placed(s, -1, 0, 0);
	assert_false(s->m.parts[1].live);
	assert_int_equal(fabric_partition_get(b, "p1", p, &st), NV_E_NOT_FOUND);
	free(sp);
	free(p);
	fabric_backend_free(b);
	srv_stop(s);
}

/* The operator dies after the GPUs left the default partition and before
 * the create: a new backend, polling the operation its caller recorded,
 * finds no partition and creates it, once, without a second removal. */
static void test_nmxm_restart_between_leaving_default_and_create(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_MODEL);
	struct fabric_backend *b = model_backend(s);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_partition *p = malloc(sizeof(*p));
	struct fabric_status st;
	struct fabric_op op;
	char recorded[FABRIC_ID_LEN];

	spec_slots(sp, "tenant-b", 13, 14);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	snprintf(recorded, sizeof(recorded), "%s", op.id);
	fabric_backend_free(b); /* all that survives is the recorded id */

	b = model_backend(s);
	memset(&op, 0, sizeof(op));
	snprintf(op.id, sizeof(op.id), "%s", recorded);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(fabric_partition_find(b, "tenant-b", p, &st), NV_E_NOT_FOUND);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_string_equal(s->last_line, "POST /nmx/v1/partitions");
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(fabric_partition_find(b, "tenant-b", p, &st), NV_OK);
	assert_placed(s, 1, 13, 14);
	assert_int_equal(s->m.posts, 1);
	assert_int_equal(s->m.puts, 1);
	free(sp);
	free(p);
	fabric_backend_free(b);
	srv_stop(s);
}

/* GPUs of another NVLink domain that are in no partition (another
 * client's, between its steps) are not this rack's to return: a delete
 * gives back only the GPUs of its own domain. */
static void test_nmxm_restore_keeps_to_its_domain(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_MODEL);
	struct fabric_backend *b = model_backend(s);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_status st;
	struct fabric_op op;

	pthread_mutex_lock(&s->mu);
	s->m.domains = true;
	for (int i = 12; i < MG; i++) /* slot 14 */
		s->m.part_of[i] = -1;
	pthread_mutex_unlock(&s->mu);
	spec_slots(sp, "tenant-a", 11, 12);
	for (int step = 0; step < 2; step++) {
		assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
		assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	}
	assert_int_equal(fabric_partition_delete(b, "p1", &op, &st), NV_OK);
	assert_non_null(strstr(op.id, "restore:3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3:op-"));
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < MG; i++)
		assert_int_equal(s->m.part_of[i], mgpu_slot(i) == 14 ? -1 : 0);
	pthread_mutex_unlock(&s->mu);
	free(sp);
	fabric_backend_free(b);
	srv_stop(s);
}

/* NMX-M refuses GPUs that are in another partition: the backend takes
 * GPUs only out of the default partition, never out of a user one. */
static void test_nmxm_gpus_of_another_partition_are_refused(void **state)
{
	(void)state;
	struct srv *s = srv_start(M_MODEL);
	struct fabric_backend *b = model_backend(s);
	struct fabric_partition_spec *sp = malloc(sizeof(*sp));
	struct fabric_status st;
	struct fabric_op op;

	spec_slots(sp, "tenant-a", 11, 12);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK);
	spec_slots(sp, "tenant-c", 12, 13); /* 12 belongs to tenant-a */
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_OK);
	assert_int_equal(fabric_op_wait(b, &op, NULL, &st), NV_OK); /* 13 left */
	assert_int_equal(fabric_partition_create(b, sp, &op, &st), NV_E_CONFLICT);
	assert_string_equal(st.message, "HTTP 409: GPU is in another partition");
	/* a direct create of GPUs still in the default partition is refused
	 * too: the model is as strict as NMX-M */
	assert_int_equal(raw_post(s->port, "{\"Name\":\"direct\",\"Members\":[\"g-14-1\"]}"), 409);
	free(sp);
	fabric_backend_free(b);
	srv_stop(s);
}

static void test_nmxm_parse_operation_edge_cases(void **state)
{
	(void)state;
	struct fabric_op op;
	struct jx_err e;
	const char *ok = "{\"ID\":\"o\",\"Status\":\"completed\",\"Percentage\":100.0,"
	                 "\"Result\":{\"Data\":\"p-7\"}}";

	assert_int_equal(nmxm_parse_operation(ok, strlen(ok), &op, &e), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_COMPLETED);
	assert_int_equal(op.percent, 100);
	assert_string_equal(op.partition_id, "p-7");
	const char *bad = "{\"ID\":\"o\",\"Status\":\"exploded\"}";
	assert_int_equal(nmxm_parse_operation(bad, strlen(bad), &op, &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "exploded"));
	assert_int_equal(nmxm_parse_operation("{\"Status\":\"pending\"}", 20, &op, &e), NV_E_PARSE);
	assert_int_equal(nmxm_parse_operation("[]", 2, &op, &e), NV_E_PARSE);
	assert_int_equal(nmxm_parse_accepted("{\"operationId\":\"\"}", 18, &op, &e), NV_E_PARSE);
	assert_int_equal(nmxm_parse_accepted("{\"operationId\":5}", 17, &op, &e), NV_E_INVAL);

	char msg[64];
	nmxm_error_message("<h1>Bad\n\tGateway</h1>", 21, msg, sizeof(msg));
	assert_string_equal(msg, "<h1>Bad Gateway</h1>");
	nmxm_error_message("{\"detail\":\"x\"}", 14, msg, sizeof(msg));
	assert_string_equal(msg, "x");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_nmxm_create_polls_until_completed),
	        cmocka_unit_test(test_nmxm_update_and_delete_return_operations),
	        cmocka_unit_test(test_nmxm_wait_reports_failed_operation),
	        cmocka_unit_test(test_nmxm_wait_stops_at_deadline),
	        cmocka_unit_test(test_nmxm_401_is_not_retried),
	        cmocka_unit_test(test_nmxm_5xx_is_retried),
	        cmocka_unit_test(test_nmxm_5xx_gives_up_after_retries),
	        cmocka_unit_test(test_nmxm_garbage_json_is_a_parse_error),
	        cmocka_unit_test(test_nmxm_oversized_body_is_refused),
	        cmocka_unit_test(test_nmxm_https_to_plain_server_fails_tls),
	        cmocka_unit_test(test_nmxm_default_partition_create_move_delete),
	        cmocka_unit_test(test_nmxm_restart_between_leaving_default_and_create),
	        cmocka_unit_test(test_nmxm_gpus_of_another_partition_are_refused),
	        cmocka_unit_test(test_nmxm_restore_keeps_to_its_domain),
	        cmocka_unit_test(test_nmxm_parse_operation_edge_cases),
	};
	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
