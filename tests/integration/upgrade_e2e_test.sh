#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The RackUpgrade controller end to end against a real kube-apiserver: one
# operator serving its admission webhook on loopback, the sample matrix, a
# Rack of 18 simulated trays with a real agent each (fake NVML, IMEX and
# installer, the validation command of the simulator), a 2-tray canary
# RackPartition and a tenant ServiceAccount that may approve upgrades but not
# create them. Three upgrades from gb300-r580-95 to gb300-r580-159:
#   1. security: no approval, the notice honoured, reason and CVE recorded;
#      then aborted, which releases the canary;
#   2. routine with the simulated bus bandwidth lowered: the gate fails, the
#      upgrade halts with evidence and an event, no tray outside the canary
#      is touched;
#   2b. the same with the Rack's onGateFailure RollBack and only the new
#      driver slow: the canary goes back to the old driver through its gate,
#      RolledBack; a move without a reversible way back is refused;
#   3a. an approval of an upgrade deleted and created again under the same
#      name with a new target is not counted for the new one;
#   3. routine, happy path: notice, the tenant's approval (stamped with the
#      real user by the webhook), canary, gate, waves, Completed, every tray
#      on the new driver, and no writes once done; the Rack's
#      spec.matrix.stack moved to the target by server-side apply of the
#      operator (owning it: a server-side apply of the old manifest
#      conflicts; a patch back warns and stays; a lost record heals).
# Then two upgrades on to gb300-r580-173, whose plan moves the switch trays
# (NVOS, firmware, NMX) before the driver, through the operator's simulated
# out-of-band backend (--oob-backend sim on the rack folder):
#   4. an injected NVOS failure on switch tray 3: Halted with the backend's
#      message before any tray is touched;
#   5. the retry: every switch tray on the new versions, each update run
#      once (the failed one twice), all before the first driver change.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (KUBECONFIG, KUBECTL, NVL72_CLUSTER_DIR set). Prints `ok - …`
# / `not ok - …` and `N passed, M failed`; exits non-zero on any failure.
set -u

TENANT_NS=team-a
TENANT_USER=system:serviceaccount:$TENANT_NS:approver
UPG_WORK_NAME=upgrade-e2e
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS

# ------------------------------------------------------------- set-up ---
upg_crds
k create namespace "$TENANT_NS" >/dev/null 2>&1

# The webhook configurations of the chart, pointed at the operator on
# loopback through clientConfig.url; the operator fills in caBundle.
out=$(upg_webhooks nvl72-upgrade-e2e "https://127.0.0.1:$wport")
check "webhook configurations on 127.0.0.1:$wport" $? "$out"

upg_nodes
upg_sim
op_start op --webhook-bind-address="127.0.0.1:$wport" \
	--webhook-secret=nvl72-upgrade-e2e-tls --webhook-configuration=nvl72-upgrade-e2e \
	--oob-backend sim --oob-sim-root "$rack" --oob-sim-delay 1s
wait_for 60 upg_bundled nvl72-upgrade-e2e
check "the operator serves its webhook and set both caBundles" $? "$(tail -5 "$work/op.log")"

# The matrix and the Rack go through the webhook; the workload layer's
# window owner is the tenant's ServiceAccounts, the other layers' the
# admin's group (upg_rack), so that the admin's approvals count on the
# manual edge of scenarios 4 and 5.
upg_rack '.spec.responsibilities |= map(if .layer == "workload" then
	.windowOwner = "system:serviceaccounts:'"$TENANT_NS"'" else . end)'
upg_agents

# The tenant: a ServiceAccount bound to the chart's approver ClusterRole.
yq 'select(.kind == "ClusterRole" and .metadata.name == "nvl72-approver")' \
	deploy/manifests/nvl72-operator.yaml >"$work/approver-role.yaml"
out=$(k apply -f "$work/approver-role.yaml" 2>&1) &&
	out=$(k -n "$TENANT_NS" create serviceaccount approver 2>&1) &&
	out=$(k create clusterrolebinding upgrade-e2e-approver --clusterrole=nvl72-approver \
		--serviceaccount="$TENANT_NS:approver" 2>&1) &&
	token=$(k -n "$TENANT_NS" create token approver --duration=1h 2>&1)
check "tenant ServiceAccount bound to the chart's nvl72-approver role" $? "$out $token"
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$work/tenant.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$server", certificate-authority: "$NVL72_CLUSTER_DIR/pki/ca.crt"}
users:
- name: tenant
  user: {token: "$token"}
