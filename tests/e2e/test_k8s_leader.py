"""Lease-based leader election against the real API server, with short durations (lease 3 s, renew
deadline 2 s, retry 0.5 s): exactly one of two candidates leads, a released lease is taken over at
once, a crashed leader's lease after it expires, and a leader that cannot renew stops at its deadline."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps
from kopf_scheduler.k8s import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    RestClient,
    load_connection,
)
from kopf_scheduler.k8s.timestamps import micro_time

pytestmark = pytest.mark.e2e

FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}


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


async def wait_for(predicate: Any, timeout: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def lease(cp: ClusterHarness, ns: str) -> dict[str, Any]:
    return dict(cp.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kopf-scheduler"))


async def test_two_candidates_exactly_one_leads(
    control_plane: ClusterHarness, candidates: list[Candidate]
) -> None:
    ns = control_plane.create_namespace("k8s-lease")
    a = Candidate(control_plane, ns, "a")
    b = Candidate(control_plane, ns, "b")
    candidates += [a.start(), b.start()]
    await wait_for(lambda: a.elector.is_leader or b.elector.is_leader, 5)
    # watch for longer than a lease duration: never both, always one
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        leaders = [c for c in (a, b) if c.elector.is_leader]
        assert len(leaders) == 1
        await asyncio.sleep(0.02)
    [leader] = [c for c in (a, b) if c.elector.is_leader]
    other = b if leader is a else a
    assert leader.started_at is not None and other.started_at is None
    spec = lease(control_plane, ns)["spec"]
    assert spec["holderIdentity"] == leader.elector.identity, dumps(spec)
    assert spec["leaseDurationSeconds"] == 3 and spec["leaseTransitions"] == 0
    assert spec["renewTime"] > spec["acquireTime"]  # renewed since acquired (same string format)
    assert other.elector.leader == leader.elector.identity


async def test_released_lease_is_taken_over_at_once(
    control_plane: ClusterHarness, candidates: list[Candidate]
) -> None:
    ns = control_plane.create_namespace("k8s-lease")
    a = Candidate(control_plane, ns, "a").start()
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 5)
    b = Candidate(control_plane, ns, "b").start()
    candidates.append(b)
    await asyncio.sleep(1.0)
    assert not b.elector.is_leader
    await a.stop()  # cancelled: leading stops, then the lease is released
    assert a.cancelled and a.stopped and not a.elector.is_leader
    assert lease(control_plane, ns)["spec"]["holderIdentity"] in ("", "b")
    took = await wait_for(lambda: b.elector.is_leader, 5)
    assert took < 1.5, took  # the next try (retry period 0.5 s, jittered up to x2.2)
    spec = lease(control_plane, ns)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1, dumps(spec)


async def test_crashed_leader_is_replaced_after_the_lease_expires(
    control_plane: ClusterHarness, candidates: list[Candidate]
) -> None:
    ns = control_plane.create_namespace("k8s-lease")
    a = Candidate(control_plane, ns, "a", release_on_cancel=False).start()  # a crash: nothing released
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 5)
    b = Candidate(control_plane, ns, "b").start()
    candidates.append(b)
    await asyncio.sleep(0.5)
    await a.stop()
    stopped = time.monotonic()
    assert lease(control_plane, ns)["spec"]["holderIdentity"] == "a"
    await wait_for(lambda: b.elector.is_leader, 8)
    took = time.monotonic() - stopped
    # b waits a full lease duration after it last saw a's record change (a renewed up to 0.5 s earlier)
    assert 2.4 < took < 5.0, took


async def test_leader_that_cannot_renew_stops_at_its_deadline(
    control_plane: ClusterHarness, candidates: list[Candidate]
) -> None:
    ns = control_plane.create_namespace("k8s-lease")
    a = Candidate(control_plane, ns, "a").start()
    candidates.append(a)
    await wait_for(lambda: a.elector.is_leader, 5)
    # another writer takes the lease behind a's back (as after a network partition)
    current = lease(control_plane, ns)
    current["spec"].update(holderIdentity="intruder", renewTime=micro_time(time.time()))
    control_plane.request(
        "PUT", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kopf-scheduler", current
    )
    taken = time.monotonic()
    await wait_for(lambda: a.task is not None and a.task.done(), 5)
    lost_after = time.monotonic() - taken
    assert a.task is not None and isinstance(a.task.exception(), LeadershipLost)
    assert a.cancelled and a.stopped and not a.elector.is_leader
    # within the renew deadline of the last renewal, well before the intruder's lease (3 s) could expire
    assert lost_after < 2.1, lost_after
    assert lease(control_plane, ns)["spec"]["holderIdentity"] == "intruder"  # not released: not ours


async def test_leading_goes_on_after_the_callback_returns(control_plane: ClusterHarness) -> None:
    """The usual shape: the callback starts the scheduling loop and returns; leading goes on until
    cancelled; stopping cancels the loop before the lease is released."""
    ns = control_plane.create_namespace("k8s-lease")
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
        await wait_for(lambda: elector.is_leader, 5)
        await asyncio.sleep(4.0)  # longer than the lease: renewed although the callback returned long ago
        assert elector.is_leader and not run.done()
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
    finally:
        await rest.close()
    assert events == ["loop cancelled, lease held by 'svc'"]  # stopped before released
    spec = lease(control_plane, ns)["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1, dumps(spec)


async def test_failing_callback_stops_leading_and_releases(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("k8s-lease")
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
