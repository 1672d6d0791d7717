#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent as the kubelet plugin of the DRA driver imex.nvl72.io, against
# a real kube-apiserver: one agent on a simulated tray serves its sockets in
# a temporary folder, and the Go peer of tests/grpcpeer (the kubelet's own
# generated clients) registers it and prepares and unprepares
# ResourceClaims made here, with a status.allocation written through the
# status subresource. Checks the node's ResourceSlice (and its return after
# a delete), the CDI spec of a prepared claim, idempotence, per-claim
# refusals, a SIGKILL between the prepare and its answer, hostile clients
# on the DRA socket, and an API server without resource.k8s.io/v1 (the
# fault proxy answers 404 for it). The tray's ComputeDomain membership is written
# into its spec directly (spec.imex.domain and domainUID).
#
# Runner contract: run from the repository root with KUBECONFIG (admin),
# KUBECTL and NVL72_CLUSTER_DIR set, against a fresh control plane. Prints `ok - NAME` /
# `not ok - NAME: WHY` and `N passed, M failed`; exits non-zero on a
# failure. Everything started here is stopped by the EXIT trap.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG
rel=${NVL72_BUILD:-$PWD/build/rel}
bin=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim

pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $(tr -s ' \t\n' ' ' <<<"$2" | cut -c1-700)"; fail=$((fail + 1)); }
finish() {
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
	local end=$((SECONDS + $1))
	shift
	while ((SECONDS <= end)); do
		"$@" && return 0
		sleep 0.3
	done
	return 1
}

