/* SPDX-License-Identifier: Apache-2.0 */
/* Out-of-band component updates: the upgrade steps that no agent can make
 * because they run off the compute trays' operating system (switch-tray
 * NVOS and firmware, NMX, and the GPU, HMC, BMC, NIC and DPU firmware of
 * the trays, all reached through management controllers). One interface,
 * shaped like the partition backends of fabric.h, with a simulator backend.
 *
 * Usage, from the upgrade reconciler (one step, crash-safe):
 *
 *     struct oob_config c;  oob_config_init(&c);
 *     str_copy(c.backend, sizeof(c.backend), "sim");  ... sim_root, sim_delay_ms
 *     struct oob_backend *b;  oob_backend_new(&c, &b, &st);
 *     struct oob_target t = {OOB_SWITCH_TRAY, 3};
 *     oob_version(b, MATRIX_C_NVOS, &t, have, sizeof(have), &st);
 *     if (strcmp(have, want) != 0) {
 *             oob_update(b, MATRIX_C_NVOS, &t, want, &op, &st);  // record op.id
 *             oob_op_wait(b, &op, &stop, &st);                    // or oob_op_poll per pass
 *     }
 *
 * An update of a target already at the version completes at once and an
 * update while the same one is in flight returns that operation, so a
 * reconciler restarted in the middle of a step asks again without running
 * the step twice. */
/* Contract: the one of fabric.h. A backend may be used from any thread,
 * its calls serialised by its lock (the simulator's also by a file lock
 * shared with simctl and other processes); no call but oob_op_wait waits
 * for an operation, and the simulator's calls do only file I/O. Out-
 * parameters are caller storage set only on NV_OK; names are static. */
#ifndef NVL72_OOB_H
#define NVL72_OOB_H

#include <stdbool.h>
#include <stddef.h>

#include "nvl72/err.h"
#include "nvl72/fabric.h"
#include "nvl72/matrix.h"

#define OOB_SWITCH_TRAYS 9
#define OOB_COMPUTE_TRAYS 18

enum oob_target_kind {
	OOB_SWITCH_TRAY = 0, /* index 1..9 */
	OOB_COMPUTE_TRAY,    /* index 1..18 */
};

struct oob_target {
	enum oob_target_kind kind;
	unsigned index;
};

/* Whether the component is updated out of band, and on which kind of
 * target: NVOS, switch-tray firmware and NMX on switch trays; GPU, HMC,
 * BMC, NIC and DPU firmware on compute trays. The driver and everything
 * above it belong to the agents and Kubernetes. */
bool oob_component_is_oob(enum matrix_component c);
bool oob_component_target_ok(enum matrix_component c, enum oob_target_kind k);
/* NV_E_INVAL with why when (c, t) is not an out-of-band update target. */
enum nv_err oob_target_check(enum matrix_component c, const struct oob_target *t, char *why,
                             size_t whysz);
/* "switch-3", "compute-12". */
void oob_target_name(const struct oob_target *t, char *out, size_t outsz);

/* An asynchronous update. */
struct oob_op {
	char id[FABRIC_ID_LEN];
	enum fabric_op_state state;
	enum matrix_component component;
	struct oob_target target;
	char version[MATRIX_VERSION_LEN];
	char message[FABRIC_MSG_LEN]; /* current step, or the failure */
};

struct oob_config {
	char backend[16];      /* "sim" (the only one so far) */
	char sim_root[512];    /* sim: the rack folder simctl created */
	long sim_delay_ms;     /* sim: time an update stays in progress */
	long poll_interval_ms; /* oob_op_wait: first interval */
	long poll_max_interval_ms;
	long op_deadline_ms; /* oob_op_wait: in all */
};

/* Defaults: backend "sim", delay 2 s, poll 1 s up to 10 s, deadline 1 h
 * (firmware updates take minutes per target). */
void oob_config_init(struct oob_config *c);
enum nv_err oob_config_validate(const struct oob_config *c, char *why, size_t whysz);

/* One implementation; the contract of fabric_backend_ops: st filled,
 * out-parameters only on success, never blocking on an operation. */
struct oob_backend_ops {
	const char *name;
	enum nv_err (*open)(const struct oob_config *c, void **state, struct fabric_status *st);
	void (*close)(void *state);
	enum nv_err (*update)(void *state, enum matrix_component comp, const struct oob_target *t,
	                      const char *version, struct oob_op *op, struct fabric_status *st);
	/* The version the target runs now; NV_E_NOT_FOUND when it is unknown. */
	enum nv_err (*version)(void *state, enum matrix_component comp, const struct oob_target *t,
	                       char *out, size_t outsz, struct fabric_status *st);
	enum nv_err (*poll)(void *state, const char *op_id, struct oob_op *op,
	                    struct fabric_status *st);
};

/* The compiled-in implementations, by name; NULL when unknown. */
const struct oob_backend_ops *oob_backend_find(const char *name);
/* Names for --help and errors: "sim". */
const char *oob_backend_names(void);

struct oob_backend;

enum nv_err oob_backend_new(const struct oob_config *c, struct oob_backend **out,
                            struct fabric_status *st);
void oob_backend_free(struct oob_backend *b);
const char *oob_backend_name(const struct oob_backend *b);

/* Starts moving comp on target t to version (checked with
 * oob_target_check first). */
enum nv_err oob_update(struct oob_backend *b, enum matrix_component comp,
                       const struct oob_target *t, const char *version, struct oob_op *op,
                       struct fabric_status *st);
enum nv_err oob_version(struct oob_backend *b, enum matrix_component comp,
                        const struct oob_target *t, char *out, size_t outsz,
                        struct fabric_status *st);
enum nv_err oob_op_poll(struct oob_backend *b, const char *op_id, struct oob_op *op,
                        struct fabric_status *st);
/* As fabric_op_wait: NV_OK when COMPLETED, NV_E_STATE when FAILED,
 * NV_E_CANCELLED when stop turned true, NV_E_TIMEOUT at the deadline.
 * Blocks up to op_deadline_ms (default 1 h), looking at stop every 50 ms. */
enum nv_err oob_op_wait(struct oob_backend *b, struct oob_op *op, const volatile bool *stop,
                        struct fabric_status *st);

/* The production backend is not written yet. It would update switch trays
 * and compute-tray firmware through their BMCs' Redfish service (the path
 * nvfwupd drives, with rack-parallel updates and a power-state query) and
 * read NMX-C's state through NMX-M; see docs/fabric.md. */

#endif