contexts:
- name: c
  context: {cluster: c, user: tenant}
current-context: c
KC
chmod 600 "$work/tenant.kubeconfig"
tk() { KUBECONFIG=$work/tenant.kubeconfig k "$@"; }
[[ $(tk auth can-i create upgradeapprovals.nvl72.io 2>/dev/null) == yes &&
	$(tk auth can-i create rackupgrades.nvl72.io 2>/dev/null) == no ]]
check "the tenant may create UpgradeApprovals but not RackUpgrades" $? \
	"$(tk auth can-i --list 2>&1 | grep nvl72 | head -5)"

approve() { # approve UPGRADE: the tenant approves the workload layer
	approval "$1" | tk create -f - 2>&1
}

# ------------------------------------------------ 1. security upgrade ---
SEC=r07-cve-2026-24101
t0=$SECONDS
out=$(upgrade "$SEC" security "  reason: driver privilege escalation fixed in 580.159.03
  cves: [CVE-2026-24187]" | k create -f - 2>&1)
check "create the security RackUpgrade" $? "$out"
wait_for 30 phase_is "$SEC" Notice
check "security: Notice, announced with its reason and CVE" \
	"$(ustatus "$SEC" '.status.conditions[] | select(.type == "Announced") | .message' |
		grep -q 'CVE-2026-24187.*driver privilege escalation' && echo 0 || echo 1)" \
	"$(ustatus "$SEC" .status)"
n=$(ustatus "$SEC" '.status | [(.noticeEndTime | fromdate) - (.noticeStartTime | fromdate), (.requiredApprovals | length)]')
[[ $n == "[8,0]" ]]
check "security: 8 s notice (the longest of node and workload), no approval required" $? "$n"
sleep 3
phase_is "$SEC" Notice && released
check "security: still in Notice 3 s in, nothing touched" $? "$(phase "$SEC")"
wait_for 60 phase_in "$SEC" Canary Validating RollingOut
check "security: past the notice into the canary without any approval ($((SECONDS - t0))s)" $? \
	"$(ustatus "$SEC" .status.message)"
k patch rackupgrade "$SEC" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 90 phase_is "$SEC" Aborted && released
check "security: abort ends Aborted with every tray released ($((SECONDS - t0))s)" $? \
	"$(ustatus "$SEC" '.status | {phase, message}')"
k delete rackupgrade "$SEC" >/dev/null 2>&1

# -------------------------------------------------- 2. gate failure ---
GATE=r07-gate-fails
simctl busbw "$rack" 300 >/dev/null
t0=$SECONDS
out=$(upgrade "$GATE" routine | k create -f - 2>&1)
check "create a routine RackUpgrade with the simulated bandwidth at 300 GB/s" $? "$out"
wait_for 40 phase_is "$GATE" AwaitingApproval
check "gate: AwaitingApproval after the notice" $? "$(ustatus "$GATE" '.status | {phase, message}')"
out=$(approve "$GATE")
check "gate: the tenant approves the workload layer" $? "$out"
wait_for 120 phase_is "$GATE" Halted
check "gate: Halted when the canary's bandwidth is under the floor ($((SECONDS - t0))s)" $? \
	"$(ustatus "$GATE" '.status | {phase, message}')"
