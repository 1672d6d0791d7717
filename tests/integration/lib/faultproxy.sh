# SPDX-License-Identifier: Apache-2.0
# Sourced by suites that put tests/integration/faultproxy.py between a
# component and the test kube-apiserver (after lib/tap.sh or their own
# check/wait_for/one_line; with work, NVL72_CLUSTER_DIR and a pids array).
#
# faultproxy_start [PREFIX]: a certificate of the test CA for the proxy, the
# proxy on 127.0.0.1 in mode "pass" (control file $work/proxy.mode, log
# $work/proxy.log, port in $work/proxy.port), and $work/proxied.kubeconfig
# naming it with the admin token file. Each step is a check, its name
# starting with PREFIX.
faultproxy_start() {
	local prefix=${1:-} cdir=$NVL72_CLUSTER_DIR pki=$NVL72_CLUSTER_DIR/pki
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/proxy.key" \
		-out "$work/proxy.csr" -subj "/CN=nvl72-faultproxy" 2>/dev/null &&
		openssl x509 -req -in "$work/proxy.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-CAserial "$work/ca.srl" -days 2 -out "$work/proxy.crt" \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2>/dev/null
	check "${prefix}a certificate for the fault proxy signed by the test CA" $? "openssl failed"
	echo pass >"$work/proxy.mode"
	python3 tests/integration/faultproxy.py --upstream "https://127.0.0.1:$(cat "$cdir/apiserver-port")" \
		--ca "$pki/ca.crt" --cert "$work/proxy.crt" --key "$work/proxy.key" --control "$work/proxy.mode" \
		--log "$work/proxy.log" --port-file "$work/proxy.port" 2>"$work/proxy.err" &
	pids+=($!)
	wait_for 30 test -s "$work/proxy.port"
	check "${prefix}the fault proxy listens on 127.0.0.1" $? "$(one_line "$(cat "$work/proxy.err")")"
	cat >"$work/proxied.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: proxied
  cluster:
    server: https://127.0.0.1:$(cat "$work/proxy.port")
    certificate-authority: $pki/ca.crt
users:
- name: admin-token
  user:
    tokenFile: $pki/admin.token
contexts:
- name: proxied
  context: {cluster: proxied, user: admin-token}
current-context: proxied
KC
	chmod 600 "$work/proxied.kubeconfig"
}
