"""What kube-scheduler v1.37 decides and says differently from v1.34, through the upstream kube-scheduler
v1.37.2 and ``kopf-scheduler run`` on identical fresh clusters (etcd, kube-apiserver and
kube-controller-manager v1.37.2), one after the other (``side_by_side``); every pod of a case is kept to
the case's nodes by its zone. In each cluster, in order:

1. **BalancedAllocation scores the improvement in balance** (1.36): node ``ba-a`` already holds 5 cpu and
   5Gi of its 8/8Gi, ``ba-b`` 0 cpu and 7Gi. A pod of 1 cpu and 1Gi scores 125 on ``ba-a`` and 99 on
   ``ba-b`` with v1.34's rule (balance after placing it, plus LeastAllocated), 100 and 118 with v1.37's
   (``50 + (50 + balance with - balance without) / 2``): it goes to ``ba-b``.
2. **VolumeBinding scores storage capacity** (StorageCapacityScoring, on in 1.37): a pod with an unbound
   WaitForFirstConsumer claim of 1Gi, between ``cap-x`` (16 cpu; its zone's CSIStorageCapacity 10Gi) and
   ``cap-y`` (8 cpu; 100Gi). Without capacity scoring ``cap-x`` wins by one point of LeastAllocated; with
   the default shape (utilization 0 scores 10, 100 scores 0, times 10) ``cap-y`` gains 9: it goes there.
3. **nominatedNodeName during binding** (NominatedNodeNameForExpectation, on since 1.35): the scheduler
   writes ``status.nominatedNodeName`` before a PreBind that has work (case 2's claim), and the API server
   clears it when the pod is bound (ClearingNominatedNodeNameAfterBinding); a pod without such work
   (case 1) is bound without it. A watch records every state the API server held.
4. **FailedScheduling text**: a pod of 20 cpu, more than any node of its zone has. v1.37 no longer adds
   DynamicResources' ``no new claims to deallocate,`` to the message; compared word for word.
5. **NodeDeclaredFeatures** (GA in 1.37): a pod whose container restarts all containers on exit code 42
   (``restartPolicyRules`` action ``RestartAllContainers``, beta on in 1.37's API server) requires the
   node feature ``RestartAllContainersOnContainerExits``. Of its two nodes only the smaller declares it
   (``status.declaredFeatures``): the pod goes there; kept to the other node alone, it is unschedulable
   with "node(s) didn't match Pod's required features".
6. **Preempting a victim in PreBind cancels its binding** (1.36): a low-priority pod whose claim no
   provisioner serves waits in VolumeBinding's PreBind on node ``pre-6``; a high-priority pod needing
   that node's cpu preempts it. v1.37 stops the victim's binding in memory (a ``Preempted`` event "in
   kube-scheduler memory", no deletion): the victim stays, unbound, and the preemptor is bound.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import storage_capacity
from operator_harness import fresh_cluster, pod_outcome, sized_nodes, wait_until
from pod_watch import PodWatch
from side_by_side import Scheduler, SideBySide
from storage_capacity import PROVISIONER, in_zones
from volume_provisioner import TestProvisioner, selected_node

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

NS = "v137"
PODS = f"/api/v1/namespaces/{NS}/pods"
#: name -> (zone, cpu, memory)
NODES = {
    "ba-a-0": ("ba", "8", "8Gi"),
    "ba-b-1": ("ba", "8", "8Gi"),
    **storage_capacity.NODES,
    "ndf-with-4": ("ndf-a", "8", "8Gi"),
    "ndf-without-5": ("ndf-b", "16", "32Gi"),
    "pre-6": ("pre", "2", "4Gi"),
}
FEATURE = "RestartAllContainersOnContainerExits"
TIMEOUT = 60.0


#: stored before the scheduler starts: what the BalancedAllocation nodes already hold
BEFORE = [
    pod_manifest("ba-held-a", NS, requests={"cpu": "5", "memory": "5Gi"}, nodeName="ba-a-0"),
    pod_manifest("ba-held-b", NS, requests={"memory": "7Gi"}, nodeName="ba-b-1"),
]
SLOW_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "unserved"},
    "provisioner": "unserved.e2e.kopf-scheduler.dev",
    "volumeBindingMode": "WaitForFirstConsumer",
}
PRIORITIES = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    for name, value in (("low", 10), ("high", 1000))
]
OBJECTS: list[tuple[str, dict[str, Any]]] = [
    *storage_capacity.objects(NS),
    ("/apis/storage.k8s.io/v1/storageclasses", SLOW_CLASS),
    *(("/apis/scheduling.k8s.io/v1/priorityclasses", body) for body in PRIORITIES),
    *((PODS, body) for body in BEFORE),
]
BALANCED = pod_manifest("balanced", NS, requests={"cpu": "1", "memory": "1Gi"}, affinity=in_zones("ba"))
CLAIM = storage_capacity.claim(NS)
WITH_CLAIM = storage_capacity.pod_with_claim(NS)
RESTART_ALL = {
    "restartPolicy": "Never",
    "restartPolicyRules": [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ],
}


def restart_all(name: str, *zones: str) -> dict[str, Any]:
    """A pod whose one container restarts every container of the pod when it exits with 42."""
    body = pod_manifest(name, NS, requests={"cpu": "100m", "memory": "128Mi"}, affinity=in_zones(*zones))
    body["spec"]["containers"][0].update(RESTART_ALL)
    return body


NEEDS_FEATURE = restart_all("needs-feature", "ndf-a", "ndf-b")
NEEDS_FEATURE_ELSEWHERE = restart_all("needs-feature-elsewhere", "ndf-b")
NO_FEATURE_MESSAGE = (
    "0/7 nodes are available: 1 node(s) didn't match Pod's required features, 6 node(s) didn't match Pod's "
    "node affinity/selector. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling."
)
UNSERVED_CLAIM = {
    **storage_capacity.claim(NS),
    "metadata": {"name": "unserved", "namespace": NS},
}
UNSERVED_CLAIM["spec"] = {**UNSERVED_CLAIM["spec"], "storageClassName": "unserved"}
VICTIM = pod_manifest(
    "victim", NS, requests={"cpu": "1500m"}, affinity=in_zones("pre"), priorityClassName="low",
    volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "unserved"}}],
)  # fmt: skip
PREEMPTOR = pod_manifest(
    "preemptor", NS, requests={"cpu": "1500m"}, affinity=in_zones("pre"), priorityClassName="high"
)
TOO_BIG = pod_manifest("too-big", NS, requests={"cpu": "20"}, affinity=in_zones("ba"))
#: kube-scheduler v1.37.2's message for ``too-big`` (v1.34's had "no new claims to deallocate, " before
#: "preemption")
TOO_BIG_MESSAGE = (
    "0/7 nodes are available: 2 Insufficient cpu, 5 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling."
)


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    outcomes: dict[str, str] = {}
    with PodWatch(cp, NS) as watch, TestProvisioner(cp, NS, PROVISIONER) as provisioner:
        for body in (BALANCED, CLAIM, WITH_CLAIM, TOO_BIG, NEEDS_FEATURE, NEEDS_FEATURE_ELSEWHERE):
            path = PODS if body["kind"] == "Pod" else f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
            cp.post(path, body)
            if body["kind"] == "Pod":
                name = body["metadata"]["name"]
                decided = f"{name} decided"
                outcomes[name] = wait_until(lambda name=name: pod_outcome(cp, NS, name), TIMEOUT, decided)
        # the last transition of a bound pod (the API server clearing nominatedNodeName) may reach the
        # watch just after the binding was read
        wait_until(lambda: watch.states("with-claim")[-1][1] == "", 10, "with-claim seen bound by the watch")
        states = {name: watch.states(name) for name in ("balanced", "with-claim")}
        problems = watch.errors + provisioner.errors
    outcomes.update(preempt_in_pre_bind(cp))
    failed = sorted(
        {
            e.get("message", "")
            for e in cp.get(f"/api/v1/namespaces/{NS}/events")["items"]
            if e.get("reason") == "FailedScheduling" and e["involvedObject"].get("name") == "too-big"
        }
    )
    return {
        "outcomes": outcomes,
        "states": states,
        "failed_scheduling": failed,
        "problems": problems,
        "victim_events": events_of(cp, "victim"),
    }


def preempt_in_pre_bind(cp: ClusterHarness) -> dict[str, str]:
    """Case 6: the victim waits in PreBind (its claim has a selected node, and nothing provisions it),
    then the preemptor comes."""
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", UNSERVED_CLAIM)
    cp.post(PODS, VICTIM)

    in_pre_bind = "the victim's claim given a node (the victim in PreBind)"
    wait_until(lambda: selected_node(cp, NS, "unserved"), TIMEOUT, in_pre_bind)
    cp.post(PODS, PREEMPTOR)
    # the preemptor is unschedulable first (FailedScheduling: "preemption: found a potential placement")
    bound = wait_until(
        lambda: cp.get(f"{PODS}/preemptor")["spec"].get("nodeName"), TIMEOUT, "the preemptor bound"
    )
    victim = wait_until(lambda: pod_outcome(cp, NS, "victim"), TIMEOUT, "the victim unschedulable")
    return {"preemptor": bound, "victim": victim.split(":")[0]}


def events_of(cp: ClusterHarness, pod: str) -> list[tuple[str, str, str]]:
    """``(type, reason, note)`` of the pod's events, uids replaced by ``<uid>``, sorted."""
    found = set()
    for e in cp.get(f"/api/v1/namespaces/{NS}/events")["items"]:
        if e["involvedObject"].get("name") == pod:
            note = re.sub(
                r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>", e["message"]
            )
            found.add((e["type"], e["reason"], note))
    return sorted(found)


