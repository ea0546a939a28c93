"""Fault tier: pods that are expensive to judge (2,000 tolerations; 300 required node-affinity terms;
200 preferred ones) arrive in the middle of ordinary pods. Each heavy pod gets a decision (bound, or a
FailedScheduling event that says why) and every ordinary pod is bound: one heavy pod does not stall the
rest. Read from the API server: the pods' nodeName and the events."""

from __future__ import annotations

from typing import Any

import pytest
from operator_harness import Operators, Scope, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e


def _term(i: int) -> dict[str, Any]:
    return {"matchExpressions": [{"key": f"example.com/never-{i}", "operator": "In", "values": ["x"]}]}


def test_heavy_pods_get_a_decision_and_the_rest_flow(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(4)
    operator = operators.start("op-heavy", lease_namespace=scope.namespace)
    operator.wait_leading()
    tolerations = [
        {"key": f"example.com/t{i}", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
        for i in range(2000)
    ]
    never = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [_term(i) for i in range(300)]
        }
    }
    preferred = [{"weight": 1, "preference": _term(i)} for i in range(200)]
    ordinary = [f"o{i:02d}" for i in range(60)]
    bodies = [scope.pod(name) for name in ordinary[:30]]
    bodies.append(scope.pod("tolerant", tolerations=tolerations))
    bodies.append(scope.pod("impossible", affinity={"nodeAffinity": never}))
    bodies.append(
        scope.pod(
            "picky", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
        )
    )
    bodies.extend(scope.pod(name) for name in ordinary[30:])
    scope.create_pods(bodies, concurrency=4)

    wait_until(lambda: set(ordinary) <= set(scope.bound()), 60, "every ordinary pod bound")
    scope.wait_bound("tolerant", timeout=30)
    scope.wait_bound("picky", timeout=30)
    event = scope.wait_event("FailedScheduling", "impossible")
    assert "node(s) didn't match Pod's node affinity/selector" in event["message"], event["message"]
    assert operator.alive, operator.tail()
