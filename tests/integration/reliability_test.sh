#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator through control-plane trouble, with one rack whose 18 agents
# are played by bench_loadgen (status as agents write it, Lease heartbeats
# every 5 s, so trays keep changing):
#  (a) kube-apiserver restarted on the same port, etcd kept: the operator
#      keeps running, its watches resume (a ComputeTray deleted afterwards is
#      recreated), and the rack ends as it was, with no duplicate trays;
#  (b) etcd compacted to its newest revision, then the apiserver restarted:
#      watches resuming from a compacted revision get 410 and the informers
#      relist, and the rack converges again;
#  (c) the apiserver answering 429 with Retry-After, then 503, for a while
#      (tests/integration/faultproxy.py in front of it) while a tray is
#      deleted and a Node goes NotReady: the operator stays up, makes a
#      bounded number of requests, retries no request sooner than
#      Retry-After, and converges to the undisturbed state afterwards;
#  (d) a tray vanishing (its Node deleted): the rack status says so;
#  (e) a Rack applied before its CompatibilityMatrix (no webhook to refuse
#      it) and before its Nodes: the Nodes are labelled when they appear,
#      the trays are created with no driver in their spec, and get the
#      stack's driver once the matrix is applied;
#  (f) the operator's one HTTP/2 connection going silent (tcpfwd.py between
#      it and the apiserver stops relaying without closing): the transport's
#      liveness check drops it and dials anew, and a ComputeTray deleted
#      meanwhile is recreated within a bound; the time it took is printed.
#
# Run by tests/integration/run.sh against a fresh control plane.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

OPERATOR=${NVL72_BUILD:-build/rel}/bin/nvl72-operator
LOADGEN=${NVL72_BUILD:-build/rel}/bench/bench_loadgen
NS=nvl72-system
RACK=rel-r01
CDIR=$NVL72_CLUSTER_DIR

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else not_ok "$1" "$3"; fi; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }

