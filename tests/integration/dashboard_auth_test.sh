#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard's access rules against a real kube-apiserver: reading (the
# page, its assets, the /ws feed) needs no token and shows no secret; every
# POST needs a bearer token that a TokenReview authenticates and a
# SubjectAccessReview allows ("post" on the request path, RBAC
# nonResourceURLs); and no token ever reaches the operator's log.
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
work=$(mktemp -d /tmp/nvl72-dash-auth.XXXXXX)
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

out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1) &&
	out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml -f deploy/samples/rack-gb300.yaml 2>&1)
check "apply crds/, the sample matrix and Rack" $? "$out"
k create namespace "$NS" >/dev/null 2>&1
secret=s3cr3t-$RANDOM$RANDOM
k -n "$NS" create secret generic nmx-credentials --from-literal=password="$secret" >/dev/null 2>&1

"$OPERATOR" --metrics-bind-address=0 --health-probe-bind-address=0 \
	--dashboard-bind-address=127.0.0.1:0 --webhook-bind-address=0 \
	--log-level=debug >"$work/op.log" 2>&1 &
opid=$!
wait_for 30 grep -q 'dashboard=[0-9]' "$work/op.log"
port=$(grep -o 'dashboard=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
[[ -n $port ]]
check "the operator serves its dashboard on loopback" $? "$(tail -3 "$work/op.log")"
base=http://127.0.0.1:$port

# ------------------------------------------------------------- reading ---
code() { curl -s -o /dev/null -w '%{http_code}' -m 10 "$@"; }
[[ $(code "$base/") == 200 && $(code "$base/app.js") == 200 && $(code "$base/style.css") == 200 ]]
check "the page and its assets are served without a token" $? "$(code "$base/")"
[[ $(code -H "Authorization: Bearer $viewer" "$base/") == 200 ]]
check "and with any token (reading needs no rights)" $? ""

# The feed as a client without a token receives it: the replay of every
# retained topic, read for a few seconds once the rack is published.
feed() {
	python3 - "$port" <<'PY'
import socket, sys
sys.path.insert(0, "tests/integration")
import cdp
c = cdp.Conn("127.0.0.1", int(sys.argv[1]), "/ws")
c.sock.settimeout(3)
try:
    while True:
        print(c.recv_text())
except (socket.timeout, OSError):
    pass
PY
}
has_rack() { feed >"$work/feed.txt" && grep -q '"topic":"rack/gb300-r07"' "$work/feed.txt"; }
wait_for 60 has_rack
check "the /ws feed replays the rack to a client without a token" $? "$(head -c 300 "$work/feed.txt")"
leak=""
grep -qF "$secret" "$work/feed.txt" && leak+=" secret-data"
grep -qF "$admin" "$work/feed.txt" && leak+=" admin-token"
grep -qF "$viewer" "$work/feed.txt" && leak+=" viewer-token"
[[ -z $leak ]]
check "the feed holds no Secret data and no token" $? "found:$leak"

# ------------------------------------------------------------- POSTs ---
post() { code -X POST -H 'Content-Type: application/json' -d '{}' "$@"; }
c=$(post "$base/actions/test")
[[ $c == 401 ]]
check "a POST without a token is refused with 401" $? "got $c"
c=$(post -H "Authorization: Bearer not-a-real-token" "$base/actions/test")
[[ $c == 401 ]]
check "a POST with a token the TokenReview does not authenticate gets 401" $? "got $c"
c=$(post -H "Authorization: Bearer $viewer" "$base/actions/test")
[[ $c == 403 ]]
check "a POST by an authenticated user without RBAC for it gets 403" $? "got $c"
c=$(code -X POST -H 'Content-Length: 100000000' "$base/actions/test")
[[ $c == 401 ]]
check "a refused POST is answered before its body (401, not 413)" $? "got $c"
grep -q 'access reviewed.*user=viewer verb=post path=/actions/test allowed=false' "$work/op.log"
check "the refusal is logged with the user, verb and path" $? "$(grep 'access' "$work/op.log" | tail -2)"

out=$(k apply -f - 2>&1 <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nvl72-dashboard-actions}
rules:
  - nonResourceURLs: ["/actions/*"]
    verbs: ["post"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nvl72-dashboard-actions-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nvl72-dashboard-actions}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}
YAML
)
check "grant the viewer post on /actions/* (nonResourceURLs)" $? "$out"
passes() { [[ $(post -H "Authorization: Bearer $viewer" "$base/actions/test") == 404 ]]; }
wait_for 30 passes
check "the viewer's POST now passes the check (404: no such action)" $? \
	"got $(post -H "Authorization: Bearer $viewer" "$base/actions/test")"
c=$(post -H "Authorization: Bearer $viewer" "$base/other")
[[ $c == 403 ]]
check "but not on a path outside the grant (403)" $? "got $c"
c=$(post -H "Authorization: Bearer $admin" "$base/actions/test")
[[ $c == 404 ]]
check "a system:masters token passes too" $? "got $c"

leak=""
grep -qF "$admin" "$work/op.log" && leak+=" admin-token"
grep -qF "$viewer" "$work/op.log" && leak+=" viewer-token"
grep -qF "not-a-real-token" "$work/op.log" && leak+=" bad-token"
[[ -z $leak ]]
check "no token appears in the operator's debug log" $? "found:$leak"
finish
