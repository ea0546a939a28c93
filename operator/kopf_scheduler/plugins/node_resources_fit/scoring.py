"""The three scoring strategies of NodeResourcesFit (``least_allocated.go``, ``most_allocated.go``,
``requested_to_capacity_ratio.go``), per node and vectorised over nodes; both give identical integers.

Inputs are ``requested`` (node's requests plus the pod's) and ``allocatable`` per resource; a resource
with zero allocatable on a node is left out of that node's weighted average, as upstream does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kopf_scheduler.framework.interface import MAX_NODE_SCORE
from kopf_scheduler.plugins.node_resources_fit.args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    MOST_ALLOCATED,
    ShapePoint,
)


def _trunc_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division rounding toward zero, as Go's int64 ``/`` does: numpy's ``//`` floors, one less
    where the signs differ and the division is not exact (a product that wrapped around past int64:
    ``(alloc - requested) * 100`` near 2^63 of allocatable is negative, and scores 0 upstream, not -1).
    ``b`` is never 0. The correction costs one pass when no sign differs (the usual case)."""
    q = a // b
    signs_differ = (a ^ b) < 0
    if signs_differ.any():
        q = q + (signs_differ & (a % b != 0))
    return q


def _shape_scores(shape: Sequence[ShapePoint], utilization: np.ndarray) -> np.ndarray:
    """Upstream's ``BuildBrokenLinearFunction`` over the scaled shape, for each utilisation value."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    out = np.full(utilization.shape, shape[-1].score * scale, dtype=np.int64)
    done = np.zeros(utilization.shape, dtype=bool)
    for i, point in enumerate(shape):
        here = ~done & (utilization <= point.utilization)
        if i == 0:
            out[here] = point.score * scale
        else:
            prev = shape[i - 1]
            rise = (point.score - prev.score) * scale
            run = point.utilization - prev.utilization
            out[here] = prev.score * scale + _trunc_div(rise * (utilization[here] - prev.utilization), run)
        done |= here
    return out


def resource_scores(
    strategy: str, shape: Sequence[ShapePoint], requested: np.ndarray, alloc: np.ndarray
) -> np.ndarray:
    """Per-resource scores (same shape as the inputs); entries with ``alloc == 0`` are meaningless."""
    safe = np.where(alloc == 0, 1, alloc)
    if strategy == LEAST_ALLOCATED:
        return np.where(requested > alloc, 0, _trunc_div((alloc - requested) * MAX_NODE_SCORE, safe))
    if strategy == MOST_ALLOCATED:
        return _trunc_div(np.minimum(requested, alloc) * MAX_NODE_SCORE, safe)
    utilization = np.where(requested > alloc, MAX_UTILIZATION, _trunc_div(requested * MAX_UTILIZATION, safe))
    return _shape_scores(shape, utilization)


def combine(strategy: str, scores: np.ndarray, alloc: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted average over resources (last axis), as each strategy's scorer computes it."""
    counted = alloc != 0
    if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        counted &= scores > 0  # RequestedToCapacityRatio averages only resources that scored
    w = np.where(counted, weights, 0)
    total = (scores * w).sum(axis=-1)
    weight_sum = w.sum(axis=-1)
    safe = np.where(weight_sum == 0, 1, weight_sum)
    if strategy in (LEAST_ALLOCATED, MOST_ALLOCATED):
        result = _trunc_div(total, safe)
    else:  # math.Round: half away from zero, on non-negative values
        result = (2 * total + safe) // (2 * safe)
    return np.where(weight_sum == 0, 0, result).astype(np.int64)
