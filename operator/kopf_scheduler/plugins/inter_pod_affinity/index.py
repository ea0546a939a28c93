"""Per-row aggregates over the pods in the snapshot, kept in step with it node by node.

Upstream walks every pod of every node in PreFilter (and of the nodes with affinity pods in PreScore) for
each incoming pod, in 16 goroutines. Here the walk is replaced by arrays over the table's rows:

- ``anti``: for each distinct required anti-affinity term of an existing pod, how many pods on each row
  have it; ``scoring``: the same for existing pods' required affinity terms and preferred (anti-)affinity
  terms with their weights. Only rows whose ``NodeInfo.generation`` changed since the last ``sync`` are
  looked at again; when nodes come or go, the other nodes' rows move to their new places.
- ``match_counts``: for a predicate over pods (the incoming pod's terms), how many pods on each row
  satisfy it; computed once per distinct term (set), then refreshed for changed rows only, least recently
  used entries dropped first.

Invariant: after ``sync(snapshot)``, every array describes ``snapshot.node_infos`` row for row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from kopf_scheduler.framework.interface import SnapshotLister
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.inter_pod_affinity.terms import AffinityTerm, pod_terms

REQUIRED_AFFINITY = 0
PREFERRED_AFFINITY = 1
PREFERRED_ANTI_AFFINITY = 2

#: (kind, term, weight) of a term an existing pod carries that scoring looks at
ScoringKey = tuple[int, AffinityTerm, int]

MAX_CACHED_MATCHES = 128


class _Matches:
    __slots__ = ("counts", "generation")

    def __init__(self, size: int) -> None:
        self.counts = np.zeros(size, dtype=np.int64)
        self.generation = np.full(size, -1, dtype=np.int64)

    def move(self, size: int, to: np.ndarray, frm: np.ndarray) -> None:
        """The rows ``frm`` go to rows ``to`` of ``size`` rows; the other rows are stale."""
        counts = np.zeros(size, dtype=np.int64)
        counts[to] = self.counts[frm]
        generation = np.full(size, -1, dtype=np.int64)
        generation[to] = self.generation[frm]
        self.counts, self.generation = counts, generation


class _Aggregate:
    """Per-row counts of keys carried by pods, with running totals so empty keys disappear."""

    __slots__ = ("arrays", "per_row", "totals")

    def __init__(self, size: int) -> None:
        self.arrays: dict[Any, np.ndarray] = {}
        self.totals: dict[Any, int] = {}
        self.per_row: list[dict[Any, int] | None] = [None] * size

    def set_row(self, row: int, counts: dict[Any, int] | None, size: int) -> None:
        old = self.per_row[row]
        if old == counts:
            return
        for key, count in (old or {}).items():
            self.arrays[key][row] = 0
            self.totals[key] -= count
        for key, count in (counts or {}).items():
            array = self.arrays.get(key)
            if array is None:
                array = self.arrays[key] = np.zeros(size, dtype=np.int64)
                self.totals[key] = 0
            array[row] = count
            self.totals[key] += count
        for key in (old or {}).keys() - (counts or {}).keys():
            if not self.totals[key]:
                del self.totals[key], self.arrays[key]
        self.per_row[row] = counts

    def moved(self, size: int, to: np.ndarray, frm: np.ndarray) -> _Aggregate:
        """The rows ``frm`` at rows ``to`` of ``size`` rows; the other rows empty."""
        out = _Aggregate(size)
        for key, array in self.arrays.items():
            carried = np.zeros(size, dtype=np.int64)
            carried[to] = array[frm]
            if total := int(carried.sum()):
                out.arrays[key] = carried
                out.totals[key] = total
        if self.totals:  # else every row is empty
            destination = np.full(len(self.per_row), -1, dtype=np.intp)
            destination[frm] = to
            for j, counts in enumerate(self.per_row):
                if counts is not None and (i := int(destination[j])) >= 0:
                    out.per_row[i] = counts
        return out


def _carried(node: NodeInfo) -> tuple[dict[Any, int] | None, dict[Any, int] | None]:
    anti: dict[Any, int] = {}
    scoring: dict[Any, int] = {}
    for pod in node.pods_with_affinity.values():
        terms = pod_terms(pod)
        for term in terms.required_anti:
            anti[term] = anti.get(term, 0) + 1
        for term in terms.required_affinity:
            key: ScoringKey = (REQUIRED_AFFINITY, term, 0)
            scoring[key] = scoring.get(key, 0) + 1
        for weighted in terms.preferred_affinity:
            key = (PREFERRED_AFFINITY, weighted.term, weighted.weight)
            scoring[key] = scoring.get(key, 0) + 1
        for weighted in terms.preferred_anti:
            key = (PREFERRED_ANTI_AFFINITY, weighted.term, weighted.weight)
            scoring[key] = scoring.get(key, 0) + 1
    return anti or None, scoring or None


def _count(node: NodeInfo, predicate: Callable[[PodInfo], bool]) -> int:
    return sum(1 for pod in node.pods.values() if predicate(pod)) if node.pods else 0


class ClusterIndex:
    def __init__(self) -> None:
        self._table: NodeTable | None = None
        #: the table's ``layout`` the rows were last synced at
        self._layout = -1
        self._infos: Sequence[NodeInfo] = ()
        self._generation = np.zeros(0, dtype=np.int64)
        self._anti = _Aggregate(0)
        self._scoring = _Aggregate(0)
        self._matches: OrderedDict[Hashable, _Matches] = OrderedDict()

    @property
    def anti(self) -> dict[AffinityTerm, np.ndarray]:
        """Required anti-affinity term of existing pods -> per-row number of pods carrying it."""
        return self._anti.arrays

    @property
    def scoring(self) -> dict[ScoringKey, np.ndarray]:
        """Scoring-relevant term of existing pods -> per-row number of pods carrying it."""
        return self._scoring.arrays

    def sync(self, snapshot: SnapshotLister) -> None:
        table, infos = snapshot.table, snapshot.node_infos
        size = len(infos)
        generation = table.generation[:size]
        if table is not self._table:
            self._table = table
            self._generation = np.full(size, -1, dtype=np.int64)
            self._anti = _Aggregate(size)
            self._scoring = _Aggregate(size)
            self._matches.clear()
        elif self._layout != table.layout:
            self._carry_over(generation)
        self._layout = table.layout
        self._infos = infos
        changed = np.flatnonzero(self._generation != generation)
        for row in changed.tolist():
            anti, scoring = _carried(infos[row])
            self._anti.set_row(row, anti, size)
            self._scoring.set_row(row, scoring, size)
        self._generation[changed] = generation[changed]

    def _carry_over(self, generation: np.ndarray) -> None:
        """Nodes came or went and rows moved: what is known of a node version (its ``generation``, unique
        to it) moves to its new row, and only the rows of nodes new or changed are looked at again (a
        node added to a large cluster costs one row, not one per node)."""
        old = self._generation
        size = len(generation)
        to = frm = np.zeros(0, dtype=np.intp)
        if len(old):
            order = np.argsort(old)
            ranked = old[order]
            at = np.minimum(np.searchsorted(ranked, generation), len(old) - 1)
            found = (ranked[at] == generation) & (generation >= 0)
            to, frm = np.flatnonzero(found), order[at[found]]
        self._generation = np.full(size, -1, dtype=np.int64)
        self._generation[to] = old[frm]
        self._anti = self._anti.moved(size, to, frm)
        self._scoring = self._scoring.moved(size, to, frm)
        for entry in self._matches.values():
            entry.move(size, to, frm)

    def match_counts(self, key: Hashable, predicate: Callable[[PodInfo], bool]) -> np.ndarray:
        """Per row, the number of pods satisfying ``predicate`` (identified by ``key``). Read-only."""
        infos = self._infos
        entry = self._matches.get(key)
        if entry is None:
            entry = self._matches[key] = _Matches(len(infos))
            if len(self._matches) > MAX_CACHED_MATCHES:
                self._matches.popitem(last=False)
        else:
            self._matches.move_to_end(key)
        stale = np.flatnonzero(entry.generation != self._generation)
        if len(stale):
            counts = entry.counts
            for row in stale.tolist():
                counts[row] = _count(infos[row], predicate)
            entry.generation[stale] = self._generation[stale]
        return entry.counts
