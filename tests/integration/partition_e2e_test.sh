#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The RackPartition controller end to end against a real kube-apiserver: one
# operator with the NMX-M backend talking HTTPS to fake-nmxm, an NMX-M
# stand-in with a default partition that holds every GPU at first and
# refuses GPUs another partition holds, in front of the sample Rack of 18
# trays with a real agent per tray on a simulated rack. A partition of
# trays 1-4 becomes Active (its GPUs first leave the default partition)
# with every member GPU in its new clique, Node labels and a ComputeDomain
# inside it following; moving it to trays 1, 2, 5, 6 moves the GPUs, labels
# and peer lists and returns trays 3 and 4 to the default partition; an
# operator killed with SIGKILL between the removal from the default
# partition and the create creates the partition once after a restart, and
# one killed while the create runs finishes it without a second create;
# deleting a partition returns its GPUs to the default partition and
# releases it, also when a member's agent has gone silent (after the
# heartbeat timeout, with an event naming the tray). After each change every
# GPU is in exactly one partition.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (KUBECONFIG, KUBECTL, NVL72_CLUSTER_DIR set). Prints `ok - …`
# / `not ok - …` and `N passed, M failed`; exits non-zero on any failure.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

rel=${NVL72_BUILD:-$PWD/build/rel}
OPERATOR=$rel/bin/nvl72-operator
AGENT=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
RACK=gb300-r07
NS=nvl72-system
CD_NS=team-a
CD=train-2
DKEY=$CD_NS.$CD
UUID=3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3
CLIQUE=$UUID.32766

. "$(dirname "$0")/lib/tap.sh"

