// SPDX-License-Identifier: Apache-2.0
// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it:
// expiry judged by our own clock since we saw the record change (never the
// holder's timestamps), writes guarded by resourceVersion, release on stop.
// A holder's claimed duration is believed only within a bound of our own.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvl72/kube_ctrl.h"

#include "kube_int.h"

struct kube_leader {
	struct kube_client *c;
	struct kube_leader_opts o;
	char *ns, *name, *id;
	pthread_mutex_t mu;
	bool leading;
	char *obs_rv; /* resourceVersion of the record last seen */
	char *obs_holder;
	char *warned_holder;  /* last holder whose claimed duration was not believed */
	int64_t obs_ms;       /* when it changed, at the earliest (monotonic) */
	int64_t prev_poll_ms; /* when we last read the record */
	int64_t expires_ms;   /* when another holder's lease runs out for us */
};

enum nv_err kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                            struct kube_leader **out)
{
	struct kube_leader *le;
	char host[256] = "unknown";

	if (c == NULL || o == NULL || o->name == NULL)
		return NV_E_INVAL;
	le = xcalloc(1, sizeof(*le));
	le->c = c;
	le->o = *o;
	if (le->o.lease_ms <= 0)
		le->o.lease_ms = 15000;
	if (le->o.renew_deadline_ms <= 0)
		le->o.renew_deadline_ms = 10000;
	if (le->o.retry_ms <= 0)
		le->o.retry_ms = 2000;
	/* client-go's rule: lease > renew deadline > 1.2 x retry period. */
	if (le->o.lease_ms <= le->o.renew_deadline_ms ||
	    le->o.renew_deadline_ms * 10 <= le->o.retry_ms * 12 || le->o.lease_ms < 1000) {
		free(le);
		return NV_E_CONFIG;
	}
	gethostname(host, sizeof(host) - 1);
	le->ns = xstrdup(o->ns ? o->ns : kube_client_namespace(c));
	le->name = xstrdup(o->name);
	le->id = o->identity ? xstrdup(o->identity)
	                     : xasprintf("%s_%08llx", host,
	                                 (unsigned long long)kube_rand_range(0, 0xffffffffLL));
	pthread_mutex_init(&le->mu, NULL);
	*out = le;
	return NV_OK;
}

void kube_leader_free(struct kube_leader *le)
{
	if (le == NULL)
		return;
	pthread_mutex_destroy(&le->mu);
	free(le->obs_rv);
	free(le->obs_holder);
	free(le->warned_holder);
	free(le->ns);
	free(le->name);
	free(le->id);
	free(le);
}

const char *kube_leader_identity(const struct kube_leader *le)
{
	return le->id;
}

bool kube_leader_is_leader(struct kube_leader *le)
{
	bool l;

	pthread_mutex_lock(&le->mu);
	l = le->leading;
	pthread_mutex_unlock(&le->mu);
	return l;
}

/* One GET/PUT/POST on the lease, bounded by the retry period, no retries:
 * the election loop is the retry. */
static enum nv_err lease_call(struct kube_leader *le, const char *method, const json_t *body,
                              json_t **out, struct kube_status *st)
{
	struct buf path;
	enum nv_err rc;

	buf_init(&path, 1024);
	rc = kube_path_build(&path, &KUBE_RES_LEASES, le->ns,
	                     strcmp(method, "POST") ? le->name : NULL, NULL);
	if (rc == NV_OK) {
		struct kube_raw_req r = {.method = method,
		                         .path = buf_str(&path),
		                         .content_type = body ? "application/json" : NULL,
		                         .body = body,
		                         .timeout_ms = le->o.retry_ms,
		                         .no_retry = true};
		rc = kube_request(le->c, &r, out, st);
	}
	buf_clear(&path);
	return rc;
}

