#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 18 nvl72-agent processes against a real kube-apiserver and a simulated
# rack: each owns one ComputeTray, reads its tray through the fake NVML and
# IMEX tools, and reports through the status subresource with a heartbeat
# Lease. Faults are injected into the sim roots and must show in status;
# with nothing changing the agents must not write status at all.
#
# NVL72_SIM_PROFILE (gb300, the default; gb200; vr200) lays the rack out
# as that platform's trays (simctl create --profile) and every check that
# names a driver, clique, VBIOS, bus id or part number expects that platform's;
# agent_profiles_test.sh runs the suite on gb200 and vr200.
#
# Runner contract: run from the repository root with KUBECONFIG (admin),
# KUBECTL and NVL72_CLUSTER_DIR set, against a fresh control plane. Prints
# `ok - NAME` / `not ok - NAME: WHY` and `N passed, M failed`; exits non-zero
# on a failure. Everything started here is stopped by the EXIT trap.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG
rel=${NVL72_BUILD:-$PWD/build/rel}
bin=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
window=${NVL72_AGENT_QUIET_WINDOW:-60}

profile=${NVL72_SIM_PROFILE:-gb300}
# What the agent must report for each profile (the values simctl's
# profiles carry, with their sources, in tests/sim/simctl.c), and the
# version the driver change goes to: another published build. Vera Rubin's
# goes to the R620 long-term branch (620.70.06, NVIDIA's
# redistrib_620.70.06.json), as the sample Vera Rubin matrix does.
case $profile in
gb300) drv=580.95.05 cuda=13.0 cq=32766 vbios=97.10.4A.00.1A part="" target=580.173.02
	pcis='["00000008:06:00.0","00000009:06:00.0","00000018:06:00.0","00000019:06:00.0"]' ;;
gb200) drv=580.173.02 cuda=13.0 cq=2 vbios=97.00.B9.00.69 part=900-2G548-A801-000 target=580.95.05
	pcis='["00000000:29:00.0","00000000:3F:00.0","00000000:9C:00.0","00000000:B2:00.0"]' ;;
vr200) drv=615.23 cuda=13.4 cq=32766 vbios=99.00.1B.00.00 part=699-2G558-3201-TS3 target=620.70.06
	pcis='["00000002:81:00.0","00000002:C1:00.0","0000000A:81:00.0","0000000A:E1:00.0"]' ;;
*) echo "not ok - NVL72_SIM_PROFILE=$profile: not gb200, gb300 or vr200"; echo "0 passed, 1 failed"; exit 1 ;;
esac

pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $(tr -s ' \t\n' ' ' <<<"$2" | cut -c1-600)"; fail=$((fail + 1)); }
finish() {
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }

