#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /metrics with --metrics-require-token against a real kube-apiserver:
# without the flag anyone who reaches the port may scrape; with it a scrape
# needs a bearer token that a TokenReview authenticates (else 401) and a
# SubjectAccessReview allows "get" on the non-resource URL /metrics (else
# 403), which the chart's nvl72-metrics-reader ClusterRole grants. No token
# reaches the operator's log.
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

. "$(dirname "$0")/lib/tap.sh"

[[ -x $OPERATOR ]] || { not_ok "operator binary" "$OPERATOR missing (run make)"; finish; }
admin=$(cat "$NVL72_CLUSTER_DIR/pki/admin.token" 2>/dev/null)
viewer=$(cat "$NVL72_CLUSTER_DIR/pki/viewer.token" 2>/dev/null)
[[ ${#admin} -ge 16 && ${#viewer} -ge 16 ]] || { not_ok "the control plane's test tokens" "missing"; finish; }
work=$(mktemp -d /tmp/nvl72-metrics-auth.XXXXXX)
opid=""
cleanup() {
	[[ -n $opid ]] && kill -TERM "$opid" 2>/dev/null
	wait 2>/dev/null
	if ((failed > 0)) && [[ -f $work/op.log ]]; then
		echo "-- last lines of the operator log"
		tail -15 "$work/op.log" | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1)
check "apply crds/" $? "$out"
k create namespace "$NS" >/dev/null 2>&1

start_operator() { # start_operator [flags...]: sets opid and port
	"$OPERATOR" --metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=0 \
		--dashboard-bind-address=0 --webhook-bind-address=0 --log-level=debug "$@" \
		>"$work/op.log" 2>&1 &
	opid=$!
	wait_for 30 grep -q 'metrics=[0-9]' "$work/op.log"
	port=$(grep -o 'metrics=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
	[[ -n $port ]]
}
stop_operator() {
	kill -TERM "$opid" 2>/dev/null
	wait "$opid" 2>/dev/null
	opid=""
}
code() { curl -s -o "$work/body" -w '%{http_code}' -m 10 "$@"; }

# --------------------------------------------------------- flag off ---
start_operator
check "the operator serves /metrics on loopback (flag off)" $? "$(tail -3 "$work/op.log")"
c=$(code "http://127.0.0.1:$port/metrics")
[[ $c == 200 ]] && grep -q '^nvl72_build_info' "$work/body"
check "without --metrics-require-token a scrape needs no token (200, nvl72_build_info)" $? "got $c"
stop_operator

# ---------------------------------------------------------- flag on ---
start_operator --metrics-require-token
check "the operator serves /metrics on loopback (--metrics-require-token)" $? "$(tail -3 "$work/op.log")"
m=http://127.0.0.1:$port/metrics
c=$(code "$m")
[[ $c == 401 ]] && ! grep -q nvl72_ "$work/body"
check "a scrape without a token is refused with 401 and no series" $? "got $c"
c=$(code -H "Authorization: Bearer not-a-real-token" "$m")
[[ $c == 401 ]]
check "a token the TokenReview does not authenticate gets 401" $? "got $c"
c=$(code -H "Authorization: Bearer $viewer" "$m")
[[ $c == 403 ]] && ! grep -q nvl72_ "$work/body"
check "an authenticated user without \"get\" on /metrics gets 403 and no series" $? "got $c"
grep -q 'access reviewed.*user=viewer verb=get path=/metrics allowed=false' "$work/op.log"
check "the refusal is logged with the user, verb and path" $? "$(grep 'access' "$work/op.log" | tail -2)"
c=$(code -H "Authorization: Bearer $admin" "$m")
[[ $c == 200 ]] && grep -q '^nvl72_build_info' "$work/body"
check "a system:masters token scrapes (200)" $? "got $c"

# The chart's ClusterRole, taken from the rendered manifests, bound to the
# viewer as a Prometheus ServiceAccount would be.
yq 'select(.kind == "ClusterRole" and .metadata.name == "nvl72-metrics-reader")' \
	deploy/manifests/nvl72-operator.yaml >"$work/reader.yaml"
out=$(k apply -f "$work/reader.yaml" 2>&1) &&
	out=$(k create clusterrolebinding metrics-auth-viewer --clusterrole=nvl72-metrics-reader --user=viewer 2>&1)
check "bind the viewer to the chart's nvl72-metrics-reader ClusterRole" $? "$out"
scrapes() { [[ $(code -H "Authorization: Bearer $viewer" "$m") == 200 ]]; }
wait_for 30 scrapes
check "the viewer now scrapes (200, once the 2 s refusal cache expires)" $? \
	"got $(code -H "Authorization: Bearer $viewer" "$m")"
grep -q '^nvl72_build_info' "$work/body" && grep -q '^controller_runtime_reconcile_total' "$work/body"
check "the scrape carries the operator's series" $? "$(head -c 200 "$work/body")"
c=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -H "Authorization: Bearer $viewer" \
	"http://127.0.0.1:$port/metrics/other")
[[ $c == 404 ]]
check "the grant is for /metrics only (another path: 404, nothing served)" $? "got $c"

leak=""
grep -qF "$admin" "$work/op.log" && leak+=" admin-token"
grep -qF "$viewer" "$work/op.log" && leak+=" viewer-token"
grep -qF "not-a-real-token" "$work/op.log" && leak+=" bad-token"
[[ -z $leak ]]
check "no token appears in the operator's debug log" $? "found:$leak"
finish
