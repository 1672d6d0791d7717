#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fills the image builder's cache (the Debian base of each architecture and
# the package installs of each image: deploy/docker/oci-build.py keeps them
# by content) by building the images once, so that the suites that build
# images (images_test.sh, helm_test.sh) start from it. tests/integration/
# run.sh runs it in the background at the lowest CPU priority, after the
# node's binaries, while the suites without a node run: with an empty cache
# the arm64 base alone takes a quarter of an hour under emulation. A
# failure here is the suites' to report; this only says it.
#
# usage: tests/cluster/warm-images.sh BUILD_DIR OUT_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:?usage: warm-images.sh BUILD_DIR OUT_DIR} out=${2:?usage: warm-images.sh BUILD_DIR OUT_DIR}
arches=amd64
case $(uname -m) in
x86_64)
	arches="amd64 arm64"
	make -s --no-print-directory BUILD="$(realpath --relative-to=. "$build")" cross ||
		{ echo "warm-images: make cross failed; arm64 left out"; arches=amd64; }
	;;
aarch64) arches=arm64 ;;
esac
start=$SECONDS
if IMAGE_ARCHES=$arches IMAGE_OUT=$out deploy/docker/images.sh "$build"; then
	echo "warm-images: $arches built in $((SECONDS - start)) s"
else
	echo "warm-images: the build of $arches failed after $((SECONDS - start)) s"
fi
rm -rf "$out"
