# SPDX-License-Identifier: Apache-2.0
# Free TCP ports for the test control plane and the integration suites.
# Sourced, never run.
#
# A port is taken from below the kernel's ephemeral range, so that no
# outgoing connection (an API server's to etcd, a client's to it) can be
# given it as its local port between this choice and the bind: a port in
# that range can be free when chosen and held by a connected socket, which
# refuses every connection to it, a moment later.

# free_port [N [NOT...]]: the first of N (default 1) consecutive ports on
# which no socket of any state (listening, connected, TIME_WAIT) is bound
# and nothing answers on 127.0.0.1, none of them one of NOT.
free_port() {
	local n=${1:-1} p i low busy
	(($# > 0)) && shift
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
	((low > 12000)) || low=32768
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % (low - 10000 - n)))
		busy=
		for ((i = p; i < p + n; i++)); do
			if [[ " $* " == *" $i "* ]] ||
				{ command -v ss >/dev/null && [[ -n $(ss -Htan "( sport = :$i )" 2>/dev/null) ]]; } ||
				(exec 3<>"/dev/tcp/127.0.0.1/$i") 2>/dev/null; then
				busy=1
				break
			fi
		done
		[[ -z $busy ]] && echo "$p" && return 0
	done
	echo "free_port: no $n consecutive free ports below $low" >&2
	return 1
}
