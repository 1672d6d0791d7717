#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops a real test control plane (etcd + kube-apiserver) on
# loopback with TLS, RBAC and an admin kubeconfig, all inside one directory.
#
#   cluster.sh start DIR   prints `export KUBECONFIG=… KUBECTL=…` lines
#   cluster.sh start --node DIR   the same plus a real node (tests/cluster/node.sh):
#                          controller manager, scheduler, containerd, kubelet,
#                          kube-proxy; also prints `export NVL72_NODE_…` lines
#   cluster.sh stop DIR    stops what start launched, by saved PID, and
#                          removes the node's namespaces and cgroups
#   cluster.sh restart-apiserver DIR   restarts kube-apiserver on its port, etcd kept
#   cluster.sh reap        stops clusters whose owner process is gone
#
# A cluster started with NVL72_CLUSTER_OWNER=<pid> is reaped by the next
# start once that process has died (a test runner killed mid-run);
# without an owner it lives until `stop`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/local/go/bin"
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
registry="$cache/clusters"
mkdir -p "$registry"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
. "$here/ports.sh"

# A PID counts as ours only while it still runs one of our binaries, so a
# recycled PID is never killed.
ours() {
	local pid=$1 exe
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[[ $exe == "$cache"/* ]]
}

# Whether a process started here a moment ago (setsid BINARY ... &) still
# runs: until it has exec'd its binary, /proc/PID/exe is the shell's or
# setsid's, which ours() does not accept. An exited one (a zombie too) has
# no exe.
starting() {
	local exe
	exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
	[[ $exe == "$cache"/* || $exe == */setsid || $exe == */bash ]]
}

# Stops the given PIDs, newest first: the apiserver before etcd.
stop_pids() {
	local pid alive
	for pid in $(printf '%s\n' "$@" | tac); do
		ours "$pid" && kill -TERM "$pid" 2>/dev/null || true
	done
	for _ in $(seq 50); do
		alive=0
		for pid in "$@"; do ours "$pid" && alive=1; done
		((alive)) || break
		sleep 0.1
	done
	for pid in "$@"; do
		ours "$pid" && kill -KILL "$pid" 2>/dev/null || true
	done
}

# The registry entry of a cluster directory: "DIR OWNER PID..." on one
# line, so a cluster can be reaped even after its directory was deleted.
entry_of() { echo "$registry/$(basename "$1").$(stat -c %i "$1" 2>/dev/null || echo 0)"; }
register() {
	local dir=$1
	printf '%s %s %s\n' "$dir" "${NVL72_CLUSTER_OWNER:--}" "$(tr '\n' ' ' <"$dir/pids")" \
		>"$(entry_of "$dir")"
}

stop_dir() {
	local dir=$1
	[[ -f $dir/node/state ]] && { "$here/node.sh" down "$dir/node/state" || true; }
	[[ -f $dir/pids ]] || return 0
	stop_pids $(cat "$dir/pids")
	rm -f "$dir/pids"
	rm -f "$(entry_of "$(readlink -f "$dir")")"
	rm -rf "$dir/etcd"
}

