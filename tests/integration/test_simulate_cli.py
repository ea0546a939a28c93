"""`kopf-scheduler simulate` as a user runs it: placements, messages, output formats, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from simulate_runner import run_cli

from kopf_scheduler.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", *args, "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def by_name(doc: dict) -> dict[str, dict]:
    return {p["name"]: p for p in doc["pods"]}


def test_example_cluster_placements(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(run_json(capsys, "--cluster", str(EXAMPLE), "--seed", "1"))
    # batch-1 has the highest priority, goes first, and only node-a1 has 3 free CPUs.
    assert pods["batch-1"]["node"] == "node-a1"
    # LeastAllocated: node-b1 is the emptiest for the first small web pod (59 vs 41 and 20).
    assert pods["web-1"]["node"] == "node-b1"
    # For the second, node-a1 and node-b1 tie at 413 (`simulate --explain`: Fit 41 + BalancedAllocation 72
    # against 43 + 70, v1.37's improvement score), and a tie is broken at random (here by --seed); the pod
    # without requests (100m / 200Mi for scoring) then prefers the node the web pod left.
    assert {pods["web-2"]["node"], pods["best-effort"]["node"]} == {"node-a1", "node-b1"}
    assert pods["too-big"] == {
        "namespace": "jobs",
        "name": "too-big",
        "node": None,
        "message": "0/4 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, "
        "3 Insufficient cpu. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for "
        "scheduling.",
    }
    assert pods["gated"]["node"] is None
    assert pods["gated"]["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    assert pods["other-scheduler"]["node"] is None


def test_summary_counts(capsys: pytest.CaptureFixture[str]) -> None:
    summary = run_json(capsys, "--cluster", str(EXAMPLE))["summary"]
    assert summary["nodes"] == 4
    assert summary["pods"] == 7
    assert summary["scheduled"] == 4
    assert summary["unschedulable"] == 3


def test_explain_shows_filter_verdicts_and_scores(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(run_json(capsys, "--cluster", str(EXAMPLE), "--explain"))
    web = pods["web-1"]["nodes"]
    assert web["node-b2"]["filter"] == {"plugin": "NodeUnschedulable", "reason": "node(s) were unschedulable"}
    assert web["node-b1"]["filter"] is None
    assert web["node-b1"]["scores"]["NodeResourcesFit"] == {"raw": 59, "normalized": 59, "weighted": 59}
    assert web["node-b1"]["total"] == sum(s["weighted"] for s in web["node-b1"]["scores"].values())
    too_big = pods["too-big"]["nodes"]
    assert too_big["node-b1"]["filter"] == {
        "plugin": "NodeResourcesFit",
        "reason": "Insufficient cpu, Insufficient memory",
    }


def test_yaml_and_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(EXAMPLE), "--output", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert {p["name"] for p in doc["pods"]} >= {"web-1", "too-big"}
    assert main(["simulate", "--cluster", str(EXAMPLE)]) == 0
    table = capsys.readouterr().out
    assert "NAMESPACE" in table and "node-b1" in table and "4/7 pods scheduled" in table


def test_same_seed_same_placements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kopf_scheduler.testing import make_node, make_pod

    objects = [make_node().name(f"n{i}").obj() for i in range(20)]
    objects += [make_pod().name(f"p{i}").req(cpu="100m").obj() for i in range(1)]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    first = [p["node"] for p in run_json(capsys, "--cluster", str(path), "--seed", "7")["pods"]]
    again = [p["node"] for p in run_json(capsys, "--cluster", str(path), "--seed", "7")["pods"]]
    assert first == again
    many = {run_json(capsys, "--cluster", str(path), "--seed", str(s))["pods"][0]["node"] for s in range(30)}
    assert len(many) > 1, "ties between equal nodes must be broken at random"


def test_profile_naming_another_scheduler_serves_only_that_name(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(
        run_json(capsys, "--cluster", str(EXAMPLE), "--profile", str(ROOT / "profiles" / "bin-packing.yaml"))
    )
    # The bin-packing profile serves another scheduler name: default-scheduler pods are not served.
    assert pods["web-1"]["node"] is None
    assert pods["web-1"]["message"] == "no profile serves schedulerName 'default-scheduler'"


def _packing_cluster(tmp_path: Path, scheduler_name: str) -> Path:
    """Two 4-CPU / 16 GiB nodes, ``busy`` with 2 CPUs / 8 GiB taken; one pending pod of 1 CPU / 4 GiB."""
    from kopf_scheduler.testing import make_node, make_pod

    objects = [
        make_node().name(name).capacity(cpu="4", memory="16Gi", pods=110).obj() for name in ("busy", "empty")
    ]
    objects.append(make_pod().name("load").req(cpu="2", memory="8Gi").node("busy").obj())
    objects.append(make_pod().name("p").scheduler_name(scheduler_name).req(cpu="1", memory="4Gi").obj())
    path = tmp_path / "packing.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


@pytest.mark.parametrize(
    ("profile", "scheduler_name", "node", "busy", "empty"),
    [
        # LeastAllocated, per resource (capacity - requested) * 100 / capacity, with the pod counted:
        # busy: cpu (4-3)/4, memory (16-12)/16 -> 25; empty: cpu (4-1)/4, memory (16-4)/16 -> 75
        pytest.param(None, "default-scheduler", "empty", 25, 75, id="default-least-allocated"),
        # MostAllocated, requested * 100 / capacity: busy: 3/4, 12/16 -> 75; empty: 1/4, 4/16 -> 25
        pytest.param("bin-packing.yaml", "kopf-scheduler-bin-packing", "busy", 75, 25, id="bin-packing"),
    ],
)
def test_profile_switches_scoring(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    profile: str | None,
    scheduler_name: str,
    node: str,
    busy: int,
    empty: int,
) -> None:
    args = ["--cluster", str(_packing_cluster(tmp_path, scheduler_name)), "--explain", "--seed", "1"]
    if profile is not None:
        args += ["--profile", str(ROOT / "profiles" / profile)]
    [pod] = run_json(capsys, *args)["pods"]
    assert pod["node"] == node
    scores = {name: pod["nodes"][name]["scores"]["NodeResourcesFit"] for name in ("busy", "empty")}
    assert scores == {
        "busy": {"raw": busy, "normalized": busy, "weighted": busy},
        "empty": {"raw": empty, "normalized": empty, "weighted": empty},
    }
    # every other plugin scores both nodes alike (both stay balanced: cpu and memory at the same share)
    others = [
        {k: v for k, v in pod["nodes"][name]["scores"].items() if k != "NodeResourcesFit"}
        for name in ("busy", "empty")
    ]
    assert others[0] == others[1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("kind: Pod\nmetadata: {name: [oops\n", "bad.yaml:", id="unparseable-yaml"),
        pytest.param(
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
            "    resources: {requests: {cpu: lots}}\n",
            "bad.yaml: Pod default/p: spec.containers[0].resources.requests.cpu: invalid quantity 'lots'",
            id="bad-quantity",
        ),
        pytest.param(
            "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {memory: 1Zi}}\n",
            "bad.yaml: Node n: status.allocatable.memory: invalid quantity '1Zi'",
            id="bad-node-quantity",
        ),
    ],
)
def test_bad_cluster_input_is_one_line_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    result = run_cli("--cluster", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}},
            "spec.plugins.score.enabled[0].name: unknown plugin 'NoSuchPlugin'",
            id="unknown-plugin",
        ),
        pytest.param(
            {
                "schedulerName": "s",
                "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 0}]}},
            },
            "spec.plugins.score.enabled[0].weight: must be > 0, not 0",
            id="zero-weight",
        ),
        pytest.param(
            {
                "schedulerName": "s",
                "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": 1}}],
            },
            "spec.pluginConfig[0].args.scoringStrategy: must be an object",
            id="bad-args",
        ),
    ],
)
def test_bad_profile_names_file_and_field(tmp_path: Path, spec: dict, expected: str) -> None:
    profile = write(
        tmp_path,
        "profile.yaml",
        yaml.safe_dump(
            {"apiVersion": "kopf-scheduler.io/v1alpha1", "kind": "SchedulingProfile", "spec": spec}
        ),
    )
    result = run_cli("--cluster", str(EXAMPLE), "--profile", str(profile))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "profile.yaml" in result.stderr
    assert expected in result.stderr


def test_missing_file(tmp_path: Path) -> None:
    result = run_cli("--cluster", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "nope.yaml: no such file or directory" in result.stderr
