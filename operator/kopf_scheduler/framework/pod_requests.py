"""A pod's resource requests as kube-scheduler v1.34 counts them, in-place resizes included.

Upstream computes them with ``PodRequests`` (``k8s.io/component-helpers/resource/helpers.go``) and the
options each caller passes; the callers want four views of the same pod, all computed here from one
parse of its containers:

- ``spec``: ``UseStatusResources: false``. NodeResourcesFit's PreFilter reads the incoming pod this way
  (``computePodResourceRequest`` in ``noderesources/fit.go``: "pod hasn't scheduled yet").
- ``effective``: ``UseStatusResources: true`` (``InPlacePodVerticalScaling`` is on by default). What a pod
  holds on its node (``PodInfo.calculateResource`` in ``framework/types.go``), what the scoring plugins
  read (``calculatePodResourceRequest`` in ``noderesources/resource_allocation.go``) and what
  ``extractPodScaleDown`` (``framework/events.go``) compares.
- ``non_zero_cpu``/``non_zero_memory``: the node's ``NonZeroRequested`` share (``calculateResource``):
  containers missing a CPU or memory request count 100m / 200 MiB, except that with pod-level requests
  only a resource missing from the whole pod's requests gets the stand-in
  (``getNonMissingContainerRequests``).
- ``scoring_cpu``/``scoring_memory``: NodeResourcesFit's score of the incoming pod, which always gives
  the stand-ins to containers missing a request (``calculatePodResourceRequest``).

The rule (v1.34, ``AggregateContainerRequests`` and ``determineContainerReqs``): a container, or a sidecar
(an init container with ``restartPolicy: Always``), whose status (``status.containerStatuses`` or
``status.initContainerStatuses``, by name) has a ``resources`` field counts
``max(spec requests, status.resources.requests, status.allocatedResources)`` per resource; when the pod's
``PodResizePending`` condition says ``Infeasible`` the spec is left out of that maximum (the resize will
not happen). ``Deferred`` and ``PodResizeInProgress`` change nothing. Plain init containers, and
containers without a status ``resources`` field, count their spec. Then
``max(Σ containers + Σ sidecars, max_i(init_i + Σ sidecars before i))``; pod-level requests
(``spec.resources.requests``: cpu, memory, hugepages-*) replace that per resource (v1.34 reads no status
for them); ``spec.overhead`` is added.

Quantities are integers: millicores for CPU, whole units otherwise (``resources``). Maps keep explicit
zeros, as upstream's resource lists do: a zero key still counts as "present" for the stand-ins and for
scale-down detection.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, int64_milli_value_of, int64_value_of
from kopf_scheduler.framework import resources as res

#: the pod condition a resize waits under, and its reason when the node can never fit it (``core/v1``)
POD_RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"
HUGEPAGES_PREFIX = "hugepages-"

_STAND_INS: Mapping[str, int] = {
    res.CPU: res.DEFAULT_MILLI_CPU_REQUEST,
    res.MEMORY: res.DEFAULT_MEMORY_REQUEST,
}


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
            raise RequestsParseError(f"{path}.{name}: {e}") from None
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


def _status_requests(status: Mapping[str, Any]) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per container name with a status ``resources`` field: (its requests, its allocated resources)."""
    found: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for kind in ("containerStatuses", "initContainerStatuses"):
        entries = status.get(kind) or ()
        if not isinstance(entries, list | tuple):
            raise RequestsParseError(f"status.{kind}: must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise RequestsParseError(f"status.{kind}[{i}]: must be an object")
            resources = entry.get("resources")
            if resources is None:  # upstream's ``cs.Resources != nil``: without it the spec counts
                found.pop(str(entry.get("name")), None)
                continue
            if not isinstance(resources, Mapping):
                raise RequestsParseError(f"status.{kind}[{i}].resources: must be an object")
            path = f"status.{kind}[{i}]"
            found[str(entry.get("name"))] = (
                quantities(resources.get("requests"), f"{path}.resources.requests"),
                quantities(entry.get("allocatedResources"), f"{path}.allocatedResources"),
            )
    return found


def _with_stand_ins(requests: dict[str, int], stand_ins: Mapping[str, int]) -> dict[str, int]:
    # ``applyNonMissing``: only a resource the container does not list at all gets the stand-in.
    if not stand_ins:
        return requests
    out = dict(requests)
    for name, amount in stand_ins.items():
        out.setdefault(name, amount)
    return out


def _aggregate(
    containers: list[dict[str, int]], inits: list[tuple[dict[str, int], bool]], stand_ins: Mapping[str, int]
) -> dict[str, int]:
    """``aggregateContainerResourcesByFn``: containers and sidecars add up; each plain init container
    runs beside the sidecars started before it; the pod needs the larger of the two."""
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


def _finish(aggregate: dict[str, int], pod_level: dict[str, int], overhead: dict[str, int]) -> dict[str, int]:
    for name, amount in pod_level.items():
        if is_supported_pod_level_resource(name):
            aggregate[name] = amount
    res.add_into(aggregate, overhead)
    return aggregate


def compute(pod: Mapping[str, Any]) -> PodRequests:
    """Every view of ``pod``'s requests (see the module docstring). Raises ``RequestsParseError``."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not isinstance(status, Mapping):
        status = {}
    containers: list[dict[str, int]] = []
    names: list[str] = []
    for i, container in enumerate(spec.get("containers") or ()):
        containers.append(_container_spec_requests(container, f"spec.containers[{i}]"))
        names.append(str(container.get("name")))
    inits: list[tuple[dict[str, int], bool]] = []
    init_names: list[str] = []
    for i, container in enumerate(spec.get("initContainers") or ()):
        sidecar = container.get("restartPolicy") == "Always"
        inits.append((_container_spec_requests(container, f"spec.initContainers[{i}]"), sidecar))
        init_names.append(str(container.get("name")))
    pod_resources = spec.get("resources") or {}
    if not isinstance(pod_resources, Mapping):
        raise RequestsParseError("spec.resources: must be an object")
    pod_level = quantities(pod_resources.get("requests"), "spec.resources.requests")
    # ``IsPodLevelRequestsSet``: only a supported resource makes the pod-level requests count.
    pod_level_set = any(is_supported_pod_level_resource(name) for name in pod_level)
    overhead = quantities(spec.get("overhead"), "spec.overhead")

    statuses = _status_requests(status)
    status_containers, status_inits = containers, inits
    if statuses:
        infeasible = is_resize_infeasible(status)

        def effective(requests: dict[str, int], name: str) -> dict[str, int]:
            found = statuses.get(name)
            if found is None:
                return requests
            # ``determineContainerReqs``: an infeasible resize leaves the spec out.
            out = {} if infeasible else dict(requests)
            for source in found:  # status.resources.requests, status.allocatedResources
                _max_into(out, source)
            return out

        status_containers = [effective(r, n) for r, n in zip(containers, names, strict=True)]
        status_inits = [
            (effective(r, n) if sidecar else r, sidecar)
            for (r, sidecar), n in zip(inits, init_names, strict=True)
        ]

    spec_requests = _finish(_aggregate(containers, inits, {}), pod_level, overhead)
    if status_containers is containers:
        effective_requests = spec_requests
    else:
        effective_requests = _finish(_aggregate(status_containers, status_inits, {}), pod_level, overhead)

    scoring = _finish(_aggregate(status_containers, status_inits, _STAND_INS), pod_level, overhead)
    if pod_level_set:
        stand_ins = {n: a for n, a in _STAND_INS.items() if n not in effective_requests}
        if not stand_ins:
            non_zero = effective_requests
        else:
            non_zero = _finish(_aggregate(status_containers, status_inits, stand_ins), pod_level, overhead)
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
