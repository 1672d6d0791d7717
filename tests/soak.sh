#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make soak`: runs tests/integration/reliability_test.sh round after round,
# each on a fresh control plane, until SOAK_SECONDS have passed (a round
# that has started is finished). Prints each round's result and the totals;
# exits non-zero when any round failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
secs=${SOAK_SECONDS:-600}
end=$(($(date +%s) + secs))
rounds=0 bad=0 pass=0 fail=0
while (($(date +%s) < end)); do
	rounds=$((rounds + 1))
	start=$(date +%s)
	out=$(tests/integration/run.sh "$build" reliability_test 2>&1)
	rc=$?
	p=$(grep -cE '^ok( |$)' <<<"$out")
	f=$(grep -cE '^not ok( |$)' <<<"$out")
	pass=$((pass + p)) fail=$((fail + f))
	((rc == 0)) || bad=$((bad + 1))
	echo "soak: round $rounds rc=$rc, $p passed, $f failed, $(($(date +%s) - start))s"
	((rc == 0)) || grep -E '^not ok' <<<"$out"
done
echo "soak: $rounds rounds in ${secs}s, $bad failed; $pass passed, $fail failed"
((bad == 0))
