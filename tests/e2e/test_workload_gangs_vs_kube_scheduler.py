"""The Workload API's gangs (GenericWorkload) through kube-scheduler v1.37.2 with
``--feature-gates=GenericWorkload=true`` and ``kopf-scheduler run --feature-gates GenericWorkload=true``, each
on a fresh control plane of its own (etcd and kube-apiserver v1.37.2 serving ``scheduling.k8s.io/v1beta1``),
one after the other (``side_by_side``). Each case keeps its pods to its own two nodes by their zone (a
node of 3 CPUs and one of 2, so that every placement is decided by the scores, never by a random tie). In
each cluster, in order:

1. **Below minCount**: two pods of a gang of ``minCount: 3`` are created before their PodGroup, then the
   PodGroup. They wait out of the queue: no event, no ``PodScheduled`` condition, no PodGroup condition
   (checked once the other cases are done, so the scheduler had every chance to say something).
2. **A gang that fits**: three pods of 500m: all are bound, on the nodes kube-scheduler picks, with their
   ``Scheduled`` events; the PodGroup gets ``PodGroupInitiallyScheduled`` ``True``/``Scheduled``.
3. **A gang that cannot fit**: three pods of 1600m, room for two: none is bound; the third pod's own
   FitError, the other two's ``pod group is unschedulable, minCount (3) cannot be satisfied: ...``; the
   PodGroup's condition ``False``/``Unschedulable`` with the group's message.
4. **A gang of higher priority preempts**: two pods of priority 0 hold the room of a gang of two members
   of priority 1000 (its PodGroup's too, from the same PriorityClass). Its first cycle fails and pod group
   preemption evicts both (``Preempted by podgroup <uid> on node cluster``, the PodGroup as the related
   object); the next binds the gang where preemption found it room.
5. **A gang larger than its minCount**: three pods of 1600m for ``minCount: 2``, room for two: the two are
   bound and the PodGroup scheduled; the third gets its own FitError, and the condition stays ``True`` when
   it is tried again alone.
6. **A gang whose pods have another priority than its PodGroup** (the pods' PriorityClass, none for the
   PodGroup): every pod fails before scheduling with a ``SchedulerError``, and so does the PodGroup's
   condition.
7. **A lone pod preempts among gangs** (three nodes of 2 CPUs of their own, pods of 1 CPU, priority 0 unless
   said): node a holds ``whole-0`` of a PodGroup with ``disruptionMode: all`` and ``mid`` (priority 500),
   node b ``whole-1`` and the lone ``lone``, node c the lone ``solo`` and ``member-0`` of a gang. A pod of
   priority 1000 that fits on a or b makes room on b by evicting ``lone`` (the group counts both its pods
   on a, and on b it is offered back before the lone pod); one that fits only on a evicts the group whole,
   ``whole-1`` on b too; one that fits only on c evicts ``solo``, not the gang member.

Every placement, event text, pod condition and PodGroup condition is compared word for word (UIDs, which
each cluster gives its own objects, read ``<uid>``). At the end each scheduler's ``/metrics`` is read: the
families of GenericWorkload and of preemption (``workload_metrics``) are compared by name, type, label
names and series, and by value where the run decides it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import condition, fresh_cluster, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide
from storage_capacity import in_zones
from workload_metrics import scrape

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

NS = "gangs"
PODS = f"/api/v1/namespaces/{NS}/pods"
POD_GROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"
FLAGS = ("--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true")
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: name -> (zone, cpu, memory)
NODES = {
    "fits-big-0": ("fits", "3", "8Gi"),
    "fits-small-1": ("fits", "2", "8Gi"),
    "cannot-big-2": ("cannot", "3", "8Gi"),
    "cannot-small-3": ("cannot", "2", "8Gi"),
    "preempt-big-4": ("preempt", "3", "8Gi"),
    "preempt-small-5": ("preempt", "2", "8Gi"),
    "extra-big-6": ("extra", "3", "8Gi"),
    "extra-small-7": ("extra", "2", "8Gi"),
    "among-a-8": ("among-a", "2", "8Gi"),
    "among-b-9": ("among-b", "2", "8Gi"),
    "among-c-10": ("among-c", "2", "8Gi"),
}
HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}
MID = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "mid"},
    "value": 500,
}
TIMEOUT = 60.0
#: how long a case that must show nothing keeps watching once the scheduler has shown it works
QUIET = 5.0

#: a pod of 1600m in a zone of two nodes whose room it cannot have
UNFIT_MESSAGE = (
    f"0/{len(NODES)} nodes are available: 2 Insufficient cpu, {len(NODES) - 2} node(s) didn't match Pod's "
    "node affinity/selector."
)
GANG_MESSAGE = (
    "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
    "pod group preemption: No preemption victims found for incoming preemptor"
)


def pod_group(name: str, min_count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec},
    }


def member(name: str, group: str, cpu: str, zone: str, **spec: Any) -> dict[str, Any]:
    return pod_manifest(
        name,
        NS,
        requests={"cpu": cpu},
        affinity=in_zones(zone),
        schedulingGroup={"podGroupName": group},
        **spec,
    )


def pod(cp: ClusterHarness, name: str) -> dict[str, Any]:
    return dict(cp.get(f"{PODS}/{name}"))


def scheduled_condition(cp: ClusterHarness, name: str) -> tuple[str, str, str] | None:
    found = condition(pod(cp, name), "PodScheduled")
    if not found:
        return None
    return (found.get("status", ""), found.get("reason", ""), found.get("message", ""))


def group_conditions(cp: ClusterHarness, name: str) -> list[tuple[str, str, str, str]]:
    status = cp.get(f"{POD_GROUPS}/{name}").get("status") or {}
    return [
        (c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
        for c in status.get("conditions") or ()
    ]


def events(cp: ClusterHarness, name: str) -> list[tuple[str, ...]]:
    """``(type, reason, message, related kind)`` of the pod's events, each once, sorted; UIDs in messages
    read ``<uid>`` (the two clusters' objects have their own)."""
    found = {
        (
            e["type"],
            e["reason"],
            UID.sub("<uid>", e.get("message", "")),
            (e.get("related") or {}).get("kind", ""),
        )
        for e in cp.get(f"/api/v1/namespaces/{NS}/events")["items"]
        if e["involvedObject"].get("name") == name
    }
    return sorted(found)


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # 1. below minCount: the members first, then their PodGroup
    for i in range(2):
        cp.post(PODS, member(f"below-{i}", "below", "100m", "fits"))
    cp.post(POD_GROUPS, pod_group("below", 3))

    # 2. a gang that fits
    cp.post(POD_GROUPS, pod_group("fits", 3))
    for i in range(3):
        cp.post(PODS, member(f"fits-{i}", "fits", "500m", "fits"))
    fits = [f"fits-{i}" for i in range(3)]

    def bound() -> dict[str, str] | None:
        nodes = {n: pod(cp, n)["spec"].get("nodeName", "") for n in fits}
        return nodes if all(nodes.values()) else None

    out["fits_nodes"] = wait_until(bound, TIMEOUT, "the gang that fits bound")
    out["fits_group"] = wait_until(
        lambda: group_conditions(cp, "fits"), TIMEOUT, "the fitting gang's condition"
    )
    out["fits_events"] = {n: events(cp, n) for n in fits}

    # 3. a gang that cannot fit
    cp.post(POD_GROUPS, pod_group("cannot", 3))
    cannot = [f"cannot-{i}" for i in range(3)]
    for name in cannot:
        cp.post(PODS, member(name, "cannot", "1600m", "cannot"))
    out["cannot_conditions"] = {
        n: wait_until(lambda n=n: scheduled_condition(cp, n), TIMEOUT, f"{n} unschedulable") for n in cannot
    }
    out["cannot_group"] = wait_until(
        lambda: group_conditions(cp, "cannot"), TIMEOUT, "the gang that cannot fit's condition"
    )
    out["cannot_nodes"] = {n: pod(cp, n)["spec"].get("nodeName", "") for n in cannot}
    out["cannot_events"] = {n: events(cp, n) for n in cannot}

    out["preempt"] = preempt(cp)

    # 5. a gang of three pods of which two make it (minCount 2)
    cp.post(POD_GROUPS, pod_group("extra", 2))
    extra = [f"extra-{i}" for i in range(3)]
    for name in extra:
        cp.post(PODS, member(name, "extra", "1600m", "extra"))
    out["extra_group"] = wait_until(
        lambda: group_conditions(cp, "extra"), TIMEOUT, "the extra gang's condition"
    )
    out["extra_left"] = wait_until(
        lambda: scheduled_condition(cp, "extra-2"), TIMEOUT, "extra-2 unschedulable"
    )
    out["extra_nodes"] = {n: pod(cp, n)["spec"].get("nodeName", "") for n in extra}
    out["extra_events"] = {n: events(cp, n) for n in extra}

    # 6. a gang whose pods have another priority than its PodGroup
    cp.post(POD_GROUPS, pod_group("mixed", 2))
    mixed = ["mixed-0", "mixed-1"]
    for name in mixed:
        cp.post(PODS, member(name, "mixed", "100m", "fits", priorityClassName="high"))
    out["mixed_conditions"] = {
        n: wait_until(lambda n=n: scheduled_condition(cp, n), TIMEOUT, f"{n} failed") for n in mixed
    }
    out["mixed_group"] = wait_until(
        lambda: group_conditions(cp, "mixed"), TIMEOUT, "the mixed gang's condition"
    )
    out["mixed_events"] = {n: events(cp, n) for n in mixed}

    out["among"] = preempt_among_gangs(cp)

    # 1, checked last: nothing said about the gang below minCount, a while after the rest was decided
    time.sleep(QUIET)
    below = ["below-0", "below-1"]
    out["below"] = {
        "nodes": {n: pod(cp, n)["spec"].get("nodeName", "") for n in below},
        "conditions": {n: scheduled_condition(cp, n) for n in below},
        "events": {n: events(cp, n) for n in below},
        "group": group_conditions(cp, "below"),
    }
    out["metrics"] = scrape(scheduler.metrics_url)
    return out


def preempt(cp: ClusterHarness) -> dict[str, Any]:
    """4. A gang of higher priority preempts: two pods of priority 0 hold the room of its two members."""
    victims = ["low-0", "low-1"]
    for name in victims:
        body = pod_manifest(
            name, NS, requests={"cpu": "1600m"}, affinity=in_zones("preempt"), terminationGracePeriodSeconds=0
        )
        cp.post(PODS, body)
    wait_until(lambda: all(pod(cp, n)["spec"].get("nodeName") for n in victims), TIMEOUT, "the victims bound")
    victim_nodes = {n: pod(cp, n)["spec"]["nodeName"] for n in victims}
    cp.post(POD_GROUPS, pod_group("urgent", 2, priorityClassName="high"))
    urgent = ["urgent-0", "urgent-1"]
    for name in urgent:
        cp.post(PODS, member(name, "urgent", "1600m", "preempt", priorityClassName="high"))

    def decided() -> dict[str, str] | None:
        nodes = {n: pod(cp, n)["spec"].get("nodeName", "") for n in urgent}
        return nodes if all(nodes.values()) else None

    nodes = wait_until(decided, TIMEOUT, "the urgent gang bound")
    left = sorted(p["metadata"]["name"] for p in cp.get(PODS)["items"] if p["metadata"]["name"] in victims)
    return {
        "victim_nodes": victim_nodes,
        "nodes": nodes,
        "victims_left": left,
        "events": {n: events(cp, n) for n in (*victims, *urgent)},
        "group": wait_until(
            lambda: [c for c in group_conditions(cp, "urgent") if c[1] == "True"], TIMEOUT, "urgent scheduled"
        ),
        "group_priority": cp.get(f"{POD_GROUPS}/urgent")["spec"].get("priority"),
    }


def preempt_among_gangs(cp: ClusterHarness) -> dict[str, Any]:
    """7. A lone pod of priority 1000 preempts, three times, where gang members and lone pods of lower
    priority hold the room: who is evicted, where the preemptor goes, and every pod's events."""
    held = ["whole-0", "whole-1", "mid", "lone", "solo", "member-0"]

    def bound(names: list[str]) -> dict[str, str] | None:
        nodes = {n: pod(cp, n)["spec"].get("nodeName", "") for n in names}
        return nodes if all(nodes.values()) else None

    def left() -> list[str]:
        return sorted(p["metadata"]["name"] for p in cp.get(PODS)["items"] if p["metadata"]["name"] in held)

    gone = {"terminationGracePeriodSeconds": 0}
    cp.post(POD_GROUPS, pod_group("whole", 2, disruptionMode={"all": {}}))
    cp.post(PODS, member("whole-0", "whole", "1", "among-a", **gone))
    cp.post(PODS, member("whole-1", "whole", "1", "among-b", **gone))
    wait_until(lambda: bound(["whole-0", "whole-1"]), TIMEOUT, "the gang preempted whole bound")
    for name, zone, spec in (
        ("mid", "among-a", {"priorityClassName": "mid"}),
        ("lone", "among-b", {}),
        ("solo", "among-c", {}),
    ):
        cp.post(PODS, pod_manifest(name, NS, requests={"cpu": "1"}, affinity=in_zones(zone), **gone, **spec))
    wait_until(lambda: bound(["mid", "lone", "solo"]), TIMEOUT, "the lone pods bound")
    cp.post(POD_GROUPS, pod_group("single", 1))
    cp.post(PODS, member("member-0", "single", "1", "among-c", **gone))
    out: dict[str, Any] = {"held": wait_until(lambda: bound(held), TIMEOUT, "the gang member bound")}
    for preemptor, zones in (
        ("first", ("among-a", "among-b")),
        ("second", ("among-a",)),
        ("third", ("among-c",)),
    ):
        body = pod_manifest(
            preemptor, NS, requests={"cpu": "1"}, affinity=in_zones(*zones), priorityClassName="high"
        )
        cp.post(PODS, body)
        out[preemptor] = wait_until(lambda p=preemptor: bound([p]), TIMEOUT, f"{preemptor} bound")[preemptor]
        out[f"left_after_{preemptor}"] = left()
    out["events"] = {n: events(cp, n) for n in (*held, "first", "second", "third")}
    return out


def cluster(state_dir: Path) -> Any:
    return fresh_cluster(
        state_dir,
        sized_nodes(NODES),
        namespaces=[NS],
        objects=[
            ("/apis/scheduling.k8s.io/v1/priorityclasses", HIGH),
            ("/apis/scheduling.k8s.io/v1/priorityclasses", MID),
        ],
        controller_manager=False,
        apiserver_args=FLAGS,
    )


SIDE_BY_SIDE = SideBySide(
    "workload-gangs",
    cluster,
    run,
    kube_args=["--feature-gates=GenericWorkload=true"],
    kopf_args=("--default-scheduler-name", "default-scheduler", "--feature-gates", "GenericWorkload=true"),
    kopf_ports=True,
)


def test_a_gang_below_min_count_is_held_without_a_word(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["below"] == {
        "nodes": {"below-0": "", "below-1": ""},
        "conditions": {"below-0": None, "below-1": None},
        "events": {"below-0": [], "below-1": []},
        "group": [],
    }
    assert kopf_scheduler["below"] == kube_scheduler["below"]


def test_a_gang_that_fits_is_bound_where_kube_scheduler_binds_it(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["fits_nodes"] == {
        "fits-0": "fits-big-0",
        "fits-1": "fits-small-1",
        "fits-2": "fits-big-0",
    }
    assert kopf_scheduler["fits_nodes"] == kube_scheduler["fits_nodes"]
    assert kube_scheduler["fits_group"] == [("PodGroupInitiallyScheduled", "True", "Scheduled", "")]
    assert kopf_scheduler["fits_group"] == kube_scheduler["fits_group"]
    assert kube_scheduler["fits_events"]["fits-1"] == [
        ("Normal", "Scheduled", f"Successfully assigned {NS}/fits-1 to fits-small-1", "")
    ]
    assert kopf_scheduler["fits_events"] == kube_scheduler["fits_events"]


def test_a_gang_that_cannot_fit_binds_nothing_and_says_what_kube_scheduler_says(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["cannot_nodes"] == {"cannot-0": "", "cannot-1": "", "cannot-2": ""}
    assert kopf_scheduler["cannot_nodes"] == kube_scheduler["cannot_nodes"]
    rejected = f"pod group is unschedulable, {GANG_MESSAGE}"
    assert kube_scheduler["cannot_conditions"] == {
        "cannot-0": ("False", "Unschedulable", rejected),
        "cannot-1": ("False", "Unschedulable", rejected),
        "cannot-2": ("False", "Unschedulable", UNFIT_MESSAGE),
    }
    assert kopf_scheduler["cannot_conditions"] == kube_scheduler["cannot_conditions"]
    assert kube_scheduler["cannot_events"]["cannot-2"] == [("Warning", "FailedScheduling", UNFIT_MESSAGE, "")]
    assert kube_scheduler["cannot_events"]["cannot-0"] == [("Warning", "FailedScheduling", rejected, "")]
    assert kopf_scheduler["cannot_events"] == kube_scheduler["cannot_events"]
    assert kube_scheduler["cannot_group"] == [
        ("PodGroupInitiallyScheduled", "False", "Unschedulable", GANG_MESSAGE)
    ]
    assert kopf_scheduler["cannot_group"] == kube_scheduler["cannot_group"]


def test_a_higher_priority_gang_preempts_as_kube_scheduler_does(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    preempted = ("Normal", "Preempted", "Preempted by podgroup <uid> on node cluster", "PodGroup")
    assert kube_scheduler["preempt"] == {
        "victim_nodes": {"low-0": "preempt-big-4", "low-1": "preempt-small-5"},
        "nodes": {"urgent-0": "preempt-big-4", "urgent-1": "preempt-small-5"},
        "victims_left": [],
        "events": {
            "low-0": [
                preempted,
                ("Normal", "Scheduled", f"Successfully assigned {NS}/low-0 to preempt-big-4", ""),
            ],
            "low-1": [
                preempted,
                ("Normal", "Scheduled", f"Successfully assigned {NS}/low-1 to preempt-small-5", ""),
            ],
            # the first cycle: urgent-0 fits nowhere, so urgent-1 cannot make the gang and is not tried;
            # preemption finds room for both, and the next cycle binds them where it found it
            "urgent-0": [
                ("Normal", "Scheduled", f"Successfully assigned {NS}/urgent-0 to preempt-big-4", ""),
                ("Warning", "FailedScheduling", UNFIT_MESSAGE, ""),
            ],
            "urgent-1": [
                ("Normal", "Scheduled", f"Successfully assigned {NS}/urgent-1 to preempt-small-5", ""),
                (
                    "Warning",
                    "FailedScheduling",
                    "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",
                    "",
                ),
            ],
        },
        "group": [("PodGroupInitiallyScheduled", "True", "Scheduled", "")],
        "group_priority": 1000,
    }
    assert kopf_scheduler["preempt"] == kube_scheduler["preempt"]


def test_a_gang_whose_pods_have_another_priority_fails_as_kube_scheduler_fails_it(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    message = (
        "all pods in a single pod group should have the same priority as the pod group's priority, "
        "got 1000 and 0"
    )
    assert kube_scheduler["mixed_conditions"] == {
        "mixed-0": ("False", "SchedulerError", message),
        "mixed-1": ("False", "SchedulerError", message),
    }
    assert kopf_scheduler["mixed_conditions"] == kube_scheduler["mixed_conditions"]
    assert kube_scheduler["mixed_group"] == [
        ("PodGroupInitiallyScheduled", "False", "SchedulerError", message)
    ]
    assert kopf_scheduler["mixed_group"] == kube_scheduler["mixed_group"]
    assert kube_scheduler["mixed_events"]["mixed-0"] == [("Warning", "FailedScheduling", message, "")]
    assert kopf_scheduler["mixed_events"] == kube_scheduler["mixed_events"]


def test_a_gang_larger_than_its_min_count_is_bound_as_far_as_it_fits(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    unfit = UNFIT_MESSAGE
    assert kube_scheduler["extra_nodes"] == {
        "extra-0": "extra-big-6",
        "extra-1": "extra-small-7",
        "extra-2": "",
    }
    assert kopf_scheduler["extra_nodes"] == kube_scheduler["extra_nodes"]
    assert kube_scheduler["extra_group"] == [("PodGroupInitiallyScheduled", "True", "Scheduled", "")]
    assert kopf_scheduler["extra_group"] == kube_scheduler["extra_group"]
    assert kube_scheduler["extra_left"] == ("False", "Unschedulable", unfit)
    assert kopf_scheduler["extra_left"] == kube_scheduler["extra_left"]
    assert kube_scheduler["extra_events"]["extra-2"] == [("Warning", "FailedScheduling", unfit, "")]
    assert kopf_scheduler["extra_events"] == kube_scheduler["extra_events"]


def test_a_lone_pod_preempts_among_gangs_as_kube_scheduler_does(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    kube, ours = kube_scheduler["among"], kopf_scheduler["among"]
    assert kube["held"] == {
        "whole-0": "among-a-8",
        "whole-1": "among-b-9",
        "mid": "among-a-8",
        "lone": "among-b-9",
        "solo": "among-c-10",
        "member-0": "among-c-10",
    }
    assert (kube["first"], kube["left_after_first"]) == (
        "among-b-9",
        ["member-0", "mid", "solo", "whole-0", "whole-1"],
    )
    assert (kube["second"], kube["left_after_second"]) == ("among-a-8", ["member-0", "mid", "solo"])
    assert (kube["third"], kube["left_after_third"]) == ("among-c-10", ["member-0", "mid"])
    preempted = ("Normal", "Preempted", "Preempted by pod <uid> on node among-a-8", "")
    assert preempted in kube["events"]["whole-1"]  # evicted from b for room on a
    assert {k: v for k, v in ours.items() if k != "events"} == {
        k: v for k, v in kube.items() if k != "events"
    }
    assert ours["events"] == kube["events"]


#: series whose value the run decides: each gang that is bound is scheduled in one attempt, and pod group
#: preemption acts once, for urgent (two victims)
DECIDED = (
    "scheduler_podgroup_schedule_attempts_total{profile=default-scheduler,result=scheduled}",
    "scheduler_podgroup_schedule_attempts_total{profile=default-scheduler,result=waiting_on_preemption}",
    "scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile=default-scheduler,result=scheduled}",
    "scheduler_workload_preemption_attempts_total{result=Success}",
    "scheduler_workload_preemption_victims_count{}",
    "scheduler_workload_preemption_victims_sum{}",
    "scheduler_preemption_evaluation_duration_seconds_count{preemptor=podgroup,result=Success}",
    "scheduler_preemption_execution_duration_seconds_count{preemptor=podgroup,result=success}",
)
#: series the run must produce, whose value depends on when events arrive (an unschedulable gang tried
#: again; a lone preemptor tried again while its victims are still known, which adds series of its own)
PRODUCED = (
    "scheduler_podgroup_schedule_attempts_total{profile=default-scheduler,result=unschedulable}",
    "scheduler_workload_preemption_attempts_total{result=UnschedulableAndUnresolvable}",
    "scheduler_preemption_evaluation_duration_seconds_count{preemptor=podgroup,result=UnschedulableAndUnresolvable}",
    "scheduler_preemption_evaluation_duration_seconds_count{preemptor=pod,result=Success}",
    "scheduler_preemption_execution_duration_seconds_count{preemptor=pod,result=success}",
    "scheduler_preemption_goroutines_execution_total{result=success}",
    "scheduler_preemption_attempts_total{}",
)


def test_the_workload_metrics_are_kube_schedulers(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    kube, ours = kube_scheduler["metrics"], kopf_scheduler["metrics"]
    shown = f"kube-scheduler:\n{yaml.safe_dump(kube)}\nkopf-scheduler:\n{yaml.safe_dump(ours)}"
    # the families the run fed (those with labels appear once fed), with their types and label names
    assert {family: (entry["type"], entry["labels"]) for family, entry in ours.items()} == {
        family: (entry["type"], entry["labels"]) for family, entry in kube.items()
    }, shown
    assert sorted(kube) == [
        "scheduler_podgroup_schedule_attempts_total",
        "scheduler_podgroup_scheduling_algorithm_duration_seconds",
        "scheduler_podgroup_scheduling_attempt_duration_seconds",
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_evaluation_duration_seconds",
        "scheduler_preemption_execution_duration_seconds",
        "scheduler_preemption_goroutines_execution_total",
        "scheduler_preemption_victims",
        "scheduler_workload_preemption_attempts_total",
        "scheduler_workload_preemption_victims",
    ], shown
    kube_series = {key: value for entry in kube.values() for key, value in entry["series"].items()}
    our_series = {key: value for entry in ours.values() for key, value in entry["series"].items()}
    decided = {key: kube_series.get(key) for key in DECIDED}
    # fits, urgent, extra, whole and single bound; urgent first waiting on the preemption of low-0 and low-1
    assert decided == dict(zip(DECIDED, (5.0, 1.0, 5.0, 1.0, 1.0, 2.0, 1.0, 1.0), strict=True)), shown
    assert {key: our_series.get(key) for key in DECIDED} == decided, shown
    assert all(key in kube_series and key in our_series for key in PRODUCED), shown
    # no attempt of either ended in an error
    assert not [key for key in (*kube_series, *our_series) if "result=error" in key.lower()], shown
