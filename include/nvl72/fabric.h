/* SPDX-License-Identifier: Apache-2.0 */
/* NVLink partition backends: one interface to create, change, delete and
 * read the partitions of an NVLink domain, with the NMX-M REST client for
 * racks and a simulator backend for tests, chosen by name at run time. */
/* Contract. Threads: a struct fabric_backend may be used from any thread;
 * its calls are serialised by the backend's lock (the simulator's also
 * take a file lock shared with other processes on the same rack folder),
 * so a call may first wait for another thread's. Specs, configs, ops and
 * statuses are caller storage, one thread each.
 * Blocking: opening sends no request. Each other backend call is one
 * request with its retries: each attempt bounded by request_timeout_ms
 * (default 30 s), waits between attempts doubling from retry_base_ms or
 * the server's Retry-After, at most 30 s each, for up to `retries` more
 * attempts. Only fabric_op_wait waits for an operation.
 * Ownership: out-parameters are caller storage set only on NV_OK, except
 * list's heap array; the backend copies what it needs of the config and
 * keeps no pointer to the caller's arguments. Names returned are static.
 * fabric_backend_free closes the backend (NULL does nothing) once no
 * thread uses it. */
#ifndef NVL72_FABRIC_H
#define NVL72_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/err.h"

#define FABRIC_GPUS_MAX 72           /* one NVL72 domain */
#define FABRIC_PARTITIONS_MAX 128    /* partitions listed per domain */
#define FABRIC_ID_LEN 128            /* backend handles: partition and operation ids */
#define FABRIC_NAME_LEN 256          /* NMX-C allows 255 ASCII characters */
#define FABRIC_UUID_LEN 96           /* "GPU-…" or a domain UUID */
#define FABRIC_SERIAL_LEN 32         /* chassis serial number */
#define FABRIC_MSG_LEN 384           /* a server's message, cut */
#define FABRIC_CLIQUE_LEN 64         /* "<ClusterUUID>.<cliqueId>" */
#define FABRIC_DEFAULT_CLIQUE 32766u /* NMX-C's reserved default partition */

/* How NMX-M names a partition's members; fixed when the partition is made. */
enum fabric_member_kind {
	FABRIC_MEMBERS_LOCATION = 0, /* domain, chassis, slot, host, device */
	FABRIC_MEMBERS_GPU_ID,       /* GPU identifiers (device UUIDs) */
};
const char *fabric_member_kind_name(enum fabric_member_kind k);

/* One member GPU. The rack's view (tray index, module) is what the operator
 * and the simulator use; slot/host/device and uuid are what NMX-M wants. */
struct fabric_gpu {
	unsigned tray;              /* compute tray index in the rack, 1..18; 0 unknown */
	unsigned module;            /* GPU module in the tray, 1..4; 0 unknown */
	unsigned slot;              /* chassis slot (NVML slot_number); 0 unknown */
	unsigned host_id;           /* NVML host_id, 1 on NVL72 trays */
	char uuid[FABRIC_UUID_LEN]; /* "GPU-…", for GPU-ID members */
};

/* What a create or update asks for. */
struct fabric_partition_spec {
	char name[FABRIC_NAME_LEN];        /* unique in the domain */
	char rack[FABRIC_NAME_LEN];        /* the Rack, for logs */
	char domain_uuid[FABRIC_UUID_LEN]; /* ClusterUUID of the domain */
	char chassis_serial[FABRIC_SERIAL_LEN];
	long chassis_id; /* NMX-M's chassis id; -1: look it up by serial */
	enum fabric_member_kind kind;
	size_t n_gpus;
	struct fabric_gpu gpus[FABRIC_GPUS_MAX];
};

/* Sets defaults (location members, chassis id to be looked up). */
void fabric_spec_init(struct fabric_partition_spec *s);
/* Adds the four GPUs (modules 1..4) of a tray; slot and host are the
 * tray's platform slot and host id (0 when unknown). NV_E_TOO_LARGE when
 * full, NV_E_EXISTS when the tray is already in. */
enum nv_err fabric_spec_add_tray(struct fabric_partition_spec *s, unsigned tray, unsigned slot,
                                 unsigned host_id);

