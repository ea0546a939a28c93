"""The operator's helpers against the real API server: get, paginated list and the SchedulingProfile
status subresource; and a client connected from the kubeconfig the control plane writes. Each test's
objects are its ``scope``'s, deleted after it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from operator_harness import Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e

PROFILES = "kopf-scheduler.io/v1alpha1/schedulingprofiles"


async def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Until ``check()`` holds, yielding to the event loop (where the client's workers run)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.02)


async def test_get_and_paginated_list(control_plane: ClusterHarness, scope: Scope) -> None:
    ns = scope.namespace
    for i in range(5):
        control_plane.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(f"p{i}", ns))
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        namespace = await client.get("v1/namespaces", ns)
        assert namespace is not None and namespace["metadata"]["name"] == ns
        assert await client.get("v1/pods", "nope", namespace=ns) is None
        pods = await client.list("v1/pods", namespace=ns, page_size=2)
        assert sorted(p["metadata"]["name"] for p in pods) == [f"p{i}" for i in range(5)]
        assert {(p["apiVersion"], p["kind"]) for p in pods} == {("v1", "Pod")}
        assert client.stats.requests[("GET", 200)] >= 4  # three pages
        selected = await client.list("v1/pods", namespace=ns, field_selector="metadata.name=p3")
        assert [p["metadata"]["name"] for p in selected] == ["p3"]
        crds = await client.list("apiextensions.k8s.io/v1/customresourcedefinitions")
        assert "schedulingprofiles.kopf-scheduler.io" in {c["metadata"]["name"] for c in crds}


async def test_metadata_listing_gives_names_namespaces_and_uids_only(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns = scope.namespace
    made = [control_plane.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(f"m{i}", ns)) for i in range(5)]
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        listed = await client.list_metadata(f"/api/v1/namespaces/{ns}/pods", page_size=2)
        assert client.stats.requests[("GET", 200)] >= 3  # three pages
        nodes = await client.list_metadata("/api/v1/nodes")
        full_nodes = await client.list_objects("/api/v1/nodes")
    expected = sorted((p["metadata"]["name"], ns, p["metadata"]["uid"]) for p in made)
    assert sorted(
        (m["metadata"]["name"], m["metadata"]["namespace"], m["metadata"]["uid"]) for m in listed
    ) == (expected)
    assert all(set(m) == {"metadata"} and set(m["metadata"]) == {"name", "namespace", "uid"} for m in listed)
    # cluster-scoped objects have no namespace
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(n["metadata"]["name"] for n in full_nodes)
    assert all("namespace" not in n["metadata"] for n in nodes)


async def test_patch_status_of_a_scheduling_profile(control_plane: ClusterHarness, scope: Scope) -> None:
    name = scope.name("profile")
    scope.profiles.append(name)
    body = {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name},
        "spec": {"schedulerName": name},
    }
    control_plane.post("/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles", body)
    condition = {
        "type": "Accepted",
        "status": "True",
        "reason": "Valid",
        "message": "profile built",
        "observedGeneration": 1,
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        updated = await client.patch_status(
            PROFILES, name, {"observedGeneration": 1, "conditions": [condition]}
        )
        assert updated["status"]["conditions"] == [condition]
        fetched = await client.get(PROFILES, name)
        assert fetched is not None and fetched["status"]["observedGeneration"] == 1
        assert fetched["spec"] == {"schedulerName": name}  # the status subresource leaves spec alone
        by_path = await client.patch_status(f"/apis/{PROFILES}/{name}", {"observedGeneration": 2})
        assert by_path["status"]["observedGeneration"] == 2 and by_path["status"]["conditions"] == [condition]
        listed = await client.list_objects(f"/apis/{PROFILES}")
        assert name in {p["metadata"]["name"] for p in listed}
        assert await client.get_object(f"/apis/{PROFILES}/{name}") is not None
        with pytest.raises(APIError) as invalid:
            await client.patch_status(
                PROFILES, name, {"conditions": [{"type": "Accepted", "status": "Maybe"}]}
            )
        assert invalid.value.status == 422 and "Unsupported value" in invalid.value.message
        with pytest.raises(APIError) as missing:
            await client.patch_status(PROFILES, f"{name}-missing", {"observedGeneration": 1})
        assert missing.value.status == 404


async def test_reporting_from_another_thread_is_handed_to_the_loop(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns = scope.namespace
    pod = PodInfo(control_plane.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest("web", ns)))
    client = KubeClient.from_environment(control_plane.kubeconfig)
    try:
        await client.get("v1/namespaces", ns)  # first use inside the loop
        thread = threading.Thread(target=client.record_failure, args=(pod, "Unschedulable", "nope", None))
        thread.start()
        thread.join()
        # sent by workers in the loop, not only at close
        stats = client.stats
        await until(
            lambda: stats.events_sent["create"] == 1 and stats.status_patches_sent == 1,
            10,
            "the event and the condition sent",
        )
    finally:
        closed = await client.close()
    assert closed
    assert control_plane.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"], "no event"
