"""PodGroups as the scheduler reads them, and the index of their member pods."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.backend.objects.members import GroupMembersIndex
from kopf_scheduler.framework.objects import POD_GROUPS, WATCHED_KINDS, ObjectParseError
from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL, is_finished, parse_pod_group
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod


def _raw(spec: Any = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns", **meta},
        "spec": spec if spec is not None else {},
    }


def test_pod_groups_are_a_watched_kind_of_the_scheduler_plugins_api() -> None:
    assert POD_GROUPS in WATCHED_KINDS
    assert POD_GROUPS.list_path == "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
    assert (
        POD_GROUPS.object_path("ns", "pg") == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/pg"
    )


def test_a_pod_group_is_parsed_field_for_field() -> None:
    raw = _raw(
        {"minMember": 3, "minResources": {"cpu": "1500m", "memory": "1Gi"}, "scheduleTimeoutSeconds": 30},
        creationTimestamp="2026-01-01T00:00:00Z",
        uid="u1",
    )
    raw["status"] = {"phase": "Scheduling", "running": 1, "scheduleStartTime": "2026-01-01T00:00:05Z"}
    group = parse_pod_group(raw)
    assert (group.namespace, group.name, group.uid, group.key) == ("ns", "pg", "u1", "ns/pg")
    assert group.min_member == 3
    assert group.min_resources == {"cpu": 1500, "memory": 2**30}
    assert group.schedule_timeout_seconds == 30
    assert group.creation == 1767225600.0
    assert group.phase == "Scheduling" and group.status["running"] == 1


def test_absent_fields_read_as_upstreams_go_struct_does() -> None:
    group = parse_pod_group(_raw())
    assert (group.min_member, group.min_resources, group.schedule_timeout_seconds) == (0, None, None)
    assert (group.creation, group.phase) == (0.0, "")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minMember": "3"}, "spec.minMember: must be a 32-bit integer, not '3'"),
        ({"minMember": -1}, "spec.minMember: must be at least 0, not -1"),
        ({"minMember": 2**31}, "spec.minMember: must be a 32-bit integer, not 2147483648"),
        ({"minResources": {"cpu": "lots"}}, "spec.minResources.cpu: invalid quantity 'lots'"),
        ({"minResources": ["cpu"]}, "spec.minResources: must be a map of resource names to quantities"),
        (
            {"minResources": {"memory": ["1Gi"]}},
            "spec.minResources.memory: must be a quantity (a string or a number), not a list",
        ),
        ({"scheduleTimeoutSeconds": 1.5}, "spec.scheduleTimeoutSeconds: must be a 32-bit integer, not 1.5"),
        ("big", "spec: must be an object"),
    ],
)
def test_a_bad_field_is_named(spec: Any, message: str) -> None:
    with pytest.raises(ObjectParseError) as caught:
        parse_pod_group(_raw(spec))
    assert str(caught.value) == message


def _pod(name: str, group: str | None, namespace: str = "ns") -> PodInfo:
    builder = make_pod().name(name).namespace(namespace).uid(name)
    return PodInfo((builder.label(POD_GROUP_LABEL, group) if group else builder).obj())


def test_members_are_indexed_by_namespace_and_group() -> None:
    index = GroupMembersIndex()
    changed: list[tuple[str, str]] = []
    index.on_change = changed.append
    for pod in (_pod("a", "pg"), _pod("b", "pg"), _pod("c", "pg", "other"), _pod("d", None)):
        index.update(pod)
    assert [p.name for p in index.members("ns", "pg")] == ["a", "b"]
    assert [p.name for p in index.members("other", "pg")] == ["c"]
    assert index.members("ns", "none") == ()
    assert changed == [("ns", "pg"), ("ns", "pg"), ("other", "pg")]
    assert sorted(index.groups()) == [("ns", "pg"), ("other", "pg")]


def test_a_relabelled_pod_moves_and_a_deleted_one_leaves() -> None:
    index = GroupMembersIndex()
    index.update(_pod("a", "pg"))
    listed = index.members("ns", "pg")
    assert index.members("ns", "pg") is listed  # cached until the group changes
    index.update(_pod("a", "pg2"))
    assert index.members("ns", "pg") == () and [p.name for p in index.members("ns", "pg2")] == ["a"]
    index.update(_pod("a", None))
    assert index.members("ns", "pg2") == () and len(index) == 0
    index.update(_pod("b", "pg"))
    assert index.remove("b") == ("ns", "pg") and index.remove("b") is None
    assert index.groups() == []


def test_finished_pods_are_members_the_plugin_does_not_count() -> None:
    done = PodInfo(make_pod().name("x").node("n").set("status.phase", "Failed").obj())
    assert is_finished(done)
    assert not is_finished(_pod("a", "pg"))


def test_groups_come_and_go_without_leaving_anything_behind() -> None:
    """A churn of gangs, each group named once, asked for while it has pods and after it is gone (as the
    PodGroup status keeper and Coscheduling ask): the index ends holding nothing."""
    index = GroupMembersIndex()
    for i in range(100):
        pods = [_pod(f"g{i}-{m}", f"group-{i}") for m in range(4)]
        for pod in pods:
            index.update(pod)
        assert len(index.members("ns", f"group-{i}")) == 4
        for pod in pods:
            index.remove(pod.uid)
        assert index.members("ns", f"group-{i}") == ()
        assert index.members("ns", f"never-{i}") == ()
    assert len(index) == 0 and index.groups() == []
    assert not index._listed  # no member tuple kept for a group that is gone
