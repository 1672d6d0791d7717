/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/grpc/ (grpc_conn.c, grpc_server.c), the unit tests of
 * tests/unit/grpc/ and the fuzz target fuzz_grpc_framing: one gRPC
 * connection as a byte-in, byte-out machine with no socket of its own. */
#ifndef NVL72_GRPC_INT_H
#define NVL72_GRPC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/grpc.h"

/* The server's configuration, copied and with the defaults filled in. */
struct grpc_opts {
	char *name;
	struct grpc_method methods[GRPC_METHODS_MAX];
	size_t n_methods;
	size_t msg_max;
	uint32_t streams_max;
	uint32_t header_list_max;
	int read_timeout_ms;
	size_t conn_buf_max;
	uint32_t stream_burst;
};

/* Checks cfg's limits and method table and copies them (not the socket
 * fields) into o. NV_E_CONFIG with a log line naming the field. */
enum nv_err grpc_opts_init(struct grpc_opts *o, const struct grpc_config *cfg);
void grpc_opts_clear(struct grpc_opts *o);

struct grpc_conn;

/* A server session for one accepted connection; o is borrowed and must
 * outlive it. id names the connection in log lines. now_ms starts the
 * clock of the connection preface. */
struct grpc_conn *grpc_conn_new(const struct grpc_opts *o, uint64_t id, int64_t now_ms);
void grpc_conn_free(struct grpc_conn *c);
/* Feeds bytes read from the peer; handlers of requests completed by them
 * run inside this call. NV_OK, or an error once the connection is beyond
 * saving (not HTTP/2, a protocol error, a flood): the GOAWAY is queued and
 * grpc_conn_done turns true once it is written. */
enum nv_err grpc_conn_recv(struct grpc_conn *c, const uint8_t *data, size_t len, int64_t now_ms);
/* Bytes to write to the peer (borrowed, valid until the next call on c),
 * with their length in *len; *len is 0 when there is nothing to write. */
const uint8_t *grpc_conn_out(struct grpc_conn *c, size_t *len, int64_t now_ms);
/* Marks n bytes of what grpc_conn_out gave as written. */
void grpc_conn_sent(struct grpc_conn *c, size_t n);
/* Queues GOAWAY with an HTTP/2 error code and stops reading. */
void grpc_conn_goaway(struct grpc_conn *c, uint32_t h2_error);
/* True when the connection has nothing left to read or write: close it. */
bool grpc_conn_done(const struct grpc_conn *c);
/* The earliest time by which the peer must have finished what it began
 * (see grpc_config.read_timeout_ms), or 0 when the connection is idle. */
int64_t grpc_conn_deadline(const struct grpc_conn *c);

/* Parses a grpc-timeout value ("100m", "5S": at most 8 digits and a unit
 * of H M S m u n) into milliseconds, rounding up. */
enum nv_err grpc_timeout_parse(const char *v, size_t len, int64_t *out_ms);
/* Percent-encodes a grpc-message value: bytes outside 0x20..0x7e and '%'. */
enum nv_err grpc_message_encode(const char *msg, struct buf *out);

#endif
