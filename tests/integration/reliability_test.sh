#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator through control-plane trouble, with one rack whose 18 agents
# are played by bench_loadgen (status as agents write it, Lease heartbeats
# every 5 s, so trays keep changing):
#  (a) kube-apiserver restarted on the same port, etcd kept: the operator
#      keeps running, its watches resume (a ComputeTray deleted afterwards is
#      recreated), and the rack ends as it was, with no duplicate trays;
#  (b) etcd compacted to its newest revision, then the apiserver restarted:
#      watches resuming from a compacted revision get 410 and the informers
#      relist, and the rack converges again;
#  (d) a tray vanishing (its Node deleted): the rack status says so.
# The 429/503 proxy case is not in this suite yet (see docs/reliability.md).
#
# Run by tests/integration/run.sh against a fresh control plane.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

OPERATOR=${NVL72_BUILD:-build/rel}/bin/nvl72-operator
LOADGEN=${NVL72_BUILD:-build/rel}/bench/bench_loadgen
NS=nvl72-system
RACK=rel-r01
CDIR=$NVL72_CLUSTER_DIR

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else not_ok "$1" "$3"; fi; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }

work=$(mktemp -d /tmp/nvl72-reliability.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		echo "-- last lines of the operator log"
		tail -20 "$work/operator.log" | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }
wait_for() {
	local until=$(($(date +%s) + $1))
	shift
	while (($(date +%s) < until)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}
ready_msg() { k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
all_ready() { [[ $(ready_msg) == "18 of 18 trays ready"* ]]; }
# The rack's status without times and generations: what "the same end" means.
rack_state() {
	k get rack "$RACK" -o json | jq -S '.status | del(.observedGeneration) |
		(.conditions // []) |= map(del(.lastTransitionTime, .observedGeneration)) |
		walk(if type == "object" then del(.lastHeartbeatTime, .heartbeatTime, .lastUpdateTime) else . end)'
}
tray_count() { k get computetrays -l "nvl72.io/rack=$RACK" -o name | wc -l; }

[[ -x $OPERATOR && -x $LOADGEN ]] || { not_ok "binaries" "operator or bench_loadgen missing"; finish; }
k apply -f crds/ >/dev/null && k wait --for=condition=Established --timeout=60s -f crds/ >/dev/null &&
	k create namespace "$NS" >/dev/null &&
	k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null &&
	"$LOADGEN" nodes --kubeconfig "$KUBECONFIG" --racks 1 --prefix rel >/dev/null ||
	{ not_ok "set-up" "CRDs, matrix or Nodes not created"; finish; }

"$LOADGEN" agents --kubeconfig "$KUBECONFIG" --racks 1 --lease-namespace "$NS" --heartbeat 5 \
	--duration 900 >"$work/loadgen.out" 2>&1 &
pids+=($!)
probe=$((20000 + RANDOM % 10000))
"$OPERATOR" --kubeconfig "$KUBECONFIG" --agent-lease-namespace "$NS" --tray-heartbeat-timeout 1m \
	--metrics-bind-address 0 --dashboard-bind-address 0 --webhook-bind-address 0 \
	--health-probe-bind-address "127.0.0.1:$probe" >"$work/operator.log" 2>&1 &
opid=$!
pids+=("$opid")
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$probe/readyz" ||
	{ not_ok "operator ready" "$(one_line "$(tail -3 "$work/operator.log")")"; finish; }
sed "s/gb300-r07/$RACK/g" deploy/samples/rack-gb300.yaml | k apply -f - >/dev/null
wait_for 90 all_ready
check "the rack becomes Ready with 18 of 18 trays" $? "$(ready_msg)"
before=$(rack_state)
labels_before=$(k get nodes -l "nvl72.io/rack=$RACK" -o name | wc -l)

# ---- (a) apiserver restart ------------------------------------------------------
tests/cluster/cluster.sh restart-apiserver "$CDIR" 2>"$work/restart.err"
check "(a) the apiserver restarts on the same port with etcd kept" $? "$(one_line "$(cat "$work/restart.err")")"
kill -0 "$opid" 2>/dev/null && wait_for 30 curl -fs --max-time 2 "http://127.0.0.1:$probe/healthz"
check "(a) the operator keeps running through the restart" $? "$(one_line "$(tail -3 "$work/operator.log")")"
# Only a resumed watch lets the operator see this deletion and recreate the tray.
uid=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}')
k delete computetray "$RACK-t07" --wait=true >/dev/null
recreated() { local u; u=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}') && [[ -n $u && $u != "$uid" ]]; }
wait_for 60 recreated
check "(a) watches resume: a deleted ComputeTray is recreated" $? "uid $uid"
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]]
check "(a) the rack ends as it was before the restart" $? \
	"$(diff <(echo "$before") <(rack_state) | head -8 | tr '\n' ' ' | cut -c1-400)"
n=$(tray_count)
l=$(k get nodes -l "nvl72.io/rack=$RACK" -o name | wc -l)
((n == 18 && l == labels_before))
check "(a) no duplicates: 18 ComputeTrays, $l labelled Nodes" $? "trays=$n nodes=$l (before $labels_before)"

# ---- (b) etcd compaction --------------------------------------------------------
ec=$(cat "$CDIR/etcd-port")
relists0=$(grep -c 'watch expired; relisting' "$work/operator.log")
rev=$(curl -fsS --max-time 10 -X POST "http://127.0.0.1:$ec/v3/kv/range" -d '{"key":"Lw=="}' |
	jq -r '.header.revision')
curl -fsS --max-time 30 -X POST "http://127.0.0.1:$ec/v3/kv/compaction" \
	-d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
check "(b) etcd is compacted to revision $rev" $? "compaction request failed"
# Writes after the compaction move the revision on; the restarted apiserver's
# watch cache then starts past every revision the operator's watches hold.
sleep 6
tests/cluster/cluster.sh restart-apiserver "$CDIR" 2>"$work/restart.err" ||
	not_ok "(b) apiserver restart" "$(one_line "$(cat "$work/restart.err")")"
relisted() { (($(grep -c 'watch expired; relisting' "$work/operator.log") > relists0)); }
wait_for 60 relisted
check "(b) informers relist after 410" $? "no relist logged"
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]] && (($(tray_count) == 18))
check "(b) the rack converges to the same state after the relist" $? "$(ready_msg)"

# ---- (d) a tray vanishing --------------------------------------------------------
k delete node "$RACK-t11" --wait=true >/dev/null
said() {
	k get rack "$RACK" -o json | jq -e '
		([.status.conditions[] | select(.type == "Ready") | .message][0] | startswith("17 of 18"))
		and ([.. | strings | select(test("NodeNotFound"))] | length > 0)' >/dev/null
}
wait_for 60 said
check "(d) a tray whose Node is deleted is reported (NodeNotFound, 17 of 18 ready)" $? \
	"$(ready_msg)"
kill -0 "$opid" 2>/dev/null
check "the operator is still running at the end" $? "it exited"
finish
