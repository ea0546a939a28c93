"""A lone pod's preemption with GenericWorkload on, as kube-scheduler v1.37.2 chooses its victims
(``GetVictimsOnNode``, ``MoreImportantVictim``): a pod naming a PodGroup is preempted at the group's
priority and offered back before a lone pod of the same priority, however long that one has run; of two
PodGroups preempted whole, the larger is offered back first; a PodGroup with ``disruptionMode: all`` goes
whole, with its pods on other nodes, and counts all of them when the node is chosen. With the gate off
the same pods are victims one by one, at their own priority, the longer running offered back first."""

from __future__ import annotations

from typing import Any

import pytest
from _preemption_kit import NOW, Harness, node
from workload_gangs import pod_group_object

from kopf_scheduler.framework.objects import WORKLOAD_POD_GROUPS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.default_preemption import MESSAGE_PREFIX, NO_VICTIMS, NOT_ELIGIBLE_TERMINATING
from kopf_scheduler.plugins.default_preemption.victims import node_info_missing, select_victims_on_node
from kopf_scheduler.testing import make_pod

NS = "ml"
EARLY = "2026-01-01T00:00:00Z"
LATE = "2026-01-01T01:00:00Z"
ON = {"GenericWorkload": True}
OFF = {"GenericWorkload": False}


def pod_group(name: str, priority: int = 0, whole: bool = False) -> tuple[Any, dict[str, Any]]:
    return WORKLOAD_POD_GROUPS, pod_group_object(name, NS, 1, priority, whole)


def bound(
    name: str, node_name: str, priority: int = 0, group: str | None = None, started: str = EARLY
) -> dict[str, Any]:
    builder = make_pod().name(name).namespace(NS).uid(name).priority(priority).req(cpu="1")
    builder = builder.node(node_name).set("status.startTime", started)
    if group is not None:
        builder = builder.set("spec.schedulingGroup", {"podGroupName": group})
    return builder.obj()


def preemptor(cpu: str = "1", priority: int = 1000, nominated: str = "") -> PodInfo:
    builder = make_pod().name("p").namespace(NS).uid("p").priority(priority).req(cpu=cpu)
    if nominated:
        builder = builder.nominated(nominated)
    return PodInfo(builder.obj())


def victims_on(
    harness: Harness, incoming: PodInfo, node_name: str = "a"
) -> tuple[list[str], int, Status | None]:
    state = harness.pre_filtered(incoming)
    info = harness.sched.snapshot.get(node_name)
    assert info is not None
    got, count, status = select_victims_on_node(
        harness.framework,
        state,
        incoming,
        info.clone(),
        harness.framework.pdbs(),
        NOW,
        harness.plugin.generic_workload,
    )
    return [p.name for p in got], count, status


@pytest.mark.parametrize(
    ("gates", "victims"),
    [
        pytest.param(ON, ["lone"], id="on-the-gang-member-is-kept"),
        pytest.param(OFF, ["member"], id="off-the-longer-running-pod-is-kept"),
    ],
)
def test_a_gang_member_is_offered_back_before_a_lone_pod_of_its_priority(
    gates: dict[str, bool], victims: list[str]
) -> None:
    pods = [bound("lone", "a", started=EARLY), bound("member", "a", group="train", started=LATE)]
    harness = Harness([node("a", cpu="2")], pods, gates=gates, objects=[pod_group("train")])
    assert victims_on(harness, preemptor()) == (victims, 0, None)


@pytest.mark.parametrize(
    ("gates", "pod_priority", "group_priority", "expected"),
    [
        pytest.param(ON, 0, 2000, ([], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))),
                     id="on-its-group-outranks-the-preemptor"),
        pytest.param(OFF, 0, 2000, (["member"], 0, None), id="off-its-own-priority"),
        pytest.param(ON, 5000, 0, (["member"], 0, None), id="on-its-group-is-below-the-preemptor"),
    ],
)  # fmt: skip
def test_a_gang_member_is_preempted_at_its_pod_groups_priority(
    gates: dict[str, bool],
    pod_priority: int,
    group_priority: int,
    expected: tuple[list[str], int, Status | None],
) -> None:
    pods = [bound("member", "a", priority=pod_priority, group="train")]
    objects = [pod_group("train", priority=group_priority)]
    harness = Harness([node("a", cpu="1")], pods, gates=gates, objects=objects)
    got = victims_on(harness, preemptor())
    assert (got[0], got[1], got[2] and (got[2].code, got[2].reasons)) == (
        expected[0],
        expected[1],
        expected[2] and (expected[2].code, expected[2].reasons),
    )


