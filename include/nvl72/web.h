/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's web server: probes, /metrics, the embedded dashboard, a
 * websocket feed and POST routes such as the admission webhook, served by
 * libwebsockets on a service thread of its own. */
/* Contract. Threads: the lifecycle calls (new, route and check adds,
 * start, stop, free) belong to the thread that owns the server and must not
 * overlap. The publish calls and web_client_count may be made from any
 * thread, the server running or not. Handlers and checks run on the
 * service thread, one at a time: while one runs the server serves nobody
 * else, so it must not block for long, and it must never stop or free its
 * own server (that joins the service thread). Authorizers run on worker
 * threads of the server's own (authz_workers), a request waiting for one
 * parked meanwhile, so the service thread goes on serving everyone else;
 * several may run at once. Blocking: start binds and returns; stop joins
 * the workers (each finishes the authorizer it is in) and then the
 * service thread, so it waits for the callback in progress; no other call
 * waits on a client.
 * Ownership: configuration strings and PEM are copied; the metrics
 * registry and every callback arg are borrowed and must outlive the
 * server. A stopped server cannot be started again (NV_E_STATE). */
#ifndef NVL72_WEB_H
#define NVL72_WEB_H

#include <stdbool.h>
#include <stddef.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

struct metrics_registry;
struct web_server;

/* Decides whether the holder of bearer (NULL when the request had none)
 * may use verb ("get") on path ("/metrics"), as a TokenReview plus
 * SubjectAccessReview would. NV_OK allows; NV_E_UNAUTHORIZED answers 401,
 * NV_E_FORBIDDEN 403, NV_E_THROTTLED 429, anything else 500. Runs on one
 * of the server's authorization workers, several at once: it may block,
 * but should bound how long (a request waits for it), and must be safe
 * from several threads. A request refused for a full queue (authz_queue_max
 * waiting) gets 429 without it being asked. */
typedef enum nv_err (*web_authz_fn)(void *arg, const char *bearer, const char *verb,
                                    const char *path);

/* Decides whether the holder of bearer may read the data of scope (a
 * namespace, for topics published with web_publish_scoped): NV_OK allows,
 * NV_E_FORBIDDEN or NV_E_UNAUTHORIZED refuses (and is kept for the
 * connection), anything else leaves it undecided (asked again when the
 * scope next publishes). Runs on an authorization worker, as an
 * authorizer does. */
typedef enum nv_err (*web_scope_fn)(void *arg, const char *bearer, const char *scope);

/* Defaults used when the matching web_config field is 0. */
#define WEB_BODY_MAX_DEFAULT (1u << 20)        /* POST body, bytes */
#define WEB_RESPONSE_MAX_DEFAULT (32u << 20)   /* handler or /metrics reply */
#define WEB_MSG_MAX_DEFAULT (4u << 20)         /* one published message */
#define WEB_QUEUE_MAX_DEFAULT 256              /* messages queued per client */
#define WEB_QUEUE_BYTES_DEFAULT (16u << 20)    /* bytes queued per client */
#define WEB_CLIENTS_MAX_DEFAULT 64             /* websocket clients */
#define WEB_TOPICS_MAX_DEFAULT 4096            /* retained topics */
#define WEB_TOPIC_MAX 128                      /* topic name, bytes */
#define WEB_SCOPE_MAX 64                       /* scope name (a namespace), bytes */
#define WEB_SCOPES_MAX 256                     /* scopes judged per feed client */
#define WEB_WS_AUTH_S 10                       /* a feed client's time to present its token */
#define WEB_AUTH_MSG_MAX (WEB_TOKEN_MAX + 256) /* the message carrying it, bytes */
#define WEB_TOKEN_MAX 8192                     /* bearer token, bytes */
#define WEB_ROUTES_MAX 32
#define WEB_AUTHZ_WORKERS_DEFAULT 2 /* threads asking the authorizers */
#define WEB_AUTHZ_QUEUE_DEFAULT 64  /* requests waiting for them */

