#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the test control plane (kube-apiserver, kubectl, etcd, kwok, helm)
# and the pieces of a real node (kubelet, kube-proxy, controller manager,
# scheduler, containerd) from published Go modules into a version-keyed
# cache outside the work tree. A second run finds the binaries and returns.
#
# usage: tests/cluster/build.sh [core|all|node]...
#   core  kube-apiserver, kubectl, etcd (the default)
#   all   core, kwok and helm
#   node  core, kubelet, kube-proxy, kube-controller-manager, kube-scheduler,
#         containerd, containerd-shim-runc-v2 and ctr
# prints the bin directory on its last line.
set -euo pipefail

KUBE_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.7.0
HELM_VERSION=v3.19.0
CONTAINERD_VERSION=v2.2.9

here=$(cd "$(dirname "$0")" && pwd)
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
# containerd has a version of its own, so it gets a folder of its own; the
# node's binaries are linked into the one bin folder callers get.
cbin="$cache/containerd-$CONTAINERD_VERSION/bin"
want_all=0 want_node=0
for w in "${@:-core}"; do
	case $w in
	core) ;;
	all) want_all=1 ;;
	node) want_node=1 ;;
	*) printf 'cluster-build: unknown part %s (core, all or node)\n' "$w" >&2; exit 2 ;;
	esac
done
mkdir -p "$bin"

log() { printf 'cluster-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is required to build the test control plane (install Go 1.24+)"; exit 1; }

have() { for b in "$@"; do [[ -x $bin/$b ]] || return 1; done; }
core=(kube-apiserver kubectl etcd)
kube_node=(kubelet kube-proxy kube-controller-manager kube-scheduler)
ctrd=(containerd containerd-shim-runc-v2 ctr)
# containerd counts as there when the links point at this version's build.
have_ctrd() {
	local b
	for b in "${ctrd[@]}"; do
		[[ -x $cbin/$b && $(readlink "$bin/$b") == "$cbin/$b" ]] || return 1
	done
}
if have "${core[@]}" && { ((!want_all)) || have kwok helm; } &&
	{ ((!want_node)) || { have "${kube_node[@]}" && have_ctrd; }; }; then
	echo "$bin"
	exit 0
fi

# Two builds at once double the peak memory of a link; take a lock so
# parallel suites wait for the first build instead of racing it.
exec 9>"$cache/build.lock"
flock 9

# Builds the named commands of tests/cluster/k8sbin/cmd in one go build,
# so they share its compile work, stamped with the Kubernetes version.
build_kube() {
	local ldf="-s -w" minor p tmp pkgs=()
	minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		ldf+=" -X $p.gitTreeState=clean -X $p.gitCommit=unknown -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	for p in "$@"; do pkgs+=("./cmd/$p"); done
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	(cd "$here/k8sbin" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
		-tags selinux,notest,grpcnotrace -ldflags "$ldf" -o "$tmp/" "${pkgs[@]}")
	for p in "$@"; do mv "$tmp/$p" "$bin/"; done
	rmdir "$tmp"
}

if [[ ! -x $bin/kube-apiserver || ! -x $bin/kubectl ]]; then
	log "building kube-apiserver and kubectl $KUBE_VERSION (first run only, several minutes)"
	build_kube kube-apiserver kubectl
fi

if [[ ! -x $bin/etcd ]]; then
	log "building etcd $ETCD_VERSION"
	(cd "$here/etcdbin" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
		-ldflags "-s -w" -o "$bin/etcd.tmp" .)
	mv "$bin/etcd.tmp" "$bin/etcd"
fi

if ((want_all)); then
	if [[ ! -x $bin/kwok ]]; then
		log "building kwok $KWOK_VERSION"
		GOBIN="$bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
			"sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	fi
	if [[ ! -x $bin/helm ]]; then
		log "building helm $HELM_VERSION"
		GOBIN="$bin" CGO_ENABLED=0 go install -trimpath \
			-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
			"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	fi
fi

if ((want_node)); then
	if ! have "${kube_node[@]}"; then
		log "building kubelet, kube-proxy, kube-controller-manager and kube-scheduler $KUBE_VERSION"
		build_kube "${kube_node[@]}"
	fi
	if [[ ! -x $cbin/containerd || ! -x $cbin/containerd-shim-runc-v2 || ! -x $cbin/ctr ]]; then
		log "building containerd $CONTAINERD_VERSION"
		mkdir -p "$cbin"
		tmp=$(mktemp -d "$cbin/.build.XXXXXX")
		# Without cgo only the btrfs snapshotter is left out; the node uses
		# overlayfs or the native snapshotter.
		pkgs=()
		for b in "${ctrd[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$CONTAINERD_VERSION"); done
		GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath \
			-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
			"${pkgs[@]}" || true
		[[ -x $tmp/containerd && -x $tmp/containerd-shim-runc-v2 && -x $tmp/ctr ]] || {
			log "building containerd $CONTAINERD_VERSION failed"
			rm -rf "$tmp"
			exit 1
		}
		mv "$tmp"/* "$cbin/"
		rmdir "$tmp"
	fi
	for b in "${ctrd[@]}"; do ln -sfn "$cbin/$b" "$bin/$b"; done
fi

echo "$bin"
