#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the integration suites, each against a fresh real control plane that
# is torn down afterwards, even when the suite fails or is interrupted.
# Suites are tests/integration/*_test.sh scripts and the programs built
# from tests/integration/test_*.c under ASan+UBSan; both print `ok - …`/`not ok - …` lines
# (or cmocka's summary) and exit non-zero on failure. A script with the line
# `# needs: node` gets a cluster with a real node (cluster.sh start --node);
# the others get the control plane alone.
#
# usage: tests/integration/run.sh [BUILD_DIR] [FILTER]
set -uo pipefail
build=${1:-build}
filter=${2:-${NVL72_ITEST_FILTER:-}}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
export NVL72_BUILD="$root/$build/rel"

suites=()
for s in tests/integration/*_test.sh "$build"/asan/tests/integration/test_*; do
	[[ -x $s ]] || continue
	[[ -z $filter || $s == *$filter* ]] || continue
	suites+=("$s")
done

work=$(mktemp -d /tmp/nvl72-itest.XXXXXX)
current=""
nodebuild=""
cleanup() {
	[[ -n $current ]] && tests/cluster/cluster.sh stop "$current" >/dev/null 2>&1
	[[ -n $nodebuild ]] && kill -TERM -- "-$nodebuild" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

needs_node() { [[ $1 == *.sh ]] && grep -qx '# needs: node' "$1"; }

# The control plane, kwok and helm are built once, before the first suite.
# The node's binaries, when a suite needs them, take the longest (about 20
# minutes on 2 cores with an empty cache): they build in the background, at
# the lowest CPU priority, while the suites without a node run (those mostly
# wait on the apiserver), and the suites with a node run last, once that
# build is done. With a warm cache it returns at once.
tests/cluster/build.sh core all >/dev/null || exit 1
plain=() noded=()
for s in "${suites[@]}"; do
	if needs_node "$s"; then noded+=("$s"); else plain+=("$s"); fi
done
suites=("${plain[@]}" "${noded[@]}")
# After the node's binaries the same background job warms the image
# builder's cache when a suite builds images (tests/cluster/warm-images.sh):
# arm64 under emulation takes a quarter of an hour with an empty cache.
warm=""
for s in "${noded[@]}"; do
	[[ $s == *images_test.sh || $s == *helm_test.sh ]] && warm=1
done
if ((${#noded[@]} > 0)); then
	setsid nice -n 19 bash -c 'tests/cluster/build.sh node || exit
		[[ -z $1 ]] || tests/cluster/warm-images.sh "$2" "$3" >"$4" 2>&1 || true' \
		_ "$warm" "$(realpath "$build")" "$work/warm-images" "$work/warm-images.log" \
		>"$work/node-build.log" 2>&1 &
	nodebuild=$!
fi
# Waits for the node's build (once); false with its log's tail when it failed.
node_built() {
	local rc=0
	[[ -z $nodebuild ]] && return "${node_rc:-0}"
	wait "$nodebuild" || rc=$?
	nodebuild="" node_rc=$rc
	((rc == 0)) || { echo "-- the node's binaries did not build:"; tail -15 "$work/node-build.log"; }
	[[ -f $work/warm-images.log ]] && grep -h '^warm-images:' "$work/warm-images.log"
	return $rc
}

spass=0 sfail=0 cpass=0 cfail=0
export NVL72_CLUSTER_OWNER=$$
for s in "${suites[@]}"; do
	name=$(basename "$s")
	current="$work/$name"
	echo "== $name"
	mode=()
	needs_node "$s" && mode=(--node)
	if ((${#mode[@]})) && ! node_built; then
		echo "not ok - $name: the node's binaries did not build"
		sfail=$((sfail + 1)) cfail=$((cfail + 1))
		continue
	fi
	if ! env_lines=$(tests/cluster/cluster.sh start "${mode[@]}" "$current"); then
		echo "not ok - $name: control plane did not start"
		sfail=$((sfail + 1))
		continue
	fi
	eval "$env_lines"
	start=$(date +%s)
	out="$work/$name.out"
	timeout --kill-after=10 "${NVL72_SUITE_TIMEOUT:-900}" "$s" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(grep -cE '^ok( |$)' "$out")
	f=$(grep -cE '^not ok( |$)' "$out")
	cp_=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$out" | grep -Eo '[0-9]+$' || true)
	cf_=$(grep -Eo '^\[  FAILED  \] [0-9]+' "$out" | grep -Eo '[0-9]+$' || true)
	p=$((p + ${cp_:-0})) f=$((f + ${cf_:-0}))
	((rc != 0 && f == 0)) && f=1
	cpass=$((cpass + p)) cfail=$((cfail + f))
	if ((rc == 0)); then spass=$((spass + 1)); else sfail=$((sfail + 1)); fi
	echo "== $name: rc=$rc, $p passed, $f failed, $(($(date +%s) - start))s"
	if ((rc != 0)); then
		echo "-- last apiserver log lines:"
		tail -15 "$current/logs/apiserver.log" 2>/dev/null | cut -c1-300
	fi
	tests/cluster/cluster.sh stop "$current"
	current=""
done
echo "integration: ${#suites[@]} suites ($spass ok, $sfail failed)"
echo "integration: $cpass passed, $cfail failed"
mkdir -p "$build"
echo "$cpass $cfail" >"$build/.summary-integration"
((sfail == 0 && cfail == 0))
