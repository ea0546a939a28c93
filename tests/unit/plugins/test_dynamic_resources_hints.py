"""DynamicResources' queueing hints (``isSchedulableAfterClaimChange``, ``isSchedulableAfterPodChange``):
which claim and pod updates may help a pod it rejected."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_kit import allocated_on, claim, objects, pod

from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.interface import QueueingHint
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
    assert hint(waiting, None, pod("q", templates={"gpu": "p-gpu-abcde"}, uid="q")) is SKIP


def test_registered_events() -> None:
    registered = {e.event.resource for e in events(manager())}
    assert registered == {
        Resource.NODE,
        Resource.RESOURCE_CLAIM,
        Resource.POD,
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
