// SPDX-License-Identifier: Apache-2.0
// Integration suite for watches and informers against a real apiserver:
// event order, bookmarks, indexes and snapshots, surviving an apiserver
// restart, and a 410 after etcd compaction that the informer relists from
// without losing or repeating handler calls for live objects.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"

static int failures;
static char cdir[512];
static struct kube_client *W; /* writer, always direct */

__attribute__((format(printf, 3, 4))) static void check(bool cond, const char *name,
                                                        const char *fmt, ...)
{
	char detail[600] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (cond) {
		printf("ok - %s\n", name);
	} else {
		failures++;
		printf("not ok - %s (%s)\n", name, detail);
	}
	fflush(stdout);
}

static json_t *cm(const char *name, const char *labels, const char *val)
{
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:o},s:{s:s}}", "apiVersion", "v1", "kind",
	                 "ConfigMap", "metadata", "name", name, "namespace", "default", "labels",
	                 json_loads(labels, 0, NULL), "data", "v", val);
}

static enum nv_err put_cm(const char *name, const char *labels, const char *val)
{
	struct kube_status st;
	json_t *o = cm(name, labels, val), *cur = NULL;
	enum nv_err rc = kube_get(W, &KUBE_RES_CONFIGMAPS, "default", name, &cur, &st);
	if (rc == NV_E_NOT_FOUND) {
		rc = kube_create(W, &KUBE_RES_CONFIGMAPS, "default", o, NULL, &st);
	} else if (rc == NV_OK) {
		jx_set_str(cur, "data.v", val);
		rc = kube_update(W, &KUBE_RES_CONFIGMAPS, NULL, cur, NULL, NULL, &st);
	}
	json_decref(cur);
	json_decref(o);
	return rc;
}

static enum nv_err del_cm(const char *name)
{
	struct kube_status st;
	return kube_delete(W, &KUBE_RES_CONFIGMAPS, "default", name,
	                   &(struct kube_delete_opts){.grace_period_s = -1}, &st);
}

/* ---- recording handlers ---- */

struct rec {
	pthread_mutex_t mu;
	char log[64][96];
	int n;
};

__attribute__((format(printf, 2, 3))) static void rec_add(struct rec *r, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&r->mu);
	if (r->n < 64) {
		va_start(ap, fmt);
		vsnprintf(r->log[r->n++], 96, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->mu);
}

static int rec_count(struct rec *r, const char *entry)
{
	int k = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++)
		k += strcmp(r->log[i], entry) == 0;
	pthread_mutex_unlock(&r->mu);
	return k;
}

static void rec_dump(struct rec *r, char *out, size_t outsz)
{
	size_t n = 0;
	out[0] = '\0';
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n && n + 100 < outsz; i++)
		n += (size_t)snprintf(out + n, outsz - n, "%s ", r->log[i]);
	pthread_mutex_unlock(&r->mu);
}

static bool wait_for(struct rec *r, const char *entry, int64_t ms)
{
	int64_t end = time_mono_ms() + ms;
	while (time_mono_ms() < end) {
		if (rec_count(r, entry) > 0)
			return true;
		time_sleep_ms(20);
	}
	return false;
}

static void h_add(void *ud, json_t *o)
{
	rec_add(ud, "add:%s:%s", kube_obj_name(o), jx_str_or(o, "data.v", ""));
}

static void h_update(void *ud, json_t *old, json_t *o)
{
	rec_add(ud, "update:%s:%s>%s", kube_obj_name(o), jx_str_or(old, "data.v", ""),
	        jx_str_or(o, "data.v", ""));
}

static void h_delete(void *ud, json_t *o, bool unknown)
{
	rec_add(ud, "delete:%s%s", kube_obj_name(o), unknown ? ":unknown" : "");
}

/* ---- raw watch: order and bookmarks ---- */

struct wctx {
	struct kube_client *c;
	struct kube_watch_opts o;
	struct rec *r;
	enum nv_err rc;
	char *last_rv;
	struct kube_status st;
};

