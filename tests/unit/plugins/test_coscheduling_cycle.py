"""Coscheduling in the scheduling cycle: PreFilter (upstream's ``TestPreFilter``,
``TestCheckClusterResource``, ``TestPodGroupBackoffTime``), PostFilter (``TestPostFilter``,
``TestPostFilterRejectThreshold``), Permit (``TestPermit``, the wait, releasing the gang) and
Reserve/Unreserve (a failing member rejects its waiting siblings)."""

from __future__ import annotations

from typing import Any

import pytest
from _gang_kit import NS, WALL, Handle, member, plugin, pod_group, queued

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.status import WAIT, Code, Status, unresolvable, unschedulable
from kopf_scheduler.plugins.coscheduling import (
    REJECTED_IN_POST_FILTER,
    REJECTED_IN_UNRESERVE,
    format_resources,
    gang_rejected_message,
    resource_gap,
    sibling_pods_message,
)

GATE = "example-gate"


class _NoStatuses:
    def get(self, name: str) -> None:
        return None

    def items(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


# -- PreFilter -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pods", "group", "want"),
    [
        pytest.param([("p", None, False)], pod_group("pg1", 1), None, id="no pod group"),
        pytest.param([("p", "pg-non-existent", False)], pod_group("pg1", 1), None, id="non-existent pg"),
        pytest.param(
            [("p", "pg1", False)],
            pod_group("pg1", 2),
            sibling_pods_message,
            id="pod count less than minMember",
        ),
        pytest.param([("p1a", "pg1", False), ("p1b", "pg1", False)], pod_group("pg1", 2), None, id="equal"),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", False), ("p1c", "pg1", False)],
            pod_group("pg1", 2),
            None,
            id="pod count more than minMember",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", False), ("p1c", "pg1", True)],
            pod_group("pg1", 2),
            None,
            id="gated pods but still meeting quorum",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", True), ("p1c", "pg1", False)],
            pod_group("pg1", 3),
            "pre-filter pod p1a cannot proceed due to gated pods in the same PodGroup",
            id="gated pods push group below quorum",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", True), ("p1c", "pg1", True)],
            pod_group("pg1", 2),
            "pre-filter pod p1a cannot proceed due to gated pods in the same PodGroup",
            id="all sibling pods are gated",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", False), ("p1c", "pg1", False)],
            pod_group("pg1", 2, min_resources={"cpu": "6"}),
            None,
            id="cluster's resources satisfy minResources",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", False), ("p1c", "pg1", False)],
            pod_group("pg1", 2, min_resources={"cpu": "10"}),
            "resource gap: map[cpu:2]",
            id="cluster's resources cannot satisfy minResources",
        ),
        pytest.param(
            [("p1a", "pg1", False), ("p1b", "pg1", False)],
            pod_group("pg1", 2, min_resources={"cpu": "1", "nvidia.com/gpu": "2", "memory": "1Gi"}),
            "resource gap: map[nvidia.com/gpu:2]",
            id="a resource no node has",
        ),
    ],
)
def test_pre_filter(pods: list[tuple[str, str | None, bool]], group: dict[str, Any], want: Any) -> None:
    handle = Handle().groups(group)
    handle.node("node-a", cpu=4, memory="8Gi", pods=110)
    handle.node("node-b", cpu=4, memory="8Gi", pods=110)
    builders = [member(n, g).gate(GATE) if gated else member(n, g) for n, g, gated in pods]
    infos = handle.pods(*(b.obj() for b in builders))
    result, status = plugin(handle).pre_filter(CycleState(), infos[0], handle.nodes.node_infos)
    assert result is None
    if want is None:
        assert status is None
    elif callable(want):
        assert status == unresolvable(want(infos[0], len(pods), 2))
    else:
        assert status == unresolvable(want)


@pytest.mark.parametrize(
    ("existing", "min_resources", "want"),
    [
        pytest.param([("p1", None, "node-a", "2")], {"cpu": 4000}, {}, id="cluster resource enough"),
        pytest.param(
            [("p1", None, "node-a", "2"), ("p2", None, "node-b", "1")],
            {"cpu": 4000},
            {"cpu": 1000},
            id="cluster resource not enough",
        ),
        pytest.param(
            [("p1", "pg1", "node-a", "2"), ("p2", None, "node-b", "1")],
            {"cpu": 4000},
            {},
            id="the gang's own pods are taken off the nodes",
        ),
        pytest.param([], {"pods": 221}, {"pods": 1}, id="pod slots count"),
    ],
)
def test_resource_gap(
    existing: list[tuple[str, str | None, str, str]], min_resources: dict[str, int], want: dict[str, int]
) -> None:
    handle = Handle()
    for node in ("node-a", "node-b"):
        handle.node(
            node, *(member(n, g).node(node).req(cpu=c).obj() for n, g, at, c in existing if at == node),
            cpu=3, pods=110,
        )  # fmt: skip
    assert resource_gap(handle.nodes.node_infos, min_resources, f"{NS}/pg1") == want


