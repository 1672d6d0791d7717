#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Security checks against a real control plane:
#  1. No secret in any log: the operator (bearer token in its kubeconfig) and
#     18 agents (token file) run at debug level through a short end to end
#     (rack Ready, one webhook review, requests that carry Authorization
#     headers); every log is searched literally for both cluster tokens,
#     private key PEM markers, "Authorization:" and "Bearer ".
#  2. TLS verification cannot be switched off by accident: a kubeconfig with
#     the wrong CA, or with none (system trust), is refused at start; a
#     non-boolean insecure-skip-tls-verify is refused naming the field; no
#     flag or environment variable turns verification off; only an explicit
#     insecure-skip-tls-verify: true does, and then with a warning naming the
#     kubeconfig's cluster (and none from a verifying client).
#  3. The dashboard shows nothing sensitive: every route, fetched without a
#     token, and the websocket feed, without a token (nothing but the request
#     for one) and with the admin token (the rack), carry no token, no key
#     and none of the webhook Secret's data.
# RBAC wildcards are checked by deploy_test.sh and not repeated here.
#
# Run by tests/integration/run.sh against a fresh control plane.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

BIN=${NVL72_BUILD:-build/rel}/bin
SIM=$(dirname "${NVL72_BUILD:-build/rel}")/sim
NS=nvl72-system
RACK=sec-r01

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else not_ok "$1" "$3"; fi; }
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }

