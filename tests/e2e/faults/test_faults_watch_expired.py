"""Fault tier: the pod watch breaks, pods are deleted while nobody watches, and the watch cannot resume
(the API server answers 410 Expired: its history no longer holds the resourceVersion). The watch lists
again, and that list simply lacks the deleted pods: no DELETED event ever comes for them. The scheduler
must still stop counting them on their nodes.

Through the fault proxy: the operator's pod watch is cut, its reconnections held while every pod on one
node is deleted, then its resume answered 410. Invariants, from the API server: the node emptied takes a
pod asking for its whole allocatable CPU, and on the other node a pod asking for exactly the CPU the
API's pods leave free is bound while one asking 100m more gets a FailedScheduling event: the scheduler's
view of each node's requested resources equals the API's, to the 100m of one pod.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from operator_harness import Operators, Scope, wait_until

from kopf_scheduler.devcluster.fault_proxy import Fault, FaultProxy
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.devcluster.nodes import HOSTNAME_LABEL

pytestmark = pytest.mark.e2e

COUNT = 16
POD_CPU = 100  # millicores; each node has 1 CPU
WATCH = r"(^|&)watch=(true|1)(&|$)"
PODS = r"/api/v1/pods"


def test_pods_deleted_while_the_watch_had_expired_are_forgotten(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    cp = control_plane
    node_a, node_b = scope.nodes(2, cpu="1", memory="32Gi", pods="110")
    with FaultProxy.of(cp.cluster) as proxy:
        operator = operators.start(
            "op-expired",
            lease_namespace=scope.namespace,
            leader_elect=False,
            kubeconfig=proxy.kubeconfig(tmp_path / "kubeconfig"),
        )
        operator.wait_for_log("scheduling starts")
        names = [f"p{i:02d}" for i in range(COUNT)]
        scope.create_pods([scope.pod(n, requests={"cpu": f"{POD_CPU}m", "memory": "10Mi"}) for n in names])
        scope.wait_all_bound(timeout=60)
        placed = Counter(pod["spec"]["nodeName"] for pod in scope.pods().values())
        assert set(placed) == {node_a, node_b}, placed

        held = proxy.add(Fault("GET", PODS, "blackhole", seconds=3, times=None, query=WATCH))
        assert proxy.cut_streams(PODS) >= 1, "the operator had no pod watch open through the proxy"
        wait_until(lambda: held.hits >= 1, 30, "the operator resuming its pod watch")
        deleted = [name for name, pod in scope.pods().items() if pod["spec"]["nodeName"] == node_a]
        for name in deleted:
            cp.api.request(
                "DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/{name}", {"gracePeriodSeconds": 0}
            )
        wait_until(lambda: not set(deleted) & set(scope.pods()), 30, "the pods on node a gone")
        proxy.clear()
        expired = proxy.add(Fault("GET", PODS, "watch_expired", query=WATCH))
        wait_until(lambda: expired.hits == 1, 30, "the operator's pod watch told 410 Expired")

        free_b = 1000 - POD_CPU * placed[node_b]
        on_a = {HOSTNAME_LABEL: node_a}
        on_b = {HOSTNAME_LABEL: node_b}
        scope.create_pod("whole-a", requests={"cpu": "1", "memory": "10Mi"}, selector=on_a)
        scope.create_pod("exact-b", requests={"cpu": f"{free_b}m", "memory": "10Mi"}, selector=on_b)
        scope.create_pod("over-b", requests={"cpu": f"{free_b + POD_CPU}m", "memory": "10Mi"}, selector=on_b)
        wait_until(lambda: {"whole-a", "exact-b"} <= set(scope.bound()), 60, "whole-a and exact-b bound")
        event = scope.wait_event("FailedScheduling", "over-b")
        assert "Insufficient cpu" in event["message"], event["message"]
        assert "over-b" not in scope.bound()
        # the resync that forgot them reports once it has listed every kind
        operator.wait_for_log(f"resync: dropped {len(deleted)} pods", timeout=30)
        assert operator.terminate() == 0, operator.tail()  # still running, and stops before its proxy