struct web_config {
	/* Names this server in log lines and in the server label of its own
	 * metrics ("probes", "webhook"); NULL means "web". */
	const char *name;
	/* Address to listen on ("127.0.0.1", "0.0.0.0"); NULL means all. */
	const char *bind_addr;
	/* 0 picks a free port; web_server_port() tells which. */
	int port;
	/* PEM certificate chain and private key for HTTPS, or NULL for plain
	 * HTTP. Both are copied; the caller may wipe its copy afterwards. */
	const char *tls_cert_pem;
	const char *tls_key_pem;
	/* Served on /metrics when not NULL, and where the server counts its
	 * requests (nvl72_web_requests_total{server,handler,code}), websocket
	 * clients (nvl72_web_ws_clients) and dropped slow clients
	 * (nvl72_web_ws_dropped_total). Borrowed: must outlive the server. */
	struct metrics_registry *metrics;
	size_t body_max;
	size_t response_max;
	size_t msg_max;
	size_t queue_max;
	size_t queue_bytes_max;
	size_t clients_max;
	size_t topics_max;
	/* Accept websocket upgrades whose Origin names another host (for
	 * tools and tests); browsers are held to the same origin otherwise. */
	bool ws_any_origin;
	/* When set, /metrics is served only to requests it allows. */
	web_authz_fn metrics_authz;
	void *metrics_authz_arg;
	/* When set, every POST (to a route or not) is first asked of it, as
	 * verb "post" on the request path: no token answers 401 before any
	 * route runs. The dashboard server sets it; the webhook server, whose
	 * caller is the API server over TLS, does not. */
	web_authz_fn post_authz;
	void *post_authz_arg;
	/* When set, reading data is authorised too: a GET of a route, and the
	 * websocket feed, is asked of it as verb "get" on the path ("/ws" for
	 * the feed). The embedded page, its assets and the probes stay open:
	 * they carry no data, and the page must load to ask for a token. A
	 * feed client presents its token in Authorization on the upgrade or,
	 * as a browser must, in its first message ({"token":"..."}) within
	 * WEB_WS_AUTH_S seconds; until it is allowed it receives nothing, and
	 * a refusal closes it (4401 unauthenticated, 4403 forbidden, 4429
	 * throttled, 4500 not judged). */
	web_authz_fn read_authz;
	void *read_authz_arg;
	/* With read_authz: a scoped topic reaches a feed client only when this
	 * allows the client's token that scope, asked once per client and
	 * scope (at most WEB_SCOPES_MAX). Without it every allowed client
	 * gets every scope. */
	web_scope_fn scope_authz;
	void *scope_authz_arg;
	/* Threads that run the authorizers (at most 16), and how many
	 * requests may wait for them before the next gets 429. Started only
	 * when an authorizer is set. */
	size_t authz_workers;
	size_t authz_queue_max;
};

enum web_method {
	WEB_GET = 0,
	WEB_HEAD,
	WEB_POST,
	WEB_OTHER,
};

/* One request as a handler sees it; valid only during the call. */
struct web_request {
	enum web_method method;
	const char *path;         /* decoded, without the query */
	const char *content_type; /* "" when absent */
	const char *body;         /* NUL-terminated; "" without a body */
	size_t body_len;
	/* The bearer token from Authorization, or NULL. It is wiped when the
	 * handler returns and must never be logged or kept. */
	const char *bearer;
};

/* The handler fills status (default 200), content_type (default
 * "application/json", a static string) and body, whose cap is the
 * server's response_max. */
struct web_response {
	int status;
	const char *content_type;
	struct buf body;
};

/* Runs on the service thread: it must not block for long. A returned error
 * becomes a 500 with no detail (the handler logs the detail itself). */
typedef enum nv_err (*web_handler_fn)(void *arg, const struct web_request *req,
                                      struct web_response *resp);
/* A named check for /healthz or /readyz, run on the service thread at each
 * probe. Returns true when healthy; may write a short reason into why
 * (shown with ?verbose). */
