"""DynamicResources with device binding conditions (DRADeviceBindingConditions, DRAResourceClaimDeviceStatus):
upstream's ``dynamicresources_test.go`` cases for them (v1.37.2) as literals: the allocation result of a
device with binding conditions, PreBind's wait (ready, failed, timed out, the wait itself running out), the
allocation timestamp, Filter and PostFilter for a claim whose binding failed or timed out; the metrics
``scheduler_dra_bindingconditions_*``; and the gates off."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest
from _dra_kit import DRIVER, Handle, claim, device_class, node, objects, pod, resource_slice

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS
from kopf_scheduler.framework.status import Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.binding_conditions import format_time

NODE = "worker"
GPU = device_class("gpu", f'device.driver == "{DRIVER}"')
#: upstream's ``bindingConditions`` and ``bindingFailureConditions``
CONDITIONS, FAILURES = ["condition"], ["failed"]
#: the wall clock at the start of each test (seconds since the epoch): 2026-01-01T00:00:00Z
WALL = 1767225600.0
NOT_AVAILABLE = unresolvable("resourceclaim not available on the node")
DEALLOCATED = unschedulable("deallocation of ResourceClaim completed")
BY_NAME = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
}


def fabric_slice() -> dict[str, Any]:
    """Upstream's ``fabricSlice``: ``instance-1`` binds to the node, with binding conditions; the slice
    selects the node by name."""
    instance = {
        "name": "instance-1",
        "bindsToNode": True,
        "bindingConditions": CONDITIONS,
        "bindingFailureConditions": FAILURES,
    }
    return resource_slice("", instance, name="fabric", pool=NODE, nodeSelector=BY_NAME)


def allocation(timestamp: str | None = None) -> dict[str, Any]:
    """Upstream's ``allocationResultWithBindingConditions``."""
    result = {
        "request": "req",
        "driver": DRIVER,
        "pool": NODE,
        "device": "instance-1",
        "bindingConditions": CONDITIONS,
        "bindingFailureConditions": FAILURES,
    }
    out: dict[str, Any] = {"devices": {"results": [result]}, "nodeSelector": BY_NAME}
    if timestamp is not None:
        out["allocationTimestamp"] = timestamp
    return out


def device_status(*conditions: tuple[str, str], reason: str = "", message: str = "") -> list[dict[str, Any]]:
    return [
        {
            "driver": DRIVER,
            "pool": NODE,
            "device": "instance-1",
            "conditions": [
                {"type": kind, "status": status, "reason": reason, "message": message}
                for kind, status in conditions
            ],
        }
    ]


