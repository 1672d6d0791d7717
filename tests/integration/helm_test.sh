#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The chart installed as users install it: `helm install` of
# deploy/helm/nvl72-operator onto the cluster with a real node, running the
# images `make images` builds (imported into the node's containerd, no
# registry). The operator's 2 replicas run under the restricted Pod Security
# level with in-cluster configuration and leader election; the API server
# reaches the admission webhook through its Service with the caBundle the
# operator keeps; the agent DaemonSet's pod runs on the real node, through
# its image's nsenter wrappers, against a simulated tray laid out at a real
# tray's host paths inside the node's mount namespace (tests/cluster/node.sh
# tray) and, as the kubelet plugin of imex.nvl72.io, is registered by the
# real kubelet and publishes its Node's ResourceSlice; the rack's 17 other
# trays are Nodes kept by kwok with agents as
# processes. A ComputeDomain of 4 trays that includes the real node becomes
# Ready, `kubectl nvl72 status` and the dashboard (through the Service, to a
# bound token of an account given nvl72-dashboard-viewer) show
# it, Prometheus scrapes /metrics through the Service with a bound token, and
# deleting the leading pod by force hands leadership to the other within one
# lease duration while the webhook keeps admitting. A bad install is
# explained: a Rack naming a control-plane Node is refused; a tray whose
# Node lacks the agent's label is reported
# AgentNotScheduled in the Rack's status and an event naming the label; with
# no operator pod, an apply is refused naming the webhook and its Service;
# installed without its CRDs, the operator stays unready and its log names
# the missing CustomResourceDefinition. helm upgrade to a
# new tag rolls both workloads without moving a tray, and helm uninstall
# after the documented teardown leaves no finalizer, Node mark or webhook.
#
# needs: node
# Run by tests/integration/run.sh, which starts a node for suites marked as
# above. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib/tap.sh

: "${NVL72_NODE_NAME:?NVL72_NODE_NAME: run through tests/integration/run.sh (a node suite)}"
: "${NVL72_CLUSTER_DIR:?}" "${NVL72_K8S_BIN:?}" "${NVL72_BUILD:?}" "${NVL72_NODE_IP:?}"
export KUBECONFIG

