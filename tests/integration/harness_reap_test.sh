#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proves the harness cleans up after a runner that was killed: a cluster
# owned by a process that dies is stopped by the next start or reap, and a
# cluster without an owner is left alone.
set -u
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $2"; fail=$((fail + 1)); }
alive() { local p; for p in $(cat "$1/pids" 2>/dev/null); do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

work=$(mktemp -d /tmp/nvl72-reap.XXXXXX)
trap 'tests/cluster/cluster.sh stop "$work/owned" >/dev/null 2>&1; tests/cluster/cluster.sh stop "$work/manual" >/dev/null 2>&1; rm -rf "$work"' EXIT

# A stand-in for a test runner that will be killed with SIGKILL.
sleep 300 &
owner=$!
if NVL72_CLUSTER_OWNER=$owner tests/cluster/cluster.sh start "$work/owned" >/dev/null 2>&1; then
	ok "start a cluster owned by pid $owner"
else
	nok "start owned cluster" "failed"
fi
pids=$(cat "$work/owned/pids" 2>/dev/null)
env -u NVL72_CLUSTER_OWNER tests/cluster/cluster.sh start "$work/manual" >/dev/null 2>&1 &&
	ok "start a cluster without an owner" || nok "start manual cluster" "failed"

tests/cluster/cluster.sh reap 2>/dev/null
alive "$work/owned" && ok "a live owner keeps its cluster" || nok "live owner" "cluster was stopped"

kill -KILL "$owner"
wait "$owner" 2>/dev/null
tests/cluster/cluster.sh reap 2>/dev/null
left=""
for p in $pids; do
	[[ -d /proc/$p && $(cat "/proc/$p/stat" 2>/dev/null | awk '{print $3}') != Z ]] && left+=" $p"
done
[[ -z $left ]] && ok "etcd and apiserver of a dead owner are gone after reap" ||
	nok "reap" "still running:$left"
alive "$work/manual" && ok "a cluster without an owner survives reap" || nok "manual cluster" "was reaped"

# A runner that deleted its cluster's directory and then died still gets
# its processes reaped: the registry keeps their PIDs.
sleep 300 &
owner2=$!
NVL72_CLUSTER_OWNER=$owner2 tests/cluster/cluster.sh start "$work/gone" >/dev/null 2>&1
pids2=$(cat "$work/gone/pids" 2>/dev/null)
rm -rf "$work/gone"
kill -KILL "$owner2"
wait "$owner2" 2>/dev/null
tests/cluster/cluster.sh reap 2>/dev/null
left=""
for p in $pids2; do
	[[ -d /proc/$p && $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]] && left+=" $p"
done
[[ -n $pids2 && -z $left ]] && ok "a dead owner's cluster is reaped even with its directory gone" ||
	nok "reap without directory" "pids '$pids2', still running:$left"

echo "$pass passed, $fail failed"
((fail == 0))