work=$(mktemp -d /tmp/nvl72-reliability.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		echo "-- last lines of the operator log"
		tail -20 "$work/operator.log" | cut -c1-300
		if [[ -f $work/operator-fwd.log ]]; then
			echo "-- last lines of the operator behind the forwarder"
			tail -20 "$work/operator-fwd.log" | cut -c1-300
		fi
		if [[ -f $work/operator-proxied.log ]]; then
			echo "-- last lines of the operator behind the fault proxy"
			tail -20 "$work/operator-proxied.log" | cut -c1-300
		fi
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }
wait_for() {
	local until=$(($(date +%s) + $1))
	shift
	while (($(date +%s) < until)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}
. "$(dirname "$0")/lib/faultproxy.sh"
ready_msg() { k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
all_ready() { [[ $(ready_msg) == "18 of 18 trays ready"* ]]; }
# The rack's status without times and generations: what "the same end" means.
rack_state() {
	k get rack "$RACK" -o json | jq -S '.status | del(.observedGeneration) |
		(.conditions // []) |= map(del(.lastTransitionTime, .observedGeneration)) |
		walk(if type == "object" then del(.lastHeartbeatTime, .heartbeatTime, .lastUpdateTime) else . end)'
}
tray_count() { k get computetrays -l "nvl72.io/rack=$RACK" -o name | wc -l; }
# Seconds since an $EPOCHREALTIME reading, one decimal: the recovery times.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

[[ -x $OPERATOR && -x $LOADGEN ]] || { not_ok "binaries" "operator or bench_loadgen missing"; finish; }
k apply -f crds/ >/dev/null && k wait --for=condition=Established --timeout=60s -f crds/ >/dev/null &&
	k create namespace "$NS" >/dev/null &&
	k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null &&
	"$LOADGEN" nodes --kubeconfig "$KUBECONFIG" --racks 1 --prefix rel >/dev/null ||
	{ not_ok "set-up" "CRDs, matrix or Nodes not created"; finish; }

"$LOADGEN" agents --kubeconfig "$KUBECONFIG" --racks 1 --lease-namespace "$NS" --heartbeat 5 \
	--duration 900 >"$work/loadgen.out" 2>&1 &
pids+=($!)
. tests/cluster/ports.sh
probe=$(free_port)
# op_run KUBECONFIG LOG: stops the operator running (if any) and starts it
# anew on that kubeconfig, logging to $work/LOG; its pid in opid.
opid=""
op_run() {
	if [[ -n $opid ]]; then
		kill -TERM "$opid"
		wait "$opid" 2>/dev/null
	fi
	"$OPERATOR" --kubeconfig "$1" --agent-lease-namespace "$NS" --tray-heartbeat-timeout 1m \
		--metrics-bind-address 0 --dashboard-bind-address 0 --webhook-bind-address 0 \
		--health-probe-bind-address "127.0.0.1:$probe" >"$work/$2" 2>&1 &
	opid=$!
	pids+=("$opid")
}
op_run "$KUBECONFIG" operator.log
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$probe/readyz" ||
	{ not_ok "operator ready" "$(one_line "$(tail -3 "$work/operator.log")")"; finish; }
sed "s/gb300-r07/$RACK/g" deploy/samples/rack-gb300.yaml | k apply -f - >/dev/null
wait_for 90 all_ready
check "the rack becomes Ready with 18 of 18 trays" $? "$(ready_msg)"
before=$(rack_state)
labels_before=$(k get nodes -l "nvl72.io/rack=$RACK" -o name | wc -l)

# ---- (a) apiserver restart ------------------------------------------------------
t0=$EPOCHREALTIME
tests/cluster/cluster.sh restart-apiserver "$CDIR" 2>"$work/restart.err"
check "(a) the apiserver restarts on the same port with etcd kept" $? "$(one_line "$(cat "$work/restart.err")")"
kill -0 "$opid" 2>/dev/null && wait_for 30 curl -fs --max-time 2 "http://127.0.0.1:$probe/healthz"
check "(a) the operator keeps running through the restart" $? "$(one_line "$(tail -3 "$work/operator.log")")"
# Only a resumed watch lets the operator see this deletion and recreate the tray.
uid=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}')
k delete computetray "$RACK-t07" --wait=true >/dev/null
recreated() { local u; u=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}') && [[ -n $u && $u != "$uid" ]]; }
wait_for 60 recreated
rc=$?
took=$(since "$t0")
check "(a) watches resume: a deleted ComputeTray is recreated (${took}s after the restart began)" $rc "uid $uid"
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]]
check "(a) the rack ends as it was before the restart" $? \
	"$(diff <(echo "$before") <(rack_state) | head -8 | tr '\n' ' ' | cut -c1-400)"
n=$(tray_count)
l=$(k get nodes -l "nvl72.io/rack=$RACK" -o name | wc -l)
((n == 18 && l == labels_before))
check "(a) no duplicates: 18 ComputeTrays, $l labelled Nodes" $? "trays=$n nodes=$l (before $labels_before)"

# ---- (b) etcd compaction --------------------------------------------------------
ec=$(cat "$CDIR/etcd-port")
relists0=$(grep -c 'watch expired; relisting' "$work/operator.log")
rev=$(curl -fsS --max-time 10 -X POST "http://127.0.0.1:$ec/v3/kv/range" -d '{"key":"Lw=="}' |
	jq -r '.header.revision')
curl -fsS --max-time 30 -X POST "http://127.0.0.1:$ec/v3/kv/compaction" \
	-d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
check "(b) etcd is compacted to revision $rev" $? "compaction request failed"
# Writes after the compaction move the revision on; the restarted apiserver's
# watch cache then starts past every revision the operator's watches hold.
sleep 6
t0=$EPOCHREALTIME
tests/cluster/cluster.sh restart-apiserver "$CDIR" 2>"$work/restart.err" ||
	not_ok "(b) apiserver restart" "$(one_line "$(cat "$work/restart.err")")"
relisted() { (($(grep -c 'watch expired; relisting' "$work/operator.log") > relists0)); }
wait_for 60 relisted
rc=$?
took=$(since "$t0")
check "(b) informers relist after 410 (${took}s after the restart began)" $rc "no relist logged"
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]] && (($(tray_count) == 18))
check "(b) the rack converges to the same state after the relist" $? "$(ready_msg)"

