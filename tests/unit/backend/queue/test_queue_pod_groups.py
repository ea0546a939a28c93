"""Pod groups as queue entities (GenericWorkload): members wait for their PodGroup, form one entity popped
whole, wait pending while it is in flight, and come back together when the attempt is reported; with the
gate off they are queued one by one as before. GangScheduling's own PreEnqueue and hint gate the entity."""

from __future__ import annotations

from typing import Any

from _queue_kit import PROFILE, FakeProfile, make_queue

from kopf_scheduler.backend.cache.pod_group_states import PodGroupStates
from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT
from kopf_scheduler.backend.queue.pod_groups import INCOMPLETE, PENDING, QueuedPodGroupInfo
from kopf_scheduler.framework.events import EVENT_UNSCHEDULED_POD_ADD
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, parse_workload_pod_group
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.gang_scheduling import GangScheduling


def member(name: str, group: str = "g", *, priority: int = 0) -> PodInfo:
    raw = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "priority": priority,
            "schedulerName": PROFILE,
            "containers": [{"name": "c"}],
            "schedulingGroup": {"podGroupName": group},
        },
    }
    return PodInfo(raw)


def solo(name: str, *, priority: int = 0) -> PodInfo:
    raw = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"priority": priority, "schedulerName": PROFILE, "containers": [{"name": "c"}]},
    }
    return PodInfo(raw)


