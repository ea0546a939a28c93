"""Preempting a victim as kube-scheduler's ``PreemptPod`` does (``framework/preemption``): first the
``DisruptionTarget`` condition, then the DELETE.

The condition comes first because it is what tells a scheduler (this one after a restart, or another
instance) that the terminating pod is already a victim, so its preemptor does not preempt again while it
terminates. A victim that is already gone (404 at either step) is not an error: there is then nothing to
report either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.conditions import status_patch
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, RestClient, resource_path
from kopf_scheduler.k8s.workers import DEFAULT_RETRY_DELAYS, retriable, with_retries

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def disruption_target(preemptor: PodInfo, victim: PodInfo) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
    }
    generation = (victim.raw.get("metadata") or {}).get("generation")
    if isinstance(generation, int) and generation:
        condition["observedGeneration"] = generation
    return condition


async def preempt(
    rest: RestClient,
    victim: PodInfo,
    preemptor: PodInfo,
    clock: Clock,
    now: str,
    retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
) -> bool:
    """Mark and delete ``victim``; False when it was already gone; ``APIError`` for other failures."""
    pod_path = resource_path("v1", "pods", victim.name, namespace=victim.namespace)
    patch = status_patch(victim.raw.get("status") or {}, disruption_target(preemptor, victim), None, now)
    if patch is not None:
        response = await with_retries(
            lambda: rest.request("PATCH", pod_path + "/status", patch, content_type=STRATEGIC_MERGE_PATCH),
            clock,
            retry_delays,
            should_retry=lambda r: retriable(r.status) or r.status == 409,
        )
        if response.status == 404:
            return False
        if response.status != 200:
            raise response.error_for(f"marking {victim.key} as preemption victim")
    response = await rest.request("DELETE", pod_path)
    if response.status == 404:
        return False
    if response.status not in (200, 202):
        raise response.error_for(f"deleting preemption victim {victim.key}")
    return True