def test_a_pod_group_preempted_whole_goes_with_its_pods_on_other_nodes() -> None:
    """The group's pod on ``b`` is a victim of room made on ``a``, and a lone pod of higher priority stays.
    The pod on ``a`` comes first (the last victim is preempted after the others), though ``b``'s was bound
    first."""
    pods = [
        bound("whole-1", "b", group="whole"),
        bound("whole-0", "a", group="whole"),
        bound("mid", "a", priority=500),
    ]
    objects = [pod_group("whole", whole=True)]
    harness = Harness([node("a", cpu="2"), node("b", cpu="2")], pods, gates=ON, objects=objects)
    assert victims_on(harness, preemptor()) == (["whole-0", "whole-1"], 0, None)


def test_of_two_groups_preempted_whole_the_larger_is_offered_back_first() -> None:
    """Size before start time: the smaller group ran longer, and still goes."""
    pods = [
        bound("big-0", "a", group="big", started=LATE),
        bound("big-1", "b", group="big", started=LATE),
        bound("small-0", "a", group="small", started=EARLY),
    ]
    objects = [pod_group("big", whole=True), pod_group("small", whole=True)]
    harness = Harness([node("a", cpu="2"), node("b", cpu="2")], pods, gates=ON, objects=objects)
    assert victims_on(harness, preemptor()) == (["small-0"], 0, None)


def test_a_whole_group_on_a_node_the_snapshot_lacks_is_an_error() -> None:
    """The group's state lists a pod bound to a node the scheduler has not seen."""
    pods = [bound("whole-0", "a", group="whole"), bound("whole-1", "gone", group="whole")]
    harness = Harness([node("a", cpu="1")], pods, gates=ON, objects=[pod_group("whole", whole=True)])
    _, _, status = victims_on(harness, preemptor())
    assert status is not None and (status.code, status.message()) == (Code.ERROR, node_info_missing("gone"))


def test_the_node_is_chosen_counting_every_pod_of_a_group_preempted_whole() -> None:
    """On ``a`` the group (two pods) must go; on ``b`` the lone pod of the same priority goes and the
    group's pod there is kept: ``b`` costs fewer victims and is nominated."""
    pods = [
        bound("whole-0", "a", group="whole"),
        bound("mid", "a", priority=500),
        bound("whole-1", "b", group="whole"),
        bound("lone", "b"),
    ]
    objects = [pod_group("whole", whole=True)]
    harness = Harness([node("a", cpu="2"), node("b", cpu="2")], pods, gates=ON, objects=objects)
    result, status = harness.post_filter(preemptor())
    assert result is not None and status is not None
    assert (result.nominated_node_name, [v.name for v in result.victims]) == ("b", ["lone"])
    assert (
        status.message()
        == f"{MESSAGE_PREFIX}found a potential placement for pod on node b, preempting 1 victims"
    )
    assert {c.name: [v.name for v in c.victims] for c in harness.plugin.evaluator.last_candidates} == {
        "a": ["whole-0", "whole-1"],
        "b": ["lone"],
    }


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        pytest.param(ON, (True, ""), id="on-the-terminating-member-outranks-the-preemptor"),
        pytest.param(OFF, (False, NOT_ELIGIBLE_TERMINATING), id="off-its-own-priority-is-lower"),
    ],
)
def test_a_terminating_gang_member_counts_at_its_groups_priority_for_eligibility(
    gates: dict[str, bool], expected: tuple[bool, str]
) -> None:
    member = bound("member", "a", group="train")
    member["metadata"]["deletionTimestamp"] = EARLY
    member["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    objects = [pod_group("train", priority=2000)]
    harness = Harness([node("a", cpu="2")], [member], gates=gates, objects=objects)
    assert harness.plugin.pod_eligible_to_preempt_others(preemptor(nominated="a"), "a", None) == expected
