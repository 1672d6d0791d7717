// SPDX-License-Identifier: Apache-2.0
// The lookup and listing of a compiled-in table of backends, shared by the
// NVLink partition backends (fabric.c) and the out-of-band update backends
// (oob.c): every ops struct begins with its name.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fabric_int.h"

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* The name an ops struct begins with. */
static const char *entry_name(const void *ops)
{
	return *(const char *const *)ops;
}

const void *fabric_registry_find(const struct fabric_registry *r, const char *name)
{
	for (size_t i = 0; name != NULL && i < r->n; i++)
		if (strcmp(entry_name(r->ops[i]), name) == 0)
			return r->ops[i];
	return NULL;
}

const char *fabric_registry_names(const struct fabric_registry *r)
{
	pthread_mutex_lock(&names_lock);
	if (r->names[0] == '\0') {
		size_t len = 0;
		for (size_t i = 0; i < r->n && len < r->names_cap; i++) {
			int n = snprintf(r->names + len, r->names_cap - len, "%s%s",
			                 i > 0 ? ", " : "", entry_name(r->ops[i]));
			if (n < 0)
				break;
			len += (size_t)n;
		}
	}
	pthread_mutex_unlock(&names_lock);
	return r->names;
}
