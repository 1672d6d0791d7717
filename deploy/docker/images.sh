#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the nvl72-operator and nvl72-agent images from the Dockerfiles next
# to this script into OCI archives, each with an SPDX SBOM, without a registry
# or a container engine (deploy/docker/oci-build.py; docs/images.md).
#
# usage: deploy/docker/images.sh [BUILD_DIR]     (as root; `make images`)
#   IMAGE_ARCHES     architectures to build (default: the machine's; amd64 arm64)
#   IMAGE_OUT        where the archives go (default: BUILD_DIR/images)
#   IMAGE_REGISTRY   registry prefix of the image names (default: the chart's)
#   SOURCE_DATE_EPOCH  the time of every file (default: the commit's time)
#   NVL72_CACHE      the cache folder the test cluster's binaries use; the
#                    Debian bases are kept in its images/ folder, and
#                    tests/deps.sh puts qemu-aarch64-static in its qemu/
#                    folder (where the machine has none on PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
[[ $build == /* ]] || build=$root/$build
out=${IMAGE_OUT:-$build/images}
cache=${NVL72_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvl72-operator}/images
PATH=$PATH:${cache%/images}/qemu
registry=${IMAGE_REGISTRY:-ghcr.io/nvl72-operator}
version=$(sed -n 's/^VERSION := //p' "$root/Makefile")
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}

die() { echo "images: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "building the images needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is missing (Debian package debootstrap)"
case $(uname -m) in
x86_64) host=amd64 ;;
aarch64) host=arm64 ;;
*) die "unknown machine $(uname -m)" ;;
esac

mkdir -p "$out" "$cache"
for arch in ${IMAGE_ARCHES:-$host}; do
	case $arch in
	amd64 | arm64) ;;
	*) die "IMAGE_ARCHES: unknown architecture $arch (amd64, arm64)" ;;
	esac
	bindir=$build/rel/bin
	# Another architecture's RUN steps run under proot and QEMU's user mode
	# emulator (oci-build.py), its binaries are those of `make cross`.
	[[ $arch == "$host" ]] || bindir=$build/$arch/bin
	for img in operator agent; do
		start=$(date +%s)
		python3 "$here/oci-build.py" --dockerfile "$here/Dockerfile.$img" \
			--name "$registry/nvl72-$img:$version" --arch "$arch" --epoch "$epoch" \
			--bin-dir "$bindir" --cache "$cache" \
			--out "$out/nvl72-$img-$arch.tar" --sbom "$out/nvl72-$img-$arch.spdx.json"
		echo "images: nvl72-$img $arch in $(($(date +%s) - start)) s: $out/nvl72-$img-$arch.tar"
	done
done
