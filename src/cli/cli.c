// SPDX-License-Identifier: Apache-2.0
// One run of kubectl-nvl72: loads the kubeconfig as kubectl does, makes one
// client, and carries out a verb with the apiserver: reads for status and
// explain, an UpgradeApproval create for approve, and resourceVersion-
// guarded merge patches of spec.paused and spec.abort. Errors name the
// object and the field and carry the apiserver's own message.
#include <string.h>

#include "cli_int.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/log.h"
#include "nvl72/matrix.h"
#include "nvl72/timeutil.h"

#define OUT_MAX ((size_t)16 << 20)

static const struct kube_res RACKS = {"nvl72.io", "v1alpha1", "racks", "Rack", false};
static const struct kube_res UPGRADES = {"nvl72.io", "v1alpha1", "rackupgrades", "RackUpgrade",
                                         false};
static const struct kube_res APPROVALS = {"nvl72.io", "v1alpha1", "upgradeapprovals",
                                          "UpgradeApproval", false};

struct cli {
	struct cli_args a;
	struct kube_client *kc;
	FILE *out;
	FILE *err;
};

/* "rackupgrades \"x\" is forbidden: ..." becomes the line on stderr. */
static int fail(struct cli *c, enum nv_err rc, const struct kube_status *st, const char *what)
{
	fprintf(c->err, "kubectl-nvl72: %s: %s\n", what,
	        st && st->message[0] ? st->message : nv_err_str(rc));
	return 1;
}

static int print_json(struct cli *c, const json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(4) | JSON_SORT_KEYS);
	fprintf(c->out, "%s\n", s ? s : "null");
	free(s);
	return 0;
}

static int print_buf(struct cli *c, struct buf *b, enum nv_err rc)
{
	fputs(buf_str(b), c->out);
	buf_clear(b);
	if (rc != NV_OK) {
		fprintf(c->err, "kubectl-nvl72: output: %s\n", nv_err_str(rc));
		return 1;
	}
	return 0;
}

static enum nv_err get_upgrade(struct cli *c, const char *name, json_t **out,
                               struct kube_status *st)
{
	enum nv_err rc = kube_get(c->kc, &UPGRADES, NULL, name, out, st);
	if (rc == NV_E_NOT_FOUND)
		snprintf(st->message, sizeof(st->message), "rackupgrade \"%s\" not found", name);
	return rc;
}

/* The upgrade's Rack, or NULL when it has none, is not there or may not be
 * read: explanations then leave owners and windows out. */
static json_t *get_rack_of(struct cli *c, const json_t *u)
{
	struct kube_status st;
	json_t *rack = NULL;
	const char *name = jx_str_or(u, "spec.rack", "");
	if (name[0] == '\0' || kube_get(c->kc, &RACKS, NULL, name, &rack, &st) != NV_OK)
		return NULL;
	return rack;
}

/* ---- status ----------------------------------------------------------- */

static int status_one(struct cli *c, bool rack_kind, const char *name)
{
	struct kube_status st;
	struct buf b;
	json_t *obj = NULL, *rack = NULL;
	enum nv_err rc = rack_kind ? kube_get(c->kc, &RACKS, NULL, name, &obj, &st)
	                           : get_upgrade(c, name, &obj, &st);
	if (rc == NV_E_NOT_FOUND && rack_kind)
		snprintf(st.message, sizeof(st.message), "rack \"%s\" not found", name);
	if (rc != NV_OK)
		return fail(c, rc, &st, rack_kind ? "get rack" : "get rackupgrade");
	if (strcmp(c->a.output, "json") == 0) {
		print_json(c, obj);
		json_decref(obj);
		return 0;
	}
	buf_init(&b, OUT_MAX);
	if (rack_kind) {
		rc = cli_rack_detail(obj, &b);
	} else {
		rack = get_rack_of(c, obj);
		rc = cli_upgrade_detail(obj, rack, time_wall_ms(), &b);
	}
	json_decref(obj);
	json_decref(rack);
	return print_buf(c, &b, rc);
}

