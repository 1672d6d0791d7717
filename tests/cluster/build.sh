#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the test control plane (kube-apiserver, kubectl, etcd, kwok, helm)
# from published Go modules into a version-keyed cache outside the work tree.
# A second run finds the binaries and returns at once.
#
# usage: tests/cluster/build.sh [core|all]   (default core: apiserver, kubectl, etcd)
# prints the bin directory on its last line.
set -euo pipefail

KUBE_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.7.0
HELM_VERSION=v3.19.0

here=$(cd "$(dirname "$0")" && pwd)
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
what=${1:-core}
mkdir -p "$bin"

log() { printf 'cluster-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is required to build the test control plane (install Go 1.24+)"; exit 1; }

have() { for b in "$@"; do [[ -x $bin/$b ]] || return 1; done; }
core=(kube-apiserver kubectl etcd)
if have "${core[@]}" && { [[ $what != all ]] || have kwok helm; }; then
	echo "$bin"
	exit 0
fi

# Two builds at once double the peak memory of a link; take a lock so
# parallel suites wait for the first build instead of racing it.
exec 9>"$cache/build.lock"
flock 9

if [[ ! -x $bin/kube-apiserver || ! -x $bin/kubectl ]]; then
	log "building kube-apiserver and kubectl $KUBE_VERSION (first run only, several minutes)"
	ldf="-s -w"
	minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		ldf+=" -X $p.gitTreeState=clean -X $p.gitCommit=unknown -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	(cd "$here/k8sbin" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
		-tags selinux,notest,grpcnotrace -ldflags "$ldf" -o "$tmp/" ./cmd/...)
	mv "$tmp/kube-apiserver" "$tmp/kubectl" "$bin/"
	rmdir "$tmp"
fi

if [[ ! -x $bin/etcd ]]; then
	log "building etcd $ETCD_VERSION"
	(cd "$here/etcdbin" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
		-ldflags "-s -w" -o "$bin/etcd.tmp" .)
	mv "$bin/etcd.tmp" "$bin/etcd"
fi

if [[ $what == all ]]; then
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

echo "$bin"