def allocated_claim(timestamp: str | None, devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    raw = claim("c", allocation=allocation(timestamp))
    if devices is not None:
        raw["status"]["devices"] = devices
    return raw


def plugin(
    *raws: dict[str, Any], args: Args | None = None, gates: FeatureGates | None = None
) -> tuple[DynamicResources, Handle]:
    handle = Handle(objects(GPU, fabric_slice(), *raws), *(() if gates is None else (gates,)))
    pl = DynamicResources(args or Args(), handle)
    pl.wall = lambda: WALL + handle.clock.now() - 1000.0  # the virtual clock starts at 1000
    return pl, handle


def cycle(pl: DynamicResources, state: CycleState) -> dict[str, Status | None]:
    """PreFilter, then Filter on the node."""
    subject = pod("p", "c")
    assert pl.pre_filter(state, subject, []) == (None, None)
    return {NODE: pl.filter(state, subject, node(NODE))}


def pre_bind(
    pl: DynamicResources, handle: Handle, state: CycleState, during: Callable[[float], None] | None = None
) -> tuple[Status | None, float]:
    """PreBind in virtual time: the clock jumps to each sleeper's wake-up; ``during(elapsed)`` runs before
    each jump. Returns the status and the seconds PreBind took."""
    clock = handle.clock

    async def drive() -> Status | None:
        task = asyncio.ensure_future(pl.pre_bind(state, pod("p", "c"), NODE))
        while not task.done():
            await asyncio.sleep(0)
            wake = clock.next_wakeup()
            if wake is not None and not task.done():
                if during is not None:
                    during(clock.now() - 1000.0)
                clock.set(wake)
        return task.result()

    start = clock.now()
    status = asyncio.run(drive())
    return status, clock.now() - start


def stored(handle: Handle) -> dict[str, Any]:
    found = handle.objects.of(RESOURCE_CLAIMS).get("default", "c")
    assert found is not None
    return copy.deepcopy(dict(found.raw))


def set_status(handle: Handle, devices: list[dict[str, Any]]) -> None:
    """The driver writes the claim's ``status.devices`` (what the watch then delivers)."""
    raw = stored(handle)
    raw["status"]["devices"] = devices
    raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
    handle.objects.store(RESOURCE_CLAIMS).upsert(raw)


def observed(pl: DynamicResources) -> tuple[list[tuple[str, str, str, float]], list[tuple[str, str, str]]]:
    waits: list[tuple[str, str, str, float]] = []
    allocations: list[tuple[str, str, str]] = []
    pl.manager.binding_wait_hooks.append(lambda *a: waits.append(a))
    pl.manager.binding_allocation_hooks.append(lambda *a: allocations.append(a))
    return waits, allocations


def test_bind_claim_with_binding_conditions_times_out() -> None:
    """``bind-claim-with-binding-conditions``: bindingTimeout 1s, no driver sets the conditions."""
    pl, handle = plugin(claim("c"), args=Args(binding_timeout_seconds=1.0))
    waits, allocations = observed(pl)
    state = CycleState()
    assert cycle(pl, state) == {NODE: None}
    assert pl.reserve(state, pod("p", "c"), NODE) is None
    in_flight = pl.manager.in_flight()[0].raw["status"]["allocation"]
    assert in_flight == allocation()  # the timestamp is PreBind's
    status, took = pre_bind(pl, handle, state)
    assert status == error("device binding timeout: context deadline exceeded")
    assert took == 1.0
    written = stored(handle)["status"]
    assert written["allocation"] == allocation(format_time(WALL))
    assert written["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]
    assert handle.client.events == [
        (
            "p",
            "Normal",
            "BindingConditionsPending",
            "Scheduling",
            f"waiting for binding conditions for device on node {NODE}",
        )
    ]
    assert waits == [("default-scheduler", DRIVER, "timeout", 1.0)]
    assert allocations == [("default-scheduler", DRIVER, "timeout")]


def test_pre_bind_waits_until_the_driver_sets_the_conditions() -> None:
    """PreBind polls at once and then every 5 s; the driver reports the device attached at 7 s."""
    pl, handle = plugin(claim("c"))
    waits, allocations = observed(pl)
    state = CycleState()
    cycle(pl, state)
    pl.reserve(state, pod("p", "c"), NODE)

    in_flight: list[bool] = []

    def driver(elapsed: float) -> None:
        # the allocation stays in flight until PreBind succeeds (upstream's ``prebindSuccessCleanup``)
        in_flight.append(pl.manager.has_pending_allocation("claim-c"))
        if elapsed >= 5.0:
            set_status(handle, device_status(("condition", "True"), ("failed", "False")))

    status, took = pre_bind(pl, handle, state, driver)
    assert (status, took) == (None, 10.0)
    assert in_flight == [True, True]
    assert not pl.manager.has_pending_allocation("claim-c")
    assert waits == [("default-scheduler", DRIVER, "success", 10.0)]
    assert allocations == [("default-scheduler", DRIVER, "success")]


def test_bound_claim_with_succeeded_binding_conditions() -> None:
    """``bound-claim-with-succeeded-binding-conditions``: reserved at once, no wait, one success."""
    ready = device_status(("condition", "True"), ("failed", "False"))
    pl, handle = plugin(allocated_claim(format_time(WALL), ready))
    waits, allocations = observed(pl)
    state = CycleState()
    assert cycle(pl, state) == {NODE: None}
    assert pl.reserve(state, pod("p", "c"), NODE) is None
    assert pre_bind(pl, handle, state) == (None, 0.0)
    assert stored(handle)["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]
    assert [w[2] for w in waits] == ["success"] and allocations == [("default-scheduler", DRIVER, "success")]


def test_binding_failure_condition_fails_pre_bind() -> None:
    pl, handle = plugin(claim("c"))
    state = CycleState()
    cycle(pl, state)
    pl.reserve(state, pod("p", "c"), NODE)

    def driver(elapsed: float) -> None:
        failed = device_status(
            ("condition", "False"), ("failed", "True"), reason="NoPath", message='fabric "a" down'
        )
        set_status(handle, failed)

    status, took = pre_bind(pl, handle, state, driver)
    assert status == error('device binding failed: claim=c, reason=NoPath, message="fabric \\"a\\" down"')
    assert took == 5.0


def test_prebind_fail_with_binding_timeout() -> None:
    """``prebind-fail-with-binding-timeout``: bindingTimeout 600s, the claim allocated 590 s ago with no
    condition reported: the claim times out during the wait (``isPodReadyForBinding``)."""
    pending = [{"driver": DRIVER, "pool": NODE, "device": "instance-1"}]
    pl, handle = plugin(
        allocated_claim(format_time(WALL - 590), pending), args=Args(binding_timeout_seconds=600.0)
    )
    waits, allocations = observed(pl)
    state = CycleState()
    assert cycle(pl, state) == {NODE: None}
    status, took = pre_bind(pl, handle, state)
    assert status == error("device binding timeout: claim=c")
    assert took == 15.0
    assert [w[2] for w in waits] == ["timeout"] and allocations == [("default-scheduler", DRIVER, "timeout")]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            allocated_claim(format_time(WALL), device_status(("condition", "False"), ("failed", "True"))),
            id="bound-claim-with-failed-binding",
        ),
        pytest.param(
            allocated_claim(
                format_time(WALL - 601), [{"driver": DRIVER, "pool": NODE, "device": "instance-1"}]
            ),
            id="bound-claim-with-timed-out-binding",
        ),
        pytest.param(
            allocated_claim(
                format_time(WALL - 601), device_status(("condition1", "True"), ("condition2", "False"))
            ),
            id="bound-claim-with-mixed-binding-conditions",
        ),
    ],
)
def test_claim_whose_binding_failed_or_timed_out_is_deallocated(raw: dict[str, Any]) -> None:
    pl, _ = plugin(raw)
    state = CycleState()
    assert cycle(pl, state) == {NODE: NOT_AVAILABLE}
    assert pl.post_filter(state, pod("p", "c"), {}) == (None, DEALLOCATED)  # type: ignore[arg-type]


