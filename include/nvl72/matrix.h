/* SPDX-License-Identifier: Apache-2.0 */
/* The compatibility-matrix engine: versions and ranges, stacks (tuples of
 * component versions), transitions with their verdicts, upgrade plans, the
 * CUDA/NCCL check of a workload and CVE lookups. It knows no JSON: the api
 * module parses a CompatibilityMatrix and builds a struct matrix from it. */
/* Contract: pure code with no global state; no call blocks or does I/O.
 * Values are caller storage (struct matrix_version, _range, _tuple,
 * _plan); out-parameters are set only on NV_OK unless a call says it fills
 * them anyway. A struct matrix is built by one thread (matrix_new, then the
 * _add calls) and read-only afterwards, when any thread may read it. The
 * const pointers the lookups return are borrowed from the matrix, valid
 * until matrix_free or the next _add (which may move the arrays). Names
 * returned by the _name calls are static. */
#ifndef NVL72_MATRIX_H
#define NVL72_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvl72/err.h"

/* ---- versions and ranges ---------------------------------------------- */

#define MATRIX_VERSION_LEN 64      /* with the NUL */
#define MATRIX_VERSION_SEGMENTS 16 /* separated by . - _ + ~ */
#define MATRIX_RANGE_LEN 256
#define MATRIX_RANGE_TERMS 4

/* A version as written ("580.173.02", "97.00.B9.00.69", "25.06-A",
 * "v1.34.1"). Segments compare in order: digit runs by value, letter runs
 * case-folded, digits before letters; a missing segment equals a zero one
 * and sorts before a letter one ("13" == "13.0", "25.06" < "25.06-A"). */
struct matrix_version {
	char text[MATRIX_VERSION_LEN];
	unsigned char nseg;
};

enum nv_err matrix_version_parse(const char *s, struct matrix_version *out);
/* <0, 0, >0 like strcmp. */
int matrix_version_cmp(const struct matrix_version *a, const struct matrix_version *b);
/* The same order on two strings that need not be valid versions. */
int matrix_version_cmp_str(const char *a, const char *b);
bool matrix_version_eq(const struct matrix_version *a, const struct matrix_version *b);

/* A driver version: two or three numeric components whose first is the
 * branch (580.173.02 -> 580, 615.23 -> 615). */
struct matrix_driver {
	struct matrix_version version;
	unsigned branch;
};
enum nv_err matrix_driver_parse(const char *s, struct matrix_driver *out);
/* "R580" (or "580") -> 580. */
enum nv_err matrix_branch_parse(const char *s, unsigned *out);

enum matrix_cmp_op {
	MATRIX_CMP_EQ = 0,
	MATRIX_CMP_LT,
	MATRIX_CMP_LE,
	MATRIX_CMP_GT,
	MATRIX_CMP_GE,
};

struct matrix_cmp {
	enum matrix_cmp_op op;
	struct matrix_version version;
};

/* All terms must hold; no terms matches everything. A bound written with
 * fewer segments covers its refinements: "13.0.2" is inside "<=13.0". */
struct matrix_range {
	struct matrix_cmp terms[MATRIX_RANGE_TERMS];
	unsigned n;
};

/* ">=2.25.2, <2.29", "13.0" (exactly), "*" (anything). */
enum nv_err matrix_range_parse(const char *s, struct matrix_range *out);
/* The inclusive [min, max] of the CRD's {min, max} objects. */
enum nv_err matrix_range_set_inclusive(struct matrix_range *r, const char *min, const char *max);
bool matrix_range_contains(const struct matrix_range *r, const struct matrix_version *v);
/* ">=12.8, <=13.0"; truncated to cap. */
void matrix_range_format(const struct matrix_range *r, char *out, size_t cap);

/* ---- components, layers, stacks -------------------------------------- */