ev=$(ustatus "$GATE" '.status.steps[] | select(.action == "Validate") | .evidence')
[[ $(jq -r '"\(.passed) \(.busBandwidthGBps) \(.floorGBps)"' <<<"$ev") == "false 300 823" ]]
check "gate: the Validate step keeps its evidence (300 GB/s, floor 823)" $? "$ev"
events_for "$GATE" | grep -qx GateFailed
check "gate: a GateFailed event" $? "$(events_for "$GATE" | tr '\n' ' ')"
# On a failure, each offending tray in full (what of it differs), and the
# Nodes, so that a touched tray can be told from a check that read too early.
touched=$(trays_json | jq -c --arg d "$FROM_DRIVER" '[.[] | select(.spec.index > 2) |
	select(.spec.driver.version != $d or .status.driver.version != $d or
		(.spec.maintenance.state // "None") != "None" or .spec.validation != null) |
	{i: .spec.index, spec: .spec.driver.version, status: .status.driver.version,
	 maint: .spec.maintenance, validation: .spec.validation,
	 rv: .metadata.resourceVersion}]')
others=$(jq -c '[.[].i]' <<<"$touched")
cordoned=$(k get nodes -o json | jq -c '[.items[] | select(.spec.unschedulable == true) | .metadata.name]')
[[ $others == "[]" && $cordoned == "[\"$(node 1)\",\"$(node 2)\"]" ]]
check "gate: no tray outside the canary touched; the canary held cordoned" $? \
	"others=$others cordoned=$cordoned trays=$touched nodes=$(k get nodes -o json |
		jq -c '[.items[] | {n: .metadata.name, u: .spec.unschedulable, l: .metadata.labels["nvl72.io/maintenance"]}]')"
k patch rackupgrade "$GATE" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 60 phase_is "$GATE" Aborted && released
check "gate: abort releases the held canary" $? "$(ustatus "$GATE" '.status | {phase, message}')"
k delete rackupgrade "$GATE" >/dev/null 2>&1
simctl busbw "$rack" 900 >/dev/null

# ------------------------------------------------- 2b. roll back ---
# The Rack's policy says RollBack: the same failed gate (the new driver's
# bandwidth under the floor, the old driver's fine) sends the canary back
# to the source stack through its own drain, driver, waits and gate, and
# the upgrade ends RolledBack with both gates' evidence and the trays out
# of maintenance. A move the matrix does not mark reversible is refused at
# admission while the Rack says RollBack.
RB=r07-rolls-back
out=$(k patch rack "$RACK" --type=merge -p '{"spec":{"policy":{"onGateFailure":"RollBack"}}}' 2>&1)
check "rollback: the Rack's policy set to onGateFailure RollBack (through the webhook)" $? "$out"
# The webhook reads the Rack from the operator's cache, which follows the
# patch a moment later: wait for the refusal (a server-side dry run goes
# through the webhook and stores nothing).
no_way_back() {
	out=$(TO=gb300-nvos4317-r580-159 upgrade r07-no-way-back routine | k create --dry-run=server -f - 2>&1)
	[[ $? -ne 0 && $out == *"rolls a failed canary back"*"does not mark the move"*"reversible"* ]]
}
wait_for 20 no_way_back
check "rollback: a move with no reversible way back is refused at admission, naming why" $? "$out"
simctl busbw "$rack" 300 "$TO_DRIVER" >/dev/null
t0=$SECONDS
out=$(upgrade "$RB" routine | k create -f - 2>&1) && wait_for 40 phase_is "$RB" AwaitingApproval &&
	out=$(approve "$RB")
check "rollback: a routine RackUpgrade, approved, with $TO_DRIVER at 300 GB/s" $? "$out"
wait_for 180 phase_in "$RB" RolledBack Halted Completed
phase_is "$RB" RolledBack
check "rollback: the failed gate ends RolledBack ($((SECONDS - t0))s)" $? \
	"$(ustatus "$RB" '.status | {phase, message}')"
gates=$(ustatus "$RB" '[.status.steps[] | select(.action == "Validate") |
	"\(.wave) \(.phase) \(.evidence.busBandwidthGBps)"]')
[[ $gates == '["0 Failed 300","1 Succeeded 900"]' ]]
check "rollback: the canary's gate failed at 300 GB/s, the rolled-back canary passed at 900" $? "$gates"
back=$(trays_json | jq -c '[.[] | select(.spec.driver.version != $d or .status.driver.version != $d) |
	.spec.index]' --arg d "$FROM_DRIVER")
[[ $back == "[]" ]] && wait_for 30 released
check "rollback: every tray on $FROM_DRIVER again, none in maintenance, no Node cordoned" $? \
	"off=$back $(k get nodes -o json | jq -c '[.items[] | select(.spec.unschedulable == true) | .metadata.name]')"
ev=$(events_for "$RB" | tr '\n' ' ')
[[ " $ev" == *" GateFailed "* && " $ev" == *" RollBackStarted "* && " $ev" == *" RollingBack "* &&
	" $ev" == *" RolledBack "* ]]
check "rollback: events GateFailed, RollBackStarted, RollingBack, RolledBack" $? "$ev"
k delete rackupgrade "$RB" >/dev/null 2>&1
out=$(k patch rack "$RACK" --type=merge -p '{"spec":{"policy":{"onGateFailure":"Hold"}}}' 2>&1)
check "rollback: the Rack's policy back to Hold" $? "$out"
# As above: the webhook admits the manual-edge move once its cache holds
# the patch.
wait_for 20 eval 'TO=gb300-nvos4317-r580-159 upgrade r07-hold-seen routine | k create --dry-run=server -f - >/dev/null 2>&1'
check "rollback: the webhook admits a move with no way back again" $? \
	"$(TO=gb300-nvos4317-r580-159 upgrade r07-hold-seen routine | k create --dry-run=server -f - 2>&1)"
simctl busbw "$rack" 900 "$TO_DRIVER" >/dev/null

# ------------------------------- 3a. recreated under the same name ---
# An approval is bound to the upgrade it was given for (UID and target, as
# the webhook stamps them): deleting the upgrade and creating another under
# the same name with a new target must not inherit it. The first one moves
# to gb300-nvos4317-r580-159 over a manual edge, so it waits for the other
# layers' owners (never given here) and touches nothing.
UP=r07-r580-159
out=$(TO=gb300-nvos4317-r580-159 upgrade "$UP" routine "  reason: the first of that name" |
	k create -f - 2>&1)
check "recreated: create $UP towards gb300-nvos4317-r580-159" $? "$out"
wait_for 40 phase_is "$UP" AwaitingApproval
out=$(approval "$UP" | sed "s/name: $UP-workload/name: $UP-first-workload/" | tk create -f - 2>&1)
check "recreated: the tenant approves the workload layer of the first one" $? "$out"
first_counted() { [[ $(ustatus "$UP" '[.status.approvals[]? | select(.layer == "workload") | .name]') == "[\"$UP-first-workload\"]" ]]; }
wait_for 30 first_counted
check "recreated: the first upgrade counts that approval" $? "$(ustatus "$UP" '.status | {phase, message, approvals}')"
uid1=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.uid}')
out=$(k delete rackupgrade "$UP" --wait --timeout=60s 2>&1)
check "recreated: delete the first upgrade" $? "$out"
t0=$SECONDS
out=$(upgrade "$UP" routine "  reason: driver patch release" | k create -f - 2>&1)
check "recreated: create $UP again, $FROM -> $TO" $? "$out"
uid2=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.uid}')
ref=$(k get upgradeapproval "$UP-first-workload" -o jsonpath='{.spec.upgradeRef.uid} {.spec.upgradeRef.target.stack}')
[[ -n $uid1 && $uid1 != "$uid2" && $ref == "$uid1 gb300-nvos4317-r580-159" ]]
check "recreated: the old approval still exists, bound to the first upgrade's UID and target" $? \
	"uid1=$uid1 uid2=$uid2 ref=$ref"
