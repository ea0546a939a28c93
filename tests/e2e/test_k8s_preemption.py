"""Preemption's API calls against the real API server, as kube-scheduler's PreemptPod makes them: the
DisruptionTarget condition, then the DELETE, then the Preempted event; and clearing a nominated node.
Each test's pods are its ``scope``'s, deleted after it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from operator_harness import Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e


def create(cp: ClusterHarness, ns: str, name: str, **spec: Any) -> PodInfo:
    return PodInfo(cp.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(name, ns, **spec)))


async def nominated_pod(cp: ClusterHarness, ns: str, name: str, timeout: float = 10.0) -> PodInfo:
    """The pod once its status names a nominated node (the client's workers patch it in the background;
    the test's reads run off the event loop they need)."""
    deadline = time.monotonic() + timeout
    while True:
        pod = PodInfo(await asyncio.to_thread(cp.get, f"/api/v1/namespaces/{ns}/pods/{name}"))
        if pod.nominated_node_name:
            return pod
        assert time.monotonic() < deadline, f"no nominated node within {timeout} s"
        await asyncio.sleep(0.02)


async def test_evict_marks_deletes_and_reports(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    victim = create(control_plane, ns, "low")
    preemptor = create(control_plane, ns, "high", schedulerName="kopf-scheduler")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        client.scheduler_name_for = lambda pod: pod.scheduler_name
        await client.bind(victim, "node-1")
        victim = PodInfo(control_plane.get(f"/api/v1/namespaces/{ns}/pods/low"))
        await client.evict(victim, preemptor, "node-1")
    pod = control_plane.get(f"/api/v1/namespaces/{ns}/pods/low")  # bound: terminating, no kubelet to finish
    assert pod["metadata"].get("deletionTimestamp"), dumps(pod["metadata"])
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    target = conditions["DisruptionTarget"]
    assert {k: target[k] for k in ("status", "reason", "message")} == {
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "kopf-scheduler: preempting to accommodate a higher priority pod",
    }, dumps(target)
    [event] = control_plane.get(
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events?fieldSelector=reason%3DPreempted"
    )["items"]
    assert (event["type"], event["action"]) == ("Normal", "Preempting")
    assert event["note"] == f"Preempted by pod {preemptor.uid} on node node-1"
    # no related object: kube-scheduler v1.37.2 leaves it out for a preempting pod (not for a PodGroup)
    assert event["regarding"]["uid"] == victim.uid and "related" not in event
    assert event["reportingController"] == "kopf-scheduler"  # the preemptor's profile


async def test_evicting_a_gone_victim_is_quiet(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    victim = create(control_plane, ns, "low")
    preemptor = create(control_plane, ns, "high")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/low")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.evict(victim, preemptor, "node-1")
    assert control_plane.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"] == []


async def test_clear_nominated_node_name(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    pod = create(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        client.record_failure(pod, "Unschedulable", "0/1 nodes are available: 1 Too many pods.", "node-1")
        nominated = await nominated_pod(control_plane, ns, "web")
        assert nominated.nominated_node_name == "node-1"
        other = KubeClient.from_environment(control_plane.kubeconfig)  # knows only the pod object
        other.clear_nominated_node_name(nominated)
        assert await other.close()
        assert other.stats.status_patches_sent == 1
    status = control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")["status"]
    assert "nominatedNodeName" not in status, dumps(status)