def group(name: str = "g", min_count: int | None = 3, priority: int | None = None) -> WorkloadPodGroup:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    }
    if priority is not None:
        spec["priority"] = priority
    return parse_workload_pod_group({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def gang_queue(**options: Any) -> tuple[Any, Any, PodGroupStates]:
    """A queue whose profile gates with the real GangScheduling PreEnqueue (over the cache's group states)
    and registers its UnscheduledPodAdd hint."""
    states = PodGroupStates()
    plugin = GangScheduling(None, states)  # type: ignore[arg-type]

    def gate(pod: PodInfo) -> str | None:
        status = plugin.pre_enqueue(pod)
        return None if status is None else status.reasons[0]

    hint = next(r.hint for r in plugin.events_to_register() if r.event == EVENT_UNSCHEDULED_POD_ADD)
    profile = FakeProfile(
        [("GangScheduling", EVENT_UNSCHEDULED_POD_ADD, hint)], gates={"GangScheduling": gate}
    )
    queue, clock = make_queue(profile, generic_workload=True, **options)
    return queue, clock, states


def arrive(queue: Any, states: PodGroupStates, *pods: PodInfo) -> None:
    """Pods seen by the scheduler: the cache first, then the queue (as upstream's event handler)."""
    for pod in pods:
        states.add_pod(pod)
        queue.add(pod)


def observe(queue: Any, states: PodGroupStates, pg: WorkloadPodGroup) -> None:
    states.set_pod_group(pg)
    queue.add_pod_group(pg)


def test_gate_off_members_are_queued_one_by_one():
    queue, _ = make_queue(FakeProfile())
    queue.add(member("a"))
    queue.add(member("b"))
    queue.add_pod_group(group())
    assert queue.counts()["active"] == 2
    popped = queue.pop_nowait()
    assert not isinstance(popped, QueuedPodGroupInfo)
    assert popped.pod.name == "a"


def test_members_without_their_pod_group_wait_incomplete_without_pre_enqueue():
    profile = FakeProfile()
    queue, _ = make_queue(profile, generic_workload=True)
    queue.add(member("a"))
    queue.add(member("b"))
    assert queue.location("uid-a") == INCOMPLETE
    assert queue.counts() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
        "incomplete": 2,
        "pending": 0,
    }
    assert queue.pop_nowait() is None
    assert profile.pre_enqueue_runs == 0
    assert sorted(qp.pod.name for qp in queue.pending()) == ["a", "b"]


def test_below_min_count_the_group_is_gated_and_the_last_member_releases_it_whole():
    queue, _, states = gang_queue()
    arrive(queue, states, member("a"), member("b"))
    observe(queue, states, group(min_count=3))
    assert queue.location("uid-a") == GATED
    assert queue.entity_counts() == {("gated", "podgroup"): 1}
    assert queue.counts()["gated"] == 2  # its pods
    assert queue.pop_nowait() is None

    arrive(queue, states, member("c"))
    assert queue.location("uid-c") == ACTIVE
    entity = queue.pop_nowait()
    assert isinstance(entity, QueuedPodGroupInfo)
    assert [m.pod.name for m in entity.members] == ["a", "b", "c"]
    assert [p.name for p in entity.unscheduled_pods()] == ["a", "b", "c"]
    assert sorted(queue.in_flight()) == ["uid-a", "uid-b", "uid-c"]
    assert queue.location("uid-b") == IN_FLIGHT
    assert all(m.attempts == 1 for m in entity.members)
    assert queue.pop_nowait() is None


def test_the_pod_group_arriving_last_forms_the_entity():
    queue, _, states = gang_queue()
    arrive(queue, states, member("a"), member("b"), member("c"))
    assert queue.counts()["incomplete"] == 3
    observe(queue, states, group(min_count=3))
    assert queue.counts()["incomplete"] == 0
    assert queue.entity_counts() == {("active", "podgroup"): 1}
    entity = queue.pop_nowait()
    assert [m.pod.name for m in entity.members] == ["a", "b", "c"]


def test_the_entity_sorts_by_the_pod_groups_priority():
    queue, clock = make_queue(FakeProfile(), generic_workload=True)
    queue.add(solo("middle", priority=50))
    clock.advance(1)
    queue.add_pod_group(group(min_count=None, priority=100))
    queue.add(member("m", priority=0))
    assert isinstance(queue.pop_nowait(), QueuedPodGroupInfo)
    assert queue.pop_nowait().pod.name == "middle"


def test_members_are_ordered_by_priority_then_arrival():
    queue, clock = make_queue(FakeProfile(), generic_workload=True)
    queue.add_pod_group(group(min_count=None))
    queue.add(member("first"))
    clock.advance(1)
    queue.add(member("high", priority=10))
    clock.advance(1)
    queue.add(member("last"))
    entity = queue.pop_nowait()
    assert [m.pod.name for m in entity.members] == ["high", "first", "last"]


def test_failed_members_and_newcomers_wait_pending_then_come_back_as_one_entity_in_backoff():
    queue, clock, states = gang_queue()
    observe(queue, states, group(min_count=2))
    arrive(queue, states, member("a"), member("b"))
    entity = queue.pop_nowait()
    arrive(queue, states, member("late"))
    assert queue.location("uid-late") == PENDING
    for m in entity.members:
        m.unschedulable_plugins.add("NodeResourcesFit")
        assert queue.add_unschedulable_if_not_present(m) == PENDING
    assert queue.counts()["pending"] == 3
    assert queue.in_flight() == []

    status = Status(Code.UNSCHEDULABLE, ("pod group is unschedulable",))
    assert queue.add_attempted_pod_group_if_needed(entity, status) == BACKOFF
    assert queue.counts() == {
        "active": 0,
        "backoff": 3,
        "unschedulable": 0,
        "gated": 0,
        "incomplete": 0,
        "pending": 0,
    }
    assert queue.entity_counts() == {("backoff", "podgroup"): 1}
    assert queue.location("uid-late") == BACKOFF
    clock.advance(10)
    queue.flush_backoff_completed()
    again = queue.pop_nowait()
    assert again is entity
    assert sorted(m.pod.name for m in again.members) == ["a", "b", "late"]
    assert again.attempts == 2


def test_a_successful_attempt_requeues_members_left_at_once_keeping_the_timestamp_after_failures():
    queue, clock, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"), member("b"))
    entity = queue.pop_nowait()
    stamp = entity.timestamp
    clock.advance(5)
    bound, failed = entity.members
    queue.done(bound.pod.uid)  # bound: its binding cycle reports nothing to the queue
    failed.unschedulable_plugins.add("NodeResourcesFit")
    queue.add_unschedulable_if_not_present(failed)
    assert queue.add_attempted_pod_group_if_needed(entity, None) == ACTIVE
    assert entity.timestamp == stamp
    assert [m.pod.name for m in queue.pop_nowait().members] == ["b"]


def test_an_attempt_that_leaves_no_member_ends_the_entity():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"))
    entity = queue.pop_nowait()
    queue.done("uid-a")
    assert queue.add_attempted_pod_group_if_needed(entity, None) is None
    assert len(queue) == 0
    arrive(queue, states, member("b"))  # the group is no longer in flight: a new entity
    assert queue.location("uid-b") == ACTIVE


def test_deleting_members_and_the_pod_group():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"), member("b"))
    queue.delete(member("a"))
    assert queue.location("uid-a") is None
    assert queue.location("uid-b") == ACTIVE
    queue.delete_pod_group("default", "g")
    assert queue.location("uid-b") == INCOMPLETE
    assert queue.counts()["active"] == 0
    queue.delete(member("b"))
    assert queue.counts()["incomplete"] == 0
    assert len(queue) == 0


def test_activating_a_member_activates_its_whole_group():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"), member("b"))
    entity = queue.pop_nowait()
    for m in entity.members:
        m.unschedulable_plugins.add("Unregistered")
        queue.add_unschedulable_if_not_present(m)
    assert queue.add_attempted_pod_group_if_needed(entity, Status(Code.UNSCHEDULABLE, ("x",))) == BACKOFF
    queue.activate([member("b")])
    assert queue.location("uid-a") == ACTIVE


def test_a_member_updated_in_the_pool_is_checked_against_the_hints():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=3))
    arrive(queue, states, member("a"), member("b"))
    assert queue.location("uid-b") == GATED
    updated = member("b")
    queue.update(member("b"), updated)
    assert queue.location("uid-b") == GATED
    assert {qp.pod.name: qp.pod for qp in queue.pending()}["b"] is updated
    assert queue.entity_counts() == {("gated", "podgroup"): 1}