not_counted() { grep -q "approval not counted.*approval=$UP-first-workload upgrade=$UP .*earlier upgrade of that name" "$work/op.log"; }
wait_for 40 phase_is "$UP" AwaitingApproval && wait_for 30 not_counted
check "recreated: the operator does not count the old approval for the new upgrade" $? \
	"$(grep 'approval not counted' "$work/op.log" | tail -2)"
st=$(ustatus "$UP" '.status | {phase, message, n: (.approvals // [] | length)}')
[[ $(jq -r '"\(.phase) \(.n)"' <<<"$st") == "AwaitingApproval 0" && $st == *"waiting for an UpgradeApproval for: workload"* ]]
check "recreated: the new upgrade still waits for the workload layer" $? "$st"

# ------------------------------------------------- 3. happy path ---
# The upgrade of 3a, created again: it waits for its own approval.
wait_for 40 phase_is "$UP" AwaitingApproval
check "happy: AwaitingApproval after the notice, waiting for the workload layer" \
	"$(ustatus "$UP" .status.message | grep -q workload && echo 0 || echo 1)" \
	"$(ustatus "$UP" '.status | {phase, message}')"
# Every version of the upgrade from here (a watch), and the step duration
# counts before it, for the write checks after Completed.
mp=$(sed -n 's/.*serving.* metrics=\([0-9]*\).*/\1/p' "$work/op.log" | head -1)
m0=$(curl -s "http://127.0.0.1:$mp/metrics")
drains0=$(sed -n 's/^nvl72_upgrade_step_duration_seconds_count{action="Drain"} //p' <<<"$m0")
# parsed_reads METRICS RESULT: the ComputeTray shared reads so counted.
parsed_reads() {
	sed -n "s/^nvl72_parsed_cache_reads_total{kind=\"ComputeTray\",result=\"$2\"} //p" <<<"$1"
}
# (kubectl itself, not k: a watch must outlive k's 30 s request timeout)
timeout 300 "$KUBECTL" get rackupgrade "$UP" -w -o json >"$work/happy-watch.json" 2>/dev/null &
wpid=$!
out=$(approve "$UP")
by=$(k get upgradeapproval "$UP-workload" -o jsonpath='{.spec.approvedBy.username}' 2>&1)
[[ $by == "$TENANT_USER" ]]
check "happy: the webhook stamped the approval with the tenant's user" $? "$out / $by"
wait_for 240 phase_in "$UP" Completed Halted Aborted
phase_is "$UP" Completed
check "happy: Completed ($((SECONDS - t0))s)" $? "$(ustatus "$UP" '.status | {phase, message}')"
watched_completed() { jq -se 'any(.[]; .status.phase == "Completed")' "$work/happy-watch.json" >/dev/null 2>&1; }
if wait_for 30 watched_completed; then seen=Completed; else seen="not Completed"; fi
kill "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
# A Drain or Uncordon step the operator ends itself goes out in the write
# that starts the next step (or completes the upgrade): no version of the
# object shows one Succeeded with the next step still Pending, or as the
# last step of an upgrade still running.
gaps=$(jq -sc '[.[] | select(.status.phase as $p | ["Canary", "Validating", "RollingOut"] | index($p))
	| .metadata.resourceVersion as $rv | .status.steps as $s | range(0; $s | length) as $i
	| select(($s[$i].action == "Drain" or $s[$i].action == "Uncordon") and $s[$i].phase == "Succeeded"
		and ($i + 1 == ($s | length) or $s[$i + 1].phase == "Pending"))
	| "rv \($rv): step \($i) (\($s[$i].action), wave \($s[$i].wave)) ended, next \($s[$i + 1].phase // "none")"]' \
	"$work/happy-watch.json")
