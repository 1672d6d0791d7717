#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What one idle nvl72-agent costs: a fresh test control plane, one simulated
# tray with a healthy host and an IMEX-less spec, the agent with its default
# periods (resync 10 s, heartbeat 5 s). After the first status is written it
# samples the agent for SECONDS (default 20) and prints RSS, CPU (its own,
# and with the host tools it ran), status writes and Lease renewals. Prints,
# asserts nothing.
#
# usage: bench/bench_agent_idle.sh [SECONDS]       (BUILD=build by default)
#        bench/run.sh bench/bench_agent_idle.sh    (kept with the other results)
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
build=${BUILD:-build}
bin=$build/rel/bin/nvl72-agent
sim=$build/sim
make -s BUILD="$build" "$bin" sim >/dev/null || { echo "bench_agent_idle: build failed"; exit 1; }

work=$(mktemp -d /tmp/nvl72-bench-agent.XXXXXX)
apid=""
cleanup() {
	[[ -n $apid ]] && kill -TERM "$apid" 2>/dev/null && sleep 0.5 && kill -KILL "$apid" 2>/dev/null
	tests/cluster/cluster.sh stop "$work/cluster" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

env_lines=$(tests/cluster/cluster.sh start "$work/cluster" 2>/dev/null) || {
	echo "bench_agent_idle: control plane did not start"; exit 1; }
eval "$env_lines"
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }
k apply -f crds/nvl72.io_computetrays.yaml >/dev/null &&
	k wait --for=condition=Established --timeout=60s crd/computetrays.nvl72.io >/dev/null || exit 1
ipb=$((100 + $$ % 50))
ip=127.0.0.$((ipb + 1))
port=$((45000 + $$ % 1000))
"$sim/bin/simctl" create "$work/rack" --trays 1 --ip-base "$ipb" >/dev/null || exit 1
printf 'apiVersion: v1\nkind: Node\nmetadata: {name: bench-node}\n---\napiVersion: nvl72.io/v1alpha1\nkind: ComputeTray\nmetadata: {name: b1-t01}\nspec: {rack: b1, index: 1, node: bench-node}\n' |
	k apply -f - >/dev/null || exit 1

t=$work/rack/tray-01
NVL72_SIM_ROOT=$t "$bin" --kubeconfig "$KUBECONFIG" --node-name bench-node --node-ip "$ip" \
	--lease-namespace default --host-root "$t/host" --nvml-path "$sim/lib/libnvidia-ml.so.1" \
	--systemctl "$sim/bin/systemctl" --modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
	--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
	--metrics-bind-address "$ip:$port" >"$work/agent.log" 2>&1 &
apid=$!

metric() { curl -s --max-time 5 "http://$ip:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
for _ in $(seq 100); do
	[[ $(metric nvl72_agent_status_writes_total) == 1 ]] && break
	sleep 0.2
done
sleep 1
ticks() { awk '{print $14 + $15, $16 + $17}' "/proc/$apid/stat"; }
hz=$(getconf CLK_TCK)
read -r own0 kids0 < <(ticks)
w0=$(metric nvl72_agent_status_writes_total)
l0=$(metric 'nvl72_agent_lease_renewals_total{result="success"}')
p0=$(metric 'nvl72_agent_reconcile_total{result="success"}')
sleep "$secs"
read -r own1 kids1 < <(ticks)
w1=$(metric nvl72_agent_status_writes_total)
l1=$(metric 'nvl72_agent_lease_renewals_total{result="success"}')
p1=$(metric 'nvl72_agent_reconcile_total{result="success"}')
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$apid/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$apid/status")
threads=$(awk '/^Threads/ {print $2}' "/proc/$apid/status")
awk -v s="$secs" -v hz="$hz" -v o=$((own1 - own0)) -v c=$((kids1 - kids0)) -v rss="$rss" \
	-v hwm="$hwm" -v th="$threads" -v w=$((w1 - w0)) -v l=$((l1 - l0)) -v p=$((p1 - p0)) 'BEGIN {
	printf "agent idle, %d s window, one tray, resync 10s, heartbeat 5s\n", s
	printf "  rss                 %6.1f MiB (peak %.1f MiB), %d threads\n", rss / 1024, hwm / 1024, th
	printf "  cpu, agent          %6.2f %% of one core (%.2f s)\n", 100 * o / hz / s, o / hz
	printf "  cpu, with tools     %6.2f %% of one core (systemctl, modinfo run per pass)\n", 100 * (o + c) / hz / s
	printf "  passes              %6d\n", p
	printf "  status writes       %6d\n", w
	printf "  lease renewals      %6d\n", l
}'
