"""Preempting a victim as kube-scheduler's ``PreemptPod`` does (``framework/preemption``): first the
``DisruptionTarget`` condition, then the DELETE.

The condition comes first because it is what tells a scheduler (this one after a restart, or another
instance) that the terminating pod is already a victim, so its preemptor does not preempt again while it
terminates. A victim that is already gone (404 at either step) is not an error: there is then nothing to
report either.

Beyond upstream, both requests name the victim's UID: a pod deleted and created again under the same
name since the scheduler chose the victim (a StatefulSet's pod, say) is not the victim and is left alone.
The DELETE carries it as a precondition (``DeleteOptions.preconditions.uid``), which the API server
refuses with 409 Conflict for another pod; the status patch carries it as ``metadata.uid``, which the API
server refuses with 422 Invalid (``metadata.uid: ... field is immutable``) for another pod. Both count as
"already gone".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.conditions import status_patch
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, Response, RestClient, resource_path
from kopf_scheduler.k8s.workers import DEFAULT_RETRY_DELAYS, retriable, with_retries

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def disruption_target(preemptor: PodInfo, victim: PodInfo, kind: str = "pod") -> dict[str, Any]:
    """``kind``: what preempts, ``pod`` or ``podgroup`` (then ``preemptor`` is one of its pods)."""
    condition: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority {kind}",
    }
    generation = (victim.raw.get("metadata") or {}).get("generation")
    if isinstance(generation, int) and generation:
        condition["observedGeneration"] = generation
    return condition


def _uid(victim: PodInfo) -> str:
    """The victim's UID as the API server gave it ('' for none: then it is addressed by name alone, as
    upstream addresses every victim; every pod the API server lists has one)."""
    return str((victim.raw.get("metadata") or {}).get("uid") or "")


def delete_options(victim: PodInfo) -> dict[str, Any]:
    """The DELETE's body: only the pod with the victim's UID may be deleted."""
    options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if _uid(victim):
        options["preconditions"] = {"uid": _uid(victim)}
    return options


def _replaced(response: Response) -> bool:
    """Whether a status patch was refused because the pod of that name has another UID."""
    return response.status == 422 and "metadata.uid" in response.message()


async def preempt(
    rest: RestClient,
    victim: PodInfo,
    preemptor: PodInfo,
    clock: Clock,
    now: str,
    retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
    kind: str = "pod",
) -> bool:
    """Mark and delete ``victim``; False when it was already gone; ``APIError`` for other failures."""
    pod_path = resource_path("v1", "pods", victim.name, namespace=victim.namespace)
    condition = disruption_target(preemptor, victim, kind)
    patch = status_patch(victim.raw.get("status") or {}, condition, None, now)
    if patch is not None:
        if _uid(victim):
            patch = {"metadata": {"uid": _uid(victim)}, **patch}
        response = await with_retries(
            lambda: rest.request("PATCH", pod_path + "/status", patch, content_type=STRATEGIC_MERGE_PATCH),
            clock,
            retry_delays,
            should_retry=lambda r: retriable(r.status) or r.status == 409,
        )
        if response.status == 404 or _replaced(response):
            return False
        if response.status != 200:
            raise response.error_for(f"marking {victim.key} as preemption victim")
    response = await rest.request("DELETE", pod_path, delete_options(victim))
    if response.status in (404, 409):  # 409: the UID precondition failed, the name is another pod's now
        return False
    if response.status not in (200, 202):
        raise response.error_for(f"deleting preemption victim {victim.key}")
    return True