if [[ ! -x $OPERATOR || ! -x $AGENT || ! -x $sim/bin/simctl || ! -x $sim/bin/fake-nmxm ||
	! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-operator" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ not_ok "build the operator, the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-partition-e2e.XXXXXX)
rack=$work/rack
declare -A apid=()
opid="" npid=""
cleanup() {
	local p f
	for p in "${apid[@]}" $opid $npid; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" $opid $npid; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((failed > 0)) && [[ -f $work/op.log ]]; then
		echo "-- last lines of the operator log about partitions"
		grep -E ' (partition|operator|fabric): ' "$work/op.log" | tail -60 | cut -c1-300
		echo "-- last lines of the NMX-M stand-in"
		tail -30 "$work/nmxm.log"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses of this run; another run picks others.
ipbase=$((20 + ($$ % 8) * 25))
. tests/cluster/ports.sh
mport=$(free_port 3)
nport=$((mport + 2)) # the NMX-M stand-in, on 127.0.0.1
ip() { echo "127.0.0.$((ipbase + 10#$1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
node() { printf '%s-t%02d' "$RACK" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }

# ------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1)
check "apply crds/" $? "$out"
out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1)
check "apply the sample matrix" $? "$out"
k create namespace "$NS" >/dev/null 2>&1
k create namespace "$CD_NS" >/dev/null 2>&1

rc=0
for i in $(seq 1 18); do
	printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$(node "$i")"
done | k apply -f - >/dev/null 2>&1 || rc=1
now=$(date -u +%FT%TZ)
for i in $(seq 1 18); do
	k patch node "$(node "$i")" --subresource=status --type=merge -p \
		'{"status":{"addresses":[{"type":"InternalIP","address":"'"$(ip "$i")"'"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated","lastHeartbeatTime":"'"$now"'","lastTransitionTime":"'"$now"'"}]}}' \
		>/dev/null 2>&1 || rc=1
done
check "18 Nodes, Ready, with InternalIPs" $rc "node create or status patch failed"

simctl create "$rack" --trays 18 --ip-base "$ipbase" >/dev/null
check "simulated rack of 18 trays" $? ""

# NMX-M: HTTPS with a certificate made here, basic authentication, each
# change taking 6 s; the operator trusts the certificate through its Secret.
NMXPW=pw-$$-$RANDOM
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$work/nmxm-key.pem" -out "$work/nmxm.pem" >/dev/null 2>&1
"$sim/bin/fake-nmxm" --rack "$rack" --port "$nport" --cert "$work/nmxm.pem" --key "$work/nmxm-key.pem" \
	--user "rw-user:$NMXPW" --delay 6000 >"$work/nmxm.log" 2>&1 &
npid=$!
nmx() { curl -sf --max-time 10 --cacert "$work/nmxm.pem" -u "rw-user:$NMXPW" "https://127.0.0.1:$nport$1"; }
nmx_fresh() { nmx /nmx/v1/gpus | jq -e 'length == 72 and all(.[]; .PartitionID == 32766)'; }
wait_for 20 nmx_fresh
check "the NMX-M stand-in answers with 72 GPUs, all in the default partition" $? "$(tail -5 "$work/nmxm.log")"
out=$(k -n "$NS" create secret generic nmxm --from-literal=username=rw-user \
	--from-literal=password="$NMXPW" --from-file=ca.crt="$work/nmxm.pem" 2>&1)
check "the fabric backend's Secret" $? "$out"
start_operator() {
	"$OPERATOR" --metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=127.0.0.1:0 \
		--dashboard-bind-address=0 --webhook-bind-address=0 --tray-heartbeat-timeout="${HB:-10m}" \
		--fabric-backend=nmx-m --fabric-endpoint="https://127.0.0.1:$nport" \
		--fabric-secret="$NS/nmxm" --fabric-poll-interval=500ms --log-level=info >>"$work/op.log" 2>&1 &
	opid=$!
}
start_operator
# The rack's own degraded cordon would cover every Node while six trays
# change clique; switch it off so that only the partition's cordons show.
out=$(sed 's/cordonWhenDegraded: true/cordonWhenDegraded: false/' deploy/samples/rack-gb300.yaml | k apply -f - 2>&1)
check "the operator runs; the sample Rack applied" $? "$out"
trays18() { [[ $(k get computetrays -o json | jq "[.items[] | select(.spec.rack == \"$RACK\")] | length") == 18 ]]; }
wait_for 30 trays18
check "the Rack has its 18 ComputeTrays" $? "$(k get computetrays 2>&1 | head -3)"

start_agent() { # start_agent TRAY
	local t=$1 d
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$AGENT" --kubeconfig "$KUBECONFIG" --node-name "$(node "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$NS" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		--metrics-bind-address "$(ip "$t"):$mport" >>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
}
for t in $(seq 1 18); do start_agent "$t"; done
all_ready() {
	k get computetrays -o json | jq -e --arg c "$CLIQUE" '[.items[] | select(.status.fabric.cliqueID == $c and
		any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 18' >/dev/null
}
t0=$SECONDS
wait_for 60 all_ready
check "18 agents report their trays Ready in clique $CLIQUE ($((SECONDS - t0))s)" $? \
	"$(k get computetrays -o wide 2>&1 | head -4)"

# ------------------------------------------------------ helpers ---
part_json() { k get rackpartition "$1" -o json 2>/dev/null; }
part_active() { # part_active NAME GENERATION
	part_json "$1" | jq -e --argjson g "$2" '.status.phase == "Active" and .status.observedGeneration == $g and
		any(.status.conditions[]; .type == "Ready" and .status == "True" and .observedGeneration == $g)' >/dev/null
}
# Trays whose every GPU reports clique C in ComputeTray status, as "1 2 3".
trays_in() {
	k get computetrays -o json | jq -r --arg u "$UUID" --argjson c "$1" '[.items[] | select(.spec.rack == "'"$RACK"'" and
		(.status.gpus | length) == 4 and all(.status.gpus[]; .fabric.clusterUUID == $u and .fabric.cliqueId == $c and .fabric.state == "Completed"))
		| .spec.index] | sort | map(tostring) | join(" ")'
}
# Nodes carrying label KEY=VALUE, as tray indexes "1 2 3".
nodes_with() {
	k get nodes -l "$1=$2" -o json | jq -r '[.items[].metadata.name | ltrimstr("'"$RACK"'-t") | tonumber] | sort | map(tostring) | join(" ")'
}
writes() { grep -c 'status written.*partition=' "$work/op.log"; }
# NMX-M's operations: all of them, the creates, the changes of the default partition.
ops_all() { nmx /nmx/v1/operations | jq length; }
ops_posts() { nmx /nmx/v1/operations | jq '[.[] | select(.Request.Method == "post")] | length'; }
ops_default() { nmx /nmx/v1/operations | jq '[.[] | select(.Request.URI == "/nmx/v1/partitions/dflt")] | length'; }
# Every GPU NMX-M lists is a member of exactly one partition (location
# members are matched to GPUs by slot, host and device).
one_each() {
	local g p
	g=$(nmx /nmx/v1/gpus) && p=$(nmx /nmx/v1/partitions) || return 1
	jq -e -n --argjson g "$g" --argjson p "$p" '[$p[].Members[] | . as $x |
		if type == "string" then $x else first($g[] | select(.LocationInfo.SlotID == $x.SlotID and
			.LocationInfo.HostID == $x.HostID and .DeviceID == $x.DeviceID) | .ID) end] as $m |
		($m | length) == ($g | length) and ($m | sort) == ([$g[].ID] | sort)' >/dev/null
}
# The NMX-M partition called NAME, as "ID PartitionID", or nothing.
nmx_part() { nmx /nmx/v1/partitions | jq -r --arg n "$1" '.[] | select(.Name == $n) | "\(.ID) \(.PartitionID)"'; }

