"""What the scheduler leaves behind when an attempt fails after a node was chosen (upstream's
``schedule_one.go``: ``handleBindingCycleError`` and the failure paths of ``schedulingCycle``).

The real scheduler, queue, cache and default profile, on a virtual clock; only the API server is a fake.
Every case checks the end state: whether the pod is still counted on its node, whether the room it held
is offered to the pod that waited for it, where the failed pod waits (backoff, the unschedulable pool, or
nowhere), what was reported, and that every reserve was undone.

One node ``n1`` with 2 CPUs; ``p`` asks for 2, ``q`` (lower priority, so tried second) for 1: while ``p``
is assumed, ``q`` fits nowhere and waits for an event that frees room.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import DROPPED, Answer, FakeAPI
from fake_api import status as api_status

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue import BACKOFF, UNSCHEDULABLE
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import PermitPlugin, ReservePlugin
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import WAIT, Status, error, unschedulable
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = "kopf-scheduler"


class _Reserve(ReservePlugin):
    def __init__(self, name: str, log: list[tuple[str, str, str, str]], status: Status | None = None) -> None:
        self.name = name
        self.log = log
        self.status = status

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.log.append((self.name, "reserve", pod.name, node_name))
        return self.status

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append((self.name, "unreserve", pod.name, node_name))


class _Permit(PermitPlugin):
    def __init__(self, name: str, status: Status | None, timeout: float = 0.0) -> None:
        self.name = name
        self.status = status
        self.timeout = timeout

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return (self.status, self.timeout) if pod.name == "p" else (None, 0.0)


def _setup() -> tuple[Scheduler, FakeAPI, VirtualClock]:
    api, clock = FakeAPI(), VirtualClock()
    scheduler = Scheduler(api, clock=clock)
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    scheduler.add_node(make_node().name("n1").capacity(cpu="2", memory="8Gi", pods=10).obj())
    return scheduler, api, clock


def _pod(name: str, cpu: str, priority: int) -> dict[str, Any]:
    return make_pod().name(name).uid(name).scheduler_name(PROFILE).req(cpu=cpu).priority(priority).obj()


P, Q = _pod("p", "2", 10), _pod("q", "1", 0)
BINDING_OF_P = "/api/v1/namespaces/default/pods/p/binding"


def _answer(code: int, message: str) -> Answer:
    """The binding's answer: a Status with ``code``, or no answer at all (0)."""
    return DROPPED if code == 0 else api_status(code, message)


def _cpu(scheduler: Scheduler) -> int:
    info = scheduler.cache.node_info("n1")
    assert info is not None
    return info.requested.get("cpu", 0)


def _try_both(scheduler: Scheduler) -> None:
    """One attempt each for ``p`` then ``q``, eagerly (binding cycles start only when the test awaits)."""
    scheduler.add_pod(P)
    scheduler.add_pod(Q)
    for name in ("p", "q"):
        qp = scheduler.queue.pop_nowait()
        assert qp is not None and qp.pod.name == name
        scheduler.schedule_one(qp)


def _add_to_profile(scheduler: Scheduler, reserve: list[Any] = (), permit: list[Any] = ()) -> None:  # type: ignore[assignment]
    framework = scheduler.profiles[PROFILE]
    framework.reserve = [*framework.reserve, *reserve]
    framework.permit = [*framework.permit, *permit]
    for plugin in (*reserve, *permit):
        framework.plugins[plugin.name] = plugin


