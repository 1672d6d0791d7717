#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A RackUpgrade's drain meets pods holding IMEX channel claims of our DRA
# driver, against a real kube-apiserver: a Rack of 18 simulated trays with
# a real agent each, drain policy Checkpoint, and kwok acting as the kubelet
# of the two canary Nodes so that pods bound there run and evicted pods
# really end. Two ranks of one ComputeDomain (team-a/train-4), one on each
# canary tray, each hold a ResourceClaim allocated by imex.nvl72.io from
# their Node's pool (created with kubectl, the allocation written through
# the status subresource as the scheduler would), and a third pod holds
# none:
#   - the canary's Drain step names every claim, its pod, the domain and
#     the Node in its message while the drain runs;
#   - the checkpoint handshake applies to the claim holders: rank-0 that
#     acknowledged is held with its gang while rank-1, on the other tray
#     of the wave, has not; the pod without a claim goes at once;
#   - a PodDisruptionBudget applies: rank-0's refuses its eviction once the
#     gang may go, and the step says so (still naming the claims) until
#     the budget is deleted;
#   - the step ends Succeeded with the claims still named.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (NVL72_K8S_BIN names the folder holding kwok). Prints
# `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-claims
RACK=gb300-r07
. "$(dirname "$0")/lib/upgrade_env.sh"
: "${NVL72_K8S_BIN:?NVL72_K8S_BIN must name the folder holding kwok}"
t0_all=$SECONDS
PNS=team-a
CD=train-4
CD_UID=5d0c3a8e-1f52-4c8b-9e7a-2b6f4d1c9a07 # the domainUID the claims' config names
DEADLINE_S=240

upg_crds
upg_nodes
k create namespace "$PNS" >/dev/null 2>&1
upg_kwok 1 2

op_start op --webhook-bind-address=0
upg_rack '.spec.policy.drain = {mode: "Checkpoint", checkpointDeadline: "'"$DEADLINE_S"'s", evictionDeadline: "10m"}'
upg_agents
simctl busbw "$rack" 900 >/dev/null

# ------------------------------------------------ claims and pods ---
params='{"apiVersion":"nvl72.io/v1alpha1","kind":"ImexChannelConfig","domainUID":"'"$CD_UID"'","domain":"'"$PNS/$CD"'","allocationMode":"Single"}'
claim() { # claim NAME: a ResourceClaim from the domain's request and config
	jq -n --arg n "$1" --arg ns "$PNS" --argjson p "$params" '{apiVersion: "resource.k8s.io/v1",
		kind: "ResourceClaim", metadata: {name: $n, namespace: $ns}, spec: {devices: {
		requests: [{name: "channel", exactly: {deviceClassName: "imex-channel.nvl72.io",
			allocationMode: "ExactCount", count: 1}}],
		config: [{requests: ["channel"], opaque: {driver: "imex.nvl72.io", parameters: $p}}]}}}' |
		k create -f - 2>&1
}
pod() { # pod NAME NODE [CLAIM]: a pod bound to NODE, holding CLAIM
	jq -n --arg n "$1" --arg ns "$PNS" --arg node "$2" --arg c "${3:-}" '{apiVersion: "v1",
		kind: "Pod", metadata: {name: $n, namespace: $ns, labels: {app: $n}},
		spec: {nodeName: $node, terminationGracePeriodSeconds: 5,
			containers: [{name: "c", image: "registry.example/trainer:1.4"}]}} |
		if $c == "" then . else
			.spec.resourceClaims = [{name: "channel", resourceClaimName: $c}] |
			.spec.containers[0].resources = {claims: [{name: "channel"}]} end' |
		k create -f - 2>&1
}
# allocate CLAIM POD NODE: the allocation the scheduler would write: slot-0
# of NODE's pool of imex.nvl72.io, with the claim's config, reserved for POD.
allocate() {
	local uid
	uid=$(k -n "$PNS" get pod "$2" -o jsonpath='{.metadata.uid}') || return 1
	k -n "$PNS" patch resourceclaim "$1" --subresource=status --type=merge -p '{"status":{
		"allocation":{"devices":{
			"results":[{"request":"channel","driver":"imex.nvl72.io","pool":"'"$3"'","device":"slot-0"}],
			"config":[{"source":"FromClaim","requests":["channel"],"opaque":{"driver":"imex.nvl72.io","parameters":'"$params"'}}]}},
		"reservedFor":[{"resource":"pods","name":"'"$2"'","uid":"'"$uid"'"}]}}' 2>&1
}
out=$(claim rank-0-channel) && out=$(claim rank-1-channel) &&
	out=$(pod rank-0 "$(node 1)" rank-0-channel) && out=$(pod rank-1 "$(node 2)" rank-1-channel) &&
	out=$(pod plain "$(node 2)") &&
	out=$(allocate rank-0-channel rank-0 "$(node 1)") && out=$(allocate rank-1-channel rank-1 "$(node 2)")