CD_NS=team-a
CD=train-4
work=$(mktemp -d /tmp/nvl72-helm-test.XXXXXX)
. tests/integration/lib/helm_env.sh
cleanup() {
	local p
	helm_env_stop
	if ((failed > 0)); then
		echo "-- pods"
		k get pods -A -o wide 2>&1 | head -20
		echo "-- last lines of the operator pods' and the in-pod agent's logs"
		for p in $(k -n "$NS" get pods -o name 2>/dev/null); do
			echo "- $p"
			k -n "$NS" logs "$p" --tail=15 2>&1 | cut -c1-300
		done
		k -n "$ANS" logs daemonset/$REL-agent --tail=25 2>&1 | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------- images, rack, Nodes ---
t0=$SECONDS
helm_env_images
check "make images builds both images, and the node's containerd imports them ($((SECONDS - t0)) s)" $? \
	"$(tail -5 "$work/images.log" "$work/import.log" 2>/dev/null)"
helm_env_rack
check "a simulated rack of 18 trays; tray 1, at the node's address, laid out at a real tray's host paths in the node" $? \
	"$(cat "$work/tray.log" 2>/dev/null)"
seen=$(innode sh -c "head -c 60 /proc/driver/nvidia/version; ls /usr/lib/$triplet/libnvidia-ml.so.1 /usr/local/sbin/nvidia-imex" 2>&1)
[[ $seen == *"NVIDIA"*libnvidia-ml.so.1*nvidia-imex* && ! -e /usr/lib/$triplet/libnvidia-ml.so.1 && ! -e /etc/nvidia-imex ]]
check "the node sees the driver, NVML and IMEX at their host paths; this machine does not" $? "$seen"
helm_env_nodes
check "17 Nodes for the other trays, kept Ready by kwok" $? ""

# ---------------------------------------------------- helm install ---
helm_env_namespace
check "namespace $NS enforces the restricted Pod Security level" $? ""
HELM_ENV_AGENT_ENV=', {name: NVL72_AGENT_TEST_PREPARE_PAUSE, value: "6"}' helm_env_values >"$work/values.yaml"
t0=$SECONDS
out=$("$helm" install "$REL" deploy/helm/nvl72-operator -n "$NS" -f "$work/values.yaml" \
	--wait --timeout 5m 2>&1)
check "helm install --wait of the chart ($((SECONDS - t0)) s)" $? "$out"

pods_json() { k -n "$NS" get pods -l app.kubernetes.io/component=operator -o json 2>/dev/null; }
two_running() {
	[[ $(pods_json | jq '[.items[] | select(.status.phase == "Running" and
		all(.status.containerStatuses[]; .ready and .restartCount == 0))] | length') == 2 ]]
}
wait_for 120 two_running
check "both operator pods are Running and ready with 0 restarts" $? \
	"$(k -n "$NS" get pods -o wide 2>&1 | tail -3)"
ctx=$(pods_json | jq -r '[.items[].spec.securityContext.runAsNonRoot, .items[].spec.containers[0].securityContext.allowPrivilegeEscalation] | map(tostring) | join(",")')
check "their pods pass the restricted level: non-root, no privilege escalation ($ctx)" \
	"$([[ $ctx == true,true,false,false ]]; echo $?)" "$ctx"
holder() { k -n "$NS" get lease "$REL" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
leader=""
# The holder is "POD_SUFFIX" (the pod's name and a per-process suffix).
has_leader() {
	leader=$(holder)
	leader=${leader%_*}
	[[ -n $leader ]] && pods_json | jq -e --arg h "$leader" 'any(.items[]; .metadata.name == $h)' >/dev/null
}
wait_for 60 has_leader
check "one of the pods holds the leader Lease ($leader), through in-cluster configuration" $? \
	"holder: '$(holder)'"

# ------------------------------------------- the webhook via its Service ---
ca=$(k -n "$NS" get secret "$REL-webhook-tls" -o jsonpath='{.data.ca\.crt}' 2>/dev/null)
vca=$(k get validatingwebhookconfiguration "$REL" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null)
svc=$(k get validatingwebhookconfiguration "$REL" -o jsonpath='{.webhooks[0].clientConfig.service.namespace}/{.webhooks[0].clientConfig.service.name}' 2>/dev/null)
[[ -n $ca && $ca == "$vca" && $svc == "$NS/$REL" ]]
check "the webhook configuration points at Service $svc with the caBundle of the operator's Secret" $? \
	"svc=$svc ca=${#ca} bytes, bundle=${#vca} bytes"
out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1)
check "the sample matrix is admitted through the webhook" $? "$out"
helm_env_rack_yaml >"$work/rack.yaml"
out=$(k apply -f "$work/rack.yaml" 2>&1)
check "the Rack, with the real node as tray 1, is admitted" $? "$out"
yq_rack2() { sed -e 's/name: gb300-r07$/name: gb300-r08/' -e 's/chassisSerial: .*/chassisSerial: "1821124000043"/' "$work/rack.yaml"; }
out=$(yq_rack2 | k apply --dry-run=server -f - 2>&1)
[[ $? != 0 && $out == *"$NVL72_NODE_NAME"* && $out == *denied* ]]
check "a second Rack claiming the same Nodes is refused by the webhook, naming a Node" $? "$out"
# A Rack naming a control-plane Node would bring the privileged agent there.
k create -f - >/dev/null 2>&1 <<'NODE'
apiVersion: v1
kind: Node
metadata: {name: nvl72-test-cp-1, labels: {node-role.kubernetes.io/control-plane: ""}}
NODE
cp_refused() {
	out=$(sed "s/node: $RACK-t18}/node: nvl72-test-cp-1}/" "$work/rack.yaml" | k apply --dry-run=server -f - 2>&1)
	[[ $? != 0 && $out == *'Node "nvl72-test-cp-1" is a control-plane Node (label node-role.kubernetes.io/control-plane)'* ]]
}
wait_for 30 cp_refused
check "a Rack listing a control-plane Node is refused by the webhook, naming the Node and its role" $? "$out"
k delete node nvl72-test-cp-1 >/dev/null 2>&1

# ------------------------------------------------------ the agents ---
k create namespace "$CD_NS" >/dev/null 2>&1
for t in $(seq 2 18); do helm_env_start_agent "$t"; done
apod=""
agent_running() {
	apod=$(k -n "$ANS" get pods -l app.kubernetes.io/component=agent -o json 2>/dev/null |
		jq -r --arg n "$NVL72_NODE_NAME" '.items[] | select(.spec.nodeName == $n and .status.phase == "Running") | .metadata.name')
	[[ -n $apod ]]
}
wait_for 120 agent_running
check "the agent DaemonSet's pod runs on the real node ($apod)" $? \
	"$(k -n "$ANS" get pods -o wide 2>&1 | tail -2; k -n "$ANS" get events 2>&1 | tail -3)"
tray1() { k get computetray "$RACK-t01" -o json 2>/dev/null; }
t1_ready() {
	local j
	j=$(tray1) && [[ -n $j ]] && jq -e '(.status.gpus | length == 4) and
		any(.status.conditions[]?; .type == "Ready" and .status == "True")' >/dev/null <<<"$j"
}
wait_for 120 t1_ready
check "the in-pod agent reports tray 1 Ready with 4 GPUs read through the host's NVML" $? \
	"$(tray1 | jq -c '.status | {conditions, driver, fabric}' | cut -c1-400)"
drv=$(tray1 | jq -r '.status.driver.version // empty')
want=$(innode sed -n 's/.*Kernel Module for [^ ]* *\([0-9.]*\).*/\1/p' /proc/driver/nvidia/version | head -1)
check "its driver version is the node's /proc/driver/nvidia/version ($drv)" \
	"$([[ -n $drv && $drv == "$want" ]]; echo $?)" "status $drv, file $want"
# The chart's agent is also the kubelet plugin of imex.nvl72.io: the real
# kubelet finds its registration socket in the mounted plugins_registry and
# registers it, and the Node's ResourceSlice goes out through the agent's
# own token, past the own-resourceslice policy.
registered() { k -n "$ANS" logs "$apod" 2>/dev/null | grep -q 'registered with the kubelet'; }
wait_for 60 registered
check "the real kubelet registers the in-pod agent as the plugin of imex.nvl72.io" $? \
	"$(k -n "$ANS" logs "$apod" --tail=8 2>&1 | cut -c1-300)"
node_slice() {
	k get resourceslice "$NVL72_NODE_NAME-imex.nvl72.io" -o json 2>/dev/null |
		jq -e --arg n "$NVL72_NODE_NAME" '.spec.nodeName == $n and .spec.driver == "imex.nvl72.io" and
			(.spec.devices | length) == 4' >/dev/null &&
		[[ $(tray1 | jq -r '.status.conditions[]? | select(.type == "KubeletPluginReady") | .status') == True ]]
}
wait_for 60 node_slice
check "its Node's ResourceSlice is published with 4 slots, and KubeletPluginReady is True" $? \
	"$(k get resourceslices -o wide 2>&1 | head -3; tray1 | jq -c '.status.conditions[]? | select(.type == "KubeletPluginReady")')"
all_ready() {
	[[ $(k get computetrays -o json | jq '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length') == 18 ]]
}
wait_for 90 all_ready
check "all 18 trays are Ready" $? "$(k get computetrays 2>&1 | head -4)"

# ----------------------------------------------- a ComputeDomain ---
# The workload author's sample (docs/workloads.md): the domain first, its
# pod once the domain is Ready.
sample=deploy/samples/workloads/imex-domain.yaml
yq -y 'select(.kind == "ComputeDomain")' "$sample" >"$work/cd.yaml"
[[ $(yq -r '.metadata.namespace + "/" + .metadata.name' "$work/cd.yaml") == "$CD_NS/$CD" ]] &&
	out=$(k apply -f "$work/cd.yaml" 2>&1)
check "the sample's ComputeDomain of 4 trays ($sample) is admitted" $? "$out"
cd_json() { k -n "$CD_NS" get computedomain "$CD" -o json 2>/dev/null; }
cd_ready() { [[ $(cd_json | jq -r '.status.status') == Ready ]]; }
t0=$SECONDS
wait_for 120 cd_ready
check "the domain becomes Ready ($((SECONDS - t0)) s)" $? "$(cd_json | jq -c .status | cut -c1-400)"
members=$(cd_json | jq -r '[.status.nodes[].name] | join(" ")')
check "its members include the real node ($members)" "$([[ " $members " == *" $NVL72_NODE_NAME "* ]]; echo $?)" "$members"
imex=$(tray1 | jq -r '[.status.imex.daemonState, .status.imex.domainState, (.status.imex.peersConnected | tostring)] | join(" ")')
check "the in-pod agent's IMEX daemon is READY on the node with 4 peers ($imex)" \
	"$([[ $imex == "Ready Up 4" ]]; echo $?)" "$imex"
# The agent's state and the daemon are the node's: its /run, its PIDs.
pid=$(innode cut -d' ' -f1 /run/nvl72-agent/imex.pid 2>/dev/null)
cfg=$([[ $pid =~ ^[0-9]+$ ]] && innode cat "/proc/$pid/cmdline" | tr '\0' ' ')
[[ $cfg == *" -c /etc/nvidia-imex/config.cfg"* ]] && innode test -f /etc/nvidia-imex/config.cfg
check "the daemon was handed the host's own path, /etc/nvidia-imex/config.cfg ($cfg)" $? "$cfg"
ch=$(innode ls /dev/nvidia-caps-imex-channels 2>&1)
check "the node's /dev has the domain's channel (${ch//$'\n'/ }), this machine's does not" \
	"$([[ $ch == channel0 && ! -e /dev/nvidia-caps-imex-channels ]]; echo $?)" "$ch"

# ------------------------------------- a workload's IMEX channel (DRA) ---
# A pod consumes the domain as it would NVIDIA's: a claim from the domain's
# ResourceClaimTemplate, allocated by the scheduler on a member's slot and
# prepared by the in-pod agent as the kubelet plugin of imex.nvl72.io, whose
# CDI spec makes containerd add the channel device to the container.
tmpl=$(cd_json | jq -r '.status.resourceClaimTemplate.name // empty')
check "the domain names its ResourceClaimTemplate in its status ($tmpl)" \
	"$([[ -n $tmpl ]] && k -n "$CD_NS" get resourceclaimtemplate "$tmpl" >/dev/null 2>&1; echo $?)" \
	"$(cd_json | jq -c '.status.conditions' | cut -c1-300)"
major=$(innode awk '$2 == "nvidia-caps-imex-channels" { print $1 }' /proc/devices)
want_dev=$(printf '%x:0' "$major" 2>/dev/null)
# pod NAME TEMPLATE [LABEL: VALUE]: a worker holding one claim from
# TEMPLATE, on a Node with that label, that prints its channel's device
# numbers and stays.
pod() {
	local sel=""
	[[ -n ${3:-} ]] && sel="nodeSelector: {$3}"
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $CD_NS}
spec:
  terminationGracePeriodSeconds: 1
  $sel
  resourceClaims: [{name: imex, resourceClaimTemplateName: $2}]
  containers:
  - name: worker
    image: $NVL72_TEST_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, "stat -c '%t:%T' /dev/nvidia-caps-imex-channels/channel0; exec sleep 3600"]
    resources: {claims: [{name: imex}]}
YAML
}
agent_log() { k -n "$ANS" logs "$apod" "$@" 2>/dev/null; }
apod_now() {
	k -n "$ANS" get pods -l app.kubernetes.io/component=agent -o json 2>/dev/null |
		jq -r --arg n "$NVL72_NODE_NAME" '.items[] | select(.spec.nodeName == $n) | .metadata.name'
}
record() { innode cat /run/nvl72-agent/dra-claims.json 2>/dev/null; }
cdi_files() { innode sh -c 'ls /var/run/cdi 2>/dev/null' | tr '\n' ' '; }
# The agent runs with the test hook on (NVL72_AGENT_TEST_PREPARE_PAUSE):
# every new claim pauses after its CDI spec and record are on disk, before
# the answer. It is killed there, as a crash would.
W0=$(yq -r 'select(.kind == "Pod") | .metadata.name' "$sample")
yq -y --arg img "$NVL72_TEST_IMAGE" 'select(.kind == "Pod") |
	.spec.containers[0].image = $img | .spec.containers[0].imagePullPolicy = "Never" |
	.spec.terminationGracePeriodSeconds = 1' "$sample" >"$work/w0.yaml"
