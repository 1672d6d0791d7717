#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The checkpoint drain inside a RackUpgrade against a real kube-apiserver: a
# Rack of 18 simulated trays with a real agent each, its drain policy
# Checkpoint with a 30 s checkpointDeadline, and kwok acting as the kubelet
# of the two canary Nodes, so that pods bound there run and evicted pods
# really end. kwok keeps those Nodes Ready (its stages keep the addresses
# the suite set); the agents never write Node status. Three pods on the
# canary:
#   ack      acknowledges: the suite sets nvl72.io/checkpoint-done once it
#            sees nvl72.io/checkpoint-requested; evicted before the deadline;
#   silent   never acknowledges; evicted at the deadline, not before;
#   guarded  has nothing to save (checkpoint-done from the start) but a
#            PodDisruptionBudget forbids its eviction: the canary wave holds
#            in its Drain step, which says so, until the drain's deadline
#            (the Rack's evictionDeadline of 60 s plus the checkpointDeadline)
#            passes; then the upgrade halts naming the pod and its budget,
#            with a DrainDeadlineExceeded event, and guarded keeps running;
# once the budget is deleted and spec.retry raised, the Drain step runs
# again and the upgrade goes on to Completed.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (NVL72_K8S_BIN names the folder holding kwok). Prints
# `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-drain
RACK=gb300-r07
. "$(dirname "$0")/lib/upgrade_env.sh"
: "${NVL72_K8S_BIN:?NVL72_K8S_BIN must name the folder holding kwok}"
t0_all=$SECONDS
PNS=team-a
DEADLINE_S=30
EVICT_S=60

upg_crds
upg_nodes
k create namespace "$PNS" >/dev/null 2>&1
upg_kwok 1 2

op_start op --webhook-bind-address=0
upg_rack '.spec.policy.drain = {mode: "Checkpoint", checkpointDeadline: "'"$DEADLINE_S"'s", evictionDeadline: "'"$EVICT_S"'s"}'
upg_agents
simctl busbw "$rack" 900 >/dev/null

# ---------------------------------------------------- the workload ---
pod() { # pod NAME NODE [METADATA_JSON]: a pod bound to NODE
	local m=${3:-}
	[[ -n $m ]] || m='{}'
	k create --dry-run=client -o json -f - <<YAML | jq --argjson m "$m" '.metadata += $m' | k create -f - 2>&1
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $PNS}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: registry.example/trainer:1.4}]
YAML
}
out=$(pod ack "$(node 1)") && out=$(pod silent "$(node 2)") &&
	out=$(pod guarded "$(node 2)" '{"labels":{"app":"guarded"},"annotations":{"nvl72.io/checkpoint-done":"nothing-to-save"}}')
