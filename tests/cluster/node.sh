#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Adds a real node to a test control plane started by cluster.sh: the
# controller manager and scheduler on the machine, and containerd, the
# kubelet and kube-proxy in network, mount and PID namespaces of their own.
#
#   node.sh up DIR       DIR holds a running control plane (cluster.sh start --node);
#                        prints `export NVL72_NODE_...` lines
#   node.sh down STATE   stops a node and removes all it made; STATE is DIR/node/state
#                        or its copy in the cluster registry
#   node.sh tray STATE TRAY SIM
#                        lays the simulated tray TRAY (simctl create) out at the
#                        host paths a real tray has, in the node's mount namespace
#                        (SIM: the simulator's build folder, build/sim)
#   node.sh kubelet-restart STATE
#                        stops the node's kubelet and waits for the next one
#                        (init starts it again, as systemd would); prints its PID
#   node.sh init DIR     the first process of the node's PID namespace (internal)
#
# Everything the node makes on the machine is in one of: its network
# namespace (interfaces, routes, iptables rules, the pods' networks), its
# mount namespace (overlay mounts, /run, /var/lib, /var/log), its PID
# namespace (containerd, shims, containers), one cgroup folder per
# hierarchy, and DIR. Killing the namespace's first process ends every
# process; `down` then deletes the network namespace and the cgroups.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
registry="$cache/clusters"
node_net=${NVL72_NODE_NET:-10.213}
# The controllers a node needs (a Deployment's pods, Services' endpoints,
# the default service account and its token, the CA ConfigMap projected
# tokens need, the Ready taint lifted): named as in 1.34.
kcm_controllers=serviceaccount-token-controller,serviceaccount-controller
kcm_controllers+=,root-ca-certificate-publisher-controller,namespace-controller
kcm_controllers+=,garbage-collector-controller,pod-garbage-collector-controller
kcm_controllers+=,deployment-controller,replicaset-controller,daemonset-controller
kcm_controllers+=,statefulset-controller,job-controller,disruption-controller
kcm_controllers+=,endpoints-controller,endpointslice-controller,endpointslice-mirroring-controller
kcm_controllers+=,node-lifecycle-controller,taint-eviction-controller
kcm_controllers+=,clusterrole-aggregation-controller,resourceclaim-controller
pod_net=${NVL72_POD_NET:-10.214}
# cluster.sh's --service-cluster-ip-range.
service_net=10.0.0.0/24

log() { printf 'node: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The start time of a process in clock ticks (field 22 of its stat line):
# with the PID it names one process for good.
start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }

