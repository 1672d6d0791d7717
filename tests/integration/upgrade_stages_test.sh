#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A RackUpgrade whose plan moves the switch trays between two driver steps,
# against a real kube-apiserver: one operator with its simulated
# out-of-band backend (--oob-backend sim on the rack folder), the sample
# gb300 matrix, a Rack of 18 simulated trays with a real agent each and a
# 2-tray canary. From gb300-r580-95 to gb300-r580-173 the plan is the driver
# to 580.159.03 (the edge to gb300-r580-159), then NVOS, switch-tray firmware
# and NMX, then the driver to 580.173.02 (the manual edge on to
# gb300-r580-173). Switch trays are shared by the rack, so the upgrade runs
# in two stages:
#   1. every tray, canary first, takes the driver to 580.159.03;
#   2. a wave with no trays moves the nine switch trays once, each update
#      once, after every tray runs 580.159.03 and before any tray's second
#      driver step; then every tray, canary first and gated again, takes
#      580.173.02.
# Completed, every tray on 580.173.02 with its installer run exactly twice,
# the Rack on the target stack, no tray in maintenance.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-stages
TO=gb300-r580-173
MID_DRIVER=580.159.03 TO_DRIVER=580.173.02
NVOS=25.02.4317 STFW=88.0002.1958 NMX=1.3.0
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS

upg_crds
upg_nodes
upg_sim
op_start op --webhook-bind-address=0 \
	--oob-backend sim --oob-sim-root "$rack" --oob-sim-delay 1s
# The admin's group owns every window: its approvals count on the manual
# edge, which asks every touched layer.
upg_rack
upg_agents

approve_all() { # approve_all UPGRADE: every layer it asks for, as the admin
	local l out
	for l in $(ustatus "$1" '.status.requiredApprovals[]' | tr -d '"'); do
		out=$(approval "$1" "$l" "two stages" | k create -f - 2>&1) || { echo "$out"; return 1; }
	done
}
oob_get() { sed -n "s/^$1=//p" "$rack/oob/state" 2>/dev/null; } # oob_get v.nvos.switch-3

U=r07-r580-95-to-173
t0=$SECONDS
out=$(upgrade "$U" routine "  reason: driver, switch trays, driver" | k create -f - 2>&1)
check "create a routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$U" AwaitingApproval
plan=$(ustatus "$U" '[.status.plan.steps[].components | sort]')
[[ $plan == '[["driver"],["nmx","nvos","switchTrayFirmware"],["doca","driver"]]' ]]
check "the plan: the driver, then the switch trays, then the driver again" $? "$plan"
out=$(approve_all "$U")
check "every layer it asks for approves" $? "$out $(ustatus "$U" '.status | {phase, message}')"
wait_for 420 phase_in "$U" Completed Halted Aborted
phase_is "$U" Completed
check "$U Completed ($((SECONDS - t0))s)" $? "$(ustatus "$U" '.status | {phase, message}')"

# The record: the waves before the one with no trays cover every tray
# once, the canary first; so do the waves after it.
waves=$(ustatus "$U" '.status.waves as $w |
	(($w | map(.trays // [] | length) | .[1:] | index(0)) + 1) as $r |
	{r: $r, before: ([$w[:$r][].trays[]] | sort), after: ([$w[$r + 1:][].trays[]] | sort),
	first: $w[0].trays, again: $w[$r + 1].trays}')
jq -e '.r > 1 and .before == [range(1; 19)] and .after == [range(1; 19)] and
	.first == [1, 2] and .again == [1, 2]' <<<"$waves" >/dev/null
check "two stages of waves over all 18 trays, each from the canary, split by a wave with no trays" $? "$waves"
r=$(jq .r <<<"$waves")
order=$(k get rackupgrade "$U" -o json | jq -c --argjson r "$r" '.status.steps as $s |
	{rack: [$s[] | select(.wave == $r) | {action, phase, trays, components: (.components | sort), n: (.operations | length),
		start: .startTime, done: .completionTime}],
	before: ([$s[] | select(.wave < $r) | .completionTime] | max),
	after: ([$s[] | select(.wave > $r) | .startTime] | min),
	gates: [$s[] | select(.action == "Validate") | {wave, phase, passed: .evidence.passed}]}' 2>&1)
jq -e '(.rack | length) == 1 and .rack[0].action == "Apply" and .rack[0].phase == "Succeeded" and
	.rack[0].trays == [] and .rack[0].components == ["nmx", "nvos", "switchTrayFirmware"] and .rack[0].n == 9 and
	(.rack[0].start | fromdate) >= (.before | fromdate) and (.rack[0].done | fromdate) <= (.after | fromdate)' \
	<<<"$order" >/dev/null
check "the switch trays moved in one rack-wide step, after every step of stage 1 and before any of stage 2" $? "$order"
jq -e --argjson r "$r" '[.gates[] | .wave] == [0, $r + 1] and all(.gates[]; .phase == "Succeeded" and .passed)' \
	<<<"$order" >/dev/null
check "the canary's gate passed in each stage" $? "$(jq -c .gates <<<"$order")"

bad=""
for n in $(seq 1 9); do
	v="$(oob_get "v.nvos.switch-$n") $(oob_get "v.switchTrayFirmware.switch-$n") $(oob_get "v.nmx.switch-$n")"
	[[ $v == "$NVOS $STFW $NMX" ]] || bad+=" switch-$n:$v"
	for c in nvos switchTrayFirmware nmx; do
		[[ $(oob_get "n.$c.switch-$n") == 1 ]] || bad+=" $c.switch-$n=$(oob_get "n.$c.switch-$n")"
	done
done
[[ -z $bad ]]
check "every switch tray runs NVOS $NVOS, firmware $STFW, NMX $NMX, each update run once" $? "$bad"

# Each tray's installer: 580.159.03 once, then 580.173.02 once.
runs=""
for t in $(seq 1 18); do
	seq=$(sed -n 's/^run \([^ ]*\) .*/\1/p' "$(tray "$t")/driver/installer.log" 2>/dev/null | tr '\n' ' ')
	[[ $seq == "$MID_DRIVER $TO_DRIVER " ]] || runs+=" tray $t: [$seq]"
done
[[ -z $runs ]]
check "each tray's installer ran $MID_DRIVER once, then $TO_DRIVER once" $? "trays with other runs:$runs"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "every tray runs driver $TO_DRIVER" $? "$drivers"
events_for "$U" | grep -qx StageStarted
check "a StageStarted event" $? "$(events_for "$U" | sort -u | tr '\n' ' ')"
wait_for 30 stack_is "$TO"
check "the Rack reports stack $TO" $? "$(k get rack "$RACK" -o jsonpath='{.status.stack}')"
wait_for 30 released
check "every tray out of maintenance, no Node cordoned" $? "$(trays_json | jq -c '[.[].spec.maintenance]')"

echo "# upgrade_stages_test: $((SECONDS - t0_all))s"
finish
