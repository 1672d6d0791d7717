// SPDX-License-Identifier: Apache-2.0
// Names and messages of the error enum, and the one place that decides
// which failures are worth a retry.
#include "nvl72/err.h"

#include <stddef.h>

static const struct {
	const char *name;
	const char *msg;
} errs[NV_E__COUNT] = {
        [NV_OK] = {"NV_OK", "no error"},
        [NV_E_INVAL] = {"NV_E_INVAL", "invalid argument"},
        [NV_E_PARSE] = {"NV_E_PARSE", "input could not be parsed"},
        [NV_E_TOO_LARGE] = {"NV_E_TOO_LARGE", "input too large"},
        [NV_E_RANGE] = {"NV_E_RANGE", "value out of range"},
        [NV_E_IO] = {"NV_E_IO", "input/output error"},
        [NV_E_NOT_FOUND] = {"NV_E_NOT_FOUND", "not found"},
        [NV_E_CONFLICT] = {"NV_E_CONFLICT", "conflict: the object was modified"},
        [NV_E_EXISTS] = {"NV_E_EXISTS", "already exists"},
        [NV_E_GONE] = {"NV_E_GONE", "resource version too old"},
        [NV_E_UNAUTHORIZED] = {"NV_E_UNAUTHORIZED", "unauthorized"},
        [NV_E_FORBIDDEN] = {"NV_E_FORBIDDEN", "forbidden"},
        [NV_E_INVALID_OBJECT] = {"NV_E_INVALID_OBJECT", "object rejected as invalid"},
        [NV_E_THROTTLED] = {"NV_E_THROTTLED", "too many requests"},
        [NV_E_TIMEOUT] = {"NV_E_TIMEOUT", "timed out"},
        [NV_E_TRANSPORT] = {"NV_E_TRANSPORT", "connection failed"},
        [NV_E_TLS] = {"NV_E_TLS", "TLS failure"},
        [NV_E_SERVER] = {"NV_E_SERVER", "server error"},
        [NV_E_HTTP] = {"NV_E_HTTP", "unexpected HTTP status"},
        [NV_E_UNSUPPORTED] = {"NV_E_UNSUPPORTED", "not supported"},
        [NV_E_BUSY] = {"NV_E_BUSY", "busy"},
        [NV_E_CANCELLED] = {"NV_E_CANCELLED", "cancelled"},
        [NV_E_CONFIG] = {"NV_E_CONFIG", "invalid configuration"},
        [NV_E_AUTH] = {"NV_E_AUTH", "credentials unavailable"},
        [NV_E_STATE] = {"NV_E_STATE", "not allowed in the current state"},
        [NV_E_INTERNAL] = {"NV_E_INTERNAL", "internal error"},
};

const char *nv_err_name(enum nv_err e)
{
	if ((unsigned)e >= NV_E__COUNT || errs[e].name == NULL)
		return "NV_E_UNKNOWN";
	return errs[e].name;
}

const char *nv_err_str(enum nv_err e)
{
	if ((unsigned)e >= NV_E__COUNT || errs[e].msg == NULL)
		return "unknown error";
	return errs[e].msg;
}

bool nv_err_retryable(enum nv_err e)
{
	switch (e) {
	case NV_E_THROTTLED:
	case NV_E_TIMEOUT:
	case NV_E_TRANSPORT:
	case NV_E_SERVER:
	case NV_E_BUSY:
		return true;
	default:
		return false;
	}
}
