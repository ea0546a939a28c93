"""The Workload API's PodGroups (``scheduling.k8s.io/v1beta1``, kube-apiserver v1.37 with the GenericWorkload
feature gate and ``--runtime-config=scheduling.k8s.io/v1beta1=true``), and the pods that name one.

Not scheduler-plugins' PodGroup (``framework.objects.podgroups``, ``scheduling.x-k8s.io``): that one is found
by a pod's label, this one by the pod's own field ``spec.schedulingGroup.podGroupName`` (Kubernetes 1.36
replaced 1.35's ``spec.workloadRef`` with it), in the pod's namespace. The API server drops the field when
its GenericWorkload gate is off.

``WorkloadPodGroup`` keeps what kube-scheduler v1.37.2 reads of ``k8s.io/api/scheduling/v1beta1.PodGroup``:
the scheduling policy (``gang.minCount``, or ``basic``), the parent CompositePodGroup, the priority and
preemption policy, and the status conditions as last seen (the scheduler sets ``PodGroupInitiallyScheduled``
only when it changes). Workloads themselves are read by controllers, not by kube-scheduler: it watches
PodGroups only (``eventhandlers.go``), so no Workload kind is kept here.

The kind is among ``WATCHED_KINDS`` and ``GATED_KINDS``: listed and watched only with GenericWorkload on, as
kube-scheduler starts its informer only then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.pod_info import PodInfo

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
#: the condition the scheduler sets on a PodGroup (``schedulingapi.PodGroupInitiallyScheduled``)
CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, eq=False)
class WorkloadPodGroup:
    namespace: str
    name: str
    uid: str
    generation: int
    #: ``spec.schedulingPolicy.gang.minCount``; None when the policy is not a gang
    min_count: int | None
    #: ``spec.schedulingPolicy.basic`` is set
    basic: bool
    #: ``spec.parentCompositePodGroupName`` (CompositePodGroup, alpha, off by default)
    parent: str | None
    #: ``spec.workloadRef`` as (workloadName, templateName)
    workload: tuple[str, str] | None
    priority_class_name: str
    priority: int | None
    preemption_policy: str | None
    #: ``status.conditions`` as the API server last returned them
    conditions: tuple[Mapping[str, Any], ...]
    #: ``spec.disruptionMode.all`` is set: preemption evicts the group's pods together
    disruption_all: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_gang(self) -> bool:
        return self.min_count is not None


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{path}: must be an object")
    return value


def _int32(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectParseError(f"{path}: must be an integer, not {value!r}")
    if not minimum <= value <= _INT32_MAX:
        raise ObjectParseError(f"{path}: must be between {minimum} and {_INT32_MAX}, not {value}")
    return value


def _optional_str(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ObjectParseError(f"{path}: must be a string, not {value!r}")
    return value


def parse_workload_pod_group(raw: Mapping[str, Any]) -> WorkloadPodGroup:
    namespace, name = object_key(raw, namespaced=True)
    meta = _object(raw.get("metadata"), "metadata")
    spec = _object(raw.get("spec"), "spec")
    policy = _object(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang = policy.get("gang")
    min_count = None
    if gang is not None:
        gang = _object(gang, "spec.schedulingPolicy.gang")
        min_count = _int32(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", 0)
    workload = None
    if spec.get("workloadRef") is not None:
        ref = _object(spec["workloadRef"], "spec.workloadRef")
        workload_name = _optional_str(ref.get("workloadName"), "spec.workloadRef.workloadName") or ""
        workload = (
            workload_name,
            _optional_str(ref.get("templateName"), "spec.workloadRef.templateName") or "",
        )
    priority = spec.get("priority")
    status = _object(raw.get("status"), "status")
    conditions = status.get("conditions") or ()
    if not isinstance(conditions, Sequence) or isinstance(conditions, str):
        raise ObjectParseError("status.conditions: must be a list")
    generation = meta.get("generation", 0)
    return WorkloadPodGroup(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        min_count=min_count,
        basic=policy.get("basic") is not None,
        parent=_optional_str(spec.get("parentCompositePodGroupName"), "spec.parentCompositePodGroupName"),
        workload=workload,
        priority_class_name=_optional_str(spec.get("priorityClassName"), "spec.priorityClassName") or "",
        priority=None if priority is None else _int32(priority, "spec.priority", -_INT32_MAX - 1),
        preemption_policy=_optional_str(spec.get("preemptionPolicy"), "spec.preemptionPolicy"),
        conditions=tuple(_object(c, f"status.conditions[{i}]") for i, c in enumerate(conditions)),
        disruption_all=_disruption_all(spec.get("disruptionMode")),
    )


def _disruption_all(value: Any) -> bool:
    if value is None:
        return False
    return _object(value, "spec.disruptionMode").get("all") is not None


WORKLOAD_POD_GROUPS: ObjectKind[WorkloadPodGroup] = ObjectKind(
    kind="PodGroup",
    group=GROUP,
    version=VERSION,
    plural="podgroups",
    namespaced=True,
    parse=parse_workload_pod_group,
    resource=Resource.WORKLOAD_POD_GROUP,
)


def scheduling_group(pod: PodInfo) -> str | None:
    """``spec.schedulingGroup.podGroupName``: the PodGroup the pod belongs to, in its namespace; None for a
    pod scheduled on its own."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else None


class PodGroupState(Protocol):
    """What the scheduler knows of one group's pods (upstream's ``fwk.PodGroupState``): every pod naming the
    group, and of those the unscheduled (neither assumed nor bound), the assumed and the bound ones."""

    def all_pods_count(self) -> int: ...

    def scheduled_pods_count(self) -> int:
        """Assumed or bound."""

    def unscheduled_pods(self) -> Sequence[PodInfo]: ...

    def assumed_pods(self) -> frozenset[str]:
        """UIDs of the pods past Reserve, not yet bound."""

    def scheduled_pods(self) -> Sequence[PodInfo]:
        """The bound pods, then the assumed ones."""


class PodGroupManager(Protocol):
    """The PodGroups the scheduler has seen and the state of each group its pods name (upstream's
    ``fwk.PodGroupManager`` without CompositePodGroups)."""

    def pod_group(self, namespace: str, name: str) -> WorkloadPodGroup | None: ...

    def state(self, namespace: str, name: str) -> PodGroupState | None:
        """None until a pod naming the group, or the PodGroup itself, is seen."""


class NoPodGroups:
    """The manager of a framework outside a scheduler (GenericWorkload off): no group is known."""

    def pod_group(self, namespace: str, name: str) -> WorkloadPodGroup | None:
        return None

    def state(self, namespace: str, name: str) -> PodGroupState | None:
        return None


def pod_group_priority(group: WorkloadPodGroup) -> int:
    """``util.PodGroupPriority``: ``spec.priority``, 0 when unset."""
    return group.priority or 0


__all__ = [
    "CONDITION_INITIALLY_SCHEDULED",
    "WORKLOAD_POD_GROUPS",
    "NoPodGroups",
    "PodGroupManager",
    "PodGroupState",
    "WorkloadPodGroup",
    "parse_workload_pod_group",
    "pod_group_priority",
    "scheduling_group",
]
