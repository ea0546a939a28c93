"""The operator, run as ``kopf-scheduler run`` against the real control plane, schedules pods the way
kube-scheduler does, as a user sees it with kubectl: pods bound with ``PodScheduled=True`` and a
``Scheduled`` event; a pod that fits nowhere has kube-scheduler's ``FailedScheduling`` message in its
event and its ``PodScheduled=False`` condition; a node added makes a pending pod schedulable at once.
Also what a Deployment relies on: the liveness and metrics endpoints answer, and SIGTERM stops the
operator cleanly, handing the lease back."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps
from operator_harness import Operators, Scope, condition, lease, wait_until

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
        assert (event["reportingComponent"], event["reportingInstance"]) == ("kopf-scheduler", "op"), dumps(event)
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
    assert lease(control_plane, scope.namespace)["spec"]["holderIdentity"] == "", dumps(lease(control_plane, scope.namespace))
    assert not operator.problems(), operator.problems()


def test_unschedulable_pod_gets_kube_schedulers_message(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    mine = scope.nodes(2)  # cpu 4, memory 32Gi each
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    # Every node in the cluster counts, including other tests' nodes. The pod tolerates every taint (so
    # cordoned or tainted foreign nodes fail only on its node selector, like the others) and selects this
    # test's nodes, where it is too big.
    total = len(scope.all_node_names())
    foreign = total - len(mine)
    scope.create_pod(
        "huge", requests={"cpu": "100", "memory": "100Gi"}, tolerations=[{"operator": "Exists"}]
    )

    # kube-scheduler's FitError: "<count> <reason>" per reason, sorted as strings; then the
    # post-filter's (DefaultPreemption) verdict in the same form.
    def histogram(reasons: dict[str, int]) -> str:
        counted = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
        return f"0/{total} nodes are available: {', '.join(counted)}."

    filtered = histogram({"Insufficient cpu": 2, "Insufficient memory": 2, AFFINITY: foreign})
    preemption = histogram(
        {"No preemption victims found for incoming pod": 2, "Preemption is not helpful for scheduling": foreign}
    )
    expected = f"{filtered} preemption: {preemption}"

    event = scope.wait_event("FailedScheduling", "huge")
    assert (event["type"], event["message"]) == ("Warning", expected), dumps(event)
    pod = wait_until(
        lambda: condition(p := scope.get_pod("huge"), "PodScheduled").get("status") == "False" and p,
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
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    scope.create_pod("waiting")  # selects this test's label: no node has it yet
    event = scope.wait_event("FailedScheduling", "waiting")
    assert event["message"].startswith("0/") and AFFINITY in event["message"], dumps(event)

    added = time.monotonic()
    [node] = scope.nodes(1)
    pod = scope.wait_bound("waiting", timeout=10)
    took = time.monotonic() - added
    assert pod["spec"]["nodeName"] == node
    assert condition(pod, "PodScheduled")["status"] == "True", dumps(pod["status"])
    # the node's arrival moves the pod out of the unschedulable pool (then at most its 1 s backoff)
    assert took < 3.0, f"bound {took:.1f} s after the node was added"
    scope.wait_event("Scheduled", "waiting")
    assert not operator.problems(), operator.problems()