# -- binding -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "code", [pytest.param(404, id="pod-deleted"), pytest.param(409, id="pod-bound-elsewhere")]
)
async def test_a_binding_finding_the_pod_gone_or_bound_forgets_it_frees_its_room_and_does_not_retry(
    code: int,
) -> None:
    scheduler, api, _ = _setup()
    api.script("POST", BINDING_OF_P, _answer(code, "the answer"))
    _try_both(scheduler)
    assert scheduler.cache.is_assumed("p") and _cpu(scheduler) == 2000
    assert scheduler.queue.location("q") == UNSCHEDULABLE  # no room while p holds the node
    await scheduler.wait_for_bindings()
    assert api.bind_attempts() == [("default/p", "n1")]
    assert scheduler.cache.get_pod("p") is None and _cpu(scheduler) == 0  # forgotten, its room freed
    assert scheduler.queue.location("p") is None  # nothing to retry: the pod is gone or bound already
    assert scheduler.binding_conflicts == 1
    assert [f for f in api.failures if f[0] == "default/p"] == []
    assert api.scheduled == []
    assert scheduler.queue.location("q") == BACKOFF  # the freed room is an assigned pod's deletion for q


async def test_a_binding_failing_otherwise_forgets_the_pod_and_retries_it_after_backoff() -> None:
    scheduler, api, clock = _setup()
    api.script("POST", BINDING_OF_P, api_status(500, "etcdserver: request timed out"))
    _try_both(scheduler)
    await scheduler.wait_for_bindings()
    assert scheduler.cache.get_pod("p") is None and _cpu(scheduler) == 0
    assert scheduler.binding_conflicts == 0
    assert (
        "default/p",
        "SchedulerError",
        "500: binding default/p to n1: etcdserver: request timed out",
    ) in api.failures
    assert scheduler.queue.location("p") == BACKOFF
    assert scheduler.queue.location("q") == BACKOFF
    # with activeQ empty a rejected pod may leave backoffQ early (upstream's SchedulerPopFromBackoffQ);
    # a pod that failed with an error may not
    early = scheduler.queue.pop_nowait()
    assert early is not None and early.pod.name == "q"
    assert scheduler.queue.pop_nowait() is None
    scheduler.delete_pod(Q)  # out of the way: q would take the freed room first
    scheduler.queue.done("q")
    clock.advance(2.0)  # the first backoff is 1 s
    scheduler.queue.flush_due()
    qp = scheduler.queue.pop_nowait()
    assert qp is not None and qp.pod.name == "p"
    scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()
    assert api.scheduled == [("default/p", "n1")]
    assert (
        scheduler.cache.is_assumed("p") and _cpu(scheduler) == 2000
    )  # bound, assumed until the watch shows it


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(404, id="pod-deleted"),
        pytest.param(409, id="conflict"),
        pytest.param(500, id="server-error"),
    ],
)
async def test_a_failed_binding_unreserves_every_reserve_plugin_once(code: int) -> None:
    """Upstream's handleBindingCycleError: whatever the binding's failure, what Reserve kept for the pod is
    given back (an assumed volume, an in-flight allocation, a gang's count) before the pod is forgotten."""
    scheduler, api, _ = _setup()
    log: list[tuple[str, str, str, str]] = []
    _add_to_profile(scheduler, reserve=[_Reserve("Counter", log)])
    api.script("POST", BINDING_OF_P, _answer(code, "the answer"))
    _try_both(scheduler)
    await scheduler.wait_for_bindings()
    assert [entry for entry in log if entry[2] == "p"] == [
        ("Counter", "reserve", "p", "n1"),
        ("Counter", "unreserve", "p", "n1"),
    ]
    assert scheduler.cache.get_pod("p") is None


