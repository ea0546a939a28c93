"""Per-row arrays over the snapshot's ``NodeTable`` that make spreading cheap per pod.

- ``domains``: for a topology key, each row's index into the key's distinct values (-1 when the node
  lacks the key), memoised on the table until node labels change.
- ``keys_mask`` / ``affinity_mask`` / ``taints_mask``: which rows have every topology key, match the
  pod's required node affinity, tolerate their NoSchedule/NoExecute taints; memoised the same way, per
  key set, affinity and toleration set.
- ``match_counts``: per row, the number of pods of a namespace matching a selector. Kept per table and
  refreshed only for rows whose ``NodeInfo.generation`` changed since the last call, so a pod of a known
  template costs one compare over the table plus a recount of the few nodes that changed.

All of these agree with the per-node helpers in ``constraints.py``; the property tests prove it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.selectors import LabelSelector, RequiredNodeAffinity
from kopf_scheduler.framework.taints import Toleration
from kopf_scheduler.plugins._helpers import topology_values
from kopf_scheduler.plugins.pod_topology_spread.constraints import count_matching, tolerates_node

_PREFIX = "PodTopologySpread"
#: selectors whose per-row counts are kept per table (least recently used dropped first).
MAX_CACHED_SELECTORS = 64


@dataclass(slots=True)
class Domains:
    """The distinct values of one topology key over the table's rows."""

    values: list[str]
    index: dict[str, int]
    #: per row: index into ``values``, -1 when the node lacks the key
    dom: np.ndarray
    #: per row: like ``dom`` but a missing key reads as the value "" (upstream's map lookup of a missing key)
    dom_or_empty: np.ndarray

    def slot(self, value: str) -> int | None:
        return self.index.get(value)


def domains(table: NodeTable, infos: Sequence[NodeInfo], key: str) -> Domains:
    def build() -> Domains:
        shared, dom = topology_values(table, infos, key)
        index = dict(shared)  # may gain "" below; the shared mapping stays as it is
        filled = dom
        if (dom < 0).any():
            empty = index.get("")
            if empty is None:
                empty = index[""] = len(index)
            filled = np.where(dom < 0, empty, dom)
        return Domains(list(index), index, dom, filled)

    return table.memo((_PREFIX, "domains", key), build)  # type: ignore[no-any-return]


def keys_mask(table: NodeTable, infos: Sequence[NodeInfo], keys: tuple[str, ...]) -> np.ndarray:
    def build() -> np.ndarray:
        mask = np.ones(len(infos), dtype=bool)
        for key in keys:
            mask &= domains(table, infos, key).dom >= 0
        return mask

    return table.memo((_PREFIX, "keys", keys), build)  # type: ignore[no-any-return]


def affinity_mask(table: NodeTable, infos: Sequence[NodeInfo], required: RequiredNodeAffinity) -> np.ndarray:
    if required.trivial:
        return np.ones(len(infos), dtype=bool)

    def build() -> np.ndarray:
        return np.fromiter((required.matches(n.labels, n.name) for n in infos), dtype=bool, count=len(infos))

    return table.memo((_PREFIX, "affinity", required), build)  # type: ignore[no-any-return]


def taints_mask(
    table: NodeTable, infos: Sequence[NodeInfo], tolerations: tuple[Toleration, ...]
) -> np.ndarray:
    def build() -> np.ndarray:
        mask = ~table.has_taints[: len(infos)]
        for i in np.flatnonzero(~mask).tolist():
            mask[i] = tolerates_node(infos[i], tolerations)
        return mask

    return table.memo((_PREFIX, "taints", tolerations), build)  # type: ignore[no-any-return]


class _Counts:
    __slots__ = ("counts", "generation")

    def __init__(self, size: int) -> None:
        self.generation = np.full(size, -1, dtype=np.int64)
        self.counts = np.zeros(size, dtype=np.int64)


def match_counts(
    table: NodeTable, infos: Sequence[NodeInfo], namespace: str, selector: LabelSelector | None
) -> np.ndarray:
    """Per row, ``count_matching`` over the node's pods. The array is shared: callers must not modify it."""
    size = len(infos)
    if selector is None or not selector.requirements:
        return np.zeros(size, dtype=np.int64)
    cache: OrderedDict[tuple[str, LabelSelector], _Counts] = table.memo((_PREFIX, "counts"), OrderedDict)
    key = (namespace, selector)
    entry = cache.get(key)
    if entry is None or len(entry.counts) != size:
        entry = cache[key] = _Counts(size)
        if len(cache) > MAX_CACHED_SELECTORS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    generation = table.generation[:size]
    stale = np.flatnonzero(entry.generation != generation)
    if len(stale):
        counts = entry.counts
        for i in stale.tolist():
            counts[i] = count_matching(infos[i].pods.values(), selector, namespace)
        entry.generation[stale] = generation[stale]
    return entry.counts
