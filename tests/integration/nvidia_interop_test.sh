#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NVIDIA's DRA driver on the same cluster, against a real kube-apiserver: a
# Rack of 18 simulated trays with a real agent each, NVIDIA's CRDs
# (tests/data/nvidia, written from resource.nvidia.com/v1beta1 of
# dra-driver-nvidia-gpu v25.12.0) applied, and for trays 5-8 what NVIDIA's
# driver would have made: a ResourceSlice of compute-domain.nvidia.com per
# Node, a ComputeDomain team-nv/nv-a listing trays 5 and 6 in
# status.nodes, and a ComputeDomain team-nv/nv-b whose members (trays 7 and
# 8) are listed only in its ComputeDomainClique, as newer releases do.
#   - trays 5-8 report status.nvidiaDRA; tray 9, with a slice of another
#     NVIDIA driver, does not; a spec.imex put on tray 5 is not applied
#     (IMEXReady NVIDIAManaged) and no IMEX daemon of ours starts there;
#   - the host's nvidia-imex unit running on tray 6 raises HostIMEXOff
#     False, naming the conflict, until it is stopped;
#   - our ComputeDomain of 8 places on trays 1-4 and 9-12, skipping 5-8;
#   - a RackUpgrade's wave of trays 3-6 holds before its Drain, naming
#     team-nv/nv-a, with nothing of the wave touched; nv-a deleted, it goes
#     on, and the next wave (7-10) holds naming team-nv/nv-b, found through
#     the clique; once that goes, the upgrade completes;
#   - the operator wrote nothing of resource.nvidia.com: the objects'
#     resourceVersions and managedFields are as the suite left them.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=nvidia-interop
RACK=gb300-r07
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS
NVNS=team-nv      # where the NVIDIA ComputeDomains live
DRVNS=nvidia-dra  # NVIDIA's driver namespace (its cliques)
CD_NS=team-a
NVDRV=compute-domain.nvidia.com
nvcd=computedomains.resource.nvidia.com
nvcq=computedomaincliques.resource.nvidia.com
ourcd=computedomains.nvl72.io

upg_crds
out=$(k apply -f tests/data/nvidia/ 2>&1) &&
	out=$(k wait --for=condition=Established --timeout=60s crd "$nvcd" "$nvcq" 2>&1)
check "NVIDIA's ComputeDomain and ComputeDomainClique CRDs are served" $? "$out"
upg_nodes
for n in "$NVNS" "$DRVNS" "$CD_NS"; do k create namespace "$n" >/dev/null 2>&1; done
# The workload author's sample for trays NVIDIA's driver manages
# (docs/workloads.md) is valid against NVIDIA's types and the Pod API.
sample=deploy/samples/workloads/nvidia-domain.yaml
sns=$(yq -r 'select(.kind == "Pod") | .metadata.namespace' "$sample")
k create namespace "$sns" >/dev/null 2>&1
out=$(k apply --dry-run=server -f "$sample" 2>&1)
[[ $? -eq 0 && $out == *"computedomain.resource.nvidia.com/train-4 created (server dry run)"* &&
	$out == *"pod/train-4-worker-0 created (server dry run)"* ]]
check "the workload sample $sample passes a server-side dry run against NVIDIA's CRDs" $? "$out"

