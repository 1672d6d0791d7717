/* SPDX-License-Identifier: Apache-2.0 */
/* What every kind of the nvl72.io/v1alpha1 API shares: the list of field
 * errors that validation fills (each with its path, such as
 * spec.computeTrays[3].node), object metadata and status conditions. The
 * kinds themselves are in api_rack.h, api_domain.h and api_upgrade.h. */
/* Contract, for this header and api_rack.h, api_domain.h, api_upgrade.h:
 * pure code with no global state. No call blocks, does I/O or keeps a
 * pointer to its arguments, so calls on distinct values may run on any
 * threads (a json_t read here must not be changed meanwhile). Parsers read
 * a borrowed object and return a new struct in *out, which the caller
 * frees with that kind's _free (NULL does nothing); on NV_E_INVALID_OBJECT
 * *out is untouched and the problems are appended to errs. errs is never
 * NULL: the caller initialises it with api_errors_init, and parses and
 * checks append to it, they do not reset it. Status serialisers return a
 * new reference (json_decref it). */
#ifndef NVL72_API_H
#define NVL72_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"

#define API_GROUP "nvl72.io"
#define API_VERSION "nvl72.io/v1alpha1"

#define API_PATH_LEN 256
#define API_MSG_LEN 256
#define API_ERRORS_MAX 64

/* One problem: "spec.computeTrays[3].node" and "must not be empty". */
struct api_error {
	char path[API_PATH_LEN];
	char msg[API_MSG_LEN];
};

/* Every problem of one object, up to API_ERRORS_MAX; later ones are only
 * counted, so a hostile object cannot make the list grow. */
struct api_errors {
	unsigned n;
	unsigned dropped;
	struct api_error list[API_ERRORS_MAX];
};

void api_errors_init(struct api_errors *e);
void api_errors_add(struct api_errors *e, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Whether an error at exactly path has a message containing msg (NULL:
 * any message). */
bool api_errors_has(const struct api_errors *e, const char *path, const char *msg);
/* "path: msg" lines joined by "; " (the shape of an admission denial),
 * appended to out. NV_E_TOO_LARGE when out's cap is reached. */
enum nv_err api_errors_format(const struct api_errors *e, struct buf *out);

/* The metadata fields the operator reads. */
struct api_meta {
	char name[254];
	char ns[64];
	char uid[64];
	char resource_version[64];
	int64_t generation;
	int64_t created_ms; /* metadata.creationTimestamp; 0: unset */
};

enum api_cond_status {
	API_COND_UNKNOWN = 0,
	API_COND_TRUE,
	API_COND_FALSE,
};

#define API_CONDITIONS_MAX 16

/* metav1.Condition. */
struct api_condition {
	char type[64];
	enum api_cond_status status;
	int64_t observed_generation;
	int64_t last_transition_ms; /* wall clock */
	char reason[64];
	char message[512];
};

/* Status serialisers return a new reference (the caller owns it) holding
 * only the status object, for a merge patch of the status subresource. */
json_t *api_conditions_to_json(const struct api_condition *c, unsigned n);

/* The NVL72 rack shape: trays per rack and GPUs per tray. */
#define API_COMPUTE_TRAYS 18
#define API_SWITCH_TRAYS 9
#define API_GPUS_PER_TRAY 4

#endif