def test_resource_gap_prints_quantities_as_go_prints_a_resource_map() -> None:
    assert format_resources({"pods": 2, "cpu": 1500, "memory": 2 * 2**30}) == (
        "map[cpu:1500m memory:2147483648 pods:2]"
    )


async def test_a_gang_backing_off_is_refused_until_the_backoff_is_over() -> None:
    handle = Handle().groups(pod_group("pg1", 3))
    p1, p2, p3 = handle.pods(*(member(f"pod{i}", "pg1").obj() for i in (1, 2, 3)))
    pl = plugin(handle, pod_group_backoff_seconds=1)
    status, _ = pl.permit(CycleState(), p1, "n")
    assert status == WAIT
    pl.post_filter(CycleState(), p2, _NoStatuses())
    assert pl.pre_filter(CycleState(), p3, [])[1] == unresolvable(f"podGroup {NS}/pg1 failed recently")
    handle.clock.advance(1.0)
    assert pl.pre_filter(CycleState(), p3, [])[1] is None


def test_minresources_that_fit_are_not_checked_again_for_a_while() -> None:
    handle = Handle().groups(pod_group("pg1", 1, min_resources={"cpu": "3"}))
    handle.node("n", cpu=4, pods=110)
    (pod,) = handle.pods(member("p", "pg1").obj())
    pl = plugin(handle, permit_waiting_time_seconds=10)
    assert pl.pre_filter(CycleState(), pod, [])[1] is None
    handle.nodes.node_infos.clear()  # the cluster shrank: the gang passed lately, so it still passes
    assert pl.pre_filter(CycleState(), pod, [])[1] is None
    handle.clock.advance(10.0)
    assert pl.pre_filter(CycleState(), pod, [])[1] == unresolvable("resource gap: map[cpu:3 pods:1]")


# -- PostFilter ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("group", "assigned", "percentage", "want"),
    [
        pytest.param(None, 0, 10, unschedulable("can not find pod group"), id="no pod group"),
        pytest.param(2, 2, 10, Status(Code.UNSCHEDULABLE), id="enough assigned: keep the gang"),
        pytest.param(3, 1, 10, "reject", id="a member fits nowhere: reject the gang"),
        pytest.param(10, 9, 10, Status(Code.UNSCHEDULABLE), id="10%: 9/10 assigned, no rejection"),
        pytest.param(10, 8, 10, "reject", id="10%: 8/10 assigned, rejection"),
        pytest.param(10, 9, 0, "reject", id="0%: always reject"),
        pytest.param(10, 0, 100, Status(Code.UNSCHEDULABLE), id="100%: never reject"),
        pytest.param(10, 6, 50, Status(Code.UNSCHEDULABLE), id="50%: 6/10 assigned, no rejection"),
        pytest.param(10, 4, 50, "reject", id="50%: 4/10 assigned, rejection"),
    ],
)
async def test_post_filter(group: int | None, assigned: int, percentage: int, want: Any) -> None:
    handle = Handle().groups(pod_group("pg", group or 1))
    name = "pg" if group is not None else "other"
    placed = [member(f"a{i}", name).node("n").obj() for i in range(assigned)]
    failing, waiting_pod = handle.pods(member("p", name).obj(), member("w", name).obj())[:2]
    handle.pods(*placed)
    waiting = handle.wait(waiting_pod)
    pl = plugin(handle, pod_group_reject_percentage=percentage)
    result, status = pl.post_filter(CycleState(), failing, _NoStatuses())
    assert result is None
    if want == "reject":
        assert status == unschedulable(gang_rejected_message(f"{NS}/pg", failing))
        assert await waiting.wait() == unschedulable(REJECTED_IN_POST_FILTER, plugin="Coscheduling")
        assert pl.sort_key(queued(failing))[1] == WALL  # behind younger gangs from now on
    else:
        assert status == want
        assert waiting.pending_plugins() == ["Coscheduling"]


# -- Permit --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "group", "want"),
    [
        pytest.param(None, pod_group("pg1", 3), (None, 0.0), id="no pod group"),
        pytest.param(
            "pg-missing", pod_group("pg1", 3), (unschedulable("PodGroup not found"), 0.0), id="not found"
        ),
        pytest.param("pg1", pod_group("pg1", 3), (WAIT, 60.0), id="quorum not satisfied"),
        pytest.param("pg1", pod_group("pg1", 3, timeout=5), (WAIT, 5.0), id="the PodGroup's timeout"),
        pytest.param("pg1", pod_group("pg1", 1), (None, 0.0), id="quorum satisfied"),
    ],
)
def test_permit(label: str | None, group: dict[str, Any], want: tuple[Status | None, float]) -> None:
    handle = Handle().groups(group)
    pods = handle.pods(*(member(f"p{i}", label).obj() for i in range(3)))
    assert plugin(handle).permit(CycleState(), pods[0], "n") == want


