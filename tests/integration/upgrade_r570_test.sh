#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# RackUpgrades of a rack on an R570 stack, whose trays' NVML (API 12) knows
# only v2 of the fabric info and so reports no health summary: the agents
# decide health from the mask (healthSource "mask"), and the upgrade's fabric
# waits and gate must accept that. One operator, a GB200 matrix made from the
# sample (plus an R570 patch stack), a Rack of 18 simulated trays with a real
# agent each:
#   1. R570 to R570 (570.158.01 to 570.211.01): the canary is still on API 12
#      after its driver change. A fault in canary tray 2 GPU 2's mask is a
#      definite Unhealthy once the fabric has settled: the canary's
#      WaitFabric fails and the upgrade halts, naming the tray and the GPU,
#      with no tray outside the canary touched and no gate run. Aborted, the
#      canary is released.
#   2. The fault cleared, the same move again completes on mask-derived
#      health (the canary trays already run the target).
#   3. R570 to R580 (the sample's manual edge, to 580.95.05): completes, and
#      the trays, now on API 13, report NVML's own summary.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-r570
RACK=gb200-r07
PLATFORM=gb200 MATRIX=gb200-r570-test
FROM=gb200-r570-158 TO=gb200-r570-211
FROM_DRIVER=570.158.01 TO_DRIVER=570.211.01
R580=gb200-r580-95 R580_DRIVER=580.95.05
MATRIX_FILE=/dev/null # set below, once the work folder exists
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS

# The sample GB200 matrix with a second R570 stack: 570.211.01 is a
# published R570 driver and IMEX package (nvidia-imex-570; NVIDIA/gpu-operator
# PR #2098 adds it). A safe patch edge to it, and from it the sample's manual
# edge on to R580.
MATRIX_FILE=$work/matrix.yaml
yq -y --arg m "$MATRIX" --arg f "$FROM" --arg t "$TO" --arg d "$TO_DRIVER" --arg r "$R580" '
	.metadata.name = $m |
	.spec.stacks += [.spec.stacks[] | select(.name == $f) | .name = $t |
		.components.driver.version = $d | .components.imex = $d] |
	.spec.transitions += [
		{from: $f, to: $t, verdict: "safe", reversible: true,
			steps: [{components: ["driver"], requiresDrain: true}],
			notes: "Driver patch inside R570; IMEX restarts with the driver."},
		(.spec.transitions[] | select(.from == $f and .to == $r) | .from = $t)]' \
	deploy/samples/compatibilitymatrix-gb200.yaml >"$MATRIX_FILE"
check "a GB200 matrix with stacks $FROM, $TO and $R580" $? "$(head -3 "$MATRIX_FILE")"

upg_crds
upg_nodes
op_start op --webhook-bind-address=0
# The admin's group owns every window: its approvals count, also on the
# manual edge.
upg_rack
upg_agents

masked() { # masked SOURCE: every GPU of the rack Healthy with that healthSource
	trays_json | jq -e --arg s "$1" '[.[].status.gpus[]? | select(.fabric.healthSummary == "Healthy" and
		.fabric.healthSource == $s)] | length == 72' >/dev/null
}
masked mask
check "on R570 every GPU is Healthy from its health mask (NVML API 12)" $? \
	"$(trays_json | jq -c '[.[].status.gpus[]?.fabric | "\(.healthSummary)/\(.healthSource)"] | group_by(.) | map("\(.[0]) \(length)")')"

tray2=$(trays_json | jq -r '.[] | select(.spec.index == 2) | .metadata.name')
approve_all() { # approve_all UPGRADE: every layer it asks for, as the admin
	local l out
	for l in $(ustatus "$1" '.status.requiredApprovals[]' | tr -d '"'); do
		out=$(approval "$1" "$l" "R570 trays" | k create -f - 2>&1) || { echo "$out"; return 1; }
	done
}
wait_fabric_msg() { ustatus "$1" '[.status.steps[] | select(.action == "WaitFabric" and .wave == 0)][0].message' | jq -r .; }

# ------------------------------------------- 1. R570 to R570, a fault ---
U1=r07-r570-211
# Tray 2's installer takes 5 s, so the fault below is in its mask before
# the new driver runs and WaitFabric can judge it, however slow this
# shell is to write it.
simctl installer-delay "$(tray 2)" 5000
t0=$SECONDS
out=$(upgrade "$U1" routine | k create -f - 2>&1)
check "create a routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$U1" AwaitingApproval && out=$(approve_all "$U1")
check "approve it" $? "$out $(ustatus "$U1" '.status | {phase, message}')"
# Once the operator asks canary tray 2 for the new driver, a route goes
# unhealthy on its GPU 2 (bits 4..5 of the mask = 1).
asked2() { [[ $(k get computetray "$tray2" -o jsonpath='{.spec.driver.version}') == "$TO_DRIVER" ]]; }
wait_for 120 asked2
check "the canary's tray 2 is asked for driver $TO_DRIVER" $? "$(ustatus "$U1" '.status | {phase, message}')"
simctl gpu "$(tray 2)" 2 health_mask=0x9A
fault="fabric fault on trays 2 (tray 2: GPU 2: Unhealthy from the health mask (routeUnhealthy))"
wait_for 300 phase_in "$U1" Completed Halted Aborted
phase_is "$U1" Halted && [[ $(ustatus "$U1" .status.message | jq -r .) == *"(WaitFabric, wave 0) failed: $fault"* ]]
check "a fault in GPU 2's mask halts the upgrade at the canary, naming tray 2 and GPU 2 ($((SECONDS - t0))s)" $? \
	"$(ustatus "$U1" '.status | {phase, message}')"
