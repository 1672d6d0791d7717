/* SPDX-License-Identifier: Apache-2.0 */
/* State shared by the web module's files: the server, its routes, the
 * websocket clients and their queues. Everything under mu may be touched by
 * publishers on any thread; the rest belongs to the service thread. */
/* Private to src/web/ and the fuzz target tests/fuzz/fuzz_web_auth.c;
 * other modules go through nvl72/web.h. */
#ifndef NVL72_WEB_INT_H
#define NVL72_WEB_INT_H

#include <libwebsockets.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nvl72/web.h"

#define WEB_COMP "web"
#define WEB_PATH_MAX 1024
#define WEB_CHECKS_MAX 32
#define WEB_CHUNK 16384
/* Bytes of an oversized body read and dropped so the 413 reaches the
 * client; a longer body gets its answer at once and the connection shut. */
#define WEB_DRAIN_MAX (1u << 20)
#define WEB_AUTHZ_WORKERS_MAX 16
/* Scopes one authorization job judges; the rest wait for the next job. */
#define WEB_ASK_MAX 32

/* One question for the authorization workers (web_authz.c): the read (or
 * POST, or /metrics) check of fn, then, when it allows or there is none,
 * each scope of scopes with scope_fn. Filled on the service thread,
 * answered on a worker, handed back on the service thread. */
struct web_authz_job {
	struct web_authz_job *next;
	web_authz_fn fn; /* NULL: scopes only */
	void *arg;
	char *bearer; /* secret: wiped when the job is freed */
	char verb[8];
	char path[WEB_PATH_MAX];
	enum nv_err answer;
	web_scope_fn scope_fn;
	void *scope_arg;
	size_t nscopes;
	char scopes[WEB_ASK_MAX][WEB_SCOPE_MAX + 1];
	enum nv_err scope_answer[WEB_ASK_MAX];
	/* Under authz_mu: the parked connection, NULL once it closed. */
	struct lws *wsi;
};

struct web_route {
	enum web_method method;
	char *path;
	web_handler_fn fn;
	void *arg;
};

struct web_check {
	enum web_probe probe;
	char *name;
	web_check_fn fn;
	void *arg;
};

/* A message shared by every queue that holds it. */
struct web_msg {
	atomic_size_t refs;
	size_t len;
	unsigned char data[]; /* LWS_PRE bytes of room, then len bytes */
};

struct web_topic {
	char *name;
	char *scope; /* NULL: for every reader */
	struct web_msg *msg;
};

/* What a feed client's token may read of one scope. */
struct web_verdict {
	char scope[WEB_SCOPE_MAX + 1];
	bool allowed;
};

struct web_qnode {
	struct web_qnode *next;
	struct web_msg *msg;
};

struct web_client {
	struct web_client *prev;
	struct web_client *next;
	struct lws *wsi;
	struct web_qnode *head;
	struct web_qnode *tail;
	size_t queued;
	size_t bytes;
	size_t replay_left;  /* retained messages at the head of the queue */
	size_t replay_bytes; /* and their size: neither counts against the caps */
	bool wake;           /* has something to write: ask for a callback */
	bool doomed;         /* too slow: close at the next callback */
	bool closing;        /* the service thread has started closing it */
	/* Reading (web_config.read_authz): nothing is queued to a client
	 * before it is allowed. authed and the scope tables are under mu. */
	bool authed;
	char *bearer; /* secret, kept for scope questions; wiped on free */
	char *rx;     /* the first message while it arrives; wiped */
	size_t rx_len;
	struct web_authz_job *job;    /* service thread: the question in flight */
	enum nv_err refused;          /* service thread: NV_OK, or why it closes */
	struct web_verdict *verdicts; /* WEB_SCOPES_MAX, made on first use */
	size_t nverdicts;
	char ask[WEB_ASK_MAX][WEB_SCOPE_MAX + 1]; /* scopes to ask next */
	size_t nask;
	bool judge; /* ask has scopes and no job asks them yet */
};

/* One HTTP transaction; reset for each request on a kept-alive socket. */
struct web_http {
	enum web_method method;
	char path[WEB_PATH_MAX];
	char content_type[128];
	bool verbose;
	const struct web_route *route;
	const char *handler; /* metrics label: a static name or a route path */
	uint64_t content_len;
	bool has_len;
	struct buf body;
	size_t body_seen;
	bool too_large;
	char *bearer; /* secret: wiped on release */
	/* Authorization on a worker (web_authz.c): the job while it runs; once
	 * answered, authz_ready and the answer, and the request goes on from
	 * the writeable callback. authorized: allowed, do not ask again. */
	struct web_authz_job *authz;
	enum nv_err authz_answer;
	bool authz_ready;
	bool authorized;
	bool body_done; /* the body ended while the authorization ran */
	/* the response */
	int status;
	const char *ctype;
	bool html;
	struct buf out;
	const unsigned char *data; /* out's data or an embedded asset */
	size_t len;
	size_t sent;
	bool responding;
	bool close_after;
};

/* Per-connection storage lws allocates for the one protocol. */
struct web_session {
	struct web_http *http;
	struct web_client *client;
};

