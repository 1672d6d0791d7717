#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ComputeDomain controller end to end against a real kube-apiserver: one
# operator, the sample Rack of 18 trays with a real agent per tray on a
# simulated rack (fake NVML and IMEX daemons). A 4-node ComputeDomain gets
# 4 labelled Nodes, one identical IMEX peer list, running IMEX daemons and
# Ready status and one IMEX channel device node per member (allocationMode
# Single), the DeviceClass of the DRA driver imex.nvl72.io and the domain's
# ResourceClaimTemplate (exact, kept without writes at rest, made again when
# deleted, refused to a second domain naming it, deleted with the domain)
# and its uid on the member trays; a member's daemon dying turns it
# NotReady until it is back; deleting it releases the labels, peer lists
# and template through its finalizer. Behind a fault proxy that hides
# resource.k8s.io (404), a domain says DRAUnavailable and the operator
# asks once and logs once. A
# domain with replaceFailedNodes and allocationMode All gets every channel
# on its members, and when a member's Node is deleted it marks the member
# and after the grace replaces it with a spare of the same clique, in the
# same slot: the three survivors keep
# their IMEX daemons (same pid) and their connections to each other, and
# the spare joins.
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
GRACE_S=8 # --domain-replace-grace
OPERATOR=$rel/bin/nvl72-operator
AGENT=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
RACK=gb300-r07
NS=nvl72-system
CD_NS=team-a
CD=train-4
DKEY=$CD_NS.$CD
CLIQUE=3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766

. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/faultproxy.sh"

