"""The scheduler cache: assumed pods and their end (confirmed, forgotten; the overdue ones listed), node
removal with pods left, and incremental snapshots."""

from typing import Any

import pytest

from kopf_scheduler.backend.cache import Cache, CacheError, Snapshot
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import VirtualClock, make_node, make_pod


def _node(name: str, **labels: str) -> dict[str, Any]:
    builder = make_node().name(name).capacity(cpu="4", memory="8Gi", pods=10)
    for key, value in labels.items():
        builder.label(key, value)
    return builder.obj()


def _pod(name: str = "p", node: str = "", cpu: str = "500m", uid: str = "") -> PodInfo:
    builder = make_pod().name(name).uid(uid or f"uid-{name}").req(cpu=cpu)
    if node:
        builder.node(node)
    return PodInfo(builder.obj())


def _cache(*nodes: str, ttl: float = 0.0) -> Cache:
    cache = Cache(VirtualClock(), assumed_ttl=ttl)
    for name in nodes:
        cache.add_node(_node(name))
    return cache


def _cpu(cache: Cache, node: str) -> int:
    info = cache.node_info(node)
    assert info is not None
    return info.requested.get("cpu", 0)


# -- assume and its endings -----------------------------------------------------------------------------
def test_assume_counts_on_the_node() -> None:
    cache = _cache("n1", "n2")
    cache.assume_pod(_pod(node="n1"))
    assert _cpu(cache, "n1") == 500
    assert len(cache.node_info("n1").pods) == 1  # type: ignore[union-attr]
    assert _cpu(cache, "n2") == 0
    assert cache.is_assumed("uid-p")
    assert (cache.pod_count(), cache.assumed_count()) == (1, 1)
    assert cache.dump() == {"n1": ["default/p*"], "n2": []}


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ("assume", "assume", "pod default/p (uid-p) is already in the cache"),
        ("add", "assume", "pod default/p (uid-p) is already in the cache"),
    ],
    ids=["assume-twice", "assume-a-bound-pod"],
)
def test_assume_twice_is_an_error(first: str, second: str, message: str) -> None:
    cache = _cache("n1")
    getattr(cache, f"{first}_pod")(_pod(node="n1"))
    with pytest.raises(CacheError) as info:
        getattr(cache, f"{second}_pod")(_pod(node="n1"))
    assert str(info.value) == message
    assert _cpu(cache, "n1") == 500


def test_assume_without_a_node_is_an_error() -> None:
    with pytest.raises(CacheError) as info:
        _cache("n1").assume_pod(_pod())
    assert str(info.value) == "pod default/p has no node to be assumed on"


def test_forget_undoes_assume() -> None:
    cache = _cache("n1")
    pod = _pod(node="n1")
    cache.assume_pod(pod)
    cache.forget_pod(pod)
    assert _cpu(cache, "n1") == 0
    assert cache.pod_count() == 0
    assert cache.dump() == {"n1": []}
    cache.forget_pod(pod)  # forgetting an unknown pod is a no-op


@pytest.mark.parametrize(
    ("setup", "forget", "message"),
    [
        ("assume", _pod(node="n2"), "pod default/p was assumed on n1, not n2"),
        ("add", _pod(node="n1"), "pod default/p is bound, not assumed; it cannot be forgotten"),
    ],
    ids=["other-node", "bound-pod"],
)
def test_forget_errors(setup: str, forget: PodInfo, message: str) -> None:
    cache = _cache("n1", "n2")
    getattr(cache, f"{setup}_pod")(_pod(node="n1"))
    with pytest.raises(CacheError) as info:
        cache.forget_pod(forget)
    assert str(info.value) == message
    assert _cpu(cache, "n1") == 500


def test_assumed_pod_is_overdue_after_ttl_once_binding_finished() -> None:
    clock = VirtualClock()
    cache = Cache(clock, assumed_ttl=30)
    cache.add_node(_node("n1"))
    pod = _pod(node="n1")
    cache.assume_pod(pod)
    clock.advance(100)
    assert cache.overdue_assumed_pods() == []  # binding still in progress: never overdue
    cache.finish_binding(pod)
    clock.advance(30)
    assert cache.overdue_assumed_pods() == []  # upstream expires only strictly after the deadline
    clock.advance(0.001)
    assert [p.key for p in cache.overdue_assumed_pods()] == ["default/p"]
    # listed, not forgotten: the binding confirmation decides
    assert cache.is_assumed(pod.uid)
    assert _cpu(cache, "n1") == 500