def nodes() -> list[dict[str, Any]]:
    bodies = sized_nodes(NODES)
    for body in bodies:
        if body["metadata"]["name"] == "ndf-with-4":
            body["status"]["declaredFeatures"] = [FEATURE]
    return bodies


def cluster(state_dir: Path) -> Any:
    return fresh_cluster(state_dir, nodes(), namespaces=[NS], objects=OBJECTS)


SIDE_BY_SIDE = SideBySide("v137", cluster, run)


def test_placements_are_kube_scheduler_v137s(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["outcomes"] == {
        "balanced": "ba-b-1",
        "with-claim": "cap-y-3",
        "too-big": f"unschedulable: {TOO_BIG_MESSAGE}",
        "needs-feature": "ndf-with-4",
        "needs-feature-elsewhere": f"unschedulable: {NO_FEATURE_MESSAGE}",
        "preemptor": "pre-6",
        "victim": "unschedulable",
    }
    assert kopf_scheduler["outcomes"] == kube_scheduler["outcomes"]


def test_nominated_node_name_is_written_before_prebind_and_cleared_on_bind(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["states"] == {
        "balanced": [("", ""), ("ba-b-1", "")],
        "with-claim": [("", ""), ("", "cap-y-3"), ("cap-y-3", "")],
    }
    assert kopf_scheduler["states"] == kube_scheduler["states"]
    assert kopf_scheduler["problems"] == kube_scheduler["problems"] == []


def test_failed_scheduling_message_is_word_for_word(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["failed_scheduling"] == [TOO_BIG_MESSAGE]
    assert kopf_scheduler["failed_scheduling"] == kube_scheduler["failed_scheduling"]


def test_a_victim_in_prebind_has_its_binding_cancelled_not_its_pod_deleted(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    preempted = (
        "Normal",
        "Preempted",
        "Preempted by pod <uid> on node pre-6 (in kube-scheduler memory).",
    )
    assert preempted in kube_scheduler["victim_events"]
    assert kopf_scheduler["victim_events"] == kube_scheduler["victim_events"]
