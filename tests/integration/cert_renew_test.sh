#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The webhook's serving certificate renews while the operator runs, against
# a real kube-apiserver. Two replicas make 30 s certificates, renew them with
# 22 s left and check every second, so a renewal comes every few seconds:
#  1. through two renewals the certificate each replica serves (read with
#     openssl s_client from its port) changes to the one in the Secret, the
#     processes (same PIDs) and their listeners stay, the Secret gets one
#     certificate per renewal (one replica renews, the other adopts it), and
#     the caBundles follow;
#  2. all the while, admission keeps answering through the API server: a
#     Rack naming a matrix that does not exist is refused by the webhook
#     (never a TLS error), again and again;
#  3. SIGTERM stops both cleanly, the certificate thread included;
#  4. --webhook-cert-source=secret (for a Secret cert-manager writes):
#     a replica serves the pair the test writes into its Secret, serves a
#     replacement from the next check without a restart, and writes neither
#     the Secret nor the caBundle of its configurations.
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
OPERATOR=$rel/bin/nvl72-operator
NS=nvl72-system
SECRET=nvl72-operator-webhook-tls
CFG=nvl72-operator
LEASE=nvl72-operator-cert

. "$(dirname "$0")/lib/tap.sh"

[[ -x $OPERATOR ]] || { not_ok "operator binary" "$OPERATOR missing (run make)"; finish; }
work=$(mktemp -d /tmp/nvl72-cert-renew.XXXXXX)
declare -A PID PORT
watcher="" prober=""
cleanup() {
	local p
	for p in "${PID[@]}" $watcher $prober; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		for f in "$work"/op-*.log; do
			[[ -f $f ]] || continue
			echo "-- last lines of $(basename "$f")"
			grep -v ' debug ' "$f" | tail -20 | cut -c1-300
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. tests/cluster/ports.sh

# served PORT: the SHA-256 fingerprint of the certificate a new TLS
# connection to PORT is served.
served() {
	openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2
}
# stored [SECRET]: the fingerprint of the Secret's tls.crt.
stored() {
	k -n "$NS" get secret "${1:-$SECRET}" -o jsonpath='{.data.tls\.crt}' 2>/dev/null | base64 -d 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2
}
serves_stored() { local s; s=$(stored "${2:-}") && [[ -n $s && $(served "${PORT[$1]}") == "$s" ]]; }
stored_is_not() { local s; s=$(stored) && [[ -n $s && $s != "$1" ]]; }
alive() { kill -0 "${PID[$1]}" 2>/dev/null; }
secret_ca() { k -n "$NS" get secret "$SECRET" -o jsonpath='{.data.ca\.crt}'; }
bundles_current() {
	local ca
	ca=$(secret_ca) && [[ -n $ca ]] &&
		[[ $(k get validatingwebhookconfiguration "$CFG" -o jsonpath='{.webhooks[*].clientConfig.caBundle}') == "$ca" ]] &&
		[[ $(k get mutatingwebhookconfiguration "$CFG" -o jsonpath='{.webhooks[*].clientConfig.caBundle}') == "$ca" ]]
}

# start_op NAME LEASE [FLAG...]: one replica campaigning for LEASE, its
# webhook on PORT[NAME] (a free loopback port unless set).
start_op() {
	local name=$1 lease=$2
	shift 2
	[[ -n ${PORT[$name]:-} ]] || PORT[$name]=$(free_port 1 "${PORT[@]}") || return 1
	POD_NAMESPACE=$NS "$OPERATOR" --leader-elect --identity="op-$name" --leader-election-id="$lease" \
		--leader-election-namespace="$NS" --metrics-bind-address=0 --health-probe-bind-address=0 \
		--dashboard-bind-address=0 --webhook-bind-address="127.0.0.1:${PORT[$name]}" \
		--tray-heartbeat-timeout=0 "$@" >"$work/op-$name.log" 2>&1 &
	PID[$name]=$!
	wait_for 30 grep -q 'server=webhook .*tls=yes' "$work/op-$name.log"
}
SHORT=(--webhook-cert-validity=30s --webhook-cert-renew-before=22s --webhook-cert-check-interval=1s)

# ------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1) &&
	out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1) &&
	out=$(k create namespace "$NS" 2>&1)
check "crds/, the sample matrix and the namespace" $? "$out"
# The chart's empty Secret, and its configurations pointing at replica a
# (clientConfig.url; no Service routes to host processes).
PORT[a]=$(free_port 1 "${PORT[@]}")
out=$(k -n "$NS" create secret generic "$SECRET" 2>&1) &&
	out=$(tests/local-webhooks.sh "https://127.0.0.1:${PORT[a]}" | k apply -f - 2>&1)
check "the empty webhook Secret and both configurations (url: replica a)" $? "$(one_line "$out")"

# Every write of the Secret, as the API server tells its watchers.
k -n "$NS" get secret "$SECRET" -w -o jsonpath='{.metadata.resourceVersion} {.data.tls\.crt}{"\n"}' \
	>"$work/secret-watch.txt" 2>/dev/null &
