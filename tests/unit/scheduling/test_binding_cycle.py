"""The binding cycle as kube-scheduler v1.37.2 runs it (``schedule_one.go``: ``bindingCycle``,
``handleBindingCycleError``), with the cases of upstream's ``TestSchedulerScheduleOne`` that changed
since v1.34 written out: PreBind's pre-flights and ``status.nominatedNodeName`` set before a Permit wait
or a PreBind that has work (NominatedNodeNameForExpectation, on from 1.35), a pod in PreBind whose binding
is cancelled (preemption, v1.36 on), a pod preempted while waiting at Permit, and the nomination every
failure after the post-filter clears.

The real scheduler, queue, cache and default profile on a virtual clock; the API server is the fake.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue import BACKOFF
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import (
    PermitPlugin,
    PreBindPlugin,
    PreBindPreFlightResult,
    ReservePlugin,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, WAIT, Status, error, unschedulable
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = "kopf-scheduler"
ON, OFF = (1, 35), (1, 34)  # NominatedNodeNameForExpectation: Beta on from 1.35


class FakePreBind(PreBindPlugin):
    """Upstream's ``FakePreBindPlugin``: fixed pre-flight and pre-bind statuses."""

    def __init__(
        self, name: str, pre_flight: Status | None, pre_bind: Status | None, parallel: bool = False
    ) -> None:
        self.name = name
        self.flight = pre_flight
        self.status = pre_bind
        self.parallel = parallel
        self.calls: list[str] = []

    def pre_bind_pre_flight(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[PreBindPreFlightResult | None, Status | None]:
        return PreBindPreFlightResult(allow_parallel=self.parallel), self.flight

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.calls.append(pod.name)
        return self.status


class BlockingPreBind(PreBindPlugin):
    """Upstream's ``BlockingPreBindPlugin``: pre-bind waits until released (or cancelled)."""

    name = "BlockingPreBindPlugin"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.started.set()
        await self.release.wait()
        return None


class WaitingPermit(PermitPlugin):
    name = "FakePermit"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return WAIT, 60.0


class FailingReserve(ReservePlugin):
    name = "FakeReserve"

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return error("reserve error")

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None


def _setup(version: tuple[int, int], *plugins: Any) -> tuple[Scheduler, FakeAPI]:
    api = FakeAPI()
    scheduler = Scheduler(api, clock=VirtualClock())
    scheduler.feature_gates = FeatureGates(version)
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    framework = scheduler.profiles[PROFILE]
    for plugin in plugins:
        framework.plugins[plugin.name] = plugin
        if isinstance(plugin, PreBindPlugin):
            framework.pre_bind = [*framework.pre_bind, plugin]
        if isinstance(plugin, PermitPlugin):
            framework.permit = [*framework.permit, plugin]
        if isinstance(plugin, ReservePlugin):
            framework.reserve = [*framework.reserve, plugin]
    scheduler.add_node(make_node().name("n1").capacity(cpu="2", memory="8Gi", pods=10).obj())
    return scheduler, api


def _start(scheduler: Scheduler, nominated: str = "") -> None:
    builder = make_pod().name("p").uid("p").scheduler_name(PROFILE).req(cpu="1")
    scheduler.add_pod((builder.nominated(nominated) if nominated else builder).obj())
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)


async def _allow_when_waiting(scheduler: Scheduler) -> None:
    framework = scheduler.profiles[PROFILE]
    while (waiting := framework.waiting_pods.get("p")) is None:
        await asyncio.sleep(0)
    waiting.allow("FakePermit")