def test_assumed_pod_is_never_overdue_with_ttl_zero() -> None:
    cache = _cache("n1", ttl=0)
    pod = _pod(node="n1")
    cache.assume_pod(pod)
    cache.finish_binding(pod)
    cache.clock.advance(10**6)  # type: ignore[attr-defined]
    assert cache.overdue_assumed_pods() == []
    assert cache.is_assumed(pod.uid)
    assert _cpu(cache, "n1") == 500


def test_confirmed_pod_is_never_overdue() -> None:
    cache = _cache("n1", ttl=30)
    pod = _pod(node="n1")
    cache.assume_pod(pod)
    cache.finish_binding(pod)
    cache.add_pod(_pod(node="n1"))
    cache.clock.advance(60)  # type: ignore[attr-defined]
    assert cache.overdue_assumed_pods() == []
    assert _cpu(cache, "n1") == 500


@pytest.mark.parametrize(
    ("bound_to", "expected"),
    [("n1", {"n1": 500, "n2": 0}), ("n2", {"n1": 0, "n2": 500})],
    ids=["same-node", "different-node"],
)
def test_add_pod_confirms_an_assumed_pod(bound_to: str, expected: dict[str, int]) -> None:
    cache = _cache("n1", "n2")
    cache.assume_pod(_pod(node="n1"))
    cache.add_pod(_pod(node=bound_to))
    assert not cache.is_assumed("uid-p")
    assert {n: _cpu(cache, n) for n in ("n1", "n2")} == expected
    assert cache.pod_count() == 1
    assert cache.get_pod("uid-p").node_name == bound_to  # type: ignore[union-attr]


def test_remove_pod() -> None:
    cache = _cache("n1")
    cache.add_pod(_pod("a", node="n1"))
    cache.add_pod(_pod("b", node="n1", cpu="1"))
    removed = cache.remove_pod(_pod("a", node="n1"))
    assert removed is not None and removed.key == "default/a"
    assert _cpu(cache, "n1") == 1000
    assert cache.remove_pod(_pod("a", node="n1")) is None


def test_update_pod_replaces_its_requests() -> None:
    cache = _cache("n1")
    old = _pod(node="n1")
    cache.add_pod(old)
    cache.update_pod(old, _pod(node="n1", cpu="2"))
    assert _cpu(cache, "n1") == 2000
    assert len(cache.node_info("n1").pods) == 1  # type: ignore[union-attr]


def _resized(
    cpu: str, running: str | None = None, allocated: str | None = None, condition: str = ""
) -> PodInfo:
    """A pod on n1 with spec request ``cpu``, the kubelet reporting ``running`` (status.resources) and
    ``allocated`` (status.allocatedResources), and a ``PodResizePending`` condition with that reason."""
    builder = make_pod().name("r").uid("uid-r").node("n1").req(cpu=cpu, memory="1Gi")
    if running is not None or allocated is not None:
        builder.container_status(  # the kubelet reports every resource, memory too
            "c",
            {"cpu": running, "memory": "1Gi"} if running is not None else None,
            {"cpu": allocated, "memory": "1Gi"} if allocated is not None else None,
        )
    if condition:
        builder.condition("PodResizePending", condition)
    return PodInfo(builder.obj())


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # resized down from 2 to 1: the room is free once the kubelet runs the pod with 1
        (
            [
                _resized("2", "2", "2"),
                _resized("1", "2", "2"),
                _resized("1", "2", "1"),
                _resized("1", "1", "1"),
            ],
            [2000, 2000, 2000, 1000],
        ),
        # resized up from 1 to 3: taken at once; given back when the node can never fit it
        (
            [
                _resized("1", "1", "1"),
                _resized("3", "1", "1"),
                _resized("3", "1", "1", "Deferred"),
                _resized("3", "1", "1", "Infeasible"),
            ],
            [1000, 3000, 3000, 1000],
        ),
        # up from 1 to 3, admitted and actuated
        ([_resized("1", "1", "1"), _resized("3", "1", "3"), _resized("3", "3", "3")], [1000, 3000, 3000]),
    ],
    ids=["down", "up-deferred-then-infeasible", "up-actuated"],
)
def test_in_place_resize_changes_the_nodes_requests(steps: list[PodInfo], expected: list[int]) -> None:
    cache = _cache("n1")
    cache.add_pod(_pod("other", node="n1", cpu="500m"))
    seen: list[int] = []
    previous: PodInfo | None = None
    for pod in steps:
        if previous is None:
            cache.add_pod(pod)
        else:
            cache.update_pod(previous, pod)
        previous = pod
        seen.append(_cpu(cache, "n1") - 500)
        info = cache.node_info("n1")
        assert info is not None
        # the scoring view follows: the resized pod has requests, so no stand-ins
        assert info.non_zero_cpu == _cpu(cache, "n1")
        assert info.requested["memory"] == 1024 * 1024 * 1024
    assert seen == expected
    cache.remove_pod(steps[-1])
    assert _cpu(cache, "n1") == 500  # removal takes back exactly what the last version added


