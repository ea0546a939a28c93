"""`kopf-scheduler simulate` with PersistentVolumes and claims: static volumes bound where they are,
claims of WaitForFirstConsumer classes provisioned on the chosen node's topology (a later pod of the
same claim follows its volume), generic ephemeral volumes, and the FailedScheduling messages of a
missing claim and an unbound Immediate one; the ``volumes`` entry of the JSON and ``--explain``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main

ZONE = "topology.kubernetes.io/zone"
DRIVER = "fast.csi.example.com"


def _node(name: str, zone: str, cpu: str = "4") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _claim(name: str, storage_class: str, size: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


def _pod(name: str, second: int, *claims: str, **spec: Any) -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
        },
        "spec": {
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": volumes,
            **spec,
        },
    }


def _class(name: str, provisioner: str, mode: str = "WaitForFirstConsumer") -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


LOCAL_PV = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "local-n2"},
    "spec": {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local",
        "local": {"path": "/mnt/disks/a"},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}
                        ]
                    }
                ]
            }
        },
    },
    "status": {"phase": "Available"},
}
CSI_NODES = [
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": name, "topologyKeys": [ZONE]}]},
    }
    for name in ("n1", "n2", "n3")
]
EPHEMERAL = {
    "name": "scratch",
    "ephemeral": {
        "volumeClaimTemplate": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "fast",
                "resources": {"requests": {"storage": "1Gi"}},
            }
        }
    },
}

OBJECTS = [
    # n1 is the emptiest node: what scoring prefers when volumes leave a choice
    _node("n1", "a", cpu="8"),
    _node("n2", "b"),
    _node("n3", "a"),
    *CSI_NODES,
    _class("local", "kubernetes.io/no-provisioner"),
    _class("fast", DRIVER),
    _class("immediate", DRIVER, mode="Immediate"),
    LOCAL_PV,
    _claim("data-local", "local", "5Gi"),
    _claim("data-fast", "fast"),
    _claim("data-immediate", "immediate"),
    _pod("uses-local", 1, "data-local"),
    _pod("uses-fast", 2, "data-fast"),
    # the same claim, later, from a pod kept off n1: its volume is in zone a, so only n3 will do
    _pod(
        "follows-fast",
        3,
        "data-fast",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1"]}
                            ]
                        }
                    ]
                }
            }
        },
    ),
    _pod("uses-immediate", 4, "data-immediate"),
    _pod("uses-missing", 5, "no-such-claim"),
    {**_pod("uses-ephemeral", 6), "spec": {**_pod("uses-ephemeral", 6)["spec"], "volumes": [EPHEMERAL]}},
]


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(OBJECTS))
    return path


def test_volumes_in_json(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(cluster), "--output", "json", "--seed", "1"]) == 0
    pods = {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    assert pods["uses-local"]["node"] == "n2"
    assert pods["uses-local"]["volumes"] == [
        {"name": "v0", "claim": "data-local", "persistentVolume": "local-n2", "binding": "static"}
    ]
    assert pods["uses-fast"]["node"] == "n1"
    [fast] = pods["uses-fast"]["volumes"]
    assert fast["binding"] == "provisioned" and fast["persistentVolume"].startswith("pvc-")
    # the provisioned volume is in n1's zone (its CSINode topology key), so the claim's next pod goes to n3
    assert pods["follows-fast"]["node"] == "n3"
    assert pods["follows-fast"]["volumes"][0]["binding"] == "provisioned"
    assert pods["uses-ephemeral"]["node"] is not None
    assert pods["uses-ephemeral"]["volumes"][0]["claim"] == "uses-ephemeral-scratch"
    assert pods["uses-ephemeral"]["volumes"][0]["binding"] == "provisioned"
    assert pods["uses-immediate"]["node"] is None
    assert pods["uses-immediate"]["message"].startswith(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert pods["uses-immediate"]["volumes"] == [
        {"name": "v0", "claim": "data-immediate", "persistentVolume": None, "binding": None}
    ]
    assert pods["uses-missing"]["message"].startswith(
        '0/3 nodes are available: persistentvolumeclaim "no-such-claim" not found.'
    )


def test_volumes_in_explain(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(cluster), "--explain", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "  volume v0: claim data-local -> local-n2 (static)" in out
    assert (
        "  n1: filtered out by VolumeBinding: node(s) didn't find available persistent volumes to bind" in out
    )
    assert "  volume v0: claim data-immediate -> not bound" in out
    lines = out.splitlines()
    follows = lines.index("default/follows-fast -> n3")
    assert lines[follows + 1].startswith("  volume v0: claim data-fast -> pvc-")
    assert "n2: filtered out by VolumeBinding: node(s) didn't match PersistentVolume's node affinity" in out
