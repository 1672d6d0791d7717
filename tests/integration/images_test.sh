#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator and agent images that `make images` builds from deploy/docker/:
# two builds of the same commit give the same digests, each SBOM names the
# image's Debian packages and our binary, every library the binaries need is
# inside, and on the real node, from archives imported into its containerd,
# the operator image prints its version as a non-root user and the agent
# image prints its help as root. On an amd64 machine the arm64 images are
# built too, under proot and QEMU: every ELF file in them is aarch64, their
# SBOMs name arm64 packages, and both binaries start under
# qemu-aarch64-static called by name, with no binfmt_misc.
#
# needs: node
# Run by tests/integration/run.sh, which starts a node for suites marked as
# above. The first build makes the Debian bases (debootstrap: minutes for
# amd64, 16-20 min for arm64 under emulation); later builds take them from
# the cache.
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
case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
# On an amd64 machine the builds make the arm64 images too, from the
# binaries of `make cross`, their RUN steps run under proot and
# qemu-aarch64-static (no binfmt_misc).
arches=$arch
if [[ $arch == amd64 ]]; then
	arches="amd64 arm64"
	out=$(make -s --no-print-directory BUILD="$(realpath --relative-to=. "$build")" cross 2>&1)
	check "the arm64 binaries are built (make cross)" $? "$(tail -5 <<<"$out")"
fi
for b in a b; do
	start=$SECONDS
	IMAGE_ARCHES=$arches IMAGE_OUT=$work/$b deploy/docker/images.sh "$build" >"$work/build-$b.log" 2>&1
	check "build $b of both images for $arches succeeds ($((SECONDS - start)) s)" $? "$(tail -5 "$work/build-$b.log")"
done
for a in $arches; do
	for img in operator agent; do
		da=$(cat "$work/a/nvl72-$img-$a.tar.digest" 2>/dev/null)
		db=$(cat "$work/b/nvl72-$img-$a.tar.digest" 2>/dev/null)
		[[ -n $da && $da == "$db" ]] && cmp -s "$work/a/nvl72-$img-$a.tar" "$work/b/nvl72-$img-$a.tar"
		check "two builds of nvl72-$img for $a give the same digest and archive ($da)" $? "$da vs $db"
	done
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

# ---------------------------------------------------- the arm64 images ---
if [[ $arch == amd64 ]]; then
	opa=$work/op-arm64 aga=$work/ag-arm64
	opacfg=$(unpack "$work/a/nvl72-operator-arm64.tar" "$opa")
	agacfg=$(unpack "$work/a/nvl72-agent-arm64.tar" "$aga")
	got="$(jq -r .architecture <<<"$opacfg") $(jq -r .architecture <<<"$agacfg")"
	check "the arm64 images' configurations name arm64 ($got)" "$([[ $got == "arm64 arm64" ]]; echo $?)" "$got"
	find "$opa" "$aga" -type f -print0 | xargs -0 file -N -F '|' >"$work/arm64-files"
	elf=$(grep -c '| ELF ' "$work/arm64-files")
	other=$(grep '| ELF ' "$work/arm64-files" | grep -v '| ELF 64-bit LSB [^,]*, ARM aarch64,')
	bins=$(grep -c -e "^$opa/usr/bin/nvl72-operator| ELF 64-bit LSB pie executable, ARM aarch64," \
		-e "^$aga/usr/bin/nvl72-agent| ELF 64-bit LSB pie executable, ARM aarch64," "$work/arm64-files")
	[[ -z $other && $bins == 2 ]] && ((elf > 50))
	check "all $elf ELF files of the arm64 images, both binaries among them, are aarch64" $? \
		"binaries found: $bins; $(head -3 <<<"$other")"
	for img in operator agent; do
		s=$work/a/nvl72-$img-arm64.spdx.json
		purls=$(jq -r '.packages[].externalRefs[]?.referenceLocator' "$s")
		n=$(grep -c '?arch=arm64&' <<<"$purls")
		other=$(grep -v -e '?arch=arm64&' -e '?arch=all&' <<<"$purls")
		sum=$(sha256sum "$build/arm64/bin/nvl72-$img" | cut -d' ' -f1)
		got=$(jq -r --arg n "nvl72-$img" '[.packages[] | select(.name == $n) | .checksums[0].checksumValue] | join(",")' "$s")
		[[ -z $other && $got == "$sum" ]] && grep -q '^pkg:deb/debian/libc6@[^?]*?arch=arm64&' <<<"$purls"
		check "nvl72-$img's arm64 SBOM names $n arm64 packages (libc6 among them), none of another architecture, and the arm64 binary" $? \
			"other: $(head -3 <<<"$other"); binary $got (want $sum)"
	done
	jq -r '.packages[] | select(.externalRefs) | .name + "=" + .versionInfo' \
		"$work/a/nvl72-agent-arm64.spdx.json" | sort >"$work/agent-sbom-arm64"
	dpkg-query --admindir="$aga/var/lib/dpkg" -W -f '${db:Status-Status} ${Package}:${Architecture}=${Version}\n' |
		sed -n 's/^installed //p' | sort >"$work/agent-dpkg-arm64"
	n=$(grep -c ':arm64=' "$work/agent-dpkg-arm64")
	sed 's/:[a-z0-9]*=/=/' "$work/agent-dpkg-arm64" | cmp -s - "$work/agent-sbom-arm64" && ((n > 50))
	check "the arm64 agent's SBOM lists exactly the packages of the image's dpkg status ($n of them arm64)" $? \
		"$(sed 's/:[a-z0-9]*=/=/' "$work/agent-dpkg-arm64" | diff - "$work/agent-sbom-arm64" | head -5)"
	# The binaries start under QEMU's user mode emulator, called by name (no
	# binfmt_misc), in a chroot of the unpacked image: every library comes
	# from the image, none from this machine's arm64 packages.
	qemu=$(PATH=$PATH:${NVL72_CACHE:-$HOME/.cache/nvl72-operator}/qemu command -v qemu-aarch64-static)
	cp "$qemu" "$opa/qemu" && cp "$qemu" "$aga/qemu"
	out=$(chroot --userspec=65532:65532 "$opa" /qemu /usr/bin/nvl72-operator --version 2>&1)
	check "the arm64 operator image's binary runs under qemu-aarch64-static as 65532 ($out)" \
		"$([[ $out == "nvl72-operator $version" ]]; echo $?)" "$out"
	out=$(chroot "$aga" /qemu /usr/bin/nvl72-agent --version 2>&1)
	check "the arm64 agent image's binary runs under qemu-aarch64-static ($out)" \
		"$([[ $out == "nvl72-agent $version" ]]; echo $?)" "$out"
fi

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