def test_pod_seen_before_its_node_is_counted_when_the_node_arrives() -> None:
    cache = _cache()
    cache.add_pod(_pod(node="n1"))
    assert cache.node_info("n1") is None
    cache.add_node(_node("n1"))
    assert _cpu(cache, "n1") == 500


def test_removed_node_with_pods_keeps_accounting_but_leaves_the_snapshot() -> None:
    cache = _cache("n1", "n2")
    cache.add_pod(_pod(node="n1"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert cache.remove_node("n1") is not None
    assert cache.node_info("n1") is None
    assert cache.node_count() == 1
    assert cache.dump() == {"n1": ["default/p"], "n2": []}
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_infos] == ["n2"]
    assert snapshot.get("n1") is None
    cache.add_node(_node("n1"))  # back again: its pods still count
    assert _cpu(cache, "n1") == 500
    cache.remove_node("n1")
    cache.remove_pod(_pod(node="n1"))
    assert cache.dump() == {"n2": []}
    assert cache.remove_node("n1") is None


# -- snapshots ------------------------------------------------------------------------------------------
def test_update_snapshot_refreshes_only_changed_nodes() -> None:
    cache = _cache("n1", "n2", "n3")
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = {n: snapshot.get(n) for n in ("n1", "n2", "n3")}
    version = snapshot.table.labels_version

    cache.assume_pod(_pod(node="n2"))
    cache.update_snapshot(snapshot)
    assert snapshot.get("n1") is before["n1"]
    assert snapshot.get("n3") is before["n3"]
    n2 = snapshot.get("n2")
    assert n2 is not before["n2"]
    assert n2 is not cache.node_info("n2")  # a clone: the cache's own NodeInfo never leaks
    assert n2.requested == {"cpu": 500}  # type: ignore[union-attr]
    row = snapshot.index_of("n2")
    assert snapshot.table.requested[row, snapshot.table.column["cpu"]] == 500
    assert snapshot.table.pod_count[row] == 1
    assert snapshot.table.non_zero[row].tolist() == [500, 200 * 1024 * 1024]
    assert snapshot.table.labels_version == version  # pods are not labels

    cache.update_snapshot(snapshot)
    assert snapshot.get("n2") is n2  # nothing changed since


def _table_rows(snapshot: Snapshot) -> dict[str, tuple[Any, ...]]:
    t = snapshot.table
    return {
        info.name: (
            t.allocatable[i].tolist(),
            t.requested[i].tolist(),
            t.non_zero[i].tolist(),
            int(t.pod_count[i]),
            int(t.allowed_pods[i]),
            bool(t.unschedulable[i]),
            bool(t.has_taints[i]),
            int(t.generation[i]) == info.generation,  # the row is of this very copy
        )
        for i, info in enumerate(snapshot.node_infos)
    }


@pytest.mark.parametrize("change", ["add node", "remove node", "zone changes"])
def test_nodes_coming_and_going_reuse_the_unchanged_nodes_copies(change: str) -> None:
    cache = Cache(VirtualClock())
    for i in range(6):
        cache.add_node(_node(f"n{i}", **{"topology.kubernetes.io/zone": f"z{i % 2}"}))
    cache.add_pod(_pod("a", node="n1"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = {n.name: n for n in snapshot.node_infos}
    version = snapshot.table.labels_version

    cache.assume_pod(_pod("b", node="n4"))  # changed in the same round: must be copied again
    if change == "add node":
        cache.add_node(_node("n6", **{"topology.kubernetes.io/zone": "z0"}))
    elif change == "remove node":
        cache.remove_node("n2")
    else:
        cache.update_node(_node("n3", **{"topology.kubernetes.io/zone": "z0"}))
    cache.update_snapshot(snapshot)

    fresh = Snapshot()
    Cache.update_snapshot(_replica(cache), fresh)
    assert all(snapshot.index_of(info.name) == i for i, info in enumerate(snapshot.node_infos))
    assert _table_rows(snapshot) == _table_rows(fresh)  # rows moved with their nodes
    assert snapshot.table.labels_version > version  # nodes came or went: per-label memos start over
    changed = {"n4", "n3"} if change == "zone changes" else {"n4"}
    for info in snapshot.node_infos:
        if info.name in before and info.name not in changed:
            assert info is before[info.name], info.name
        else:
            assert info is not before.get(info.name), info.name
    n4 = snapshot.get("n4")
    assert n4 is not None and n4.requested == {"cpu": 500}


def _replica(cache: Cache) -> Cache:
    """A cache holding the same nodes and pods, never snapshotted."""
    copy = Cache(VirtualClock())
    for name in cache.node_names():
        info = cache.node_info(name)
        assert info is not None and info.node is not None
        copy.add_node(info.node)
    for pod in cache.pods():
        copy.add_pod(pod)
    return copy


@pytest.mark.parametrize(
    ("change", "bumps"),
    [
        (lambda: make_node().name("n1").capacity(cpu="8", memory="8Gi", pods=10).obj(), False),
        (
            lambda: (
                make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).label("disk", "ssd").obj()
            ),
            True,
        ),
        (
            lambda: (
                make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).taint("dedicated", "x").obj()
            ),
            True,
        ),
        (
            lambda: make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).unschedulable().obj(),
            False,
        ),
    ],
    ids=["allocatable", "label", "taint", "cordon"],
)
def test_labels_version_bumps_only_when_labels_or_taints_change(change: Any, bumps: bool) -> None:
    cache = _cache("n1", "n2")
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    version = snapshot.table.labels_version
    n2 = snapshot.get("n2")
    cache.update_node(change())
    cache.update_snapshot(snapshot)
    assert (snapshot.table.labels_version != version) is bumps
    assert snapshot.get("n2") is n2
    row = snapshot.index_of("n1")
    node = snapshot.get("n1")
    assert node is not None
    assert snapshot.table.allocatable[row, snapshot.table.column["cpu"]] == node.allocatable["cpu"]
    assert snapshot.table.unschedulable[row] == node.unschedulable
    assert snapshot.table.has_taints[row] == bool(node.taints)


