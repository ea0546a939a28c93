"""PodGroups (``scheduling.x-k8s.io/v1alpha1``, the scheduler-plugins API training operators write) and
the pods that belong to them.

A pod belongs to the PodGroup named by its ``scheduling.x-k8s.io/pod-group`` label, in its own namespace.
``PodGroup`` keeps the spec the Coscheduling plugin reads (``minMember``, ``minResources``,
``scheduleTimeoutSeconds``), the creation time its queue sort orders gangs by, and the status as last
seen, so the operator writes a status only when it changes. ``GroupMembers`` is the read-only view of the
pods the scheduler knows per group (bound or pending, finished ones included), upstream's pod lister
filtered by the label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kopf_scheduler.api.errors import key_path
from kopf_scheduler.api.quantity import QuantityError, milli_value_of, value_of, wrong_type
from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.pod_info import PodInfo, parse_timestamp

#: the label that makes a pod a member of a PodGroup (upstream's ``v1alpha1.PodGroupLabel``)
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

#: the phases upstream's PodGroup controller sets (``PodGroupPhase``)
PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_RUNNING = "Running"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, eq=False)
class PodGroup:
    namespace: str
    name: str
    uid: str
    #: ``metadata.creationTimestamp`` as epoch seconds (0 when absent)
    creation: float
    min_member: int
    #: ``spec.minResources`` as integers (CPU in millicores), by resource name
    min_resources: Mapping[str, int] | None
    #: ``spec.scheduleTimeoutSeconds``; None when unset
    schedule_timeout_seconds: int | None
    #: ``status`` as the API server last returned it
    status: Mapping[str, Any]

    @property
    def key(self) -> str:
        """``namespace/name``: upstream's full name of the group."""
        return f"{self.namespace}/{self.name}"

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "")


def _int32(value: Any, path: str, minimum: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT32_MAX - 1 <= value <= _INT32_MAX:
        raise ObjectParseError(f"{path}: must be a 32-bit integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise ObjectParseError(f"{path}: must be at least {minimum}, not {value}")
    return value


def _resources(value: Any, path: str) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{path}: must be a map of resource names to quantities")
    out: dict[str, int] = {}
    for name, quantity in value.items():
        try:
            out[str(name)] = milli_value_of(quantity) if name == "cpu" else value_of(quantity)
        except QuantityError as e:
            raise ObjectParseError(f"{key_path(path, name)}: {e}") from None
        except TypeError:  # unhashable: a list or an object
            raise ObjectParseError(f"{key_path(path, name)}: {wrong_type(quantity)}") from None
    return out


def parse_pod_group(raw: Mapping[str, Any]) -> PodGroup:
    namespace, name = object_key(raw, namespaced=True)
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if not isinstance(spec, Mapping):
        raise ObjectParseError("spec: must be an object")
    if not isinstance(status, Mapping):
        raise ObjectParseError("status: must be an object")
    try:
        creation = parse_timestamp(meta.get("creationTimestamp"))
    except ValueError:
        raise ObjectParseError(
            f"metadata.creationTimestamp: invalid timestamp {meta.get('creationTimestamp')!r}"
        ) from None
    return PodGroup(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        creation=creation,
        # the CRD says minimum 1; an object without it (omitempty) reads as 0, as upstream's Go struct
        min_member=_int32(spec.get("minMember"), "spec.minMember", minimum=0) or 0,
        min_resources=_resources(spec.get("minResources"), "spec.minResources"),
        schedule_timeout_seconds=_int32(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds"),
        status=dict(status),
    )


POD_GROUPS: ObjectKind[PodGroup] = ObjectKind(
    "PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True, parse_pod_group, Resource.POD_GROUP
)


def pod_group_name(pod: PodInfo) -> str:
    """The name of the PodGroup ``pod`` belongs to; "" for none."""
    return pod.labels.get(POD_GROUP_LABEL, "")


def pod_phase(pod: PodInfo) -> str:
    status = pod.raw.get("status") if isinstance(pod.raw, Mapping) else None
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


def is_finished(pod: PodInfo) -> bool:
    """Succeeded or Failed: out of kube-scheduler's pod informer, so not a member the plugin counts."""
    return pod_phase(pod) in ("Succeeded", "Failed")


class GroupMembers(Protocol):
    """The pods the scheduler knows that carry ``POD_GROUP_LABEL``, by namespace and group name."""

    def members(self, namespace: str, group: str) -> Sequence[PodInfo]:
        """Every pod of the group: pending or bound, finished ones included (``is_finished``)."""

    @property
    def generation(self) -> int:
        """Grows with every change to any group (a pod added, updated or deleted)."""


class NoMembers:
    """Members of a scheduler that knows no pods (a framework built without a scheduler)."""

    generation = 0

    def members(self, namespace: str, group: str) -> Sequence[PodInfo]:
        return ()


__all__ = [
    "PHASE_FAILED",
    "PHASE_FINISHED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SCHEDULING",
    "POD_GROUPS",
    "POD_GROUP_LABEL",
    "GroupMembers",
    "NoMembers",
    "PodGroup",
    "is_finished",
    "parse_pod_group",
    "pod_group_name",
    "pod_phase",
]
