// SPDX-License-Identifier: Apache-2.0
// The websocket feed: publishers on any thread hand messages to bounded
// per-client queues, and the service thread drains them; a client that
// falls behind is dropped rather than slowing anyone down.
#include "web_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/log.h"

/* ---- messages --------------------------------------------------------------- */

static void msg_unref(struct web_msg *m)
{
	if (m && atomic_fetch_sub(&m->refs, 1) == 1)
		free(m);
}

static struct web_msg *msg_ref(struct web_msg *m)
{
	atomic_fetch_add(&m->refs, 1);
	return m;
}

static bool topic_valid(const char *topic)
{
	if (topic == NULL || topic[0] == '\0')
		return false;
	size_t n = strnlen(topic, WEB_TOPIC_MAX + 1);
	if (n > WEB_TOPIC_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = topic[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '/'))
			return false;
	}
	return true;
}

/* {"topic":"rack/r01","seq":42,"retained":true,"data":<json>}; the topic is
 * plain by construction, so it needs no escaping. */
static struct web_msg *msg_build(const char *topic, uint64_t seq, bool retained, const char *json,
                                 size_t jlen)
{
	char head[WEB_TOPIC_MAX + 96];
	int hn = snprintf(head, sizeof(head),
	                  "{\"topic\":\"%s\",\"seq\":%" PRIu64 ",\"retained\":%s,\"data\":", topic,
	                  seq, retained ? "true" : "false");
	size_t len = (size_t)hn + jlen + 1;
	struct web_msg *m = xmalloc(sizeof(*m) + LWS_PRE + len);
	atomic_init(&m->refs, 1);
	m->len = len;
	unsigned char *p = m->data + LWS_PRE;
	memcpy(p, head, (size_t)hn);
	memcpy(p + hn, json, jlen);
	p[len - 1] = '}';
	return m;
}

/* ---- per-client queues (all under s->mu) ----------------------------------- */

static void client_push(struct web_client *c, struct web_msg *m)
{
	struct web_qnode *n = xmalloc(sizeof(*n));
	n->next = NULL;
	n->msg = msg_ref(m);
	if (c->tail)
		c->tail->next = n;
	else
		c->head = n;
	c->tail = n;
	c->queued++;
	c->bytes += m->len;
	c->wake = true;
}

static struct web_msg *client_pop(struct web_client *c)
{
	struct web_qnode *n = c->head;
	if (n == NULL)
		return NULL;
	c->head = n->next;
	if (c->head == NULL)
		c->tail = NULL;
	struct web_msg *m = n->msg;
	c->queued--;
	c->bytes -= m->len;
	if (c->replay_left) {
		c->replay_left--;
		c->replay_bytes -= m->len;
	}
	free(n);
	return m;
}

static void client_free(struct web_client *c)
{
	struct web_msg *m;
	while ((m = client_pop(c)) != NULL)
		msg_unref(m);
	free(c);
}

/* Queues m for every client; a full queue dooms its client. */
static void fanout_locked(struct web_server *s, struct web_msg *m)
{
	for (struct web_client *c = s->clients; c; c = c->next) {
		if (c->doomed)
			continue;
		if (c->queued - c->replay_left >= s->queue_max ||
		    c->bytes - c->replay_bytes + m->len > s->queue_bytes_max) {
			c->doomed = true;
			c->wake = true;
			continue;
		}
		client_push(c, m);
	}
}

static struct web_topic *topic_find_locked(struct web_server *s, const char *topic, size_t *idx)
{
	for (size_t i = 0; i < s->ntopics; i++) {
		if (strcmp(s->topics[i].name, topic) == 0) {
			*idx = i;
			return &s->topics[i];
		}
	}
	return NULL;
}

static void topic_drop_locked(struct web_server *s, size_t i)
{
	free(s->topics[i].name);
	msg_unref(s->topics[i].msg);
	memmove(&s->topics[i], &s->topics[i + 1], (s->ntopics - i - 1) * sizeof(*s->topics));
	s->ntopics--;
}

/* Keeps m as the topic's latest; topics stay ordered oldest first. */
static enum nv_err retain_locked(struct web_server *s, const char *topic, struct web_msg *m)
{
	size_t i = 0;
	if (topic_find_locked(s, topic, &i))
		topic_drop_locked(s, i);
	else if (s->ntopics >= s->topics_max)
		return NV_E_TOO_LARGE;
	if (s->topics == NULL)
		s->topics = xcalloc(s->topics_max, sizeof(*s->topics));
	s->topics[s->ntopics].name = xstrdup(topic);
	s->topics[s->ntopics].msg = msg_ref(m);
	s->ntopics++;
	return NV_OK;
}

enum publish_kind { PUB_RETAIN, PUB_TRANSIENT, PUB_DROP };

static enum nv_err publish(struct web_server *s, const char *topic, const char *json,
                           enum publish_kind kind)
{
	if (s == NULL || !topic_valid(topic) || json == NULL)
		return NV_E_INVAL;
	size_t jlen = strnlen(json, s->msg_max + 1);
	if (jlen > s->msg_max)
		return NV_E_TOO_LARGE;
	if (jlen == 0)
		return NV_E_INVAL;
	enum nv_err e = NV_OK;
	pthread_mutex_lock(&s->mu);
	if (!s->accepting) {
		e = NV_E_STATE;
		goto out;
	}
	struct web_msg *m = msg_build(topic, ++s->seq, kind == PUB_RETAIN, json, jlen);
	size_t i = 0;
	if (kind == PUB_RETAIN)
		e = retain_locked(s, topic, m);
	else if (kind == PUB_DROP && topic_find_locked(s, topic, &i))
		topic_drop_locked(s, i);
	if (e == NV_OK)
		fanout_locked(s, m);
	msg_unref(m);
	/* Wakes the service thread. Safe from any thread, and done under the
	 * lock so that web_server_stop cannot free the context meanwhile. */
	if (e == NV_OK)
		lws_cancel_service(s->ctx);
out:
	pthread_mutex_unlock(&s->mu);
	return e;
}

