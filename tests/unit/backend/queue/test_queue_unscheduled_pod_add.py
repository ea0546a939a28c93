"""A new pending pod is an ``UnscheduledPodAdd`` event for the pods in the pool (a gang waiting for its
members), sent only when a plugin registered it."""

from __future__ import annotations

from typing import Any

from _queue_kit import FakeProfile, make_pod, make_queue

from kopf_scheduler.backend.queue import ACTIVE, GATED
from kopf_scheduler.framework.events import (
    EVENT_UNSCHEDULED_POD_ADD,
    Action,
    ClusterEvent,
    QueueingHint,
    Resource,
)
from kopf_scheduler.framework.pod_info import PodInfo

POD_ADD = ClusterEvent(Resource.POD, Action.ADD)


def _quorum(pods: list[str]) -> Any:
    """Holds back every pod until three pods arrived (what Coscheduling's PreEnqueue does for a gang)."""
    return lambda pod: None if len(pods) >= 3 else "waiting for the gang"


def _queue(registered: bool) -> tuple[Any, list[str], FakeProfile]:
    arrived: list[str] = []

    def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.QUEUE

    registrations = [("Gang", POD_ADD, hint)] if registered else []
    profile = FakeProfile(registrations, gates={"Gang": _quorum(arrived)})
    queue, _ = make_queue(profile)
    return queue, arrived, profile


def test_the_last_member_to_arrive_releases_the_others() -> None:
    queue, arrived, _ = _queue(registered=True)
    for name in ("a", "b"):
        arrived.append(name)
        queue.add(make_pod(name))
    assert [queue.location(f"uid-{n}") for n in ("a", "b")] == [GATED, GATED]
    arrived.append("c")
    queue.add(make_pod("c"))
    assert [queue.location(f"uid-{n}") for n in ("a", "b", "c")] == [ACTIVE, ACTIVE, ACTIVE]


def test_without_a_registration_the_pool_is_left_alone() -> None:
    queue, arrived, profile = _queue(registered=False)
    for name in ("a", "b", "c"):
        arrived.append(name)
        queue.add(make_pod(name))
    assert [queue.location(f"uid-{n}") for n in ("a", "b", "c")] == [GATED, GATED, ACTIVE]
    assert profile.pre_enqueue_runs == 3  # nobody re-ran the gated pods' PreEnqueue


def test_the_event_is_the_upstream_one() -> None:
    assert ClusterEvent(Resource.UNSCHEDULED_POD, Action.ADD) == EVENT_UNSCHEDULED_POD_ADD
    assert EVENT_UNSCHEDULED_POD_ADD.label == "UnscheduledPodAdd"
    assert POD_ADD.matches(EVENT_UNSCHEDULED_POD_ADD)
