"""Events and the PodScheduled condition as kube-scheduler writes them, read back from the API server:
exact texts, one Event with a series for repeated failures, no repeated condition patches, and the
nominated node name set and cleared.

The client sends from background workers: a test that counts what was sent first waits, with a deadline,
until the API server shows the write its count depends on (the Event created, the series started), so
the counts follow from the protocol and not from how fast the workers happened to be. Each test's pods
are its ``scope``'s, deleted after it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from operator_harness import Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e

MESSAGE = (
    "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
    "2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
    "2 No preemption victims found for incoming pod."
)


def setup(cp: ClusterHarness, scope: Scope, name: str = "web") -> tuple[str, PodInfo]:
    ns = scope.namespace
    return ns, PodInfo(cp.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(name, ns)))


def client(cp: ClusterHarness, **options: Any) -> KubeClient:
    return KubeClient.from_environment(cp.kubeconfig, reporting_instance="e2e-0", **options)


def events(cp: ClusterHarness, ns: str) -> list[dict[str, Any]]:
    return list(cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"])


def pod_scheduled(cp: ClusterHarness, ns: str, name: str = "web") -> tuple[dict[str, Any], dict[str, Any]]:
    pod = cp.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    conditions = {c["type"]: c for c in pod["status"].get("conditions") or ()}
    return conditions.get("PodScheduled", {}), pod["status"]


async def until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Until ``check()`` (a blocking read of the API server, run off the event loop where the client's
    workers send) returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}; last seen: {value!r}"
        await asyncio.sleep(0.02)


def series_count(cp: ClusterHarness, ns: str) -> int:
    """The count of the namespace's one Event: 1 before it is a series, 0 before it exists."""
    items = events(cp, ns)
    assert len(items) <= 1, dumps(items)
    return int((items[0].get("series") or {}).get("count") or 1) if items else 0


async def test_failed_scheduling_event_and_condition(control_plane: ClusterHarness, scope: Scope) -> None:
    ns, pod = setup(control_plane, scope)
    c = client(control_plane)
    c.record_failure(pod, "Unschedulable", MESSAGE, None)
    assert await c.close()
    [event] = events(control_plane, ns)
    assert {k: event.get(k) for k in ("type", "reason", "action", "note", "reportingController",
                                      "reportingInstance")} == {
        "type": "Warning", "reason": "FailedScheduling", "action": "Scheduling", "note": MESSAGE,
        "reportingController": "kopf-scheduler", "reportingInstance": "e2e-0",
    }  # fmt: skip
    assert event["regarding"]["uid"] == pod.uid and event["regarding"]["name"] == "web", dumps(event)
    assert event["metadata"]["name"].startswith("web.") and "series" not in event
    # what `kubectl describe pod` reads: the core/v1 view of the same event
    [core] = control_plane.get(f"/api/v1/namespaces/{ns}/events")["items"]
    assert (core["type"], core["reason"], core["message"]) == ("Warning", "FailedScheduling", MESSAGE)
    assert core["involvedObject"]["uid"] == pod.uid
    condition, _ = pod_scheduled(control_plane, ns)
    assert {k: condition.get(k) for k in ("status", "reason", "message")} == {
        "status": "False",
        "reason": "Unschedulable",
        "message": MESSAGE,
    }, dumps(condition)
    assert condition["lastTransitionTime"]


