"""DynamicResources, one extension point per test, with upstream's statuses and texts
(``dynamicresources_test.go``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _dra_kit import (
    DRIVER,
    Handle,
    allocated_on,
    claim,
    device,
    device_class,
    node,
    objects,
    pod,
    request,
    resource_slice,
)

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.allocator import AllocationError, Allocator, FilterTimeout
from kopf_scheduler.testing.framework import make_framework

GPU = device_class("gpu", f'device.driver == "{DRIVER}"')
SLICES = (
    resource_slice("n1", device("d0"), device("d1")),
    resource_slice("n2", device("d0")),
)


def plugin(*raws: dict[str, Any]) -> tuple[DynamicResources, Handle]:
    handle = Handle(objects(GPU, *SLICES, *raws))
    return DynamicResources(Args(), handle), handle


@pytest.mark.parametrize(
    ("raws", "subject", "expected"),
    [
        pytest.param((), pod("p"), None, id="no-claims"),
        pytest.param((claim("c"),), pod("p", "c"), None, id="claim-exists"),
        pytest.param(
            (), pod("p", "c"), unresolvable('could not find ResourceClaim "default/c"'), id="claim-missing"
        ),
        pytest.param(
            (),
            pod("p", templates={"gpu": None}),
            unresolvable('pod "default/p": ResourceClaim not created yet'),
            id="template-claim-not-created",
        ),
        pytest.param(
            (claim("p-gpu-abcde", owner_uid="other"),),
            pod("p", templates={"gpu": "p-gpu-abcde"}),
            unresolvable(
                "ResourceClaim default/p-gpu-abcde was not created for pod default/p (pod is not owner)"
            ),
            id="template-claim-of-another-pod",
        ),
        pytest.param(
            (claim("p-gpu-abcde", owner_uid="p"),),
            pod("p", templates={"gpu": "p-gpu-abcde"}),
            None,
            id="template-claim-made",
        ),
        pytest.param(
            (),
            PodInfo({**pod("p").raw, "spec": {**pod("p").spec, "resourceClaims": [{"name": "gpu"}]}}),
            unresolvable('pod "default/p", spec.resourceClaim "gpu": none of the supported fields are set'),
            id="claim-entry-without-source",
        ),
    ],
)
def test_pre_enqueue(raws: tuple[dict[str, Any], ...], subject: PodInfo, expected: Status | None) -> None:
    assert plugin(*raws)[0].pre_enqueue(subject) == expected


def test_pre_enqueue_deleting_claim() -> None:
    deleting = claim("c")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plugin(deleting)[0].pre_enqueue(pod("p", "c")) == unresolvable(
        'resourceclaim "c" is being deleted'
    )


@pytest.mark.parametrize(
    ("raws", "expected"),
    [
        pytest.param((claim("c"),), None, id="unallocated"),
        pytest.param(
            (claim("c", request(device_class_name="nope")),),
            unresolvable("request req: device class nope does not exist"),
            id="class-missing",
        ),
        pytest.param(
            (claim("c", {"name": "req", "firstAvailable": [{"name": "a", "deviceClassName": "gone"}]}),),
            unresolvable("request req/a: device class gone does not exist"),
            id="subrequest-class-missing",
        ),
        pytest.param(
            (claim("c", {"name": "req"}),),
            unresolvable("resource claim default/c, request req: unknown request type"),
            id="unknown-request-type",
        ),
        pytest.param(
            (claim("c", request(device_class_name="")),),
            error("request req: unsupported request type"),
            id="no-class-name",
        ),
    ],
)
def test_pre_filter(raws: tuple[dict[str, Any], ...], expected: Status | None) -> None:
    assert plugin(*raws)[0].pre_filter(CycleState(), pod("p", "c"), []) == (None, expected)


def test_pre_filter_skips_pods_without_claims() -> None:
    assert plugin()[0].pre_filter(CycleState(), pod("p"), []) == (None, SKIP)


def filter_all(pl: DynamicResources, subject: PodInfo, *names: str) -> dict[str, Status | None]:
    state = CycleState()
    _, status = pl.pre_filter(state, subject, [])
    assert status is None
    return {name: pl.filter(state, subject, node(name)) for name in names}


def test_filter_allocates_per_node() -> None:
    pl, _ = plugin(claim("c", request(count=2)))
    assert filter_all(pl, pod("p", "c"), "n1", "n2", "n3") == {
        "n1": None,
        "n2": unresolvable("cannot allocate all claims"),
        "n3": unresolvable("cannot allocate all claims"),
    }


def test_filter_timeout_is_an_error_naming_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """v1.37: a timeout may pass, so the attempt fails with an error (retried after backoff) instead of
    rejecting the node until a cluster event."""
    pl, _ = plugin(claim("c", request(count=2)))

    def too_slow(*_: Any) -> None:
        raise FilterTimeout("deadline")

    monkeypatch.setattr(Allocator, "find", too_slow)
    state = CycleState()
    pl.pre_filter(state, pod("p", "c"), [])
    framework = make_framework(pre_filter=[pl], filter=[pl])
    status = framework.run_filter_chain(state, pod("p", "c"), node("n1"))
    assert status is not None and status.code == Code.ERROR
    assert status.message() == (
        'running "DynamicResources" filter plugin: node n1: timed out trying to allocate devices'
    )


def test_filter_allocated_claim_only_on_its_node() -> None:
    pl, _ = plugin(claim("c", allocation=allocated_on("n1", "d0"), reserved_for=["other"]))
    assert filter_all(pl, pod("p", "c"), "n1", "n2") == {
        "n1": None,
        "n2": unresolvable("resourceclaim not available on the node"),
    }


def test_filter_selector_error_is_an_error() -> None:
    broken = claim("c", request(selectors=[{"cel": {"expression": 'device.attributes["x"].y'}}]))
    pl, _ = plugin(broken)
    state = CycleState()
    pl.pre_filter(state, pod("p", "c"), [])
    with pytest.raises(AllocationError) as e:
        pl.filter(state, pod("p", "c"), node("n1"))
    assert str(e.value) == (
        "claim default/c: selector #0 on device gpu.example.com/n1/d0: CEL runtime error: no such key: y. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields"
    )


@pytest.mark.parametrize(
    ("raws", "expected"),
    [
        # v1.37: no reason (v1.34 said "no new claims to deallocate" and "still not schedulable")
        pytest.param((), unschedulable(), id="no-claims"),
        pytest.param(
            (claim("c", allocation=allocated_on("n1", "d0"), reserved_for=["other"]),),
            unschedulable(),
            id="used-by-another-pod",
        ),
        pytest.param(
            (claim("c", allocation=allocated_on("n1", "d0")),),
            unschedulable("deallocation of ResourceClaim completed"),
            id="deallocated",
        ),
    ],
)
def test_post_filter(raws: tuple[dict[str, Any], ...], expected: Status) -> None:
    pl, _ = plugin(*raws)
    subject = pod("p", "c") if raws else pod("p")
    state = CycleState()
    pl.pre_filter(state, subject, [])
    if raws:
        pl.filter(state, subject, node("n2"))
    assert pl.post_filter(state, subject, {}) == (None, expected)  # type: ignore[arg-type]


def test_post_filter_without_state() -> None:
    assert plugin()[0].post_filter(CycleState(), pod("p"), {}) == (None, error("not found"))  # type: ignore[arg-type]


def test_reserve_holds_devices_in_flight_until_unreserve() -> None:
    pl, _ = plugin(claim("a"), claim("b", request(count=2)))
    state = CycleState()
    pl.pre_filter(state, pod("p", "a"), [])
    assert pl.filter(state, pod("p", "a"), node("n1")) is None
    assert pl.reserve(state, pod("p", "a"), "n1") is None
    assert pl.manager.has_pending_allocation("claim-a")
    # another pod's claim cannot have n1's reserved device, and waits for a claim being allocated
    assert filter_all(pl, pod("q", "b"), "n1") == {"n1": unresolvable("cannot allocate all claims")}
    assert pl.pre_filter(CycleState(), pod("r", "a"), []) == (
        None,
        unresolvable("resource claim default/a is in the process of being allocated"),
    )
    pl.unreserve(state, pod("p", "a"), "n1")
    assert not pl.manager.has_pending_allocation("claim-a")
    assert filter_all(pl, pod("q", "b"), "n1") == {"n1": None}


def test_pre_bind_writes_finalizer_allocation_and_reservation() -> None:
    pl, handle = plugin(claim("c"))
    subject = pod("p", "c")
    state = CycleState()
    pl.pre_filter(state, subject, [])
    pl.filter(state, subject, node("n1"))
    pl.reserve(state, subject, "n1")
    assert asyncio.run(pl.pre_bind(state, subject, "n1")) is None
    writes = handle.client.writes
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in writes] == [("PUT", "c"), ("PUT", "status")]
    assert writes[0][2]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    status = writes[1][2]["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "req", "driver": DRIVER, "pool": "n1", "device": "d0"}
    ]
    assert not pl.manager.has_pending_allocation("claim-c")
    stored = handle.objects.of(RESOURCE_CLAIMS).get("default", "c")
    assert stored is not None and stored.reserved_for_pod("p")


def test_unreserve_after_pre_bind_takes_the_pod_out_of_reserved_for_and_leaves_the_allocation() -> None:
    """A binding that fails after PreBind wrote the claim: as upstream's Unreserve, a strategic-merge
    patch deletes the pod's entry from ``reservedFor`` (no other write: the allocation stays, there is
    no API rollback), so a claim never stays reserved for a pod that was not bound."""
    pl, handle = plugin(claim("c"))
    subject = pod("p", "c")
    state = CycleState()
    pl.pre_filter(state, subject, [])
    pl.filter(state, subject, node("n1"))
    pl.reserve(state, subject, "n1")

    async def bind_then_fail() -> None:
        assert await pl.pre_bind(state, subject, "n1") is None
        pl.unreserve(state, subject, "n1")
        await asyncio.sleep(0)  # the patch is sent from a task of its own

    asyncio.run(bind_then_fail())
    writes = handle.client.writes
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in writes] == [
        ("PUT", "c"),
        ("PUT", "status"),
        ("PATCH", "status"),
    ]
    assert writes[2][2] == {
        "metadata": {"uid": "claim-c"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "p"}]},
    }
    assert not pl.manager.has_pending_allocation("claim-c")


def test_pre_bind_reserves_an_allocated_claim_only() -> None:
    pl, handle = plugin(claim("c", allocation=allocated_on("n1", "d0"), reserved_for=["other"]))
    subject = pod("p", "c")
    state = CycleState()
    pl.pre_filter(state, subject, [])
    pl.filter(state, subject, node("n1"))
    pl.reserve(state, subject, "n1")
    asyncio.run(pl.pre_bind(state, subject, "n1"))
    assert len(handle.client.writes) == 1
    reserved = handle.client.writes[0][2]["status"]["reservedFor"]
    assert [r["uid"] for r in reserved] == ["other", "p"]


def test_pre_bind_error_text() -> None:
    pl, handle = plugin(claim("c"))
    handle.client.fail_status = APIError(422, "invalid")
    subject = pod("p", "c")
    state = CycleState()
    pl.pre_filter(state, subject, [])
    pl.filter(state, subject, node("n1"))
    pl.reserve(state, subject, "n1")
    with pytest.raises(Exception, match=r"^add allocation and reservation to claim default/c: invalid$"):
        asyncio.run(pl.pre_bind(state, subject, "n1"))
    # as upstream, the allocation stays in flight until Unreserve (only a PreBind that succeeds drops it)
    assert pl.manager.has_pending_allocation("claim-c")
    pl.unreserve(state, subject, "n1")
    assert not pl.manager.has_pending_allocation("claim-c")
