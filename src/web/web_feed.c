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
#include "nvl72/parse.h"

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
	return web_name_valid(topic, WEB_TOPIC_MAX, true);
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
	secure_free_str(c->bearer);
	if (c->rx != NULL) {
		secure_wipe(c->rx, WEB_AUTH_MSG_MAX);
		free(c->rx);
	}
	free(c->verdicts);
	free(c);
}

/* ---- scopes (under s->mu) ------------------------------------------------- */

enum verdict { V_UNKNOWN, V_ALLOWED, V_DENIED };

static enum verdict verdict_of(const struct web_server *s, const struct web_client *c,
                               const char *scope)
{
	if (scope == NULL || s->read_authz == NULL || s->scope_authz == NULL)
		return V_ALLOWED;
	for (size_t i = 0; i < c->nverdicts; i++)
		if (strcmp(c->verdicts[i].scope, scope) == 0)
			return c->verdicts[i].allowed ? V_ALLOWED : V_DENIED;
	/* A client past its table reads no more scopes: bounded memory. */
	return c->nverdicts >= WEB_SCOPES_MAX ? V_DENIED : V_UNKNOWN;
}

/* Asks scope of c's token at the next job; a full list waits for the
 * rescan after the job in flight answers. */
static void ask_add(struct web_client *c, const char *scope)
{
	for (size_t i = 0; i < c->nask; i++)
		if (strcmp(c->ask[i], scope) == 0)
			return;
	if (c->nask >= WEB_ASK_MAX)
		return;
	(void)str_copy(c->ask[c->nask++], sizeof(c->ask[0]), scope);
	c->judge = true;
	c->wake = true;
}

static void verdict_add(struct web_client *c, const char *scope, bool allowed)
{
	if (c->nverdicts >= WEB_SCOPES_MAX)
		return;
	for (size_t i = 0; i < c->nverdicts; i++)
		if (strcmp(c->verdicts[i].scope, scope) == 0)
			return;
	if (c->verdicts == NULL)
		c->verdicts = xcalloc(WEB_SCOPES_MAX, sizeof(*c->verdicts));
	(void)str_copy(c->verdicts[c->nverdicts].scope, sizeof(c->verdicts[0].scope), scope);
	c->verdicts[c->nverdicts++].allowed = allowed;
}

/* Queues m for every client allowed its scope; a full queue dooms its
 * client. A client not yet allowed to read gets nothing; one whose token
 * was not yet judged for scope gets the retained value once it is. */