# ---- (c) 429 and 503 for a while -------------------------------------------------
# The operator is restarted behind tests/integration/faultproxy.py (a loopback
# HTTPS proxy with a certificate of the test CA; the operator's kubeconfig
# names the proxy and the admin token file). Loadgen and kubectl keep talking
# to the apiserver directly, so trays change while the operator is refused.
RA=2         # the Retry-After the proxy sends with each 429
FAULT_S=10   # seconds of 429, then as many of 503
SLACK=0.2    # seconds of leeway on Retry-After (clock reads, logging)
faultproxy_start "(c) "
op_run "$work/proxied.kubeconfig" operator-proxied.log
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$probe/readyz" && wait_for 90 all_ready &&
	[[ $(rack_state) == "$before" ]]
check "(c) through the proxy in passthrough the operator sees the rack as before" $? \
	"$(one_line "$(tail -3 "$work/operator-proxied.log")")"

# The fault window: 429 then 503, while a tray is deleted and a Node goes NotReady.
uid=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}')
echo "429 $RA" >"$work/proxy.mode"
wait_for 10 grep -q ' mode 429' "$work/proxy.log"
k delete computetray "$RACK-t07" --wait=true >/dev/null
sleep "$FAULT_S"
echo 503 >"$work/proxy.mode"
wait_for 10 grep -q ' mode 503' "$work/proxy.log"
node_ready() {
	k patch node "$RACK-t05" --subresource=status --type=strategic -p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$1\",\"reason\":\"$2\",\"message\":\"set by the reliability suite\",\"lastHeartbeatTime\":\"$(date -u +%FT%TZ)\"}]}}" >/dev/null
}
node_ready False KubeletNotReady
healthy_in_fault=0
curl -fs --max-time 2 "http://127.0.0.1:$probe/healthz" >/dev/null || healthy_in_fault=1
sleep "$FAULT_S"
echo pass >"$work/proxy.mode"
t0=$EPOCHREALTIME
wait_for 10 grep -q ' mode pass' "$work/proxy.log"
kill -0 "$opid" 2>/dev/null && ((healthy_in_fault == 0)) &&
	curl -fs --max-time 2 "http://127.0.0.1:$probe/healthz" >/dev/null
check "(c) the operator stays up and healthy through 429 and 503" $? \
	"$(one_line "$(tail -3 "$work/operator-proxied.log")")"
# Requests the proxy saw between the switch to 429 and the switch back.
window() {
	awk '$2 == "mode" { m = $3; next } m == "429" || m == "503"' "$work/proxy.log"
}
faulted=$(window | wc -l)
n429=$(window | awk '$5 == "429"' | wc -l)
n503=$(window | awk '$5 == "503"' | wc -l)
# The bound: every request the operator keeps going (one per informer, seen as
# distinct watch paths in passthrough, plus one per worker of its three
# controllers and two for the event recorder and the rest) waits at least
# Retry-After after a 429, so makes at most FAULT_S/RA + 1 attempts in the 429
# phase, and under 503 waits the client's backoff (at least 100, 200, 400,
# 800, 1600, 3200 ms, then 5 s) or the informer's (800 ms doubling), so at
# most 8 attempts in 10 s. Twice that covers the boundaries; a client without
# backoff makes thousands.
informers=$(awk '$4 == "watch" { print $3 }' "$work/proxy.log" | sort -u | wc -l)
sources=$((informers + 3 * 2 + 2))
per_source=$(((FAULT_S / RA + 1) + 8))
bound=$((2 * sources * per_source))
((faulted > 0 && n429 > 0 && n503 > 0 && faulted <= bound))
check "(c) no hot loop: $faulted requests in the fault window ($n429 429s, $n503 503s; bound $bound for $sources requesters)" \
	$? "faulted=$faulted 429=$n429 503=$n503 bound=$bound"