reap() {
	local entry dir owner pids
	# A node's entry keeps what its cluster directory knew (namespaces,
	# cgroups, PIDs), so a node is removed even with the directory gone.
	for entry in "$registry"/*.node; do
		[[ -e $entry ]] || continue
		owner=$(sed -n 's/^OWNER=//p' "$entry")
		[[ -n $owner && $owner != - ]] || continue
		if ! kill -0 "$owner" 2>/dev/null; then
			log "reaping the stale node of $(sed -n 's/^DIR=//p' "$entry") (owner $owner is gone)"
			"$here/node.sh" down "$entry" || true
		fi
	done
	for entry in "$registry"/*; do
		[[ -e $entry && $entry != *.node ]] || continue
		read -r dir owner pids <"$entry" || true
		[[ -n ${owner:-} && $owner != - ]] || continue
		if ! kill -0 "$owner" 2>/dev/null; then
			log "reaping stale cluster in $dir (owner $owner is gone)"
			if [[ -f $dir/pids ]]; then
				stop_dir "$dir"
			else
				stop_pids $pids
			fi
			rm -f "$entry"
		fi
	done
}

pki() {
	local d=$1/pki
	mkdir -p "$d"
	(
		cd "$d"
		umask 077
		ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
		openssl req -x509 $ec -keyout ca.key -out ca.crt -days 30 -subj "/CN=nvl72-test-ca" 2>/dev/null
		openssl req $ec -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
			-out apiserver.crt -extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n') 2>/dev/null
		openssl req $ec -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin" 2>/dev/null
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
			-out admin.crt -extfile <(printf 'extendedKeyUsage=clientAuth\n') 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		admin=$(openssl rand -hex 24)
		viewer=$(openssl rand -hex 24)
		printf '%s,admin-token,admin-token-uid,"system:masters"\n%s,viewer,viewer-uid,"nvl72:viewers"\n' \
			"$admin" "$viewer" >tokens.csv
		printf '%s' "$admin" >admin.token
		printf '%s' "$viewer" >viewer.token
		rm -f ./*.csr ./*.srl
	)
}

kubeconfig() {
	local dir=$1 port=$2
	cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: nvl72-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: pki/ca.crt
users:
- name: admin
  user:
    client-certificate: pki/admin.crt
    client-key: pki/admin.key
contexts:
- name: nvl72-test
  context: {cluster: nvl72-test, user: admin}
current-context: nvl72-test
KC
	chmod 600 "$dir/kubeconfig"
}

# Without a node nothing would create service accounts, so their admission
# plugin is off; with one, the apiserver also reaches the kubelet with a
# client certificate and checks the kubelet's serving certificate.
node_apiserver_args() {
	local p=$1/pki
	if [[ -f $1/node-mode ]]; then
		echo "--kubelet-client-certificate=$p/apiserver-kubelet-client.crt"
		echo "--kubelet-client-key=$p/apiserver-kubelet-client.key"
		echo "--kubelet-certificate-authority=$p/ca.crt"
		echo "--kubelet-preferred-address-types=InternalIP"
	else
		echo "--disable-admission-plugins=ServiceAccount"
	fi
}

# Starts kube-apiserver in the background ($! is its PID) against etcd on
# port ec, serving on port ap, with the extra arguments saved at start.
launch_apiserver() {
	local dir=$1 bin=$2 ec=$3 ap=$4 p="$1/pki"
	setsid "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$ec" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$ap" \
		--cert-dir="$dir/apiserver" --tls-cert-file="$p/apiserver.crt" \
		--tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
		--token-auth-file="$p/tokens.csv" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$p/sa.key" --service-account-signing-key-file="$p/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC \
		--allow-privileged=true --endpoint-reconciler-type=none \
		$(node_apiserver_args "$dir") --profiling=false \
		$(cat "$dir/apiserver-args" 2>/dev/null) \
		--v=1 >>"$dir/logs/apiserver.log" 2>&1 </dev/null &
}

# Stops the apiserver of a running cluster and starts it again on the same
# port against the same etcd (a control-plane restart as clients see it).
restart_apiserver() {
	local dir=$1 old ec ap new
	[[ -f $dir/pids ]] || die "$dir holds no running cluster"
	bin=$("$here/build.sh" core | tail -1)
	old=$(sed -n 2p "$dir/pids")
	ec=$(cat "$dir/etcd-port") ap=$(cat "$dir/apiserver-port")
	stop_pids "$old"
	# The port must be free again before the new process binds it.
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$ap") 2>/dev/null || break
		sleep 0.1
	done
	launch_apiserver "$dir" "$bin" "$ec" "$ap"
	new=$!
	sed -i "2s/.*/$new/" "$dir/pids"
	register "$dir"
	for _ in $(seq 600); do
		curl -fsS --max-time 2 --cacert "$dir/pki/ca.crt" "https://127.0.0.1:$ap/readyz" \
			>/dev/null 2>&1 && { log "apiserver restarted: https://127.0.0.1:$ap"; return 0; }
		starting "$new" || break
		sleep 0.1
	done
	die "the apiserver did not come back; see $dir/logs/apiserver.log"
}

