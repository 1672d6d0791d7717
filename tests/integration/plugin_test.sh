#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kubectl-nvl72 plugin against a real kube-apiserver: a Rack and a
# RackUpgrade with hand-written status; `status` prints their rows,
# `explain` the expected sentence, pause/resume/abort patch the spec (and
# say so when there is nothing to do), approve creates an UpgradeApproval
# as the admin and is refused with a clear 403 message for the viewer, and
# kubectl finds the plugin on PATH and runs it as `kubectl nvl72`.
#
# Run from the repository root with KUBECONFIG (admin), KUBECTL and
# NVL72_CLUSTER_DIR set, against a fresh control plane.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary that matches the server}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane directory}"
export KUBECONFIG
BIN=$(cd "${NVL72_BUILD:-build/rel}/bin" 2>/dev/null && pwd)
PLUGIN=$BIN/kubectl-nvl72
UP=gb300-r07-r580-173

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}
k() { timeout 90 "$KUBECTL" --request-timeout=30s "$@"; }
p() { timeout 60 "$PLUGIN" "$@"; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-600; }
# check NAME OUTPUT NEEDLE: the output holds the needle (fixed string).
has() {
	if grep -qF -- "$3" <<<"$2"; then ok "$1"; else not_ok "$1" "$(one_line "$2")"; fi
}

[[ -x $PLUGIN ]] || { not_ok "plugin binary" "$PLUGIN missing (run make)"; finish; }

out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s \
	crd/racks.nvl72.io crd/rackupgrades.nvl72.io crd/upgradeapprovals.nvl72.io 2>&1) ||
	{ not_ok "crds installed" "$(one_line "$out")"; finish; }
ok "crds installed"
out=$(k apply -f deploy/samples/rack-gb300.yaml -f deploy/samples/rackupgrade-routine.yaml 2>&1) ||
	{ not_ok "rack and upgrade created" "$(one_line "$out")"; finish; }
ok "rack and upgrade created"

# ---------------------------------------------------------------- status ---
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
trays='[{"index":1,"node":"gb300-r07-t01","ready":true,"stack":"gb300-r580-95","maintenance":"None"},
 {"index":2,"node":"gb300-r07-t02","ready":false,"stack":"gb300-r580-95","maintenance":"Cordoned"},
 {"index":3,"node":"gb300-r07-t03","ready":true,"stack":"gb300-r580-95","maintenance":"None"}]'
rack_status=$(cat <<JSON
{"status":{"stack":"gb300-r580-95","trays":$trays,
 "capacity":{"trays":18,"readyTrays":17,"unavailableTrays":1,"gpus":72,"healthyGPUs":68},
 "upgrade":{"name":"$UP","phase":"AwaitingApproval"},
 "maintenance":{"inWindow":false,"inFreeze":false,"nextWindowStart":"2026-11-17T22:00:00Z"},
 "conditions":[
  {"type":"Ready","status":"True","reason":"CapacityMet","message":"17 of 18 trays ready","lastTransitionTime":"$now"},
  {"type":"Degraded","status":"False","reason":"BelowThreshold","message":"1 tray down","lastTransitionTime":"$now"}]}}
JSON
)
out=$(k patch rack gb300-r07 --subresource=status --type=merge -p "$rack_status" 2>&1) ||
	not_ok "rack status written" "$(one_line "$out")"
up_status=$(cat <<JSON
{"status":{"phase":"AwaitingApproval","phaseTime":"$now","fromStack":"gb300-r580-95",
 "requiredApprovals":["fabric","workload"],
 "approvals":[{"layer":"fabric","name":"$UP-fabric","user":"carol","decision":"Approved","time":"$now"}],
 "steps":[{"index":0,"wave":0,"action":"Cordon","trays":[1,2],"phase":"Pending"},
          {"index":1,"wave":0,"action":"Drain","trays":[1,2],"phase":"Pending"}]}}
JSON
)
out=$(k patch rackupgrade "$UP" --subresource=status --type=merge -p "$up_status" 2>&1) ||
	not_ok "upgrade status written" "$(one_line "$out")"

out=$(p status 2>&1)
has "status: rack row (ready, stack, trays, degraded, cordoned, upgrade)" "$out" \
	"$(printf 'gb300-r07   True    gb300-r580-95   17/18   False      1          %s' "$UP")"
has "status: upgrade row (phase, step, pending approvals by layer and owner)" "$out" \
	"AwaitingApproval   1/2 Cordon   -      workload=ml-training"
out=$(p status upgrade "$UP" 2>&1)
has "status upgrade NAME: approvals by layer, owner and user" "$out" \
	"fabric      approved  owner platform-fabric, window owner nvl72:platform, by carol"
has "status upgrade NAME: pending layer" "$out" \
	"workload    pending   owner ml-training, window owner nvl72:training-leads"
out=$(p status rack gb300-r07 2>&1)
has "status rack NAME: tray rows" "$out" "Cordoned"
out=$(p status rack gb300-r07 -o json 2>&1)
got=$(jq -r '.status.capacity.readyTrays' <<<"$out" 2>&1)
[[ $got == 17 ]] && ok "status -o json passes the object through" ||
	not_ok "status -o json passes the object through" "$(one_line "$out")"