[[ $(wait_fabric_msg "$U1") == "$fault" ]] &&
	[[ $(ustatus "$U1" '[.status.steps[] | select(.wave == 0 and .action == "Validate")][0].phase' | jq -r .) == Pending ]]
check "the canary's WaitFabric failed with the GPU's fault; the gate never ran" $? \
	"$(wait_fabric_msg "$U1") / $(ustatus "$U1" '[.status.steps[] | select(.wave == 0) | {action, phase}]')"
events_for "$U1" | grep -qx Halted
check "a Halted event" $? "$(events_for "$U1" | tr '\n' ' ')"
simctl installer-delay "$(tray 2)" 0
others=$(trays_json | jq -c --arg d "$FROM_DRIVER" '[.[] | select(.spec.index > 2) |
	select((.spec.driver.version // $d) != $d or .status.driver.version != $d or
	(.spec.maintenance.state // "None") != "None") |
	{i: .spec.index, spec: .spec.driver.version, status: .status.driver.version, maint: .spec.maintenance}]')
[[ $others == "[]" ]]
check "no tray outside the canary touched" $? "$others"
k patch rackupgrade "$U1" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 60 phase_is "$U1" Aborted && wait_for 30 released
check "abort releases the held canary" $? "$(ustatus "$U1" '.status | {phase, message}')"
simctl gpu "$(tray 2)" 2 health_mask=0x1AA
wait_for 60 masked mask
check "the fault cleared, every GPU Healthy from its mask again" $? \
	"$(trays_json | jq -c '[.[].status.gpus[]?.fabric | "\(.healthSummary)/\(.healthSource)"] | group_by(.) | map("\(.[0]) \(length)")')"

# --------------------------------------- 2. the same move, no fault ---
U1B=r07-r570-211-again
t0=$SECONDS
out=$(upgrade "$U1B" routine | k create -f - 2>&1)
check "create the move $FROM -> $TO again" $? "$out"
wait_for 60 phase_is "$U1B" AwaitingApproval && out=$(approve_all "$U1B")
check "approve it" $? "$out $(ustatus "$U1B" '.status | {phase, message}')"
wait_for 300 phase_in "$U1B" Completed Halted Aborted
phase_is "$U1B" Completed
check "$U1B Completed on mask-derived health ($((SECONDS - t0))s)" $? \
	"$(ustatus "$U1B" '.status | {phase, message}')"
[[ $(wait_fabric_msg "$U1B") == "fabric Completed and Healthy on 2 trays (2 from the health mask)" ]]
check "the canary's WaitFabric says its health came from the mask" $? "$(wait_fabric_msg "$U1B")"
ev=$(ustatus "$U1B" '.status.steps[] | select(.action == "Validate") | .evidence | "\(.passed) \(.fabricState)"')
[[ $ev == '"true Completed"' ]]
check "the gate passed with the fabric Completed" $? "$ev"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]] && masked mask
check "every tray on $TO_DRIVER, still Healthy from the mask" $? "$drivers"
wait_for 30 stack_is "$TO"
check "the Rack reports stack $TO" $? "$(k get rack "$RACK" -o jsonpath='{.status.stack}')"

# ------------------------------------------------ 3. R570 to R580 ---
U2=r07-r580-95
t0=$SECONDS
out=$(TO=$R580 upgrade "$U2" routine "  reason: branch change to R580" | k create -f - 2>&1)
check "create a RackUpgrade $TO -> $R580 (a manual edge)" $? "$out"
wait_for 60 phase_is "$U2" AwaitingApproval && out=$(approve_all "$U2")
check "every layer it asks for approves" $? "$out $(ustatus "$U2" '.status | {phase, message}')"
wait_for 300 phase_in "$U2" Completed Halted Aborted
phase_is "$U2" Completed
check "$U2 Completed ($((SECONDS - t0))s)" $? "$(ustatus "$U2" '.status | {phase, message}')"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
summary() { masked summary; }
[[ $drivers == "[\"$R580_DRIVER\"]" ]] && wait_for 30 summary
check "every tray on $R580_DRIVER, now with NVML's own summary (API 13)" $? \
	"$drivers $(trays_json | jq -c '[.[].status.gpus[]?.fabric.healthSource] | unique')"
released
check "every tray out of maintenance, no Node cordoned" $? "$(trays_json | jq -c '[.[].spec.maintenance]')"

echo "# upgrade_r570_test: $((SECONDS - t0_all))s"
finish