# ------------------------------------------ a partition of trays 1-4 ---
cat >"$work/part.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: RackPartition
metadata: {name: tenant-a}
spec: {rack: $RACK, trays: [1, 2, 3, 4], tenant: team-a}
YAML
t0=$SECONDS
out=$(k apply -f "$work/part.yaml" 2>&1)
check "kubectl apply a RackPartition of trays 1-4" $? "$out"
wait_for 90 part_active tenant-a 1
check "it becomes Active ($((SECONDS - t0))s)" $? "$(part_json tenant-a | jq -c .status | cut -c1-400)"
# The phase as a state set on the operator's /metrics (the alerts'
# NVL72PartitionStuck reads it).
mport=$(grep -o 'metrics=[0-9]*' "$work/op.log" | tail -1 | cut -d= -f2)
phase_series() { curl -fsS -m 5 "http://127.0.0.1:$mport/metrics" | grep "^nvl72_partition_phase{rack=\"$RACK\",partition=\"tenant-a\""; }
m=$(phase_series)
grep -qx "nvl72_partition_phase{rack=\"$RACK\",partition=\"tenant-a\",phase=\"Active\"} 1" <<<"$m" &&
	(($(grep -c ' 0$' <<<"$m") == 7))
check "/metrics: nvl72_partition_phase is 1 for Active and 0 for the seven other phases" $? \
	"$(tr '\n' ' ' <<<"$m" | cut -c1-400)"
st=$(part_json tenant-a)
PCLIQUE=$(jq -r .status.cliqueID <<<"$st")
bid=$(jq -r .status.backend.partitionId <<<"$st")
read -r nid pid <<<"$(nmx_part tenant-a)"
[[ $PCLIQUE == "$UUID.$pid" && $bid == "$nid" && $pid =~ ^[0-9]+$ && $pid != 32766 && $(jq -r '.status.backend.operationId // ""' <<<"$st") == "" &&
	$(jq -r '.metadata.finalizers | join(",")' <<<"$st") == nvl72.io/partition && $(jq .status.trayCount <<<"$st") == 4 &&
	$(jq '[.status.trays[] | select(.ready and .cliqueID == "'"$PCLIQUE"'")] | length' <<<"$st") == 4 ]]
