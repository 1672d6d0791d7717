#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the deployment artefacts: the Helm chart lints and renders (its
# cert-manager mode rendered only), what it renders is accepted by a real
# kube-apiserver (server-side dry run, then for real), the committed plain manifests and the chart's copies of the CRDs,
# alerts and dashboard have not drifted, the alerts pass promtool and link
# existing runbook sections, every metric the alerts and dashboard use is
# documented, and the service accounts get exactly the rights they should:
# no wildcards, the key permissions, and the important refusals.
#
# Run from the repository root against a fresh control plane, with
# KUBECONFIG (admin), KUBECTL, NVL72_CLUSTER_DIR and NVL72_K8S_BIN set
# (tests/integration/run.sh does this). Prints one `ok - NAME` or
# `not ok - NAME: WHY` line per case and a final `N passed, M failed` line;
# exits non-zero on any failure. Every wait is bounded.
set -u

: "${KUBECTL:?KUBECTL must name a kubectl binary that matches the server}"
: "${KUBECONFIG:?KUBECONFIG must name an admin kubeconfig}"
: "${NVL72_CLUSTER_DIR:?NVL72_CLUSTER_DIR must name the control plane directory}"
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
# check NAME CMD...: ok when CMD succeeds, else its output as the reason.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$(one_line "$out")"; fi
}
one_line() { tr -s ' \t\n' ' ' <<<"$1" | cut -c1-400; }
k() { timeout 90 "$KUBECTL" --request-timeout=30s "$@"; }