def test_claim_not_ready_within_its_timeout_stays_available() -> None:
    pl, _ = plugin(allocated_claim(format_time(WALL - 60), []))
    assert cycle(pl, CycleState()) == {NODE: None}


def test_bound_claim_without_binding_conditions_gets_an_allocation_timestamp() -> None:
    """``bound-claim-without-binding-conditions`` and ``add-allocation-timestamp``: every claim PreBind
    reserves gets ``allocationTimestamp`` (unless it has one); nothing is waited for."""
    plain = {"devices": {"results": [{"request": "req", "driver": DRIVER, "pool": NODE, "device": "d"}]}}
    pl, handle = plugin(claim("c", allocation=plain))
    state = CycleState()
    cycle(pl, state)
    assert pre_bind(pl, handle, state) == (None, 0.0)
    assert stored(handle)["status"]["allocation"] == {**plain, "allocationTimestamp": format_time(WALL)}
    assert handle.client.events == []


def test_dont_add_allocation_timestamp_with_the_gate_off() -> None:
    """``dont-add-allocation-timestamp``: DRADeviceBindingConditions off."""
    plain = {"devices": {"results": [{"request": "req", "driver": DRIVER, "pool": NODE, "device": "d"}]}}
    off = FeatureGates((1, 37), {"DRADeviceBindingConditions": False})
    pl, handle = plugin(claim("c", allocation=plain), gates=off)
    state = CycleState()
    cycle(pl, state)
    assert pre_bind(pl, handle, state) == (None, 0.0)
    assert stored(handle)["status"]["allocation"] == plain


def test_add_allocation_timestamp_failure() -> None:
    """``add-allocation-timestamp-failure``: the claim was deallocated before PreBind."""
    pl, handle = plugin(allocated_claim(None))
    state = CycleState()
    cycle(pl, state)
    raw = stored(handle)
    del raw["status"]["allocation"]
    raw["metadata"]["resourceVersion"] = "2"  # the write conflicts, the claim read again is deallocated
    handle.objects.store(RESOURCE_CLAIMS).upsert(raw)
    with pytest.raises(Exception, match=r"^claim default/c got deallocated elsewhere in the meantime$"):
        pre_bind(pl, handle, state)


def test_devices_with_binding_conditions_are_not_allocated_with_the_gate_off() -> None:
    off = FeatureGates((1, 37), {"DRADeviceBindingConditions": False})
    pl, _ = plugin(claim("c"), gates=off)
    assert cycle(pl, CycleState()) == {NODE: unresolvable("cannot allocate all claims")}


@pytest.mark.parametrize(
    ("gates", "args", "timeout"),
    [
        (FeatureGates((1, 37)), Args(), 10.0),
        (FeatureGates((1, 37)), Args(filter_timeout_seconds=0.0), 0.0),
        (FeatureGates((1, 37), {"DRASchedulerFilterTimeout": False}), Args(), 0.0),
    ],
    ids=["default", "zero-no-limit", "gate-off"],
)
def test_filter_timeout_follows_its_gate(gates: FeatureGates, args: Args, timeout: float) -> None:
    pl, _ = plugin(claim("c"), args=args, gates=gates)
    state = CycleState()
    cycle(pl, state)
    allocator = state.read(pl_key(pl)).allocator
    assert allocator is not None and allocator.timeout_seconds == timeout


def pl_key(pl: DynamicResources) -> Any:
    from kopf_scheduler.plugins.dynamic_resources.plugin import _KEY

    return _KEY
