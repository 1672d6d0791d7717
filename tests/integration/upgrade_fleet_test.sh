#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One RackUpgrade for the racks a label selector picks, against a real
# kube-apiserver: one operator, the sample matrix, and two Racks labelled
# nvl72.io/hall=b, of 18 simulated trays each with a real agent per tray.
#
# The operator serves its admission webhook, so the children pass it too.
#
# 0. A selector upgrade over a rack that has a one-rack upgrade in flight
#    is refused at admission, naming that upgrade.
# 1. gb300-r580-95 -> gb300-r580-159 with maxParallelRacks 2: one child
#    RackUpgrade per rack, owned by the parent and labelled with its name;
#    both racks hold a slot at once and both complete; the parent ends
#    Completed and each Rack's spec.matrix names the target.
# 2. back to gb300-r580-95 (a manual edge: every layer approves) one rack at
#    a time, the first rack's bandwidth under the floor on the old driver:
#    its child halts at the canary gate, its slot goes to the second rack,
#    which starts only after the first halted and completes, though one of
#    its trays' host tools outlasts --tool-timeout once (as on a busy host:
#    the agent tries the step again); the parent ends Halted naming the
#    halted rack. When the children's phases are not those, each child's
#    failed steps and gate evidence are printed. Aborting the parent aborts
#    the halted child, which releases its canary, and the parent ends
#    Aborted.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-fleet
RACK=gb300-r07
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS
R1=gb300-r07 R2=gb300-r08
rack_add "$R2" "$(ip_slot 4)" 6b0e2f71-3c8d-4a95-b1e4-7d2c9f0a5e38 1821124000044

upg_crds
# Children are created through the admission webhook, as in a cluster.
out=$(upg_webhooks nvl72-upgrade-fleet "https://127.0.0.1:$wport")
check "webhook configurations on 127.0.0.1:$wport" $? "$out"
for r in "$R1" "$R2"; do
	use_rack "$r"
	upg_nodes
done
op_start op --webhook-bind-address="127.0.0.1:$wport" \
	--webhook-secret=nvl72-upgrade-fleet-tls --webhook-configuration=nvl72-upgrade-fleet
wait_for 60 upg_bundled nvl72-upgrade-fleet
check "the operator serves its webhook and set both caBundles" $? "$(tail -5 "$work/op.log")"
# The webhook keeps switch-tray addresses unique across racks: the second
# rack's are 10.40.8.x and 10.41.8.x.
use_rack "$R1" && upg_rack '.metadata.labels = {"nvl72.io/hall": "b"}'
use_rack "$R2" && upg_rack '.metadata.labels = {"nvl72.io/hall": "b"} |
	.spec.switchTrays |= map(.oobAddress |= sub("^10\\.40\\.7\\."; "10.40.8.") |
		.bmcAddress |= sub("^10\\.41\\.7\\."; "10.41.8."))'
for r in "$R1" "$R2"; do
	use_rack "$r"
	upg_agents
done

# fleet NAME TARGET [extra spec lines]: a selector upgrade of hall b.
fleet() {
	cat <<YAML
apiVersion: nvl72.io/v1alpha1
kind: RackUpgrade
metadata: {name: $1}
spec:
  rackSelector: {matchLabels: {nvl72.io/hall: b}}
  target: {matrix: $MATRIX, stack: $2}
  class: routine
  canary: {soak: 3s}
${3:-}
YAML
}
kids() { k get rackupgrades -l "nvl72.io/parent-upgrade=$1" -o json; }
kid() { echo "$1-$2"; }
# approve_all CHILD: one approval per layer the child requires.
approve_all() {
	local l
	for l in $(ustatus "$1" '.status.requiredApprovals[]?' | tr -d '"'); do
		approval "$1" "$l" | k create -f - >/dev/null 2>&1 || return 1
	done
}
# kids_report PARENT: one comment line per child with its phase and
# message and its failed steps' messages and gate evidence, printed when a
# check on the children fails so that the output alone says why a rack
# halted (a failed check's reason is cut to 500 characters).
kids_report() {
	kids "$1" | jq -r '.items | sort_by(.metadata.name)[] | "# \(.metadata.name): " +
		({phase: .status.phase, message: .status.message, failed: [.status.steps[]? |
		select(.phase == "Failed") | {index, action, trays, message, evidence}]} | tojson)' 2>&1
}
awaiting() { phase_is "$(kid "$1" "$R1")" AwaitingApproval && phase_is "$(kid "$1" "$R2")" AwaitingApproval; }
both_done() { phase_in "$1" Completed Halted Aborted; }