enum fabric_health {
	FABRIC_HEALTH_UNKNOWN = 0,
	FABRIC_HEALTH_HEALTHY,
	FABRIC_HEALTH_DEGRADED,
	FABRIC_HEALTH_DEGRADED_BANDWIDTH,
	FABRIC_HEALTH_UNHEALTHY,
	FABRIC_HEALTH_NEW, /* being set up */
};
const char *fabric_health_name(enum fabric_health h);

/* A partition as the backend reports it. */
struct fabric_partition {
	char id[FABRIC_ID_LEN]; /* the backend's handle for get/update/delete */
	char name[FABRIC_NAME_LEN];
	bool has_partition_id;
	uint32_t partition_id; /* the network's id: member GPUs' cliqueId */
	enum fabric_health health;
	enum fabric_member_kind kind;
	/* The domain of its location members, when the backend names it ("":
	 * not given); all members of a partition are in one domain. */
	char domain_uuid[FABRIC_UUID_LEN];
	size_t n_gpus;
	struct fabric_gpu gpus[FABRIC_GPUS_MAX];
};

enum fabric_op_state {
	FABRIC_OP_PENDING = 0,
	FABRIC_OP_IN_PROGRESS,
	FABRIC_OP_COMPLETED,
	FABRIC_OP_FAILED,
	FABRIC_OP_CANCELLED,
};
const char *fabric_op_state_name(enum fabric_op_state s);
bool fabric_op_done(enum fabric_op_state s);

/* An asynchronous change: create, update and delete all return one. */
struct fabric_op {
	char id[FABRIC_ID_LEN];
	enum fabric_op_state state;
	int percent;                      /* 0..100, -1 unknown */
	char partition_id[FABRIC_ID_LEN]; /* the partition it made or changed, if known */
	char message[FABRIC_MSG_LEN];     /* current step, or the failure */
};

/* Filled by every call: what the server said, for conditions and events. */
struct fabric_status {
	long http_code;               /* last HTTP status, 0 if none */
	int attempts;                 /* requests sent for the call */
	char message[FABRIC_MSG_LEN]; /* the server's or our own explanation */
};

/* ---- configuration ---- */

/* Everything a backend needs. Secrets (password, token, CA) are heap
 * copies owned by the config and wiped by fabric_config_clear. */
struct fabric_config {
	char backend[16];          /* "nmx-m" | "sim" */
	char endpoint[512];        /* NMX-M base URL: https://host[:port] */
	bool allow_http;           /* plain http:// (tests and labs only) */
	bool insecure_skip_verify; /* no TLS verification (never in production) */
	char *ca_pem;              /* PEM bundle; NULL: the system's CAs */
	size_t ca_pem_len;
	char *username; /* basic authentication, with password */
	char *password;
	char *token;                 /* or a bearer token */
	long connect_timeout_ms;     /* per request: TCP + TLS */
	long request_timeout_ms;     /* per request, whole */
	int retries;                 /* extra tries on 5xx, 429 and transport errors */
	long retry_base_ms;          /* first retry backoff, doubled each time */
	long poll_interval_ms;       /* first operation poll interval */
	long poll_max_interval_ms;   /* backoff ceiling of the poll interval */
	long op_deadline_ms;         /* how long fabric_op_wait waits in all */
	size_t max_body;             /* response bodies beyond this fail */
	char sim_root[512];          /* sim: the rack folder simctl created */
	long sim_delay_ms;           /* sim: time an operation stays in progress */
	uint32_t sim_default_clique; /* sim: clique of GPUs in no user partition */
};

/* Defaults: backend "nmx-m", TLS verified, 5 s connect, 30 s request,
 * 3 retries from 200 ms, poll 1 s up to 10 s, 10 min deadline, 4 MiB
 * bodies, sim delay 2 s, default clique 32766. */
void fabric_config_init(struct fabric_config *c);
/* Wipes and frees the secrets; the config may be initialised again. */
void fabric_config_clear(struct fabric_config *c);
/* Takes one key of a Secret's (decoded) data: "username", "password",
 * "token" or "ca.crt". NV_E_INVAL for another key, NV_E_TOO_LARGE past 1 MiB. */
enum nv_err fabric_config_set_secret(struct fabric_config *c, const char *key, const char *data,
                                     size_t len);
/* NV_E_CONFIG with why (the field and the rule) when the config cannot work
 * for its backend; nothing is contacted. */
enum nv_err fabric_config_validate(const struct fabric_config *c, char *why, size_t whysz);

/* ---- the interface ---- */