if [[ ! -x $OPERATOR || ! -x $AGENT || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-operator" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ not_ok "build the operator, the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-domain-e2e.XXXXXX)
rack=$work/rack
declare -A apid=()
opid=""
pids=() # the fault proxy
cleanup() {
	local p f
	for p in "${apid[@]}" $opid "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" $opid "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((failed > 0)) && [[ -f $work/op.log ]]; then
		echo "-- last lines of the operator log"
		tail -30 "$work/op.log" | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses of this run; another run picks others.
ipbase=$((20 + ($$ % 8) * 25))
. tests/cluster/ports.sh
mport=$(free_port)
ip() { echo "127.0.0.$((ipbase + 10#$1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
node() { printf '%s-t%02d' "$RACK" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }

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

"$OPERATOR" --metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=127.0.0.1:0 \
	--dashboard-bind-address=0 --webhook-bind-address=0 --tray-heartbeat-timeout=10m \
	--domain-replace-grace=${GRACE_S}s \
	--log-level=info >"$work/op.log" 2>&1 &
opid=$!
out=$(k apply -f deploy/samples/rack-gb300.yaml 2>&1)
check "the operator runs; the sample Rack applied" $? "$out"
trays18() { [[ $(k get computetrays -o json | jq "[.items[] | select(.spec.rack == \"$RACK\")] | length") == 18 ]]; }
wait_for 30 trays18
check "the Rack has its 18 ComputeTrays" $? "$(k get computetrays 2>&1 | head -3)"

simctl create "$rack" --trays 18 --ip-base "$ipbase" >/dev/null
check "simulated rack of 18 trays" $? ""
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

# ------------------------------------------------- a 4-node domain ---
cat >"$work/cd.yaml" <<YAML
apiVersion: nvl72.io/v1alpha1
kind: ComputeDomain
metadata: {name: $CD, namespace: $CD_NS}
spec:
  numNodes: 4
  selector: {rack: $RACK}
YAML
out=$(k apply -f "$work/cd.yaml" 2>&1)
check "kubectl apply a ComputeDomain for 4 nodes" $? "$out"
cd_json() { k -n "$CD_NS" get computedomain "$CD" -o json 2>/dev/null; }
cd_is() { [[ $(cd_json | jq -r '.status.status') == "$1" ]]; }
t0=$SECONDS
wait_for 60 cd_is Ready
check "the domain becomes Ready ($((SECONDS - t0))s)" $? "$(cd_json | jq -c .status | cut -c1-400)"
mport=$(grep -o 'metrics=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
cd_series() { curl -fsS -m 5 "http://127.0.0.1:$mport/metrics" | grep "^nvl72_computedomain_"; }
lbl="{computedomain_namespace=\"$CD_NS\",computedomain=\"$CD\",rack=\"$RACK\"}"
cd_metrics() { cd_series | grep -qx "nvl72_computedomain_ready$lbl 1" && cd_series | grep -qx "nvl72_computedomain_nodes$lbl 4"; }
wait_for 20 cd_metrics
check "/metrics: nvl72_computedomain_ready 1 and nvl72_computedomain_nodes 4 for the domain" $? \
	"$(cd_series | tr '\n' ' ' | cut -c1-400)"
st=$(cd_json)
n=$(jq '.status.nodes | length' <<<"$st")
sel=$(jq -r '.status.nodeSelector["nvl72.io/compute-domain"]' <<<"$st")
fin=$(jq -r '.metadata.finalizers | join(",")' <<<"$st")
good=$(jq --arg c "$CLIQUE" '[.status.nodes[] | select(.status == "Ready" and .cliqueID == $c and (.ipAddress | startswith("127.0.0.")))] | length' <<<"$st")
idx=$(jq -c '[.status.nodes[].index]' <<<"$st")
[[ $n == 4 && $good == 4 && $sel == "$DKEY" && $fin == nvl72.io/compute-domain && $idx == "[0,1,2,3]" ]]
check "status lists 4 Ready nodes (index 0..3, clique, address), the node selector, and the finalizer" $? \
	"n=$n good=$good sel=$sel fin=$fin idx=$idx"
members=$(jq -r '.status.nodes[].name' <<<"$st")

labelled=$(k get nodes -l "nvl72.io/compute-domain=$DKEY" -o name | sed 's|node/||' | sort)
[[ $labelled == "$(sort <<<"$members")" && $(wc -l <<<"$labelled") == 4 ]]
check "exactly the 4 member Nodes carry nvl72.io/compute-domain=$DKEY" $? "labelled: $labelled"
trays=$(k get computetrays -o json)
peer_lists=$(jq -r --arg d "$DKEY" '.items[] | select(.spec.imex.domain == $d) | .spec.imex.peers | join(",")' <<<"$trays" | sort -u)
nimex=$(jq --arg d "$DKEY" '[.items[] | select(.spec.imex.domain == $d and .spec.imex.mode == "process")] | length' <<<"$trays")
want=$(jq -r '[.status.nodes[].ipAddress] | join(",")' <<<"$st")
[[ $nimex == 4 && $(wc -l <<<"$peer_lists") == 1 && $peer_lists == "$want" ]]
check "the 4 member trays hold one identical peer list ($peer_lists), ordered by tray index" $? \
	"trays=$nimex lists=$peer_lists want=$want"
up=$(jq --arg d "$DKEY" '[.items[] | select(.spec.imex.domain == $d and .status.imex.daemonState == "Ready" and .status.imex.domainState == "Up" and .status.imex.peersConnected == 4)] | length' <<<"$trays")
[[ $up == 4 ]]
check "their fake IMEX daemons are READY with 4 peers connected" $? "up=$up"
channels_single() {
	nch=""
	for m in $members; do
		nch+="$(ls "$(tray "${m##*-t}")/host/dev/nvidia-caps-imex-channels" 2>/dev/null | tr '\n' ' ')|"
	done
	[[ $nch == "channel0 |channel0 |channel0 |channel0 |" ]]
}
wait_for 30 channels_single
check "allocationMode Single (the default): one channel device node, channel0, on each member" $? "got: $nch"
k -n "$CD_NS" get events -o json | jq -e '[.items[] | select(.reason == "TraysPicked" or .reason == "DomainReady")] | length >= 2' >/dev/null
check "events TraysPicked and DomainReady" $? "$(k -n "$CD_NS" get events 2>&1 | tail -3)"

# ------------------------------------ the channel through DRA (issue 15) ---
# The DeviceClass of the driver, and the domain's ResourceClaimTemplate in
# its namespace exactly as the DRA contract has it (docs/operator.md).
dc=$(k get deviceclass imex-channel.nvl72.io -o json 2>&1)
[[ $(jq -c '.spec.selectors' <<<"$dc" 2>/dev/null) == '[{"cel":{"expression":"device.driver == \"imex.nvl72.io\""}}]' ]]
check "DeviceClass imex-channel.nvl72.io selects device.driver == \"imex.nvl72.io\"" $? "$(one_line "$dc" | cut -c1-300)"
uid=$(cd_json | jq -r .metadata.uid)
TPL=$CD-channel
tpl_json() { k -n "$CD_NS" get resourceclaimtemplate "$1" -o json 2>/dev/null; }
tpl_ok() { # tpl_ok NAME DOMAIN UID MODE: the template is exactly the contract's
	local t
	t=$(tpl_json "$1") || return 1
	jq -e --arg d "$CD_NS.$2" --arg n "$2" --arg u "$3" --arg m "$4" --arg ns "$CD_NS" '
		.metadata.labels["nvl72.io/compute-domain"] == $d and
		.metadata.ownerReferences == [{"apiVersion": "nvl72.io/v1alpha1", "kind": "ComputeDomain",
			"name": $n, "uid": $u, "controller": true, "blockOwnerDeletion": true}] and
		.spec.spec.devices.requests == [{"name": "channel", "exactly": {
			"deviceClassName": "imex-channel.nvl72.io", "allocationMode": "ExactCount", "count": 1,
			"selectors": [{"cel": {"expression": ("device.attributes[\"imex.nvl72.io\"].domain == \"" +
				$u + "\" && device.attributes[\"imex.nvl72.io\"].imexReady")}}]}}] and
		.spec.spec.devices.config == [{"requests": ["channel"], "opaque": {"driver": "imex.nvl72.io",
			"parameters": {"apiVersion": "nvl72.io/v1alpha1", "kind": "ImexChannelConfig",
				"domainUID": $u, "domain": ($ns + "/" + $n), "allocationMode": $m}}}]' <<<"$t" >/dev/null
}
tpl_ready() { # tpl_ready DOMAIN NAME: status names it, ClaimTemplateReady True
	k -n "$CD_NS" get computedomain "$1" -o json | jq -e --arg t "$2" '.status.resourceClaimTemplate.name == $t and
		any(.status.conditions[]; .type == "ClaimTemplateReady" and .status == "True")' >/dev/null
}
wait_for 20 tpl_ready "$CD" "$TPL"
rc=$?
tpl_ok "$TPL" "$CD" "$uid" Single
check "ResourceClaimTemplate $CD_NS/$TPL: label, controller owner, one request of the DeviceClass with the domain's CEL selector, the opaque config; named in status" \
	$((rc + $?)) "$(tpl_json "$TPL" | jq -c '{metadata: .metadata | {labels, ownerReferences}, spec}' | cut -c1-500) status: $(cd_json | jq -c '.status.resourceClaimTemplate')"
nuid=$(k get computetrays -o json | jq --arg d "$DKEY" --arg u "$uid" '[.items[] | select(.spec.imex.domain == $d and .spec.imex.domainUID == $u)] | length')
[[ $nuid == 4 ]]
check "the 4 member trays carry spec.imex.domainUID = the domain's uid" $? "with it: $nuid"

# Zero template writes at steady state: an unrelated write to the domain
# makes the operator look at it again (its reconcile counter moves), and
# the API server counts no write to resourceclaimtemplates meanwhile.
tpl_writes() {
	k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="resourceclaimtemplates"/ &&
		/verb="(POST|PUT|PATCH|APPLY|DELETE)"/ {s += $NF} END {print s + 0}'
}
cd_passes() {
	curl -fsS -m 5 "http://127.0.0.1:$mport/metrics" |
		awk '/^controller_runtime_reconcile_total\{/ && /controller="computedomain"/ {s += $NF} END {print s + 0}'
}
w0=$(tpl_writes) p0=$(cd_passes)
k -n "$CD_NS" annotate computedomain "$CD" example.com/touched=1 >/dev/null
wait_for 20 eval '(( $(cd_passes) > p0 ))'
rc=$?
w1=$(tpl_writes) p1=$(cd_passes)
[[ $rc == 0 && $w0 == "$w1" && $w0 -ge 1 ]]
check "an unrelated write to the domain is reconciled ($p0 -> $p1 passes) with no template write ($w0 -> $w1)" $? \
	"rc=$rc writes $w0 -> $w1"

# Deleted by hand, the template comes back (the operator watches them).
tuid=$(tpl_json "$TPL" | jq -r .metadata.uid)
k -n "$CD_NS" delete resourceclaimtemplate "$TPL" >/dev/null 2>&1
back() { local u; u=$(tpl_json "$TPL" | jq -r .metadata.uid) && [[ -n $u && $u != "$tuid" ]]; }
wait_for 20 back
rc=$?
tpl_ok "$TPL" "$CD" "$uid" Single
check "a template deleted by hand is made again, the same" $((rc + $?)) "$(tpl_json "$TPL" | jq -c .metadata | cut -c1-300)"

# A domain naming another domain's template gets none and says whose it is.
printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: clash, namespace: %s}\nspec: {numNodes: 2, selector: {rack: no-such-rack}, channel: {resourceClaimTemplate: {name: %s}}}\n' \
	"$CD_NS" "$TPL" | k apply -f - >/dev/null 2>&1
conflict() {
	k -n "$CD_NS" get computedomain clash -o json | jq -e --arg cd "$CD" '
		any(.status.conditions[]?; .type == "ClaimTemplateReady" and .status == "False" and
			.reason == "NameConflict" and (.message | contains("belongs to ComputeDomain team-a/" + $cd))) and
		.status.resourceClaimTemplate == null' >/dev/null
}
wait_for 20 conflict
rc=$?
tpl_ok "$TPL" "$CD" "$uid" Single
check "a second domain naming $TPL: ClaimTemplateReady False NameConflict naming $CD; the template stays $CD's" \
	$((rc + $?)) "$(k -n "$CD_NS" get computedomain clash -o json | jq -c '.status.conditions' | cut -c1-400)"
k -n "$CD_NS" get events -o json | jq -e '[.items[] | select(.reason == "ClaimTemplateConflict")] | length == 1' >/dev/null
check "one ClaimTemplateConflict event" $? "$(k -n "$CD_NS" get events -o json | jq -c '[.items[] | select(.reason | startswith("ClaimTemplate")) | {reason, count, note}]' | cut -c1-300)"
out=$(k -n "$CD_NS" delete computedomain clash --timeout=60s 2>&1) && tpl_ok "$TPL" "$CD" "$uid" Single
check "deleting it leaves $CD's template alone" $? "$(one_line "$out")"

# The operator writes nothing more while nothing changes.
w1=$(grep -c 'msg="status written"\|status written' "$work/op.log")
sleep 5
w2=$(grep -c 'msg="status written"\|status written' "$work/op.log")
[[ $w1 -gt 0 && $w1 == "$w2" ]]
check "no further status writes at steady state" $? "$w1 -> $w2"

# ------------------------------------------------- a member fails ---
victim=$(tail -1 <<<"$members")
vt=$((10#${victim##*-t}))
kill -TERM "${apid[$vt]}"
wait "${apid[$vt]}" 2>/dev/null
simctl imex-kill "$(tray "$vt")"
t0=$SECONDS
wait_for 45 cd_is NotReady
check "killing $victim's IMEX daemon turns the domain NotReady ($((SECONDS - t0))s)" $? \
	"$(cd_json | jq -c '[.status.status, .status.conditions]' | cut -c1-300)"
k -n "$CD_NS" get events -o json | jq -e '[.items[] | select(.reason == "DomainNotReady" and (.message | startswith("IMEX not ready on ")))] | length >= 1' >/dev/null
check "a DomainNotReady event names the Nodes whose IMEX is not ready" $? \
	"$(k -n "$CD_NS" get events -o json | jq -c '[.items[] | {reason, message}]' | cut -c1-300)"
start_agent "$vt"
t0=$SECONDS
wait_for 60 cd_is Ready
check "the daemon back (agent restarted), the domain is Ready again with the same members ($((SECONDS - t0))s)" $? \
	"$(cd_json | jq -c .status.nodes | cut -c1-300)"
[[ $(cd_json | jq -r '.status.nodes[].name') == "$members" ]] || not_ok "members kept" "changed"

# The daemon dies under a running agent: the agent restarts it, and the
# domain goes NotReady (seen in the operator's status writes) and back.
victim=$(head -1 <<<"$members")
mark=$(grep -c 'status=NotReady' "$work/op.log")
simctl imex-kill "$(tray "${victim##*-t}")"
t0=$SECONDS
wait_for 45 eval '(( $(grep -c "status=NotReady" "$work/op.log") > mark ))'
check "a member daemon killed under its running agent turns the domain NotReady ($((SECONDS - t0))s)" $? \
	"$(cd_json | jq -c '[.status.status, .status.conditions]' | cut -c1-300)"
wait_for 60 cd_is Ready
check "its agent restarts the daemon and the domain is Ready again ($((SECONDS - t0))s)" $? \
	"$(cd_json | jq -c .status.nodes | cut -c1-300)"

# Four trays with their IMEX domain down are more than the sample rack's
# degraded threshold (2): the Rack controller cordons its Nodes, and a
# cordoned Node is never picked. Let the rack settle before placing more.
rack_calm() {
	[[ $(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Degraded")].status}') == False &&
		-z $(k get nodes -o json | jq -r '.items[] | select(.spec.unschedulable == true) | .metadata.name') ]]
}

# ---------------------------------------- a second domain, disjoint ---
wait_for 60 rack_calm || not_ok "the rack settles" "$(k get rack "$RACK" -o jsonpath='{.status.conditions}' | cut -c1-300)"
sed "s/name: $CD,/name: $CD-b,/" "$work/cd.yaml" | k apply -f - >/dev/null 2>&1
wait_for 60 eval '[[ $(k -n "$CD_NS" get computedomain "$CD-b" -o jsonpath="{.status.status}") == Ready ]]'
b=$(k -n "$CD_NS" get computedomain "$CD-b" -o jsonpath='{.status.nodes[*].name}' | tr ' ' '\n')
common=$(comm -12 <(sort <<<"$b") <(sort <<<"$members"))
[[ $(wc -w <<<"$b") == 4 && -z $common ]]
check "a second 4-node domain is Ready on 4 other trays" $? "b=$(echo $b) common=$common"

# ------------------------------------------------------------ delete ---
out=$(k -n "$CD_NS" delete computedomain "$CD" --timeout=60s 2>&1)
check "deleting the domain completes (finalizer removed)" $? "$out"
# No garbage collector runs here: the operator's own delete is what removes it.
out=$(k -n "$CD_NS" get resourceclaimtemplate "$TPL" 2>&1)
[[ $? != 0 && $out == *NotFound* ]] && [[ -n $(tpl_json "$CD-b-channel") ]]
check "its ResourceClaimTemplate is gone with it; the other domain's stays" $? "$(one_line "$out")"
released() {
	[[ -z $(k get nodes -l "nvl72.io/compute-domain=$DKEY" -o name) ]] &&
		k get computetrays -o json | jq -e --arg d "$DKEY" '[.items[] | select(.spec.imex.domain == $d or .metadata.annotations["nvl72.io/compute-domain"] == $d)] | length == 0' >/dev/null
}
wait_for 30 released
check "its Node labels, tray claims and peer lists are gone" $? \
	"$(k get nodes -L nvl72.io/compute-domain 2>&1 | grep "$DKEY" | head -3)"
nb=$(k get nodes -l "nvl72.io/compute-domain=$DKEY-b" -o name | wc -l)
[[ $nb == 4 ]]
check "the other domain keeps its 4 Nodes" $? "nb=$nb"

# ------------------------------------- too big now, placed once freed ---
printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: big, namespace: %s}\nspec: {numNodes: 16}\n' \
	"$CD_NS" | k apply -f - >/dev/null 2>&1
placed_is() { # placed_is STATUS REASON
	[[ $(k -n "$CD_NS" get computedomain big -o jsonpath='{.status.conditions[?(@.type=="Placed")].status} {.status.conditions[?(@.type=="Placed")].reason}') == "$1 $2" ]]
}
wait_for 30 placed_is False InsufficientTrays
rc=$?
claimed=$(k get computetrays -o json | jq "[.items[] | select(.metadata.annotations[\"nvl72.io/compute-domain\"] == \"$CD_NS.big\")] | length")
[[ $rc == 0 && $claimed == 0 ]]
check "16 nodes with 14 free: NotReady, Placed False InsufficientTrays, no tray claimed" $? \
	"rc=$rc claimed=$claimed $(k -n "$CD_NS" get computedomain big -o jsonpath='{.status.conditions}' | cut -c1-300)"
k -n "$CD_NS" delete computedomain "$CD-b" --timeout=60s >/dev/null 2>&1
wait_for 60 rack_calm || not_ok "the rack settles" "$(k get rack "$RACK" -o jsonpath='{.status.conditions}' | cut -c1-300)"
t0=$SECONDS
wait_for 60 eval '[[ $(k -n "$CD_NS" get computedomain big -o json | jq -r "[.status.status, (.status.nodes | length)] | join(\" \")") == "Ready 16" ]]'
check "once the other domain is deleted, the 16-node domain is placed and Ready ($((SECONDS - t0))s)" $? \
	"$(k -n "$CD_NS" get computedomain big -o jsonpath='{.status.conditions}' | cut -c1-300)"
k -n "$CD_NS" delete computedomain big --timeout=60s >/dev/null 2>&1
wait_for 30 eval '[[ -z $(k get nodes -l nvl72.io/compute-domain -o name) ]]'
check "no Node keeps a compute-domain label once every domain is deleted" $? \
	"$(k get nodes -l nvl72.io/compute-domain -o name | head -3)"
# ------------------------------- spares replace a failed member (All) ---
wait_for 60 rack_calm || not_ok "the rack settles" "$(k get rack "$RACK" -o jsonpath='{.status.conditions}' | cut -c1-300)"
SP=spare
SPKEY=$CD_NS.$SP
printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: %s, namespace: %s}\nspec: {numNodes: 4, replaceFailedNodes: true, selector: {rack: %s}, channel: {allocationMode: All}}\n' \
	"$SP" "$CD_NS" "$RACK" | k apply -f - >/dev/null 2>&1
sp_json() { k -n "$CD_NS" get computedomain "$SP" -o json 2>/dev/null; }
t0=$SECONDS
wait_for 60 eval '[[ $(sp_json | jq -r .status.status) == Ready ]]'
check "a 4-node domain with replaceFailedNodes and allocationMode All is Ready ($((SECONDS - t0))s)" $? \
	"$(sp_json | jq -c .status | cut -c1-300)"
sp_members=$(sp_json | jq -r '.status.nodes[].name')
nch=""
for m in $sp_members; do
	nch+="$(ls "$(tray "${m##*-t}")/host/dev/nvidia-caps-imex-channels" 2>/dev/null | wc -l) "
done
[[ $nch == "2048 2048 2048 2048 " ]] &&
	k get computetrays -o json | jq -e --arg d "$SPKEY" '[.items[] | select(.spec.imex.domain == $d and .spec.imex.channels.allocationMode == "All")] | length == 4' >/dev/null
check "allocationMode All: every member tray has all 2048 channel device nodes" $? "counts: $nch"
wait_for 20 tpl_ready "$SP" "$SP-channel"
rc=$?
tpl_ok "$SP-channel" "$SP" "$(sp_json | jq -r .metadata.uid)" All
check "its template's opaque config says allocationMode All" $((rc + $?)) \
	"$(tpl_json "$SP-channel" | jq -c .spec.spec.devices.config | cut -c1-300)"

# What the survivors' IMEX daemons hold: the pid, and per connection to
# another member its id and start (the fake daemon's simLinks).
imex_pid() { cut -d' ' -f1 "$(tray "$1")/host/run/nvl72-agent/imex.pid" 2>/dev/null; }
imex_links() { # imex_links TRAY EXCEPT_IP
	NVL72_SIM_ROOT=$(tray "$1") "$sim/bin/nvidia-imex-ctl" -c /etc/nvidia-imex/config.cfg -N -j 2>/dev/null |
		jq -c --arg x "$2" '[.simLinks[]? | select(.host != $x) | {host, id, since}] | sort_by(.host)'
}

# The Node of one member is deleted: the member is marked, and after the
# grace a free tray of the same clique takes its place. (Its IMEX daemon
# keeps running: the survivors turn it away once its slot names the spare.)
victim=$(sed -n 2p <<<"$sp_members")
vip=$(sp_json | jq -r --arg n "$victim" '.status.nodes[] | select(.name == $n) | .ipAddress')
declare -A spid0 slinks0
survivors=$(grep -vx "$victim" <<<"$sp_members")
for m in $survivors; do
	st_=$((10#${m##*-t}))
	spid0[$st_]=$(imex_pid "$st_")
	slinks0[$st_]=$(imex_links "$st_" "$vip")
done
k delete node "$victim" --wait=false >/dev/null 2>&1
marked() {
	sp_json | jq -e --arg n "$victim" '[.status.nodes[] | select(.name == $n and .status == "NotReady" and .reason == "NodeGone" and .failedSince != null)] | length == 1' >/dev/null
}
wait_for $((GRACE_S)) marked
check "the member whose Node was deleted is marked NodeGone in status.nodes[] during the grace" $? \
	"$(sp_json | jq -c .status.nodes | cut -c1-300)"
replaced() {
	local st
	st=$(sp_json)
	[[ $(jq -r .status.status <<<"$st") == Ready && $(jq '.status.nodes | length' <<<"$st") == 4 ]] &&
		! jq -e --arg n "$victim" '.status.nodes[] | select(.name == $n)' <<<"$st" >/dev/null
}
t0=$SECONDS
wait_for 90 replaced
check "after the grace a spare replaces it and the domain is Ready with 4 nodes ($((SECONDS - t0))s)" $? \
	"$(sp_json | jq -c .status | cut -c1-300)"
st=$(sp_json)
newm=$(comm -13 <(sort <<<"$sp_members") <(jq -r '.status.nodes[].name' <<<"$st" | sort))
trays=$(k get computetrays -o json)
peer_lists=$(jq -r --arg d "$SPKEY" '.items[] | select(.spec.imex.domain == $d) | .spec.imex.peers | join(",")' <<<"$trays" | sort -u)
nimex=$(jq --arg d "$SPKEY" '[.items[] | select(.spec.imex.domain == $d)] | length' <<<"$trays")
want=$(jq -r '[.status.nodes[].ipAddress] | join(",")' <<<"$st")
[[ $(wc -w <<<"$newm") == 1 && $nimex == 4 && $(wc -l <<<"$peer_lists") == 1 && $peer_lists == "$want" &&
	$(jq -r '[.status.nodes[].cliqueID] | unique | join(",")' <<<"$st") == "$CLIQUE" ]]
check "one new member ($newm) in the same clique; the 4 peer lists are identical ($peer_lists)" $? \
	"new=$newm trays=$nimex lists=$peer_lists want=$want"
nslot=$(jq -r --arg n "$newm" '.status.nodes[] | select(.name == $n) | .index' <<<"$st")
[[ $nslot == 1 ]]
check "the new member takes the replaced member's slot (index 1 of the peer list)" $? \
	"slot=$nslot $(jq -c '[.status.nodes[] | {name, index}]' <<<"$st")"
nip=$(jq -r --arg n "$newm" '.status.nodes[] | select(.name == $n) | .ipAddress' <<<"$st")
kept=0 why=""
for m in $survivors; do
	st_=$((10#${m##*-t}))
	p_=$(imex_pid "$st_")
	l_=$(imex_links "$st_" "$nip")
	if [[ -n $p_ && $p_ == "${spid0[$st_]}" && -d /proc/$p_ && $l_ == *'"id"'* && $l_ == "${slinks0[$st_]}" ]]; then
		kept=$((kept + 1))
	else
		why+="$m: pid ${spid0[$st_]} -> $p_, links ${slinks0[$st_]} -> $l_; "
	fi
done
[[ $kept == 3 ]]
check "the 3 survivors keep their IMEX daemon (same pid) and their connections to each other" $? "$why"
joined=$(k get computetrays -o json | jq --arg d "$SPKEY" --arg ip "$nip" '[.items[] | select(.spec.imex.domain == $d and .status.imex.daemonState == "Ready" and .status.imex.domainState == "Up" and .status.imex.peersConnected == 4)] | length')
nl=0
for m in $survivors; do
	st_=$((10#${m##*-t}))
	[[ $(imex_links "$st_" "" | jq --arg ip "$nip" '[.[] | select(.host == $ip)] | length') == 1 ]] && nl=$((nl + 1))
done
[[ $joined == 4 && $nl == 3 ]]
check "the new member joins: 4 daemons Ready, domain Up with 4 connected; each survivor connected to it" $? \
	"joined=$joined survivors connected to $nip: $nl"
signalled=$(cat "$work"/agent-*.log | grep -c 'IMEX daemon told the new peer addresses')
[[ $signalled -ge 3 ]]
check "the survivors' agents signalled their daemons ($signalled) instead of restarting them" $? \
	"$(grep -h 'IMEX daemon' "$work"/agent-*.log | tail -5 | cut -c1-200)"
k -n "$CD_NS" get events -o json | jq -e --arg a "$victim" --arg b "$newm" \
	'[.items[] | select(.reason == "NodeReplaced" and (.note // .message | contains("node " + $a + " (NodeGone") and contains("with node " + $b)))] | length == 1' >/dev/null
check "a NodeReplaced Event names the replaced and the replacement node" $? \
	"$(k -n "$CD_NS" get events -o json | jq -c '[.items[] | select(.reason == "NodeReplaced") | (.note // .message)]' | cut -c1-300)"
k -n "$CD_NS" delete computedomain "$SP" --timeout=60s >/dev/null 2>&1
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

# ------------------------------- an API server without DRA (404) ---
# The operator again, through the fault proxy answering 404 for
# resource.k8s.io as an API server that serves no DRA does: the domain
# says so, and the operator asks once, logs once and writes nothing there.
faultproxy_start "no DRA: "
echo "404 /apis/resource.k8s.io/" >"$work/proxy.mode"
wait_for 5 grep -q ' mode 404' "$work/proxy.log"
"$OPERATOR" --kubeconfig "$work/proxied.kubeconfig" --metrics-bind-address=127.0.0.1:0 \
	--health-probe-bind-address=127.0.0.1:0 --dashboard-bind-address=0 --webhook-bind-address=0 \
	--tray-heartbeat-timeout=10m --log-level=info >"$work/op-nodra.log" 2>&1 &
opid=$!
printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: nodra, namespace: %s}\nspec: {numNodes: 2, selector: {rack: no-such-rack}}\n' \
	"$CD_NS" | k apply -f - >/dev/null 2>&1
unavailable() {
	k -n "$CD_NS" get computedomain nodra -o json | jq -e '
		any(.status.conditions[]?; .type == "ClaimTemplateReady" and .status == "False" and
			.reason == "DRAUnavailable") and .status.resourceClaimTemplate == null' >/dev/null
}
wait_for 30 unavailable
check "no resource.k8s.io/v1: the domain says ClaimTemplateReady False DRAUnavailable" $? \
	"$(k -n "$CD_NS" get computedomain nodra -o json | jq -c .status.conditions | cut -c1-300)"
out=$(k -n "$CD_NS" get resourceclaimtemplate nodra-channel 2>&1)
[[ $? != 0 && $out == *NotFound* ]]
check "...and gets no template" $? "$(one_line "$out")"
k -n "$CD_NS" get events.events.k8s.io -o json | jq -e '[.items[] | select(.reason == "DRAUnavailable" and .regarding.name == "nodra")] | length == 1' >/dev/null
check "...with one DRAUnavailable event" $? "$(k -n "$CD_NS" get events -o json | jq -c '[.items[] | select(.reason == "DRAUnavailable")]' | cut -c1-300)"
out=$(k -n "$CD_NS" delete computedomain nodra --timeout=60s 2>&1)
check "...and is deleted without it" $? "$(one_line "$out")"
dra_asks=$(awk '$3 ~ "^/apis/resource.k8s.io/" {n++} END {print n + 0}' "$work/proxy.log")
said=$(grep -c 'resource.k8s.io/v1 is not served' "$work/op-nodra.log")
[[ $dra_asks == 1 && $said == 1 ]]
check "the operator asked resource.k8s.io once (its discovery GET) and logged it once" $? \
	"requests: $dra_asks ($(awk '$3 ~ "^/apis/resource.k8s.io/" {print $2, $3}' "$work/proxy.log" | sort | uniq -c | one_line "$(cat)")), log lines: $said"
kill -TERM "$opid"
wait "$opid" 2>/dev/null
rc=$?
opid=""
check "SIGTERM stops it cleanly" "$rc" "rc=$rc"
finish
