"""The preemption victim's DisruptionTarget condition, as kube-scheduler's PreemptPod writes it."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.client import parse_resource
from kopf_scheduler.k8s.conditions import status_patch
from kopf_scheduler.k8s.eviction import disruption_target


def pod(name: str, scheduler: str = "default-scheduler", **status: Any) -> PodInfo:
    return PodInfo(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 2},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]},
            "status": status,
        }
    )


def test_condition_names_the_preemptors_scheduler_and_the_victims_generation() -> None:
    assert disruption_target(pod("high", "gpu-packing"), pod("low")) == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "gpu-packing: preempting to accommodate a higher priority pod",
        "observedGeneration": 2,
    }


def test_victim_already_marked_is_not_patched_again() -> None:
    condition = disruption_target(pod("high"), pod("low"))
    marked = {"conditions": [dict(condition, lastTransitionTime="2024-01-01T00:00:00Z")]}
    assert status_patch(marked, condition, None, "2024-01-02T00:00:00Z") is None
    fresh = dict(condition, lastTransitionTime="2024-01-02T00:00:00Z")
    assert status_patch({}, condition, None, "2024-01-02T00:00:00Z") == {"status": {"conditions": [fresh]}}


def test_parse_resource() -> None:
    assert parse_resource("v1/pods") == ("v1", "pods")
    assert parse_resource("kopf-scheduler.io/v1alpha1/schedulingprofiles") == (
        "kopf-scheduler.io/v1alpha1",
        "schedulingprofiles",
    )