static enum nv_err w_event(void *ud, enum kube_event_type t, json_t *obj)
{
	struct wctx *w = ud;
	if (t == KUBE_EV_BOOKMARK)
		rec_add(w->r, "BOOKMARK:%s", kube_obj_rv(obj));
	else
		rec_add(w->r, "%s:%s", kube_event_type_name(t), kube_obj_name(obj));
	return NV_OK;
}

static void *w_thread(void *arg)
{
	struct wctx *w = arg;
	w->rc = kube_watch(w->c, &KUBE_RES_CONFIGMAPS, "default", &w->o, w_event, w, &w->last_rv,
	                   &w->st);
	return NULL;
}

static char *list_rv(void)
{
	struct kube_status st;
	json_t *l = NULL;
	char *rv = NULL;
	if (kube_list(W, &KUBE_RES_CONFIGMAPS, "default", &(struct kube_list_opts){.limit = 1}, &l,
	              &st) == NV_OK)
		rv = xstrdup(jx_str_or(l, "metadata.resourceVersion", ""));
	json_decref(l);
	return rv;
}

static void test_watch_order(void)
{
	struct rec r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	char *rv = list_rv();
	struct kube_stop *stop = kube_stop_new();
	struct wctx w = {
	        .c = W,
	        .r = &r,
	        .o = {.resource_version = rv, .label_selector = "suite=order", .stop = stop}};
	pthread_t t;
	pthread_create(&t, NULL, w_thread, &w);
	put_cm("ord", "{\"suite\":\"order\"}", "1");
	put_cm("ord", "{\"suite\":\"order\"}", "2");
	del_cm("ord");
	bool got = wait_for(&r, "DELETED:ord", 10000);
	kube_stop_request(stop);
	pthread_join(t, NULL);
	char dump[2048];
	rec_dump(&r, dump, sizeof(dump));
	check(got && r.n == 3 && !strcmp(r.log[0], "ADDED:ord") &&
	              !strcmp(r.log[1], "MODIFIED:ord") && !strcmp(r.log[2], "DELETED:ord"),
	      "watch delivers add, modify, delete in order", "%s", dump);
	check(w.rc == NV_E_CANCELLED && w.last_rv && strcmp(w.last_rv, rv) != 0,
	      "a stopped watch ends cancelled and reports the last resourceVersion", "rc=%s",
	      nv_err_name(w.rc));
	free(w.last_rv);
	free(rv);
	kube_stop_free(stop);
}

static void test_bookmarks(void)
{
	struct rec r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	char *rv = list_rv();
	struct wctx w = {
	        .c = W,
	        .r = &r,
	        .o = {.resource_version = rv, .label_selector = "suite=none", .timeout_s = 6}};
	pthread_t t;
	int64_t t0 = time_mono_ms();
	pthread_create(&t, NULL, w_thread, &w);
	time_sleep_ms(500);
	put_cm("bm-other", "{\"suite\":\"other\"}", "1"); /* moves the RV, not our selection */
	pthread_join(t, NULL);
	int64_t took = time_mono_ms() - t0;
	char dump[2048];
	rec_dump(&r, dump, sizeof(dump));
	bool bm = r.n > 0 && str_has_prefix(r.log[r.n - 1], "BOOKMARK:");
	check(bm, "bookmarks arrive on a quiet watch", "events: %s", dump);
	check(bm && w.last_rv && strcmp(w.last_rv, rv) != 0 &&
	              !strcmp(r.log[r.n - 1] + 9, w.last_rv),
	      "a bookmark advances the tracked resourceVersion", "start=%s last=%s", rv,
	      w.last_rv ? w.last_rv : "");
	check(w.rc == NV_OK && took >= 5000 && took < 9000,
	      "the server ends the watch at timeoutSeconds and the end is clean",
	      "rc=%s took=%lldms", nv_err_name(w.rc), (long long)took);
	del_cm("bm-other");
	free(w.last_rv);
	free(rv);
}

/* ---- informer ---- */

