"""`kopf-scheduler profiles import` of a multi-profile KubeSchedulerConfiguration, applied to a cluster
served by the operator, places pods exactly as kube-scheduler started with that same configuration.

Each scheduler gets a fresh cluster of its own (``fresh_cluster``) with the same three nodes, one after
the other. The configuration has two profiles: ``profile-a`` with kube-scheduler's defaults, and
``profile-b`` bin-packing (NodeResourcesFit's MostAllocated at weight 5, NodeResourcesBalancedAllocation
disabled, TaintToleration at weight 1). The smallest node carries a PreferNoSchedule taint. Pods of the
two profiles alternate, each created once the previous one is bound, then one pod of each profile fits
on no node; the pod -> node maps and the unschedulable pods' PodScheduled messages must be equal.

By hand, with upstream's formulas (1 CPU and 1 GiB per pod; ``n-0``, ``n-1``, ``n-2`` have 4, 6 and 16
CPUs and 2 GiB per CPU): every ``profile-a`` pod goes to ``n-2`` (the first one: LeastAllocated plus
BalancedAllocation plus 3 x TaintToleration make 492 there, 482 on ``n-1``, 174 on ``n-0``), every
``profile-b`` pod to ``n-1`` (the first one: 5 x MostAllocated plus TaintToleration make 5 x 12 + 100 = 160
there, 5 x 9 + 100 = 145 on ``n-2``, 5 x 18 + 0 = 90 on the tainted ``n-0``). The best node leads by at
least 10 points for every pod of the sequence, so kube-scheduler's choice is unique, and the two profiles
are seen to differ.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import (
    condition,
    fresh_cluster,
    kubectl,
    sized_nodes,
    wait_profile,
    wait_until,
)
from side_by_side import SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: profile-a
- schedulerName: profile-b
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      enabled:
      - name: NodeResourcesFit
        weight: 5
      - name: TaintToleration
        weight: 1
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
"""
NODES = {"n-0": (None, "4", "8Gi"), "n-1": (None, "6", "12Gi"), "n-2": (None, "16", "32Gi")}
NS = "imported"
#: (pod, profile, CPUs), created in this order: eight that fit, then one per profile that fits nowhere
PODS = [(f"p{i}", "profile-a" if i % 2 == 0 else "profile-b", "1") for i in range(8)] + [
    ("big-a", "profile-a", "20"),
    ("big-b", "profile-b", "20"),
]
TIMEOUT = 60.0


def nodes() -> list[dict[str, Any]]:
    bodies = sized_nodes(NODES)
    bodies[0].setdefault("spec", {})["taints"] = [
        {"key": "spare", "value": "true", "effect": "PreferNoSchedule"}
    ]
    return bodies


def place_pods(cp: ClusterHarness) -> dict[str, str]:
    """Creates ``PODS`` one at a time, each once the previous one has its outcome: pod -> its node, or
    the message of its PodScheduled=False condition."""
    outcomes: dict[str, str] = {}
    for name, profile, cpu in PODS:
        body = pod_manifest(name, NS, requests={"cpu": cpu, "memory": "1Gi"}, schedulerName=profile)
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
        path = f"/api/v1/namespaces/{NS}/pods/{name}"

        def outcome(path: str = path) -> str:
            pod = cp.get(path)
            scheduled = condition(pod, "PodScheduled")
            if scheduled.get("status") == "False" and scheduled.get("message"):
                return f"unschedulable: {scheduled['message']}"
            return str(pod["spec"].get("nodeName") or "")

        outcomes[name] = wait_until(outcome, TIMEOUT, f"pod {name} bound or unschedulable")
    return outcomes


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("import") / "kube-scheduler.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def imported(config_file: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "kopf_scheduler", "profiles", "import", str(config_file)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def apply_imported(cp: ClusterHarness, request: pytest.FixtureRequest) -> None:
    """What a user does with the import's output: apply it, and wait until both profiles serve."""
    imported: subprocess.CompletedProcess[str] = request.getfixturevalue("imported")
    assert imported.returncode == 0, imported.stderr
    kubectl(cp, "apply", "-f", "-", input=imported.stdout)
    for name in ("profile-a", "profile-b"):
        wait_profile(cp, name, "True", timeout=30.0)


#: kube-scheduler started with ``CONFIG``, then on an identical fresh cluster ``kopf-scheduler run`` (with
#: no scheduler name of its own) serving the profiles the import made of it (the fixtures
#: ``kube_scheduler`` and ``kopf_scheduler``)
SIDE_BY_SIDE = SideBySide(
    "import",
    lambda state_dir: fresh_cluster(state_dir, nodes(), namespaces=[NS]),
    lambda cp, _: place_pods(cp),
    kube_config={"profiles": yaml.safe_load(CONFIG)["profiles"]},
    kopf_args=(),
    kopf_setup=apply_imported,
)


def test_import_warns_of_the_leader_election_it_cannot_carry(
    imported: subprocess.CompletedProcess[str],
) -> None:
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr.splitlines() == [
        "kopf-scheduler profiles import: warning: leaderElection.leaderElect: no SchedulingProfile "
        "equivalent (see `kopf-scheduler run --leader-elect/--lease-namespace/--lease-name`)"
    ]
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(imported.stdout)]
    assert names == ["profile-a", "profile-b"]


def test_imported_profiles_place_pods_as_kube_scheduler_with_the_same_configuration(
    kube_scheduler: dict[str, str], kopf_scheduler: dict[str, str]
) -> None:
    assert kopf_scheduler == kube_scheduler, (
        f"kube-scheduler: {kube_scheduler}\nkopf-scheduler: {kopf_scheduler}"
    )
    # the hand arithmetic of the module docstring: the two profiles differ, as configured
    by_profile = {
        p: {kube_scheduler[name] for name, q, cpu in PODS if q == p and cpu == "1"} for _, p, _ in PODS
    }
    assert by_profile == {"profile-a": {"n-2"}, "profile-b": {"n-1"}}, kube_scheduler
    for name in ("big-a", "big-b"):
        assert kube_scheduler[name].startswith(
            "unschedulable: 0/3 nodes are available: 3 Insufficient cpu."
        ), kube_scheduler
