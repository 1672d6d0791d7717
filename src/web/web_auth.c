// SPDX-License-Identifier: Apache-2.0
// Pure readers of the request headers the server judges a client by: the
// bearer token of Authorization and the Origin of a websocket upgrade
// against its Host. The HTTP and feed sides both use them and the fuzz
// target drives them, so they depend on no other file of the folder.
#include "web_int.h"

#include <string.h>
#include <strings.h>

#include "nvl72/parse.h"

static bool token68_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

enum nv_err web_bearer_parse(const char *header, size_t len, const char **tok, size_t *tok_len)
{
	size_t i = 0;
	while (i < len && (header[i] == ' ' || header[i] == '\t'))
		i++;
	if (len - i < 7 || strncasecmp(header + i, "bearer", 6) != 0 ||
	    (header[i + 6] != ' ' && header[i + 6] != '\t'))
		return NV_E_NOT_FOUND;
	i += 6;
	while (i < len && (header[i] == ' ' || header[i] == '\t'))
		i++;
	size_t end = len;
	while (end > i && (header[end - 1] == ' ' || header[end - 1] == '\t'))
		end--;
	if (end == i)
		return NV_E_NOT_FOUND;
	if (end - i > WEB_TOKEN_MAX)
		return NV_E_TOO_LARGE;
	for (size_t k = i; k < end; k++)
		if (!token68_char(header[k]))
			return NV_E_PARSE;
	*tok = header + i;
	*tok_len = end - i;
	return NV_OK;
}

bool web_origin_matches(const char *origin, const char *host)
{
	if (origin == NULL || host == NULL || host[0] == '\0')
		return false;
	if (str_has_prefix(origin, "http://"))
		origin += 7;
	else if (str_has_prefix(origin, "https://"))
		origin += 8;
	else
		return false;
	return strcasecmp(origin, host) == 0;
}
