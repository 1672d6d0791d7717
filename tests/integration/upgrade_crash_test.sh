#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Crash safety of the RackUpgrade controller against a real kube-apiserver:
# the happy-path upgrade of upgrade_e2e_test.sh (18 simulated trays with real
# agents, a 2-tray canary, the workload layer's approval, waves of 4) run by
# two operator replicas under leader election while the leader is killed
# with SIGKILL right after each new status.phase appears and at three seeded
# random points inside the waves; the killed replica is restarted each time
# and the standby takes over. Once inside the waves, before those kills, the
# kube-apiserver itself is restarted (etcd kept) while the rollout runs. The upgrade must end as the uninterrupted run
# does (Completed, every tray on the new driver and out of maintenance, no
# Node cordoned, 1 canary + 4 waves) with no step performed twice: each
# tray's installer ran once, the canary's validation ran once per tray, and
# the status has no two Succeeded steps for the same action, wave and trays,
# and the Rack's spec.matrix.stack ends on the target (RackStackSet). Both
# replicas serve the admission webhook behind one address throughout.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
# NVL72_CRASH_SEED picks the random kill points (default 7).
set -u

UPG_WORK_NAME=upgrade-crash
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS
RANDOM=${NVL72_CRASH_SEED:-7}
LEASE=nvl72-operator

upg_crds
upg_nodes
# Both replicas serve the admission webhook, behind one address as a
# Service would put them: tests/integration/tcpfwd.py relays each connection
# to a replica that accepts it. The configurations name that address, so
# the Rack's spec.matrix.stack write at the end (RackStackSet) and the
# approval's stamp go through whichever replica is alive.
declare -A WPORT=([op-a]=$((wport + 1)) [op-b]=$((wport + 2)))
python3 tests/integration/tcpfwd.py --port "$wport" --backend "${WPORT[op-a]}" \
	--backend "${WPORT[op-b]}" --log "$work/fwd.log" 2>"$work/fwd.err" &