tmp=$(mktemp -d /tmp/nvl72-deploy-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

chart=deploy/helm/nvl72-operator
ns=nvl72-system
ans=nvl72-agents # the agents' own namespace, the chart's default
release=nvl72-operator
op_sa=system:serviceaccount:$ns:nvl72-operator
agent_sa=system:serviceaccount:$ans:nvl72-operator-agent

# ------------------------------------------------------------------ tools ---
bin=$(tests/cluster/build.sh all 2>"$tmp/build.log" | tail -1)
HELM=$bin/helm
if [[ -x $HELM ]]; then
	ok "helm is available ($("$HELM" version --short 2>/dev/null))"
else
	not_ok "helm is available" "tests/cluster/build.sh all gave no helm: $(tail -3 "$tmp/build.log" | one_line "$(cat)")"
	finish
fi
export HELM
for t in jq yq; do
	command -v "$t" >/dev/null || { not_ok "$t is available" "install the Debian package $t"; finish; }
done

# ------------------------------------------------------------------- lint ---
check "helm lint (default values)" "$HELM" lint --strict "$chart"
check "helm lint (ServiceMonitor, PrometheusRule, everything on)" "$HELM" lint --strict "$chart" \
	--set serviceMonitor.enabled=true --set prometheusRule.enabled=true
check "helm lint (agent, roles and dashboard off)" "$HELM" lint --strict "$chart" \
	--set agent.enabled=false --set rbac.approverRole=false --set rbac.viewerRole=false \
	--set rbac.metricsReaderRole=false \
	--set grafanaDashboard.enabled=false

out=$("$HELM" lint --strict "$chart" --set serviceMonitor.enable=true --set webhook.failurePolicy=Never 2>&1)
if [[ $? -ne 0 ]] && grep -q "additional properties 'enable'" <<<"$out" && grep -q 'failurePolicy' <<<"$out"; then
	ok "values.schema.json refuses a misspelt key and a bad enum value"
else
	not_ok "values.schema.json refuses a misspelt key and a bad enum value" "$(one_line "$out")"
fi

render() { # render FILE [helm args...]
	local f=$1
	shift
	"$HELM" template "$release" "$chart" --namespace "$ns" --kube-version 1.34.4 "$@" >"$f"
}
render "$tmp/default.yaml" || { not_ok "helm template" "rendering failed"; finish; }
render "$tmp/full.yaml" --set serviceMonitor.enabled=true --set prometheusRule.enabled=true ||
	{ not_ok "helm template (everything on)" "rendering failed"; finish; }
ok "helm template renders (default and everything on)"

# ------------------------------------------------------------------ drift ---
missing=
for f in crds/*.yaml; do
	cmp -s "$f" "$chart/crds/$(basename "$f")" || missing+=" $(basename "$f")"
done
for f in "$chart"/crds/*.yaml; do
	[[ -e crds/$(basename "$f") ]] || missing+=" extra:$(basename "$f")"
done
if [[ -z $missing ]]; then
	ok "chart CRDs equal crds/"
else
	not_ok "chart CRDs equal crds/" "differ:$missing (run deploy/render.sh)"
fi
check "chart's alert rules equal deploy/prometheus/nvl72-rules.yaml" \
	cmp deploy/prometheus/nvl72-rules.yaml "$chart/files/nvl72-rules.yaml"
check "chart's dashboard equals deploy/grafana/nvl72-dashboard.json" \
	cmp deploy/grafana/nvl72-dashboard.json "$chart/files/nvl72-dashboard.json"
check "deploy/manifests equal a fresh render of the chart" deploy/render.sh --check

# ----------------------------------------------------------------- alerts ---
if command -v promtool >/dev/null; then
	check "promtool check rules" promtool check rules deploy/prometheus/nvl72-rules.yaml
	check "promtool test rules (every alert, with suppressions)" \
		promtool test rules deploy/prometheus/nvl72-rules.test.yaml
	# The chart's PrometheusRule carries the same groups.
	yq -y 'select(.kind == "PrometheusRule") | .spec' "$tmp/full.yaml" >"$tmp/promrule-spec.yaml"
	check "promtool check rules on the chart's PrometheusRule" promtool check rules "$tmp/promrule-spec.yaml"
	# Every expression of the dashboard parses ($rack replaced by a value).
	{
		echo "groups:"
		echo "- name: dashboard"
		echo "  rules:"
		jq -r '[.. | objects | select(has("expr")) | .expr] | to_entries[] |
			"  - record: dashboard_expr_\(.key)\n    expr: \(.value | gsub("\\$rack"; "r1") | tojson)"' \
			deploy/grafana/nvl72-dashboard.json
	} >"$tmp/dash-rules.yaml"
	check "every dashboard query is valid PromQL" promtool check rules --lint=none "$tmp/dash-rules.yaml"
else
	not_ok "promtool check rules" "promtool is not installed (Debian package prometheus)"
fi

# Runbook links: every alert links an existing section, every section an alert.
alerts=$(grep -E '^\s*- alert:' deploy/prometheus/nvl72-rules.yaml | sed 's/.*alert: *//' | sort -u)
anchors=$(grep -E '^## ' docs/runbook.md | sed 's/^## *//' | tr 'A-Z' 'a-z' | tr ' ' '-' | tr -cd 'a-z0-9_\n-' | sort -u)
bad=
while read -r a; do
	want="docs/runbook.md#$(tr 'A-Z' 'a-z' <<<"$a")"
	urls=$(awk -v a="$a" '$0 ~ "- alert: "a"$" {f=1} f && /runbook_url:/ {print $2; f=0}' deploy/prometheus/nvl72-rules.yaml)
	[[ -n $urls ]] || bad+=" $a:no-runbook_url"
	for u in $urls; do [[ $u == *"$want" ]] || bad+=" $a:$u"; done
	grep -qx "$(tr 'A-Z' 'a-z' <<<"$a")" <<<"$anchors" || bad+=" $a:no-section"
done <<<"$alerts"
while read -r s; do
	grep -qix "$s" <<<"$alerts" || bad+=" section-without-alert:$s"
done <<<"$anchors"
if [[ -z $bad ]]; then
	ok "every alert has a runbook_url to its own docs/runbook.md section ($(wc -l <<<"$alerts") alerts)"
else
	not_ok "every alert has a runbook_url to its own docs/runbook.md section" "$bad"
fi
for a in NVL72FabricNotCompleted NVL72CliqueMismatchInRack NVL72FabricHealthDegraded NVL72IMEXNotReady \
	NVL72RackDegraded NVL72VersionSkewInDomain NVL72UpgradeHalted NVL72DrainStuck NVL72OperatorDown \
	NVL72OperatorNoLeader; do
	grep -qx "$a" <<<"$alerts" || bad+=" $a"
done
if [[ -z $bad ]]; then ok "the on-call alerts are all defined"; else not_ok "the on-call alerts are all defined" "missing:$bad"; fi

# Metrics used by alerts and dashboard are the documented ones.
used=$({
	grep -oE '\b(nvl72|controller_runtime|workqueue|leader_election|process|rest_client)_[a-z_]+' \
		deploy/prometheus/nvl72-rules.yaml
	jq -r '.. | objects | select(has("expr")) | .expr' deploy/grafana/nvl72-dashboard.json |
		grep -oE '\b(nvl72|controller_runtime|workqueue|leader_election|process|rest_client)_[a-z_]+'
} | sed -E 's/_(bucket|sum|count)$//' | sort -u)
undocumented=
for m in $used; do grep -q "\`$m\`" docs/metrics.md || undocumented+=" $m"; done
if [[ -z $undocumented ]]; then
	ok "every metric the alerts and dashboard use is in docs/metrics.md ($(wc -w <<<"$used") names)"
else
	not_ok "every metric the alerts and dashboard use is in docs/metrics.md" "missing:$undocumented"
fi

dash_check=$(jq -r '
	if (.panels | length) < 20 then "too few panels" else empty end,
	([.panels[].id] | if length != (unique | length) then "duplicate panel ids" else empty end),
	([.panels[] | select(.type == "row") | .title] as $rows |
	 ["Fleet", "Upgrades"] - $rows | if length > 0 then "missing rows \(.)" else empty end),
	([.panels[] | select(.type == "row") | .title | select(startswith("Rack"))] | if length == 0 then "no rack row" else empty end),
	(.templating.list | map(.name) | if (index("rack") == null or index("datasource") == null) then "variables" else empty end)
	' deploy/grafana/nvl72-dashboard.json 2>&1)
if [[ -z $dash_check ]]; then
	ok "dashboard JSON has fleet, rack and upgrades rows and its variables"
else
	not_ok "dashboard JSON has fleet, rack and upgrades rows and its variables" "$(one_line "$dash_check")"
fi

# ------------------------------------------------------- static security ---
# Every RBAC rule the chart can render spells out its verbs, resources and
# groups.
wild=$(for f in "$tmp/default.yaml" "$tmp/full.yaml"; do
	yq -c 'select(.kind == "ClusterRole" or .kind == "Role") | .metadata.name as $n |
		.rules[] | select(((.verbs // []) + (.resources // []) + (.apiGroups // []) + (.nonResourceURLs // [])) | any(. == "*" or test("\\*"))) |
		"\($n): \(.)"' "$f"
done)
if [[ -z $wild ]]; then
	ok "no wildcard verb, resource or group in any rendered Role or ClusterRole"
else
	not_ok "no wildcard verb, resource or group in any rendered Role or ClusterRole" "$(one_line "$wild")"
fi

# Leases: RBAC cannot name an agent's Lease, so the only grant of Lease
# writes to the agent is a Role in the agents' own namespace (not the
# release's, where the leader Lease is), and the own-lease policy (Deny,
# fail closed) that narrows it to its tray's Lease is rendered with the
# operator's leader Lease name, for a layout that shares the namespace.
agent_lease_grants=$(yq -c --arg ns "$ns" '
	select(.kind == "RoleBinding" or .kind == "ClusterRoleBinding") |
	select(any(.subjects[]?; .kind == "ServiceAccount" and .name == "nvl72-operator-agent")) |
	{kind, ns: (.metadata.namespace // ""), role: .roleRef.name, rkind: .roleRef.kind}' "$tmp/default.yaml" |
	while read -r b; do
		rk=$(jq -r .rkind <<<"$b") rn=$(jq -r .role <<<"$b")
		verbs=$(yq -c --arg k "$rk" --arg n "$rn" 'select(.kind == $k and .metadata.name == $n) |
			[.rules[] | select((.apiGroups // []) | index("coordination.k8s.io")) |
			 select((.resources // []) | index("leases")) | .verbs[] |
			 select(. == "create" or . == "update" or . == "patch" or . == "delete" or . == "deletecollection")] | unique' \
			"$tmp/default.yaml")
		[[ $verbs == "[]" || -z $verbs ]] || printf '%s %s %s\n' "$(jq -r .kind <<<"$b")" "$(jq -r .ns <<<"$b")" "$verbs"
	done)
leader=$(yq -r 'select(.kind == "Deployment") | .spec.template.spec.containers[0].args[] |
	select(startswith("--leader-election-id=")) | sub("--leader-election-id="; "")' "$tmp/default.yaml")
policy=$(yq -c 'select(.kind == "ValidatingAdmissionPolicy" and .metadata.name == "nvl72-operator-agent-own-lease") |
	{f: .spec.failurePolicy, p: (.spec.paramKind.kind // ""), ops: .spec.matchConstraints.resourceRules[0].operations,
	 v: [.spec.validations[].expression]}' "$tmp/default.yaml")
pbind=$(yq -c 'select(.kind == "ValidatingAdmissionPolicyBinding" and .metadata.name == "nvl72-operator-agent-own-lease") |
	{a: .spec.validationActions, nf: (.spec.paramRef.parameterNotFoundAction // "")}' "$tmp/default.yaml")
tpolicy=$(yq -c 'select(.kind == "ValidatingAdmissionPolicy" and .metadata.name == "nvl72-operator-agent-own-tray-lease") |
	{f: .spec.failurePolicy, p: .spec.paramKind.kind}' "$tmp/default.yaml")
tbind=$(yq -c 'select(.kind == "ValidatingAdmissionPolicyBinding" and .metadata.name == "nvl72-operator-agent-own-tray-lease") |
	{a: .spec.validationActions, nf: .spec.paramRef.parameterNotFoundAction}' "$tmp/default.yaml")
# The first policy has no parameters, so it holds also before any
# ComputeTray exists; the second, keyed on the trays, allows when there is
# none (a Deny there would refuse every Lease write in the cluster, the
# operator's and the kubelets' included, until a Rack exists).
if [[ $agent_lease_grants == "RoleBinding $ans "* && $(wc -l <<<"$agent_lease_grants") == 1 &&
	$(jq -r '.f + " " + .p + " " + (.ops | join(","))' <<<"$policy") == "Fail  CREATE,UPDATE,DELETE" &&
	$(jq -r --arg l "\"$leader\"" '.v | map(select(contains($l))) | length' <<<"$policy") == 1 &&
	$pbind == '{"a":["Deny"],"nf":""}' && $tpolicy == '{"f":"Fail","p":"ComputeTray"}' &&
	$tbind == '{"a":["Deny"],"nf":"Allow"}' ]]; then
	ok "the agent may write Leases only through a Role in $ans (not $ns), narrowed to its own tray's by a fail-closed policy that names the leader Lease ($leader)"
else
	not_ok "agent Lease writes are confined" "grants=$(one_line "$agent_lease_grants") leader=$leader policy=$(one_line "$policy") binding=$pbind tray policy=$tpolicy binding=$tbind"
fi

dep=$(yq -c 'select(.kind == "Deployment")' "$tmp/default.yaml")
problems=$(jq -r '
	.spec.template.spec as $p | $p.containers[0] as $c |
	(if .spec.replicas != 2 then "replicas \(.spec.replicas)" else empty end),
	(if $p.securityContext.runAsNonRoot != true then "pod runAsNonRoot" else empty end),
	(if $p.securityContext.seccompProfile.type != "RuntimeDefault" then "pod seccomp" else empty end),
	(if $c.securityContext.readOnlyRootFilesystem != true then "readOnlyRootFilesystem" else empty end),
	(if $c.securityContext.allowPrivilegeEscalation != false then "allowPrivilegeEscalation" else empty end),
	(if $c.securityContext.capabilities.drop != ["ALL"] then "capabilities" else empty end),
	(if $c.securityContext.seccompProfile.type != "RuntimeDefault" then "container seccomp" else empty end),
	(if $c.livenessProbe.httpGet.path != "/healthz" then "liveness" else empty end),
	(if $c.readinessProbe.httpGet.path != "/readyz" then "readiness" else empty end),
	(if ($c.resources.requests.cpu and $c.resources.requests.memory and $c.resources.limits.cpu and $c.resources.limits.memory) | not then "resources" else empty end),
	(if ($c.args | index("--leader-elect=true")) == null then "leader election" else empty end),
	(if $p.priorityClassName != "system-cluster-critical" then "priority class" else empty end)
	' <<<"$dep" 2>&1)
if [[ -n $dep && -z $problems ]]; then
	ok "operator Deployment: 2 replicas, leader election, probes, non-root, read-only root, no capabilities, seccomp, resources, system-cluster-critical"
else
	not_ok "operator Deployment hardening" "$(one_line "${problems:-no Deployment rendered}")"
fi

ds=$(yq -c 'select(.kind == "DaemonSet")' "$tmp/default.yaml")
problems=$(jq -r '
	.spec.template.spec as $p | $p.containers[0] as $c |
	(if $p.hostPID != true then "hostPID" else empty end),
	(if $c.securityContext.privileged != true then "privileged" else empty end),
	(if ($p.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key) != "nvl72.io/rack" then "tray node label" else empty end),
	(if ($p.volumes | map(select(.hostPath)) | length) < 5 then "host mounts" else empty end),
	(if ($c.resources.limits.memory | not) then "resources" else empty end),
	(if ($c.args | index("--tool-namespace=host")) == null then "tools in the host namespace" else empty end)
	' <<<"$ds" 2>&1)
if [[ -n $ds && -z $problems ]]; then
	ok "agent DaemonSet: privileged, hostPID, tray node label, host mounts, resources, tools in the host namespace"
else
	not_ok "agent DaemonSet" "$(one_line "${problems:-no DaemonSet rendered}")"
fi
# Each host mount in the template is explained by a comment right above it.
uncommented=$(awk '
	/^ *volumeMounts:/ {in_m = 1; next}
	/^ *volumes:/ {in_m = 0}
	in_m && /^ *- name: / && prev !~ /^ *#/ {print $3}
	{prev = $0}' "$chart/templates/agent-daemonset.yaml" | grep -vx 'tmp')
if [[ -z $uncommented ]]; then
	ok "every host mount of the agent is commented with why"
else
	not_ok "every host mount of the agent is commented with why" "uncommented: $(one_line "$uncommented")"
fi
# The kubelet plugin of imex.nvl72.io: the kubelet's folders and the CDI
# folder at the same paths as on the host, and the flags naming them.
kp=$(jq -c '.spec.template.spec as $p | {
	m: [$p.containers[0].volumeMounts[] | select(.name == "kubelet-registry" or .name == "kubelet-plugin" or .name == "cdi") | .mountPath],
	v: [$p.volumes[] | select(.name == "kubelet-registry" or .name == "kubelet-plugin" or .name == "cdi") | .hostPath.path],
	a: [$p.containers[0].args[] | select(startswith("--kubelet-") or startswith("--cdi-dir"))]}' <<<"$ds")
if [[ $kp == '{"m":["/var/lib/kubelet/plugins_registry","/var/lib/kubelet/plugins/imex.nvl72.io","/var/run/cdi"],"v":["/var/lib/kubelet/plugins_registry","/var/lib/kubelet/plugins/imex.nvl72.io","/var/run/cdi"],"a":["--kubelet-plugin=true","--kubelet-registry-dir=/var/lib/kubelet/plugins_registry","--kubelet-plugins-dir=/var/lib/kubelet/plugins","--cdi-dir=/var/run/cdi"]}' ]]; then
	ok "agent DaemonSet: the kubelet's plugins_registry, plugins/imex.nvl72.io and /var/run/cdi at the same paths, and the flags naming them"
else
	not_ok "agent DaemonSet: kubelet plugin mounts and flags" "$kp"
fi
kp_off=$(render /dev/stdout --set agent.kubeletPlugin.enabled=false |
	yq -c 'select(.kind == "DaemonSet" or (.kind == "ValidatingAdmissionPolicy" and (.metadata.name | endswith("own-resourceslice")))) |
	if .kind == "DaemonSet" then [.spec.template.spec.volumes[].name | select(startswith("kubelet") or . == "cdi")] + [.spec.template.spec.containers[0].args[] | select(startswith("--kubelet"))] else .metadata.name end' | jq -sc 'flatten')
[[ $kp_off == '["--kubelet-plugin=false"]' ]] &&
	ok "agent.kubeletPlugin.enabled=false: no kubelet mounts, no ResourceSlice policy, --kubelet-plugin=false" ||
	not_ok "agent.kubeletPlugin.enabled=false" "$kp_off"
rpolicy=$(yq -c 'select(.kind == "ValidatingAdmissionPolicy" and .metadata.name == "nvl72-operator-agent-own-resourceslice") |
	{f: .spec.failurePolicy, r: .spec.matchConstraints.resourceRules[0].resources, ops: .spec.matchConstraints.resourceRules[0].operations,
	 v: ([.spec.validations[].expression] | join(" "))}' "$tmp/default.yaml")
rbind=$(yq -c 'select(.kind == "ValidatingAdmissionPolicyBinding" and .metadata.name == "nvl72-operator-agent-own-resourceslice") |
	{a: .spec.validationActions, p: .spec.policyName}' "$tmp/default.yaml")
if [[ $(jq -r '.f + " " + (.r | join(",")) + " " + (.ops | join(","))' <<<"$rpolicy") == "Fail resourceslices CREATE,UPDATE,DELETE" &&
	$(jq -r .v <<<"$rpolicy") == *"s.spec.nodeName == variables.node"* &&
	$(jq -r .v <<<"$rpolicy") == *"s.spec.driver == 'imex.nvl72.io'"* &&
	$rbind == '{"a":["Deny"],"p":"nvl72-operator-agent-own-resourceslice"}' ]]; then
	ok "a fail-closed policy keeps the agent's ResourceSlice writes to its own Node and the driver imex.nvl72.io"
else
	not_ok "agent ResourceSlice policy" "policy=$(one_line "$rpolicy") binding=$rbind"
fi
label=$(render /dev/stdout --set agent.trayNodeLabel=example.com/nvl72-tray --set 'agent.trayNodeLabelValues={gb300}' |
	yq -c 'select(.kind == "DaemonSet") | .spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]')
if [[ $label == '{"key":"example.com/nvl72-tray","operator":"In","values":["gb300"]}' ]]; then
	ok "agent tray node label is configurable"
else
	not_ok "agent tray node label is configurable" "got $label"
fi

# Where the privileged agent may land: GPU Nodes only (node-feature-
# discovery's NVIDIA PCI label), never a control-plane Node, tolerating
# named taints rather than every one, with no host log folder mounted; and
# the operator told exactly that selection.
problems=$(jq -r '
	.spec.template.spec as $p | $p.containers[0] as $c |
	($p.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions) as $m |
	(if ($m | index({"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]})) == null then "GPU label" else empty end),
	(if ($m | index({"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"})) == null then "control-plane excluded" else empty end),
	(if ($p.tolerations // [] | map(select(.key == null)) | length) > 0 then "a toleration of every taint" else empty end),
	(if ($p.volumes | map(select(.hostPath.path == "/var/log")) | length) > 0 then "/var/log mounted" else empty end)
	' <<<"$ds" 2>&1)
sel=$(yq -r 'select(.kind == "Deployment") | .spec.template.spec.containers[0].args[] | select(startswith("--agent-node-selector="))' "$tmp/default.yaml")
[[ $sel != "--agent-node-selector=nvl72.io/rack,feature.node.kubernetes.io/pci-10de.present=true,!node-role.kubernetes.io/control-plane" ]] &&
	problems+=" operator selector: ${sel:-none}"
if [[ -n $ds && -z ${problems// /} ]]; then
	ok "agent placement: GPU Nodes only, never control-plane, named tolerations, no /var/log; the operator gets that selector"
else
	not_ok "agent placement" "$(one_line "$problems")"
fi

# Ingress to the operator pods: the webhook port from any source (the API
# server), /metrics from in-cluster pods, the dashboard from nobody by default.
np=$(yq -c 'select(.kind == "NetworkPolicy")' "$tmp/default.yaml")
want='{"sel":{"app.kubernetes.io/component":"operator","app.kubernetes.io/instance":"nvl72-operator","app.kubernetes.io/name":"nvl72-operator"},"types":["Ingress"],"rules":[{"ports":[9443],"from":null},{"ports":[8080],"from":[{"namespaceSelector":{}}]}]}'
got=$(jq -cS '{sel: .spec.podSelector.matchLabels, types: .spec.policyTypes,
	rules: [.spec.ingress[] | {ports: [.ports[].port], from: .from}]}' <<<"$np" 2>&1)
dash=$(render /dev/stdout --set 'networkPolicy.dashboardFrom[0].podSelector.matchLabels.app=oncall' |
	yq -c 'select(.kind == "NetworkPolicy") | [.spec.ingress[] | select(.ports[0].port == 8082) | .from]')
if [[ $got == "$(jq -cS . <<<"$want")" && $dash == '[[{"podSelector":{"matchLabels":{"app":"oncall"}}}]]' ]]; then
	ok "operator NetworkPolicy: the webhook port from any source, /metrics from in-cluster pods, the dashboard only from dashboardFrom"
else
	not_ok "operator NetworkPolicy" "got $(one_line "$got"); dashboard rule $(one_line "$dash")"
fi

# The dashboard: on the pod's loopback and without a Service by default, on
# every address behind its Service with operator.dashboard.expose; its feed's
# readers get the nvl72-dashboard-viewer ClusterRole ("get" on /ws, nothing
# else: tenants' ComputeDomains come from their own list grants).
dash_arg() { yq -r 'select(.kind == "Deployment" and .metadata.labels["app.kubernetes.io/component"] == "operator") |
	.spec.template.spec.containers[0].args[] | select(startswith("--dashboard-bind-address="))' "$1"; }
dash_svc() { yq -r 'select(.kind == "Service") | .metadata.name' "$1" | grep -c -- '-dashboard$'; }
render "$tmp/exposed.yaml" --set operator.dashboard.expose=true
viewer=$(yq -c 'select(.kind == "ClusterRole" and .metadata.name == "nvl72-dashboard-viewer") | .rules' "$tmp/default.yaml")
got="$(dash_arg "$tmp/default.yaml") $(dash_svc "$tmp/default.yaml") $(dash_arg "$tmp/exposed.yaml") $(dash_svc "$tmp/exposed.yaml") $viewer"
if [[ $got == '--dashboard-bind-address=127.0.0.1:8082 0 --dashboard-bind-address=:8082 1 [{"nonResourceURLs":["/ws"],"verbs":["get"]}]' ]]; then
	ok "dashboard on the pod's loopback, no Service, by default; exposed behind its Service on request; nvl72-dashboard-viewer is get on /ws"
else
	not_ok "dashboard bind address, Service and viewer role" "$(one_line "$got")"
fi

webhooks=$(yq -c 'select(.kind | test("WebhookConfiguration$")) | {kind, webhooks: [.webhooks[] | {failurePolicy, svc: .clientConfig.service.name, ca: (.clientConfig.caBundle // ""), res: [.rules[].resources[]]}]}' "$tmp/default.yaml")
problems=$(jq -rs '
	(map(select(.kind == "ValidatingWebhookConfiguration")) | if length != 1 then "validating count" else empty end),
	(map(select(.kind == "MutatingWebhookConfiguration")) | if length != 1 then "mutating count" else empty end),
	(.[].webhooks[] | select(.failurePolicy != "Fail") | "failurePolicy \(.failurePolicy)"),
	(.[].webhooks[] | select(.svc != "nvl72-operator") | "service \(.svc)"),
	(.[].webhooks[] | select(.ca != "") | "caBundle set in the chart"),
	(map(select(.kind == "MutatingWebhookConfiguration")) | .[0].webhooks[0].res | if . != ["upgradeapprovals"] then "mutating resources \(.)" else empty end),
	(map(select(.kind == "ValidatingWebhookConfiguration")) | .[0].webhooks[0].res |
	 (["compatibilitymatrices", "racks", "rackpartitions", "rackupgrades"] - .) | if length > 0 then "validating misses \(.)" else empty end)
	' <<<"$webhooks" 2>&1)
if [[ -z $problems ]]; then
	ok "webhooks: validating (matrices, racks, partitions, upgrades) and mutating (UpgradeApproval), Fail, operator Service, no caBundle in the chart"
else
	not_ok "webhook configurations" "$(one_line "$problems")"
fi

# ------------------------------------------ cert-manager (rendered only) ---
# webhook.certManager.enabled hands the serving certificate to cert-manager.
# cert-manager is not installed in the test cluster, so this path is checked
# on the rendered chart only: cert-manager's CA pattern (a self-signed Issuer,
# a CA Certificate, a CA Issuer, the serving Certificate in the Secret the
# operator reads), the CA injector's annotation on both configurations, and
# an operator that only reads that Secret.
check "helm lint (webhook.certManager.enabled)" "$HELM" lint --strict "$chart" \
	--set webhook.certManager.enabled=true
render "$tmp/cm.yaml" --set webhook.certManager.enabled=true ||
	{ not_ok "helm template (webhook.certManager.enabled)" "rendering failed"; finish; }
problems=$(yq -s --arg ns "$ns" --arg n "$release" '
	(map(select(.kind == "Issuer" or .kind == "Certificate")) | map({(.kind + "/" + .metadata.name): .}) | add // {}) as $o |
	($o["Issuer/\($n)-selfsigned"].spec.selfSigned) as $ss |
	$o["Certificate/\($n)-webhook-ca"].spec as $ca |
	$o["Issuer/\($n)-webhook-ca"].spec as $cai |
	$o["Certificate/\($n)-webhook"].spec as $srv |
	(map(select(.kind == "Deployment")) | .[0].spec.template.spec.containers[0].args) as $args |
	(if $ss == null then "no self-signed Issuer" else empty end),
	(if ($ca.isCA != true or $ca.issuerRef.name != "\($n)-selfsigned") then "CA Certificate \($ca)" else empty end),
	(if ($cai.ca.secretName == null or $cai.ca.secretName != $ca.secretName) then "CA Issuer \($cai)" else empty end),
	(if ($srv.issuerRef.name != "\($n)-webhook-ca" or $srv.secretName != "\($n)-webhook-tls"
	     or $srv.dnsNames != ["\($n).\($ns).svc", "\($n).\($ns).svc.cluster.local"]) then "serving Certificate \($srv)" else empty end),
	(map(select(.kind | test("WebhookConfiguration$"))) | if length != 2 then "\(length) webhook configurations" else .[] |
	 select(.metadata.annotations["cert-manager.io/inject-ca-from"] != "\($ns)/\($n)-webhook" or
	        any(.webhooks[]; .clientConfig.caBundle != null)) | "\(.kind): annotation or caBundle" end),
	(map(select(.kind == "Secret" and .metadata.name == "\($n)-webhook-tls")) | if length > 0 then "the chart still renders the Secret" else empty end),
	(if ($args | index("--webhook-cert-source=secret")) == null then "operator args \($args)" else empty end),
	(map(select(.kind == "Role" or .kind == "ClusterRole") | select(.metadata.name == $n) | .rules[]) |
	 (.[] | select(.resources | index("secrets")) | select(.resourceNames == ["\($n)-webhook-tls"]) | select(.verbs != ["get"]) | "Secret verbs \(.verbs)"),
	 (.[] | select(.resources | index("validatingwebhookconfigurations")) | "a right on the webhook configurations"))
	' "$tmp/cm.yaml" 2>&1)
if [[ -z $problems ]]; then
	ok "cert-manager: Issuers, CA and serving Certificates, inject-ca-from on both configurations, the operator only reads the Secret (rendered)"
else
	not_ok "cert-manager rendering" "$(one_line "$problems")"
fi
problems=$(yq -s --arg n "$release" '
	(map(select(.kind == "Issuer" or .kind == "Certificate")) | if length > 0 then "cert-manager objects by default" else empty end),
	(map(select(.metadata.annotations["cert-manager.io/inject-ca-from"] != null)) | if length > 0 then "inject-ca-from by default" else empty end),
	(map(select(.kind == "Deployment")) | .[0].spec.template.spec.containers[0].args |
	 if index("--webhook-cert-source=self") == null then "operator args \(.)" else empty end)
	' "$tmp/default.yaml" 2>&1)
if [[ -z $problems ]]; then
	ok "by default no cert-manager object: the operator makes and renews the certificate (--webhook-cert-source=self)"
else
	not_ok "default certificate source" "$(one_line "$problems")"
fi

# -------------------------------------------------------------- apiserver ---
# The operator's namespace enforces the restricted level, so the dry runs
# below (which fail on a Pod Security warning) show the operator passes it
# and no privileged workload lands there. The agents' namespace is made
# here as the chart makes it: a server-side dry run creates nothing, and
# the agent's objects need it to exist (--save-config: kubectl apply of
# the chart then finds it as its own).
out=$(k create namespace "$ns" 2>&1) &&
	out=$(k label namespace "$ns" pod-security.kubernetes.io/enforce=restricted 2>&1) &&
	out=$(k create namespace "$ans" --save-config 2>&1) &&
	out=$(k label namespace "$ans" pod-security.kubernetes.io/enforce=privileged 2>&1)
if [[ $? -eq 0 ]]; then ok "create namespaces $ns (restricted) and $ans (privileged)"; else not_ok "create namespaces $ns and $ans" "$(one_line "$out")"; finish; fi

out=$(k apply -f "$chart/crds/" 2>&1) &&
	out=$(k wait --for=condition=Established --timeout=60s crd -l app.kubernetes.io/part-of=nvl72-operator 2>&1)
if [[ $? -eq 0 ]]; then ok "chart CRDs install and become Established"; else not_ok "chart CRDs install" "$(one_line "$out")"; finish; fi

dry_run() { # NAME FILE
	local out
	out=$(k apply --dry-run=server -f "$2" 2>&1)
	if [[ $? -eq 0 ]] && ! grep -qi '^warning' <<<"$out"; then
		ok "$1"
	else
		not_ok "$1" "$(one_line "$out")"
	fi
}
dry_run "helm template | kubectl apply --dry-run=server (default values)" "$tmp/default.yaml"
dry_run "kubectl apply --dry-run=server deploy/manifests/nvl72-operator.yaml" deploy/manifests/nvl72-operator.yaml

# /metrics needs a token by default: the flag on the operator, Prometheus's
# token on the ServiceMonitor, and a reader role with exactly that grant.
got=$(yq -c 'select(.kind == "Deployment" and .metadata.name == "nvl72-operator") |
	.spec.template.spec.containers[0].args[] | select(test("^--metrics-require-token"))' "$tmp/full.yaml")
sm=$(yq -c 'select(.kind == "ServiceMonitor") | .spec.endpoints[0].bearerTokenFile' "$tmp/full.yaml")
rules=$(yq -c 'select(.kind == "ClusterRole" and .metadata.name == "nvl72-metrics-reader") | .rules' "$tmp/full.yaml")
if [[ $got == '"--metrics-require-token=true"' &&
	$sm == '"/var/run/secrets/kubernetes.io/serviceaccount/token"' &&
	$rules == '[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]' ]]; then
	ok "the chart requires a token on /metrics, sends Prometheus's, and grants get on /metrics only"
else
	not_ok "the chart requires a token on /metrics, sends Prometheus's, and grants get on /metrics only" \
		"arg=$got tokenFile=$sm rules=$rules"
fi

# The Prometheus Operator's kinds do not exist here. Stand-in CRDs with a
# strict schema of just the fields the chart uses let the apiserver check
# the objects' shape (field names and types as this project understands
# them; the real schemas are larger). promtool checks the rules themselves.
cat >"$tmp/monitoring-crds.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [selector, endpoints]
            properties:
              jobLabel: {type: string}
              namespaceSelector:
                type: object
                properties:
                  any: {type: boolean}
                  matchNames: {type: array, items: {type: string}}
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
              endpoints:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: string}
                    path: {type: string}
                    scheme: {type: string, enum: [http, https]}
                    interval: {type: string, pattern: '^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                    scrapeTimeout: {type: string, pattern: '^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                    bearerTokenFile: {type: string}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: PrometheusRule, listKind: PrometheusRuleList, plural: prometheusrules, singular: prometheusrule}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            properties:
              groups:
                type: array
                items:
                  type: object
                  required: [name, rules]
                  properties:
                    name: {type: string, minLength: 1}
                    interval: {type: string}
                    rules:
                      type: array
                      items:
                        type: object
                        required: [expr]
                        properties:
                          alert: {type: string}
                          record: {type: string}
                          expr: {x-kubernetes-int-or-string: true}
                          for: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                          labels: {type: object, additionalProperties: {type: string}}
                          annotations: {type: object, additionalProperties: {type: string}}
EOF
out=$(k apply -f "$tmp/monitoring-crds.yaml" 2>&1) &&
	out=$(k wait --for=condition=Established --timeout=60s crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com 2>&1)
if [[ $? -eq 0 ]]; then
	for _ in $(seq 30); do
		k api-resources --api-group=monitoring.coreos.com -o name 2>/dev/null | grep -q '^prometheusrules' && break
		sleep 1
	done
	dry_run "helm template | kubectl apply --dry-run=server (ServiceMonitor and PrometheusRule on, stand-in CRDs)" "$tmp/full.yaml"
else
	not_ok "stand-in monitoring CRDs" "$(one_line "$out")"
fi

# Now for real: the RBAC must exist for `auth can-i` to mean anything.
out=$(k apply -f deploy/manifests/nvl72-operator.yaml 2>&1)
if [[ $? -eq 0 ]]; then ok "kubectl apply deploy/manifests/nvl72-operator.yaml"; else not_ok "kubectl apply deploy/manifests/nvl72-operator.yaml" "$(one_line "$out")"; finish; fi

# ------------------------------------------------------------------- RBAC ---
# `auth can-i --list` rows for resources (rows without a resource are the
# bootstrap non-resource URLs every account has, such as /api/*).
no_wildcards() { # NAME SA NAMESPACE
	local out rows bad
	out=$(k auth can-i --list --as="$2" -n "$3" 2>&1) || { not_ok "$1" "$(one_line "$out")"; return; }
	rows=$(tail -n +2 <<<"$out" | grep -v '^ ')
	bad=$(awk '{print $1, $NF}' <<<"$rows" | grep -F '*')
	if [[ -z $rows ]]; then
		not_ok "$1" "no rows"
	elif [[ -n $bad ]]; then
		not_ok "$1" "wildcards: $(one_line "$bad")"
	else
		ok "$1"
	fi
}
for n in "$ns" "$ans" default; do
	no_wildcards "auth can-i --list: operator has no wildcard verbs or resources (namespace $n)" "$op_sa" "$n"
	no_wildcards "auth can-i --list: agent has no wildcard verbs or resources (namespace $n)" "$agent_sa" "$n"
done

can() { # yes|no AS VERB RESOURCE [args...]
	local want=$1 as=$2 got
	shift 2
	got=$(k auth can-i "$@" --as="$as" 2>/dev/null)
	got=${got%%$'\n'*}
	if [[ $got == "$want" ]]; then
		ok "${as##*:} $( [[ $want == yes ]] && echo can || echo cannot) $*"
	else
		not_ok "${as##*:} $( [[ $want == yes ]] && echo can || echo cannot) $*" "kubectl auth can-i said '$got'"
	fi
}
# kubectl resolves a resource through discovery before it asks: NVIDIA's
# CRDs (tests/data/nvidia) make its group known, as on a cluster running
# NVIDIA's DRA driver.
nvidia_crds() {
	k apply -f tests/data/nvidia/ &&
		k wait --for=condition=Established --timeout=60s crd computedomains.resource.nvidia.com \
			computedomaincliques.resource.nvidia.com
}
check "NVIDIA's ComputeDomain CRDs served, for the checks of the operator's rights there" nvidia_crds
# The operator: what it needs...
can yes "$op_sa" watch racks.nvl72.io
can yes "$op_sa" create computetrays.nvl72.io
can yes "$op_sa" update racks.nvl72.io --subresource=status
can yes "$op_sa" update rackupgrades.nvl72.io --subresource=finalizers
can yes "$op_sa" patch nodes
can yes "$op_sa" patch pods -n team-a
can yes "$op_sa" create pods --subresource=eviction -n team-a
can yes "$op_sa" delete pods -n team-a
can yes "$op_sa" get resourceclaims.resource.k8s.io -n team-a
can yes "$op_sa" watch computedomains.resource.nvidia.com -n team-a
can yes "$op_sa" list computedomaincliques.resource.nvidia.com -n team-a
can yes "$op_sa" create events.events.k8s.io -n default
can yes "$op_sa" create subjectaccessreviews.authorization.k8s.io
can yes "$op_sa" create leases.coordination.k8s.io -n "$ns"
can yes "$op_sa" update leases.coordination.k8s.io/nvl72-operator -n "$ns"
can yes "$op_sa" watch leases.coordination.k8s.io -n "$ns"
can yes "$op_sa" watch leases.coordination.k8s.io -n "$ans"
can yes "$op_sa" get secrets/nvl72-operator-webhook-tls -n "$ns"
can yes "$op_sa" patch validatingwebhookconfigurations.admissionregistration.k8s.io/nvl72-operator
can yes "$op_sa" patch mutatingwebhookconfigurations.admissionregistration.k8s.io/nvl72-operator
can yes "$op_sa" watch resourceclaimtemplates.resource.k8s.io -n team-a
can yes "$op_sa" create resourceclaimtemplates.resource.k8s.io -n team-a
can yes "$op_sa" delete resourceclaimtemplates.resource.k8s.io -n team-a
can yes "$op_sa" create deviceclasses.resource.k8s.io/imex-channel.nvl72.io
can yes "$op_sa" patch deviceclasses.resource.k8s.io/imex-channel.nvl72.io
# ...and nothing around it.
can no "$op_sa" get secrets/some-other-secret -n "$ns"
can no "$op_sa" list secrets -n "$ns"
can no "$op_sa" get secrets -n kube-system
can no "$op_sa" get configmaps -n "$ns"
can no "$op_sa" delete nodes
can no "$op_sa" update leases.coordination.k8s.io/someone-elses-lease -n "$ns"
can no "$op_sa" create leases.coordination.k8s.io -n default
can no "$op_sa" watch leases.coordination.k8s.io -n default
can no "$op_sa" patch validatingwebhookconfigurations.admissionregistration.k8s.io/another-webhook
can no "$op_sa" create validatingwebhookconfigurations.admissionregistration.k8s.io
can no "$op_sa" update computetrays.nvl72.io --subresource=status
can no "$op_sa" create clusterrolebindings.rbac.authorization.k8s.io
can no "$op_sa" update resourceclaimtemplates.resource.k8s.io -n team-a
can no "$op_sa" patch resourceclaimtemplates.resource.k8s.io -n team-a
can no "$op_sa" create resourceclaims.resource.k8s.io -n team-a
can no "$op_sa" create resourceslices.resource.k8s.io
can no "$op_sa" create deviceclasses.resource.k8s.io
can no "$op_sa" patch deviceclasses.resource.k8s.io/another-class
can no "$op_sa" delete deviceclasses.resource.k8s.io/imex-channel.nvl72.io
can no "$op_sa" list resourceclaims.resource.k8s.io -n team-a
can no "$op_sa" update resourceclaims.resource.k8s.io -n team-a
for v in create update patch delete; do
	can no "$op_sa" "$v" computedomains.resource.nvidia.com -n team-a
	can no "$op_sa" "$v" computedomaincliques.resource.nvidia.com -n team-a
done
can no "$op_sa" patch computedomains.resource.nvidia.com --subresource=status -n team-a
# The agent: its tray's spec and status, a Lease, events; nothing else.
can yes "$agent_sa" watch computetrays.nvl72.io
can yes "$agent_sa" patch computetrays.nvl72.io --subresource=status
can yes "$agent_sa" create leases.coordination.k8s.io -n "$ans"
can yes "$agent_sa" create events.events.k8s.io -n default
can yes "$agent_sa" watch resourceslices.resource.k8s.io
can no "$agent_sa" delete racks.nvl72.io
can no "$agent_sa" get racks.nvl72.io
can no "$agent_sa" update computetrays.nvl72.io
can no "$agent_sa" delete computetrays.nvl72.io
can no "$agent_sa" get secrets -n "$ns"
can no "$agent_sa" get secrets -n "$ans"
can no "$agent_sa" list pods
can no "$agent_sa" patch nodes
can no "$agent_sa" create leases.coordination.k8s.io -n default
can no "$agent_sa" update leases.coordination.k8s.io -n default
can no "$agent_sa" delete leases.coordination.k8s.io -n "$ans"
# No Lease rights at all where the leader Lease is.
can no "$agent_sa" create leases.coordination.k8s.io -n "$ns"
can no "$agent_sa" update leases.coordination.k8s.io/nvl72-operator -n "$ns"
can no "$agent_sa" delete leases.coordination.k8s.io/nvl72-operator -n "$ns"
can no "$agent_sa" get /metrics
# As the kubelet plugin: the claims it prepares, read one by one, and its
# Node's ResourceSlice; no claim writes, no list of claims.
can yes "$agent_sa" get resourceclaims.resource.k8s.io -n team-a
can yes "$agent_sa" watch resourceslices.resource.k8s.io
can yes "$agent_sa" create resourceslices.resource.k8s.io
can yes "$agent_sa" patch resourceslices.resource.k8s.io
can yes "$agent_sa" delete resourceslices.resource.k8s.io
can no "$agent_sa" list resourceclaims.resource.k8s.io -n team-a
can no "$agent_sa" watch resourceclaims.resource.k8s.io -n team-a
can no "$agent_sa" update resourceclaims.resource.k8s.io --subresource=status -n team-a
can no "$agent_sa" create resourceclaims.resource.k8s.io -n team-a
can no "$agent_sa" create deviceclasses.resource.k8s.io
can no "$op_sa" get /metrics
# People: a window owner bound to nvl72-approver may approve, not more.
out=$(k create clusterrolebinding deploy-test-approver --clusterrole=nvl72-approver --user=alice 2>&1) ||
	not_ok "bind alice to nvl72-approver" "$(one_line "$out")"
can yes alice create upgradeapprovals.nvl72.io
can yes alice get rackupgrades.nvl72.io
can no alice delete upgradeapprovals.nvl72.io
can no alice create rackupgrades.nvl72.io
can no alice update upgradeapprovals.nvl72.io --subresource=status
out=$(k create clusterrolebinding deploy-test-viewer --clusterrole=nvl72-viewer --user=bob 2>&1) ||
	not_ok "bind bob to nvl72-viewer" "$(one_line "$out")"
can yes bob list computetrays.nvl72.io
can no bob create racks.nvl72.io
# Aggregation into "view" is done by kube-controller-manager, which this
# control plane does not run: check the label that asks for it.
got=$(k get clusterrole nvl72-viewer -o jsonpath='{.metadata.labels.rbac\.authorization\.k8s\.io/aggregate-to-view}' 2>&1)
if [[ $got == true ]]; then ok "nvl72-viewer is labelled for aggregation into view"; else not_ok "nvl72-viewer is labelled for aggregation into view" "label: $got"; fi

# ------------------------------------------------- operator-owned fields ---
# The operator writes the webhook caBundle and its Secret's keys; neither a
# re-apply of the manifests nor a helm upgrade may take them away.
ca_and_keys() { # WEBHOOK-NAME NAMESPACE SECRET
	printf '%s %s %s' \
		"$(k get validatingwebhookconfiguration "$1" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>&1)" \
		"$(k get mutatingwebhookconfiguration "$1" -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>&1)" \
		"$(k -n "$2" get secret "$3" -o jsonpath='{.data.tls\.key}' 2>&1)"
}
play_operator() { # WEBHOOK-NAME NAMESPACE SECRET: write what the operator writes
	local kind
	for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
		k patch "$kind" "$1" --type=json \
			-p '[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"Q0EtQlVORExF"}]' >/dev/null || return 1
	done
	k -n "$2" patch secret "$3" --type=merge -p '{"data":{"tls.crt":"Q0VSVA==","tls.key":"S0VZ"}}' >/dev/null
}
want="Q0EtQlVORExF Q0EtQlVORExF S0VZ"
if play_operator nvl72-operator "$ns" nvl72-operator-webhook-tls; then
	out=$(k apply -f deploy/manifests/nvl72-operator.yaml 2>&1) || not_ok "re-apply the manifests" "$(one_line "$out")"
	got=$(ca_and_keys nvl72-operator "$ns" nvl72-operator-webhook-tls)
	if [[ $got == "$want" ]]; then
		ok "kubectl apply of the manifests keeps the operator's caBundle and certificate"
	else
		not_ok "kubectl apply of the manifests keeps the operator's caBundle and certificate" "got '$got'"
	fi
else
	not_ok "write a caBundle and certificate as the operator would" "patch failed"
fi

# helm install and upgrade of a second release beside the manifests (its own
# namespace and names; the fixed-name people roles are left to the first).
hns=nvl72-helm
hname=nvl72-helm-nvl72-operator
hargs=(--namespace "$hns" --set rbac.approverRole=false --set rbac.viewerRole=false
	--set rbac.metricsReaderRole=false --set rbac.dashboardViewerRole=false
	--set agent.namespace=nvl72-helm-agents)
k create namespace "$hns" >/dev/null 2>&1
out=$(timeout 120 "$HELM" install nvl72-helm "$chart" "${hargs[@]}" 2>&1)
if [[ $? -eq 0 ]] && grep -q 'STATUS: deployed' <<<"$out" && grep -q 'nvl72-operator 0.1.0 is installed' <<<"$out"; then
	ok "helm install against the apiserver (NOTES rendered)"
	if play_operator "$hname" "$hns" "$hname-webhook-tls"; then
		out=$(timeout 120 "$HELM" upgrade nvl72-helm "$chart" "${hargs[@]}" --set operator.logLevel=debug 2>&1) ||
			not_ok "helm upgrade" "$(one_line "$out")"
		got=$(ca_and_keys "$hname" "$hns" "$hname-webhook-tls")
		args=$(k -n "$hns" get deploy "$hname" -o jsonpath='{.spec.template.spec.containers[0].args}' 2>&1)
		if [[ $got == "$want" && $args == *--log-level=debug* ]]; then
			ok "helm upgrade applies changes and keeps the operator's caBundle and certificate"
		else
			not_ok "helm upgrade applies changes and keeps the operator's caBundle and certificate" "got '$got', args $(one_line "$args")"
		fi
	else
		not_ok "write a caBundle and certificate as the operator would (helm release)" "patch failed"
	fi
	timeout 120 "$HELM" uninstall nvl72-helm --namespace "$hns" >/dev/null 2>&1 ||
		not_ok "helm uninstall" "failed"
else
	not_ok "helm install against the apiserver (NOTES rendered)" "$(one_line "$out")"
fi

# --------------------------------------------------------------- admission ---
# The agent may write the status of its own Node's tray only. Impersonate it
# with the node name a pod-bound token carries (dry run: nothing is stored).
out=$(k apply -f deploy/samples/computetray.yaml 2>&1) || not_ok "create a ComputeTray" "$(one_line "$out")"
tray=$(yq -r '.metadata.name' deploy/samples/computetray.yaml)
node=$(yq -r '.spec.node' deploy/samples/computetray.yaml)
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
pki=$NVL72_CLUSTER_DIR/pki
status_patch_as_agent() { # NODE-NAME|"" -> HTTP code
	local hdr=()
	[[ -n $1 ]] && hdr=(-H "Impersonate-Extra-authentication.kubernetes.io%2fnode-name: $1")
	curl -s -o "$tmp/patch.json" -w '%{http_code}' --max-time 20 \
		--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
		-H "Impersonate-User: $agent_sa" "${hdr[@]}" \
		-X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data '{"status":{"heartbeatTime":"2026-11-29T12:00:00Z"}}' \
		"$server/apis/nvl72.io/v1alpha1/computetrays/$tray/status?dryRun=All"
}
code=$(status_patch_as_agent "$node")
if [[ $code == 200 ]]; then ok "agent on $node may update its own tray's status"; else not_ok "agent on $node may update its own tray's status" "HTTP $code: $(one_line "$(cat "$tmp/patch.json")")"; fi
code=$(status_patch_as_agent some-other-node)
if [[ $code == 403 ]] && grep -q 'own Node' "$tmp/patch.json"; then ok "agent on another Node may not update the tray's status"; else not_ok "agent on another Node may not update the tray's status" "HTTP $code: $(one_line "$(cat "$tmp/patch.json")")"; fi
code=$(status_patch_as_agent "")
if [[ $code =~ ^4 ]]; then ok "agent identity without a node name may not update a tray's status"; else not_ok "agent identity without a node name may not update a tray's status" "HTTP $code"; fi

# ResourceSlices: only the token's Node's, only of imex.nvl72.io.
slice_as_agent() { # NODE-NAME|"" SLICE-NODE DRIVER -> HTTP code
	local hdr=()
	[[ -n $1 ]] && hdr=(-H "Impersonate-Extra-authentication.kubernetes.io%2fnode-name: $1")
	curl -s -o "$tmp/slice.json" -w '%{http_code}' --max-time 20 \
		--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
		-H "Impersonate-User: $agent_sa" "${hdr[@]}" \
		-X POST -H 'Content-Type: application/json' \
		--data "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"$2-$3\"},\"spec\":{\"driver\":\"$3\",\"nodeName\":\"$2\",\"pool\":{\"name\":\"$2\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"slot-0\"}]}}" \
		"$server/apis/resource.k8s.io/v1/resourceslices?dryRun=All"
}
code=$(slice_as_agent "$node" "$node" imex.nvl72.io)
if [[ $code == 201 ]]; then ok "agent on $node may create its Node's ResourceSlice of imex.nvl72.io"; else not_ok "agent on $node may create its Node's ResourceSlice" "HTTP $code: $(one_line "$(cat "$tmp/slice.json")")"; fi
code=$(slice_as_agent "$node" some-other-node imex.nvl72.io)
if [[ $code == 403 ]] && grep -q 'own Node' "$tmp/slice.json"; then ok "agent on $node may not create another Node's ResourceSlice"; else not_ok "agent on $node may not create another Node's ResourceSlice" "HTTP $code: $(one_line "$(cat "$tmp/slice.json")")"; fi
code=$(slice_as_agent "$node" "$node" gpu.nvidia.com)
if [[ $code == 403 ]] && grep -q 'imex.nvl72.io' "$tmp/slice.json"; then ok "agent may not create a ResourceSlice of another driver"; else not_ok "agent may not create a ResourceSlice of another driver" "HTTP $code: $(one_line "$(cat "$tmp/slice.json")")"; fi
code=$(slice_as_agent "" "$node" imex.nvl72.io)
if [[ $code == 403 ]]; then ok "agent identity without a node name may not create a ResourceSlice"; else not_ok "agent identity without a node name may not create a ResourceSlice" "HTTP $code"; fi

# The webhooks fail closed: with no operator behind the Service, nvl72 kinds
# they cover are refused, while tray status writes (not covered) go through.
rack_out=$(k apply --dry-run=server -f deploy/samples/rack-gb300.yaml 2>&1)
if [[ $? -ne 0 ]] && grep -q 'validate.nvl72.io' <<<"$rack_out"; then
	ok "validating webhook is called for Racks and fails closed without the operator"
else
	not_ok "validating webhook is called for Racks and fails closed without the operator" "$(one_line "$rack_out")"
fi
appr_out=$(k apply --dry-run=server -f deploy/samples/upgradeapproval.yaml 2>&1)
if [[ $? -ne 0 ]] && grep -q 'stamp-approval.nvl72.io' <<<"$appr_out"; then
	ok "mutating webhook is called for UpgradeApprovals and fails closed without the operator"
else
	not_ok "mutating webhook is called for UpgradeApprovals and fails closed without the operator" "$(one_line "$appr_out")"
fi

# The stamping webhook down or bypassed (its configuration deleted, as an
# admin might, or a failurePolicy of Ignore): the ValidatingAdmissionPolicy
# <release>-approval-stamp alone stops a forged approvedBy. A real
# ServiceAccount token bound to nvl72-approver tries it.
vap_out=$(k delete mutatingwebhookconfiguration nvl72-operator 2>&1) ||
	not_ok "delete the mutating webhook configuration" "$(one_line "$vap_out")"
k -n "$ns" create serviceaccount deploy-test-approver >/dev/null 2>&1
k create clusterrolebinding deploy-test-approver-sa --clusterrole=nvl72-approver \
	--serviceaccount="$ns:deploy-test-approver" >/dev/null 2>&1
appr_tok=$(k -n "$ns" create token deploy-test-approver --duration=10m 2>&1)
as_approver() { # kubectl with the approver's token only
	timeout 90 "$KUBECTL" --kubeconfig=/dev/null --server="$server" \
		--certificate-authority="$pki/ca.crt" --token="$appr_tok" --request-timeout=30s "$@"
}
who=$(as_approver auth whoami -o json 2>&1)
appr_user=$(jq -r '.status.userInfo.username' <<<"$who" 2>/dev/null)
appr_groups=$(jq -c '.status.userInfo.groups' <<<"$who" 2>/dev/null)
if [[ $appr_user == "system:serviceaccount:$ns:deploy-test-approver" ]]; then
	ok "a ServiceAccount token bound to nvl72-approver ($appr_groups)"
else
	not_ok "a ServiceAccount token bound to nvl72-approver" "$(one_line "$who")"
fi
approval_by() { # approval_by APPROVED_BY_JSON: the sample approval claiming it
	yq -c --argjson by "$1" 'if $by == null then del(.spec.approvedBy) else .spec.approvedBy = $by end' \
		deploy/samples/upgradeapproval.yaml
}
vap_refuses() { # vap_refuses NAME APPROVED_BY_JSON MESSAGE
	local out
	out=$(approval_by "$2" | as_approver create --dry-run=server -f - 2>&1)
	if [[ $? -ne 0 ]] && grep -q "nvl72-operator-approval-stamp" <<<"$out" && grep -qF "$3" <<<"$out"; then
		ok "$1"
	else
		not_ok "$1" "$(one_line "$out")"
	fi
}
vap_refuses "without the webhook, an approval in another user's name is refused by the policy" \
	'{"username":"fabric-lead","groups":'"$appr_groups"'}' \
	"spec.approvedBy.username must be the user who creates the UpgradeApproval"
vap_refuses "without the webhook, an approval naming no approver is refused by the policy" \
	'null' "spec.approvedBy.username must be the user who creates the UpgradeApproval"
vap_refuses "without the webhook, an approval claiming a window owner's group is refused by the policy" \
	'{"username":"'"$appr_user"'","groups":["nvl72:platform"]}' \
	"spec.approvedBy.groups must be the groups of the user who creates the UpgradeApproval"
out=$(approval_by '{"username":"'"$appr_user"'","groups":'"$appr_groups"'}' |
	as_approver create --dry-run=server -f - 2>&1)
if [[ $? -eq 0 && $out == *created* ]]; then
	ok "without the webhook, the policy lets an approval naming its real sender and groups through"
else
	not_ok "without the webhook, the policy lets an approval naming its real sender and groups through" "$(one_line "$out")"
fi

# The operator's own token may patch any Pod and Node (RBAC cannot name
# fields); the policies <release>-operator-pods and -operator-nodes let it
# change only what it does change. A real token of its ServiceAccount tries
# the rest: a container image swapped in kube-system, a foreign label or
# annotation, a taint.
op_tok=$(k -n "$ns" create token nvl72-operator --duration=10m 2>&1)
as_operator() { # kubectl with the operator's token only
	timeout 90 "$KUBECTL" --kubeconfig=/dev/null --server="$server" \
		--certificate-authority="$pki/ca.crt" --token="$op_tok" --request-timeout=30s "$@"
}
k apply -f - >/dev/null 2>&1 <<'OBJS'
apiVersion: v1
kind: Pod
metadata: {name: deploy-test-victim, namespace: kube-system, annotations: {team: infra}}
spec:
  containers: [{name: c, image: nvl72.invalid/busybox:test}]
---
apiVersion: v1
kind: Node
metadata: {name: deploy-test-node, labels: {topology.kubernetes.io/zone: z1}}
OBJS
op_patch() { # op_patch NAME yes|no MESSAGE PATCH OBJECT...: merge patch as the operator
	local name=$1 want=$2 msg=$3 body=$4 out rc
	shift 4
	out=$(as_operator patch "$@" --type=merge -p "$body" 2>&1)
	rc=$?
	if [[ $want == yes && $rc -eq 0 ]] ||
		[[ $want == no && $rc -ne 0 && $out == *"nvl72-operator-operator-"* && $out == *"$msg"* ]]; then
		ok "$name"
	else
		not_ok "$name" "$(one_line "$out")"
	fi
}
pod=(pod deploy-test-victim -n kube-system)
op_patch "the operator cannot swap a container image of a pod in kube-system" no \
	"may not change a Pod's spec" \
	'{"spec":{"containers":[{"name":"c","image":"nvl72.invalid/evil:1"}]}}' "${pod[@]}"
op_patch "the operator cannot change a pod's foreign annotation" no \
	"only nvl72.io/ annotations of a Pod" '{"metadata":{"annotations":{"team":"evil"}}}' "${pod[@]}"
op_patch "the operator cannot relabel a pod outside nvl72.io/" no \
	"only nvl72.io/ labels of a Pod" '{"metadata":{"labels":{"app":"evil"}}}' "${pod[@]}"
op_patch "the operator may write the checkpoint handshake annotation of a pod" yes "" \
	'{"metadata":{"annotations":{"nvl72.io/checkpoint-requested":"2026-01-01T00:00:00Z"}}}' "${pod[@]}"
op_patch "the operator may label a pod under nvl72.io/ (its leader label)" yes "" \
	'{"metadata":{"labels":{"nvl72.io/operator-leader":"true"}}}' "${pod[@]}"
op_patch "the operator cannot taint a Node" no "only spec.unschedulable of a Node's spec" \
	'{"spec":{"taints":[{"key":"evil","effect":"NoSchedule"}]}}' node deploy-test-node
op_patch "the operator cannot change a Node's foreign label" no "only nvl72.io/ labels of a Node" \
	'{"metadata":{"labels":{"topology.kubernetes.io/zone":"z2"}}}' node deploy-test-node
op_patch "the operator cannot annotate a Node outside nvl72.io/" no \
	"only nvl72.io/ annotations of a Node" '{"metadata":{"annotations":{"evil":"1"}}}' \
	node deploy-test-node
op_patch "the operator may cordon a Node and set its nvl72.io/ labels and annotations" yes "" \
	'{"spec":{"unschedulable":true},"metadata":{"labels":{"nvl72.io/maintenance":"Draining"},"annotations":{"nvl72.io/cordoned-by":"nvl72-operator"}}}' \
	node deploy-test-node
img=$(k -n kube-system get pod deploy-test-victim -o jsonpath='{.spec.containers[0].image}/{.metadata.annotations.team}' 2>&1)
if [[ $img == nvl72.invalid/busybox:test/infra ]]; then
	ok "the pod's image and foreign annotation are unchanged ($img)"
else
	not_ok "the pod's image and foreign annotation are unchanged" "$img"
fi
k -n kube-system delete pod deploy-test-victim --grace-period=0 --force >/dev/null 2>&1
k delete node deploy-test-node >/dev/null 2>&1

k delete clusterrolebinding deploy-test-approver deploy-test-viewer deploy-test-approver-sa \
	--ignore-not-found >/dev/null 2>&1 || true
finish