async def test_twenty_identical_failures_make_one_event_with_a_series(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns, pod = setup(control_plane, scope)
    c = client(control_plane, series_flush_interval=3600.0)  # no periodic flush during the test
    # a create, the series start (written at once), then counts kept in memory
    c.record_failure(pod, "Unschedulable", MESSAGE, None)
    await until(lambda: series_count(control_plane, ns) == 1, "the Event created")
    c.record_failure(pod, "Unschedulable", MESSAGE, None)
    await until(lambda: series_count(control_plane, ns) == 2, "the series started")
    for _ in range(18):
        c.record_failure(pod, "Unschedulable", MESSAGE, None)
    assert await c.close()  # writes the final count
    [event] = events(control_plane, ns)
    assert event["series"]["count"] == 20, dumps(event)
    assert event["note"] == MESSAGE
    stats = c.stats
    assert stats.events_recorded == 20 and stats.events_aggregated == 19
    assert stats.events_sent == {"create": 1, "patch": 2}, stats.events_sent
    assert stats.status_patches_sent == 1 and stats.status_patches_skipped == 19
    [core] = control_plane.get(f"/api/v1/namespaces/{ns}/events")["items"]
    assert core["series"]["count"] == 20


async def test_series_count_is_written_while_it_runs(control_plane: ClusterHarness, scope: Scope) -> None:
    ns, pod = setup(control_plane, scope)
    c = client(control_plane, series_flush_interval=0.3)
    try:
        c.record_failure(pod, "Unschedulable", MESSAGE, None)
        await until(lambda: series_count(control_plane, ns) == 1, "the Event created")
        c.record_failure(pod, "Unschedulable", MESSAGE, None)
        await until(lambda: series_count(control_plane, ns) == 2, "the series started")
        for _ in range(3):
            c.record_failure(pod, "Unschedulable", MESSAGE, None)
        # once the series runs, only the periodic flush writes its count, while the client runs on
        await until(lambda: series_count(control_plane, ns) == 5, "the series count of 5 written")
    finally:
        closed = await c.close()
    assert closed
    assert c.stats.events_sent == {"create": 1, "patch": 2}, c.stats.events_sent  # nothing left for close


async def test_new_message_new_event_and_updated_condition(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns, pod = setup(control_plane, scope)
    c = client(control_plane)
    c.record_failure(pod, "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.", None)
    first = await until(lambda: pod_scheduled(control_plane, ns)[0], "the first condition written")
    c.record_failure(pod, "Unschedulable", "0/4 nodes are available: 4 Insufficient cpu.", None)
    assert await c.close()
    notes = sorted(e["note"] for e in events(control_plane, ns))
    assert notes == [
        "0/3 nodes are available: 3 Insufficient cpu.",
        "0/4 nodes are available: 4 Insufficient cpu.",
    ]
    condition, _ = pod_scheduled(control_plane, ns)
    assert condition["message"] == "0/4 nodes are available: 4 Insufficient cpu."
    assert condition["lastTransitionTime"] == first["lastTransitionTime"]  # still False: no transition
    assert c.stats.status_patches_sent == 2


async def test_nominated_node_name_set_and_cleared(control_plane: ClusterHarness, scope: Scope) -> None:
    ns, pod = setup(control_plane, scope)
    c = client(control_plane)
    c.record_failure(pod, "Unschedulable", MESSAGE, "node-7")
    status = await until(
        lambda: (status := pod_scheduled(control_plane, ns)[1]).get("nominatedNodeName") and status,
        "the nominated node written",
    )
    assert status.get("nominatedNodeName") == "node-7", dumps(status)
    c.record_failure(pod, "Unschedulable", MESSAGE, "")
    assert await c.close()
    _, status = pod_scheduled(control_plane, ns)
    assert "nominatedNodeName" not in status, dumps(status)


async def test_scheduled_event(control_plane: ClusterHarness, scope: Scope) -> None:
    ns, pod = setup(control_plane, scope)
    async with client(control_plane) as c:
        await c.bind(pod, "node-3")
        c.record_scheduled(pod, "node-3")
    [event] = events(control_plane, ns)
    assert (event["type"], event["reason"], event["action"]) == ("Normal", "Scheduled", "Binding")
    assert event["note"] == f"Successfully assigned {ns}/web to node-3"
    assert event["regarding"]["uid"] == pod.uid


async def test_events_for_a_deleted_pod_are_harmless(control_plane: ClusterHarness, scope: Scope) -> None:
    ns, pod = setup(control_plane, scope)
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/web")
    c = client(control_plane)
    c.record_failure(pod, "Unschedulable", MESSAGE, None)
    assert await c.close()
    assert c.stats.status_patch_errors == 0  # 404 on the status: nothing to do
    assert len(events(control_plane, ns)) == 1  # the event about it is still accepted


async def test_events_name_the_pods_profile_when_known(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    raw = control_plane.post(
        f"/api/v1/namespaces/{ns}/pods", pod_manifest("web", ns, schedulerName="bin-packing")
    )
    pod = PodInfo(raw)
    odd = PodInfo(control_plane.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest("odd", ns)))
    c = client(control_plane)
    c.scheduler_name_for = lambda p: "not a name!" if p.name == "odd" else p.scheduler_name
    c.record_failure(pod, "Unschedulable", MESSAGE, None)
    c.record_failure(odd, "Unschedulable", MESSAGE, None)
    assert await c.close()
    by_pod = {e["regarding"]["name"]: e["reportingController"] for e in events(control_plane, ns)}
    assert by_pod == {"web": "bin-packing", "odd": "kopf-scheduler"}  # an invalid name falls back