check "status: clique $PCLIQUE, NMX-M partition $bid (PartitionID $pid), no operation in flight, 4 ready trays, the finalizer" $? \
	"$(jq -c .status <<<"$st" | cut -c1-400)"
got=$(trays_in "$pid")
[[ $got == "1 2 3 4" ]]
check "every GPU of trays 1-4 reports clique $pid in ComputeTray status" $? "got: $got"
got=$(trays_in 32766 | wc -w)
[[ $got == 14 ]]
check "the 14 other trays stay in the default clique 32766" $? "got $got"
ops=$(nmx /nmx/v1/operations | jq -r '[.[] | "\(.Request.Method) \(.Request.URI)"] | join(",")')
[[ $ops == "put /nmx/v1/partitions/dflt,post /nmx/v1/partitions" ]]
check "NMX-M saw the GPUs leave the default partition, then the create" $? "operations: $ops"
one_each
check "every GPU is in exactly one NMX-M partition" $? "$(nmx /nmx/v1/partitions | jq -c '[.[] | [.Name, (.Members | length)]]')"
wait_for 30 eval '[[ $(nodes_with nvl72.io/partition tenant-a) == "1 2 3 4" && $(nodes_with nvl72.io/clique "$PCLIQUE") == "1 2 3 4" ]]'
check "Nodes of trays 1-4 carry nvl72.io/partition=tenant-a and nvl72.io/clique=$PCLIQUE" $? \
	"partition: $(nodes_with nvl72.io/partition tenant-a) clique: $(nodes_with nvl72.io/clique "$PCLIQUE")"
nc=$(grep -c 'node cordoned.*partition=tenant-a' "$work/op.log")
nu=$(grep -c 'node uncordoned.*partition=tenant-a' "$work/op.log")
left=$(k get nodes -o json | jq '[.items[] | select(.spec.unschedulable == true or .metadata.annotations["nvl72.io/cordoned-by"] != null)] | length')
[[ $nc == 4 && $nu == 4 && $left == 0 ]]
check "the 4 member Nodes were cordoned during the change and uncordoned after it" $? "cordoned=$nc uncordoned=$nu left=$left"
reasons=$(k get events -o json | jq -r '[.items[] | select(.regarding.name == "tenant-a" or .involvedObject.name == "tenant-a") | .reason] | unique | join(",")')
for r in Draining Requesting WaitingForFabric Active; do
	[[ ,$reasons, == *,$r,* ]] || { not_ok "events for each transition" "missing $r in $reasons"; break; }
done && ok "events for each transition ($reasons)"

# ---------------------------------------------- a domain inside it ---
cat >"$work/cd.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: ComputeDomain
metadata: {name: $CD, namespace: $CD_NS}
spec:
  numNodes: 2
  selector: {rack: $RACK, partition: tenant-a}
YAML
out=$(k apply -f "$work/cd.yaml" 2>&1)
check "kubectl apply a 2-node ComputeDomain in partition tenant-a" $? "$out"
cd_json() { k -n "$CD_NS" get computedomain "$CD" -o json 2>/dev/null; }
t0=$SECONDS
wait_for 60 eval '[[ $(cd_json | jq -r .status.status) == Ready ]]'
check "the domain becomes Ready ($((SECONDS - t0))s)" $? "$(cd_json | jq -c .status | cut -c1-300)"
peers_ok() { # peers_ok: both members in the partition's clique with one peer list
	local st trays lists
	st=$(cd_json)
	trays=$(k get computetrays -o json)
	lists=$(jq -r --arg d "$DKEY" '.items[] | select(.spec.imex.domain == $d) | .spec.imex.peers | join(",")' <<<"$trays" | sort -u)
	[[ $(jq -r .status.cliqueID <<<"$st") == "$PCLIQUE" && $(jq '[.status.nodes[] | select(.cliqueID == "'"$PCLIQUE"'")] | length' <<<"$st") == 2 &&
		$(wc -l <<<"$lists") == 1 && $lists == $(jq -r '[.status.nodes[].ipAddress] | join(",")' <<<"$st") ]]
}
peers_ok
check "its 2 members are in clique $PCLIQUE and hold one identical IMEX peer list" $? \
	"$(cd_json | jq -c '[.status.cliqueID, .status.nodes]' | cut -c1-300)"