/* In the CRD's order; the names are the CRD's enum values. */
enum matrix_component {
	MATRIX_C_NVOS = 0,
	MATRIX_C_SWITCH_TRAY_FIRMWARE,
	MATRIX_C_NMX,
	MATRIX_C_GPU_FIRMWARE,
	MATRIX_C_HMC_FIRMWARE,
	MATRIX_C_BMC_FIRMWARE,
	MATRIX_C_NIC_FIRMWARE,
	MATRIX_C_DPU_FIRMWARE,
	MATRIX_C_DRIVER,
	MATRIX_C_DOCA,
	MATRIX_C_NCCL_NET_PLUGIN,
	MATRIX_C_DRA_DRIVER,
	MATRIX_C_KERNEL,
	MATRIX_C_OS,
	MATRIX_C_KUBERNETES,
	MATRIX_C__COUNT
};

/* The responsibility-matrix layers that own components. */
enum matrix_layer {
	MATRIX_L_FIRMWARE = 0,
	MATRIX_L_FABRIC,
	MATRIX_L_NODE,
	MATRIX_L_KUBERNETES,
	MATRIX_L_WORKLOAD,
	MATRIX_L__COUNT
};

const char *matrix_component_name(enum matrix_component c);
bool matrix_component_parse(const char *s, enum matrix_component *out);
enum matrix_layer matrix_component_layer(enum matrix_component c);
const char *matrix_layer_name(enum matrix_layer l);
bool matrix_layer_parse(const char *s, enum matrix_layer *out);

#define MATRIX_BIT(c) (1u << (unsigned)(c))
#define MATRIX_NAME_LEN 64 /* DNS names of stacks and matrices, with NUL */
#define MATRIX_EXTRA_LEN 48
#define MATRIX_CVE_LEN 32
#define MATRIX_CVES_MAX 64

/* One value per component. Besides the version, a component may carry
 * text that must match too: the driver flavour, the kernel's arch and page
 * size, the OS name. Components not in `set` are unconstrained. */
struct matrix_tuple {
	uint32_t set;
	struct matrix_version version[MATRIX_C__COUNT];
	char extra[MATRIX_C__COUNT][MATRIX_EXTRA_LEN];
};

bool matrix_tuple_eq(const struct matrix_tuple *a, const struct matrix_tuple *b);
/* Bitmask of the components whose value differs. */
uint32_t matrix_tuple_diff(const struct matrix_tuple *a, const struct matrix_tuple *b);
/* Whether some component present in both goes to a lower version. */
bool matrix_tuple_is_downgrade(const struct matrix_tuple *from, const struct matrix_tuple *to);

/* The validation gate of a stack (NCCL floor, fabric and IMEX checks). */
struct matrix_gate {
	bool fabric_completed;
	bool imex_domain_up;
	bool has_nccl;
	char transport[8];
	int floor_gbps;
	int tolerance_pct;
	int dcgm_diag_level;
	int64_t soak_ms;
};

/* Whether a measured all-reduce bus bandwidth passes: at least
 * floor x (100 - tolerance) / 100. A gate without NCCL always passes. */
bool matrix_gate_passes(const struct matrix_gate *g, int64_t busbw_gbps);

struct matrix_stack {
	char name[MATRIX_NAME_LEN];
	struct matrix_tuple tuple;
	bool has_cuda;
	bool has_nccl;
	struct matrix_range cuda;
	struct matrix_range nccl;
	unsigned nfixed;
	unsigned nopen;
	char fixed_cves[MATRIX_CVES_MAX][MATRIX_CVE_LEN];
	char open_cves[MATRIX_CVES_MAX][MATRIX_CVE_LEN];
	struct matrix_gate gate;
};

/* ---- transitions and verdicts ----------------------------------------- */

enum matrix_verdict {
	MATRIX_BLOCKED = 0, /* the zero value: fail closed */
	MATRIX_MANUAL,
	MATRIX_SAFE,
};