# ------------------------ 0: a rack with an upgrade in flight refuses ---
use_rack "$R1"
out=$(upgrade r07-solo routine "  earliestStart: \"2030-01-01T00:00:00Z\"" | k create -f - 2>&1)
check "a one-rack upgrade of $R1, waiting for 2030" $? "$out"
P1=hall-b-r580-159
out=$(fleet "$P1" "$TO" | k create -f - 2>&1)
[[ $? != 0 && $out == *'rack "'$R1'" already has an upgrade in flight: RackUpgrade "r07-solo"'* ]]
check "a selector upgrade over $R1 is refused at admission, naming r07-solo" $? "$out"
k patch rackupgrade r07-solo --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 30 phase_is r07-solo Aborted
check "r07-solo aborted before it started" $? "$(phase r07-solo)"

# -------------------------------------------- 1: two racks at once ---
out=$(fleet "$P1" "$TO" "  maxParallelRacks: 2" | k create -f - 2>&1)
check "create a selector RackUpgrade of hall b to $TO, 2 racks at a time" $? "$out"
two_kids() { [[ $(kids "$P1" | jq '.items | length') == 2 ]]; }
wait_for 30 two_kids
uid=$(k get rackupgrade "$P1" -o jsonpath='{.metadata.uid}')
got=$(kids "$P1" | jq -c --arg uid "$uid" '[.items[] | {n: .metadata.name, r: .spec.rack,
	own: ([.metadata.ownerReferences[]? | select(.uid == $uid and .controller == true and
	.blockOwnerDeletion == true)] | length), sel: (.spec.rackSelector != null),
	soak: .spec.canary.soak}] | sort_by(.n)')
want='[{"n":"'$P1-$R1'","r":"'$R1'","own":1,"sel":false,"soak":"3s"},{"n":"'$P1-$R2'","r":"'$R2'","own":1,"sel":false,"soak":"3s"}]'
[[ $got == "$want" ]]
check "one child per rack, owned by the parent, the parent's spec for one rack" $? "$got"
picked=$(ustatus "$P1" '[.status.racks[] | "\(.name)=\(.upgrade)"]')
[[ $picked == '["'$R1=$P1-$R1'","'$R2=$P1-$R2'"]' ]]
check "the parent lists both racks and their children in status.racks" $? "$picked"
wait_for 60 awaiting "$P1"
check "both children serve their notice at once and wait for approval" $? \
	"$(kids "$P1" | jq -c '[.items[] | .status.phase]')"
approve_all "$P1-$R1" && approve_all "$P1-$R2"
check "approve both children" $? ""
t0=$SECONDS
wait_for 300 both_done "$P1"
echo "# $P1 ended after $((SECONDS - t0))s: $(phase "$P1")"
phase_is "$P1" Completed
check "$P1: Completed once both racks completed" $? "$(ustatus "$P1" '.status | {phase, message, racks}')"
s1=$(ustatus "$P1" '.status.racks[] | select(.name == "'$R2'") | .slotTime' | tr -d '"')
c1=$(ustatus "$P1-$R1" '.status.completionTime' | tr -d '"')
[[ -n $s1 && $s1 != null && $s1 < $c1 ]]
check "two slots: $R2 started ($s1) before $R1 completed ($c1)" $? "$s1 $c1"
for r in "$R1" "$R2"; do
	use_rack "$r"
	drivers=$(trays_json | jq -c '[.[] | .status.driver.version] | unique')
	[[ $drivers == "[\"$TO_DRIVER\"]" && $(k get rack "$r" -o jsonpath='{.spec.matrix.stack}') == "$TO" ]] && released
	check "$r: every tray on $TO_DRIVER and released; the Rack's spec.matrix names $TO" $? "$drivers"