nver=$(jq -s length "$work/happy-watch.json")
[[ $gaps == "[]" && $nver -gt 5 && $seen == Completed ]]
check "happy: a Drain or Uncordon step's end goes out with the next step's start ($nver versions watched)" $? \
	"the watch saw the upgrade $seen; $gaps"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "happy: every tray runs driver $TO_DRIVER" $? "$drivers"
st=$(ustatus "$UP" '.status | {u: .approvals[0].user, d: .approvals[0].decision,
	e: (.steps[] | select(.action == "Validate") | .evidence | "\(.passed) \(.busBandwidthGBps) \(.transport)"),
	w: (.waves | length), p: .canary.partition, bad: [.steps[] | select(.phase != "Succeeded" and .phase != "Skipped")] | length}')
[[ $(jq -r '"\(.u) \(.d) \(.e) \(.w) \(.p) \(.bad)"' <<<"$st") == "$TENANT_USER Approved true 900 "*" 5 $CANARY 0" ]]
check "happy: the status holds the approving user, gate evidence, 1 canary + 4 waves, every step done" $? "$st"
released
check "happy: every tray out of maintenance, no Node cordoned" $? "$(trays_json | jq -c '[.[].spec.maintenance]')"
[[ $(k get rack "$RACK" -o jsonpath='{.status.upgrade.name} {.status.upgrade.phase}') == "$UP Completed" ]]
check "happy: the Rack's status.upgrade names the upgrade, Completed" $? \
	"$(k get rack "$RACK" -o jsonpath='{.status.upgrade}')"
evs=$(events_for "$UP" | sort -u | tr '\n' ' ')
[[ $evs == *Announced* && $evs == *ApprovalCounted* && $evs == *GatePassed* && $evs == *Completed* ]]
check "happy: events for the announcement, the approval, the gate and the phases" $? "$evs"
m=$(curl -s "http://127.0.0.1:$mp/metrics")
drains=$(sed -n 's/^nvl72_upgrade_step_duration_seconds_count{action="Drain"} //p' <<<"$m")
ndrain=$(ustatus "$UP" '[.status.steps[] | select(.action == "Drain")] | length')
grep -q "nvl72_upgrade_phase{upgrade=\"$UP\",rack=\"$RACK\",phase=\"Completed\"} 1" <<<"$m" &&
	grep -q "nvl72_upgrade_gate_passed{upgrade=\"$UP\",rack=\"$RACK\",wave=\"0\"} 1" <<<"$m" &&
	((${drains:-0} - ${drains0:-0} == ndrain))
check "happy: metrics for the phase, the gate and step durations (each of $ndrain Drain steps once)" $? \
	"Drain count ${drains0:-0} -> ${drains:-0}; $(grep -E 'nvl72_upgrade_(phase|gate_passed|step_duration_seconds_count)\{' <<<"$m" | grep -v ' 0$' | head -12)"
