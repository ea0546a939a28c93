"""``PodInfo``: a pod parsed once into what scheduling reads, and ``QueuedPodInfo``, its queue record.

Parsing happens when a pod enters the cache or the queue, never in a scheduling cycle. A pod that cannot be
read raises ``PodParseError`` whose message starts with the field path
(``spec.containers[0].resources.requests.cpu: invalid quantity 'lots'``), so the scheduler can tell the
user why in a FailedScheduling event and carry on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, milli_value_of, value_of
from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework.taints import Toleration

DEFAULT_SCHEDULER_NAME = "default-scheduler"


class PodParseError(ValueError):
    """The pod has a field the scheduler cannot read; the message names the field path."""


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int


def parse_timestamp(value: Any) -> float:
    """RFC 3339 ``metadata.creationTimestamp`` as epoch seconds; 0 when absent."""
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text).timestamp()


def _quantities(raw: Any, path: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PodParseError(f"{path}: must be a map of resource names to quantities")
    out: dict[str, int] = {}
    for name, quantity in raw.items():
        try:
            out[str(name)] = milli_value_of(quantity) if name == res.CPU else value_of(quantity)
        except QuantityError as e:
            raise PodParseError(f"{path}.{name}: {e}") from None
    return out


def _container_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise PodParseError(f"{path}.resources: must be an object")
    requests = _quantities(resources.get("requests"), f"{path}.resources.requests")
    # API defaulting: a limit without a request makes the request equal to the limit.
    for name, amount in _quantities(resources.get("limits"), f"{path}.resources.limits").items():
        requests.setdefault(name, amount)
    return requests


def _with_defaults(requests: dict[str, int]) -> dict[str, int]:
    out = dict(requests)
    out.setdefault(res.CPU, res.DEFAULT_MILLI_CPU_REQUEST)
    out.setdefault(res.MEMORY, res.DEFAULT_MEMORY_REQUEST)
    return out


def compute_requests(spec: Mapping[str, Any], non_zero: bool = False) -> dict[str, int]:
    """Pod requests as ``component-helpers/resource.PodRequests`` computes them.

    ``max(Σ containers + Σ sidecars, max_i(init_i + Σ sidecars started before i)) + overhead``, where a
    sidecar is an init container with ``restartPolicy: Always``. With ``non_zero``, a container missing a
    CPU or memory request counts as 100m / 200 MiB (the scoring view).
    """
    total: dict[str, int] = {}
    for i, container in enumerate(spec.get("containers") or ()):
        requests = _container_requests(container, f"spec.containers[{i}]")
        res.add_into(total, _with_defaults(requests) if non_zero else requests)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, container in enumerate(spec.get("initContainers") or ()):
        requests = _container_requests(container, f"spec.initContainers[{i}]")
        if non_zero:
            requests = _with_defaults(requests)
        if container.get("restartPolicy") == "Always":
            res.add_into(sidecars, requests)
            res.max_into(init_max, sidecars)
        else:
            candidate = dict(sidecars)
            res.add_into(candidate, requests)
            res.max_into(init_max, candidate)
    res.add_into(total, sidecars)
    res.max_into(total, init_max)
    pod_level = spec.get("resources") or {}
    if isinstance(pod_level, Mapping) and pod_level.get("requests"):
        for name, amount in _quantities(pod_level.get("requests"), "spec.resources.requests").items():
            if name in (res.CPU, res.MEMORY):
                total[name] = amount
    res.add_into(total, _quantities(spec.get("overhead"), "spec.overhead"))
    return {name: amount for name, amount in total.items() if amount}


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or ()):
            # Only sidecars (restartable init containers) hold their ports while the pod runs
            # (``GetHostPorts`` in kube-scheduler's util).
            if kind == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            for j, port in enumerate(container.get("ports") or ()):
                host_port = port.get("hostPort")
                if not host_port:
                    continue
                if not isinstance(host_port, int) or not 0 < host_port < 65536:
                    raise PodParseError(f"spec.{kind}[{i}].ports[{j}].hostPort: invalid port {host_port!r}")
                ports.append(
                    HostPort(port.get("protocol") or "TCP", port.get("hostIP") or "0.0.0.0", host_port)
                )
    return tuple(ports)


class PodInfo:
    """A pod as the scheduler reads it. ``raw`` is the API object; everything else is derived once."""

    __slots__ = (
        "affinity",
        "annotations",
        "creation",
        "deletion_timestamp",
        "extra",
        "host_ports",
        "key",
        "labels",
        "name",
        "namespace",
        "node_name",
        "nominated_node_name",
        "non_zero_cpu",
        "non_zero_memory",
        "preemption_policy",
        "priority",
        "raw",
        "requests",
        "scheduler_name",
        "scheduling_gates",
        "tolerations",
        "topology_spread_constraints",
        "uid",
    )

    def __init__(self, raw: Mapping[str, Any]) -> None:
        if not isinstance(raw, Mapping):
            raise PodParseError("pod: must be an object")
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
            raise PodParseError("metadata/spec: must be objects")
        self.raw = raw
        self.name: str = str(meta.get("name") or "")
        if not self.name:
            raise PodParseError("metadata.name: required")
        self.namespace: str = str(meta.get("namespace") or "default")
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = str(meta.get("uid") or self.key)
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.annotations: dict[str, str] = dict(meta.get("annotations") or {})
        try:
            self.creation = parse_timestamp(meta.get("creationTimestamp"))
        except ValueError:
            raise PodParseError(
                f"metadata.creationTimestamp: invalid timestamp {meta.get('creationTimestamp')!r}"
            ) from None
        self.deletion_timestamp = meta.get("deletionTimestamp")
        priority = spec.get("priority") or 0
        if not isinstance(priority, int):
            raise PodParseError(f"spec.priority: must be an integer, not {priority!r}")
        self.priority: int = priority
        self.preemption_policy: str = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        self.scheduler_name: str = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        self.node_name: str = spec.get("nodeName") or ""
        self.nominated_node_name: str = (
            (status.get("nominatedNodeName") or "") if isinstance(status, Mapping) else ""
        )
        self.scheduling_gates: tuple[str, ...] = tuple(
            str(g.get("name")) for g in spec.get("schedulingGates") or () if isinstance(g, Mapping)
        )
        try:
            self.tolerations = tuple(Toleration.parse(t) for t in spec.get("tolerations") or ())
        except AttributeError:
            raise PodParseError("spec.tolerations: must be a list of objects") from None
        self.requests: dict[str, int] = compute_requests(spec)
        non_zero = compute_requests(spec, non_zero=True)
        self.non_zero_cpu: int = non_zero.get(res.CPU, 0)
        self.non_zero_memory: int = non_zero.get(res.MEMORY, 0)
        self.host_ports = _host_ports(spec)
        self.affinity: Mapping[str, Any] = spec.get("affinity") or {}
        self.topology_spread_constraints: tuple[Mapping[str, Any], ...] = tuple(
            spec.get("topologySpreadConstraints") or ()
        )
        #: derived data plugins compute once per pod (parsed affinity terms, selectors), by plugin key.
        self.extra: dict[str, Any] = {}

    @classmethod
    def reference(cls, raw: Mapping[str, Any]) -> PodInfo:
        """A pod known only by its metadata: for reporting on a pod whose spec cannot be read."""
        info = object.__new__(cls)
        meta = (raw.get("metadata") if isinstance(raw, Mapping) else None) or {}
        info.raw = raw if isinstance(raw, Mapping) else {}
        info.name = str(meta.get("name") or "")
        info.namespace = str(meta.get("namespace") or "default")
        info.key = f"{info.namespace}/{info.name}"
        info.uid = str(meta.get("uid") or info.key)
        info.labels, info.annotations, info.extra = {}, {}, {}
        info.creation, info.deletion_timestamp, info.priority = 0.0, None, 0
        info.preemption_policy, info.scheduler_name = "", ""
        info.node_name = info.nominated_node_name = ""
        info.scheduling_gates, info.tolerations, info.host_ports = (), (), ()
        info.requests, info.non_zero_cpu, info.non_zero_memory = {}, 0, 0
        info.affinity, info.topology_spread_constraints = {}, ()
        return info

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.raw.get("spec") or {}

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.affinity.get("podAffinity") or self.affinity.get("podAntiAffinity"))

    @property
    def has_required_anti_affinity(self) -> bool:
        anti = self.affinity.get("podAntiAffinity") or {}
        return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    def bound_to(self, node_name: str) -> PodInfo:
        """A copy of this pod assigned to ``node_name`` (what the cache assumes after a decision)."""
        clone = object.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            object.__setattr__(clone, slot, getattr(self, slot))
        clone.node_name = node_name
        return clone

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue with its bookkeeping (upstream's ``QueuedPodInfo``)."""

    pod: PodInfo
    #: when the pod was last added to the queue (PrioritySort's tie-breaker).
    timestamp: float
    #: when the pod first entered the queue (SLI metric start).
    initial_timestamp: float
    attempts: int = 0
    #: plugins that rejected the pod last time: only events they registered can move it back.
    unschedulable_plugins: set[str] = field(default_factory=set)
    #: plugins that returned Pending: the pod goes straight back to active on a matching event.
    pending_plugins: set[str] = field(default_factory=set)
    #: the PreEnqueue plugin that holds the pod out of the active queue, if any.
    gated_by: str = ""
    #: whether the last failure was an error (errors back off without waiting for an event).
    last_failure_was_error: bool = False
    #: the sequence number of file or arrival order: the last tie-breaker for a stable queue.
    sequence: int = 0

    @property
    def key(self) -> str:
        return self.pod.key
