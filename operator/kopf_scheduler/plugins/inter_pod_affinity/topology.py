"""Counts per topology pair (key, value), laid out as arrays over each key's distinct values.

``TopologyIndex`` maps every table row to the index of its value for one key (-1 when the node lacks the
key); it depends on node labels only, so it is memoised on the ``NodeTable`` until labels change.
``TopologyCounts`` is upstream's ``topologyToMatchedTermCount`` (and, for scoring, ``scoreMap``): one int64
array per key, indexed by value, with one extra slot that stays 0 and stands for "no value" so rows
without the key read 0 in one gather. Pairs whose value no row has (a node outside the snapshot handed to
an add/remove-pod extension) go to a small side dict so nothing is lost.

A key whose value is different on every row, in row order (``kubernetes.io/hostname``), is an "identity"
index: its per-value arrays are per-row arrays, and no gather or scatter is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.plugins._helpers import topology_values

_MEMO = "InterPodAffinity"


class TopologyIndex:
    __slots__ = ("identity", "padded", "row_value", "values")

    def __init__(self, values: dict[str, int], row_value: np.ndarray) -> None:
        self.values = values
        #: per row: the index of the row's value in ``values``, -1 when the node lacks the key
        self.row_value = row_value
        #: like ``row_value`` with -1 replaced by the always-zero slot ``len(values)``
        self.padded = np.where(row_value < 0, len(values), row_value)
        #: every row has its own value, and value ``i`` is row ``i``'s
        rows = len(row_value)
        self.identity = len(values) == rows and bool((row_value == np.arange(rows)).all())


def topology_index(table: NodeTable, infos: Sequence[NodeInfo], key: str) -> TopologyIndex:
    return table.memo(  # type: ignore[no-any-return]
        (_MEMO, "topology", key), lambda: TopologyIndex(*topology_values(table, infos, key))
    )


Lookup = Callable[[str], TopologyIndex]


class TopologyCounts:
    __slots__ = ("_empty", "arrays", "extra", "lookup")

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        #: per topology key: counts indexed like ``TopologyIndex.values``, plus the zero slot
        self.arrays: dict[str, np.ndarray] = {}
        self.extra: dict[tuple[str, str], int] = {}
        self._empty: bool | None = True

    def _array(self, key: str) -> tuple[TopologyIndex, np.ndarray]:
        index = self.lookup(key)
        array = self.arrays.get(key)
        if array is None:
            array = self.arrays[key] = np.zeros(len(index.values) + 1, dtype=np.int64)
        return index, array

    def add_rows(self, key: str, row_counts: np.ndarray, factor: int = 1) -> bool:
        """Adds ``factor`` x ``row_counts[i]`` to the value of row ``i``, for rows that have the key.

        Returns whether any row with a non-zero count has the key (upstream creates a map entry then,
        even when the weight is zero)."""
        index = self.lookup(key)
        if index.identity:
            if not row_counts.any():
                return False
            _, array = self._array(key)
            array[:-1] += row_counts * factor if factor != 1 else row_counts
            self._empty = None
            return True
        rows = np.flatnonzero(row_counts)
        if not len(rows):
            return False
        slots = index.row_value[rows]
        keep = slots >= 0
        if not keep.any():
            return False
        _, array = self._array(key)
        weights = row_counts[rows[keep]] * factor
        array += np.bincount(slots[keep], weights=weights, minlength=len(array)).astype(np.int64)
        self._empty = None
        return True

    def add(self, key: str, value: str, delta: int) -> None:
        index, array = self._array(key)
        slot = index.values.get(value)
        if slot is None:
            total = self.extra.get((key, value), 0) + delta
            if total:
                self.extra[(key, value)] = total
            else:
                self.extra.pop((key, value), None)
        else:
            array[slot] += delta
        self._empty = None

    def get(self, key: str, value: str) -> int:
        array = self.arrays.get(key)
        if array is not None:
            slot = self.lookup(key).values.get(value)
            if slot is not None:
                return int(array[slot])
        return self.extra.get((key, value), 0)

    def get_for(self, key: str, labels: Mapping[str, str]) -> int | None:
        """The count of the node's pair for ``key``; ``None`` when the node lacks the key."""
        value = labels.get(key)
        return None if value is None else self.get(key, value)

    def row_counts(self, key: str, table_rows: np.ndarray) -> np.ndarray:
        """Counts aligned with ``table_rows``; 0 where the node lacks the key. Read-only."""
        array = self.arrays.get(key)
        if array is None:
            return np.zeros(len(table_rows), dtype=np.int64)
        index = self.lookup(key)
        return array[table_rows] if index.identity else array[index.padded[table_rows]]

    def row_has(self, key: str, table_rows: np.ndarray) -> np.ndarray:
        """Whether each node of ``table_rows`` has the key."""
        index = self.lookup(key)
        if index.identity:
            return np.ones(len(table_rows), dtype=bool)
        return index.row_value[table_rows] >= 0

    def pair_keys(self) -> set[str]:
        """Every key with a count (in an array or among the side pairs)."""
        return set(self.arrays) | {key for key, _ in self.extra}

    def empty(self) -> bool:
        """No pair has a non-zero count (upstream: the map has no entries)."""
        if self._empty is None:
            self._empty = not self.extra and not any(a.any() for a in self.arrays.values())
        return self._empty

    def as_dict(self) -> dict[tuple[str, str], int]:
        """Non-zero counts by (key, value), upstream's map form (for tests and debugging)."""
        out = dict(self.extra)
        for key, array in self.arrays.items():
            names = list(self.lookup(key).values)
            for slot in np.flatnonzero(array[:-1]).tolist():
                out[(key, names[slot])] = int(array[slot])
        return out

    def clone(self) -> TopologyCounts:
        new = TopologyCounts(self.lookup)
        new.arrays = {k: a.copy() for k, a in self.arrays.items()}
        new.extra = dict(self.extra)
        new._empty = self._empty
        return new