static void observe(struct kube_leader *le, const json_t *lease, int64_t now)
{
	const char *rv = kube_obj_rv(lease);
	const char *holder = jx_str_or(lease, "spec.holderIdentity", "");

	if (le->obs_rv == NULL || strcmp(le->obs_rv, rv) != 0) {
		/* The change happened after our previous read: dating it at that
		 * read is the earliest it can be, so a dead holder is detected up
		 * to one retry period sooner, and the old leader (which stops at
		 * its renew deadline) is always gone by then. */
		le->obs_ms = le->prev_poll_ms > 0 && le->prev_poll_ms > now - 2 * le->o.retry_ms
		                     ? le->prev_poll_ms
		                     : now;
		free(le->obs_rv);
		le->obs_rv = xstrdup(rv);
		if (le->obs_holder == NULL || strcmp(le->obs_holder, holder) != 0) {
			if (*holder && strcmp(holder, le->id) != 0 && le->o.on_new_leader)
				le->o.on_new_leader(le->o.ud, holder);
			free(le->obs_holder);
			le->obs_holder = xstrdup(holder);
		}
	}
	le->prev_poll_ms = now;
}

static json_t *lease_spec(struct kube_leader *le, const json_t *old, bool release)
{
	char now[40];
	const char *holder = jx_str_or(old, "spec.holderIdentity", "");
	json_int_t trans = json_integer_value(jx_path(old, "spec.leaseTransitions"));
	json_t *spec = json_object();

	kube_format_micro(time_wall_ms() * 1000, now);
	json_object_set_new(spec, "holderIdentity", json_string(release ? "" : le->id));
	json_object_set_new(spec, "leaseDurationSeconds",
	                    json_integer(release ? 1 : (le->o.lease_ms + 999) / 1000));
	json_object_set_new(spec, "renewTime", json_string(now));
	if (!release && strcmp(holder, le->id) != 0) {
		json_object_set_new(spec, "acquireTime", json_string(now));
		json_object_set_new(spec, "leaseTransitions",
		                    json_integer(*holder ? trans + 1 : trans));
	} else {
		json_t *at = jx_path(old, "spec.acquireTime");
		if (at != NULL)
			json_object_set(spec, "acquireTime", at);
		json_object_set_new(spec, "leaseTransitions", json_integer(trans));
	}
	return spec;
}

/* How long a holder's term is believed to last, in ms. A Lease may claim
 * more than our own duration (replicas being rolled to a longer one), but
 * not more than KUBE_LEADER_CLAIM_FACTOR times it: whoever can write the
 * Lease once could otherwise claim a year and stop every other candidate. */
TESTABLE int64_t kube_leader_claim_ms(int64_t claimed_ms, int64_t lease_ms)
{
	if (claimed_ms > lease_ms * KUBE_LEADER_CLAIM_FACTOR)
		return lease_ms;
	return claimed_ms;
}

static int64_t believed_ms(struct kube_leader *le, const json_t *lease, const char *holder)
{
	json_int_t secs = json_integer_value(jx_path(lease, "spec.leaseDurationSeconds"));
	int64_t claimed = secs > 0 && secs < INT64_MAX / 1000 ? (int64_t)secs * 1000 : 0;
	int64_t ms = kube_leader_claim_ms(claimed, le->o.lease_ms);

	if (ms == claimed) {
		free(le->warned_holder);
		le->warned_holder = NULL;
	} else if (le->warned_holder == NULL || strcmp(le->warned_holder, holder) != 0) {
		log_warn("kube", "lease claims a duration far above ours; using ours",
		         "lease=%s/%s holder=\"%s\" claimed_s=%lld used_s=%lld", le->ns, le->name,
		         holder, (long long)secs, (long long)(ms / 1000));
		free(le->warned_holder);
		le->warned_holder = xstrdup(holder);
	}
	return ms;
}

