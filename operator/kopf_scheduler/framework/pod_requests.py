"""A pod's resource requests as kube-scheduler v1.37 counts them, in-place resizes included.

Upstream computes them with ``PodRequests`` (``k8s.io/component-helpers/resource/helpers.go`` at v0.37.2)
and the options each caller passes; the callers want four views of the same pod, all computed here from
one parse of its containers:

- ``spec``: ``UseStatusResources: false``. NodeResourcesFit's PreFilter reads the incoming pod this way
  (``computePodResourceRequest`` in ``noderesources/fit.go``: "pod hasn't scheduled yet").
- ``effective``: ``UseStatusResources: true`` (``InPlacePodVerticalScaling`` is GA). What a pod holds on
  its node (``PodInfo.CalculateResource`` in ``framework/types.go``), what the scoring plugins read
  (``calculatePodResourceRequest`` in ``noderesources/resource_allocation.go``) and what
  ``extractPodScaleDown`` (``framework/events.go``) compares.
- ``non_zero_cpu``/``non_zero_memory``: the node's ``NonZeroRequested`` share (``CalculateResource``):
  containers missing a CPU or memory request count 100m / 200 MiB, except that with pod-level requests
  only a resource missing from the whole pod's requests gets the stand-in
  (``getNonMissingContainerRequests``).
- ``scoring_cpu``/``scoring_memory``: NodeResourcesFit's score of the incoming pod, which always gives
  the stand-ins to containers missing a request (``calculatePodResourceRequest``).

The rule with status (``AggregateContainerRequests`` at v0.37.2): the containers' requests are summed
three times, as ``max(Σ containers + Σ sidecars, max_i(init_i + Σ sidecars before i))`` (sidecars: init
containers with ``restartPolicy: Always``), each time reading every container (init containers included)
one way, its status being the first of ``status.containerStatuses`` then ``status.initContainerStatuses``
with its name:

- desired: its spec;
- allocated: its status's ``allocatedResources``, else its spec;
- actuated: its status's ``resources.requests``, else its ``allocatedResources``, else its spec;

and the pod counts the per-resource maximum of the three sums (the maximum of sums, not the sum of
per-container maximums). When the pod's first ``PodResizePending`` condition says ``Infeasible`` (the
resize will not happen) the desired sum is left out and a container with neither status field counts
nothing. With ``InPlacePodLevelResourcesVerticalScaling`` (1.36 on), the pod's own status replaces the
allocated and actuated sums when it has ``status.allocatedResources`` and ``status.resources.requests``,
and pod-level requests (``spec.resources.requests``: cpu, memory, hugepages-*), which replace the
containers' sum per resource, are ``max(spec, status.resources.requests, status.allocatedResources)``
(the spec left out when infeasible) once ``status.resources`` is there. ``spec.overhead`` is added. The
stand-ins are given per container in each of the three sums, never to the pod's own status.

Quantities are integers: millicores for CPU, whole units otherwise (``resources``). Maps keep explicit
zeros, as upstream's resource lists do: a zero key still counts as "present" for the stand-ins and for
scale-down detection. An empty map is as good as none (the API server never serves one).

Every amount is an int64, whatever the pod asks for. Upstream adds and compares a pod's quantities
exactly (``Quantity.Add``, ``Quantity.Cmp`` in ``addResourceList`` and ``maxResourceList``) and turns the
result into an int64 once (``Value``/``MilliValue``, which wrap around or give 0 when it does not fit:
``api.quantity``). Here each quantity is turned into that int64 first and the int64s are added with
wrap-around (``resources.add_into``) and compared. Both give the same numbers when every quantity and
every total fits an int64 (sub-unit amounts aside: ``0.5`` twice is 2 here, 1 upstream), and for a pod
whose one oversized quantity stands alone in its resource list (``cpu: 1e30`` in one container is 0
millicores either way; ``10Ei`` twice is -2 bytes either way). An oversized quantity added to or compared
with another of its resource in one pod (``1e30`` beside ``100m``: 4089650035136921700 millicores
upstream, 100 here; an init container's ``1e30`` against a container's ``100m``) may give an int64
upstream does not give; never an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.errors import json_type, key_path
from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.api.quantity import QuantityError, int64_milli_value_of, int64_value_of, wrong_type
from kopf_scheduler.framework import resources as res

#: the pod condition a resize waits under, and its reason when the node can never fit it (``core/v1``)
POD_RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"
HUGEPAGES_PREFIX = "hugepages-"
POD_LEVEL_STATUS_GATE = "InPlacePodLevelResourcesVerticalScaling"

_STAND_INS: Mapping[str, int] = {
    res.CPU: res.DEFAULT_MILLI_CPU_REQUEST,
    res.MEMORY: res.DEFAULT_MEMORY_REQUEST,
}


class _Gates:
    """The gates ``compute`` reads: upstream's callers read them from the process's feature gates
    (``utilfeature.DefaultFeatureGate`` in ``CalculateResource`` and ``extractPodScaleDown``, the
    plugins' features in ``resource_allocation.go`` and ``fit.go``), the same value everywhere."""

    pod_level_status: bool = DEFAULT_GATES.enabled(POD_LEVEL_STATUS_GATE)


def use_feature_gates(gates: FeatureGates) -> None:
    """Makes ``compute`` follow ``gates`` (``InPlacePodLevelResourcesVerticalScaling``) from now on; pods
    already read keep what they were read with."""
    _Gates.pod_level_status = gates.enabled(POD_LEVEL_STATUS_GATE)


class RequestsParseError(ValueError):
    """A quantity that cannot be read; the message starts with its field path."""


@dataclass(frozen=True, slots=True)
class PodRequests:
    """The views of one pod's requests (see the module docstring); maps keep explicit zeros."""

    spec: dict[str, int]
    effective: dict[str, int]
    non_zero_cpu: int
    non_zero_memory: int
    scoring_cpu: int
    scoring_memory: int


def quantities(raw: Any, path: str) -> dict[str, int]:
    """A resource list (``{cpu: 500m}``) as integers; raises ``RequestsParseError`` naming the field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise RequestsParseError(f"{path}: must be a map of resource names to quantities")
    out: dict[str, int] = {}
    for name, quantity in raw.items():
        try:
            out[str(name)] = int64_milli_value_of(quantity) if name == res.CPU else int64_value_of(quantity)
        except QuantityError as e:
            raise RequestsParseError(f"{key_path(path, name)}: {e}") from None
        except TypeError:  # unhashable: a list or an object
            raise RequestsParseError(f"{key_path(path, name)}: {wrong_type(quantity)}") from None
    return out


def is_supported_pod_level_resource(name: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and hugepages-* may be set for the whole pod."""
    return name in (res.CPU, res.MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def is_resize_infeasible(status: Mapping[str, Any]) -> bool:
    """``IsPodResizeInfeasible``: the first ``PodResizePending`` condition has reason ``Infeasible``."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == POD_RESIZE_PENDING:
            return condition.get("reason") == REASON_INFEASIBLE
    return False


def _container_spec_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise RequestsParseError(f"{path}.resources: must be an object")
    requests = quantities(resources.get("requests"), f"{path}.resources.requests")
    # API defaulting: a limit without a request makes the request equal to the limit.
    for name, amount in quantities(resources.get("limits"), f"{path}.resources.limits").items():
        requests.setdefault(name, amount)
    return requests


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    # ``maxResourceList``: a key missing from ``total`` is set even when the other amount is zero.
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount


@dataclass(frozen=True, slots=True)
class _Status:
    """A container status's (or the pod status's) resource fields; None where absent or empty."""

    requests: dict[str, int] | None
    allocated: dict[str, int] | None


def _status_resources(entry: Mapping[str, Any], path: str) -> tuple[bool, _Status]:
    """Whether ``entry`` (a container status, or the pod status) has a ``resources`` object, and its
    ``resources.requests`` and ``allocatedResources``."""
    resources = entry.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        raise RequestsParseError(f"{path}.resources: must be an object")
    requests = quantities((resources or {}).get("requests"), f"{path}.resources.requests")
    allocated = quantities(entry.get("allocatedResources"), f"{path}.allocatedResources")
    return resources is not None, _Status(requests or None, allocated or None)


def _container_statuses(status: Mapping[str, Any]) -> dict[str, _Status]:
    """Per container name, its status (``findContainerStatus``: the first with the name, regular
    containers' statuses searched first)."""
    found: dict[str, _Status] = {}
    for kind in ("containerStatuses", "initContainerStatuses"):
        entries = status.get(kind) or ()
        if not isinstance(entries, list | tuple):
            raise RequestsParseError(f"status.{kind}: must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise RequestsParseError(f"status.{kind}[{i}]: must be an object")
            _, read = _status_resources(entry, f"status.{kind}[{i}]")
            found.setdefault(str(entry.get("name")), read)
    return found


def _with_stand_ins(requests: dict[str, int], stand_ins: Mapping[str, int]) -> dict[str, int]:
    # ``applyNonMissing``: only a resource the container does not list at all gets the stand-in.
    if not stand_ins:
        return requests
    out = dict(requests)
    for name, amount in stand_ins.items():
        out.setdefault(name, amount)
    return out


#: one way of reading every container: its requests per container, per init container (with whether it
#: is a sidecar)
_Reading = tuple[list[dict[str, int]], list[tuple[dict[str, int], bool]]]


def _aggregate(reading: _Reading, stand_ins: Mapping[str, int]) -> dict[str, int]:
    """``aggregateContainerResourcesByFn``: containers and sidecars add up; each plain init container
    runs beside the sidecars started before it; the pod needs the larger of the two."""
    containers, inits = reading
    total: dict[str, int] = {}
    for requests in containers:
        res.add_into(total, _with_stand_ins(requests, stand_ins))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for requests, sidecar in inits:
        requests = _with_stand_ins(requests, stand_ins)
        if sidecar:
            res.add_into(total, requests)
            res.add_into(sidecars, requests)
            _max_into(init_max, sidecars)
        else:
            running = dict(requests)
            res.add_into(running, sidecars)
            _max_into(init_max, running)
    _max_into(total, init_max)
    return total


def _allocated(spec: dict[str, int], status: _Status | None, infeasible: bool) -> dict[str, int]:
    """``containerAllocatedRequests``."""
    if status is not None and status.allocated is not None:
        return status.allocated
    return {} if infeasible else spec


def _actuated(spec: dict[str, int], status: _Status | None, infeasible: bool) -> dict[str, int]:
    """``containerActuatedRequests``."""
    if status is not None and status.requests is not None:
        return status.requests
    return _allocated(spec, status, infeasible)


@dataclass(frozen=True, slots=True)
class _Pod:
    """What the views are computed from."""

    desired: _Reading
    #: the allocated and actuated readings of the containers (the desired one itself when no status
    #: counts), or the pod status's maps replacing them
    allocated: _Reading | dict[str, int]
    actuated: _Reading | dict[str, int]
    infeasible: bool
    overhead: dict[str, int]


def _sum(reading: _Reading | dict[str, int], stand_ins: Mapping[str, int]) -> dict[str, int]:
    return reading if isinstance(reading, dict) else _aggregate(reading, stand_ins)


def _with_status(pod: _Pod, pod_level: dict[str, int], stand_ins: Mapping[str, int]) -> dict[str, int]:
    """``PodRequests`` with ``UseStatusResources``: the maximum of the three sums, then pod-level
    requests and overhead."""
    out = {} if pod.infeasible else _aggregate(pod.desired, stand_ins)
    if pod.allocated is not pod.desired:
        _max_into(out, _sum(pod.actuated, stand_ins))
        _max_into(out, _sum(pod.allocated, stand_ins))
    return _finish(out, pod_level, pod.overhead)


def _finish(aggregate: dict[str, int], pod_level: dict[str, int], overhead: dict[str, int]) -> dict[str, int]:
    for name, amount in pod_level.items():
        if is_supported_pod_level_resource(name):
            aggregate[name] = amount
    res.add_into(aggregate, overhead)
    return aggregate


#: a container's spec requests and name
_Container = tuple[dict[str, int], str]


def _container_list(spec: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """``spec.containers`` or ``spec.initContainers``: a list of objects."""
    value = spec.get(kind)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise RequestsParseError(f"spec.{kind}: must be a list, not {json_type(value)}")
    for i, container in enumerate(value):
        if not isinstance(container, Mapping):
            raise RequestsParseError(f"spec.{kind}[{i}]: must be an object, not {json_type(container)}")
    return list(value)


def _containers(spec: Mapping[str, Any]) -> tuple[list[_Container], list[tuple[_Container, bool]]]:
    """The containers, and the init containers with whether each is a sidecar."""
    containers = [
        (_container_spec_requests(c, f"spec.containers[{i}]"), str(c.get("name")))
        for i, c in enumerate(_container_list(spec, "containers"))
    ]
    inits = [
        (
            (_container_spec_requests(c, f"spec.initContainers[{i}]"), str(c.get("name"))),
            c.get("restartPolicy") == "Always",
        )
        for i, c in enumerate(_container_list(spec, "initContainers"))
    ]
    return containers, inits


def _read_each(
    containers: list[_Container],
    inits: list[tuple[_Container, bool]],
    read: Callable[[dict[str, int], str], dict[str, int]],
) -> _Reading:
    """The reading ``read(spec, name)`` gives of every container."""
    return [read(r, name) for r, name in containers], [(read(r, name), sc) for (r, name), sc in inits]


def _pod_level(
    status: Mapping[str, Any], spec_level: dict[str, int], infeasible: bool, gate: bool
) -> tuple[tuple[dict[str, int], dict[str, int]] | None, dict[str, int]]:
    """The pod status's allocated resources and requests when they replace the containers' sums
    (``AggregateContainerRequests``), and the effective pod-level requests (``PodRequests``:
    ``effectivePodLevelResources`` once the pod status has ``resources``)."""
    present, read = _status_resources(status, "status")
    if not gate or not present:
        return None, spec_level
    whole = None
    if read.allocated is not None and read.requests is not None:
        whole = read.allocated, read.requests
    if not spec_level:  # ``IsPodLevelRequestsSet`` false: the containers' sums stay
        return whole, {}
    effective = {} if infeasible else dict(spec_level)
    for source in (read.requests, read.allocated):
        if source is not None:
            _max_into(effective, source)
    return whole, effective


def compute(pod: Mapping[str, Any], pod_level_status: bool | None = None) -> PodRequests:
    """Every view of ``pod``'s requests (see the module docstring); ``pod_level_status``:
    ``InPlacePodLevelResourcesVerticalScaling``, the gates ``use_feature_gates`` set when None. Raises
    ``RequestsParseError``."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not isinstance(status, Mapping):
        status = {}
    containers, inits = _containers(spec)
    pod_resources = spec.get("resources") or {}
    if not isinstance(pod_resources, Mapping):
        raise RequestsParseError("spec.resources: must be an object")
    spec_level = quantities(pod_resources.get("requests"), "spec.resources.requests")
    # ``IsPodLevelRequestsSet``: only a supported resource makes the pod-level requests count.
    pod_level_set = any(is_supported_pod_level_resource(name) for name in spec_level)
    if not pod_level_set:
        spec_level = {}
    overhead = quantities(spec.get("overhead"), "spec.overhead")

    desired = _read_each(containers, inits, lambda r, _: r)
    spec_requests = _finish(_aggregate(desired, {}), spec_level, overhead)

    statuses = _container_statuses(status)
    infeasible = is_resize_infeasible(status)
    gate = _Gates.pod_level_status if pod_level_status is None else pod_level_status
    whole, effective_level = _pod_level(status, spec_level, infeasible, gate)
    allocated: _Reading | dict[str, int] = desired
    actuated: _Reading | dict[str, int] = desired
    if whole is not None:
        allocated, actuated = whole
    elif statuses or infeasible:
        allocated = _read_each(containers, inits, lambda r, n: _allocated(r, statuses.get(n), infeasible))
        actuated = _read_each(containers, inits, lambda r, n: _actuated(r, statuses.get(n), infeasible))
    read = _Pod(desired, allocated, actuated, infeasible, overhead)

    if allocated is desired and effective_level is spec_level:
        effective_requests = spec_requests  # no status counts: every sum is the spec's
    else:
        effective_requests = _with_status(read, effective_level, {})
    scoring = _with_status(read, effective_level, _STAND_INS)
    if pod_level_set:
        stand_ins = {n: a for n, a in _STAND_INS.items() if n not in effective_requests}
        non_zero = _with_status(read, effective_level, stand_ins) if stand_ins else effective_requests
    else:
        non_zero = scoring
    return PodRequests(
        spec=spec_requests,
        effective=effective_requests,
        non_zero_cpu=non_zero.get(res.CPU, 0),
        non_zero_memory=non_zero.get(res.MEMORY, 0),
        scoring_cpu=scoring.get(res.CPU, 0),
        scoring_memory=scoring.get(res.MEMORY, 0),
    )
