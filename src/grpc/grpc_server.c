// SPDX-License-Identifier: Apache-2.0
// The gRPC server's socket and thread: a unix socket made under a hidden
// name and renamed into place, one poll loop over it and its connections,
// and the deadlines that close a peer which stalls in the middle of a call.
#include "grpc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvl72/alloc.h"
#include "nvl72/base.h"

#define COMP "grpc"
#define GRPC_READ_CHUNK (16u << 10)

struct grpc_slot {
	int fd;
	uint64_t id;
	struct grpc_conn *c;
};

struct grpc_server {
	struct grpc_opts o;
	char *socket_path;
	unsigned socket_mode;
	size_t conns_max;
	int lfd;
	int wake[2];
	dev_t sock_dev;
	ino_t sock_ino;
	pthread_t th;
	bool started, stopped;
	atomic_bool quit;
	atomic_size_t n_conns;
	struct grpc_slot *slots; /* conns_max of them */
	uint64_t next_id;
};

const char *grpc_code_name(enum grpc_code c)
{
	static const char *const names[] = {
	        "OK",
	        "CANCELLED",
	        "UNKNOWN",
	        "INVALID_ARGUMENT",
	        "DEADLINE_EXCEEDED",
	        "NOT_FOUND",
	        "ALREADY_EXISTS",
	        "PERMISSION_DENIED",
	        "RESOURCE_EXHAUSTED",
	        "FAILED_PRECONDITION",
	        "ABORTED",
	        "OUT_OF_RANGE",
	        "UNIMPLEMENTED",
	        "INTERNAL",
	        "UNAVAILABLE",
	        "DATA_LOSS",
	        "UNAUTHENTICATED",
	};
	return (unsigned)c < ARRAY_LEN(names) ? names[c] : "UNKNOWN_CODE";
}

enum nv_err grpc_timeout_parse(const char *v, size_t len, int64_t *out_ms)
{
	if (len < 2 || len > 9)
		return NV_E_PARSE;
	int64_t n = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return NV_E_PARSE;
		n = n * 10 + (v[i] - '0');
	}
	int64_t ms;
	switch (v[len - 1]) {
	case 'H':
		ms = n * 3600000;
		break;
	case 'M':
		ms = n * 60000;
		break;
	case 'S':
		ms = n * 1000;
		break;
	case 'm':
		ms = n;
		break;
	case 'u':
		ms = (n + 999) / 1000;
		break;
	case 'n':
		ms = (n + 999999) / 1000000;
		break;
	default:
		return NV_E_PARSE;
	}
	*out_ms = ms;
	return NV_OK;
}

enum nv_err grpc_message_encode(const char *msg, struct buf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		enum nv_err rc;
		if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
			rc = buf_append_byte(out, (char)*p);
		} else {
			char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
			rc = buf_append(out, e, sizeof(e));
		}
		if (rc != NV_OK)
			return rc;
	}
	return NV_OK;
}

/* ---- configuration ---------------------------------------------------------- */

void grpc_opts_clear(struct grpc_opts *o)
{
	free(o->name);
	for (size_t i = 0; i < o->n_methods; i++)
		free((char *)o->methods[i].path);
	memset(o, 0, sizeof(*o));
}

static enum nv_err grpc_methods_copy(struct grpc_opts *o, const struct grpc_config *cfg)
{
	if (cfg->n_methods > GRPC_METHODS_MAX) {
		log_error(COMP, "too many methods", "server=%s n=%zu max=%d", o->name,
		          cfg->n_methods, GRPC_METHODS_MAX);
		return NV_E_CONFIG;
	}
	for (size_t i = 0; i < cfg->n_methods; i++) {
		const struct grpc_method *m = &cfg->methods[i];
		if (!m->path || m->path[0] != '/' || strlen(m->path) > GRPC_PATH_MAX || !m->fn) {
			log_error(COMP, "bad method row", "server=%s row=%zu path=%s", o->name, i,
			          m->path ? m->path : "(none)");
			return NV_E_CONFIG;
		}
		for (size_t j = 0; j < i; j++) {
			if (strcmp(o->methods[j].path, m->path) == 0) {
				log_error(COMP, "method listed twice", "server=%s path=%s", o->name,
				          m->path);
				return NV_E_CONFIG;
			}
		}
		o->methods[i] = *m;
		o->methods[i].path = xstrdup(m->path);
		o->n_methods = i + 1;
	}
	return NV_OK;
}

