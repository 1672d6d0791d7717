#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prints the chart's two admission webhook configurations (taken from the
# rendered deploy/manifests/nvl72-operator.yaml, so their rules, kinds and
# failure policies are the chart's) with clientConfig.service replaced by
# clientConfig.url = BASE + the service path, for an operator that runs as a
# host process next to a loopback control plane: there, no Service routes to
# it. With --approver USER it also prints the chart's nvl72-approver
# ClusterRole and a ClusterRoleBinding of it to USER.
#
#   tests/local-webhooks.sh https://127.0.0.1:9443 [--approver viewer] | kubectl apply -f -
#
# No caBundle is printed: the operator fills it from its webhook Secret.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:?usage: local-webhooks.sh BASE_URL [--approver USER]}
approver=""
if [[ ${2:-} == --approver ]]; then
	approver=${3:?--approver needs a user name}
fi
manifest=deploy/manifests/nvl72-operator.yaml

yq -y --arg base "$base" '
	select(.kind == "ValidatingWebhookConfiguration" or .kind == "MutatingWebhookConfiguration")
	| .webhooks[] |= (.clientConfig = {url: ($base + .clientConfig.service.path)})' "$manifest"

if [[ -n $approver ]]; then
	echo '---'
	yq -y 'select(.kind == "ClusterRole" and .metadata.name == "nvl72-approver")' "$manifest"
	cat <<EOF
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: nvl72-approver-$approver
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nvl72-approver}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: $approver}
EOF
fi
