"""High availability as a user checks it: of two operators sharing one Lease exactly one schedules (the
lease holder; the Scheduled events' reportingInstance is its pod name), and when it is killed the other
takes over once the lease has expired (its acquireTime a lease duration after the killed one's last
renewTime); an operator killed in the middle of a burst of pods and started again leaves every pod
bound exactly once. "Exactly once" is read from the API server's own
request counter for ``POST pods/binding`` (``apiserver_request_total``): one 201 per pod and no 409.
And a leader stopped (SIGTERM) just as a renewal completes lets go of the lease instead of renewing on.

Lease timings are short here (lease 4 s, renew deadline 3 s, retry 0.5 s; see ``operator_harness``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from operator_harness import (
    LEASE_DURATION,
    MAX_ACQUIRE_WAIT,
    Operators,
    Scope,
    binding_requests,
    delta,
    holder,
    lease,
    wait_until,
)

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps
from kopf_scheduler.k8s import LeaderElector, RestClient, load_connection
from kopf_scheduler.k8s.timestamps import parse

pytestmark = pytest.mark.e2e

#: what one lease read may take off the wait a takeover's acquireTime shows (see the takeover below)
READ_SLACK = 1.0


def scheduled_by(scope: Scope) -> dict[str, list[str]]:
    """pod name -> the reportingInstance of each of its Scheduled events."""
    out: dict[str, list[str]] = {}
    for event in scope.events("Scheduled"):
        out.setdefault(event["involvedObject"]["name"], []).append(event["reportingInstance"])
    return out


def test_one_of_two_instances_schedules_and_the_other_takes_over(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    ns = scope.namespace
    scope.nodes(2)
    a = operators.start("op-a", lease_namespace=ns)
    b = operators.start("op-b", lease_namespace=ns)
    leader_identity = wait_until(lambda: holder(control_plane, ns), 20, "a lease holder")
    leader, standby = (a, b) if leader_identity == a.identity else (b, a)
    leader.wait_leading()
    standby.wait_for_log("initial lists:")
    standby.wait_for_log(f"is held by {leader.identity!r}")
    before = binding_requests(control_plane)

    first = [f"first-{i}" for i in range(5)]
    for name in first:
        scope.create_pod(name)
    scope.wait_all_bound(timeout=15)
    wait_until(lambda: len(scheduled_by(scope)) == len(first), 10, "a Scheduled event per pod")
    assert scheduled_by(scope) == {name: [leader.identity] for name in first}
    assert "leading as" not in standby.log(), standby.tail()
    renewed = lease(control_plane, ns)["spec"]["renewTime"]
    wait_until(lambda: lease(control_plane, ns)["spec"]["renewTime"] != renewed, 3, "the leader renews")

    # a crash: nothing is released, the standby waits out the lease, then leads
    leader.kill()
    last = lease(control_plane, ns)["spec"]  # the killed leader's last word
    assert last["holderIdentity"] == leader.identity, dumps(last)
    second = [f"second-{i}" for i in range(5)]
    for name in second:
        scope.create_pod(name)
    standby.wait_leading(timeout=LEASE_DURATION + MAX_ACQUIRE_WAIT + 30)
    scope.wait_all_bound(timeout=15)
    wait_until(lambda: len(scheduled_by(scope)) == len(first + second), 10, "a Scheduled event per pod")
    assert scheduled_by(scope) == {
        **{name: [leader.identity] for name in first},
        **{name: [standby.identity] for name in second},
    }
    spec = lease(control_plane, ns)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (standby.identity, 1), dumps(spec)
    # it took the lease only once the record had stood unchanged for a lease duration (on its own clock,
    # from when it read it, after the leader stamped it); it stamps acquireTime just before that read
    waited = parse(spec["acquireTime"]) - parse(last["renewTime"])
    assert waited >= last["leaseDurationSeconds"] - READ_SLACK, (waited, dumps({"was": last, "now": spec}))
    assert delta(binding_requests(control_plane), before) == {"201": len(first + second)}
    assert not standby.problems(), standby.problems()


def test_killed_in_a_burst_every_pod_is_bound_once(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    ns = scope.namespace
    count = 200
    scope.nodes(4)  # 440 pod slots
    first = operators.start("op-1", lease_namespace=ns)
    first.wait_leading()
    before = binding_requests(control_plane)
    bodies = [scope.pod(f"burst-{i:03d}", requests={"cpu": "10m", "memory": "10Mi"}) for i in range(count)]
    creating = threading.Thread(target=scope.create_pods, args=(bodies, 4))
    creating.start()
    try:
        bound_at_kill = len(
            wait_until(lambda: len(scope.bound()) >= 20 and scope.bound(), 30, "20 pods bound")
        )
        first.kill()
        burst_going_on = creating.is_alive()
    finally:
        creating.join()
    # with no operator running, the pods the killed one left: the restarted one must bind each of them
    left = set(scope.unbound())
    assert 0 < bound_at_kill < count and left, (bound_at_kill, len(left))

    second = operators.start("op-2", lease_namespace=ns)
    second.wait_leading(timeout=LEASE_DURATION + MAX_ACQUIRE_WAIT + 10)
    scope.wait_all_bound(timeout=30)
    assert len(scope.pods()) == count

    # No 409: nothing ever tried to bind a pod already bound. A binding POST the SIGKILL cut off may
    # be counted with a 5xx code (the client was gone before the answer), whether it bound or not.
    binds = delta(binding_requests(control_plane), before)
    cut = {code: n for code, n in binds.items() if code != "201"}
    assert all(code.startswith("5") for code in cut) and sum(cut.values()) <= 64, binds  # bind concurrency
    assert count - sum(cut.values()) <= binds.get("201", 0) <= count, binds
    wait_until(lambda: left <= set(scheduled_by(scope)), 10, "a Scheduled event for each pod op-2 bound")
    events = scheduled_by(scope)
    assert all(len(instances) == 1 for instances in events.values()), dumps(events)
    assert {name: events[name] for name in left} == {name: [second.identity] for name in left}
    assert all(events[name] == [first.identity] for name in set(events) - left), dumps(events)
    assert not second.problems(), second.problems()
    by = Counter(i for instances in events.values() for i in instances)
    print(
        f"killed op-1 with {bound_at_kill} of {count} pods bound (still creating: {burst_going_on}); "
        f"op-2 bound the other {len(left)}; Scheduled events: {dict(by)} "
        f"({count - len(left) - by[first.identity]} events of op-1 died with it); binding requests: {binds}"
    )


async def test_stopped_during_a_renewal_the_leader_lets_go(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    """SIGTERM makes the operator cancel its elector; when that lands just as a renewal completes, the
    elector must still stop (and release the lease) instead of renewing on: Python 3.11's
    ``asyncio.wait_for`` swallows a cancellation that races with the awaited call's completion."""
    ns = scope.namespace
    rest = RestClient(load_connection(control_plane.kubeconfig))
    elector = LeaderElector(
        rest, namespace=ns, identity="a", lease_duration=LEASE_DURATION, renew_deadline=3.0, retry_period=0.5
    )
    real_request = rest.request
    armed = asyncio.Event()
    running: list[asyncio.Task[Any]] = []

    async def request(method: str, path: str, body: Any = None, **options: Any) -> Any:
        response = await real_request(method, path, body, **options)
        if armed.is_set() and method == "PUT":
            armed.clear()
            running[0].cancel()  # the shutdown arrives while this renewal completes
        return response

    rest.request = request  # type: ignore[method-assign]
    running.append(asyncio.create_task(elector.run(asyncio.Event().wait)))
    try:
        for _ in range(100):
            if elector.is_leader:
                break
            await asyncio.sleep(0.05)
        assert elector.is_leader
        armed.set()
        done, _ = await asyncio.wait(running, timeout=5)
        assert done, "the elector went on renewing after it was cancelled"
        assert running[0].cancelled()
        assert holder(control_plane, ns) == "", dumps(lease(control_plane, ns))  # released
    finally:
        running[0].cancel()
        await asyncio.wait(running)
        await rest.close()