# Whether PID with start time START still runs (a zombie does not).
running() {
	[[ -n $1 && -n $2 && $(start_time "$1") == "$2" ]] || return 1
	[[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# Every mount point of a cgroup hierarchy (v1 controllers and v2).
cgroup_roots() { awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo; }

# A STATE file holds KEY=VALUE lines; read them without running them.
state_get() { sed -n "s/^$2=//p" "$1" | tail -1; }

# Every PID whose namespace of the kind ($2: pid or net) is the inode $1.
ns_members() {
	local p
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/$2" 2>/dev/null) == "$2:[$1]" ]] && echo "${p#/proc/}"
	done
	return 0
}

cgroup_remove() {
	local root=$1 i
	[[ -d $root ]] || return 0
	for i in $(seq 50); do
		find "$root" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[[ -d $root ]] || return 0
		sleep 0.1
	done
	log "could not remove cgroup $root"
	return 1
}

down() {
	local state=$1 start pidns netns netinode hostif cgroot dir entry i pids rc=0 root
	[[ -f $state ]] || return 0
	pidns=$(state_get "$state" PIDNS) netns=$(state_get "$state" NETNS)
	netinode=$(state_get "$state" NETNS_INODE) hostif=$(state_get "$state" HOSTIF)
	cgroot=$(state_get "$state" CGROUP) dir=$(state_get "$state" DIR)
	entry=$(state_get "$state" ENTRY)
	# The leader is `unshare`: killed, it takes the namespace's first
	# process with it, and the kernel then kills the whole PID namespace.
	local k pid
	for k in LEADER KCM SCHED; do
		pid=$(state_get "$state" "$k") start=$(state_get "$state" "${k}_START")
		if [[ -n $pid && -n $start && $(start_time "$pid") == "$start" ]]; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	# The first process finishes exiting only once the kernel has reaped
	# every other process of its namespace, those of the containers' own
	# namespaces below it included: until then it counts as alive.
	for i in $(seq 100); do
		pids=""
		for k in KCM SCHED INIT; do
			pid=$(state_get "$state" "$k") start=$(state_get "$state" "${k}_START")
			running "$pid" "$start" && pids+=" $pid"
		done
		[[ -n $pidns ]] && pids+=" $(ns_members "$pidns" pid)"
		[[ -n $netinode ]] && pids+=" $(ns_members "$netinode" net)"
		[[ -z ${pids// /} ]] && break
		# A process left in the node's namespaces (one started into them by
		# hand, say) is the node's too.
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	[[ -z ${pids// /} ]] || { log "processes left in the node's namespaces:$pids"; rc=1; }
	if [[ -n $netns && -e /run/netns/$netns ]]; then
		ip netns del "$netns" || rc=1
	fi
	if [[ -n $hostif ]] && ip link show "$hostif" >/dev/null 2>&1; then
		ip link del "$hostif" || rc=1
	fi
	if [[ -n $cgroot ]]; then
		for root in $(cgroup_roots); do cgroup_remove "$root$cgroot" || rc=1; done
	fi
	# The node's files were mounted only in its own mount namespace, now
	# gone; refuse to delete anything that is still a mount point here.
	if [[ -n $dir && -d $dir/node ]]; then
		if grep -q " $dir/node" /proc/self/mountinfo; then
			log "mounts left under $dir/node; not deleting it"
			rc=1
		else
			rm -rf "$dir/node/fs" "$dir/node/images"
		fi
	fi
	((rc == 0)) || return 1
	[[ -n $entry ]] && rm -f "$entry"
	[[ $state == "$dir/node/state" ]] || rm -f "$state"
	rm -f "$dir/node/state"
	return 0
}

# One certificate signed by the cluster's CA: name, subject, extensions.
cert() {
	local p=$1 name=$2 subj=$3 ext=$4
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$p/$name.key" -out "$p/$name.csr" -subj "$subj" 2>/dev/null
	openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
		-days 30 -out "$p/$name.crt" -extfile <(printf '%b' "$ext") 2>/dev/null
	rm -f "$p/$name.csr" "$p/ca.srl"
	chmod 600 "$p/$name.key"
}

kubeconfig_for() {
	local dir=$1 who=$2 port=$3
	cat >"$dir/node/$who.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: nvl72-test
  cluster: {server: "https://127.0.0.1:$port", certificate-authority: $dir/pki/ca.crt}
users:
- name: $who
  user: {client-certificate: $dir/pki/$who.crt, client-key: $dir/pki/$who.key}
contexts:
- name: nvl72-test
  context: {cluster: nvl72-test, user: $who}
current-context: nvl72-test
KC
	chmod 600 "$dir/node/$who.kubeconfig"
}

# The test images: a static pause process and Debian's static busybox,
# each an OCI archive that containerd imports; nothing is pulled.
images() {
	local dir=$1 img=$1/node/images a links=()
	mkdir -p "$img"
	gcc -static -Os -s -o "$img/pause" "$here/pause/pause.c" ||
		die "could not build the pause binary (gcc with a static libc is needed)"
	python3 "$here/oci-image.py" "$img/pause.tar" nvl72.invalid/pause:test \
		--add "$img/pause:pause" --cmd /pause
	[[ -x /bin/busybox ]] || die "/bin/busybox is missing (Debian package busybox-static)"
	for a in sh cat echo env grep head hostname httpd id ls mkdir nc printf ps seq sleep \
		tail tr true; do
		links+=(--link "bin/$a:busybox")
	done
	python3 "$here/oci-image.py" "$img/busybox.tar" nvl72.invalid/busybox:test \
		--add /bin/busybox:bin/busybox "${links[@]}" --dir tmp --dir etc --cmd /bin/sh
}

# The machine's architecture as OCI platforms name it.
arch() {
	case $(uname -m) in
	x86_64) echo amd64 ;;
	aarch64) echo arm64 ;;
	*) uname -m ;;
	esac
}

configs() {
	local dir=$1 n=$2 name=$3 nodeip=$4 podcidr=$5 cgroot=$6 ap=$7 d=$1/node
	mkdir -p "$d/cni"
	cat >"$d/cni/10-nvl72.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "nvl72",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$podcidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
	cat >"$d/containerd.toml" <<TOML
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

# Imports unpack through the transfer service, which knows only the
# snapshotters listed here.
[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
  platform = 'linux/$(arch)'
  snapshotter = '@SNAPSHOTTER@'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = '@SNAPSHOTTER@'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'nvl72.invalid/pause:test'

[plugins.'io.containerd.cri.v1.runtime']
  # Test machines may withhold CAP_SYS_RESOURCE, and then no process may
  # lower its OOM score: the kubelet's -998 for sandboxes makes runc fail
  # ("failed to update /proc/self/oom_score_adj: Permission denied").
  # Scores are kept at or above containerd's own instead.
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '$(command -v runc)'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$d/cni'

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
TOML
	printf 'nameserver 127.0.0.1\n' >"$d/resolv.conf"
	# cgroup v1 is what this kind of machine has; the kubelet refuses it
	# from 1.35 on unless failCgroupV1 is false. Swap may be on.
	cat >"$d/kubelet.yaml" <<KL
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $nodeip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $cgroot
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
failCgroupV1: false
resolvConf: $d/resolv.conf
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%, imagefs.inodesFree: 1%}
serializeImagePulls: false
maxPods: 50
KL
	# conntrack sizes and timeouts are left as they are (0): some of them
	# are machine-wide, and the node must not change the machine.
	cat >"$d/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $d/kube-proxy.kubeconfig}
hostnameOverride: $name
mode: iptables
clusterCIDR: $podcidr
nodePortAddresses: ["$nodeip/32"]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
KP
	cat >"$d/env" <<ENV
NAME=$name
NODE_IP=$nodeip
APISERVER_PORT=$ap
ENV
}

# The network namespace and its link to the machine: a veth pair with
# the machine's end at .1 and the node's eth0 at .2 of node_net.N.0/24.
network() {
	local netns=$1 hostif=$2 n=$3
	ip link add "$hostif" type veth peer name eth0 netns "$netns"
	ip addr add "$node_net.$n.1/24" dev "$hostif"
	ip link set "$hostif" up
	ip -n "$netns" link set lo up
	ip -n "$netns" addr add "$node_net.$n.2/24" dev eth0
	ip -n "$netns" link set eth0 up
	ip -n "$netns" route add default via "$node_net.$n.1"
	# The API server calls admission webhooks at their Service's cluster
	# IP, as in a cluster whose control plane routes to the service range:
	# kube-proxy's rules in the node's namespace take it from there. The
	# route goes with the interface. One node at a time can hold it.
	ip route add "$service_net" via "$node_net.$n.2" dev "$hostif" 2>/dev/null ||
		log "the route to the service range $service_net is taken (another node runs): the API server reaches no webhook Service of this node"
	# Both are per network namespace: the machine's stay as they are.
	ip netns exec "$netns" sysctl -qw net.ipv4.ip_forward=1
	ip netns exec "$netns" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

cgroups() {
	local cgroot=$1 root
	for root in $(cgroup_roots); do
		mkdir -p "$root$cgroot"
		# A new cpuset has no CPUs or memory nodes until it is given some.
		if [[ -f $root/cpuset.cpus && ! -f $root/cgroup.controllers ]]; then
			cat "$root/cpuset.cpus" >"$root$cgroot/cpuset.cpus"
			cat "$root/cpuset.mems" >"$root$cgroot/cpuset.mems"
		fi
	done
}

# The controller manager and the scheduler run on the machine, as a
# control plane's do, each with a client certificate of its own.
controllers() {
	local dir=$1 bin=$2 state=$3 p=$1/pki pid
	cert "$p" kube-controller-manager "/CN=system:kube-controller-manager" 'extendedKeyUsage=clientAuth\n'
	cert "$p" kube-scheduler "/CN=system:kube-scheduler" 'extendedKeyUsage=clientAuth\n'
	kubeconfig_for "$dir" kube-controller-manager "$(cat "$dir/apiserver-port")"
	kubeconfig_for "$dir" kube-scheduler "$(cat "$dir/apiserver-port")"
	# Each controller acts as its own service account, as in a cluster
	# set up by kubeadm; the token controller signs with the API server's
	# service-account key.
	setsid "$bin/kube-controller-manager" --kubeconfig="$dir/node/kube-controller-manager.kubeconfig" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port=0 \
		--use-service-account-credentials=true \
		--root-ca-file="$p/ca.crt" --service-account-private-key-file="$p/sa.key" \
		--controllers="$kcm_controllers" --kube-api-qps=100 --kube-api-burst=200 \
		--v=1 >>"$dir/logs/kube-controller-manager.log" 2>&1 </dev/null &
	pid=$!
	printf 'KCM=%s\nKCM_START=%s\n' "$pid" "$(start_time "$pid")" >>"$state"
	setsid "$bin/kube-scheduler" --kubeconfig="$dir/node/kube-scheduler.kubeconfig" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port=0 \
		--v=1 >>"$dir/logs/kube-scheduler.log" 2>&1 </dev/null &
	pid=$!
	printf 'SCHED=%s\nSCHED_START=%s\n' "$pid" "$(start_time "$pid")" >>"$state"
}

up() {
	local dir=$1 bin n netns hostif state entry name ap nodeip podcidr cgroot leader child i ready
	bin=$("$here/build.sh" node | tail -1)
	ap=$(cat "$dir/apiserver-port")
	name=${NVL72_NODE_NAME:-nvl72-node}
	mkdir -p "$dir/node"
	# `ip netns add` creates its file exclusively: the first free N is ours.
	for n in $(seq 1 250); do
		ip netns add "nvl72-node-$n" 2>/dev/null && break
		n=""
	done
	[[ -n $n ]] || die "no free node network namespace (nvl72-node-1..250 all taken)"
	netns=nvl72-node-$n hostif=nvl72h$n cgroot=/nvl72-node-$n
	nodeip=$node_net.$n.2 podcidr=$pod_net.$n.0/24
	state=$dir/node/state
	entry=$registry/$(basename "$dir").$(stat -c %i "$dir").node
	{
		echo "DIR=$dir"
		echo "OWNER=${NVL72_CLUSTER_OWNER:--}"
		echo "NETNS=$netns"
		echo "NETNS_INODE=$(stat -Lc %i "/run/netns/$netns")"
		echo "HOSTIF=$hostif"
		echo "CGROUP=$cgroot"
		echo "ENTRY=$entry"
	} >"$state"
	cp "$state" "$entry"
	network "$netns" "$hostif" "$n"
	cgroups "$cgroot"
	local p=$dir/pki
	cert "$p" "kubelet" "/O=system:nodes/CN=system:node:$name" 'extendedKeyUsage=clientAuth\n'
	cert "$p" "kubelet-serving" "/CN=$name" \
		"subjectAltName=IP:$nodeip,DNS:$name\nextendedKeyUsage=serverAuth\n"
	cert "$p" "kube-proxy" "/CN=system:kube-proxy" 'extendedKeyUsage=clientAuth\n'
	kubeconfig_for "$dir" kubelet "$ap"
	kubeconfig_for "$dir" kube-proxy "$ap"
	configs "$dir" "$n" "$name" "$nodeip" "$podcidr" "$cgroot" "$ap"
	images "$dir"
	controllers "$dir" "$bin" "$state"
	cp "$state" "$entry"
	# The host's network namespace goes in as fd 7, for the relay to the
	# API server on the machine's loopback.
	PATH="$bin:$PATH" setsid nsenter --net="/run/netns/$netns" -- \
		unshare --pid --fork --kill-child=SIGKILL --mount --propagation slave --mount-proc -- \
		bash "$here/node.sh" init "$dir" 7</proc/self/ns/net \
		>>"$dir/logs/node.log" 2>&1 </dev/null &
	leader=$!
	echo "LEADER=$leader" >>"$state"
	echo "LEADER_START=$(start_time "$leader")" >>"$state"
	cp "$state" "$entry"
	for i in $(seq 100); do
		child=$(awk '{print $1}' "/proc/$leader/task/$leader/children" 2>/dev/null || true)
		[[ -n $child && $(readlink "/proc/$child/exe") == */bash ]] && break
		child=""
		sleep 0.05
	done
	[[ -n $child ]] || die "the node's namespaces did not start; see $dir/logs/node.log"
	{
		echo "INIT=$child"
		echo "INIT_START=$(start_time "$child")"
		echo "PIDNS=$(readlink "/proc/$child/ns/pid" | tr -dc 0-9)"
	} >>"$state"
	cp "$state" "$entry"
	ready=0
	for i in $(seq 1200); do
		if [[ $("$bin/kubectl" --kubeconfig="$dir/kubeconfig" get node "$name" \
			-o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; then
			ready=1
			break
		fi
		[[ $(start_time "$leader") == "$(state_get "$state" LEADER_START)" ]] || break
		sleep 0.1
	done
	if ((!ready)); then
		log "node $name did not become Ready; last lines of its logs:"
		for f in node containerd kubelet kube-proxy; do
			echo "-- $f" >&2
			tail -8 "$dir/logs/$f.log" 2>/dev/null | cut -c1-400 >&2 || true
		done
		return 1
	fi
	# Pods are refused until their namespace's default service account
	# exists: the controller manager makes it.
	for i in $(seq 600); do
		"$bin/kubectl" --kubeconfig="$dir/kubeconfig" -n default get serviceaccount default \
			>/dev/null 2>&1 && break
		sleep 0.1
	done
	# Pods reach the API server as in a real cluster: through the
	# `kubernetes` Service, whose endpoint is the relay on the node.
	"$bin/kubectl" --kubeconfig="$dir/kubeconfig" apply -f - >/dev/null <<EPS
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes-nvl72-node
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: nvl72-test-cluster}
addressType: IPv4
endpoints: [{addresses: ["$nodeip"], conditions: {ready: true}}]
ports: [{name: https, port: $ap, protocol: TCP}]
EPS
	echo "export NVL72_NODE_NAME='$name'"
	echo "export NVL72_NODE_IP='$nodeip'"
	echo "export NVL72_NODE_NETNS='$netns'"
	echo "export NVL72_NODE_POD_CIDR='$podcidr'"
	echo "export NVL72_TEST_IMAGE='nvl72.invalid/busybox:test'"
	log "node $name Ready ($nodeip, network namespace $netns, logs in $dir/logs)"
}

# The body of the node's first process: private /run, /var/lib and
# /var/log (so every standard path the kubelet and containerd use is the
# node's own), then the relay, containerd, the images, kubelet, kube-proxy.
init() {
	local dir=$1 d=$1/node snap=${NVL72_NODE_SNAPSHOTTER:-} ap nodeip name i
	ap=$(state_get "$d/env" APISERVER_PORT) nodeip=$(state_get "$d/env" NODE_IP)
	name=$(state_get "$d/env" NAME)
	mount --make-rshared /
	for i in run var/lib var/log; do
		mkdir -p "$d/fs/$i"
		mount --bind "$d/fs/$i" "/$i"
	done
	mkdir -p "$d/fs/probe/l" "$d/fs/probe/u" "$d/fs/probe/w" "$d/fs/probe/m"
	if [[ -n $snap ]]; then
		: # chosen by NVL72_NODE_SNAPSHOTTER
	elif mount -t overlay overlay -o "lowerdir=$d/fs/probe/l,upperdir=$d/fs/probe/u,workdir=$d/fs/probe/w" \
		"$d/fs/probe/m" 2>/dev/null; then
		umount "$d/fs/probe/m"
		snap=overlayfs
	else
		log "overlayfs cannot be mounted here; containerd uses the native snapshotter"
		snap=native
	fi
	sed "s/@SNAPSHOTTER@/$snap/g" "$d/containerd.toml" >/run/containerd.toml
	python3 "$here/nsforward.py" "0.0.0.0:$ap" "127.0.0.1:$ap" 7 >>"$dir/logs/relay.log" 2>&1 &
	exec 7<&-
	containerd --config /run/containerd.toml >>"$dir/logs/containerd.log" 2>&1 &
	for i in $(seq 300); do
		ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 && break
		sleep 0.1
	done
	for i in pause busybox; do
		ctr --address /run/containerd/containerd.sock -n k8s.io images import \
			--snapshotter "$snap" "$d/images/$i.tar" >>"$dir/logs/node.log" 2>&1 ||
			log "importing the $i image failed"
	done
	# As systemd's kubelet.service does (Restart=always), a kubelet that
	# exits is started again; `node.sh kubelet-restart` relies on it.
	(
		while :; do
			kubelet --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
				--hostname-override="$name" --node-ip="$nodeip" --v=1 >>"$dir/logs/kubelet.log" 2>&1
			log "the kubelet exited with status $?; starting it again"
			sleep 1
		done
	) &
	kube-proxy --config="$d/kube-proxy.yaml" --v=1 >>"$dir/logs/kube-proxy.log" 2>&1 &
	log "node processes started (snapshotter $snap)"
	# As the namespace's first process this shell also reaps orphans.
	while :; do
		wait -n && continue
		local rc=$?
		((rc == 127)) && break
		log "a node process exited with status $rc"
	done
}

# The kubelet's process on the machine (its PID outside the node's PID
# namespace), or nothing.
kubelet_pid() {
	local p
	for p in $(ns_members "$(state_get "$1" PIDNS)" pid); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == kubelet ]] && { echo "$p"; return 0; }
	done
	return 0
}

# Stops the node's kubelet (SIGTERM, as systemctl restart does) and waits
# until the loop of init has started the next one; prints its PID.
kubelet_restart() {
	local state=$1 old new i
	running "$(state_get "$state" INIT)" "$(state_get "$state" INIT_START)" ||
		die "the node of $state is not running"
	old=$(kubelet_pid "$state")
	[[ -n $old ]] || die "no kubelet runs in the node of $state"
	kill -TERM "$old"
	for i in $(seq 300); do
		new=$(kubelet_pid "$state")
		[[ -n $new && $new != "$old" ]] && { echo "$new"; return 0; }
		sleep 0.1
	done
	die "the kubelet did not start again"
}

# A simulated tray at a real tray's host paths, for an agent that runs in
# a pod on the node: its image's wrappers run host tools through nsenter in
# the node's mount namespace and hand them host paths, and its host root is
# the node's / mounted at /host. Everything is mounted in the node's mount
# namespace only (it is a slave of the machine's: nothing propagates back),
# over the machine's own folders, which stay as they are:
#   /etc, /dev          overlays whose upper folders are the tray's host/etc
#                       and host/dev, so what the agent writes there (IMEX
#                       config, /etc/hosts block, channel nodes) is what the
#                       simulator's tools read; /dev's own mounts are bound
#                       again on top
#   /proc/driver, /proc/devices, /sys/module
#                       the tray's stand-ins (driver version and parameters,
#                       device majors, loaded modules)
#   /usr/lib/<triplet>  an overlay holding the fake libnvidia-ml.so.1 (a copy:
#                       the agent opens it inside its container)
#   /usr/local/sbin     an overlay holding the fake systemctl, modprobe,
#                       modinfo, nvidia-imex, nvidia-imex-ctl and installer,
#                       first in the PATH the image's wrappers set
# The tools find the tray through NVL72_SIM_ROOT, which the pod passes on.
# The tray's tray.env must name the node's address as its ip.
tray() {
	local state=$1 t=$2 sim=$3 init triplet
	init=$(state_get "$state" INIT)
	running "$init" "$(state_get "$state" INIT_START)" || die "the node of $state is not running"
	[[ -f $t/tray.env && -d $t/host/proc/driver ]] || die "$t is not a simulated tray (simctl create)"
	[[ -f $sim/lib/libnvidia-ml.so.1 && -x $sim/bin/nvidia-imex ]] || die "$sim holds no simulator build"
	case $(uname -m) in
	x86_64) triplet=x86_64-linux-gnu ;;
	aarch64) triplet=aarch64-linux-gnu ;;
	*) die "unknown machine $(uname -m)" ;;
	esac
	t=$(cd "$t" && pwd) sim=$(cd "$sim" && pwd)
	local o=$t/.node
	mkdir -p "$t/host/etc" "$t/host/dev" "$o"/{etc,dev,lib,sbin}-work "$o"/{lib,sbin} "$o/stage"
	cp "$sim/lib/libnvidia-ml.so.1" "$o/lib/"
	for f in systemctl modprobe modinfo nvidia-imex nvidia-imex-ctl nvl72-sim-installer nvl72-sim-validate; do
		ln -sfn "$sim/bin/$f" "$o/sbin/$f"
	done
	cat >"$o/mount.sh" <<'SH'
set -euo pipefail
t=$1 o=$2 triplet=$3
ovl() { mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$1"; }
# /dev: its own mounts (pts, shm, mqueue) are kept aside first, then bound
# again over the overlay.
subs=$(awk '$5 ~ "^/dev/" { print $5 }' /proc/1/mountinfo | sort -u)
for m in $subs; do
	mkdir -p "$o/stage$m"
	mount --bind "$m" "$o/stage$m"
done
ovl /dev "$t/host/dev" "$o/dev-work"
for m in $subs; do
	mkdir -p "$m"
	mount --bind "$o/stage$m" "$m"
done
ovl /etc "$t/host/etc" "$o/etc-work"
mount --bind "$t/host/proc/driver" /proc/driver
mount --bind "$t/host/proc/devices" /proc/devices
mount --bind "$t/host/sys/module" /sys/module
ovl "/usr/lib/$triplet" "$o/lib" "$o/lib-work"
ovl /usr/local/sbin "$o/sbin" "$o/sbin-work"
SH
	nsenter --target "$init" --mount -- bash "$o/mount.sh" "$t" "$o" "$triplet"
	log "tray $t laid out at the host paths of a real tray in the node"
}

case ${1:-} in
tray) [[ $# -eq 4 ]] || die "usage: node.sh tray STATE TRAY SIM"; tray "$2" "$3" "$4" ;;
kubelet-restart) [[ $# -eq 2 ]] || die "usage: node.sh kubelet-restart STATE"; kubelet_restart "$2" ;;
up) [[ $# -eq 2 ]] || die "usage: node.sh up DIR"; up "$2" ;;
down) [[ $# -eq 2 ]] || die "usage: node.sh down STATE"; down "$2" ;;
init) [[ $# -eq 2 ]] || die "usage: node.sh init DIR"; init "$2" ;;
*) die "usage: node.sh up DIR | down STATE | tray STATE TRAY SIM | kubelet-restart STATE | init DIR" ;;
esac