# ------------------------------------------- what NVIDIA's driver made ---
slice() { # slice NODE DRIVER: one pool of the driver on NODE, as its kubelet plugin publishes
	jq -n --arg n "$1" --arg d "$2" '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice",
		metadata: {name: "\($n)-\($d)"}, spec: {driver: $d, nodeName: $n,
		pool: {name: $n, generation: 1, resourceSliceCount: 1},
		devices: [{name: "channel-0", attributes: {type: {string: "channel"}, id: {int: 0}}},
			{name: "daemon-0", attributes: {type: {string: "daemon"}, id: {int: 0}}}]}}' |
		k create -f - 2>&1
}
nv_domain() { # nv_domain NAME: an NVIDIA ComputeDomain as a user creates it
	jq -n --arg n "$1" --arg ns "$NVNS" '{apiVersion: "resource.nvidia.com/v1beta1",
		kind: "ComputeDomain", metadata: {name: $n, namespace: $ns},
		spec: {numNodes: 0, channel: {resourceClaimTemplate: {name: "\($n)-channel"}}}}' |
		k create -f - 2>&1
}
member() { # member TRAY: a status.nodes / daemons entry for TRAY
	jq -n --arg n "$(node "$1")" --arg ip "$(ip "$1")" --arg c "$CLIQUE" --argjson i "$2" \
		'{name: $n, nodeName: $n, ipAddress: $ip, cliqueID: $c, index: $i, status: "Ready"}'
}
rc=0
for t in 5 6 7 8; do out=$(slice "$(node "$t")" "$NVDRV") || rc=1; done
out2=$(slice "$(node 9)" gpu.nvidia.com) || rc=1
check "ResourceSlices of $NVDRV for the Nodes of trays 5-8, and one of gpu.nvidia.com for tray 9" $rc "$out $out2"
out=$(nv_domain nv-a) && out=$(nv_domain nv-b) &&
	out=$(k -n "$NVNS" patch "$nvcd" nv-a --subresource=status --type=merge -p \
		"$(jq -nc --argjson a "$(member 5 0 | jq 'del(.nodeName)')" --argjson b "$(member 6 1 | jq 'del(.nodeName)')" \
			'{status: {status: "Ready", nodes: [$a, $b]}}')" 2>&1) &&
	out=$(k -n "$NVNS" patch "$nvcd" nv-b --subresource=status --type=merge -p '{"status":{"status":"Ready"}}' 2>&1)
check "NVIDIA ComputeDomain $NVNS/nv-a lists trays 5 and 6 in status.nodes; $NVNS/nv-b lists none" $? "$out"
uid_b=$(k -n "$NVNS" get "$nvcd" nv-b -o jsonpath='{.metadata.uid}')
jq -n --arg n "$uid_b.${CLIQUE##*.}" --arg ns "$DRVNS" --arg u "$uid_b" --arg c "${CLIQUE##*.}" \
	--argjson a "$(member 7 0 | jq 'del(.name)')" --argjson b "$(member 8 1 | jq 'del(.name)')" \
	'{apiVersion: "resource.nvidia.com/v1beta1", kind: "ComputeDomainClique",
	  metadata: {name: $n, namespace: $ns, labels: {"resource.nvidia.com/computeDomain": $u,
		"resource.nvidia.com/computeDomain.cliqueID": $c}}, daemons: [$a, $b]}' >"$work/clique.json"
out=$(k create -f "$work/clique.json" 2>&1)
check "its ComputeDomainClique $DRVNS/$uid_b.${CLIQUE##*.} lists trays 7 and 8" $? "$out"
stored=$(k -n "$NVNS" get "$nvcd" -o json | jq -c '[.items[] | [.metadata.name, .status.status, (.status.nodes // [] | length), .spec.channel.allocationMode]]')
[[ $stored == '[["nv-a","Ready",2,"Single"],["nv-b","Ready",0,"Single"]]' ]]
check "the apiserver stored them as NVIDIA's schema says (allocationMode defaulted to Single)" $? "$stored"

# What NVIDIA's objects look like now: nothing after this may change them
# but the suite itself.
nv_record() {
	k get "$nvcd,$nvcq" -A --show-managed-fields -o json | jq -c '[.items[] |
		{key: "\(.kind)/\(.metadata.namespace)/\(.metadata.name)", rv: .metadata.resourceVersion,
		 managers: [.metadata.managedFields[]? | "\(.manager)/\(.operation)/\(.subresource // "")"]}] | sort_by(.key)'
}
before=$(nv_record)