watcher=$!

start_op a "$LEASE" "${SHORT[@]}" && start_op b "$LEASE" "${SHORT[@]}"
check "two replicas serve the webhook (a :${PORT[a]}, b :${PORT[b]})" $? \
	"$(grep -h 'error' "$work"/op-*.log | head -3)"
pid_a=${PID[a]} pid_b=${PID[b]}
wait_for 30 bundles_current && wait_for 30 serves_stored a && wait_for 30 serves_stored b
check "both serve the Secret's certificate and both caBundles carry its CA" $? \
	"stored=$(stored) a=$(served "${PORT[a]}") b=$(served "${PORT[b]}")"

# ---------------------------------------- admission through the apiserver ---
bad_rack=$(yq -y '.metadata.name = "cert-renew-probe" | .spec.matrix.name = "no-such-matrix"' \
	deploy/samples/rack-gb300.yaml)
# One server-side dry run: the webhook's refusal, or what went wrong.
probe() {
	local out
	out=$("$KUBECTL" --request-timeout=15s apply --dry-run=server -f - <<<"$bad_rack" 2>&1)
	if [[ $out == *'admission webhook "validate.nvl72.io" denied the request'*'CompatibilityMatrix "no-such-matrix" does not exist'* ]]; then
		echo refused
	else
		echo "other: $(one_line "$out")"
	fi
}
[[ $(probe) == refused ]]
check "the webhook answers through the API server (a Rack naming no matrix is refused)" $? "$(probe)"
# trusted NAME: a new connection to the replica verifies against the caBundle
# the API server is given (an empty review is the webhook's own 400).
trusted() {
	k get validatingwebhookconfiguration "$CFG" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' |
		base64 -d >"$work/bundle-$1.pem" 2>/dev/null &&
		[[ $(curl -s -o /dev/null -w '%{http_code}' -m 5 --cacert "$work/bundle-$1.pem" \
			-H 'Content-Type: application/json' -d '{}' "https://127.0.0.1:${PORT[$1]}/validate") == 400 ]]
}
# For as long as the renewals below run: a review through the API server
# (which keeps its connection until a new caBundle makes it open another),
# and a new connection to each replica checked against the caBundle.
(
	while :; do
		probe
		for r in a b; do
			if trusted "$r"; then echo "trusted"; else echo "untrusted: replica $r"; fi
		done
		sleep 0.2
	done
) >"$work/probes.txt" &
prober=$!

# -------------------------------------------------------------- renewals ---
rounds_ok=0
for round in 1 2; do
	before=$(stored)
	if ! wait_for 60 stored_is_not "$before"; then
		not_ok "renewal $round: the Secret gets a new certificate" "still $before"
		break
	fi
	after=$(stored)
	wait_for 30 serves_stored a && wait_for 30 serves_stored b
	check "renewal $round: both replicas serve the new certificate" $? \
		"stored=$after a=$(served "${PORT[a]}") b=$(served "${PORT[b]}")"
	alive a && alive b && [[ ${PID[a]} == "$pid_a" && ${PID[b]} == "$pid_b" ]]
	check "renewal $round: by the same processes (pids $pid_a, $pid_b), on the same ports" $? \
		"a alive=$(alive a && echo yes) b alive=$(alive b && echo yes)"
	wait_for 30 bundles_current
	check "renewal $round: both caBundles carry the Secret's CA" $? "secret ca.crt $(secret_ca | cut -c1-24)…"
	n=$(secret_ca | base64 -d | grep -c 'BEGIN CERTIFICATE')
	[[ $n == 2 ]]
	check "renewal $round: the bundle holds the new CA and the previous one" $? "$n certificates"
	rounds_ok=$((rounds_ok + 1))
done
kill -TERM "$prober" 2>/dev/null
wait "$prober" 2>/dev/null
prober=""
total=$(grep -c '^refused$\|^other' "$work/probes.txt")
refused=$(grep -c '^refused$' "$work/probes.txt")
echo "# $refused of $total reviews through the API server refused by the webhook during $rounds_ok renewals"
((total >= 10 && refused == total))
check "admission kept answering through the renewals ($refused of $total refused by the webhook)" $? \
	"$(grep '^other' "$work/probes.txt" | sort | uniq -c | head -3)"
conns=$(grep -c 'trusted' "$work/probes.txt")
good=$(grep -c '^trusted$' "$work/probes.txt")
echo "# $good of $conns new connections to a replica verified against the caBundle"
((conns >= 20 && good == conns))
check "neither replica's certificate was ever refused by the caBundle in force ($good of $conns)" $? \
	"$(grep '^untrusted' "$work/probes.txt" | sort | uniq -c | head -3)"

