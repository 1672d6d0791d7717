# SPDX-License-Identifier: Apache-2.0
# Shared set-up of the RackUpgrade suites, sourced by them: the result
# helpers, the sample matrix, a Rack of 18 simulated trays with a real agent
# each (fake NVML, IMEX and installer, the simulator's validation command),
# its Nodes, a 2-tray canary RackPartition, the operator, and the helpers that
# read an upgrade's status. A suite sets RACK (and optionally UPG_WORK_NAME)
# before sourcing; everything started here is stopped by the EXIT trap.
#
# A suite may set MATRIX, MATRIX_FILE, PLATFORM, FROM, TO, FROM_DRIVER and
# TO_DRIVER before sourcing to run another matrix than the gb300 sample (the
# Rack is the gb300 sample's, moved to PLATFORM, MATRIX and FROM; the
# simulated trays start on FROM_DRIVER).
#
# The rack helpers act on the current rack. The first one, RACK, is current
# after sourcing; a suite with more racks registers each with rack_add (its
# own simulator folder, loopback addresses and fabric identity) and switches
# with use_rack before calling upg_nodes, upg_rack, upg_agents and the rest.
#
# Needs KUBECTL, KUBECONFIG and NVL72_CLUSTER_DIR from tests/cluster/cluster.sh.

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

rel=${NVL72_BUILD:-$PWD/build/rel}
OPERATOR=$rel/bin/nvl72-operator
AGENT=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
RACK=${RACK:-gb300-r07}
NS=nvl72-system
MATRIX=${MATRIX:-gb300-2026.10}
MATRIX_FILE=${MATRIX_FILE:-deploy/samples/compatibilitymatrix-gb300.yaml}
PLATFORM=${PLATFORM:-gb300}
FROM=${FROM:-gb300-r580-95} TO=${TO:-gb300-r580-159}
FROM_DRIVER=${FROM_DRIVER:-580.95.05} TO_DRIVER=${TO_DRIVER:-580.159.03}

. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"