typedef bool (*web_check_fn)(void *arg, struct buf *why);

enum web_probe {
	WEB_PROBE_LIVE = 0, /* /healthz */
	WEB_PROBE_READY,    /* /readyz */
};

/* Validates the configuration and copies what it needs. */
enum nv_err web_server_new(const struct web_config *cfg, struct web_server **out);
/* Stops the server if it runs and frees it; NULL does nothing. */
void web_server_free(struct web_server *s);

/* Routes and checks are added before web_server_start. The path matches
 * exactly; arg is borrowed. NV_E_EXISTS for a path taken, NV_E_TOO_LARGE
 * past WEB_ROUTES_MAX. */
enum nv_err web_route_post(struct web_server *s, const char *path, web_handler_fn fn, void *arg);
enum nv_err web_route_get(struct web_server *s, const char *path, web_handler_fn fn, void *arg);
enum nv_err web_check_add(struct web_server *s, enum web_probe probe, const char *name,
                          web_check_fn fn, void *arg);

/* Binds, then serves on a new thread. NV_E_IO when the port is taken, NV_E_TLS
 * when the certificate or key is refused. */
enum nv_err web_server_start(struct web_server *s);
/* Replaces the certificate and key of a TLS server (PEM, copied; the
 * caller may wipe its copy): connections accepted afterwards are served
 * the new pair, those open keep theirs, and the listener stays. Safe from
 * any thread once web_server_start has returned (before it, from the
 * thread that starts it). NV_E_TLS when the pair does not parse or the key
 * does not fit (the old pair stays), NV_E_STATE for a plain HTTP server. */
enum nv_err web_server_tls_update(struct web_server *s, const char *cert_pem, const char *key_pem);
/* The port bound by web_server_start (useful with port 0), or -1. */
int web_server_port(const struct web_server *s);
/* Closes every connection, joins the service thread and releases the
 * socket; safe to call twice. Publishing afterwards returns NV_E_STATE. */
void web_server_stop(struct web_server *s);

/* Publishes json_text (a complete JSON value, copied, not parsed) on topic
 * ([A-Za-z0-9._/-], at most WEB_TOPIC_MAX bytes) to every websocket client.
 * Safe from any thread, and never blocks on a client: a client with
 * queue_max messages or queue_bytes_max bytes still queued is disconnected.
 * The latest message of each topic is retained and replayed, oldest first,
 * to clients that connect later; web_publish_transient() skips the
 * retention (events), and web_unpublish() drops a topic and tells clients
 * it is gone. NV_E_STATE while the server is not running, NV_E_TOO_LARGE
 * past msg_max or topics_max, NV_E_INVAL for a bad topic or empty text.
 * The message format is in docs/internals/dashboard-feed.md. */
enum nv_err web_publish(struct web_server *s, const char *topic, const char *json_text);
enum nv_err web_publish_transient(struct web_server *s, const char *topic, const char *json_text);
enum nv_err web_unpublish(struct web_server *s, const char *topic);
/* The same for tenant data: the topic (and its removal) reaches only
 * clients that scope_authz allows scope ([A-Za-z0-9._-], at most
 * WEB_SCOPE_MAX bytes; NULL: no scope, as web_publish). A topic keeps the
 * scope it was first retained with until it is unpublished. */
enum nv_err web_publish_scoped(struct web_server *s, const char *topic, const char *scope,
                               const char *json_text, bool retained);
/* Number of websocket clients connected now. */
size_t web_client_count(struct web_server *s);

/* Finds the token in an Authorization header value ("Bearer <token>",
 * the scheme in any case). Sets *tok and *tok_len to a slice of header and
 * returns NV_OK; NV_E_NOT_FOUND for another scheme or an empty token,
 * NV_E_PARSE for characters a token may not hold, NV_E_TOO_LARGE past
 * WEB_TOKEN_MAX. */
enum nv_err web_bearer_parse(const char *header, size_t len, const char **tok, size_t *tok_len);

#endif
