// SPDX-License-Identifier: Apache-2.0
// The host layer's last-error setter: every file of src/host/ records why a
// call failed in h->err through it. It stands below them all and calls none.
#include <stdarg.h>
#include <stdio.h>

#include "host_int.h"

void host_fail(struct host *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->err, sizeof(h->err), fmt, ap);
	va_end(ap);
}
