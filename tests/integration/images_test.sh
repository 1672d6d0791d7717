#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator and agent images that `make images` builds from deploy/docker/:
# two builds of the same commit give the same digests, each SBOM names the
# image's Debian packages and our binary, every library the binaries need is
# inside, and on the real node, from archives imported into its containerd,
# the operator image prints its version as a non-root user and the agent
# image prints its help as root.
#
# needs: node
# Run by tests/integration/run.sh, which starts a node for suites marked as
# above. The first build makes the Debian base (debootstrap, minutes); later
# builds take it from the cache.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib/tap.sh

: "${NVL72_NODE_NAME:?NVL72_NODE_NAME: run through tests/integration/run.sh (a node suite)}"
: "${NVL72_CLUSTER_DIR:?}" "${NVL72_K8S_BIN:?}" "${NVL72_BUILD:?}"
export KUBECONFIG
ns=images-test
work=$(mktemp -d /tmp/nvl72-images-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
build=$(dirname "$NVL72_BUILD")
version=$(sed -n 's/^VERSION := //p' Makefile)

# ------------------------------------------------------- two builds ---
for b in a b; do
	start=$SECONDS
	IMAGE_OUT=$work/$b deploy/docker/images.sh "$build" >"$work/build-$b.log" 2>&1
	check "build $b of both images succeeds ($((SECONDS - start)) s)" $? "$(tail -5 "$work/build-$b.log")"
done
case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
for img in operator agent; do
	da=$(cat "$work/a/nvl72-$img-$arch.tar.digest" 2>/dev/null)
	db=$(cat "$work/b/nvl72-$img-$arch.tar.digest" 2>/dev/null)
	[[ -n $da && $da == "$db" ]] && cmp -s "$work/a/nvl72-$img-$arch.tar" "$work/b/nvl72-$img-$arch.tar"
	check "two builds of nvl72-$img give the same digest and archive ($da)" $? "$da vs $db"
done

# unpack ARCHIVE DIR: the image's one layer into DIR; prints the config.
unpack() {
	local m l c
	m=$(tar -xOf "$1" index.json | jq -r '.manifests[0].digest | sub("sha256:"; "")')
	l=$(tar -xOf "$1" "blobs/sha256/$m" | jq -r '.layers[0].digest | sub("sha256:"; "")')
	c=$(tar -xOf "$1" "blobs/sha256/$m" | jq -r '.config.digest | sub("sha256:"; "")')
	mkdir -p "$2" && tar -xOf "$1" "blobs/sha256/$l" | tar -C "$2" -x
	tar -xOf "$1" "blobs/sha256/$c"
}
op=$work/a/nvl72-operator-$arch.tar ag=$work/a/nvl72-agent-$arch.tar
opcfg=$(unpack "$op" "$work/op") agcfg=$(unpack "$ag" "$work/ag")

# ------------------------------------------------ users, libraries ---
u=$(jq -r .config.User <<<"$opcfg")
check "the operator image runs as the non-root user 65532 (USER $u)" "$([[ $u == 65532:65532 ]]; echo $?)" "$u"
u=$(jq -r .config.User <<<"$agcfg")
check "the agent image runs as root (USER $u)" "$([[ $u == 0:0 ]]; echo $?)" "$u"
interp=$(readelf -l "$work/op/usr/bin/nvl72-operator" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
out=$(chroot "$work/op" "$interp" --list /usr/bin/nvl72-operator 2>&1)
[[ $? == 0 && $out != *"not found"* && $out == *libcurl* ]]
check "the operator image's loader finds every library inside the image" $? "$out"
out=$(chroot "$work/ag" ldd /usr/bin/nvl72-agent 2>&1)
[[ $? == 0 && $out != *"not found"* && $out == *libwebsockets* ]]
check "ldd in the agent image finds every library of nvl72-agent" $? "$out"
out=$(ls "$work/op")
[[ ! -e $work/op/bin/sh && ! -e $work/op/usr/bin/dpkg ]]
check "the operator image has no shell and no package manager" $? "$out"

# ------------------------------------------------------------- SBOMs ---
for img in operator agent; do
	s=$work/a/nvl72-$img-$arch.spdx.json
	sum=$(sha256sum "$NVL72_BUILD/bin/nvl72-$img" | cut -d' ' -f1)
	got=$(jq -r --arg n "nvl72-$img" '.spdxVersion + " " +
		([.packages[] | select(.name == $n) | .checksums[0].checksumValue] | join(","))' "$s" 2>&1)
	check "nvl72-$img's SBOM is SPDX 2.3 and names our binary by its SHA-256" \
		"$([[ $got == "SPDX-2.3 $sum" ]]; echo $?)" "$got (want $sum)"
done
jq -r '.packages[] | select(.externalRefs) | .name + "=" + .versionInfo' \
	"$work/a/nvl72-agent-$arch.spdx.json" | sort >"$work/agent-sbom"
dpkg-query --admindir="$work/ag/var/lib/dpkg" -W -f '${db:Status-Status} ${Package}=${Version}\n' |
	sed -n 's/^installed //p' | sort >"$work/agent-dpkg"
n=$(wc -l <"$work/agent-dpkg")
cmp -s "$work/agent-sbom" "$work/agent-dpkg" && ((n > 50))
check "the agent's SBOM lists exactly the $n packages of the image's dpkg status" $? \
	"$(diff "$work/agent-sbom" "$work/agent-dpkg" | head -5)"
got=$(jq -r '[.packages[] | select(.externalRefs) | .name] | join(" ")' "$work/a/nvl72-operator-$arch.spdx.json")
miss=""
for p in libc6 libcurl4 libssl3 libjansson4 libyaml-0-2 libwebsockets17 ca-certificates; do
	[[ " $got " == *" $p "* ]] || miss+="$p "
done
check "the operator's SBOM names the packages its libraries and CA bundle come from" \
	"$([[ -z $miss ]]; echo $?)" "missing: $miss; has: $got"

# ------------------------------------------------- on the real node ---
init=$(sed -n 's/^INIT=//p' "$NVL72_CLUSTER_DIR/node/state" | tail -1)
innode() { nsenter --target "$init" --mount --net -- "$@"; }
snap=$(innode sed -n "s/^ *snapshotter = '\(.*\)'/\1/p" /run/containerd.toml | head -1)
ctr() { innode "$NVL72_K8S_BIN/ctr" --address /run/containerd/containerd.sock -n k8s.io "$@"; }
for img in operator agent; do
	ref=$(tar -xOf "$work/a/nvl72-$img-$arch.tar" index.json | jq -r '.manifests[0].annotations["io.containerd.image.name"]')
	out=$(ctr images import --snapshotter "$snap" "$work/a/nvl72-$img-$arch.tar" 2>&1)
	got=$(ctr images ls "name==$ref" 2>/dev/null | awk -v r="$ref" '$1 == r {print $3}')
	check "the node's containerd imports nvl72-$img as $ref, digest as built" \
		"$([[ $got == "$(cat "$work/a/nvl72-$img-$arch.tar.digest")" ]]; echo $?)" "$out; ls: $got"
	eval "${img}_ref=\$ref"
done

k create namespace "$ns" >/dev/null
pod() { # pod NAME IMAGE RUN_AS_NON_ROOT ARGS_YAML
	cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $ns}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: $3}
  containers:
  - name: main
    image: $2
    imagePullPolicy: Never
    $4
EOF
}
{
	# The kubelet starts a runAsNonRoot container only if the image's user is
	# a numeric uid other than 0.
	pod operator-version "$operator_ref" true 'args: [--version]'
	echo ---
	pod agent-help "$agent_ref" false 'args: [--help]'
	echo ---
	pod agent-id "$agent_ref" false 'command: [id, -u]'
} >"$work/pods.yaml"
out=$(k apply -f "$work/pods.yaml" 2>&1)
check "pods of both images are accepted" $? "$out"
phase() { [[ $(k -n "$ns" get pod "$1" -o 'jsonpath={.status.phase}' 2>/dev/null) == "$2" ]]; }
why() { k -n "$ns" get pod "$1" -o 'jsonpath={.status}' 2>&1 | cut -c1-400; }
wait_for 120 phase operator-version Succeeded
log=$(k -n "$ns" logs operator-version 2>&1)
[[ $log == "nvl72-operator $version" ]]
check "the operator image runs \`nvl72-operator --version\` as non-root on the node ($log)" $? "$log; $(why operator-version)"
wait_for 120 phase agent-help Succeeded
log=$(k -n "$ns" logs agent-help 2>&1)
[[ $log == "usage: nvl72-agent"* ]]
check "the agent image runs \`nvl72-agent --help\` on the node" $? "$(head -3 <<<"$log"); $(why agent-help)"
wait_for 120 phase agent-id Succeeded
log=$(k -n "$ns" logs agent-id 2>&1)
check "the agent image's processes run as uid 0 on the node" "$([[ $log == 0 ]]; echo $?)" "$log; $(why agent-id)"
k delete namespace "$ns" --wait=false >/dev/null 2>&1
finish
