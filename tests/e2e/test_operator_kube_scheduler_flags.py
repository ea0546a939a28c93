"""``kopf-scheduler run`` started with the flags of a kube-scheduler manifest, against the real control
plane: ``--kubeconfig`` wins over a ``KUBECONFIG`` that points nowhere (in both processes: the watches
and the bindings), a bare ``--leader-elect`` with ``--leader-elect-resource-name`` and Go-duration
timings takes that Lease with those timings, and pods bind. With ``--config`` (a KubeSchedulerConfiguration)
the file's profiles serve its schedulerNames, its ``clientConnection.kubeconfig`` is the one used (the
``--kubeconfig`` flag is ignored, as kube-scheduler ignores it), ``--leader-elect-resource-name`` wins over
its ``leaderElection.resourceName`` while its ``leaseDuration`` holds, and a SchedulingProfile for one of
its names takes over until it is deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from operator_harness import PROFILES, Operators, Scope, pod_outcome, wait_profile, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e


def test_kube_scheduler_flags_configure_the_operator(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(2)
    lease_name = scope.name("flags-lease")
    operator = operators.start(
        "op-flags",
        lease_namespace=scope.namespace,
        env={"KUBECONFIG": "/nonexistent/kubeconfig"},
        args=[
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--leader-elect",
            f"--leader-elect-resource-name={lease_name}",
            "--leader-elect-lease-duration=20s",
            "--leader-elect-renew-deadline=12s",
            "--leader-elect-retry-period=1s",
            "--v=2",
        ],
    )
    operator.wait_leading()
    for name in ("flags-0", "flags-1"):
        scope.create_pod(name)
    for name in ("flags-0", "flags-1"):
        assert scope.wait_bound(name)["spec"]["nodeName"] in nodes
        scope.wait_event("Scheduled", name)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{scope.namespace}/leases/{lease_name}"
    held = control_plane.api.request("GET", path).json()
    assert held["spec"]["holderIdentity"] == "op-flags"
    assert held["spec"]["leaseDurationSeconds"] == 20
    assert operator.terminate() == 0, operator.tail()
    assert operator.problems() == []


def test_json_logs_are_one_object_per_line_from_both_processes(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(1)
    operator = operators.start("op-json", lease_namespace=scope.namespace, args=["--logging-format=json"])
    operator.wait_for_log('"msg": "leading as op-json:')
    scope.wait_bound(scope.create_pod("json-0")["metadata"]["name"])
    assert operator.terminate() == 0, operator.tail()
    lines = [line for line in operator.log().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line: a JSON object
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records), lines[:5]
    loggers = {r["logger"] for r in records}
    assert "kopf_scheduler.handlers.intake" in loggers or any(n.startswith("kopf.") for n in loggers), loggers
    assert any(n.startswith("kopf_scheduler") for n in loggers), loggers
    assert not [r for r in records if r["level"] in ("error", "critical")]


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
  leaseDuration: 20s
  resourceName: not-this-lease
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 50
profiles:
- schedulerName: {plain}
- schedulerName: {unfit}
  plugins:
    filter:
      disabled:
      - name: NodeResourcesFit
"""


def test_a_kube_scheduler_configuration_file_with_kube_scheduler_flags(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    nodes = scope.nodes(2)  # 4 CPUs each
    plain, unfit = scope.name("file-plain"), scope.name("file-unfit")
    lease_name = scope.name("config-lease")
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(CONFIG.format(kubeconfig=control_plane.kubeconfig, plain=plain, unfit=unfit))
    operator = operators.start(
        "op-config",
        lease_namespace=scope.namespace,
        env={"KUBECONFIG": "/nonexistent/kubeconfig"},  # only the file's clientConnection reaches the cluster
        args=[
            "--config",
            str(config),
            "--kubeconfig",
            "/nonexistent/flag-kubeconfig",
            "--leader-elect=true",
            "--leader-elect-resource-name",
            lease_name,
        ],
    )
    operator.wait_leading()
    log = operator.log()
    assert "warning: --kubeconfig is ignored with --config" in log
    assert f"warning: {config}: clientConnection.qps: ignored" in log
    path = f"/apis/coordination.k8s.io/v1/namespaces/{scope.namespace}/leases/{lease_name}"
    held = control_plane.api.request("GET", path).json()
    assert held["spec"]["holderIdentity"] == "op-config"
    assert held["spec"]["leaseDurationSeconds"] == 20  # the file's, the flag naming the Lease beside it

    # the file's profiles: one with kube-scheduler's defaults, one that does not check the nodes' room
    scope.create_pod("plain-0", plain)
    scope.create_pod("big-0", unfit, requests={"cpu": "100", "memory": "100Mi"})
    for name in ("plain-0", "big-0"):
        assert scope.wait_bound(name)["spec"]["nodeName"] in nodes

    # a SchedulingProfile for the same name (kube-scheduler's defaults) takes over while it exists
    live = scope.name("live-unfit")
    scope.create_profile(live, {"schedulerName": unfit})
    accepted = wait_profile(control_plane, live, "True")
    message = next(c for c in accepted["status"]["conditions"] if c["type"] == "Accepted")["message"]
    assert message == f"serving schedulerName {unfit!r} in place of the --config file's profile"
    scope.create_pod("big-1", unfit, requests={"cpu": "100", "memory": "100Mi"})
    outcome = wait_until(
        lambda: pod_outcome(control_plane, scope.namespace, "big-1"), 20, "big-1 bound or unschedulable"
    )
    assert outcome.startswith("unschedulable: 0/") and "Insufficient cpu" in outcome, outcome

    # deleted: the file's profile serves the name again, and retries the pod the live one could not place
    control_plane.delete(f"{PROFILES}/{live}")
    assert scope.wait_bound("big-1", timeout=30)["spec"]["nodeName"] in nodes
    assert operator.log().count(f"serving schedulerName {unfit!r} (<config file>)") == 2
    assert operator.terminate() == 0, operator.tail()
    assert operator.problems() == []
