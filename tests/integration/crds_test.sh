#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the nvl72.io CRDs against a real kube-apiserver: they install, every
# sample passes server-side dry run, every object under tests/data/invalid is
# rejected with an error naming the offending field, kubectl explain reaches
# leaf fields, and kubectl get shows the printer columns.
#
# Run from the repository root with KUBECONFIG (admin) and KUBECTL set, against
# a fresh control plane. Prints one `ok - NAME` or `not ok - NAME: WHY` line per
# case and a final `N passed, M failed` line; exits non-zero on any failure.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary that matches the server}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
export KUBECONFIG

passed=0
failed=0
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; failed=$((failed + 1)); }
finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[[ $failed -eq 0 ]]
	exit
}

# Every call to the server is bounded twice: by the request timeout and by a
# wall-clock limit on the process.
k() { timeout 90 "$KUBECTL" --request-timeout=30s "$@"; }

# A command's output squeezed to one line for a report.
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }

# Names of the CRDs under crds/, from their file names.
crd_names() {
	local f plural
	for f in crds/nvl72.io_*.yaml; do
		plural=${f#crds/nvl72.io_}
		echo "${plural%.yaml}.nvl72.io"
	done
}

# ---------------------------------------------------------------- install ---
out=$(k apply -f crds/ 2>&1)
if [[ $? -eq 0 ]]; then
	ok "apply crds/"
else
	not_ok "apply crds/" "$(one_line "$out")"
	finish
fi

established=1
for crd in $(crd_names); do
	out=$(k wait --for=condition=Established --timeout=60s "crd/$crd" 2>&1) || {
		not_ok "crd $crd established" "$(one_line "$out")"
		established=0
		continue
	}
	ok "crd $crd established"
done
[[ $established -eq 1 ]] || finish

for crd in $(crd_names); do
	got=$(k get "crd/$crd" -o jsonpath='{.spec.names.categories} {.spec.versions[0].subresources.status} {.spec.names.shortNames}' 2>&1)
	if [[ $got == '["nvl72"] {} ["'* ]]; then
		ok "crd $crd has category nvl72, a status subresource and a short name"
	else
		not_ok "crd $crd has category nvl72, a status subresource and a short name" "got: $got"
	fi
done

# The apiserver publishes the new kinds to discovery and OpenAPI shortly after
# they are Established; wait for discovery (bounded) before using them.
for _ in $(seq 60); do
	k api-resources --api-group=nvl72.io -o name 2>/dev/null | grep -q '^upgradeapprovals' && break
	sleep 1
done

# Namespaces the namespaced samples live in.
for ns in $(grep -ohE '\bnamespace: *[a-z0-9-]+' deploy/samples/*.yaml tests/data/invalid/*.yaml |
	sed 's/.*: *//' | sort -u); do
	k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null 2>&1 ||
		not_ok "create namespace $ns" "kubectl create namespace failed"
done

# ---------------------------------------------------------------- samples ---
for f in deploy/samples/*.yaml; do
	out=$(k apply --dry-run=server -f "$f" 2>&1)
	if [[ $? -eq 0 ]] && ! grep -qi '^warning' <<<"$out"; then
		ok "sample $f passes server dry run"
	else
		not_ok "sample $f passes server dry run" "$(one_line "$out")"
	fi
done
# The unit tests load JSON copies of the sample matrices; they must be the
# samples, or the unit tests judge something users never see.
for f in deploy/samples/compatibilitymatrix-*.yaml; do
	name=$(yq -r .metadata.name "$f")
	copy=tests/data/matrix/compatibilitymatrix-$name.json
	if out=$(diff <(yq -S . "$f") <(jq -S . "$copy" 2>&1) 2>&1); then
		ok "$copy is $f"
	else
		not_ok "$copy is $f" "$(one_line "$out" | cut -c1-300)"
	fi
done

# ---------------------------------------------------------------- defaults --
# A rack that leaves its policy out gets the documented defaults.
rack_without_policy() {
	printf 'apiVersion: nvl72.io/v1alpha1\nkind: Rack\nmetadata: {name: defaults-r01}\n'
	printf 'spec:\n  platform: gb200\n  matrix: {name: gb200-2026.10, stack: gb200-r580-95}\n'
	printf '  computeTrays:\n'
	for i in $(seq 1 18); do printf '  - {index: %d, node: defaults-r01-t%02d}\n' "$i" "$i"; done
	printf '  switchTrays:\n'
	for i in $(seq 1 9); do printf '  - {index: %d, oobAddress: defaults-r01-sw%d}\n' "$i" "$i"; done
}
want="2 16 2 true Evict 30m 1h Hold"
got=$(rack_without_policy | k create --dry-run=server -f - -o jsonpath='{.spec.policy.maxUnavailableTrays} {.spec.policy.minHealthyTrays} {.spec.policy.degradedThreshold} {.spec.policy.cordonWhenDegraded} {.spec.policy.drain.mode} {.spec.policy.drain.checkpointDeadline} {.spec.policy.drain.evictionDeadline} {.spec.policy.onGateFailure}' 2>&1)
if [[ $got == "$want" ]]; then
	ok "rack policy defaults"
else
	not_ok "rack policy defaults" "want '$want', got '$(one_line "$got")'"
fi

# ---------------------------------------------------------------- invalid ---
# Each file: line 1 `# expect: <text the error must contain>`, optionally a
# `# setup: <manifest>` line naming an object created first (for rules that
# compare with the stored object), then the object itself.
count=0
for f in tests/data/invalid/*.yaml; do
	name="reject $(basename "$f" .yaml)"
	count=$((count + 1))
	expect=$(sed -n '1s/^# expect: //p' "$f")
	if [[ -z $expect ]]; then
		not_ok "$name" "first line is not '# expect: <substring>'"
		continue
	fi
	setup=$(sed -n '2,5s/^# setup: //p' "$f")
	if [[ -n $setup ]]; then
		out=$(k apply -f "$setup" 2>&1) || {
			not_ok "$name" "setup $setup failed: $(one_line "$out")"
			continue
		}
	fi
	out=$(k apply --dry-run=server -f "$f" 2>&1)
	rc=$?
	if [[ $rc -eq 0 ]]; then
		not_ok "$name" "accepted by the apiserver"
	elif grep -qF -- "$expect" <<<"$out"; then
		ok "$name"
	else
		not_ok "$name" "error lacks '$expect': $(one_line "$out")"
	fi
	if [[ -n $setup ]]; then
		k delete -f "$setup" --ignore-not-found --wait=true --timeout=30s >/dev/null 2>&1 ||
			not_ok "$name cleanup" "could not delete the objects of $setup"
	fi
done
if [[ $count -ge 25 ]]; then
	ok "at least 25 invalid objects ($count)"
else
	not_ok "at least 25 invalid objects" "only $count under tests/data/invalid"
fi

# ---------------------------------------------------------------- explain ---
# kubectl explain reads the published OpenAPI v3; it appears a little after
# the CRD is Established, so each check retries for a bounded time.
explain_has() { # NAME PATH PATTERN...
	local name=$1 path=$2 out pat missing
	shift 2
	for _ in $(seq 30); do
		out=$(k explain "$path" 2>&1)
		missing=
		for pat in "$@"; do
			grep -qE -- "$pat" <<<"$out" || { missing=$pat; break; }
		done
		[[ -z $missing ]] && { ok "$name"; return; }
		sleep 2
	done
	not_ok "$name" "no match for '$missing' in: $(one_line "$out")"
}
explain_has "explain racks.spec.computeTrays lists its fields" racks.spec.computeTrays \
	'FIELD: *computeTrays' '^ +index\s+<integer>' '^ +node\s+<string>' 'unique indices 1 to 18'
explain_has "explain reaches rack leaf computeTrays.node" racks.spec.computeTrays.node \
	'FIELD: *node *<string>' 'Kubernetes Node'
explain_has "explain reaches rack leaf maintenance.windows.start" racks.spec.maintenance.windows.start \
	'FIELD: *start *<string>' 'HH:MM'
explain_has "explain reaches matrix leaf driver.version" \
	compatibilitymatrices.spec.stacks.components.driver.version 'FIELD: *version *<string>' '580\.173\.02'
explain_has "explain reaches tray leaf gpus.fabric.health.partitionAssigned" \
	computetrays.status.gpus.fabric.health.partitionAssigned 'FIELD: *partitionAssigned *<string>' 'partition'
explain_has "explain reaches partition leaf backend.partitionId" rackpartitions.status.backend.partitionId \
	'FIELD: *partitionId *<string>' 'backend'
explain_has "explain reaches compute domain leaf nodes.cliqueID" computedomains.status.nodes.cliqueID \
	'FIELD: *cliqueID *<string>' 'ClusterUUID'
explain_has "explain reaches compute domain leaf channel.resourceClaimTemplate.name" \
	computedomains.spec.channel.resourceClaimTemplate.name 'FIELD: *name *<string>' 'DNS subdomain'
explain_has "explain reaches tray leaf imex.domainUID" computetrays.spec.imex.domainUID \
	'FIELD: *domainUID *<string>' 'metadata.uid of the ComputeDomain'
explain_has "explain reaches upgrade leaf steps.evidence.busBandwidthGBps" \
	rackupgrades.status.steps.evidence.busBandwidthGBps 'FIELD: *busBandwidthGBps *<integer>' 'GB/s'
explain_has "explain reaches approval leaf approvedBy.username" upgradeapprovals.spec.approvedBy.username \
	'FIELD: *username *<string>' 'User name'

# Every field of every kind carries a description in the published schema.
if command -v jq >/dev/null 2>&1; then
	doc=
	for _ in $(seq 30); do
		doc=$(k get --raw /openapi/v3/apis/nvl72.io/v1alpha1 2>/dev/null) && grep -q 'io\.nvl72\.' <<<"$doc" && break
		doc=
		sleep 2
	done
	if [[ -z $doc ]]; then
		not_ok "every field has a description" "no OpenAPI v3 document for nvl72.io/v1alpha1"
	else
		undocumented=$(jq -r '
			def undocumented($p):
				(if has("description") or has("$ref") or has("allOf") then empty else $p end),
				((.properties // {}) | to_entries[] | .key as $k | .value | undocumented($p + "." + $k)),
				(if has("items") then .items | undocumented($p + "[]") else empty end),
				(if (.additionalProperties | type) == "object"
				 then .additionalProperties | undocumented($p + "{}") else empty end);
			.components.schemas | to_entries[] | select(.key | startswith("io.nvl72.")) |
			.key as $k | .value.properties | del(.metadata) | to_entries[] |
			.key as $f | .value | undocumented($k + ":" + $f)' <<<"$doc" 2>&1)
		if [[ $? -ne 0 ]]; then
			not_ok "every field has a description" "jq failed: $(one_line "$undocumented")"
		elif [[ -n $undocumented ]]; then
			not_ok "every field has a description" "missing at $(one_line "$undocumented")"
		else
			ok "every field has a description"
		fi
	fi
else
	not_ok "every field has a description" "jq is not installed (tests/deps.sh installs it)"
fi

# ---------------------------------------------------------- printer columns -
# Create the samples for real, write a realistic status through the status
# subresource, and read the tables back.
out=$(k apply -f deploy/samples/ 2>&1)
if [[ $? -eq 0 ]]; then
	ok "create every sample"
else
	not_ok "create every sample" "$(one_line "$out")"
fi

patch_status() { # NAME RESOURCE OBJECT FILE [NAMESPACE]
	local out
	out=$(k patch "$2" "$3" ${5:+-n "$5"} --subresource=status --type=merge --patch-file "$4" 2>&1)
	if [[ $? -eq 0 ]]; then ok "$1"; else not_ok "$1" "$(one_line "$out")"; fi
}
patch_status "status subresource accepts a matrix status" compatibilitymatrix gb300-2026.10 \
	tests/data/status/compatibilitymatrix-gb300.yaml
patch_status "status subresource accepts a rack status" rack gb300-r07 tests/data/status/rack-gb300.yaml
patch_status "status subresource accepts an agent's tray status" computetray gb300-r07-t03 \
	tests/data/status/computetray.yaml
patch_status "status subresource accepts a partition status" rackpartition gb300-r07-a \
	tests/data/status/rackpartition-a.yaml
patch_status "status subresource accepts a compute domain status" computedomain llm-pretrain \
	tests/data/status/computedomain.yaml team-a
patch_status "status subresource accepts an upgrade status" rackupgrade gb300-r07-r580-173 \
	tests/data/status/rackupgrade-routine.yaml
patch_status "status subresource accepts an approval status" upgradeapproval gb300-r07-r580-173-fabric \
	tests/data/status/upgradeapproval.yaml

# table_is NAME HEADER ROW -- GET-ARGS: the header line and the first row, with
# runs of blanks squeezed and the AGE column dropped, must equal the given text
# (an empty cell, such as BY before the webhook runs, squeezes away).
table_is() {
	local name=$1 want_head=$2 want_row=$3 out head row
	shift 4
	out=$(k get "$@" 2>&1) || { not_ok "$name" "$(one_line "$out")"; return; }
	head=$(sed -n 1p <<<"$out" | tr -s ' ' | sed 's/ AGE$//')
	row=$(sed -n 2p <<<"$out" | tr -s ' ' | sed 's/ [^ ]*$//')
	if [[ $head != "$want_head" ]]; then
		not_ok "$name" "header '$head', want '$want_head'"
	elif [[ $row != "$want_row" ]]; then
		not_ok "$name" "row '$row', want '$want_row'"
	else
		ok "$name"
	fi
}
table_is "kubectl get racks shows platform, stack, ready trays, fabric, upgrade phase" \
	"NAME PLATFORM STACK READY FABRIC UPGRADE" "gb300-r07 gb300 gb300-r580-95 17 Degraded Notice" -- racks
table_is "kubectl get racks -o wide adds desired stack, matrix, degraded" \
	"NAME PLATFORM STACK READY FABRIC UPGRADE DESIRED MATRIX DEGRADED" \
	"gb300-r07 gb300 gb300-r580-95 17 Degraded Notice gb300-r580-95 gb300-2026.10 False" -- racks -o wide
table_is "kubectl get compatibilitymatrices columns" "NAME PLATFORM TIER STACKS ACCEPTED" \
	"gb300-2026.10 gb300 Supported 4 True" -- compatibilitymatrices gb300-2026.10
table_is "kubectl get computetrays columns" "NAME RACK INDEX NODE DRIVER FABRIC IMEX MAINTENANCE" \
	"gb300-r07-t03 gb300-r07 3 gb300-r07-t03 580.95.05 Completed Ready None" -- computetrays
table_is "kubectl get rackpartitions columns" "NAME RACK TRAYS TENANT PHASE" \
	"gb300-r07-a gb300-r07 9 team-a Active" -- rackpartitions gb300-r07-a
table_is "kubectl get computedomains columns" "NAME NODES STATUS RACK" \
	"llm-pretrain 8 Ready gb300-r07" -- computedomains -n team-a
table_is "kubectl get rackupgrades columns" "NAME RACK TARGET CLASS PHASE START" \
	"gb300-r07-r580-173 gb300-r07 gb300-r580-173 routine Canary 2026-11-17T22:00:00Z" -- rackupgrades gb300-r07-r580-173
table_is "kubectl get upgradeapprovals columns" "NAME UPGRADE LAYER DECISION BY COUNTED" \
	"gb300-r07-r580-173-fabric gb300-r07-r580-173 fabric Approved true" -- upgradeapprovals

out=$(k get nvl72 -A -o name 2>&1)
missing=
for kind in compatibilitymatrix rack computetray rackpartition computedomain rackupgrade upgradeapproval; do
	grep -q "^$kind\.nvl72\.io/" <<<"$out" || missing+=" $kind"
done
if [[ -z $missing ]]; then
	ok "kubectl get nvl72 lists every kind"
else
	not_ok "kubectl get nvl72 lists every kind" "missing:$missing"
fi

out=$(k get rk,cmx,ctray,rpart,rup,uappr -o name 2>&1 && k get nvcd -n team-a -o name 2>&1)
if [[ $? -eq 0 ]]; then
	ok "short names resolve"
else
	not_ok "short names resolve" "$(one_line "$out")"
fi

k delete -f deploy/samples/ --ignore-not-found --wait=false >/dev/null 2>&1 || true
finish