members=$(cd_json | jq -r '[.status.nodes[].name] | join(" ")')

# Nothing is written while nothing changes, and no backend change is asked.
w1=$(writes) o1=$(ops_all)
sleep 5
w2=$(writes) o2=$(ops_all)
[[ $w1 -gt 0 && $w1 == "$w2" && $o1 == "$o2" ]]
check "no status writes and no backend changes at steady state" $? "writes $w1 -> $w2, ops $o1 -> $o2"

# ------------------------------------------ move to trays 1, 2, 5, 6 ---
t0=$SECONDS
out=$(k patch rackpartition tenant-a --type=merge -p '{"spec":{"trays":[1,2,5,6]}}' 2>&1)
check "change the partition's trays to 1, 2, 5, 6" $? "$out"
wait_for 90 part_active tenant-a 2
check "it is Active again for generation 2 ($((SECONDS - t0))s)" $? "$(part_json tenant-a | jq -c .status | cut -c1-400)"
[[ $(part_json tenant-a | jq -r .status.backend.partitionId) == "$bid" && $(nmx_part tenant-a) == "$bid $pid" ]]
check "the backend partition was updated in place (id $bid)" $? "$(part_json tenant-a | jq -c .status.backend)"
# Trays 3 and 4 rejoin the default partition in the change's last step;
# their agents report it at their next resync.
moved() {
	got=$(trays_in "$pid") dflt=$(trays_in 32766)
	[[ $got == "1 2 5 6" && " $dflt " == *" 3 4 "* && $(wc -w <<<"$dflt") == 14 ]]
}
wait_for 30 moved
check "trays 1, 2, 5, 6 report clique $pid; trays 3 and 4 are back in 32766" $? "in: $got default: $dflt"
one_each
check "every GPU is in exactly one NMX-M partition after the move" $? "$(nmx /nmx/v1/partitions | jq -c '[.[] | [.Name, (.Members | length)]]')"
wait_for 30 eval '[[ $(nodes_with nvl72.io/partition tenant-a) == "1 2 5 6" && $(nodes_with nvl72.io/clique "$PCLIQUE") == "1 2 5 6" ]]'
check "the partition and clique labels moved to the Nodes of trays 1, 2, 5, 6" $? \
	"partition: $(nodes_with nvl72.io/partition tenant-a) clique: $(nodes_with nvl72.io/clique "$PCLIQUE")"
wait_for 30 eval '[[ $(cd_json | jq -r .status.status) == Ready ]] && peers_ok'
check "the domain stays Ready on its members with one peer list" $? "$(cd_json | jq -c .status | cut -c1-300)"
[[ $(cd_json | jq -r '[.status.nodes[].name] | join(" ")') == "$members" ]] || not_ok "domain members kept" "changed"
left=$(k get nodes -o json | jq '[.items[] | select(.spec.unschedulable == true)] | length')
[[ $left == 0 ]]
check "no Node stays cordoned after the move" $? "left=$left"