check "two ranks of $PNS/$CD hold claims allocated by imex.nvl72.io on the canary's two Nodes; a third pod holds none" $? "$out"
alloc=$(k -n "$PNS" get resourceclaims -o json | jq -c '[.items[] | .status.allocation.devices.results[0] | [.driver, .pool]]')
[[ $alloc == "[[\"imex.nvl72.io\",\"$(node 1)\"],[\"imex.nvl72.io\",\"$(node 2)\"]]" ]]
check "the apiserver stored both allocations" $? "$alloc"
running() { [[ $(k -n "$PNS" get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length') == 3 ]]; }
wait_for 60 running
check "kwok runs the three pods" $? "$(k -n "$PNS" get pods -o wide 2>&1)"

# rank-0's budget allows no disruption (the disruption controller is not
# part of the test control plane: its status is written as it would).
out=$(k -n "$PNS" create poddisruptionbudget rank-0 --selector=app=rank-0 --min-available=1 2>&1) &&
	gen=$(k -n "$PNS" get pdb rank-0 -o jsonpath='{.metadata.generation}') &&
	out=$(k -n "$PNS" patch pdb rank-0 --subresource=status --type=merge -p \
		'{"status":{"observedGeneration":'"$gen"',"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}' 2>&1)
check "a PodDisruptionBudget that allows no disruption of rank-0" $? "$out"

# ------------------------------------------------------- the upgrade ---
UP=r07-claims
t0=$SECONDS
out=$(upgrade "$UP" routine | k create -f - 2>&1)
check "create the routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$UP" AwaitingApproval
out=$(approval "$UP" | k create -f - 2>&1)
check "approve it after the notice" $? "$out"

pod_ann() { k -n "$PNS" get pod "$1" -o json 2>/dev/null | jq -r --arg a "$2" '.metadata.annotations[$a] // empty'; }
asked() { [[ -n $(pod_ann "$1" nvl72.io/checkpoint-requested) ]]; }
gone() { ! k -n "$PNS" get pod "$1" >/dev/null 2>&1; }
deleting() { [[ -n $(k -n "$PNS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) ]]; }
drain_step() { ustatus "$UP" '[.status.steps[] | select(.wave == 0 and .action == "Drain")][0]'; }
step_msg() { drain_step | jq -r '.message // ""'; }
note="pulled from under allocated imex.nvl72.io claims"
c0="ResourceClaim $PNS/rank-0-channel of pod $PNS/rank-0 (ComputeDomain $PNS/$CD, node $(node 1))"
c1="ResourceClaim $PNS/rank-1-channel of pod $PNS/rank-1 (ComputeDomain $PNS/$CD, node $(node 2))"
names_claims() { local m; m=$(step_msg); [[ $m == *"$note: "* && $m == *"$c0"* && $m == *"$c1"* ]]; }
all_asked() { asked rank-0 && asked rank-1 && asked plain; }

wait_for 120 all_asked
check "the canary's drain asks both claim holders and the plain pod to checkpoint ($((SECONDS - t0))s)" $? \
	"$(k -n "$PNS" get pods -o json | jq -c '[.items[] | {(.metadata.name): .metadata.annotations}]')"
wait_for 30 names_claims
check "the Drain step's message names each claim, its pod, the ComputeDomain and the Node" $? "$(step_msg)"
[[ $(ustatus "$UP" '.status.message') == *"$note"* ]]
check "so does the upgrade's message" $? "$(ustatus "$UP" '.status.message')"

out=$(k -n "$PNS" annotate pod rank-0 nvl72.io/checkpoint-done=step-40 2>&1) &&
	out=$(k -n "$PNS" annotate pod plain nvl72.io/checkpoint-done=nothing 2>&1)
check "rank-0 and the plain pod acknowledge" $? "$out"
wait_for 60 gone plain
check "the pod without a claim is evicted at once" $? "$(k -n "$PNS" get pods -o wide 2>&1)"
held() { [[ $(step_msg) == *"1 held with their gang"* && $(step_msg) == *"$c0"* ]]; }
wait_for 60 held
rc=$?
! deleting rank-0 && ! deleting rank-1
check "rank-0 is held with its gang while rank-1, on the other tray of the wave, has not acknowledged" \
	$((rc + $?)) "$(step_msg)"

out=$(k -n "$PNS" annotate pod rank-1 nvl72.io/checkpoint-done=step-40 2>&1)
check "rank-1 acknowledges" $? "$out"
wait_for 60 gone rank-1
check "the gang may go: rank-1 is evicted" $? "$(k -n "$PNS" get pods -o wide 2>&1)"
refused() { local m; m=$(step_msg); [[ $m == *"pod $PNS/rank-0: eviction refused by a PodDisruptionBudget"* && $m == *"$c0"* ]]; }
wait_for 60 refused
rc=$?
! deleting rank-0 && [[ $(drain_step | jq -r .phase) == Running ]]
check "rank-0's PodDisruptionBudget refuses its eviction; the step says so and still names its claim" \
	$((rc + $?)) "$(step_msg)"

out=$(k -n "$PNS" delete pdb rank-0 2>&1)
check "delete the budget" $? "$out"
wait_for 60 gone rank-0
check "rank-0 is evicted" $? "$(k -n "$PNS" get pods -o wide 2>&1)"
drained() { [[ $(drain_step | jq -r .phase) == Succeeded ]]; }
wait_for 60 drained
rc=$?
m=$(step_msg)
((rc == 0)) && [[ $m == *"drained"* && $m == *"$note"* && $m == *"rank-0-channel"* ]]
check "the Drain step ends Succeeded and its record keeps the claims it pulled trays from under" $? "$m"
wait_for 240 phase_in "$UP" Completed Halted Aborted
phase_is "$UP" Completed
check "the upgrade goes on to Completed ($((SECONDS - t0))s)" $? "$(ustatus "$UP" '.status | {phase, message}')"
echo "# suite time $((SECONDS - t0_all))s"
finish