[[ $(yq -r '.spec.resourceClaims[0].resourceClaimTemplateName' "$work/w0.yaml") == "$tmpl" ]] &&
	out=$(k apply -f "$work/w0.yaml" 2>&1)
check "the sample's pod ($W0), with a claim from the template, is admitted (the test's image in place of busybox)" $? "$out"
in_window() { agent_log | grep -q 'test hook: claim prepared and recorded'; }
wait_for 120 in_window
check "the claim is allocated and the agent has prepared it: spec and record on disk, no answer yet" $? \
	"$(k -n "$CD_NS" describe pod "$W0" 2>&1 | tail -6 | cut -c1-300)"
claim=$(k -n "$CD_NS" get pod "$W0" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}' 2>/dev/null)
cuid=$(k -n "$CD_NS" get resourceclaim "$claim" -o jsonpath='{.metadata.uid}' 2>/dev/null)
rec1=$(record | jq -c --arg u "$cuid" '.claims[$u] // empty' 2>/dev/null)
spec1=$(innode stat -c '%i %Y' "/var/run/cdi/imex.nvl72.io-$cuid.json" 2>/dev/null)
# The agent shares the node's PID namespace (hostPID): its PID is looked up
# and signalled there.
innode_pid() { nsenter --target "$init" --mount --pid -- "$@"; }
apid=$(innode_pid pgrep -x nvl72-agent | head -1)
innode_pid kill -KILL "$apid"
[[ -n $rec1 && -n $spec1 && -n $apid ]]
check "SIGKILL of the agent ($apid) between the CDI spec and the answer" $? \
	"record '$rec1', spec '$spec1', pid '$apid'"
