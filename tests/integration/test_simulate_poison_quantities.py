"""`kopf-scheduler simulate` on a cluster holding quantities beyond int64 (``cpu: 1e30``, ``memory: 10Ei``,
2^63) in a bound pod's requests or a node's allocatable: the other pods are still scheduled, and the
poison ones get what kube-scheduler v1.34 gives them, with no traceback. Before, the node table raised
OverflowError on such a pod or node and simulate printed a traceback.

What kube-scheduler makes of them (``Quantity.MilliValue``/``Value``, see ``api/quantity.py``): a request
of ``cpu: 1e30`` is 0 millicores, so such a pod fits any node; ``memory: 10Ei`` is 2^63-1 bytes, more than
a node has unless its allocatable is ``10Ei`` too (also 2^63-1) and it holds no memory request yet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from simulate_runner import run_cli

from kopf_scheduler.testing import make_node, make_pod

GPU = "example.com/gpu"


def write(tmp_path: Path, *objects: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _outcomes(result: Any) -> list[tuple[str, str | None, str | None]]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return [(p["name"], p["node"], p["message"]) for p in json.loads(result.stdout)["pods"]]


def _canary() -> dict[str, Any]:
    return make_pod().name("canary").req(cpu="100m", memory="64Mi").obj()


def _node(name: str) -> dict[str, Any]:
    return make_node().name(name).capacity(cpu="4", memory="8Gi", pods=110).obj()


@pytest.mark.parametrize(
    ("poison", "canary_on"),
    [
        # bound to n1: n2 is empty (and n1 has no room left for 2^63-1 or -2^63 bytes, as upstream sees it)
        (make_pod().name("bound").node("n1").req(cpu="1e30"), "n2"),
        (make_pod().name("bound").node("n1").req(memory="10Ei"), "n2"),
        (make_pod().name("bound").node("n1").req(memory="9223372036854775808"), "n2"),
        (make_pod().name("bound").node("n1").req(**{"ephemeral-storage": "1e30", GPU: "1e30"}), "n2"),
        # the node n2: 2^63-1 bytes score worse than 8Gi (the int64 products wrap), 0 CPUs, room for 0 pods
        (make_node().name("n2").capacity(cpu="4", memory="10Ei", pods=110), "n1"),
        (make_node().name("n2").capacity(cpu="1e30", memory="8Gi", pods=110), "n1"),
        (
            make_node()
            .name("n2")
            .capacity(cpu="4", memory="8Gi", pods="1e30", **{GPU: "9223372036854775807"}),
            "n1",
        ),
    ],
    ids=[
        "bound-cpu-1e30",
        "bound-memory-10Ei",
        "bound-memory-2^63",
        "bound-storage-and-gpu-1e30",
        "node-memory-10Ei",
        "node-cpu-1e30",
        "node-pods-1e30-gpu-2^63-1",
    ],
)
def test_a_poison_quantity_leaves_the_canary_scheduled(tmp_path: Path, poison: Any, canary_on: str) -> None:
    objects = [_node("n1"), poison.obj(), _canary()]
    if poison.obj()["kind"] == "Pod":
        objects.insert(1, _node("n2"))
    result = run_cli("--cluster", str(write(tmp_path, *objects)), "-o", "json")
    assert _outcomes(result) == [("canary", canary_on, None)]


def test_poison_pods_get_kube_schedulers_outcome(tmp_path: Path) -> None:
    """The cluster of ``tests/e2e/test_operator_poison_quantities.py``, whose outcomes kube-scheduler v1.34
    gave: ``huge-cpu`` (``cpu: 1e30``, 0 millicores) fits and goes where the canary goes, ``huge-memory``
    (2^63-1 bytes) fits neither the 8Gi node nor the 10Ei one, where 1Gi is already requested; only on the
    latter could preemption help, and the bound pod there has no lower priority."""
    objects = [
        make_node().name("normal-0").capacity(cpu="4", memory="8Gi", pods=110).obj(),
        make_node().name("huge-1").capacity(cpu="4", memory="10Ei", pods=110).obj(),
        make_pod().name("bound-poison").node("huge-1").req(cpu="1e30", memory="1Gi").obj(),
        make_pod().name("huge-memory").req(memory="10Ei").obj(),
        make_pod().name("huge-cpu").req(cpu="1e30").obj(),
        _canary(),
    ]
    result = run_cli("--cluster", str(write(tmp_path, *objects)), "-o", "json")
    assert _outcomes(result) == [
        (
            "huge-memory",
            None,
            "0/2 nodes are available: 2 Insufficient memory. preemption: 0/2 "
            "nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not "
            "helpful for scheduling.",
        ),
        ("huge-cpu", "normal-0", None),
        ("canary", "normal-0", None),
    ]


@pytest.mark.parametrize(
    ("quantity", "shown"),
    [("-1e999999999", "-1e999999999"), ("-" + "9" * 5000, "-" + "9" * 5000)],
    ids=["exponent-999999999", "5000-digits"],
)
def test_oversized_negative_request_is_refused_in_one_line(tmp_path: Path, quantity: str, shown: str) -> None:
    """As the API server refuses it, at once: the exact value is never computed (10^999999999 would take
    minutes) and ``int()``'s 4300-digit limit does not apply."""
    path = write(tmp_path, _node("n1"), make_pod().name("p").req(cpu=quantity).obj())
    result = run_cli("--cluster", str(path), timeout=30)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().endswith(
        f'{path}: Pod default/p: spec.containers[0].resources.requests[cpu]: Invalid value: "{shown}": '
        "must be greater than or equal to 0"
    )
