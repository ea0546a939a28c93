"""The ``PodGroupInitiallyScheduled`` condition kube-scheduler v1.37.2 writes on a Workload API PodGroup after
each pod group scheduling cycle (``schedule_one_podgroup.go``: ``updatePodGroupCondition``, with
``apimeta.SetStatusCondition`` and ``util.PatchPodGroupStatus``).

- ``True``, reason ``Scheduled``, when the cycle sent the gang to binding; ``False`` with ``Unschedulable``
  (the group's rejection, without ``pod group is unschedulable, ``) or ``SchedulerError`` otherwise.
- Once ``True`` it stays: a later cycle (for pods added to the group) does not turn it back to ``False``.
- ``lastTransitionTime`` changes only with the status; ``observedGeneration`` is the PodGroup's
  ``metadata.generation`` (v1.37.2 sets none on PodGroups, so it is left out, as Go's ``omitempty`` does).
- Nothing is sent when the condition would not change. The write is a strategic merge patch of
  ``podgroups/status`` carrying the one condition (conditions merge by ``type``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.objects.workload_pod_groups import WORKLOAD_POD_GROUPS, WorkloadPodGroup

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
TRUE = "True"
FALSE = "False"


@dataclass(frozen=True, slots=True)
class PodGroupCondition:
    """A condition to set (``metav1.Condition`` less the fields the write fills in)."""

    status: str
    reason: str
    message: str = ""
    type: str = INITIALLY_SCHEDULED


def scheduled() -> PodGroupCondition:
    return PodGroupCondition(TRUE, REASON_SCHEDULED)


def unschedulable(message: str) -> PodGroupCondition:
    return PodGroupCondition(FALSE, REASON_UNSCHEDULABLE, message)


def scheduler_error(message: str) -> PodGroupCondition:
    return PodGroupCondition(FALSE, REASON_SCHEDULER_ERROR, message)


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _existing(group: WorkloadPodGroup, kind: str) -> Mapping[str, Any] | None:
    return next((c for c in group.conditions if c.get("type") == kind), None)


def condition_patch(
    group: WorkloadPodGroup, condition: PodGroupCondition, now: float
) -> dict[str, Any] | None:
    """The ``podgroups/status`` patch setting ``condition`` at wall-clock ``now``; None when nothing would
    change (or when it would turn a ``True`` condition back)."""
    existing = _existing(group, condition.type)
    if existing is not None and existing.get("status") == TRUE and condition.status != TRUE:
        return None
    new: dict[str, Any] = {"type": condition.type, "status": condition.status}
    if group.generation:
        new["observedGeneration"] = group.generation
    if existing is not None and existing.get("status") == condition.status:
        new["lastTransitionTime"] = existing.get("lastTransitionTime")
        unchanged = (
            existing.get("reason") == condition.reason
            and (existing.get("message") or "") == condition.message
            and (existing.get("observedGeneration") or 0) == group.generation
        )
        if unchanged:
            return None
    else:
        new["lastTransitionTime"] = _rfc3339(now)
    new["reason"] = condition.reason
    new["message"] = condition.message
    return {"status": {"conditions": [new]}}


async def set_condition(
    client: ClusterClient, group: WorkloadPodGroup, condition: PodGroupCondition, now: float
) -> dict[str, Any] | None:
    """Writes ``condition`` on the PodGroup unless nothing would change; returns the PodGroup the API
    server answered with (None: nothing sent). API errors propagate (``APIError``)."""
    patch = condition_patch(group, condition, now)
    if patch is None:
        return None
    path = WORKLOAD_POD_GROUPS.object_path(group.namespace, group.name) + "/status"
    return await client.patch_object(path, patch)
