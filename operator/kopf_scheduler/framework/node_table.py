"""Columnar arrays over the snapshot's nodes, so hot filters and scores judge all nodes at once.

Row ``i`` describes ``snapshot.node_infos[i]``. The snapshot rewrites only the rows of nodes whose
generation changed; ``labels_version`` changes whenever any node's labels or taints change, or nodes come
or go, so plugins can memoise per-selector masks until then.

Amounts are int64, as upstream keeps them. ``NodeInfo`` already holds int64 amounts (a quantity that does
not fit one reads as upstream reads it, sums wrap around); ``set_row`` wraps anything larger all the same,
since numpy refuses a Python int beyond int64, and one bad node or pod must not stop every cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kopf_scheduler.api.quantity import INT64_MAX, INT64_MIN, wrap_int64
from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework.node_info import NodeInfo

#: columns every table has, in this order; extended resources are appended when first seen.
BASE_RESOURCES = (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE)


class NodeTable:
    def __init__(self, resources: Sequence[str] = BASE_RESOURCES) -> None:
        self.resources: list[str] = list(resources)
        self.column: dict[str, int] = {name: i for i, name in enumerate(self.resources)}
        self.size = 0
        self.allocatable = np.zeros((0, len(self.resources)), dtype=np.int64)
        self.requested = np.zeros((0, len(self.resources)), dtype=np.int64)
        #: non-zero requests (cpu, memory): missing container requests count as 100m / 200 MiB.
        self.non_zero = np.zeros((0, 2), dtype=np.int64)
        self.pod_count = np.zeros(0, dtype=np.int64)
        self.allowed_pods = np.zeros(0, dtype=np.int64)
        self.unschedulable = np.zeros(0, dtype=bool)
        self.has_taints = np.zeros(0, dtype=bool)
        #: ``NodeInfo.generation`` of each row: lets plugins refresh per-node caches for changed rows only.
        self.generation = np.zeros(0, dtype=np.int64)
        self.labels_version = 0
        #: changes whenever rows move (nodes come or go): a per-row cache made before is row for row no more
        self.layout = 0
        self._memo: dict[Any, Any] = {}

    def reorder(self, size: int, rows_to: Sequence[int], rows_from: Sequence[int]) -> None:
        """Resizes to ``size`` rows, row ``rows_to[k]`` taking the old row ``rows_from[k]``; the other rows
        are zero until written."""
        to, frm = np.asarray(rows_to, dtype=np.intp), np.asarray(rows_from, dtype=np.intp)
        for attr in (
            "allocatable", "requested", "non_zero", "pod_count", "allowed_pods", "unschedulable",
            "has_taints", "generation",
        ):  # fmt: skip
            old = getattr(self, attr)
            new = np.zeros((size, *old.shape[1:]), dtype=old.dtype)
            new[to] = old[frm]
            setattr(self, attr, new)
        self.size = size
        self.layout += 1
        self.bump_labels_version()

    def ensure_resource(self, name: str) -> int:
        """The column of ``name``, adding a zero column when a resource is seen for the first time."""
        col = self.column.get(name)
        if col is None:
            col = len(self.resources)
            self.resources.append(name)
            self.column[name] = col
            pad = np.zeros((self.size, 1), dtype=np.int64)
            self.allocatable = np.hstack([self.allocatable, pad])
            self.requested = np.hstack([self.requested, pad.copy()])
        return col

    def set_row(self, i: int, node: NodeInfo, labels_changed: bool = True) -> None:
        for name in node.allocatable:
            if name not in self.column:
                self.ensure_resource(name)
        for name in node.requested:
            if name not in self.column:
                self.ensure_resource(name)
        alloc = self.allocatable[i]
        alloc[:] = 0
        for name, amount in node.allocatable.items():
            alloc[self.column[name]] = amount if INT64_MIN <= amount <= INT64_MAX else wrap_int64(amount)
        req = self.requested[i]
        req[:] = 0
        for name, amount in node.requested.items():
            req[self.column[name]] = amount if INT64_MIN <= amount <= INT64_MAX else wrap_int64(amount)
        self.non_zero[i, 0] = wrap_int64(node.non_zero_cpu)
        self.non_zero[i, 1] = wrap_int64(node.non_zero_memory)
        self.pod_count[i] = len(node.pods)
        self.allowed_pods[i] = wrap_int64(node.allowed_pod_number)
        self.unschedulable[i] = node.unschedulable
        self.has_taints[i] = bool(node.taints)
        self.generation[i] = node.generation
        if labels_changed:
            self.bump_labels_version()

    def bump_labels_version(self) -> None:
        self.labels_version += 1
        self._memo.clear()

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """A value derived from node labels or taints, kept until they change (``labels_version``)."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = build()
            return value
