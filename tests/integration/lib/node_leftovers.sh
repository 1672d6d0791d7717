# SPDX-License-Identifier: Apache-2.0
# What a test node (tests/cluster/node.sh) could leave on the machine, read
# from a copy of its state file: one line per thing still there. Sourced,
# never run.

node_leftovers() {
	local st=$1 key pid start pidns netns netinode hostif cgroup dir root p
	pidns=$(sed -n 's/^PIDNS=//p' "$st") netns=$(sed -n 's/^NETNS=//p' "$st")
	netinode=$(sed -n 's/^NETNS_INODE=//p' "$st") hostif=$(sed -n 's/^HOSTIF=//p' "$st")
	cgroup=$(sed -n 's/^CGROUP=//p' "$st") dir=$(sed -n 's/^DIR=//p' "$st")
	# INIT is the first process of the node's PID namespace: it is gone only
	# after every process below it, containers included.
	for key in LEADER INIT KCM SCHED; do
		pid=$(sed -n "s/^$key=//p" "$st") start=$(sed -n "s/^${key}_START=//p" "$st")
		[[ -n $pid && $(awk '{ sub(/^.*\) /, ""); print $20 " " $1 }' "/proc/$pid/stat" 2>/dev/null) == "$start "[!Z] ]] &&
			echo "process $pid ($key)"
	done
	for p in /proc/[0-9]*; do
		[[ -n $pidns && $(readlink "$p/ns/pid" 2>/dev/null) == "pid:[$pidns]" ]] &&
			echo "process ${p#/proc/} ($(cat "$p/comm" 2>/dev/null)) in the node's PID namespace"
		[[ -n $netinode && $(readlink "$p/ns/net" 2>/dev/null) == "net:[$netinode]" ]] &&
			echo "process ${p#/proc/} ($(cat "$p/comm" 2>/dev/null)) in the node's network namespace"
	done
	[[ -n $netns && -e /run/netns/$netns ]] && echo "network namespace $netns"
	[[ -n $hostif ]] && ip link show "$hostif" >/dev/null 2>&1 && echo "interface $hostif"
	for root in $(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo); do
		[[ -n $cgroup && -e $root$cgroup ]] && echo "cgroup $root$cgroup"
	done
	[[ -n $dir ]] && grep -F " $dir/" /proc/self/mountinfo | awk '{ print "mount " $5 }'
	# The node's rules live in its own network namespace; on the machine
	# there must be none of kube-proxy's or the CNI plugins' chains.
	for p in iptables-save iptables-legacy-save ip6tables-save; do
		command -v "$p" >/dev/null || continue
		"$p" 2>/dev/null | grep -E -- '(KUBE-|CNI-)' | head -3 | sed "s/^/$p on the machine: /"
	done
	return 0
}
