"""Reading the Workload API's PodGroups (``scheduling.k8s.io/v1beta1``) as kube-apiserver v1.37.2 serves them,
and a pod's ``spec.schedulingGroup``."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.framework.objects import ObjectParseError
from kopf_scheduler.framework.objects.workload_pod_groups import (
    WORKLOAD_POD_GROUPS,
    parse_workload_pod_group,
    scheduling_group,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod

SERVED = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "workers", "namespace": "ml", "uid": "u1", "generation": 2},
    "spec": {
        "workloadRef": {"workloadName": "training", "templateName": "workers"},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "priority": 1000,
        "preemptionPolicy": "Never",
    },
    "status": {
        "conditions": [{"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable"}]
    },
}


def test_a_served_pod_group() -> None:
    group = parse_workload_pod_group(SERVED)
    assert (group.key, group.uid, group.generation) == ("ml/workers", "u1", 2)
    assert (group.min_count, group.is_gang, group.basic, group.parent) == (4, True, False, None)
    assert (group.workload, group.priority, group.preemption_policy) == (
        ("training", "workers"),
        1000,
        "Never",
    )
    assert [c["reason"] for c in group.conditions] == ["Unschedulable"]
    assert WORKLOAD_POD_GROUPS.list_path == "/apis/scheduling.k8s.io/v1beta1/podgroups"
    assert (
        WORKLOAD_POD_GROUPS.object_path("ml", "workers")
        == "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/workers"
    )


def test_a_basic_pod_group() -> None:
    group = parse_workload_pod_group({"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"basic": {}}}})
    assert (group.key, group.min_count, group.is_gang, group.basic) == ("default/g", None, False, True)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"schedulingPolicy": {"gang": {"minCount": "4"}}},
            "spec.schedulingPolicy.gang.minCount: must be an integer, not '4'",
        ),
        (
            {"schedulingPolicy": {"gang": {}}},
            "spec.schedulingPolicy.gang.minCount: must be an integer, not None",
        ),
        ({"schedulingPolicy": []}, "spec.schedulingPolicy: must be an object"),
        ({"priority": 2**31}, f"spec.priority: must be between {-(2**31)} and {2**31 - 1}, not {2**31}"),
    ],
)
def test_a_bad_field_is_named(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectParseError) as caught:
        parse_workload_pod_group({"metadata": {"name": "g"}, "spec": spec})
    assert str(caught.value) == message


def test_the_group_a_pod_names() -> None:
    member = make_pod().name("p").set("spec.schedulingGroup", {"podGroupName": "workers"}).obj()
    assert scheduling_group(PodInfo(member)) == "workers"
    assert scheduling_group(PodInfo(make_pod().name("p").obj())) is None