if [[ ! -x $bin || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ nok "build the agent and the simulator" "make failed"; finish; }
fi
peer=$(bash tests/grpcpeer/build.sh | tail -1)
[[ -x $peer ]] || { nok "build the gRPC peer" "tests/grpcpeer/build.sh failed"; finish; }

work=$(mktemp -d /tmp/nvl72-dra.XXXXXX)
apid=""
pids=() # helpers' processes (the fault proxy)
cleanup() {
	local f p
	[[ -n $apid ]] && kill -KILL "$apid" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for f in "$work"/rack/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ipbase=$((30 + ($$ % 8) * 25))
. tests/cluster/ports.sh
port=$(free_port 3)
mport=$((port + 2))
ip=127.0.0.$((ipbase + 1))
tray=$work/rack/tray-01
reg=$work/kubelet/plugins_registry
plugins=$work/kubelet/plugins
cdi=$work/cdi
regsock=$reg/imex.nvl72.io-reg.sock
drasock=$plugins/imex.nvl72.io/dra.sock
record=$tray/host/run/nvl72-agent/dra-claims.json
ns=nvl72-system
cd_uid=8d3c1b2a-4e5f-4a6b-9c7d-0e1f2a3b4c5d

# ---------------------------------------------------------------- setup ---
out=$(k apply -f crds/ 2>&1) && k wait --for=condition=Established --timeout=60s \
	crd/computetrays.nvl72.io >/dev/null 2>&1 || { nok "apply crds/" "$out"; finish; }
for n in "$ns" team-a team-b; do k create namespace "$n" >/dev/null 2>&1; done
"$sim/bin/simctl" create "$work/rack" --trays 1 --ip-base "$ipbase" >/dev/null ||
	{ nok "simctl create" ""; finish; }
mkdir -p "$reg" "$plugins"
printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: node-01}\n---\napiVersion: nvl72.io/v1alpha1\nkind: ComputeTray\nmetadata: {name: r1-t01}\nspec: {rack: r1, index: 1, node: node-01}\n' |
	k apply -f - >/dev/null || { nok "create the Node and the ComputeTray" ""; finish; }

start_agent() { # start_agent LOG [ENV=VALUE...]
	local log=$1
	shift
	env NVL72_SIM_ROOT="$tray" "$@" "$bin" --kubeconfig "$KUBECONFIG" --node-name node-01 \
		--node-ip "$ip" --lease-namespace "$ns" --host-root "$tray/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		--kubelet-registry-dir "$reg" --kubelet-plugins-dir "$plugins" --cdi-dir "$cdi" \
		--metrics-bind-address "$ip:$mport" >>"$log" 2>&1 &
	apid=$!
}
agent_log=$work/agent-1.log
start_agent "$agent_log"

# ------------------------------------------------------ registration ---
wait_for 30 test -S "$regsock" && test -S "$drasock" &&
	ok "the agent serves $regsock and $drasock" ||
	{ nok "sockets" "$(ls -la "$reg" "$plugins"/* 2>&1; tail -5 "$agent_log")"; finish; }
ep=$("$peer" -reg "$regsock" -call register 2>&1)
[[ $(tail -1 <<<"$ep") == "$drasock" && $ep == *"ok - GetInfo: supported versions"* &&
	$ep == *"ok - NotifyRegistrationStatus"* ]] &&
	ok "GetInfo names DRAPlugin imex.nvl72.io, v1 and v1beta1, and the DRA socket; the notification is taken" ||
	nok "register" "$ep"
wait_for 5 grep -q 'registered with the kubelet' "$agent_log" &&
	ok "the agent logs the kubelet's registration" || nok "registration logged" "$(tail -3 "$agent_log")"

# ----------------------------------------------------------- the slice ---
slice() { k get resourceslice node-01-imex.nvl72.io -o json 2>/dev/null; }
attr() { slice | jq -r ".spec.devices[0].attributes.$1 | (.string // .bool // .int) | tostring"; }
clique=$(sed -n 's/^cluster=//p' "$tray/gpu/0").$(sed -n 's/^clique=//p' "$tray/gpu/0")
slice_base() {
	slice | jq -e --arg c "$clique" '.spec.driver == "imex.nvl72.io" and .spec.nodeName == "node-01" and
		.spec.pool.name == "node-01" and .spec.pool.resourceSliceCount == 1 and
		(.spec.devices | map(.name)) == ["slot-0","slot-1","slot-2","slot-3"] and
		all(.spec.devices[]; (.attributes | keys) == ["channel","clique","domain","domainName",
			"domainNamespace","imexReady","partition","rack","tray"] and
			.attributes.domain.string == "" and .attributes.imexReady.bool == false and
			.attributes.rack.string == "r1" and .attributes.tray.int == 1 and
			.attributes.channel.int == 0 and .attributes.clique.string == $c)' >/dev/null
}
t0=$SECONDS
wait_for 30 slice_base &&
	ok "the node's ResourceSlice: pool node-01, slot-0..slot-3, every attribute, no domain yet ($((SECONDS - t0))s)" ||
	nok "ResourceSlice" "$(slice | jq -c .spec)"
gen0=$(slice | jq '.spec.pool.generation')

# The tray joins ComputeDomain team-a/train, as the operator would write it.
k patch computetray r1-t01 --type merge -p "{\"spec\":{\"imex\":{\"domain\":\"team-a.train\",\"domainUID\":\"$cd_uid\",\"peers\":[\"$ip\"],\"port\":$port,\"commandPort\":$((port + 1)),\"channels\":{\"count\":8,\"ids\":[0]}}}}" \
	>/dev/null || nok "patch spec.imex" ""
member() {
	slice | jq -e --arg u "$cd_uid" 'all(.spec.devices[]; .attributes.domain.string == $u and
		.attributes.domainNamespace.string == "team-a" and .attributes.domainName.string == "train" and
		.attributes.imexReady.bool == true)' >/dev/null
}
t0=$SECONDS
wait_for 60 member && (($(slice | jq '.spec.pool.generation') > gen0)) &&
	ok "membership and IMEX READY show in every device, pool generation bumped ($((SECONDS - t0))s)" ||
	nok "slice after the domain" "$(slice | jq -c '.spec.devices[0].attributes, .spec.pool')"
cond=$(k get computetray r1-t01 -o json | jq -r '.status.conditions[] | select(.type == "KubeletPluginReady") | "\(.status) \(.reason)"')
[[ $cond == "True Serving" ]] && ok "KubeletPluginReady True Serving" || nok "condition" "$cond"