def test_update_node_returns_the_previous_state() -> None:
    cache = _cache("n1")
    old, new = cache.update_node(make_node().name("n1").capacity(cpu="8", pods=10).obj())
    assert old is not None and old.allocatable["cpu"] == 4000
    assert new.allocatable["cpu"] == 8000
    assert cache.update_node(_node("n9"))[0] is None


ZONE = "topology.kubernetes.io/zone"


def test_snapshot_lists_nodes_interleaved_by_zone() -> None:
    cache = Cache(VirtualClock())
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("c1", "c"), ("c2", "c")]:
        cache.add_node(_node(name, **{ZONE: zone}))
    cache.add_node(_node("none"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_infos] == ["a1", "b1", "c1", "none", "a2", "c2", "a3"]
    assert [snapshot.index_of(n) for n in ("a1", "a3", "none")] == [0, 6, 3]


def test_node_moving_zone_moves_in_the_snapshot_order() -> None:
    cache = Cache(VirtualClock())
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b")]:
        cache.add_node(_node(name, **{ZONE: zone}))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    cache.update_node(_node("a1", **{ZONE: "b"}))
    cache.update_snapshot(snapshot)
    assert [n.name for n in snapshot.node_infos] == ["a2", "b1", "a1"]
    assert snapshot.index_of("a1") == 2
    assert snapshot.table.allocatable.shape[0] == 3
