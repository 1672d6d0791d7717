# SPDX-License-Identifier: Apache-2.0
# The rack of the chart on the real node, shared by helm_test.sh and
# `make demo MODE=helm` (tests/demo-helm.sh): the images imported into the
# node's containerd, a simulated rack of 18 trays whose tray 1 is the real
# node (laid out at a real tray's host paths by node.sh tray), the 17 other
# trays as Nodes kept by kwok with agents as processes, and the chart's
# values for that. Needs the variables cluster.sh start --node prints
# (KUBECONFIG, KUBECTL, NVL72_CLUSTER_DIR, NVL72_K8S_BIN, NVL72_NODE_*),
# NVL72_BUILD (build/rel) and `work`, a folder of the caller's; run from the
# repository root. Functions return non-zero on failure and leave details in
# $work/*.log.

rel=$NVL72_BUILD
build=$(dirname "$rel")
sim=$build/sim
NS=nvl72-system   # the release: the operator, restricted
ANS=nvl72-agents  # the agents, privileged
REL=nvl72-operator
RACK=gb300-r07
LEASE_S=15 RETRY_S=2
# The label the chart's agent.gpuNodeLabel requires: node-feature-discovery
# puts it on a Node with an NVIDIA PCI device; here the suite does.
TRAY_LABEL=feature.node.kubernetes.io/pci-10de.present
state=$NVL72_CLUSTER_DIR/node/state
. "$(dirname "${BASH_SOURCE[0]}")/../../cluster/ports.sh"
helm_mport=$(free_port) # the host-run agents' metrics, on each tray's address
node_net=${NVL72_NODE_IP%.*}
hostif=$(sed -n 's/^HOSTIF=//p' "$state" | tail -1)
init=$(sed -n 's/^INIT=//p' "$state" | tail -1)
version=$(sed -n 's/^VERSION := //p' Makefile)
case $(uname -m) in x86_64) arch=amd64 triplet=x86_64-linux-gnu ;; aarch64) arch=arm64 triplet=aarch64-linux-gnu ;; esac
helm=$(tests/cluster/build.sh all | tail -1)/helm
rack=$work/rack
declare -A apid=()
kwok=""