opids[fwd]=$!
out=$(upg_webhooks nvl72-upgrade-crash "https://127.0.0.1:$wport")
check "webhook configurations on one address (127.0.0.1:$wport) before both replicas" $? "$out"
replica() { # replica NAME: (re)start one replica
	op_start "$1" --webhook-bind-address="127.0.0.1:${WPORT[$1]}" \
		--webhook-secret=nvl72-upgrade-crash-tls --webhook-configuration=nvl72-upgrade-crash \
		--identity="$1" --leader-elect \
		--leader-election-namespace="$NS" --leader-election-id="$LEASE" \
		--leader-election-lease-duration=4s --leader-election-renew-deadline=3s \
		--leader-election-retry-period=500ms
}
replica op-a
replica op-b
wait_for 60 upg_bundled nvl72-upgrade-crash
check "the replicas share one webhook certificate and set both caBundles" $? "$(tail -3 "$work/op-a.log")"
holder() { k -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
leader() { # the name of the replica holding the Lease, when it is alive
	local h
	h=$(holder)
	h=${h%_*}
	[[ -n $h && -n ${opids[$h]:-} ]] && kill -0 "${opids[$h]}" 2>/dev/null && echo "$h"
}
has_leader() { [[ -n $(leader) ]]; }
wait_for 60 has_leader
rc=$? # before $(leader) sets $? anew
check "one of two replicas holds the leader Lease ($(leader))" $rc "$(holder)"
# The admin approves: every window owner is its group (upg_rack).
upg_rack
upg_agents
simctl busbw "$rack" 900 >/dev/null

kills=()
kill_leader() { # kill_leader WHY: SIGKILL the leader, restart it as a standby
	local l
	l=$(leader)
	[[ -n $l ]] || return 1
	kill -KILL "${opids[$l]}" 2>/dev/null
	wait "${opids[$l]}" 2>/dev/null
	kills+=("$1:$l")
	replica "$l"
}

UP=r07-crash
t0=$SECONDS
# earliestStart keeps it in Scheduled for a while, so that the phase is
# written and seen; 40 s leaves the notice (8 s) and the approval ample room.
out=$(upgrade "$UP" routine "  reason: driver patch release
  earliestStart: $(date -u -d '+40 seconds' +%FT%TZ)" | k create -f - 2>&1)
check "create the routine RackUpgrade $FROM -> $TO" $? "$out"
# Every write of the upgrade, as the watch sees it: its phase, one a line.
: >"$work/phases"
phase_watch() {
	"$KUBECTL" get rackupgrade "$UP" -w -o jsonpath='{.status.phase}{"\n"}' >>"$work/phases" 2>/dev/null &
	opids[watch]=$!
}
phase_watch

declare -A seen=()
approved=0 randoms=3 restarts=1 restarted="" deadline=$((SECONDS + 420))
while ((SECONDS < deadline)); do
	# The first phase of the watch not yet acted on.
	p=""
	while read -r q; do
		[[ -n $q && -z ${seen[$q]:-} ]] && { p=$q; break; }
	done <"$work/phases"
	if [[ -n $p ]]; then
		seen[$p]=1
		wait_for 30 has_leader
		kill_leader "phase $p"
		if [[ $p == AwaitingApproval ]] && ((approved == 0)); then
			approval "$UP" | k create -f - >/dev/null 2>&1 && approved=1
		fi
		[[ $p == Completed ]] && break
		continue
	fi
	cur=$(phase "$UP")
	if [[ $cur == Halted || $cur == Aborted ]]; then break; fi
	if [[ $cur == RollingOut && -n ${seen[RollingOut]:-} ]] && ((restarts > 0)); then
		# The apiserver restarted mid-wave: every watch and request of
		# both replicas and the agents breaks at once.
		wait_for 30 has_leader
		sleep "0.$((RANDOM % 10))"
		if [[ $(phase "$UP") == RollingOut ]]; then
			restarts=0
			w=$(ustatus "$UP" '[.status.waves[] | select(.phase == "Running") | .index] | first // "none"')
			if tests/cluster/cluster.sh restart-apiserver "$NVL72_CLUSTER_DIR" 2>"$work/restart.err"; then
				restarted="wave $w"
			else
				restarted="failed: $(tr '\n' ' ' <"$work/restart.err" | cut -c1-200)"
			fi
			kill "${opids[watch]}" 2>/dev/null
			phase_watch
		fi
		continue
	fi
	if [[ $cur == RollingOut && -n ${seen[RollingOut]:-} ]] && ((randoms > 0)); then
		# A random point inside the waves: 0 to 4 s after a leader is
		# back.
		wait_for 30 has_leader
		sleep "$((RANDOM % 4 + 0)).$((RANDOM % 10))"
		[[ $(phase "$UP") == RollingOut ]] && kill_leader "inside RollingOut" && randoms=$((randoms - 1))
		continue
	fi
	sleep 0.2
done
echo "# kills: ${kills[*]}"
phases=$(awk 'NF && !s[$0]++' "$work/phases" | tr '\n' ' ')
echo "# phases seen: $phases"
phase_is "$UP" Completed
check "Completed through ${#kills[@]} leader kills ($((SECONDS - t0))s)" $? \
	"$(ustatus "$UP" '.status | {phase, message}')"
want="Notice AwaitingApproval Scheduled Canary Validating RollingOut Completed"
missing=""
for q in $want; do [[ -n ${seen[$q]:-} ]] || missing+=" $q"; done
k3=$(printf '%s\n' "${kills[@]}" | grep -c 'inside RollingOut')
[[ -z $missing && $k3 == 3 ]]
check "a kill right after each of $want, and 3 inside the waves" $? \
	"missing:$missing random=$k3 kills=${kills[*]}"
[[ $restarted == "wave "* ]]
check "the apiserver restarted once inside RollingOut (running: $restarted)" $? "$restarted"

drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "every tray runs driver $TO_DRIVER" $? "$drivers"
wait_for 30 released
check "every tray out of maintenance, no Node cordoned" $? \
	"$(trays_json | jq -c '[.[].spec.maintenance.state]')"
st=$(ustatus "$UP" '.status | {w: (.waves | length), wd: ([.waves[] | select(.phase != "Succeeded")] | length),
	wp: [.waves[].phase],
	tr: [.waves[].trays[]] | sort, p: .canary.partition,
	bad: [.steps[] | select(.phase != "Succeeded" and .phase != "Skipped")] | length,
	gate: (.steps[] | select(.action == "Validate") | .evidence.passed)}')
[[ $(jq -c '[.w, .wd, (.tr == [range(1; 19)]), .p, .bad, .gate]' <<<"$st") == "[5,0,true,\"$CANARY\",0,true]" ]]
check "1 canary + 4 waves covering the 18 trays once, each wave and every step done, the gate passed" $? "$st"
dups=$(ustatus "$UP" '[.status.steps[] | select(.phase == "Succeeded") |
	{action, wave, trays: (.trays | sort), components}] | group_by(.) | map(select(length > 1) | .[0])')
nsteps=$(ustatus "$UP" '.status.steps | length')
[[ $dups == "[]" ]]
check "no two Succeeded steps for the same action, wave and trays ($nsteps steps)" $? "$dups"
[[ $(ustatus "$UP" '[.status.steps[].index] | length == (unique | length)') == true ]]
check "no step index recorded twice" $? "$(ustatus "$UP" '[.status.steps[].index]')"

runs=""
for t in $(seq 1 18); do
	n=$(grep -c "^run $TO_DRIVER " "$(tray "$t")/driver/installer.log" 2>/dev/null)
	a=$(grep -c '^run ' "$(tray "$t")/driver/installer.log" 2>/dev/null)
	[[ ${n:-0} == 1 && ${a:-0} == 1 ]] || runs+=" t$t:${a:-0}"
done
[[ -z $runs ]]
check "each tray's installer ran exactly once, for $TO_DRIVER" $? "trays with other counts:$runs"
vals=""
for t in $(seq 1 18); do
	n=$(grep -c '^run ' "$(tray "$t")/validation.runs" 2>/dev/null)
	want_n=0
	((t <= 2)) && want_n=1
	[[ ${n:-0} == "$want_n" ]] || vals+=" t$t:${n:-0}"
done
ids=$(trays_json | jq -c '[.[] | select(.spec.index <= 2) | [.spec.validation.id, .status.validation.id, .status.validation.phase]] | unique')
[[ -z $vals && $(jq 'length' <<<"$ids") == 1 && $(jq -r '.[0] | "\(.[0] == .[1]) \(.[2])"' <<<"$ids") == "true Succeeded" ]]
check "one validation id, run once on each canary tray and nowhere else" $? "runs:$vals ids=$ids"

# The leader was killed right after Completed appeared, before or after it
# applied the target to the Rack: either way the Rack ends on it, recorded
# once in RackStackSet.
stack_set() {
	[[ $(k get rack "$RACK" -o jsonpath='{.spec.matrix.stack}') == "$TO" &&
		$(ustatus "$UP" '[.status.conditions[] | select(.type == "RackStackSet") | .status]') == '["True"]' ]]
}
wait_for 30 stack_set
check "the Rack's spec.matrix.stack is $TO, recorded in RackStackSet, the leader killed right after Completed" $? \
	"$(k get rack "$RACK" -o jsonpath='{.spec.matrix.stack}') / $(ustatus "$UP" .status.conditions)"
rv1=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.resourceVersion}')
kill_leader "after Completed"
wait_for 30 has_leader
sleep 3
rv2=$(k get rackupgrade "$UP" -o jsonpath='{.metadata.resourceVersion}')
[[ $rv1 == "$rv2" ]]
check "a new leader writes nothing to the finished upgrade" $? "$rv1 -> $rv2"
# Admission still answers with the leader killed a moment ago.
kill_leader "before a last admission"
out=$(k label rack "$RACK" --dry-run=server example.com/probe=1 2>&1)
check "a Rack update is admitted right after the leader is killed (the other replica answers)" $? \
	"$(one_line "$out")"
na=$(grep -c " ${WPORT[op-a]}$" "$work/fwd.log")
nb=$(grep -c " ${WPORT[op-b]}$" "$work/fwd.log")
none=$(grep -c ' none$' "$work/fwd.log")
echo "# webhook connections through the one address: op-a $na, op-b $nb, refused by both: $none"
((na + nb > 0 && none == 0))
check "every webhook connection reached a live replica" $? "op-a $na op-b $nb none $none"
echo "# suite time $((SECONDS - t0_all))s"
finish
