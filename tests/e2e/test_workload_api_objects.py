"""The Workload API as kube-apiserver v1.37.2 serves it with ``--runtime-config=scheduling.k8s.io/v1beta1=true
--feature-gates=GenericWorkload=true`` (on a control plane of this module's own: the session's keeps its
flags), read by kopf-scheduler's GangScheduling pieces: the PodGroup and its status as the server returns
them, a pod's ``spec.schedulingGroup``, and the pod group states and PreEnqueue verdicts built from the
server's own objects."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from operator_harness import fresh_cluster

from kopf_scheduler.backend.cache.pod_group_states import PodGroupStates
from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.framework.objects.pod_group_conditions import (
    PodGroupCondition,
    scheduled,
    set_condition,
    unschedulable,
)
from kopf_scheduler.framework.objects.workload_pod_groups import (
    WORKLOAD_POD_GROUPS,
    parse_workload_pod_group,
    scheduling_group,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.k8s.client import KubeClient
from kopf_scheduler.plugins.gang_scheduling import GangScheduling

NS = "ml"
FLAGS = ("--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true")
#: no scheduler serves it: the pods stay as created
UNSERVED = "nobody"


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    with fresh_cluster(
        tmp_path_factory.mktemp("workload-api"),
        namespaces=[NS],
        controller_manager=False,
        apiserver_args=FLAGS,
    ) as harness:
        yield harness


def pod_group(name: str, policy: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": policy, **spec},
    }


def member(name: str, group: str) -> dict[str, Any]:
    return pod_manifest(name, NS, schedulerName=UNSERVED, schedulingGroup={"podGroupName": group})


def test_the_api_server_serves_workloads_and_pod_groups_in_v1beta1(cp: ClusterHarness) -> None:
    served = {r["name"] for r in cp.get("/apis/scheduling.k8s.io/v1beta1")["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= served


def test_a_pod_group_as_served_and_its_status(cp: ClusterHarness) -> None:
    workload = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "training", "namespace": NS},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}]},
    }
    cp.post(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/workloads", workload)
    body = pod_group(
        "workers",
        {"gang": {"minCount": 4}},
        workloadRef={"workloadName": "training", "templateName": "workers"},
    )
    cp.post(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups", body)
    condition = {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "minCount (4) cannot be satisfied: 2 scheduled, 0 remaining",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    current = cp.get(WORKLOAD_POD_GROUPS.object_path(NS, "workers"))
    cp.request(
        "PUT",
        WORKLOAD_POD_GROUPS.object_path(NS, "workers") + "/status",
        {**current, "status": {"conditions": [condition]}},
    )
    raw = cp.get(WORKLOAD_POD_GROUPS.object_path(NS, "workers"))
    group = parse_workload_pod_group(raw)
    assert (group.key, group.min_count, group.basic, group.parent) == (f"{NS}/workers", 4, False, None)
    assert group.workload == ("training", "workers") and group.uid == raw["metadata"]["uid"]
    # v1.37.2 sets no metadata.generation on a PodGroup (kube-scheduler's conditions say observedGeneration 0)
    assert "generation" not in raw["metadata"] and group.generation == 0
    assert [(c["type"], c["reason"], c["message"]) for c in group.conditions] == [
        (
            "PodGroupInitiallyScheduled",
            "Unschedulable",
            "minCount (4) cannot be satisfied: 2 scheduled, 0 remaining",
        )
    ]


def test_a_basic_pod_group_as_served(cp: ClusterHarness) -> None:
    cp.post(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups", pod_group("loose", {"basic": {}}))
    group = parse_workload_pod_group(cp.get(WORKLOAD_POD_GROUPS.object_path(NS, "loose")))
    assert (group.min_count, group.is_gang, group.basic) == (None, False, True)


def test_members_are_held_until_min_count_pods_of_the_served_group_exist(cp: ClusterHarness) -> None:
    """PreEnqueue over pods and a PodGroup read back from the API server: a member waits for its PodGroup,
    then for the third of three members, as kube-scheduler v1.37.2 holds them (docs/gangs.md)."""
    states = PodGroupStates()
    plugin = GangScheduling(handle=None, groups=states)  # type: ignore[arg-type]  # PreEnqueue reads no handle
    pods = [PodInfo(cp.post(f"/api/v1/namespaces/{NS}/pods", member(f"held-{i}", "held"))) for i in range(2)]
    assert [scheduling_group(p) for p in pods] == ["held", "held"]
    for p in pods:
        states.add_pod(p)
    assert plugin.pre_enqueue(pods[0]) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ('waiting for pods\'s pod group "held" to appear in scheduling queue',),
    )
    served = cp.post(
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups",
        pod_group("held", {"gang": {"minCount": 3}}),
    )
    states.set_pod_group(parse_workload_pod_group(served))
    assert plugin.pre_enqueue(pods[0]) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ("waiting for minCount pods from a gang to appear in scheduling queue",),
    )
    third = PodInfo(cp.post(f"/api/v1/namespaces/{NS}/pods", member("held-2", "held")))
    states.add_pod(third)
    assert [plugin.pre_enqueue(p) for p in (*pods, third)] == [None, None, None]


def test_the_initially_scheduled_condition_written_through_podgroups_status(cp: ClusterHarness) -> None:
    """The condition kube-scheduler v1.37.2 writes after a pod group cycle, patched into the served
    PodGroup: False/Unschedulable with the gang's message, then True/Scheduled (a transition), after which
    a False is not written (it never turns back)."""
    cp.post(
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups",
        pod_group("cond", {"gang": {"minCount": 3}}),
    )
    path = WORKLOAD_POD_GROUPS.object_path(NS, "cond")
    message = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, pod group preemption: x"

    async def write(condition: PodGroupCondition, now: float) -> dict[str, Any] | None:
        client = KubeClient.from_environment(cp.kubeconfig)
        try:
            return await set_condition(client, parse_workload_pod_group(cp.get(path)), condition, now)
        finally:
            await client.close()

    answered = asyncio.run(write(unschedulable(message), 1_800_000_000.0))
    assert answered is not None
    assert cp.get(path)["status"]["conditions"] == [
        {
            "type": "PodGroupInitiallyScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": "2027-01-15T08:00:00Z",
        }
    ]
    assert asyncio.run(write(unschedulable(message), 1_800_000_100.0)) is None  # nothing changed
    asyncio.run(write(scheduled(), 1_800_000_200.0))
    assert cp.get(path)["status"]["conditions"] == [
        {
            "type": "PodGroupInitiallyScheduled",
            "status": "True",
            "reason": "Scheduled",
            "message": "",
            "lastTransitionTime": "2027-01-15T08:03:20Z",
        }
    ]
    assert asyncio.run(write(unschedulable(message), 1_800_000_300.0)) is None
    assert cp.get(path)["status"]["conditions"][0]["status"] == "True"
