"""The background event sender: one API object per isomorphic series, a bounded queue that drops, the
periodic flush of series counts, and the final flush at close."""

from __future__ import annotations

import asyncio

import pytest
from fake_api import FakeAPI

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.k8s.event_recorder import EventRecorder
from kopf_scheduler.k8s.event_series import WARNING, EventAggregator, ObjectRef, Occurrence
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, Response

EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"


def failure(pod: str = "p", note: str = "0/1 nodes are available: 1 Too many pods.") -> Occurrence:
    return Occurrence(
        ObjectRef("Pod", "ns", pod, uid=f"uid-{pod}"), WARNING, "FailedScheduling", "Scheduling", note
    )


def recorder(rest: FakeAPI, clock: VirtualClock, **kwargs: object) -> EventRecorder:
    aggregator = EventAggregator(clock, "kopf-scheduler", "test")
    return EventRecorder(rest, aggregator, clock, retry_delays=(), **kwargs)  # type: ignore[arg-type]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_twenty_failures_in_a_burst_make_one_event_with_a_series() -> None:
    rest, clock = FakeAPI(), VirtualClock()
    events = recorder(rest, clock)
    for _ in range(20):
        events.record(failure())
    assert await events.close(1.0)
    assert [(c.method, c.path) for c in rest.requests] == [("POST", EVENTS)]
    assert rest.requests[0].body["series"]["count"] == 20
    assert rest.stats.events_aggregated == 19 and rest.stats.events_sent["create"] == 1


async def test_spread_failures_make_a_create_a_series_start_and_periodic_counts() -> None:
    rest, clock = FakeAPI(), VirtualClock()
    events = recorder(rest, clock)
    for _ in range(20):
        events.record(failure())
        await settle()
    calls = [(c.method, c.body.get("series", {}).get("count")) for c in rest.requests]
    assert calls == [("POST", None), ("PATCH", 2)]
    assert rest.requests[1].path == f"{EVENTS}/{rest.requests[0].body['metadata']['name']}"
    assert rest.requests[1].content_type == STRATEGIC_MERGE_PATCH
    clock.advance(30)
    await settle()
    assert [c.body["series"]["count"] for c in rest.requests[2:]] == [20]
    clock.advance(30)
    await settle()
    assert len(rest.requests) == 3  # nothing new to say
    events.record(failure())
    assert await events.close(1.0)  # the last count is written at close
    assert rest.requests[-1].body["series"]["count"] == 21


async def test_full_queue_drops_and_counts() -> None:
    rest, clock = FakeAPI(), VirtualClock()
    gate = rest.hold()  # the API server does not answer
    events = recorder(rest, clock, queue_size=3, workers=1)
    for i in range(10):  # in one go: the worker has not taken any yet
        events.record(failure(pod=f"p{i}"))
    assert rest.stats.events_dropped == 7 and len(events.aggregator.entries) == 3
    await settle()
    events.record(failure(pod="late"))  # one in flight, two queued: room for one more
    events.record(failure(pod="later"))
    assert rest.stats.events_dropped == 8
    gate.set()
    assert await events.close(1.0)
    assert rest.stats.events_sent["create"] == 4


async def test_expired_event_is_created_again() -> None:
    rest, clock = FakeAPI(), VirtualClock()
    rest.script("PATCH", None, Response(404, b"{}"), times=None)
    events = recorder(rest, clock)
    events.record(failure())
    await settle()
    events.record(failure())
    assert await events.close(1.0)
    assert [c.method for c in rest.requests] == ["POST", "PATCH", "POST"]
    assert rest.requests[2].body["series"]["count"] == 2
    assert rest.requests[2].body["metadata"] == rest.requests[0].body["metadata"]


@pytest.mark.parametrize(
    ("status", "retried"), [(0, True), (503, True), (429, True), (403, False), (422, False)]
)
async def test_failures_are_retried_only_when_the_server_may_accept_later(status: int, retried: bool) -> None:
    rest, clock = FakeAPI(), VirtualClock()
    rest.script(None, None, Response(status, b'{"message":"no"}'), times=None)
    aggregator = EventAggregator(clock, "kopf-scheduler", "test")
    events = EventRecorder(rest, aggregator, clock, retry_delays=(0.0, 0.0))  # type: ignore[arg-type]
    events.record(failure())
    assert await events.close(1.0)
    assert len(rest.requests) == (3 if retried else 1)
    assert rest.stats.events_dropped == 1 and not aggregator.entries


async def test_record_outside_a_loop_is_sent_once_a_loop_runs() -> None:
    rest, clock = FakeAPI(), VirtualClock()
    events = recorder(rest, clock)
    await asyncio.to_thread(events.record, failure())  # no running loop in that thread: just queued
    assert rest.requests == [] and events.queue.qsize() == 1
    assert await events.close(1.0)
    assert len(rest.requests) == 1
