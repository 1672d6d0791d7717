#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator's servers under a slow API server and a flood of made-up
# tokens, against a real kube-apiserver. The operator talks to the API
# server through tests/integration/faultproxy.py, which can hold requests
# (mode "delay MS [PREFIX]"); kubectl and the API server's own calls to the
# webhook do not go through it.
#
#  1. Flood: while every TokenReview takes a second, POSTs with random
#     tokens pile up on the dashboard; a websocket client of the feed keeps
#     getting an answer to each ping it sends (the service thread is not
#     the one waiting), and every flooded POST is answered 401 or 429.
#  2. Misses are rate limited: a burst of a few hundred random tokens gets
#     some 429s at once instead of as many TokenReviews.
#  3. Brownout: with the webhook's reads held 8 s, an admission
#     review that needs a read-through still gets the webhook's verdict
#     (one attempt of 3 s, then judged on the cache) inside the API
#     server's 10 s webhook timeout.
#
# The latencies measured are printed as comments (`# ...`); they are not
# asserted. Run from the repository root by tests/integration/run.sh
# against a fresh control plane. Prints `ok - …` / `not ok - …` and
# `N passed, M failed`.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

rel=${NVL72_BUILD:-$PWD/build/rel}
OPERATOR=$rel/bin/nvl72-operator
NS=nvl72-system

. "$(dirname "$0")/lib/tap.sh"
. "$(dirname "$0")/lib/faultproxy.sh"

[[ -x $OPERATOR ]] || { not_ok "operator binary" "$OPERATOR missing (run make)"; finish; }
work=$(mktemp -d /tmp/nvl72-brownout.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)) && [[ -f $work/op.log ]]; then
		echo "-- last lines of the operator log"
		tail -20 "$work/op.log" | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. tests/cluster/ports.sh
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ---------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1) &&
	out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml -f deploy/samples/rack-gb300.yaml 2>&1)
check "apply crds/, the sample matrix and Rack" $? "$(one_line "$out")"
k create namespace "$NS" >/dev/null 2>&1
wh=$(free_port)
out=$(tests/local-webhooks.sh "https://127.0.0.1:$wh" | k apply -f - 2>&1)
check "webhook configurations naming 127.0.0.1:$wh" $? "$(one_line "$out")"

faultproxy_start ""
# mode MODE...: switches the proxy and waits until it logged the switch.
mode() {
	local n
	n=$(grep -c ' mode ' "$work/proxy.log" 2>/dev/null)
	echo "$*" >"$work/proxy.mode"
	wait_for 10 bash -c "(( \$(grep -c ' mode ' '$work/proxy.log') > ${n:-0} ))"
}

"$OPERATOR" --kubeconfig "$work/proxied.kubeconfig" --metrics-bind-address=0 \
	--health-probe-bind-address=127.0.0.1:0 --dashboard-bind-address=127.0.0.1:0 \
	--webhook-bind-address="127.0.0.1:$wh" --log-level=info >"$work/op.log" 2>&1 &