/* One round: creates, takes over or renews the lease. */
static bool try_acquire(struct kube_leader *le)
{
	struct kube_status st;
	json_t *lease = NULL, *upd = NULL, *res = NULL;
	int64_t now = time_mono_ms();
	bool ok = false;
	enum nv_err rc;

	le->expires_ms = 0;
	rc = lease_call(le, "GET", NULL, &lease, &st);

	if (rc == NV_E_NOT_FOUND) {
		upd = json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "coordination.k8s.io/v1",
		                "kind", "Lease", "metadata", "name", le->name, "namespace", le->ns,
		                "spec", lease_spec(le, NULL, false));
		rc = lease_call(le, "POST", upd, &res, &st);
	} else if (rc == NV_OK) {
		observe(le, lease, now);
		const char *holder = jx_str_or(lease, "spec.holderIdentity", "");
		int64_t dur = believed_ms(le, lease, holder);
		if (*holder && strcmp(holder, le->id) != 0 && now < le->obs_ms + dur) {
			le->expires_ms = le->obs_ms + dur;
			goto out; /* held by someone else and not expired */
		}
		upd = json_deep_copy(lease);
		json_object_set_new(upd, "spec", lease_spec(le, lease, false));
		rc = lease_call(le, "PUT", upd, &res, &st);
	}
	if (rc == NV_OK) {
		observe(le, res, now);
		ok = true;
	} else if (rc != NV_E_CONFLICT && rc != NV_E_EXISTS) {
		log_warn("kube", "lease update failed", "lease=%s/%s err=%s msg=\"%s\"", le->ns,
		         le->name, nv_err_name(rc), st.message);
	}
out:
	json_decref(lease);
	json_decref(upd);
	json_decref(res);
	return ok;
}

static void release(struct kube_leader *le)
{
	struct kube_status st;

	for (int i = 0; i < 3; i++) {
		json_t *lease = NULL, *upd = NULL;
		enum nv_err rc = lease_call(le, "GET", NULL, &lease, &st);
		if (rc == NV_OK &&
		    strcmp(jx_str_or(lease, "spec.holderIdentity", ""), le->id) == 0) {
			upd = json_deep_copy(lease);
			json_object_set_new(upd, "spec", lease_spec(le, lease, true));
			rc = lease_call(le, "PUT", upd, NULL, &st);
		}
		json_decref(lease);
		json_decref(upd);
		if (rc != NV_E_CONFLICT)
			break;
	}
	log_info("kube", "lease released", "lease=%s/%s identity=%s", le->ns, le->name, le->id);
}

static void set_leading(struct kube_leader *le, bool v)
{
	pthread_mutex_lock(&le->mu);
	le->leading = v;
	pthread_mutex_unlock(&le->mu);
	if (v && le->o.on_started)
		le->o.on_started(le->o.ud);
	else if (!v && le->o.on_stopped)
		le->o.on_stopped(le->o.ud);
}

/* Sleeps one retry period with client-go's 1.2 jitter, or less when the
 * lease we are waiting for runs out sooner: a candidate then tries at the
 * moment of expiry instead of up to a retry period later. */
static bool retry_sleep(struct kube_leader *le, struct kube_stop *stop)
{
	int64_t ms = kube_rand_range(le->o.retry_ms, le->o.retry_ms * 12 / 10);
	int64_t left = le->expires_ms - time_mono_ms() + 1;

	if (le->expires_ms > 0 && left < ms)
		ms = left > 0 ? left : 0;
	return kube_stop_sleep(stop, ms);
}

enum nv_err kube_leader_run(struct kube_leader *le, struct kube_stop *stop)
{
	int64_t last_renew;

	while (!try_acquire(le))
		if (retry_sleep(le, stop))
			return NV_OK;
	log_info("kube", "became leader", "lease=%s/%s identity=%s", le->ns, le->name, le->id);
	set_leading(le, true);
	last_renew = time_mono_ms();
	while (!retry_sleep(le, stop)) {
		if (try_acquire(le)) {
			last_renew = time_mono_ms();
		} else if (time_mono_ms() - last_renew > le->o.renew_deadline_ms) {
			log_error("kube", "leader election lost", "lease=%s/%s identity=%s", le->ns,
			          le->name, le->id);
			set_leading(le, false);
			return NV_E_STATE;
		}
	}
	if (!le->o.no_release_on_stop)
		release(le);
	set_leading(le, false);
	return NV_OK;
}