def test_permit_wait_defaults_when_the_arguments_say_zero() -> None:
    handle = Handle().groups(pod_group("pg1", 2), pod_group("pg0", 2, timeout=0))
    one, zero = handle.pods(member("p", "pg1").obj(), member("q", "pg0").obj())
    handle.pods(member("p2", "pg1").obj(), member("q2", "pg0").obj())
    pl = plugin(handle, permit_waiting_time_seconds=0)
    assert pl.permit(CycleState(), one, "n") == (WAIT, 60.0)
    assert plugin(handle, permit_waiting_time_seconds=7).permit(CycleState(), zero, "n") == (WAIT, 7.0)


async def test_the_member_completing_the_gang_releases_every_waiting_member() -> None:
    handle = Handle().groups(pod_group("pg1", 3), pod_group("pg2", 2))
    p1, p2, p3, other = handle.pods(
        *(member(f"p{i}", "pg1").obj() for i in (1, 2, 3)), member("o", "pg2").obj()
    )
    pl = plugin(handle)
    assert pl.permit(CycleState(), p1, "n")[0] == WAIT
    assert pl.permit(CycleState(), p2, "n")[0] == WAIT
    assert pl.permit(CycleState(), other, "n")[0] == WAIT
    w1, w2, wo = handle.wait(p1), handle.wait(p2), handle.wait(other)
    assert pl.permit(CycleState(), p3, "n") == (None, 0.0)
    assert await w1.wait() is None and await w2.wait() is None
    assert wo.pending_plugins() == ["Coscheduling"]  # another gang waits on


def test_bound_members_count_toward_the_gang() -> None:
    handle = Handle().groups(pod_group("pg1", 3))
    handle.pods(member("b1", "pg1").node("n").obj(), member("b2", "pg1").node("n").obj())
    (late,) = handle.pods(member("late", "pg1").obj())
    assert plugin(handle).permit(CycleState(), late, "n") == (None, 0.0)


def test_the_first_member_to_wait_moves_back_the_siblings_the_plugin_sent_away() -> None:
    handle = Handle().groups(pod_group("pg1", 3))
    p1, p2, p3 = handle.pods(*(member(f"p{i}", "pg1").obj() for i in (1, 2, 3)))
    pl = plugin(handle)
    pl.permit(CycleState(), p1, "n")
    pl.unreserve(CycleState(), p1, "n")  # p1 is sent back (a timeout, a failed bind)
    pl.pre_filter(CycleState(), p2, [])  # passes: not sent away
    assert pl.permit(CycleState(), p3, "n")[0] == WAIT
    assert handle.activated == ["p1"]
    assert pl.permit(CycleState(), p2, "n") == (WAIT, 60.0)  # not the first: nothing more to move
    assert handle.activated == ["p1"]


# -- Reserve / Unreserve -------------------------------------------------------------------------------
async def test_unreserve_rejects_every_waiting_sibling_and_forgets_the_member() -> None:
    handle = Handle().groups(pod_group("pg1", 4), pod_group("pg2", 2))
    p1, p2, p3, other = handle.pods(
        *(member(f"p{i}", "pg1").obj() for i in (1, 2, 3)), member("o", "pg2").obj()
    )
    handle.pods(member("p4", "pg1").obj())
    pl = plugin(handle)
    for pod in (p1, p2, p3, other):
        assert pl.reserve(CycleState(), pod, "n") is None
        assert pl.permit(CycleState(), pod, "n")[0] == WAIT
    w2, w3, wo = handle.wait(p2), handle.wait(p3), handle.wait(other)
    pl.unreserve(CycleState(), p1, "n")  # p1 timed out
    assert await w2.wait() == unschedulable(REJECTED_IN_UNRESERVE, plugin="Coscheduling")
    assert await w3.wait() == unschedulable(REJECTED_IN_UNRESERVE, plugin="Coscheduling")
    assert wo.pending_plugins() == ["Coscheduling"]
    assert pl.groups.assigned_count(f"{NS}/pg1", NS, "pg1") == 2  # p2 and p3 are unreserved in turn
    pl.unreserve(CycleState(), p1, "n")  # idempotent
    pl.unreserve(CycleState(), handle.pods(member("x", None).obj())[0], "n")  # no gang: nothing


def test_a_deleted_member_no_longer_counts_as_placed() -> None:
    handle = Handle().groups(pod_group("pg1", 2))
    p1, p2 = handle.pods(member("p1", "pg1").obj(), member("p2", "pg1").obj())
    pl = plugin(handle)
    assert pl.permit(CycleState(), p1, "n")[0] == WAIT
    handle.group_members.remove(p1.uid)
    handle.pods(member("p3", "pg1").obj())
    assert pl.permit(CycleState(), p2, "n")[0] == WAIT
