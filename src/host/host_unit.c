// SPDX-License-Identifier: Apache-2.0
// Host systemd units through the configured systemctl: the host Fabric
// Manager and a host nvidia-imex that would collide with ours are brought to
// the state the platform expects, or reported when policy forbids touching them.
#include "nvl72/host.h"

#include <string.h>

#include "host_int.h"
#include "nvl72/base.h"

#define UNIT_OUT_MAX ((size_t)16 << 10)

static bool unit_name_ok(const char *u)
{
	size_t n = strlen(u);

	if (n == 0 || n > 255 || u[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = u[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '@'))
			return false;
	}
	return true;
}

static void show_value(struct host_unit_state *s, const char *k, size_t kl, const char *v,
                       size_t vl)
{
#define IS(str, lit) (str##l == sizeof(lit) - 1 && memcmp(str, lit, sizeof(lit) - 1) == 0)
	if (IS(k, "LoadState")) {
		if (IS(v, "not-found"))
			s->active = HOST_UNIT_NOT_FOUND;
		s->masked = IS(v, "masked");
	} else if (IS(k, "ActiveState") && s->active != HOST_UNIT_NOT_FOUND) {
		if (IS(v, "active") || IS(v, "reloading"))
			s->active = HOST_UNIT_ACTIVE;
		else if (IS(v, "inactive") || IS(v, "failed") || IS(v, "deactivating"))
			s->active = HOST_UNIT_INACTIVE;
		else if (IS(v, "activating"))
			s->active = HOST_UNIT_ACTIVATING;
	} else if (IS(k, "UnitFileState")) {
		s->enabled = IS(v, "enabled") || IS(v, "enabled-runtime");
		if (IS(v, "masked") || IS(v, "masked-runtime"))
			s->masked = true;
	}
#undef IS
}

enum nv_err host_unit_show_parse(const char *text, size_t len, struct host_unit_state *out)
{
	struct host_unit_state s = {0};
	const char *p = text, *end;
	bool any = false;

	if (text == NULL)
		return NV_E_INVAL;
	end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *eq = memchr(p, '=', ll);

		if (ll > 0 && eq == NULL)
			return NV_E_PARSE;
		if (eq != NULL) {
			show_value(&s, p, (size_t)(eq - p), eq + 1, ll - (size_t)(eq - p) - 1);
			any = true;
		}
		p = nl ? nl + 1 : end;
	}
	if (!any)
		return NV_E_PARSE;
	/* LoadState=not-found may come after ActiveState=inactive. */
	*out = s;
	return NV_OK;
}

enum nv_err host_unit_query(struct host *h, const char *unit, struct host_unit_state *out)
{
	const char *argv[] = {h->cfg.systemctl,
	                      "show",
	                      "-p",
	                      "LoadState,ActiveState,UnitFileState",
	                      "--",
	                      unit,
	                      NULL};
	struct host_run_result res;
	enum nv_err rc;

	if (!unit_name_ok(unit))
		return NV_E_INVAL;
	rc = host_tool_run(h, argv, UNIT_OUT_MAX, &res);
	if (rc == NV_OK) {
		rc = host_unit_show_parse(buf_str(&res.out), res.out.len, out);
		if (rc != NV_OK)
			host_fail(h, "systemctl show %s: unexpected output", unit);
	}
	buf_clear(&res.out);
	return rc;
}

enum nv_err host_unit_action(struct host *h, const char *verb, const char *unit)
{
	const char *argv[] = {h->cfg.systemctl, verb, "--", unit, NULL};
	struct host_run_result res;
	enum nv_err rc;

	if (!unit_name_ok(unit))
		return NV_E_INVAL;
	rc = host_tool_run(h, argv, UNIT_OUT_MAX, &res);
	buf_clear(&res.out);
	if (rc == NV_OK)
		log_info("agent", "host unit changed", "unit=%s action=%s", unit, verb);
	return rc;
}

enum nv_err host_unit_signal(struct host *h, const char *unit, const char *sig)
{
	char opt[32];
	const char *argv[] = {h->cfg.systemctl, "kill", "--kill-whom=main", opt, "--", unit, NULL};
	struct host_run_result res;
	enum nv_err rc;

	if (!unit_name_ok(unit) || strncmp(sig, "SIG", 3) != 0 || strlen(sig) > 16)
		return NV_E_INVAL;
	snprintf(opt, sizeof(opt), "--signal=%s", sig);
	rc = host_tool_run(h, argv, UNIT_OUT_MAX, &res);
	buf_clear(&res.out);
	if (rc == NV_OK)
		log_info("agent", "host unit signalled", "unit=%s signal=%s", unit, sig);
	return rc;
}

static bool unit_matches(const struct host_unit_state *s, enum host_unit_want want)
{
	bool running = s->active == HOST_UNIT_ACTIVE || s->active == HOST_UNIT_ACTIVATING;

	if (s->active == HOST_UNIT_NOT_FOUND)
		return want != HOST_UNIT_WANT_RUNNING;
	switch (want) {
	case HOST_UNIT_WANT_RUNNING:
		return running && s->enabled && !s->masked;
	case HOST_UNIT_WANT_STOPPED:
		return !running;
	case HOST_UNIT_WANT_MASKED:
		return !running && s->masked;
	}
	return false;
}

enum nv_err host_unit_reconcile(struct host *h, const char *unit, enum host_unit_want want,
                                bool allowed, bool *changed)
{
	static const char *const verbs[][3] = {
	        [HOST_UNIT_WANT_RUNNING] = {"unmask", "enable", "start"},
	        [HOST_UNIT_WANT_STOPPED] = {"stop", NULL, NULL},
	        [HOST_UNIT_WANT_MASKED] = {"stop", "disable", "mask"},
	};
	struct host_unit_state s;
	enum nv_err rc;

	*changed = false;
	rc = host_unit_query(h, unit, &s);
	if (rc != NV_OK)
		return rc;
	if (unit_matches(&s, want))
		return NV_OK;
	if (s.active == HOST_UNIT_NOT_FOUND) {
		host_fail(h, "host unit %s is not installed", unit);
		return NV_E_NOT_FOUND;
	}
	if (!allowed) {
		host_fail(h, "host unit %s is %s; policy does not allow changing it", unit,
		          s.active == HOST_UNIT_ACTIVE ? "running" : "not as expected");
		return NV_E_STATE;
	}
	for (size_t i = 0; i < 3 && verbs[want][i] != NULL; i++) {
		rc = host_unit_action(h, verbs[want][i], unit);
		if (rc != NV_OK)
			return rc;
	}
	*changed = true;
	return NV_OK;
}
