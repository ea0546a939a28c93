"""``simulate --fresh``: the pods bound today that the profiles serve are placed again, with the pending
ones, and the output says which would stay, move or not fit; pods of other schedulers and mirror pods stay
as load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from simulate_runner import run_cli

from kopf_scheduler.testing import make_node, make_pod


def _write(tmp_path: Path, objects: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _cluster() -> list[dict[str, Any]]:
    """n1 holds all three web pods although n2 is empty: the default profile would spread them."""
    nodes = [make_node().name(n).capacity(cpu="4", memory="8Gi", pods=20).obj() for n in ("n1", "n2")]
    web = [
        make_pod().name(f"web-{i}").namespace("default").req(cpu="1").node(name="n1").obj() for i in range(3)
    ]
    other = (
        make_pod()
        .name("theirs")
        .namespace("default")
        .scheduler_name("someone-else")
        .req(cpu="1")
        .node(name="n1")
        .obj()
    )
    mirror = make_pod().name("static").namespace("kube-system").req(cpu="1").node(name="n1").obj()
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    pending = make_pod().name("new").namespace("default").req(cpu="500m").obj()
    return [*nodes, *web, other, mirror, pending]


def test_fresh_placement_shows_which_bound_pods_would_move(tmp_path: Path) -> None:
    path = _write(tmp_path, _cluster())
    done = run_cli("--cluster", str(path), "--fresh", "--seed", "1", "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [p["name"] for p in doc["pods"]] == ["new"]  # the run itself is unchanged: pending pods only
    fresh = doc["fresh"]
    assert fresh["summary"] == {"pods": 3, "same": 1, "moved": 2, "unschedulable": 0}
    moved = {p["name"]: (p["today"], p["fresh"]) for p in fresh["pods"]}
    assert sorted(moved.values()) == [("n1", "n2"), ("n1", "n2")]  # theirs and the static pod stay on n1


def test_the_fresh_table_lists_movers_and_counts(tmp_path: Path) -> None:
    path = _write(tmp_path, _cluster())
    done = run_cli("--cluster", str(path), "--fresh", "--seed", "1")
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("FRESH PLACEMENT of the 3 bound pods the profiles serve:\n", 1)[
        1
    ].splitlines()
    assert section[0].split() == ["NAMESPACE", "NAME", "TODAY", "FRESH"]
    assert [line.split()[2:] for line in section[1:3]] == [["n1", "n2"], ["n1", "n2"]]
    assert section[3] == "1 stay, 2 move, 0 would not fit"


def test_a_pod_that_would_not_fit_any_more_is_told_why(tmp_path: Path) -> None:
    node = make_node().name("n1").capacity(cpu="1", memory="8Gi", pods=20).obj()
    over = (
        make_pod().name("over").namespace("default").req(cpu="2").node(name="n1").obj()
    )  # admitted before a resize
    done = run_cli("--cluster", str(_write(tmp_path, [node, over])), "--fresh", "-o", "json")
    assert done.returncode == 0, done.stderr
    [pod] = json.loads(done.stdout)["fresh"]["pods"]
    assert (pod["today"], pod["fresh"]) == ("n1", None)
    assert pod["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_without_the_flag_files_are_not_placed_afresh(tmp_path: Path) -> None:
    done = run_cli("--cluster", str(_write(tmp_path, _cluster())), "-o", "json")
    assert done.returncode == 0, done.stderr
    assert "fresh" not in json.loads(done.stdout)