# ------------------------------------------------- operator and agents ---
op_start op --webhook-bind-address=0
upg_rack
upg_agents
simctl busbw "$rack" 900 >/dev/null

nvtrays() { trays_json | jq -c '[.[] | select(.status.nvidiaDRA != null) | [.spec.index, .status.nvidiaDRA.driver, .status.nvidiaDRA.resourceSlice]]'; }
want_nv=$(for t in 5 6 7 8; do printf '[%d,"%s","%s-%s"]\n' "$t" "$NVDRV" "$(node "$t")" "$NVDRV"; done | jq -sc .)
nv_reported() { [[ $(nvtrays) == "$want_nv" ]]; }
wait_for 30 nv_reported
check "trays 5-8, and only they, report NVIDIA's ownership in status.nvidiaDRA" $? "$(nvtrays)"
hostunit=$(trays_json | jq -c '[.[] | select(.spec.index >= 5 and .spec.index <= 8) |
	[.status.nvidiaDRA.hostIMEXUnit, (.status.conditions[] | select(.type == "HostIMEXOff") | .status)]] | unique')
others=$(trays_json | jq '[.[] | select(any(.status.conditions[]?; .type == "HostIMEXOff"))] | length')
[[ $hostunit == '[["Inactive","True"]]' && $others == 4 ]]
check "their host nvidia-imex unit is Inactive and HostIMEXOff True, a condition only they carry" $? "$hostunit others=$others"

# ------------------------- spec.imex on an NVIDIA-managed tray: not applied ---
out=$(k patch computetray "$RACK-t05" --type=merge -p '{"spec":{"imex":{"mode":"process","domain":"team-x.manual","peers":["'"$(ip 5)"'"],"channels":{"count":2048,"ids":[0]}}}}' 2>&1)
check "spec.imex put on tray 5 by hand" $? "$out"
imex_cond() { k get computetray "$RACK-t05" -o json | jq -r --arg t "$1" '.status.conditions[] | select(.type == $t) | "\(.status) \(.reason) \(.message)"'; }
not_applied() { [[ $(imex_cond IMEXReady) == "False NVIDIAManaged NVIDIA's DRA driver $NVDRV runs IMEX on this tray (ResourceSlice $(node 5)-$NVDRV): spec.imex of domain team-x.manual is not applied" ]]; }
wait_for 30 not_applied
rc=$?
imexst=$(k get computetray "$RACK-t05" -o json | jq -c '[.status.imex.mode, .status.imex.daemonState]')
((rc == 0)) && [[ ! -e $(tray 5)/host/run/nvl72-agent/imex.pid && ! -e $(tray 5)/host/etc/nvidia-imex/nodes_config.cfg &&
	$imexst == '[null,null]' ]]
check "the agent leaves it: IMEXReady False NVIDIAManaged, no IMEX config or daemon of ours on tray 5" $? \
	"$(imex_cond IMEXReady) imex=$imexst files=$(ls "$(tray 5)/host/run/nvl72-agent" "$(tray 5)/host/etc/nvidia-imex" 2>&1 | tr '\n' ' ')"
out=$(k patch computetray "$RACK-t05" --type=json -p '[{"op":"remove","path":"/spec/imex"}]' 2>&1)
check "spec.imex taken off tray 5 again" $? "$out"

# ------------------------------ the host's IMEX unit beside NVIDIA's ---
sleep 600 &
hostimex=$!
opids[hostimex]=$hostimex
printf 'LoadState=loaded\nActiveState=active\nUnitFileState=enabled\nMainPID=%s\n' "$hostimex" \
	>"$(tray 6)/units/nvidia-imex.service"
