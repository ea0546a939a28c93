"""Lease-based leader election against the real API server, with short durations (lease 3 s, renew
deadline 2 s, retry 0.5 s): exactly one of two candidates leads, a released lease is taken over at
once, a crashed leader's lease after it expires, and a leader that cannot renew stops at its deadline.

Nothing here measures how long something took: each test waits for a condition (with a deadline far
beyond what it needs), and where "soon" or "not before" is the point, the lease durations are set so far
apart that only the right mechanism can meet the deadline (a released lease of 30 s is taken within
10 s), or the lease record itself shows the order of events (the new holder's acquireTime against the
crashed one's last renewTime).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from operator_harness import Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps
from kopf_scheduler.k8s import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    RestClient,
    load_connection,
)
from kopf_scheduler.k8s.timestamps import micro_time, parse

pytestmark = pytest.mark.e2e

FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
#: a lease so long that no test waits for it to expire: whatever happens within a test's deadline
#: happens for another reason
LONG = 30.0
#: a candidate stamps its acquireTime just before the read that finds the old lease expired: that read's
#: time may come off the wait its acquireTime shows
READ_SLACK = 1.0


class Candidate:
    """One elector with its own connection (as a separate process would have) and a leading task that
    runs until cancelled, recording what happened to it."""

    def __init__(self, cp: ClusterHarness, ns: str, identity: str, **options: Any) -> None:
        self.rest = RestClient(load_connection(cp.kubeconfig))
        config = LeaderElectionConfig(namespace=ns, identity=identity, **{**FAST, **options})
        self.elector = LeaderElector(self.rest, config)
        self.started_at: float | None = None
        self.cancelled = False
        self.stopped = False
        self.task: asyncio.Task[Any] | None = None

    async def lead(self) -> None:
        self.started_at = time.monotonic()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    def on_stopped(self) -> None:
        self.stopped = True

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run(self.lead, self.on_stopped))
        return self

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
                await self.task
        await self.rest.close()


@pytest.fixture
async def candidates(control_plane: ClusterHarness) -> AsyncIterator[list[Candidate]]:
    made: list[Candidate] = []
    yield made
    for candidate in made:
        await candidate.stop()


async def wait_for(predicate: Any, timeout: float, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.02)


def lease(cp: ClusterHarness, ns: str) -> dict[str, Any]:
    return dict(cp.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kopf-scheduler"))


async def read_lease(cp: ClusterHarness, ns: str) -> dict[str, Any]:
    """The lease, read off the event loop (the electors under test run on it)."""
    return await asyncio.to_thread(lease, cp, ns)


def renewed_for(spec: dict[str, Any]) -> float:
    """Seconds from the holder's acquireTime to its latest renewTime, as the lease records them."""
    return parse(spec["renewTime"]) - parse(spec["acquireTime"])


async def test_two_candidates_exactly_one_leads(
    control_plane: ClusterHarness, scope: Scope, candidates: list[Candidate]
) -> None:
    ns = scope.namespace
    a = Candidate(control_plane, ns, "a")
    b = Candidate(control_plane, ns, "b")
    candidates += [a.start(), b.start()]
    await wait_for(lambda: a.elector.is_leader or b.elector.is_leader, 10, "a leader")
    # never both, always one, until the lease has been renewed for longer than its duration: the other
    # one had every chance to (wrongly) take it over
    deadline = time.monotonic() + 20
    spec: dict[str, Any] = {}
    while not spec or renewed_for(spec) <= spec["leaseDurationSeconds"]:
        assert time.monotonic() < deadline, f"not renewed for a lease duration: {dumps(spec)}"
        leaders = [c.elector.identity for c in (a, b) if c.elector.is_leader]
        assert len(leaders) == 1, leaders
        await asyncio.sleep(0.02)
        spec = (await read_lease(control_plane, ns))["spec"]
    [leader] = [c for c in (a, b) if c.elector.is_leader]
    other = b if leader is a else a
    assert leader.started_at is not None and other.started_at is None
    assert spec["holderIdentity"] == leader.elector.identity, dumps(spec)
    assert spec["leaseDurationSeconds"] == 3 and spec["leaseTransitions"] == 0
    assert other.elector.leader == leader.elector.identity


async def test_released_lease_is_taken_over_at_once(
    control_plane: ClusterHarness, scope: Scope, candidates: list[Candidate]
) -> None:
    ns = scope.namespace
    a = Candidate(control_plane, ns, "a", lease_duration=LONG).start()
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 10, "a leads")
    b = Candidate(control_plane, ns, "b", lease_duration=LONG).start()
    candidates.append(b)
    await wait_for(lambda: b.elector.leader == "a", 10, "b has read a's lease")
    assert not b.elector.is_leader
    await a.stop()  # cancelled: leading stops, then the lease is released
    assert a.cancelled and a.stopped and not a.elector.is_leader
    spec = (await read_lease(control_plane, ns))["spec"]
    assert spec["holderIdentity"] in ("", "b"), dumps(spec)  # released (and maybe taken already)
    # a's lease would have run 30 s: b leading within 10 s proves it took the released one
    await wait_for(lambda: b.elector.is_leader, 10, "b leads")
    spec = (await read_lease(control_plane, ns))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1, dumps(spec)


