"""What the API server and its controllers would have filled in before the scheduler sees the objects:
pod priorities from PriorityClasses (the ``Priority`` admission plugin) and, for PodDisruptionBudgets
given without a status, ``status.disruptionsAllowed`` (the disruption controller).

Priorities follow ``plugin/pkg/admission/priority``: a pod naming a class gets its value and its
``preemptionPolicy``; a pod naming none gets the global default class (the lowest-valued one if several
claim it), else priority 0. The built-in ``system-cluster-critical`` and ``system-node-critical`` classes
always exist. A pod that already carries ``spec.priority`` and names no class is taken as resolved (as
objects exported from a cluster are). Contradictions the API server would refuse are errors here too.

Budgets without a status count every matching pod of the input as expected and the bound ones as
healthy: ``disruptionsAllowed = max(0, healthy - desiredHealthy)``, where ``desiredHealthy`` is
``minAvailable`` or ``expected - maxUnavailable`` (percentages of ``expected`` rounded up).

Pod resources are validated as the API server validates them: a negative quantity is refused with its
message (``validate_pod_resources``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, format_quantity, is_negative
from kopf_scheduler.framework.selectors import LabelSelector, SelectorError

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, "Never")
#: created by every API server at start-up (``pkg/apis/scheduling``)
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
SYSTEM_PREFIX = "system-"


#: ``apimachinery/pkg/api/validation.IsNegativeErrorMsg``
NEGATIVE_QUANTITY = "must be greater than or equal to 0"


class AdmissionError(ValueError):
    """An object the API server would refuse; the message says why, in its words where it has them."""


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY


def builtin_priority_classes() -> dict[str, PriorityClass]:
    return {name: PriorityClass(name, value) for name, value in SYSTEM_PRIORITY_CLASSES.items()}


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClass:
    name = str((obj.get("metadata") or {}).get("name") or "")
    if not name:
        raise AdmissionError("metadata.name: required")
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdmissionError(f"value: must be an integer, not {value!r}")
    policy = obj.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in PREEMPTION_POLICIES:
        raise AdmissionError(
            f"preemptionPolicy: must be one of {', '.join(PREEMPTION_POLICIES)}, not {policy!r}"
        )
    if name.startswith(SYSTEM_PREFIX) and SYSTEM_PRIORITY_CLASSES.get(name) != value:
        raise AdmissionError(
            f"metadata.name: {name!r}: the '{SYSTEM_PREFIX}' prefix is reserved for system use"
        )
    return PriorityClass(name, value, bool(obj.get("globalDefault")), policy)


def default_class(classes: Mapping[str, PriorityClass]) -> PriorityClass | None:
    defaults = [c for c in classes.values() if c.global_default]
    return min(defaults, key=lambda c: c.value) if defaults else None


def resolve_priority(pod: MutableMapping[str, Any], classes: Mapping[str, PriorityClass]) -> None:
    """Sets ``spec.priority`` (and ``priorityClassName``, ``preemptionPolicy``) as admission would."""
    if pod.get("spec") is None:
        pod["spec"] = {}
    spec = pod["spec"]
    if not isinstance(spec, MutableMapping):
        return  # not a pod spec: reading the pod says so
    name = spec.get("priorityClassName") or ""
    if name:
        chosen = classes.get(name)
        if chosen is None:
            raise AdmissionError(f"no PriorityClass with name {name} was found")
    else:
        if spec.get("priority") is not None:
            return
        chosen = default_class(classes)
        if chosen is None:
            return
        spec["priorityClassName"] = chosen.name
    given = spec.get("priority")
    if given is not None and given != chosen.value:
        raise AdmissionError(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {chosen.value} from the given PriorityClass name"
        )
    spec["priority"] = chosen.value
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy != chosen.preemption_policy:
        raise AdmissionError(
            f"the string value of PreemptionPolicy ({policy}) must not be provided in pod spec; priority "
            f"admission controller computed {chosen.preemption_policy} from the given PriorityClass name"
        )
    spec["preemptionPolicy"] = chosen.preemption_policy


def _scaled(value: Any, expected: int, field: str) -> int:
    if isinstance(value, bool):
        raise AdmissionError(f"{field}: must be an integer or a percentage, not {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        raise AdmissionError(f"{field}: must be an integer or a percentage, not {value!r}")
    return math.ceil(int(text[:-1]) * expected / 100)


def default_disruptions_allowed(pdb: MutableMapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> None:
    """Fills ``status.disruptionsAllowed`` of a budget that has none (see the module docstring)."""
    status = pdb.get("status")
    if isinstance(status, Mapping) and status.get("disruptionsAllowed") is not None:
        return
    meta = pdb.get("metadata") or {}
    spec = pdb.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    try:
        selector = LabelSelector.parse(spec.get("selector")) if spec.get("selector") is not None else None
    except SelectorError as e:
        raise AdmissionError(f"spec.selector: {e}") from None
    expected = healthy = 0
    for pod in pods:
        pod_meta = pod.get("metadata") or {}
        if (pod_meta.get("namespace") or "default") != namespace:
            continue
        if selector is None or not selector.matches(pod_meta.get("labels") or {}):
            continue
        expected += 1
        healthy += bool((pod.get("spec") or {}).get("nodeName"))
    desired = 0  # neither set: every healthy pod may go
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, "spec.maxUnavailable"))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, "spec.minAvailable")
    new_status = dict(status) if isinstance(status, Mapping) else {}
    new_status["disruptionsAllowed"] = max(0, healthy - desired)
    pdb["status"] = new_status


def _resource_lists(spec: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """(field path, resource list) in the order the API server's ``ValidatePodSpec`` visits them:
    containers, init containers (each limits, then requests), pod-level ``spec.resources``, and
    ``spec.overhead``, which it checks as the limits of a resource requirement."""
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or ()):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping):
                yield f"spec.{kind}[{i}].resources.limits", resources.get("limits")
                yield f"spec.{kind}[{i}].resources.requests", resources.get("requests")
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):
        yield "spec.resources.limits", pod_level.get("limits")
        yield "spec.resources.requests", pod_level.get("requests")
    yield "spec.overhead.limits", spec.get("overhead")


def validate_pod_resources(pod: Mapping[str, Any]) -> None:
    """Refuses a negative request, limit, pod-level resource or overhead as the API server does
    (``ValidateResourceQuantityValue`` -> ``ValidateNonnegativeQuantity`` in
    ``pkg/apis/core/validation/validation.go``), in its words:
    ``spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to
    0``, the value printed as the API server prints a quantity. The API server lists every such error;
    this raises ``AdmissionError`` for the first (resource names in sorted order)."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        return
    for path, resources in _resource_lists(spec):
        if not isinstance(resources, Mapping):
            continue
        for name in sorted(resources, key=str):
            value = resources[name]
            try:
                negative = is_negative(value)
            except QuantityError as e:
                raise AdmissionError(f"{path}[{name}]: {e}") from None
            if negative:
                shown = format_quantity(value)
                raise AdmissionError(f'{path}[{name}]: Invalid value: "{shown}": {NEGATIVE_QUANTITY}')


def default_replication_controller(rc: MutableMapping[str, Any]) -> None:
    """The API server's defaulting of a ReplicationController (``SetDefaults_ReplicationController``):
    an empty ``spec.selector`` becomes the template's labels."""
    spec = rc.get("spec")
    if not isinstance(spec, MutableMapping) or spec.get("selector"):
        return
    template = spec.get("template")
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if isinstance(labels, Mapping) and labels:
        spec["selector"] = dict(labels)