enum nv_err web_publish(struct web_server *s, const char *topic, const char *json_text)
{
	return publish(s, topic, json_text, PUB_RETAIN);
}

enum nv_err web_publish_transient(struct web_server *s, const char *topic, const char *json_text)
{
	return publish(s, topic, json_text, PUB_TRANSIENT);
}

enum nv_err web_unpublish(struct web_server *s, const char *topic)
{
	return publish(s, topic, "null", PUB_DROP);
}

size_t web_client_count(struct web_server *s)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->nclients;
	pthread_mutex_unlock(&s->mu);
	return n;
}

void web_feed_clear(struct web_server *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->ntopics)
		topic_drop_locked(s, s->ntopics - 1);
	free(s->topics);
	s->topics = NULL;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the service thread's side ------------------------------------------------ */

static int on_filter(struct lws *wsi)
{
	struct web_server *s = web_server_of(wsi);
	char uri[32], origin[256], host[256];
	if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) >= (int)sizeof(uri) ||
	    lws_hdr_copy(wsi, uri, (int)sizeof(uri), WSI_TOKEN_GET_URI) < 0 ||
	    strcmp(uri, "/ws") != 0)
		return 1;
	if (!s->ws_any_origin && lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) > 0) {
		if (lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) >= (int)sizeof(origin) ||
		    lws_hdr_total_length(wsi, WSI_TOKEN_HOST) >= (int)sizeof(host) ||
		    lws_hdr_copy(wsi, origin, (int)sizeof(origin), WSI_TOKEN_ORIGIN) < 0 ||
		    lws_hdr_copy(wsi, host, (int)sizeof(host), WSI_TOKEN_HOST) < 0 ||
		    !web_origin_matches(origin, host)) {
			log_warn(WEB_COMP, "websocket from another origin refused", NULL);
			return 1;
		}
	}
	pthread_mutex_lock(&s->mu);
	bool full = s->nclients >= s->clients_max;
	pthread_mutex_unlock(&s->mu);
	if (full)
		log_warn(WEB_COMP, "websocket refused: too many clients", "max=%zu",
		         s->clients_max);
	return full ? 1 : 0;
}

static int on_established(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = xcalloc(1, sizeof(*c));
	c->wsi = wsi;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->ntopics; i++)
		client_push(c, s->topics[i].msg);
	c->replay_left = c->queued;
	c->replay_bytes = c->bytes;
	c->next = s->clients;
	if (s->clients)
		s->clients->prev = c;
	s->clients = c;
	s->nclients++;
	size_t n = s->nclients;
	/* Publishers may queue to c from here on: read it under the lock. */
	bool pending = c->queued > 0;
	pthread_mutex_unlock(&s->mu);
	web_count_clients(s, n);
	pss->client = c;
	log_debug(WEB_COMP, "websocket client connected", "clients=%zu", n);
	if (pending)
		lws_callback_on_writable(wsi);
	return 0;
}

static void on_closed(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = pss ? pss->client : NULL;
	if (c == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nclients--;
	size_t n = s->nclients;
	pthread_mutex_unlock(&s->mu);
	web_count_clients(s, n);
	client_free(c);
	pss->client = NULL;
}

static int on_writeable(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = pss->client;
	if (c == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	bool doomed = c->doomed;
	struct web_msg *m = doomed ? NULL : client_pop(c);
	bool more = c->head != NULL;
	pthread_mutex_unlock(&s->mu);
	if (doomed) {
		if (!c->closing) {
			log_warn(WEB_COMP, "websocket client too slow, dropped",
			         "server=%s queue_max=%zu", s->name, s->queue_max);
			web_count_dropped(s);
		}
		c->closing = true;
		lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
		                 (unsigned char *)"too slow", 8);
		return -1;
	}
	if (m == NULL)
		return 0;
	size_t len = m->len;
	int n = lws_write(wsi, m->data + LWS_PRE, len, LWS_WRITE_TEXT);
	msg_unref(m);
	if (n < 0 || (size_t)n < len)
		return -1;
	if (more)
		lws_callback_on_writable(wsi);
	return 0;
}

/* A publisher woke the thread: ask for writeable callbacks where needed. */
static void on_wake(struct web_server *s)
{
	pthread_mutex_lock(&s->mu);
	for (struct web_client *c = s->clients; c; c = c->next) {
		if (c->wake) {
			c->wake = false;
			lws_callback_on_writable(c->wsi);
		}
	}
	pthread_mutex_unlock(&s->mu);
}

int web_feed_callback(struct lws *wsi, enum lws_callback_reasons reason, struct web_session *pss,
                      void *in, size_t len)
{
	(void)in;
	(void)len;
	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
		return on_filter(wsi);
	case LWS_CALLBACK_ESTABLISHED:
		return on_established(wsi, pss);
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return on_writeable(wsi, pss);
	case LWS_CALLBACK_CLOSED:
		on_closed(wsi, pss);
		return 0;
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		on_wake(web_server_of(wsi));
		return 0;
	case LWS_CALLBACK_RECEIVE:
		/* The feed is one-way; what a client says is ignored. */
		return 0;
	default:
		return 0;
	}
}
