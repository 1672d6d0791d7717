#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent killed with SIGKILL in the middle of every host step of a driver
# change and of an IMEX configuration change, against a real kube-apiserver:
# three simulated trays with a real agent each. Each fake host tool logs the
# step it takes to the tray's steps.log and can be slowed there (simctl
# step-delay), so the suite waits for a step to begin on trays 1 and 2, kills
# their agents, restarts them, and compares the end with tray 3, which runs
# the same change undisturbed:
#   - driver: one round per step (stop the persistence daemon, install, unload
#     the modules, load the module, start the persistence daemon again); each
#     round ends with the same status and host state as tray 3's and exactly
#     one installer run per tray;
#   - driver, SIGTERM: the agent stopped cleanly while the installer runs
#     exits at once (the time is printed), the installer holds the driver
#     lock, and the next agent, with the marker gone, waits on the lock and
#     finishes that install exactly once;
#   - IMEX: a new peer list, killed while the old daemon shuts down and while
#     the new one starts; each tray ends with one daemon, started once, on the
#     new peers, and the domain Up.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (KUBECONFIG, KUBECTL set). Prints `ok - …` / `not ok - …` and
# `N passed, M failed`; exits non-zero on any failure.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG

rel=${NVL72_BUILD:-$PWD/build/rel}
bin=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
DELAY_MS=2500

pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $(tr -s ' \t\n' ' ' <<<"$2" | cut -c1-600)"; fail=$((fail + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else nok "$1" "$3"; fi; }
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

work=$(mktemp -d /tmp/nvl72-agent-crash.XXXXXX)
rack=$work/rack
declare -A apid=()
strays=() # installers whose marker a case removed
cleanup() {
	local p f
	for p in "${apid[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" "${strays[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid \
		"$rack"/tray-*/host/run/nvl72-agent/driver-install.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((fail > 0)); then
		for t in 1 2 3; do
			echo "-- last lines of agent $t"
			tail -8 "$work/agent-$t.log" 2>/dev/null | cut -c1-300
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses and ports of this run; another run picks others.
ipbase=$((30 + ($$ % 8) * 25))
. tests/cluster/ports.sh
port=$(free_port 3)
mport=$((port + 2))
ns=nvl72-system
ip() { echo "127.0.0.$((ipbase + $1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$1"; }
name() { printf 'c1-t%02d' "$1"; }
simctl() { "$sim/bin/simctl" "$@"; }
st() { k get computetray "$(name "$1")" -o json 2>/dev/null | jq -c ".status | $2" 2>/dev/null; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds, every 0.3 s
	local end=$((SECONDS + $1))
	shift
	while ((SECONDS <= end)); do
		"$@" && return 0
		sleep 0.3
	done
	return 1
}
count() { # count PATTERN FILE: matching lines, 0 when the file is absent
	local n
	n=$(grep -c "$1" "$2" 2>/dev/null)
	echo "${n:-0}"
}
steps() { count "^$2 " "$(tray "$1")/steps.log"; }
runs() { count '^run ' "$(tray "$1")/driver/installer.log"; }

# ---------------------------------------------------------------- setup ---
out=$(k apply -f crds/ 2>&1) && k wait --for=condition=Established --timeout=60s \
	crd/computetrays.nvl72.io >/dev/null 2>&1 || { nok "apply crds/" "$out"; finish; }
k create namespace "$ns" >/dev/null 2>&1
simctl create "$rack" --trays 3 --ip-base "$ipbase" >/dev/null || { nok "simctl create" ""; finish; }
{
	for t in 1 2 3; do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: crash-%02d}\n' "$t"
		printf -- '---\napiVersion: nvl72.io/v1alpha1\nkind: ComputeTray\nmetadata: {name: %s}\n' "$(name "$t")"
		printf 'spec: {rack: c1, index: %d, node: crash-%02d, driver: {version: 580.95.05},' "$t" "$t"
		printf ' maintenance: {state: Drained}}\n'
	done
} >"$work/objects.yaml"
out=$(k apply -f "$work/objects.yaml" 2>&1)
check "3 Nodes and 3 ComputeTrays in maintenance (Drained) on driver 580.95.05" $? "$out"

