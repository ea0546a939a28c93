"""Nominated pods: bookkeeping on add, update, delete, and the room a deleted nomination frees."""

from __future__ import annotations

from _queue_kit import ASSIGNED_POD_DELETE, FakeProfile, attempt_and_fail, gates_gate, make_pod, make_queue

from kopf_scheduler.backend.queue import BACKOFF, UNSCHEDULABLE, Nominator


def _names(pods):
    return sorted(p.name for p in pods)


def test_added_pod_with_nominated_node_is_nominated():
    queue, _ = make_queue(FakeProfile())
    queue.add(make_pod("a", nominated="n1"))
    queue.add(make_pod("b", nominated="n1"))
    queue.add(make_pod("c"))
    assert _names(queue.nominated_pods_for_node("n1")) == ["a", "b"]
    assert queue.nominated_pods_for_node("n2") == []


def test_add_nominated_pod_overrides_and_clears():
    queue, _ = make_queue(FakeProfile())
    pod = make_pod("a", nominated="n1")
    queue.add_nominated_pod(pod, "n2")
    assert (_names(queue.nominated_pods_for_node("n1")), _names(queue.nominated_pods_for_node("n2"))) == (
        [],
        ["a"],
    )
    queue.add_nominated_pod(pod)  # from the pod's status
    assert _names(queue.nominated_pods_for_node("n1")) == ["a"]
    queue.add_nominated_pod(pod, "")
    assert len(queue.nominator) == 0


def test_update_moves_and_keeps_nominations():
    queue, _ = make_queue(FakeProfile())
    v1 = make_pod("a", nominated="n1")
    queue.add(v1)
    v2 = make_pod("a", nominated="n2")
    queue.update(v1, v2)
    assert (queue.nominated_pods_for_node("n1"), queue.nominated_pods_for_node("n2")) == ([], [v2])
    # A nomination made in memory survives an update that does not mention any node.
    queue.add(make_pod("b"))
    queue.add_nominated_pod(make_pod("b"), "n3")
    queue.update(make_pod("b"), make_pod("b", labels={"x": "y"}))
    assert [p.labels for p in queue.nominated_pods_for_node("n3")] == [{"x": "y"}]


def test_delete_removes_nomination():
    queue, _ = make_queue(FakeProfile())
    pod = make_pod("a", nominated="n1")
    queue.add(pod)
    queue.delete_nominated_pod_if_exists(pod)
    assert queue.nominated_pods_for_node("n1") == []
    queue.add_nominated_pod(pod)
    queue.delete(pod)
    assert queue.nominated_pods_for_node("n1") == [] and len(queue) == 0


def test_deleting_a_nominated_pod_requeues_lower_or_equal_priority_pods():
    queue, _ = make_queue(FakeProfile([("A", ASSIGNED_POD_DELETE, None)]))
    for name, priority in (("low", 1), ("equal", 5), ("high", 9)):
        attempt_and_fail(queue, make_pod(name, priority=priority), "A")
    nominated = make_pod("nominated", priority=5, nominated="n1")
    queue.add(nominated)
    queue.delete(nominated)
    locations = {n: queue.location(f"uid-{n}") for n in ("low", "equal", "high")}
    assert locations == {"low": BACKOFF, "equal": BACKOFF, "high": UNSCHEDULABLE}


def test_changed_nomination_requeues_lower_or_equal_priority_pods():
    queue, _ = make_queue(FakeProfile([("A", ASSIGNED_POD_DELETE, None)]))
    attempt_and_fail(queue, make_pod("low", priority=1), "A")
    old = make_pod("nominated", priority=5, nominated="n1")
    queue.add(old)
    queue.update(old, make_pod("nominated", priority=5, nominated="n2"))
    assert queue.location("uid-low") == BACKOFF


def test_bound_pod_frees_nothing():
    queue, _ = make_queue(FakeProfile([("A", ASSIGNED_POD_DELETE, None)]))
    attempt_and_fail(queue, make_pod("low", priority=1), "A")
    nominated = make_pod("nominated", priority=5, nominated="n1")
    queue.add(nominated)
    queue.delete(nominated, bound=True)
    assert queue.location("uid-low") == UNSCHEDULABLE


def test_nominator_invariants():
    nominator = Nominator()
    a, b = make_pod("a"), make_pod("b")
    nominator.add(a, "n1")
    nominator.add(b, "n1")
    nominator.add(a, "n2")
    assert (nominator.node_of("uid-a"), _names(nominator.pods_on("n1")), _names(nominator.pods_on("n2"))) == (
        "n2",
        ["b"],
        ["a"],
    )
    nominator.delete("uid-b")
    nominator.delete("uid-b")
    assert nominator.pods_on("n1") == [] and "n1" not in nominator._pods_on


def test_gated_pod_is_nominated_on_arrival():
    """Upstream v1.37's ``addPod`` records the nomination before PreEnqueue, gated or not."""
    queue, _ = make_queue(FakeProfile(gates={"SchedulingGates": gates_gate}))
    queue.add(make_pod("a", nominated="n1", gates=["example.com/wait"]))
    assert _names(queue.nominated_pods_for_node("n1")) == ["a"]
