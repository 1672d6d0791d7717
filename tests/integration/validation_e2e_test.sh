#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Validation runs end to end: two nvl72-agent processes on a simulated rack
# against a real kube-apiserver. Setting spec.validation.id on a tray makes
# its agent run the validation command (the simulator's nvl72-sim-validate)
# once and report the figure in status.validation; a lowered sim figure shows
# in the next id's run; garbage output and a missing command are reported
# Failed; a run cut by kill -9 is reported Failed, and no id runs twice
# across an agent restart.
#
# Runner contract: run from the repository root with KUBECONFIG (admin),
# KUBECTL and NVL72_CLUSTER_DIR set, against a fresh control plane. Prints
# `ok - NAME` / `not ok - NAME: WHY` and `N passed, M failed`; exits non-zero
# on a failure. Everything started here is stopped by the EXIT trap.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG
rel=${NVL72_BUILD:-$PWD/build/rel}
bin=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim

pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $(tr -s ' \t\n' ' ' <<<"$2" | cut -c1-600)"; fail=$((fail + 1)); }
finish() {
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }

if [[ ! -x $bin || ! -x $sim/bin/nvl72-sim-validate || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ nok "build the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-validation-e2e.XXXXXX)
rack=$work/rack
declare -A apid=()
cleanup() {
	local p f
	for p in "${apid[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/validation.runs; do
		[[ -f $f ]] || continue
		for p in $(cut -d' ' -f2 "$f"); do
			[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
		done
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ipbase=$((30 + ($$ % 8) * 25))
ns=nvl72-system
ip() { echo "127.0.0.$((ipbase + $1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$1"; }
name() { printf 'r1-t%02d' "$1"; }
simctl() { "$sim/bin/simctl" "$@"; }

out=$(k apply -f crds/ 2>&1) && k wait --for=condition=Established --timeout=60s \
	crd/computetrays.nvl72.io >/dev/null 2>&1 || { nok "apply crds/" "$out"; finish; }
k create namespace "$ns" >/dev/null 2>&1
simctl create "$rack" --trays 2 --ip-base "$ipbase" >/dev/null || { nok "simctl create" ""; finish; }
{
	for t in 1 2; do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: node-%02d}\n' "$t"
		printf -- '---\napiVersion: nvl72.io/v1alpha1\nkind: ComputeTray\nmetadata: {name: %s}\n' "$(name "$t")"
		printf 'spec: {rack: r1, index: %d, node: node-%02d}\n' "$t" "$t"
	done
} >"$work/objects.yaml"
out=$(k apply -f "$work/objects.yaml" 2>&1) || { nok "create Nodes and ComputeTrays" "$out"; finish; }

start_agent() { # start_agent TRAY [EXTRA FLAGS...]
	local t=$1 d
	shift
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$bin" --kubeconfig "$KUBECONFIG" --node-name "$(printf 'node-%02d' "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$ns" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--tool-timeout 2s --resync-period 2s --heartbeat-period 2s --lease-duration 10s \
		"$@" >>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
}
start_agent 1 --validation-command "$sim/bin/nvl72-sim-validate"
start_agent 2 # no command configured

val() { # val TRAY: "id phase busbw transport | message"
	k get computetray "$(name "$1")" -o json 2>/dev/null |
		jq -r '.status.validation // {} | "\(.id) \(.phase) \(.busBandwidthGbps) \(.transport) | \(.message)"'
}
request() { # request TRAY ID: a new spec.validation, the id also passed as an argument
	k patch computetray "$(name "$1")" --type merge \
		-p "{\"spec\":{\"validation\":{\"id\":\"$2\",\"timeoutSeconds\":120,\"args\":[\"--id\",\"$2\"]}}}" >/dev/null
}
runs_of() { # runs_of ID: how often tray 1's tool ran for ID
	grep -c -- "--id $1\$" "$(tray 1)/validation.runs" 2>/dev/null || true
}
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
	local end=$((SECONDS + $1))
	shift
	while ((SECONDS <= end)); do
		"$@" && return 0
		sleep 0.5
	done
	return 1
}
val_is() { [[ $(val "$1") == "$2"* ]]; }

# ------------------------------------------------------------ a run ---
request 1 canary-1
wait_for 60 val_is 1 "canary-1 Succeeded 900 NVLink" &&
	ok "spec.validation.id gives status.validation Succeeded with the sim figure (900 GB/s over NVLink)" ||
	nok "first run" "$(val 1); $(tail -3 "$work/agent-1.log")"
[[ $(k get computetray "$(name 1)" -o json | jq -r '.status.validation | (.startTime != null) and (.completionTime != null)') == true ]] &&
	ok "the record carries startTime and completionTime" || nok "times" "$(val 1)"

# ------------------------------------------- a lower figure, next id ---
simctl busbw "$(tray 1)" 640.5 || nok "simctl busbw" ""
sleep 3 # a resync or two: the same id must not run again
[[ $(runs_of canary-1) == 1 ]] && ok "an unchanged id is not run again" ||
	nok "same id once" "runs: $(runs_of canary-1)"
request 1 canary-2
wait_for 60 val_is 1 "canary-2 Succeeded 640.5 NVLink" &&
	ok "after simctl busbw 640.5 the next id reports 640.5" || nok "lowered figure" "$(val 1)"

# -------------------------------------------------- bad runs fail ---
simctl fault "$(tray 1)" validation_garbage on
request 1 garbage-1
wait_for 60 val_is 1 "garbage-1 Failed null" &&
	[[ $(val 1) == *"busbw_gbps"* ]] && ok "garbage output is Failed with a clear message: $(val 1 | cut -d'|' -f2)" ||
	nok "garbage output" "$(val 1)"
simctl fault "$(tray 1)" validation_garbage off
request 2 no-cmd
wait_for 60 val_is 2 "no-cmd Failed" && [[ $(val 2) == *"no validation command configured"* ]] &&
	ok "an agent without --validation-command reports Failed: no validation command configured" ||
	nok "no command" "$(val 2)"

# ------------------------------------------- kill -9 during a run ---
simctl validation "$(tray 1)" delay_ms=60000
request 1 cut-1
wait_for 30 val_is 1 "cut-1 Running" && ok "a slow run is reported Running" || nok "running" "$(val 1)"
wait_for 10 test "$(runs_of cut-1)" = 1
{ kill -KILL "${apid[1]}"; wait "${apid[1]}"; } 2>/dev/null
left=$(awk '/--id cut-1$/ {print $2}' "$(tray 1)/validation.runs")
simctl validation "$(tray 1)" delay_ms=0
start_agent 1 --validation-command "$sim/bin/nvl72-sim-validate"
wait_for 60 val_is 1 "cut-1 Failed" && [[ $(val 1) == *"agent restarted during the run"* ]] &&
	ok "a run cut by kill -9 is reported Failed: agent restarted during the run" ||
	nok "cut run" "$(val 1)"
wait_for 10 bash -c "! kill -0 $left 2>/dev/null" && ok "what was left of the cut run was stopped" ||
	nok "leftover run" "pid $left still alive"
sleep 4
[[ $(runs_of cut-1) == 1 ]] && val_is 1 "cut-1 Failed" && ok "the cut id is not run again" ||
	nok "cut id once" "runs: $(runs_of cut-1); $(val 1)"

# ---------------------------------- a finished id across kill -9 ---
request 1 done-1
wait_for 60 val_is 1 "done-1 Succeeded 640.5" || nok "done-1 run" "$(val 1)"
before=$(k get computetray "$(name 1)" -o json | jq -c .status.validation)
{ kill -KILL "${apid[1]}"; wait "${apid[1]}"; } 2>/dev/null
start_agent 1 --validation-command "$sim/bin/nvl72-sim-validate"
sleep 6 # three resyncs of the new agent
after=$(k get computetray "$(name 1)" -o json | jq -c .status.validation)
[[ $(runs_of done-1) == 1 && $before == "$after" ]] &&
	ok "a finished id is not run again after kill -9 and its record is unchanged" ||
	nok "finished id once" "runs: $(runs_of done-1); before $before after $after"

finish
