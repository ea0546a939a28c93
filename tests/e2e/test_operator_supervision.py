"""Supervision as a user meets it: an operator whose metrics port is taken by another process ends at
start with exit code 1 and one line naming the port (it used to run on, retrying its start-up every 60 s
and scheduling nothing); a leader whose Lease is taken from under it (its renewals refused) exits
with code 1, as kube-scheduler does, instead of standing by with writes in flight; a leader whose watch
intake process dies exits with code 1; and the intake process does not outlive its operator."""

from __future__ import annotations

import os
import re
import signal
import socket
from pathlib import Path

import pytest
from operator_harness import LEASES, OperatorProcess, Operators, Scope, holder, lease, wait_until

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


def _intake_pid(operator: OperatorProcess) -> int:
    operator.wait_for_log("watch intake: process ")
    match = re.search(r"watch intake: process (\d+)", operator.log())
    assert match, operator.tail()
    return int(match.group(1))


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_a_leader_whose_watch_intake_dies_exits_non_zero(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    """Nothing would reach its cache any more: it stops, with one line naming the intake process, and
    hands the Lease back on its way out, as on any stop it makes itself."""
    ns = scope.namespace
    operator = operators.start("op-intake-killed", lease_namespace=ns)
    operator.wait_leading()
    intake = _intake_pid(operator)
    os.kill(intake, signal.SIGKILL)

    code = operator.popen.wait(timeout=30)
    assert code == 1, operator.tail()
    lines = [line for line in operator.log().splitlines() if "the watch intake process" in line]
    assert len(lines) == 1 and f"(pid {intake}) exited with code -9" in lines[0], operator.tail()
    assert holder(control_plane, ns) == ""


def test_the_watch_intake_ends_with_its_operator(operators: Operators, scope: Scope) -> None:
    """SIGKILL to the operator alone (its process group is spared): the kernel ends its intake process
    too, so no process watches on for a scheduler that is gone."""
    operator = operators.start("op-killed", lease_namespace=scope.namespace)
    operator.wait_leading()
    intake = _intake_pid(operator)
    assert _running(intake)
    os.kill(operator.popen.pid, signal.SIGKILL)
    operator.popen.wait(timeout=10)
    wait_until(lambda: not _running(intake), 10, f"intake process {intake} gone")
