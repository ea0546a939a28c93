"""GangScheduling over the Workload API's PodGroups: upstream's ``gangscheduling_test.go`` (v1.37.2) cases
with the CompositePodGroup gate off, as literals, against the pod group states the cache keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kopf_scheduler.backend.cache.pod_group_states import PodGroupStates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, parse_workload_pod_group
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.gang_scheduling import PERMIT_TIMEOUT_SECONDS, GangScheduling
from kopf_scheduler.testing import make_pod


def pod(name: str = "", group: str | None = None, namespace: str = "default", node: str = "") -> PodInfo:
    builder = make_pod().name(name or "p").namespace(namespace).uid(name or "p")
    if group is not None:
        builder = builder.set("spec.schedulingGroup", {"podGroupName": group})
    if node:
        builder = builder.node(node)
    return PodInfo(builder.obj())


def pod_group(
    name: str,
    namespace: str = "default",
    min_count: int | None = None,
    workload: tuple[str, str] | None = None,
) -> WorkloadPodGroup:
    """``st.MakePodGroup()``: a gang with ``min_count``, else the basic policy."""
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if workload is not None:
        spec["workloadRef"] = {"templateName": workload[0], "workloadName": workload[1]}
    raw = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return parse_workload_pod_group(raw)


@dataclass
class Waiting:
    pod: PodInfo
    allowed_by: list[str] = field(default_factory=list)

    def allow(self, plugin: str) -> None:
        self.allowed_by.append(plugin)


@dataclass
class WaitingPods:
    pods: dict[str, Waiting] = field(default_factory=dict)

    def get(self, uid: str) -> Waiting | None:
        return self.pods.get(uid)


@dataclass
class Handle:
    """What GangScheduling reads through the framework handle: activation and the pods waiting at Permit."""

    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    activated: list[str] = field(default_factory=list)

    def activate(self, pods: Any) -> None:
        self.activated.extend(p.name for p in pods)


def plugin(groups: PodGroupStates | None = None) -> tuple[GangScheduling, Handle]:
    handle = Handle()
    return GangScheduling(handle, groups or PodGroupStates()), handle  # type: ignore[arg-type]


# -- queueing hints ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "added", "want"),
    [
        pytest.param(pod("p", "pg"), pod("", "pg"), QueueingHint.QUEUE, id="a pod of the same group"),
        pytest.param(pod("p", "pg"), pod("", "pg", node="node1"), QueueingHint.QUEUE, id="a bound pod of it"),
        pytest.param(pod("p", "pg"), pod("", "pg", "foo"), QueueingHint.SKIP, id="another namespace"),
        pytest.param(pod("p", "pg1"), pod("", "pg2"), QueueingHint.SKIP, id="another group"),
        pytest.param(pod("p"), pod("", "pg"), QueueingHint.SKIP, id="the pod has no group"),
        pytest.param(pod("p", "pg"), pod(""), QueueingHint.SKIP, id="the added pod has no group"),
    ],
)
def test_pod_added_hint(target: PodInfo, added: PodInfo, want: QueueingHint) -> None:
    pl, _ = plugin()
    hints = {
        e.event: e.hint
        for e in pl.events_to_register()
        if e.event.resource in (Resource.UNSCHEDULED_POD, Resource.ASSIGNED_POD)
    }
    assert set(hints) == {
        ClusterEvent(Resource.UNSCHEDULED_POD, Action.ADD),
        ClusterEvent(Resource.ASSIGNED_POD, Action.ADD),
    }
    for hint in hints.values():
        assert hint is not None and hint(target, None, added) is want


def _group_hint(action: Action) -> Any:
    pl, _ = plugin()
    [hint] = [
        e.hint
        for e in pl.events_to_register()
        if e.event == ClusterEvent(Resource.WORKLOAD_POD_GROUP, action)
    ]
    return hint


@pytest.mark.parametrize(
    ("target", "added", "want"),
    [
        pytest.param(
            pod("p", "pg"),
            pod_group("pg", min_count=1, workload=("t", "w")),
            QueueingHint.QUEUE,
            id="its group",
        ),
        pytest.param(pod("p", "pg1"), pod_group("pg2", min_count=1), QueueingHint.SKIP, id="another name"),
        pytest.param(
            pod("p", "pg"), pod_group("pg", "foo", min_count=1), QueueingHint.SKIP, id="another namespace"
        ),
        pytest.param(pod("p"), pod_group("pg", min_count=1), QueueingHint.SKIP, id="the pod has no group"),
    ],
)
def test_pod_group_added_hint(target: PodInfo, added: WorkloadPodGroup, want: QueueingHint) -> None:
    assert _group_hint(Action.ADD)(target, None, added) is want


@pytest.mark.parametrize(
    ("target", "old", "new", "want"),
    [
        pytest.param(
            pod("p", "pg", "ns1"),
            pod_group("pg", "ns1", 4, ("t", "w")),
            pod_group("pg", "ns1", 3, ("t", "w")),
            QueueingHint.QUEUE,
            id="minCount decreased matches target pod",
        ),
        pytest.param(
            pod("p", "pg", "ns1"),
            pod_group("pg", "ns1", workload=("t", "w")),
            pod_group("pg", "ns1"),
            QueueingHint.SKIP,
            id="update Basic policy",
        ),
        pytest.param(
            pod("p", "pg", "ns1"),
            pod_group("pg", "ns1", 3, ("t", "w")),
            pod_group("pg", "ns1", 4, ("t", "w")),
            QueueingHint.SKIP,
            id="minCount increased matches target pod",
        ),
        pytest.param(
            pod("p", "pg", "ns1"),
            pod_group("pg", "ns1", 3, ("t", "w")),
            pod_group("pg", "ns1", 3, ("t", "w")),
            QueueingHint.SKIP,
            id="minCount unchanged matches target pod",
        ),
        pytest.param(
            pod("p", "pg-other", "ns1"),
            pod_group("pg", "ns1", 4, ("t", "w")),
            pod_group("pg", "ns1", 3, ("t", "w")),
            QueueingHint.SKIP,
            id="minCount decreased but pod group name doesn't match target pod",
        ),
        pytest.param(
            pod("p", "pg", "ns-other"),
            pod_group("pg", "ns1", 4, ("t", "w")),
            pod_group("pg", "ns1", 3, ("t", "w")),
            QueueingHint.SKIP,
            id="minCount decreased but pod group namespace doesn't match target pod",
        ),
        pytest.param(
            pod("p", None, "ns1"),
            pod_group("pg", "ns1", 4, ("t", "w")),
            pod_group("pg", "ns1", 3, ("t", "w")),
            QueueingHint.SKIP,
            id="pod without a scheduling group is skipped",
        ),
    ],
)
def test_pod_group_updated_hint(
    target: PodInfo, old: WorkloadPodGroup, new: WorkloadPodGroup, want: QueueingHint
) -> None:
    assert _group_hint(Action.UPDATE)(target, old, new) is want


# -- PreEnqueue and Permit (TestGangSchedulingFlow) -------------------------------------------------------
PG1 = pod_group("pg1", "ns1", 3, ("t1", "gang-wl"))
PG2 = pod_group("pg2", "ns1", 4, ("t2", "gang-wl"))
PG3 = pod_group("pg3", "ns1", workload=("1", "basic-wl"))
P1, P2, P3 = (pod(n, "pg1", "ns1") for n in ("p1", "p2", "p3"))
P4, P5 = (pod(n, "pg2", "ns1") for n in ("p4", "p5"))
BASIC = pod("basic-pod", "pg3", "ns1")
NON_GANG = pod("non-gang", None, "ns1")


def assumed(p: PodInfo) -> PodInfo:
    return PodInfo({**p.raw, "spec": {**p.raw["spec"], "nodeName": "some-node"}})


@pytest.mark.parametrize(
    (
        "target",
        "initial_pods",
        "groups",
        "waiting_on_permit",
        "want_pre_enqueue",
        "want_permit",
        "want_activated",
        "want_allowed",
    ),
    [
        pytest.param(
            NON_GANG, [], [PG1, PG2, PG3], [], None, None, [], [], id="non-gang pod succeeds immediately"
        ),
        pytest.param(
            BASIC, [], [PG1, PG2, PG3], [], None, None, [], [], id="basic policy pod succeeds immediately"
        ),
        pytest.param(
            P1,
            [P2, P3, P4, P5],
            [],
            [],
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                ('waiting for pods\'s pod group "pg1" to appear in scheduling queue',),
            ),
            None,
            [],
            [],
            id="gang pod fails PreEnqueue when pod group is not yet created",
        ),
        pytest.param(
            P1,
            [P2, P4, P5],
            [PG1, PG2],
            [],
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                ("waiting for minCount pods from a gang to appear in scheduling queue",),
            ),
            None,
            [],
            [],
            id="gang pod fails PreEnqueue when quorum is not met",
        ),
        pytest.param(
            P1,
            [P2, P3, P4, P5],
            [PG1, PG2],
            [P2, P4, P5],
            None,
            Status(Code.WAIT, ("waiting for minCount pods from a gang to be scheduled",)),
            ["p3"],
            [],
            id="gang pod passes PreEnqueue, but waits at Permit",
        ),
        pytest.param(
            P1,
            [P2, P3, P4, P5],
            [PG1, PG2],
            [P2, P3, P4, P5],
            None,
            None,
            [],
            ["p1", "p2", "p3"],
            id="final gang pod arrives at Permit and allows all waiting pods from a gang",
        ),
    ],
)
def test_gang_scheduling_flow(
    target: PodInfo,
    initial_pods: list[PodInfo],
    groups: list[WorkloadPodGroup],
    waiting_on_permit: list[PodInfo],
    want_pre_enqueue: Status | None,
    want_permit: Status | None,
    want_activated: list[str],
    want_allowed: list[str],
) -> None:
    states = PodGroupStates()
    for group in groups:
        states.set_pod_group(group)
    for p in [*initial_pods, target]:
        states.add_pod(p)
    pl, handle = plugin(states)

    assert pl.pre_enqueue(target) == want_pre_enqueue
    if want_pre_enqueue is not None:
        return

    for p in waiting_on_permit:
        states.assume_pod(assumed(p))
        status, timeout = pl.permit(CycleState(), assumed(p), "some-node")
        assert status is not None and status.code is Code.WAIT and timeout == PERMIT_TIMEOUT_SECONDS
        handle.waiting_pods.pods[p.uid] = Waiting(assumed(p))
    handle.activated.clear()

    states.assume_pod(assumed(target))
    handle.waiting_pods.pods[target.uid] = Waiting(assumed(target))
    status, timeout = pl.permit(CycleState(), assumed(target), "some-node")
    assert status == want_permit
    assert timeout == (PERMIT_TIMEOUT_SECONDS if want_permit is not None else 0.0)
    assert handle.activated == want_activated
    allowed = sorted(uid for uid, w in handle.waiting_pods.pods.items() if w.allowed_by == ["GangScheduling"])
    assert allowed == want_allowed


def test_permit_without_the_group_state_is_an_error() -> None:
    pl, _ = plugin()
    status, timeout = pl.permit(CycleState(), assumed(P1), "some-node")
    assert status is not None and status.code is Code.ERROR and timeout == 0.0
    assert status.message() == (
        "failed to get podGroup ns1/pg1: pod group state not found for pod group podgroup/ns1/pg1"
    )


def test_permit_with_members_but_no_pod_group_is_an_error() -> None:
    states = PodGroupStates()
    states.add_pod(P1)
    pl, _ = plugin(states)
    status, _ = pl.permit(CycleState(), assumed(P1), "some-node")
    assert status is not None and status.message() == (
        "failed to get podGroup ns1/pg1: pod group object not found for pod group podgroup/ns1/pg1"
    )


# -- PlacementFeasible -------------------------------------------------------------------------------------
S, U, W = Code.SUCCESS, Code.UNSCHEDULABLE, Code.WAIT


@pytest.mark.parametrize(
    ("min_count", "children", "initially_scheduled", "pod_codes", "want"),
    [
        pytest.param(2, 2, 0, [S, S], [W, S], id="All pods succeed, minCount met at end"),
        pytest.param(3, 3, 0, [U], [U], id="First pod fails, minCount not satisfiable"),
        pytest.param(2, 2, 0, [S, U], [W, U], id="Second pod fails, minCount not satisfiable"),
        pytest.param(None, 1, 0, [U], [U], id="Non-gang pod group with 0 scheduled pods fails"),
        pytest.param(None, 1, 0, [S], [S], id="Non-gang pod group with succeeds once 1 pod is scheduled"),
        pytest.param(None, 1, 1, [U], [S], id="Non-gang pod group with 1 initially scheduled pod succeeds"),
        pytest.param(2, 3, 0, [S, S, S], [W, S, S], id="More than minCount pods, all succeed"),
        pytest.param(2, 3, 0, [U, S, S], [W, W, S], id="More than minCount pods, first fails"),
        pytest.param(2, 3, 0, [U, U], [W, U], id="More than minCount pods, minCount not satisfiable"),
        pytest.param(
            3, 2, 1, [S, S], [W, S], id="1 pod scheduled, 2 unscheduled pods succeed, minCount 3 met"
        ),
        pytest.param(2, 1, 2, [U], [S], id="minCount already met by scheduled pods"),
        pytest.param(
            3, 2, 1, [U], [U], id="1 pod scheduled, minCount 3, first unscheduled fails, not enough remaining"
        ),
        pytest.param(
            4,
            2,
            1,
            [S],
            [U],
            id="1 pod scheduled, minCount 4, first unscheduled succeeds, not enough remaining",
        ),
    ],
)
def test_placement_feasible(
    min_count: int | None, children: int, initially_scheduled: int, pod_codes: list[Code], want: list[Code]
) -> None:
    pl, _ = plugin()
    group = pod_group("test-pg", min_count=min_count)
    scheduled = initially_scheduled
    got = []
    for i, code in enumerate(pod_codes):
        scheduled += code is S
        status = pl.placement_feasible(group, scheduled, children - (i + 1))
        got.append(Code.SUCCESS if status is None else status.code)
    assert got == want


def test_placement_feasible_messages() -> None:
    pl, _ = plugin()
    group = pod_group("pg", min_count=3)
    assert pl.placement_feasible(group, 1, 1) == Status(
        Code.UNSCHEDULABLE, ("minCount (3) cannot be satisfied: 1 scheduled, 1 remaining",)
    )
    assert pl.placement_feasible(group, 1, 2) == Status(
        Code.WAIT, ("minCount (3) is not yet satisfied: 1 scheduled, 2 remaining",)
    )
