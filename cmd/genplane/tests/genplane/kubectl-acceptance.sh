#!/usr/bin/env bash
# The kubectl acceptance script: what a user does with kubectl against `genplane apiserver`,
# each step checking what kubectl prints, not only its exit code.
#
# Run by tests/kubectl_acceptance.rs with:
#   KUBECTL     the kubectl to use (kubectl.1.33, kubectl.1.27, ...)
#   KUBECONFIG  the server's admin kubeconfig
#   WORK        a scratch directory
#   TLS_CERT, TLS_KEY  a certificate and key for `create secret tls`
set -euo pipefail

: "${KUBECTL:?}" "${KUBECONFIG:?}" "${WORK:?}" "${TLS_CERT:?}" "${TLS_KEY:?}"
export KUBECONFIG

NS=acceptance
# Discovery cached for this server alone: kubectl's default cache is shared by every server
# that ever had this port.
k() { "$KUBECTL" --cache-dir "$WORK/kubectl-cache" "$@"; }
step() { echo "--- $*"; }
fail() {
	echo "FAIL ($KUBECTL): $*" >&2
	exit 1
}
# expect_eq ACTUAL EXPECTED WHAT
expect_eq() { [[ "$1" == "$2" ]] || fail "$3: expected [$2], got [$1]"; }
# expect_has OUTPUT NEEDLE WHAT
expect_has() { [[ "$1" == *"$2"* ]] || fail "$3: expected [$2] in [$1]"; }
expect_lacks() { [[ "$1" != *"$2"* ]] || fail "$3: did not expect [$2] in [$1]"; }
# must_fail ARGS...: runs kubectl, which must fail; prints what it said.
must_fail() {
	local out
	if out=$(k "$@" 2>&1); then fail "expected kubectl $* to fail, got: $out"; fi
	printf '%s' "$out"
}
# Lines matching NAME in `kubectl get`, with runs of spaces squeezed.
row() { tr -s ' ' <<<"$1" | grep -E "^$2 " || true; }

step "namespaces: create, get"
expect_eq "$(k create namespace $NS)" "namespace/$NS created" "create namespace"
expect_eq "$(k get namespace $NS -o jsonpath='{.status.phase}')" "Active" "namespace phase"
expect_has "$(must_fail create namespace $NS)" "namespaces \"$NS\" already exists" "duplicate namespace"

step "create configmap --from-literal (protobuf body)"
expect_eq "$(k -n $NS create configmap cm1 --from-literal=a=1 --from-literal=b=two)" "configmap/cm1 created" "create configmap"
expect_eq "$(k -n $NS get configmap cm1 -o jsonpath='{.data.a},{.data.b}')" "1,two" "configmap data"

step "create secret generic|tls|docker-registry (protobuf bodies)"
expect_eq "$(k -n $NS create secret generic s1 --from-literal=password=hunter2)" "secret/s1 created" "create secret generic"
expect_eq "$(k -n $NS get secret s1 -o jsonpath='{.type}')" "Opaque" "generic secret type"
expect_eq "$(k -n $NS get secret s1 -o jsonpath='{.data.password}' | base64 -d)" "hunter2" "generic secret data"
expect_eq "$(k -n $NS create secret tls t1 --cert="$TLS_CERT" --key="$TLS_KEY")" "secret/t1 created" "create secret tls"
expect_eq "$(k -n $NS get secret t1 -o jsonpath='{.type}')" "kubernetes.io/tls" "tls secret type"
expect_eq "$(k -n $NS get secret t1 -o jsonpath='{.data.tls\.crt}' | base64 -d)" "$(cat "$TLS_CERT")" "tls secret certificate"
expect_eq "$(k -n $NS create secret docker-registry d1 --docker-server=registry.example --docker-username=user --docker-password=pass)" \
	"secret/d1 created" "create secret docker-registry"
