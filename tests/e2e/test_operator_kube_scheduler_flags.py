"""``kopf-scheduler run`` started with the flags of a kube-scheduler manifest, against the real control
plane: ``--kubeconfig`` wins over a ``KUBECONFIG`` that points nowhere (in both processes: the watches
and the bindings), a bare ``--leader-elect`` with ``--leader-elect-resource-name`` and Go-duration
timings takes that Lease with those timings, and pods bind."""

from __future__ import annotations

import json

import pytest
from operator_harness import Operators, Scope

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
