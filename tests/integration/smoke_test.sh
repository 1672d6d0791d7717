#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proves the harness: the control plane answers over TLS, kubectl applies a
# CustomResourceDefinition, and an object of it is created and read back
# through the REST API with the admin client certificate.
set -u
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
nok() { echo "not ok - $1: $2"; fail=$((fail + 1)); }

dir=$NVL72_CLUSTER_DIR
port=$(cat "$dir/apiserver-port")
api="https://127.0.0.1:$port"
curl_api() {
	curl -sS --max-time 10 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
		--key "$dir/pki/admin.key" "$@"
}

v=$("$KUBECTL" version -o json 2>/dev/null | grep -o '"gitVersion": *"v1\.[0-9]*' | tail -1)
[[ $v == *'"v1.34' || $v == *'"v1.35' ]] && ok "server is kube-apiserver 1.34+ ($v)" || nok "server version" "$v"

[[ $(curl -sS --cacert "$dir/pki/ca.crt" "$api/readyz") == ok ]] && ok "readyz over verified TLS" ||
	nok "readyz" "no ok"
if curl -sS --max-time 5 "$api/readyz" >/dev/null 2>&1; then
	nok "TLS verification" "a client without the CA was accepted"
else
	ok "a client without the test CA is refused"
fi
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$dir/pki/ca.crt" "$api/api/v1/namespaces")
[[ $code == 401 || $code == 403 ]] && ok "anonymous list is denied ($code)" || nok "anonymous list" "$code"

if "$KUBECTL" apply -f tests/data/smoke/widget-crd.yaml >/dev/null; then
	ok "kubectl applies a CRD"
else
	nok "kubectl apply" "failed"
fi
if "$KUBECTL" wait --for=condition=Established --timeout=30s crd/widgets.smoke.nvl72.io >/dev/null; then
	ok "CRD becomes Established"
else
	nok "CRD Established" "timeout"
fi

obj='{"apiVersion":"smoke.nvl72.io/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default"},"spec":{"size":18}}'
code=$(curl_api -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
	-X POST --data "$obj" "$api/apis/smoke.nvl72.io/v1/namespaces/default/widgets")
[[ $code == 201 ]] && ok "create a Widget through the API" || nok "create" "HTTP $code"
got=$(curl_api "$api/apis/smoke.nvl72.io/v1/namespaces/default/widgets/w1" | tr -d " \n")
if [[ $got == *'"size":18'* && $got == *'"uid":'* ]]; then
	ok "read the Widget back with its spec and a uid"
else
	nok "read back" "$got"
fi
bad='{"apiVersion":"smoke.nvl72.io/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":99}}'
msg=$(curl_api -H 'Content-Type: application/json' -X POST --data "$bad" \
	"$api/apis/smoke.nvl72.io/v1/namespaces/default/widgets")
[[ $msg == *'spec.size'* ]] && ok "schema rejects size 99 naming spec.size" || nok "schema" "$msg"

echo "$pass passed, $fail failed"
((fail == 0))