static struct kube_informer *start_informer(struct kube_client *c, struct rec *r,
                                            const char *selector)
{
	struct kube_informer *inf = NULL;
	struct kube_informer_opts o = {.res = &KUBE_RES_CONFIGMAPS,
	                               .ns = "default",
	                               .label_selector = selector,
	                               .backoff_initial_ms = 200,
	                               .backoff_max_ms = 1000};
	struct kube_handler h = {h_add, h_update, h_delete, r};
	kube_informer_new(c, &o, &inf);
	kube_informer_add_index(inf, "tier", kube_index_label, "tier");
	kube_informer_add_index(inf, "namespace", kube_index_namespace, NULL);
	kube_informer_add_handler(inf, &h);
	kube_informer_start(inf);
	return inf;
}

static void test_informer_cache(void)
{
	struct rec r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	put_cm("inf-a", "{\"suite\":\"inf\",\"tier\":\"gold\"}", "1");
	struct kube_informer *inf = start_informer(W, &r, "suite=inf");
	check(kube_informer_wait_synced(inf, 10000) && rec_count(&r, "add:inf-a:1") == 1,
	      "informer lists, syncs and reports the existing object", "%s", "");
	put_cm("inf-b", "{\"suite\":\"inf\",\"tier\":\"gold\"}", "1");
	put_cm("inf-a", "{\"suite\":\"inf\",\"tier\":\"gold\"}", "2");
	del_cm("inf-b");
	bool ok = wait_for(&r, "delete:inf-b", 10000);
	char dump[2048];
	rec_dump(&r, dump, sizeof(dump));
	check(ok && rec_count(&r, "add:inf-b:1") == 1 && rec_count(&r, "update:inf-a:1>2") == 1 &&
	              r.n == 4,
	      "handlers see add, update (old and new) and delete once each", "%s", dump);
	json_t *a = kube_informer_get(inf, "default/inf-a");
	json_t *gold = kube_informer_by_index(inf, "tier", "gold");
	json_t *ns = kube_informer_by_index(inf, "namespace", "default");
	json_t *all = kube_informer_list(inf);
	check(a && !strcmp(jx_str_or(a, "data.v", ""), "2") && json_array_size(gold) == 1 &&
	              json_array_size(ns) == 1 && json_array_size(all) == 1,
	      "snapshot reads by key, by label index and by namespace index", "gold=%zu ns=%zu",
	      json_array_size(gold), json_array_size(ns));
	json_decref(a);
	json_decref(gold);
	json_decref(ns);
	json_decref(all);
	kube_informer_free(inf);
	del_cm("inf-a");
}

/* An informer on a kind whose CRD is not installed never syncs, and says
 * which CustomResourceDefinition is missing (the operator's /readyz and
 * its log carry it). */
static void test_informer_missing_crd(void)
{
	static const struct kube_res absent = {"itest.nvl72.io", "v1", "absentees", "Absentee",
	                                       true};
	struct kube_informer_opts o = {
	        .res = &absent, .backoff_initial_ms = 100, .backoff_max_ms = 200};
	struct kube_informer *inf = NULL;
	char why[256] = "";
	bool said = false;

	kube_informer_new(W, &o, &inf);
	kube_informer_start(inf);
	for (int i = 0; i < 100 && !said; i++) {
		said = kube_informer_why(inf, why, sizeof(why));
		if (!said)
			(void)kube_stop_sleep(NULL, 100);
	}
	check(said && !kube_informer_synced(inf) &&
	              strstr(why,
	                     "CustomResourceDefinition absentees.itest.nvl72.io is not installed"),
	      "an informer on a kind with no CRD says which CustomResourceDefinition is missing",
	      "why=\"%s\"", why);
	kube_informer_free(inf);
}

/* ---- apiserver restarts ---- */

static pid_t read_pid(int line)
{
	char path[600], buf[64];
	snprintf(path, sizeof(path), "%s/pids", cdir);
	FILE *f = fopen(path, "r");
	pid_t pid = -1;
	for (int i = 0; f && i < line && fgets(buf, sizeof(buf), f); i++)
		pid = (pid_t)strtol(buf, NULL, 10);
	if (f)
		fclose(f);
	return pid;
}

static char **read_cmdline(pid_t pid, const char *extra)
{
	char path[64], *data = malloc(65536);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, data, 65535) : -1;
	if (fd >= 0)
		close(fd);
	char **argv = calloc(256, sizeof(char *));
	int k = 0;
	for (ssize_t i = 0; n > 0 && i < n && k < 254; i += (ssize_t)strlen(data + i) + 1)
		argv[k++] = strdup(data + i);
	if (extra != NULL)
		argv[k++] = strdup(extra);
	free(data);
	return argv;
}

