"""Preemption by the operator on the real control plane: a cluster full of low-priority pods, a
high-priority pod arrives; exactly the expected victim is marked (DisruptionTarget), deleted and told
(Preempted), a PodDisruptionBudget protects what it should, the preemptor is nominated to the node and
bound there once its victim is gone.

There is no kubelet: the victim's graceful deletion never completes, so the test removes it (grace 0) the
way a kubelet would after the container stopped."""

from __future__ import annotations

import pytest
from operator_harness import Operators, Scope, condition, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e


def priority_class(cp: ClusterHarness, name: str, value: int) -> None:
    cp.post(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        },
    )


def test_high_priority_pod_preempts_the_unprotected_low_priority_pod(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    cp, ns = control_plane, scope.namespace
    low, high = scope.name("low"), scope.name("high")
    priority_class(cp, low, 100)
    priority_class(cp, high, 1000)
    try:
        protected_node, open_node = scope.nodes(2, cpu="2", memory="8Gi", pods="110")
        # Two 1-CPU low-priority pods fill each node; those on the first node are covered by a budget
        # that allows no disruption.
        for node, app in ((protected_node, "protected"), (open_node, "open")):
            for i in range(2):
                body = scope.pod(f"{app}-{i}", requests={"cpu": "1"}, priorityClassName=low, nodeName=node)
                body["metadata"]["labels"] = {"app": app}
                cp.post(f"/api/v1/namespaces/{ns}/pods", body)
        pdb = cp.post(
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "protect"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "protected"}}},
            },
        )
        # No disruption controller runs here: write the status it would compute.
        pdb["status"] = {
            "disruptionsAllowed": 0,
            "currentHealthy": 2,
            "desiredHealthy": 2,
            "expectedPods": 2,
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }
        cp.request("PUT", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/protect/status", pdb)

        operator = operators.start("op", lease_namespace=ns)
        operator.wait_leading()
        scope.create_pod("preemptor", requests={"cpu": "1"}, priorityClassName=high)

        def victims() -> list[str]:
            pods = cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            return sorted(p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp"))

        marked = wait_until(lambda: victims() or None, timeout=20, what="a preemption victim")
        assert len(marked) == 1 and marked[0].startswith("open-"), marked
        victim = scope.get_pod(marked[0])
        disruption = condition(victim, "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "PreemptionByScheduler"), dumps(
            victim
        )
        assert disruption["message"] == "kopf-scheduler: preempting to accommodate a higher priority pod"
        preempted = scope.wait_event("Preempted", marked[0])
        assert preempted["message"].startswith("Preempted by pod "), dumps(preempted)
        assert preempted["message"].endswith(f"on node {open_node}"), dumps(preempted)

        preemptor = wait_until(
            lambda: (p := scope.get_pod("preemptor"))["status"].get("nominatedNodeName") and p,
            timeout=20,
            what="the preemptor's nominated node",
        )
        assert preemptor["status"]["nominatedNodeName"] == open_node
        assert not preemptor["spec"].get("nodeName")
        for name in ("protected-0", "protected-1"):
            assert not scope.get_pod(name)["metadata"].get("deletionTimestamp"), "the budget was not honoured"

        cp.delete(f"/api/v1/namespaces/{ns}/pods/{marked[0]}")  # the kubelet's part
        bound = scope.wait_bound("preemptor", timeout=30)
        assert bound["spec"]["nodeName"] == open_node
        assert len(victims()) == 0
        assert not operator.problems(), operator.tail()
    finally:
        for name in (low, high):
            cp.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
