"""The operator, run as ``kopf-scheduler run`` against the real control plane, schedules pods the way
kube-scheduler does, as a user sees it with kubectl: pods bound with ``PodScheduled=True`` and a
``Scheduled`` event; a pod that fits nowhere has kube-scheduler's ``FailedScheduling`` message in its
event and its ``PodScheduled=False`` condition; a node added makes a pending pod schedulable at once.
Also what a Deployment relies on: the liveness and metrics endpoints answer, every metric the README
lists is exported and moves with scheduling as kube-scheduler's does, and SIGTERM stops the operator
cleanly, handing the lease back; ``--leader-elect false`` schedules without a Lease; and ``kopf run -m
kopf_scheduler.handlers`` (one process) schedules as well."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest
from operator_harness import Operators, Scope, condition, lease, wait_profile, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

AFFINITY = "node(s) didn't match Pod's node affinity/selector"
README = Path(__file__).resolve().parents[2] / "README.md"
#: a Prometheus sample: name, labels, value
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def http_get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read().decode()


def test_kopf_run_in_one_process_schedules_too(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    """The README's other way to run it: ``kopf run -m kopf_scheduler.handlers -A --standalone``, Kopf's
    watches in the scheduling process itself (no intake process): pods are bound, each with its event,
    and SIGTERM hands the lease back."""
    nodes = scope.nodes(2)
    operator = operators.start("op-one", lease_namespace=scope.namespace, one_process=True)
    operator.wait_leading()
    names = [f"one-{i}" for i in range(3)]
    for name in names:
        scope.create_pod(name)
    for name in names:
        assert scope.wait_bound(name)["spec"]["nodeName"] in nodes
        assert scope.wait_event("Scheduled", name)["type"] == "Normal"
    assert "watch intake" not in operator.log()
    assert operator.terminate() == 0, operator.tail()
    assert lease(control_plane, scope.namespace)["spec"]["holderIdentity"] == ""


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

    # SIGTERM (a rolling update): a clean exit, within the grace period, that hands the lease back for a
    # successor to take at once
    assert operator.terminate() == 0, operator.tail()
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
    # kube-scheduler v1.37: DynamicResources' PostFilter adds nothing (v1.34 added "no new claims to
    # deallocate," before "preemption:")
    expected = f"{filtered} preemption: {preemption}"

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
        f"{fit_error(total, {AFFINITY: total})} preemption: "
        f"{fit_error(total, {'Preemption is not helpful for scheduling': total})}"
    )
    assert event["message"] == expected, dumps(event)

    [node] = scope.nodes(1, "late", labels=late)
    # Only the node's arrival can requeue the pod: without an event a pod leaves the unschedulable pool
    # after five minutes (kube-scheduler's podMaxInUnschedulablePodsDuration), far beyond this deadline.
    pod = scope.wait_bound("waiting", timeout=60)
    assert pod["spec"]["nodeName"] == node
    assert condition(pod, "PodScheduled")["status"] == "True", dumps(pod["status"])
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


# -- metrics ------------------------------------------------------------------------------------------------

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, text[:500]
    samples: Samples = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            name, labels, value = match.groups()
            samples[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def exported(samples: Samples, name: str) -> bool:
    """Whether a metric family is exported: its own name, or a histogram's or counter's series."""
    return any(n in (name, f"{name}_total", f"{name}_count") for n, _ in samples)


def readme_metrics() -> set[str]:
    """The metric names the README's Metrics paragraph lists."""
    text = README.read_text()
    paragraph = text[text.index("- **Metrics**") :].split("\n- ", 1)[0]
    return set(re.findall(r"`(scheduler_[a-z_]+)`", paragraph))


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


