#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target for FUZZ_SECONDS on its corpus in
# tests/fuzz/corpus/<target>/ (new inputs go to a scratch copy, never into
# the tree). A crash, leak or sanitizer report fails the run.
#
# usage: FUZZ_SECONDS=N tests/run-fuzz.sh BIN...
set -uo pipefail
secs=${FUZZ_SECONDS:-10}
pass=0 fail=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in "$@"; do
	name=$(basename "$t")
	corpus="tests/fuzz/corpus/$name"
	work="$scratch/$name"
	mkdir -p "$work"
	[[ -d $corpus ]] && cp -r "$corpus/." "$work/"
	if "$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
		-artifact_prefix="$scratch/$name-" "$work" >"$scratch/$name.log" 2>&1; then
		runs=$(grep -Eo 'Done [0-9]+ runs' "$scratch/$name.log" | grep -Eo '[0-9]+' || echo '?')
		printf 'ok - %s (%s runs in %ss)\n' "$name" "$runs" "$secs"
		pass=$((pass + 1))
	else
		printf 'not ok - %s\n' "$name"
		tail -40 "$scratch/$name.log"
		mkdir -p build/fuzz-artifacts
		cp "$scratch/$name"-* build/fuzz-artifacts/ 2>/dev/null || true
		fail=$((fail + 1))
	fi
done
echo "fuzz: $pass passed, $fail failed"
out=${BUILD:-build}
mkdir -p "$out"
echo "$pass $fail" >"$out/.summary-fuzz"
((fail == 0))
