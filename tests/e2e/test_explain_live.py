"""``kopf-scheduler explain`` on a live cluster agrees with what the operator decided there: the node a
bound pod is on (and the filter verdicts that left it the only choice), the FailedScheduling message of
a pod that fits nowhere, word for word, and hand-computed hints for it; ``kubectl kopf-scheduler explain``
runs the same command as a kubectl plugin. Nothing is written: the API server's audit log shows no write
by the explaining process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from operator_harness import Operators, Scope, settled_audit

from kopf_scheduler.devcluster import find_bin_dir
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.simulate import live

pytestmark = pytest.mark.e2e

NODE_SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def explain(cp: ClusterHarness, *args: str) -> dict[str, Any]:
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
    done = subprocess.run(
        [sys.executable, "-m", "kopf_scheduler", "explain", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_explain_agrees_with_the_operator(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    [gold] = scope.nodes(1, "gold", labels={"tier": "gold"}, cpu="2", memory="8Gi", pods="110")
    plain = scope.nodes(2, "plain", cpu="2", memory="8Gi", pods="110")
    operator = operators.start("op-explain", lease_namespace=scope.namespace)
    operator.wait_leading()
    scope.create_pod("gold-pod", selector={**scope.label, "tier": "gold"})
    assert scope.wait_bound("gold-pod")["spec"]["nodeName"] == gold
    scope.create_pod("huge", requests={"cpu": "3", "memory": "100Mi"})
    failed = scope.wait_event("FailedScheduling", "huge")

    ns = scope.namespace
    bound = explain(control_plane, "gold-pod", "-n", ns)
    assert (bound["boundTo"], bound["node"]) == (gold, gold)
    for node in plain:
        assert bound["nodes"][node]["filter"] == {"plugin": "NodeAffinity", "reason": NODE_SELECTOR_MISMATCH}
    assert bound["nodes"][gold]["filter"] is None and bound["profile"] == "built-in default profile"

    pending = explain(control_plane, "pod/huge", "-n", ns)
    assert pending["boundTo"] is None and pending["node"] is None
    assert pending["message"] == failed["message"]
    # worked by hand: 3 CPUs asked; the plain nodes have 2 free, gold 2 - 0.1 (gold-pod's request)
    assert pending["hints"] == [
        f"needs 1 more cpu free on a node: closest nodes {plain[0]} (-1), {plain[1]} (-1), {gold} (-1100m)"
    ]

    plugin = Path(sys.executable).parent / "kubectl-kopf_scheduler"
    assert plugin.exists(), "the kubectl plugin is installed with the package"
    env = {
        **os.environ,
        "KUBECONFIG": str(control_plane.kubeconfig),
        "PATH": f"{plugin.parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        [str(find_bin_dir() / "kubectl"), "kopf-scheduler", "explain", "pod/huge", "-n", ns],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"unschedulable: {failed['message']}" in done.stdout
    assert "what would help:" in done.stdout and f"{plain[0]} (-1)," in done.stdout

    records = settled_audit(control_plane, ns)
    assert any(r.is_binding and r.namespace == ns for r in records), (
        "the audit log records this test's writes"
    )
    assert [r for r in records if r.user_agent.startswith(live.USER_AGENT)] == []


def simulate(*args: str, kubeconfig: Path) -> dict[str, Any]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        [sys.executable, "-m", "kopf_scheduler", "simulate", *args, "-o", "json", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_simulate_from_the_cluster_and_from_its_dump_agree(
    control_plane: ClusterHarness, scope: Scope, tmp_path: Path
) -> None:
    """No scheduler serves these pods in the cluster: the what-if places them under the cluster's own
    SchedulingProfile for their schedulerName. Worked by hand: node 0 has 400m free beside a bound
    1500m pod and a bound 100m one, node 1 has 2 CPUs: two of the three 1-CPU pods go to node 1, the
    third fits nowhere. Placed afresh, the 100m pod (the profile's, bound by hand to the busier node)
    would go to the emptier node 1; the 1500m pod is no pod of that profile's and stays."""
    first, second = scope.nodes(2, cpu="2", memory="8Gi", pods="110")
    what_if = scope.name("what-if")
    scope.create_profile(what_if, {"schedulerName": what_if})
    scope.create_pod("sitting", requests={"cpu": "1500m"}, nodeName=first)
    scope.create_pod("drifted", scheduler_name=what_if, requests={"cpu": "100m"}, nodeName=first)
    for i in range(3):
        scope.create_pod(f"new-{i}", scheduler_name=what_if, requests={"cpu": "1"})

    dump = tmp_path / "dump"
    live_run = simulate("--from-cluster", "--dump", str(dump), kubeconfig=control_plane.kubeconfig)
    ours = [p for p in live_run["pods"] if p["namespace"] == scope.namespace]
    assert sorted((p["name"], p["node"]) for p in ours) == [
        ("new-0", second),
        ("new-1", second),
        ("new-2", None),
    ]
    assert "Insufficient cpu" in ours[2]["message"]

    moved = [p for p in live_run["fresh"]["pods"] if p["namespace"] == scope.namespace]
    assert [(p["name"], p["today"], p["fresh"]) for p in moved] == [("drifted", first, second)]

    offline = simulate(
        "--cluster",
        str(dump / "cluster.yaml"),
        "--profile",
        str(dump / "profiles.yaml"),
        "--fresh",
        kubeconfig=Path("/nonexistent"),
    )
    for run in (offline, live_run):
        del run["summary"]["seconds"], run["summary"]["podsPerSecond"]  # the machine's, not the answer
    assert offline == live_run
