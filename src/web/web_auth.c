// SPDX-License-Identifier: Apache-2.0
// Pure readers of the request headers the server judges a client by: the
// bearer token of Authorization, the Origin of a websocket upgrade
// against its Host, and the token of a feed client's first message. The
// HTTP and feed sides both use them and the fuzz target drives them, so
// they depend on no other file of the folder.
#include "web_int.h"

#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "nvl72/alloc.h"
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

enum nv_err web_auth_message_parse(const char *msg, size_t len, char **token)
{
	json_error_t err;
	*token = NULL;
	if (msg == NULL || len == 0 || len > WEB_AUTH_MSG_MAX)
		return len > WEB_AUTH_MSG_MAX ? NV_E_TOO_LARGE : NV_E_PARSE;
	json_t *m = json_loadb(msg, len, JSON_REJECT_DUPLICATES, &err);
	json_t *t = json_object_get(m, "token");
	enum nv_err e = NV_E_PARSE;
	if (json_is_object(m) && json_object_size(m) == 1 && json_is_string(t)) {
		const char *v = json_string_value(t);
		size_t n = json_string_length(t);
		bool ok = n > 0 && strlen(v) == n;
		for (size_t i = 0; ok && i < n; i++)
			ok = token68_char(v[i]);
		if (ok && n > WEB_TOKEN_MAX)
			e = NV_E_TOO_LARGE;
		else if (ok) {
			*token = xstrndup(v, n);
			e = NV_OK;
		}
		/* The parsed copy held the token too. */
		secure_wipe((char *)v, n);
	}
	json_decref(m);
	return e;
}

bool web_name_valid(const char *name, size_t max, bool slash)
{
	if (name == NULL || name[0] == '\0')
		return false;
	size_t n = strnlen(name, max + 1);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || (slash && c == '/')))
			return false;
	}
	return true;
}

bool web_scope_valid(const char *scope)
{
	return web_name_valid(scope, WEB_SCOPE_MAX, false);
}