static bool apiserver_ready(int64_t ms)
{
	int64_t end = time_mono_ms() + ms;
	while (time_mono_ms() < end) {
		struct kube_status st;
		json_t *l = NULL;
		if (kube_list(W, &KUBE_RES_NAMESPACES, NULL, NULL, &l, &st) == NV_OK) {
			json_decref(l);
			return true;
		}
		time_sleep_ms(200);
	}
	return false;
}

/* Kills the apiserver and starts it again with the same command line
 * (plus extra), recording the new pid where the cluster script finds it. */
static bool restart_apiserver(const char *extra, int64_t *down_ms)
{
	pid_t old = read_pid(2), etcd = read_pid(1);
	char **argv = read_cmdline(old, extra);
	char log[600], pids[600];
	snprintf(log, sizeof(log), "%s/logs/apiserver.log", cdir);
	snprintf(pids, sizeof(pids), "%s/pids", cdir);
	int64_t t0 = time_mono_ms();
	kill(old, SIGKILL);
	while (kill(old, 0) == 0 && time_mono_ms() - t0 < 10000)
		time_sleep_ms(20);
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	FILE *f = fopen(pids, "w");
	fprintf(f, "%d\n%d\n", (int)etcd, (int)pid);
	fclose(f);
	for (int i = 0; argv[i]; i++)
		free(argv[i]);
	free(argv);
	bool ok = apiserver_ready(90000);
	*down_ms = time_mono_ms() - t0;
	return ok;
}

static void test_watch_survives_restart(void)
{
	struct rec r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	put_cm("rs-a", "{\"suite\":\"restart\"}", "1");
	struct kube_informer *inf = start_informer(W, &r, "suite=restart");
	kube_informer_wait_synced(inf, 10000);
	int64_t down = 0;
	bool up = restart_apiserver(NULL, &down);
	check(up, "apiserver killed and restarted with the same command line", "down %lld ms",
	      (long long)down);
	put_cm("rs-b", "{\"suite\":\"restart\"}", "1");
	put_cm("rs-a", "{\"suite\":\"restart\"}", "2");
	bool ok = wait_for(&r, "add:rs-b:1", 30000) && wait_for(&r, "update:rs-a:1>2", 5000);
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	char dump[2048];
	rec_dump(&r, dump, sizeof(dump));
	printf("# restart: apiserver down %lld ms; informer lists=%llu watches=%llu gone=%llu\n",
	       (long long)down, (unsigned long long)s.lists, (unsigned long long)s.watches,
	       (unsigned long long)s.gone);
	check(ok && rec_count(&r, "add:rs-a:1") == 1 && r.n == 3,
	      "the informer reconnects after the restart and resumes without repeats", "%s", dump);
	kube_informer_free(inf);
}

/* ---- a TCP proxy the test can cut, to partition one client ---- */

struct proxy {
	int lfd, port, up_port;
	pthread_mutex_t mu;
	int conns[64];
	int nconns;
	pthread_t acc;
};

struct pipe_pair {
	struct proxy *p;
	int a, b;
};

static void proxy_track(struct proxy *p, int fd, bool add)
{
	pthread_mutex_lock(&p->mu);
	if (add && p->nconns < 64) {
		p->conns[p->nconns++] = fd;
	} else {
		for (int i = 0; i < p->nconns; i++)
			if (p->conns[i] == fd)
				p->conns[i] = p->conns[--p->nconns];
	}
	pthread_mutex_unlock(&p->mu);
}