# Retry-After: no retry of a request (same method, path, query and body)
# sooner than RA seconds after it was answered 429.
# Only the proxy's own 429s count: the apiserver answers 429 by itself ("storage is
# (re)initializing") for a moment after (b)'s restart, with another Retry-After.
early=$(awk -v ra="$RA" -v slack="$SLACK" '$2 == "mode" { m = $3; next } {
		if (($6 in last) && $1 < last[$6] + ra - slack)
			printf "%s %s %s (key %s) answered %s %.3fs after a 429; ", $2, $3,
				$4 == "watch" ? "watch" : "list", $6, $5, $1 - last[$6]
		if ($5 == "429" && m == "429") last[$6] = $1; else delete last[$6]
	}' <(sort -n -k1,1 "$work/proxy.log") | cut -c1-600)
retried=$(window | awk '{ print $6 }' | sort | uniq -d | wc -l)
[[ -z $early ]] && ((retried > 0))
check "(c) Retry-After is honoured: no request repeated within ${RA}s of its 429 ($retried requests retried)" \
	$? "$early"
if [[ -n $early ]]; then
	# What the proxy and the operator saw of the first request named.
	key=$(sed -n 's/^[^(]*(key \([0-9a-f]*\)).*/\1/p' <<<"$early")
	res=$(awk '{ print $2 }' <<<"$early" | head -1)
	echo "-- the proxy's lines for key $key (monotonic s; mode switches included)"
	grep -E " mode | $key\$" "$work/proxy.log" | tail -30
	echo "-- the operator's log lines for ${res##*/}"
	grep -F "${res##*/}" "$work/operator-proxied.log" | tail -20 | cut -c1-300
fi
recreated() { local u; u=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}') && [[ -n $u && $u != "$uid" ]]; }
seen_notready() {
	k get rack "$RACK" -o json | jq -e '[.status.conditions[] | select(.type == "Ready") |
		.message][0] | startswith("17 of 18")' >/dev/null
}
wait_for 90 recreated && wait_for 90 seen_notready
rc=$?
took=$(since "$t0")
check "(c) after passthrough resumes, the changes made during the fault are seen (t07 recreated, t05 not ready; ${took}s)" \
	$rc "$(ready_msg)"
node_ready True KubeletReady
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]]
check "(c) the rack converges to the same state as undisturbed" $? \
	"$(diff <(echo "$before") <(rack_state) | head -8 | tr '\n' ' ' | cut -c1-400)"
n=$(tray_count)
((n == 18))
check "(c) no duplicates: 18 ComputeTrays" $? "trays=$n"

# ---- (f) a silent connection -----------------------------------------------------
# The operator is restarted behind tests/integration/tcpfwd.py, which passes
# TLS through, so the operator speaks HTTP/2 to the apiserver itself and all
# its requests and watches share one connection. Freezing the forwarder
# stops that connection without closing it; the transport notices nothing
# read for 30 s, probes, gives the probe 15 s, then redials through the
# forwarder, whose new connections relay normally.
READ_IDLE_S=30 PROBE_S=15
fport=$(free_port 1 "$probe")
echo pass >"$work/fwd.mode"
python3 tests/integration/tcpfwd.py --port "$fport" --backend "$(cat "$CDIR/apiserver-port")" \
	--log "$work/fwd.log" --control "$work/fwd.mode" 2>"$work/fwd.err" &
pids+=($!)
sed "s#^\( *server:\).*#\1 https://127.0.0.1:$fport#" "$work/proxied.kubeconfig" >"$work/fwd.kubeconfig"
chmod 600 "$work/fwd.kubeconfig"
op_run "$work/fwd.kubeconfig" operator-fwd.log
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$probe/readyz" && wait_for 90 all_ready &&
	[[ $(rack_state) == "$before" ]]
check "(f) behind the forwarder the operator sees the rack as before" $? \
	"$(one_line "$(tail -3 "$work/operator-fwd.log"; cat "$work/fwd.err")")"
conns=$(awk '$2 != "freeze" && $2 != "mode"' "$work/fwd.log" | wc -l)
uid=$(k get computetray "$RACK-t07" -o jsonpath='{.metadata.uid}')
echo freeze >"$work/fwd.mode"
wait_for 10 grep -q ' freeze ' "$work/fwd.log"
frozen=$(awk '$2 == "freeze" { print $3 }' "$work/fwd.log")
t0=$EPOCHREALTIME
k delete computetray "$RACK-t07" --wait=true >/dev/null
bound=$((READ_IDLE_S + PROBE_S + 60))
wait_for "$bound" recreated
rc=$?
recovery=$(since "$t0")
check "(f) a ComputeTray deleted while the connection is silent is recreated within ${bound}s (took ${recovery}s; $frozen of $conns connections frozen)" \
	$rc "uid $uid; $(one_line "$(grep -i 'silent' "$work/operator-fwd.log" | tail -2)")"
