#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two racks upgrading at once against a real kube-apiserver: one operator, the
# sample matrix, and two Racks of 18 simulated trays each with a real agent per
# tray, each rack its own simulator, loopback addresses and fabric identity
# (cluster UUID and chassis serial). Both get a routine RackUpgrade from
# gb300-r580-95 to gb300-r580-159 at the same moment; the first rack's
# simulated bus bandwidth is under the gate's floor. The first must halt at
# its canary gate, with the evidence kept and a GateFailed event, leaving every
# tray outside its canary untouched; the second must complete regardless, all
# its trays on the new driver and released.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-tworacks
RACK=gb300-r07
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS
R1=gb300-r07 R2=gb300-r08
rack_add "$R2" "$(ip_slot 4)" 9d27c4e0-5b1a-4f3e-a6c8-0e4b7d2f9a15 1821124000043

upg_crds
for r in "$R1" "$R2"; do
	use_rack "$r"
	upg_nodes
done
op_start op --webhook-bind-address=0
# The admin's group owns every window (upg_rack): its approvals count.
for r in "$R1" "$R2"; do
	use_rack "$r"
	upg_rack
done
for r in "$R1" "$R2"; do
	use_rack "$r"
	upg_agents
done
use_rack "$R1" && c1=$CLIQUE
use_rack "$R2" && c2=$CLIQUE
n=$(k get computetrays -o json | jq -c '[.items[] | "\(.spec.rack) \(.status.fabric.cliqueID)"] |
	group_by(.) | map("\(.[0]) \(length)")')
[[ $n == "[\"$R1 $c1 18\",\"$R2 $c2 18\"]" ]]
check "each rack's 18 trays report their own fabric clique" $? "$n"

# ---------------------------------------------- both upgrades at once ---
use_rack "$R1" && simctl busbw "$rack" 300 >/dev/null
use_rack "$R2" && simctl busbw "$rack" 900 >/dev/null
U1=r07-r580-159 U2=r08-r580-159
t0=$SECONDS
use_rack "$R1" && out=$(upgrade "$U1" routine | k create -f - 2>&1) &&
	use_rack "$R2" && out=$(upgrade "$U2" routine | k create -f - 2>&1)
check "create a routine RackUpgrade for each rack ($R1 under the bandwidth floor)" $? "$out"
both_awaiting() { phase_is "$U1" AwaitingApproval && phase_is "$U2" AwaitingApproval; }
wait_for 60 both_awaiting
check "both upgrades wait for the workload layer's approval after the notice" $? \
	"$(phase "$U1") $(phase "$U2")"
out=$(approval "$U1" | k create -f - 2>&1) && out=$(approval "$U2" | k create -f - 2>&1)
check "approve both upgrades" $? "$out"

both_done() { phase_in "$U1" Halted Completed Aborted && phase_in "$U2" Completed Halted Aborted; }
wait_for 420 both_done
echo "# both upgrades ended after $((SECONDS - t0))s: $U1 $(phase "$U1"), $U2 $(phase "$U2")"

# ----------------------------------------------- rack 1: gate halted ---
use_rack "$R1"
phase_is "$U1" Halted
check "$R1: Halted when its canary's bandwidth is under the floor" $? \
	"$(ustatus "$U1" '.status | {phase, message}')"
ev=$(ustatus "$U1" '.status.steps[] | select(.action == "Validate") | .evidence')
[[ $(jq -r '"\(.passed) \(.busBandwidthGBps) \(.floorGBps)"' <<<"$ev") == "false 300 823" ]]
check "$R1: the Validate step keeps its evidence (300 GB/s, floor 823)" $? "$ev"
events_for "$U1" | grep -qx GateFailed
check "$R1: a GateFailed event" $? "$(events_for "$U1" | tr '\n' ' ')"
w=$(ustatus "$U1" '[.status.waves[]? | select(.index > 0 and (.startTime != null or
	(.phase // "Pending") != "Pending")) | .index]')
[[ $w == "[]" ]]
check "$R1: no wave after the canary started" $? "$w"
others=$(trays_json | jq -c --arg d "$FROM_DRIVER" '[.[] | select(.spec.index > 2) |
	select(.spec.driver.version != $d or .status.driver.version != $d or
		(.spec.maintenance.state // "None") != "None" or .spec.validation != null) | .spec.index]')
cordoned=$(k get nodes -o json | jq -c --arg r "$R1-" '[.items[] | select(.metadata.name | startswith($r)) |
	select(.spec.unschedulable == true or .metadata.labels["nvl72.io/maintenance"] != null) | .metadata.name]')
[[ $others == "[]" && $cordoned == "[\"$(node 1)\",\"$(node 2)\"]" ]]
rc=$?
check "$R1: no tray outside the canary touched (driver, maintenance, validation, Node); the canary held" $rc \
	"others=$others cordoned=$cordoned"
if ((rc != 0)); then
	# In full, to tell a tray really touched after the failed gate (a
	# safety defect) from a state read before it settled: each offending
	# tray's spec and status as they stand and when they last changed, each
	# cordoned Node's cordon owner and maintenance label, and the steps.
	echo "# the trays outside the canary that differ, in full:"
	trays_json | jq -c --argjson ix "$others" '.[] | select(.spec.index as $i | $ix | index($i)) |
		{name: .metadata.name, rv: .metadata.resourceVersion, managed: [.metadata.managedFields[]? |
		{manager, operation, time}], spec: {driver: .spec.driver, maintenance: .spec.maintenance,
		validation: .spec.validation}, status: {driver: .status.driver, validation: .status.validation}}'
	echo "# the rack's cordoned or labelled Nodes, in full:"
	k get nodes -o json | jq -c --arg r "$R1-" '.items[] | select(.metadata.name | startswith($r)) |
		select(.spec.unschedulable == true or .metadata.labels["nvl72.io/maintenance"] != null) |
		{name: .metadata.name, unschedulable: .spec.unschedulable,
		cordonedBy: .metadata.annotations["nvl72.io/cordoned-by"],
		maintenance: .metadata.labels["nvl72.io/maintenance"], managed: [.metadata.managedFields[]? |
		{manager, operation, time}]}'
	echo "# $U1's steps:"
	ustatus "$U1" '.status.steps[] | {index, wave, action, trays, phase, startTime, completionTime}'
	echo "# the operator's log lines naming those trays or Nodes:"
	for t in $(jq -r '.[]' <<<"$others"); do grep -h -- "$(node "$t")" "$work"/op*.log | tail -5 | cut -c1-300; done
fi
canary=$(trays_json | jq -c '[.[] | select(.spec.index <= 2) | .spec.maintenance.state // "None"]')
[[ $(jq 'length == 2 and all(. != "None")' <<<"$canary") == true ]]
check "$R1: the canary trays stay in maintenance while halted" $? "$canary"

# ------------------------------------------- rack 2: completed anyway ---
use_rack "$R2"
phase_is "$U2" Completed
check "$R2: Completed while $R1 is halted" $? "$(ustatus "$U2" '.status | {phase, message}')"
drivers=$(trays_json | jq -c '[.[] | "\(.spec.driver.version) \(.status.driver.version)"] | unique')
[[ $drivers == "[\"$TO_DRIVER $TO_DRIVER\"]" ]]
check "$R2: all 18 trays run driver $TO_DRIVER (spec and status)" $? "$drivers"
st=$(ustatus "$U2" '.status | {w: (.waves | length),
	g: (.steps[] | select(.action == "Validate") | .evidence | "\(.passed) \(.busBandwidthGBps)"),
	bad: [.steps[] | select(.phase != "Succeeded" and .phase != "Skipped")] | length}')
[[ $(jq -r '"\(.w) \(.g) \(.bad)"' <<<"$st") == "5 true 900 0" ]]
check "$R2: gate passed at 900 GB/s, 1 canary + 4 waves, every step done" $? "$st"
released
check "$R2: every tray out of maintenance, no Node cordoned" $? \
	"$(trays_json | jq -c '[.[].spec.maintenance.state]')"
[[ $(k get rack "$R2" -o jsonpath='{.status.upgrade.name} {.status.upgrade.phase}') == "$U2 Completed" &&
	$(k get rack "$R1" -o jsonpath='{.status.upgrade.name} {.status.upgrade.phase}') == "$U1 Halted" ]]
check "each Rack's status.upgrade names its own upgrade and phase" $? \
	"$(k get racks -o json | jq -c '[.items[] | {(.metadata.name): .status.upgrade}]')"
events_for "$U2" | grep -qx GateFailed
check "$R2: no GateFailed event of its own" "$((1 - $?))" "$(events_for "$U2" | sort -u | tr '\n' ' ')"

# ------------------------------------------ rack 1: abort releases it ---
use_rack "$R1"
k patch rackupgrade "$U1" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 60 phase_is "$U1" Aborted && released
check "$R1: abort releases the held canary" $? "$(ustatus "$U1" '.status | {phase, message}')"
drivers=$(trays_json | jq -c '[.[] | select(.spec.index > 2) | .status.driver.version] | unique')
[[ $drivers == "[\"$FROM_DRIVER\"]" ]]
check "$R1: trays 3-18 still on driver $FROM_DRIVER" $? "$drivers"
echo "# suite time $((SECONDS - t0_all))s"
finish