# -------------------------------------------------------------- claims ---
claim() { # claim NS NAME [ALLOCATE]
	local ns_=$1 name=$2
	printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: %s, namespace: %s}\nspec: {devices: {requests: [{name: channel, exactly: {deviceClassName: imex-channel.nvl72.io}}]}}\n' \
		"$name" "$ns_" | k apply -f - >/dev/null || return 1
	[[ ${3:-} ]] || return 0
	k patch resourceclaim -n "$ns_" "$name" --subresource=status --type=merge -p \
		"{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"channel\",\"driver\":\"imex.nvl72.io\",\"pool\":\"node-01\",\"device\":\"$3\"}],\"config\":[{\"source\":\"FromClaim\",\"requests\":[\"channel\"],\"opaque\":{\"driver\":\"imex.nvl72.io\",\"parameters\":{\"apiVersion\":\"nvl72.io/v1alpha1\",\"kind\":\"ImexChannelConfig\",\"domainUID\":\"$cd_uid\",\"domain\":\"team-a/train\",\"allocationMode\":\"Single\"}}}]}}}}" \
		>/dev/null
}
uid() { k get resourceclaim -n "$1" "$2" -o jsonpath='{.metadata.uid}'; }
out=$(claim team-a job slot-0 2>&1 && claim team-a job2 slot-1 2>&1 && claim team-b job slot-2 2>&1 &&
	claim team-a unalloc 2>&1) && ok "ResourceClaims made, three allocated through status" ||
	nok "claims" "$out"
u1=$(uid team-a job) u2=$(uid team-a job2) ub=$(uid team-b job) uu=$(uid team-a unalloc)
prep() { "$peer" -reg "$regsock" -call prepare "$@" 2>&1; }
unprep() { "$peer" -reg "$regsock" -call unprepare "$@" 2>&1; }

major=$(awk '$2 == "nvidia-caps-imex-channels" {print $1}' "$tray/host/proc/devices")
spec=$cdi/imex.nvl72.io-$u1.json
r1=$(prep -claim "team-a/job/$u1")
jq -e --arg u "$u1" '.claims[$u] | .error == "" and (.devices | length) == 1 and
	.devices[0].poolName == "node-01" and .devices[0].deviceName == "slot-0" and
	.devices[0].requestNames == ["channel"] and .devices[0].cdiDeviceIDs == ["imex.nvl72.io/channel=" + $u]' \
	<<<"$r1" >/dev/null && ok "prepare answers the allocated device with the CDI id imex.nvl72.io/channel=<uid>" ||
	nok "prepare" "$r1"
jq -e --arg u "$u1" --argjson m "$major" '.cdiVersion == "0.5.0" and .kind == "imex.nvl72.io/channel" and
	(.devices | length) == 1 and .devices[0].name == $u and
	.devices[0].containerEdits.deviceNodes == [{"path": "/dev/nvidia-caps-imex-channels/channel0",
		"type": "c", "major": $m, "minor": 0, "permissions": "rw", "fileMode": 438}]' "$spec" >/dev/null 2>&1 &&
	ok "the CDI spec: device $u1, channel0 c $major:0 rw 0666" || nok "CDI spec" "$(cat "$spec" 2>&1)"
jq -e --arg u "$u1" '.claims[$u].namespace == "team-a" and .claims[$u].name == "job"' "$record" >/dev/null 2>&1 &&
	ok "the claim is in the record" || nok "record" "$(cat "$record" 2>&1)"
m1=$(stat -c %Y.%i "$spec")
r1b=$(prep -claim "team-a/job/$u1")
r1c=$(prep -version v1beta1 -claim "team-a/job/$u1")
n=$(grep -c "agent: claim prepared claim=.* uid=$u1" "$agent_log")
[[ $r1b == "$r1" && $r1c == "$r1" && $(stat -c %Y.%i "$spec") == "$m1" && $n == 1 ]] &&
	ok "a second prepare (v1 and v1beta1) answers the same and prepares nothing again" ||
	nok "idempotent prepare" "$r1b / $r1c / prepared $n times"

# A spec removed behind the agent's back (a tmpfs cleared) is written again.
rm -f "$spec"
r1d=$(prep -claim "team-a/job/$u1")
[[ $r1d == "$r1" && -e $spec && $(grep -c "agent: claim prepared claim=.* uid=$u1" "$agent_log") == 1 ]] &&
	ok "a prepare of a recorded claim whose spec is gone writes it again, same answer" ||
	nok "spec rewritten" "$r1d $(ls "$cdi")"

# Refusals, each in its claim's own error; the good claim in the same call is served.
bad=00000000-0000-4000-8000-000000000bad
r=$(prep -claim "team-b/job/$ub" -claim "team-a/unalloc/$uu" -claim "team-a/job2/$bad" -claim "team-a/job2/$u2")
e_ns=$(jq -r --arg u "$ub" '.claims[$u].error' <<<"$r")
e_un=$(jq -r --arg u "$uu" '.claims[$u].error' <<<"$r")
e_uid=$(jq -r --arg u "$bad" '.claims[$u].error' <<<"$r")
[[ $e_ns == "claim team-b/job: namespace team-b is not the namespace of ComputeDomain team-a/train" ]] &&
	ok "a claim of another namespace than the domain's is refused, naming it" || nok "namespace" "$e_ns"
