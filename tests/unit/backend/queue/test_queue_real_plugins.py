"""The queue with a real framework: PrioritySort orders it, SchedulingGates gates and releases pods."""

from __future__ import annotations

from _queue_kit import START, make_node, make_pod

from kopf_scheduler.backend.queue import ACTIVE, GATED, SchedulingQueue
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.interface import FilterPlugin
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.plugins.priority_sort import PrioritySort
from kopf_scheduler.plugins.scheduling_gates import SchedulingGates
from kopf_scheduler.testing.framework import make_framework


def _framework() -> Framework:
    sort, gates = PrioritySort(), SchedulingGates()
    return make_framework(profile_name="default-scheduler", queue_sort=sort, pre_enqueue=[gates])


def test_real_priority_sort_and_scheduling_gates():
    framework = _framework()
    clock = VirtualClock(START)
    queue = SchedulingQueue(framework.queue_sort, {"default-scheduler": framework}.get, clock)
    gated = make_pod("gated", priority=100, gates=["example.com/quota"])
    queue.add(gated)
    clock.advance(1)
    queue.add(make_pod("low", priority=1))
    queue.add(make_pod("high", priority=50))
    assert queue.location("uid-gated") == GATED
    assert queue.get("uid-gated").gated_by == "SchedulingGates"

    queue.update(gated, make_pod("gated", priority=100, gates=["example.com/quota", "example.com/other"]))
    assert queue.location("uid-gated") == GATED

    queue.update(gated, make_pod("gated", priority=100))
    assert queue.location("uid-gated") == ACTIVE
    assert queue.counts() == {
        "active": 3,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
        "incomplete": 0,
        "pending": 0,
    }
    assert [queue.pop_nowait().pod.name for _ in range(3)] == ["gated", "high", "low"]


def test_rejecting_plugin_without_registered_events_is_woken_by_any_event():
    class Silent(FilterPlugin):
        """A filter that says nothing about what may help the pods it rejects."""

        name = "Silent"

        def filter(self, state, pod, node):
            return None

    framework = _framework()
    framework.plugins["Silent"] = Silent()
    queue = SchedulingQueue(framework.queue_sort, {"default-scheduler": framework}.get, VirtualClock(START))
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    qp.unschedulable_plugins.add("Silent")
    assert queue.add_unschedulable_if_not_present(qp) == "unschedulable"
    queue.node_added(make_node("n1"))
    assert queue.location("uid-p") == "backoff"
