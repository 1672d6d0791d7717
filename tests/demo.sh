#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: the main job on its embedded default. A local real control
# plane, the CRDs, the GB300 sample matrix, one simulated rack of 18 trays
# with an nvl72-agent each, and two nvl72-operator replicas (one leads)
# serving the dashboard and the admission webhook. It stays up until Ctrl-C (or DEMO_SECONDS), then
# stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
root=$PWD
dir=${DEMO_DIR:-$root/build/demo}
port=${DEMO_DASHBOARD_PORT:-8082}
whport=${DEMO_WEBHOOK_PORT:-9443}
ns=nvl72-system
rack=gb300-r07
sim=$root/build/sim
bin=$root/build/rel/bin

pids=()
cleanup() {
	echo
	echo "demo: stopping"
	local p f
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	# Fake IMEX daemons and installers outlive an agent on purpose, as real
	# ones do; the demo stops them by their pid files.
	for f in "$dir"/sim/tray-*/host/run/nvl72-agent/*.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null || true
	done
	tests/cluster/cluster.sh stop "$dir/cluster" >/dev/null 2>&1 || true
}

tests/cluster/cluster.sh stop "$dir/cluster" >/dev/null 2>&1 || true
rm -rf "$dir/sim" "$dir/logs"
mkdir -p "$dir/logs"
export NVL72_CLUSTER_OWNER=$$
eval "$(tests/cluster/cluster.sh start "$dir/cluster")"
trap cleanup EXIT
trap 'exit 0' INT TERM
k() { "$KUBECTL" "$@"; }

k apply -f crds/ >/dev/null
k wait --for=condition=Established --timeout=60s -f crds/ >/dev/null
k create namespace "$ns" >/dev/null
k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null
echo "demo: CRDs and the GB300 matrix applied"

# The admission webhook: both replicas serve it (a on :$whport, b on the next
# port), with the certificate they share through their Secret. With no Service
# routing to host processes, the configurations name replica a by URL; the
# chart's Service would spread requests over both. The operator fills the
# caBundle.
tests/local-webhooks.sh "https://127.0.0.1:$whport" | k apply -f - >/dev/null

# The rack's compute trays as Nodes (no kubelet runs here; the Nodes carry
# the labels and cordons the operator manages).
for t in $(seq -w 1 18); do
	printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s-t%s\n  labels: {kubernetes.io/arch: arm64}\n---\n' "$rack" "$t"
done | k apply -f - >/dev/null
# Without a kubelet, a Node's Ready condition is what a kubelet would
# report; the operator counts a tray whose Node is not Ready as down.
now=$(date -u +%FT%TZ)
ready='{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated tray","lastHeartbeatTime":"'$now'","lastTransitionTime":"'$now'"}]}}'
for t in $(seq -w 1 18); do
	k patch node "$rack-t$t" --subresource=status --type=merge -p "$ready" >/dev/null
done

"$sim/bin/simctl" create "$dir/sim" --trays 18 --ip-base 100 >/dev/null

for r in a b; do
	POD_NAMESPACE=$ns "$bin/nvl72-operator" --kubeconfig "$KUBECONFIG" --leader-elect --identity "demo-$r" \
		--leader-election-namespace "$ns" --agent-lease-namespace "$ns" \
		--metrics-bind-address 0 --health-probe-bind-address 0 \
		--webhook-bind-address "127.0.0.1:$([[ $r == a ]] && echo "$whport" || echo $((whport + 1)))" \
		--dashboard-bind-address "127.0.0.1:$([[ $r == a ]] && echo "$port" || echo $((port + 1)))" \
		--dashboard-anonymous-read \
		>"$dir/logs/operator-$r.log" 2>&1 &
	pids+=($!)
done

# The Rack goes through the webhook: wait until replica a serves it.
for _ in $(seq 120); do
	k apply -f deploy/samples/rack-gb300.yaml >/dev/null 2>&1 && break
	sleep 0.5
done
k get rack "$rack" >/dev/null
echo "demo: admission webhook on (https://127.0.0.1:$whport, failurePolicy Fail)"
echo "demo: rack $rack applied; waiting for the operator to create its trays"
for _ in $(seq 120); do
	[[ $(k get computetrays -o name 2>/dev/null | wc -l) -ge 18 ]] && break
	sleep 0.5
done

for t in $(seq 1 18); do
	d=$(printf '%s/sim/tray-%02d' "$dir" "$t")
	NVL72_SIM_ROOT=$d "$bin/nvl72-agent" --kubeconfig "$KUBECONFIG" \
		--node-name "$(printf '%s-t%02d' "$rack" "$t")" --node-ip "127.0.0.$((100 + t))" \
		--lease-namespace "$ns" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--validation-command "$sim/bin/nvl72-sim-validate" \
		>"$dir/logs/agent-$t.log" 2>&1 &
	pids+=($!)
done
echo "demo: 18 agents started; waiting for the rack to become Ready"
for _ in $(seq 120); do
	[[ $(k get rack "$rack" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] && break
	sleep 0.5
done
k get racks

cat <<MSG

Running: kube-apiserver and etcd (loopback only), two nvl72-operator
replicas (one leads), 18 nvl72-agent processes on a simulated GB300 rack.

Dashboard:  http://127.0.0.1:$port/   (the standby serves :$((port + 1)); open to anyone
            on this machine with --dashboard-anonymous-read, for the demo only)
Logs:       $dir/logs/

In another shell:

  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$KUBECTL
  kubectl get racks                       # platform, stack, ready trays, fabric
  kubectl get computetrays                # one per tray, written by its agent
  kubectl get nodes -L nvl72.io/rack,nvl72.io/tray-index,nvl72.io/clique
  kubectl describe rack $rack             # conditions and events

Ask for a 4-node NVLink compute domain; the operator picks trays in one
clique, labels their Nodes and gives their IMEX daemons one peer list:

  kubectl create namespace team-a
  printf '%s\\n' 'apiVersion: nvl72.io/v1alpha1' 'kind: ComputeDomain' \\
    'metadata: {name: demo, namespace: team-a}' \\
    'spec: {numNodes: 4, selector: {rack: $rack}}' | kubectl apply -f -
  kubectl get computedomains -A -o wide

Inject a fault (GPU 2 of tray 3 leaves the fabric), then watch the tray
turn red on the dashboard and its condition change:

  $sim/bin/simctl gpu $dir/sim/tray-03 2 state=2
  $sim/bin/simctl gpu $dir/sim/tray-03 2 state=3      # back to COMPLETED

Take three trays down (more than the rack's degraded threshold of two)
and the operator cordons the rack's Nodes:

  for t in 04 05 06; do $sim/bin/simctl fault $dir/sim/tray-\$t nvml_init_fail on; done

The admission webhook is on (both replicas serve it; the configurations
name replica a at https://127.0.0.1:$whport). It refuses what no schema
can see, such as an upgrade to a stack the matrix does not list:

  printf '%s\\n' 'apiVersion: nvl72.io/v1alpha1' 'kind: RackUpgrade' \\
    'metadata: {name: to-nowhere}' \\
    'spec: {rack: $rack, target: {matrix: gb300-2026.10, stack: gb300-r999}, class: routine, reason: test}' \\
    | kubectl apply -f -

Not in the demo yet: partitions and upgrades (their controllers have not
landed).
Ctrl-C stops and removes everything.
MSG

if [[ -n ${DEMO_SECONDS:-} ]]; then
	sleep "$DEMO_SECONDS"
else
	while sleep 3600; do :; done
fi
