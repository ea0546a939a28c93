"""The PodGroupInitiallyScheduled condition's patch, as kube-scheduler v1.37.2's updatePodGroupCondition and
apimeta.SetStatusCondition decide it."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.objects.pod_group_conditions import (
    condition_patch,
    scheduled,
    scheduler_error,
    unschedulable,
)
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, parse_workload_pod_group

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
MESSAGE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"


def group(*conditions: dict[str, Any], generation: int | None = None) -> WorkloadPodGroup:
    meta: dict[str, Any] = {"name": "g", "namespace": "ml"}
    if generation is not None:
        meta["generation"] = generation
    return parse_workload_pod_group(
        {
            "metadata": meta,
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
            "status": {"conditions": list(conditions)},
        }
    )


def condition(
    status: str, reason: str, message: str = "", when: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "type": "PodGroupInitiallyScheduled",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
    }


def test_a_first_condition_is_set_with_the_time_of_the_write():
    assert condition_patch(group(), unschedulable(MESSAGE), NOW) == {
        "status": {"conditions": [condition("False", "Unschedulable", MESSAGE, "2027-01-15T08:00:00Z")]}
    }


def test_scheduled_has_an_empty_message():
    assert condition_patch(group(), scheduled(), NOW) == {
        "status": {"conditions": [condition("True", "Scheduled", "", "2027-01-15T08:00:00Z")]}
    }


def test_the_same_condition_again_sends_nothing():
    assert (
        condition_patch(group(condition("False", "Unschedulable", MESSAGE)), unschedulable(MESSAGE), NOW)
        is None
    )


def test_a_new_message_keeps_the_transition_time():
    old = condition("False", "Unschedulable", "minCount (3) cannot be satisfied: 1 scheduled, 0 remaining")
    assert condition_patch(group(old), unschedulable(MESSAGE), NOW) == {
        "status": {"conditions": [condition("False", "Unschedulable", MESSAGE)]}
    }


def test_a_change_of_status_is_a_transition():
    old = condition("False", "Unschedulable", MESSAGE)
    assert condition_patch(group(old), scheduled(), NOW) == {
        "status": {"conditions": [condition("True", "Scheduled", "", "2027-01-15T08:00:00Z")]}
    }


def test_once_scheduled_it_never_turns_false_again():
    done = group(condition("True", "Scheduled"))
    assert condition_patch(done, unschedulable(MESSAGE), NOW) is None
    assert condition_patch(done, scheduler_error("boom"), NOW) is None


def test_the_generation_is_observed_when_the_pod_group_has_one():
    patch = condition_patch(group(generation=2), scheduler_error("boom"), NOW)
    assert patch is not None
    assert patch["status"]["conditions"][0]["observedGeneration"] == 2
    assert patch["status"]["conditions"][0]["reason"] == "SchedulerError"