const char *matrix_verdict_name(enum matrix_verdict v);
bool matrix_verdict_parse(const char *s, enum matrix_verdict *out);

#define MATRIX_STEPS_MAX 8

struct matrix_step_spec {
	uint32_t components; /* MATRIX_BIT set */
	bool drain;
	bool fabric_restart;
	bool reboot;
};

struct matrix_transition {
	unsigned from; /* stack indices */
	unsigned to;
	enum matrix_verdict verdict;
	bool reversible;
	unsigned nsteps;
	struct matrix_step_spec steps[MATRIX_STEPS_MAX];
};

enum matrix_platform {
	MATRIX_GB200 = 0,
	MATRIX_GB300,
	MATRIX_VR200,
};

enum matrix_tier {
	MATRIX_TIER_SUPPORTED = 0,
	MATRIX_TIER_PREVIEW,
};

const char *matrix_platform_name(enum matrix_platform p);
bool matrix_platform_parse(const char *s, enum matrix_platform *out);

#define MATRIX_STACKS_MAX 64
#define MATRIX_TRANSITIONS_MAX 256

/* A built matrix; read-only once built, so it may be shared by threads. */
struct matrix {
	char name[MATRIX_NAME_LEN];
	enum matrix_platform platform;
	enum matrix_tier tier;
	unsigned nstacks;
	unsigned ntransitions;
	struct matrix_stack *stacks;           /* nstacks */
	struct matrix_transition *transitions; /* ntransitions */
};

struct matrix *matrix_new(const char *name, enum matrix_platform platform, enum matrix_tier tier);
void matrix_free(struct matrix *m);
/* Copies s in. NV_E_EXISTS for a duplicate name, NV_E_TOO_LARGE past
 * MATRIX_STACKS_MAX. */
enum nv_err matrix_stack_add(struct matrix *m, const struct matrix_stack *s);
/* NV_E_NOT_FOUND for bad stack indices, NV_E_EXISTS for a repeated pair. */
enum nv_err matrix_transition_add(struct matrix *m, const struct matrix_transition *t);

const struct matrix_stack *matrix_stack_find(const struct matrix *m, const char *name);
/* Index of the stack named name, or -1. */
int matrix_stack_index(const struct matrix *m, const char *name);
/* The first stack whose tuple equals t, or NULL. */
const struct matrix_stack *matrix_stack_find_tuple(const struct matrix *m,
                                                   const struct matrix_tuple *t);
const struct matrix_transition *matrix_transition_find(const struct matrix *m, unsigned from,
                                                       unsigned to);

/* Why a verdict is what it is. */
enum matrix_reason {
	MATRIX_R_LISTED = 0,       /* the edge is listed with this verdict */
	MATRIX_R_SAME_STACK,       /* from == to: nothing to do (safe) */
	MATRIX_R_UNKNOWN_STACK,    /* from or to is not a stack */
	MATRIX_R_UNLISTED,         /* no edge: fail closed */
	MATRIX_R_REVERSE_UNLISTED, /* only the forward edge is listed */
	MATRIX_R_BAD_STEPS,        /* an intermediate tuple is not a stack,
	                            * or the steps do not reach the target */
};

const char *matrix_reason_name(enum matrix_reason r);

struct matrix_verdict_info {
	enum matrix_verdict verdict;
	enum matrix_reason reason;
	bool downgrade;                       /* some component goes down */
	const struct matrix_transition *edge; /* NULL when not listed */
};

/* The verdict of the direct move from -> to. Unlisted moves are blocked; a
 * downgrade never inherits the verdict (or the reversible flag) of its
 * forward edge; a listed edge whose steps do not hold is blocked. out may
 * be NULL; when given it is always filled, and its edge is borrowed from
 * m. */
enum matrix_verdict matrix_verdict_get(const struct matrix *m, const char *from, const char *to,
                                       struct matrix_verdict_info *out);

