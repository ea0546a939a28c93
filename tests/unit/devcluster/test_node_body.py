"""Fake node bodies: scheduler_perf-like defaults, zone spreading, template overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster.nodes import load_template, merge, node_body


def test_defaults() -> None:
    body = node_body(7, prefix="n-")
    assert body["metadata"]["name"] == "n-7"
    assert body["metadata"]["labels"] == {
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": "n-7",
        "topology.kubernetes.io/zone": "zone-1",
    }
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert body["status"]["capacity"] == resources
    assert body["status"]["allocatable"] == resources
    ready = [c for c in body["status"]["conditions"] if c["type"] == "Ready"]
    assert [c["status"] for c in ready] == ["True"]
    assert "taints" not in body["spec"]


@pytest.mark.parametrize(
    ("index", "zones", "zone"),
    [(0, 3, "zone-0"), (4, 3, "zone-1"), (5, 1, "zone-0"), (9, 5, "zone-4")],
    ids=["first", "wraps", "one-zone", "five-zones"],
)
def test_zone_is_index_mod_zones(index: int, zones: int, zone: str) -> None:
    assert node_body(index, zones=zones)["metadata"]["labels"]["topology.kubernetes.io/zone"] == zone


def test_zero_zones_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--zones"):
        node_body(0, zones=0)


def test_template_overrides_field_by_field() -> None:
    template: dict[str, Any] = {
        "metadata": {"generateName": "x-", "labels": {"tier": "gold", "topology.kubernetes.io/zone": "z"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7500m", "nvidia.com/gpu": "1"}},
    }
    body = node_body(2, prefix="g-", template=template)
    meta = body["metadata"]
    assert meta["name"] == "g-2"
    assert "generateName" not in meta
    assert meta["labels"]["tier"] == "gold"
    assert meta["labels"]["topology.kubernetes.io/zone"] == "z"  # the template's zone wins
    assert meta["labels"]["kubernetes.io/hostname"] == "g-2"  # the name always wins
    assert body["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert body["status"]["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert body["status"]["allocatable"]["cpu"] == "7500m"
    assert body["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert template["metadata"]["generateName"] == "x-"  # input not mutated


def test_merge_replaces_lists() -> None:
    assert merge({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": {"d": 2}}) == {"a": [3], "b": {"c": 1, "d": 2}}


def test_load_template(tmp_path: Path) -> None:
    good = tmp_path / "node.yaml"
    good.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  labels: {a: b}\n")
    assert load_template(good)["metadata"]["labels"] == {"a": "b"}
    bad = tmp_path / "pod.yaml"
    bad.write_text("kind: Pod\n")
    with pytest.raises(UsageError, match="one Node object"):
        load_template(bad)
    with pytest.raises(UsageError, match="cannot read"):
        load_template(tmp_path / "missing.yaml")
