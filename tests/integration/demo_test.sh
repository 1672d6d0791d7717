#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs `make demo`'s script as a new user would and checks what it
# promises: a Ready rack of 18 trays reported by 18 agents, the dashboard
# answering, the admission webhook refusing the command it suggests, a
# fault injected with simctl showing on the tray, and stopping it leaving no
# process behind. A background job starts with SIGINT
# ignored, so the test stops the demo with SIGTERM, which the demo treats
# as Ctrl-C. The demo brings its own control plane; the runner's is unused.
set -u
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $2"; fail=$((fail + 1)); }

work=$(mktemp -d /tmp/nvl72-demo.XXXXXX)
. tests/cluster/ports.sh
port=$(free_port 3)
log=$work/demo.log
DEMO_DIR=$work/demo DEMO_DASHBOARD_PORT=$port DEMO_WEBHOOK_PORT=$((port + 2)) DEMO_SECONDS=600 setsid tests/demo.sh >"$log" 2>&1 &
demo=$!
finish() {
	kill -TERM -- -"$demo" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$demo" 2>/dev/null || break; sleep 0.1; done
	kill -KILL -- -"$demo" 2>/dev/null
	rm -rf "$work"
}
trap finish EXIT

for _ in $(seq 240); do
	grep -q '^Running:' "$log" && break
	kill -0 "$demo" 2>/dev/null || break
	sleep 0.5
done
if grep -q '^Running:' "$log"; then
	ok "the demo comes up and prints what to try"
else
	nok "demo start" "$(tail -5 "$log")"
	echo "$pass passed, $fail failed"
	exit 1
fi

export KUBECONFIG=$work/demo/cluster/kubeconfig
k() { "$KUBECTL" "$@"; }
ready=""
for _ in $(seq 60); do
	ready=$(k get rack gb300-r07 -o jsonpath='{.status.capacity.readyTrays}/{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)
	[[ $ready == 18/True ]] && break
	sleep 1
done
[[ $ready == 18/True ]] && ok "rack gb300-r07 is Ready with 18 trays" || nok "rack Ready" "$ready"

n=$(k get computetrays -o json | jq '[.items[] | select((.status.gpus // []) | length == 4)] | length')
[[ $n == 18 ]] && ok "18 ComputeTrays report 4 GPUs each" || nok "tray status" "$n trays with 4 GPUs"

page=$(curl -fsS --max-time 5 "http://127.0.0.1:$port/" 2>&1)
[[ $page == *"<html"* ]] && ok "the dashboard answers on 127.0.0.1:$port" || nok "dashboard" "${page:0:200}"

# The ComputeDomain the demo suggests, typed as its printed lines say.
k create namespace team-a >/dev/null
# printed N: the Nth command the demo prints that pipes a printf into
# kubectl apply, as a user would paste it.
printed() {
	awk -v want="$1" '/printf .%s.n. .apiVersion/ { n++; on = n == want } on { print } on && /kubectl apply -f -/ { on = 0 }' "$log" |
		sed 's/^  //; s/kubectl apply/"$KUBECTL" apply/'
}
cmd=$(printed 1)
if bash -c "$cmd" >/dev/null 2>&1; then
	cd_st=""
	for _ in $(seq 60); do
		cd_st=$(k get computedomain demo -n team-a -o jsonpath='{.status.status}/{.status.nodes[*].status}' 2>/dev/null)
		[[ $cd_st == "Ready/Ready Ready Ready Ready" ]] && break
		sleep 1
	done
	[[ $cd_st == "Ready/Ready Ready Ready Ready" ]] && ok "the suggested 4-node ComputeDomain becomes Ready" ||
		nok "compute domain" "$cd_st"
else
	nok "compute domain" "the printed command failed: $cmd"
fi

grep -q '^demo: admission webhook on' "$log" && ok "the demo says the admission webhook is on" ||
	nok "webhook" "no 'admission webhook on' line"
# The command the demo suggests to see a refusal is refused, with the object
# and the field named.
cmd=$(printed 2)
out=$(bash -c "$cmd" 2>&1)
rc=$?
[[ $rc != 0 && $out == *'denied the request: RackUpgrade "to-nowhere": spec.target.stack'* ]] &&
	ok "the suggested RackUpgrade is refused by the webhook, naming spec.target.stack" ||
	nok "webhook refusal" "rc=$rc: ${out:0:300} (command: $cmd)"

build/sim/bin/simctl gpu "$work/demo/sim/tray-03" 2 state=2
st=""
for _ in $(seq 30); do
	st=$(k get computetray gb300-r07-t03 -o jsonpath='{.status.conditions[?(@.type=="FabricReady")].status}')
	[[ $st == False ]] && break
	sleep 1
done
[[ $st == False ]] && ok "a GPU leaving the fabric shows on its tray" || nok "fault" "FabricReady=$st"

kill -TERM -- -"$demo" 2>/dev/null
for _ in $(seq 100); do kill -0 "$demo" 2>/dev/null || break; sleep 0.1; done
# Host tools are handed host paths, so the trays' IMEX daemons are found by
# their sim root, not their command line.
left=$({ pgrep -f "$work/demo"; build/sim/bin/simctl pids "$work/demo"; } | sort -u |
	xargs -r ps -o pid=,stat=,args= -p | cut -c1-120 | tr "\n" ";")
[[ -z $left ]] && ok "stopping the demo stops every process it started" || nok "demo cleanup" "left: $left"

echo "$pass passed, $fail failed"
((fail == 0))
