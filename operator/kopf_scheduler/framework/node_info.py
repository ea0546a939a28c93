"""``NodeInfo``: a node with the pods on it and what they request, as the filters and scores see it.

Invariants: ``requested`` is the sum of ``requests`` of ``pods``; ``non_zero_*`` the sum of their
non-zero requests; ``used_ports`` counts every host port of every pod; ``generation`` changes on every
mutation so the snapshot can refresh only changed nodes. Filters and scores never mutate a NodeInfo.
Every amount, allocatable and summed, is an int64: quantities read as upstream reads them and sums wrap
around as upstream's int64 sums do (``framework.resources``), so the node table can always hold them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.api.errors import json_type, key_path
from kopf_scheduler.api.quantity import (
    QuantityError,
    add_int64,
    int64_milli_value_of,
    int64_value_of,
    wrong_type,
)
from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework.pod_info import HostPort, PodInfo
from kopf_scheduler.framework.taints import Taint

_generations = itertools.count(1)


def next_generation() -> int:
    return next(_generations)


class NodeParseError(ValueError):
    """The node has a field the scheduler cannot read; the message names the field path."""


def normalized_image_name(name: str) -> str:
    """Image names as ImageLocality compares them: ``:latest`` added when there is no tag or digest."""
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        return name + ":latest"
    return name


def _object(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` when it is an object, ``{}`` when absent; raises ``NodeParseError`` for another type."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise NodeParseError(f"{path}: must be an object, not {json_type(value)}")
    return value


def _is_string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, Mapping) for item in value)


def _images(raw: Any) -> dict[str, int]:
    """``status.images`` as normalized image name -> size in bytes."""
    if raw is None:
        return {}
    if not _is_list_of_objects(raw):
        raise NodeParseError("status.images: must be a list of objects")
    images: dict[str, int] = {}
    for i, image in enumerate(raw):
        size = image.get("sizeBytes") or 0
        if (
            isinstance(size, bool)
            or not isinstance(size, int | float)
            or (isinstance(size, float) and not math.isfinite(size))
        ):
            raise NodeParseError(f"status.images[{i}].sizeBytes: must be an integer, not {json_type(size)}")
        names = image.get("names") or ()
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise NodeParseError(f"status.images[{i}].names: must be a list of strings")
        for image_name in names:
            images[normalized_image_name(image_name)] = int(size)
    return images


class NodeInfo:
    __slots__ = (
        "allocatable",
        "allowed_pod_number",
        "generation",
        "image_sizes",
        "labels",
        "name",
        "node",
        "non_zero_cpu",
        "non_zero_memory",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "taints",
        "unschedulable",
        "used_ports",
    )

    def __init__(self, node: Mapping[str, Any] | None = None, name: str = "") -> None:
        self.pods: dict[str, PodInfo] = {}
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.requested: dict[str, int] = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports: Counter[HostPort] = Counter()
        self.node: Mapping[str, Any] | None = None
        self.name = name
        self.labels: dict[str, str] = {}
        self.taints: tuple[Taint, ...] = ()
        self.unschedulable = False
        self.allocatable: dict[str, int] = {}
        self.allowed_pod_number = 0
        self.image_sizes: dict[str, int] = {}
        self.generation = next_generation()
        if node is not None:
            self.set_node(node)

    # -- node -------------------------------------------------------------------------------------------
    def set_node(self, node: Mapping[str, Any]) -> None:
        meta = _object(node.get("metadata"), "metadata")
        spec = _object(node.get("spec"), "spec")
        status = _object(node.get("status"), "status")
        name = str(meta.get("name") or "")
        if not name:
            raise NodeParseError("metadata.name: required")
        allocatable = _object(status.get("allocatable"), "status.allocatable")
        source = "status.allocatable"
        if not allocatable:  # the API server defaults allocatable to capacity
            allocatable, source = _object(status.get("capacity"), "status.capacity"), "status.capacity"
        parsed: dict[str, int] = {}
        for resource, quantity in allocatable.items():
            try:
                parsed[resource] = (
                    int64_milli_value_of(quantity) if resource == res.CPU else int64_value_of(quantity)
                )
            except QuantityError as e:
                raise NodeParseError(f"{key_path(source, resource)}: {e}") from None
            except TypeError:  # unhashable: a list or an object
                raise NodeParseError(f"{key_path(source, resource)}: {wrong_type(quantity)}") from None
        images = _images(status.get("images"))
        labels = meta.get("labels")
        if labels is not None and not _is_string_map(labels):
            raise NodeParseError("metadata.labels: must be a map of strings")
        taints = spec.get("taints")
        if taints is not None and not _is_list_of_objects(taints):
            raise NodeParseError("spec.taints: must be a list of objects")
        self.node = node
        self.name = name
        self.labels = dict(labels or {})
        self.taints = tuple(Taint.parse(t) for t in taints or ())
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allowed_pod_number = parsed.pop(res.PODS, 0)
        self.allocatable = parsed
        self.image_sizes = images
        self.generation = next_generation()

    # -- pods -------------------------------------------------------------------------------------------
    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        if pod.has_pod_affinity:
            self.pods_with_affinity[pod.uid] = pod
        if pod.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pod.uid] = pod
        res.add_into(self.requested, pod.requests)
        self.non_zero_cpu = add_int64(self.non_zero_cpu, pod.non_zero_cpu)
        self.non_zero_memory = add_int64(self.non_zero_memory, pod.non_zero_memory)
        if pod.host_ports:  # a new Counter: clones share this one
            ports = Counter(self.used_ports)
            ports.update(pod.host_ports)
            self.used_ports = ports
        self.generation = next_generation()

    def remove_pod(self, pod: PodInfo) -> bool:
        """Removes the pod with ``pod.uid``; False when it is not on this node."""
        current = self.pods.pop(pod.uid, None)
        if current is None:
            return False
        self.pods_with_affinity.pop(pod.uid, None)
        self.pods_with_required_anti_affinity.pop(pod.uid, None)
        res.subtract_from(self.requested, current.requests)
        self.non_zero_cpu = add_int64(self.non_zero_cpu, -current.non_zero_cpu)
        self.non_zero_memory = add_int64(self.non_zero_memory, -current.non_zero_memory)
        if current.host_ports:  # a new Counter, without zero counts: clones share this one
            ports = Counter(self.used_ports)
            ports.subtract(current.host_ports)
            self.used_ports = +ports
        self.generation = next_generation()
        return True

    def clone(self) -> NodeInfo:
        """A copy whose pod sets and sums change independently of this node's. ``used_ports`` is shared:
        ``add_pod`` and ``remove_pod`` replace it rather than change it. On preemption's hot path: slots are
        assigned one by one (a loop over names costs twice as much)."""
        new = object.__new__(NodeInfo)
        new.pods = self.pods.copy()
        new.pods_with_affinity = self.pods_with_affinity.copy()
        new.pods_with_required_anti_affinity = self.pods_with_required_anti_affinity.copy()
        new.requested = self.requested.copy()
        new.used_ports = self.used_ports
        new.allocatable = self.allocatable
        new.allowed_pod_number = self.allowed_pod_number
        new.generation = self.generation
        new.image_sizes = self.image_sizes
        new.labels = self.labels
        new.name = self.name
        new.node = self.node
        new.non_zero_cpu = self.non_zero_cpu
        new.non_zero_memory = self.non_zero_memory
        new.taints = self.taints
        new.unschedulable = self.unschedulable
        return new

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