static void *relay(void *arg)
{
	struct pipe_pair *pp = arg;
	char buf[16384];
	for (;;) {
		struct pollfd f[2] = {{pp->a, POLLIN, 0}, {pp->b, POLLIN, 0}};
		if (poll(f, 2, 1000) < 0 && errno != EINTR)
			break;
		int from = (f[0].revents & (POLLIN | POLLHUP | POLLERR))   ? 0
		           : (f[1].revents & (POLLIN | POLLHUP | POLLERR)) ? 1
		                                                           : -1;
		if (from < 0)
			continue;
		int src = from ? pp->b : pp->a, dst = from ? pp->a : pp->b;
		ssize_t n = read(src, buf, sizeof(buf));
		if (n <= 0 || write(dst, buf, (size_t)n) != n)
			break;
	}
	proxy_track(pp->p, pp->a, false);
	proxy_track(pp->p, pp->b, false);
	close(pp->a);
	close(pp->b);
	free(pp);
	return NULL;
}

static void *proxy_accept(void *arg)
{
	struct proxy *p = arg;
	for (;;) {
		int c = accept(p->lfd, NULL, NULL);
		if (c < 0)
			break;
		int u = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons((uint16_t)p->up_port),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (connect(u, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(c);
			close(u);
			continue;
		}
		struct pipe_pair *pp = malloc(sizeof(*pp));
		*pp = (struct pipe_pair){p, c, u};
		proxy_track(p, c, true);
		proxy_track(p, u, true);
		pthread_t t;
		pthread_create(&t, NULL, relay, pp);
		pthread_detach(t);
	}
	return NULL;
}

static void proxy_listen(struct proxy *p)
{
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)p->port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa));
	listen(p->lfd, 16);
	getsockname(p->lfd, (struct sockaddr *)&sa, &len);
	p->port = ntohs(sa.sin_port);
	pthread_create(&p->acc, NULL, proxy_accept, p);
}

static void proxy_cut(struct proxy *p)
{
	shutdown(p->lfd, SHUT_RDWR);
	pthread_join(p->acc, NULL);
	close(p->lfd);
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->nconns; i++)
		shutdown(p->conns[i], SHUT_RDWR);
	pthread_mutex_unlock(&p->mu);
}

/* ---- etcd compaction through its HTTP/JSON gateway ---- */

static size_t sink(char *ptr, size_t sz, size_t nm, void *ud)
{
	struct buf *b = ud;
	buf_append(b, ptr, sz * nm);
	return sz * nm;
}

static bool etcd_post(const char *path, const char *body, struct buf *out)
{
	char url[256], port[32] = "";
	char p[600];
	snprintf(p, sizeof(p), "%s/etcd-port", cdir);
	FILE *f = fopen(p, "r");
	if (f == NULL || fgets(port, sizeof(port), f) == NULL) {
		if (f)
			fclose(f);
		return false;
	}
	fclose(f);
	snprintf(url, sizeof(url), "http://127.0.0.1:%s%s", str_trim(port), path);
	CURL *e = curl_easy_init();
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
	long code = 0;
	CURLcode cc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(e);
	return cc == CURLE_OK && code == 200;
}

/* Compacts etcd up to its current revision; returns that revision. */
static long long etcd_compact(void)
{
	struct buf b;
	json_t *doc = NULL;
	long long rev = -1;
	buf_init(&b, 1 << 20);
	if (etcd_post("/v3/kv/range", "{\"key\":\"AA==\"}", &b) &&
	    jx_loadb(b.data, b.len, NULL, &doc, NULL) == NV_OK) {
		rev = strtoll(jx_str_or(doc, "header.revision", "-1"), NULL, 10);
		char body[128];
		snprintf(body, sizeof(body), "{\"revision\":\"%lld\",\"physical\":true}", rev);
		buf_reset(&b);
		if (!etcd_post("/v3/kv/compaction", body, &b))
			rev = -1;
	}
	json_decref(doc);
	buf_clear(&b);
	return rev;
}

static struct kube_client *client_via(int port)
{
	char text[2048];
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_status st;
	snprintf(text, sizeof(text),
	         "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: "
	         "https://127.0.0.1:%d\n"
	         "    certificate-authority: %s/pki/ca.crt\nusers:\n- name: u\n  user:\n"
	         "    client-certificate: %s/pki/admin.crt\n    client-key: %s/pki/admin.key\n"
	         "contexts:\n- name: t\n  context: {cluster: c, user: u}\n",
	         port, cdir, cdir, cdir);
	if (kube_config_parse(text, strlen(text), NULL, NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &c, &st) != NV_OK)
		printf("# client via proxy: %s\n", st.message);
	return c;
}

