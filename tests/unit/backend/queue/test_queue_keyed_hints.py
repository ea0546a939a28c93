"""Keyed hints (``profile_events.KeyedHint``): an event whose matching registrations all have keyed hints
visits only the pool members sharing a key with it, so one that concerns no waiting pod costs no hint
call; anything the keys cannot rule out still gets the full check."""

from __future__ import annotations

from typing import Any

from _queue_kit import (
    NODE_ADD,
    QUEUE,
    SKIP,
    FakeProfile,
    attempt_and_fail,
    make_node,
    make_pod,
    make_queue,
)

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE
from kopf_scheduler.framework.events import Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.pod_info import PodInfo

CLAIM_CHANGE = ClusterEvent(Resource.RESOURCE_CLAIM, Action.ADD | Action.UPDATE)
CLAIM_ADD = ClusterEvent(Resource.RESOURCE_CLAIM, Action.ADD)


class Claim:
    def __init__(self, name: str, *, freed: bool = False) -> None:
        self.name, self.freed = name, freed


class WantsClaim:
    """QUEUE for a pod whose label ``wants`` names the claim (or any pod, when a claim was freed)."""

    def __init__(self) -> None:
        self.calls = 0
        self.pod_key_calls = 0

    def __call__(self, pod: PodInfo, old: Any, new: Claim) -> QueueingHint:
        self.calls += 1
        return QUEUE if new.freed or pod.labels.get("wants") == new.name else SKIP

    def pod_keys(self, pod: PodInfo) -> frozenset[Any]:
        self.pod_key_calls += 1
        wants = pod.labels.get("wants")
        return frozenset({wants}) if wants else frozenset()

    def event_keys(self, old: Any, new: Claim) -> frozenset[Any] | None:
        return None if new.freed else frozenset({new.name})


def queue_with(hint: WantsClaim, *more: tuple[str, ClusterEvent, Any]):
    profile = FakeProfile([("DRA", CLAIM_CHANGE, hint), *more])
    queue, clock = make_queue(profile, initial_backoff=0.0)
    return queue, clock, profile


def waiting(queue, *names: str, wants: dict[str, str] | None = None) -> None:
    for name in names:
        labels = {"wants": (wants or {}).get(name, f"claim-of-{name}")}
        attempt_and_fail(queue, make_pod(name, labels=labels), "DRA")
        assert queue.location(f"uid-{name}") == UNSCHEDULABLE


def test_event_that_concerns_no_waiting_pod_calls_no_hint() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    waiting(queue, *(f"p{i}" for i in range(50)))
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("unrelated"))
    assert hint.calls == 0
    assert queue.counts()["unschedulable"] == 50


def test_event_asks_only_the_pods_sharing_its_key() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    waiting(queue, *(f"p{i}" for i in range(50)), wants={"p3": "c", "p7": "c"})
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("c"))
    assert hint.calls == 2
    assert {queue.location("uid-p3"), queue.location("uid-p7")} <= {ACTIVE, BACKOFF}
    assert queue.counts()["unschedulable"] == 48


def test_event_without_keys_asks_every_pod() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    waiting(queue, "a", "b", "c")
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("x", freed=True))
    assert hint.calls == 3
    assert queue.counts()["unschedulable"] == 0


def test_an_unkeyed_registration_for_the_event_disables_the_shortcut() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint, ("Other", CLAIM_ADD, lambda pod, old, new: SKIP))
    waiting(queue, "a", "b")
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("unrelated"))
    assert hint.calls == 2
    assert queue.counts()["unschedulable"] == 2


def test_other_events_are_unaffected() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint, ("DRA", NODE_ADD, None))
    waiting(queue, "a", "b")
    queue.node_added(make_node("n1"))
    assert hint.calls == 0
    assert queue.counts()["unschedulable"] == 0


def test_a_pod_updated_in_the_pool_is_found_by_its_new_keys() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    waiting(queue, "a", "b")
    old = queue.get("uid-a").pod
    queue.update(old, make_pod("a", labels={"wants": "new-claim"}))
    assert queue.location("uid-a") == UNSCHEDULABLE
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("claim-of-a"))
    assert hint.calls == 0
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("new-claim"))
    assert hint.calls == 1
    assert queue.location("uid-a") in (ACTIVE, BACKOFF)


def test_pods_leaving_the_pool_leave_the_index() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    waiting(queue, "a", "b", wants={"a": "c", "b": "c"})
    queue.delete(queue.get("uid-a").pod)
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("c"))
    assert hint.calls == 1
    assert queue.location("uid-a") is None


def test_gated_pods_are_indexed_too() -> None:
    hint = WantsClaim()
    profile = FakeProfile([("DRA", CLAIM_CHANGE, hint)], gates={"DRA": lambda pod: "no claim yet"})
    queue, _ = make_queue(profile)
    for i in range(20):
        queue.add(make_pod(f"g{i}", labels={"wants": f"claim-of-g{i}"}))
    assert queue.counts()["gated"] == 20
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("unrelated"))
    assert hint.calls == 0
    profile.gates.clear()
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("claim-of-g4"))
    assert hint.calls == 1
    assert queue.location("uid-g4") == ACTIVE
    assert queue.location("uid-g5") == GATED


def test_events_seen_while_in_flight_still_reach_the_hint() -> None:
    hint = WantsClaim()
    queue, _, _ = queue_with(hint)
    queue.add(make_pod("p", labels={"wants": "c"}))
    qp = queue.pop_nowait()
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("c"))  # the pool is empty
    qp.unschedulable_plugins.add("DRA")
    assert queue.add_unschedulable_if_not_present(qp) in (ACTIVE, BACKOFF)
    assert hint.calls == 1


def test_a_new_profile_reindexes_the_pool() -> None:
    first, second = WantsClaim(), WantsClaim()
    queue, _, _ = queue_with(first)
    waiting(queue, "a", wants={"a": "c"})
    queue.set_framework_lookup({"default-scheduler": FakeProfile([("DRA", CLAIM_CHANGE, second)])}.get)
    waiting(queue, "b")
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("other"))
    assert (first.calls, second.calls) == (0, 0)
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("c"))
    assert (first.calls, second.calls) == (0, 1)
    assert queue.location("uid-a") in (ACTIVE, BACKOFF)


def test_a_pod_whose_profile_went_away_is_always_a_candidate() -> None:
    hint = WantsClaim()
    kept = FakeProfile([("DRA", CLAIM_CHANGE, hint)])
    profiles = {"default-scheduler": kept, "other": FakeProfile([("DRA", CLAIM_CHANGE, hint)])}
    queue, _ = make_queue(profiles=profiles, initial_backoff=0.0)
    attempt_and_fail(queue, make_pod("a", scheduler="other", labels={"wants": "c"}), "DRA")
    attempt_and_fail(queue, make_pod("b", labels={"wants": "d"}), "DRA")
    queue.set_framework_lookup({"default-scheduler": kept}.get)
    waiting(queue, "c")  # the kept profile is known again
    queue.move_all_to_active_or_backoff(CLAIM_CHANGE, None, Claim("unrelated"))
    assert queue.location("uid-a") in (ACTIVE, BACKOFF)  # no profile: retried rather than stranded
    assert queue.location("uid-b") == UNSCHEDULABLE
    assert hint.calls == 0
