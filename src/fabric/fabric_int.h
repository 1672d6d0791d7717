/* SPDX-License-Identifier: Apache-2.0 */
/* Folder-private parts of the fabric module: the implementations' ops
 * structs and the registry that finds them by name, the status helpers they
 * share, and the NMX-M response parsers that the unit tests and the fuzz
 * target call directly. */
/* Private to src/fabric/ (the partition backends and the out-of-band
 * ones, which share its status helpers and registry), the unit tests in
 * tests/unit/fabric/, and the fuzz target tests/fuzz/fuzz_nmxm_response.c;
 * other modules go through nvl72/fabric.h and nvl72/oob.h. */
#ifndef NVL72_FABRIC_INT_H
#define NVL72_FABRIC_INT_H

#include <jansson.h>

#include "nvl72/base.h"
#include "nvl72/fabric.h"
#include "nvl72/json.h"

extern const struct fabric_backend_ops fabric_nmxm_ops;
extern const struct fabric_backend_ops fabric_sim_ops;

/* ---- registry (fabric_registry.c) ---- */

/* A compiled-in table of backends: pointers to ops structs whose first
 * member is their name (const char *name), as fabric_backend_ops and
 * oob_backend_ops are, and the storage of their list of names (zeroed,
 * filled on first use). */
struct fabric_registry {
	const void *const *ops;
	size_t n;
	char *names;
	size_t names_cap;
};

/* The entry called name; NULL when name is NULL or no entry has it. */
const void *fabric_registry_find(const struct fabric_registry *r, const char *name);
/* The names in table order, ", "-separated ("nmx-m, sim"), cut at
 * names_cap; any thread. */
const char *fabric_registry_names(const struct fabric_registry *r);

/* Resets st (when not NULL) before a call. */
void fabric_status_reset(struct fabric_status *st);
/* Writes a message into st (when not NULL), replacing the old one. */
void fabric_status_msg(struct fabric_status *st, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* The schedule of polls while an operation runs, shared by fabric_op_wait
 * and oob_op_wait: the interval doubles from interval_ms up to
 * max_interval_ms, and the wait ends deadline_ms after the start. */
struct fabric_poll {
	int64_t end_ms; /* on the monotonic clock */
	int64_t interval_ms, max_interval_ms;
	long deadline_ms;
};
void fabric_poll_start(struct fabric_poll *p, long interval_ms, long max_interval_ms,
                       long deadline_ms);
/* Waits until the next poll of operation id, now in state s. NV_OK: poll
 * again. NV_E_TIMEOUT past the deadline and NV_E_CANCELLED once *stop turns
 * true (stop may be NULL), each with a message in st. Blocks for one
 * interval at most, seeing stop within 50 ms. */
enum nv_err fabric_poll_next(struct fabric_poll *p, const char *id, enum fabric_op_state s,
                             const volatile bool *stop, struct fabric_status *st);

/* ---- NMX-M wire format (nmxm.c) ---- */

/* The 202 answer: {"operationId": "…"}. */
enum nv_err nmxm_parse_accepted(const char *data, size_t len, struct fabric_op *op,
                                struct jx_err *e);
/* GET /nmx/v1/operations/<id>. */
enum nv_err nmxm_parse_operation(const char *data, size_t len, struct fabric_op *op,
                                 struct jx_err *e);
/* One partition object (borrowed). */
enum nv_err nmxm_partition_from_json(const json_t *o, struct fabric_partition *p, struct jx_err *e);
/* GET /nmx/v1/partitions: a JSON array; *out is a heap array. */
enum nv_err nmxm_parse_partition_list(const char *data, size_t len, struct fabric_partition **out,
                                      size_t *n, struct jx_err *e);
/* The chassis list's InternalID for a serial number; NV_E_NOT_FOUND if absent. */
enum nv_err nmxm_parse_chassis_id(const char *data, size_t len, const char *serial, long *out,
                                  struct jx_err *e);
/* One GPU of GET /nmx/v1/gpus: NMX-M's own id, which GPU-ID partition
 * members name, and where it sits. -1 (chassis) or 0 (others): not given. */
struct nmxm_gpu {
	char id[FABRIC_ID_LEN];
	char domain_uuid[FABRIC_UUID_LEN];
	long chassis_id;
	unsigned slot, host_id, device;
};
#define NMXM_GPUS_MAX (FABRIC_GPUS_MAX * 16) /* GPUs listed, all domains */
/* GET /nmx/v1/gpus: a JSON array; *out is a heap array. */
enum nv_err nmxm_parse_gpu_list(const char *data, size_t len, struct nmxm_gpu **out, size_t *n,
                                struct jx_err *e);
/* The server's explanation in an error body, or a cleaned excerpt of it. */
void nmxm_error_message(const char *data, size_t len, char *out, size_t outsz);
/* The request body of a create (with_name) or update; a new reference. */
json_t *nmxm_render_members(const struct fabric_partition_spec *s, long chassis_id, bool with_name);
/* An update body naming GPUs by NMX-M id: {"Members": [ids…]}. */
json_t *nmxm_render_ids(const char (*ids)[FABRIC_ID_LEN], size_t n);

/* Writes a whole file through a temporary file and rename, so readers in
 * other processes (the fake NVML, tests) never see half a file; the
 * simulator backends' state files. */
enum nv_err fabric_file_write(const char *path, const char *data, size_t len);

#endif