static void test_relist_after_compaction(void)
{
	struct rec r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	int64_t down = 0;
	/* Without the watch cache a watch is served by etcd, so compaction
	 * is what makes an old resourceVersion gone. */
	bool up = restart_apiserver("--watch-cache=false", &down);
	check(up, "apiserver restarted without its watch cache", "%s", "");
	char port[32] = "";
	char pf[600];
	snprintf(pf, sizeof(pf), "%s/apiserver-port", cdir);
	FILE *f = fopen(pf, "r");
	if (f == NULL || fgets(port, sizeof(port), f) == NULL)
		return;
	fclose(f);
	int up_port = 0;
	parse_int(str_trim(port), 1, 65535, &up_port);
	struct proxy p = {.mu = PTHREAD_MUTEX_INITIALIZER, .up_port = up_port};
	proxy_listen(&p);
	struct kube_client *via = client_via(p.port);
	put_cm("cp-a", "{\"suite\":\"compact\"}", "1");
	put_cm("cp-b", "{\"suite\":\"compact\"}", "1");
	put_cm("cp-c", "{\"suite\":\"compact\"}", "1");
	struct kube_informer *inf = start_informer(via, &r, "suite=compact");
	bool synced = kube_informer_wait_synced(inf, 20000) && wait_for(&r, "add:cp-c:1", 5000);
	check(synced, "informer through the proxy syncs 3 objects", "%s", "");

	proxy_cut(&p);
	time_sleep_ms(500);
	put_cm("cp-b", "{\"suite\":\"compact\"}", "2");
	del_cm("cp-c");
	put_cm("cp-d", "{\"suite\":\"compact\"}", "1");
	for (int i = 0; i < 5; i++)
		put_cm("cp-churn", "{\"suite\":\"other\"}", i % 2 ? "x" : "y");
	long long rev = etcd_compact();
	check(rev > 0, "etcd compacted to its current revision while the informer was cut off",
	      "rev=%lld", rev);
	proxy_listen(&p);

	bool conv = wait_for(&r, "add:cp-d:1", 30000) &&
	            wait_for(&r, "delete:cp-c:unknown", 5000) &&
	            wait_for(&r, "update:cp-b:1>2", 5000);
	time_sleep_ms(1000); /* let any stray duplicate show up */
	struct kube_informer_stats s;
	kube_informer_stats(inf, &s);
	char dump[2048];
	rec_dump(&r, dump, sizeof(dump));
	printf("# compaction: informer lists=%llu watches=%llu gone=%llu\n",
	       (unsigned long long)s.lists, (unsigned long long)s.watches,
	       (unsigned long long)s.gone);
	check(s.gone >= 1 && s.lists >= 2,
	      "the resumed watch got 410 Gone and the informer relisted", "gone=%llu lists=%llu",
	      (unsigned long long)s.gone, (unsigned long long)s.lists);
	check(conv && r.n == 6 && rec_count(&r, "add:cp-a:1") == 1 &&
	              rec_count(&r, "add:cp-b:1") == 1,
	      "after the relist handlers saw each change once and nothing twice", "%s", dump);
	json_t *all = kube_informer_list(inf);
	check(json_array_size(all) == 3 && kube_informer_get(inf, "default/cp-c") == NULL,
	      "the cache converged to the live objects", "size=%zu", json_array_size(all));
	json_decref(all);
	kube_informer_free(inf);
	kube_client_free(via);
	proxy_cut(&p);
}

int main(void)
{
	struct kube_config *cfg = NULL;
	struct kube_status st;
	const char *d = getenv("NVL72_CLUSTER_DIR");
	if (d == NULL) {
		printf("not ok - NVL72_CLUSTER_DIR is not set\n");
		return 1;
	}
	snprintf(cdir, sizeof(cdir), "%s", d);
	signal(SIGPIPE, SIG_IGN);
	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &W, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		return 1;
	}
	test_watch_order();
	test_bookmarks();
	test_informer_cache();
	test_informer_missing_crd();
	test_watch_survives_restart();
	test_relist_after_compaction();
	kube_client_free(W);
	printf("%s - watch suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
