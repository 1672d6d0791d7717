#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard's access rules against a real kube-apiserver, with its
# static test tokens: the page and its assets load without a token; the
# /ws feed sends nothing but a request for one until a token arrives in its
# first message that a TokenReview authenticates and a SubjectAccessReview
# allows "get" on /ws (4401 / 4403 otherwise); a namespace's ComputeDomains
# reach only a reader allowed to list them there; every POST needs a token
# allowed "post" on its path; --dashboard-anonymous-read opens the feed; and
# no token ever reaches the operator's log.
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
check "and with any token (the page itself needs no rights)" $? ""

# feed [TOKEN_FILE]: reads the feed for 3 s (sending the token of the file
# first, as the page does) and prints each message, then "CLOSE <code>" if
# the server closed it.
feed() {
	python3 - "$port" "$@" <<'PY'
import json, socket, sys
sys.path.insert(0, "tests/integration")
import cdp
c = cdp.Conn("127.0.0.1", int(sys.argv[1]), "/ws")
c.sock.settimeout(3)
try:
    print(c.recv_text())
    if len(sys.argv) > 2:
        c.send_text(json.dumps({"token": open(sys.argv[2]).read().strip()}))
    while True:
        print(c.recv_text())
except socket.timeout:
    pass
except OSError:
    print("CLOSE %s" % c.close_code)
PY
}
topics() { grep -o '"topic":"[^"]*"' "$1" | sort -u | tr '\n' ' '; }
pki=$NVL72_CLUSTER_DIR/pki
printf 'made-up-%s' "$RANDOM$RANDOM" >"$work/bad.token"

rack_seen() { feed "$pki/admin.token" >"$work/feed.txt" && grep -q '"topic":"rack/gb300-r07"' "$work/feed.txt"; }
wait_for 60 rack_seen
check "a system:masters token, sent as the feed's first message, gets the rack" $? "$(head -c 300 "$work/feed.txt")"
feed >"$work/none.txt"
[[ $(grep -c '"topic"' "$work/none.txt") == 1 ]] && grep -q '"topic":"auth".*"required":true' "$work/none.txt"
check "without a token the feed sends only the request for one" $? "$(topics "$work/none.txt")"
out=$(feed "$work/bad.token")
[[ $out == *"CLOSE 4401"* && $out != *'"topic":"rack/'* ]]
check "a token the TokenReview does not authenticate is closed with 4401" $? "$out"
out=$(feed "$pki/viewer.token")
[[ $out == *"CLOSE 4403"* && $out != *'"topic":"rack/'* ]]
check "an authenticated user without get on /ws is closed with 4403" $? "$out"
grep -q 'access reviewed.*user=viewer verb=get path=/ws allowed=false' "$work/op.log"
check "the refusal is logged with the user, verb and path" $? "$(grep 'access' "$work/op.log" | tail -2)"

# Two tenants' ComputeDomains (no agents: they stay unplaced, but are on the
# feed), then the viewer given the chart's nvl72-dashboard-viewer rule.
out=$(for ns in team-a team-b; do
	k create namespace "$ns" 2>&1
	printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: job-%s, namespace: %s}\nspec: {numNodes: 2, selector: {rack: gb300-r07}}\n' \
		"$ns" "$ns" | k apply -f - 2>&1
done)
check "a ComputeDomain in team-a and one in team-b" $? "$out"
# grant ROLE VERB URL: a ClusterRole allowing VERB on the non-resource URL,
# bound to the user viewer.
grant() {
	k create clusterrole "$1" --verb="$2" --non-resource-url="$3" 2>&1 &&
		k create clusterrolebinding "$1-viewer" --clusterrole="$1" --user=viewer 2>&1
}
out=$(grant nvl72-dashboard-viewer get /ws)
check "grant the viewer get on /ws (nvl72-dashboard-viewer)" $? "$out"
grep -q 'nonResourceURLs: \[/ws\]' deploy/helm/nvl72-operator/templates/rbac-tenant.yaml
check "the chart's nvl72-dashboard-viewer grants the same" $? ""
both() { feed "$pki/admin.token" >"$work/admin.txt" && grep -q '"topic":"domains/team-a"' "$work/admin.txt" &&
	grep -q '"topic":"domains/team-b"' "$work/admin.txt"; }