# Tools may take several seconds here, so their deadline is well above the
# step delays: a kill, not a timeout, must be what interrupts them.
start_agent() { # start_agent TRAY
	local t=$1 d
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$bin" --kubeconfig "$KUBECONFIG" --node-name "$(printf 'crash-%02d' "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$ns" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--tool-timeout 15s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		--metrics-bind-address "$(ip "$t"):$mport" >>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
}
for t in 1 2 3; do start_agent "$t"; done

# What must be equal between a killed tray and the undisturbed one: the
# reported driver, maintenance and condition states, and the host's module,
# on-disk version and persistence daemon.
final() { # final TRAY
	local d
	d=$(tray "$1")
	st "$1" '{d: (.driver | {loaded, version, onDiskVersion}), m: .maintenance,
		c: [.conditions[]? | select(.type != "HeartbeatCurrent") | {type, status, reason}] | sort_by(.type)}'
	cat "$d/host/sys/module/nvidia/version" "$d/driver/ondisk" 2>/dev/null
	grep ActiveState "$d/units/nvidia-persistenced.service"
	[[ -f $d/host/run/nvl72-agent/driver-install.pid ]] && echo "install marker left"
}
settled() { # settled VERSION TRAY...: the driver reported loaded and Ready
	local v=$1 t
	shift
	for t in "$@"; do
		[[ $(st "$t" '"\(.driver.version) \(.conditions[]? | select(.type == "DriverReady") | .reason)"') == "\"$v VersionMatches\"" ]] ||
			return 1
		[[ $(grep ActiveState "$(tray "$t")/units/nvidia-persistenced.service") == ActiveState=active ]] ||
			return 1
	done
}
t0=$SECONDS
wait_for 60 settled 580.95.05 1 2 3
check "3 agents report driver 580.95.05 Ready ($((SECONDS - t0))s)" $? "$(st 1 .driver) $(st 1 .conditions)"

# -------------------------------------------------- driver change, killed ---
# STEP names the steps.log entry; "installer" is the installer's own log.
version=580.95.05
for step in systemctl-stop-nvidia-persistenced.service installer modprobe-remove modprobe-load \
	systemctl-start-nvidia-persistenced.service; do
	if [[ $version == 580.95.05 ]]; then version=580.159.03; else version=580.95.05; fi
	declare -A before=() runs0=()
	for t in 1 2 3; do
		rm -rf "$(tray "$t")/delays"
		if [[ $step == installer ]]; then
			simctl installer-delay "$(tray "$t")" "$DELAY_MS" >/dev/null
		else
			simctl installer-delay "$(tray "$t")" 0 >/dev/null
			simctl step-delay "$(tray "$t")" "$step" "$DELAY_MS" >/dev/null
		fi
		before[$t]=$(steps "$t" "$step")
		runs0[$t]=$(runs "$t")
	done
	t0=$SECONDS
	for t in 1 2 3; do
		k patch computetray "$(name "$t")" --type merge \
			-p "{\"spec\":{\"driver\":{\"version\":\"$version\"}}}" >/dev/null
	done
	caught=0
	for t in 1 2; do
		if [[ $step == installer ]]; then
			began() { (($(runs "$1") > ${runs0[$1]})); }
		else
			began() { (($(steps "$1" "$step") > ${before[$1]})); }
		fi
		wait_for 60 began "$t" || continue
		kill -KILL "${apid[$t]}" 2>/dev/null
		wait "${apid[$t]}" 2>/dev/null
		caught=$((caught + 1))
		sleep 0.5
		start_agent "$t"
	done
	check "driver -> $version: agents 1 and 2 killed during $step" $((caught == 2 ? 0 : 1)) \
		"caught $caught; $(tail -3 "$(tray 1)/steps.log" 2>/dev/null)"
	wait_for 90 settled "$version" 1 2 3
	check "driver -> $version ($step): every tray settles on the new driver ($((SECONDS - t0))s)" $? \
		"$(for t in 1 2 3; do st "$t" '.driver.version'; st "$t" '.conditions[]? | select(.type == "DriverReady") | .message'; done)"
	ref=$(final 3)
	for t in 1 2; do
		got=$(final "$t")
		[[ $got == "$ref" ]]
		check "driver -> $version ($step): tray $t ends as the undisturbed tray 3" $? \
			"$(diff <(echo "$ref") <(echo "$got") | head -6)"
	done
	n=""
	for t in 1 2 3; do n+="$(($(runs "$t") - ${runs0[$t]})) "; done
	[[ $n == "1 1 1 " ]]
	check "driver -> $version ($step): the installer ran exactly once per tray" $? "runs per tray: $n"