done
# A repeated reason is one Event whose series count is written later
# (docs/operator.md, events): each reason is there once.
ev=$(events_for "$P1" | sort -u | tr '\n' ' ')
[[ $ev == *"RackStarted "* && $ev == *"RackUpgradeCreated "* && $ev == *"RacksPicked "* ]]
check "$P1: events RacksPicked, RackUpgradeCreated and RackStarted" $? "$ev"

# ------------------------- 2: one at a time, the first rack halts ---
use_rack "$R1" && simctl busbw "$rack" 300 "$FROM_DRIVER" >/dev/null
use_rack "$R2" && simctl busbw "$rack" 900 "$FROM_DRIVER" >/dev/null
# A busy host: the next systemctl stop of the persistence daemon on
# gb300-r08's tray 3 (its driver change in wave 1) outlasts the agents'
# --tool-timeout once. Its agent tries the step again; the rack completes.
stop_step=systemctl-stop-nvidia-persistenced.service
simctl step-delay "$(tray 3)" "$stop_step" 1500 1 >/dev/null
P2=hall-b-r580-95
out=$(fleet "$P2" "$FROM" | k create -f - 2>&1)
check "create a selector RackUpgrade of hall b back to $FROM, one rack at a time" $? "$out"
wait_for 60 awaiting "$P2"
check "both children wait for approval of the manual edge" $? \
	"$(kids "$P2" | jq -c '[.items[] | .status.phase]' 2>&1)"
approve_all "$P2-$R1" && approve_all "$P2-$R2"
check "approve every layer of both children" $? "$(ustatus "$P2-$R1" '.status.requiredApprovals')"
t0=$SECONDS
wait_for 300 both_done "$P2"
echo "# $P2 ended after $((SECONDS - t0))s: $(phase "$P2")"
phase_is "$P2" Halted && phase_is "$P2-$R1" Halted && phase_is "$P2-$R2" Completed
rc=$?
check "$P2: Halted with $R1 halted at its gate and $R2 Completed" $rc \
	"$(ustatus "$P2" '.status | {phase, message}') $(phase "$P2-$R1") $(phase "$P2-$R2")"
((rc == 0)) || kids_report "$P2"
msg=$(ustatus "$P2" '.status.message')
[[ $msg == *"1 of 2 racks Completed; halted: $R1 (Halted)"* ]]
check "$P2: its message names the halted rack" $? "$msg"
h1=$(ustatus "$P2-$R1" '.status.phaseTime' | tr -d '"')
s2=$(ustatus "$P2-$R2" '.metadata.annotations["nvl72.io/rack-slot"]' | tr -d '"')
st2=$(ustatus "$P2-$R2" '.status.startTime' | tr -d '"')
[[ -n $s2 && $s2 != null && ! $s2 < $h1 && ! $st2 < $h1 ]]
check "one slot: $R2 got it ($s2) and started ($st2) only after $R1 halted ($h1)" $? "$s2 $st2 $h1"
use_rack "$R2"
drivers=$(trays_json | jq -c '[.[] | .status.driver.version] | unique')
[[ $drivers == "[\"$FROM_DRIVER\"]" ]] && released
check "$R2: every tray back on $FROM_DRIVER and released while $R1 is halted" $? "$drivers"
timeouts=$(grep -c "target=$FROM_DRIVER phase=StoppingHolders err=NV_E_TIMEOUT" "$work/agent-$R2-3.log")
[[ $timeouts == 1 && ! -e $(tray 3)/delays/$stop_step ]]
check "$R2: tray 3's systemctl that outlasted --tool-timeout was tried again, not a halt" $? \
	"timeouts=$timeouts $(ustatus "$P2-$R2" '.status.message')"
k patch rackupgrade "$P2" --type=merge -p '{"spec":{"abort":true}}' >/dev/null
wait_for 60 phase_is "$P2" Aborted
check "$P2: abort passes to the halted child and the parent ends Aborted" $? \
	"$(ustatus "$P2" '.status | {phase, message}') $(phase "$P2-$R1")"
use_rack "$R1"
[[ $(ustatus "$P2-$R1" '.spec.abort') == true ]] && phase_is "$P2-$R1" Aborted && released
check "$R1: its child aborted and the canary released" $? \
	"$(ustatus "$P2-$R1" '{spec: .spec.abort, phase: .status.phase}')"
echo "# suite time $((SECONDS - t0_all))s"
finish