static int status_lists(struct cli *c, bool racks_too, bool upgrades_too)
{
	struct kube_status st;
	struct buf b;
	json_t *racks = NULL, *ups = NULL;
	enum nv_err rc = kube_list_all(c->kc, &RACKS, NULL, NULL, &racks, &st);
	if (rc != NV_OK && (racks_too || rc != NV_E_FORBIDDEN))
		return fail(c, rc, &st, "list racks");
	if (upgrades_too &&
	    (rc = kube_list_all(c->kc, &UPGRADES, NULL, NULL, &ups, &st)) != NV_OK) {
		json_decref(racks);
		return fail(c, rc, &st, "list rackupgrades");
	}
	if (strcmp(c->a.output, "json") == 0) {
		json_t *all =
		        json_pack("{s:s,s:s,s:[]}", "apiVersion", "v1", "kind", "List", "items");
		if (racks_too)
			json_array_extend(json_object_get(all, "items"),
			                  json_object_get(racks, "items"));
		if (upgrades_too)
			json_array_extend(json_object_get(all, "items"),
			                  json_object_get(ups, "items"));
		print_json(c, all);
		json_decref(all);
	} else {
		buf_init(&b, OUT_MAX);
		if (racks_too)
			rc = cli_racks_table(json_object_get(racks, "items"), &b);
		if (racks_too && upgrades_too)
			(void)buf_append_str(&b, "\n");
		if (upgrades_too && rc == NV_OK)
			rc = cli_upgrades_table(json_object_get(ups, "items"),
			                        json_object_get(racks, "items"), &b);
		(void)print_buf(c, &b, rc);
	}
	json_decref(racks);
	json_decref(ups);
	return rc == NV_OK ? 0 : 1;
}

static int cmd_status(struct cli *c)
{
	const char *kind = c->a.npos > 0 ? c->a.pos[0] : NULL;
	bool rack_kind;
	if (kind == NULL)
		return status_lists(c, true, true);
	if (strcmp(kind, "rack") == 0 || strcmp(kind, "racks") == 0)
		rack_kind = true;
	else if (strcmp(kind, "upgrade") == 0 || strcmp(kind, "upgrades") == 0 ||
	         strcmp(kind, "rackupgrade") == 0 || strcmp(kind, "rackupgrades") == 0)
		rack_kind = false;
	else {
		fprintf(c->err, "kubectl-nvl72: status: \"%s\" is not rack or upgrade\n", kind);
		return 2;
	}
	if (c->a.npos == 2)
		return status_one(c, rack_kind, c->a.pos[1]);
	return status_lists(c, rack_kind, !rack_kind);
}

/* ---- explain ---------------------------------------------------------- */

static int cmd_explain(struct cli *c)
{
	struct kube_status st;
	struct buf b;
	json_t *u = NULL, *rack = NULL;
	enum nv_err rc = get_upgrade(c, c->a.pos[0], &u, &st);
	if (rc != NV_OK)
		return fail(c, rc, &st, "get rackupgrade");
	rack = get_rack_of(c, u);
	buf_init(&b, OUT_MAX);
	rc = cli_explain(u, rack, time_wall_ms(), &b);
	json_decref(u);
	json_decref(rack);
	return print_buf(c, &b, rc);
}

/* ---- pause, resume, abort --------------------------------------------- */

/* Whether the verb has nothing to do; the message says why. */
static bool patch_noop(int verb, const json_t *u, char *msg, size_t msgsz)
{
	const char *name = jx_str_or(u, "metadata.name", "?");
	const char *phase = jx_str_or(u, "status.phase", "");
	bool paused = json_is_true(jx_path(u, "spec.paused"));
	bool abort = json_is_true(jx_path(u, "spec.abort"));
	if (verb == CLI_PAUSE && paused)
		snprintf(msg, msgsz, "rackupgrade/%s is already paused", name);
	else if (verb == CLI_RESUME && !paused)
		snprintf(msg, msgsz, "rackupgrade/%s is not paused", name);
	else if (verb == CLI_ABORT && abort)
		snprintf(msg, msgsz, "rackupgrade/%s is already %s", name,
		         strcmp(phase, "Aborted") == 0 ? "aborted" : "aborting");
	else if (verb == CLI_ABORT && strcmp(phase, "Completed") == 0)
		snprintf(msg, msgsz, "rackupgrade/%s has completed; there is nothing to abort",
		         name);
	else
		return false;
	return true;
}

