#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the gRPC test peer (the kubelet's plugin clients on grpc-go) into
# the cache, keyed by its source, so only the first run pays for it. Prints
# the binary's path on its last line.
#
# usage: tests/grpcpeer/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
key=$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)
bin="$cache/grpcpeer-$key/grpcpeer"
if [[ ! -x $bin ]]; then
	export PATH="$PATH:/usr/local/go/bin"
	command -v go >/dev/null || {
		echo "grpcpeer: go is required to build the test peer (Go 1.24+)" >&2
		exit 1
	}
	mkdir -p "${bin%/*}"
	exec 9>"$cache/grpcpeer.lock"
	flock 9
	if [[ ! -x $bin ]]; then
		echo "grpcpeer: building the gRPC test peer (first run only)" >&2
		(cd "$here" && CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$bin.tmp" .)
		mv "$bin.tmp" "$bin"
	fi
fi
echo "$bin"