conflict() { [[ $(k get computetray "$RACK-t06" -o json | jq -r '.status.conditions[] | select(.type == "HostIMEXOff") | "\(.status) \(.reason)"') == "False ConflictsWithNVIDIADRA" ]]; }
wait_for 30 conflict
rc=$?
t6=$(k get computetray "$RACK-t06" -o json)
msg=$(jq -r '.status.conditions[] | select(.type == "HostIMEXOff") | .message' <<<"$t6")
ready=$(jq -r '.status.conditions[] | select(.type == "Ready") | "\(.status) \(.reason)"' <<<"$t6")
((rc == 0)) && [[ $msg == "nvidia-imex.service is active on a tray whose IMEX NVIDIA's DRA driver $NVDRV runs (ResourceSlice $(node 6)-$NVDRV): the host daemon and the driver's daemon cannot hold the driver's IMEX session together; mask the unit"* &&
	$ready == "False HostIMEXRunning" && $(jq -r .status.nvidiaDRA.hostIMEXUnit <<<"$t6") == Active ]]
check "the host's nvidia-imex unit active on tray 6: HostIMEXOff False naming the conflict, Ready False" $? "$msg / $ready"
[[ $(grep ActiveState "$(tray 6)/units/nvidia-imex.service") == ActiveState=active ]] && kill -0 "$hostimex"
check "the agent left the host's unit running (it reports, never acts)" $? "$(cat "$(tray 6)/units/nvidia-imex.service")"
kill "$hostimex" 2>/dev/null
printf 'LoadState=loaded\nActiveState=inactive\nUnitFileState=masked\n' >"$(tray 6)/units/nvidia-imex.service"
unconflicted() { [[ $(k get computetray "$RACK-t06" -o json | jq -r '[.status.conditions[] | select(.type == "HostIMEXOff" or .type == "Ready") | "\(.type)=\(.status)"] | sort | join(" ")') == "HostIMEXOff=True Ready=True" ]]; }
wait_for 30 unconflicted
check "the unit masked by the administrator: HostIMEXOff and Ready True again" $? \
	"$(k get computetray "$RACK-t06" -o json | jq -c '[.status.conditions[] | [.type, .status, .reason]]')"

# ------------------------------------ our ComputeDomain skips 5-8 ---
jq -n --arg ns "$CD_NS" --arg r "$RACK" '{apiVersion: "nvl72.io/v1alpha1", kind: "ComputeDomain",
	metadata: {name: "train-8", namespace: $ns}, spec: {numNodes: 8, selector: {rack: $r}}}' >"$work/cd.json"
out=$(k create -f "$work/cd.json" 2>&1)
check "a ComputeDomain of ours for 8 nodes" $? "$out"
cd_nodes() { k -n "$CD_NS" get "$ourcd" train-8 -o json | jq -c '[.status.nodes[]?.name] | sort'; }
want_cd=$(for t in 1 2 3 4 9 10 11 12; do node "$t"; echo; done | jq -Rsc 'split("\n")[:-1] | sort')
placed() { [[ $(cd_nodes) == "$want_cd" ]]; }
wait_for 60 placed
check "it places on trays 1-4 and 9-12, skipping the NVIDIA-managed 5-8" $? "$(cd_nodes)"
nvimex=$(trays_json | jq -c '[.[] | select(.spec.index >= 5 and .spec.index <= 8) | .spec.imex] | unique')
[[ $nvimex == "[null]" ]]
check "no NVIDIA-managed tray got our spec.imex" $? "$nvimex"
out=$(k -n "$CD_NS" delete "$ourcd" train-8 --wait=true --timeout=60s 2>&1)
released_cd() { [[ $(trays_json | jq '[.[] | select(.spec.imex != null)] | length') == 0 ]]; }
wait_for 60 released_cd
check "deleting it releases its trays" $? "$out"

