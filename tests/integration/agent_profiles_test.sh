#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent suite (agent_e2e_test.sh) on the platforms other than the
# default GB300 tray: once on a GB200 rack and once on a Vera Rubin rack
# (NVL72_SIM_PROFILE=gb200, vr200), each with its own rack, agents and
# checks of the profile's driver, CUDA version, VBIOS, part number and PCI
# bus ids. Both runs share this suite's control plane: between them the
# first run's objects are deleted, so the second starts from none. The
# quiet window is shortened (NVL72_AGENT_QUIET_WINDOW, default 10 s here):
# the full minute is spent once, in agent_e2e_test.sh itself.
#
# Runner contract: that of agent_e2e_test.sh. Each check's name is prefixed
# with its profile; the totals are summed.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG
here=$(dirname "$0")
k() { timeout 60 "$KUBECTL" --request-timeout=30s "$@"; }

pass=0 fail=0
for profile in gb200 vr200; do
	out=$(mktemp /tmp/nvl72-agent-profiles.XXXXXX)
	NVL72_SIM_PROFILE=$profile NVL72_AGENT_QUIET_WINDOW=${NVL72_AGENT_QUIET_WINDOW:-10} \
		bash "$here/agent_e2e_test.sh" 2>&1 |
		sed -u -e "s/^ok - /ok - $profile: /" -e "s/^not ok - /not ok - $profile: /" |
		tee "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
	rc=${PIPESTATUS[0]}
	p=$(grep -cE '^ok( |$)' "$out")
	f=$(grep -cE '^not ok( |$)' "$out")
	rm -f "$out"
	((rc != 0 && f == 0)) && { echo "not ok - $profile: the suite exited $rc"; f=1; }
	pass=$((pass + p)) fail=$((fail + f))
	# What the run left: its trays, nodes, heartbeat Leases and Events.
	k delete computetrays --all --wait=true >/dev/null 2>&1
	k delete nodes --all --wait=true >/dev/null 2>&1
	k delete leases -n nvl72-system --all >/dev/null 2>&1
	k delete events.events.k8s.io -n default --all >/dev/null 2>&1
done
echo "$pass passed, $fail failed"
((fail == 0))
