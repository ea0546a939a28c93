"""`kopf-scheduler simulate` reads the same cluster the same way whatever its file format: a JSON
``kind: List`` (what ``kubectl get -o json`` writes), a YAML stream, JSON in a ``.yaml`` file, YAML with
anchors; broken input of any of them ends with one line naming the file and the place or field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from simulate_runner import run_cli

from kopf_scheduler.testing import make_node, make_pod


def cluster_objects() -> list[dict[str, Any]]:
    """Three nodes with room for 1, 2 and 3 pods of 1 CPU, one pod bound, five pending: the last one fits
    nowhere; the placements depend on every pod's requests and on the order the pods were read."""
    nodes = [
        {"apiVersion": "v1", "kind": "Node", **make_node().name(f"n{i}").capacity(cpu=str(i), pods=10).obj()}
        for i in (1, 2, 3)
    ]
    bound = make_pod().name("old").req(cpu="1").node("n3").obj()
    pending = [make_pod().name(f"p{i}").req(cpu="1").obj() for i in range(5)]
    return nodes + [{"apiVersion": "v1", "kind": "Pod", **p} for p in (bound, *pending)]


def placements(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str | None, str | None]]:
    assert result.returncode == 0, result.stderr
    return [(p["name"], p["node"], p["message"]) for p in json.loads(result.stdout)["pods"]]


def test_json_list_yaml_stream_and_json_in_a_yaml_file_place_pods_alike(tmp_path: Path) -> None:
    objects = cluster_objects()
    as_list = {"apiVersion": "v1", "kind": "List", "items": objects}
    (tmp_path / "list.json").write_text(json.dumps(as_list))
    (tmp_path / "stream.yaml").write_text(yaml.safe_dump_all(objects))
    (tmp_path / "json-inside.yaml").write_text(json.dumps(as_list, indent=1))
    runs = {
        name: placements(run_cli("--cluster", str(tmp_path / name), "-o", "json", "--seed", "1"))
        for name in ("list.json", "stream.yaml", "json-inside.yaml")
    }
    # worked by hand: n1, n2 and n3 have 1, 2 and 3 - 1 = 2 CPUs free: room for exactly five 1-CPU pods
    placed = [node for _, node, _ in runs["list.json"]]
    assert sorted(n for n in placed if n) == ["n1", "n2", "n2", "n3", "n3"]
    assert runs["stream.yaml"] == runs["list.json"]
    assert runs["json-inside.yaml"] == runs["list.json"]


def test_yaml_anchors_give_each_pod_its_own_copy(tmp_path: Path) -> None:
    """Two pods share one spec through an alias; each is placed on its own node as if written out."""
    text = """\
kind: Node
apiVersion: v1
metadata: {name: a, labels: {kubernetes.io/hostname: a}}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
kind: Node
apiVersion: v1
metadata: {name: b, labels: {kubernetes.io/hostname: b}}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
kind: List
apiVersion: v1
items:
- kind: Pod
  apiVersion: v1
  metadata: {name: first}
  spec: &spec
    containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
- kind: Pod
  apiVersion: v1
  metadata: {name: second}
  spec: *spec
"""
    path = tmp_path / "anchors.yaml"
    path.write_text(text)
    placed = placements(run_cli("--cluster", str(path), "-o", "json"))
    assert sorted(node for _, node, _ in placed if node) == ["a", "b"]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.json", '{"kind": "List", "items": [}', "bad.json:1:28: invalid JSON: Expecting value"),
        ("bad.yaml", "kind: Pod\nmetadata: {name: [p}\n", "bad.yaml:2:20: invalid YAML: "),
        ("meta.yaml", "kind: Pod\nmetadata: p\n", "meta.yaml: Pod: metadata: must be an object"),
        (
            "ns.yaml",
            "kind: Pod\nmetadata: {name: p, namespace: [a]}\n",
            "ns.yaml: Pod: metadata.namespace: must be a string",
        ),
        (
            "spec.yaml",
            "kind: Pod\nmetadata: {name: p}\nspec: 3\n",
            "spec.yaml: Pod default/p: spec: must be an object, not a number",
        ),
    ],
)
def test_broken_input_ends_with_one_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    (tmp_path / name).write_text(text)
    result = run_cli("--cluster", str(tmp_path / name))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"kopf-scheduler simulate: error: {tmp_path / expected}"), result.stderr


def test_a_pod_with_an_empty_spec_gets_the_global_default_priority(tmp_path: Path) -> None:
    """``spec:`` with nothing after it is an empty spec, as the API server reads it: admission gives the
    pod the globalDefault PriorityClass, so it preempts the lower-priority pod in its way."""
    text = """\
kind: PriorityClass
apiVersion: scheduling.k8s.io/v1
metadata: {name: everyday}
value: 100
globalDefault: true
---
kind: PriorityClass
apiVersion: scheduling.k8s.io/v1
metadata: {name: low}
value: 1
---
kind: Node
apiVersion: v1
metadata: {name: a, labels: {kubernetes.io/hostname: a}}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "1"}}
---
kind: Pod
apiVersion: v1
metadata: {name: sitting}
spec: {nodeName: a, priorityClassName: low, containers: [{name: c, image: x}]}
---
kind: Pod
apiVersion: v1
metadata: {name: empty}
spec:
"""
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    result = run_cli("--cluster", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    (pod,) = json.loads(result.stdout)["pods"]
    assert (pod["name"], pod["node"]) == ("empty", "a")
    assert pod["victims"] == ["default/sitting"]


def test_the_command_line_starts_without_the_libraries_of_other_commands() -> None:
    """Reading the command line imports what every command needs, not Kopf, numpy or the CEL library:
    `simulate --help` and every other command start without paying for them."""
    probe = (
        "import sys; from kopf_scheduler.__main__ import build_parser; build_parser(); "
        "print(sorted(m for m in ('kopf', 'numpy', 'celpy', 'kubernetes') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
