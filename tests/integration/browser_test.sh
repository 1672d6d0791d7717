#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard in a real browser: one operator serving the dashboard, the
# sample Rack with a real agent per tray on a simulated rack, and headless
# Chromium driven over the DevTools protocol (tests/integration/cdp.py).
# The page asks for a bearer token, refuses a made-up one, and keeps the
# admin token in the tab's sessionStorage, never in the address.
# The page must show 18 trays and 72 GPUs, and a fault injected with simctl
# must reach the open page through the websocket feed, without a reload; so
# must a GPU on another VBIOS (marked in the VBIOS column, and the Rack's
# VersionsConsistent False naming it), a ComputeDomain and a RackUpgrade's
# phase change.
# A screenshot of each view is kept under <build>/artifacts/browser/.
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
AGENT=$rel/bin/nvl72-agent
sim=$(dirname "$rel")/sim
art=$(dirname "$rel")/artifacts/browser
CDP="python3 tests/integration/cdp.py"
RACK=gb300-r07
NS=nvl72-system

. "$(dirname "$0")/lib/tap.sh"

if ! command -v chromium >/dev/null || ! command -v python3 >/dev/null; then
	not_ok "chromium and python3 are installed" "run tests/deps.sh as root"
	finish
fi
if [[ ! -x $OPERATOR || ! -x $AGENT || ! -x $sim/bin/simctl || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	b=$(realpath --relative-to="$PWD" "$(dirname "$rel")")
	make -s BUILD="$b" "$b/rel/bin/nvl72-operator" "$b/rel/bin/nvl72-agent" sim >/dev/null 2>&1 ||
		{ not_ok "build the operator, the agent and the simulator" "make failed"; finish; }
fi

work=$(mktemp -d /tmp/nvl72-browser.XXXXXX)
rack=$work/rack
declare -A apid=()
opid="" cpid=""
cleanup() {
	local p f
	for p in "${apid[@]}" $opid $cpid; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${apid[@]}" $opid $cpid; do kill -KILL "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if ((failed > 0)) && [[ -f $work/op.log ]]; then
		echo "-- last lines of the operator log"
		tail -20 "$work/op.log" | cut -c1-300
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses of this run; another run picks others.
ipbase=$((20 + ($$ % 8) * 25))
ip() { echo "127.0.0.$((ipbase + 10#$1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$((10#$1))"; }
node() { printf '%s-t%02d' "$RACK" "$((10#$1))"; }
simctl() { "$sim/bin/simctl" "$@"; }

# ------------------------------------------------------------- set-up ---
out=$(k apply -f crds/ 2>&1) && out=$(k wait --for=condition=Established --timeout=60s crd --all 2>&1) &&
	out=$(k apply -f deploy/samples/compatibilitymatrix-gb300.yaml 2>&1)
check "apply crds/ and the sample matrix" $? "$out"
k create namespace "$NS" >/dev/null 2>&1

rc=0
for i in $(seq 1 18); do
	printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$(node "$i")"
done | k apply -f - >/dev/null 2>&1 || rc=1
now=$(date -u +%FT%TZ)
for i in $(seq 1 18); do
	k patch node "$(node "$i")" --subresource=status --type=merge -p \
		'{"status":{"addresses":[{"type":"InternalIP","address":"'"$(ip "$i")"'"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated","lastHeartbeatTime":"'"$now"'","lastTransitionTime":"'"$now"'"}]}}' \
		>/dev/null 2>&1 || rc=1
done
check "18 Nodes, Ready, with InternalIPs" $rc "node create or status patch failed"

"$OPERATOR" --metrics-bind-address=0 --health-probe-bind-address=0 \
	--dashboard-bind-address=127.0.0.1:0 --webhook-bind-address=0 --tray-heartbeat-timeout=10m \
	--log-level=info >"$work/op.log" 2>&1 &
opid=$!
wait_for 30 grep -q 'dashboard=[0-9]' "$work/op.log"
dash=$(grep -o 'dashboard=[0-9]*' "$work/op.log" | head -1 | cut -d= -f2)
[[ -n $dash ]]
check "the operator serves its dashboard on loopback (port $dash)" $? "$(tail -3 "$work/op.log")"
out=$(k apply -f deploy/samples/rack-gb300.yaml 2>&1)
check "the sample Rack applied" $? "$out"
trays18() { [[ $(k get computetrays -o json | jq "[.items[] | select(.spec.rack == \"$RACK\")] | length") == 18 ]]; }
wait_for 30 trays18

simctl create "$rack" --trays 18 --ip-base "$ipbase" >/dev/null
for t in $(seq 1 18); do
	d=$(tray "$t")
	NVL72_SIM_ROOT=$d "$AGENT" --kubeconfig "$KUBECONFIG" --node-name "$(node "$t")" \
		--node-ip "$(ip "$t")" --lease-namespace "$NS" --host-root "$d/host" \
		--nvml-path "$sim/lib/libnvidia-ml.so.1" --systemctl "$sim/bin/systemctl" \
		--modprobe "$sim/bin/modprobe" --modinfo "$sim/bin/modinfo" \
		--imex-bin "$sim/bin/nvidia-imex" --imex-ctl "$sim/bin/nvidia-imex-ctl" \
		--installer-arg "$sim/bin/nvl72-sim-installer" --installer-arg '{version}' \
		--tool-timeout 1s --resync-period 3s --heartbeat-period 2s --lease-duration 10s \
		>>"$work/agent-$t.log" 2>&1 &
	apid[$t]=$!
done
all_ready() {
	k get computetrays -o json | jq -e '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 18' >/dev/null
}
t0=$SECONDS
wait_for 90 all_ready
check "18 agents on a simulated rack report their trays Ready ($((SECONDS - t0))s)" $? \
	"$(k get computetrays 2>&1 | head -3; tail -3 "$work/agent-1.log")"

# ------------------------------------------------------------ browser ---
mkdir -p "$art"
rm -f "$art"/*.png
chromium --headless=new --no-sandbox --disable-gpu --disable-extensions --no-first-run \
	--user-data-dir="$work/chromium" --remote-debugging-address=127.0.0.1 \
	--remote-debugging-port=0 --window-size=1280,1000 about:blank >"$work/chromium.log" 2>&1 &
cpid=$!
wait_for 30 test -s "$work/chromium/DevToolsActivePort"
cdp_port=$(head -1 "$work/chromium/DevToolsActivePort" 2>/dev/null)
[[ $cdp_port =~ ^[0-9]+$ ]]
check "headless Chromium with DevTools on loopback" $? "$(tail -3 "$work/chromium.log")"
[[ $cdp_port =~ ^[0-9]+$ ]] || finish
cdp() { $CDP "$cdp_port" "$@"; }
base="http://127.0.0.1:$dash/"

# The feed needs a token: the page asks for one, refuses a made-up one with
# the server's reason, and takes the admin token into this tab only.
cdp goto "$base#/" >/dev/null
out=$(cdp wait 30 '!document.getElementById("signin").hidden &&
	document.getElementById("conn").textContent === "Token needed" &&
	document.querySelectorAll("#rack-tiles a.tile").length === 0 && document.activeElement.id')
check "the page asks for a token and shows nothing before it has one" $? "$out"
signin() {
	cdp eval "document.getElementById(\"token\").value = \"$1\";
		document.getElementById(\"signin-go\").click(); true" >/dev/null
}
signin "made-up-$RANDOM"
out=$(cdp wait 30 '!document.getElementById("signin").hidden &&
	document.getElementById("signin-msg").textContent')
[[ $out == *"did not accept"* ]]
check "a made-up token is refused and the page says why" $? "$out"
cdp shot "$art/signin.png" >/dev/null
check "screenshot of the sign-in form" $? "$art/signin.png"
admin_token=$(cat "$NVL72_CLUSTER_DIR/pki/admin.token")
signin "$admin_token"
out=$(cdp wait 60 'document.getElementById("conn").textContent === "Live" &&
	document.querySelectorAll("#rack-tiles a.tile").length === 1 &&
	document.querySelector("#rack-tiles a.tile").textContent')
check "with the admin token the fleet view goes Live over the feed and shows the rack" $? "$out"
tile=$out
kept=$(cdp eval "[location.href.indexOf(\"$admin_token\") < 0, sessionStorage.getItem(\"nvl72.dashboard.token\") === \"$admin_token\",
	document.getElementById(\"signin\").hidden, document.getElementById(\"token\").value === \"\"]")
[[ $kept == "[true, true, true, true]" ]]
check "the token is kept in this tab's sessionStorage, never in the address, and the form is cleared" $? "$kept"
out=$tile
grep -q '18/18 ready' <<<"$out" && grep -q '72/72' <<<"$out"
check "its tile reads 18 of 18 trays and 72 of 72 GPUs ready" $? "$out"
cdp shot "$art/fleet.png" >/dev/null
check "screenshot of the fleet view" $? "$art/fleet.png"

# Into the rack by the tile's link, as a person would.
cdp eval 'document.querySelector("#rack-tiles a.tile").click()' >/dev/null
out=$(cdp wait 30 'document.querySelectorAll("#tray-table tbody tr").length === 18 &&
	document.querySelectorAll("#tray-table tbody .chip.st-ok").length === 72 &&
	[location.hash, document.getElementById("rack-title").textContent]')
check "the rack view lists 18 trays with 72 GPUs, all OK" $? \
	"$out $(cdp eval '[document.querySelectorAll("#tray-table tbody tr").length, document.querySelectorAll("#tray-table tbody .chip").length, document.querySelectorAll("#tray-table tbody .chip.st-ok").length]')"
[[ $out == *'"#/rack/'"$RACK"'"'* && $out == *"Rack $RACK"* ]]
check "the tile led to #/rack/$RACK" $? "$out"
cdp shot "$art/rack.png" >/dev/null
check "screenshot of the rack view" $? "$art/rack.png"

# A marker on the window survives anything but a navigation or reload.
marker=m$RANDOM$RANDOM
cdp eval "window.nvl72Marker = \"$marker\"; window.nvl72Marker" >/dev/null
chip='document.querySelector("#tray-table tbody tr:nth-child(3) td:nth-child(5) .chip")'
out=$(cdp eval "$chip.textContent")
[[ $out == '"OK"' ]]
check "tray 3 GPU 2 reads OK before the fault" $? "$out"

t0=$SECONDS
simctl gpu "$(tray 3)" 2 summary=2
out=$(cdp wait 60 "$chip.textContent === \"FAIL\" && $chip.classList.contains(\"st-bad\") && [$chip.textContent, $chip.title]")
check "GPU 2 of tray 3 unhealthy in the simulator turns its cell FAIL in the open page ($((SECONDS - t0))s)" $? "$out"
out=$(cdp eval "[window.nvl72Marker, location.hash, performance.getEntriesByType(\"navigation\").length]")
[[ $out == "[\"$marker\", \"#/rack/$RACK\", 1]" ]]
check "without a reload or navigation (the window marker is still there)" $? "$out"
n=$(cdp eval 'document.querySelectorAll("#tray-table tbody .chip.st-ok").length')
[[ $n == 71 ]]
check "the other 71 GPUs still read OK" $? "ok=$n"
cdp shot "$art/rack-fault.png" >/dev/null

simctl gpu "$(tray 3)" 2 summary=1
out=$(cdp wait 60 "$chip.textContent === \"OK\" && window.nvl72Marker === \"$marker\"")
check "the GPU healthy again reads OK, still in the same page" $? "$out"

# ----------------------------------------------------------- VBIOS ---
# The agents read each GPU's VBIOS from NVML (the simulator's default for
# every GPU); the rack view has a VBIOS column.
vb='document.querySelectorAll("#tray-table tbody td.vbios")'
out=$(cdp wait 30 "$vb.length === 18 && Array.from($vb).every(function (c) {
	return c.textContent === \"97.10.4A.00.1A\" && !c.classList.contains(\"skew\"); }) &&
	Array.from(document.querySelectorAll(\"#tray-table thead th\")).map(function (h) { return h.textContent; }).join(\",\")")
check "the VBIOS column shows every tray's VBIOS from NVML" $? "$out"
[[ $out == *Driver,VBIOS,Maintenance* ]]
check "the VBIOS column sits between Driver and Maintenance" $? "$out"
# One GPU on another (made-up) VBIOS: the cell is marked and names it, and
# the Rack's VersionsConsistent turns False naming the tray and the GPU.
simctl gpu "$(tray 5)" 1 vbios=97.00.00.00.00
cell='document.querySelector("#tray-table tbody tr:nth-child(5) td.vbios")'
out=$(cdp wait 60 "$cell.classList.contains(\"skew\") && [$cell.textContent, $cell.title]")
[[ $out == *'GPU 1: 97.00.00.00.00 (rack: 97.10.4A.00.1A)'* && $out == *'1: 97.00.00.00.00'* ]]
check "a GPU on another VBIOS marks its tray's cell in the open page, naming the GPU" $? "$out"
t5=$(k get computetrays -o json | jq -r ".items[] | select(.spec.rack == \"$RACK\" and .spec.index == 5) | .metadata.name")
vc() { k get rack "$RACK" -o json | jq -r '.status.conditions[]? | select(.type == "VersionsConsistent") | "\(.status) \(.reason) \(.message)"'; }
skewed() { [[ $(vc) == "False FirmwareSkew "*"$t5 GPU 1 (97.00.00.00.00)"* ]]; }
wait_for 60 skewed
check "the Rack's VersionsConsistent is False (FirmwareSkew) naming $t5 GPU 1" $? "$(vc)"
cdp shot "$art/rack-vbios.png" >/dev/null
simctl gpu "$(tray 5)" 1 vbios=97.10.4A.00.1A
consistent() { [[ $(vc) == "True OneStack"* ]]; }
wait_for 60 consistent
check "the same VBIOS again: VersionsConsistent True" $? "$(vc)"

# ------------------------------------------------ compute domains ---
# By keyboard: focus the navigation link and press Enter.
printf 'apiVersion: nvl72.io/v1alpha1\nkind: ComputeDomain\nmetadata: {name: train-4, namespace: team-a}\nspec: {numNodes: 4, selector: {rack: %s}}\n' \
	"$RACK" >"$work/cd.yaml"
k create namespace team-a >/dev/null 2>&1
out=$(k apply -f "$work/cd.yaml" 2>&1)
check "kubectl apply a 4-node ComputeDomain" $? "$out"
cdp eval 'document.getElementById("nav-domains").focus(); document.activeElement.id' >/dev/null
cdp key Enter >/dev/null
row='document.querySelector("#domain-table tbody tr")'
out=$(cdp wait 60 "location.hash === \"#/domains\" && !document.getElementById(\"view-domains\").hidden &&
	$row && $row.querySelector(\"th\").textContent === \"team-a/train-4\" &&
	$row.querySelector(\".badge\").textContent === \"Ready\" &&
	$row.querySelectorAll(\".members li\").length === 4 && $row.textContent")
check "Enter on the focused Compute domains link opens the view: team-a/train-4 Ready with 4 members" $? \
	"$out $(cdp eval '[location.hash, document.getElementById("domain-table").textContent]')"
[[ $out == *"4 of 4"* && $out == *"$RACK"* && $out == *"3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"* ]]
check "its row names the rack, the clique and 4 of 4 nodes" $? "$out"
[[ $(cdp eval 'window.nvl72Marker') == "\"$marker\"" ]]
check "still the same page (no reload)" $? "marker lost"
cdp shot "$art/domains.png" >/dev/null
check "screenshot of the compute domains view" $? "$art/domains.png"

# ------------------------------------------------------------ events ---
cdp eval 'document.getElementById("nav-events").click()' >/dev/null
out=$(cdp wait 30 '!document.getElementById("view-events").hidden &&
	Array.from(document.querySelectorAll("#event-list tr.event")).map(function (r) { return r.textContent; }).join(" | ")')
check "the events view lists recent events" $? "$out"
[[ $out == *TraysCreated*rack/$RACK* && $out == *DomainReady*train-4* ]] ||
	[[ $out == *DomainReady*train-4* && $out == *TraysCreated*rack/$RACK* ]]
check "among them TraysCreated of the rack and DomainReady of the domain" $? "$out"
cdp shot "$art/events.png" >/dev/null
check "screenshot of the events view" $? "$art/events.png"

# ---------------------------------------------------------- upgrades ---
# The sample security upgrade: no approval, but the rack's 72 h notice, so
# it sits in Notice until it is aborted, a phase change the open page must
# show without a reload.
UPG=gb300-r07-nvidia-5821
out=$(k apply -f deploy/samples/rackupgrade-security.yaml 2>&1)
check "kubectl apply the sample security RackUpgrade" $? "$out"
cdp eval 'document.getElementById("nav-upgrades").focus(); document.activeElement.id' >/dev/null
cdp key Enter >/dev/null
card="document.getElementById(\"upgrade-$UPG\")"
out=$(cdp wait 60 "location.hash === \"#/upgrades\" && !document.getElementById(\"view-upgrades\").hidden &&
	$card && $card.querySelector(\".badge.phase\").textContent === \"Notice\" &&
	$card.querySelector(\".timeline [aria-current=step]\").textContent.indexOf(\"Notice\") === 0 &&
	$card.textContent")
check "Enter on the Upgrades link: $UPG in Notice, the current step of its phase timeline" $? \
	"$out $(cdp eval '[location.hash, document.getElementById("view-upgrades").textContent]')"
[[ $out == *"Rack $RACK"* && $out == *"gb300-r580-159"* && $out == *CVE-2026-24187* &&
	$out == *"security"* && $out == *"No approval required."* && $out == *"Notice ends"* ]]
check "its card names the rack, the target stack, the class and CVE, and needs no approval" $? "$out"
n=$(cdp eval "$card.querySelectorAll(\".timeline .tl-done\").length")
[[ $n == 1 ]]
check "the timeline marks Proposed passed, the phases after Notice ahead" $? "passed=$n"
cdp shot "$art/upgrades.png" >/dev/null
check "screenshot of the upgrades view" $? "$art/upgrades.png"

cdp eval 'document.getElementById("nav-fleet").click()' >/dev/null
out=$(cdp wait 60 '!document.getElementById("view-fleet").hidden &&
	document.querySelector("#rack-tiles .tile-upgrade .badge") &&
	document.querySelector("#rack-tiles .tile-upgrade").textContent')
[[ $out == '"Upgrade Notice"' ]]
check "the rack's fleet tile reads its upgrade phase" $? "$out"

cdp eval 'document.getElementById("nav-upgrades").click()' >/dev/null
cdp wait 10 "!!$card" >/dev/null
t0=$SECONDS
out=$(k patch rackupgrade "$UPG" --type=merge -p '{"spec":{"abort":true}}' 2>&1)
check "abort the upgrade with kubectl patch" $? "$out"
out=$(cdp wait 60 "$card && $card.querySelector(\".badge.phase\").textContent === \"Aborted\" &&
	$card.querySelector(\".timeline [aria-current=step]\").textContent.indexOf(\"Aborted\") === 0 &&
	[$card.querySelector(\".badge.phase\").textContent, document.getElementById(\"upgrades-summary\").textContent]")
check "the phase change reaches the open page: $UPG Aborted ($((SECONDS - t0))s)" $? \
	"$out $(cdp eval "document.getElementById(\"view-upgrades\").textContent") $(k get rackupgrade "$UPG" -o jsonpath='{.status.phase}')"
[[ $out == *"0 in progress"* ]]
check "the summary counts no upgrade in progress" $? "$out"
[[ $(cdp eval 'window.nvl72Marker') == "\"$marker\"" ]]
check "still the same page (no reload)" $? "marker lost"
cdp shot "$art/upgrades-aborted.png" >/dev/null
check "screenshot of the aborted upgrade" $? "$art/upgrades-aborted.png"

png=$(file "$art"/*.png | grep -c 'PNG image data')
[[ $png == 9 ]]
check "9 screenshots are PNG images" $? "$(file "$art"/*.png)"
echo "# screenshots: $art/"
finish
