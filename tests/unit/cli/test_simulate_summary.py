"""`simulate`'s summary counts the nodes the scheduled pods went onto, out of all nodes: three pods pinned
to one of three nodes are "3/4 pods scheduled onto 1 of 3 nodes", not "onto 3 nodes"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.testing import make_node, make_pod


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    nodes = [make_node().name(f"n{i}").label("pool", "a" if i == 0 else "b").obj() for i in range(3)]
    pinned = [make_pod().name(f"p{i}").req(cpu="100m").node_selector(pool="a").obj() for i in range(3)]
    nowhere = make_pod().name("nowhere").req(cpu="100m").node_selector(pool="none").obj()
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([*nodes, *pinned, nowhere]))
    return path


def test_table_counts_the_nodes_that_received_pods(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(cluster)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("3/4 pods scheduled onto 1 of 3 nodes in "), last


def test_json_carries_both_counts(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(cluster), "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["nodes"], summary["nodesUsed"], summary["scheduled"], summary["pods"]) == (3, 1, 3, 4)