enum nv_err grpc_opts_init(struct grpc_opts *o, const struct grpc_config *cfg)
{
	memset(o, 0, sizeof(*o));
	o->name = xstrdup(cfg->name ? cfg->name : "grpc");
	o->msg_max = cfg->msg_max ? cfg->msg_max : GRPC_MSG_MAX_DEFAULT;
	o->streams_max = cfg->streams_max ? cfg->streams_max : GRPC_STREAMS_MAX_DEFAULT;
	o->header_list_max =
	        cfg->header_list_max ? cfg->header_list_max : GRPC_HEADER_LIST_MAX_DEFAULT;
	o->read_timeout_ms =
	        cfg->read_timeout_ms > 0 ? cfg->read_timeout_ms : GRPC_READ_TIMEOUT_MS_DEFAULT;
	o->conn_buf_max = cfg->conn_buf_max ? cfg->conn_buf_max : GRPC_CONN_BUF_MAX_DEFAULT;
	o->stream_burst = cfg->stream_burst ? cfg->stream_burst : GRPC_STREAM_BURST_DEFAULT;
	/* The 5-byte prefix carries a 32-bit length. */
	if (o->msg_max > UINT32_MAX || o->conn_buf_max < o->msg_max) {
		log_error(COMP, "bad message limits", "server=%s msg_max=%zu conn_buf_max=%zu",
		          o->name, o->msg_max, o->conn_buf_max);
		grpc_opts_clear(o);
		return NV_E_CONFIG;
	}
	enum nv_err rc = grpc_methods_copy(o, cfg);
	if (rc != NV_OK)
		grpc_opts_clear(o);
	return rc;
}

enum nv_err grpc_server_new(const struct grpc_config *cfg, struct grpc_server **out)
{
	struct sockaddr_un sun;
	if (!cfg->socket_path || !cfg->socket_path[0] ||
	    strlen(cfg->socket_path) + 8 >= sizeof(sun.sun_path)) {
		log_error(COMP, "bad socket path", "server=%s path=%s max=%zu",
		          cfg->name ? cfg->name : "grpc",
		          cfg->socket_path ? cfg->socket_path : "(none)", sizeof(sun.sun_path) - 9);
		return NV_E_CONFIG;
	}
	struct grpc_server *s = xcalloc(1, sizeof(*s));
	enum nv_err rc = grpc_opts_init(&s->o, cfg);
	if (rc != NV_OK) {
		free(s);
		return rc;
	}
	s->socket_path = xstrdup(cfg->socket_path);
	s->socket_mode = cfg->socket_mode ? cfg->socket_mode & 0777u : 0600u;
	s->conns_max = cfg->conns_max ? cfg->conns_max : GRPC_CONNS_MAX_DEFAULT;
	s->slots = xcalloc(s->conns_max, sizeof(*s->slots));
	for (size_t i = 0; i < s->conns_max; i++)
		s->slots[i].fd = -1;
	s->lfd = s->wake[0] = s->wake[1] = -1;
	*out = s;
	return NV_OK;
}

void grpc_server_free(struct grpc_server *s)
{
	if (!s)
		return;
	grpc_server_stop(s);
	grpc_opts_clear(&s->o);
	free(s->socket_path);
	free(s->slots);
	free(s);
}

size_t grpc_server_conns(struct grpc_server *s)
{
	return atomic_load(&s->n_conns);
}

/* ---- the socket ------------------------------------------------------------- */

/* ".NAME.tmp" next to path, where NAME is its last component. */
static void grpc_tmp_path(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
	(void)snprintf(out, cap, "%.*s.%s.tmp", (int)dir, path, path + dir);
}

/* Removes a stale socket at path; NV_E_EXISTS for anything else there. */
static enum nv_err grpc_path_clear(const char *name, const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? NV_OK : NV_E_IO;
	if (!S_ISSOCK(st.st_mode)) {
		log_error(COMP, "the socket path holds another file", "server=%s path=%s", name,
		          path);
		return NV_E_EXISTS;
	}
	return unlink(path) == 0 || errno == ENOENT ? NV_OK : NV_E_IO;
}