if [[ ! -x $bin || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ nok "build the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-agent-e2e.XXXXXX)
rack=$work/rack
declare -A apid=()
cleanup() {
	local p f
	for p in "${apid[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid \
		"$rack"/tray-*/host/run/nvl72-agent/driver-install.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses and ports of this run; another run picks others.
ipbase=$((20 + ($$ % 8) * 25))
. tests/cluster/ports.sh
port=$(free_port 3)
mport=$((port + 2))
ns=nvl72-system
ip() { echo "127.0.0.$((ipbase + $1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$1"; }
name() { printf 'r1-t%02d' "$1"; }
simctl() { "$sim/bin/simctl" "$@"; }

# ---------------------------------------------------------------- docs ---
want=$("$bin" --help-markdown)
have=$(sed -n '/^<!-- BEGIN nvl72-agent --help-markdown -->$/,/^<!-- END nvl72-agent --help-markdown -->$/p' \
	docs/agent.md | sed '1d;$d')
[[ -n $want && $want == "$have" ]] && ok "docs/agent.md's flag table is --help-markdown's output" ||
	nok "docs/agent.md flag table in sync" "$(diff <(echo "$want") <(echo "$have") | head -5)"

# --------------------------------------------------------------- setup ---
out=$(k apply -f crds/ 2>&1) && k wait --for=condition=Established --timeout=60s \
	crd/computetrays.nvl72.io >/dev/null 2>&1 || { nok "apply crds/" "$out"; finish; }
k create namespace "$ns" >/dev/null 2>&1
simctl create "$rack" --trays 18 --ip-base "$ipbase" --profile "$profile" >/dev/null ||
	{ nok "simctl create --profile $profile" ""; finish; }
{
	for t in $(seq 1 18); do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: node-%02d}\n' "$t"
		printf -- '---\napiVersion: nvl72.io/v1alpha1\nkind: ComputeTray\nmetadata: {name: %s}\n' "$(name "$t")"
		printf 'spec: {rack: r1, index: %d, node: node-%02d}\n' "$t" "$t"
	done
} >"$work/objects.yaml"
out=$(k apply -f "$work/objects.yaml" 2>&1) && ok "18 Nodes and 18 ComputeTrays created" ||
	{ nok "create Nodes and ComputeTrays" "$out"; finish; }

start_agent() { # start_agent TRAY
	local t=$1 d
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$bin" --kubeconfig "$KUBECONFIG" --node-name "$(printf 'node-%02d' "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$ns" --host-root "$d/host" \
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

trays_json() { k get computetrays -o json 2>/dev/null; }
st() { # st TRAY JQ: a jq expression on one tray's status
	k get computetray "$(name "$1")" -o json 2>/dev/null | jq -r ".status | $2" 2>/dev/null
}
cond() { # cond TRAY TYPE -> "Status Reason Message"
	st "$1" ".conditions[]? | select(.type == \"$2\") | \"\(.status) \(.reason) \(.message)\""
}
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
	local end=$((SECONDS + $1))
	shift
	while ((SECONDS <= end)); do
		"$@" && return 0
		sleep 0.5
	done
	return 1
}
alive() { kill -0 "${apid[$1]}" 2>/dev/null; }
clique=3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.$cq

# ---------------------------------------------------------- the rack up ---
all_reporting() {
	trays_json | jq -e --arg c "$clique" '[.items[] | select(
		(.status.gpus // []) | length == 4 and all(.fabric.state == "Completed")) | select(
		.status.fabric.cliqueID == $c and .status.driver.version == $d and
		any(.status.conditions[]; .type == "Ready" and .status == "True"))] | length == 18' \
		--arg d "$drv" >/dev/null
}
t0=$SECONDS
if wait_for 60 all_reporting; then
	ok "18 agents ($profile): every ComputeTray reports 4 GPUs Completed, clique $clique, driver $drv, Ready ($((SECONDS - t0))s)"
else
	nok "18 trays report" "$(trays_json | jq -c '[.items[] | {n: .metadata.name, r: (.status.conditions // [] | map(select(.type=="Ready"))[0].reason)}]')"
fi
n=$(k get leases -n "$ns" -o json | jq '[.items[] | select(.spec.holderIdentity | startswith("nvl72-agent/"))] | length')
[[ $n == 18 ]] && ok "18 heartbeat Leases in $ns" || nok "heartbeat Leases" "$n of 18"
r1=$(k get lease -n "$ns" "$(name 1)" -o jsonpath='{.spec.renewTime}')
sleep 2.5
r2=$(k get lease -n "$ns" "$(name 1)" -o jsonpath='{.spec.renewTime}')
owner=$(k get lease -n "$ns" "$(name 1)" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')
[[ -n $r1 && $r1 != "$r2" && $owner == "ComputeTray/$(name 1)" ]] &&
	ok "the Lease is renewed ($r1 -> $r2) and owned by its tray" || nok "lease renewal" "$r1 $r2 $owner"

# ------------------------------------------------------ fabric faults ---
simctl gpu "$(tray 3)" 2 state=2
t0=$SECONDS
fab3() { [[ $(st 3 '.gpus[2].fabric.state') == InProgress && $(cond 3 FabricReady) == "False InProgress"* &&
	$(cond 3 Ready) == "False FabricNotReady"* && $(st 3 .fabric.cliqueID) == "" ]]; }
wait_for 15 fab3 && ok "GPU 2 of tray 3 in IN_PROGRESS shows in status and conditions ($((SECONDS - t0))s)" ||
	nok "IN_PROGRESS shows" "$(cond 3 FabricReady) / $(st 3 .gpus[2].fabric.state)"
simctl gpu "$(tray 3)" 2 state=3
wait_for 15 eval '[[ $(cond 3 Ready) == "True AllReady"* ]]' && ok "tray 3 is Ready again" ||
	nok "tray 3 recovers" "$(cond 3 Ready)"

simctl gpu "$(tray 4)" 1 health_mask=0x4A9 summary=3
t0=$SECONDS
health4() { [[ $(cond 4 FabricHealthy) == "False LimitedCapacity GPU 1: LimitedCapacity (degradedBandwidth"* &&
	$(st 4 '.gpus[1].fabric.health.degradedBandwidth') == true &&
	$(st 4 '.fabric.healthSummary') == LimitedCapacity ]]; }
wait_for 15 health4 && ok "degraded health of tray 4 GPU 1 shows decoded, with FabricHealthy False ($((SECONDS - t0))s)" ||
	nok "degraded health" "$(cond 4 FabricHealthy)"
simctl gpu "$(tray 4)" 1 health_mask=0x1AA summary=1

# An NVML API 12 library (R570, R575): no health summary, so the agent
# decides it from the mask and says so; a mask fault names the GPU.
simctl gpu "$(tray 6)" all nvml_api=12
t0=$SECONDS
mask6() { [[ $(st 6 '[.gpus[].fabric | "\(.healthSummary)/\(.healthSource)/\(.healthMask)"] | unique | join(",")') == Healthy/mask/170 &&
	$(st 6 '.fabric.healthSource') == mask && $(st 6 '.fabric.healthSummary') == Healthy &&
	$(cond 6 FabricHealthy) == "True Healthy"* && $(cond 6 Ready) == "True AllReady"* ]]; }
wait_for 15 mask6 && ok "nvml_api=12: tray 6 is Healthy from the health mask, healthSource mask ($((SECONDS - t0))s)" ||
	nok "health from the mask" "$(st 6 '[.gpus[].fabric] | tostring') / $(cond 6 FabricHealthy)"
simctl gpu "$(tray 6)" 2 health_mask=0x9A
t0=$SECONDS
maskfault6() { [[ $(cond 6 FabricHealthy) == "False Unhealthy GPU 2: Unhealthy from the health mask (routeUnhealthy)" &&
	$(st 6 '.gpus[2].fabric.healthSummary') == Unhealthy && $(st 6 '.fabric.healthSummary') == Unhealthy ]]; }
wait_for 15 maskfault6 && ok "nvml_api=12: a fault in GPU 2's mask is FabricHealthy False naming GPU 2 ($((SECONDS - t0))s)" ||
	nok "mask fault" "$(cond 6 FabricHealthy)"
simctl gpu "$(tray 6)" 2 health_mask=0x1AA
simctl gpu "$(tray 6)" all nvml_api=13
wait_for 15 eval '[[ $(st 6 .fabric.healthSource) == summary && $(cond 6 FabricHealthy) == "True Healthy"* ]]' &&
	ok "nvml_api=13 again: the summary is NVML's" || nok "back to the summary" "$(st 6 .fabric) / $(cond 6 FabricHealthy)"

# Inventory from NVML: the profile's VBIOS, part number and PCI bus ids
# (by GPU index) on every GPU, its driver branch and CUDA version.
inv() { trays_json | jq -e --arg v "$vbios" --arg p "$part" --argjson pci "$pcis" \
	--arg d "$drv" --arg c "$cuda" '[.items[].status | select(.driver.version == $d and
	.driver.cudaVersion == $c and .driver.branch == "R\($d | split(".")[0])") | .gpus[]? |
	select(.vbios == $v and (.boardPartNumber // "") == $p and .pciBusId == $pci[.index])] |
	length == 72' >/dev/null; }
wait_for 15 inv && ok "every GPU's status has the $profile profile's VBIOS $vbios, part '$part' and PCI bus id from NVML, driver $drv CUDA $cuda" ||
	nok "$profile inventory" "$(st 1 '[.driver.version, .driver.cudaVersion, (.gpus[] | [.vbios, .boardPartNumber, .pciBusId])] | tostring')"
[[ $(cat "$rack"/tray-*/tray.env | grep -c "^profile=$profile$") == 18 ]] &&
	ok "every tray's state records profile=$profile" || nok "tray.env profile" "$(grep -h profile "$rack"/tray-*/tray.env | sort | uniq -c)"

simctl gpu "$(tray 5)" 0 clique=7
wait_for 15 eval '[[ $(cond 5 FabricReady) == "False CliqueMismatch"* ]]' &&
	ok "one GPU in another clique is FabricReady False CliqueMismatch" || nok "clique mismatch" "$(cond 5 FabricReady)"
simctl gpu "$(tray 5)" 0 clique=$cq

# --------------------------------------------------------- hostile host ---
cp "$(tray 2)/host/proc/driver/nvidia/version" "$work/version.save"
printf 'NVRM version: NVIDIA UNIX Open Ker' >"$(tray 2)/host/proc/driver/nvidia/version"
drv2() { [[ $(cond 2 DriverReady) == "False DriverReadError"* && $(st 2 .lastError.reason) == DriverReadError &&
	$(cond 2 FabricReady) == "True Completed"* ]]; }
wait_for 15 drv2 && alive 2 && ok "a truncated /proc driver file is DriverReadError (fabric still reported), no crash" ||
	nok "truncated proc file" "$(cond 2 DriverReady) / $(st 2 .lastError)"
cp "$work/version.save" "$(tray 2)/host/proc/driver/nvidia/version"

simctl fault "$(tray 6)" nvml_init_fail on
nvml6() { [[ $(cond 6 FabricReady) == "False GPUReadError"* && $(st 6 .lastError.reason) == NVMLError &&
	$(st 6 .lastError.message) == *nvmlInit* ]]; }
wait_for 15 nvml6 && alive 6 && ok "an NVML error is FabricReady False GPUReadError and lastError NVMLError, no crash" ||
	nok "NVML error" "$(cond 6 FabricReady) / $(st 6 .lastError)"
simctl fault "$(tray 6)" nvml_init_fail off

printf 'LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n' \
	>"$(tray 17)/units/nvidia-fabricmanager.service"
fm17() { [[ $(cond 17 HostFabricManagerOff) == "True Masked"* ]] &&
	grep -q 'UnitFileState=masked' "$(tray 17)/units/nvidia-fabricmanager.service"; }
wait_for 15 fm17 && ok "a running host Fabric Manager is stopped and masked (policy mask)" ||
	nok "host FM" "$(cond 17 HostFabricManagerOff)"

# ---------------------------------------------------------------- IMEX ---
peers=$(for t in 7 8 9 10 11 12; do printf '"%s",' "$(ip "$t")"; done)
peers="[${peers%,}]"
for t in 7 8 9 10 11 12; do
	k patch computetray "$(name "$t")" --type merge -p \
		"{\"spec\":{\"imex\":{\"domain\":\"r1-cd\",\"peers\":$peers,\"port\":$port,\"commandPort\":$((port + 1)),\"channels\":{\"count\":2048,\"ids\":[0,5]}}}}" \
		>/dev/null || nok "patch imex on tray $t" ""
done
imex_up() { # imex_up TRAY...
	local t
	for t in "$@"; do
		[[ $(st "$t" '"\(.imex.daemonState) \(.imex.domainState) \(.imex.peersConnected)"') == "Ready Up 6" &&
			$(cond "$t" IMEXReady) == "True DomainUp"* ]] || return 1
	done
}
t0=$SECONDS
wait_for 40 imex_up 7 8 9 10 11 12 && ok "a peer list for 6 trays brings their IMEX daemons to Ready and the domain Up ($((SECONDS - t0))s)" ||
	nok "IMEX up" "$(for t in 7 8 9 10 11 12; do st "$t" '.imex | "\(.daemonState)/\(.domainState)/\(.peersConnected)"'; done)"
if [[ $(id -u) == 0 ]]; then
	ch=$(st 9 '.imex.channels | "\(.count) \(.created | map(tostring) | join(","))"')
	node=$(stat -c '%F %a' "$(tray 9)/host/dev/nvidia-caps-imex-channels/channel5" 2>/dev/null)
	[[ $ch == "2048 0,5" && $node == "character special file 666" ]] &&
		ok "IMEX channel device nodes 0 and 5 are created and reported" || nok "channels" "$ch / $node"
else
	ok "IMEX channel device nodes # skip: mknod needs root"
fi
h=$(for t in 7 8 9 10 11 12; do st "$t" .imex.configHash; done | sort -u)
[[ $(wc -l <<<"$h") == 1 && ${#h} == 64 ]] && ok "the six trays report one peer-list hash" || nok "config hash" "$h"

# A tray goes away: its agent stops (cleanly, at SIGTERM), then its daemon dies.
kill -TERM "${apid[12]}"
t0=$SECONDS
wait_for 10 eval '! alive 12'
wait "${apid[12]}" 2>/dev/null
rc=$?
[[ $rc == 0 ]] && ok "SIGTERM stops an agent cleanly (exit 0 in $((SECONDS - t0))s)" || nok "SIGTERM" "rc=$rc"
simctl imex-kill "$(tray 12)"
degraded() {
	local t
	for t in 7 8 9 10 11; do
		[[ $(cond "$t" IMEXReady) == "False DomainDegraded $(ip 12) (node 5)"* ]] || return 1
	done
}
t0=$SECONDS
wait_for 20 degraded && ok "a killed peer daemon is reported by the five others ($((SECONDS - t0))s)" ||
	nok "killed peer" "$(cond 7 IMEXReady)"
start_agent 12
t0=$SECONDS
wait_for 30 imex_up 7 8 9 10 11 12 && ok "the restarted agent restarts its daemon; the domain is Up again ($((SECONDS - t0))s)" ||
	nok "domain back up" "$(cond 7 IMEXReady) / $(cond 12 IMEXReady)"
restarts=$(grep -c 'IMEX daemon (re)started' "$work/agent-7.log")
[[ $restarts == 1 ]] && ok "an unchanged spec never restarts a healthy daemon (tray 7: $restarts start)" ||
	nok "IMEX restarts" "tray 7 started its daemon $restarts times"

simctl fault "$(tray 8)" imex_ctl_hang on
t0=$SECONDS
hang8() { [[ $(cond 8 IMEXReady) == "False StatusTimeout"*"timed out after 1000 ms"* &&
	$(st 8 .lastError.reason) == IMEXStatusTimeout ]]; }
wait_for 20 hang8 && alive 8 && ok "a hung nvidia-imex-ctl is timed out and reported ($((SECONDS - t0))s)" ||
	nok "hung imex-ctl" "$(cond 8 IMEXReady)"
left=$(simctl pids "$(tray 8)" nvidia-imex-ctl | wc -l)
((left <= 1)) && ok "no hung nvidia-imex-ctl piles up ($left running)" || nok "hung ctl processes" "$left"
simctl fault "$(tray 8)" imex_ctl_hang off
wait_for 20 imex_up 8 && ok "tray 8 reports IMEX Ready once the tool answers" || nok "tray 8 recovers" "$(cond 8 IMEXReady)"

simctl fault "$(tray 9)" imex_ctl_garbage on
garbage9() { [[ $(cond 9 IMEXReady) == "False StatusError "?* && $(st 9 .lastError.reason) == IMEXStatusError ]]; }
wait_for 20 garbage9 && alive 9 &&
	ok "truncated JSON from nvidia-imex-ctl -N -j is a condition, no crash: $(cond 9 IMEXReady)" ||
	nok "garbage imex-ctl output" "$(cond 9 IMEXReady)"
simctl fault "$(tray 9)" imex_ctl_garbage off
wait_for 20 imex_up 9 || nok "tray 9 recovers" "$(cond 9 IMEXReady)"

# -------------------------------------------------------- driver change ---
simctl installer-delay "$(tray 13)" 3000
k patch computetray "$(name 13)" --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$target\"}}}" >/dev/null
wait_for 15 eval '[[ $(cond 13 DriverReady) == "False WaitingForMaintenance"* ]]' &&
	[[ ! -s $(tray 13)/driver/installer.log ]] &&
	ok "a new driver version outside maintenance waits (WaitingForMaintenance), nothing installed" ||
	nok "driver waits for maintenance" "$(cond 13 DriverReady)"
k patch computetray "$(name 13)" --type merge -p '{"spec":{"maintenance":{"state":"Drained"}}}' >/dev/null
wait_for 20 eval 'grep -q "^run " "$(tray 13)/driver/installer.log" 2>/dev/null'
progress=$(cond 13 DriverReady)
# The shell would report the kill; the agent is not its job any more.
disown "${apid[13]}"
kill -KILL "${apid[13]}"
wait_for 5 eval '! alive 13'
[[ $progress == "False Installing changing to $target: running the installer"* &&
	$(st 13 .maintenance.message) == "running the installer for $target" ]] &&
	ok "driver change in progress is reported: $progress" || nok "driver progress" "$progress"
start_agent 13
drv13() { [[ $(st 13 .driver.version) == "$target" && $(cond 13 DriverReady) == "True VersionMatches"* ]]; }
t0=$SECONDS
wait_for 40 drv13 && ok "after kill -9 mid-install and a restart the tray ends at $target ($((SECONDS - t0))s)" ||
	nok "driver change finishes" "$(cond 13 DriverReady) / $(st 13 .driver.version)"
grep -q 'ActiveState=active' "$(tray 13)/units/nvidia-persistenced.service" &&
	ok "the persistence daemon stopped for the change runs again" ||
	nok "persistenced back" "$(cat "$(tray 13)/units/nvidia-persistenced.service")"
runs=$(grep -c '^run ' "$(tray 13)/driver/installer.log")
[[ $runs == 1 ]] && ok "the installer ran exactly once" || nok "installer runs" "$runs"
grep -q 'phase=InstallerRunning' "$work/agent-13.log" &&
	ok "the restarted agent waited for the installer the killed one started" ||
	nok "installer wait after restart" "$(grep 'driver step' "$work/agent-13.log" | tail -3)"
k patch computetray "$(name 13)" --type merge -p '{"spec":{"maintenance":{"state":"None"}}}' >/dev/null
ev=$(k get events.events.k8s.io -n default -o json | jq -r '.items[] |
	select(.regarding.kind == "ComputeTray") | "\(.regarding.name) \(.reason)"' | sort -u)
[[ $ev == *"$(name 13) Done"* && $ev == *"$(name 13) StoppingHolders"* && $ev == *"$(name 7) IMEXRestarted"* ]] &&
	ok "driver steps and IMEX restarts are recorded as Events" || nok "events" "$ev"

# A failed driver step is tried again on the next pass. One systemctl that
# outlasts --tool-timeout (1 s here), as on a busy host, is not a failed
# change: the retry goes on and the change finishes. A step that keeps
# failing is ChangeFailed (what halts an upgrade) at its third failure in
# a row, and Retrying before that.
stop_step=systemctl-stop-nvidia-persistenced.service
simctl step-delay "$(tray 14)" "$stop_step" 1500 1
k patch computetray "$(name 14)" --type merge \
	-p "{\"spec\":{\"driver\":{\"version\":\"$target\"},\"maintenance\":{\"state\":\"Drained\"}}}" >/dev/null
drv14() { [[ $(st 14 .driver.version) == "$target" && $(cond 14 DriverReady) == "True VersionMatches"* ]]; }
wait_for 40 drv14
timeouts=$(grep -c "target=$target phase=StoppingHolders err=NV_E_TIMEOUT" "$work/agent-14.log")
[[ $(st 14 .driver.version) == "$target" && $timeouts == 1 && ! -e $(tray 14)/delays/$stop_step ]] &&
	ok "a systemctl that outlasts --tool-timeout once is retried and the driver change finishes" ||
	nok "driver step retried" "timeouts=$timeouts $(cond 14 DriverReady)"
simctl fault "$(tray 16)" installer_fail on
k patch computetray "$(name 16)" --type merge \
	-p "{\"spec\":{\"driver\":{\"version\":\"$target\"},\"maintenance\":{\"state\":\"Drained\"}}}" >/dev/null
wait_for 30 eval '[[ $(cond 16 DriverReady) == "False Retrying changing to $target: a step failed ("[12]" of 3 in a row), trying again: installer failed"* ]]'
retrying=$(cond 16 DriverReady)
wait_for 40 eval '[[ $(cond 16 DriverReady) == "False ChangeFailed"* ]]'
failed=$(cond 16 DriverReady)
runs=$(grep -c '^run ' "$(tray 16)/driver/installer.log" 2>/dev/null)
[[ $retrying == "False Retrying"* &&
	$failed == "False ChangeFailed changing to $target: 3 steps in a row failed (the agent keeps trying); the last: installer failed"* &&
	$runs -ge 3 ]] &&
	ok "a failing installer is Retrying, then ChangeFailed at its third failure in a row ($runs runs)" ||
	nok "driver change failed" "runs=$runs retrying=[$retrying] failed=[$failed]"
simctl fault "$(tray 16)" installer_fail off
drv16() { [[ $(st 16 .driver.version) == "$target" && $(cond 16 DriverReady) == "True VersionMatches"* ]]; }
wait_for 30 drv16 || nok "tray 16 recovers" "$(cond 16 DriverReady)"
k patch computetray "$(name 14)" --type merge -p '{"spec":{"maintenance":{"state":"None"}}}' >/dev/null
k patch computetray "$(name 16)" --type merge -p '{"spec":{"maintenance":{"state":"None"}}}' >/dev/null

# --------------------------------------------------- bad configurations ---
out=$("$bin" --kubeconfig "$work/nope.yaml" --node-name x 2>&1)
rc=$?
[[ $rc == 1 && $out == *"cannot load a Kubernetes configuration"*nope.yaml* ]] &&
	ok "a missing kubeconfig is a clear error" || nok "bad kubeconfig" "rc=$rc $out"
out=$("$bin" --kubeconfig "$KUBECONFIG" --node-name node-99 --tray-wait 1s 2>&1)
rc=$?
[[ $rc == 1 && $out == *"no ComputeTray has spec.node=node-99"* ]] &&
	ok "a node without a ComputeTray is a clear error" || nok "missing tray" "rc=$rc $(tail -1 <<<"$out")"

# ---------------------------------------------- no status writes at rest ---
all_ready() {
	trays_json | jq -e '[.items[] | select(any(.status.conditions[]; .type == "Ready" and
		.status == "True") and .status.observedGeneration == .metadata.generation)] |
		length == 18' >/dev/null
}
wait_for 60 all_ready || nok "every tray Ready before the quiet window" "$(trays_json | jq -c '[.items[] | select(any(.status.conditions[]; .type=="Ready" and .status!="True")) | .metadata.name]')"
status_writes() { # from the apiserver's own counters
	k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="computetrays"/ &&
		/subresource="status"/ && /verb="(PATCH|PUT|UPDATE|APPLY)"/ {s += $NF} END {print s + 0}'
}
lease_writes() {
	k get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="leases"/ &&
		/verb="(PATCH|PUT|UPDATE|APPLY)"/ {s += $NF} END {print s + 0}'
}
agent_writes() { # the agents' own counters
	local t s=0 v
	for t in $(seq 1 18); do
		v=$(curl -s --max-time 5 "http://$(ip "$t"):$mport/metrics" |
			awk '/^nvl72_agent_status_writes_total / {print $2}')
		s=$((s + ${v:-0}))
	done
	echo "$s"
}
sleep 5
a0=$(status_writes) l0=$(lease_writes) g0=$(agent_writes)
sleep "$window"
a1=$(status_writes) l1=$(lease_writes) g1=$(agent_writes)
echo "# quiet window ${window}s: status writes (apiserver) $a0 -> $a1, (agents) $g0 -> $g1; lease writes $l0 -> $l1"
[[ $a0 == "$a1" && $g0 == "$g1" && $l1 -gt $l0 ]] &&
	ok "no status writes by 18 idle agents over ${window}s ($((l1 - l0)) Lease renewals)" ||
	nok "no writes at rest" "apiserver $a0 -> $a1, agents $g0 -> $g1, leases $l0 -> $l1"

dead=""
for t in $(seq 1 18); do alive "$t" || dead="$dead $t"; done
[[ -z $dead ]] && ok "all 18 agents still running" || nok "agents alive" "exited:$dead"
finish
