#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's checks of its own source (docs/internals/checks.md): layer
# order, format, banned calls, shell statuses read too late and static
# analysis. Each check prints its
# findings as file:line; this runner makes one ok/not ok line of each, keeps
# the whole output in $BUILD/lint/CHECK.log and writes the stage's summary,
# which `make check` adds to its total. Exit status 1 when a check failed.
#
# usage: tests/lint/run.sh [CHECK...]   (default: all of them, in this order)
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
all=(layers format banned status cppcheck)
checks=("$@")
((${#checks[@]})) || checks=("${all[@]}")
shown=40
mkdir -p "$build/lint"
pass=0 fail=0
for c in "${checks[@]}"; do
	case $c in
	layers) cmd=(python3 tests/lint/layers.py) what="includes follow the layer order" ;;
	format) cmd=(tests/lint/format.sh) what="sources are as .clang-format writes them" ;;
	banned) cmd=(python3 tests/lint/banned.py) what="no banned call in src/ and include/" ;;
	status) cmd=(python3 tests/lint/status.py) what="no test script reads \$? after a command substitution" ;;
	cppcheck) cmd=(tests/lint/cppcheck.sh) what="cppcheck finds nothing in src/" ;;
	*)
		echo "lint: no check named $c (${all[*]})"
		exit 2
		;;
	esac
	log=$build/lint/$c.log
	t0=$(date +%s%N)
	"${cmd[@]}" >"$log" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	took=$(printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)))
	if ((rc == 0)); then
		printf 'ok - %s: %s (%s)\n' "$c" "$what" "$took"
		pass=$((pass + 1))
	else
		# The findings, then the check's own last line (its count).
		n=$(($(wc -l <"$log") - 1))
		head -n "$((n < shown ? n : shown))" "$log"
		((n > shown)) && echo "... and $((n - shown)) more in $log"
		tail -n 1 "$log"
		printf 'not ok - %s: %s (%s)\n' "$c" "$what" "$took"
		fail=$((fail + 1))
	fi
done
echo "lint: $pass passed, $fail failed"
echo "$pass $fail" >"$build/.summary-lint"
((fail == 0))
