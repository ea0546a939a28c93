"""Scale: 1,000 pods onto 500 fake nodes, all bound, each exactly once (one 201 per pod and no 409 in
the API server's own count of ``POST pods/binding``, one Scheduled event per pod), and nothing worse
than a warning in the operator's log. Prints the wall time (pods created -> all bound)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from operator_harness import Operators, Scope, binding_requests, delta, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

NODES = 500
PODS = 1000


def test_thousand_pods_onto_five_hundred_nodes(
    control_plane: ClusterHarness,
    operators: Operators,
    scope: Scope,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    nodes = set(scope.nodes(NODES))
    nodes_took = time.monotonic() - started
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading(timeout=30)
    assert f"initial lists: {len(scope.all_node_names())} nodes" in operator.log(), operator.tail()
    before = binding_requests(control_plane)

    bodies = [scope.pod(f"p-{i:04d}", requests={"cpu": "100m", "memory": "128Mi"}) for i in range(PODS)]
    started = time.monotonic()
    created_in = scope.create_pods(bodies, concurrency=16)
    scope.wait_all_bound(timeout=120)
    wall = time.monotonic() - started

    pods = scope.pods()
    assert len(pods) == PODS
    placed = Counter(p["spec"]["nodeName"] for p in pods.values())
    assert set(placed) <= nodes, set(placed) - nodes
    assert delta(binding_requests(control_plane), before) == {"201": PODS}
    events = wait_until(
        lambda: len(e := scope.events("Scheduled")) >= PODS and e, 30, f"{PODS} Scheduled events"
    )
    per_pod = Counter(e["involvedObject"]["name"] for e in events)
    assert set(per_pod) == set(pods) and set(per_pod.values()) == {1}, dumps(per_pod.most_common(3))
    assert not operator.problems(), operator.problems()[:20]

    record_property("wall_seconds", round(wall, 2))
    print(
        f"{PODS} pods onto {NODES} nodes: all bound {wall:.1f} s after the first was created "
        f"({PODS / wall:.0f} pods/s; creating them took {created_in:.1f} s, the last was bound "
        f"{wall - created_in:.1f} s after; creating the nodes "
        f"{nodes_took:.1f} s); pods per node: {len(placed)} nodes used, at most {max(placed.values())}"
    )
