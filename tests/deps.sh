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
	"pc:libnghttp2:libnghttp2-dev"
	"pc:cmocka:libcmocka-dev"
	"cmd:pkg-config:pkg-config"
	"cmd:gcc:gcc"
	"cmd:make:make"
	"cmd:clang:clang"
	"cmd:clang-format:clang-format"
	"cmd:cppcheck:cppcheck"
	"cmd:openssl:openssl"
	"cmd:curl:curl"
	"cmd:jq:jq"
	"cmd:yq:yq"
	"cmd:promtool:prometheus"
	"cmd:chromium:chromium"
	"cmd:python3:python3"
	"cmd:flock:util-linux"
	"cmd:unshare:util-linux"
	"cmd:ip:iproute2"
	"cmd:iptables:iptables"
	"cmd:runc:runc"
	"path:/usr/lib/cni/bridge:containernetworking-plugins"
	"path:/bin/busybox:busybox-static"
	"cmd:debootstrap:debootstrap"
	"file:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev"
)

missing=()
for n in "${need[@]}"; do
	IFS=: read -r kind what pkg <<<"$n"
	case $kind in
	pc) pkg-config --exists "$what" 2>/dev/null || missing+=("$pkg") ;;
	cmd) command -v "$what" >/dev/null 2>&1 || missing+=("$pkg") ;;
	file) [[ $(uname -m) != x86_64 || -e $what ]] || missing+=("$pkg") ;;
	path) [[ -e $what ]] || missing+=("$pkg") ;;
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

# The arm64 cross build (`make cross`): Debian's cross compiler and the
# arm64 development packages of the libraries the binaries link. They are
# co-installable with the amd64 ones, except libwebsockets-dev (its
# lws_config.h differs per architecture): that one is unpacked into a
# sysroot under the cache, next to the installed arm64 runtime library.
# The arm64 images (`make images` with IMAGE_ARCHES) run their RUN steps
# under proot and qemu-aarch64-static, without binfmt_misc (docs/images.md).
# qemu-aarch64-static alone is unpacked from Debian's qemu-user-static into
# the cache: installing that package would also register its binary formats
# with the kernel wherever systemd-binfmt runs (its binfmt.d files trigger
# it), which the build neither needs nor should change.
cross_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libcurl4-openssl-dev:arm64
	libjansson-dev:arm64 libyaml-dev:arm64 libssl-dev:arm64 libcap-dev:arm64
	libnghttp2-dev:arm64 libwebsockets17:arm64 proot)
cache=${NVL72_CACHE:-$HOME/.cache/nvl72-operator}
sysroot=$cache/arm64
if [[ $(uname -m) == x86_64 ]] && command -v dpkg >/dev/null; then
	cross_missing=()
	for p in "${cross_pkgs[@]}"; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] ||
			cross_missing+=("$p")
	done
	if ((${#cross_missing[@]})); then
		if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
			echo "deps: installing the arm64 cross toolchain: ${cross_missing[*]}" >&2
			export DEBIAN_FRONTEND=noninteractive
			dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
			apt-get update -qq >&2
			apt-get install -y -qq --no-install-recommends "${cross_missing[@]}" >&2
		else
			echo "deps: the arm64 cross build and images (make cross, make images) need, as root:" >&2
			echo "  dpkg --add-architecture arm64 && apt-get update" >&2
			echo "  apt-get install ${cross_missing[*]}" >&2
			exit 1
		fi
	fi
	if [[ ! -f $sysroot/usr/include/lws_config.h ]]; then
		rm -rf "$sysroot.tmp" && mkdir -p "$sysroot.tmp"
		(cd "$sysroot.tmp" && apt-get download -qq libwebsockets-dev:arm64 >&2) &&
			dpkg-deb -x "$sysroot.tmp"/libwebsockets-dev_*_arm64.deb "$sysroot.tmp/root" || {
			echo "deps: could not fetch libwebsockets-dev:arm64 for the cross build" >&2
			exit 1
		}
		so=$(basename "$(ls /usr/lib/aarch64-linux-gnu/libwebsockets.so.* | head -1)")
		ln -sfn "/usr/lib/aarch64-linux-gnu/$so" "$sysroot.tmp/root/usr/lib/aarch64-linux-gnu/libwebsockets.so"
		rm -rf "$sysroot" && mv "$sysroot.tmp/root" "$sysroot" && rm -rf "$sysroot.tmp"
	fi
	qemu=$cache/qemu/qemu-aarch64-static
	if [[ ! -x $qemu ]]; then
		rm -rf "$cache/qemu.tmp" && mkdir -p "$cache/qemu.tmp"
		(cd "$cache/qemu.tmp" && apt-get download -qq qemu-user-static >&2) &&
			dpkg-deb --fsys-tarfile "$cache/qemu.tmp"/qemu-user-static_*.deb |
			tar -x -C "$cache/qemu.tmp" ./usr/bin/qemu-aarch64-static || {
			echo "deps: could not fetch qemu-user-static for the arm64 images" >&2
			exit 1
		}
		mkdir -p "${qemu%/*}" && mv "$cache/qemu.tmp/usr/bin/qemu-aarch64-static" "$qemu"
		rm -rf "$cache/qemu.tmp"
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
