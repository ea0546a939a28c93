"""kube-controller-manager in the dev cluster: a Deployment gets a ReplicaSet, the ReplicaSet gets pods it
controls, and deleting the Deployment garbage-collects both. The pods name a scheduler nobody serves, so
they stay Pending and unbound."""

from __future__ import annotations

from typing import Any

import pytest
from operator_harness import wait_until

from kopf_scheduler.devcluster.cluster import CONTROLLER_MANAGER
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

REPLICAS = 3
NOBODY = "nobody"  # a schedulerName no scheduler serves


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    template = pod_manifest(name, namespace, schedulerName=NOBODY)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }


def controlled_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    return any(
        ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller") is True
        for ref in obj["metadata"].get("ownerReferences", [])
    )


def test_deployment_replicaset_pods_and_garbage_collection(controller_plane: ClusterHarness) -> None:
    cp = controller_plane
    running = {c.name: c.alive for c in cp.cluster.status()}
    assert running.get(CONTROLLER_MANAGER) is True, running
    ns = cp.create_namespace("kcm")
    apps = f"/apis/apps/v1/namespaces/{ns}"

    def replica_sets() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = cp.get(f"{apps}/replicasets")["items"]
        return items

    def pods() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        return items

    created = cp.post(f"{apps}/deployments", deployment("web", ns))
    try:
        rs = wait_until(
            lambda: (
                (found := [r for r in replica_sets() if controlled_by(r, created)])
                and len(found) == 1
                and found[0]
            ),
            60,
            "the Deployment's ReplicaSet",
        )
        assert rs["spec"]["replicas"] == REPLICAS
        owned = wait_until(
            lambda: len(mine := [p for p in pods() if controlled_by(p, rs)]) == REPLICAS and mine,
            60,
            f"{REPLICAS} pods controlled by the ReplicaSet",
        )
        for pod in owned:
            assert pod["spec"]["schedulerName"] == NOBODY, dumps(pod)
            assert not pod["spec"].get("nodeName"), dumps(pod)
            assert pod["status"].get("phase") == "Pending", dumps(pod)
    finally:  # also after a failed assertion: the ReplicaSet and its pods go with it
        cp.delete(f"{apps}/deployments/web")  # apps/v1 default: background propagation, done by the GC
    wait_until(lambda: not replica_sets(), 60, "the ReplicaSet garbage-collected")
    wait_until(lambda: not pods(), 60, "its pods garbage-collected")
