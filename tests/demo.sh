#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: a local real control plane with the project's CRDs and
# samples applied, and whatever of the project is built so far running on
# it. It stays up until Ctrl-C (or DEMO_SECONDS), then tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
dir=${DEMO_DIR:-$PWD/build/demo}

tests/cluster/cluster.sh stop "$dir" >/dev/null 2>&1 || true
export NVL72_CLUSTER_OWNER=$$
eval "$(tests/cluster/cluster.sh start "$dir")"
trap 'echo; echo "demo: stopping"; tests/cluster/cluster.sh stop "$dir"' EXIT
trap 'exit 0' INT TERM

if compgen -G "crds/*.yaml" >/dev/null; then
	"$KUBECTL" apply -f crds/ >/dev/null
	"$KUBECTL" wait --for=condition=Established --timeout=60s -f crds/ >/dev/null
	echo "demo: applied $(ls crds/*.yaml | wc -l) CRDs from crds/"
fi
if [[ -d deploy/samples ]]; then
	# The matrices first: the rack and upgrades refer to them.
	for f in deploy/samples/*matrix*.yaml deploy/samples/*.yaml; do
		[[ -f $f ]] && "$KUBECTL" apply -f "$f" >/dev/null 2>&1 || true
	done
	echo "demo: applied the samples from deploy/samples/"
fi

cat <<MSG

The control plane is up (kube-apiserver $("$KUBECTL" version -o json | grep -m1 -o '"gitVersion": *"[^"]*' | grep -o 'v[0-9.]*' | tail -1), etcd, loopback only).
In another shell:

  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$KUBECTL
  kubectl get crds
  kubectl get nvl72          # every object of the project's kinds
  kubectl explain racks.spec

Not running yet: the operator, the agents and the simulated rack, and the
dashboard; they join the demo as they land. Ctrl-C stops and removes it all.
MSG

if [[ -n ${DEMO_SECONDS:-} ]]; then
	sleep "$DEMO_SECONDS"
else
	while sleep 3600; do :; done
fi
