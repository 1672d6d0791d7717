#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real test node: the kubelet registers and is Ready, a pod runs from
# an image imported into the node's containerd (no registry) and its log is
# read through the API server, a Deployment gets its 2 replicas from the
# controller manager and scheduler, a Service answers from the machine
# through kube-proxy and from a pod, a restarted kubelet takes the running
# containers over, and stopping the cluster leaves no
# process, mount, interface, cgroup or iptables rule behind.
#
# needs: node
# Run by tests/integration/run.sh, which starts the cluster with
# `cluster.sh start --node` for suites marked as above (NVL72_NODE_* set).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib/tap.sh
. tests/integration/lib/node_leftovers.sh

: "${NVL72_NODE_NAME:?NVL72_NODE_NAME: run through tests/integration/run.sh (a node suite)}"
: "${NVL72_CLUSTER_DIR:?}" "${NVL72_TEST_IMAGE:?}" "${NVL72_NODE_IP:?}"
export KUBECONFIG
ns=node-test
work=$(mktemp -d /tmp/nvl72-node-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$NVL72_CLUSTER_DIR/node/state" "$work/state"

jp() { k get "$@" 2>/dev/null; }
ready=$(jp node "$NVL72_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')
check "node $NVL72_NODE_NAME registered and is Ready" "$([[ $ready == True ]]; echo $?)" "Ready=$ready"
info=$(jp node "$NVL72_NODE_NAME" -o 'jsonpath={.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}')
[[ $info =~ ^v1\.34\.[0-9]+\ containerd://v?2\. ]]
check "the node runs kubelet 1.34 on containerd 2 ($info)" $? "$info"
addr=$(jp node "$NVL72_NODE_NAME" -o 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}')
check "the node's address is its own network namespace's ($addr)" "$([[ $addr == "$NVL72_NODE_IP" ]]; echo $?)" "$addr"

k create namespace "$ns" >/dev/null

# ------------------------------------------------------- a pod, its log ---
cat >"$work/pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: $ns}
spec:
  restartPolicy: Never
  containers:
  - name: hello
    image: $NVL72_TEST_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'echo "hello from \$(hostname)"; id -u']
EOF
out=$(k apply -f "$work/pod.yaml" 2>&1)
check "a pod of the locally imported image is accepted" $? "$out"
phase() { [[ $(jp -n "$ns" pod "$1" -o 'jsonpath={.status.phase}') == "$2" ]]; }
wait_for 120 phase hello Succeeded
check "the pod runs to completion on the node" $? \
	"$(jp -n "$ns" pod hello -o 'jsonpath={.status}' | cut -c1-400)"
log=$(k -n "$ns" logs hello 2>&1)
[[ $log == *"hello from hello"* ]]
check "its log is read through the API server from the kubelet (TLS both ways)" $? "$log"
node=$(jp -n "$ns" pod hello -o 'jsonpath={.spec.nodeName}')
check "the scheduler placed it on $NVL72_NODE_NAME" "$([[ $node == "$NVL72_NODE_NAME" ]]; echo $?)" "$node"

# -------------------------------------------- a Deployment and a Service ---
cat >"$work/web.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: $NVL72_TEST_IMAGE
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /tmp/www && hostname >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www']
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
EOF
out=$(k apply -f "$work/web.yaml" 2>&1)
check "a Deployment of 2 replicas and its Service are accepted" $? "$out"
replicas() { [[ $(jp -n "$ns" deployment web -o 'jsonpath={.status.readyReplicas}') == 2 ]]; }
wait_for 180 replicas
check "the controller manager gives the Deployment 2 ready pods" $? \
	"$(jp -n "$ns" pods -o wide | tr '\n' ';')"
slices() {
	[[ $(jp -n "$ns" endpointslices -l kubernetes.io/service-name=web \
		-o 'jsonpath={.items[*].endpoints[*].addresses[0]}' | wc -w) == 2 ]]
}
wait_for 60 slices
check "the Service's EndpointSlice lists both pods" $? \
	"$(jp -n "$ns" endpointslices -o yaml | tr '\n' ' ' | cut -c1-300)"

nodeport=$(jp -n "$ns" service web -o 'jsonpath={.spec.ports[0].nodePort}')
# Each answer names the pod that gave it; both pods answer in the end
# (kube-proxy picks at random), within a bounded number of requests.
seen=""
fetch() {
	local body
	body=$(curl -fsS --max-time 2 "http://$NVL72_NODE_IP:$nodeport/") || return 1
	[[ $seen == *"$body"* ]] || seen+="$body "
	[[ $(wc -w <<<"$seen") -ge 2 ]]
}
wait_for 60 fetch
check "the NodePort Service answers from the machine through kube-proxy, from both pods" $? \
	"answers: '$seen'; $(curl -sS --max-time 2 "http://$NVL72_NODE_IP:$nodeport/" 2>&1)"

cip=$(jp -n "$ns" service web -o 'jsonpath={.spec.clusterIP}')
cat >"$work/client.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: $ns}
spec:
  restartPolicy: Never
  containers:
  - name: client
    image: $NVL72_TEST_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'for i in \$(seq 30); do printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 2 $cip 80 | tail -1 | grep web- && exit 0; sleep 1; done; exit 1']
EOF
k apply -f "$work/client.yaml" >/dev/null 2>&1
wait_for 90 phase client Succeeded
rc=$?
body=$(k -n "$ns" logs client 2>&1)
[[ $rc == 0 && $body == web-* ]]
check "the Service's cluster IP $cip answers a pod" $? "phase $(jp -n "$ns" pod client -o 'jsonpath={.status.phase}'): $body"

# The API server through the `kubernetes` Service, as in-cluster clients
# reach it (a request without credentials, so 401 or 403 is an answer).
cat >"$work/api.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: api, namespace: $ns}
spec:
  restartPolicy: Never
  containers:
  - name: api
    image: $NVL72_TEST_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'for i in \$(seq 30); do echo | nc -w 2 \$KUBERNETES_SERVICE_HOST \$KUBERNETES_SERVICE_PORT && { echo reached \$KUBERNETES_SERVICE_HOST; exit 0; }; sleep 1; done; exit 1']
EOF
k apply -f "$work/api.yaml" >/dev/null 2>&1
wait_for 90 phase api Succeeded
rc=$?
body=$(k -n "$ns" logs api 2>&1)
[[ $rc == 0 && $body == *"reached 10.0.0.1"* ]]
check "a pod reaches the API server through the kubernetes Service" $? "$body"

out=$(k -n "$ns" exec deploy/web -- cat /tmp/www/index.html 2>&1)
[[ $out == web-* ]]
check "kubectl exec runs a command in a pod" $? "$out"

# ---------------------------------------------- a kubelet restarted ---
# As `systemctl restart kubelet` on a real node: the next kubelet takes the
# running containers over; nothing is restarted.
web_ids() { k -n "$ns" get pods -l app=web -o jsonpath='{range .items[*]}{.status.containerStatuses[0].containerID}/{.status.containerStatuses[0].restartCount} {end}' 2>&1; }
before=$(web_ids)
t_restart=$(date -u +%s)
out=$(tests/cluster/node.sh kubelet-restart "$work/state" 2>&1)
check "node.sh kubelet-restart stops the kubelet and the node starts the next one (pid $out)" $? "$out"
# The new kubelet posts its own status: a heartbeat newer than the restart.
fresh() {
	local hb
	hb=$(jp node "$NVL72_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')
	[[ -n $hb ]] && (($(date -u -d "$hb" +%s) >= t_restart))
}
wait_for 60 fresh
check "the next kubelet reports the node Ready again" $? \
	"$(jp node "$NVL72_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")]}')"
after=$(web_ids)
[[ $before == *containerd://*/0*containerd://*/0* && $after == "$before" ]]
check "the Deployment's containers run on, not restarted" $? "before $before, after $after"

# ----------------------------------------------------------- teardown ---
out=$(tests/cluster/cluster.sh stop "$NVL72_CLUSTER_DIR" 2>&1)
check "the cluster with its node stops" $? "$out"
left=$(node_leftovers "$work/state")
check "nothing of the node is left (processes, namespaces, interface, cgroups, mounts, iptables)" \
	"$([[ -z $left ]]; echo $?)" "$left"
finish