async def test_crashed_leader_is_replaced_after_the_lease_expires(
    control_plane: ClusterHarness, scope: Scope, candidates: list[Candidate]
) -> None:
    ns = scope.namespace
    a = Candidate(control_plane, ns, "a", release_on_cancel=False).start()  # a crash: nothing released
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 10, "a leads")
    b = Candidate(control_plane, ns, "b").start()
    candidates.append(b)
    await wait_for(lambda: b.elector.leader == "a", 10, "b has read a's lease")
    await a.stop()
    last = (await read_lease(control_plane, ns))["spec"]
    assert last["holderIdentity"] == "a", dumps(last)
    await wait_for(lambda: b.elector.is_leader, 15, "b leads")
    spec = (await read_lease(control_plane, ns))["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1, dumps(spec)
    # b took the lease only once a's record had stood unchanged for a lease duration (on b's clock,
    # from when b saw it, which was after a stamped its renewTime)
    waited = parse(spec["acquireTime"]) - parse(last["renewTime"])
    assert waited >= last["leaseDurationSeconds"] - READ_SLACK, (waited, dumps({"a": last, "b": spec}))


async def test_leader_that_cannot_renew_stops_at_its_deadline(
    control_plane: ClusterHarness, scope: Scope, candidates: list[Candidate]
) -> None:
    ns = scope.namespace
    # its own lease would run 30 s, the intruder's 60 s: stopping within 10 s is its renew deadline (2 s)
    a = Candidate(control_plane, ns, "a", lease_duration=LONG).start()
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 10, "a leads")
    # another writer takes the lease behind a's back (as after a network partition)
    current = await read_lease(control_plane, ns)
    current["spec"].update(
        holderIdentity="intruder", renewTime=micro_time(time.time()), leaseDurationSeconds=60
    )
    control_plane.request(
        "PUT", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kopf-scheduler", current
    )
    await wait_for(lambda: a.task is not None and a.task.done(), 10, "a stops")
    assert a.task is not None and isinstance(a.task.exception(), LeadershipLost)
    assert a.cancelled and a.stopped and not a.elector.is_leader
    spec = (await read_lease(control_plane, ns))["spec"]
    assert spec["holderIdentity"] == "intruder", dumps(spec)  # not released: not ours


async def test_leading_goes_on_after_the_callback_returns(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    """The usual shape: the callback starts the scheduling loop and returns; leading goes on until
    cancelled; stopping cancels the loop before the lease is released."""
    ns = scope.namespace
    rest = RestClient(load_connection(control_plane.kubeconfig))
    elector = LeaderElector(rest, namespace=ns, identity="svc", **FAST)
    loop_task: asyncio.Task[None] | None = None
    events: list[str] = []

    async def scheduling_loop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append(
                f"loop cancelled, lease held by {lease(control_plane, ns)['spec']['holderIdentity']!r}"
            )
            raise

    async def started() -> None:
        nonlocal loop_task
        loop_task = asyncio.create_task(scheduling_loop())

    async def stopped() -> None:
        assert loop_task is not None
        loop_task.cancel()
        await asyncio.wait([loop_task])

    run = asyncio.create_task(elector.run(started, stopped))
    try:
        await wait_for(lambda: elector.is_leader, 10, "it leads")
        # renewed for longer than the lease although the callback returned long ago
        deadline = time.monotonic() + 20
        spec = (await read_lease(control_plane, ns))["spec"]
        while renewed_for(spec) <= spec["leaseDurationSeconds"]:
            assert time.monotonic() < deadline and not run.done(), dumps(spec)
            await asyncio.sleep(0.1)
            spec = (await read_lease(control_plane, ns))["spec"]
        assert elector.is_leader and not run.done()
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
    finally:
        await rest.close()
    assert events == ["loop cancelled, lease held by 'svc'"]  # stopped before released
    spec = lease(control_plane, ns)["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1, dumps(spec)


async def test_failing_callback_stops_leading_and_releases(
    control_plane: ClusterHarness, scope: Scope
) -> None:
    ns = scope.namespace
    rest = RestClient(load_connection(control_plane.kubeconfig))
    elector = LeaderElector(rest, LeaderElectionConfig(namespace=ns, identity="boom", **FAST))

    async def started() -> None:
        raise RuntimeError("cannot start")

    try:
        with pytest.raises(RuntimeError, match="cannot start"):
            await elector.run(started)
    finally:
        await rest.close()
    assert not elector.is_leader
    assert lease(control_plane, ns)["spec"]["holderIdentity"] == ""
