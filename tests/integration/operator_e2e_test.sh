#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator end to end against a real kube-apiserver: two replicas with
# leader election, a Rack of 18 trays becoming 18 owned ComputeTrays and
# labelled Nodes, agent status simulated by status patches, the degraded
# cordon and its recovery (a foreign cordon survives), a kill -9 failover in
# the middle of that work, zero writes at steady state, graceful shutdown,
# and a deleted Rack's finalizer releasing its Nodes and deleting its trays
# (no garbage collector runs here). The admission webhook is on: both
# replicas serve it with the certificate they share through their Secret, and
# the configurations (the chart's, with clientConfig.url instead of a Service,
# which cannot route to host processes) name replica a, which leads; its
# restart after the kill -9 takes the same port.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (KUBECONFIG, KUBECTL, NVL72_CLUSTER_DIR set). Prints `ok - …`
# / `not ok - …` and `N passed, M failed`; exits non-zero on any failure.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

OPERATOR=${NVL72_BUILD:-build/rel}/bin/nvl72-operator
RACK=gb300-r07
NS=nvl72-system
LEASE=nvl72-operator
LEASE_S=15
STEADY_S=${NVL72_STEADY_SECONDS:-40}

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else not_ok "$1" "$3"; fi; }

work=$(mktemp -d /tmp/nvl72-op-e2e.XXXXXX)
declare -A PID PROBE METRICS DASH
cleanup() {
	local p
	for p in "${PID[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 1
	for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		for f in "$work"/op-*.log; do
			[[ -f $f ]] || continue
			echo "-- last lines of $(basename "$f")"
			tail -25 "$f" | cut -c1-300
		done
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
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }
now_s() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# wait_for SECONDS CMD...: polls CMD every 0.25 s until it succeeds.
wait_for() {
	local until=$(($(date +%s) + $1))
	shift
	while (($(date +%s) < until)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}

[[ -x $OPERATOR ]] || { not_ok "operator binary" "$OPERATOR missing (run make)"; finish; }
out=$("$OPERATOR" --version 2>&1) && [[ $out == "nvl72-operator "* ]] &&
	"$OPERATOR" --help | grep -q -- '--leader-election-renew-deadline' &&
	! "$OPERATOR" --rack-workers=0 >/dev/null 2>&1
check "--version, --help and a refused bad flag" $? "$(one_line "$out")"

# ------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1)
check "apply crds/" $? "$(one_line "$out")"
out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1)
check "apply the sample matrix" $? "$(one_line "$out")"
k create namespace "$NS" >/dev/null 2>&1

. tests/cluster/ports.sh
declare -A WH
WH[a]=$(free_port) && WH[b]=$(free_port 1 "${WH[a]}")
# The viewer token of the cluster harness (user viewer, group nvl72:viewers)
# is bound to the chart's nvl72-approver ClusterRole: a tenant window owner.
out=$(tests/local-webhooks.sh "https://127.0.0.1:${WH[a]}" --approver viewer | k apply -f - 2>&1)
check "webhook configurations (url: replica a) and the approver role for the viewer" $? "$(one_line "$out")"

nodes_yaml() {
	local i
	for i in $(seq -w 1 18); do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s-t%s\n  labels: {team: ml}\n  annotations: {example.com/owner: infra}\n' "$RACK" "$i"
	done
}
out=$(nodes_yaml | k apply -f - 2>&1)
rc=$?
# The operator's Node cache keeps neither the team label, the annotation,
# the image list nor the MemoryPressure condition (src/kube/trim.c): the
# release checks below show that its writes leave them on the server.
ready_cond='{"status":{"conditions":[{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory","message":"simulated","lastHeartbeatTime":"'$(date -u +%FT%TZ)'","lastTransitionTime":"'$(date -u +%FT%TZ)'"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated","lastHeartbeatTime":"'$(date -u +%FT%TZ)'","lastTransitionTime":"'$(date -u +%FT%TZ)'"}],"images":[{"names":["bench.invalid/tray-image:v1"],"sizeBytes":1000}]}}'
for i in $(seq -w 1 18); do
	k patch node "$RACK-t$i" --subresource=status --type=merge -p "$ready_cond" >/dev/null 2>&1 || rc=1
done
check "18 plain Nodes, Ready" $rc "$(one_line "$out")"