def test_a_member_deleted_while_in_flight_is_not_requeued():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"), member("b"))
    entity = queue.pop_nowait()
    queue.delete(member("a"))
    a, b = entity.members
    for m in (a, b):
        m.unschedulable_plugins.add("NodeResourcesFit")
        queue.add_unschedulable_if_not_present(m)
    assert queue.location("uid-a") is None
    assert queue.location("uid-b") == PENDING
    assert queue.add_attempted_pod_group_if_needed(entity, Status(Code.ERROR, ("boom",))) == BACKOFF
    assert entity.last_failure_was_error
    assert [m.pod.name for m in entity.members] == ["b"]
    assert queue.location("uid-b") == BACKOFF


def test_a_rejected_group_waits_out_its_whole_backoff_longer_the_larger_it_is():
    queue, clock, states = gang_queue(max_backoff=10.0)
    observe(queue, states, group(min_count=None))
    members = [member(f"m{i}") for i in range(4)]
    arrive(queue, states, *members)
    for attempt in range(1, 6):
        entity = queue.pop_nowait()
        assert isinstance(entity, QueuedPodGroupInfo)
        for m in entity.members:
            m.unschedulable_plugins.add("NodeResourcesFit")
            queue.add_unschedulable_if_not_present(m)
        queue.add_attempted_pod_group_if_needed(entity, Status(Code.UNSCHEDULABLE, ("x",)))
        # not popped before its backoff ends, though activeQ is empty (upstream's error backoff heap)
        assert queue.pop_nowait() is None
        expected = min(2 ** (attempt - 1), 10.0 * 2)  # the longest backoff times sqrt(4 members)
        assert queue.next_backoff_expiry() == clock.now() + expected + 1.0
        clock.advance(expected + 1.0)
        queue.flush_backoff_completed()


def test_a_success_starts_the_groups_backoff_count_again():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=None))
    arrive(queue, states, member("a"), member("b"))
    entity = queue.pop_nowait()
    entity.members[0].unschedulable_plugins.add("NodeResourcesFit")
    queue.done("uid-b")
    queue.add_unschedulable_if_not_present(entity.members[0])
    assert queue.add_attempted_pod_group_if_needed(entity, None) == ACTIVE
    assert entity.attempts == 0


def test_members_count_as_waiting_in_the_queue_wherever_they_wait():
    queue, _, states = gang_queue()
    arrive(queue, states, member("a"))
    assert "uid-a" in queue  # incomplete
    observe(queue, states, group(min_count=None))
    assert "uid-a" in queue  # in its entity
    queue.pop_nowait()
    assert "uid-a" not in queue  # in flight
    arrive(queue, states, member("b"))
    assert "uid-b" in queue  # pending
    queue.delete(member("b"))
    assert "uid-b" not in queue
    assert "uid-other" not in queue


def test_the_metrics_count_a_groups_pods_and_the_group_as_one_entity():
    queue, _, states = gang_queue()
    observe(queue, states, group(min_count=3))
    arrive(queue, states, member("a"), member("b"))
    assert queue.counts()["gated"] == 2  # scheduler_pending_pods counts pods
    assert queue.entity_counts() == {("gated", "podgroup"): 1}
    arrive(queue, states, member("c"))
    assert queue.counts()["active"] == 3
    assert queue.entity_counts() == {("active", "podgroup"): 1}
    assert queue.incoming.entered_groups == {"gated", "active"}
    assert queue.incoming.entered == set()
    # the group entered the pool with one pod, and activeQ with three
    assert queue.incoming.pods[("active", "UnscheduledPodAdd")] == 3
    assert queue.incoming.group_entities[("active", "UnscheduledPodAdd")] == 1
    assert dict(queue.incoming.entities) == {}


def test_a_member_of_a_group_in_flight_waits_even_after_another_group_was_popped():
    queue, _, states = gang_queue()
    observe(queue, states, group("first", min_count=None))
    observe(queue, states, group("second", min_count=None))
    arrive(queue, states, member("a", "first"))
    first = queue.pop_nowait()
    arrive(queue, states, member("x", "second"))
    assert queue.pop_nowait() is not None  # the second group, while the first waits on its report
    arrive(queue, states, member("b", "first"))
    assert queue.location("uid-b") == PENDING
    queue.done("uid-a")
    assert queue.add_attempted_pod_group_if_needed(first, None) == ACTIVE
    assert [m.pod.name for m in queue.pop_nowait().members] == ["b"]