work=$(mktemp -d /tmp/nvl72-security.XXXXXX)
pids=()
cleanup() {
	local p f
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$work"/sim/tray-*/host/run/nvl72-agent/*.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}
k() { timeout 120 "$KUBECTL" --request-timeout=60s "$@"; }
wait_for() {
	local until=$(($(date +%s) + $1))
	shift
	while (($(date +%s) < until)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}

[[ -x $BIN/nvl72-operator && -x $BIN/nvl72-agent && -x $SIM/bin/simctl ]] ||
	{ not_ok "binaries" "operator, agent or simulator missing (make all sim)"; finish; }
pki=$NVL72_CLUSTER_DIR/pki
admin_token=$(cat "$pki/admin.token")
viewer_token=$(cat "$pki/viewer.token")
server=$(awk '/server:/ {print $2; exit}' "$KUBECONFIG")

# kubeconfig SERVER CA-LINE USER-LINE
kc() {
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n%s\nusers:\n- name: u\n  user:\n%s\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n' \
		"$1" "$2" "$3"
}
kc "$server" "    certificate-authority: $pki/ca.crt" "    token: $admin_token" >"$work/op.kubeconfig"
kc "$server" "    certificate-authority: $pki/ca.crt" "    tokenFile: $pki/admin.token" >"$work/agent.kubeconfig"
chmod 600 "$work"/*.kubeconfig

k apply -f crds/ >/dev/null && k wait --for=condition=Established --timeout=60s -f crds/ >/dev/null &&
	k create namespace "$NS" >/dev/null &&
	k apply -f deploy/samples/compatibilitymatrix-gb300.yaml >/dev/null ||
	{ not_ok "CRDs and matrix applied" "kubectl failed"; finish; }

# ---- 2. TLS verification ------------------------------------------------------

# start_refused NAME KUBECONFIG PATTERN: the operator exits non-zero and says why.
start_refused() {
	local out rc
	out=$(POD_NAMESPACE=$NS timeout 60 "$BIN/nvl72-operator" --kubeconfig "$2" \
		--metrics-bind-address 0 --dashboard-bind-address 0 --webhook-bind-address 0 \
		--health-probe-bind-address 0 --cache-sync-timeout 5s 2>&1)
	rc=$?
	if ((rc != 0 && rc != 124)) && grep -Eqi -- "$3" <<<"$out"; then
		ok "$1"
	else
		not_ok "$1" "rc=$rc: $(one_line "$(tail -5 <<<"$out")")"
	fi
}
(cd "$work" && umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-nodes -keyout other-ca.key -out other-ca.crt -days 1 -subj /CN=not-the-cluster-ca 2>/dev/null)
kc "$server" "    certificate-authority: $work/other-ca.crt" "    token: $admin_token" >"$work/wrong-ca.kubeconfig"
start_refused "a server certificate from another CA is refused" "$work/wrong-ca.kubeconfig" \
	'certificate|SSL|TLS|verify'
kc "$server" "" "    token: $admin_token" | sed '/^$/d' >"$work/no-ca.kubeconfig"
start_refused "without a CA the system trust store is used and the test CA is refused" \
	"$work/no-ca.kubeconfig" 'certificate|SSL|TLS|verify'
kc "$server" "    certificate-authority: $pki/ca.crt
    insecure-skip-tls-verify: maybe" "    token: $admin_token" >"$work/maybe.kubeconfig"
start_refused "a non-boolean insecure-skip-tls-verify is refused naming the field" \
	"$work/maybe.kubeconfig" 'insecure-skip-tls-verify: expected a boolean'
help=$("$BIN/nvl72-operator" --help 2>&1; "$BIN/nvl72-agent" --help 2>&1)
! grep -Eqi 'insecure|skip-tls|tls-verify|no-verify' <<<"$help"
check "no flag of the operator or the agent turns TLS verification off" $? \
	"$(grep -Ei 'insecure|verify' <<<"$help" | head -2)"
CURL_CA_BUNDLE=/dev/null SSL_CERT_FILE=$work/other-ca.crt NVL72_INSECURE=1 \
	start_refused "environment variables do not weaken verification (wrong CA still refused)" \
	"$work/wrong-ca.kubeconfig" 'certificate|SSL|TLS|verify'
kc "$server" "    insecure-skip-tls-verify: true" "    token: $admin_token" >"$work/insecure.kubeconfig"
. tests/cluster/ports.sh
port=$(free_port)
POD_NAMESPACE=$NS timeout 60 "$BIN/nvl72-operator" --kubeconfig "$work/insecure.kubeconfig" \
	--metrics-bind-address 0 --dashboard-bind-address 0 --webhook-bind-address 0 \
	--health-probe-bind-address "127.0.0.1:$port" >"$work/insecure.log" 2>&1 &
ipid=$!
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$port/readyz"
check "only an explicit insecure-skip-tls-verify: true turns verification off" $? \
	"$(one_line "$(tail -3 "$work/insecure.log")")"
kill -TERM "$ipid" 2>/dev/null
wait "$ipid" 2>/dev/null
grep -F 'insecure-skip-tls-verify' "$work/insecure.log" | grep -qF 'cluster="c"'
check "turning verification off logs a warning naming the kubeconfig cluster" $? \
	"$(one_line "$(grep -i 'tls' "$work/insecure.log" | head -2)")"

# ---- 1. an end to end at debug level --------------------------------------------

for t in $(seq -w 1 18); do
	printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s-t%s\n  labels: {kubernetes.io/arch: arm64}\n---\n' "$RACK" "$t"
done | k apply -f - >/dev/null
now=$(date -u +%FT%TZ)
ready='{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated tray","lastHeartbeatTime":"'$now'","lastTransitionTime":"'$now'"}]}}'
for t in $(seq -w 1 18); do
	k patch node "$RACK-t$t" --subresource=status --type=merge -p "$ready" >/dev/null
done
ipb=$((60 + $$ % 100))
"$SIM/bin/simctl" create "$work/sim" --trays 18 --ip-base "$ipb" >/dev/null ||
	{ not_ok "simulated rack" "simctl failed"; finish; }

probe=$((20000 + RANDOM % 10000))
dash=$((probe + 1)) hook=$((probe + 2)) metrics=$((probe + 3))
POD_NAMESPACE=$NS "$BIN/nvl72-operator" --kubeconfig "$work/op.kubeconfig" \
	--agent-lease-namespace "$NS" --log-level debug --log-debug '*' \
	--health-probe-bind-address "127.0.0.1:$probe" --dashboard-bind-address "127.0.0.1:$dash" \
	--webhook-bind-address "127.0.0.1:$hook" --metrics-bind-address "127.0.0.1:$metrics" \
	>"$work/operator.log" 2>&1 &
pids+=($!)
wait_for 60 curl -fs --max-time 2 "http://127.0.0.1:$probe/readyz" ||
	{ not_ok "operator ready" "$(one_line "$(tail -5 "$work/operator.log")")"; finish; }
sed "s/gb300-r07/$RACK/g" deploy/samples/rack-gb300.yaml | k apply -f - >/dev/null
wait_for 60 bash -c "[[ \$('$KUBECTL' get computetrays -o name | wc -l) -ge 18 ]]"
for t in $(seq 1 18); do
	d=$(printf '%s/sim/tray-%02d' "$work" "$t")
	NVL72_SIM_ROOT=$d "$BIN/nvl72-agent" --kubeconfig "$work/agent.kubeconfig" \
		--node-name "$(printf '%s-t%02d' "$RACK" "$t")" --node-ip "127.0.0.$((ipb + t))" \
		--lease-namespace "$NS" --host-root "$d/host" --log-level debug --log-debug '*' \
		--nvml-path "$SIM/lib/libnvidia-ml.so.1" --systemctl "$SIM/bin/systemctl" \
		--modprobe "$SIM/bin/modprobe" --modinfo "$SIM/bin/modinfo" \
		--imex-bin "$SIM/bin/nvidia-imex" --imex-ctl "$SIM/bin/nvidia-imex-ctl" \
		--installer-arg "$SIM/bin/nvl72-sim-installer" --installer-arg '{version}' \
		>"$work/agent-$t.log" 2>&1 &
	pids+=($!)
done
rack_ready() {
	[[ $(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
wait_for 120 rack_ready
check "the rack becomes Ready with the operator and agents at debug level" $? \
	"$(k get rack "$RACK" -o jsonpath='{.status.conditions}' 2>&1 | cut -c1-300)"

k get secret -n "$NS" nvl72-operator-webhook-tls -o json >"$work/secret.json"
jq -r '.data["ca.crt"]' "$work/secret.json" | base64 -d >"$work/webhook-ca.crt"
code=$(curl -sS --max-time 30 --cacert "$work/webhook-ca.crt" -o "$work/review.out" -w '%{http_code}' \
	-H 'Content-Type: application/json' -H "Authorization: Bearer $viewer_token" \
	--data-binary @tests/data/webhook/review-rack-create.json "https://127.0.0.1:$hook/validate")
[[ $code == 200 ]] && jq -e '.response.uid' "$work/review.out" >/dev/null
check "one webhook review is answered (sent with an Authorization header)" $? "HTTP $code"
# Requests carrying the viewer token, so that a server logging headers would show it.
curl -s --max-time 10 -H "Authorization: Bearer $viewer_token" "http://127.0.0.1:$metrics/metrics" >/dev/null
curl -s --max-time 10 -H "Authorization: Bearer $viewer_token" "http://127.0.0.1:$dash/" >/dev/null
sleep 2

# ---- 3. the dashboard without a token ------------------------------------------

dash_dump=$work/dashboard.txt
: >"$dash_dump"
for path in / /index.html /app.js /style.css /healthz /readyz /metrics /ws /api /debug /secrets; do
	code=$(curl -s --max-time 10 -o "$work/route" -w '%{http_code}' "http://127.0.0.1:$dash$path")
	printf '== %s %s\n' "$path" "$code" >>"$dash_dump"
	cat "$work/route" >>"$dash_dump"
done
# Reads the websocket feed for a few seconds and prints it; with a token
# file, sends the token first, as the page does.
feed_dump() {
	python3 - "$dash" "$@" <<'PY'
import base64, json, os, socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: nvl72.feed.v1\r\n\r\n" % key).encode())
if len(sys.argv) > 2:
    msg = json.dumps({"token": open(sys.argv[2]).read().strip()}).encode()
    mask = os.urandom(4)
    head = struct.pack("!BB", 0x81, 0x80 | len(msg)) if len(msg) < 126 else \
        struct.pack("!BBH", 0x81, 0x80 | 126, len(msg))
    s.sendall(head + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(msg)))
data, end = b"", time.time() + 4
while time.time() < end and len(data) < 8 << 20:
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        break
    if not chunk:
        break
    data += chunk
print("== /ws feed %d bytes" % len(data))
sys.stdout.write(data.decode("utf-8", "replace"))
PY
}
feed_dump >>"$dash_dump" 2>&1
feed_bytes=$(grep -aEo '^== /ws feed [0-9]+' "$dash_dump" | grep -Eo '[0-9]+$')
((${feed_bytes:-0} < 300)) && grep -aq '"required":true' "$dash_dump" && ! grep -aq "$RACK" "$dash_dump"
check "the page answers without a token, its feed only asks for one (feed $feed_bytes bytes)" $? \
	"$(grep -a '^==' "$dash_dump" | tr '\n' ' ')"
feed_dump "$pki/admin.token" >"$work/feed-admin.txt" 2>&1
admin_bytes=$(grep -aEo '^== /ws feed [0-9]+' "$work/feed-admin.txt" | grep -Eo '[0-9]+$')
((${admin_bytes:-0} > 1000)) && grep -aq "$RACK" "$work/feed-admin.txt"
check "with a token allowed to read it, the feed carries the rack ($admin_bytes bytes)" $? \
	"$(head -c 300 "$work/feed-admin.txt")"
cat "$work/feed-admin.txt" >>"$dash_dump"
leaks=""
for f in tls.key tls.crt ca.crt; do
	v=$(jq -r --arg f "$f" '.data[$f] // empty' "$work/secret.json")
	[[ -n $v ]] && grep -aqF -- "$v" "$dash_dump" && leaks+=" secret:$f(base64)"
	[[ -n $v ]] && base64 -d <<<"$v" | grep -v -- '-----' | head -1 | grep -aqF -f - "$dash_dump" &&
		leaks+=" secret:$f(pem)"
done
grep -aqF -- "$admin_token" "$dash_dump" && leaks+=" admin-token"
grep -aqF -- "$viewer_token" "$dash_dump" && leaks+=" viewer-token"
grep -aqF -- 'PRIVATE KEY' "$dash_dump" && leaks+=" private-key-marker"
grep -aqi -- '"kind": *"Secret"' "$dash_dump" && leaks+=" secret-object"
[[ -z $leaks ]]
check "nothing sensitive on the dashboard (routes, and the feed with and without a token)" $? "found:$leaks"

# ---- 1. the logs -------------------------------------------------------------------

# Stop everything first so the logs are complete.
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
pids=()
! grep -qF 'TLS verification of the apiserver is off' "$work"/operator.log "$work"/agent-*.log
check "a client that verifies TLS logs no such warning" $? \
	"$(grep -lF 'TLS verification of the apiserver is off' "$work"/operator.log "$work"/agent-*.log | head -2)"
logs=("$work"/operator.log "$work"/insecure.log "$work"/agent-*.log)
lines=$(cat "${logs[@]}" | wc -l)
debug=$(grep -c ' debug ' "$work/operator.log")
((lines > 100 && debug > 0))
check "the logs were written at debug level ($lines lines, $debug operator debug lines)" $? \
	"lines=$lines debug=$debug"
# leak NAME STRING: STRING appears in no log.
leak() {
	local hits
	hits=$(grep -lF -- "$2" "${logs[@]}" 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
	[[ -z $hits ]]
	check "no log holds $1" $? "in: $hits"
}
leak "the operator's bearer token" "$admin_token"
leak "the viewer's bearer token" "$viewer_token"
leak "a private key PEM marker" "PRIVATE KEY-----"
leak "an Authorization header" "Authorization:"
leak "a Bearer credential" "Bearer "
leak "the webhook serving key" "$(jq -r '.data["tls.key"]' "$work/secret.json" | base64 -d | sed -n 2p)"
hits=$(grep -il -- 'authorization:' "${logs[@]}" 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
[[ -z $hits ]]
check "no log holds an Authorization header in any letter case" $? "in: $hits"
finish