/* ---- plans ------------------------------------------------------------ */

#define MATRIX_PLAN_STEPS_MAX 32
#define MATRIX_PLAN_HOPS_MAX 4
#define MATRIX_PROBLEM_LEN 256

/* Follow several listed edges when the direct one is missing or blocked. */
#define MATRIX_PLAN_MULTI_HOP 0x1u

struct matrix_plan_step {
	uint32_t components;
	bool drain;          /* GPU work on the trays must stop first */
	bool fabric_restart; /* the whole domain's fabric re-forms */
	bool reboot;
	unsigned from_stack; /* tuple before the step (a stack index) */
	unsigned to_stack;   /* tuple after it, itself a stack */
	unsigned edge;       /* transitions[] index */
};

struct matrix_plan {
	enum matrix_verdict verdict; /* worst of its edges */
	enum matrix_reason reason;
	bool reversible; /* every edge is */
	unsigned from;
	unsigned to;
	unsigned nhops;
	unsigned hops[MATRIX_PLAN_HOPS_MAX]; /* transitions[] indices */
	unsigned nsteps;
	struct matrix_plan_step steps[MATRIX_PLAN_STEPS_MAX];
	uint32_t layers; /* MATRIX_BIT(matrix_layer) touched */
	bool needs_drain;
	bool needs_fabric_restart;
	char problem[MATRIX_PROBLEM_LEN]; /* why it is blocked, if it is */
};

/* Plans the move from -> to as ordered component steps. Every tuple between
 * steps must be a stack of m. The plan is filled even when blocked, with
 * the reason and a problem text; NV_E_NOT_FOUND when a stack is unknown. */
enum nv_err matrix_plan_build(const struct matrix *m, const char *from, const char *to,
                              unsigned flags, struct matrix_plan *out);

#define MATRIX_TRAYS_MAX 18

/* The plan of one rack whose trays may run different stacks (version skew
 * after a halted upgrade, a replaced tray): one plan per distinct current
 * stack, with the trays (bit i = tray index i) that start from it. */
struct matrix_tray_plan {
	enum matrix_verdict verdict; /* worst of its groups */
	unsigned ngroups;
	struct {
		uint32_t trays;
		struct matrix_plan plan;
	} groups[MATRIX_TRAYS_MAX];
	uint32_t unknown_trays; /* trays on no stack of the matrix: blocked */
	char problem[MATRIX_PROBLEM_LEN];
};

/* tray_stacks[i] is the stack tray i + 1 runs (NULL or "" when unknown).
 * NV_E_NOT_FOUND when target is not a stack; NV_E_INVAL when ntrays is 0 or
 * above MATRIX_TRAYS_MAX. Blocked groups make the whole plan blocked. */
enum nv_err matrix_plan_trays(const struct matrix *m, const char *const *tray_stacks,
                              unsigned ntrays, const char *target, unsigned flags,
                              struct matrix_tray_plan *out);

/* ---- workloads and CVEs ----------------------------------------------- */

struct matrix_workload_check {
	bool ok;
	bool cuda_ok;
	bool nccl_ok;
	char problem[MATRIX_PROBLEM_LEN];
};

/* Checks the CUDA and NCCL versions a container brings (either may be
 * NULL: not used) against the stack's ranges. A stack without a range for
 * a used library fails closed. NV_E_PARSE for a malformed version. */
enum nv_err matrix_stack_check_workload(const struct matrix_stack *s, const char *cuda,
                                        const char *nccl, struct matrix_workload_check *out);

bool matrix_stack_fixes(const struct matrix_stack *s, const char *cve);
bool matrix_stack_is_affected(const struct matrix_stack *s, const char *cve);
/* Indices of the stacks that fix cve, at most cap; returns how many fix it
 * (may exceed cap). */
unsigned matrix_cve_fixed_by(const struct matrix *m, const char *cve, unsigned *idx, unsigned cap);

#endif
