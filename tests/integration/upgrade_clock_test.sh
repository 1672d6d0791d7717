#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator's wall clock stepped forward and back while a RackUpgrade
# waits, against a real kube-apiserver with 18 simulated trays and real
# agents. Only the operator's clock moves: it runs with the simulator's
# libclockshift.so preloaded, which adds the seconds in a file to
# CLOCK_REALTIME (tests/sim/clockshift.c); the machine, the apiserver and
# the agents keep the true time. The Rack's workload notice is 20 minutes
# and its one maintenance window opens 3 hours from now, for 2 hours.
#   Notice:    the clock moved back an hour, then forward 9 minutes: the
#              upgrade stays in Notice with the same noticeEndTime; moved
#              past the notice's end, it leaves Notice within a bound, not
#              when the sleep computed from the old clock runs out;
#   Scheduled: the clock moved back a day: the same window opening is
#              found again; moved into the window: the canary starts
#              within the bound;
#   a started upgrade: the clock moved back 3 hours, out of the window, as
#              the canary runs: the upgrade goes on to Completed (windows
#              gate the start; a soak that began on the later clock starts
#              again, 3 s, instead of lasting 3 hours more).
#
# Run from the repository root by tests/integration/run.sh against a fresh
# control plane. Prints `ok - …` / `not ok - …` and `N passed, M failed`.
set -u

UPG_WORK_NAME=upgrade-clock
. "$(dirname "$0")/lib/upgrade_env.sh"
t0_all=$SECONDS
CLOCK_LIB=$sim/lib/libclockshift.so
NOTICE_MIN=20
RECHECK_S=60 # the upgrade controller reads the clock again at least this often
BOUND=$((RECHECK_S + 30))

[[ -f $CLOCK_LIB ]] || { not_ok "the simulator's libclockshift.so" "missing: make sim"; finish; }
upg_crds
upg_nodes
shift_file=$work/clock-shift
echo 0 >"$shift_file"
shift_to() { echo "$1" >"$shift_file"; }
LD_PRELOAD=$CLOCK_LIB NVL72_CLOCK_SHIFT_FILE=$shift_file \
	op_start op --webhook-bind-address=0 --log-level=debug --tray-heartbeat-timeout=24h

# The window: 3 hours from now, for 2 hours, on that day of the week (UTC).
wstart=$(($(date -u +%s) / 60 * 60 + 3 * 3600))
wday=$(LC_ALL=C date -u -d "@$wstart" +%A)
whm=$(date -u -d "@$wstart" +%H:%M)
wend=$(date -u -d "@$((wstart + 2 * 3600))" +%H:%M)
upg_rack '.spec.responsibilities |= map(if .layer == "workload" then .noticePeriod = "'"$NOTICE_MIN"'m" else . end) |
	.spec.maintenance = {windows: [{name: "clock", days: ["'"$wday"'"], start: "'"$whm"'", end: "'"$wend"'"}]}'
upg_agents
simctl busbw "$rack" 900 >/dev/null

UP=r07-clock
evaluated() { grep -c "evaluated.*upgrade=$UP " "$work/op.log"; }
# pass_after ACTION...: runs ACTION, then makes the operator evaluate the
# upgrade once more (an annotation is an update event) and waits for that
# evaluation in its debug log.
pass_after() {
	local n
	"$@"
	n=$(evaluated)
	k annotate rackupgrade "$UP" --overwrite "nvl72.io/test-poke=$RANDOM$SECONDS" >/dev/null
	more() { (($(evaluated) > n)); }
	wait_for 30 more
}
field() { ustatus "$UP" ".status.$1" | tr -d '"'; }

out=$(upgrade "$UP" routine | k create -f - 2>&1)
check "create the routine RackUpgrade $FROM -> $TO" $? "$out"
wait_for 60 phase_is "$UP" Notice
check "it serves a ${NOTICE_MIN}-minute notice" $? "$(ustatus "$UP" '.status | {phase, message}')"
nend=$(field noticeEndTime)

# ---- Notice ------------------------------------------------------------------
pass_after shift_to -3600
rc=$?
((rc == 0)) && phase_is "$UP" Notice && [[ $(field noticeEndTime) == "$nend" ]]
check "clock back an hour: still in Notice, the same noticeEndTime ($nend)" $? \
	"rc=$rc $(ustatus "$UP" '.status | {phase, noticeEndTime, message}')"
pass_after shift_to 540
rc=$?
((rc == 0)) && phase_is "$UP" Notice && [[ $(field noticeEndTime) == "$nend" ]]
check "clock forward 9 minutes: still in Notice (it ends at $nend)" $? \
	"rc=$rc $(ustatus "$UP" '.status | {phase, noticeEndTime, message}')"
t=$EPOCHREALTIME
shift_to $(((NOTICE_MIN + 1) * 60))
wait_for "$BOUND" phase_in "$UP" AwaitingApproval Scheduled
rc=$?
took=$(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
check "clock past the notice's end: out of Notice in ${took}s (bound ${BOUND}s), not after the old sleep" \
	$rc "$(ustatus "$UP" '.status | {phase, message}')"

# ---- Scheduled ------------------------------------------------------------------
out=$(approval "$UP" | k create -f - 2>&1)
check "approve it" $? "$out"
wait_for 60 phase_is "$UP" Scheduled
rc=$?
sstart=$(field scheduledStart)
want=$(date -u -d "@$wstart" +%FT%TZ)
((rc == 0)) && [[ $sstart == "$want" && $(field window) == clock ]]
check "Scheduled for the window's opening ($want)" $? "$(ustatus "$UP" '.status | {phase, scheduledStart, window, message}')"
pass_after shift_to $(((NOTICE_MIN + 1) * 60 - 86400))
rc=$?
((rc == 0)) && phase_is "$UP" Scheduled && [[ $(field scheduledStart) == "$want" ]]
check "clock back a day: still Scheduled, the same opening found again" $? \
	"rc=$rc $(ustatus "$UP" '.status | {phase, scheduledStart, message}')"
t=$EPOCHREALTIME
shift_to $((wstart - $(date -u +%s) + 60))
wait_for "$BOUND" phase_in "$UP" Canary Validating RollingOut Completed
rc=$?
took=$(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
check "clock into the window: the canary starts in ${took}s (bound ${BOUND}s)" $rc \
	"$(ustatus "$UP" '.status | {phase, message}')"

# ---- a started upgrade ------------------------------------------------------------
shift_to 0
wait_for 300 phase_in "$UP" Completed Halted Aborted
phase_is "$UP" Completed
check "clock back out of the window: the started upgrade goes on to Completed" $? \
	"$(ustatus "$UP" '.status | {phase, message}')"
drivers=$(trays_json | jq -c '[.[].status.driver.version] | unique')
[[ $drivers == "[\"$TO_DRIVER\"]" ]]
check "every tray runs driver $TO_DRIVER" $? "$drivers"
wait_for 30 released
check "every tray out of maintenance, no Node cordoned" $? "$(trays_json | jq -c '[.[].spec.maintenance]')"
echo "# suite time $((SECONDS - t0_all))s"
finish
