#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator at 1, 16 and 64 racks of 18 trays. For each size: a fresh test
# control plane, the CRDs and the GB300 sample matrix, N×18 Ready Nodes, the
# operator, and bench_loadgen standing in for every tray's agent (status as
# agent_status_build writes it, Lease heartbeats). Measures the time from
# `kubectl apply` of the racks to every Rack reporting all 18 trays ready,
# the operator's peak RSS and CPU seconds, API requests per rack during
# convergence and per minute at steady state (apiserver_request_total
# deltas, the load generator's own requests and the idle background taken
# out), and the floor: the writes the work needs times the median write
# latency the apiserver measured in the same run. For the sizes in
# SCALE_UPGRADE it then upgrades every rack at once (a security RackUpgrade to
# gb300-r580-159: 3 s notice, no window, a 2-tray canary, the load generator
# installing drivers and answering validation runs as the agents do) and
# measures the same figures from the create to every upgrade Completed,
# with the CPU seconds of the apiserver, etcd, the load generator and the
# operator over that time, and the operator's shared parsed-tree reads.
# After each size's steady window it starts the controller-runtime peer
# (bench/crpeer: informers on the same kinds, as unstructured objects) twice
# against the same apiserver, whole objects and managedFields stripped, and
# reads their RSS after SCALE_PEER_REST seconds at rest, with the compact
# JSON size of what they cache.
# Prints the tables and keeps them in bench/results/scale-<date>.txt and
# scale-latest.txt. Asserts nothing.
#
# usage: bench/bench_scale.sh [RACKS...]        (default: 1 16 64 277)
#   SCALE_STEADY_SECONDS   steady-state window (default 60)
#   SCALE_HEARTBEAT        seconds between the load generator's Lease renewals (default 20)
#   SCALE_UPGRADE          sizes that also run the upgrade (default "1 16")
#   SCALE_INSTALL_MS       simulated driver install per tray (default 2000)
#   SCALE_NODE_SHAPE       realistic (a GPU tray's Node as kubelet, NFD and GFD
#                          leave it; the default) or minimal (name, one label, Ready)
#   SCALE_OPERATOR         the operator binary to measure (default: this tree's)
#   SCALE_OPERATOR_ARGS    more operator flags, split on spaces (default none)
#   SCALE_READY_SECONDS    longest wait for convergence (default 900)
#   SCALE_PEER             0: no controller-runtime peer (default 1; needs Go)
#   SCALE_PEER_REST        seconds the peers rest after their sync (default 60)
#   SCALE_PROFILE          seconds of kube-apiserver CPU profile to take from the
#                          upgrade row's create (default 0: none); the top of it is
#                          printed and the profile kept beside the results (needs Go)
#   BUILD                  build folder (default build)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$PATH:/usr/local/go/bin"
sizes=("$@")
((${#sizes[@]})) || sizes=(1 16 64 277)
steady=${SCALE_STEADY_SECONDS:-60}
hb=${SCALE_HEARTBEAT:-20}
upgrade_sizes=" ${SCALE_UPGRADE-1 16} "
install_ms=${SCALE_INSTALL_MS:-2000}
ready_s=${SCALE_READY_SECONDS:-900}
peer_rest=${SCALE_PEER_REST:-60}
profile_s=${SCALE_PROFILE:-0}
# The test control plane runs without profiling; the last flag wins.
((profile_s > 0)) && export NVL72_APISERVER_ARGS="${NVL72_APISERVER_ARGS:-} --profiling=true"
node_shape=${SCALE_NODE_SHAPE:-realistic}
obj_sizes= upg_sizes=
build=${BUILD:-build}
op_bin=${SCALE_OPERATOR:-$root/$build/rel/bin/nvl72-operator}
read -r -a op_args <<<"${SCALE_OPERATOR_ARGS:-}"
lg_bin=$root/$build/rel/bench/bench_loadgen
ns=nvl72-system
make -s BUILD="$build" "$root/$build/rel/bin/nvl72-operator" "$lg_bin" >/dev/null || { echo "bench_scale: build failed"; exit 1; }

work=$(mktemp -d /tmp/nvl72-bench-scale.XXXXXX)
# What is measured: the tree as the run starts (scale-latest.txt, written at
# the end, would count as a change).
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
opid="" lpid="" cdir="" peer_pids=()
stop_run() {
	local p
	for p in "${peer_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	peer_pids=()
	[[ -n $opid ]] && kill -TERM "$opid" 2>/dev/null
	[[ -n $lpid ]] && kill -TERM "$lpid" 2>/dev/null
	for _ in $(seq 50); do
		{ [[ -n $opid ]] && kill -0 "$opid" 2>/dev/null; } ||
			{ [[ -n $lpid ]] && kill -0 "$lpid" 2>/dev/null; } || break
		sleep 0.2
	done
	[[ -n $opid ]] && kill -KILL "$opid" 2>/dev/null
	[[ -n $lpid ]] && kill -KILL "$lpid" 2>/dev/null
	wait 2>/dev/null
	opid="" lpid=""
	[[ -n $cdir ]] && tests/cluster/cluster.sh stop "$cdir" >/dev/null 2>&1
	cdir=""
}
cleanup() {
	stop_run
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export NVL72_CLUSTER_OWNER=$$

peer_bin=""
if [[ ${SCALE_PEER:-1} != 0 ]]; then
	peer_bin=$(bench/crpeer/build.sh 2>"$work/peer-build.err" | tail -1) && [[ -x $peer_bin ]] || {
		echo "bench_scale: no controller-runtime peer: $(tail -1 "$work/peer-build.err")"
		peer_bin=""
	}
fi

# Counters of the apiserver, one line: resource requests, those that are not
# Lease writes, then the write latency histogram (POST, PUT, PATCH, APPLY on
# resources) as le=count pairs.
scrape() {
	local port
	port=$(cat "$cdir/apiserver-port")
	curl -fsS --max-time 20 --cacert "$cdir/pki/ca.crt" --cert "$cdir/pki/admin.crt" \
		--key "$cdir/pki/admin.key" "https://127.0.0.1:$port/metrics" | awk '
	/^apiserver_request_total\{/ && !/[{,]resource=""/ { req += $2
		if (!/[{,]resource="leases"/ || !/verb="(POST|PUT|PATCH|APPLY)"/) nl += $2 }
	/^apiserver_request_duration_seconds_bucket\{/ && /verb="(POST|PUT|PATCH|APPLY)"/ && !/[{,]resource=""/ {
		match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); b[le] += $2 }
	END { printf "%d %d", req, nl; for (le in b) printf " %s=%d", le, b[le]; printf "\n" }'
}
# apiserver_request_total by verb, resource and subresource: "verb resource[/sub] n".
req_by() {
	local port
	port=$(cat "$cdir/apiserver-port")
	curl -fsS --max-time 20 --cacert "$cdir/pki/ca.crt" --cert "$cdir/pki/admin.crt" \
		--key "$cdir/pki/admin.key" "https://127.0.0.1:$port/metrics" | awk '
	/^apiserver_request_total\{/ && !/[{,]resource=""/ {
		v = r = s = ""
		if (match($0, /verb="[^"]*"/)) v = substr($0, RSTART + 6, RLENGTH - 7)
		if (match($0, /[{,]resource="[^"]*"/)) r = substr($0, RSTART + 11, RLENGTH - 12)
		if (match($0, /subresource="[^"]*"/)) s = substr($0, RSTART + 13, RLENGTH - 14)
		n[v " " r (s == "" ? "" : "/" s)] += $2 }
	END { for (k in n) print k, n[k] }'
}
# The second field of a scrape: requests other than Lease writes.
nonlease() { local f=($1); echo "${f[1]}"; }
lg_stat() { awk -v k="$1" '$1 == k {print $2}' "$work/lg.stats" 2>/dev/null || echo 0; }
cpu_s() { pid_cpu "$opid"; }
# pid_cpu PID: its user+system seconds so far (0 once it is gone).
pid_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' \
		"/proc/$1/stat" 2>/dev/null || echo 0
}
# The operator's shared parsed trays and Nodes: per kind, reads served kept,
# reads parsed, and the bytes kept (nvl72_parsed_cache_*).
parsed_stat() {
	curl -fs --max-time 20 "http://127.0.0.1:$mport/metrics" | awk '
	/^nvl72_parsed_cache_reads_total\{/ { k = $0; sub(/.*kind="/, "", k); sub(/".*/, "", k)
		r = $0; sub(/.*result="/, "", r); sub(/".*/, "", r); v[k " " r] = $2 }
	/^nvl72_parsed_cache_bytes\{/ { k = $0; sub(/.*kind="/, "", k); sub(/".*/, "", k); v[k " bytes"] = $2 }
	END { printf "%d %d %d %d %d %d\n", v["ComputeTray kept"], v["ComputeTray parsed"],
		v["ComputeTray bytes"], v["Node kept"], v["Node parsed"], v["Node bytes"] }'
}
# The control plane's and the load generator's CPU seconds, with the operator's.
cpu_all() {
	echo "$(pid_cpu "$(sed -n 2p "$cdir/pids")") $(pid_cpu "$(sed -n 1p "$cdir/pids")")" \
		"$(pid_cpu "$lpid") $(cpu_s)"
}
# Median of the write latency between two scrapes, in ms (linear inside the bucket).
median_ms() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); for (i = 3; i <= n; i++) { split(x[i], kv, "="); c0[kv[1]] = kv[2] }
		n = split(b, y, " "); for (i = 3; i <= n; i++) { split(y[i], kv, "="); d[kv[1]] = kv[2] - c0[kv[1]] }
		m = 0; for (le in d) if (le != "+Inf") les[++m] = le + 0
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (les[j] < les[i]) { t = les[i]; les[i] = les[j]; les[j] = t }
		total = d["+Inf"]; if (total <= 0) { print "0"; exit }
		prev = 0; prevle = 0
		for (i = 1; i <= m; i++) {
			for (le in d) if (le != "+Inf" && le + 0 == les[i]) cnt = d[le]
			if (cnt >= total / 2) { f = cnt > prev ? (total / 2 - prev) / (cnt - prev) : 0
				printf "%.2f", 1000 * (prevle + f * (les[i] - prevle)); exit }
			prev = cnt; prevle = les[i]
		}
		print "inf" }'
}

# The sample Rack, renamed; for the upgrade row its notices are 3 s and it
# has no maintenance windows (always open).
racks_yaml() {
	local n=$1 r name
	for r in $(seq 1 "$n"); do
		name=$(printf 'bench-r%02d' "$r")
		sed -e "s/gb300-r07/$name/g" -e "s/\"1821124000042\"/\"18211240$(printf '%05d' "$r")\"/" \
			-e 's/noticePeriod: .*/noticePeriod: 3s/' -e '/^  maintenance:/,/^  policy:/{/^  policy:/!d}' \
			deploy/samples/rack-gb300.yaml
		echo "---"
	done
}
# Per rack: a 2-tray canary partition, and the RackUpgrade.
canaries_yaml() {
	local r name
	for r in $(seq 1 "$1"); do
		name=$(printf 'bench-r%02d' "$r")
		printf 'apiVersion: nvl72.io/v1alpha1\nkind: RackPartition\nmetadata: {name: %s-canary}\n' "$name"
		printf 'spec: {rack: %s, trays: [1, 2], tenant: bench, canaryEligible: true}\n---\n' "$name"
	done
}
upgrades_yaml() {
	local r name
	for r in $(seq 1 "$1"); do
		name=$(printf 'bench-r%02d' "$r")
		printf 'apiVersion: nvl72.io/v1alpha1\nkind: RackUpgrade\nmetadata: {name: %s-up}\n' "$name"
		printf 'spec:\n  rack: %s\n  target: {matrix: gb300-2026.10, stack: gb300-r580-159}\n' "$name"
		printf '  class: security\n  reason: benchmark\n  cves: [CVE-2026-24187]\n'
		printf '  canary: {partition: %s-canary, soak: 3s}\n---\n' "$name"
	done
}

# Writes one upgrade needs, from its final status: the create; status
# writes for the notice and the start, 3 per wave (its Drain's start, the
# Drain's end with the Apply's start, the trays' report with the Uncordon's
# start; the Uncordon's end goes with what follows) and one per Validate
# or Soak step (the gate's result, the soak's end); per tray
# the three spec patches (Draining, Upgrading with the driver, None), the
# Node's cordon with its Draining label, its Upgrading label at Apply, and
# its uncordon with the label's removal, and one agent status with the new
# driver; per canary tray the validation request and its
# result; the Rack's status.upgrade at each of its 6 phases.
upgrade_writes() {
	k get rackupgrades -o json | jq '[.items[] | 1 + 2 + 3 * (.status.waves | length) +
		([.status.steps[] | select(.action == "Validate" or .action == "Soak")] | length) +
		18 * 7 + 2 * (.status.canary.trays | length) + 6] | add'
}

# obj_size KIND/NAME: compact JSON as served, with managedFields (without).
obj_size() {
	echo "$(k get "$1" -o json --show-managed-fields | jq -c . | wc -c)" \
		"($(k get "$1" -o json | jq -c 'del(.metadata.managedFields)' | wc -c))"
}

# The apiserver's CPU profile of the upgrade row, kept beside the results with
# its flat top 25 printed (stderr) and saved as text.
profile_top() {
	local n=$1 pid=$2 out
	wait "$pid" || { echo "bench_scale: apiserver profile failed: $(head -c 300 "$work/pprof.err")" >&2; return; }
	mkdir -p bench/results
	out=bench/results/apiserver-profile-$(date -u +%Y%m%dT%H%M%SZ)-$n
	cp "$work/apiserver-$n.pprof" "$out.pprof"
	go tool pprof -top -nodecount=25 "$out.pprof" 2>/dev/null >"$out.txt"
	go tool pprof -top -cum -nodecount=60 "$out.pprof" 2>/dev/null >>"$out.txt"
	echo "bench_scale: apiserver profile of $n racks' upgrade: $out.txt" >&2
}

# The upgrade row: every rack upgraded at once, in the cluster of one_size.
uprows=() uprows_by=() upcpu=() upparsed=()
one_upgrade() {
	local n=$1 line t0 tu b0 b1 l0 l1 c0 c1 hwm writes med done
	canaries_yaml "$n" | k apply -f - >/dev/null || { echo "bench_scale: canaries not applied"; return 1; }
	upgrades_yaml "$n" >"$work/upgrades.yaml"
	sleep 5
	echo 5 >"/proc/$opid/clear_refs" 2>/dev/null # VmHWM from here
	b0=$(scrape); l0=$(lg_stat requests); c0=$(cpu_s)
	local all0 all1 p0 p1
	all0=$(cpu_all) p0=$(parsed_stat)
	req_by >"$work/req0.txt"
	t0=$(date +%s%3N)
	local ppid=""
	if ((profile_s > 0)); then
		timeout $((profile_s + 60)) "$KUBECTL" get --raw "/debug/pprof/profile?seconds=$profile_s" \
			>"$work/apiserver-$n.pprof" 2>"$work/pprof.err" &
		ppid=$!
	fi
	k create -f "$work/upgrades.yaml" >/dev/null || { echo "bench_scale: upgrades not created"; return 1; }
	tu=0
	for _ in $(seq 3000); do
		line=$(grep -m1 '^all-upgraded ' "$work/lg.out" 2>/dev/null) && { tu=${line#all-upgraded }; break; }
		kill -0 "$opid" 2>/dev/null || break
		sleep 0.2
	done
	b1=$(scrape); l1=$(lg_stat requests); c1=$(cpu_s)
	all1=$(cpu_all) p1=$(parsed_stat)
	req_by >"$work/req1.txt"
	[[ -n $ppid ]] && profile_top "$n" "$ppid"
	hwm=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$opid/status")
	if ((tu == 0)); then
		echo "bench_scale: $n upgrades did not all complete within 600 s"
		k get rackupgrades -o json | jq -r '.items[] | "\(.metadata.name) \(.status.phase) \(.status.message)"' | head -5
		return 1
	fi
	done=$(k get computetrays -o json | jq '[.items[] | select(.status.driver.version == "580.159.03")] | length')
	writes=$(upgrade_writes)
	med=$(median_ms "$b0" "$b1")
	if [[ -z $upg_sizes ]]; then
		local u r1
		u=$(k get rackupgrades -o name | head -1)
		r1=$(k get racks -o name | head -1)
		upg_sizes="one RackUpgrade $(obj_size "$u") B, one Rack $(obj_size "$r1") B,"
		upg_sizes+=" one Node $(obj_size node/bench-r01-t01) B, one ComputeTray $(obj_size computetray/bench-r01-t01) B"
	fi
	uprows+=("$(awk -v n="$n" -v ms=$((tu - t0)) -v hwm="$hwm" -v c0="$c0" -v c1="$c1" \
		-v b0="${b0%% *}" -v b1="${b1%% *}" -v l0="$l0" -v l1="$l1" -v bg="$bg_rate" \
		-v w="$writes" -v med="$med" -v done="$done" 'BEGIN {
		t = ms / 1000; all = b1 - b0; op = all - (l1 - l0) - bg * t - 1
		if (op < 0) op = 0
		printf "%5d %6d %6d %11.1f %8.1f %7.2f %9.1f %9.1f %6d %7s %8.2f\n",
			n, n * 18, done, t, hwm, c1 - c0, all / n, op / n, w, med, w * med / 1000 }')")
	upcpu+=("$(awk -v n="$n" -v ms=$((tu - t0)) -v a="$all0" -v b="$all1" -v cores="$(nproc)" 'BEGIN {
		split(a, x, " "); split(b, y, " "); sum = 0
		for (i = 1; i <= 4; i++) { d[i] = y[i] - x[i]; sum += d[i] }
		printf "%5d %11.1f %9.1f %7.1f %9.1f %8.1f %7.1f %6.0f%%\n", n, ms / 1000, d[1], d[2], d[3], d[4],
			sum, 100 * sum / (ms / 1000 * cores) }')")
	upparsed+=("$(awk -v n="$n" -v a="$p0" -v b="$p1" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%5d %9d %9d %9.1f %9d %9d %9.1f\n", n, y[1] - x[1], y[2] - x[2], y[3] / 1048576,
			y[4] - x[4], y[5] - x[5], y[6] / 1048576 }')")
	echo "bench_scale: $n upgrades done (${uprows[-1]})" >&2
	uprows_by+=("$(awk -v n="$n" 'NR == FNR { b[$1 " " $2] = $3; next }
		{ d = $3 - b[$1 " " $2]; if (d >= n) printf "%5d  %-8s %-34s %8d %8.1f\n", n, $1, $2, d, d / n }' \
		"$work/req0.txt" "$work/req1.txt" | sort -k1,1n -k4,4nr)")
}

# The controller-runtime peer, whole objects and managedFields stripped, at
# once against the cluster of one_size: RSS after SCALE_PEER_REST seconds
# at rest, then the objects and compact JSON bytes each one caches.
prows=()
peers() {
	local n=$1 rss2=$2 pf ps rf=0 rs=0 hf=0 hs=0 sf ss v
	"$peer_bin" --kubeconfig "$KUBECONFIG" --lease-namespace "$ns" \
		>"$work/peer-full.out" 2>"$work/peer-full.err" &
	pf=$!
	"$peer_bin" --kubeconfig "$KUBECONFIG" --lease-namespace "$ns" --strip-managed-fields \
		>"$work/peer-strip.out" 2>"$work/peer-strip.err" &
	ps=$!
	peer_pids=("$pf" "$ps")
	for _ in $(seq 3000); do
		grep -q '^synced ' "$work/peer-full.out" && grep -q '^synced ' "$work/peer-strip.out" && break
		kill -0 "$pf" 2>/dev/null && kill -0 "$ps" 2>/dev/null || break
		sleep 0.2
	done
	sf=$(awk '$1 == "synced" {print $2}' "$work/peer-full.out")
	ss=$(awk '$1 == "synced" {print $2}' "$work/peer-strip.out")
	if [[ -n $sf && -n $ss ]]; then
		sleep "$peer_rest"
		rf=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pf/status")
		rs=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$ps/status")
		hf=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pf/status")
		hs=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$ps/status")
	fi
	kill -TERM "$pf" "$ps" 2>/dev/null
	for v in "$pf" "$ps"; do
		for _ in $(seq 150); do kill -0 "$v" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$v" 2>/dev/null
	done
	wait "$pf" "$ps" 2>/dev/null
	peer_pids=()
	if [[ -z $sf || -z $ss ]]; then
		echo "bench_scale: the controller-runtime peers did not sync at $n racks"
		tail -2 "$work/peer-full.err" "$work/peer-strip.err" | cut -c1-300
		prows+=("$(printf '%5d  (failed; see above)' "$n")")
		return 1
	fi
	prows+=("$(awk -v n="$n" -v rss2="$rss2" -v rf="$rf" -v rs="$rs" -v hf="$hf" -v hs="$hs" \
		-v sf="$sf" -v ss="$ss" -v cf="$(awk '$1 == "cached" {print $2, $3}' "$work/peer-full.out")" \
		-v cs="$(awk '$1 == "cached" {print $3}' "$work/peer-strip.out")" 'BEGIN {
		split(cf, f, " ")
		printf "%5d %8d %9.1f %9.1f %8.1f %12.1f %7.1f %13.1f %7.1f %8.3f %8.2f %8.1f %8.1f\n",
			n, f[1], f[2] / 1e6, cs / 1e6, rss2, rf, hf, rs, hs, (rs > 0 ? rss2 / rs : 0),
			(cs > 0 ? rss2 * 1048576 / cs : 0), sf / 1000, ss / 1000 }')")
	echo "bench_scale: $n racks, peers done (${prows[-1]})" >&2
}

rows=()
one_size() {
	local n=$1 env_lines port mport line t0 tr a0 a1 a2 a3 a4 l0 l1 l2 c2 c3 c4 hwm rss
	local scrape_b scrape_ms rss2 s0
	cdir=$work/cluster-$n
	env_lines=$(tests/cluster/cluster.sh start "$cdir" 2>"$work/cluster.err") || {
		echo "bench_scale: control plane did not start"; cat "$work/cluster.err"; return 1; }
	eval "$env_lines"
	k() { timeout 120 "$KUBECTL" --request-timeout=60s "$@"; }
	k apply -f crds/ >/dev/null && k wait --for=condition=Established --timeout=60s -f crds/ >/dev/null &&
		k create namespace "$ns" >/dev/null &&
		k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null || {
		echo "bench_scale: CRDs or matrix not applied"; return 1; }
	"$lg_bin" nodes --kubeconfig "$KUBECONFIG" --racks "$n" --prefix bench \
		--node-shape "$node_shape" >"$work/nodes.out" 2>&1 || {
		echo "bench_scale: nodes not created"; cat "$work/nodes.out"; return 1; }
	racks_yaml "$n" >"$work/racks.yaml"

	rm -f "$work/lg.stats"
	"$lg_bin" agents --kubeconfig "$KUBECONFIG" --racks "$n" --lease-namespace "$ns" \
		--heartbeat "$hb" --install-ms "$install_ms" --stats "$work/lg.stats" --duration 1800 >"$work/lg.out" 2>"$work/lg.err" &
	lpid=$!
	# The load generator's first lists and watches are its own: let them
	# pass (and its counters reach the stats file) before the background.
	sleep 3
	a0=$(scrape); l0=$(lg_stat requests)
	sleep 10
	a1=$(scrape); l1=$(lg_stat requests)
	bg_rate=$(awk -v a0="${a0%% *}" -v a1="${a1%% *}" -v l0="$l0" -v l1="$l1" \
		'BEGIN { printf "%.3f", (a1 - a0 - (l1 - l0)) / 10 }')
	bg_nl=$(awk -v a0="$(nonlease "$a0")" -v a1="$(nonlease "$a1")" -v l0="$l0" -v l1="$l1" \
		'BEGIN { printf "%.3f", (a1 - a0 - (l1 - l0)) / 10 }')

	port=$((20000 + RANDOM % 10000)) mport=$((30000 + RANDOM % 10000))
	"$op_bin" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$ns" \
		--agent-lease-namespace "$ns" --metrics-bind-address "127.0.0.1:$mport" --dashboard-bind-address 0 \
		--webhook-bind-address 0 --health-probe-bind-address "127.0.0.1:$port" "${op_args[@]}" \
		>"$work/operator-$n.log" 2>&1 &
	opid=$!
	for _ in $(seq 600); do
		curl -fs --max-time 2 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		kill -0 "$opid" 2>/dev/null || break
		sleep 0.1
	done

	a1=$(scrape); l1=$(lg_stat requests)
	t0=$(date +%s%3N)
	k apply -f "$work/racks.yaml" >/dev/null || { echo "bench_scale: racks not applied"; return 1; }
	tr=0
	for _ in $(seq $((ready_s * 5))); do
		line=$(grep -m1 '^all-ready ' "$work/lg.out" 2>/dev/null) && { tr=${line#all-ready }; break; }
		kill -0 "$opid" 2>/dev/null || break
		sleep 0.2
	done
	if ((tr == 0)); then
		echo "bench_scale: $n racks did not all become Ready within $ready_s s"
		tail -5 "$work/operator-$n.log" | cut -c1-300
		return 1
	fi
	a2=$(scrape); l2=$(lg_stat requests); c2=$(cpu_s)
	sleep 10
	a3=$(scrape); c3=$(cpu_s)
	sleep "$steady"
	a4=$(scrape); c4=$(cpu_s)
	hwm=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$opid/status")
	rss=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$opid/status")
	# One /metrics scrape, as Prometheus would make, and the RSS after it.
	s0=$(date +%s%3N)
	scrape_b=$(curl -fs --max-time 60 "http://127.0.0.1:$mport/metrics" | wc -c)
	scrape_ms=$(($(date +%s%3N) - s0))
	rss2=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$opid/status")
	if ((n == ${sizes[0]})); then
		obj_sizes="one Node $(k get node bench-r01-t01 -o json --show-managed-fields | jq -c . | wc -c) B"
		obj_sizes+=" ($(k get node bench-r01-t01 -o json | jq -c 'del(.metadata.managedFields)' | wc -c) B"
		obj_sizes+=" without managedFields, $(k get node bench-r01-t01 -o json | jq '.metadata.labels | length') labels),"
		obj_sizes+=" one ComputeTray $(k get computetray bench-r01-t01 -o json --show-managed-fields | jq -c . | wc -c) B"
		obj_sizes+=" ($(k get computetray bench-r01-t01 -o json | jq -c 'del(.metadata.managedFields)' | wc -c) B"
		obj_sizes+=" without), compact JSON as the apiserver serves them"
	fi
	local writes=$((n * 73)) med
	med=$(median_ms "$a1" "$a2")
	rows+=("$(awk -v n="$n" -v ms=$((tr - t0)) -v hwm="$hwm" -v rss="$rss" -v c2="$c2" -v c4="$c4" \
		-v sb="$scrape_b" -v sms="$scrape_ms" -v rss2="$rss2" \
		-v c3="$c3" -v a1="${a1%% *}" -v a2="${a2%% *}" -v n3="$(nonlease "$a3")" \
		-v n4="$(nonlease "$a4")" -v l1="$l1" -v l2="$l2" -v bg="$bg_rate" -v bgnl="$bg_nl" \
		-v steady="$steady" -v w="$writes" -v med="$med" 'BEGIN {
		conv = ms / 1000
		all = a2 - a1; op = all - (l2 - l1) - bg * conv
		# At rest the load generator only renews Leases: count what is not
		# a Lease write, so that its many renewals cannot blur the figure.
		st = (n4 - n3 - bgnl * steady) * 60 / steady
		if (st < 0) st = 0
		if (op < 0) op = 0
		printf "%5d %6d %9.1f %8.1f %7.1f %8.2f %9.3f %9.1f %9.1f %9.1f %6d %7s %8.2f %8.1f %6d %8.1f\n",
			n, n * 18, conv, hwm, rss, c2, (c4 - c3) * 60 / steady, all / n, op / n, st,
			w, med, w * med / 1000, sb / 1024, sms, rss2 }')")
	echo "bench_scale: $n racks done (${rows[-1]})" >&2
	[[ -n $peer_bin ]] && peers "$n" "$rss2"
	if [[ $upgrade_sizes == *" $n "* ]]; then
		one_upgrade "$n" || uprows+=("$(printf '%5d  (failed; see above)' "$n")")
	fi
	stop_run
}

for n in "${sizes[@]}"; do
	one_size "$n" || { stop_run; rows+=("$(printf '%5d  (failed; see above)' "$n")"); }
done

mkdir -p bench/results
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
out=bench/results/scale-$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "operator at scale, $stamp, commit $commit," \
		"$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
		"load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "steady window ${steady} s, load generator Lease renewal every ${hb} s, operator" \
		"${SCALE_OPERATOR_ARGS:-defaults}"
	echo "Nodes shaped $node_shape (bench_loadgen --node-shape): ${obj_sizes:-sizes not measured}"
	echo "racks  trays  ready(s) hwm(MiB) rss(MiB)  cpu(s) cpu/min(s) req/rack  op/rack  op/min  writes med(ms) floor(s) scrape(KiB) (ms) rss2(MiB)"
	printf '%s\n' "${rows[@]}"
	echo "ready: kubectl apply of the racks to all Racks Ready with 18 of 18 trays; cpu: operator"
	echo "user+system seconds to that point; cpu/min: at steady state; req/rack: all API requests"
	echo "during convergence per rack; op/rack, op/min: the same less the load generator's own"
	echo "requests and the idle background (at steady state: requests other than Lease writes,"
	echo "less the background); writes: API writes the work needs (73 per rack);"
	echo "floor: writes x median write latency of the same convergence (serial lower bound);"
	echo "scrape: one GET /metrics after the steady window, its size and time; rss2: RSS after it."
	# The operator's memory per added rack, between consecutive sizes.
	printf '%s\n' "${rows[@]}" | awk 'NF >= 16 {
		if (seen) printf "%s%d->%d racks %.2f MiB", (k++ ? ", " : "rss2 per added rack: "), pn, $1, ($16 - pr) / ($1 - pn)
		seen = 1; pn = $1; pr = $16 } END { if (k) printf "\n" }'
	if ((${#prows[@]})); then
		echo
		echo "controller-runtime peer (bench/crpeer, controller-runtime v0.22.5, client-go v0.34.4), informers"
		echo "on the same kinds as unstructured objects, started after the operator's row, RSS after ${peer_rest} s at rest"
		printf '%5s %8s %9s %9s %8s %12s %7s %13s %7s %8s %8s %8s %8s\n' racks objects 'json(MB)' \
			'strip(MB)' 'op(MiB)' 'cr-full(MiB)' 'hwm' 'cr-strip(MiB)' 'hwm' op/strip op/json \
			'sync-f(s)' 'sync-s(s)'
		printf '%s\n' "${prows[@]}"
		echo "objects: cached by the peer; json: their compact JSON, whole and without managedFields;"
		echo "op: the operator's rss2 above; cr-full, cr-strip: the peer's RSS (and peak) caching whole"
		echo "objects and objects without managedFields; op/strip: op over cr-strip; op/json: op over the"
		echo "stripped objects' compact JSON; sync: from the peer's start to its caches synced."
	fi
	if ((${#uprows[@]})); then
		echo
		echo "one security RackUpgrade per rack, all at once: 3 s notice, no window, 2-tray canary"
		echo "with validation and 3 s soak, waves of 2 trays, simulated install ${install_ms} ms"
		echo "racks  trays    new upgraded(s) hwm(MiB)  cpu(s)   req/rack  op/rack writes med(ms) floor(s)"
		printf '%s\n' "${uprows[@]}"
		echo "upgraded: create of the RackUpgrades to all Completed (notice included); new: trays"
		echo "on the new driver; hwm: operator peak RSS during the upgrade; cpu: operator seconds"
		echo "during it; req/rack, op/rack: as above; writes: API writes the upgrades need (see"
		echo "docs/performance.md); floor: writes x median write latency during the upgrade."
		echo "at the end of the first row: $upg_sizes (bytes, compact JSON with managedFields"
		echo "and, in parentheses, without)."
		echo
		echo "the upgrade row's CPU seconds by process, and their sum against the wall time on $(nproc) cores"
		echo "racks upgraded(s) apiserver    etcd loadgen operator     sum   busy"
		printf '%s\n' "${upcpu[@]}"
		echo
		echo "the operator's shared parsed trays and Nodes during the upgrade row (--parsed-cache-mib):"
		echo "reads served from a kept tree, reads parsed, and MiB kept at the end"
		echo "racks tray-kept tray-pars  tray-MiB node-kept node-pars  node-MiB"
		printf '%s\n' "${upparsed[@]}"
		echo
		echo "the upgrade row's API requests by verb and resource (all clients; at least one per rack)"
		echo "racks  verb     resource                              requests per-rack"
		printf '%s\n' "${uprows_by[@]}"
	fi
} | tee "$out"
cp "$out" bench/results/scale-latest.txt