# start NAME [WEBHOOK_PORT]: one replica with loopback servers on free
# ports, its webhook on WH[NAME] (or WEBHOOK_PORT, a restart taking over a
# killed replica's port).
start_op() {
	local name=$1 log="$work/op-$1.log"
	WH[$name]=${2:-${WH[$name]}}
	POD_NAMESPACE=$NS "$OPERATOR" --leader-elect --identity="op-$name" --leader-election-id="$LEASE" \
		--leader-election-namespace="$NS" \
		--leader-election-lease-duration=${LEASE_S}s --leader-election-renew-deadline=10s \
		--leader-election-retry-period=2s --metrics-bind-address=127.0.0.1:0 \
		--health-probe-bind-address=127.0.0.1:0 --dashboard-bind-address=127.0.0.1:0 \
		--webhook-bind-address="127.0.0.1:${WH[$name]}" --tray-heartbeat-timeout=10m --log-level=info \
		>"$log" 2>&1 &
	PID[$name]=$!
	wait_for 20 grep -q 'msg=serving\|"msg":"serving"\| serving ' "$log" || return 1
	PROBE[$name]=$(grep -o 'probes=[0-9]*' "$log" | head -1 | cut -d= -f2)
	METRICS[$name]=$(grep -o 'metrics=[0-9]*' "$log" | head -1 | cut -d= -f2)
	DASH[$name]=$(grep -o 'dashboard=[0-9]*' "$log" | head -1 | cut -d= -f2)
}
readyz() { curl -fsS -m 2 "http://127.0.0.1:${PROBE[$1]}/readyz" | grep -qx ok; }
holder() { k -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
holder_is() { [[ $(holder) == op-$1_* ]]; }

# a first, so that it leads: the webhook configurations name its port.
start_op a && wait_for 30 holder_is a && start_op b
check "two replicas start, a leads" $? "holder=$(holder); see logs"
wait_for 30 readyz a && wait_for 30 readyz b
check "both replicas ready (informers synced; the standby too)" $? \
	"readyz a=$(curl -s "http://127.0.0.1:${PROBE[a]}/readyz?verbose") b=$(curl -s "http://127.0.0.1:${PROBE[b]}/readyz?verbose")"
wait_for 30 bash -c "[[ -n \$($KUBECTL -n $NS get lease $LEASE -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) ]]"
leader=$(holder)
leader=${leader#op-}
leader=${leader%%_*}
standby=$([[ $leader == a ]] && echo b || echo a)
[[ $leader == a || $leader == b ]]
check "one replica holds the Lease ($leader)" $? "holder=$(holder)"

# ------------------------------------------------ admission webhook ---
secret_ca() { k -n "$NS" get secret nvl72-operator-webhook-tls -o jsonpath='{.data.ca\.crt}'; }
bundles_current() {
	local ca
	ca=$(secret_ca) && [[ -n $ca ]] &&
		[[ $(k get validatingwebhookconfiguration nvl72-operator -o jsonpath='{.webhooks[*].clientConfig.caBundle}') == "$ca" ]] &&
		[[ $(k get mutatingwebhookconfiguration nvl72-operator -o jsonpath='{.webhooks[*].clientConfig.caBundle}') == "$ca" ]]
}
wait_for 30 bundles_current
check "the operator fills both caBundles from its webhook Secret" $? \
	"secret ca.crt $(secret_ca | cut -c1-24)…, validating $(k get validatingwebhookconfiguration nvl72-operator -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | cut -c1-24)…"
secret_ca | base64 -d >"$work/webhook-ca.crt"
# An empty review is a 400 from the webhook itself: TLS verified against the
# shared CA for 127.0.0.1, and the route answering, on each replica.
serves() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' -m 5 --cacert "$work/webhook-ca.crt" \
		-H 'Content-Type: application/json' -d '{}' "https://127.0.0.1:${WH[$1]}/validate") == 400 ]]
}
serves a && serves b
check "both replicas serve the webhook with the shared certificate (a :${WH[a]}, b :${WH[b]})" $? \
	"a=$(curl -s -m 5 --cacert "$work/webhook-ca.crt" -d '{}' "https://127.0.0.1:${WH[a]}/validate" 2>&1 | cut -c1-120)"

# ---------------------------------------------------- rack -> trays ---
out=$(k apply -f deploy/samples/rack-gb300.yaml -f deploy/samples/rackpartitions.yaml 2>&1)
check "kubectl apply the Rack and its two RackPartitions" $? "$(one_line "$out")"

trays_owned() {
	local n
	n=$(k get computetrays -o json | jq --arg r "$RACK" '[.items[] | select(.spec.rack == $r)
		| select(.metadata.name == ($r + "-t" + (if .spec.index < 10 then "0" else "" end) + (.spec.index|tostring)))
		| select(.metadata.ownerReferences[]? | .kind == "Rack" and .name == $r and .controller == true)] | length')
	[[ $n == 18 ]]
}
wait_for 30 trays_owned
check "18 ComputeTrays, named <rack>-tNN, owned by the Rack (controller)" $? \
	"$(k get computetrays 2>&1 | head -3)"
drv=$(k get computetray "$RACK-t05" -o jsonpath='{.spec.node} {.spec.index} {.spec.driver.version}')
[[ $drv == "$RACK-t05 5 580.95.05" ]]
check "tray spec: node, index and the desired stack's driver" $? "got '$drv'"

[[ $(k get rack "$RACK" -o jsonpath='{.metadata.finalizers}') == *'"nvl72.io/rack"'* ]]
check "the Rack carries the nvl72.io/rack finalizer" $? "finalizers: $(k get rack "$RACK" -o jsonpath='{.metadata.finalizers}')"

nodes_labelled() {
	local n
	n=$(k get nodes -l "nvl72.io/rack=$RACK" -o json | jq '[.items[] | select(.metadata.labels["nvl72.io/tray-index"] == (.metadata.name[-2:] | tonumber | tostring)) | select(.metadata.labels.team == "ml")] | length')
	[[ $n == 18 ]]
}
wait_for 30 nodes_labelled
check "18 Nodes labelled rack and tray index (their own labels kept)" $? \
	"$(k get nodes -L nvl72.io/rack,nvl72.io/tray-index 2>&1 | head -4 | tr '\n' ';')"

# --------------------------------------------- refused at kubectl apply ---
# denied TEXT OBJECT FIELD: kubectl apply of TEXT fails, and the message names
# the webhook, the object and the field.
denied() {
	local out rc
	out=$(k apply -f - <<<"$1" 2>&1)
	rc=$?
	echo "#   $(one_line "$out" | sed 's/^.*denied the request: //')"
	((rc != 0)) && [[ $out == *'admission webhook "validate.nvl72.io" denied the request'* &&
		$out == *"$2: $3"* ]]
}
denied 'apiVersion: nvl72.io/v1alpha1
kind: RackPartition
metadata: {name: gb300-r07-c}
spec: {rack: gb300-r07, trays: [9, 10]}' 'RackPartition "gb300-r07-c"' 'spec.trays: tray 9 of rack "gb300-r07" is already in partition "gb300-r07-a"' &&
	! k get rackpartition gb300-r07-c >/dev/null 2>&1
check "an overlapping RackPartition is refused at apply, naming spec.trays" $? "see the message above"
r08=$(yq -y '.metadata.name = "gb300-r08" | .spec.chassisSerial = "1821124000043"
	| .spec.computeTrays |= map(.node = ("gb300-r08-t" + (if .index < 10 then "0" else "" end) + (.index | tostring)))
	| .spec.computeTrays[4].node = "gb300-r07-t05"
	| .spec.switchTrays |= map(.oobAddress = ("10.40.8." + ((.index + 100) | tostring))
		| .bmcAddress = ("10.41.8." + ((.index + 100) | tostring)))' deploy/samples/rack-gb300.yaml)
denied "$r08" 'Rack "gb300-r08"' 'spec.computeTrays[4].node: node "gb300-r07-t05" is already tray 5 of rack "gb300-r07"' &&
	! k get rack gb300-r08 >/dev/null 2>&1
check "a Rack claiming a Node of another Rack is refused, naming spec.computeTrays[4].node" $? "see the message above"
denied 'apiVersion: nvl72.io/v1alpha1
kind: RackUpgrade
metadata: {name: gb300-r07-bogus}
spec:
  rack: gb300-r07
  target: {matrix: gb300-2026.10, stack: gb300-r999}
  class: routine
  reason: A stack nobody validated.' 'RackUpgrade "gb300-r07-bogus"' 'spec.target.stack' &&
	! k get rackupgrade gb300-r07-bogus >/dev/null 2>&1
check "a RackUpgrade to a stack not in the matrix is refused, naming spec.target.stack" $? "see the message above"

# The viewer (bound to nvl72-approver) forges approvedBy; the stamping
# webhook replaces it with the identity the apiserver authenticated, and
# binds the approval to the RackUpgrade it names (UID and target). The
# upgrade is the routine sample, created aborted (so that it never acts on
# the rack, which reports no upgrade in progress) and deleted again once
# the stamp is read.
out=$(k create --dry-run=client -o json -f deploy/samples/rackupgrade-routine.yaml |
	jq '.spec.abort = true' | k create -f - 2>&1)
check "the sample routine RackUpgrade, aborted, passes the webhook" $? "$(one_line "$out")"

# Every sample as a user applies it, through the webhook: a server-side dry
# run is admitted as a write is (the configurations declare sideEffects:
# None), and replica a, which the configurations name, counts each review it
# allowed. The routine upgrade the approval sample names exists by now.
allowed_reviews() {
	curl -fsS -m 5 "http://127.0.0.1:${METRICS[a]}/metrics" |
		awk '/^nvl72_webhook_admissions_total\{/ && /webhook="validate"/ && /result="allowed"/ { n += $NF }
			END { print n + 0 }'
}
for ns in $(grep -ohE '\bnamespace: *[a-z0-9-]+' deploy/samples/*.yaml | sed 's/.*: *//' | sort -u); do
	k create namespace "$ns" >/dev/null 2>&1
done
# kubectl sends nothing for an object equal to the stored one ("unchanged":
# the webhook admitted it when it was applied above); each created or
# configured object of a kind the validating webhook judges is one review.
before=$(allowed_reviews) bad="" nsamples=0 judged=0
for f in deploy/samples/*.yaml; do
	nsamples=$((nsamples + $(grep -c '^kind:' "$f")))
	out=$(k apply --dry-run=server -f "$f" 2>&1) || bad+="$f: $(one_line "$out"); "
	judged=$((judged + $(grep -cE '^(compatibilitymatrix|rack|rackpartition|rackupgrade)\.nvl72\.io/[^ ]+ (created|configured)' <<<"$out")))
done
after=$(allowed_reviews)
[[ -z $bad ]] && ((judged >= 3 && after - before >= judged))
check "every sample ($nsamples objects) passes the webhook in a server-side dry run ($judged reviewed)" $? \
	"${bad:-all applied} (allowed reviews $before -> $after; $(curl -fsS -m 5 "http://127.0.0.1:${METRICS[a]}/metrics" 2>&1 | grep -m3 admissions | tr '\n' ' '))"
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$work/viewer.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$server", certificate-authority: "$NVL72_CLUSTER_DIR/pki/ca.crt"}
users:
- name: viewer
  user: {tokenFile: "$NVL72_CLUSTER_DIR/pki/viewer.token"}
contexts:
- name: v
  context: {cluster: c, user: viewer}
current-context: v
EOF
out=$(timeout 60 "$KUBECTL" --kubeconfig "$work/viewer.kubeconfig" create -f - 2>&1 <<'EOF'
apiVersion: nvl72.io/v1alpha1
kind: UpgradeApproval
metadata: {name: gb300-r07-forged}
spec:
  upgrade: gb300-r07-r580-173
  layer: fabric
  decision: Approved
  approvedBy: {username: fabric-lead, uid: "0", groups: ["nvl72:platform"]}
EOF
)
check "the viewer, bound to nvl72-approver, creates an UpgradeApproval" $? "$(one_line "$out")"
by=$(k get upgradeapproval gb300-r07-forged -o jsonpath='{.spec.approvedBy.username} {.spec.approvedBy.uid} {.spec.approvedBy.groups}')
echo "#   stored approvedBy: $by"
[[ $by == "viewer viewer-uid "*'"nvl72:viewers"'* && $by != *nvl72:platform* ]]
check "a forged approvedBy comes back stamped with the real user (viewer, nvl72:viewers)" $? "got '$by'"
ref=$(k get upgradeapproval gb300-r07-forged -o jsonpath='{.spec.upgradeRef.uid} {.spec.upgradeRef.target.stack}')
uid=$(k get rackupgrade gb300-r07-r580-173 -o jsonpath='{.metadata.uid}')
[[ -n $uid && $ref == "$uid gb300-r580-173" ]]
check "the approval is bound to the upgrade's UID and target" $? "approval '$ref', upgrade uid '$uid'"
out=$(k delete rackupgrade gb300-r07-r580-173 --wait --timeout=60s 2>&1)
check "the sample RackUpgrade is deleted again" $? "$(one_line "$out")"

# ----------------------------------------------- simulated agents ---
CLUSTER=3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3
# tray_status INDEX READY HEARTBEAT: the merge patch an agent would send.
tray_status() {
	local i=$1 ready=$2 hb=$3 clique=1 g gpus=""
	((10#$i > 9)) && clique=2
	for g in 0 1 2 3; do
		gpus+="${gpus:+,}{\"index\":$g,\"uuid\":\"$(printf "GPU-%08d-0000-4000-8000-%012d" "$((10#$i))" "$g")\",\"vbios\":\"97.10.4A.00.1A\",\"fabric\":{\"state\":\"Completed\",\"status\":\"Success\",\"clusterUUID\":\"$CLUSTER\",\"cliqueId\":$clique,\"healthMask\":426,\"healthSummary\":\"Healthy\"}}"
	done
	cat <<EOF
{"status":{"observedGeneration":1,"heartbeatTime":"$hb","agentVersion":"sim",
 "driver":{"loaded":true,"version":"580.95.05","branch":"R580","flavour":"open"},
 "gpus":[$gpus],
 "fabric":{"state":"Completed","clusterUUID":"$CLUSTER","cliqueID":"$CLUSTER.$clique","healthSummary":"Healthy"},
 "imex":{"mode":"process","version":"580.95.05","daemonState":"Ready","domainState":"Up","peersConnected":18,"peersTotal":18},
 "conditions":[{"type":"Ready","status":"$ready","observedGeneration":1,"lastTransitionTime":"$hb","reason":"Simulated","message":""}]}}
EOF
}
report() { k patch computetray "$RACK-t$1" --subresource=status --type=merge -p "$(tray_status "$1" "$2" "$3")" >/dev/null; }

rack_writes() { grep -c "status written.*rack=$RACK " "$work/op-$leader.log"; }
w0=$(rack_writes)
t_rep=$(now_s)
rc=0
for i in $(seq -w 1 18); do report "$i" True "$(date -u +%FT%TZ)" || rc=1; done
check "agents report status on all 18 trays" $rc "a status patch failed"

rack_is() { # rack_is CONDITION STATUS
	[[ $(k get rack "$RACK" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}") == "$2" ]]
}
wait_for 30 bash -c "[[ \$($KUBECTL get rack $RACK -o jsonpath='{.status.capacity.readyTrays}') == 18 ]]" && rack_is Ready True
check "rack Ready with 18 ready trays" $? "$(k get rack "$RACK" -o jsonpath='{.status.conditions}' | cut -c1-300)"
# Each report changes the rack's summary; --rack-status-interval (1 s by
# default) lets at most one status write a second through, the last one
# carrying everything (the Ready check above reads it).
el=$(elapsed "$t_rep" "$(now_s)")
w=$(($(rack_writes) - w0))
awk -v w="$w" -v el="$el" 'BEGIN { exit !(w >= 1 && w <= int(el) + 2) }'
check "18 tray reports over $el s: $w Rack status writes, at most one a second" $? \
	"$w writes in $el s"
st=$(k get rack "$RACK" -o json | jq -r '[.status.stack, .status.fabric.state, .status.fabric.clusterUUID, (.status.fabric.cliques|length), .status.capacity.healthyGPUs, .status.observedGeneration] | map(tostring) | join(" ")')
[[ $st == "gb300-r580-95 Healthy $CLUSTER 2 72 1" ]]
check "rack status: stack, fabric, cliques, capacity, observedGeneration" $? "got '$st'"
rack_is FabricHealthy True && rack_is VersionsConsistent True && rack_is Degraded False && rack_is UpgradeInProgress False
check "conditions FabricHealthy, VersionsConsistent, Degraded=False, UpgradeInProgress=False" $? \
	"$(k get rack "$RACK" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {end}')"
echo "# kubectl get racks -o wide:"
k get racks -o wide | sed 's/^/#   /'
cols=$(k get racks --no-headers | tr -s ' ')
[[ $cols == "$RACK gb300 gb300-r580-95 18 Healthy "* ]]
check "kubectl get racks tells the story" $? "got '$cols'"
wait_for 20 bash -c "[[ \$($KUBECTL get node $RACK-t12 -o jsonpath='{.metadata.labels.nvl72\.io/clique}') == $CLUSTER.2 ]]"
[[ $(k get node "$RACK-t12" -o jsonpath='{.metadata.labels.nvl72\.io/partition}') == "$RACK-b" ]]
check "Node clique and partition labels from tray status and RackPartitions" $? \
	"$(k get node "$RACK-t12" -o jsonpath='{.metadata.labels}')"

# ------------------------------------------------------ degraded ---
# Someone else cordons t15 first: one unavailable tray, still below the threshold.
k cordon "$RACK-t15" >/dev/null
sleep 2
rack_is Degraded False
check "one foreign cordon: not degraded" $? "$(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}')"

t_down=$(now_s)
report 03 False "$(date -u +%FT%TZ)"
report 07 False "$(date -u +%FT%TZ)"
report 11 True "$(date -u -d '-1 hour' +%FT%TZ)" # stale heartbeat
all_cordoned() {
	local j
	j=$(k get nodes -l "nvl72.io/rack=$RACK" -o json)
	[[ $(jq '[.items[] | select(.spec.unschedulable == true)] | length' <<<"$j") == 18 ]] &&
		[[ $(jq --arg m "rack/$RACK" '[.items[] | select(.metadata.annotations["nvl72.io/cordoned-by"] == $m)] | length' <<<"$j") == 17 ]]
}
wait_for 30 all_cordoned
rc=$? # before the name's command substitutions, which set $? anew
check "3 trays down, threshold 2: every Node cordoned, 17 marked as ours ($(elapsed "$t_down" "$(now_s)") s)" $rc \
	"$(k get nodes -l "nvl72.io/rack=$RACK" -o custom-columns=N:.metadata.name,U:.spec.unschedulable --no-headers | tr -s ' \n' ' ')"
# The status follows the cordons within --rack-status-interval.
degraded_says_why() {
	msg=$(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}')
	rack_is Degraded True && [[ $msg == *"t03 TrayNotReady"* && $msg == *"t11 HeartbeatStale"* && $msg == *"t15 NodeCordoned"* ]]
}
wait_for 10 degraded_says_why
check "Degraded=True says why" $? "message: $msg"
echo "#   Degraded: $msg"
has_event() {
	k get events -n default -o json | jq -e --arg r "$1" --arg n "$RACK" \
		'[.items[] | select(.reason == $r and .involvedObject.name == $n)] | length > 0'
}
wait_for 20 has_event RackCordoned
check "a RackCordoned Event" $? "$(k get events -n default 2>&1 | tail -3 | tr '\n' ';')"
ready_14() {
	ready_msg=$(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.capacity.readyTrays}')
	[[ $ready_msg == "False 14" ]]
}
wait_for 10 ready_14
check "capacity counts 14 ready trays, rack not Ready (minHealthyTrays 16)" $? "got '$ready_msg'"

# ------------------------------------------- failover + recovery ---
# kill -9 the leader, then bring the trays back: the standby must take
# over within one lease duration and do the uncordon itself.
t_kill=$(now_s)
kill -KILL "${PID[$leader]}"
wait "${PID[$leader]}" 2>/dev/null
unset "PID[$leader]"
# The dead leader's last renewal (read after the kill, so it is final).
last_renew=$(k -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.renewTime}')
for i in 03 07 11; do report "$i" True "$(date -u +%FT%TZ)"; done
wait_for $((LEASE_S + 10)) holder_is "$standby"
rc=$?
# The Lease's acquireTime is the moment of takeover (polling adds latency).
acq=$(k -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.acquireTime}')
took=$(elapsed "$t_kill" "$(date -d "$acq" +%s.%N)")
since=$(elapsed "$(date -d "$last_renew" +%s.%N)" "$(date -d "$acq" +%s.%N)")
echo "# takeover: ${took} s after kill -9, ${since} s after the dead leader's last renewal (lease duration ${LEASE_S} s)"
# A standby may take over one lease duration after the last renewal it saw;
# the kill comes after that renewal, so kill-to-takeover is at most the
# same (plus the few ms the kill command itself takes).
((rc == 0)) && awk -v t="$took" -v s="$since" -v l="$LEASE_S" 'BEGIN { exit !(s <= l + 0.2 && t <= l + 0.2) }'
check "standby takes the Lease within one lease duration (${took} s after the kill)" $? \
	"holder=$(holder) since-renewal=${since}"

uncordoned() {
	local j
	j=$(k get nodes -l "nvl72.io/rack=$RACK" -o json)
	[[ $(jq '[.items[] | select(.spec.unschedulable == true)] | length' <<<"$j") == 1 ]] &&
		[[ $(jq -r '.items[] | select(.spec.unschedulable == true) | .metadata.name' <<<"$j") == "$RACK-t15" ]] &&
		[[ $(jq '[.items[] | select(.metadata.annotations["nvl72.io/cordoned-by"] != null)] | length' <<<"$j") == 0 ]]
}
wait_for 30 uncordoned
check "the new leader uncordons its 17 Nodes; the foreign cordon on t15 stays" $? \
	"$(k get nodes -l "nvl72.io/rack=$RACK" -o custom-columns=N:.metadata.name,U:.spec.unschedulable --no-headers | tr -s ' \n' ' ')"
wait_for 20 rack_is Degraded False
check "Degraded=False after recovery" $? "$(k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}')"
wait_for 20 has_event RackUncordoned
check "a RackUncordoned Event" $? "$(k get events -n default 2>&1 | tail -3 | tr '\n' ';')"
k uncordon "$RACK-t15" >/dev/null
wait_for 20 bash -c "[[ \$($KUBECTL get rack $RACK -o jsonpath='{.status.capacity.readyTrays}') == 18 ]]"
check "rack back to 18 ready trays" $? "$(k get racks --no-headers)"

# The killed replica comes back as a standby.
start_op "${leader}2" "${WH[$leader]}" && wait_for 30 readyz "${leader}2"
check "a restarted replica rejoins as a ready standby" $? "see its log"

# ---------------------------------------------------------- metrics ---
m=$(curl -fsS -m 5 "http://127.0.0.1:${METRICS[$standby]}/metrics")
grep -q "^nvl72_rack_trays_ready{rack=\"$RACK\"} 18" <<<"$m" &&
	grep -q "^nvl72_tray_ready{rack=\"$RACK\",tray=\"$RACK-t01\",node=\"$RACK-t01\"} 1" <<<"$m" &&
	grep -q '^leader_election_master_status{name="nvl72-operator"} 1' <<<"$m" &&
	grep -q '^controller_runtime_reconcile_total{controller="rack",result="success"}' <<<"$m" &&
	grep -q "^nvl72_gpu_fabric_status_ok{rack=\"$RACK\"" <<<"$m" &&
	(($(grep -cE "^nvl72_partition_phase\{rack=\"$RACK\",partition=\"$RACK-[ab]\",phase=\"[A-Za-z]+\"\} 1$" <<<"$m") == 2))
check "leader /metrics: rack, tray, GPU, partition, election and reconcile families" $? \
	"$(grep -E '^(nvl72_rack_trays_ready|leader_election)' <<<"$m" | tr '\n' ';')"
m2=$(curl -fsS -m 5 "http://127.0.0.1:${METRICS[${leader}2]}/metrics")
! grep -q '^nvl72_rack_' <<<"$m2" && grep -q '^leader_election_master_status{name="nvl72-operator"} 0' <<<"$m2"
check "standby /metrics: no domain series, master_status 0" $? "$(grep -E '^(nvl72_rack|leader_election)' <<<"$m2" | head -3 | tr '\n' ';')"

curl -fsS -m 2 "http://127.0.0.1:${PROBE[$standby]}/healthz" | grep -qx ok &&
	curl -fsS -m 2 "http://127.0.0.1:${DASH[$standby]}/" | grep -qi '<html' &&
	[[ $(curl -s -o /dev/null -w '%{http_code}' -m 2 "http://127.0.0.1:${DASH[$standby]}/ws") == 426 ]]
check "/healthz, the dashboard page and its /ws endpoint answer" $? "probe ${PROBE[$standby]}, dashboard ${DASH[$standby]}"

# The leader keeps the DeviceClass of the imex.nvl72.io DRA driver, by
# server-side apply as field manager nvl72-operator.
dc=$(k get deviceclass imex-channel.nvl72.io -o json --show-managed-fields 2>&1)
jq -e '.spec.selectors == [{"cel": {"expression": "device.driver == \"imex.nvl72.io\""}}] and
	any(.metadata.managedFields[]; .manager == "nvl72-operator" and .operation == "Apply")' <<<"$dc" >/dev/null 2>&1
check "DeviceClass imex-channel.nvl72.io applied by the leader (field manager nvl72-operator)" $? \
	"$(jq -c '{spec, m: [.metadata.managedFields[]? | {manager, operation}]}' <<<"$dc" 2>&1 | cut -c1-300)"

# ------------------------------------------------- steady state ---
# Writes the apiserver counted per resource, for write verbs.
writes() {
	k get --raw /metrics | awk -v res="$1" '
		/^apiserver_request_total\{/ && /verb="(POST|PUT|PATCH|DELETE|APPLY)"/ {
			if (match($0, /resource="[^"]*"/) && substr($0, RSTART + 10, RLENGTH - 11) == res) s += $NF
		}
		END { printf "%d", s }'
}
sleep 3
before=() after=()
resources=(racks computetrays nodes events resourceclaimtemplates deviceclasses leases)
for r in "${resources[@]}"; do before+=("$(writes "$r")"); done
sleep "$STEADY_S"
for r in "${resources[@]}"; do after+=("$(writes "$r")"); done
summary="" own=0
for i in "${!resources[@]}"; do
	d=$((after[i] - before[i]))
	summary+="${resources[$i]}=$d "
	[[ ${resources[$i]} != leases ]] && own=$((own + d))
done
echo "# writes over ${STEADY_S} s at steady state: $summary(leases: the election renewing, every 2 s)"
((own == 0))
check "zero writes to racks, computetrays, nodes, events, resourceclaimtemplates, deviceclasses over ${STEADY_S} s" $? "$summary"

# ------------------------------------ an upgrade deleted mid-flight ---
# The routine sample, not aborted, waits for its notice and approvals; the
# Rack says UpgradeInProgress. Deleted, it can no longer take its mark back
# from the Rack's status.upgrade: the Rack controller drops the mark of an
# upgrade the apiserver no longer has, with an event.
upgrade_cond() { k get rack "$RACK" -o jsonpath='{.status.conditions[?(@.type=="UpgradeInProgress")].status}'; }
in_progress() { [[ $(upgrade_cond) == True ]]; }
out=$(k create -f deploy/samples/rackupgrade-routine.yaml 2>&1) && wait_for 60 in_progress
check "a routine RackUpgrade that is not aborted makes the Rack UpgradeInProgress=True" $? \
	"$(one_line "$out") $(k get rack "$RACK" -o jsonpath='{.status.upgrade}')"
out=$(k delete rackupgrade gb300-r07-r580-173 --wait --timeout=60s 2>&1)
cleared() { [[ $(upgrade_cond) == False && -z $(k get rack "$RACK" -o jsonpath='{.status.upgrade.name}') ]]; }
wait_for 60 cleared
check "deleted mid-flight, it leaves the Rack: UpgradeInProgress=False, status.upgrade cleared" $? \
	"$(one_line "$out") $(upgrade_cond) $(k get rack "$RACK" -o jsonpath='{.status.upgrade}')"
gone_event() {
	k get events.events.k8s.io -n default -o json | jq -e --arg r "$RACK" '[.items[] | select(.reason == "UpgradeGone" and
		.regarding.name == $r and (.note | contains("RackUpgrade gb300-r07-r580-173 was deleted")))] | length == 1' >/dev/null
}
wait_for 30 gone_event
check "an UpgradeGone event on the Rack names the deleted upgrade" $? \
	"$(k get events.events.k8s.io -n default -o json | jq -c '[.items[] | select(.reason == "UpgradeGone") | .note]' | cut -c1-300)"

# ------------------------------------------------- graceful stop ---
t_term=$(now_s)
kill -TERM "${PID[$standby]}"
wait "${PID[$standby]}"
rc=$?
unset "PID[$standby]"
echo "# SIGTERM to exit: $(elapsed "$t_term" "$(now_s)") s"
[[ $rc == 0 ]] && grep -q 'lease released' "$work/op-$standby.log"
check "SIGTERM: the leader stops its controllers, releases the Lease and exits 0" $? "rc=$rc"
wait_for 10 holder_is "${leader}2"
check "the standby takes over the released Lease at once" $? "holder=$(holder)"

# ------------------------------------------------------ rack gone ---
k cordon "$RACK-t15" >/dev/null
k delete rack "$RACK" --wait=false >/dev/null
released() {
	[[ $(k get nodes -l "nvl72.io/rack" -o name | wc -l) == 0 ]] &&
		[[ $(k get nodes -o json | jq '[.items[] | select(.metadata.labels["nvl72.io/tray-index"] != null or .metadata.annotations["nvl72.io/cordoned-by"] != null)] | length') == 0 ]] &&
		[[ $(k get node "$RACK-t15" -o jsonpath='{.spec.unschedulable}') == true ]]
}
wait_for 20 released
check "a deleted Rack leaves its Nodes without our labels; a foreign cordon stays" $? \
	"$(k get nodes -L nvl72.io/rack --no-headers 2>&1 | head -3 | tr -s ' \n' ' ')"
# Every Node went through the operator's label, cordon and uncordon
# patches, all made from its trimmed cache.
n=$(k get nodes -o json | jq --arg p "$RACK-t" '[.items[] | select(.metadata.name | startswith($p))
	| select(.metadata.labels.team == "ml" and .metadata.annotations["example.com/owner"] == "infra"
		and (.status.images | length) == 1 and ([.status.conditions[].type] | sort) == ["MemoryPressure", "Ready"])] | length')
[[ $n == 18 ]]
check "the operator's writes keep what its Node cache drops: label, annotation, images, conditions" $? \
	"$n of 18 Nodes keep them"
# No kube-controller-manager runs here, so no garbage collector: the trays
# go because the finalizer deletes them, and then the Rack itself.
rack_gone() {
	[[ $(k get computetrays -o name | wc -l) == 0 ]] && ! k get rack "$RACK" >/dev/null 2>&1
}
wait_for 30 rack_gone
check "the finalizer deletes the 18 owned ComputeTrays, then the Rack goes" $? \
	"$(k get computetrays --no-headers 2>&1 | wc -l) trays left; rack: $(k get rack "$RACK" -o jsonpath='{.metadata.finalizers} {.metadata.deletionTimestamp}' 2>&1)"
wait_for 20 has_event RackReleased
check "a RackReleased Event" $? "$(k get events -n default 2>&1 | tail -3 | tr '\n' ';')"

finish
