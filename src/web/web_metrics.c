// SPDX-License-Identifier: Apache-2.0
// The web servers' own series: requests answered, websocket clients now
// and clients dropped for reading too slowly, labelled by server. The
// life cycle registers them and the HTTP and feed sides count on them,
// so they sit below all three.
#include "web_int.h"

#include <stdio.h>

#include "nvl72/metrics.h"

/* The server's own families; a second server on the same registry finds
 * them registered already and shares them under its own server label. */
static enum nv_err family_get(struct metrics_registry *r, const struct metrics_desc *d,
                              struct metrics_family **out)
{
	enum nv_err e = metrics_family_register(r, d, out);
	if (e == NV_E_EXISTS) {
		*out = metrics_registry_find(r, d->name);
		e = NV_OK;
	}
	return e;
}

enum nv_err web_metrics_setup(struct web_server *s)
{
	static const char *const l_req[] = {"server", "handler", "code", NULL};
	static const char *const l_srv[] = {"server", NULL};
	const struct metrics_desc req = {"nvl72_web_requests_total",
	                                 "HTTP requests answered by the operator's web servers.",
	                                 METRICS_COUNTER,
	                                 l_req,
	                                 NULL,
	                                 0,
	                                 0};
	const struct metrics_desc cli = {"nvl72_web_ws_clients",
	                                 "Dashboard websocket clients connected now.",
	                                 METRICS_GAUGE,
	                                 l_srv,
	                                 NULL,
	                                 0,
	                                 0};
	const struct metrics_desc drop = {"nvl72_web_ws_dropped_total",
	                                  "Websocket clients disconnected for reading too slowly.",
	                                  METRICS_COUNTER,
	                                  l_srv,
	                                  NULL,
	                                  0,
	                                  0};
	if (s->metrics == NULL)
		return NV_OK;
	enum nv_err e = family_get(s->metrics, &req, &s->m_requests);
	if (e == NV_OK)
		e = family_get(s->metrics, &cli, &s->m_clients);
	if (e == NV_OK)
		e = family_get(s->metrics, &drop, &s->m_dropped);
	const char *v[] = {s->name};
	if (e == NV_OK)
		e = metrics_gauge_set(s->m_clients, v, 0);
	if (e == NV_OK)
		e = metrics_family_touch(s->m_dropped, v);
	return e;
}

void web_count_request(struct web_server *s, const char *handler, int status)
{
	if (s->m_requests == NULL)
		return;
	char code[8];
	snprintf(code, sizeof(code), "%d", status);
	const char *v[] = {s->name, handler, code};
	(void)metrics_counter_inc(s->m_requests, v);
}

void web_count_clients(struct web_server *s, size_t n)
{
	const char *v[] = {s->name};
	if (s->m_clients)
		(void)metrics_gauge_set(s->m_clients, v, (double)n);
}

void web_count_dropped(struct web_server *s)
{
	const char *v[] = {s->name};
	if (s->m_dropped)
		(void)metrics_counter_inc(s->m_dropped, v);
}