@pytest.mark.parametrize(
    ("version", "pre_bind", "wait", "nominated", "calls"),
    [
        pytest.param(OFF, None, True, [], [], id="permit-waits-gate-off"),
        pytest.param(ON, None, True, [("default/p", "n1")], [], id="permit-waits-nominated"),
        pytest.param(
            ON, FakePreBind("FakePreBind", SKIP, error("rejected on prebind")), False, [], [],
            id="pre-flight-skip-no-pre-bind-no-nomination",
        ),
        pytest.param(
            ON, FakePreBind("FakePreBind", None, None), False, [("default/p", "n1")], ["p"],
            id="pre-flight-success-nominated-then-pre-bind",
        ),
        pytest.param(
            OFF, FakePreBind("FakePreBind", SKIP, None), False, [], ["p"],
            id="gate-off-no-pre-flight-pre-bind-runs",
        ),
    ],
)  # fmt: skip
async def test_bound(
    version: tuple[int, int],
    pre_bind: FakePreBind | None,
    wait: bool,
    nominated: list[tuple[str, str]],
    calls: list[str],
) -> None:
    plugins: list[Any] = [p for p in (pre_bind, WaitingPermit() if wait else None) if p is not None]
    scheduler, api = _setup(version, *plugins)
    _start(scheduler)
    if wait:
        await _allow_when_waiting(scheduler)
    await scheduler.wait_for_bindings()
    assert api.bound == [("default/p", "n1")]
    assert api.failures == []
    assert api.nominated == nominated
    assert (pre_bind.calls if pre_bind else []) == calls
    assert len(scheduler.profiles[PROFILE].pods_in_pre_bind) == 0


@pytest.mark.parametrize(
    ("pre_bind", "message", "nominated"),
    [
        pytest.param(
            FakePreBind("FakePreBind", error("on PreBindPreFlight"), None),
            'running PreBindPreFlight "FakePreBind": on PreBindPreFlight',
            [],
            id="pre-flight-error",
        ),
        pytest.param(
            FakePreBind("FakePreBind", unschedulable("rejected on prebindpreflight"), None),
            'PreBindPreFlight FakePreBind returned "Unschedulable", which is unsupported. It is supposed to '
            "return Success, Skip, or Error status",
            [],
            id="pre-flight-unschedulable",
        ),
        pytest.param(
            FakePreBind("FakePreBind", None, error("on PreBind")),
            'running PreBind plugin "FakePreBind": on PreBind',
            [("default/p", "n1"), ("default/p", "")],
            id="pre-bind-error-nomination-cleared",
        ),
    ],
)
async def test_failed(pre_bind: FakePreBind, message: str, nominated: list[tuple[str, str]]) -> None:
    scheduler, api = _setup(ON, pre_bind)
    _start(scheduler)
    await scheduler.wait_for_bindings()
    assert api.bind_attempts() == []
    assert api.failures == [("default/p", "SchedulerError", message)]
    assert api.nominated == nominated
    assert scheduler.queue.location("p") == BACKOFF
    assert scheduler.cache.get_pod("p") is None


@pytest.mark.parametrize("version", [ON, OFF])
async def test_a_pod_cancelled_in_pre_bind_fails_with_the_cancellation_cause(
    version: tuple[int, int],
) -> None:
    blocking = BlockingPreBind()
    scheduler, api = _setup(version, blocking)
    _start(scheduler)
    await blocking.started.wait()
    entry = scheduler.profiles[PROFILE].pods_in_pre_bind.get("p")
    assert entry is not None and entry.cancel_pod("context cancelled externally")
    await scheduler.wait_for_bindings()
    assert api.failures == [
        (
            "default/p",
            "SchedulerError",
            'running PreBind plugin "BlockingPreBindPlugin": context cancelled externally',
        )
    ]
    assert api.bind_attempts() == []
    assert api.nominated == ([("default/p", "n1"), ("default/p", "")] if version == ON else [])
    assert scheduler.queue.location("p") == BACKOFF
    assert scheduler.profiles[PROFILE].pods_in_pre_bind.get("p") is None


class CancellingPreBind(PreBindPlugin):
    """Cancels its own pod's binding and returns at once, as a plugin that never looks at its context."""

    name = "CancellingPreBind"

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        entry = self.scheduler.profiles[PROFILE].pods_in_pre_bind.get(pod.uid)
        assert entry is not None and entry.cancel_pod("preempted by DefaultPreemption")
        return None


