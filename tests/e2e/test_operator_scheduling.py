"""The operator, run as ``kopf-scheduler run`` against the real control plane, schedules pods the way
kube-scheduler does, as a user sees it with kubectl: pods bound with ``PodScheduled=True`` and a
``Scheduled`` event; a pod that fits nowhere has kube-scheduler's ``FailedScheduling`` message in its
event and its ``PodScheduled=False`` condition; a node added makes a pending pod schedulable at once.
Also what a Deployment relies on: the liveness and metrics endpoints answer, and SIGTERM stops the
operator cleanly, handing the lease back; and ``--leader-elect false`` schedules without a Lease."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from operator_harness import Operators, Scope, condition, lease, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def http_get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read().decode()


def test_pods_are_bound_with_scheduled_events(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(2)
    operator = operators.start("op", lease_namespace=scope.namespace, ports=True)
    operator.wait_leading()
    names = [f"web-{i}" for i in range(3)]
    for name in names:
        scope.create_pod(name)

    for name in names:
        pod = scope.wait_bound(name)
        assert pod["spec"]["nodeName"] in nodes, dumps(pod)
        scheduled = condition(pod, "PodScheduled")
        assert scheduled["status"] == "True", dumps(pod["status"])
        event = scope.wait_event("Scheduled", name)
        node = pod["spec"]["nodeName"]
        assert event["type"] == "Normal", dumps(event)
        assert event["message"] == f"Successfully assigned {scope.namespace}/{name} to {node}", dumps(event)
        assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
        reporter = (event["reportingComponent"], event["reportingInstance"])
        assert reporter == ("kopf-scheduler", "op"), dumps(event)  # instance: POD_NAME
    assert len(scope.events("Scheduled")) == len(names)
    assert not scope.events("FailedScheduling")

    # what the Deployment's probes and Prometheus read
    status, body = http_get(f"http://127.0.0.1:{operator.liveness_port}/healthz")
    health = json.loads(body)["scheduler"]
    assert status == 200 and health["synced"] and health["leading"], body
    assert health["profiles"].get("kopf-scheduler") == "<built-in>", body
    status, metrics = http_get(f"http://127.0.0.1:{operator.metrics_port}/metrics")
    attempts = [
        line
        for line in metrics.splitlines()
        if line.startswith("scheduler_schedule_attempts_total{")
        and 'result="scheduled"' in line
        and 'profile="kopf-scheduler"' in line
    ]
    assert status == 200 and attempts and float(attempts[0].rsplit(" ", 1)[1]) == len(names), attempts

    # SIGTERM (a rolling update): a clean exit that hands the lease back for a successor to take at once
    started = time.monotonic()
    assert operator.terminate() == 0, operator.tail()
    assert time.monotonic() - started < 10
    spec = lease(control_plane, scope.namespace)["spec"]
    assert spec["holderIdentity"] == "", dumps(spec)
    log = operator.log()
    assert "released lease" in log and "lost the lease" not in log, operator.tail()
    assert not operator.problems(), operator.problems()


def fit_error(total: int, reasons: dict[str, int]) -> str:
    """kube-scheduler's ``FitError`` text: ``<count> <reason>`` per reason, sorted as strings."""
    counted = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
    return f"0/{total} nodes are available: {', '.join(counted)}."


def test_unschedulable_pod_gets_kube_schedulers_message(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    # Node "busy" (4 cpu) holds a 3-cpu pod of the same priority: 2 cpu do not fit, and preempting
    # cannot help (no lower-priority victim). Node "small" has 1 cpu in all: 2 cpu never fit there.
    [busy] = scope.nodes(1, "busy")
    scope.nodes(1, "small", cpu="1", memory="32Gi", pods="110")
    scope.create_pod("load", requests={"cpu": "3"}, nodeName=busy)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    # Every node in the cluster counts, other tests' nodes too. The pod tolerates every taint, so those
    # (cordoned or tainted or not) fail on its node selector alone.
    total = len(scope.all_node_names())
    foreign = total - 2
    scope.create_pod("big", requests={"cpu": "2"}, tolerations=[{"operator": "Exists"}])

    filtered = fit_error(total, {"Insufficient cpu": 2, AFFINITY: foreign})
    preemption = fit_error(
        total,
        {
            "No preemption victims found for incoming pod": 1,  # busy
            "Preemption is not helpful for scheduling": foreign + 1,  # small: 2 cpu > its allocatable
        },
    )
    # DynamicResources' PostFilter adds "no new claims to deallocate," before "preemption:", as in
    # kube-scheduler v1.34.
    expected = f"{filtered} no new claims to deallocate, preemption: {preemption}"

    event = scope.wait_event("FailedScheduling", "big")
    assert (event["type"], event["message"]) == ("Warning", expected), dumps(event)
    assert event["reportingComponent"] == "kopf-scheduler", dumps(event)
    pod = wait_until(
        lambda: condition(p := scope.get_pod("big"), "PodScheduled").get("status") == "False" and p,
        10,
        "PodScheduled=False",
    )
    scheduled = condition(pod, "PodScheduled")
    assert (scheduled["reason"], scheduled["message"]) == ("Unschedulable", expected), dumps(pod["status"])
    assert not pod["spec"].get("nodeName")
    assert not operator.problems(), operator.problems()


def test_node_added_makes_pending_pod_schedulable(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(1, "early")  # has this test's label, but not the role the pod selects
    late = {**scope.label, "e2e.kopf-scheduler.dev/role": "late"}
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    total = len(scope.all_node_names())
    scope.create_pod("waiting", selector=late, tolerations=[{"operator": "Exists"}])
    event = scope.wait_event("FailedScheduling", "waiting")
    expected = (
        f"{fit_error(total, {AFFINITY: total})} no new claims to deallocate, preemption: "
        f"{fit_error(total, {'Preemption is not helpful for scheduling': total})}"
    )
    assert event["message"] == expected, dumps(event)

    added = time.monotonic()
    [node] = scope.nodes(1, "late", labels=late)
    pod = scope.wait_bound("waiting", timeout=10)
    took = time.monotonic() - added
    assert pod["spec"]["nodeName"] == node
    assert condition(pod, "PodScheduled")["status"] == "True", dumps(pod["status"])
    # the node's arrival moves the pod out of the unschedulable pool (then at most its 1 s backoff)
    assert took < 3.0, f"bound {took:.1f} s after the node was added"
    scope.wait_event("Scheduled", "waiting")
    assert not operator.problems(), operator.problems()


def test_without_leader_election_it_schedules_at_once(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    [node] = scope.nodes(1)
    operator = operators.start("op", lease_namespace=scope.namespace, leader_elect=False)
    operator.wait_leading()
    scope.create_pod("web")
    assert scope.wait_bound("web")["spec"]["nodeName"] == node
    assert lease(control_plane, scope.namespace) == {}  # no Lease taken
    assert "leader election" not in operator.log(), operator.tail()
    assert operator.terminate() == 0, operator.tail()
    assert not operator.problems(), operator.problems()