[[ $e_un == "claim team-a/unalloc: it is not allocated (no status.allocation)" ]] &&
	ok "an unallocated claim is refused, naming it" || nok "unallocated" "$e_un"
[[ $e_uid == "claim team-a/job2: its UID is $u2, not $bad (the claim was replaced)" ]] &&
	ok "a UID mismatch is refused, naming the claim" || nok "uid mismatch" "$e_uid"
jq -e --arg u "$u2" '.claims[$u].error == "" and .claims[$u].devices[0].deviceName == "slot-1"' <<<"$r" >/dev/null &&
	[[ ! -e $cdi/imex.nvl72.io-$ub.json && ! -e $cdi/imex.nvl72.io-$uu.json ]] &&
	ok "the good claim of the same call is prepared; refused ones get no CDI spec" || nok "mixed call" "$r"

r=$(unprep -claim "team-a/job/$u1")
[[ $(jq -r --arg u "$u1" '.claims[$u].error' <<<"$r") == "" && ! -e $spec ]] &&
	! jq -e --arg u "$u1" '.claims | has($u)' "$record" >/dev/null &&
	ok "unprepare removes the CDI spec and the record entry" || nok "unprepare" "$r $(ls "$cdi")"
r=$(unprep -claim "team-a/job/$u1" -claim "team-a/never/11111111-2222-4333-8444-555555555555")
[[ $(jq -r '[.claims[].error] | join("")' <<<"$r") == "" && $(jq '.claims | length' <<<"$r") == 2 ]] &&
	ok "unprepare of a claim the agent does not know succeeds" || nok "idempotent unprepare" "$r"
unprep -claim "team-a/job2/$u2" >/dev/null

# ------------------------------------------------ the slice comes back ---
gen1=$(slice | jq '.spec.pool.generation')
k delete resourceslice node-01-imex.nvl72.io >/dev/null
t0=$(date +%s%N)
back() { slice >/dev/null && slice | jq -e '.spec.devices | length == 4' >/dev/null; }
if wait_for 30 back; then
	ms=$((($(date +%s%N) - t0) / 1000000))
	ok "a deleted ResourceSlice is published again in ${ms} ms (generation $gen1 -> $(slice | jq .spec.pool.generation))"
else
	nok "slice back" "$(tail -3 "$agent_log")"
fi

# ------------------------------------------- SIGKILL before the answer ---
kill -TERM "$apid" && wait "$apid" 2>/dev/null
[[ ! -e $regsock && ! -e $drasock ]] && ok "a stopped agent removes its sockets" ||
	nok "sockets after stop" "$(ls "$reg" "$plugins/imex.nvl72.io")"
log2=$work/agent-2.log
start_agent "$log2" NVL72_AGENT_TEST_PREPARE_PAUSE=60
# A socket left by a killed agent may still be there: wait for the new one.
serving() { grep -q 'kubelet plugin serving' "$1"; }
wait_for 30 serving "$log2" || nok "agent with the test hook" "$(tail -3 "$log2")"
wait_for 30 member
u3=$u2
unprep -claim "team-a/job2/$u3" >/dev/null
prep -claim "team-a/job2/$u3" >"$work/killed.out" &
ppid_=$!
if wait_for 30 grep -q "test hook: claim prepared and recorded.*uid=$u3" "$log2"; then
	kill -KILL "$apid"
	wait "$apid" 2>/dev/null
	wait "$ppid_" 2>/dev/null
	[[ -e $cdi/imex.nvl72.io-$u3.json ]] &&
		jq -e --arg u "$u3" '.claims | has($u)' "$record" >/dev/null &&
		ok "killed with SIGKILL after the CDI write and the record, before the answer" ||
		nok "state at the kill" "$(ls "$cdi"; cat "$record")"
	at=$(jq -r --arg u "$u3" '.claims[$u].preparedAt' "$record")
	log3=$work/agent-3.log
	start_agent "$log3"
	wait_for 30 serving "$log3"
	# The kubelet registers a plugin whose socket is new, then retries.
	"$peer" -reg "$regsock" -call register >/dev/null 2>&1
	r=$(prep -claim "team-a/job2/$u3")
	n=$(cat "$log2" "$log3" | grep -c "agent: claim prepared claim=.* uid=$u3")
	jq -e --arg u "$u3" '.claims[$u] | .error == "" and .devices[0].deviceName == "slot-1" and
		.devices[0].cdiDeviceIDs == ["imex.nvl72.io/channel=" + $u]' <<<"$r" >/dev/null &&
		[[ $n == 1 && $(jq -r --arg u "$u3" '.claims[$u].preparedAt' "$record") == "$at" ]] &&
		ok "the kubelet's retry after a restart gets the same answer; the record shows one preparation" ||
		nok "retry after the kill" "$r; prepared $n times; $(cat "$record")"
	r=$(unprep -claim "team-a/job2/$u3")
	[[ ! -e $cdi/imex.nvl72.io-$u3.json ]] && ok "an unprepare after the restart removes the spec" ||
		nok "unprepare after restart" "$r"
