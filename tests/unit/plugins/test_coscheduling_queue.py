"""Coscheduling in the queue: QueueSort (upstream's ``TestLess`` and ``TestLessAfterScheduleFailure``),
PreEnqueue (a member waits until minMember pods exist), the events and hints that requeue its pods, and
its arguments."""

from __future__ import annotations

import pytest
from _gang_kit import NS, WALL, Handle, member, plugin, pod_group, queued

from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.events import Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.objects.podgroups import parse_pod_group
from kopf_scheduler.framework.status import unresolvable
from kopf_scheduler.plugins.coscheduling import Args, sibling_pods_message

LOW, HIGH = 10, 100
T1, T2 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"


# -- QueueSort -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p1", "p2", "groups", "want"),
    [
        pytest.param(("p1", None, LOW, T1), ("p2", None, HIGH, T1), [], False, id="p1 lower priority"),
        pytest.param(("p1", None, HIGH, T1), ("p2", None, LOW, T1), [], True, id="p1 higher priority"),
        pytest.param(("p1", None, HIGH, T1), ("p2", None, HIGH, T2), [], True, id="equal priority, p1 older"),
        pytest.param(
            ("p1", None, HIGH, T2), ("p2", None, HIGH, T1), [], False, id="equal priority, p2 older"
        ),
        pytest.param(
            ("p1", "pg1", LOW, T1),
            ("p2", None, HIGH, T1),
            [("pg1", T1)],
            False,
            id="p1 of pg1, lower priority",
        ),
        pytest.param(
            ("p1", "pg1", HIGH, T1),
            ("p2", None, LOW, T1),
            [("pg1", T1)],
            True,
            id="p1 of pg1, higher priority",
        ),
        pytest.param(
            ("p1", "pg1", HIGH, T2), ("p2", None, HIGH, T2), [("pg1", T1)], True, id="pg1 older than p2"
        ),
        pytest.param(
            ("p1", "pg1", HIGH, T1), ("p2", None, HIGH, T1), [("pg1", T2)], False, id="pg1 younger than p2"
        ),
        pytest.param(
            ("p1", "pg1", HIGH, T1), ("p2", "pg2", HIGH, T1), [("pg1", T1), ("pg2", T2)], True, id="pg1 older"
        ),
        pytest.param(
            ("p1", "pg2", HIGH, T1),
            ("p2", "pg1", HIGH, T1),
            [("pg1", T1), ("pg2", T2)],
            False,
            id="pg2 younger",
        ),
        pytest.param(
            ("p2", "pg1", HIGH, T1),
            ("p1", "pg2", HIGH, T1),
            [("pg1", T1), ("pg2", T1)],
            True,
            id="tie: gang key",
        ),
        pytest.param(
            ("z", "pg1", HIGH, T1), ("a", "pg1", HIGH, T1), [("pg1", T1)], False, id="one gang: pod key"
        ),
    ],
)
def test_less(
    p1: tuple[str, str | None, int, str],
    p2: tuple[str, str | None, int, str],
    groups: list[tuple[str, str]],
    want: bool,
) -> None:
    handle = Handle().groups(*(pod_group(name, created=at) for name, at in groups))
    pl = plugin(handle)
    first, second = (
        queued(handle.pods(member(name, group).priority(prio).created(at).obj())[0])
        for name, group, prio, at in (p1, p2)
    )
    assert pl.less(first, second) is want
    assert (pl.sort_key(first) < pl.sort_key(second)) is want


def test_a_gangs_members_stay_together_between_pods_created_in_the_same_second() -> None:
    handle = Handle().groups(pod_group("a", created=T1), pod_group("b", created=T1))
    pods = [
        member(n, g).created(T1).obj() for n, g in [("b-0", "b"), ("a-1", "a"), ("a-9", "a"), ("b-5", "b")]
    ]
    pl = plugin(handle)
    order = sorted((queued(p) for p in handle.pods(*pods)), key=pl.sort_key)
    assert [q.pod.name for q in order] == ["a-1", "a-9", "b-0", "b-5"]


def test_a_gang_that_failed_goes_behind_younger_gangs_until_it_is_permitted() -> None:
    handle = Handle().groups(pod_group("pg1", 1, created=T1), pod_group("pg2", 1, created=T2))
    p1, p2 = handle.pods(member("p1", "pg1").obj(), member("p2", "pg2").obj())
    pl = plugin(handle)
    assert pl.less(queued(p1), queued(p2))
    pl.groups.mark_failure(f"{NS}/pg1")
    assert not pl.less(queued(p1), queued(p2)) and pl.less(queued(p2), queued(p1))
    assert pl.sort_key(queued(p1))[1] == WALL
    pl.groups.clear_failure(f"{NS}/pg1")
    assert pl.less(queued(p1), queued(p2))


