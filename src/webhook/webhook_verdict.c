// SPDX-License-Identifier: Apache-2.0
// What a handler decides about an admission request: allowed, or denied
// with a code, a reason and a bounded message that names the object and
// the field, and the warnings either may carry. The review code and the
// rules both reach their verdicts
// through these, and these stand on no other file of the webhook.
#include <stdarg.h>
#include <stdio.h>

#include "webhook_int.h"

void wh_verdict_init(struct wh_verdict *v)
{
	v->allowed = true;
	v->code = 200;
	v->reason = "";
	buf_init(&v->msg, WH_MSG_MAX);
	buf_init(&v->patch, WH_PATCH_MAX);
	v->nwarnings = 0;
}

void wh_verdict_clear(struct wh_verdict *v)
{
	buf_clear(&v->msg);
	buf_clear(&v->patch);
}

void wh_deny(struct wh_verdict *v, int code, const char *reason, const char *fmt, ...)
{
	va_list ap;
	v->allowed = false;
	v->code = code;
	v->reason = reason;
	buf_reset(&v->msg);
	buf_reset(&v->patch);
	va_start(ap, fmt);
	// A message cut at the cap still says what is wrong first.
	(void)buf_vprintf(&v->msg, fmt, ap);
	va_end(ap);
}

void wh_warn(struct wh_verdict *v, const char *fmt, ...)
{
	va_list ap;
	if (v->nwarnings >= WH_WARNINGS_MAX)
		return;
	va_start(ap, fmt);
	// A warning cut at the cap still says what happens first.
	(void)vsnprintf(v->warnings[v->nwarnings], sizeof(v->warnings[0]), fmt, ap);
	va_end(ap);
	v->nwarnings++;
}

static const char *kind_or_resource(const struct wh_request *req)
{
	return req->kind[0] ? req->kind : req->resource;
}

void wh_deny_errors(struct wh_verdict *v, const struct wh_request *req,
                    const struct api_errors *errs)
{
	wh_deny(v, 422, "Invalid", "%s \"%s\": ", kind_or_resource(req),
	        req->name[0] ? req->name : "(unnamed)");
	if (api_errors_format(errs, &v->msg) != NV_OK)
		(void)buf_append_str(&v->msg, " (message cut)");
}
