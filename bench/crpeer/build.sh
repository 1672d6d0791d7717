#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the controller-runtime peer of the scale benchmark into the cache,
# keyed by its source, so only the first run pays for it. Prints the
# binary's path on its last line.
#
# usage: bench/crpeer/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}
key=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)
bin="$cache/crpeer-$key/crpeer"
if [[ ! -x $bin ]]; then
	export PATH="$PATH:/usr/local/go/bin"
	command -v go >/dev/null || {
		echo "crpeer: go is required to build the controller-runtime peer (Go 1.24+)" >&2
		exit 1
	}
	mkdir -p "${bin%/*}"
	exec 9>"$cache/crpeer.lock"
	flock 9
	if [[ ! -x $bin ]]; then
		echo "crpeer: building the controller-runtime peer (first run only)" >&2
		(cd "$here" && CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$bin.tmp" .)
		mv "$bin.tmp" "$bin"
	fi
fi
echo "$bin"
