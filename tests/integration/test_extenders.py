"""Scheduler extenders through ``kopf-scheduler simulate``, as a user runs it: profiles whose extenders are
real HTTP servers on loopback started here: the example extender (``examples/extender``: filter,
prioritize, bind), an unreachable ignorable one, slow ones past their ``httpTimeout`` (skipped when
ignorable, failing the pod when not) and one that answers 500 (the pod fails with its error)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.api.profile import parse_profile, schema_errors
from kopf_scheduler.testing.extender_server import Answer, FakeExtender, unused_url

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "extender"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("example_extender", EXAMPLE / "extender.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example() -> Iterator[Any]:
    extender = load_example().ExampleExtender().start()
    try:
        yield extender
    finally:
        extender.stop()


def profile(path: Path, scheduler_name: str, *extenders: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": scheduler_name},
        "spec": {"schedulerName": scheduler_name, "extenders": list(extenders)},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str, scheduler_name: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


NODES = [
    node("node-1"),
    node("node-2", **{"example.com/extender": "allow", "example.com/extender-score": "3"}),
    node("node-3", **{"example.com/extender": "allow", "example.com/extender-score": "8"}),
    node("node-4", **{"example.com/extender": "never"}),
]


def simulate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pods: list[dict[str, Any]], *profiles: Path
) -> dict:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([*NODES, *pods]))
    args = ["simulate", "--cluster", str(cluster), "--seed", "1", "--output", "json", "--explain"]
    for p in profiles:
        args += ["--profile", str(p)]
    assert main(args) == 0
    return {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}


def test_example_extender_filters_prioritizes_and_binds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example: Any
) -> None:
    slow = FakeExtender({"filter": Answer({"NodeNames": []}, delay=5.0)})
    with slow:
        path = profile(
            tmp_path / "profile.yaml",
            "with-extenders",
            # ignorable ones are called last, whatever their place here
            {"urlPrefix": unused_url(), "filterVerb": "filter", "ignorable": True},
            {"urlPrefix": slow.url, "filterVerb": "filter", "httpTimeout": "200ms", "ignorable": True},
            {
                "urlPrefix": example.url + "/example",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 5,
                "bindVerb": "bind",
            },
        )
        pods = simulate(
            capsys, tmp_path, [pod("web", "with-extenders"), pod("too-big", "with-extenders", cpu="6")], path
        )
    web = pods["web"]
    assert web["node"] == "node-3"  # allowed, and the best score
    assert web["nodes"]["node-1"]["filter"] == {
        "plugin": "",
        "reason": "node(s) didn't have label example.com/extender=allow",
    }
    assert web["nodes"]["node-4"]["filter"]["reason"] == "node(s) had label example.com/extender=never"
    extender_scores = web["nodes"]["node-3"]["scores"][example.url + "/example"]
    assert extender_scores == {"raw": 8, "normalized": 80, "weighted": 400}  # 8 x weight 5 x 10
    assert pods["too-big"]["node"] is None
    assert pods["too-big"]["message"].startswith("0/4 nodes are available: 4 Insufficient cpu.")

    # what the example extender was asked, in order; too-big never reached it (no node passed the plugins)
    assert [(r["verb"], r["pod"], r["nodes"]) for r in example.requests] == [
        ("filter", "default/web", ["node-1", "node-2", "node-3", "node-4"]),
        ("prioritize", "default/web", ["node-2", "node-3"]),
        ("bind", "default/web", ["node-3"]),
    ]
    assert all(r["path"].startswith("/example/") for r in example.requests)
    # the slow ignorable extender was asked (after the example one) and skipped when it timed out
    assert slow.verbs_called() == ["filter"]
    assert [n["metadata"]["name"] for n in slow.requests[0][1]["Nodes"]["items"]] == ["node-2", "node-3"]


@pytest.mark.parametrize(
    ("answer", "timeout", "message"),
    [
        (Answer({}, status=500), "5s", "failed filter with extender at URL {url}/filter, code 500"),
        (
            Answer({"NodeNames": []}, delay=5.0),
            "100ms",
            'Post "{url}/filter": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
        ),
        (Answer({"Error": "the extender is out of order"}), "5s", "the extender is out of order"),
    ],
    ids=["http-500", "timeout", "error-answer"],
)
def test_a_failing_extender_fails_the_pod_with_its_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, answer: Answer, timeout: str, message: str
) -> None:
    with FakeExtender({"filter": answer}) as failing:
        path = profile(
            tmp_path / "profile.yaml",
            "strict",
            {"urlPrefix": failing.url, "filterVerb": "filter", "httpTimeout": timeout},
        )
        pods = simulate(capsys, tmp_path, [pod("p", "strict")], path)
    assert pods["p"]["node"] is None
    assert pods["p"]["message"] == message.format(url=failing.url)
    assert len(failing.requests) > 1  # an error is retried with backoff, not parked


def test_unreachable_non_ignorable_extender(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = unused_url()
    path = profile(tmp_path / "profile.yaml", "strict", {"urlPrefix": url, "filterVerb": "filter"})
    pods = simulate(capsys, tmp_path, [pod("p", "strict")], path)
    port = url.rsplit(":", 1)[1]
    assert (
        pods["p"]["message"] == f'Post "{url}/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )


def test_invalid_extender_configuration_names_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = profile(tmp_path / "profile.yaml", "bad", {"urlPrefix": "http://x", "prioritizeVerb": "p"})
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(NODES))
    assert main(["simulate", "--cluster", str(cluster), "--profile", str(path)]) != 0
    assert "spec.extenders[0].weight: must be > 0 when prioritizeVerb is set" in capsys.readouterr().err


def test_example_profile_is_valid() -> None:
    doc = yaml.safe_load((EXAMPLE / "profile.yaml").read_text())
    assert schema_errors(doc["spec"]) == []
    spec = parse_profile(doc)
    assert [e.url_prefix for e in spec.extenders] == ["http://127.0.0.1:8888/example"]
