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

from kopf_scheduler.api.errors import json_type, key_path
from kopf_scheduler.framework import pod_requests
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


def compute_requests(spec: Mapping[str, Any], non_zero: bool = False) -> dict[str, int]:
    """The requests of a pod with this spec and no status, zeros dropped (``pod_requests`` for all views).

    ``max(Σ containers + Σ sidecars, max_i(init_i + Σ sidecars started before i))``, pod-level requests
    replacing it, plus overhead. With ``non_zero``, a container missing a CPU or memory request counts as
    100m / 200 MiB (NodeResourcesFit's scoring view).
    """
    try:
        computed = pod_requests.compute({"spec": spec})
    except pod_requests.RequestsParseError as e:
        raise PodParseError(str(e)) from None
    if non_zero:
        out = {name: amount for name, amount in computed.effective.items() if amount}
        out[res.CPU], out[res.MEMORY] = computed.scoring_cpu, computed.scoring_memory
        return {name: amount for name, amount in out.items() if amount}
    return {name: amount for name, amount in computed.spec.items() if amount}


def _positive(requests: dict[str, int]) -> dict[str, int]:
    return requests if all(requests.values()) else {n: a for n, a in requests.items() if a}


def _object(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` when it is an object, ``{}`` when absent; raises ``PodParseError`` for another type."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodParseError(f"{path}: must be an object, not {json_type(value)}")
    return value


def _objects(value: Any, path: str) -> tuple[Mapping[str, Any], ...]:
    """A list of objects (``spec.tolerations``); ``()`` when absent."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise PodParseError(f"{path}: must be a list, not {json_type(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise PodParseError(f"{path}[{i}]: must be an object, not {json_type(item)}")
    return tuple(value)


def _string(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PodParseError(f"{path}.{key}: must be a string, not {json_type(value)}")
    return value


def _string_map(value: Any, path: str) -> dict[str, str]:
    """A ``map[string]string`` (labels, annotations); ``{}`` when absent."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodParseError(f"{path}: must be a map of strings, not {json_type(value)}")
    for k, v in value.items():
        if not isinstance(k, str):
            raise PodParseError(f"{path}: keys must be strings, not {json_type(k)}")
        if not isinstance(v, str):
            raise PodParseError(f"{key_path(path, k)}: must be a string, not {json_type(v)}")
    return dict(value)


def _affinity(value: Any) -> Mapping[str, Any]:
    """``spec.affinity``, its three parts objects (the plugins read their terms)."""
    affinity = _object(value, "spec.affinity")
    for part in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
        _object(affinity.get(part), f"spec.affinity.{part}")
    return affinity


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(_objects(spec.get(kind), f"spec.{kind}")):
            # Only sidecars (restartable init containers) hold their ports while the pod runs
            # (``GetHostPorts`` in kube-scheduler's util).
            if kind == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            for j, port in enumerate(_objects(container.get("ports"), f"spec.{kind}[{i}].ports")):
                host_port = port.get("hostPort")
                if not host_port:
                    continue
                path = f"spec.{kind}[{i}].ports[{j}]"
                if not isinstance(host_port, int):
                    raise PodParseError(f"{path}.hostPort: must be an integer, not {json_type(host_port)}")
                if not 0 < host_port < 65536:
                    raise PodParseError(f"{path}.hostPort: invalid port {host_port!r}")
                protocol = _string(port, "protocol", path) or "TCP"
                ports.append(HostPort(protocol, _string(port, "hostIP", path) or "0.0.0.0", host_port))
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
        "scoring_cpu",
        "scoring_memory",
        "spec_requests",
        "tolerations",
        "topology_spread_constraints",
        "uid",
        "zero_requests",
    )

    def __init__(self, raw: Mapping[str, Any]) -> None:
        if not isinstance(raw, Mapping):
            raise PodParseError("pod: must be an object")
        meta = _object(raw.get("metadata"), "metadata")
        spec = _object(raw.get("spec"), "spec")
        status = _object(raw.get("status"), "status")
        self.raw = raw
        self.name: str = _string(meta, "name", "metadata")
        if not self.name:
            raise PodParseError("metadata.name: required")
        self.namespace: str = _string(meta, "namespace", "metadata") or "default"
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = _string(meta, "uid", "metadata") or self.key
        self.labels: dict[str, str] = _string_map(meta.get("labels"), "metadata.labels")
        self.annotations: dict[str, str] = _string_map(meta.get("annotations"), "metadata.annotations")
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
        self.preemption_policy: str = _string(spec, "preemptionPolicy", "spec") or "PreemptLowerPriority"
        self.scheduler_name: str = _string(spec, "schedulerName", "spec") or DEFAULT_SCHEDULER_NAME
        self.node_name: str = _string(spec, "nodeName", "spec")
        self.nominated_node_name: str = _string(status, "nominatedNodeName", "status")
        self.scheduling_gates: tuple[str, ...] = tuple(
            str(g.get("name")) for g in _objects(spec.get("schedulingGates"), "spec.schedulingGates")
        )
        self.tolerations = tuple(
            Toleration.parse(t) for t in _objects(spec.get("tolerations"), "spec.tolerations")
        )
        try:
            computed = pod_requests.compute(raw)
        except pod_requests.RequestsParseError as e:
            raise PodParseError(str(e)) from None
        #: what the pod holds on its node, in-place resizes included (``pod_requests``: ``effective``)
        self.requests: dict[str, int] = _positive(computed.effective)
        #: resources it requests explicitly as zero: still "requested" to scale-down detection
        self.zero_requests: tuple[str, ...] = tuple(n for n, a in computed.effective.items() if not a)
        #: its spec alone: NodeResourcesFit's filter view of a pod being scheduled
        self.spec_requests: dict[str, int] = (
            self.requests if computed.spec is computed.effective else _positive(computed.spec)
        )
        #: its share of the node's non-zero requests (100m / 200 MiB stand-ins)
        self.non_zero_cpu: int = computed.non_zero_cpu
        self.non_zero_memory: int = computed.non_zero_memory
        #: NodeResourcesFit's score of it as the pod being scheduled (stand-ins for every container)
        self.scoring_cpu: int = computed.scoring_cpu
        self.scoring_memory: int = computed.scoring_memory
        self.host_ports = _host_ports(spec)
        self.affinity: Mapping[str, Any] = _affinity(spec.get("affinity"))
        self.topology_spread_constraints: tuple[Mapping[str, Any], ...] = _objects(
            spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints"
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
        info.requests, info.spec_requests, info.zero_requests = {}, {}, ()
        info.non_zero_cpu = info.non_zero_memory = info.scoring_cpu = info.scoring_memory = 0
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

    def bound_to(self, node_name: str, raw: Mapping[str, Any] | None = None) -> PodInfo:
        """A copy of this pod assigned to ``node_name`` (what the cache assumes after a decision);
        ``raw``: the pod object as bound, when it differs from this one's only by ``spec.nodeName``."""
        clone = object.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            object.__setattr__(clone, slot, getattr(self, slot))
        clone.node_name = node_name
        if raw is not None:
            clone.raw = raw
        return clone

    def confirmed(self, raw: Mapping[str, Any]) -> PodInfo | None:
        """This pod as its bound version ``raw`` reads, without reading it again: None unless ``raw``
        differs from the version this was read from only where a binding changes a pod (``spec.nodeName``,
        ``status.conditions``, and metadata nothing here reads, such as ``resourceVersion``)."""
        old_meta, new_meta = self.raw.get("metadata") or {}, raw.get("metadata") or {}
        if any(old_meta.get(key) != new_meta.get(key) for key in _READ_METADATA):
            return None
        spec = raw.get("spec") or {}
        node_name = spec.get("nodeName")
        if not node_name or {**(self.raw.get("spec") or {}), "nodeName": node_name} != spec:
            return None
        if _but_conditions(self.raw.get("status")) != _but_conditions(raw.get("status")):
            return None
        return self.bound_to(node_name, raw)

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


#: the metadata ``PodInfo`` reads (the rest of the object it reads from ``spec`` and ``status``)
_READ_METADATA = (
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "creationTimestamp",
    "deletionTimestamp",
)


def _but_conditions(status: Any) -> Any:
    if not isinstance(status, Mapping) or "conditions" not in status:
        return status or {}
    return {key: value for key, value in status.items() if key != "conditions"}


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
    #: the leftover flush took the pod from the unschedulable pool and no attempt failed since, nor did
    #: PreEnqueue gate it (upstream's ``WasFlushedFromUnschedulable``; ``pod_scheduled_after_flush_total``)
    was_flushed: bool = False

    @property
    def key(self) -> str:
        return self.pod.key