struct web_server {
	/* configuration, fixed after web_server_new */
	char *name;
	char *bind_addr;
	int port_cfg;
	char *cert_pem;
	char *key_pem;
	bool tls;
	struct metrics_registry *metrics;
	size_t body_max;
	size_t response_max;
	size_t msg_max;
	size_t queue_max;
	size_t queue_bytes_max;
	size_t clients_max;
	size_t topics_max;
	bool ws_any_origin;
	web_authz_fn metrics_authz;
	void *metrics_authz_arg;
	web_authz_fn post_authz;
	void *post_authz_arg;
	web_authz_fn read_authz;
	void *read_authz_arg;
	web_scope_fn scope_authz;
	void *scope_authz_arg;
	size_t authz_workers;
	size_t authz_queue_max;
	struct web_route routes[WEB_ROUTES_MAX];
	size_t nroutes;
	struct web_check checks[WEB_CHECKS_MAX];
	size_t nchecks;
	struct metrics_family *m_requests; /* server, handler, code */
	struct metrics_family *m_clients;  /* server */
	struct metrics_family *m_dropped;  /* server */
	/* guarded by tls_mu: the pair of web_server_tls_update, served to
	 * connections accepted after it (NULL: the one of the context) */
	pthread_mutex_t tls_mu;
	X509 *tls_x;
	EVP_PKEY *tls_k;
	/* the service thread's */
	struct lws_context *ctx;
	int port;
	pthread_t thread;
	bool thread_started;
	atomic_bool stopping;
	/* the authorization workers; lists and counts guarded by authz_mu */
	pthread_mutex_t authz_mu;
	pthread_cond_t authz_cv;
	pthread_t authz_threads[WEB_AUTHZ_WORKERS_MAX];
	size_t authz_nthreads;
	bool authz_stop;
	struct web_authz_job *authz_todo;
	struct web_authz_job *authz_done;
	size_t authz_pending; /* asked and not yet answered */
	/* guarded by mu */
	pthread_mutex_t mu;
	bool accepting; /* publishing allowed */
	struct web_client *clients;
	size_t nclients;
	struct web_topic *topics;
	size_t ntopics;
	uint64_t seq;
};

/* web_metrics.c */
/* Registers the server's families (when it has a registry) at zero. */
enum nv_err web_metrics_setup(struct web_server *s);
void web_count_request(struct web_server *s, const char *handler, int status);
void web_count_clients(struct web_server *s, size_t n);
void web_count_dropped(struct web_server *s);

/* web_auth.c */
/* Whether a browser's Origin names the Host it connects to. */
bool web_origin_matches(const char *origin, const char *host);
/* The token of a feed client's first message, {"token":"<token68>"} and
 * nothing else: NV_OK with *token a new string (the caller wipes and frees
 * it), NV_E_PARSE for any other text, NV_E_TOO_LARGE past WEB_TOKEN_MAX. */
enum nv_err web_auth_message_parse(const char *msg, size_t len, char **token);
/* Whether name is 1 to max bytes of [A-Za-z0-9._-], and '/' with slash. */
bool web_name_valid(const char *name, size_t max, bool slash);
/* A scope (a namespace): [A-Za-z0-9._-], 1 to WEB_SCOPE_MAX bytes. */
bool web_scope_valid(const char *scope);

/* web_authz.c */
/* Starts the workers when the server has an authorizer. */
enum nv_err web_authz_start(struct web_server *s);
/* Joins the workers (each finishes the authorizer it is in). */
void web_authz_stop(struct web_server *s);
/* Frees every job left; once no connection can name one. */
void web_authz_clear(struct web_server *s);
/* Parks the request of pss: fn is asked verb on its path on a worker.
 * NV_E_BUSY when authz_queue_max are already waiting, NV_E_STATE when
 * the workers are stopped. Service thread. */
enum nv_err web_authz_submit(struct lws *wsi, struct web_session *pss, web_authz_fn fn, void *arg,
                             const char *verb);
/* The same for a job the caller filled (bearer, fn or scopes); j->wsi is
 * set here. On NV_OK the job is the workers' until it is handed back; on
 * an error the caller still owns it and frees it with web_authz_job_free. */
enum nv_err web_authz_enqueue(struct web_server *s, struct lws *wsi, struct web_authz_job *j);
void web_authz_job_free(struct web_authz_job *j);
/* A feed client closes: its job, if any, answers nobody. */
void web_authz_forget_job(struct web_server *s, struct web_authz_job *j);
/* The connection of h closes: its job, if any, answers nobody. */
void web_authz_forget(struct web_server *s, struct web_http *h);
/* Hands the answers back to their connections; on the service thread,
 * when lws_cancel_service woke it. */
void web_authz_drain(struct web_server *s);

/* web_http.c */
int web_http_callback(struct lws *wsi, enum lws_callback_reasons reason, struct web_session *pss,
                      void *in, size_t len);
/* The bearer token of the request's Authorization (an HTTP request, or a
 * websocket upgrade while its headers are there), a new string the caller
 * wipes and frees; NULL without one, for another scheme, or past
 * WEB_TOKEN_MAX (logged at debug level with path). */
char *web_request_bearer(struct lws *wsi, const char *path);
void web_http_release(struct web_http *h);

/* web_feed.c */
int web_feed_callback(struct lws *wsi, enum lws_callback_reasons reason, struct web_session *pss,
                      void *in, size_t len);
/* Frees retained topics; called once the service thread is gone. */
void web_feed_clear(struct web_server *s);
/* A worker answered the feed client of pss (whose job j was): take its
 * verdicts. Service thread; j is freed by the caller. */
void web_feed_answer(struct lws *wsi, struct web_session *pss, const struct web_authz_job *j);

static inline struct web_server *web_server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

#endif
