#!/usr/bin/env bash
# The demo behind `make demo`: a local control plane, the operator, the profiles in profiles/, a few
# nodes and pods, then a live profile switch that makes the next pods land differently.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
STATE=${DEMO_STATE_DIR:-${TMPDIR:-/tmp}/kopf-scheduler-demo}
LOG=$STATE.operator.log
KUBECTL="$(cat "${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/controlplane/current")/kubectl"
OPERATOR_PID=

cleanup() {
  [ -n "$OPERATOR_PID" ] && kill "$OPERATOR_PID" 2>/dev/null && wait "$OPERATOR_PID" 2>/dev/null || true
  $BIN/kopf-scheduler dev-cluster down --state-dir "$STATE" >/dev/null 2>&1 || true
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
k() { KUBECONFIG="$STATE/kubeconfig" "$KUBECTL" "$@"; }

say "Starting kube-apiserver and etcd on loopback"
$BIN/kopf-scheduler dev-cluster down --state-dir "$STATE" >/dev/null 2>&1 || true
$BIN/kopf-scheduler dev-cluster up --state-dir "$STATE" | tail -n 1
$BIN/kopf-scheduler dev-cluster nodes --state-dir "$STATE" --count 3 --zones 3 | tail -n 1

say "Starting the operator: kopf-scheduler run (log: $LOG)"
KUBECONFIG="$STATE/kubeconfig" $BIN/kopf-scheduler run --leader-elect false --metrics-port 0 --liveness-port 0 \
  >"$LOG" 2>&1 &
OPERATOR_PID=$!

say "Applying the profiles in profiles/"
k apply -f profiles/
for _ in $(seq 1 60); do
  accepted=$(k get sprof -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Accepted")].status}{"\n"}{end}' | grep -c True || true)
  [ "$accepted" -ge "$(ls profiles/*.yaml | wc -l)" ] && break
  sleep 0.5
done
k get sprof

pods() {  # pods NAME-PREFIX COUNT
  for i in $(seq 1 "$2"); do
    cat <<POD
---
apiVersion: v1
kind: Pod
metadata: {name: $1-$i, namespace: demo, labels: {demo: "$1"}}
spec:
  schedulerName: kopf-scheduler
  containers: [{name: app, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
POD
  done
}
wait_bound() {  # wait_bound LABEL
  for _ in $(seq 1 60); do
    pending=$(k get pods -n demo -l "demo=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c '^$' || true)
    [ "$pending" -eq 0 ] && return 0
    sleep 0.5
  done
  return 1
}

say "Six pods with the default profile (LeastAllocated spreads them)"
k create namespace demo >/dev/null
pods spread 6 | k apply -f - >/dev/null
wait_bound spread
k get pods -n demo -l demo=spread -o wide

say "Switching the 'default' profile live to MostAllocated (bin packing): no restart"
k patch sprof default --type merge -p \
  '{"spec":{"pluginConfig":[{"name":"NodeResourcesFit","args":{"scoringStrategy":{"type":"MostAllocated"}}}]}}'
for _ in $(seq 1 60); do
  [ "$(k get sprof default -o jsonpath='{.status.observedGeneration}')" = "2" ] && break
  sleep 0.5
done
k get sprof default

say "Six more pods: they now pack onto the fullest node"
pods packed 6 | k apply -f - >/dev/null
wait_bound packed
k get pods -n demo -l demo=packed -o wide

say "A pod that fits nowhere: kube-scheduler's FailedScheduling message"
cat <<POD | k apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: demo}
spec:
  schedulerName: kopf-scheduler
  containers: [{name: app, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "64"}}}]
POD
for _ in $(seq 1 20); do
  k get events -n demo --field-selector reason=FailedScheduling -o name | grep -q . && break
  sleep 0.5
done
k get events -n demo --field-selector reason=FailedScheduling -o custom-columns=POD:.involvedObject.name,MESSAGE:.message

say "Why is it pending? kopf-scheduler explain (read-only, also as 'kubectl kopf-scheduler explain')"
KUBECONFIG="$STATE/kubeconfig" PATH="$BIN:$PATH" "$KUBECTL" kopf-scheduler explain pod/too-big -n demo