static void fanout_locked(struct web_server *s, struct web_msg *m, const char *scope)
{
	for (struct web_client *c = s->clients; c; c = c->next) {
		if (c->doomed || !c->authed)
			continue;
		enum verdict v = verdict_of(s, c, scope);
		if (v == V_UNKNOWN)
			ask_add(c, scope);
		if (v != V_ALLOWED)
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
	free(s->topics[i].scope);
	msg_unref(s->topics[i].msg);
	memmove(&s->topics[i], &s->topics[i + 1], (s->ntopics - i - 1) * sizeof(*s->topics));
	s->ntopics--;
}

/* Keeps m as the topic's latest; topics stay ordered oldest first. */
static enum nv_err retain_locked(struct web_server *s, const char *topic, const char *scope,
                                 struct web_msg *m)
{
	size_t i = 0;
	if (topic_find_locked(s, topic, &i))
		topic_drop_locked(s, i);
	else if (s->ntopics >= s->topics_max)
		return NV_E_TOO_LARGE;
	if (s->topics == NULL)
		s->topics = xcalloc(s->topics_max, sizeof(*s->topics));
	s->topics[s->ntopics].name = xstrdup(topic);
	s->topics[s->ntopics].scope = scope ? xstrdup(scope) : NULL;
	s->topics[s->ntopics].msg = msg_ref(m);
	s->ntopics++;
	return NV_OK;
}

enum publish_kind { PUB_RETAIN, PUB_TRANSIENT, PUB_DROP };

static enum nv_err publish(struct web_server *s, const char *topic, const char *scope,
                           const char *json, enum publish_kind kind)
{
	char dropped[WEB_SCOPE_MAX + 1] = "";
	if (s == NULL || !topic_valid(topic) || json == NULL ||
	    (scope != NULL && !web_scope_valid(scope)))
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
	if (kind == PUB_RETAIN) {
		e = retain_locked(s, topic, scope, m);
	} else if (kind == PUB_DROP && topic_find_locked(s, topic, &i)) {
		/* The removal goes to those who could read the topic. */
		if (s->topics[i].scope != NULL) {
			(void)str_copy(dropped, sizeof(dropped), s->topics[i].scope);
			scope = dropped;
		}
		topic_drop_locked(s, i);
	}
	if (e == NV_OK)
		fanout_locked(s, m, scope);
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
	return publish(s, topic, NULL, json_text, PUB_RETAIN);
}

enum nv_err web_publish_transient(struct web_server *s, const char *topic, const char *json_text)
{
	return publish(s, topic, NULL, json_text, PUB_TRANSIENT);
}

enum nv_err web_unpublish(struct web_server *s, const char *topic)
{
	return publish(s, topic, NULL, "null", PUB_DROP);
}

enum nv_err web_publish_scoped(struct web_server *s, const char *topic, const char *scope,
                               const char *json_text, bool retained)
{
	return publish(s, topic, scope, json_text, retained ? PUB_RETAIN : PUB_TRANSIENT);
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

/* Queues every retained topic c may read, oldest first, as its replay (at
 * the head of an empty queue, outside the caps); scopes not yet judged
 * are asked. Under s->mu. */
static void replay_locked(struct web_server *s, struct web_client *c)
{
	if (s->read_authz != NULL) {
		/* Tells the page its token was accepted, also with nothing
		 * retained yet. */
		static const char ok[] = "{\"allowed\":true}";
		struct web_msg *m = msg_build("auth", 0, false, ok, sizeof(ok) - 1);
		client_push(c, m);
		msg_unref(m);
	}
	for (size_t i = 0; i < s->ntopics; i++) {
		enum verdict v = verdict_of(s, c, s->topics[i].scope);
		if (v == V_ALLOWED)
			client_push(c, s->topics[i].msg);
		else if (v == V_UNKNOWN)
			ask_add(c, s->topics[i].scope);
	}
	c->replay_left = c->queued;
	c->replay_bytes = c->bytes;
}

/* Sends c's token to the workers: the read check and the scopes known now
 * (first), or the scopes asked since (later). Service thread. */
static void judge(struct lws *wsi, struct web_server *s, struct web_client *c, bool first)
{
	if (c->job != NULL || c->bearer == NULL)
		return;
	struct web_authz_job *j = xcalloc(1, sizeof(*j));
	j->bearer = xstrdup(c->bearer);
	if (first) {
		j->fn = s->read_authz;
		j->arg = s->read_authz_arg;
		(void)str_copy(j->verb, sizeof(j->verb), "get");
		(void)str_copy(j->path, sizeof(j->path), "/ws");
	}
	pthread_mutex_lock(&s->mu);
	if (s->scope_authz != NULL) {
		j->scope_fn = s->scope_authz;
		j->scope_arg = s->scope_authz_arg;
		for (size_t i = 0; first && i < s->ntopics; i++)
			if (s->topics[i].scope != NULL)
				ask_add(c, s->topics[i].scope);
		for (size_t i = 0; i < c->nask; i++)
			(void)str_copy(j->scopes[i], sizeof(j->scopes[0]), c->ask[i]);
		j->nscopes = c->nask;
		c->nask = 0;
	}
	c->judge = false;
	pthread_mutex_unlock(&s->mu);
	if (!first && j->nscopes == 0) {
		web_authz_job_free(j);
		return;
	}
	enum nv_err e = web_authz_enqueue(s, wsi, j);
	if (e != NV_OK) {
		/* Scopes dropped here are asked again when they next publish. */
		web_authz_job_free(j);
		if (first) {
			log_warn(WEB_COMP, "feed client refused: authorization queue full",
			         "server=%s", s->name);
			c->refused = e == NV_E_BUSY ? NV_E_THROTTLED : NV_E_INTERNAL;
			lws_callback_on_writable(wsi);
		}
		return;
	}
	c->job = j;
}

void web_feed_answer(struct lws *wsi, struct web_session *pss, const struct web_authz_job *j)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = pss->client;
	bool first = j->fn != NULL;
	c->job = NULL;
	if (first && j->answer != NV_OK) {
		log_info(WEB_COMP, "feed client refused", "server=%s answer=%s", s->name,
		         nv_err_name(j->answer));
		c->refused = j->answer;
		lws_callback_on_writable(wsi);
		return;
	}
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < j->nscopes; i++) {
		enum nv_err a = j->scope_answer[i];
		/* Anything else (the API server did not answer) is asked again
		 * when the scope next publishes. */
		if (a != NV_OK && a != NV_E_FORBIDDEN && a != NV_E_UNAUTHORIZED)
			continue;
		bool known = verdict_of(s, c, j->scopes[i]) != V_UNKNOWN;
		verdict_add(c, j->scopes[i], a == NV_OK);
		if (known || a != NV_OK || !c->authed)
			continue;
		for (size_t t = 0; t < s->ntopics; t++)
			if (s->topics[t].scope && strcmp(s->topics[t].scope, j->scopes[i]) == 0)
				client_push(c, s->topics[t].msg);
	}
	if (!c->authed) {
		c->authed = true;
		replay_locked(s, c);
	} else {
		/* Scopes beyond the last job's room. */
		for (size_t t = 0; t < s->ntopics; t++) {
			const char *sc = s->topics[t].scope;
			bool asked = false;
			for (size_t i = 0; sc && i < j->nscopes && !asked; i++)
				asked = strcmp(j->scopes[i], sc) == 0;
			if (sc && !asked && verdict_of(s, c, sc) == V_UNKNOWN)
				ask_add(c, sc);
		}
	}
	bool pending = c->head != NULL, more = c->judge;
	pthread_mutex_unlock(&s->mu);
	if (first) {
		lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
		log_debug(WEB_COMP, "feed client allowed", "server=%s scopes=%zu", s->name,
		          j->nscopes);
	}
	if (pending)
		lws_callback_on_writable(wsi);
	if (more)
		judge(wsi, s, c, false);
}