# The passes share parsed trays (--parsed-cache-mib, 16 MiB by default):
# during the upgrade most of their tray reads found a kept tree, and what
# is kept stays within the trays' three quarters of the budget (the gauge
# may be 0 by now: trees go 5 s after the passes stop reading them).
kept=$(($(parsed_reads "$m" kept) - $(parsed_reads "$m0" kept)))
parsed=$(($(parsed_reads "$m" parsed) - $(parsed_reads "$m0" parsed)))
kbytes=$(sed -n 's/^nvl72_parsed_cache_bytes{kind="ComputeTray"} //p' <<<"$m")
[[ -n $kbytes ]] && ((kept > 2 * parsed && ${kbytes%.*} <= 12582912))
check "happy: the passes read trays from shared parsed trees ($kept kept, $parsed parsed)" $? \
	"$(grep '^nvl72_parsed_cache' <<<"$m")"
# After Completed the Rack's spec names the target, written by server-side
# apply as nvl72-operator, which then owns the field: a server-side apply of
# the old manifest conflicts, a plain patch back passes with the webhook's
# warning and is left alone, and a pass without the RackStackSet record (an
# operator stopped before the apply) applies again.
spec_stack() { k get rack "$RACK" -o jsonpath='{.spec.matrix.stack}'; }
spec_stack_is() { [[ $(spec_stack) == "$1" ]]; }
rack_observed() { # the operator's Rack cache holds the Rack's latest spec
	local g
	g=$(k get rack "$RACK" -o jsonpath='{.metadata.generation} {.status.observedGeneration}')
	[[ ${g% *} == "${g#* }" ]]
}
stack_cond() { ustatus "$UP" '[.status.conditions[] | select(.type == "RackStackSet") | "\(.status) \(.reason)"]'; }
stack_applied() { [[ $(stack_cond) == '["True Applied"]' ]]; }
wait_for 30 spec_stack_is "$TO"
check "happy: the Rack's spec.matrix.stack moved to $TO" $? "$(spec_stack)"
mf=$(k get rack "$RACK" -o json --show-managed-fields | jq -c '[.metadata.managedFields[] |
	select(.fieldsV1["f:spec"]["f:matrix"]["f:stack"] != null) | {manager, operation}]')
[[ $mf == '[{"manager":"nvl72-operator","operation":"Apply"}]' ]]
check "happy: managedFields: nvl72-operator (Apply) alone owns f:spec.f:matrix.f:stack" $? "$mf"
wait_for 10 stack_applied && events_for "$RACK" | grep -qx RackStackSet &&
	events_for "$UP" | grep -qx RackStackSet
check "happy: condition RackStackSet True (Applied), RackStackSet events on the Rack and the upgrade" $? \
	"$(stack_cond) / rack: $(events_for "$RACK" | sort -u | tr '\n' ' ')"
out=$(k apply --server-side -f "$work/rack-$RACK.json" 2>&1)
rc=$?
[[ $rc != 0 && $out == *'conflict with "nvl72-operator"'* && $out == *.spec.matrix.stack* ]] &&
	spec_stack_is "$TO"
check "happy: a server-side apply of the Rack's manifest on $FROM conflicts, naming nvl72-operator" $? \
	"rc=$rc $out / spec: $(spec_stack)"
out=$(k patch rack "$RACK" --type=merge -p '{"spec":{"matrix":{"stack":"'"$FROM"'"}}}' 2>&1)
rc=$?
[[ $rc == 0 && $out == *"Warning: Rack \"$RACK\": spec.matrix.stack changes from $TO to $FROM outside a RackUpgrade; trays already running $TO are not moved"* ]] &&
	spec_stack_is "$FROM"
