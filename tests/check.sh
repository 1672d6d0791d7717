#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The body of `make check`, run after everything is built: the checks of the
# source itself, unit tests plain and under ASan+UBSan, a short run of every
# fuzz target, then the integration suites. Every stage runs even when an
# earlier one failed; the last line is the total over all of them.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
rm -f "$build"/.summary-*
t0=$(date +%s)
rc=0
step() {
	local name=$1; shift
	local s=$(date +%s)
	echo "==== $name"
	"$@" || rc=1
	echo "==== $name: $(($(date +%s) - s))s"
}
step "lint" tests/lint/run.sh
step "unit tests" tests/run-unit.sh test $(find "$build/test/tests/unit" -type f -executable 2>/dev/null | sort)
step "unit tests under ASan+UBSan" tests/run-unit.sh asan $(find "$build/asan/tests/unit" -type f -executable 2>/dev/null | sort)
fuzz=$(find "$build/fuzz" -maxdepth 1 -type f -executable -name 'fuzz_*' 2>/dev/null | sort)
if [[ -n $fuzz ]]; then
	step "fuzz (brief)" env FUZZ_SECONDS="${FUZZ_SECONDS:-8}" tests/run-fuzz.sh $fuzz
fi
# The agent runs on arm64 trays: its cross build is one check of its own. A
# toolchain that cannot be installed fails it with deps.sh's message.
cross() {
	if make -s --no-print-directory BUILD="$build" cross >"$build/cross.log" 2>&1; then
		grep '^cross: ' "$build/cross.log"
		echo "ok - arm64 cross build of nvl72-agent and nvl72-operator (make cross)"
		echo "1 0" >"$build/.summary-cross"
	else
		tail -15 "$build/cross.log"
		echo "not ok - arm64 cross build (make cross): see $build/cross.log"
		echo "0 1" >"$build/.summary-cross"
		return 1
	fi
}
step "arm64 cross build" cross
step "integration" tests/integration/run.sh "$build"

pass=0 fail=0
for f in "$build"/.summary-*; do
	[[ -f $f ]] || continue
	read -r p q <"$f"
	pass=$((pass + p)) fail=$((fail + q))
done
echo "check: $(($(date +%s) - t0))s after the build"
echo "$pass passed, $fail failed"
((rc == 0 && fail == 0))