static int on_established(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = xcalloc(1, sizeof(*c));
	bool open = s->read_authz == NULL;
	c->wsi = wsi;
	if (!open)
		c->bearer = web_request_bearer(wsi, "/ws");
	pthread_mutex_lock(&s->mu);
	if (open) {
		c->authed = true;
		replay_locked(s, c);
	} else if (c->bearer == NULL) {
		/* Tells the page to send its token. */
		static const char ask[] = "{\"required\":true}";
		struct web_msg *m = msg_build("auth", 0, false, ask, sizeof(ask) - 1);
		client_push(c, m);
		msg_unref(m);
	}
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
	if (!open) {
		/* Until its token is judged it gets nothing; one that never
		 * presents a token is closed. */
		lws_set_timeout(wsi, PENDING_TIMEOUT_USER_REASON_BASE + 1, WEB_WS_AUTH_S);
		if (c->bearer != NULL)
			judge(wsi, s, c, true);
	}
	if (pending)
		lws_callback_on_writable(wsi);
	return 0;
}

/* Closes c with the code its refusal maps to (docs/internals/dashboard-feed.md). */
static int refuse(struct lws *wsi, struct web_client *c)
{
	int code = 4500;
	const char *why = "authorization unavailable";
	switch (c->refused) {
	case NV_E_UNAUTHORIZED:
		code = 4401, why = "unauthenticated";
		break;
	case NV_E_FORBIDDEN:
		code = 4403, why = "forbidden";
		break;
	case NV_E_THROTTLED:
	case NV_E_BUSY:
		code = 4429, why = "too many authorization requests, retry";
		break;
	case NV_E_PARSE:
	case NV_E_TOO_LARGE:
		code = 4400, why = "expected {\"token\":\"...\"}";
		break;
	default:
		break;
	}
	c->closing = true;
	lws_close_reason(wsi, (enum lws_close_status)code, (unsigned char *)why, strlen(why));
	return -1;
}

/* The first message of a client that did not authenticate on the upgrade:
 * {"token":"..."}, gathered within WEB_AUTH_MSG_MAX. */
static int on_receive(struct lws *wsi, struct web_session *pss, const void *in, size_t len)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = pss ? pss->client : NULL;
	if (c == NULL || s->read_authz == NULL || c->bearer != NULL || c->refused != NV_OK)
		return 0; /* the feed is one-way: anything else is ignored */
	if (len > WEB_AUTH_MSG_MAX - c->rx_len) {
		c->refused = NV_E_TOO_LARGE;
		return refuse(wsi, c);
	}
	if (c->rx == NULL)
		c->rx = xmalloc(WEB_AUTH_MSG_MAX);
	memcpy(c->rx + c->rx_len, in, len);
	c->rx_len += len;
	if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
		return 0;
	char *tok = NULL;
	enum nv_err e = web_auth_message_parse(c->rx, c->rx_len, &tok);
	secure_wipe(c->rx, WEB_AUTH_MSG_MAX);
	free(c->rx);
	c->rx = NULL;
	c->rx_len = 0;
	if (e != NV_OK) {
		log_info(WEB_COMP, "feed client refused: bad first message", "server=%s err=%s",
		         s->name, nv_err_name(e));
		c->refused = e;
		return refuse(wsi, c);
	}
	c->bearer = tok;
	judge(wsi, s, c, true);
	return 0;
}

static void on_closed(struct lws *wsi, struct web_session *pss)
{
	struct web_server *s = web_server_of(wsi);
	struct web_client *c = pss ? pss->client : NULL;
	if (c == NULL)
		return;
	web_authz_forget_job(s, c->job);
	c->job = NULL;
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
	if (c->refused != NV_OK)
		return refuse(wsi, c);
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

/* A publisher woke the thread: ask for writeable callbacks where needed,
 * and send the scopes clients met to the workers. */
static void on_wake(struct web_server *s)
{
	struct lws **ask = NULL;
	size_t nask = 0;
	pthread_mutex_lock(&s->mu);
	for (struct web_client *c = s->clients; c; c = c->next) {
		if (c->wake) {
			c->wake = false;
			lws_callback_on_writable(c->wsi);
		}
		if (c->judge && c->job == NULL && c->authed) {
			if (ask == NULL)
				ask = xcalloc(s->nclients, sizeof(*ask));
			if (nask < s->nclients)
				ask[nask++] = c->wsi;
		}
	}
	pthread_mutex_unlock(&s->mu);
	/* Only this thread closes clients, so each is still there. */
	for (size_t i = 0; i < nask; i++) {
		struct web_session *pss = lws_wsi_user(ask[i]);
		if (pss != NULL && pss->client != NULL)
			judge(ask[i], s, pss->client, false);
	}
	free(ask);
}

int web_feed_callback(struct lws *wsi, enum lws_callback_reasons reason, struct web_session *pss,
                      void *in, size_t len)
{
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
		return on_receive(wsi, pss, in, len);
	default:
		return 0;
	}
}
