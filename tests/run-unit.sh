#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs cmocka test programs, shows each one's summary, and ends with the
# totals as "N passed, N failed". Exit status 1 when anything failed.
#
# usage: tests/run-unit.sh LABEL BIN...
set -uo pipefail
label=$1; shift
pass=0 fail=0 broken=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "$@"; do
	out=$("$t" 2>&1)
	rc=$?
	p=$(grep -Eo '^\[  PASSED  \] [0-9]+' <<<"$out" | grep -Eo '[0-9]+$' || echo 0)
	f=$(grep -Eo '^\[  FAILED  \] [0-9]+' <<<"$out" | grep -Eo '[0-9]+$' || echo 0)
	if ((rc != 0 && f == 0)); then
		f=1 # crashed or a sanitizer stopped it before cmocka could count
	fi
	pass=$((pass + p)) fail=$((fail + f))
	if ((rc != 0)); then
		broken+=("$t")
		printf '%s\n' "$out"
	else
		printf '%-60s %s\n' "${t#*/tests/unit/}" "$(grep -E '^\[  PASSED  \]' <<<"$out")"
	fi
done
for b in "${broken[@]}"; do echo "FAILED: $b"; done
echo "unit ($label): $pass passed, $fail failed"
out=${BUILD:-build}
mkdir -p "$out"
echo "$pass $fail" >"$out/.summary-unit-$label"
((fail == 0))