running_worker() { [[ $(k -n "$CD_NS" get pod "$W0" -o jsonpath='{.status.phase}' 2>/dev/null) == Running ]]; }
t0=$SECONDS
wait_for 180 running_worker
check "the restarted agent answers the kubelet's retry and the pod starts ($((SECONDS - t0)) s)" $? \
	"$(k -n "$CD_NS" describe pod "$W0" 2>&1 | tail -8 | cut -c1-300)"
apod=$(apod_now)
rec2=$(record | jq -c --arg u "$cuid" '.claims[$u] // empty' 2>/dev/null)
spec2=$(innode stat -c '%i %Y' "/var/run/cdi/imex.nvl72.io-$cuid.json" 2>/dev/null)
preps=$( (k -n "$ANS" logs "$apod" --previous 2>/dev/null; agent_log) | grep -cE "info +agent: claim prepared claim=.*uid=$cuid")
[[ $rec2 == "$rec1" && $spec2 == "$spec1" && $preps == 1 ]]
check "nothing was prepared twice: the record and the spec file are unchanged, one preparation logged" $? \
	"preparedAt $(jq -r .preparedAt <<<"$rec1") -> $(jq -r .preparedAt <<<"${rec2:-{\}}"), spec (inode mtime) '$spec1' -> '$spec2', prepared $preps times"
devnums() { k -n "$CD_NS" logs "$1" 2>/dev/null | head -1; }
got=$(devnums "$W0")
[[ -n $major && $got == "$want_dev" ]]
check "inside the container the channel is the node's: stat -c %t:%T prints $got (major $major of /proc/devices, minor 0)" $? \
	"got '$got', want '$want_dev'"
alloc=$(k -n "$CD_NS" get resourceclaim "$claim" -o json 2>/dev/null |
	jq -r '[.status.allocation.devices.results[] | .driver + " " + .pool] | join(",")')
node_of=$(k -n "$CD_NS" get pod "$W0" -o jsonpath='{.spec.nodeName}')
[[ $alloc == "imex.nvl72.io $NVL72_NODE_NAME" && $node_of == "$NVL72_NODE_NAME" ]]
check "kubectl get resourceclaim shows $claim allocated by imex.nvl72.io on the member node" $? \
	"allocation '$alloc', pod on '$node_of'"

# A claim the domain's template cannot satisfy stays Pending, and says why:
# one from another domain's template on a Node that is not that domain's,
# and one of a domain that is not Ready.
cat >"$work/cd-more.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: ComputeDomain
metadata: {name: other, namespace: $CD_NS}
spec:
  numNodes: 2
  selector: {rack: $RACK}
---
apiVersion: nvl72.io/v1alpha1
kind: ComputeDomain
metadata: {name: too-wide, namespace: $CD_NS}
spec:
  numNodes: 18
  selector: {rack: $RACK}