# Tray 1 is the real node; the others are kwok's Nodes.
node() { if ((10#$1 == 1)); then echo "$NVL72_NODE_NAME"; else printf '%s-t%02d' "$RACK" "$((10#$1))"; fi; }
# Tray addresses: the node's own for tray 1; the others on the machine's
# end of the node's link, so the node's IMEX daemon and theirs reach each
# other as trays on one network do.
addr_of() { if ((10#$1 == 1)); then echo "$NVL72_NODE_IP"; else echo "$node_net.$((10 + 10#$1))"; fi; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }
innode() { nsenter --target "$init" --mount --net -- "$@"; }
nodectr() { innode "$NVL72_K8S_BIN/ctr" --address /run/containerd/containerd.sock -n k8s.io "$@"; }

# The images of `make images`, built into $work/images and imported.
helm_env_images() {
	local snap img
	IMAGE_OUT=$work/images deploy/docker/images.sh "$build" >"$work/images.log" 2>&1 || return 1
	snap=$(innode sed -n "s/^ *snapshotter = '\(.*\)'/\1/p" /run/containerd.toml | head -1)
	for img in operator agent; do
		nodectr images import --snapshotter "$snap" "$work/images/nvl72-$img-$arch.tar" \
			>>"$work/import.log" 2>&1 || return 1
	done
}

# The simulated rack, its addresses, and tray 1 at the node's host paths.
helm_env_rack() {
	local i
	simctl create "$rack" --trays 18 --ip-base 10 >/dev/null || return 1
	for i in $(seq 1 18); do
		sed -i "s/^ip=.*/ip=$(addr_of "$i")/" "$(tray "$i")/tray.env" || return 1
		((i == 1)) || ip addr add "$(addr_of "$i")/32" dev "$hostif" || return 1
	done
	tests/cluster/node.sh tray "$state" "$(tray 1)" "$sim" >"$work/tray.log" 2>&1
}

# Nodes for trays 2..18, Ready with their addresses, kept so by kwok. All
# 18 Nodes, the real one too, carry the label that stands for what a site's
# node-feature-discovery puts on a Node with NVIDIA GPUs (TRAY_LABEL).
helm_env_nodes() {
	local i now rc=0
	"$KUBECTL" label node "$NVL72_NODE_NAME" "$TRAY_LABEL=true" --overwrite >/dev/null 2>&1 ||
		return 1
	for i in $(seq 2 18); do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: %s, annotations: {kwok.x-k8s.io/node: fake}, labels: {%s: "true"}}\n' "$(node "$i")" "$TRAY_LABEL"
	done | "$KUBECTL" apply -f - >/dev/null 2>&1 || return 1
	now=$(date -u +%FT%TZ)
	for i in $(seq 2 18); do
		"$KUBECTL" patch node "$(node "$i")" --subresource=status --type=merge -p \
			'{"status":{"addresses":[{"type":"InternalIP","address":"'"$(addr_of "$i")"'"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kwok","lastHeartbeatTime":"'"$now"'","lastTransitionTime":"'"$now"'"}]}}' \
			>/dev/null 2>&1 || rc=1
	done
	"$NVL72_K8S_BIN/kwok" --kubeconfig="$KUBECONFIG" --manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--manage-nodes-with-label-selector= --manage-single-node= \
		--cidr=10.244.0.0/16 --node-lease-duration-seconds=40 \
		--server-address="127.0.0.1:$(free_port)" >"$work/kwok.log" 2>&1 &
	kwok=$!
	return $rc
}

# The chart's values: the images as imported, both workloads on the real
# node, the agents in their own namespace, the tray's simulator state. The
# agent DaemonSet is pinned to the real node, as trays 2..18 run their
# agents as processes; the operator is told the selection those agents
# stand for (the chart's selection without the pin), as the pin would report
# 17 trays AgentNotScheduled.
helm_env_values() {
	cat <<YAML
image: {pullPolicy: Never}
operator:
  image: {tag: "$version"}
  nodeSelector: {kubernetes.io/hostname: $NVL72_NODE_NAME}
  leaderElection: {leaseDuration: ${LEASE_S}s, renewDeadline: 10s, retryPeriod: ${RETRY_S}s}
  # Reached through its Service, from this machine.
  dashboard: {expose: true}
  extraArgs: [--tray-heartbeat-timeout=10m, "--agent-node-selector=nvl72.io/rack,$TRAY_LABEL=true,!node-role.kubernetes.io/control-plane"]
# The agents go to the chart's default namespace, $ANS, which it creates
# labelled privileged.
agent:
  image: {tag: "$version"}
  nodeSelector: {kubernetes.io/hostname: $NVL72_NODE_NAME}
  nvmlPath: /host/usr/lib/$triplet/libnvidia-ml.so.1
  resyncSeconds: 3
  extraArgs: [--heartbeat-period=2s, --lease-duration=10s]
  # The simulator's state: the fake NVML the agent opens reads it, and
  # the fake host tools, which get the variable through the wrappers.
  # HELM_ENV_AGENT_ENV adds entries (", {name: N, value: V}").
  extraEnv: [{name: NVL72_SIM_ROOT, value: "$(tray 1)"}${HELM_ENV_AGENT_ENV:-}]
  extraVolumes: [{name: sim, hostPath: {path: "$(tray 1)", type: Directory}}]
  extraVolumeMounts: [{name: sim, mountPath: "$(tray 1)"}]
YAML
}

# A ServiceAccount dash-reader in $NS that may read the dashboard's feed
# (the chart's nvl72-dashboard-viewer) and every namespace's ComputeDomains
# (nvl72-viewer, cluster-wide).
helm_env_dash_reader() {
	"$KUBECTL" -n "$NS" create serviceaccount dash-reader >/dev/null &&
		"$KUBECTL" create clusterrolebinding nvl72-test-dash-feed --clusterrole=nvl72-dashboard-viewer \
			--serviceaccount="$NS:dash-reader" >/dev/null &&
		"$KUBECTL" create clusterrolebinding nvl72-test-dash-view --clusterrole=nvl72-viewer \
			--serviceaccount="$NS:dash-reader" >/dev/null
}

# The sample Rack with the real node as tray 1.
helm_env_rack_yaml() { sed "s/node: $RACK-t01}/node: $NVL72_NODE_NAME}/" deploy/samples/rack-gb300.yaml; }

# The operator's namespace, enforcing the restricted level.
helm_env_namespace() {
	"$KUBECTL" create namespace "$NS" >/dev/null &&
		"$KUBECTL" label namespace "$NS" pod-security.kubernetes.io/enforce=restricted \
			pod-security.kubernetes.io/enforce-version=latest >/dev/null
}

# A tray's agent as a process, as on the trays kwok stands for.
helm_env_start_agent() {
	local t=$1 d
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$rel/bin/nvl72-agent" --kubeconfig "$KUBECONFIG" --node-name "$(node "$t")" \
		--node-ip "$(addr_of "$t")" --lease-namespace "$ANS" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s \
		--lease-duration 10s --metrics-bind-address "$(addr_of "$t"):$helm_mport" \
		>>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
}

# Stops the processes started here and the fake IMEX daemons of trays 2..18.
helm_env_stop() {
	local p f
	for p in "${apid[@]}" $kwok; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" $kwok; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	return 0
}