if [[ ! -x $OPERATOR || ! -x $AGENT || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-operator" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ not_ok "build the operator, the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d "/tmp/nvl72-${UPG_WORK_NAME:-upgrade}.XXXXXX")
declare -A apid=() opids=()
cleanup() {
	local p f
	for p in "${apid[@]}" "${opids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" "${opids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$work"/rack*/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((failed > 0)); then
		for f in "$work"/op*.log; do
			[[ -f $f ]] || continue
			# A check that failed mid-suite needs what happened then, not
			# only at the end: the upgrades' phase changes, warnings and
			# errors of the whole run first.
			echo "-- upgrade phases, warnings and errors in $(basename "$f")"
			grep -E '^[^ ]+ (warn|error) |upgrade: phase |reconcile failed' "$f" | tail -150 | cut -c1-300
			echo "-- last lines of $(basename "$f")"
			grep -v '"ok"' "$f" | tail -40 | cut -c1-300
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses and ports of this run; another run picks others. A rack
# takes one of 8 slots of 25 addresses from 127.0.0.20 (ip_slot N: the slot N
# places after this run's own).
ip_slot() { echo $((20 + (($$ + ${1:-0}) % 8) * 25)); }
# Ports from tests/cluster/ports.sh: an agent's metrics on each tray's
# address; the webhook and two more beside it (upgrade_crash's replicas,
# upgrade_drain's kwok).
. "$(dirname "${BASH_SOURCE[0]}")/../../cluster/ports.sh"
mport=$(free_port)
wport=$(free_port 3 "$mport")

# rack_add NAME IPBASE CLUSTER CHASSIS: a rack of this run, its simulator in
# its own folder, its trays on 127.0.0.(IPBASE+index), its GPUs in fabric
# cluster CLUSTER (clique 32766) of chassis CHASSIS.
declare -A rack_dirs=() rack_ipbases=() rack_clusters=() rack_chassis=()
rack_add() {
	rack_dirs[$1]=$work/rack-$1
	rack_ipbases[$1]=$2
	rack_clusters[$1]=$3
	rack_chassis[$1]=$4
}
use_rack() { # use_rack NAME: the rack the helpers below act on
	RACK=$1
	CANARY=$RACK-canary
	rack=${rack_dirs[$RACK]}
	ipbase=${rack_ipbases[$RACK]}
	CLUSTER=${rack_clusters[$RACK]}
	CHASSIS=${rack_chassis[$RACK]}
	CLIQUE=$CLUSTER.32766
}
rack_add "$RACK" "$(ip_slot)" 3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3 1821124000042
use_rack "$RACK"
ip() { echo "127.0.0.$((ipbase + 10#$1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
node() { printf '%s-t%02d' "$RACK" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }

upg_crds() {
	local out
	out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1)
	check "apply crds/" $? "$out"
	k create namespace "$NS" >/dev/null 2>&1
}

# upg_webhooks NAME BASE_URL: the chart's two admission webhook
# configurations under NAME, pointed at BASE_URL through clientConfig.url
# (the operator given --webhook-configuration=NAME fills in caBundle), and
# applied; upg_bundled NAME: both caBundles are set.
upg_webhooks() {
	cat >"$work/webhooks.yaml" <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: $1}
webhooks:
- name: stamp-approval.nvl72.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig: {url: "$2/mutate"}
  rules:
  - {apiGroups: [nvl72.io], apiVersions: [v1alpha1], operations: [CREATE], resources: [upgradeapprovals], scope: Cluster}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: $1}
webhooks:
- name: validate.nvl72.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig: {url: "$2/validate"}
  rules:
  - {apiGroups: [nvl72.io], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [compatibilitymatrices, racks, rackpartitions, rackupgrades], scope: "*"}
YAML
	k apply -f "$work/webhooks.yaml" 2>&1
}
upg_bundled() {
	[[ -n $(k get mutatingwebhookconfiguration "$1" -o jsonpath='{.webhooks[0].clientConfig.caBundle}') &&
		-n $(k get validatingwebhookconfiguration "$1" -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]
}

upg_nodes() { # 18 Node objects, Ready, with the trays' loopback addresses
	local rc=0 i now
	for i in $(seq 1 18); do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$(node "$i")"
	done | k apply -f - >/dev/null 2>&1 || rc=1
	now=$(date -u +%FT%TZ)
	for i in $(seq 1 18); do
		k patch node "$(node "$i")" --subresource=status --type=merge -p \
			'{"status":{"addresses":[{"type":"InternalIP","address":"'"$(ip "$i")"'"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated","lastHeartbeatTime":"'"$now"'","lastTransitionTime":"'"$now"'"}]}}' \
			>/dev/null 2>&1 || rc=1
	done
	check "18 Nodes of $RACK, Ready" $rc "node create or status patch failed"
}

# upg_kwok TRAY...: the Nodes of those trays handed to kwok, which runs the
# pods bound to them as a kubelet would (the workload a drain evicts);
# kwok's pid in opids[kwok]. Needs NVL72_K8S_BIN.
upg_kwok() {
	local nodes=() i out
	for i in "$@"; do nodes+=("$(node "$i")"); done
	out=$(k annotate node "${nodes[@]}" kwok.x-k8s.io/node=fake 2>&1)
	check "the Nodes of trays $* are handed to kwok" $? "$out"
	"$NVL72_K8S_BIN/kwok" --kubeconfig="$KUBECONFIG" --manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--manage-nodes-with-label-selector= --manage-single-node= \
		--cidr=10.244.0.0/16 --node-ip=10.0.0.1 --node-lease-duration-seconds=40 \
		--server-address="127.0.0.1:$((wport + 1))" >"$work/kwok.log" 2>&1 &
	opids[kwok]=$!
}

# op_start NAME [FLAG...]: an operator logging to $work/NAME.log, its pid in
# opids[NAME]; probes, metrics and the dashboard on loopback or off.
op_start() {
	local name=$1
	shift
	POD_NAMESPACE=$NS "$OPERATOR" --metrics-bind-address=127.0.0.1:0 \
		--health-probe-bind-address=127.0.0.1:0 --dashboard-bind-address=0 \
		--tray-heartbeat-timeout=10m --log-level=info "$@" >>"$work/$name.log" 2>&1 &
	opids[$name]=$!
}

# upg_rack JQ_EXTRA: the sample matrix and the sample Rack, its policy made
# for a quick run: short notices (node 6 s, workload 8 s), only the workload
# layer approves, no windows, waves of 4; every layer's window owner is the
# admin's group system:masters (so that approval() counts everywhere, the
# layers a manual edge asks for included). JQ_EXTRA further edits the Rack.
upg_rack() {
	local out
	wait_for 30 k apply -f "$MATRIX_FILE"
	check "apply the matrix $MATRIX" $? ""
	k create --dry-run=client -o json -f deploy/samples/rack-gb300.yaml | jq --arg r "$RACK" --arg chassis "$CHASSIS" \
		--arg p "$PLATFORM" --arg m "$MATRIX" --arg s "$FROM" '
		.metadata.name = $r | .spec.platform = $p | .spec.matrix = {name: $m, stack: $s} |
		.spec.computeTrays |= map(.node = "\($r)-t\(if .index < 10 then "0" else "" end)\(.index)") |
		.spec.responsibilities |= map(.approvalRequired = (.layer == "workload") |
			.windowOwner = "system:masters" |
			.noticePeriod = (if .layer == "node" then "6s" elif .layer == "workload" then "8s" else "0s" end)) |
		.spec.chassisSerial = $chassis | del(.spec.maintenance) |
		.spec.policy = {maxUnavailableTrays: 4, minHealthyTrays: 14, degradedThreshold: 4,
			cordonWhenDegraded: false, drain: {mode: "Evict"}, onGateFailure: "Hold"} | '"${1:-.}" \
		>"$work/rack-$RACK.json"
	out=$(k apply -f "$work/rack-$RACK.json" 2>&1)
	check "apply the Rack $RACK on $FROM" $? "$out"
	cat >"$work/canary-$RACK.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: RackPartition
metadata: {name: $CANARY}
spec: {rack: $RACK, trays: [1, 2], tenant: team-a, canaryEligible: true}
YAML
	out=$(k apply -f "$work/canary-$RACK.yaml" 2>&1)
	check "a 2-tray canary RackPartition of $RACK" $? "$out"
}

start_agent() { # start_agent TRAY
	local t=$1 d
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$AGENT" --kubeconfig "$KUBECONFIG" --node-name "$(node "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$NS" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--validation-command "$sim/bin/nvl72-sim-validate" \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		--metrics-bind-address "$(ip "$t"):$mport" >>"$work/agent-$RACK-$t.log" 2>&1 &
	apid[$RACK-$t]=$!
}
trays_json() { k get computetrays -o json | jq -c "[.items[] | select(.spec.rack == \"$RACK\")] | sort_by(.spec.index)"; }
trays18() { [[ $(trays_json | jq length) == 18 ]]; }
all_ready() {
	trays_json | jq -e --arg c "$CLIQUE" --arg d "$FROM_DRIVER" '[.[] |
		select(.status.fabric.cliqueID == $c and .status.driver.version == $d and
		any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 18' >/dev/null
}
stack_is() { [[ $(k get rack "$RACK" -o jsonpath='{.status.stack}') == "$1" ]]; }

# upg_sim: the simulated rack's folder (upg_agents makes it when it is
# missing; call it first when the operator needs the folder at start, as
# the out-of-band simulator does).
upg_sim() {
	simctl create "$rack" --trays 18 --ip-base "$ipbase" --cluster "$CLUSTER" --clique 32766 \
		--chassis "$CHASSIS" --driver "$FROM_DRIVER" >/dev/null
	check "simulated rack $RACK of 18 trays on 127.0.0.$((ipbase + 1))-$((ipbase + 18))" $? ""
}

# upg_agents: the simulated rack and its 18 agents, every tray Ready on
# FROM_DRIVER and the Rack on FROM. Needs the operator (it creates the trays).
upg_agents() {
	local t t0
	[[ -d $rack ]] || upg_sim
	wait_for 30 trays18
	check "the Rack $RACK has its 18 ComputeTrays" $? "$(k get computetrays 2>&1 | head -3)"
	for t in $(seq 1 18); do start_agent "$t"; done
	t0=$SECONDS
	wait_for 90 all_ready
	check "18 agents report the trays of $RACK Ready on driver $FROM_DRIVER ($((SECONDS - t0))s)" $? \
		"$(k get computetrays -o wide 2>&1 | head -4)"
	wait_for 30 stack_is "$FROM"
	check "the Rack $RACK reports stack $FROM" $? "$(k get rack "$RACK" -o jsonpath='{.status.stack}')"
}

upgrade() { # upgrade NAME CLASS [extra spec lines]
	cat <<YAML
apiVersion: nvl72.io/v1alpha1
kind: RackUpgrade
metadata: {name: $1}
spec:
  rack: $RACK
  target: {matrix: $MATRIX, stack: $TO}
  class: $2
  canary: {partition: $CANARY, soak: 3s}
${3:-}
YAML
}
# approval UPGRADE [LAYER [COMMENT]]: an UpgradeApproval of LAYER (workload)
# by the admin, carrying what the stamping webhook writes (the upgrade's UID
# and target, the admin's user and groups): suites that run no webhook
# create it as it would be stored, and where the webhook runs it overwrites
# both with the same or with the real requester.
ADMIN_USER=admin ADMIN_GROUPS='["system:masters", "system:authenticated"]'
approval() {
	local l=${2:-workload} ref
	ref=$(k get rackupgrade "$1" -o json 2>/dev/null |
		jq -c '{uid: .metadata.uid, target: .spec.target}' 2>/dev/null) || ref='{}'
	cat <<YAML
apiVersion: nvl72.io/v1alpha1
kind: UpgradeApproval
metadata: {name: $1-$l}
spec:
  upgrade: $1
  layer: $l
  decision: Approved
  comment: ${3:-training checkpointed}
  approvedBy: {username: $ADMIN_USER, groups: $ADMIN_GROUPS}
  upgradeRef: $ref
YAML
}
phase() { k get rackupgrade "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
phase_is() { [[ $(phase "$1") == "$2" ]]; }
phase_in() { local p; p=$(phase "$1"); [[ " ${*:2} " == *" $p "* ]]; }
released() { # no tray in maintenance, no Node of the rack cordoned or labelled
	[[ $(trays_json | jq '[.[] | select((.spec.maintenance.state // "None") != "None")] | length') == 0 &&
		$(k get nodes -o json | jq --arg r "$RACK-" '[.items[] | select(.metadata.name | startswith($r)) |
			select(.spec.unschedulable == true or
			.metadata.labels["nvl72.io/maintenance"] != null)] | length') == 0 ]]
}
ustatus() { k get rackupgrade "$1" -o json | jq -c "$2"; }
events_for() { k get events -A --field-selector "involvedObject.name=$1" -o json | jq -r '.items[].reason'; }