check "happy: a kubectl patch back to $FROM passes with the webhook's warning" $? "rc=$rc $out"
wait_for 30 rack_observed
rv1=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.resourceVersion}')
sleep 5
rv2=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.resourceVersion}')
[[ $rv1 == "$rv2" ]]
check "happy: no writes to the finished upgrade at steady state" $? "$rv1 -> $rv2"
spec_stack_is "$FROM"
check "happy: the operator leaves that change of the Rack's stack alone" $? "$(spec_stack)"
out=$(k patch rack "$RACK" --type=merge -p '{"spec":{"matrix":{"stack":"'"$TO"'"}}}' 2>&1)
rc=$?
[[ $rc == 0 && $out != *Warning* ]] && spec_stack_is "$TO"
check "happy: a patch catching the Rack up with $TO gets no warning" $? "rc=$rc $out"
out=$(k patch rack "$RACK" --type=merge -p '{"spec":{"matrix":{"stack":"'"$FROM"'"}}}' 2>&1) &&
	wait_for 30 rack_observed &&
	i=$(k get rackupgrade "$UP" -o json | jq '.status.conditions | map(.type) | index("RackStackSet")') &&
	out=$(k patch rackupgrade "$UP" --subresource=status --type=json -p \
		'[{"op":"test","path":"/status/conditions/'"$i"'/type","value":"RackStackSet"},
		  {"op":"remove","path":"/status/conditions/'"$i"'"}]' 2>&1) &&
	wait_for 30 spec_stack_is "$TO" && wait_for 30 stack_applied
check "happy: without RackStackSet (stopped before the apply) the next pass moves the Rack again and records it" $? \
	"$out / spec: $(spec_stack) / $(stack_cond)"
# A finished upgrade is not evaluated again for its rack's tray events
# (only for the Rack's and its own): GPU 1 of tray 5 reports LimitedCapacity
# and then Healthy again, and the operator logs nothing more for $UP, whose
# stale approval of the first upgrade of that name each of its passes
# would report again.
named() { grep -c "approval not counted.*upgrade=$UP " "$work/op.log"; }
# The passes the Rack's last changes brought are over: a second without a line.
settled() { local a; a=$(named); sleep 1; [[ $(named) == "$a" ]]; }
wait_for 20 settled
n1=$(named)
health5() { [[ $(trays_json | jq -r '.[] | select(.spec.index == 5) | .status.fabric.healthSummary') == "$1" ]]; }
simctl gpu "$(tray 5)" 1 health_mask=0x4A9 summary=3 >/dev/null && wait_for 20 health5 LimitedCapacity &&
	simctl gpu "$(tray 5)" 1 health_mask=0x1AA summary=1 >/dev/null && wait_for 20 health5 Healthy
rc=$?
n2=$(named)
((rc == 0 && n1 > 0 && n2 == n1))
check "finished: two tray reports bring no pass of the Completed $UP ($n1 -> $n2 lines naming it)" $? \
	"rc=$rc $(grep "upgrade=$UP " "$work/op.log" | tail -3 | cut -c1-300)"
# ------------------------------------- 4. switch trays out of band ---
TO2=gb300-r580-173 TO2_DRIVER=580.173.02
NVOS2=25.02.4317 STFW2=88.0002.1958 NMX2=1.3.0
oob_get() { sed -n "s/^$1=//p" "$rack/oob/state" 2>/dev/null; } # oob_get v.nvos.switch-3
approve_all() { # approve_all UPGRADE: the tenant the workload layer, the admin the rest
	local l out
	out=$(approve "$1") || return 1
	for l in $(ustatus "$1" '.status.requiredApprovals[]' | tr -d '"'); do
		[[ $l == workload ]] && continue
		out=$(approval "$1" "$l" "switch trays first" | k create -f - 2>&1) || { echo "$out"; return 1; }
	done
}
wait_for 30 stack_is "$TO"
check "the Rack reports stack $TO" $? "$(k get rack "$RACK" -o jsonpath='{.status.stack}')"
OOBF=r07-r580-173-fails
touch "$rack/oob/fail.nvos.switch-3"
t0=$SECONDS
out=$(TO=$TO2 upgrade "$OOBF" routine "  reason: NVOS and NMX 25.08 with driver 580.173" | k create -f - 2>&1)
check "create a RackUpgrade $TO -> $TO2 with an NVOS failure injected on switch tray 3" $? "$out"
wait_for 40 phase_is "$OOBF" AwaitingApproval && out=$(approve_all "$OOBF")
check "oob failure: every touched layer approves the manual edge" $? "$out $(ustatus "$OOBF" '.status | {phase, message}')"
wait_for 120 phase_in "$OOBF" Halted Completed Aborted
st=$(ustatus "$OOBF" '.status | {phase, message, s: .steps[0] | {action, phase, trays, message}}')
phase_is "$OOBF" Halted && jq -e '.s.action == "Apply" and .s.phase == "Failed" and .s.trays == [] and
	(.message | test("nvos on switch-3 to 25.02.4317 failed: .*injected"))' <<<"$st" >/dev/null
