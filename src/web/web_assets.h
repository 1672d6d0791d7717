/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard files compiled into the binary. The table itself is
 * generated at build time from src/web/assets/ by the embed tool. */
#ifndef NVL72_WEB_ASSETS_H
#define NVL72_WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
	const char *path;         /* "/index.html" */
	const char *content_type; /* "text/html; charset=utf-8" */
	const unsigned char *data;
	size_t len;
};

extern const struct web_asset web_assets[];
extern const size_t web_assets_count;

#endif
