"""Quantities beyond int64 already in the cluster when the scheduler starts: a bound pod requesting
``cpu: 1e30`` and a node with ``memory: 10Ei`` allocatable, and two pending pods asking for as much. The
same fresh cluster (etcd and kube-apiserver only: no node lifecycle controller tainting the fake nodes)
goes under the upstream kube-scheduler, then under ``kopf-scheduler run`` (``side_by_side``); in each,
the scheduler starts with those objects stored, then a canary pod is created.

Before, ``kopf-scheduler run`` raised OverflowError in its node table on the initial sync (and on every
cycle after): it bound nothing. Now it must bind the canary, log no error, and give every pod the outcome
kube-scheduler gives: the API server keeps ``1e30`` as written and stores ``10Ei`` as 2^63-1; upstream
reads ``cpu: 1e30`` as 0 millicores (``Quantity.MilliValue``), so ``huge-cpu`` fits and is bound, and
``10Ei`` as 2^63-1 bytes, which fits neither the 8Gi node nor the 10Ei one, where ``bound-poison``
already requests 1Gi: ``huge-memory`` gets FailedScheduling with kube-scheduler's message, word for word.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from operator_harness import fresh_cluster, pod_outcome, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

NS = "poison"
NODES = {"normal-0": (None, "4", "8Gi"), "huge-1": (None, "4", "10Ei")}
PODS = f"/api/v1/namespaces/{NS}/pods"
#: stored before the scheduler starts, in this order
BEFORE = [
    pod_manifest("bound-poison", NS, requests={"cpu": "1e30", "memory": "1Gi"}, nodeName="huge-1"),
    pod_manifest("huge-memory", NS, requests={"memory": "10Ei"}),
    pod_manifest("huge-cpu", NS, requests={"cpu": "1e30"}),
]
CANARY = pod_manifest("canary", NS, requests={"cpu": "100m", "memory": "64Mi"})
#: kube-scheduler v1.37.2's message for ``huge-memory`` (the test asserts kopf-scheduler's equals it)
HUGE_MEMORY_MESSAGE = (
    "0/2 nodes are available: 2 Insufficient memory. preemption: 0/2 nodes "
    "are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for "
    "scheduling."
)
TIMEOUT = 60.0


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    """The pods' outcomes, the FailedScheduling messages of ``huge-memory`` and the quantities as the API
    server stored them."""
    outcomes = {
        name: wait_until(
            lambda name=name: pod_outcome(cp, NS, name), TIMEOUT, f"{name} bound or unschedulable"
        )
        for name in ("huge-cpu", "huge-memory")
    }
    cp.post(PODS, CANARY)
    outcomes["canary"] = wait_until(lambda: pod_outcome(cp, NS, "canary"), TIMEOUT, "the canary bound")
    outcomes["bound-poison"] = pod_outcome(cp, NS, "bound-poison")
    events = cp.get(f"/api/v1/namespaces/{NS}/events")["items"]
    failed = sorted(
        {
            e.get("message", "")
            for e in events
            if e.get("reason") == "FailedScheduling" and e["involvedObject"].get("name") == "huge-memory"
        }
    )

    def requests(name: str) -> dict[str, str]:
        return dict(cp.get(f"{PODS}/{name}")["spec"]["containers"][0]["resources"]["requests"])

    stored = {
        "huge-1": cp.get("/api/v1/nodes/huge-1")["status"]["allocatable"]["memory"],
        "bound-poison": requests("bound-poison"),
        "huge-memory": requests("huge-memory"),
        "huge-cpu": requests("huge-cpu"),
    }
    return {"outcomes": outcomes, "failed_scheduling": failed, "stored": stored}


def cluster(state_dir: Path) -> Any:
    return fresh_cluster(
        state_dir,
        sized_nodes(NODES),
        namespaces=[NS],
        objects=[(PODS, body) for body in BEFORE],
        controller_manager=False,
    )


#: kube-scheduler, then on an identical fresh cluster ``kopf-scheduler run`` serving ``default-scheduler``
SIDE_BY_SIDE = SideBySide("poison-quantities", cluster, run)


def test_api_server_keeps_1e30_and_stores_10Ei_as_2_63_minus_1(kube_scheduler: dict[str, Any]) -> None:
    """``ParseQuantity`` caps only binary-suffixed amounts; ``1e30`` stays an int64 mantissa and a scale."""
    assert kube_scheduler["stored"] == {
        "huge-1": "9223372036854775807",
        "bound-poison": {"cpu": "1e30", "memory": "1Gi"},
        "huge-memory": {"memory": "9223372036854775807"},
        "huge-cpu": {"cpu": "1e30"},
    }


def test_pods_get_kube_schedulers_outcomes(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["outcomes"] == {
        "huge-cpu": "normal-0",  # 0 millicores: fits, and the empty node scores best
        "huge-memory": f"unschedulable: {HUGE_MEMORY_MESSAGE}",
        "canary": "normal-0",
        "bound-poison": "huge-1",
    }
    assert kopf_scheduler["outcomes"] == kube_scheduler["outcomes"]


def test_huge_pending_pod_gets_kube_schedulers_failed_scheduling_event(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["failed_scheduling"] == [HUGE_MEMORY_MESSAGE]
    assert kopf_scheduler["failed_scheduling"] == kube_scheduler["failed_scheduling"]
    assert kopf_scheduler["stored"] == kube_scheduler["stored"]
