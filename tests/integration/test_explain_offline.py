"""``kopf-scheduler explain`` without a cluster: the report built from objects as the live reader gives
them (hints computed by hand), and the one-line errors of a pod that does not exist, a malformed POD
argument and an API server that does not answer."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from simulate_runner import run_cli

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.cli.explain import explain_pod
from kopf_scheduler.testing import make_node, make_pod


def _objects(*objs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("test", obj) for obj in objs]


def _node(name: str, **taint: str) -> dict[str, Any]:
    builder = make_node().name(name).capacity(cpu="2", memory="4Gi", pods=10)
    if taint:
        builder = builder.taint(taint["key"], taint["value"], taint["effect"])
    return {"apiVersion": "v1", "kind": "Node", **builder.obj()}


def _pod(builder: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", **builder.obj()}


def test_taints_that_keep_a_pod_off_are_named_with_how_many_nodes() -> None:
    objects = _objects(
        _node("a", key="gpu", value="true", effect="NoSchedule"),
        _node("b", key="gpu", value="true", effect="NoSchedule"),
        _node("c", key="maintenance", value="", effect="NoExecute"),
        _pod(make_pod().name("p").uid("u1").req(cpu="100m")),
    )
    report = explain_pod(objects, "default", "p", None)
    assert report["node"] is None and report["boundTo"] is None
    assert report["hints"] == [
        "tolerate taint gpu=true:NoSchedule: 2 nodes",
        "tolerate taint maintenance=:NoExecute: 1 node",
    ]
    assert {n: v["filter"]["plugin"] for n, v in report["nodes"].items()} == {
        "a": "TaintToleration",
        "b": "TaintToleration",
        "c": "TaintToleration",
    }


def test_a_bound_pod_is_placed_afresh_without_its_own_room() -> None:
    """One node with room for exactly one such pod: the bound pod would go there again (its own request
    does not count against it), a second pod of the same size would not fit."""
    objects = _objects(
        _node("a"),
        _pod(make_pod().name("bound").uid("u1").req(cpu="1500m").node("a")),
        _pod(make_pod().name("second").uid("u2").req(cpu="1500m")),
    )
    assert explain_pod(objects, "default", "bound", None)["node"] == "a"
    second = explain_pod(objects, "default", "second", None)
    assert second["node"] is None
    assert second["hints"] == ["needs 1 more cpu free on a node: closest nodes a (-1)"]


def test_a_profile_file_serves_the_pod_under_its_scheduler_name(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kopf-scheduler.io/v1alpha1",
                "kind": "SchedulingProfile",
                "metadata": {"name": "packer"},
                "spec": {"schedulerName": "packer"},
            }
        )
    )
    objects = _objects(_node("a"), _pod(make_pod().name("p").uid("u1")))
    report = explain_pod(objects, "default", "p", profile)
    assert (report["schedulerName"], report["node"]) == ("packer", "a")
    assert report["profile"].startswith(str(profile))


def test_a_pod_that_does_not_exist_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^pod ns/nope not found$"):
        explain_pod(_objects(_node("a")), "ns", "nope", None)


def _cli(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--kubeconfig", str(kubeconfig), command="explain")


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    bad = _cli("deployment/web", kubeconfig=kubeconfig)
    assert (bad.returncode, bad.stderr) == (
        2,
        "kopf-scheduler explain: error: POD: expected NAME or pod/NAME, not 'deployment/web'\n",
    )
    down = _cli("pod/web", kubeconfig=kubeconfig)
    assert down.returncode == 2 and down.stderr.count("\n") == 1, down.stderr
    assert down.stderr.startswith(
        "kopf-scheduler explain: error: cannot read the cluster at http://127.0.0.1:1:"
    )
