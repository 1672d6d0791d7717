/* SPDX-License-Identifier: Apache-2.0 */
/* A unary gRPC server over a unix socket, on libnghttp2's HTTP/2 server
 * session: the transport of the kubelet plugin services. A method table maps
 * paths to handlers that turn request bytes into response bytes or a status. */
/* Contract. Threads: the lifecycle calls (new, start, stop, free) belong to
 * the thread that owns the server and must not overlap. Handlers run on the
 * server's own thread, one at a time: while one runs, no other connection of
 * this server is served, so a handler must not block for longer than its
 * callers wait (the kubelet waits 45 s for a DRA call, 1 s for GetInfo), and
 * must never stop or free its own server. Blocking: start binds and returns;
 * stop joins the server thread, waiting for the handler in progress.
 * Ownership: the configuration and the method table are copied (paths
 * included); every handler arg is borrowed and must outlive the server.
 * Limits and what is refused are in docs/internals/grpc.md. */
#ifndef NVL72_GRPC_H
#define NVL72_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum grpc_code {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
};

/* "UNIMPLEMENTED"; "UNKNOWN_CODE" past the list. Static. */
const char *grpc_code_name(enum grpc_code c);

/* One call as a handler sees it; valid only during the handler. */
struct grpc_call {
	const char *path;   /* "/pluginregistration.Registration/GetInfo" */
	const uint8_t *req; /* the request message, without its 5-byte prefix */
	size_t req_len;
	/* The caller's deadline from grpc-timeout, as time_mono_ms() reads it,
	 * or 0 when the request carried none. */
	int64_t deadline_ms;
	/* The handler writes the response message here (capped at the server's
	 * msg_max; NV_E_TOO_LARGE past it) and, for a status other than OK, a
	 * short message for grpc-message (capped at GRPC_STATUS_MSG_MAX). */
	struct buf resp;
	struct buf status_msg;
};

/* Returns the call's status. With GRPC_OK the response in call->resp is
 * sent (an empty one is a message of zero bytes); otherwise only the
 * status and status_msg are. */
typedef enum grpc_code (*grpc_handler_fn)(void *arg, struct grpc_call *call);

/* A row of the method table: the exact :path and its handler. */
struct grpc_method {
	const char *path;
	grpc_handler_fn fn;
	void *arg;
};

/* Defaults used when the matching grpc_config field is 0. */
#define GRPC_MSG_MAX_DEFAULT (4u << 20)          /* one message, bytes */
#define GRPC_STREAMS_MAX_DEFAULT 16              /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define GRPC_HEADER_LIST_MAX_DEFAULT (16u << 10) /* SETTINGS_MAX_HEADER_LIST_SIZE */
#define GRPC_CONNS_MAX_DEFAULT 16                /* connections at once */
#define GRPC_READ_TIMEOUT_MS_DEFAULT 10000       /* see read_timeout_ms */
#define GRPC_CONN_BUF_MAX_DEFAULT (16u << 20)    /* request bytes held per connection */
#define GRPC_STREAM_BURST_DEFAULT 100            /* see stream_burst */
#define GRPC_METHODS_MAX 32
#define GRPC_PATH_MAX 256
#define GRPC_STATUS_MSG_MAX 1024

struct grpc_config {
	/* Names the server in log lines ("registration", "dra"); NULL: "grpc". */
	const char *name;
	/* Where the socket goes. It is bound under a hidden name in the same
	 * directory (".NAME.tmp", which the kubelet's plugin watcher ignores)
	 * and renamed into place once it listens, so a watcher never sees a
	 * socket that does not answer. A stale socket there is replaced; any
	 * other file is refused (NV_E_EXISTS). Removed again by stop. */
	const char *socket_path;
	/* Permission bits of the socket; 0 means 0600. */
	unsigned socket_mode;
	const struct grpc_method *methods;
	size_t n_methods;
	size_t msg_max;
	uint32_t streams_max;
	uint32_t header_list_max;
	size_t conns_max;
	/* How long the peer may take to finish what it started: the
	 * connection preface, a frame, the request of a stream (from its
	 * HEADERS to END_STREAM) and the reading of a response. A connection
	 * past it is closed with GOAWAY. A connection with nothing started is
	 * idle and kept however long it is idle: the kubelet keeps its
	 * connection to a plugin and takes one that is gone for a plugin that
	 * is gone. */
	int read_timeout_ms;
	size_t conn_buf_max;
	/* Streams a connection may open in a burst; the bucket refills at
	 * stream_burst per second. A client past it (a flood of streams, or of
	 * streams it resets at once) is sent GOAWAY ENHANCE_YOUR_CALM. */
	uint32_t stream_burst;
};

struct grpc_server;

/* Validates the configuration and copies it. NV_E_CONFIG names the bad
 * field (no socket path, a path too long for a unix socket, a method path
 * not starting with '/', two rows with one path, more than GRPC_METHODS_MAX
 * rows). */
enum nv_err grpc_server_new(const struct grpc_config *cfg, struct grpc_server **out);
/* Stops the server if it runs and frees it; NULL does nothing. */
void grpc_server_free(struct grpc_server *s);
/* Binds and listens, then serves on a new thread. NV_E_IO when the socket
 * cannot be made, NV_E_EXISTS when a file that is not a socket holds the
 * path, NV_E_STATE when started before. */
enum nv_err grpc_server_start(struct grpc_server *s);
/* Sends GOAWAY to every connection, closes them, joins the server thread
 * and removes the socket (when it is still the one this server made); safe
 * to call twice. A stopped server cannot be started again. */
void grpc_server_stop(struct grpc_server *s);

/* The number of connections open now (any thread). */
size_t grpc_server_conns(struct grpc_server *s);

#endif
