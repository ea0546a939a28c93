"""Binding against the real API server: the bind lands (spec.nodeName, PodScheduled=True set by the API
server), repeats and deleted or re-created pods give the quiet 409/404, and a thousand binds with 64 in
flight all land where they were sent. How fast they land is the benchmark's business (``bench/``), not a
test's. Every test's pods and nodes are its ``scope``'s, deleted after it."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from operator_harness import Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e


def create_pod(cp: ClusterHarness, ns: str, name: str) -> PodInfo:
    return PodInfo(cp.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(name, ns)))


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod.get("status", {}).get("conditions") or ()}


async def test_bind_assigns_the_node(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    [node] = await asyncio.to_thread(scope.nodes, 1)  # scope.nodes runs its own event loop
    pod = create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.bind(pod, node)
        assert client.stats.binds["ok"] == 1
    bound = control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")
    assert bound["spec"]["nodeName"] == node, dumps(bound)
    scheduled = conditions(bound)["PodScheduled"]
    assert scheduled["status"] == "True", dumps(bound["status"])


async def test_binding_twice_is_a_quiet_conflict(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    pod = create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.bind(pod, "node-a")
        with pytest.raises(APIError) as info:
            await client.bind(pod, "node-b")
    assert info.value.status == 409 and info.value.is_gone_or_conflict
    assert "already assigned to node" in info.value.message, info.value.message
    assert control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")["spec"]["nodeName"] == "node-a"


async def test_binding_a_deleted_pod_is_gone(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    pod = create_pod(control_plane, ns, "web")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        with pytest.raises(APIError) as info:
            await client.bind(pod, "node-a")
    assert info.value.status == 404 and info.value.is_gone_or_conflict


async def test_binding_a_recreated_pod_by_its_old_uid_is_refused(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns = scope.namespace
    old = create_pod(control_plane, ns, "web")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/web")
    create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        with pytest.raises(APIError) as info:
            await client.bind(old, "node-a")
    assert info.value.status == 409 and info.value.is_gone_or_conflict, info.value
    assert "Precondition failed: UID in precondition" in info.value.message, info.value.message
    assert "nodeName" not in control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")["spec"]


async def test_a_thousand_concurrent_binds_all_land(control_plane: ClusterHarness, scope: Scope) -> None:
    """1,000 pods bound with 64 in flight: each bind succeeds once and lands on the node it named."""
    ns = scope.namespace
    count, concurrency = 1000, 64
    nodes = await asyncio.to_thread(scope.nodes, 10)
    pods: list[PodInfo] = []
    async with control_plane.api.session(concurrency=concurrency) as session:
        semaphore = asyncio.Semaphore(concurrency)

        async def make(i: int) -> None:
            async with (
                semaphore,
                session.post(f"/api/v1/namespaces/{ns}/pods", json=pod_manifest(f"p-{i}", ns)) as resp,
            ):
                assert resp.status == 201, await resp.text()
                pods.append(PodInfo(await resp.json()))

        await asyncio.gather(*(make(i) for i in range(count)))
    sent = {p.name: nodes[i % len(nodes)] for i, p in enumerate(pods)}
    async with KubeClient.from_environment(control_plane.kubeconfig, bind_concurrency=concurrency) as client:
        await asyncio.gather(*(client.bind(p, sent[p.name]) for p in pods))
        assert client.stats.binds == {"ok": count}, client.stats.binds
    listed = control_plane.get(f"/api/v1/namespaces/{ns}/pods")["items"]
    landed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in listed}
    assert landed == sent, [name for name in sent if landed.get(name) != sent[name]][:10]
    assert Counter(landed.values()) == dict.fromkeys(nodes, count // len(nodes))
