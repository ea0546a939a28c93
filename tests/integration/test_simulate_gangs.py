"""Gang scheduling in `kopf-scheduler simulate`: the cases of scheduler-plugins' integration tests
(``test/integration/coscheduling_test.go``: ``TestCoschedulingPlugin``, ``TestPodgroupBackoff``,
``TestPodCompleted``), and gangs shown as units in the table and the JSON.

Upstream checks only that the expected pods get scheduled; here the scheduled pods must be exactly those.
Upstream's ``TestPodCompleted`` creates no node, so it passes whatever the plugin does; here its node
exists, and the gang still waits, since a finished member does not count toward ``minMember``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.coscheduling import sibling_pods_message

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "gang-scheduling.yaml"
SCHEDULER = "kopf-scheduler-gang"
MID, HIGH = 100, 1000
LABEL = "scheduling.x-k8s.io/pod-group"


def _node(name: str, **allocatable: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def _group(name: str, min_member: int, memory: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if memory is not None:
        spec["minResources"] = {"memory": memory}
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _pod(name: str, group: str | None, priority: int, **requests: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["labels"] = {LABEL: group}
    spec = {
        "schedulerName": SCHEDULER,
        "priority": priority,
        "containers": [{"name": "con0", "image": "pause", "resources": {"requests": requests}}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _gang(prefix: str, group: str, count: int, priority: int, memory: str) -> list[dict[str, Any]]:
    return [_pod(f"{prefix}-{i}", group, priority, memory=memory) for i in range(1, count + 1)]


def _interleave(*lists: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i in range(max(len(x) for x in lists)):
        out += [x[i] for x in lists if i < len(x)]
    return out


FAKE_NODE = _node("fake-node", pods="32", memory="300")
#: TestCoschedulingPlugin: one node with 300 bytes of memory; (pods, PodGroups, the pods scheduled)
CASES = {
    "equal priority, sequentially pg1 meet min and pg2 not meet min": (
        _gang("t1-p1", "pg1-1", 3, MID, "50") + _gang("t1-p2", "pg1-2", 4, MID, "100"),
        [_group("pg1-1", 3), _group("pg1-2", 4)],
        ["t1-p1-1", "t1-p1-2", "t1-p1-3"],
    ),
    "equal priority, not sequentially pg1 meet min and pg2 not meet min": (
        _interleave(_gang("t2-p1", "pg2-1", 3, MID, "50"), _gang("t2-p2", "pg2-2", 4, MID, "100")),
        [_group("pg2-1", 3), _group("pg2-2", 4)],
        ["t2-p1-1", "t2-p1-2", "t2-p1-3"],
    ),
    "equal priority, not sequentially pg1 not meet min and 3 regular pods": (
        _interleave(
            _gang("t3-p1", "pg3-1", 3, MID, "50"), [_pod(f"t3-p{i}", None, MID, memory="100") for i in (2, 3)]
        ),
        [_group("pg3-1", 4)],
        ["t3-p2", "t3-p3"],
    ),
    "different priority, sequentially pg1 meet min and pg2 meet min": (
        _gang("t4-p1", "pg4-1", 3, MID, "100") + _gang("t4-p2", "pg4-2", 3, HIGH, "50"),
        [_group("pg4-1", 3), _group("pg4-2", 3)],
        ["t4-p2-1", "t4-p2-2", "t4-p2-3"],
    ),
    "different priority, not sequentially pg1 meet min and pg2 meet min": (
        _interleave(_gang("t5-p1", "pg5-1", 3, MID, "100"), _gang("t5-p2", "pg5-2", 3, HIGH, "50")),
        [_group("pg5-1", 3), _group("pg5-2", 3)],
        ["t5-p2-1", "t5-p2-2", "t5-p2-3"],
    ),
    "different priority, not sequentially pg1 meet min and 3 regular pods": (
        _interleave(
            _gang("t6-p1", "pg6-1", 3, MID, "50"),
            [_pod(f"t6-p{i}", None, HIGH, memory="100") for i in (2, 3, 4)],
        ),
        [_group("pg6-1", 3)],
        ["t6-p2", "t6-p3", "t6-p4"],
    ),
    "equal priority, not sequentially pg1 meet min and p2 p3 not meet min": (
        _interleave(
            _gang("t7-p1", "pg7-1", 3, MID, "50"),
            _gang("t7-p2", "pg7-2", 4, MID, "100"),
            _gang("t7-p3", "pg7-3", 4, MID, "100"),
        ),
        [_group("pg7-1", 3), _group("pg7-2", 4), _group("pg7-3", 4)],
        ["t7-p1-1", "t7-p1-2", "t7-p1-3"],
    ),
    "equal priority, not sequentially pg1 meet min and p2 p3 not meet min, pgs have min resources": (
        _interleave(
            _gang("t8-p1", "pg8-1", 3, MID, "50"),
            _gang("t8-p2", "pg8-2", 4, MID, "100"),
            _gang("t8-p3", "pg8-3", 4, MID, "100"),
        ),
        [_group("pg8-1", 3, "150"), _group("pg8-2", 4, "400"), _group("pg8-3", 4, "400")],
        ["t8-p1-1", "t8-p1-2", "t8-p1-3"],
    ),
    "equal priority, not sequentially pg1 meet min and pg2 not meet min, pgs have min resources": (
        _interleave(_gang("t9-p1", "pg9-1", 3, MID, "50"), _gang("t9-p2", "pg9-2", 4, MID, "100")),
        [_group("pg9-1", 3, "150"), _group("pg9-2", 4, "400")],
        ["t9-p1-1", "t9-p1-2", "t9-p1-3"],
    ),
}


def _simulate(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    objects: list[dict[str, Any]],
    fmt: str = "json",
    **args: int,
) -> Any:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects))
    profile = yaml.safe_load(PROFILE.read_text())
    profile["spec"]["pluginConfig"][0]["args"].update(args)
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    argv = [
        "simulate",
        "--cluster",
        str(cluster),
        "--profile",
        str(tmp_path / "profile.yaml"),
        "--output",
        fmt,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else out


@pytest.mark.parametrize("case", list(CASES))
def test_coscheduling_plugin(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods, groups, expected = CASES[case]
    doc = _simulate(tmp_path, capsys, [FAKE_NODE, *groups, *pods], permitWaitingTimeSeconds=3)
    assert sorted(p["name"] for p in doc["pods"] if p["node"]) == expected


def test_pod_group_backoff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [_node("fake-node-1", cpu="6", pods="32")] + [
        _node(f"fake-node-{i}", cpu="2", pods="32") for i in (2, 3, 4)
    ]
    pods = [_pod(f"t1-p1-{i}", "pg1-1", MID, cpu="4") for i in range(1, 7)] + [
        _pod("t1-p2-1", "pg2-1", MID, cpu="2")
    ]
    groups = [_group("pg1-1", 6), _group("pg2-1", 1)]
    doc = _simulate(
        tmp_path, capsys, [*nodes, *groups, *pods], permitWaitingTimeSeconds=3, podGroupBackoffSeconds=1
    )
    assert [p["name"] for p in doc["pods"] if p["node"]] == ["t1-p2-1"]
    gangs = {g["name"]: g for g in doc["gangs"]}
    assert gangs["pg2-1"]["scheduled"] and not gangs["pg1-1"]["scheduled"]


def test_a_finished_member_does_not_count_toward_the_gang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    completed = _pod("t1-p1-1", "pg1-1", MID, cpu="1")
    completed["spec"]["nodeName"] = "fake-node-1"
    completed["status"] = {"phase": "Succeeded"}
    pods = [_pod(f"t1-p1-{i}", "pg1-1", MID, cpu="1") for i in range(2, 7)]
    objects = [_node("fake-node-1", cpu="6", pods="32"), _group("pg1-1", 6), completed, *pods]
    doc = _simulate(tmp_path, capsys, objects, permitWaitingTimeSeconds=3, podGroupBackoffSeconds=1)
    assert [p["node"] for p in doc["pods"]] == [None] * 5
    message = sibling_pods_message(PodInfo(pods[0]), 5, 6)
    assert message.startswith(
        "pre-filter pod t1-p1-2 cannot find enough sibling pods, current pods number: 5"
    )
    assert doc["pods"][0]["message"] == message
    assert doc["gangs"] == [
        {
            "namespace": "default",
            "name": "pg1-1",
            "minMember": 6,
            "pods": 5,
            "placed": 0,
            "scheduled": False,
            "message": message,
        }
    ]


def test_gangs_are_shown_as_units_in_the_table_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods, groups, _ = CASES["equal priority, sequentially pg1 meet min and pg2 not meet min"]
    objects = [FAKE_NODE, *groups, *pods, _pod("solo", None, MID, memory="1")]
    doc = _simulate(tmp_path, capsys, objects)
    members = {p["name"]: p.get("podGroup") for p in doc["pods"]}
    assert members["t1-p1-1"] == "pg1-1" and members["t1-p2-4"] == "pg1-2" and members["solo"] is None
    gangs = {g["name"]: g for g in doc["gangs"]}
    assert gangs["pg1-1"] == {
        "namespace": "default",
        "name": "pg1-1",
        "minMember": 3,
        "pods": 3,
        "placed": 3,
        "scheduled": True,
        "message": None,
    }
    rejected = gangs["pg1-2"]
    assert (rejected["placed"], rejected["scheduled"]) == (0, False)
    assert rejected["message"].startswith("0/1 nodes are available: 1 Insufficient memory.")
    assert "PodGroup default/pg1-2 gets rejected due to Pod t1-p2-" in rejected["message"]
    assert (doc["summary"]["gangs"], doc["summary"]["gangsScheduled"]) == (2, 1)

    table = _simulate(tmp_path, capsys, objects, fmt="table")
    lines = table.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("GANG")))
    assert lines[header].split() == ["GANG", "MIN", "PLACED", "MESSAGE"]
    assert lines[header + 1].split() == ["default/pg1-1", "3", "3/3"]
    assert lines[header + 2].split()[:3] == ["default/pg1-2", "4", "0/4"]
    assert "gets rejected due to Pod" in lines[header + 2]
    assert lines[-1] == "1/2 gangs placed whole"
