"""DynamicResources' Score and NormalizeScore (``DRAPrioritizedList``): upstream's ``Test_computesScore``
and its ``single-claim-prioritized-list-scoring`` and ``multiple-claims-prioritized-list-scoring`` cases
(``dynamicresources_test.go`` at v1.37.2) as literals, and the gate off."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
import pytest
from _dra_kit import DRIVER, Handle, claim, device, device_class, node, objects, pod, resource_slice

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS
from kopf_scheduler.framework.status import unresolvable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.score import compute_score

GPU = device_class("gpu")


class Picked(NamedTuple):
    request: str


def first_available(name: str, *subs: tuple[str, int], selector: str | None = None) -> dict[str, Any]:
    entries = []
    for i, (sub, count) in enumerate(subs):
        entry: dict[str, Any] = {"name": sub, "deviceClassName": "gpu", "count": count}
        if selector is not None and i == 0:
            entry["selectors"] = [{"cel": {"expression": selector}}]
        entries.append(entry)
    return {"name": name, "firstAvailable": entries}


def subs(n: int) -> tuple[tuple[str, int], ...]:
    return tuple((f"subreq-{i}", 1) for i in range(1, n + 1))


def parsed(*raws: dict[str, Any]) -> list[Any]:
    store = objects(*raws)
    return [store.of(RESOURCE_CLAIMS).get("default", r["metadata"]["name"]) for r in raws]


ALLOCATED = claim(
    "allocated",
    {"name": "req-1", "exactly": {"deviceClassName": "gpu"}},
    allocation={"devices": {"results": [{"request": "req-1", "driver": DRIVER, "pool": "n", "device": "d"}]}},
)


@pytest.mark.parametrize(
    ("claims", "found", "expected"),
    [
        pytest.param(
            [claim("a", first_available("req-1", *subs(1))), claim("b", first_available("req-2", *subs(1)))],
            [],
            None,
            id="more-claims-than-allocations",
        ),
        pytest.param(
            [ALLOCATED, claim("b", {"name": "req-2", "exactly": {"deviceClassName": "gpu"}})],
            [[Picked("req-2")]],
            0,
            id="mix-of-allocated-and-unallocated-claims",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(1)))],
            [[Picked("req-1/subreq-1")]],
            8,
            id="single-request-only-subrequest-allocated",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(8)))],
            [[Picked("req-1/subreq-8")]],
            1,
            id="single-request-last-subrequest-allocated",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(4)), first_available("req-2", *subs(5)))],
            [[Picked("req-1/subreq-4"), Picked("req-2/subreq-5")]],
            9,
            id="multiple-requests-with-middle-subrequests-allocated",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(8)), first_available("req-2", *subs(1)))],
            [[Picked("req-1/subreq-8"), Picked("req-2/subreq-1")]],
            9,
            id="multiple-requests-with-top-subrequests-allocated",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(8))), claim("b", first_available("req-2", *subs(8)))],
            [[Picked("req-1/subreq-8")], [Picked("req-2/subreq-8")]],
            2,
            id="multiple-claims-with-last-subrequests-allocated",
        ),
        pytest.param(
            [claim("a", first_available("req-1", *subs(1))), claim("b", first_available("req-2", *subs(1)))],
            [[Picked("req-1/subreq-1")], [Picked("req-2/subreq-1")]],
            16,
            id="multiple-claims-with-top-subrequests-allocated",
        ),
    ],
)
def test_compute_score(claims: list[dict[str, Any]], found: list[list[Picked]], expected: int | None) -> None:
    if expected is None:
        with pytest.raises(ValueError, match="number of allocations 0 is smaller than number of claims"):
            compute_score(parsed(*claims), found)
        return
    assert compute_score(parsed(*claims), found) == expected


def scored(
    raws: list[dict[str, Any]], nodes: list[str], gates: FeatureGates | None = None
) -> tuple[dict[str, Any], list[int]]:
    """Filter on every node, Score on those that pass, NormalizeScore."""
    handle = Handle(objects(GPU, *raws), *(() if gates is None else (gates,)))
    pl = DynamicResources(Args(), handle)
    claims = [r["metadata"]["name"] for r in raws if r["kind"] == "ResourceClaim"]
    subject = pod("p", *claims)
    state = CycleState()
    assert pl.pre_filter(state, subject, []) == (None, None)
    filtered = {name: pl.filter(state, subject, node(name)) for name in nodes}
    passed = [name for name in nodes if filtered[name] is None]
    raw = {name: pl.score(state, subject, node(name)) for name in passed}
    # the vectorised form agrees (rows index the snapshot's nodes)
    infos = [node(name) for name in passed]
    handle.snapshot = lambda: SimpleNamespace(node_infos=infos)  # type: ignore[attr-defined]
    rows = np.arange(len(passed))
    assert pl.score_rows(state, subject, None, rows).tolist() == [raw[name] for name in passed]  # type: ignore[arg-type]
    normalized = np.array([raw[name] for name in passed], dtype=np.int64)
    assert pl.normalize_score(state, subject, normalized) is None
    return {**filtered, **raw}, normalized.tolist()


def test_single_claim_prioritized_list_scoring() -> None:
    attr = "healthy"
    raws = [
        claim(
            "c",
            first_available(
                "req-1", ("subreq-1", 1), ("subreq-2", 1), selector=f'device.attributes["{DRIVER}"].{attr}'
            ),
        ),
        resource_slice("worker", device("instance-1", **{attr: True})),
        resource_slice("worker-2", device("instance-1", **{attr: False})),
    ]
    assert scored(raws, ["worker", "worker-2"]) == ({"worker": 8, "worker-2": 7}, [100, 87])


def test_multiple_claims_prioritized_list_scoring() -> None:
    raws = [
        claim("c", first_available("req-1", ("subreq-1", 1))),
        claim(
            "c2", first_available("req-1", ("subreq-1", 4), ("subreq-2", 3), ("subreq-3", 2), ("subreq-4", 1))
        ),
        resource_slice("worker", *(device(f"instance-{i}") for i in range(1, 5))),
        resource_slice("worker-2", device("instance-1"), device("instance-2")),
        resource_slice("worker-3", device("instance-1")),
    ]
    assert scored(raws, ["worker", "worker-2", "worker-3"]) == (
        {"worker": 15, "worker-2": 13, "worker-3": unresolvable("cannot allocate all claims")},
        [100, 86],
    )


def test_no_score_with_prioritized_list_off() -> None:
    """DRAPrioritizedList is off at 1.35 only if set so (beta, on, from 1.34)."""
    raws = [
        claim("c", {"name": "req-1", "exactly": {"deviceClassName": "gpu"}}),
        resource_slice("worker", device("instance-1")),
    ]
    off = FeatureGates((1, 35), {"DRAPrioritizedList": False})
    assert scored(raws, ["worker"], off) == ({"worker": 0}, [0])


def test_subrequests_are_refused_with_prioritized_list_off() -> None:
    handle = Handle(
        objects(GPU, claim("c", first_available("req-1", *subs(1)))),
        FeatureGates((1, 35), {"DRAPrioritizedList": False}),
    )
    pl = DynamicResources(Args(), handle)
    assert pl.pre_filter(CycleState(), pod("p", "c"), []) == (
        None,
        unresolvable(
            "resource claim default/c, request req-1: has subrequests, "
            "but the DRAPrioritizedList feature is disabled"
        ),
    )