else
	nok "the test hook's pause" "$(tail -5 "$log2")"
	kill -KILL "$apid" 2>/dev/null
	start_agent "$work/agent-3.log"
	wait_for 30 serving "$work/agent-3.log"
fi

# -------------------------------------------------------- hostile peers ---
out=$("$peer" -reg "$regsock" -call hostile 2>&1)
echo "$out" | grep -E '^(not )?ok - ' | sed 's/^/# /'
[[ $(grep -c '^ok - ' <<<"$out") == 5 && $(grep -c '^not ok' <<<"$out") == 0 ]] && kill -0 "$apid" 2>/dev/null &&
	ok "garbage, a 2 GiB prefix, a cut message and a flood of 500 streams are refused on the DRA socket; the agent serves on" ||
	nok "hostile clients" "$out"

m=$(curl -sf "http://$ip:$mport/metrics")
grep -q '^nvl72_agent_dra_prepares_total{result="success"} [1-9]' <<<"$m" &&
	grep -q '^nvl72_agent_kubelet_registrations_total{result="registered"} [1-9]' <<<"$m" &&
	grep -q '^nvl72_agent_resourceslice_writes_total{result="success"} [0-9]' <<<"$m" &&
	ok "prepares and registrations are counted in /metrics, beside the slice writes" ||
	nok "metrics" "$(grep nvl72_agent_dra <<<"$m")"

# ------------------------------------- resource.k8s.io/v1 not served ---
# Through the fault proxy answering 404 for resource.k8s.io/v1, as an API
# server without it does: a new agent says so once and serves the kubelet
# on, without a slice.
kill -TERM "$apid" && wait "$apid" 2>/dev/null
apid=""
check() { if [[ $2 == 0 ]]; then ok "$1"; else nok "$1" "$3"; fi; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-300; }
. tests/integration/lib/faultproxy.sh
faultproxy_start "not served: "
echo "404 /apis/resource.k8s.io/v1" >"$work/proxy.mode"
log4=$work/agent-4.log
KUBECONFIG=$work/proxied.kubeconfig start_agent "$log4"
pcond() { k get computetray r1-t01 -o json | jq -r '.status.conditions[] | select(.type == "KubeletPluginReady") | "\(.status) \(.reason)"'; }
unserved() { [[ $(pcond) == "False ResourceSlicesNotServed" ]]; }
passes() { # the agent's passes so far
	local n
	n=$(curl -sf "http://$ip:$mport/metrics" | awk '/^nvl72_agent_reconcile_total\{result="success"\}/ {print $2}')
	echo "${n%%.*}"
}
# Said once: still once two passes later.
more_passes() { local n; n=$(passes); [[ -n $n ]] && ((n >= p0 + 2)); }
wait_for 30 unserved && wait_for 10 serving "$log4" && p0=$(passes) && wait_for 20 more_passes &&
	[[ $(grep -c 'resource.k8s.io/v1 is not served' "$log4") == 1 ]] && kill -0 "$apid" &&
	[[ $("$peer" -reg "$regsock" -call register 2>&1 | tail -1) == "$drasock" ]] &&
	ok "without resource.k8s.io/v1 the agent says so once (log, KubeletPluginReady False ResourceSlicesNotServed) and serves on" ||
	nok "not served" "$(pcond) / $(grep -c 'not served' "$log4") / $(tail -3 "$log4")"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
finish
