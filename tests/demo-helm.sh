#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo MODE=helm`: the same rack as `make demo`, deployed as platform
# teams deploy it. A local control plane with a real node (kubelet,
# containerd, kube-proxy in namespaces of their own), the operator and agent
# images of `make images` imported into the node's containerd, and the chart
# installed with `helm install`: the operator's 2 replicas under the
# restricted Pod Security level, the agent's DaemonSet pod on the node
# against a simulated tray at a real tray's host paths, the other 17 trays as
# kwok Nodes with agents as processes. A 4-tray ComputeDomain that includes
# the node is made Ready. Needs root. Stays up until Ctrl-C (or
# DEMO_SECONDS), then removes everything.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
die() { echo "demo: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "MODE=helm runs a real node (namespaces, mounts, a veth): run it as root"
dir=${DEMO_DIR:-$PWD/build/demo-helm}

tests/cluster/cluster.sh stop "$dir/cluster" >/dev/null 2>&1 || true
rm -rf "$dir/work"
mkdir -p "$dir/work"
export NVL72_CLUSTER_OWNER=$$
echo "demo: starting a control plane and a real node (the first run builds them: minutes)"
eval "$(tests/cluster/cluster.sh start --node "$dir/cluster")"
export KUBECONFIG NVL72_BUILD=$PWD/build/rel
work=$dir/work
. tests/integration/lib/helm_env.sh
cleanup() {
	set +e # stop everything, whatever failed first
	echo
	echo "demo: stopping"
	helm_env_stop
	tests/cluster/cluster.sh stop "$dir/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM
k() { "$KUBECTL" "$@"; }

echo "demo: building the images and importing them into the node's containerd"
helm_env_images || die "the images: see $work/images.log and $work/import.log"
helm_env_rack || die "the simulated rack: see $work/tray.log"
helm_env_nodes || die "the kwok Nodes: see $work/kwok.log"
helm_env_namespace || die "cannot create namespace $NS"
helm_env_values >"$work/values.yaml"
echo "demo: helm install $REL (values in $work/values.yaml)"
"$helm" install "$REL" deploy/helm/nvl72-operator -n "$NS" -f "$work/values.yaml" --wait --timeout 5m >/dev/null
k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null
helm_env_rack_yaml | k apply -f - >/dev/null
for t in $(seq 2 18); do helm_env_start_agent "$t"; done
k create namespace team-a >/dev/null
printf '%s\n' 'apiVersion: nvl72.io/v1alpha1' 'kind: ComputeDomain' \
	'metadata: {name: demo, namespace: team-a}' "spec: {numNodes: 4, selector: {rack: $RACK}}" |
	k apply -f - >/dev/null
echo "demo: waiting for the trays and the ComputeDomain"
for _ in $(seq 240); do
	[[ $(k -n team-a get computedomain demo -o jsonpath='{.status.status}' 2>/dev/null) == Ready ]] && break
	sleep 0.5
done
cip=$(k -n "$NS" get service "$REL-dashboard" -o jsonpath='{.spec.clusterIP}')
helm_env_dash_reader || die "cannot create the dashboard's reader account"

cat <<MSG

The rack runs on a real node, installed by the chart (logs: $dir/cluster/logs, $work).

  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$KUBECTL
  export PATH=\$PATH:$rel/bin          # kubectl nvl72

  kubectl get pods -A -o wide             # 2 operator pods, the agent pod on $NVL72_NODE_NAME
  kubectl get computedomain -n team-a demo -o wide
  kubectl nvl72 status rack $RACK
  kubectl -n $NS get lease $REL           # the leader

The dashboard, through its Service (the leader's pod; this machine routes to the
service range through the node): http://$cip:8082/
It asks for a bearer token; this one (valid for a day) may read it all:

  kubectl -n $NS create token dash-reader --duration=24h

The agent in its pod reaches the host through nsenter; on the node, the
tray is at its real paths:

  nsenter --target $init --mount cat /etc/nvidia-imex/nodes_config.cfg
  nsenter --target $init --mount ls /dev/nvidia-caps-imex-channels

Hand leadership over by force, then roll the operator:

  kubectl -n $NS delete pod \$(kubectl -n $NS get lease $REL -o jsonpath='{.spec.holderIdentity}' | cut -d_ -f1) --grace-period=0 --force
  $helm upgrade $REL deploy/helm/nvl72-operator -n $NS -f $work/values.yaml --set operator.logLevel=debug

Ctrl-C stops and removes everything.
MSG

if [[ -n ${DEMO_SECONDS:-} ]]; then
	sleep "$DEMO_SECONDS"
else
	while sleep 3600; do :; done
fi
