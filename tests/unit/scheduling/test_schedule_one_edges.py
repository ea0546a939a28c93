"""Edge cases of one scheduling cycle as kube-scheduler's ``schedule_one.go`` handles them: a cluster
without nodes, and pre-filter rejections (which plugins the pod then waits on, and the message)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue import BACKOFF
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import PreFilterPlugin, PreFilterResult
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable, unschedulable
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = "kopf-scheduler"


def _scheduler(*nodes: str) -> tuple[Scheduler, FakeAPI]:
    client = FakeAPI()
    scheduler = Scheduler(client)
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    for name in nodes:
        scheduler.add_node(make_node().name(name).obj())
    return scheduler, client


def _attempt(scheduler: Scheduler, pod: dict[str, Any]) -> Any:
    scheduler.add_pod(pod)
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    return qp


# -- no nodes -------------------------------------------------------------------------------------------
def test_no_nodes_is_upstreams_error_without_post_filter(caplog: pytest.LogCaptureFixture) -> None:
    scheduler, client = _scheduler()
    framework = scheduler.profiles[PROFILE]
    assert framework.post_filter, "the default profile has DefaultPreemption"

    async def must_not_run(*args: Any) -> Any:
        raise AssertionError("no post-filter runs when there are no nodes")

    framework.run_post_filter_async = must_not_run  # type: ignore[method-assign]
    pod = make_pod().name("p").scheduler_name(PROFILE).nominated("gone").obj()
    with caplog.at_level(logging.DEBUG, logger="kopf_scheduler"):
        qp = _attempt(scheduler, pod)
    # Unschedulable (the condition's reason), the bare message, the nomination cleared
    assert client.failures == [("default/p", "Unschedulable", "no nodes available to schedule pods")]
    assert client.nominated == [("default/p", "")]
    # no plugin rejected the pod: it retries after backoff rather than waiting for an event
    assert qp.unschedulable_plugins == set() and qp.pending_plugins == set()
    assert not qp.last_failure_was_error
    assert scheduler.queue.location(pod["metadata"]["uid"]) == BACKOFF
    assert "post-filter" not in caplog.text


async def test_the_pod_retries_after_backoff_and_takes_a_node_added_meanwhile() -> None:
    clock = VirtualClock()
    client = FakeAPI()
    scheduler = Scheduler(client, clock=clock)
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    _attempt(scheduler, make_pod().name("p").scheduler_name(PROFILE).obj())
    scheduler.add_node(make_node().name("n1").obj())
    assert scheduler.queue.pop_nowait() is None  # still backing off
    expiry = scheduler.queue.next_backoff_expiry()
    assert expiry is not None and 1.0 <= expiry - clock.now() <= 2.0  # the first backoff: 1 s (+ window)
    clock.set(expiry)
    scheduler.queue.flush_due()
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()
    assert client.bound == [("default/p", "n1")]


# -- pre-filter rejections ------------------------------------------------------------------------------
class _Pre(PreFilterPlugin):
    def __init__(self, name: str, status: Status | None = None, nodes: list[str] | None = None) -> None:
        self.name = name
        self.status = status
        self.nodes = None if nodes is None else frozenset(nodes)
        self.ran = False

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any
    ) -> tuple[PreFilterResult, Status | None]:
        self.ran = True
        return PreFilterResult(self.nodes), self.status


@pytest.mark.parametrize(
    ("plugins", "message", "rejectors", "ran"),
    [
        (
            [_Pre("A", unschedulable("a says no")), _Pre("B", nodes=["n1"]), _Pre("C")],
            "0/2 nodes are available: a says no.",
            {"A", "B"},
            "ABC",
        ),
        (
            [_Pre("A", unschedulable("a says no")), _Pre("B", unschedulable("b says no"))],
            "0/2 nodes are available: b says no.",
            {"B"},
            "AB",
        ),
        (
            [_Pre("A", nodes=["n1"]), _Pre("B", nodes=["n2"])],
            "0/2 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously.",
            {"A", "B"},
            "AB",
        ),
        (
            [_Pre("A", nodes=["n1"]), _Pre("B", unresolvable("b never fits"))],
            "0/2 nodes are available: b never fits.",
            {"B"},
            "AB",
        ),
    ],
    ids=["unschedulable-runs-the-rest", "last-unschedulable-wins", "empty-intersection", "unresolvable"],
)
def test_pre_filter_rejection_message_and_rejecting_plugins(
    plugins: list[_Pre], message: str, rejectors: set[str], ran: str
) -> None:
    scheduler, client = _scheduler("n1", "n2")
    framework = scheduler.profiles[PROFILE]
    framework.pre_filter = list(plugins)
    framework.post_filter = []
    qp = _attempt(scheduler, make_pod().name("p").scheduler_name(PROFILE).obj())
    assert client.failures == [("default/p", "Unschedulable", message)]
    assert client.nominated == []  # the nomination left as it was
    assert qp.unschedulable_plugins == rejectors
    assert "".join(p.name for p in plugins if p.ran) == ran
