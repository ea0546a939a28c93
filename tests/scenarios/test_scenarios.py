"""Scenario files (cluster objects + expected placements and FailedScheduling messages) run through
`kopf-scheduler simulate`. The same files feed the differential test against the real kube-scheduler
(tests/e2e/test_differential_scenarios.py), so every expectation here is what kube-scheduler does too.

File format (``tests/scenarios/*.yaml``)::

    description: what the scenario shows
    profile: {...}            # optional SchedulingProfile spec; default: the built-in default profile
    objects: [Node..., Pod..., PriorityClass..., PodDisruptionBudget...]  # pods with spec.nodeName are
                                                                          # existing load
    # also Namespace (labels for namespaceSelector), Service, ReplicaSet, StatefulSet and
    # ReplicationController (PodTopologySpread's default selector), the storage kinds, DeviceClass,
    # ResourceSlice and ResourceClaim (pods name claims by resourceClaimName; a claim held by bound pods
    # has its status.allocation and reservedFor): valid API objects, since the differential test creates
    # them; a pod's ownerReferences may leave out the uid
    expect:
      <namespace>/<pod>: {node: n1}            # the only best node
      <namespace>/<pod>: {nodes: [n1, n2]}     # tied best nodes: any of them
      <namespace>/<pod>: {message: "0/2 nodes are available: ..."}
      <namespace>/<pod>: {node: n1, victims: [ns/a, ns/b]}  # preempted exactly these pods (any order)
      <namespace>/<pod>: {nominatedNode: n1}   # nominated there by preemption
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main

SCENARIOS = sorted(Path(__file__).parent.glob("*.yaml"))


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def simulate(scenario: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> dict:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(scenario["objects"]))
    args = ["simulate", "--cluster", str(cluster), "--output", "json", "--seed", str(seed)]
    if scenario.get("profile"):
        profile = tmp_path / "profile.yaml"
        profile.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kopf-scheduler.io/v1alpha1",
                    "kind": "SchedulingProfile",
                    "spec": scenario["profile"],
                }
            )
        )
        args += ["--profile", str(profile)]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    return {f"{p['namespace']}/{p['name']}": p for p in doc["pods"]}


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 4


EXPECTATIONS = {"node", "nodes", "message", "victims", "nominatedNode"}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_expectation_checks_something(path: Path) -> None:
    """A misspelt key (``mesage:``) would otherwise be an expectation that holds whatever happens."""
    expect = load(path)["expect"]
    assert expect, f"{path.name} expects nothing"
    for key, expected in expect.items():
        assert expected and set(expected) <= EXPECTATIONS, f"{path.name}: {key}: {expected}"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load(path)
    for seed in (1, 2, 3):
        pods = simulate(scenario, tmp_path, capsys, seed)
        for key, expected in scenario["expect"].items():
            assert key in pods, f"{path.name}: no pod {key} in the output"
            got = pods[key]
            if "node" in expected:
                assert got["node"] == expected["node"], f"{key}: {got['message']}"
            if "nodes" in expected:
                assert got["node"] in expected["nodes"], f"{key}: {got['message']}"
            if "message" in expected:
                assert got["node"] is None
                assert got["message"] == expected["message"]
            if "victims" in expected:
                assert sorted(got.get("victims", [])) == sorted(expected["victims"]), f"{key}: {got}"
            if "nominatedNode" in expected:
                assert got.get("nominatedNode") == expected["nominatedNode"], f"{key}: {got}"