static enum nv_err grpc_listen(struct grpc_server *s)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char tmp[sizeof(sun.sun_path)];
	struct stat st;
	enum nv_err rc;

	grpc_tmp_path(s->socket_path, tmp, sizeof(tmp));
	if ((rc = grpc_path_clear(s->o.name, s->socket_path)) != NV_OK ||
	    (rc = grpc_path_clear(s->o.name, tmp)) != NV_OK)
		return rc;
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		goto io;
	memcpy(sun.sun_path, tmp, strlen(tmp) + 1);
	if (bind(s->lfd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    chmod(tmp, (mode_t)s->socket_mode) != 0 || listen(s->lfd, 16) != 0 ||
	    stat(tmp, &st) != 0 || rename(tmp, s->socket_path) != 0)
		goto io;
	s->sock_dev = st.st_dev;
	s->sock_ino = st.st_ino;
	return NV_OK;
io:
	log_error(COMP, "cannot listen on the socket", "server=%s path=%s err=\"%s\"", s->o.name,
	          s->socket_path, strerror(errno));
	(void)unlink(tmp);
	if (s->lfd >= 0)
		(void)close(s->lfd);
	s->lfd = -1;
	return NV_E_IO;
}

/* Removes the socket only when it is still the one this server made. */
static void grpc_unlink_own(struct grpc_server *s)
{
	struct stat st;
	if (lstat(s->socket_path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
		(void)unlink(s->socket_path);
}

/* ---- connections ------------------------------------------------------------ */

static void grpc_slot_close(struct grpc_server *s, struct grpc_slot *sl, const char *why)
{
	log_debug(COMP, "connection closed", "server=%s conn=%llu why=\"%s\"", s->o.name,
	          (unsigned long long)sl->id, why);
	grpc_conn_free(sl->c);
	(void)close(sl->fd);
	sl->c = NULL;
	sl->fd = -1;
	atomic_fetch_sub(&s->n_conns, 1);
}

static void grpc_accept(struct grpc_server *s, int64_t now)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct grpc_slot *sl = NULL;
		for (size_t i = 0; i < s->conns_max && !sl; i++)
			if (s->slots[i].fd < 0)
				sl = &s->slots[i];
		if (!sl) {
			log_warn(COMP, "refusing a connection: too many open", "server=%s max=%zu",
			         s->o.name, s->conns_max);
			(void)close(fd);
			continue;
		}
		struct ucred cr = {0};
		socklen_t crlen = sizeof(cr);
		(void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen);
		sl->fd = fd;
		sl->id = ++s->next_id;
		sl->c = grpc_conn_new(&s->o, sl->id, now);
		atomic_fetch_add(&s->n_conns, 1);
		log_debug(COMP, "connection", "server=%s conn=%llu pid=%d uid=%u", s->o.name,
		          (unsigned long long)s->next_id, (int)cr.pid, (unsigned)cr.uid);
	}
}