# -- PreEnqueue ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pods", "group", "want"),
    [
        pytest.param(["p"], None, None, id="no pod group label"),
        pytest.param(["p"], ("missing", 0), None, id="PodGroup unknown: Permit decides"),
        pytest.param(["p", "q"], ("pg", 3), sibling_pods_message, id="fewer pods than minMember"),
        pytest.param(["p", "q", "r"], ("pg", 3), None, id="minMember pods exist"),
        pytest.param(["p", "q", "r", "s"], ("pg", 3), None, id="more pods than minMember"),
    ],
)
def test_pre_enqueue(pods: list[str], group: tuple[str, int] | None, want: object) -> None:
    handle = Handle().groups(pod_group("pg", 3))
    label = group[0] if group else None
    infos = handle.pods(*(member(name, label).obj() for name in pods))
    status = plugin(handle).pre_enqueue(infos[0])
    if want is None:
        assert status is None
    else:
        assert status == unresolvable(sibling_pods_message(infos[0], len(pods), 3))


def test_finished_pods_do_not_count_toward_the_quorum() -> None:
    handle = Handle().groups(pod_group("pg", 2))
    done = member("done", "pg").node("n").set("status.phase", "Succeeded").obj()
    infos = handle.pods(member("p", "pg").obj(), done)
    assert plugin(handle).pre_enqueue(infos[0]) == unresolvable(sibling_pods_message(infos[0], 1, 2))


# -- requeueing ----------------------------------------------------------------------------------------
def test_events_to_register() -> None:
    events = [item.event for item in plugin(Handle()).events_to_register()]
    assert events == [
        ClusterEvent(Resource.POD, Action.ADD),
        ClusterEvent(Resource.POD_GROUP, Action.ADD | Action.UPDATE),
        ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE),
    ]


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param(("q", "pg", NS), QueueingHint.QUEUE, id="a member of the same gang"),
        pytest.param(("q", "other", NS), QueueingHint.SKIP, id="a member of another gang"),
        pytest.param(("q", "pg", "ns2"), QueueingHint.SKIP, id="same group name, other namespace"),
        pytest.param(("q", None, NS), QueueingHint.SKIP, id="a pod of no gang"),
    ],
)
def test_pod_add_hint(new: tuple[str, str | None, str], want: QueueingHint) -> None:
    handle = Handle()
    waiting, added = handle.pods(member("p", "pg").obj(), member(new[0], new[1], new[2]).obj())
    hints = plugin(handle).events_to_register()
    assert hints[0].hint is not None and hints[0].hint(waiting, None, added) is want


@pytest.mark.parametrize(
    ("group", "want"),
    [
        pytest.param(pod_group("pg", 2), QueueingHint.QUEUE, id="its own PodGroup"),
        pytest.param(pod_group("other", 2), QueueingHint.SKIP, id="another PodGroup"),
        pytest.param(pod_group("pg", 2, namespace="ns2"), QueueingHint.SKIP, id="same name, other namespace"),
    ],
)
def test_pod_group_hint(group: dict[str, object], want: QueueingHint) -> None:
    handle = Handle()
    (pod,) = handle.pods(member("p", "pg").obj())
    hint = plugin(handle).events_to_register()[1].hint
    assert hint is not None and hint(pod, None, parse_pod_group(group)) is want


@pytest.mark.parametrize(
    ("waiting", "deleted", "want"),
    [
        pytest.param(
            ("p", "pg"), ("q", "node-1"), QueueingHint.QUEUE, id="a bound pod freed room for a gang"
        ),
        pytest.param(("p", "pg"), ("q", None), QueueingHint.SKIP, id="a pod that held no room"),
        pytest.param(("p", None), ("q", "node-1"), QueueingHint.SKIP, id="a pod of no gang waits for others"),
    ],
)
def test_assigned_pod_delete_hint(
    waiting: tuple[str, str | None], deleted: tuple[str, str | None], want: QueueingHint
) -> None:
    handle = Handle()
    gone = member(deleted[0], None).obj()
    if deleted[1]:
        gone["spec"]["nodeName"] = deleted[1]
    pending, old = handle.pods(member(waiting[0], waiting[1]).obj(), gone)
    hint = plugin(handle).events_to_register()[2].hint
    assert hint is not None and hint(pending, old, None) is want


# -- arguments -----------------------------------------------------------------------------------------
def test_args_defaults_are_upstreams() -> None:
    args = decode_args(Args, {})
    assert (args.permit_waiting_time_seconds, args.pod_group_backoff_seconds) == (60, 0)
    assert args.pod_group_reject_percentage == 10


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"permitWaitingTimeSeconds": -1}, "permitWaitingTimeSeconds: -1: must be greater than 0"),
        ({"podGroupBackoffSeconds": -5}, "podGroupBackoffSeconds: -5: must be greater than 0"),
        ({"podGroupRejectPercentage": 101}, "podGroupRejectPercentage: 101: must be between 0 and 100"),
        ({"kubeConfigPath": "/x"}, "kubeConfigPath: unknown field"),
    ],
)
def test_args_validation_names_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        decode_args(Args, raw).validate()
    assert str(caught.value).startswith(message)