# --------------------------------------------------------------- explain ---
want="$UP is waiting for approval of workload (owner ml-training, window owner nvl72:training-leads); an owner approves with \`kubectl nvl72 approve $UP --layer LAYER\`."
out=$(p explain "$UP" 2>&1)
[[ $out == "$want" ]] && ok "explain prints the sentence" || not_ok "explain prints the sentence" "$(one_line "$out")"
out=$(p explain-block "$UP" 2>&1)
[[ $out == "$want" ]] && ok "explain-block is an alias" || not_ok "explain-block is an alias" "$(one_line "$out")"
out=$(p explain no-such-upgrade 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *'rackupgrade "no-such-upgrade" not found'* ]] &&
	ok "explain of a missing upgrade names it" || not_ok "explain of a missing upgrade names it" "rc=$rc $(one_line "$out")"

# ------------------------------------------------- pause, resume, abort ---
spec() { k get rackupgrade "$UP" -o "jsonpath={.spec.paused}/{.spec.abort}" 2>&1; }
out=$(p pause "$UP" 2>&1)
[[ $out == "rackupgrade/$UP paused" && $(spec) == true/false ]] && ok "pause sets spec.paused" ||
	not_ok "pause sets spec.paused" "$(one_line "$out") spec=$(spec)"
out=$(p pause "$UP" 2>&1)
[[ $out == "rackupgrade/$UP is already paused" ]] && ok "pause again says so" || not_ok "pause again says so" "$(one_line "$out")"
out=$(p resume "$UP" 2>&1)
[[ $out == "rackupgrade/$UP resumed" && $(spec) == false/false ]] && ok "resume clears spec.paused" ||
	not_ok "resume clears spec.paused" "$(one_line "$out") spec=$(spec)"
out=$(p resume "$UP" 2>&1)
[[ $out == "rackupgrade/$UP is not paused" ]] && ok "resume again says so" || not_ok "resume again says so" "$(one_line "$out")"

# ------------------------------------------------------------- approve ---
out=$(p approve "$UP" --layer workload --comment "training leads agree" 2>&1)
rc=$?
name=$(k get upgradeapprovals -o jsonpath='{range .items[?(@.spec.layer=="workload")]}{.metadata.name}{end}' 2>&1)
has "approve reports the identity of the admin" "$out" "approval of the workload layer of rackupgrade/$UP as admin"
got=$(k get upgradeapproval "$name" -o jsonpath='{.spec.upgrade}/{.spec.layer}/{.spec.decision}/{.spec.comment}/{.spec.approvedBy}' 2>&1)
[[ $rc -eq 0 && $got == "$UP/workload/Approved/training leads agree/" ]] &&
	ok "approve creates the UpgradeApproval without approvedBy" || not_ok "approve creates the UpgradeApproval without approvedBy" "rc=$rc $got"
out=$(p approve "$UP" --layer spine 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *"--layer must be firmware, fabric, node, kubernetes or workload, not spine"* ]] &&
	ok "approve names a bad layer" || not_ok "approve names a bad layer" "rc=$rc $(one_line "$out")"

viewer=$NVL72_CLUSTER_DIR/viewer.kubeconfig
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$viewer" <<KC
apiVersion: v1
kind: Config
clusters:
- name: t
  cluster: {server: "$server", certificate-authority: pki/ca.crt}
users:
- name: viewer
  user: {token: "$(cat "$NVL72_CLUSTER_DIR/pki/viewer.token")"}
contexts:
- name: t
  context: {cluster: t, user: viewer}
current-context: t
KC
chmod 600 "$viewer"
out=$(p approve "$UP" --layer fabric --kubeconfig "$viewer" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == 'kubectl-nvl72: you may not create upgradeapprovals: upgradeapprovals.nvl72.io is forbidden: User "viewer" cannot create resource "upgradeapprovals"'* ]] &&
	ok "approve as the viewer fails with the 403 message" || not_ok "approve as the viewer fails with the 403 message" "rc=$rc $(one_line "$out")"
token=$(cat "$NVL72_CLUSTER_DIR/pki/viewer.token")
if grep -qF -- "$token" <<<"$out"; then not_ok "the viewer's token is never printed" "found in output"; else ok "the viewer's token is never printed"; fi

# -------------------------------------------------- through kubectl ---
out=$(PATH="$BIN:$PATH" k plugin list 2>&1)
has "kubectl plugin list finds kubectl-nvl72" "$out" "$BIN/kubectl-nvl72"
out=$(PATH="$BIN:$PATH" timeout 60 "$KUBECTL" nvl72 abort "$UP" 2>&1)
[[ $out == "rackupgrade/$UP aborting" && $(spec) == false/true ]] && ok "kubectl nvl72 abort sets spec.abort" ||
	not_ok "kubectl nvl72 abort sets spec.abort" "$(one_line "$out") spec=$(spec)"
out=$(PATH="$BIN:$PATH" timeout 60 "$KUBECTL" nvl72 abort "$UP" 2>&1)
[[ $out == "rackupgrade/$UP is already aborting" ]] && ok "abort again says so" || not_ok "abort again says so" "$(one_line "$out")"
out=$(PATH="$BIN:$PATH" timeout 60 "$KUBECTL" nvl72 explain "$UP" 2>&1)
has "kubectl nvl72 explain after abort" "$out" "$UP is being aborted (spec.abort is set)"
finish