/* Writes what the session has to say until the socket would block. */
static bool grpc_flush(struct grpc_slot *sl, int64_t now)
{
	for (;;) {
		size_t len;
		const uint8_t *p = grpc_conn_out(sl->c, &len, now);
		if (!len)
			return true;
		ssize_t n = send(sl->fd, p, len, MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		grpc_conn_sent(sl->c, (size_t)n);
	}
}

/* Reads what is there (at most a few chunks, so one peer cannot hold the
 * loop) and answers; false when the connection is to be closed. */
static bool grpc_read(struct grpc_slot *sl, int64_t now, const char **why)
{
	uint8_t b[GRPC_READ_CHUNK];
	for (int i = 0; i < 4; i++) {
		ssize_t n = recv(sl->fd, b, sizeof(b), 0);
		if (n == 0) {
			*why = "closed by the peer";
			return false;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			*why = "read error";
			return false;
		}
		(void)grpc_conn_recv(sl->c, b, (size_t)n, now);
		if (!grpc_flush(sl, now)) {
			*why = "write error";
			return false;
		}
	}
	return true;
}

static void grpc_serve_slot(struct grpc_server *s, struct grpc_slot *sl, short rev, int64_t now)
{
	const char *why = "done";
	bool ok = true;
	if (rev & (POLLIN | POLLHUP | POLLERR))
		ok = grpc_read(sl, now, &why);
	if (ok && !grpc_flush(sl, now)) {
		ok = false;
		why = "write error";
	}
	int64_t d = grpc_conn_deadline(sl->c);
	if (ok && d && now >= d) {
		log_warn(COMP, "closing a connection that did not finish in time",
		         "server=%s conn=%llu timeout_ms=%d", s->o.name, (unsigned long long)sl->id,
		         s->o.read_timeout_ms);
		grpc_conn_goaway(sl->c, NGHTTP2_NO_ERROR);
		(void)grpc_flush(sl, now);
		ok = false;
		why = "read deadline";
	}
	if (!ok || grpc_conn_done(sl->c))
		grpc_slot_close(s, sl, why);
}

/* ---- the loop --------------------------------------------------------------- */

static int grpc_poll_timeout(struct grpc_server *s, int64_t now)
{
	int64_t next = 0;
	for (size_t i = 0; i < s->conns_max; i++) {
		if (s->slots[i].fd < 0)
			continue;
		int64_t d = grpc_conn_deadline(s->slots[i].c);
		if (d && (!next || d < next))
			next = d;
	}
	if (!next)
		return -1;
	return next <= now ? 0 : (int)(next - now < 60000 ? next - now : 60000);
}

static void *grpc_main(void *arg)
{
	struct grpc_server *s = arg;
	struct pollfd *pf = xcalloc(s->conns_max + 2, sizeof(*pf));
	while (!atomic_load(&s->quit)) {
		size_t n = 2;
		pf[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
		pf[1] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
		for (size_t i = 0; i < s->conns_max; i++) {
			struct grpc_slot *sl = &s->slots[i];
			if (sl->fd < 0)
				continue;
			size_t len;
			(void)grpc_conn_out(sl->c, &len, time_mono_ms());
			pf[n++] = (struct pollfd){.fd = sl->fd,
			                          .events = (short)(POLLIN | (len ? POLLOUT : 0))};
		}
		int to = grpc_poll_timeout(s, time_mono_ms());
		if (poll(pf, (nfds_t)n, to) < 0 && errno != EINTR)
			break;
		int64_t now = time_mono_ms();
		for (size_t k = 2; k < n; k++)
			for (size_t i = 0; i < s->conns_max; i++)
				if (s->slots[i].fd == pf[k].fd)
					grpc_serve_slot(s, &s->slots[i], pf[k].revents, now);
		if (pf[1].revents & POLLIN)
			grpc_accept(s, now);
	}
	/* Stopping: a GOAWAY to everyone who will still read it. */
	for (size_t i = 0; i < s->conns_max; i++) {
		struct grpc_slot *sl = &s->slots[i];
		if (sl->fd < 0)
			continue;
		grpc_conn_goaway(sl->c, NGHTTP2_NO_ERROR);
		(void)grpc_flush(sl, time_mono_ms());
		grpc_slot_close(s, sl, "server stopped");
	}
	free(pf);
	return NULL;
}

enum nv_err grpc_server_start(struct grpc_server *s)
{
	if (s->started)
		return NV_E_STATE;
	enum nv_err rc = grpc_listen(s);
	if (rc != NV_OK)
		return rc;
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		(void)close(s->lfd);
		s->lfd = -1;
		grpc_unlink_own(s);
		return NV_E_IO;
	}
	s->started = true;
	if (pthread_create(&s->th, NULL, grpc_main, s) != 0) {
		log_error(COMP, "cannot start the server thread", "server=%s", s->o.name);
		abort();
	}
	log_info(COMP, "serving", "server=%s path=%s methods=%zu", s->o.name, s->socket_path,
	         s->o.n_methods);
	return NV_OK;
}

void grpc_server_stop(struct grpc_server *s)
{
	if (!s->started || s->stopped)
		return;
	s->stopped = true;
	atomic_store(&s->quit, true);
	(void)!write(s->wake[1], "x", 1);
	pthread_join(s->th, NULL);
	(void)close(s->lfd);
	(void)close(s->wake[0]);
	(void)close(s->wake[1]);
	s->lfd = s->wake[0] = s->wake[1] = -1;
	grpc_unlink_own(s);
	log_info(COMP, "stopped", "server=%s path=%s", s->o.name, s->socket_path);
}
