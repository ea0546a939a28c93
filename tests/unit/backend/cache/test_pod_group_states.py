"""The Workload API pod group states (upstream's ``podgroupstate.go``): which of a group's pods count as
existing, scheduled, unscheduled and assumed as pods come, are assumed, forgotten, bound and go."""

from __future__ import annotations

from kopf_scheduler.backend.cache.pod_group_states import PodGroupStates
from kopf_scheduler.framework.objects.workload_pod_groups import parse_workload_pod_group
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod


def member(name: str, group: str = "pg", node: str = "") -> PodInfo:
    builder = (
        make_pod().name(name).namespace("ns").uid(name).set("spec.schedulingGroup", {"podGroupName": group})
    )
    return PodInfo((builder.node(node) if node else builder).obj())


def on(p: PodInfo, node: str) -> PodInfo:
    return PodInfo({**p.raw, "spec": {**p.raw["spec"], "nodeName": node}})


GROUP = parse_workload_pod_group(
    {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
)


def counts(states: PodGroupStates) -> tuple[int, int, list[str], list[str]]:
    state = states.state("ns", "pg")
    assert state is not None
    return (
        state.all_pods_count(),
        state.scheduled_pods_count(),
        [p.name for p in state.unscheduled_pods()],
        sorted(state.assumed_pods()),
    )


def test_members_move_from_unscheduled_to_assumed_to_bound() -> None:
    states = PodGroupStates()
    a, b, c = member("a"), member("b"), member("c", node="n1")
    for p in (a, b, c):
        states.add_pod(p)
    assert counts(states) == (3, 1, ["a", "b"], [])
    states.assume_pod(on(a, "n2"))
    assert counts(states) == (3, 2, ["b"], ["a"])
    states.forget_pod(on(a, "n2"))
    assert counts(states) == (3, 1, ["b", "a"], [])
    states.assume_pod(on(b, "n2"))
    states.update_pod(b, on(b, "n2"))  # the binding seen
    assert counts(states) == (3, 2, ["a"], [])
    states.remove_pod(c)
    assert counts(states) == (2, 1, ["a"], [])


def test_a_pod_of_no_group_is_not_tracked() -> None:
    states = PodGroupStates()
    states.add_pod(PodInfo(make_pod().name("solo").obj()))
    assert states.state("default", "pg") is None


def test_the_state_lasts_while_a_member_or_the_pod_group_exists() -> None:
    states = PodGroupStates()
    a = member("a")
    states.set_pod_group(GROUP)
    states.add_pod(a)
    states.remove_pod_group("ns", "pg")
    assert states.pod_group("ns", "pg") is None and counts(states) == (1, 0, ["a"], [])
    states.remove_pod(a)
    assert states.state("ns", "pg") is None
    states.set_pod_group(GROUP)
    assert states.pod_group("ns", "pg") is GROUP and counts(states) == (0, 0, [], [])


def test_assuming_a_deleted_pod_changes_nothing() -> None:
    states = PodGroupStates()
    states.set_pod_group(GROUP)
    states.assume_pod(on(member("gone"), "n1"))
    assert counts(states) == (0, 0, [], [])