# Each certificate stored once: every renewal is one write, made by one
# replica; the other adopts it (a lost race is a conflict, not a write).
kill -TERM "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
watcher=""
writes=$(awk 'NF == 2 {print $2}' "$work/secret-watch.txt" | sort -u | wc -l)
made=$(cat "$work"/op-a.log "$work"/op-b.log | grep -c 'serving certificate stored')
adopted_a=$(grep -c 'serving certificate adopted from the Secret' "$work/op-a.log")
adopted_b=$(grep -c 'serving certificate adopted from the Secret' "$work/op-b.log")
echo "# certificates in the Secret: $writes; stored by a replica: $made; adopted: a $adopted_a, b $adopted_b"
((writes >= 3 && made <= writes && adopted_a + adopted_b >= rounds_ok))
check "one certificate per renewal: the other replica adopts it instead of making a third" $? \
	"writes=$writes stored=$made adopted a=$adopted_a b=$adopted_b"

# ------------------------------------------------------------- shutdown ---
kill -TERM "${PID[a]}" "${PID[b]}"
rc_a=0 rc_b=0
wait "${PID[a]}" || rc_a=$?
wait "${PID[b]}" || rc_b=$?
unset 'PID[a]' 'PID[b]'
((rc_a == 0 && rc_b == 0))
check "SIGTERM: both replicas stop cleanly, the certificate thread with them" $? "rc a=$rc_a b=$rc_b"

# ------------------------------------------------ a Secret written by another ---
# What cert-manager would store: a CA and a serving certificate for the
# Service's names and 127.0.0.1, here made with openssl.
SECRET2=nvl72-operator-cm-tls CFG2=nvl72-operator-cm
pair() { # pair DIR: ca.crt, tls.crt, tls.key in DIR
	mkdir -p "$1"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=test-ca \
		-keyout "$1/ca.key" -out "$1/ca.crt" 2>/dev/null &&
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$CFG.$NS.svc" \
			-keyout "$1/tls.key" -out "$1/tls.csr" 2>/dev/null &&
		printf 'subjectAltName=DNS:%s,DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' \
			"$CFG.$NS.svc" "$CFG.$NS.svc.cluster.local" >"$1/ext" &&
		openssl x509 -req -in "$1/tls.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial \
			-days 10 -extfile "$1/ext" -out "$1/tls.crt" 2>/dev/null
}
put_pair() { # put_pair DIR: the Secret's data, as a writer other than the operator
	k -n "$NS" create secret generic "$SECRET2" --from-file="$1/tls.crt" --from-file="$1/tls.key" \
		--from-file="$1/ca.crt" --dry-run=client -o yaml | k apply -f - >/dev/null
}
pair "$work/p1" && pair "$work/p2" && put_pair "$work/p1" &&
	tests/local-webhooks.sh "https://127.0.0.1:1" |
	yq -y --arg n "$CFG2" --arg ca "$(base64 -w0 "$work/p1/ca.crt")" \
		'.metadata.name = $n | .webhooks[].clientConfig.caBundle = $ca
		 | .webhooks[].failurePolicy = "Ignore" | .webhooks[].name |= sub("nvl72.io$"; "cm.nvl72.io")' |
	k apply -f - >/dev/null
check "a Secret written by another party, and configurations whose caBundle it owns" $? "openssl or kubectl failed"
bundle_before=$(k get validatingwebhookconfiguration "$CFG2" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
start_op c "$LEASE-c" --webhook-cert-source=secret --webhook-secret="$SECRET2" \
	--webhook-configuration="$CFG2" --webhook-cert-check-interval=1s
check "--webhook-cert-source=secret: a replica starts on that Secret" $? "$(tail -3 "$work/op-c.log")"
pid_c=${PID[c]}
wait_for 15 serves_stored c "$SECRET2"
check "it serves the pair in the Secret" $? "stored=$(stored "$SECRET2") c=$(served "${PORT[c]}")"
put_pair "$work/p2"
wait_for 15 serves_stored c "$SECRET2" && alive c && [[ ${PID[c]} == "$pid_c" ]]
check "a replacement pair is served without a restart (pid $pid_c)" $? \
	"stored=$(stored "$SECRET2") c=$(served "${PORT[c]}")"
bundle_after=$(k get validatingwebhookconfiguration "$CFG2" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
writes_c=$(grep -c 'serving certificate stored\|caBundle updated' "$work/op-c.log")
# Only kubectl (the test) ever wrote the Secret.
[[ $writes_c == 0 && $bundle_after == "$bundle_before" ]] &&
	[[ -z $(k -n "$NS" get secret "$SECRET2" -o json | jq -r '.metadata.managedFields[]?.manager' | grep -v kubectl) ]]
check "it wrote neither the Secret nor the caBundle" $? \
	"writes in its log=$writes_c bundle changed=$([[ $bundle_after == "$bundle_before" ]] && echo no || echo yes)"
kill -TERM "${PID[c]}"
rc_c=0
wait "${PID[c]}" || rc_c=$?
unset 'PID[c]'
check "SIGTERM: it stops cleanly" $((rc_c)) "rc=$rc_c"

finish