static int cmd_patch(struct cli *c)
{
	static const struct kube_patch_opts merge = {.type = KUBE_PATCH_MERGE};
	struct kube_status st;
	json_t *u = NULL, *patch = NULL;
	char msg[256], what[320];
	int verb = c->a.verb;
	enum nv_err rc = get_upgrade(c, c->a.pos[0], &u, &st);
	if (rc != NV_OK)
		return fail(c, rc, &st, "get rackupgrade");
	if (patch_noop(verb, u, msg, sizeof(msg))) {
		fprintf(c->out, "%s\n", msg);
		json_decref(u);
		return 0;
	}
	if (kube_obj_rv(u) == NULL) {
		json_decref(u);
		fprintf(c->err, "kubectl-nvl72: rackupgrade/%s: no metadata.resourceVersion\n",
		        c->a.pos[0]);
		return 1;
	}
	/* The resourceVersion makes the patch fail instead of acting on an
	 * object that changed since it was read. */
	patch = json_pack("{s:{s:s},s:{s:b}}", "metadata", "resourceVersion", kube_obj_rv(u),
	                  "spec", verb == CLI_ABORT ? "abort" : "paused", verb != CLI_RESUME);
	rc = kube_patch(c->kc, &UPGRADES, NULL, c->a.pos[0], &merge, patch, NULL, &st);
	json_decref(patch);
	json_decref(u);
	snprintf(what, sizeof(what), "%s rackupgrade/%s", cli_verbs[verb].name, c->a.pos[0]);
	if (rc == NV_E_CONFLICT) {
		snprintf(st.message, sizeof(st.message),
		         "the object changed since it was read; run the command again");
		return fail(c, rc, &st, what);
	}
	if (rc != NV_OK)
		return fail(c, rc, &st, what);
	fprintf(c->out, "rackupgrade/%s %s\n", c->a.pos[0],
	        verb == CLI_PAUSE    ? "paused"
	        : verb == CLI_RESUME ? "resumed"
	                             : "aborting");
	return 0;
}

/* ---- approve ---------------------------------------------------------- */

/* Who the apiserver takes us for (a SelfSubjectReview), or "" when it does
 * not say. Only the user name is kept; credentials never leave the client. */
static void whoami(struct cli *c, char *out, size_t outsz)
{
	struct kube_status st;
	json_t *body = json_pack("{s:s,s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
	                         "SelfSubjectReview");
	json_t *resp = NULL;
	struct kube_raw_req r = {.method = "POST",
	                         .path = "/apis/authentication.k8s.io/v1/selfsubjectreviews",
	                         .content_type = "application/json",
	                         .body = body,
	                         .no_retry = true};
	out[0] = '\0';
	if (kube_request(c->kc, &r, &resp, &st) == NV_OK)
		snprintf(out, outsz, "%s", jx_str_or(resp, "status.userInfo.username", ""));
	json_decref(body);
	json_decref(resp);
}

static json_t *approval_new(const struct cli_args *a)
{
	char prefix[64];
	/* generateName leaves room for the apiserver's 5-character suffix. */
	snprintf(prefix, sizeof(prefix), "%.*s-%s-", (int)(57 - strlen(a->layer)), a->pos[0],
	         a->layer);
	json_t *o = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s}}", "apiVersion",
	                      "nvl72.io/v1alpha1", "kind", "UpgradeApproval", "metadata",
	                      "generateName", prefix, "spec", "upgrade", a->pos[0], "layer",
	                      a->layer, "decision", a->reject ? "Rejected" : "Approved");
	if (a->comment != NULL && a->comment[0] != '\0')
		json_object_set_new(json_object_get(o, "spec"), "comment", json_string(a->comment));
	return o;
}

