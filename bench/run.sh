#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every benchmark program and keeps its output, stamped with the date,
# the machine (cores, memory, load) and the commit, in bench/results/: one
# dated file per run and latest.txt, a copy of the newest.
#
# usage: bench/run.sh BIN...
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
out=bench/results/run-$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "# $stamp, commit $commit, $(nproc) cores, $mem, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg)"
	for b in "$@"; do
		echo "## $(basename "$b")"
		"$b"
	done
} | tee "$out"
cp "$out" bench/results/latest.txt
echo "bench: results in $out and bench/results/latest.txt"
