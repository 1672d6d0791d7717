#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proves a test node is cleaned up after a runner that was killed: a
# cluster with a node, owned by a process that dies with SIGKILL, is
# removed by the next reap (every process, its network namespace and
# interface, its cgroups, its mounts, no iptables rule on the machine),
# also when the runner had deleted the cluster's directory first.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib/tap.sh
. tests/integration/lib/node_leftovers.sh

work=$(mktemp -d /tmp/nvl72-node-reap.XXXXXX)
trap 'for d in "$work"/c*; do tests/cluster/cluster.sh stop "$d" >/dev/null 2>&1; done; rm -rf "$work"' EXIT
rules_before=$(iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9:]*\]//')

# reaped NAME GONE_DIR: starts a node cluster owned by a stand-in runner,
# kills the runner with SIGKILL (after deleting the directory when GONE_DIR
# is 1), reaps, and checks that nothing is left.
reaped() {
	local name=$1 gone=$2 dir=$work/$1 owner out left
	sleep 600 &
	owner=$!
	if ! out=$(NVL72_CLUSTER_OWNER=$owner tests/cluster/cluster.sh start --node "$dir" 2>&1); then
		not_ok "$name: a cluster with a node starts" "$(tail -5 <<<"$out")"
		kill -KILL "$owner"
		return
	fi
	ok "$name: a cluster with a node, owned by pid $owner, starts"
	cp "$dir/node/state" "$work/$name.state"
	[[ -n $(node_leftovers "$work/$name.state") ]]
	check "$name: the node's processes and namespaces are seen while it runs" $? "nothing seen"
	tests/cluster/cluster.sh reap 2>/dev/null
	[[ -f $dir/node/state ]]
	check "$name: reap leaves a node whose owner lives" $? "its state file is gone"
	((gone)) && rm -rf "$dir"
	kill -KILL "$owner"
	wait "$owner" 2>/dev/null
	tests/cluster/cluster.sh reap 2>"$work/$name.reap"
	left=$(node_leftovers "$work/$name.state")
	check "$name: after the owner's SIGKILL, reap leaves nothing of the node" \
		"$([[ -z $left ]]; echo $?)" "$left; reap said: $(cat "$work/$name.reap")"
}

reaped c1 0
reaped c2 1
rules_after=$(iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9:]*\]//')
[[ $rules_before == "$rules_after" ]]
check "the machine's iptables rules are as before" $? "$(diff <(echo "$rules_before") <(echo "$rules_after") | head -5)"
finish