YAML
k apply -f "$work/cd-more.yaml" >/dev/null 2>&1
tmpl_of() { k -n "$CD_NS" get computedomain "$1" -o jsonpath='{.status.resourceClaimTemplate.name}' 2>/dev/null; }
both_tmpl() { [[ -n $(tmpl_of other) && -n $(tmpl_of too-wide) ]]; }
wait_for 60 both_tmpl
out=$(pod worker-other "$(tmpl_of other)" "kubernetes.io/hostname: $NVL72_NODE_NAME" | k apply -f - 2>&1) &&
	out=$(pod worker-notready "$(tmpl_of too-wide)" | k apply -f - 2>&1)
check "two more pods: one on the real node with the claim of domain other (not a member), one of a domain that is not Ready" $? "$out"
unsched() { # unsched POD: Pending with the scheduler's reason naming the claim
	local msg
	msg=$(k -n "$CD_NS" get pod "$1" -o json 2>/dev/null |
		jq -r '.status.conditions[]? | select(.type == "PodScheduled" and .status == "False") | .message')
	[[ $msg == *claim* ]] && echo "$msg"
}
wait_for 60 unsched worker-other
why1=$(unsched worker-other)
check "the pod with another domain's claim stays Pending, the scheduler naming its claim ($(cut -c1-120 <<<"$why1"))" \
	"$([[ -n $why1 ]]; echo $?)" "$(k -n "$CD_NS" describe pod worker-other 2>&1 | tail -5)"
wait_for 60 unsched worker-notready
why2=$(unsched worker-notready)
desc=$(k -n "$CD_NS" describe pod worker-notready 2>&1)
[[ -n $why2 && $desc == *FailedScheduling* && $(k -n "$CD_NS" get computedomain too-wide -o jsonpath='{.status.status}') != Ready ]]
check "the pod of a domain that is not Ready stays Pending, and kubectl describe says why" $? "$(tail -5 <<<"$desc")"
k -n "$CD_NS" delete pod worker-other worker-notready --wait=false >/dev/null 2>&1
k -n "$CD_NS" delete computedomain other too-wide --wait=false >/dev/null 2>&1

