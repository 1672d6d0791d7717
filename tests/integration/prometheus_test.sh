#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator's /metrics as a real Prometheus sees it: one leader-elected
# operator, the sample Rack with a real agent per tray on a simulated rack,
# and the Debian prometheus server on loopback with a generated config and a
# temporary TSDB, scraping every second. The suite waits for a scrape, then
# asks /api/v1/query for the series that the alerts and the Grafana
# dashboard use (docs/metrics.md) and checks their values.
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
PROM_SECONDS=${NVL72_PROM_SECONDS:-300}

. "$(dirname "$0")/lib/tap.sh"

if ! command -v prometheus >/dev/null; then
	not_ok "prometheus is installed" "run tests/deps.sh as root (Debian package prometheus)"
	finish
fi
if [[ ! -x $OPERATOR || ! -x $AGENT || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-operator" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ not_ok "build the operator, the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-prom.XXXXXX)
rack=$work/rack
declare -A apid=()
opid="" ppid_=""
cleanup() {
	local p f
	for p in "${apid[@]}" $opid $ppid_; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" $opid $ppid_; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((failed > 0)); then
		echo "-- last lines of the operator and prometheus logs"
		tail -10 "$work/op.log" 2>/dev/null | cut -c1-300
		tail -10 "$work/prometheus.log" 2>/dev/null | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses of this run; another run picks others.
ipbase=$((20 + ($$ % 8) * 25))
ip() { echo "127.0.0.$((ipbase + 10#$1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
node() { printf '%s-t%02d' "$RACK" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }

# ------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1) &&
	out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1)
check "apply crds/ and the sample matrix" $? "$out"
k create namespace "$NS" >/dev/null 2>&1

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

"$OPERATOR" --leader-elect --identity=prom --leader-election-namespace="$NS" \
	--metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=0 \
	--dashboard-bind-address=0 --webhook-bind-address=0 --tray-heartbeat-timeout=10m \
	--log-level=info >"$work/op.log" 2>&1 &
opid=$!
wait_for 30 grep -q 'metrics=[0-9]' "$work/op.log"
mport=$(grep -o 'metrics=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
[[ -n $mport ]]
check "the operator serves /metrics on loopback (port $mport)" $? "$(tail -3 "$work/op.log")"
out=$(k apply -f deploy/samples/rack-gb300.yaml 2>&1)
check "the sample Rack applied" $? "$out"
trays18() { [[ $(k get computetrays -o json | jq "[.items[] | select(.spec.rack == \"$RACK\")] | length") == 18 ]]; }
wait_for 30 trays18

simctl create "$rack" --trays 18 --ip-base "$ipbase" >/dev/null
for t in $(seq 1 18); do
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$AGENT" --kubeconfig "$KUBECONFIG" --node-name "$(node "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$NS" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		>>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
done
all_ready() {
	k get computetrays -o json | jq -e '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 18' >/dev/null
}
t0=$SECONDS
wait_for 90 all_ready
check "18 agents on a simulated rack report their trays Ready ($((SECONDS - t0))s)" $? \
	"$(k get computetrays 2>&1 | head -3; tail -3 "$work/agent-1.log")"

# --------------------------------------------------------- prometheus ---
# A free loopback port for Prometheus' own API (it cannot report a port 0).
pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: nvl72-operator
    static_configs: [{targets: ["127.0.0.1:$mport"]}]
YAML
timeout "$PROM_SECONDS" prometheus --config.file="$work/prometheus.yml" \
	--storage.tsdb.path="$work/tsdb" --storage.tsdb.retention.time=1h \
	--web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
ppid_=$!
api="http://127.0.0.1:$pport/api/v1"
wait_for 60 curl -fsS -m 2 "http://127.0.0.1:$pport/-/ready"
check "prometheus ready on 127.0.0.1:$pport with a temporary TSDB" $? "$(tail -3 "$work/prometheus.log")"

# q PROMQL: the result vector as "labels value" lines, sorted.
q() {
	curl -fsS -m 5 -G "$api/query" --data-urlencode "query=$1" |
		jq -r 'select(.status == "success") | .data.result[] | "\(.metric | del(.__name__) | tojson) \(.value[1])"' | sort
}
up1() { [[ $(q 'up{job="nvl72-operator"}') == *' 1' ]]; }
t0=$SECONDS
wait_for 60 up1
check "it scrapes the operator: up{job=\"nvl72-operator\"} is 1 ($((SECONDS - t0))s)" $? \
	"$(curl -s "$api/targets" | jq -c '.data.activeTargets[] | {health, lastError}')"

# The rack settles before its series are read: all 18 trays ready.
ready18() { [[ $(q 'sum(nvl72_tray_ready)') == '{} 18' && $(q 'count(nvl72_tray_ready)') == '{} 18' ]]; }
wait_for 60 ready18
check "nvl72_tray_ready: 18 series, all 1" $? "$(q 'nvl72_tray_ready' | head -3)"
out=$(q 'nvl72_tray_ready{rack="gb300-r07",tray="gb300-r07-t07",node="gb300-r07-t07"}')
[[ $out == *' 1' ]]
check "a tray's series carries its rack, tray and node labels" $? "$out"

out=$(q 'sum(controller_runtime_reconcile_total{controller="rack"})')
n=${out##* }
[[ $n =~ ^[0-9]+$ ]] && ((n > 0))
check "controller_runtime_reconcile_total{controller=\"rack\"} counts reconciles ($n)" $? "$out"
# A reconcile that loses an update race (409) counts as an error and is
# retried, so errors are not asserted to be zero; they must stay a minority
# (a rack reconcile that watches heartbeats ends in requeue_after).
out=$(q 'sum(controller_runtime_reconcile_total{controller="rack",result!="error"}) > sum(controller_runtime_reconcile_total{controller="rack",result="error"})')
[[ -n $out ]]
check "most of them ended without an error" $? "$(q 'controller_runtime_reconcile_total{controller="rack"}')"

out=$(q 'workqueue_depth{name="rack"}')
[[ $out =~ \ [0-9]+$ ]]
check "workqueue_depth{name=\"rack\"} is exported" $? "$out"

# The queue and client series controller-runtime dashboards read.
out=$(q 'sum(workqueue_adds_total{name="rack",controller="rack"})')
n=${out##* }
[[ $n =~ ^[0-9]+$ ]] && ((n > 0))
check "workqueue_adds_total{name=\"rack\"} counts keys queued ($n)" $? "$out"
out=$(q 'sum(workqueue_work_duration_seconds_count{name="rack"})')$(q 'sum(workqueue_queue_duration_seconds_count{name="rack"})')
[[ $out =~ ^\{\}\ [1-9][0-9]*\{\}\ [1-9][0-9]*$ ]]
check "workqueue_work_duration_seconds and _queue_duration_seconds observe the rack queue" $? "$out"
out=$(q 'sum by (method) (rest_client_requests_total{code="200"})')
[[ $out == *'"method":"GET"'* && $out == *'"method":"PATCH"'* ]]
check "rest_client_requests_total counts the operator's GETs and PATCHes answered 200" $? "$out"
out=$(q 'sum(rest_client_request_duration_seconds_count{verb="GET"})')
[[ ${out##* } =~ ^[1-9][0-9]*$ ]]
check "rest_client_request_duration_seconds observes requests" $? "$out"

out=$(q 'leader_election_master_status')
[[ $out == '{"instance":"127.0.0.1:'"$mport"'","job":"nvl72-operator","name":"nvl72-operator"} 1' ]]
check "leader_election_master_status{name=\"nvl72-operator\"} is 1 on the leader" $? "$out"

out=$(q 'nvl72_rack_trays_ready{rack="gb300-r07"}')
[[ $out == *' 18' ]]
check "nvl72_rack_trays_ready{rack=\"gb300-r07\"} is 18" $? "$out"

# A change on the rack reaches Prometheus at the next scrapes.
simctl gpu "$(tray 6)" 2 summary=2
down1() { [[ $(q 'nvl72_tray_ready{tray="gb300-r07-t06"}') == *' 0' && $(q 'sum(nvl72_tray_ready)') == '{} 17' ]]; }
t0=$SECONDS
wait_for 60 down1
check "GPU 2 of tray 6 unhealthy: its nvl72_tray_ready reads 0 in Prometheus, 17 trays ready ($((SECONDS - t0))s)" $? \
	"$(q 'nvl72_tray_ready == 0')"
out=$(q 'nvl72_gpu_fabric_health_summary{tray="gb300-r07-t06",gpu="2"}')$(q 'nvl72_gpu_fabric_health_degraded{tray="gb300-r07-t06",gpu="2"}')
[[ $out =~ \ 2\{.*\ 1$ ]]
check "nvl72_gpu_fabric_health_summary of that GPU is 2 (Unhealthy) and _degraded 1" $? "$out"
finish