done

# ----------------------------------------- driver change, SIGTERM mid-install ---
# A stopping agent does not wait out the installer (up to its 30-minute
# deadline): it exits within seconds and the installer goes on, holding the
# driver lock. The marker is then removed, as if its pid could not be
# trusted (reused, or from another PID namespace): the next agent must find
# the installer by the lock alone, wait for it, and finish the change with
# no second run.
if [[ $version == 580.95.05 ]]; then version=580.159.03; else version=580.95.05; fi
rm -rf "$(tray 1)/delays"
simctl installer-delay "$(tray 1)" 20000 >/dev/null
runs0=$(runs 1)
k patch computetray "$(name 1)" --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$version\"}}}" >/dev/null
began1() { (($(runs 1) > runs0)); }
gone1() { ! kill -0 "${apid[1]}" 2>/dev/null; }
marker=$(tray 1)/host/run/nvl72-agent/driver-install.pid
lock=$(tray 1)/host/run/nvl72-agent/driver-install.lock
ipid="" took=""
if wait_for 60 began1; then
	ipid=$(cut -d' ' -f1 "$marker" 2>/dev/null)
	[[ $ipid =~ ^[0-9]+$ ]] && strays+=("$ipid")
	kill -TERM "${apid[1]}" 2>/dev/null
	t0=$(date +%s%N)
	wait_for 20 gone1 && took=$((($(date +%s%N) - t0) / 1000000))
fi
[[ -n $took && $ipid =~ ^[0-9]+$ ]] && kill -0 "$ipid" 2>/dev/null
check "SIGTERM during the installer: the agent exits (in ${took:-over 20000} ms) and leaves it running" $? \
	"agent alive: $(gone1 && echo no || echo yes); marker: $(cat "$marker" 2>/dev/null); $(tail -2 "$work/agent-1.log" | cut -c1-300)"
wait "${apid[1]}" 2>/dev/null
flock -n -E 75 "$lock" true
check "SIGTERM during the installer: the installer alone holds the driver lock" $(($? == 75 ? 0 : 1)) \
	"flock on $lock was free; installer pid ${ipid:-none}"
rm -f "$marker"
simctl installer-delay "$(tray 1)" 0 >/dev/null
start_agent 1
waits_on_lock() {
	[[ $(st 1 '.conditions[]? | select(.type == "DriverReady") | .message') == *"driver lock is held"* ]]
}
wait_for 60 waits_on_lock
check "SIGTERM during the installer: the next agent, without the marker, waits on the lock" $? \
	"$(st 1 '.conditions[]? | select(.type == "DriverReady") | "\(.reason): \(.message)"'); installer alive: $(kill -0 "$ipid" 2>/dev/null && echo yes || echo no)"
t0=$SECONDS
wait_for 90 settled "$version" 1
check "SIGTERM during the installer: the next agent finishes the change ($((SECONDS - t0))s)" $? \
	"$(st 1 .driver) $(st 1 '.conditions[]? | select(.type == "DriverReady") | .message')"
n=$(($(runs 1) - runs0))
[[ $n == 1 && ! -f $marker ]]
check "SIGTERM during the installer: it ran exactly once and no marker is left" $? \
	"runs: $n; marker: $(cat "$marker" 2>/dev/null)"

# ----------------------------------------------------- IMEX change, killed ---
for t in 1 2 3; do
	rm -rf "$(tray "$t")/delays"
	simctl installer-delay "$(tray "$t")" 0 >/dev/null