expect_eq "$(k -n $NS get secret d1 -o jsonpath='{.type}')" "kubernetes.io/dockerconfigjson" "docker secret type"
expect_has "$(k -n $NS get secret d1 -o jsonpath='{.data.\.dockerconfigjson}' | base64 -d)" '"registry.example"' "docker config"

step "output formats"
yaml=$(k -n $NS get configmap cm1 -o yaml)
expect_has "$yaml" "kind: ConfigMap" "-o yaml"
expect_has "$yaml" "  a: \"1\"" "-o yaml data"
json=$(k -n $NS get configmap cm1 -o json)
expect_eq "$(python3 -c 'import json,sys; o=json.load(sys.stdin); print(o["metadata"]["name"], o["data"]["b"])' <<<"$json")" "cm1 two" "-o json"
expect_eq "$(k -n $NS get configmap -o name | sort | tr '\n' ' ')" "configmap/cm1 " "-o name"
wide=$(k -n $NS get secrets -o wide)
expect_has "$(row "$wide" t1)" "t1 kubernetes.io/tls 2 " "-o wide"
expect_eq "$(k -n $NS get configmap cm1 -o custom-columns=NAME:.metadata.name,A:.data.a --no-headers | tr -s ' ')" "cm1 1" "custom-columns"
expect_has "$(k -n $NS get configmap cm1 -o custom-columns=NAME:.metadata.name,A:.data.a)" "NAME" "custom-columns header"

step "labels, -A --show-labels, selectors"
expect_eq "$(k -n $NS label configmap cm1 app=web tier=front)" "configmap/cm1 labeled" "label"
all=$(k get configmaps -A --show-labels)
expect_has "$(row "$all" $NS)" "$NS cm1 2 " "get -A"
expect_has "$(row "$all" $NS)" "app=web,tier=front" "--show-labels"
expect_eq "$(k -n $NS get configmaps -l 'app in (web,api),tier!=back' -o name)" "configmap/cm1" "-l set selector"
expect_has "$(k -n $NS get configmaps -l app=api 2>&1)" "No resources found in $NS namespace." "-l no match"
expect_eq "$(k -n $NS get configmaps --field-selector metadata.name=cm1 -o name)" "configmap/cm1" "--field-selector name"
expect_eq "$(k -n $NS get secrets --field-selector type=kubernetes.io/tls -o name)" "secret/t1" "--field-selector secret type"
expect_has "$(must_fail -n $NS get secrets --field-selector spec.color=blue)" 'field label not supported: spec.color' "unsupported field selector"

step "get -w sees a change made meanwhile"
k -n $NS get configmaps -w --output-watch-events -o name >"$WORK/watch.out" 2>&1 &
watcher=$!
for _ in $(seq 1 50); do
	grep -q "configmap/cm1" "$WORK/watch.out" 2>/dev/null && break
	sleep 0.1
done
k -n $NS create -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: watched}
data: {x: "1"}
EOF
for _ in $(seq 1 50); do
	grep -q "configmap/watched" "$WORK/watch.out" && break
	sleep 0.1
done
kill $watcher 2>/dev/null || true
wait $watcher 2>/dev/null || true
expect_has "$(cat "$WORK/watch.out")" "configmap/watched" "get -w"

step "create -f: strict field validation by default, --dry-run=server"
cat >"$WORK/unknown.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: strict, namespace: $NS}
data: {a: b}
colour: red
EOF
expect_has "$(must_fail create -f "$WORK/unknown.yaml")" 'unknown field "colour"' "strict validation"
expect_has "$(must_fail -n $NS get configmap strict)" 'configmaps "strict" not found' "nothing created under strict"
expect_eq "$(k create -f "$WORK/unknown.yaml" --validate=false)" "configmap/strict created" "--validate=false"
expect_lacks "$(k -n $NS get configmap strict -o yaml)" "colour" "unknown field dropped"
expect_eq "$(k -n $NS create configmap dry --from-literal=a=b --dry-run=server)" "configmap/dry created (server dry run)" "--dry-run=server"
expect_has "$(must_fail -n $NS get configmap dry)" 'configmaps "dry" not found' "dry run stored nothing"

