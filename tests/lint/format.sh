#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The format rule: every .c and .h under src/, include/, tests/ and bench/
# (but tests/data/) is as the committed .clang-format writes it, with Debian
# 12's clang-format 14 (another version formats some constructs otherwise).
# Prints the first place each file differs, as file:line, and the command
# that fixes it; exits 1 when any file differs.
set -uo pipefail
cd "$(dirname "$0")/../.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
	echo "format: $cf not found (tests/deps.sh installs Debian's clang-format)"
	exit 1
fi
version=$("$cf" --version)
if [[ $version != *" version 14."* ]]; then
	echo "format: clang-format 14 is the reference, found: $version"
	exit 1
fi
mapfile -t files < <(find src include tests bench -path tests/data -prune -o \
	-type f \( -name '*.c' -o -name '*.h' \) -print | LC_ALL=C sort)
# clang-format names every place that differs as file:line:col; keep the
# first of each file and count the rest.
out=$("$cf" --style=file --dry-run "${files[@]}" 2>&1) || {
	printf '%s\n' "$out" | tail -5
	echo "format: $cf failed"
	exit 1
}
awk -F: -v total="${#files[@]}" '/\[-Wclang-format-violations\]$/ {
		if (!($1 in first)) { first[$1] = $2; order[n++] = $1 }
		count[$1]++
	}
	END {
		for (i = 0; i < n; i++) {
			f = order[i]
			printf "%s:%s: not formatted as .clang-format says (%d place%s; clang-format -i %s)\n",
				f, first[f], count[f], (count[f] > 1 ? "s" : ""), f
		}
		printf "format: %d of %d files differ\n", n, total
		exit (n > 0)
	}' <<<"$out"
