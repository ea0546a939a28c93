"""Binding against the real API server: the bind lands (spec.nodeName, PodScheduled=True set by the API
server), repeats and deleted or re-created pods give the quiet 409/404, and bind throughput."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kopf_scheduler.devcluster import create_nodes
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e


def create_pod(cp: ClusterHarness, ns: str, name: str) -> PodInfo:
    return PodInfo(cp.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(name, ns)))


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod.get("status", {}).get("conditions") or ()}


async def test_bind_assigns_the_node(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("k8s-bind")
    node = (await create_nodes(control_plane.api, 1, prefix=f"{ns}-")).names[0]
    pod = create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.bind(pod, node)
        assert client.stats.binds["ok"] == 1
    bound = control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")
    assert bound["spec"]["nodeName"] == node, dumps(bound)
    scheduled = conditions(bound)["PodScheduled"]
    assert scheduled["status"] == "True", dumps(bound["status"])


async def test_binding_twice_is_a_quiet_conflict(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("k8s-bind")
    pod = create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.bind(pod, "node-a")
        with pytest.raises(APIError) as info:
            await client.bind(pod, "node-b")
    assert info.value.status == 409 and info.value.is_gone_or_conflict
    assert "already assigned to node" in info.value.message, info.value.message
    assert control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")["spec"]["nodeName"] == "node-a"


async def test_binding_a_deleted_pod_is_gone(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("k8s-bind")
    pod = create_pod(control_plane, ns, "web")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        with pytest.raises(APIError) as info:
            await client.bind(pod, "node-a")
    assert info.value.status == 404 and info.value.is_gone_or_conflict


async def test_binding_a_recreated_pod_by_its_old_uid_is_refused(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("k8s-bind")
    old = create_pod(control_plane, ns, "web")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/web")
    create_pod(control_plane, ns, "web")
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        with pytest.raises(APIError) as info:
            await client.bind(old, "node-a")
    assert info.value.status == 409 and info.value.is_gone_or_conflict, info.value
    assert "Precondition failed: UID in precondition" in info.value.message, info.value.message
    assert "nodeName" not in control_plane.get(f"/api/v1/namespaces/{ns}/pods/web")["spec"]


async def test_bind_throughput(control_plane: ClusterHarness, capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 pods bound with 64 in flight; prints pods/s (the API server and etcd share this machine)."""
    ns = control_plane.create_namespace("k8s-bench")
    count, concurrency = 1000, 64
    nodes = (await create_nodes(control_plane.api, 10, prefix=f"{ns}-")).names
    pods: list[PodInfo] = []
    async with control_plane.api.session(concurrency=64) as session:
        semaphore = asyncio.Semaphore(64)

        async def make(i: int) -> None:
            async with (
                semaphore,
                session.post(f"/api/v1/namespaces/{ns}/pods", json=pod_manifest(f"p-{i}", ns)) as resp,
            ):
                assert resp.status == 201, await resp.text()
                pods.append(PodInfo(await resp.json()))

        await asyncio.gather(*(make(i) for i in range(count)))
    async with KubeClient.from_environment(control_plane.kubeconfig, bind_concurrency=concurrency) as client:
        await client.bind(pods[0], nodes[0])  # warm the connection pool's first connection
        started = time.perf_counter()
        await asyncio.gather(*(client.bind(p, nodes[i % len(nodes)]) for i, p in enumerate(pods[1:])))
        elapsed = time.perf_counter() - started
        latency = client.stats.bind_latency
    rate = (count - 1) / elapsed
    with capsys.disabled():
        print(
            f"\nbind throughput: {count - 1} binds, concurrency {concurrency}: {elapsed:.2f} s, "
            f"{rate:.0f} pods/s; latency mean {latency.mean * 1000:.1f} ms, max {latency.max * 1000:.1f} ms"
        )
    assert client.stats.binds["ok"] == count
    listed = control_plane.get(f"/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3D{nodes[3]}")
    assert len(listed["items"]) == count // len(nodes)
    assert rate > 50, f"{rate:.0f} pods/s"