step "replace"
cat >"$WORK/replace.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: strict, namespace: $NS}
data: {a: replaced}
EOF
expect_eq "$(k replace -f "$WORK/replace.yaml")" "configmap/strict replaced" "replace"
expect_eq "$(k -n $NS get configmap strict -o jsonpath='{.data.a}')" "replaced" "replaced data"

step "patch --type=merge and --type=json"
expect_eq "$(k -n $NS patch configmap cm1 --type=merge -p '{"data":{"c":"3","b":null}}')" "configmap/cm1 patched" "merge patch"
expect_eq "$(k -n $NS get configmap cm1 -o jsonpath='{.data}')" '{"a":"1","c":"3"}' "merge patch result"
expect_eq "$(k -n $NS patch configmap cm1 --type=json -p '[{"op":"test","path":"/data/a","value":"1"},{"op":"replace","path":"/data/a","value":"10"}]')" \
	"configmap/cm1 patched" "json patch"
expect_eq "$(k -n $NS get configmap cm1 -o jsonpath='{.data.a}')" "10" "json patch result"
expect_has "$(must_fail -n $NS patch configmap cm1 --type=json -p '[{"op":"test","path":"/data/a","value":"1"}]')" "The request is invalid" "failed json patch test"
expect_eq "$(k -n $NS get configmap cm1 -o jsonpath='{.data.a}')" "10" "failed test op changed nothing"

step "discovery: api-resources, api-versions, explain"
resources=$(k api-resources)
expect_has "$(row "$resources" configmaps)" "configmaps cm v1 true ConfigMap" "api-resources configmaps"
expect_has "$(row "$resources" leases)" "leases coordination.k8s.io/v1 true Lease" "api-resources leases"
expect_has "$(row "$resources" events)" "events ev events.k8s.io/v1 true Event" "api-resources events.k8s.io"
expect_has "$(row "$resources" namespaces)" "namespaces ns v1 false Namespace" "api-resources namespaces"
versions=$(k api-versions)
for v in v1 coordination.k8s.io/v1 events.k8s.io/v1; do
	expect_has "$versions" "$v" "api-versions"
done
explain=$(k explain configmap.data)
expect_has "$explain" "KIND:" "explain kind"
expect_has "$explain" "ConfigMap" "explain kind name"
expect_has "$explain" "data" "explain field"
expect_has "$explain" "map[string]string" "explain field type"

step "delete --wait, delete --all"
expect_eq "$(k -n $NS delete configmap watched --wait)" 'configmap "watched" deleted' "delete --wait"
expect_has "$(must_fail -n $NS get configmap watched)" 'configmaps "watched" not found' "deleted"
deleted=$(k -n $NS delete configmaps --all)
expect_has "$deleted" 'configmap "cm1" deleted' "delete --all cm1"
expect_has "$deleted" 'configmap "strict" deleted' "delete --all strict"
expect_has "$(k -n $NS get configmaps 2>&1)" "No resources found in $NS namespace." "nothing left"

step "get --raw /readyz?verbose"
ready=$(k get --raw '/readyz?verbose')
expect_has "$ready" "[+]ping ok" "readyz ping"
expect_has "$ready" "readyz check passed" "readyz verdict"

step "delete namespace"
expect_eq "$(k delete namespace $NS --wait=false)" "namespace \"$NS\" deleted" "delete namespace"
phase=$(k get namespace $NS -o jsonpath='{.status.phase}' 2>/dev/null || echo Gone)
[[ "$phase" == "Terminating" || "$phase" == "Gone" ]] || fail "namespace phase after delete: $phase"
expect_has "$(must_fail -n $NS create configmap late --from-literal=a=b)" "is being terminated" "create in a terminating namespace"

echo "kubectl acceptance passed with $KUBECTL"