async def test_a_pod_cancelled_as_its_pre_bind_ends_is_not_bound() -> None:
    # upstream: MarkPrebound fails, and the binding cycle ends with the cause, before Bind
    scheduler, api = _setup(OFF)
    framework = scheduler.profiles[PROFILE]
    plugin = CancellingPreBind(scheduler)
    framework.plugins[plugin.name] = plugin
    framework.pre_bind = [*framework.pre_bind, plugin]
    _start(scheduler)
    await scheduler.wait_for_bindings()
    assert api.failures == [("default/p", "SchedulerError", "preempted by DefaultPreemption")]
    assert api.bind_attempts() == []


async def test_a_pod_bound_past_pre_bind_can_no_longer_be_cancelled() -> None:
    scheduler, api = _setup(OFF)
    entries = []
    original = scheduler.profiles[PROFILE].run_bind

    async def bind(state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        entries.append(scheduler.profiles[PROFILE].pods_in_pre_bind.get(pod.uid))
        return await original(state, pod, node_name)

    scheduler.profiles[PROFILE].run_bind = bind  # type: ignore[method-assign]
    _start(scheduler)
    await scheduler.wait_for_bindings()
    assert len(entries) == 1 and entries[0] is not None
    assert not entries[0].cancel_pod("preempted by DefaultPreemption")  # preemption deletes it instead
    assert api.bound == [("default/p", "n1")]


async def test_a_pod_preempted_at_permit_fails_with_an_error_and_backs_off() -> None:
    scheduler, api = _setup(ON, WaitingPermit())
    _start(scheduler)
    framework = scheduler.profiles[PROFILE]
    while (waiting := framework.waiting_pods.get("p")) is None:
        await asyncio.sleep(0)
    assert waiting.preempt("DefaultPreemption", "preempted")
    assert not waiting.preempt("DefaultPreemption", "preempted")  # once only
    await scheduler.wait_for_bindings()
    assert api.failures == [("default/p", "SchedulerError", "waiting on permit for pod: preempted")]
    assert api.nominated == [("default/p", "n1"), ("default/p", "")]
    assert scheduler.queue.location("p") == BACKOFF


async def test_a_failure_after_the_post_filter_clears_the_pods_nomination() -> None:
    # upstream: "pod with existing nominated node name on scheduling error clears nomination"
    scheduler, api = _setup(ON, FailingReserve())
    _start(scheduler, nominated="existing-node")
    await scheduler.wait_for_bindings()
    assert api.failures == [
        ("default/p", "SchedulerError", 'running Reserve plugin "FakeReserve": reserve error')
    ]
    assert api.nominated == [("default/p", "")]


class SlowPreBind(FakePreBind):
    def __init__(self, name: str, log: list[str], pre_bind: Status | None, gate: asyncio.Event) -> None:
        super().__init__(name, None, pre_bind, parallel=True)
        self.log = log
        self.gate = gate

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"{self.name} started")
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.log.append(f"{self.name} cancelled")
            raise
        self.log.append(f"{self.name} done")
        return self.status


async def test_pre_binds_that_allow_it_run_together_and_the_first_failure_stops_the_others() -> None:
    log: list[str] = []
    never = asyncio.Event()
    first = FakePreBind("First", None, error("on PreBind"), parallel=True)
    slow = SlowPreBind("Slow", log, None, never)
    scheduler, api = _setup(ON, slow, first)
    _start(scheduler)
    await scheduler.wait_for_bindings()
    assert log == ["Slow started", "Slow cancelled"]
    assert api.failures == [("default/p", "SchedulerError", 'running PreBind plugin "First": on PreBind')]


async def test_pre_binds_together_all_succeed() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    a, b = SlowPreBind("A", log, None, gate), SlowPreBind("B", log, None, gate)
    scheduler, api = _setup(ON, a, b)
    _start(scheduler)
    while len(log) < 2:
        await asyncio.sleep(0)
    assert log == ["A started", "B started"]  # both before either ends
    gate.set()
    await scheduler.wait_for_bindings()
    assert api.bound == [("default/p", "n1")]
