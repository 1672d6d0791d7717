#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a tray's own credentials can do to the operator's Leases, against a
# real kube-apiserver with the chart's RBAC and admission policies applied.
# Tokens are minted for the chart's agent ServiceAccount with a TokenRequest
# bound to a Pod on a Node, as the kubelet mints them for the DaemonSet, so
# they carry the Node's name (authentication.kubernetes.io/node-name):
#  - a tray's token renews its own tray's heartbeat Lease, and the real
#    agent, run with that token, keeps it renewed and reports its tray's
#    status; the token cannot write another tray's status;
#  - it cannot take, rewrite, delete or re-create the operator's leader
#    Lease (in the operator's namespace; the agents have their own, the
#    chart's default, where their heartbeats are), nor plant one of that
#    name in its own namespace; it cannot touch another tray's Lease, plant
#    a Lease for a tray on another Node or one naming another holder, or
#    change a Lease that is not a heartbeat; a token bound to no Node
#    writes no Lease;
#  - a leader Lease that claims a year (as a forged one would) does not keep
#    the real operator from leading: it is judged by the operator's own
#    lease duration, with a warning naming the holder.
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane (KUBECONFIG, KUBECTL, NVL72_CLUSTER_DIR set). Prints `ok - …`
# / `not ok - …` and `N passed, M failed`; exits non-zero on any failure.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane folder}"
export KUBECONFIG

BIN=${NVL72_BUILD:-build/rel}/bin
SIM=$(dirname "${NVL72_BUILD:-build/rel}")/sim
NS=nvl72-system  # the operator's, with its leader Lease
ANS=nvl72-agents # the agents' own, the chart's default: their heartbeats
SA=nvl72-operator-agent
LEADER=nvl72-operator
NODE_A=gb300-r07-t03 TRAY_A=gb300-r07-t03
NODE_B=gb300-r07-t04 TRAY_B=gb300-r07-t04

. "$(dirname "$0")/lib/tap.sh"

[[ -x $BIN/nvl72-operator && -x $BIN/nvl72-agent && -x $SIM/bin/simctl ]] ||
	{ not_ok "binaries" "operator, agent or simulator missing (make all sim)"; finish; }
