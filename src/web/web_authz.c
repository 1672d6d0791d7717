// SPDX-License-Identifier: Apache-2.0
// Authorization off the service thread. An authorizer may ask the API
// server (a TokenReview and a SubjectAccessReview), which can take seconds
// when it is slow; run on the service thread, that would freeze every
// client of the server, the websocket feed included. A request that needs
// one is parked instead: a job with copies of what is judged goes to a
// small pool of worker threads, and the answer comes back through
// lws_cancel_service, whose callback on the service thread asks for the
// parked connection's writeable callback, where the request goes on.
#include "web_int.h"

#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/base.h"
#include "nvl72/log.h"
#include "nvl72/parse.h"

void web_authz_job_free(struct web_authz_job *j)
{
	if (j == NULL)
		return;
	secure_free_str(j->bearer);
	free(j);
}

static void *authz_worker(void *arg)
{
	struct web_server *s = arg;
	pthread_mutex_lock(&s->authz_mu);
	for (;;) {
		while (s->authz_todo == NULL && !s->authz_stop)
			pthread_cond_wait(&s->authz_cv, &s->authz_mu);
		if (s->authz_stop)
			break;
		struct web_authz_job *j = s->authz_todo;
		s->authz_todo = j->next;
		pthread_mutex_unlock(&s->authz_mu);
		/* The connection may close meanwhile: the job owns what it reads. */
		enum nv_err a = j->fn ? j->fn(j->arg, j->bearer, j->verb, j->path) : NV_OK;
		for (size_t i = 0; i < j->nscopes; i++)
			j->scope_answer[i] =
			        a == NV_OK ? j->scope_fn(j->scope_arg, j->bearer, j->scopes[i]) : a;
		secure_free_str(j->bearer);
		j->bearer = NULL;
		pthread_mutex_lock(&s->authz_mu);
		j->answer = a;
		j->next = s->authz_done;
		s->authz_done = j;
		s->authz_pending--;
		/* The service thread outlives the workers (stop joins them
		 * first), so its context is there to be woken. */
		lws_cancel_service(s->ctx);
	}
	pthread_mutex_unlock(&s->authz_mu);
	return NULL;
}

enum nv_err web_authz_start(struct web_server *s)
{
	if (s->metrics_authz == NULL && s->post_authz == NULL && s->read_authz == NULL)
		return NV_OK;
	for (size_t i = 0; i < s->authz_workers; i++) {
		if (pthread_create(&s->authz_threads[i], NULL, authz_worker, s) != 0) {
			web_authz_stop(s);
			return NV_E_INTERNAL;
		}
		s->authz_nthreads++;
	}
	return NV_OK;
}

void web_authz_stop(struct web_server *s)
{
	pthread_mutex_lock(&s->authz_mu);
	s->authz_stop = true;
	pthread_cond_broadcast(&s->authz_cv);
	pthread_mutex_unlock(&s->authz_mu);
	/* A worker inside an authorizer finishes it first: bounded by the
	 * authorizer's own timeout. */
	for (size_t i = 0; i < s->authz_nthreads; i++)
		pthread_join(s->authz_threads[i], NULL);
	s->authz_nthreads = 0;
}

void web_authz_clear(struct web_server *s)
{
	struct web_authz_job *lists[] = {s->authz_todo, s->authz_done};
	s->authz_todo = s->authz_done = NULL;
	s->authz_pending = 0;
	for (size_t i = 0; i < ARRAY_LEN(lists); i++)
		while (lists[i] != NULL) {
			struct web_authz_job *next = lists[i]->next;
			web_authz_job_free(lists[i]);
			lists[i] = next;
		}
}

enum nv_err web_authz_enqueue(struct web_server *s, struct lws *wsi, struct web_authz_job *j)
{
	pthread_mutex_lock(&s->authz_mu);
	if (s->authz_stop || s->authz_nthreads == 0) {
		pthread_mutex_unlock(&s->authz_mu);
		return NV_E_STATE;
	}
	if (s->authz_pending >= s->authz_queue_max) {
		pthread_mutex_unlock(&s->authz_mu);
		return NV_E_BUSY;
	}
	j->wsi = wsi;
	/* Appended: the oldest question is answered first. */
	struct web_authz_job **tail = &s->authz_todo;
	while (*tail != NULL)
		tail = &(*tail)->next;
	*tail = j;
	s->authz_pending++;
	pthread_cond_signal(&s->authz_cv);
	pthread_mutex_unlock(&s->authz_mu);
	return NV_OK;
}

enum nv_err web_authz_submit(struct lws *wsi, struct web_session *pss, web_authz_fn fn, void *arg,
                             const char *verb)
{
	struct web_http *h = pss->http;
	struct web_authz_job *j = xcalloc(1, sizeof(*j));
	j->fn = fn;
	j->arg = arg;
	j->bearer = h->bearer ? xstrdup(h->bearer) : NULL;
	(void)str_copy(j->verb, sizeof(j->verb), verb);
	(void)str_copy(j->path, sizeof(j->path), h->path);
	enum nv_err e = web_authz_enqueue(web_server_of(wsi), wsi, j);
	if (e != NV_OK) {
		web_authz_job_free(j);
		return e;
	}
	h->authz = j;
	return NV_OK;
}

void web_authz_forget_job(struct web_server *s, struct web_authz_job *j)
{
	if (j == NULL)
		return;
	pthread_mutex_lock(&s->authz_mu);
	j->wsi = NULL;
	pthread_mutex_unlock(&s->authz_mu);
}

void web_authz_forget(struct web_server *s, struct web_http *h)
{
	if (h == NULL || h->authz == NULL)
		return;
	web_authz_forget_job(s, h->authz);
	h->authz = NULL;
}

void web_authz_drain(struct web_server *s)
{
	pthread_mutex_lock(&s->authz_mu);
	struct web_authz_job *done = s->authz_done;
	s->authz_done = NULL;
	pthread_mutex_unlock(&s->authz_mu);
	while (done != NULL) {
		struct web_authz_job *j = done;
		done = j->next;
		/* Only the service thread clears wsi (web_authz_forget runs in a
		 * close callback), and this is the service thread. */
		struct web_session *pss = j->wsi ? lws_wsi_user(j->wsi) : NULL;
		if (pss != NULL && pss->http != NULL && pss->http->authz == j) {
			pss->http->authz = NULL;
			pss->http->authz_answer = j->answer;
			pss->http->authz_ready = true;
			lws_callback_on_writable(j->wsi);
		} else if (pss != NULL && pss->client != NULL && pss->client->job == j) {
			web_feed_answer(j->wsi, pss, j);
		}
		web_authz_job_free(j);
	}
}