check "three pods bound to the canary Nodes" $? "$out"
running() { [[ $(k -n "$PNS" get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length') == 3 ]]; }
wait_for 60 running
check "kwok runs them" $? "$(k -n "$PNS" get pods -o wide 2>&1)"
ready=$(k get node "$(node 1)" "$(node 2)" -o json | jq -c '[.items[] |
	[(.status.conditions[] | select(.type == "Ready") | .status),
	 (.status.addresses[] | select(.type == "InternalIP") | .address)]]')
[[ $ready == "[[\"True\",\"$(ip 1)\"],[\"True\",\"$(ip 2)\"]]" ]]
check "the canary Nodes stay Ready with the trays' addresses under kwok" $? "$ready"

# The disruption controller is not part of the test control plane: the
# budget's status is written as it would write it.
out=$(k -n "$PNS" create poddisruptionbudget guarded --selector=app=guarded --min-available=1 2>&1) &&
	gen=$(k -n "$PNS" get pdb guarded -o jsonpath='{.metadata.generation}') &&
	out=$(k -n "$PNS" patch pdb guarded --subresource=status --type=merge -p \
		'{"status":{"observedGeneration":'"$gen"',"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}' 2>&1)
check "a PodDisruptionBudget that allows no disruption of guarded" $? "$out"

# ------------------------------------------------------- the upgrade ---
UP=r07-checkpoint
t0=$SECONDS
out=$(upgrade "$UP" routine | k create -f - 2>&1)
check "create the routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$UP" AwaitingApproval
out=$(approval "$UP" | k create -f - 2>&1)
check "approve it after the notice" $? "$out"

pod_ann() { k -n "$PNS" get pod "$1" -o json 2>/dev/null | jq -r --arg a "$2" '.metadata.annotations[$a] // empty'; }
asked() { [[ -n $(pod_ann "$1" nvl72.io/checkpoint-requested) ]]; }
gone() { ! k -n "$PNS" get pod "$1" >/dev/null 2>&1; }
both_asked() { asked ack && asked silent; }
wait_for 120 both_asked
check "the canary's drain asks ack and silent to checkpoint ($((SECONDS - t0))s)" $? \
	"$(k -n "$PNS" get pods -o json | jq -c '[.items[] | {(.metadata.name): .metadata.annotations}]')"
deadline=$(pod_ann silent nvl72.io/checkpoint-requested)
deadline_s=$(date -u -d "$deadline" +%s 2>/dev/null || echo 0)
cordoned=$(k get node "$(node 1)" "$(node 2)" -o jsonpath='{.items[*].spec.unschedulable}')
[[ $cordoned == "true true" && $deadline_s -gt 0 ]]
check "both canary Nodes cordoned; the request carries the deadline ($deadline)" $? "$cordoned $deadline"

out=$(k -n "$PNS" annotate pod ack nvl72.io/checkpoint-done=step-1200 2>&1)
check "ack acknowledges" $? "$out"
wait_for 120 gone ack
rc=$?
now=$(date -u +%s)
present=$(k -n "$PNS" get pod silent -o jsonpath='{.metadata.name} {.metadata.deletionTimestamp}' 2>&1)
((rc == 0 && now < deadline_s)) && [[ $present == "silent " ]]
check "ack is evicted before the deadline; silent still runs untouched" $? \
	"rc=$rc now=$now deadline=$deadline_s silent=[$present]"
[[ -z $(pod_ann silent nvl72.io/checkpoint-done) ]]
check "silent never acknowledged" $? ""

wait_for $((DEADLINE_S + 120)) gone silent
rc=$?
now=$(date -u +%s)
((rc == 0 && now >= deadline_s))
check "silent is evicted once its deadline passed ($((now - deadline_s))s after it)" $? \
	"rc=$rc now=$now deadline=$deadline_s"

drain_step() { ustatus "$UP" '[.status.steps[] | select(.wave == 0 and .action == "Drain")][0]'; }
held() { [[ $(drain_step | jq -r .message) == *"refused by a PodDisruptionBudget"* ]]; }
wait_for 60 held
check "the Drain step's message names the budget's refusal" $? "$(drain_step)"
st=$(ustatus "$UP" '.status | {phase, message,
	later: [.steps[] | select(.action != "Drain" and (.phase // "Pending") != "Pending") | .action]}')
# The canary's trays still run the old driver and none is asked for the new
# one (a tray spec may name the old driver or none).
drv=$(trays_json | jq -c --arg to "$TO_DRIVER" '[.[] | select(.spec.index <= 2) |
	[.status.driver.version, (.spec.driver.version == $to)]] | unique')
[[ $(jq -r '"\(.phase) \(.later)"' <<<"$st") == "Canary []" &&
	$(jq -r .message <<<"$st") == *"PodDisruptionBudget"* && $drv == "[[\"$FROM_DRIVER\",false]]" &&
	$(drain_step | jq -r .phase) == Running ]]
check "the budget holds the canary wave in Drain; the upgrade's message says so" $? "$st $drv"
[[ $(k -n "$PNS" get pod guarded -o jsonpath='{.metadata.name} {.metadata.deletionTimestamp}') == "guarded " ]]
check "guarded still runs" $? ""

# The drain's deadline: the step's start plus evictionDeadline plus
# checkpointDeadline. Past it the upgrade halts; nothing is evicted
# against the budget.
started=$(date -u -d "$(drain_step | jq -r .startTime)" +%s 2>/dev/null || echo 0)
wait_for $((EVICT_S + DEADLINE_S + 120)) phase_is "$UP" Halted
rc=$?
now=$(date -u +%s)
st=$(ustatus "$UP" '.status | {phase, message}')
((rc == 0 && started > 0 && now >= started + EVICT_S + DEADLINE_S)) &&
	[[ $(drain_step | jq -r .phase) == Failed && $st == *"drain deadline passed (1m30s)"* &&
		$st == *"team-a/guarded"* && $st == *"PodDisruptionBudget"* ]]
check "past the drain's deadline ($((now - started))s after the step began) the upgrade halts naming the pod and its budget" \
	$? "rc=$rc started=$started now=$now $st"
events_for "$UP" | grep -qx DrainDeadlineExceeded
check "a DrainDeadlineExceeded event is recorded on the RackUpgrade" $? "$(events_for "$UP" | tr '\n' ' ')"
[[ $(k -n "$PNS" get pod guarded -o jsonpath='{.metadata.name} {.metadata.deletionTimestamp}') == "guarded " ]]
rc=$?
drv=$(trays_json | jq -c --arg to "$TO_DRIVER" '[.[] | [.status.driver.version, (.spec.driver.version == $to)]] | unique')
((rc == 0)) && [[ $drv == "[[\"$FROM_DRIVER\",false]]" ]]
check "halted: guarded still runs, no tray asked for the new driver" $? "$drv"

out=$(k -n "$PNS" delete pdb guarded 2>&1)
check "delete the PodDisruptionBudget" $? "$out"
out=$(k patch rackupgrade "$UP" --type=merge -p '{"spec":{"retry":1}}' 2>&1)
check "raise spec.retry" $? "$out"
out=$(k patch rackupgrade "$UP" --type=merge -p '{"spec":{"retry":0}}' 2>&1)
[[ $? != 0 && $out == *"retry can only be raised"* ]]
check "spec.retry cannot be lowered" $? "$out"
wait_for 240 phase_in "$UP" Completed Aborted
phase_is "$UP" Completed && gone guarded &&
	[[ $(ustatus "$UP" '.status.retried') == 1 ]] && events_for "$UP" | grep -qx Retried
check "the Drain step runs again; the upgrade goes on to Completed; guarded evicted ($((SECONDS - t0))s)" $? \
	"$(ustatus "$UP" '.status | {phase, message, retried}')"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "every tray runs driver $TO_DRIVER" $? "$drivers"
released
check "every tray out of maintenance, no Node cordoned" $? "$(trays_json | jq -c '[.[].spec.maintenance]')"
left=$(k -n "$PNS" get pods -o name 2>&1)
[[ -z $left ]]
check "no pod left on the canary" $? "$left"
echo "# suite time $((SECONDS - t0_all))s"
finish