def test_readme_metrics_move_with_scheduling(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    """Each metric the README lists, scraped before, while one pod is unschedulable and another gated, and
    after all are bound: exported, and moved by what happened. Metrics with a ``profile`` label are read
    for this test's own profile; the others (queue sizes, the SLI) against a baseline taken once the
    operator is idle, since pods of other tests may still be known to it (but not bound by it)."""
    scope.nodes(2, "small")  # 4 cpu each
    operator = operators.start("op", lease_namespace=scope.namespace, ports=True)
    operator.wait_leading()
    sched = scope.name("metrics")
    scope.create_profile(scope.name("metrics"), {"schedulerName": sched})
    wait_profile(control_plane, scope.name("metrics"), "True")
    listed = readme_metrics()
    assert {"scheduler_schedule_attempts_total", "scheduler_pending_pods"} <= listed, listed
    pending = "scheduler_pending_pods"

    def idle() -> Samples | None:
        now = scrape(operator.metrics_port)
        busy = total(now, pending, queue="active") + total(now, pending, queue="backoff")
        return now if not busy else None

    # whatever the operator found at start (other tests' pods) has been tried and set aside
    before = wait_until(idle, 30, "no pod in the active and backoff queues")

    # three pods bound at the first attempt, onto two feasible nodes (so they are scored)
    for i in range(3):
        scope.create_pod(f"fits-{i}", sched)
    for i in range(3):
        scope.wait_bound(f"fits-{i}")
    # one that fits no node yet (8 cpu), one held by a scheduling gate
    scope.create_pod("big", sched, requests={"cpu": "8", "memory": "100Mi"})
    scope.wait_event("FailedScheduling", "big")
    scope.create_pod("gated", sched, schedulingGates=[{"name": "example.com/hold"}])

    def both_waiting() -> Samples | None:
        now = scrape(operator.metrics_port)
        unschedulable = moved(before, now, pending, queue="unschedulable")
        gated = moved(before, now, pending, queue="gated")
        return now if (unschedulable, gated) == (1, 1) else None

    during = wait_until(both_waiting, 15, "the big pod unschedulable and the gated pod gated")
    # the gate lifted and a node with room added: both bound (the big one at its second attempt)
    resp = control_plane.api.request(
        "PATCH",
        f"/api/v1/namespaces/{scope.namespace}/pods/gated",
        {"spec": {"schedulingGates": None}},
        content_type="application/merge-patch+json",
    )
    assert resp.status == 200, resp.text()
    scope.nodes(1, "large", cpu="16", memory="64Gi", pods="110")
    scope.wait_bound("gated")
    scope.wait_bound("big", timeout=60)

    def settled() -> Samples | None:
        now = scrape(operator.metrics_port)
        done = moved(before, now, "scheduler_schedule_attempts_total", result="scheduled", profile=sched)
        waiting = [
            moved(before, now, pending, queue=q) for q in ("active", "backoff", "unschedulable", "gated")
        ]
        return now if done == 5 and waiting == [0, 0, 0, 0] else None

    after = wait_until(settled, 30, "5 pods counted as scheduled and the queues back where they were")
    for name in listed:
        assert exported(after, name), f"{name} (README) is not exported"

    # each README metric: what it counts, moved as it should
    checks: dict[str, Mapping[str, float]] = {}
    attempts = "scheduler_schedule_attempts_total"
    failed = moved(before, after, attempts, result="unschedulable", profile=sched)
    checks[attempts] = {"scheduled": moved(before, after, attempts, result="scheduled", profile=sched)}
    assert checks[attempts]["scheduled"] == 5 and failed >= 1, (checks, failed)
    durations = "scheduler_scheduling_attempt_duration_seconds"
    checks[durations] = {
        result: moved(before, after, f"{durations}_count", result=result, profile=sched)
        for result in ("scheduled", "unschedulable")
    }
    assert checks[durations] == {"scheduled": 5, "unschedulable": failed}, checks[durations]
    assert moved(before, after, f"{durations}_sum", profile=sched) > 0
    checks[pending] = {
        f"{queue} while waiting": moved(before, during, pending, queue=queue)
        for queue in ("unschedulable", "gated")
    }
    assert checks[pending] == {"unschedulable while waiting": 1, "gated while waiting": 1}, checks[pending]
    sli = "scheduler_pod_scheduling_sli_duration_seconds"
    checks[sli] = {
        "all": moved(before, after, f"{sli}_count"),
        "first attempt": moved(before, after, f"{sli}_count", attempts="1"),
    }
    # every bound pod once; the big one after more than one attempt, the others at their first (a gated
    # pod is not attempted until its gate is lifted)
    assert checks[sli] == {"all": 5, "first attempt": 4}, checks[sli]
    points = "scheduler_framework_extension_point_duration_seconds"
    checks[points] = {
        point: moved(before, after, f"{points}_count", extension_point=point, status="Success", profile=sched)
        for point in ("PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind")
    }
    checks[points]["PostFilter"] = moved(
        before, after, f"{points}_count", extension_point="PostFilter", profile=sched
    )
    want = {"Reserve": 5, "Permit": 5, "PreBind": 5, "Bind": 5}
    assert {k: checks[points][k] for k in want} == want, checks[points]
    assert checks[points]["PreFilter"] == checks[points]["Filter"] == 5 + failed, checks[points]
    assert checks[points]["PreScore"] >= 3 and checks[points]["Score"] >= 3, checks[points]
    assert checks[points]["PostFilter"] == failed, checks[points]
    unchecked = listed - set(checks)
    assert not unchecked, f"README metrics without a check here: {sorted(unchecked)}"
    assert not operator.problems(), operator.problems()