# -- reserve and permit --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "reason", "message", "where", "rejectors"),
    [
        pytest.param(
            unschedulable("the ledger is full"),
            "Unschedulable",
            "0/1 nodes are available: 1 the ledger is full.",  # schedule_one.go: FitError{NumAllNodes: 1}
            UNSCHEDULABLE,
            {"Ledger"},
            id="rejected",
        ),
        pytest.param(
            error("the ledger is down"),
            "SchedulerError",
            'running Reserve plugin "Ledger": the ledger is down',
            BACKOFF,
            set(),
            id="error",
        ),
    ],
)
async def test_a_failed_reserve_unreserves_every_plugin_forgets_the_pod_and_requeues_it(
    status: Status, reason: str, message: str, where: str, rejectors: set[str]
) -> None:
    scheduler, api, _ = _setup()
    log: list[tuple[str, str, str, str]] = []
    ledger = _Reserve("Ledger", log)
    _add_to_profile(scheduler, reserve=[_Reserve("Counter", log), ledger])
    ledger.status = status
    scheduler.add_pod(P)
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()
    # upstream's RunReservePluginsUnreserve: every reserve plugin, the failing one too, in reverse order
    assert log == [
        ("Counter", "reserve", "p", "n1"),
        ("Ledger", "reserve", "p", "n1"),
        ("Ledger", "unreserve", "p", "n1"),
        ("Counter", "unreserve", "p", "n1"),
    ]
    assert scheduler.cache.get_pod("p") is None and _cpu(scheduler) == 0
    assert api.bind_attempts() == []
    assert api.failures == [("default/p", reason, message)]
    assert scheduler.queue.location("p") == where
    assert qp.unschedulable_plugins == rejectors


@pytest.mark.parametrize(
    ("status", "reason", "message", "where"),
    [
        pytest.param(
            unschedulable("not now"),
            "Unschedulable",
            "0/1 nodes are available: 1 not now.",  # schedule_one.go: FitError{NumAllNodes: 1}
            UNSCHEDULABLE,
            id="rejected",
        ),
        pytest.param(
            error("the gate is stuck"),
            "SchedulerError",
            'running Permit plugin "Gate": the gate is stuck',
            BACKOFF,
            id="error",
        ),
    ],
)
async def test_a_failed_permit_unreserves_forgets_the_pod_and_requeues_it(
    status: Status, reason: str, message: str, where: str
) -> None:
    scheduler, api, _ = _setup()
    log: list[tuple[str, str, str, str]] = []
    _add_to_profile(scheduler, reserve=[_Reserve("Counter", log)], permit=[_Permit("Gate", status)])
    _try_both(scheduler)
    await scheduler.wait_for_bindings()
    assert [entry for entry in log if entry[2] == "p"] == [
        ("Counter", "reserve", "p", "n1"),
        ("Counter", "unreserve", "p", "n1"),
    ]
    assert scheduler.cache.get_pod("p") is None
    assert ("default/p", reason, message) in api.failures
    assert scheduler.queue.location("p") == where
    # q was tried after p was forgotten: it found the room and was bound
    assert api.bind_attempts() == [("default/q", "n1")] and _cpu(scheduler) == 1000


async def test_a_pod_deleted_while_waiting_at_permit_is_released_and_its_room_freed() -> None:
    scheduler, api, _ = _setup()
    log: list[tuple[str, str, str, str]] = []
    _add_to_profile(scheduler, reserve=[_Reserve("Counter", log)], permit=[_Permit("Gate", WAIT, 30.0)])
    _try_both(scheduler)
    framework = scheduler.profiles[PROFILE]
    for _ in range(5):  # the binding cycle starts waiting
        await asyncio.sleep(0)
    assert [w.pod.name for w in framework.waiting_pods.all()] == ["p"]
    assert scheduler.cache.is_assumed("p") and _cpu(scheduler) == 2000
    assert scheduler.queue.location("q") == UNSCHEDULABLE
    scheduler.delete_pod(P)
    await scheduler.wait_for_bindings()
    assert framework.waiting_pods.all() == []
    assert api.bind_attempts() == []
    assert ("Counter", "unreserve", "p", "n1") in log
    assert scheduler.cache.get_pod("p") is None and _cpu(scheduler) == 0
    assert scheduler.queue.location("p") is None  # deleted: never retried
    assert scheduler.queue.location("q") == BACKOFF  # the room it held is offered to q


