#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes sure the build and test dependencies are present. As root it installs
# the missing Debian packages; otherwise it names exactly what to install.
set -euo pipefail

# pkg-config name or command -> Debian package
need=(
	"pc:libcurl:libcurl4-openssl-dev"
	"pc:jansson:libjansson-dev"
	"pc:yaml-0.1:libyaml-dev"
	"pc:libwebsockets:libwebsockets-dev"
	"pc:openssl:libssl-dev"
	"pc:cmocka:libcmocka-dev"
	"cmd:pkg-config:pkg-config"
	"cmd:gcc:gcc"
	"cmd:make:make"
	"cmd:clang:clang"
	"cmd:openssl:openssl"
	"cmd:curl:curl"
	"cmd:jq:jq"
	"cmd:yq:yq"
	"cmd:promtool:prometheus"
	"cmd:chromium:chromium"
	"cmd:python3:python3"
	"cmd:flock:util-linux"
	"file:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev"
)

missing=()
for n in "${need[@]}"; do
	IFS=: read -r kind what pkg <<<"$n"
	case $kind in
	pc) pkg-config --exists "$what" 2>/dev/null || missing+=("$pkg") ;;
	cmd) command -v "$what" >/dev/null 2>&1 || missing+=("$pkg") ;;
	file) [[ $(uname -m) != x86_64 || -e $what ]] || missing+=("$pkg") ;;
	esac
done

if ((${#missing[@]})); then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "deps: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
	else
		echo "deps: missing packages; install them with:" >&2
		echo "  sudo apt-get install ${missing[*]}" >&2
		exit 1
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	if [[ -x /usr/local/go/bin/go ]]; then
		: # found below through PATH set by the callers
	else
		echo "deps: Go 1.24 or newer is needed to build the test control plane" >&2
		echo "  (Debian: apt-get install golang-1.24 or a Go toolchain in /usr/local/go)" >&2
		exit 1
	fi
fi
