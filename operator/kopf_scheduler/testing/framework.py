"""A framework of just the plugins a test names, for running extension points without a profile."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.interface import SnapshotLister
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.plugins.priority_sort import PrioritySort


def make_framework(
    *,
    pre_enqueue: Iterable[Any] = (),
    queue_sort: Any = None,
    pre_filter: Iterable[Any] = (),
    filter: Iterable[Any] = (),
    pre_score: Iterable[Any] = (),
    score: Iterable[Any] = (),
    weights: dict[str, int] | None = None,
    reserve: Iterable[Any] = (),
    permit: Iterable[Any] = (),
    profile_name: str = "p",
    clock: VirtualClock | None = None,
    snapshot: SnapshotLister | None = None,
) -> Framework:
    """PrioritySort unless ``queue_sort`` is given (then it is one of the framework's plugins too); every
    score weight 1 unless ``weights`` says; no binding plugins and no client (nothing a test runs this way
    writes to the API)."""
    sort = queue_sort if queue_sort is not None else PrioritySort()
    points = [list(p) for p in (pre_enqueue, pre_filter, filter, pre_score, score, reserve, permit)]
    pre_enqueue_, pre_filter_, filter_, pre_score_, score_, reserve_, permit_ = points
    named = [queue_sort] if queue_sort is not None else []
    everything = [*named, *(plugin for point in points for plugin in point)]
    return Framework(
        profile_name=profile_name,
        percentage_of_nodes_to_score=None,
        plugins={p.name: p for p in everything},
        pre_enqueue=pre_enqueue_,
        queue_sort=sort,
        pre_filter=pre_filter_,
        filter=filter_,
        post_filter=[],
        pre_score=pre_score_,
        score=score_,
        score_weights=weights if weights is not None else {p.name: 1 for p in score_},
        reserve=reserve_,
        permit=permit_,
        pre_bind=[],
        bind=[],
        post_bind=[],
        client=None,  # type: ignore[arg-type]
        clock=clock or VirtualClock(),
        current_snapshot=snapshot,
    )
