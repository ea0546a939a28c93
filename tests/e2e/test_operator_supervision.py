"""Supervision as a user meets it: an operator whose metrics port is taken by another process ends at
start with exit code 1 and one line naming the port (it used to run on, retrying its start-up every 60 s
and scheduling nothing); and a leader whose Lease is taken from under it (its renewals refused) exits
with code 1, as kube-scheduler does, instead of standing by with writes in flight."""

from __future__ import annotations

import socket

import pytest
from operator_harness import LEASES, Operators, Scope, holder, lease

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e


def test_a_taken_metrics_port_ends_the_operator_at_start(operators: Operators, scope: Scope) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        operator = operators.start(
            "op-port-taken", lease_namespace=scope.namespace, args=["--metrics-port", str(port)]
        )
        code = operator.popen.wait(timeout=60)
    lines = [line for line in operator.log().splitlines() if f"metrics port {port} is in use" in line]
    assert code == 1, operator.tail()
    assert len(lines) == 1, operator.tail()
    assert "[Errno 98]" in lines[0] and "does not start" in lines[0]
    assert "leading as" not in operator.log()


def test_a_leader_whose_lease_is_taken_exits_non_zero(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    ns = scope.namespace
    operator = operators.start("op-fenced", lease_namespace=ns)
    operator.wait_leading()
    taken = lease(control_plane, ns)
    taken["spec"] = {**taken["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 60}
    control_plane.request("PUT", f"{LEASES.format(namespace=ns)}/kopf-scheduler", taken)

    code = operator.popen.wait(timeout=30)
    assert code == 1, operator.tail()
    assert f"leader election: lost the lease as {operator.identity}" in operator.log()
    assert holder(control_plane, ns) == "intruder"  # a lost lease is not released