pids+=($!)
wait_for 30 grep -q 'dashboard=[0-9]' "$work/op.log"
dash=$(grep -o 'dashboard=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
probe=$(grep -o 'probes=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
ready() { curl -fsS -m 2 "http://127.0.0.1:$probe/readyz" | grep -qx ok; }
ca_filled() { [[ -n $(k get validatingwebhookconfiguration nvl72-operator -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]; }
wait_for 60 ready && wait_for 60 ca_filled
check "the operator, behind the proxy, is ready with its dashboard and webhook" $? \
	"$(one_line "$(tail -3 "$work/op.log")")"

# ------------------------------------------------------------ 1. flood ---
# A websocket client of the feed pings every 100 ms for WINDOW seconds and
# prints one line per ping: its round trip in ms, or "lost".
WINDOW=4
cat >"$work/pinger.py" <<'PY'
import os, socket, struct, sys, time
sys.path.insert(0, "tests/integration")
import cdp
port, window = int(sys.argv[1]), float(sys.argv[2])
c = cdp.Conn("127.0.0.1", port, "/ws")
c.sock.settimeout(0.5)

def frame():
    b0, b1 = c._read(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", c._read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", c._read(8))[0]
    c._read(n)
    return b0 & 0x0F

print("ready", flush=True)
end = time.monotonic() + window
while time.monotonic() < end:
    mask = os.urandom(4)
    t0 = time.monotonic()
    c.sock.sendall(bytes([0x89, 0x80 | 4]) + mask + bytes(b ^ mask[i] for i, b in enumerate(b"ping")))
    got = None
    try:
        while got is None:
            if frame() == 0x0A:
                got = (time.monotonic() - t0) * 1000
    except (socket.timeout, OSError):
        pass
    print("lost" if got is None else "%.1f" % got, flush=True)
    time.sleep(0.1)
PY
mode delay 1000 /apis/authentication.k8s.io/
check "the proxy holds every TokenReview 1 s" $? "$(tail -2 "$work/proxy.log")"
python3 "$work/pinger.py" "$dash" 30 >"$work/warm.txt" 2>&1 &
pinger=$!
wait_for 10 grep -q ready "$work/warm.txt"
kill "$pinger" 2>/dev/null
wait "$pinger" 2>/dev/null
FLOOD=20
: >"$work/flood.txt"
t_flood=$(date +%s%N)
for i in $(seq "$FLOOD"); do
	curl -s -o /dev/null -w '%{http_code}\n' -m 60 -X POST -H 'Content-Type: application/json' -d '{}' \
		-H "Authorization: Bearer flood-$RANDOM$RANDOM$RANDOM-$i" "http://127.0.0.1:$dash/actions/x" \
		>>"$work/flood.txt" &
done
python3 "$work/pinger.py" "$dash" "$WINDOW" >"$work/pings.txt" 2>&1
answered_in_window=$(wc -l <"$work/flood.txt")
wait_for 60 bash -c "(( \$(wc -l <'$work/flood.txt') == $FLOOD ))"
flood_ms=$(ms_since "$t_flood")
pings=$(grep -cE '^[0-9.]+$' "$work/pings.txt")
lost=$(grep -c '^lost' "$work/pings.txt")
max=$(grep -E '^[0-9.]+$' "$work/pings.txt" | sort -n | tail -1)
echo "# flood: $FLOOD POSTs with random tokens, TokenReviews held 1 s: answered in ${flood_ms} ms," \
	"$answered_in_window of them during the ${WINDOW} s ping window; feed pings $pings answered," \
	"$lost lost, slowest ${max:-none} ms"
((pings >= 10 && lost == 0))
check "the feed answers every ping while $FLOOD flooded POSTs wait on TokenReviews" $? \
	"$(tr '\n' ' ' <"$work/pings.txt" | cut -c1-300)"
codes=$(sort "$work/flood.txt" | uniq -c | tr -s ' \n' ' ')
! grep -qvE '^(401|429)$' "$work/flood.txt" && (($(wc -l <"$work/flood.txt") == FLOOD))
check "every flooded POST is answered 401 or 429, none 500 or hanging" $? "codes:$codes"

# ------------------------------------------------------ 2. miss rate ---
mode pass
check "the proxy relays again" $? "$(tail -2 "$work/proxy.log")"
cat >"$work/burst.py" <<'PY'
import http.client, os, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
codes, lock = [], threading.Lock()
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", "/actions/x", body=b"{}", headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer burst-%s-%d" % (os.urandom(8).hex(), i)})
        code = c.getresponse().status
    except OSError:
        code = 0
    with lock:
        codes.append(code)
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
for c in sorted(set(codes)):
    print(c, codes.count(c))
PY
reviews0=$(grep -c 'POST /apis/authentication.k8s.io/v1/tokenreviews' "$work/proxy.log")
burst=$(python3 "$work/burst.py" "$dash" 300 2>&1)
reviews=$(($(grep -c 'POST /apis/authentication.k8s.io/v1/tokenreviews' "$work/proxy.log") - reviews0))
echo "# burst of 300 random tokens: codes $(tr '\n' ' ' <<<"$burst")- $reviews TokenReviews sent"
grep -q '^429 ' <<<"$burst" && ! grep -qvE '^(401|429) ' <<<"$burst" && ((reviews < 300))
check "a burst of 300 random tokens is rate limited: some 429, fewer TokenReviews than tokens" $? \
	"codes: $(tr '\n' ' ' <<<"$burst") reviews: $reviews"

# --------------------------------------------------------- 3. brownout ---
# A RackPartition of a Rack the operator's cache lacks: the webhook reads
# it through (the name was never looked up, so no miss is remembered).
# Only the webhook's reads are held: the operator's leader election and
# status writes go on.
mode delay 8000 /apis/nvl72.io/v1alpha1/racks/ghost-r01 /apis/nvl72.io/v1alpha1/rackupgrades
check "the proxy holds the webhook's reads 8 s" $? "$(tail -2 "$work/proxy.log")"
t0=$(date +%s%N)
out=$(k apply --dry-run=server -f - 2>&1 <<'YAML'
apiVersion: nvl72.io/v1alpha1
kind: RackPartition
metadata: {name: ghost-r01-a}
spec: {rack: ghost-r01, trays: [1, 2]}
YAML
)
rc=$?
took=$(ms_since "$t0")
echo "# admission of a RackPartition with a read-through while the read takes 8 s: ${took} ms"
((rc != 0)) && [[ $out == *'admission webhook "validate.nvl72.io" denied the request'* &&
	$out == *ghost-r01* && $out != *'context deadline exceeded'* ]]
check "under the brownout the webhook still answers with its verdict (the rack named missing)" $? \
	"$(one_line "$out")"
grep -q 'read-through failed; judging the name missing.*name=ghost-r01' "$work/op.log"
check "the webhook logged the one bounded read that failed" $? "$(grep -i 'read-through' "$work/op.log" | tail -2)"
t0=$(date +%s%N)
out=$(k apply --dry-run=server -f - 2>&1 <<'YAML'
apiVersion: nvl72.io/v1alpha1
kind: RackUpgrade
metadata: {name: gb300-r07-brownout}
spec:
  rack: gb300-r07
  target: {matrix: gb300-2026.10, stack: gb300-r580-159}
  class: routine
  reason: Admission while the operator's reads are slow.
YAML
)
rc=$?
took=$(ms_since "$t0")
echo "# admission of a RackUpgrade (a live list of the upgrades) under the same brownout: ${took} ms"
((rc == 0))
check "a RackUpgrade is judged on the cache when the live list times out" $? "$(one_line "$out")"
mode pass
finish
