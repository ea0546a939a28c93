"""A binding answered as done that no watch event confirms: after ``confirm_timeout`` the pod is read and
settled. Still unbound: forgotten (its room on the node freed), reported, queued again; bound: taken as
the late watch event; gone: removed. Before the timeout nothing is read. Virtual time throughout."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.binding_confirmation import BindingConfirmation
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = "kopf-scheduler"
TIMEOUT = 30.0


class _Reads:
    def __init__(self) -> None:
        self.answer: dict[str, Any] | APIError | None = None
        self.asked: list[str] = []

    async def __call__(self, pod: PodInfo) -> dict[str, Any] | None:
        self.asked.append(pod.key)
        if isinstance(self.answer, APIError):
            raise self.answer
        return self.answer


POD = make_pod().name("p").uid("u1").scheduler_name(PROFILE).req(cpu="3").obj()


async def _assumed() -> tuple[Scheduler, FakeAPI, _Reads, BindingConfirmation, VirtualClock]:
    """One 4-CPU node and a 3-CPU pod whose binding was answered as done: it is assumed on the node."""
    clock = VirtualClock()
    client = FakeAPI()
    scheduler = Scheduler(client, clock=clock, confirm_timeout=TIMEOUT)
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    scheduler.add_node(make_node().name("n1").capacity(cpu="4", pods=10).obj())
    scheduler.add_pod(POD)
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    await scheduler.schedule_one_async(qp)
    await scheduler.wait_for_bindings()
    assert client.bound == [("default/p", "n1")] and scheduler.cache.is_assumed("u1")
    reads = _Reads()
    return scheduler, client, reads, BindingConfirmation(scheduler, reads, interval=1.0), clock


def _requested_cpu(scheduler: Scheduler) -> int:
    info = scheduler.cache.node_info("n1")
    assert info is not None
    return info.requested.get("cpu", 0)


async def test_nothing_is_read_before_the_timeout() -> None:
    scheduler, _, reads, confirmation, clock = await _assumed()
    clock.advance(TIMEOUT)  # overdue only strictly after the deadline
    assert await confirmation.check() == 0
    assert reads.asked == [] and scheduler.cache.is_assumed("u1")


async def test_a_pod_still_unbound_is_forgotten_reported_and_queued_again() -> None:
    scheduler, client, reads, confirmation, clock = await _assumed()
    assert _requested_cpu(scheduler) == 3000
    reads.answer = POD  # the API server's record: no nodeName
    clock.advance(TIMEOUT + 1)
    assert await confirmation.check() == 1
    assert not scheduler.cache.is_assumed("u1") and scheduler.cache.get_pod("u1") is None
    assert _requested_cpu(scheduler) == 0  # its room on n1 is free again
    [(key, reason, message)] = client.failures
    assert (key, reason) == ("default/p", "SchedulerError")
    assert (
        message
        == "binding to n1 was answered as done, but the pod is still unbound 30s later; scheduling it again"
    )
    qp = scheduler.queue.pop_nowait()
    assert qp is not None and qp.pod.uid == "u1"


async def test_a_pod_bound_meanwhile_is_taken_as_the_late_watch_event() -> None:
    scheduler, client, reads, confirmation, clock = await _assumed()
    reads.answer = {**POD, "spec": {**POD["spec"], "nodeName": "n1"}}
    clock.advance(TIMEOUT + 1)
    assert await confirmation.check() == 1
    assert scheduler.cache.get_pod("u1") is not None and not scheduler.cache.is_assumed("u1")
    assert _requested_cpu(scheduler) == 3000 and client.failures == []
    assert scheduler.queue.pop_nowait() is None


async def test_a_pod_gone_or_recreated_is_removed() -> None:
    scheduler, client, reads, confirmation, clock = await _assumed()
    reads.answer = {**POD, "metadata": {**POD["metadata"], "uid": "u2"}}  # same name, a new pod
    clock.advance(TIMEOUT + 1)
    assert await confirmation.check() == 1
    assert scheduler.cache.get_pod("u1") is None and _requested_cpu(scheduler) == 0
    assert client.failures == []


async def test_a_failed_read_is_tried_again_next_round() -> None:
    scheduler, _, reads, confirmation, clock = await _assumed()
    reads.answer = APIError(0, "GET: timed out")
    clock.advance(TIMEOUT + 1)
    assert await confirmation.check() == 0
    assert scheduler.cache.is_assumed("u1")
    reads.answer = POD
    assert await confirmation.check() == 1
    assert reads.asked == ["default/p", "default/p"]