done
imex_patch() { # imex_patch TRAY PEER_TRAYS...
	local t=$1 p peers=""
	shift
	for p in "$@"; do peers+="\"$(ip "$p")\","; done
	k patch computetray "$(name "$t")" --type merge -p \
		"{\"spec\":{\"imex\":{\"domain\":\"c1-cd\",\"peers\":[${peers%,}],\"port\":$port,\"commandPort\":$((port + 1))}}}" \
		>/dev/null
}
imex_up() { # imex_up PEERS TRAY...: daemon Ready, domain Up, PEERS connected
	local n=$1 t
	shift
	for t in "$@"; do
		[[ $(st "$t" '"\(.imex.daemonState) \(.imex.domainState) \(.imex.peersConnected)"') == "\"Ready Up $n\"" ]] ||
			return 1
	done
}
daemons() { simctl pids "$(tray "$1")" nvidia-imex | wc -l; }
imex_patch 1 1 2
imex_patch 2 1 2
t0=$SECONDS
wait_for 60 imex_up 2 1 2
check "IMEX on trays 1 and 2 with 2 peers: domain Up ($((SECONDS - t0))s)" $? "$(st 1 .imex) $(st 2 .imex)"

# Tray 1 is killed while its old daemon shuts down, tray 2 while its new one
# starts; tray 3 joins with a fresh daemon.
simctl step-delay "$(tray 1)" imex-stop "$DELAY_MS" >/dev/null
simctl step-delay "$(tray 2)" imex-start "$DELAY_MS" >/dev/null
declare -A starts0=()
for t in 1 2 3; do starts0[$t]=$(steps "$t" imex-start); done
stops1=$(steps 1 imex-stop)
t0=$SECONDS
for t in 1 2 3; do imex_patch "$t" 1 2 3; done
stopping1() { (($(steps 1 imex-stop) > stops1)); }
starting2() { (($(steps 2 imex-start) > ${starts0[2]})); }
caught=0
for t in 1 2; do
	if [[ $t == 1 ]]; then wait_for 30 stopping1; else wait_for 30 starting2; fi || continue
	kill -KILL "${apid[$t]}" 2>/dev/null
	wait "${apid[$t]}" 2>/dev/null
	caught=$((caught + 1))
	start_agent "$t"
done
check "IMEX -> 3 peers: agent 1 killed while the old daemon stops, agent 2 while the new one starts" \
	$((caught == 2 ? 0 : 1)) "caught $caught"
wait_for 90 imex_up 3 1 2 3
check "IMEX -> 3 peers: domain Up with 3 peers on every tray ($((SECONDS - t0))s)" $? \
	"$(for t in 1 2 3; do st "$t" '.imex | "\(.daemonState)/\(.domainState)/\(.peersConnected)"'; done)"
sleep 3
for t in 1 2; do
	n=$(($(steps "$t" imex-start) - ${starts0[$t]}))
	d=$(daemons "$t")
	nodes=$(grep -c . "$(tray "$t")/host/etc/nvidia-imex/nodes_config.cfg" 2>/dev/null)
	[[ $n == 1 && $d == 1 && $nodes == 3 ]]
	check "IMEX -> 3 peers: tray $t restarted its daemon once, one daemon runs, on the 3 new peers" $? \
		"starts $n, daemons $d, peers in nodes_config $nodes"
done
same_hash() { # every tray has reported a hash, and it is one hash
	hashes=$(for t in 1 2 3; do st "$t" .imex.configHash; done)
	[[ $hashes != *null* && $(sort -u <<<"$hashes" | wc -l) == 1 ]]
}
wait_for 30 same_hash
check "IMEX -> 3 peers: the three trays report the same configHash" $? \
	"$(for t in 1 2 3; do st "$t" .imex.configHash; done)"
for t in 1 2 3; do alive=$(kill -0 "${apid[$t]}" 2>/dev/null && echo y); [[ $alive == y ]] || break; done
[[ ${alive:-} == y ]]
check "every agent still runs" $? ""
finish