# The kubelet restarted, as `systemctl restart kubelet` would: it deletes
# the node's ResourceSlices when it starts; the agent puts its slice back,
# and the running pod keeps its channel.
slice_uid() { k get resourceslice "$NVL72_NODE_NAME-imex.nvl72.io" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
suid=$(slice_uid)
cid=$(k -n "$CD_NS" get pod "$W0" -o jsonpath='{.status.containerStatuses[0].containerID}')
t0=$(date +%s%N)
out=$(tests/cluster/node.sh kubelet-restart "$NVL72_CLUSTER_DIR/node/state" 2>&1)
check "the node's kubelet restarted (pid $out)" $? "$out"
new_slice() { local u; u=$(slice_uid) && [[ -n $u && $u != "$suid" ]]; }
wait_for 120 new_slice
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "the node's slice comes back after the kubelet restart (a new object, ${ms} ms)" $rc \
	"before $suid, now $(slice_uid)"
slice_restart_ms=$ms
# The new kubelet serves exec once it has taken the running pods over.
got=""
chan_seen() {
	got=$(k -n "$CD_NS" exec "$W0" -- sh -c "stat -c '%t:%T' /dev/nvidia-caps-imex-channels/channel0" 2>&1)
	[[ $got == "$want_dev" ]]
}
wait_for 60 chan_seen
cid2=$(k -n "$CD_NS" get pod "$W0" -o jsonpath='{.status.containerStatuses[0].containerID}')
[[ $got == "$want_dev" && $cid2 == "$cid" ]]
check "the running pod keeps its container and its channel ($got)" $? "got '$got', container $cid -> $cid2"

# The pod gone, the kubelet unprepares its claim: the spec and the record
# entry go.
k -n "$CD_NS" delete pod "$W0" --wait=false >/dev/null 2>&1
spec_gone() { [[ $(cdi_files) != *"$cuid"* ]] && ! record | grep -q "$cuid"; }
wait_for 90 spec_gone
rc=$?
check "deleting the pod unprepares its claim: no CDI spec and no record of it remain ($(cdi_files))" $rc \
	"cdi: $(cdi_files); record: $(record | cut -c1-200)"

# The Rack's status follows its trays' within a pass of the Rack controller.
plugin_shows() {
	out=$("$rel/bin/kubectl-nvl72" status rack "$RACK" 2>&1)
	grep -qE "^ +1 +$NVL72_NODE_NAME +yes " <<<"$out" && grep -q "^Ready: *True" <<<"$out"
}
wait_for 60 plugin_shows
check "kubectl nvl72 status shows the Rack Ready and the real node's tray ready" $? "$out"

cip=$(k -n "$NS" get service "$REL" -o jsonpath='{.spec.clusterIP}')
# The dashboard's Service selects the leader, which labels its own pod:
# only the leader publishes the feed.
dip=$(k -n "$NS" get service "$REL-dashboard" -o jsonpath='{.spec.clusterIP}')
dport=$(k -n "$NS" get service "$REL-dashboard" -o jsonpath='{.spec.ports[?(@.name=="dashboard")].port}')
leader_behind() {
	[[ $(k -n "$NS" get endpointslices -l "kubernetes.io/service-name=$REL-dashboard" -o json |
		jq -r '[.items[].endpoints[]? | select(.conditions.ready) | .targetRef.name] | join(" ")') == "$1" ]]
}
wait_for 30 leader_behind "$leader"
check "the dashboard Service has exactly the leader ($leader) behind it" $? \
	"$(k -n "$NS" get pods -L nvl72.io/operator-leader 2>&1 | tail -3)"
# The feed needs a token: without one nothing comes but the request for it;
# a bound token of an account given nvl72-dashboard-viewer gets the rack.
out=$(helm_env_dash_reader 2>&1) &&
	(umask 077 && k -n "$NS" create token dash-reader --duration=10m >"$work/dash.token" 2>/dev/null)
check "a ServiceAccount bound to the chart's nvl72-dashboard-viewer, and a bound token for it" $? "$out"
feed() {
	python3 - "$dip" "$dport" "$RACK" "$@" <<'PY'
import json, socket, sys
sys.path.insert(0, "tests/integration")
import cdp
seen = []
c = None
try:
    c = cdp.Conn(sys.argv[1], int(sys.argv[2]), "/ws")
    c.sock.settimeout(10)
    first = json.loads(c.recv_text())
    seen.append(first.get("topic"))
    if len(sys.argv) > 4:
        c.send_text(json.dumps({"token": open(sys.argv[4]).read().strip()}))
    else:
        c.sock.settimeout(3)
    while True:
        m = json.loads(c.recv_text())
        seen.append(m.get("topic"))
        if m.get("topic") == "rack/" + sys.argv[3]:
            t = [x for x in m["data"]["trays"] if x.get("index") == 1]
            print(json.dumps(t[0]["imex"] if t else {}))
            break
except (socket.timeout, OSError, ValueError, KeyError) as e:
    print("no rack topic (%s); topics seen: %s; close code %s" % (e, seen, c.close_code if c else None))
PY
}
out=$(feed)
[[ $out == *"topics seen: ['auth']"* ]]
check "the dashboard's feed through its Service sends nothing but the request for a token to a client without one" $? "$out"
out=$(feed "$work/dash.token")
[[ $out == *'"daemon": "READY"'* && $out == *'"domain": "UP"'* ]]
check "with the bound token, the dashboard through its Service ($dip:$dport) shows the node's IMEX READY and its domain UP" $? "$out"
rm -f "$work/dash.token"

# ------------------------------------------ /metrics via the Service ---
# Prometheus (Debian's) scrapes the Service with a bound token of an
# account allowed /metrics, as a ServiceMonitor with bearer tokens does.
mport_svc=$(k -n "$NS" get service "$REL" -o jsonpath='{.spec.ports[?(@.name=="metrics")].port}')
k -n "$NS" create serviceaccount scraper >/dev/null 2>&1
k create clusterrolebinding nvl72-test-scraper --clusterrole=nvl72-metrics-reader \
	--serviceaccount="$NS:scraper" >/dev/null 2>&1
(umask 077 && k -n "$NS" create token scraper --duration=10m >"$work/scrape.token" 2>/dev/null)
code() { curl -s -o "$work/metrics.txt" -w '%{http_code}' -m 10 "$@"; }
c=$(code "http://$cip:$mport_svc/metrics")
check "/metrics through the Service refuses a scrape without a token ($c)" "$([[ $c == 401 ]]; echo $?)" "$c"
pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: nvl72-operator
    authorization: {type: Bearer, credentials_file: $work/scrape.token}
    static_configs: [{targets: ["$cip:$mport_svc"]}]
YAML
timeout 300 prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--storage.tsdb.retention.time=1h --web.listen-address="127.0.0.1:$pport" \
	>"$work/prometheus.log" 2>&1 &
prom=$!
q() {
	curl -fsS -m 5 -G "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
		jq -r 'select(.status == "success") | .data.result[] | "\(.metric | del(.__name__) | tojson) \(.value[1])"' | sort
}
# The Service picks a replica per connection; every replica exports its
# leader-election state.
scraped() { [[ $(q 'up{job="nvl72-operator"}') == *' 1' && $(q 'count(leader_election_master_status)') == '{} 1' ]]; }
wait_for 90 scraped
check "Prometheus scrapes the Service with the bound token: up is 1 and the operator's series arrive" $? \
	"$(curl -s "http://127.0.0.1:$pport/api/v1/targets" | jq -c '.data.activeTargets[] | {health, lastError}'; tail -2 "$work/prometheus.log")"
kill "$prom" 2>/dev/null
wait "$prom" 2>/dev/null
rm -f "$work/scrape.token"

# ------------------------------------------------------- failover ---
# A server-side dry run goes through admission: the webhook admits it or
# the request fails (failurePolicy Fail).
sed '0,/^  name: .*/s//  name: probe-matrix/' deploy/samples/compatibilitymatrix-gb300.yaml >"$work/probe.yaml"
admits() { k create --dry-run=server -f "$work/probe.yaml" -o name >/dev/null 2>"$work/admit.err"; }
out=$(k create --dry-run=server -f "$work/probe.yaml" -o name 2>&1)
check "a dry-run create of a matrix is admitted ($out)" $? "$out"
(
	n=0 bad=0
	while [[ ! -f $work/stop-admit ]]; do
		n=$((n + 1))
		admits || { bad=$((bad + 1)); echo "refused at $(date +%T.%N): $(cat "$work/admit.err")" >>"$work/admit.log"; }
		sleep 0.2
	done
	echo "$n $bad" >"$work/admit.count"
) &
admitter=$!
old=$leader
t0=$(date +%s%N)
out=$(k -n "$NS" delete pod "$old" --grace-period=0 --force 2>&1)
check "the leading pod $old is deleted with --grace-period=0 --force" $? "$out"
new=""
taken() { new=$(holder); new=${new%_*}; [[ -n $new && $new != "$old" ]]; }
wait_for 60 taken
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# leadership moved from $old to $new in $ms ms (lease ${LEASE_S} s, retry ${RETRY_S} s)"
((ms <= (LEASE_S + RETRY_S) * 1000))
check "the other pod takes the lease within one lease duration (and a retry period)" $? "new='$new' after $ms ms"
back() { [[ $(pods_json | jq '[.items[] | select(.status.phase == "Running" and all(.status.containerStatuses[]; .ready))] | length') == 2 ]]; }
wait_for 120 back
check "the Deployment runs 2 ready replicas again" $? "$(k -n "$NS" get pods 2>&1 | tail -3)"
wait_for 30 leader_behind "$new"
check "the dashboard Service follows the new leader ($new)" $? \
	"$(k -n "$NS" get pods -L nvl72.io/operator-leader 2>&1 | tail -3)"
sleep 1
touch "$work/stop-admit"
wait "$admitter"
read -r n bad <"$work/admit.count"
echo "# admission during the failover: $n requests, $bad refused"
((n > 10 && bad == 0))
check "the webhook admitted all $n dry-run requests throughout the failover" $? \
	"$bad refused: $(head -3 "$work/admit.log" 2>/dev/null)"

# ------------------------------------------ a webhook with no endpoint ---
# With no operator pod behind the Service, the webhooks fail closed and the
# API server's refusal names the webhook and its Service (kube-proxy
# rejects connections to a Service with no endpoints).
out=$(k -n "$NS" scale deployment "$REL" --replicas=0 2>&1)
none() { [[ -z $(k -n "$NS" get pods -l app.kubernetes.io/component=operator -o name 2>/dev/null) ]]; }
wait_for 90 none
check "the operator Deployment is scaled to 0" $? "$out"
out=$(k create --dry-run=server -f "$work/probe.yaml" 2>&1)
[[ $? != 0 && $out == *'failed calling webhook "validate.nvl72.io"'* && $out == *"$REL.$NS.svc:443"* ]]
check "an apply is refused, naming the webhook and its Service" $? "$out"
out=$(k -n "$NS" scale deployment "$REL" --replicas=2 2>&1)
wait_for 120 back
check "scaled back to 2 ready replicas" $? "$out"

# ----------------------------------- a Node the agent does not select ---
# The tray label taken off one kwok tray's Node (outside the domain): the
# agent DaemonSet would not run there, and the operator, told the agents'
# node selector by the chart, says so in the Rack's status and an event,
# although that tray's agent process still heartbeats.
spare=""
for t in $(seq 18 -1 2); do
	[[ " $members " == *" $(node "$t") "* ]] || { spare=$t; break; }
done
snode=$(node "$spare")
rack_tray() { k get rack "$RACK" -o json | jq -c --argjson i "$spare" '.status.trays[] | select(.index == $i)'; }
tray_reason() { [[ $(rack_tray | jq -r '.reason // ""') == "$1" ]]; }
out=$(k label node "$snode" "$TRAY_LABEL-" 2>&1)
wait_for 60 tray_reason AgentNotScheduled
check "a Node without the agent's label ($snode) is reported AgentNotScheduled in the Rack's status" \
	$? "$out $(rack_tray)"
unsched_event() {
	k get events.events.k8s.io -A -o json | jq -e --arg n "$snode" --arg l "$TRAY_LABEL" \
		'[.items[] | select(.reason == "AgentNotScheduled" and .regarding.name == "'"$RACK"'" and
			(.note | contains($n) and contains($l)))] | length > 0' >/dev/null
}
wait_for 30 unsched_event
check "a Warning event on the Rack names the Node and the missing label $TRAY_LABEL" $? \
	"$(k get events.events.k8s.io -A -o json | jq -c '[.items[] | select(.reason == "AgentNotScheduled") | .note]' | cut -c1-300)"
