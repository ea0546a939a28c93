"""DynamicResources' queueing hints (``isSchedulableAfterClaimChange``, ``isSchedulableAfterTargetPodUpdate``,
v1.37): which claim and pod updates may help a pod it rejected."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_kit import allocated_on, claim, objects, pod

from kopf_scheduler.framework.events import QueueingHint, Resource
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS, ResourceClaim
from kopf_scheduler.framework.objects.dra import parse_resource_claim
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager
from kopf_scheduler.plugins.dynamic_resources.requeue import claim_changed, events, pod_changed

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP


def value(raw: dict[str, Any]) -> ResourceClaim:
    return parse_resource_claim(raw)


def manager(*raws: dict[str, Any]) -> DraManager:
    return DraManager(objects(*raws))


def with_finalizer(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "metadata": {**raw["metadata"], "finalizers": ["x"]}}


@pytest.mark.parametrize(
    ("stored", "old", "new", "expected"),
    [
        pytest.param([claim("c")], None, claim("c"), QUEUE, id="own-claim-created"),
        pytest.param([claim("c"), claim("d")], None, claim("d"), SKIP, id="unrelated-claim"),
        pytest.param([claim("c")], claim("c"), with_finalizer(claim("c")), SKIP, id="status-unchanged"),
        pytest.param(
            [claim("c")],
            claim("c"),
            claim("c", allocation=allocated_on("n1", "d0")),
            QUEUE,
            id="status-changed",
        ),
        pytest.param(
            [claim("c"), claim("d")],
            claim("d", allocation=allocated_on("n1", "d0")),
            claim("d"),
            QUEUE,
            id="another-claim-deallocated",
        ),
        pytest.param([], None, claim("c"), SKIP, id="pod-still-misses-a-claim"),
    ],
)
def test_claim_changed(
    stored: list[dict[str, Any]], old: dict[str, Any] | None, new: dict[str, Any], expected: QueueingHint
) -> None:
    hint = claim_changed(manager(*stored))
    assert hint(pod("p", "c"), None if old is None else value(old), value(new)) is expected


def test_pod_changed() -> None:
    made = claim("p-gpu-abcde", owner_uid="p")
    hint = pod_changed(manager(made))
    waiting = pod("p", templates={"gpu": None})
    assert hint(waiting, waiting, pod("p", templates={"gpu": "p-gpu-abcde"})) is QUEUE
    assert hint(waiting, waiting, pod("p", templates={"gpu": None})) is SKIP
    # A TargetPod event is the rejected pod's own update: the hint reads the updated pod's claims only
    # (here q's named claim belongs to p, so q still misses it).
    assert hint(waiting, None, pod("q", templates={"gpu": "p-gpu-abcde"}, uid="q")) is SKIP


@pytest.mark.parametrize(
    ("old", "expected", "keys"),
    [
        pytest.param(claim("c"), SKIP, frozenset(), id="deleted-unallocated"),
        pytest.param(claim("c", allocation=allocated_on("n1", "d0")), QUEUE, None, id="deleted-allocated"),
    ],
)
def test_claim_deleted(old: dict[str, Any], expected: QueueingHint, keys: frozenset[Any] | None) -> None:
    """Upstream v1.37 registers ResourceClaim Delete: only a claim deleted with its allocation frees
    devices."""
    hint = claim_changed(manager(claim("c")))
    assert hint(pod("p", "c"), value(old), None) is expected
    assert hint.event_keys(value(old), None) == keys


def test_registered_events() -> None:
    registered = {e.event.resource for e in events(manager())}
    assert registered == {
        Resource.NODE,
        Resource.RESOURCE_CLAIM,
        Resource.TARGET_POD,
        Resource.DEVICE_CLASS,
        Resource.RESOURCE_SLICE,
    }


def test_assumed_claim_shown_until_the_store_catches_up() -> None:
    store = objects(claim("c"))
    dra = DraManager(store)
    written = claim("c", allocation=allocated_on("n1", "d0"))
    written["metadata"]["resourceVersion"] = "5"
    dra.assume(value(written))
    shown = dra.get("default", "c")
    assert shown is not None and shown.allocation is not None
    assert dra.allocated_devices() == frozenset({("gpu.example.com", "n1", "d0")})
    newer = claim("c")
    newer["metadata"]["resourceVersion"] = "6"
    store.store(RESOURCE_CLAIMS).upsert(newer)
    shown = dra.get("default", "c")
    assert shown is not None and shown.allocation is None
    assert dra.allocated_devices() == frozenset()


def test_claim_hint_keys_never_hide_a_queue_verdict() -> None:
    """The queue skips a pod whose keys miss the event's without asking: the hint must say SKIP then."""
    made = claim("p-gpu-x", owner_uid="p")
    stored = [claim("c"), claim("d", allocation=allocated_on("n1", "d0")), made]
    hint = claim_changed(manager(*stored))
    pods = [
        pod("p", "c"),
        pod("p", "c", "d"),
        pod("p", templates={"gpu": "p-gpu-x"}),
        pod("p", templates={"gpu": None}),
        pod("p", "c", templates={"gpu": "p-gpu-x"}),
    ]
    changes: list[tuple[dict[str, Any] | None, dict[str, Any]]] = [
        (None, claim("c")),
        (None, claim("e")),
        (claim("c"), claim("c", allocation=allocated_on("n1", "d1"))),
        (claim("d", allocation=allocated_on("n1", "d0")), claim("d")),
        (claim("c"), with_finalizer(claim("c"))),
        (None, made),
        (made, {**made, "status": {"allocation": allocated_on("n1", "d2")}}),
    ]
    for waiting in pods:
        for old_raw, new_raw in changes:
            old = None if old_raw is None else value(old_raw)
            new = value(new_raw)
            keys = hint.event_keys(old, new)
            verdict = hint(waiting, old, new)
            if keys is not None and keys.isdisjoint(hint.pod_keys(waiting)):
                assert verdict is SKIP, (waiting.raw["spec"], new_raw["metadata"]["name"])
    assert hint.event_keys(value(stored[1]), value(claim("d"))) is None  # deallocated: any pod may care
    assert hint.pod_keys(pods[4]) == {("default", "c"), ("default", "p-gpu-x")}
    assert hint.pod_keys(pods[3]) == frozenset()
    assert hint.pod_keys(pods[4]) is hint.pod_keys(pods[4])  # memoised on the PodInfo
