"""Smoke tests of the real control plane: fake nodes look right (through the Python API and the
`dev-cluster nodes` command), and the upstream kube-scheduler binds a pod to one of them, which proves
the nodes, the admission settings and the scheduler wiring together. Each test's nodes and pods are
deleted after it (its ``scope``)."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import pytest
from operator_harness import Scope

from kopf_scheduler.cli import dev_cluster
from kopf_scheduler.devcluster import create_nodes
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

ALLOCATABLE = {"cpu": "4", "memory": "32Gi", "pods": "110"}


def assert_fake_node(node: dict[str, Any], name: str, zone: str) -> None:
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert labels["topology.kubernetes.io/zone"] == zone
    assert labels["kubernetes.io/os"] == "linux"
    assert node["status"]["allocatable"] == ALLOCATABLE
    assert node["status"]["capacity"] == ALLOCATABLE
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    # TaintNodesByCondition admission is off: no not-ready taint that only a controller would remove.
    assert not node["spec"].get("taints"), dumps(node["spec"])


async def test_create_nodes_api(control_plane: ClusterHarness, scope: Scope) -> None:
    prefix = f"api-{uuid.uuid4().hex[:6]}-"
    for i in range(4):
        scope.delete_later(f"/api/v1/nodes/{prefix}{i}")
    result = await create_nodes(control_plane.api, 4, prefix=prefix, zones=3)
    assert result.names == [f"{prefix}{i}" for i in range(4)]
    for i, name in enumerate(result.names):
        assert_fake_node(control_plane.get(f"/api/v1/nodes/{name}"), name, f"zone-{i % 3}")


def test_dev_cluster_nodes_command(
    control_plane: ClusterHarness, scope: Scope, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    dev_cluster.add_parser(parser.add_subparsers(), "dev-cluster")
    state_dir = str(control_plane.cluster.state_dir)
    prefix = f"cli-{uuid.uuid4().hex[:6]}-"
    for i in range(5):
        scope.delete_later(f"/api/v1/nodes/{prefix}{i}")

    argv = ["dev-cluster", "nodes", "--state-dir", state_dir, "--count", "5", "--zones", "2"]
    args = parser.parse_args([*argv, "--prefix", prefix])
    assert args.func(args) == 0
    assert "created 5 nodes" in capsys.readouterr().out
    for i in range(5):
        assert_fake_node(control_plane.get(f"/api/v1/nodes/{prefix}{i}"), f"{prefix}{i}", f"zone-{i % 2}")

    args = parser.parse_args(["dev-cluster", "status", "--state-dir", state_dir])
    assert args.func(args) == 0
    assert control_plane.server in capsys.readouterr().out


async def test_upstream_kube_scheduler_binds_pod(control_plane: ClusterHarness, scope: Scope) -> None:
    selector = scope.label  # only this test's nodes qualify (and are deleted after it)
    template = {"metadata": {"labels": selector}}
    result = await create_nodes(control_plane.api, 3, prefix=f"smoke-{scope.run}-", template=template)
    namespace = scope.namespace
    pod = pod_manifest(
        "web",
        namespace,
        requests={"cpu": "100m", "memory": "500Mi"},
        schedulerName="default-scheduler",
        nodeSelector=selector,
    )
    control_plane.post(f"/api/v1/namespaces/{namespace}/pods", pod)

    control_plane.cluster.start_kube_scheduler()
    try:
        deadline = time.monotonic() + 60
        while True:
            current = control_plane.get(f"/api/v1/namespaces/{namespace}/pods/web")
            if current["spec"].get("nodeName") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        log = control_plane.cluster.log_tail("kube-scheduler")
        control_plane.cluster.stop_kube_scheduler()

    assert current["spec"].get("nodeName") in result.names, f"{dumps(current)}\nkube-scheduler log:\n{log}"
    conditions = {c["type"]: c["status"] for c in current["status"].get("conditions", [])}
    assert conditions.get("PodScheduled") == "True", dumps(current["status"])