grep -q 'apiserver connection silent; dropped it and dialing anew' "$work/operator-fwd.log"
check "(f) the operator logged dropping the silent connection" $? \
	"$(one_line "$(tail -3 "$work/operator-fwd.log")")"
after=$(awk '$2 == "freeze" { f = 1; next } f && $2 != "mode"' "$work/fwd.log" | wc -l)
((after > 0))
check "(f) it dialled anew through the forwarder ($after new connections)" $? "none after the freeze"
wait_for 90 all_ready && [[ $(rack_state) == "$before" ]] && (($(tray_count) == 18))
check "(f) the rack converges to the same state as undisturbed" $? \
	"$(diff <(echo "$before") <(rack_state) | head -8 | tr '\n' ' ' | cut -c1-400)"

# ---- (d) a tray vanishing --------------------------------------------------------
t0=$EPOCHREALTIME
k delete node "$RACK-t11" --wait=true >/dev/null
said() {
	k get rack "$RACK" -o json | jq -e '
		([.status.conditions[] | select(.type == "Ready") | .message][0] | startswith("17 of 18"))
		and ([.. | strings | select(test("NodeNotFound"))] | length > 0)' >/dev/null
}
wait_for 60 said
rc=$?
took=$(since "$t0")
check "(d) a tray whose Node is deleted is reported (NodeNotFound, 17 of 18 ready; ${took}s)" $rc \
	"$(ready_msg)"

# ---- (e) a Rack before its matrix -----------------------------------------------
# A second rack, on Nodes of its own, naming a matrix nobody applied yet.
# Its Nodes are created after it: an event of a Node that carries no rack
# label yet reaches the Rack that lists it through the racks' node index.
LATE=late-r01
sed "s/gb300-r07/$LATE/g; s/gb300-2026.10/gb300-late/; s/chassisSerial: .*/chassisSerial: \"1821124000099\"/" \
	deploy/samples/rack-gb300.yaml | k apply -f - >/dev/null
"$LOADGEN" nodes --kubeconfig "$KUBECONFIG" --racks 1 --prefix late >/dev/null
late_labelled() { (($(k get nodes -l "nvl72.io/rack=$LATE" -o name | wc -l) == 18)); }
wait_for 60 late_labelled
check "(e) Nodes created after their Rack are labelled with it (a Node event finds its Rack)" $? \
	"$(k get nodes -l "nvl72.io/rack=$LATE" -o name | wc -l) of 18 labelled"
late_drivers() { k get computetrays -l "nvl72.io/rack=$LATE" -o json | jq -r '[.items[] | .spec.driver.version // ""] | group_by(.) | map("\(.[0])x\(length)") | join(",")'; }
empty18() { [[ $(late_drivers) == "x18" ]]; }
wait_for 60 empty18
check "(e) a Rack whose matrix is not there yet gets 18 trays with no driver in their spec" $? \
	"drivers: $(late_drivers)"
t0=$EPOCHREALTIME
sed 's/name: gb300-2026.10/name: gb300-late/' deploy/samples/compatibilitymatrix-gb300.yaml | k apply -f - >/dev/null
filled() { [[ $(late_drivers) == "580.95.05x18" ]]; }
wait_for 60 filled
rc=$?
took=$(since "$t0")
check "(e) once the matrix is applied every tray gets the stack's driver (580.95.05; ${took}s)" $rc \
	"drivers: $(late_drivers)"
cat "$work"/operator*.log | grep -q 'tray driver filled in from the matrix.*rack=late-r01'
check "(e) the operator logged filling them in" $? "$(cat "$work"/operator*.log | grep -c 'filled in') lines"

kill -0 "$opid" 2>/dev/null
check "the operator is still running at the end" $? "it exited"
finish