# ------ SIGKILL between the removal from the default partition and the create ---
# kill_during NAME METHOD URI: waits until the operation recorded in NAME's
# status is NMX-M's METHOD of URI, then kills the operator with SIGKILL.
kill_during() {
	local id
	recorded_is() {
		id=$(part_json "$1" | jq -r '.status.backend.operationId // ""')
		[[ -n $id ]] && nmx "/nmx/v1/operations/${id##*:}" |
			jq -e --arg m "$2" --arg u "$3" '.Request.Method == $m and .Request.URI == $u and .Status != "completed"'
	}
	wait_for 60 recorded_is "$1" "$2" "$3"
	local rc=$?
	kill -KILL "$opid"
	wait "$opid" 2>/dev/null
	recorded=$id
	return $rc
}
restart_checks() { # restart_checks NAME TRAYS...: restart, wait Active, trays in its clique
	local name=$1 t0 bp
	shift
	mark=$(wc -l <"$work/op.log")
	start_operator
	t0=$SECONDS
	wait_for 90 part_active "$name" 1
	check "the restarted operator finishes $name ($((SECONDS - t0))s)" $? "$(part_json "$name" | jq -c .status | cut -c1-400)"
	read -r _ bp <<<"$(nmx_part "$name")"
	[[ $(trays_in "$bp") == "$*" ]]
	check "trays $* report clique $bp" $? "got: $(trays_in "$bp")"
	one_each
	check "every GPU is in exactly one NMX-M partition after the restart" $? \
		"$(nmx /nmx/v1/partitions | jq -c '[.[] | [.Name, (.Members | length)]]')"
}
p0=$(ops_posts) d0=$(ops_default)
cat >"$work/part-b.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: RackPartition
metadata: {name: tenant-b}
spec: {rack: $RACK, trays: [9, 10], tenant: team-b}
YAML
k apply -f "$work/part-b.yaml" >/dev/null 2>&1
kill_during tenant-b put /nmx/v1/partitions/dflt
check "operator killed with SIGKILL while operation $recorded takes trays 9 and 10 out of the default partition" $? \
	"$(part_json tenant-b | jq -c .status | cut -c1-200) $(grep 'partition=tenant-b' "$work/op.log" | tail -6 | cut -c1-200)"
left() { nmx /nmx/v1/gpus | jq -e '[.[] | select(.PartitionID == null)] | length == 8'; }
wait_for 30 left
rc=$?
[[ $rc == 0 && -z $(nmx_part tenant-b) ]]
check "NMX-M finished the removal alone: 8 GPUs in no partition, no partition tenant-b yet" $? \
	"$(nmx /nmx/v1/gpus | jq -c '[.[] | select(.PartitionID == null) | .ID]') $(nmx_part tenant-b)"
restart_checks tenant-b "9 10"
creates=$(tail -n +"$mark" "$work/op.log" | grep -c 'backend change requested.*partition=tenant-b')
p1=$(ops_posts) d1=$(ops_default)
[[ $creates == 1 && $(nmx_part tenant-b | wc -l) == 1 && $p1 == $((p0 + 1)) && $d1 == $((d0 + 1)) ]]
check "one create after the restart, one partition tenant-b, the default partition changed once" $? \
	"requests=$creates named=$(nmx_part tenant-b | wc -l) creates $p0 -> $p1, default changes $d0 -> $d1"

# --------------------------------------- SIGKILL while the create runs ---
p0=$(ops_posts)
sed 's/tenant-b/tenant-c/; s/\[9, 10\]/[11, 12]/; s/team-b/team-c/' "$work/part-b.yaml" >"$work/part-c.yaml"
k apply -f "$work/part-c.yaml" >/dev/null 2>&1
kill_during tenant-c post /nmx/v1/partitions
check "operator killed with SIGKILL while the create of tenant-c ($recorded) runs" $? \
	"$(part_json tenant-c | jq -c .status | cut -c1-200)"
restart_checks tenant-c "11 12"
creates=$(tail -n +"$mark" "$work/op.log" | grep -c 'backend change requested.*partition=tenant-c')
p1=$(ops_posts)
[[ $creates == 0 && $(nmx_part tenant-c | wc -l) == 1 && $p1 == $((p0 + 1)) ]]
check "no second create: one partition tenant-c, creates $p0 -> $p1, no request after the restart" $? \
	"requests=$creates named=$(nmx_part tenant-c | wc -l) creates $p0 -> $p1"

