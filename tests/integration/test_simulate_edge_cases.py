"""`kopf-scheduler simulate` on input kube-scheduler and the API server treat specially: a negative
resource quantity (refused with the API server's message), a cluster without nodes (kube-scheduler's
``no nodes available to schedule pods``), and pods resized in place (their resize status counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from simulate_runner import run_cli

from kopf_scheduler.testing import make_node, make_pod


def write(tmp_path: Path, *objects: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


@pytest.mark.parametrize(
    ("pod", "field", "shown"),
    [
        (make_pod().name("p").req(cpu="-1"), "spec.containers[0].resources.requests[cpu]", "-1"),
        (
            make_pod().name("p").limits(memory="-0.5Gi"),
            "spec.containers[0].resources.limits[memory]",
            "-512Mi",
        ),
        (
            make_pod().name("p").init_container(cpu="-250m"),
            "spec.initContainers[0].resources.requests[cpu]",
            "-250m",
        ),
    ],
    ids=["request", "limit", "init-container"],
)
def test_negative_quantity_is_refused_in_one_line(tmp_path: Path, pod: Any, field: str, shown: str) -> None:
    path = write(tmp_path, make_node().name("n1").obj(), pod.obj())
    result = run_cli("--cluster", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        f'{path}: Pod default/p: {field}: Invalid value: "{shown}": must be greater than or equal to 0'
    )
    assert result.stdout == ""


def test_no_nodes_gives_kube_schedulers_message(tmp_path: Path) -> None:
    path = write(tmp_path, make_pod().name("p").req(cpu="100m").obj(), make_pod().name("q").obj())
    result = run_cli("--cluster", str(path), "--output", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(p["name"], p["node"], p["message"]) for p in doc["pods"]] == [
        ("p", None, "no nodes available to schedule pods"),
        ("q", None, "no nodes available to schedule pods"),
    ]
    assert doc["summary"]["nodes"] == 0
    # no post-filter (preemption) ran, so nothing was reported on each retry
    assert result.stderr == ""


def test_resized_pod_holds_what_its_status_says(tmp_path: Path) -> None:
    """A running pod resized down from 3 to 1 CPU in its spec but still running with 3 (the kubelet has
    not actuated it) leaves 1 CPU of 4: the pending 2-CPU pod does not fit. Once actuated, it does."""
    node = make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()

    def running(actual: str) -> dict[str, Any]:
        return (
            make_pod()
            .name("resized")
            .node("n1")
            .req(cpu="1", memory="1Gi")
            .container_status("c", {"cpu": actual, "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
            .obj()
        )

    pending = make_pod().name("new").req(cpu="2").obj()
    doc = json.loads(
        run_cli("--cluster", str(write(tmp_path, node, running("3"), pending)), "-o", "json").stdout
    )
    assert doc["pods"] == [
        {
            "namespace": "default",
            "name": "new",
            "node": None,
            "message": "0/1 nodes are available: 1 Insufficient cpu. "
            "preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod.",
        }
    ]
    doc = json.loads(
        run_cli("--cluster", str(write(tmp_path, node, running("1"), pending)), "-o", "json").stdout
    )
    assert doc["pods"][0]["node"] == "n1"


ALIAS_BOMB = """\
apiVersion: v1
kind: Pod
metadata:
  name: bomb
  labels:
    a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
spec:
  containers: [{name: c, image: i}]
"""


def test_a_yaml_alias_bomb_is_refused_in_one_line(tmp_path: Path) -> None:
    """A few lines of anchors that expand to ten billion values: refused before anything reads them."""
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    result = run_cli("--cluster", str(path), timeout=30)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == (
        f"kopf-scheduler simulate: error: {path}: document 1: invalid YAML: excessive aliasing "
        "(more than 1,000,000 values once its aliases are expanded)"
    )


def test_shared_anchors_that_stay_small_are_read(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: &zone {zone: a}},
   status: {allocatable: &room {cpu: "4", memory: 8Gi, pods: "10"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: *zone}, status: {allocatable: *room}}
- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}
"""
    )
    result = run_cli("--cluster", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pods"][0]["node"] in ("n1", "n2")


def test_an_api_version_the_api_server_does_not_serve_is_refused(tmp_path: Path) -> None:
    pod = {**make_pod().name("p").obj(), "apiVersion": "v99"}
    path = write(tmp_path, make_node().name("n1").obj(), pod)
    result = run_cli("--cluster", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        f"{path}: Pod: apiVersion: 'v99' is not served for Pod (expected 'v1')"
    )
