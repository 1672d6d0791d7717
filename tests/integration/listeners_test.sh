#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every port the operator and the agent open, probed without a token, with
# a token the TokenReview does not know, and with tokens that authenticate
# but lack the right (the viewer, a fresh ServiceAccount), against a real
# kube-apiserver, both running with --metrics-require-token as the chart
# runs the operator:
#  - the ports each process listens on are exactly the ones probed here, so
#    a new listener fails this suite until it is added;
#  - /metrics on the metrics port and on the webhook's HTTPS port (the same
#    registry) answers 401 / 401 / 403 / 403 and no series, and 200 to a
#    token allowed "get" on /metrics; the same on the agent's port;
#  - ports that serve no registry (probes, dashboard) have no /metrics;
#  - a dashboard POST needs a token allowed "post" on its path (401 / 403);
#  - /healthz and /readyz stay open on every port (the kubelet sends no
#    token) and say only ok or which check fails.
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
NS=nvl72-system
NODE=gb300-r07-t03

. "$(dirname "$0")/lib/tap.sh"

[[ -x $BIN/nvl72-operator && -x $BIN/nvl72-agent && -x $SIM/bin/simctl ]] ||
	{ not_ok "binaries" "operator, agent or simulator missing (make all sim)"; finish; }
command -v ss >/dev/null || { not_ok "ss is available" "install the Debian package iproute2"; finish; }
pki=$NVL72_CLUSTER_DIR/pki
admin=$(cat "$pki/admin.token")
viewer=$(cat "$pki/viewer.token")
server=$(awk '/server:/ {print $2; exit}' "$KUBECONFIG")
work=$(mktemp -d /tmp/nvl72-listeners.XXXXXX)
pids=()
cleanup() {
	local p f
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	if ((failed > 0)); then
		for f in "$work"/*.log; do
			echo "-- last lines of $(basename "$f")"
			tail -8 "$f" | cut -c1-300
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s -f crds/ 2>&1) &&
	out=$(k create namespace "$NS" 2>&1) &&
	out=$(k apply -f deploy/samples/computetray.yaml 2>&1) &&
	out=$(printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$NODE" | k apply -f - 2>&1) &&
	out=$(k -n "$NS" create serviceaccount scraper 2>&1) &&
	sa_token=$(k -n "$NS" create token scraper 2>&1)
check "CRDs, a tray and its Node, a ServiceAccount without rights and its token" $? "$out"
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "%s", certificate-authority: "%s"}\nusers:\n- name: u\n  user: {token: "%s"}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n' \
	"$server" "$pki/ca.crt" "$admin" >"$work/admin.kubeconfig"
chmod 600 "$work/admin.kubeconfig"

# ---- the two processes, every listener on loopback -----------------------------
base=$((20000 + RANDOM % 10000))
probe=$base dash=$((base + 1)) hook=$((base + 2)) metrics=$((base + 3)) agent=$((base + 4))
POD_NAMESPACE=$NS "$BIN/nvl72-operator" --kubeconfig "$work/admin.kubeconfig" --metrics-require-token \
	--health-probe-bind-address "127.0.0.1:$probe" --dashboard-bind-address "127.0.0.1:$dash" \
	--webhook-bind-address "127.0.0.1:$hook" --metrics-bind-address "127.0.0.1:$metrics" \
	>"$work/operator.log" 2>&1 &
op_pid=$!
pids+=("$op_pid")
"$SIM/bin/simctl" create "$work/sim" --trays 1 --ip-base 80 >/dev/null ||
	{ not_ok "simulated tray" "simctl failed"; finish; }
d=$work/sim/tray-01
NVL72_SIM_ROOT=$d "$BIN/nvl72-agent" --kubeconfig "$work/admin.kubeconfig" --node-name "$NODE" \
	--node-ip 127.0.0.81 --lease-namespace "$NS" --host-root "$d/host" \
	--metrics-bind-address "127.0.0.1:$agent" --metrics-require-token \
	--nvml-path "$SIM/lib/libnvidia-ml.so.1" --systemctl "$SIM/bin/systemctl" \
	--modprobe "$SIM/bin/modprobe" --modinfo "$SIM/bin/modinfo" \
	--imex-bin "$SIM/bin/nvidia-imex" --imex-ctl "$SIM/bin/nvidia-imex-ctl" \
	>"$work/agent.log" 2>&1 &
agent_pid=$!
pids+=("$agent_pid")
up() { curl -fs -m 2 "http://127.0.0.1:$1/healthz" >/dev/null; }
hook_up() { k -n "$NS" get secret nvl72-operator-webhook-tls >/dev/null && up "$probe" &&
	curl -s -k -m 2 -o /dev/null "https://127.0.0.1:$hook/healthz"; }
wait_for 60 up "$probe" && wait_for 60 hook_up && wait_for 60 up "$agent"
check "the operator and the agent serve on loopback" $? "see the logs"
k -n "$NS" get secret nvl72-operator-webhook-tls -o jsonpath='{.data.ca\.crt}' | base64 -d >"$work/hook-ca.crt"

# The ports each process listens on, from the kernel's socket table.
listening() { # PID -> sorted ports
	ss -Hltnp | awk -v p="pid=$1," 'index($0, p) {n = split($4, a, ":"); print a[n]}' | sort -n | tr '\n' ' '
}
want_op=$(printf '%s\n' "$probe" "$dash" "$hook" "$metrics" | sort -n | tr '\n' ' ')
got=$(listening "$op_pid")
[[ $got == "$want_op" ]]
check "the operator listens on exactly the four ports probed here (probes, dashboard, webhook, metrics)" $? \
	"listens on '$got', probed '$want_op'"
got=$(listening "$agent_pid")
[[ $got == "$agent " ]]
check "the agent listens on exactly the port probed here (metrics and probes)" $? "listens on '$got'"

# ---- the probe ------------------------------------------------------------------
code() { # URL [curl args...] -> HTTP code; body in $work/body
	local u=$1
	shift
	curl -s -o "$work/body" -w '%{http_code}' -m 20 --cacert "$work/hook-ca.crt" "$@" "$u"
}
# protected NAME URL ALLOWED-PATTERN: 401 without and with an unknown token,
# 403 for the viewer and the fresh ServiceAccount, 200 for admin.
protected() {
	local name=$1 u=$2 pat=$3 got=""
	got+="none:$(code "$u") "
	grep -q "$pat" "$work/body" && got+="(leaked) "
	got+="unknown:$(code "$u" -H 'Authorization: Bearer not-a-real-token') "
	got+="viewer:$(code "$u" -H "Authorization: Bearer $viewer") "
	grep -q "$pat" "$work/body" && got+="(leaked) "
	got+="sa:$(code "$u" -H "Authorization: Bearer $sa_token") "
	grep -q "$pat" "$work/body" && got+="(leaked) "
	got+="admin:$(code "$u" -H "Authorization: Bearer $admin")"
	grep -q "$pat" "$work/body" || got+=" (no series)"
	[[ $got == "none:401 unknown:401 viewer:403 sa:403 admin:200" ]]
	check "$name: 401 without or with an unknown token, 403 without the right, 200 with it" $? "$got"
}
protected "metrics port /metrics" "http://127.0.0.1:$metrics/metrics" '^nvl72_build_info'
protected "webhook port (HTTPS) /metrics" "https://127.0.0.1:$hook/metrics" '^nvl72_build_info'
protected "agent port /metrics" "http://127.0.0.1:$agent/metrics" '^nvl72_agent_'

for p in "probes:http://127.0.0.1:$probe" "dashboard:http://127.0.0.1:$dash"; do
	c=$(code "${p#*:}/metrics" -H "Authorization: Bearer $admin")
	[[ $c == 404 ]] && ! grep -q '^nvl72_' "$work/body"
	check "${p%%:*} port serves no /metrics (404, even to admin)" $? "HTTP $c"
done

c1=$(code "http://127.0.0.1:$dash/api/anything" -X POST --data '{}')
c2=$(code "http://127.0.0.1:$dash/api/anything" -X POST --data '{}' -H "Authorization: Bearer $viewer")
c3=$(code "http://127.0.0.1:$dash/api/anything" -X POST --data '{}' -H "Authorization: Bearer $sa_token")
[[ $c1 == 401 && $c2 == 403 && $c3 == 403 ]]
check "dashboard POST: 401 without a token, 403 without the right" $? "none:$c1 viewer:$c2 sa:$c3"

bad=""
for u in "http://127.0.0.1:$probe" "http://127.0.0.1:$dash" "https://127.0.0.1:$hook" \
	"http://127.0.0.1:$metrics" "http://127.0.0.1:$agent"; do
	for path in /healthz /readyz; do
		c=$(code "$u$path")
		[[ $c == 200 || $c == 503 ]] && ! grep -qiE 'token|bearer|PRIVATE KEY' "$work/body" ||
			bad+=" $u$path:$c"
	done
done
[[ -z $bad ]]
check "/healthz and /readyz answer without a token on every port, with nothing secret" $? "$bad"

leak=""
for f in "$work"/operator.log "$work"/agent.log; do
	grep -qF "$admin" "$f" && leak+=" admin-token:$(basename "$f")"
	grep -qF "$viewer" "$f" && leak+=" viewer-token:$(basename "$f")"
	grep -qF "$sa_token" "$f" && leak+=" sa-token:$(basename "$f")"
done
[[ -z $leak ]]
check "no token appears in either log" $? "found:$leak"
finish
