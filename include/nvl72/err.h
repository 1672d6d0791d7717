/* SPDX-License-Identifier: Apache-2.0 */
/* The one error enum of the project. Every fallible call returns it; the
 * list only grows (values are never renumbered) so logs stay comparable. */
/* Contract: every call is thread-safe, never blocks, and returns a static
 * string (never NULL, also for an unknown value) or a plain value. */
#ifndef NVL72_ERR_H
#define NVL72_ERR_H

#include <stdbool.h>

enum nv_err {
	NV_OK = 0,
	NV_E_INVAL,          /* bad argument or malformed input */
	NV_E_PARSE,          /* input could not be parsed */
	NV_E_TOO_LARGE,      /* input exceeds its configured bound */
	NV_E_RANGE,          /* number outside its allowed range */
	NV_E_IO,             /* file or socket error */
	NV_E_NOT_FOUND,      /* object or file does not exist (HTTP 404) */
	NV_E_CONFLICT,       /* stale resourceVersion (HTTP 409 Conflict) */
	NV_E_EXISTS,         /* object already exists (HTTP 409 AlreadyExists) */
	NV_E_GONE,           /* resourceVersion too old (HTTP 410) */
	NV_E_UNAUTHORIZED,   /* no or bad credentials (HTTP 401) */
	NV_E_FORBIDDEN,      /* RBAC denied (HTTP 403) */
	NV_E_INVALID_OBJECT, /* apiserver rejected the object (HTTP 422) */
	NV_E_THROTTLED,      /* HTTP 429, see the Retry-After in the status */
	NV_E_TIMEOUT,        /* deadline passed */
	NV_E_TRANSPORT,      /* connection failed or broke */
	NV_E_TLS,            /* TLS handshake or verification failed */
	NV_E_SERVER,         /* HTTP 5xx */
	NV_E_HTTP,           /* any other unexpected HTTP status */
	NV_E_UNSUPPORTED,    /* feature or format not supported */
	NV_E_BUSY,           /* resource held by someone else */
	NV_E_CANCELLED,      /* stopped by shutdown */
	NV_E_CONFIG,         /* configuration is invalid */
	NV_E_AUTH,           /* credential plugin or token source failed */
	NV_E_STATE,          /* call not valid in the object's current state */
	NV_E_INTERNAL,       /* a bug: an invariant did not hold */
	NV_E__COUNT
};

/* "NV_E_CONFLICT" */
const char *nv_err_name(enum nv_err e);
/* "conflict: the object was modified" */
const char *nv_err_str(enum nv_err e);
/* Whether a request that failed this way may succeed when repeated. */
bool nv_err_retryable(enum nv_err e);

#endif