start() {
	local dir=$1 node=$2
	reap
	[[ ! -f $dir/pids ]] || die "$dir already holds a running cluster; stop it first"
	bin=$("$here/build.sh" core $( ((node)) && echo node) | tail -1)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	rm -rf "$dir/etcd" "$dir/logs" "$dir/node" "$dir/node-mode"
	mkdir -p "$dir/logs"
	pki "$dir"
	if ((node)); then
		: >"$dir/node-mode"
		(
			cd "$dir/pki"
			umask 077
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
				-keyout apiserver-kubelet-client.key -out k.csr \
				-subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
			openssl x509 -req -in k.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
				-out apiserver-kubelet-client.crt -extfile <(printf 'extendedKeyUsage=clientAuth\n') 2>/dev/null
			rm -f k.csr ca.srl
		)
	fi
	: >"$dir/pids"
	register "$dir"

	local attempt
	for attempt in 1 2 3; do
		ec=$(free_port 3) || die "no free ports"
		ep=$((ec + 1)) ap=$((ec + 2))
		setsid "$bin/etcd" --name=default --data-dir="$dir/etcd" \
			--listen-client-urls="http://127.0.0.1:$ec" --advertise-client-urls="http://127.0.0.1:$ec" \
			--listen-peer-urls="http://127.0.0.1:$ep" --initial-advertise-peer-urls="http://127.0.0.1:$ep" \
			--initial-cluster="default=http://127.0.0.1:$ep" --unsafe-no-fsync=true \
			--log-level=warn >"$dir/logs/etcd.log" 2>&1 </dev/null &
		echo $! >>"$dir/pids"
		register "$dir"
		echo "$ec" >"$dir/etcd-port"
		local i up=0
		for i in $(seq 100); do
			if curl -fsS --max-time 1 "http://127.0.0.1:$ec/health" >/dev/null 2>&1; then
				up=1
				break
			fi
			starting "$(tail -1 "$dir/pids")" || break
			sleep 0.1
		done
		if ((!up)); then
			log "etcd did not become healthy (attempt $attempt); last log lines:"
			tail -5 "$dir/logs/etcd.log" >&2 || true
			stop_dir "$dir"
			: >"$dir/pids"
			rm -rf "$dir/etcd"
			continue
		fi
		local p="$dir/pki"
		echo "${NVL72_APISERVER_ARGS:-}" >"$dir/apiserver-args"
		launch_apiserver "$dir" "$bin" "$ec" "$ap"
		echo $! >>"$dir/pids"
		register "$dir"
		echo "$ap" >"$dir/apiserver-port"
		for i in $(seq 600); do
			if curl -fsS --max-time 2 --cacert "$p/ca.crt" "https://127.0.0.1:$ap/readyz" >/dev/null 2>&1; then
				break
			fi
			starting "$(tail -1 "$dir/pids")" || break
			sleep 0.1
		done
		if curl -fsS --max-time 2 --cacert "$p/ca.crt" "https://127.0.0.1:$ap/readyz" >/dev/null 2>&1; then
			kubeconfig "$dir" "$ap"
			# The default namespace is created just after /readyz.
			for i in $(seq 100); do
				"$bin/kubectl" --kubeconfig="$dir/kubeconfig" get namespace default >/dev/null 2>&1 && break
				sleep 0.1
			done
			if ((node)) && ! "$here/node.sh" up "$dir"; then
				log "the node did not come up; stopping the cluster"
				stop_dir "$dir"
				die "could not start the node; see $dir/logs"
			fi
			echo "export KUBECONFIG='$dir/kubeconfig'"
			echo "export KUBECTL='$bin/kubectl'"
			echo "export NVL72_CLUSTER_DIR='$dir'"
			echo "export NVL72_K8S_BIN='$bin'"
			log "ready: https://127.0.0.1:$ap (etcd 127.0.0.1:$ec, logs in $dir/logs)"
			return 0
		fi
		log "apiserver did not become ready (attempt $attempt); last log lines:"
		tail -5 "$dir/logs/apiserver.log" >&2 || true
		stop_dir "$dir"
		: >"$dir/pids"
		rm -rf "$dir/etcd"
	done
	rm -f "$dir/pids"
	die "could not start the control plane; see $dir/logs"
}

case ${1:-} in
start)
	if [[ $# -eq 3 && $2 == --node ]]; then
		start "$3" 1
	else
		[[ $# -eq 2 ]] || die "usage: cluster.sh start [--node] DIR"
		start "$2" 0
	fi ;;
stop) [[ $# -eq 2 ]] || die "usage: cluster.sh stop DIR"; stop_dir "$(cd "$2" 2>/dev/null && pwd || echo "$2")" ;;
restart-apiserver)
	[[ $# -eq 2 ]] || die "usage: cluster.sh restart-apiserver DIR"
	restart_apiserver "$(cd "$2" && pwd)" ;;
reap) reap ;;
*) die "usage: cluster.sh start [--node] DIR | stop DIR | restart-apiserver DIR | reap" ;;
esac
