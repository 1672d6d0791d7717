# SPDX-License-Identifier: Apache-2.0
# What every integration script shares: TAP-like result lines that
# tests/integration/run.sh counts, the final summary, kubectl with bounded
# time, and waiting on a condition. Sourced, never run.

passed=0 failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$(tr -s ' \t\n' ' ' <<<"$2" | cut -c1-500)"; failed=$((failed + 1)); }
check() { if [[ $2 == 0 ]]; then ok "$1"; else not_ok "$1" "$3"; fi; }
# A command's output folded into one short line, for a reason.
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }
wait_for() { # wait_for SECONDS CMD...: polls CMD every 0.5 s until it succeeds
	local until=$((SECONDS + $1))
	shift
	while ((SECONDS <= until)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