check "oob failure: Halted, the rack-wide step Failed with the backend's message ($((SECONDS - t0))s)" $? "$st"
events_for "$OOBF" | grep -qx OutOfBandFailed
check "oob failure: an OutOfBandFailed event" $? "$(events_for "$OOBF" | sort -u | tr '\n' ' ')"
drivers=$(trays_json | jq -c '[.[].spec.driver.version // empty, .[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]] && released
check "oob failure: no tray touched (drivers, maintenance, cordons)" $? "$drivers"
k patch rackupgrade "$OOBF" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 60 phase_is "$OOBF" Aborted && released
check "oob failure: abort ends it" $? "$(ustatus "$OOBF" '.status | {phase, message}')"
k delete rackupgrade "$OOBF" >/dev/null 2>&1
rm -f "$rack/oob/fail.nvos.switch-3"

# ------------------------------------------------ 5. the retry ---
OOBU=r07-r580-173
t0=$SECONDS
out=$(TO=$TO2 upgrade "$OOBU" routine "  reason: NVOS and NMX 25.08 with driver 580.173" | k create -f - 2>&1)
check "create the RackUpgrade $TO -> $TO2 again, the failure cleared" $? "$out"
wait_for 40 phase_is "$OOBU" AwaitingApproval && out=$(approve_all "$OOBU")
check "oob: every touched layer approves" $? "$out"
wait_for 300 phase_in "$OOBU" Completed Halted Aborted
phase_is "$OOBU" Completed
check "oob: Completed ($((SECONDS - t0))s)" $? "$(ustatus "$OOBU" '.status | {phase, message}')"
bad=""
for n in $(seq 1 9); do
	v="$(oob_get "v.nvos.switch-$n") $(oob_get "v.switchTrayFirmware.switch-$n") $(oob_get "v.nmx.switch-$n")"
	[[ $v == "$NVOS2 $STFW2 $NMX2" ]] || bad+=" switch-$n:$v"
done
[[ -z $bad ]]
check "oob: every switch tray runs NVOS $NVOS2, firmware $STFW2, NMX $NMX2" $? "$bad"
bad=""
for n in $(seq 1 9); do
	for c in nvos switchTrayFirmware nmx; do
		want=1
		[[ $c.$n == nvos.3 ]] && want=2 # the injected failure, then the retry
		[[ $(oob_get "n.$c.switch-$n") == "$want" ]] || bad+=" $c.switch-$n=$(oob_get "n.$c.switch-$n")"
	done
done
[[ -z $bad ]]
check "oob: each switch-tray update ran once (NVOS on switch tray 3: failed, then once more)" $? "$bad"
st=$(ustatus "$OOBU" '.status.steps | {oob: (.[0] | {action, phase, trays, components, n: (.operations | length), done: .completionTime}),
	drv: ([.[] | select(.action == "Apply" and (.components // [] | index("driver")))] | map(.startTime) | sort | .[0]),
	later: ([.[1:][] | select(.operations != null)] | length)}')
jq -e '.oob.action == "Apply" and .oob.phase == "Succeeded" and .oob.trays == [] and
	(.oob.components | sort) == ["nmx", "nvos", "switchTrayFirmware"] and .oob.n == 9 and .later == 0 and
	(.oob.done | fromdate) <= (.drv | fromdate)' <<<"$st" >/dev/null
check "oob: the switch trays moved once for the rack (step 0), finished before the first driver step started" $? "$st"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO2_DRIVER\"]" ]]
check "oob: every tray runs driver $TO2_DRIVER" $? "$drivers"
evs=$(events_for "$OOBU" | sort -u | tr '\n' ' ')
[[ $evs == *OutOfBandStarted* && $evs == *OutOfBandSucceeded* ]]
check "oob: OutOfBandStarted and OutOfBandSucceeded events" $? "$evs"
wait_for 30 stack_is "$TO2"
check "oob: the Rack reports stack $TO2" $? "$(k get rack "$RACK" -o jsonpath='{.status.stack}')"
wait_for 30 spec_stack_is "$TO2"
check "oob: the Rack's spec.matrix.stack moved on to $TO2" $? "$(spec_stack) / $(ustatus "$OOBU" .status.conditions)"

grep -qi 'token\|bearer' "$work/op.log" && ! grep -q "$token" "$work/op.log"
[[ $(grep -c -- "$token" "$work/op.log") == 0 ]]
check "no token in the operator log" $? ""
echo "# suite time $((SECONDS - t0_all))s"
finish