# ----------------------------------------------- the upgrade holds ---
UP=r07-nvidia
t0=$SECONDS
out=$(upgrade "$UP" routine | k create -f - 2>&1)
check "create the routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$UP" AwaitingApproval
out=$(approval "$UP" | k create -f - 2>&1)
check "approve it after the notice" $? "$out"
held_on() { # held_on WAVE TRAY DOMAIN BUSY: the first tray, its domain, the busy trays
	[[ $(ustatus "$UP" '.status.message' | jq -r .) == "wave $1: held: tray $2 (Node $(node "$2")) is in NVIDIA ComputeDomain $3 (trays of the step in NVIDIA ComputeDomains: $4); the Drain starts once NVIDIA's driver releases them" ]]
}
wait_for 240 held_on 1 5 "$NVNS/nv-a" 5,6
check "the wave of trays 3-6 holds before its Drain, naming NVIDIA ComputeDomain $NVNS/nv-a ($((SECONDS - t0))s)" $? \
	"$(ustatus "$UP" '.status | {phase, message}')"
wave1=$(ustatus "$UP" '[.status.waves[] | select(.index == 1) | .trays][0]')
steps1=$(ustatus "$UP" '[.status.steps[] | select(.wave == 1) | .phase // "Pending"] | unique')
touched=$(trays_json | jq -c '[.[] | select(.spec.index >= 3 and .spec.index <= 6) | [(.spec.maintenance.state // "None"), .status.driver.version]] | unique')
cordoned=$(k get nodes -o json | jq -c --arg r "$RACK-t0" '[.items[] | select(.metadata.name | startswith($r)) | select(.spec.unschedulable == true) | .metadata.name]')
[[ $wave1 == "[3,4,5,6]" && $steps1 == '["Pending"]' && $touched == "[[\"None\",\"$FROM_DRIVER\"]]" && $cordoned == "[]" ]]
check "nothing of the wave is touched: its steps Pending, trays 3-6 out of maintenance on $FROM_DRIVER, no Node cordoned" $? \
	"wave=$wave1 steps=$steps1 trays=$touched cordoned=$cordoned"
events_for "$UP" | grep -qx HeldByNVIDIAComputeDomain
check "a HeldByNVIDIAComputeDomain event is recorded on the RackUpgrade" $? "$(events_for "$UP" | tr '\n' ' ')"
after=$(nv_record)
[[ $after == "$before" ]] && ! grep -q 'nvl72' <<<"$after"
check "the operator wrote nothing of resource.nvidia.com: resourceVersions and managedFields unchanged" $? \
	"before=$before after=$after"

out=$(k -n "$NVNS" delete "$nvcd" nv-a 2>&1)
check "NVIDIA's job on trays 5-6 ends: ComputeDomain $NVNS/nv-a deleted" $? "$out"
wait_for 240 held_on 2 7 "$NVNS/nv-b" 7,8
check "the wave goes on; the next one (trays 7-10) holds naming $NVNS/nv-b, known from its ComputeDomainClique" $? \
	"$(ustatus "$UP" '.status | {phase, message}')"
drv=$(trays_json | jq -c '[.[] | select(.spec.index >= 3 and .spec.index <= 6) | .status.driver.version] | unique')
[[ $drv == "[\"$TO_DRIVER\"]" ]]
check "trays 3-6 run $TO_DRIVER" $? "$drv"
out=$(k -n "$DRVNS" delete "$nvcq" --all 2>&1) && out=$(k -n "$NVNS" delete "$nvcd" nv-b 2>&1)
check "NVIDIA's job on trays 7-8 ends: its clique and ComputeDomain deleted" $? "$out"
wait_for 300 phase_in "$UP" Completed Halted Aborted
phase_is "$UP" Completed
check "the upgrade completes ($((SECONDS - t0))s)" $? "$(ustatus "$UP" '.status | {phase, message}')"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "every tray runs driver $TO_DRIVER" $? "$drivers"
grep -q "ComputeDomains are served: reading them (never writing)" "$work/op.log"
check "the operator found NVIDIA's ComputeDomains through discovery" $? "$(grep -i nvidia "$work/op.log" | head -3)"
echo "# suite time $((SECONDS - t0_all))s"
finish