pki=$NVL72_CLUSTER_DIR/pki
server=$(awk '/server:/ {print $2; exit}' "$KUBECONFIG")
work=$(mktemp -d /tmp/nvl72-tray-token.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		for f in "$work"/*.log; do
			[[ -f $f ]] || continue
			echo "-- last lines of $(basename "$f")"
			tail -8 "$f" | cut -c1-300
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the chart, two trays on two Nodes, agent pods on them -----------------
out=$(k create namespace "$NS" 2>&1) &&
	out=$(k apply -f deploy/manifests/nvl72-operator.yaml 2>&1) &&
	out=$(k wait --for=condition=Established --timeout=60s crd -l app.kubernetes.io/part-of=nvl72-operator 2>&1)
check "the chart's manifests apply (RBAC, ServiceAccounts, admission policies)" $? "$out"
tray() { # tray NAME INDEX NODE
	sed -e "s/^  name: gb300-r07-t03/  name: $1/" -e "s/^  index: 3/  index: $2/" \
		-e "s/tray-index: \"3\"/tray-index: \"$2\"/" -e "s/^  node: gb300-r07-t03/  node: $3/" \
		deploy/samples/computetray.yaml
}
{
	tray "$TRAY_A" 3 "$NODE_A"
	echo ---
	tray "$TRAY_B" 4 "$NODE_B"
	for n in "$NODE_A" "$NODE_B"; do
		printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$n"
		printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: agent-%s, namespace: %s}\n' "$n" "$ANS"
		printf 'spec:\n  nodeName: %s\n  serviceAccountName: %s\n  containers: [{name: agent, image: nvl72-agent}]\n' "$n" "$SA"
	done
	printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: agent-unscheduled, namespace: %s}\n' "$ANS"
	printf 'spec:\n  serviceAccountName: %s\n  containers: [{name: agent, image: nvl72-agent}]\n' "$SA"
} >"$work/objects.yaml"
out=$(k apply -f "$work/objects.yaml" 2>&1)
check "two ComputeTrays, their Nodes and an agent Pod on each" $? "$out"
# The leader Lease as a running operator holds it.
now=$(date -u +%FT%T.000000Z)
out=$(k -n "$NS" create -f - 2>&1 <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $LEADER}
spec: {holderIdentity: nvl72-operator-7d9f_0a1b2c3d, leaseDurationSeconds: 15, acquireTime: "$now", renewTime: "$now"}
EOF
)
check "the operator's leader Lease exists" $? "$out"

mint() { # mint POD|"": a token of the agent ServiceAccount, bound to the Pod
	local args=()
	[[ -n $1 ]] && args=(--bound-object-kind Pod --bound-object-name "$1")
	k -n "$ANS" create token "$SA" --duration 1h "${args[@]}"
}
tok_a=$(mint "agent-$NODE_A") && tok_b=$(mint "agent-$NODE_B") &&
	tok_none=$(mint agent-unscheduled) && tok_plain=$(mint "")
check "TokenRequests for the agent ServiceAccount (bound to Pods, and unbound)" $? "kubectl create token failed"
claims=$(cut -d. -f2 <<<"$tok_a" | tr '_-' '/+' | base64 -d 2>/dev/null)
[[ $claims == *"\"node\":{\"name\":\"$NODE_A\""* ]]
check "the token bound to the Pod on $NODE_A carries the Node's name" $? "claims: $claims"

leases=$server/apis/coordination.k8s.io/v1/namespaces/$ANS/leases
opleases=$server/apis/coordination.k8s.io/v1/namespaces/$NS/leases
# call TOKEN METHOD URL [BODY [CONTENT-TYPE]] -> HTTP code; body in $work/resp
call() {
	local data=()
	[[ $# -ge 4 ]] && data=(--data "$4" -H "Content-Type: ${5:-application/json}")
	curl -s -o "$work/resp" -w '%{http_code}' --max-time 20 --cacert "$pki/ca.crt" \
		-H "Authorization: Bearer $1" -X "$2" "${data[@]}" "$3"
}
lease_json() { # NAME HOLDER [TRAY-LABEL]
	printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"%s","labels":{"app.kubernetes.io/component":"agent","nvl72.io/tray":"%s"}},"spec":{"holderIdentity":"%s","leaseDurationSeconds":20,"renewTime":"%s"}}' \
		"$1" "${3:-$1}" "$2" "$(date -u +%FT%T.000000Z)"
}
merge='application/merge-patch+json'
# refused NAME WANT-CODE PATTERN TOKEN METHOD URL [BODY [TYPE]]
refused() {
	local name=$1 want=$2 pat=$3 c
	shift 3
	c=$(call "$@")
	[[ $c == "$want" ]] && grep -q -- "$pat" "$work/resp"
	check "$name" $? "HTTP $c: $(jq -r '.message // empty' "$work/resp" 2>/dev/null | cut -c1-300)"
}
allowed() { # NAME TOKEN METHOD URL [BODY [TYPE]]
	local name=$1 c
	shift
	c=$(call "$@")
	[[ $c == 200 || $c == 201 ]]
	check "$name" $? "HTTP $c: $(jq -r '.message // empty' "$work/resp" 2>/dev/null | cut -c1-300)"
}

# The apiserver loads a new policy and its parameters in the background:
# wait (dry runs) until it refuses the leader Lease and knows both trays.
in_force() {
	[[ $(call "$tok_a" POST "$leases?dryRun=All" "$(lease_json "$LEADER" "nvl72-agent/$NODE_A")") == 403 ]] &&
		[[ $(call "$tok_a" POST "$leases?dryRun=All" "$(lease_json "$TRAY_B" "nvl72-agent/$NODE_A")") == 403 ]] &&
		[[ $(call "$tok_a" POST "$leases?dryRun=All" "$(lease_json "$TRAY_A" "nvl72-agent/$NODE_A")") == 201 ]]
}
wait_for 60 in_force
check "the own-lease admission policy is in force" $? "HTTP $(call "$tok_a" POST "$leases?dryRun=All" \
	"$(lease_json "$LEADER" "nvl72-agent/$NODE_A")"): $(jq -r '.message // empty' "$work/resp" 2>/dev/null)"

# ---- its own Lease ------------------------------------------------------------
allowed "tray $TRAY_A's token creates its own heartbeat Lease" \
	"$tok_a" POST "$leases" "$(lease_json "$TRAY_A" "nvl72-agent/$NODE_A")"
allowed "tray $TRAY_A's token renews its own Lease (merge patch, as the agent does)" \
	"$tok_a" PATCH "$leases/$TRAY_A" \
	"{\"spec\":{\"holderIdentity\":\"nvl72-agent/$NODE_A\",\"leaseDurationSeconds\":20,\"renewTime\":\"$(date -u +%FT%T.000000Z)\"}}" "$merge"
allowed "tray $TRAY_B's token creates its own heartbeat Lease" \
	"$tok_b" POST "$leases" "$(lease_json "$TRAY_B" "nvl72-agent/$NODE_B")"

# ---- the leader Lease -------------------------------------------------------------
# It is in the operator's namespace, where the agents' Role grants nothing.
year='{"spec":{"holderIdentity":"nvl72-agent/'$NODE_A'","leaseDurationSeconds":31536000}}'
refused "a tray's token cannot take the leader Lease for a year (merge patch)" 403 "cannot patch" \
	"$tok_a" PATCH "$opleases/$LEADER" "$year" "$merge"
k -n "$NS" get lease "$LEADER" -o json | jq --arg h "nvl72-agent/$NODE_A" \
	'.spec.holderIdentity = $h | .spec.leaseDurationSeconds = 31536000' >"$work/leader.json"
refused "a tray's token cannot replace the leader Lease (PUT)" 403 "cannot update" \
	"$tok_a" PUT "$opleases/$LEADER" "$(cat "$work/leader.json")"
refused "a tray's token cannot delete the leader Lease" 403 "cannot delete" \
	"$tok_a" DELETE "$opleases/$LEADER"
holder=$(k -n "$NS" get lease "$LEADER" -o jsonpath='{.spec.holderIdentity}/{.spec.leaseDurationSeconds}')
[[ $holder == nvl72-operator-7d9f_0a1b2c3d/15 ]]
check "the leader Lease is unchanged" $? "now $holder"
k -n "$NS" delete lease "$LEADER" >/dev/null
refused "a tray's token cannot create the leader Lease while none exists" 403 "cannot create" \
	"$tok_a" POST "$opleases" "$(lease_json "$LEADER" "nvl72-agent/$NODE_A")"
# Where the agents share the operator's namespace (agent.namespace ""),
# the own-lease policy refuses the leader Lease by name; it holds in the
# agents' namespace too.
refused "a tray's token cannot plant a Lease named as the leader's in its own namespace" 403 \
	"leader election Lease" "$tok_a" POST "$leases" "$(lease_json "$LEADER" "nvl72-agent/$NODE_A")"

# ---- other trays' Leases ------------------------------------------------------------
refused "a tray's token cannot renew another tray's Lease" 403 "own Node as holder" \
	"$tok_a" PATCH "$leases/$TRAY_B" "{\"spec\":{\"renewTime\":\"$(date -u +%FT%T.000000Z)\"}}" "$merge"
refused "a tray's token cannot take another tray's Lease" 403 "on another Node" \
	"$tok_a" PATCH "$leases/$TRAY_B" "{\"spec\":{\"holderIdentity\":\"nvl72-agent/$NODE_A\"}}" "$merge"
k -n "$ANS" delete lease "$TRAY_B" >/dev/null
refused "a tray's token cannot plant a Lease for a tray on another Node" 403 "on another Node" \
	"$tok_a" POST "$leases" "$(lease_json "$TRAY_B" "nvl72-agent/$NODE_A")"
refused "a tray's token cannot write its own Lease naming another holder" 403 "own Node as holder" \
	"$tok_a" PATCH "$leases/$TRAY_A" "{\"spec\":{\"holderIdentity\":\"nvl72-agent/$NODE_B\"}}" "$merge"
refused "a tray's token cannot strip the heartbeat label off its Lease" 403 "heartbeat Leases" \
	"$tok_a" PATCH "$leases/$TRAY_A" '{"metadata":{"labels":{"nvl72.io/tray":null}}}' "$merge"
printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"other-controller"},"spec":{"holderIdentity":"someone"}}' |
	k -n "$ANS" create -f - >/dev/null
refused "a tray's token cannot take a Lease that is no heartbeat" 403 "heartbeat Leases" \
	"$tok_a" PATCH "$leases/other-controller" "{\"spec\":{\"holderIdentity\":\"nvl72-agent/$NODE_A\"}}" "$merge"
refused "a tray's token cannot write Leases in another namespace" 403 "cannot create" \
	"$tok_a" POST "$server/apis/coordination.k8s.io/v1/namespaces/default/leases" \
	"$(lease_json "$TRAY_A" "nvl72-agent/$NODE_A")"
refused "a token bound to a Pod on no Node writes no Lease" 403 "not bound to a Node" \
	"$tok_none" PATCH "$leases/$TRAY_A" "{\"spec\":{\"renewTime\":\"$(date -u +%FT%T.000000Z)\"}}" "$merge"
refused "a token bound to nothing writes no Lease" 403 "not bound to a Node" \
	"$tok_plain" PATCH "$leases/$TRAY_A" "{\"spec\":{\"renewTime\":\"$(date -u +%FT%T.000000Z)\"}}" "$merge"

# ---- another tray's status -------------------------------------------------------------
refused "a tray's token cannot write another tray's status" 403 "own Node" \
	"$tok_a" PATCH "$server/apis/nvl72.io/v1alpha1/computetrays/$TRAY_B/status" \
	'{"status":{"heartbeatTime":"2026-11-29T12:00:00Z"}}' "$merge"

# ---- the real agent with its tray's token ---------------------------------------------
printf '%s' "$tok_a" >"$work/agent.token"
chmod 600 "$work/agent.token"
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "%s", certificate-authority: "%s"}\nusers:\n- name: u\n  user: {tokenFile: "%s"}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: %s}\ncurrent-context: x\n' \
	"$server" "$pki/ca.crt" "$work/agent.token" "$ANS" >"$work/agent.kubeconfig"
chmod 600 "$work/agent.kubeconfig"
k -n "$ANS" delete lease "$TRAY_A" >/dev/null
ipb=$((60 + $$ % 100))
"$SIM/bin/simctl" create "$work/sim" --trays 1 --ip-base "$ipb" >/dev/null ||
	{ not_ok "simulated tray" "simctl failed"; finish; }
d=$work/sim/tray-01
NVL72_SIM_ROOT=$d "$BIN/nvl72-agent" --kubeconfig "$work/agent.kubeconfig" \
	--node-name "$NODE_A" --node-ip "127.0.0.$((ipb + 1))" --lease-namespace "$ANS" \
	--heartbeat-period 1s --lease-duration 5s --host-root "$d/host" \
	--nvml-path "$SIM/lib/libnvidia-ml.so.1" --systemctl "$SIM/bin/systemctl" \
	--modprobe "$SIM/bin/modprobe" --modinfo "$SIM/bin/modinfo" \
	--imex-bin "$SIM/bin/nvidia-imex" --imex-ctl "$SIM/bin/nvidia-imex-ctl" \
	--installer-arg "$SIM/bin/nvl72-sim-installer" --installer-arg '{version}' \
	>"$work/agent.log" 2>&1 &
pids+=($!)
renew_of() { k -n "$ANS" get lease "$TRAY_A" -o jsonpath='{.spec.holderIdentity} {.spec.renewTime}' 2>/dev/null; }
first=""
created() { first=$(renew_of) && [[ $first == "nvl72-agent/$NODE_A "* ]]; }
renewed() { local now; now=$(renew_of) && [[ $now == "nvl72-agent/$NODE_A "* && $now != "$first" ]]; }
wait_for 60 created && wait_for 30 renewed
check "the agent, with its tray's token, creates and renews its heartbeat Lease" $? \
	"lease: $(renew_of); $(grep -m2 'Lease' "$work/agent.log")"
hb() { [[ -n $(k get computetray "$TRAY_A" -o jsonpath='{.status.heartbeatTime}' 2>/dev/null) ]]; }
wait_for 60 hb
check "the agent, with its tray's token, reports its tray's status" $? \
	"$(grep -m2 -i 'forbidden\|denied' "$work/agent.log")"
! grep -q 'renewal failed' "$work/agent.log"
check "no heartbeat renewal of the agent was refused" $? "$(grep -m1 'renewal failed' "$work/agent.log")"

# ---- a forged leader Lease does not stop the operator ------------------------------------
now=$(date -u +%FT%T.000000Z)
out=$(k -n "$NS" create -f - 2>&1 <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $LEADER}
spec: {holderIdentity: "nvl72-agent/$NODE_A", leaseDurationSeconds: 31536000, acquireTime: "$now", renewTime: "$now"}
EOF
)
check "a leader Lease claiming a year, held by a tray (written as admin)" $? "$out"
admin_token=$(cat "$pki/admin.token")
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "%s", certificate-authority: "%s"}\nusers:\n- name: u\n  user: {token: "%s"}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n' \
	"$server" "$pki/ca.crt" "$admin_token" >"$work/op.kubeconfig"
chmod 600 "$work/op.kubeconfig"
POD_NAMESPACE=$NS "$BIN/nvl72-operator" --kubeconfig "$work/op.kubeconfig" --leader-elect \
	--leader-election-id "$LEADER" --leader-election-lease-duration 4s \
	--leader-election-renew-deadline 3s --leader-election-retry-period 1s \
	--metrics-bind-address 0 --dashboard-bind-address 0 --webhook-bind-address 0 \
	--health-probe-bind-address 0 >"$work/operator.log" 2>&1 &
pids+=($!)
leads() { grep -q 'became leader' "$work/operator.log"; }
wait_for 90 leads
check "the operator leads despite the year-long claim (judged by its own 4 s)" $? \
	"$(grep -m3 'lease' "$work/operator.log")"
n=$(grep -c 'far above ours' "$work/operator.log")
[[ $n == 1 ]] && grep 'far above ours' "$work/operator.log" | grep -q "holder=\"nvl72-agent/$NODE_A\""
check "the operator warned once, naming the holder" $? "$n warnings: $(grep -m1 'far above' "$work/operator.log")"
holder=$(k -n "$NS" get lease "$LEADER" -o jsonpath='{.spec.holderIdentity}/{.spec.leaseDurationSeconds}')
[[ $holder != nvl72-agent/* && $holder == */4 ]]
check "the operator now holds the leader Lease with its own duration" $? "holder $holder"
finish