# ------------------------------------------------------------ delete ---
k -n "$CD_NS" delete computedomain "$CD" --timeout=60s >/dev/null 2>&1
t0=$SECONDS
out=$(k delete rackpartition tenant-a --timeout=60s 2>&1)
check "deleting tenant-a completes: the finalizer is released ($((SECONDS - t0))s)" $? "$out"
released() {
	dflt=$(trays_in 32766 | wc -w)
	[[ $dflt == 14 && -z $(trays_in "$pid") && -z $(nmx_part tenant-a) ]] && one_each
}
wait_for 30 released
check "its GPUs are back in the default partition and clique, the NMX-M partition is gone" $? \
	"default=$dflt still=$(trays_in "$pid") nmx=$(nmx_part tenant-a)"
wait_for 30 eval '[[ -z $(nodes_with nvl72.io/partition tenant-a) && -z $(nodes_with nvl72.io/clique "$PCLIQUE") ]]'
check "no Node keeps tenant-a's partition or clique label" $? \
	"$(nodes_with nvl72.io/partition tenant-a) / $(nodes_with nvl72.io/clique "$PCLIQUE")"
reasons=$(k get events -o json | jq -r '[.items[] | select(.regarding.name == "tenant-a" or .involvedObject.name == "tenant-a") | .reason] | unique | join(",")')
[[ ,$reasons, == *,Deleting,* && ,$reasons, == *,Released,* ]]
check "events Deleting and Released" $? "$reasons"
# A member whose agent falls silent does not hold a deletion for ever: the
# operator, restarted with a 15 s heartbeat timeout, waits that long for
# tray 9 (whose agent is killed), then releases tenant-b naming it.
kill -TERM "$opid"
wait "$opid" 2>/dev/null
HB=15s start_operator
kill -KILL "${apid[9]}"
wait "${apid[9]}" 2>/dev/null
! kill -0 "${apid[9]}" 2>/dev/null
check "tray 9's agent is killed with SIGKILL" $? "pid ${apid[9]} still runs"
t0=$SECONDS
out=$(k delete rackpartition tenant-b --timeout=90s 2>&1)
check "deleting tenant-b with tray 9's agent silent completes ($((SECONDS - t0))s; heartbeat timeout 15s)" \
	$? "$out; $(grep 'partition=tenant-b' "$work/op.log" | tail -2 | cut -c1-300)"
silent_event() {
	k get events.events.k8s.io -o json | jq -e '[.items[] | select(.regarding.name == "tenant-b" and
		.reason == "ReleasedWithoutReport" and (.note | contains("without a report from trays 9, whose agents")))] | length == 1' >/dev/null
}
wait_for 20 silent_event
check "a Warning ReleasedWithoutReport event on tenant-b names tray 9 alone" $? \
	"$(k get events.events.k8s.io -o json | jq -c '[.items[] | select(.regarding.name == "tenant-b" and (.reason | startswith("Released"))) | [.reason, .note]]' | cut -c1-400) $(grep 'object=rackpartition/tenant-b' "$work/op.log" | tail -2 | cut -c1-300)"
start_agent 9
out=$(k delete rackpartition tenant-c --timeout=90s 2>&1)
rc=$?
all_back() {
	[[ $(trays_in 32766 | wc -w) == 18 ]] && one_each &&
		[[ $(nmx /nmx/v1/partitions | jq -r '[.[].Name] | join(",")') == "Default Partition" ]]
}
[[ $rc == 0 ]] && wait_for 30 all_back
check "deleting tenant-c returns all 18 trays, tray 9 with its agent back, to the default partition and clique" $? \
	"$out; default: $(trays_in 32766); nmx: $(nmx /nmx/v1/partitions | jq -c '[.[] | [.Name, (.Members | length)]]')"

kill -0 "$opid" 2>/dev/null
check "the operator is still running" $? "it exited"
kill -TERM "$opid"
t0=$SECONDS
wait_for 15 eval '! kill -0 "$opid" 2>/dev/null'
wait "$opid" 2>/dev/null
rc=$?
opid=""
[[ $rc == 0 ]]
check "SIGTERM stops the operator cleanly (exit 0 in $((SECONDS - t0))s)" $? "rc=$rc"
finish