# -- the watch speaks while the binding is in flight ---------------------------------------------------
def _bound(raw: dict[str, Any], node: str) -> dict[str, Any]:
    return {**raw, "spec": {**raw["spec"], "nodeName": node}}


async def _start_binding(scheduler: Scheduler, api: FakeAPI) -> asyncio.Event:
    """``p``'s binding sent and held until the event returned is set; its answer is what is scripted for
    it by then (201 if nothing is)."""
    gate = api.hold("POST", "*/binding")
    scheduler.add_pod(P)
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    for _ in range(5):  # the binding POST is sent and held at the gate
        await asyncio.sleep(0)
    assert api.bind_attempts() == [("default/p", "n1")] and scheduler.cache.is_assumed("p")
    return gate


async def test_an_assumed_pod_seen_bound_to_its_node_is_counted_once() -> None:
    scheduler, api, _ = _setup()
    gate = await _start_binding(scheduler, api)
    scheduler.update_pod(P, _bound(P, "n1"))  # the watch shows the binding before its answer comes
    assert not scheduler.cache.is_assumed("p") and _cpu(scheduler) == 2000
    gate.set()
    await scheduler.wait_for_bindings()
    assert api.scheduled == [("default/p", "n1")]
    assert scheduler.cache.pod_count() == 1 and _cpu(scheduler) == 2000


async def test_an_assumed_pod_seen_pending_again_stays_assumed_and_out_of_the_queue() -> None:
    scheduler, api, _ = _setup()
    gate = await _start_binding(scheduler, api)
    relabelled = {**P, "metadata": {**P["metadata"], "labels": {"touched": "yes"}}}
    scheduler.update_pod(P, relabelled)  # an update from before the binding: no nodeName yet
    assert scheduler.cache.is_assumed("p") and _cpu(scheduler) == 2000
    assert "p" not in scheduler.queue  # not tried a second time while its binding is in flight
    gate.set()
    await scheduler.wait_for_bindings()
    assert api.scheduled == [("default/p", "n1")]


async def test_an_assumed_pod_deleted_during_its_binding_is_freed_once() -> None:
    scheduler, api, _ = _setup()
    gate = await _start_binding(scheduler, api)
    api.script("POST", BINDING_OF_P, api_status(404, 'pods "p" not found'))
    scheduler.delete_pod(P)
    assert scheduler.cache.get_pod("p") is None and _cpu(scheduler) == 0
    gate.set()
    await scheduler.wait_for_bindings()
    assert scheduler.cache.pod_count() == 0 and _cpu(scheduler) == 0  # not freed a second time
    assert scheduler.queue.location("p") is None
    assert api.scheduled == []


@pytest.mark.parametrize(
    ("code", "conflicts", "reported"),
    [
        pytest.param(409, 1, False, id="conflict"),
        # the POST timed out but went through: the watch already showed the pod bound
        pytest.param(0, 0, True, id="no-answer"),
    ],
)
async def test_a_binding_failing_after_the_watch_showed_the_pod_bound_keeps_it_bound(
    code: int, conflicts: int, reported: bool
) -> None:
    """As upstream's ``handleBindingCycleError``: the pod is no longer assumed, so forgetting it fails;
    the cache keeps the bound pod, and the failure ends the attempt without a retry."""
    scheduler, api, _ = _setup()
    gate = await _start_binding(scheduler, api)
    api.script("POST", BINDING_OF_P, _answer(code, "the answer"))
    scheduler.update_pod(P, _bound(P, "n1"))
    gate.set()
    await asyncio.wait_for(scheduler.wait_for_bindings(), 5)
    assert not scheduler.cache.is_assumed("p") and scheduler.cache.get_pod("p") is not None
    assert _cpu(scheduler) == 2000
    assert scheduler.queue.location("p") is None
    assert scheduler.binding_conflicts == conflicts
    assert any(f[0] == "default/p" for f in api.failures) is reported
    assert api.scheduled == []