msg=$(k get rack "$RACK" -o json | jq -r '.status.conditions[] | select(.type == "Degraded") | .message')
check "the Rack's Degraded message lists the tray as AgentNotScheduled ($msg)" \
	"$([[ $msg == *"t$(printf %02d "$spare") AgentNotScheduled"* ]]; echo $?)" "$msg"
out=$(k label node "$snode" "$TRAY_LABEL=true" 2>&1)
ready_again() { [[ $(rack_tray | jq -r '.ready') == true ]]; }
wait_for 60 ready_again
check "labelled again, the tray is ready again" $? "$out $(rack_tray)"

# ---------------------------------------------------- helm upgrade ---
# A new tag of the same images: the Deployment and the DaemonSet roll, and
# nothing of the rack moves.
tag2=$version-rollout
rc=0
for img in operator agent; do
	innode "$NVL72_K8S_BIN/ctr" --address /run/containerd/containerd.sock -n k8s.io images tag \
		"ghcr.io/nvl72-operator/nvl72-$img:$version" "ghcr.io/nvl72-operator/nvl72-$img:$tag2" \
		>>"$work/import.log" 2>&1 || rc=1
done
check "the images are tagged $tag2 in the node's containerd" $rc "$(tail -2 "$work/import.log")"
snap_rack() {
	k get computetrays -o json | jq -c '[.items[] | {n: .metadata.name, g: .metadata.generation,
		d: .spec.driver, m: .status.maintenance.state}] | sort_by(.n)'
	k get nodes -o json | jq -c '[.items[] | select(.spec.unschedulable == true) | .metadata.name]'
}
before=$(snap_rack)
out=$("$helm" upgrade "$REL" deploy/helm/nvl72-operator -n "$NS" -f "$work/values.yaml" \
	--set operator.image.tag="$tag2" --set agent.image.tag="$tag2" --wait --timeout 5m 2>&1)
