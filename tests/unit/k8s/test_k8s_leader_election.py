"""Leader election on a virtual clock against a fake Lease server: taking a lease that does not exist,
losing the race for it (409 on create and on takeover), and losing leadership when renewals fail (5xx)
or hang (no answer): ``is_leader`` turns false at ``renew_deadline`` after the last renewal that was
sent and succeeded, leading stops, and the lease is not released by a leader that lost it.

kube-scheduler's timings unless a test says otherwise: lease 15 s, renew deadline 10 s, retry 2 s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeAPI, Request
from lease_server import LeaseServer

from kopf_scheduler.k8s.leader import JITTER_FACTOR, LeaderElector, LeadershipLost
from kopf_scheduler.testing import VirtualClock

WALL = 1767225600.0  # 2026-01-01T00:00:00Z
STAMP = "2026-01-01T00:00:00.000000Z"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kopf-scheduler"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class _Leading:
    """What the elector's callbacks saw."""

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0
        self.cancelled = 0

    async def lead(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    def stop(self) -> None:
        self.stopped += 1


def _elector(server: LeaseServer, clock: VirtualClock, **settings: Any) -> tuple[LeaderElector, FakeAPI]:
    rest = FakeAPI(fallback=server.answer)
    elector = LeaderElector(rest, namespace="ns", identity="a", clock=clock, wall=lambda: WALL, **settings)  # type: ignore[arg-type]
    return elector, rest


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _advance(clock: VirtualClock, seconds: float, step: float = 0.5) -> None:
    """Moves the clock in steps, letting the elector's tasks run after each."""
    end = clock.now() + seconds
    while clock.now() < end:
        clock.set(min(end, clock.now() + step))
        await _settle()


def _calls(rest: FakeAPI, since: int = 0) -> list[tuple[str, str]]:
    return [(c.method, c.path) for c in rest.requests[since:]]


async def _leading(server: LeaseServer, clock: VirtualClock, **settings: Any) -> Any:
    elector, rest = _elector(server, clock, **settings)
    leading = _Leading()
    run = asyncio.ensure_future(elector.run(leading.lead, leading.stop))
    await _settle()
    assert leading.started == 1 and elector.is_leader
    return elector, rest, leading, run


# -- acquiring -----------------------------------------------------------------------------------------
async def test_a_missing_lease_is_created_with_kube_schedulers_record() -> None:
    server, clock = LeaseServer(), VirtualClock()
    elector, rest, leading, run = await _leading(server, clock)
    assert _calls(rest) == [("GET", LEASE), ("POST", LEASES)]
    created = rest.requests[1].body
    assert created["apiVersion"] == "coordination.k8s.io/v1" and created["kind"] == "Lease"
    assert created["metadata"] == {"name": "kopf-scheduler", "namespace": "ns"}
    assert created["spec"] == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "leaseTransitions": 0,
    }
    assert elector.leader == "a"
    await _advance(clock, 2.0)  # one retry period: renewed with the record written last
    assert _calls(rest, 2) == [("PUT", LEASE)]
    assert rest.requests[2].body["metadata"]["resourceVersion"] == "1"
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    assert leading.stopped == 1 and server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""  # released on cancel


async def test_losing_the_race_to_create_the_lease_waits_for_the_winner() -> None:
    server, clock = LeaseServer(), VirtualClock()

    def b_creates_first(call: Request) -> None:
        if call.method == "POST":
            server.write_as("b", STAMP)

    server.before_write = b_creates_first
    elector, rest = _elector(server, clock)
    leading = _Leading()
    run = asyncio.ensure_future(elector.run(leading.lead, leading.stop))
    await _settle()
    assert _calls(rest) == [("GET", LEASE), ("POST", LEASES)]  # the POST got 409
    assert leading.started == 0 and not elector.is_leader
    server.before_write = None
    await _advance(clock, 5.0)  # a retry (2 s + jitter) reads b's valid lease and leaves it
    assert ("GET", LEASE) in _calls(rest, 2) and ("PUT", LEASE) not in _calls(rest, 2)
    assert leading.started == 0 and elector.leader == "b"
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    assert leading.stopped == 0  # never led
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "b"