/* One implementation. Every call fills st (may be NULL in the wrappers),
 * sets out-parameters only on success and never blocks longer than one
 * request (with its retries); waiting for operations is fabric_op_wait. */
struct fabric_backend_ops {
	const char *name;
	enum nv_err (*open)(const struct fabric_config *c, void **state, struct fabric_status *st);
	void (*close)(void *state);
	/* *out is a heap array of *n partitions; free() it. */
	enum nv_err (*list)(void *state, struct fabric_partition **out, size_t *n,
	                    struct fabric_status *st);
	enum nv_err (*get)(void *state, const char *id, struct fabric_partition *out,
	                   struct fabric_status *st);
	enum nv_err (*create)(void *state, const struct fabric_partition_spec *spec,
	                      struct fabric_op *op, struct fabric_status *st);
	/* Replaces the member list (the name cannot change). */
	enum nv_err (*update)(void *state, const char *id, const struct fabric_partition_spec *spec,
	                      struct fabric_op *op, struct fabric_status *st);
	enum nv_err (*remove)(void *state, const char *id, struct fabric_op *op,
	                      struct fabric_status *st);
	enum nv_err (*poll)(void *state, const char *op_id, struct fabric_op *op,
	                    struct fabric_status *st);
};

/* The compiled-in implementations, by name; NULL when unknown. */
const struct fabric_backend_ops *fabric_backend_find(const char *name);
/* Names for --help: "nmx-m, sim". */
const char *fabric_backend_names(void);

struct fabric_backend;

/* Validates c and opens its backend. The backend keeps its own copies of
 * what it needs, so c may be cleared afterwards. st may be NULL. */
enum nv_err fabric_backend_new(const struct fabric_config *c, struct fabric_backend **out,
                               struct fabric_status *st);
void fabric_backend_free(struct fabric_backend *b);
const char *fabric_backend_name(const struct fabric_backend *b);

enum nv_err fabric_partition_list(struct fabric_backend *b, struct fabric_partition **out,
                                  size_t *n, struct fabric_status *st);
enum nv_err fabric_partition_get(struct fabric_backend *b, const char *id,
                                 struct fabric_partition *out, struct fabric_status *st);
/* The first partition with this name; NV_E_NOT_FOUND when none. */
enum nv_err fabric_partition_find(struct fabric_backend *b, const char *name,
                                  struct fabric_partition *out, struct fabric_status *st);
enum nv_err fabric_partition_create(struct fabric_backend *b,
                                    const struct fabric_partition_spec *spec, struct fabric_op *op,
                                    struct fabric_status *st);
enum nv_err fabric_partition_update(struct fabric_backend *b, const char *id,
                                    const struct fabric_partition_spec *spec, struct fabric_op *op,
                                    struct fabric_status *st);
enum nv_err fabric_partition_delete(struct fabric_backend *b, const char *id, struct fabric_op *op,
                                    struct fabric_status *st);
/* One look at an operation. A change may take several steps on the backend
 * (NMX-M: GPUs leave or rejoin the default partition); when the step polled
 * has ended and the next began, op->id is the next step's id, which the
 * caller records and polls from then on. */
enum nv_err fabric_op_poll(struct fabric_backend *b, const char *op_id, struct fabric_op *op,
                           struct fabric_status *st);
/* Polls op (following its steps) until it ends, backing off from poll_interval_ms to
 * poll_max_interval_ms, for at most op_deadline_ms. NV_OK when COMPLETED;
 * NV_E_STATE when FAILED (st->message has the reason), NV_E_CANCELLED when
 * cancelled, NV_E_TIMEOUT at the deadline; op holds the last state seen.
 * stop (may be NULL) is checked between polls: true ends with NV_E_CANCELLED.
 * Blocks up to op_deadline_ms (default 10 min) plus one poll, looking at
 * stop every 50 ms; stop is a flag another thread sets. */
enum nv_err fabric_op_wait(struct fabric_backend *b, struct fabric_op *op,
                           const volatile bool *stop, struct fabric_status *st);

/* "<cluster>.<partition_id>", the clique ID member GPUs report once the
 * partition is active. NV_E_STATE when the partition has no network id yet. */
enum nv_err fabric_partition_clique(const struct fabric_partition *p, const char *cluster_uuid,
                                    char out[FABRIC_CLIQUE_LEN]);

#endif
