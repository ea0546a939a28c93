"""Volume-capacity scoring (``StorageCapacityScoring``): upstream's ``volumebinding/scorer.go``, the
grouping of ``VolumeBinding.Score`` and ``helper.BuildBrokenLinearFunction``, in Go's integer arithmetic.

A node's volumes are grouped by storage class, each class with what the pod requests of it and the
capacity it has: the statically chosen volumes when the pod gets any (their ``spec.storageClassName`` and
``spec.capacity``), else the claims to provision whose driver reports CSIStorageCapacity (the capacity of
the object that showed room, the last one per class, as upstream's ``=``). Each class scores
``shape(requested * 100 / capacity)`` (full when the capacity is 0 or too small), the node the rounded mean.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kopf_scheduler.api.quantity import wrap_int64
from kopf_scheduler.framework.args import MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, ShapePoint
from kopf_scheduler.framework.interface import MAX_NODE_SCORE
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError


@dataclass(slots=True)
class StorageResource:
    requested: int = 0
    capacity: int = 0


def _go_div(a: int, b: int) -> int:
    """Go's integer division: toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


class VolumeCapacityScorer:
    """``buildScorerFunction`` over a shape of 0-10 scores (scaled to the framework's 0-100)."""

    def __init__(self, shape: Sequence[ShapePoint]) -> None:
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.shape = [(p.utilization, p.score * scale) for p in shape]

    def _raw(self, p: int) -> int:
        """``BuildBrokenLinearFunction``."""
        shape = self.shape
        for i, (utilization, score) in enumerate(shape):
            if p <= utilization:
                if i == 0:
                    return score
                prev_utilization, prev_score = shape[i - 1]
                rise = (score - prev_score) * (p - prev_utilization)
                return prev_score + _go_div(rise, utilization - prev_utilization)
        return shape[-1][1]

    def _class_score(self, resource: StorageResource) -> int:
        requested, capacity = resource.requested, resource.capacity
        if capacity == 0 or requested > capacity:
            return self._raw(MAX_UTILIZATION)
        return self._raw(_go_div(wrap_int64(requested * MAX_UTILIZATION), capacity))

    def __call__(self, classes: dict[str, StorageResource]) -> int:
        if not classes:
            return 0
        total = sum(self._class_score(resource) for resource in classes.values())
        mean = float(total) / float(len(classes))
        whole = math.trunc(mean)
        return whole + (1 if mean - whole >= 0.5 else 0)  # math.Round on a non-negative float


def class_resources(pod_volumes: PodVolumes) -> dict[str, StorageResource]:
    """What ``VolumeBinding.Score`` groups by class for the node ``pod_volumes`` was found for; raises
    ``VolumeBindingError`` where kube-scheduler dereferences a nil field (and crashes)."""
    classes: dict[str, StorageResource] = {}
    if pod_volumes.static_bindings:
        for binding in pod_volumes.static_bindings:
            resource = classes.setdefault(binding.volume.storage_class, StorageResource())
            resource.requested = wrap_int64(resource.requested + binding.claim.request)
            resource.capacity = wrap_int64(resource.capacity + binding.volume.capacity)
        return classes
    for provision in pod_volumes.dynamic_provisions:
        capacity = provision.capacity
        if capacity is None:
            continue
        claim = provision.claim
        if claim.storage_class is None:
            raise VolumeBindingError(f"claim {json.dumps(claim.key)} has no spec.storageClassName to score")
        if capacity.capacity is None:
            raise VolumeBindingError(
                f"CSIStorageCapacity {json.dumps(f'{capacity.namespace}/{capacity.name}')} has no capacity "
                "to score"
            )
        resource = classes.setdefault(claim.storage_class, StorageResource())
        resource.capacity = capacity.capacity
        resource.requested = wrap_int64(resource.requested + claim.request)
    return classes
