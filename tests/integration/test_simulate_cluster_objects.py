"""`kopf-scheduler simulate` with the objects beside nodes and pods: a ReplicaSet's pods spread and
``--explain`` says which default constraints a pod got and from which objects; kinds simulate does not
read are named once each on stderr instead of vanishing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main


def _node(name: str, cpu: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def _replica(name: str, node: str | None, owned: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "web"}}
    if owned:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


REPLICA_SET = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}},
    },
}


def _write(tmp_path: Path, objects: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _simulate(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    assert main(["simulate", "--cluster", str(path), "--output", "json", *extra]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_replica_set_pods_spread_and_explain_names_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [_node("big", "32"), _node("small", "4"), _replica("web-1", "big"), _replica("web-2", "big")]
    path = _write(tmp_path, [*base, REPLICA_SET, _replica("web-3", None)])
    doc, _ = _simulate(capsys, path, "--explain")
    (pod,) = doc["pods"]
    assert pod["node"] == "small"
    assert pod["defaultSpreading"] == {
        "constraints": [
            {"topologyKey": "kubernetes.io/hostname", "maxSkew": 3, "whenUnsatisfiable": "ScheduleAnyway"},
            {
                "topologyKey": "topology.kubernetes.io/zone",
                "maxSkew": 5,
                "whenUnsatisfiable": "ScheduleAnyway",
            },
        ],
        "selector": "app=web",
        "from": ["ReplicaSet default/web"],
    }
    # the same pod without its ReplicaSet has no default constraints and goes to the bigger node
    doc, _ = _simulate(capsys, _write(tmp_path, [*base, _replica("web-3", None)]), "--explain")
    (pod,) = doc["pods"]
    assert pod["node"] == "big" and "defaultSpreading" not in pod


def test_kinds_simulate_does_not_read_are_named_once_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    objects = [
        _node("n", "4"),
        config,
        {**config, "metadata": {"name": "d"}},
        secret,
        _replica("p", None, False),
    ]
    doc, err = _simulate(capsys, _write(tmp_path, objects))
    assert doc["pods"][0]["node"] == "n"
    assert err.splitlines() == [
        "warning: ignored 2 ConfigMap objects (not a kind the scheduler reads)",
        "warning: ignored 1 Secret object (not a kind the scheduler reads)",
    ]


def test_a_file_that_is_not_text_ends_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert main(["simulate", "--cluster", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        f"kopf-scheduler simulate: error: {path}: not a text file (expected UTF-8 YAML or JSON)"
    ]


def test_an_unreadable_service_names_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": ["x"]},
    }
    assert main(["simulate", "--cluster", str(_write(tmp_path, [_node("n", "4"), service]))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("Service default/web: spec.selector: must be a map of strings"), err
    assert len(err.splitlines()) == 1