async def test_a_takeover_that_conflicts_with_the_holders_renewal_does_not_lead() -> None:
    server, clock = LeaseServer(), VirtualClock()
    server.write_as("b", STAMP)
    elector, rest = _elector(server, clock)
    leading = _Leading()
    run = asyncio.ensure_future(elector.run(leading.lead, leading.stop))
    await _settle()  # b's record observed now: valid for 15 s on a's clock
    assert leading.started == 0

    renewed: list[float] = []  # a's clock when b renewed, in the middle of a's takeover
    puts: list[float] = []  # a's clock at each of a's PUTs

    def b_renews_first(call: Request) -> None:
        if call.method == "PUT" and call.body["spec"]["holderIdentity"] == "a":
            puts.append(clock.now())
            if not renewed:
                server.write_as("b", "2026-01-01T00:00:20.000000Z")
                renewed.append(clock.now())

    server.before_write = b_renews_first
    await _advance(clock, 20.0)  # the record looks expired: a tries to take it, and gets 409
    assert len(puts) == 1 and leading.started == 0 and not elector.is_leader and elector.leader == "b"
    assert puts[0] >= 15.0  # not before b's first record was 15 s old
    await _advance(clock, 10.0)  # b's renewal restarted a's wait: still not 15 s since it was seen
    assert len(puts) == 1 and leading.started == 0
    # b stopped renewing: a takes over once 15 s have passed since it saw the renewal, at the first
    # retry after that (retry 2 s, jittered by up to 1.2x: two retries at most)
    latest = renewed[0] + 15.0 + 2 * (2.0 + 2.0 * JITTER_FACTOR) + 1.0
    while leading.started == 0 and clock.now() < latest:
        await _advance(clock, 0.5)
    assert leading.started == 1 and elector.is_leader
    assert len(puts) == 2 and puts[1] >= renewed[0] + 15.0, (renewed, puts)
    assert [c.method for c in rest.requests].count("PUT") == 2
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "a"
    assert server.lease["spec"]["leaseTransitions"] == 1
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


# -- losing it -----------------------------------------------------------------------------------------
async def _lost(run: asyncio.Future[None]) -> None:
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(run, 5)


async def test_renewals_failing_with_5xx_lose_leadership_at_the_renew_deadline() -> None:
    server, clock = LeaseServer(), VirtualClock()
    elector, rest, leading, run = await _leading(server, clock)
    await _advance(clock, 2.0)  # renewed at 1002: the deadline moves to 1012
    assert server.lease is not None and server.version == 2
    server.failing = 500
    before = len(rest.requests)
    await _advance(clock, 9.5, step=0.25)  # 1011.5: tries at 1004, 1006, 1008, 1010 all failed
    assert _calls(rest, before) == [("PUT", LEASE), ("GET", LEASE)] * 4
    assert elector.is_leader and leading.cancelled == 0
    clock.set(1012.0)  # before the renew task even runs again, the leader stops believing it leads
    assert not elector.is_leader
    await _settle()
    await _lost(run)
    assert (leading.started, leading.cancelled, leading.stopped) == (1, 1, 1)
    assert len(rest.requests) == before + 8  # a leader that lost the lease does not release it
    assert server.lease["spec"]["holderIdentity"] == "a" and server.version == 2


async def test_renewals_that_never_answer_lose_leadership_at_the_renew_deadline() -> None:
    """The renewal's request timeout is the time left to the deadline (on the event loop's clock, so the
    timings here are short: a 2 s lease, 1 s renew deadline, 0.5 s retry period)."""
    server, clock = LeaseServer(), VirtualClock()
    elector, rest, leading, run = await _leading(
        server, clock, lease_duration=2.0, renew_deadline=1.0, retry_period=0.5
    )
    rest.hold()  # from now on no request is answered
    before = len(rest.requests)
    await _advance(clock, 0.5)  # the renewal is sent, and hangs
    assert _calls(rest, before) == [("PUT", LEASE)]
    clock.set(1000.99)
    assert elector.is_leader
    clock.set(1001.0)  # deadline: 1 s after the last successful renewal was sent (the create at 1000)
    assert not elector.is_leader
    await _lost(run)  # the hung renewal times out, and leading stops
    assert (leading.started, leading.cancelled, leading.stopped) == (1, 1, 1)
    assert _calls(rest, before) == [("PUT", LEASE)]  # no release attempted
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "a"


async def test_a_renewal_that_succeeds_before_the_deadline_keeps_leading() -> None:
    server, clock = LeaseServer(), VirtualClock()
    elector, _, leading, run = await _leading(server, clock)
    server.failing = 503
    await _advance(clock, 7.0)  # 1007: the tries at 1002, 1004 and 1006 failed; the deadline is 1010
    server.failing = None
    await _advance(clock, 1.0)  # the last try before the deadline, at 1008, lands: the deadline is 1018
    clock.set(1012.0)
    assert elector.is_leader
    await _advance(clock, 10.0)
    assert elector.is_leader and not run.done() and leading.cancelled == 0
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "a"
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