wait_for 60 both
check "the admin's feed has both namespaces' ComputeDomains" $? "$(topics "$work/admin.txt")"
viewer_reads() { feed "$pki/viewer.token" >"$work/viewer.txt" && grep -q '"topic":"rack/gb300-r07"' "$work/viewer.txt"; }
wait_for 30 viewer_reads
check "the viewer's feed now has the rack" $? "$(head -c 300 "$work/viewer.txt")"
! grep -q '"topic":"domains/\|"topic":"events/\|team-a\|team-b' "$work/viewer.txt"
check "but no tenant's ComputeDomain or Event: it may list them in no namespace" $? "$(topics "$work/viewer.txt")"
out=$(k -n team-a create role domains-reader --verb=list --resource=computedomains.nvl72.io 2>&1) &&
	out=$(k -n team-a create rolebinding domains-reader-viewer --role=domains-reader --user=viewer 2>&1)
check "grant the viewer list on computedomains in team-a only" $? "$out"
team_a() { feed "$pki/viewer.token" >"$work/viewer.txt" && grep -q '"topic":"domains/team-a"' "$work/viewer.txt"; }
wait_for 30 team_a
check "the viewer's feed now has team-a's ComputeDomain" $? "$(topics "$work/viewer.txt")"
grep -q '"name":"job-team-a"' "$work/viewer.txt" && ! grep -q 'team-b' "$work/viewer.txt"
check "and nothing of team-b" $? "$(topics "$work/viewer.txt")"
grep -q 'access reviewed.*user=viewer verb=list resource=computedomains.nvl72.io namespace=team-b allowed=false' "$work/op.log"
check "team-b was asked of the API server and refused" $? "$(grep 'resource=' "$work/op.log" | tail -2)"

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

out=$(grant nvl72-dashboard-actions post '/actions/*')
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
cat "$work"/*.txt >"$work/feeds"
grep -qF "$secret" "$work/feeds" && leak+=" secret-data"
grep -qF "$admin" "$work/feeds" && leak+=" admin-token"
grep -qF "$viewer" "$work/feeds" && leak+=" viewer-token"
[[ -z $leak ]]
check "no feed holds Secret data or a token" $? "found:$leak"

# ------------------------------------------------- anonymous reading ---
kill -TERM "$opid" 2>/dev/null
wait "$opid" 2>/dev/null
cat "$work/op.log" >>"$work/op-all.log"
"$OPERATOR" --metrics-bind-address=0 --health-probe-bind-address=0 \
	--dashboard-bind-address=127.0.0.1:0 --webhook-bind-address=0 --dashboard-anonymous-read \
	--log-level=debug >"$work/op.log" 2>&1 &
opid=$!
wait_for 30 grep -q 'dashboard=[0-9]' "$work/op.log"
port=$(grep -o 'dashboard=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
open_feed() { feed >"$work/anon.txt" && grep -q '"topic":"rack/gb300-r07"' "$work/anon.txt" &&
	grep -q '"topic":"domains/team-b"' "$work/anon.txt"; }
wait_for 60 open_feed
check "with --dashboard-anonymous-read the feed, both tenants included, needs no token" $? "$(topics "$work/anon.txt")"
grep -q 'dashboard feed open to anyone.*--dashboard-anonymous-read' "$work/op.log"
check "and the operator warns that it is open" $? "$(grep -i 'anonymous' "$work/op.log" | head -2)"
base=http://127.0.0.1:$port
c=$(post "$base/actions/test")
[[ $c == 401 ]]
check "a POST still needs a token (401)" $? "got $c"
cat "$work/op.log" >>"$work/op-all.log"

leak=""
grep -qF "$admin" "$work/op-all.log" && leak+=" admin-token"
grep -qF "$viewer" "$work/op-all.log" && leak+=" viewer-token"
grep -qF "not-a-real-token" "$work/op-all.log" && leak+=" bad-token"
grep -qF "$(cat "$work/bad.token")" "$work/op-all.log" && leak+=" made-up-token"
[[ -z $leak ]]
check "no token appears in the operator's debug logs" $? "found:$leak"
finish
