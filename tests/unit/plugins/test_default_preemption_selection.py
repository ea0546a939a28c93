"""Choosing the node to preempt on, one criterion at a time (``pickOneNodeForPreemption``): fewest PDB
violations, lowest highest-victim priority, lowest sum of priorities (+2^31 each), fewest victims, latest
start of the highest-priority victims, then the first candidate; and the start-time helpers."""

from __future__ import annotations

import pytest
from _preemption_kit import NOW

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import (
    Candidate,
    earliest_start_of_highest_priority,
    importance_key,
    pick_one_node_for_preemption,
    pod_start_time,
)
from kopf_scheduler.testing import make_pod

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T01:00:00Z"
T2 = "2026-01-01T02:00:00Z"


def victim(priority: int, started: str | None = None, name: str = "v") -> PodInfo:
    builder = make_pod().name(name).priority(priority)
    if started:
        builder = builder.set("status.startTime", started)
    return PodInfo(builder.obj())


def cand(name: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    ordered = sorted(victims, key=importance_key(NOW))
    return Candidate(name, ordered, violations)


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        pytest.param([], "", id="none"),
        pytest.param([cand("a", victim(100))], "a", id="single"),
        pytest.param(
            [cand("a", victim(0), violations=2), cand("b", victim(1000), violations=1)],
            "b",
            id="fewest-pdb-violations",
        ),
        pytest.param(
            [cand("a", victim(300), victim(10)), cand("b", victim(200), victim(200), victim(200))],
            "b",
            id="lowest-highest-priority",
        ),
        pytest.param(
            [cand("a", victim(100), victim(100)), cand("b", victim(100), victim(50))],
            "b",
            id="lowest-priority-sum",
        ),
        pytest.param(
            # Without the offset, three victims at -10 would sum lower than two.
            [cand("a", victim(-10), victim(-10), victim(-10)), cand("b", victim(-10), victim(-10))],
            "b",
            id="negative-priorities-sum-with-offset",
        ),
        pytest.param(
            [cand("a", victim(0), victim(0)), cand("b", victim(0, T0))],
            "b",
            id="lowest-sum-before-victim-count",
        ),
        pytest.param(
            # Priority -2^31 adds nothing to the sum: only the number of victims tells them apart.
            [cand("a", victim(-(2**31)), victim(-(2**31))), cand("b", victim(-(2**31)))],
            "b",
            id="fewest-victims",
        ),
        pytest.param(
            [cand("a", victim(5, T0), victim(5, T1)), cand("b", victim(5, T1), victim(5, T2))],
            "b",
            id="latest-start-of-highest-priority",
        ),
        pytest.param(
            # Only the highest-priority victims' start times count: a's low victim started late.
            [cand("a", victim(9, T0), victim(1, T2)), cand("b", victim(9, T1), victim(1, T0))],
            "b",
            id="start-of-highest-priority-only",
        ),
        pytest.param(
            [cand("a", victim(5, T1)), cand("b", victim(5)), cand("c", victim(5, T2))],
            "b",
            id="not-started-counts-as-now",
        ),
        pytest.param(
            [cand("a", victim(5, T1)), cand("b", victim(5, T1)), cand("c", victim(5, T1))],
            "a",
            id="full-tie-first",
        ),
    ],
)
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str) -> None:
    assert pick_one_node_for_preemption(candidates, NOW) == expected


def test_pod_start_time() -> None:
    assert pod_start_time(victim(0, T0), NOW) == 1767225600.0
    assert pod_start_time(victim(0), NOW) == NOW
    assert pod_start_time(PodInfo(make_pod().name("x").set("status.startTime", "bogus").obj()), NOW) == NOW


@pytest.mark.parametrize(
    ("victims", "expected"),
    [
        pytest.param(
            [victim(5, T1), victim(5, T0), victim(1, "2025-01-01T00:00:00Z")], T0, id="highest-only"
        ),
        pytest.param([victim(1, T0), victim(7, T2)], T2, id="single-highest"),
    ],
)
def test_earliest_start_of_highest_priority(victims: list[PodInfo], expected: str) -> None:
    assert earliest_start_of_highest_priority(victims, NOW) == pod_start_time(victim(0, expected), NOW)


def test_importance_orders_priority_then_longer_running() -> None:
    pods = [
        victim(1, T1, "late-low"),
        victim(9, T2, "high"),
        victim(1, T0, "early-low"),
        victim(1, None, "new"),
    ]
    assert [p.name for p in sorted(pods, key=importance_key(NOW))] == ["high", "early-low", "late-low", "new"]