check "helm upgrade to the images tagged $tag2" $? "$out"
rolled() {
	pods_json | jq -e --arg t ":$tag2" '[.items[] | select(.metadata.deletionTimestamp == null and
		(.spec.containers[0].image | endswith($t)) and .status.phase == "Running" and
		all(.status.containerStatuses[]; .ready and .restartCount == 0))] | length == 2' >/dev/null &&
		k -n "$ANS" get pods -o json | jq -e --arg t ":$tag2" '[.items[] | select(.metadata.deletionTimestamp == null)] |
			length == 1 and all(.[]; (.spec.containers[0].image | endswith($t)) and .status.phase == "Running")' >/dev/null
}
wait_for 180 rolled
check "both operator pods and the agent pod run $tag2, the operator pods with 0 restarts" $? \
	"$(k get pods -A -o wide 2>&1 | grep nvl72 | head -5)"
wait_for 120 cd_ready
check "the domain is Ready again once the new agent adopts its tray" $? "$(cd_json | jq -c .status.conditions | cut -c1-300)"
after=$(snap_rack)
check "no tray's spec, generation or maintenance moved, and no Node was cordoned" \
	"$([[ $after == "$before" ]]; echo $?)" "before $before; after $after"

# -------------------------------------------------- helm uninstall ---
# The documented order: a platform's objects go first, while the operator
# still runs to release what its finalizers hold; then the release.
out=$(k -n "$CD_NS" delete computedomain "$CD" --wait --timeout=90s 2>&1) &&
	out=$(k delete rack "$RACK" --wait --timeout=90s 2>&1)
check "the ComputeDomain and the Rack are deleted through their finalizers" $? "$out"
for t in "${!apid[@]}"; do kill -TERM "${apid[$t]}" 2>/dev/null; done
out=$("$helm" uninstall "$REL" -n "$NS" --wait --timeout 3m 2>&1)
check "helm uninstall" $? "$out"
gone() { [[ -z $(k get pods -n "$NS" -o name 2>/dev/null; k get pods -n "$ANS" -o name 2>/dev/null) ]]; }
wait_for 120 gone
check "no operator or agent pod is left" $? "$(k get pods -A 2>&1 | grep nvl72 | head -3)"
stuck=$(for kind in racks computetrays computedomains rackpartitions rackupgrades compatibilitymatrices; do
	k get "$kind" -A -o json 2>/dev/null | jq -r '.items[] | select((.metadata.finalizers // []) | length > 0) |
		"\(.kind)/\(.metadata.name) \(.metadata.finalizers)"'
done)
check "no nvl72.io object is left holding a finalizer" "$([[ -z $stuck ]]; echo $?)" "$stuck"
marks=$(k get nodes -o json | jq -r '.items[] | select(.spec.unschedulable == true or
	((.metadata.labels // {}) | keys | any(startswith("nvl72.io/")))) | .metadata.name')
check "no Node is left cordoned or labelled nvl72.io/" "$([[ -z $marks ]]; echo $?)" "$marks"
left=$(k get validatingwebhookconfigurations,mutatingwebhookconfigurations,validatingadmissionpolicies -o name 2>/dev/null | grep nvl72)
check "the webhook configurations and admission policies are gone" "$([[ -z $left ]]; echo $?)" "$left"

# ------------------------------------------------- a missing CRD ---
# Installed without its CRDs, the operator stays unready and says which
# CustomResourceDefinition is missing (in its log, checked here, and in the
# body of its /readyz answer).
out=$(k delete -f crds/ --wait --timeout=60s 2>&1)
check "the CRDs are deleted" $? "$out"
out=$("$helm" install "$REL" deploy/helm/nvl72-operator -n "$NS" -f "$work/values.yaml" \
	--set agent.enabled=false --skip-crds 2>&1)
check "helm install --skip-crds with no CRD in the cluster" $? "$out"
said() {
	local p
	p=$(k -n "$NS" get pods -l app.kubernetes.io/component=operator -o name 2>/dev/null | head -1)
	[[ -n $p ]] && k -n "$NS" logs "$p" 2>/dev/null | grep -q 'CustomResourceDefinition [a-z]*.nvl72.io is not installed'
}
wait_for 120 said
check "the operator's log names the CustomResourceDefinition that is not installed" $? \
	"$(k -n "$NS" logs deployment/$REL --tail=5 2>&1 | cut -c1-300)"
unready=$(pods_json | jq -r '[.items[] | .status.containerStatuses[0].ready] | map(tostring) | join(",")')
check "and its pods are not ready ($unready)" "$([[ $unready == false,false ]]; echo $?)" "$unready"
out=$("$helm" uninstall "$REL" -n "$NS" --wait --timeout 3m 2>&1)
check "helm uninstall of that release" $? "$out"

finish