static int cmd_approve(struct cli *c)
{
	struct kube_status st;
	json_t *u = NULL, *obj = NULL, *created = NULL;
	enum matrix_layer layer;
	char user[256];
	enum nv_err rc;
	if (c->a.layer == NULL || !matrix_layer_parse(c->a.layer, &layer)) {
		fprintf(c->err,
		        "kubectl-nvl72: approve: --layer must be firmware, fabric, node, "
		        "kubernetes or workload%s%s\n",
		        c->a.layer ? ", not " : "", c->a.layer ? c->a.layer : "");
		return 2;
	}
	if (c->a.reject && (c->a.comment == NULL || c->a.comment[0] == '\0')) {
		fprintf(c->err, "kubectl-nvl72: approve: --reject needs --comment\n");
		return 2;
	}
	/* A missing upgrade is named here; a forbidden read is left to the
	 * create, whose denial is the one that matters. */
	rc = get_upgrade(c, c->a.pos[0], &u, &st);
	json_decref(u);
	if (rc == NV_E_NOT_FOUND)
		return fail(c, rc, &st, "approve");
	obj = approval_new(&c->a);
	rc = kube_create(c->kc, &APPROVALS, NULL, obj, &created, &st);
	json_decref(obj);
	if (rc == NV_E_FORBIDDEN) {
		fprintf(c->err, "kubectl-nvl72: you may not create upgradeapprovals: %s\n",
		        st.message);
		return 1;
	}
	if (rc != NV_OK)
		return fail(c, rc, &st, "create upgradeapproval");
	snprintf(user, sizeof(user), "%s", jx_str_or(created, "spec.approvedBy.username", ""));
	if (user[0] == '\0')
		whoami(c, user, sizeof(user));
	fprintf(c->out, "upgradeapproval/%s created: %s of the %s layer of rackupgrade/%s%s%s\n",
	        kube_obj_name(created), c->a.reject ? "rejection" : "approval", c->a.layer,
	        c->a.pos[0], user[0] ? " as " : "", user);
	json_decref(created);
	return 0;
}

/* ---- the run ---------------------------------------------------------- */

static int dispatch(struct cli *c)
{
	switch (c->a.verb) {
	case CLI_STATUS:
		return cmd_status(c);
	case CLI_APPROVE:
		return cmd_approve(c);
	case CLI_EXPLAIN:
		return cmd_explain(c);
	default:
		return cmd_patch(c);
	}
}

/* Positional arguments and -o against what the verb takes. */
static bool args_check(const struct cli_args *a, char *err, size_t errsz)
{
	const char *name = cli_verbs[a->verb].name;
	if (a->output[0] != '\0' && strcmp(a->output, "json") != 0) {
		snprintf(err, errsz, "-o %s: only json is supported", a->output);
		return false;
	}
	if (a->verb != CLI_STATUS && a->npos != 1) {
		snprintf(err, errsz, "%s takes exactly one UPGRADE name (see %s --help)", name,
		         name);
		return false;
	}
	return true;
}

int cli_run(int argc, char **argv, FILE *out, FILE *err)
{
	struct cli c = {.out = out, .err = err};
	struct kube_config_opts co = {0};
	struct kube_client_opts ko = {.component = "kubectl-nvl72", .max_retries = 3};
	struct kube_config *cfg = NULL;
	struct kube_status st;
	char msg[256];
	struct buf b;
	enum nv_err rc;
	int code;
	if (cli_args_parse(argc, argv, &c.a, msg, sizeof(msg)) != NV_OK) {
		fprintf(err, "kubectl-nvl72: %s\n", msg);
		return 2;
	}
	if (c.a.version) {
		fprintf(out, "kubectl-nvl72 %s\n", NVL72_VERSION);
		return 0;
	}
	if (c.a.help || c.a.verb < 0) {
		buf_init(&b, OUT_MAX);
		cli_help(c.a.verb, &b);
		fputs(buf_str(&b), c.a.help ? out : err);
		buf_clear(&b);
		return c.a.help ? 0 : 2;
	}
	if (!args_check(&c.a, msg, sizeof(msg))) {
		fprintf(err, "kubectl-nvl72: %s\n", msg);
		return 2;
	}
	log_set_level(LOG_LVL_ERROR);
	co.kubeconfig = c.a.kubeconfig;
	co.context = c.a.context;
	co.no_in_cluster = true;
	if ((rc = kube_config_load(&co, &cfg, &st)) != NV_OK)
		return fail(&c, rc, &st, "kubeconfig");
	if ((rc = kube_client_new(cfg, &ko, &c.kc, &st)) != NV_OK)
		return fail(&c, rc, &st, "client");
	code = dispatch(&c);
	kube_client_free(c.kc);
	return code;
}
