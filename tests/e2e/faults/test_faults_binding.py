"""Fault tier: the API server's answers to bindings go wrong, and no pod is lost or bound twice.

A fault proxy (``devcluster.fault_proxy``) sits between the operator and the API server and breaks the
first few binding requests in one way per case; then the invariants are read from the API server's own
record (its audit log and the pods), never from the operator's logs:

- every pod is bound, and by exactly one successful binding request;
- no bound pod carries ``PodScheduled=False`` (a failure reported for a binding that went through);
- where the API server refused a binding, the pod was told why (a FailedScheduling event with the
  refusal's words) and bound afterwards, not forgotten.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_harness import Operators, Scope, settled_audit, wait_until

from kopf_scheduler.devcluster.fault_proxy import Fault, FaultProxy
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

BINDING = r"/api/v1/namespaces/[^/]+/pods/[^/]+/binding"
PODS = 6
REFUSAL = 'admission webhook "deny.example.com" denied the request: node not ready for this tenant'


@pytest.fixture
def proxy(control_plane: ClusterHarness) -> Iterator[FaultProxy]:
    with FaultProxy.of(control_plane.cluster) as running:
        yield running


#: case -> (the fault on the first binding requests, whether the API server refused those bindings)
CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "429-retry-after": ({"action": "answer", "status": 429, "retry_after": 1, "times": 3}, False),
    "503-not-stored": ({"action": "answer", "status": 503, "times": 3}, False),
    "stored-then-504": ({"action": "stored_then_504", "times": 3}, False),
    "stored-then-no-answer": ({"action": "stored_then_drop", "times": 3}, False),
    "webhook-409": ({"action": "answer", "status": 409, "message": REFUSAL, "times": 2}, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bindings_survive_bad_answers(
    control_plane: ClusterHarness,
    operators: Operators,
    scope: Scope,
    proxy: FaultProxy,
    tmp_path: Path,
    case: str,
) -> None:
    options, refused = CASES[case]
    scope.nodes(3)
    operator = operators.start(
        "op-faults", lease_namespace=scope.namespace, kubeconfig=proxy.kubeconfig(tmp_path / "kubeconfig")
    )
    operator.wait_leading()
    fault = proxy.add(Fault("POST", BINDING, **options))
    names = [f"p{i}" for i in range(PODS)]
    scope.create_pods([scope.pod(name) for name in names])
    scope.wait_all_bound(timeout=60)
    assert fault.hits == fault.times, f"the fault applied {fault.hits} times"

    bindings = Counter(
        r.name
        for r in settled_audit(control_plane, scope.namespace)
        if r.is_binding and r.namespace == scope.namespace and r.succeeded
    )
    assert bindings == Counter({name: 1 for name in names})
    pods = scope.pods()
    for name in names:
        conditions = {c["type"]: c for c in pods[name]["status"].get("conditions") or ()}
        assert conditions["PodScheduled"]["status"] == "True", (name, conditions["PodScheduled"])
    # each pod's Scheduled event comes after any failure event for it: once all are in, none is missing
    wait_until(
        lambda: {e["involvedObject"]["name"] for e in scope.events("Scheduled")} == set(names),
        30,
        "a Scheduled event for every pod",
    )
    failures = scope.events("FailedScheduling")
    if refused:
        told = {e["involvedObject"]["name"] for e in failures if "denied the request" in e["message"]}
        assert len(told) == fault.times, [e["message"] for e in failures]
    else:
        assert failures == [], [e["message"] for e in failures]
    assert operator.alive, operator.tail()


def test_half_the_bindings_throttled_and_some_answers_dropped(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Every second binding POST answered 429 with ``Retry-After: 2``; of the others, three are stored
    and then their answer dropped. Each pod is bound once, with PodScheduled=True and no FailedScheduling
    event (all of it is retried within the binding cycle), and every retry after a 429 came at least the
    two seconds the server asked for after it."""
    count = 40
    scope.nodes(3)
    operator = operators.start(
        "op-throttled", lease_namespace=scope.namespace, kubeconfig=proxy.kubeconfig(tmp_path / "kubeconfig")
    )
    operator.wait_leading()
    throttle = proxy.add(Fault("POST", BINDING, "answer", status=429, retry_after=2, every=2, times=None))
    drop = proxy.add(Fault("POST", BINDING, "stored_then_drop", times=3))
    names = [f"t{i:02d}" for i in range(count)]
    scope.create_pods([scope.pod(name) for name in names])
    scope.wait_all_bound(timeout=120)
    assert throttle.hits >= count // 2 and drop.hits == 3, (throttle.hits, drop.hits)

    bindings = Counter(
        r.name
        for r in settled_audit(control_plane, scope.namespace)
        if r.is_binding and r.namespace == scope.namespace and r.succeeded
    )
    assert bindings == Counter({name: 1 for name in names})
    for name, pod in scope.pods().items():
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        assert conditions["PodScheduled"]["status"] == "True", (name, conditions["PodScheduled"])
    wait_until(
        lambda: {e["involvedObject"]["name"] for e in scope.events("Scheduled")} == set(names),
        30,
        "a Scheduled event for every pod",
    )
    assert scope.events("FailedScheduling") == []

    by_pod: dict[str, list[tuple[float, str | None]]] = {}
    for at, method, path, action in proxy.requests:
        if method == "POST" and path.endswith("/binding") and f"/namespaces/{scope.namespace}/" in path:
            by_pod.setdefault(path, []).append((at, action))
    throttled = 0
    for attempts in by_pod.values():
        for (at, action), (then, _) in itertools.pairwise(attempts):
            if action == "answer":
                throttled += 1
                assert then - at >= 2.0, f"a retry {then - at:.2f} s after a 429 asking for 2 s"
    assert throttled == throttle.hits
