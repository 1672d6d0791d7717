#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Static analysis: Debian 12's cppcheck over src/ as the release build sees
# it (C11, _GNU_SOURCE, the public headers), warnings, portability and
# performance. Prints one file:line per finding; exits 1 when there is any.
# False positives are suppressed where they are, with a reason, or in
# tests/lint/cppcheck.supp when they hold everywhere.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! command -v cppcheck >/dev/null 2>&1; then
	echo "cppcheck: not found (tests/deps.sh installs Debian's cppcheck)"
	exit 1
fi
out=$(cppcheck -j"${LINT_JOBS:-2}" --quiet --std=c11 -D_GNU_SOURCE -I include \
	--enable=warning,portability,performance --inline-suppr \
	--library=posix --library=tests/lint/jansson.cfg \
	--suppress=missingIncludeSystem --suppressions-list=tests/lint/cppcheck.supp \
	--error-exitcode=1 --template='{file}:{line}: {severity} ({id}): {message}' \
	src 2>&1)
rc=$?
[[ -n $out ]] && printf '%s\n' "$out"
n=$(grep -cE '^[^:]+:[0-9]+: ' <<<"$out")
echo "cppcheck: $n finding(s) in $(find src -name '*.c' | wc -l) files"
((rc == 0 && n == 0))
