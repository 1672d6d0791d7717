#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's host layer against a simulated rack: 18 tray sim roots, the
# fake NVML library (also at NVML API 12, where the health summary is
# decided from the mask, and serving the GPUs' inventory), fake IMEX daemons
# talking over loopback, a hanging nvidia-imex-ctl, and a driver change
# interrupted by kill -9. Needs no API
# server. Prints ok/not ok lines and "N passed, M failed".
set -u
cd "$(dirname "$0")/../.."
sim=build/sim
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $2"; fail=$((fail + 1)); }
check() { # check NAME HAYSTACK NEEDLE...
	local name=$1 hay=$2; shift 2
	for n in "$@"; do
		if [[ $hay != *"$n"* ]]; then
			nok "$name" "missing $n in ${hay:0:400}"
			return 1
		fi
	done
	ok "$name"
}

if [[ ! -x $sim/bin/hostprobe || ! -f $sim/lib/libnvidia-ml.so.1 ]]; then
	make -s sim >/dev/null || { echo "not ok - simulator build"; echo "0 passed, 1 failed"; exit 1; }
fi

rack=$(mktemp -d /tmp/nvl72-simrack.XXXXXX)
bg_pids=()
cleanup() {
	local f p
	for p in "${bg_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	for f in "$rack"/tray-*/host/run/nvl72-agent/imex.pid "$rack"/tray-*/host/run/nvl72-agent/driver-install.pid; do
		[[ -f $f ]] || continue
		p=$(cut -d' ' -f1 "$f")
		[[ $p =~ ^[0-9]+$ ]] && kill -9 "$p" 2>/dev/null
	done
	for f in "$rack"/tray-*/units/nvidia-imex.service; do
		p=$(sed -n 's/^MainPID=//p' "$f" 2>/dev/null)
		[[ $p =~ ^[0-9]+$ && $p -gt 1 ]] && kill -9 "$p" 2>/dev/null
	done
	rm -rf "$rack"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback addresses and ports of this run; other runs pick other ones.
ipbase=$((20 + ($$ % 8) * 25))
. tests/cluster/ports.sh
port=$(free_port 4)
cport=$((port + 1))
ip() { echo "127.0.0.$((ipbase + $1))"; }
tray() { printf '%s/tray-%02d' "$rack" "$1"; }
probe() { # probe TRAY ARGS...
	local t=$1; shift
	NVL72_SIM_ROOT=$(tray "$t") "$sim/bin/hostprobe" "$@" 2>>"$rack/probe.log"
}
simctl() { "$sim/bin/simctl" "$@"; }

simctl create "$rack" --trays 18 --ip-base "$ipbase" >/dev/null || {
	echo "not ok - simctl create"; echo "0 passed, 1 failed"; exit 1; }
ok "simctl creates an 18-tray rack"

# ---- fabric and driver through NVML ----
good=0 bad=""
for t in $(seq 1 18); do
	out=$(probe "$t" gpus)
	n=$(grep -o '"state":"Completed"' <<<"$out" | wc -l)
	if [[ $n == 4 && $out == *'"clique":"3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"'* &&
		$out == *'"version":"580.95.05"'* && $out == *'"fabricState":"Completed"'* &&
		$out == *"\"tray\":$t,"* ]]; then
		good=$((good + 1))
	else
		bad="$bad $t"
	fi
done
[[ $good == 18 ]] && ok "18 trays: 4 GPUs COMPLETED, the tray clique, driver 580.95.05" ||
	nok "18 trays report fabric and driver" "bad trays:$bad"

simctl gpu "$(tray 3)" 2 state=2
check "a GPU in IN_PROGRESS shows, and the tray has no clique" "$(probe 3 gpus)" \
	'"fabricState":"InProgress"' '"cliqueError":"NV_E_STATE"' '"clique":""' 'GPU 2'
simctl gpu "$(tray 3)" 2 state=3
check "the GPU back in COMPLETED restores the clique" "$(probe 3 gpus)" \
	'"fabricState":"Completed"' '"clique":"3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"'

simctl gpu "$(tray 4)" 1 health_mask=0x4A9 summary=3
check "degraded health is decoded" "$(probe 4 gpus)" \
	'"health":"degradedBandwidth,noPartition"' '"summary":"LimitedCapacity"'

# ---- a driver without a health summary (NVML API 12: R570, R575) ----
simctl gpu "$(tray 18)" all nvml_api=12
out=$(probe 18 gpus)
n=$(grep -o '"summary":"Healthy"' <<<"$out" | wc -l)
m=$(grep -o '"healthSource":"mask"' <<<"$out" | wc -l)
[[ $n == 4 && $m == 4 && $out == *'"healthMask":170,'* && $out == *'"nvmlVersion":"12.580.95.05"'* ]] &&
	ok "nvml_api=12: v2 only, all four GPUs Healthy from the mask 0xAA" ||
	nok "nvml_api=12 tray healthy from the mask" "$out"
simctl gpu "$(tray 18)" 2 health_mask=0x19A
check "nvml_api=12: a fault in the mask makes the tray Unhealthy" "$(probe 18 observe)" \
	'"health":"Unhealthy"'
gpu_of() { jq -c --argjson i "$1" '.gpus[] | select(.index == $i)'; } # gpu_of IDX <<<JSON
out=$(probe 18 gpus)
[[ $(jq -c '[.gpus[] | select(.summary != "Healthy") | [.index, .summary, .health]]' <<<"$out") == \
	'[[2,"Unhealthy","routeUnhealthy"]]' ]] &&
	ok "nvml_api=12: only GPU 2 is Unhealthy (routeUnhealthy)" || nok "GPU 2 unhealthy from mask" "$out"
simctl gpu "$(tray 18)" 2 health_mask=0x1AA
simctl gpu "$(tray 18)" all nvml_api=13
check "nvml_api=13: the summary again, with the API 13 mask" "$(probe 18 gpus)" \
	'"healthSource":"summary"' '"healthMask":426,' '"nvmlVersion":"13.580.95.05"'
# Unpinned, the level follows the loaded driver: an R570 one is API 12.
sed -i '/^nvml_api=/d' "$(tray 18)"/gpu/*
echo 570.158.01 >"$(tray 18)/host/sys/module/nvidia/version"
check "an R570 driver answers as NVML API 12" "$(probe 18 gpus)" \
	'"nvmlVersion":"12.570.158.01"' '"healthSource":"mask"' '"healthMask":170,'
echo 580.95.05 >"$(tray 18)/host/sys/module/nvidia/version"

# ---- inventory: VBIOS, PCI bus id, board part number, serial ----
out=$(probe 18 gpus)
[[ $(grep -o '"vbios":"97.10.4A.00.1A"' <<<"$out" | wc -l) == 4 && $out == *'"pci":"00000008:06:00.0"'* &&
	$out == *'"pci":"00000019:06:00.0"'* && $out == *'"part":""'* && $out == *'"serial":""'* ]] &&
	ok "VBIOS and PCI bus ids from NVML; no part number or serial where the board has none" ||
	nok "inventory" "$out"
# A made-up, different VBIOS on one GPU, and the optional fields set.
simctl gpu "$(tray 18)" 1 vbios=97.00.00.00.00 pci=0000001a:06:00.0 part=sim-part-0001 serial=sim-serial-0001
g1=$(probe 18 gpus | gpu_of 1)
[[ $g1 == *'"vbios":"97.00.00.00.00"'* && $g1 == *'"pci":"0000001A:06:00.0"'* &&
	$g1 == *'"part":"sim-part-0001"'* && $g1 == *'"serial":"sim-serial-0001"'* ]] &&
	ok "simctl gpu sets a GPU's vbios, pci, part and serial" || nok "inventory set" "$g1"
simctl gpu "$(tray 18)" 1 pci=garbage
g1=$(probe 18 gpus | gpu_of 1)
[[ $g1 == *'"pci":""'* && $g1 == *'"vbios":"97.00.00.00.00"'* ]] &&
	ok "a PCI id NVML cannot give leaves the field empty, the rest still reads" ||
	nok "bad pci" "$g1"

simctl gpu "$(tray 5)" 0 clique=7
check "one GPU in another clique is an error" "$(probe 5 gpus)" \
	'"cliqueError":"NV_E_CONFLICT"' 'differs from'

simctl gpu "$(tray 6)" all clique=2 cluster=11111111-2222-3333-4444-555555555555
check "a clique change shows on all four GPUs" "$(probe 6 gpus)" \
	'"clique":"11111111-2222-3333-4444-555555555555.2"'

simctl fault "$(tray 6)" nvml_init_fail on
out=$(probe 6 gpus); rc=$?
[[ $rc != 0 && $out == *'"error":"NV_E_IO"'* && $out == *nvmlInit* ]] &&
	ok "an NVML failure is reported, not fatal" || nok "NVML failure" "$out"
simctl fault "$(tray 6)" nvml_init_fail off

check "one observation of a healthy tray" "$(probe 2 observe)" '"driverErr":""' \
	'"fabric":"Completed"' '"health":"Healthy"' '"clique":"3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"' \
	'"channels":2048' '"fmErr":""' '"daemon":"NOT_RUNNING"'
printf 'NVRM version: NVIDIA UNIX Open Ker' >"$(tray 2)/host/proc/driver/nvidia/version"
printf 'LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n' \
	>"$(tray 2)/units/nvidia-fabricmanager.service"
check "a truncated proc file and a running host FM are conditions, the rest still shows" \
	"$(probe 2 observe)" '"driverErr":"NV_E_PARSE"' '"fabric":"Completed"' '"fmErr":"NV_E_STATE"' \
	'"clique":"3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"' 'without local NVSwitches'

# ---- IMEX: six daemons, one peer list ----
peers=""
for t in 7 8 9 10 11 12; do peers="$peers $(ip "$t")"; done
hashes=""
for t in 7 8 9 10 11 12; do
	out=$(probe "$t" imex-apply process rack-a "$(ip "$t")" "$port" "$cport" $peers)
	[[ $out == *'"error":""'* && $out == *'"restarted":true'* ]] || nok "imex-apply tray $t" "$out"
	hashes="$hashes $(grep -o '"nodesHash":"[0-9a-f]*"' <<<"$out")"
done
[[ $(tr ' ' '\n' <<<"$hashes" | sort -u | grep -c .) == 1 ]] &&
	ok "six trays write byte-identical peer lists" || nok "peer list hashes" "$hashes"

wait_for() { # wait_for SECONDS TRAY NEEDLE... ; sets $out
	local end=$((SECONDS + $1)) t=$2; shift 2
	while ((SECONDS <= end)); do
		out=$(probe "$t" imex-status "$(ip "$t")")
		local all=1
		for n in "$@"; do [[ $out == *"$n"* ]] || all=0; done
		((all)) && return 0
		sleep 0.2
	done
	return 1
}
up=0
for t in 7 8 9 10 11 12; do
	wait_for 10 "$t" '"daemon":"READY"' '"domain":"UP"' '"peersReady":5' '"peersConnected":5' &&
		up=$((up + 1))
done
[[ $up == 6 ]] && ok "six fake IMEX daemons reach READY and domain UP" || nok "IMEX up" "$up of 6: $out"
# The daemon runs in the host's mount namespace: its argv and its config
# name the host's own paths, never the agent's host root.
pid7=$(cut -d' ' -f1 "$(tray 7)/host/run/nvl72-agent/imex.pid")
args7=$(tr '\0' ' ' <"/proc/$pid7/cmdline" 2>/dev/null)
nodes7=$(grep '^IMEX_NODE_CONFIG_FILE=' "$(tray 7)/host/etc/nvidia-imex/config.cfg")
[[ $args7 == *" -c /etc/nvidia-imex/config.cfg "* && $args7 != *"$rack"* &&
	$nodes7 == "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg" ]] &&
	ok "the IMEX daemon is handed host paths: argv and IMEX_NODE_CONFIG_FILE" ||
	nok "host paths" "argv: $args7; $nodes7"

out=$(probe 7 imex-apply process rack-a "$(ip 7)" "$port" "$cport" $peers)
check "the same spec again changes and restarts nothing" "$out" '"changed":false' '"restarted":false'

simctl imex-kill "$(tray 12)"
seen=0
for t in 7 8 9 10 11; do
	wait_for 5 "$t" '"domain":"DEGRADED"' '"peersReady":4' "\"host\":\"$(ip 12)\",\"index\":5,\"row\":\"IIIIII\",\"status\":\"UNAVAILABLE\"" &&
		seen=$((seen + 1))
done
[[ $seen == 5 ]] && ok "a killed peer is reported by the five others" || nok "killed peer" "$seen of 5: $out"

out=$(probe 12 imex-apply process rack-a "$(ip 12)" "$port" "$cport" $peers)
check "the dead daemon is restarted though its files did not change" "$out" \
	'"changed":false' '"restarted":true'
wait_for 10 7 '"domain":"UP"' '"peersReady":5' && ok "the domain is UP again" ||
	nok "domain back up" "$out"

# Tray 12 with the same peers in another order: a node map mismatch (!M!).
rpeers=$(tr ' ' '\n' <<<"$peers" | grep . | sort -r | tr '\n' ' ')
probe 12 imex-apply process rack-a "$(ip 12)" "$port" "$cport" $rpeers >/dev/null
wait_for 5 7 '"domain":"DEGRADED"' '"row":"CCCCCM"' &&
	ok "a peer with a differently ordered list shows as a node map mismatch" ||
	nok "node map mismatch" "$out"
probe 12 imex-apply process rack-a "$(ip 12)" "$port" "$cport" $peers >/dev/null
wait_for 10 7 '"domain":"UP"' '"peersReady":5' && ok "the same list again brings the domain UP" ||
	nok "domain up after mismatch" "$out"

simctl fault "$(tray 8)" imex_ctl_hang on
t0=$SECONDS
out=$(probe 8 --timeout-ms 1000 imex-status "$(ip 8)")
dt=$((SECONDS - t0))
left=$(simctl pids "$(tray 8)" nvidia-imex-ctl | wc -l)
[[ $out == *'"error":"NV_E_TIMEOUT"'* && $out == *'timed out after 1000 ms'* && $dt -le 3 && $left == 0 ]] &&
	ok "a hung nvidia-imex-ctl is killed at the deadline and reported" ||
	nok "hung imex-ctl" "${dt}s, $left left: $out"
simctl fault "$(tray 8)" imex_ctl_hang off

out=$(probe 9 imex-apply process rack-a "$(ip 13)" "$port" "$cport" $peers)
check "an own address missing from the peer list is refused" "$out" '"error":"NV_E_CONFIG"'

for t in 7 8 9 10 11 12; do probe "$t" imex-stop process >/dev/null; done
alive=0
for t in 7 8 9 10 11 12; do
	f=$(tray "$t")/host/run/nvl72-agent/imex.pid
	[[ -f $f ]] && kill -0 "$(cut -d' ' -f1 "$f")" 2>/dev/null && alive=$((alive + 1))
done
[[ $alive == 0 ]] && ok "imex-stop stops every daemon" || nok "imex-stop" "$alive alive"

# ---- IMEX by name: a member replaced, the survivors' daemons untouched ----
# The nodes file lists one name per slot and the hosts file maps them; a
# new tray in slot 2 is a new mapping and a SIGUSR1, not a restart.
links() { # links TRAY EXCEPT_IP: the connections the daemon holds, as JSON
	NVL72_SIM_ROOT=$(tray "$1") "$sim/bin/nvidia-imex-ctl" -c /etc/nvidia-imex/config.cfg -N -j |
		jq -c --arg x "$2" '[.simLinks[] | select(.host != $x) | {host, id, since}] | sort_by(.host)'
}
imexpid() { cut -d' ' -f1 "$(tray "$1")/host/run/nvl72-agent/imex.pid"; }
npeers="$(ip 7) $(ip 8) $(ip 9) $(ip 10)"
started=0
for t in 7 8 9 10; do
	out=$(probe "$t" imex-apply process-by-name rack-n "$(ip "$t")" "$port" "$cport" $npeers)
	[[ $out == *'"error":""'* && $out == *'"restarted":true'* ]] && started=$((started + 1))
done
nodes7=$(cat "$(tray 7)/host/etc/nvidia-imex/nodes_config.cfg")
block7=$(sed -n '/^# BEGIN nvl72-agent IMEX/,/^# END nvl72-agent IMEX/p' "$(tray 7)/host/etc/hosts")
[[ $started == 4 && $(grep -c '^nvl72-imex-[0-9a-f]\{8\}-0[0-3]$' <<<"$nodes7") == 4 &&
	$(grep -c "^$(ip 9)	nvl72-imex-[0-9a-f]\{8\}-02\$" <<<"$block7") == 1 ]] &&
	ok "by name: four daemons; the nodes file lists slot names, the hosts block maps them" ||
	nok "by-name files" "started $started; nodes: $nodes7; block: $block7"
up=0
for t in 7 8 9 10; do
	wait_for 10 "$t" '"daemon":"READY"' '"domain":"UP"' '"peersConnected":3' && up=$((up + 1))
done
[[ $up == 4 ]] && ok "by name: the four daemons resolve each other and the domain is UP" ||
	nok "by-name up" "$up of 4: $out"
declare -A pid0 links0
for t in 7 8 10; do
	pid0[$t]=$(imexpid "$t")
	links0[$t]=$(links "$t" "$(ip 9)")
done
# Tray 9 fails; tray 11 takes its slot.
probe 9 imex-stop process >/dev/null
rpeers="$(ip 7) $(ip 8) $(ip 11) $(ip 10)"
out=$(probe 11 imex-apply process-by-name rack-n "$(ip 11)" "$port" "$cport" $rpeers)
[[ $out == *'"restarted":true'* ]] || nok "the new member's daemon starts" "$out"
signalled=0
for t in 7 8 10; do
	# IMEX acts on SIGUSR1 at most once per 5 s: until then the agent has
	# written the mapping and holds the signal.
	end=$((SECONDS + 15))
	while :; do
		out=$(probe "$t" imex-apply process-by-name rack-n "$(ip "$t")" "$port" "$cport" $rpeers)
		[[ $out == *'"signalled":true'* || $out == *'"restarted":true'* || $out == *'"error":"N'* ]] &&
			break
		((SECONDS > end)) && break
		sleep 0.2
	done
	[[ $out == *'"signalled":true'* && $out == *'"restarted":false'* ]] && signalled=$((signalled + 1))
done
[[ $signalled == 3 ]] && ok "by name: the three survivors are signalled, not restarted" ||
	nok "survivors signalled" "$signalled of 3: $out"
up=0
for t in 7 8 10 11; do
	wait_for 15 "$t" '"domain":"UP"' '"peersConnected":3' "\"host\":\"$(ip 11)\",\"index\":2" &&
		up=$((up + 1))
done
[[ $up == 4 ]] && ok "by name: the new member joins in slot 2 and the domain is UP with all four" ||
	nok "replacement up" "$up of 4: $out"
same=0 why=""
for t in 7 8 10; do
	p=$(imexpid "$t")
	l=$(links "$t" "$(ip 11)")
	n=$(cat "$(tray "$t")/host/etc/nvidia-imex/nodes_config.cfg")
	if [[ $p == "${pid0[$t]}" && -d /proc/$p && $l == "${links0[$t]}" && $l == *'"id"'* && $n == "$nodes7" ]]; then
		same=$((same + 1))
	else
		why+="tray $t: pid ${pid0[$t]} -> $p, links ${links0[$t]} -> $l; "
	fi
done
[[ $same == 3 ]] &&
	ok "by name: the survivors keep their daemon pid, nodes file and connections to each other" ||
	nok "survivors untouched" "$why"
for t in 7 8 10 11; do probe "$t" imex-stop process >/dev/null; done
[[ $(grep -c 'nvl72-imex-' "$(tray 7)/host/etc/hosts") == 0 ]] &&
	ok "by name: imex-stop takes the agent's lines out of the hosts file" ||
	nok "hosts file after stop" "$(cat "$(tray 7)/host/etc/hosts")"

# ---- IMEX through the host's systemd unit ----
hpeers="$(ip 1) $(ip 2) $(ip 3)"
restarted=0
for t in 1 2 3; do
	out=$(probe "$t" imex-apply host rack-h "$(ip "$t")" $((port + 2)) $((port + 3)) $hpeers)
	[[ $out == *'"error":""'* && $out == *'"restarted":true'* ]] && restarted=$((restarted + 1))
done
[[ $restarted == 3 ]] && ok "host mode restarts nvidia-imex.service on three trays" ||
	nok "host mode apply" "$restarted of 3: $out"
up=0
for t in 1 2 3; do
	wait_for 10 "$t" '"daemon":"READY"' '"domain":"UP"' '"peersReady":2' && up=$((up + 1))
done
[[ $up == 3 ]] && ok "host-mode daemons reach READY and domain UP" || nok "host mode up" "$up of 3: $out"
out=$(probe 1 imex-apply host rack-h "$(ip 1)" $((port + 2)) $((port + 3)) $hpeers)
check "host mode: the same spec restarts nothing" "$out" '"changed":false' '"restarted":false'
for t in 1 2 3; do probe "$t" imex-stop host >/dev/null; done
out=$(probe 1 imex-status "$(ip 1)")
check "host mode: stopping the unit stops the daemon" "$out" '"daemon":"NOT_RUNNING"'

# ---- driver change, interrupted by kill -9 ----
simctl installer-delay "$(tray 13)" 1500
NVL72_SIM_ROOT=$(tray 13) "$sim/bin/hostprobe" driver-change 580.173.02 >"$rack/drv1.out" 2>&1 &
dpid=$!
disown "$dpid"
bg_pids+=("$dpid")
end=$((SECONDS + 10))
until grep -q '^run ' "$(tray 13)/driver/installer.log" 2>/dev/null || ((SECONDS > end)); do sleep 0.05; done
kill -9 "$dpid" 2>/dev/null
end=$((SECONDS + 5))
while kill -0 "$dpid" 2>/dev/null && ((SECONDS <= end)); do sleep 0.05; done
out=$(probe 13 driver-change 580.173.02); rc=$?
runs=$(grep -c '^run ' "$(tray 13)/driver/installer.log" 2>/dev/null)
[[ $rc == 0 && $out == *'"phase":"Done"'* && $runs == 1 ]] &&
	ok "a driver change killed mid-install resumes without rerunning the installer" ||
	nok "driver change resume" "rc=$rc runs=$runs: $out"
[[ $out == *InstallerRunning* ]] && ok "the resumed change waits for the running installer" ||
	nok "installer wait" "$out"
check "the tray reports the new driver" "$(probe 13 gpus)" '"version":"580.173.02"' '"nvml":"580.173.02"'

simctl in-use "$(tray 14)" 2
out=$(probe 14 driver-change 580.173.02)
check "a driver in use ends in RebootRequired after installing" "$out" \
	'"phase":"RebootRequired"' 'nvidia_uvm is in use'

simctl fault "$(tray 15)" installer_fail on
out=$(probe 15 driver-change 580.173.02)
check "a failing installer ends in Failed" "$out" '"phase":"Failed"' 'installer failed'

# ---- channels and host units ----
out=$(probe 16 channels 4)
if [[ $(id -u) == 0 ]]; then
	node=$(stat -c '%t:%T:%a' "$(tray 16)/host/dev/nvidia-caps-imex-channels/channel3" 2>/dev/null)
	# 16 * 3 + 201 = 249 = 0xf9, the tray's nvidia-caps-imex-channels major.
	[[ $out == *'"created":4'* && $node == f9:3:666 ]] &&
		ok "IMEX channel nodes use the major from /proc/devices" || nok "channels" "$node $out"
else
	ok "IMEX channel nodes # skip: mknod needs root"
fi

printf 'LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n' \
	>"$(tray 17)/units/nvidia-fabricmanager.service"
out=$(probe 17 unit nvidia-fabricmanager.service masked deny)
check "a running host Fabric Manager is reported when policy forbids stopping it" "$out" \
	'"error":"NV_E_STATE"' 'policy does not allow'
out=$(probe 17 unit nvidia-fabricmanager.service masked allow)
check "host Fabric Manager is stopped and masked when allowed" "$out" \
	'"error":""' '"masked":true' '"changed":true'

echo "$pass passed, $fail failed"
((fail == 0))
