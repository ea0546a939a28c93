"""TaintToleration: filter verdicts and reasons, PreferNoSchedule scoring with reversed normalisation,
requeue hints, and the vectorised forms against the per-node forms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _node_plugins_kit import FakeHandle, all_rows, node_info, snapshot_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import QueueingHint
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.taint_toleration import ERR_REASON_UNTOLERATED, TaintToleration, new
from kopf_scheduler.plugins.taint_toleration.plugin import node_changed, toleration_added
from kopf_scheduler.testing import make_node, make_pod

UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNTOLERATED,))


def _pod(*tolerations: dict[str, str]) -> PodInfo:
    builder = make_pod().name("p")
    for t in tolerations:
        builder.toleration(**t)
    return PodInfo(builder.obj())


def _node(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    builder = make_node().name(name)
    for key, value, effect in taints:
        builder.taint(key, value, effect)
    return builder.obj()


def _plugin(snapshot: Any = None) -> TaintToleration:
    return new(NoArgs(), FakeHandle(snapshot))


@pytest.mark.parametrize(
    ("tolerations", "taints", "want"),
    [
        pytest.param(
            [], [("dedicated", "user1", "NoSchedule")], UNTOLERATED, id="no-tolerations-tainted-node"
        ),
        pytest.param(
            [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
            [("dedicated", "user1", "NoSchedule")],
            None,
            id="equal-toleration",
        ),
        pytest.param(
            [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
            [("dedicated", "user1", "NoSchedule")],
            UNTOLERATED,
            id="other-value",
        ),
        pytest.param(
            [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
            [("foo", "bar", "NoSchedule")],
            None,
            id="exists-toleration",
        ),
        pytest.param(
            [
                {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
                {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
            ],
            [("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")],
            None,
            id="all-taints-tolerated",
        ),
        pytest.param(
            [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
            [("foo", "bar", "NoSchedule")],
            UNTOLERATED,
            id="effect-mismatch",
        ),
        pytest.param(
            [{"key": "foo", "operator": "Equal", "value": "bar"}],
            [("foo", "bar", "NoSchedule")],
            None,
            id="empty-effect-tolerates-all-effects",
        ),
        pytest.param(
            [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
            [("dedicated", "user1", "PreferNoSchedule")],
            None,
            id="prefer-no-schedule-ignored",
        ),
        pytest.param([], [("dedicated", "user1", "PreferNoSchedule")], None, id="no-tolerations-prefer-only"),
        pytest.param([], [("gone", "", "NoExecute")], UNTOLERATED, id="no-execute-enforced"),
        pytest.param([{"operator": "Exists"}], [("a", "b", "NoExecute")], None, id="tolerate-everything"),
        pytest.param([], [], None, id="untainted-node"),
    ],
)
def test_filter(
    tolerations: list[dict[str, str]], taints: list[tuple[str, str, str]], want: Status | None
) -> None:
    assert _plugin().filter(CycleState(), _pod(*tolerations), node_info(_node("n", *taints))) == want


def _scores(pod: PodInfo, nodes: list[dict[str, Any]]) -> list[int]:
    snapshot = snapshot_of(nodes)
    plugin, state = _plugin(snapshot), CycleState()
    assert plugin.pre_score(state, pod, NodeSet(snapshot, all_rows(snapshot))) is None
    scores = np.array([plugin.score(state, pod, n) for n in snapshot.node_infos], dtype=np.int64)
    assert plugin.normalize_score(state, pod, scores) is None
    return scores.tolist()


PREFER = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("tolerations", "nodes", "want"),
    [
        pytest.param(
            [{"key": "foo", "value": "bar", "effect": PREFER}],
            [_node("a", ("foo", "bar", PREFER)), _node("b", ("foo", "blah", PREFER))],
            [100, 0],
            id="tolerated-node-scores-higher",
        ),
        pytest.param(
            [
                {"key": "cpu-type", "value": "arm64", "effect": PREFER},
                {"key": "disk-type", "value": "ssd", "effect": PREFER},
            ],
            [
                _node("a"),
                _node("b", ("cpu-type", "arm64", PREFER)),
                _node("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 100],
            id="tolerated-taints-do-not-count",
        ),
        pytest.param(
            [{"key": "foo", "value": "bar", "effect": PREFER}],
            [
                _node("a"),
                _node("b", ("cpu-type", "arm64", PREFER)),
                _node("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 50, 0],
            id="more-intolerable-taints-lower-score",
        ),
        pytest.param(
            [
                {"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"},
                {"key": "disk-type", "value": "ssd", "effect": "NoSchedule"},
            ],
            [
                _node("a"),
                _node("b", ("cpu-type", "arm64", "NoSchedule")),
                _node("c", ("cpu-type", "arm64", PREFER), ("disk-type", "ssd", PREFER)),
            ],
            [100, 100, 0],
            id="only-prefer-no-schedule-counts",
        ),
        pytest.param(
            [], [_node("a"), _node("b", ("cpu-type", "arm64", PREFER))], [100, 0], id="no-tolerations"
        ),
        pytest.param([], [_node("a"), _node("b")], [100, 100], id="no-taints-anywhere"),
        pytest.param(
            [{"key": "x", "operator": "Exists"}],
            [_node("a", ("x", "1", PREFER)), _node("b", ("y", "1", PREFER))],
            [100, 0],
            id="empty-effect-toleration-counts-for-scoring",
        ),
    ],
)
def test_score(tolerations: list[dict[str, str]], nodes: list[dict[str, Any]], want: list[int]) -> None:
    assert _scores(_pod(*tolerations), nodes) == want


def test_pre_score_never_skips() -> None:
    snapshot = snapshot_of([_node("a")])
    status = _plugin(snapshot).pre_score(CycleState(), _pod(), NodeSet(snapshot, all_rows(snapshot)))
    assert status is None


@pytest.mark.parametrize(
    ("old", "new_", "want"),
    [
        pytest.param(None, "not-a-node", QueueingHint.QUEUE, id="wrong-new-object"),
        pytest.param(
            "not-a-node", _node("a", ("dedicated", "user1", "NoSchedule")), QueueingHint.QUEUE, id="wrong-old"
        ),
        pytest.param(
            None, _node("a", ("dedicated", "user1", "NoSchedule")), QueueingHint.SKIP, id="added-untolerated"
        ),
        pytest.param(
            None, _node("a", ("dedicated", "user2", "NoSchedule")), QueueingHint.QUEUE, id="added-tolerated"
        ),
        pytest.param(
            _node("a", ("dedicated", "user1", "NoSchedule")),
            _node("a", ("dedicated", "user1", "NoSchedule"), ("dedicated", "user3", "NoSchedule")),
            QueueingHint.SKIP,
            id="still-untolerated",
        ),
        pytest.param(
            _node("a", ("dedicated", "user1", "NoSchedule")),
            _node("a", ("dedicated", "user2", "NoSchedule")),
            QueueingHint.QUEUE,
            id="taint-change-tolerated",
        ),
        pytest.param(
            _node("a"), _node("a", ("k", "v", PREFER)), QueueingHint.SKIP, id="was-tolerated-already"
        ),
    ],
)
def test_node_changed_hint(old: Any, new_: Any, want: QueueingHint) -> None:
    pod = _pod({"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"})
    as_info = lambda o: NodeInfo(o) if isinstance(o, dict) else o  # noqa: E731
    assert node_changed(pod, as_info(old), as_info(new_)) == want


def test_toleration_added_hint() -> None:
    """Upstream v1.37's ``isSchedulableAfterTargetPodTolerationChange`` queues whatever changed: a
    TargetPod event is about the rejected pod itself."""
    pod = PodInfo(make_pod().name("p").uid("uid0").obj())
    same = PodInfo(make_pod().name("p").uid("uid0").toleration(key="k", operator="Exists").obj())
    assert toleration_added(pod, pod, same) == QueueingHint.QUEUE
    assert toleration_added(pod, None, "not-a-pod") == QueueingHint.QUEUE


def test_events_registered() -> None:
    events = [(e.event.resource.value, e.event.action) for e in _plugin().events_to_register()]
    assert [r for r, _ in events] == ["Node", "TargetPod"]


# -- vectorised forms ------------------------------------------------------------------------------------
KEYS = ["a", "b", "c"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def taints(draw: Any) -> tuple[str, str, str]:
    return draw(st.sampled_from(KEYS)), draw(st.sampled_from(["", "1", "2"])), draw(st.sampled_from(EFFECTS))


@st.composite
def tolerations(draw: Any) -> dict[str, str]:
    operator = draw(st.sampled_from(["Equal", "Exists"]))
    out = {"key": draw(st.sampled_from(["", *KEYS])), "operator": operator}
    if operator == "Equal":
        out["value"] = draw(st.sampled_from(["", "1", "2"]))
    out["effect"] = draw(st.sampled_from(["", *EFFECTS]))
    if out["key"] == "" and operator == "Equal":
        out["operator"] = "Exists"
        out.pop("value", None)
    return out


@st.composite
def clusters(draw: Any) -> tuple[Any, PodInfo]:
    count = draw(st.integers(1, 12))
    nodes = [_node(f"n{i}", *draw(st.lists(taints(), max_size=3))) for i in range(count)]
    pod = _pod(*draw(st.lists(tolerations(), max_size=3)))
    return snapshot_of(nodes), pod


@SETTINGS
@given(clusters())
def test_vector_forms_agree(cluster: tuple[Any, PodInfo]) -> None:
    snapshot, pod = cluster
    plugin, state = _plugin(snapshot), CycleState()
    rows = all_rows(snapshot)[::-1].copy()  # any order, any subset
    infos = [snapshot.node_infos[r] for r in rows]
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == [
        plugin.filter(state, pod, n) is None for n in infos
    ]
    plugin.pre_score(state, pod, NodeSet(snapshot, rows))
    assert plugin.score_rows(state, pod, snapshot.table, rows).tolist() == [
        plugin.score(state, pod, n) for n in infos
    ]


def test_vector_filter_sees_taint_changes() -> None:
    snapshot = snapshot_of([_node("a"), _node("b", ("k", "v", "NoSchedule"))])
    plugin, pod = _plugin(snapshot), _pod()
    assert plugin.filter_rows(CycleState(), pod, snapshot.table, all_rows(snapshot)).tolist() == [True, False]
    snapshot.replace(NodeInfo(_node("a", ("k", "v", "NoSchedule"))))
    snapshot.table.bump_labels_version()  # what the cache does when labels or taints change
    assert plugin.filter_rows(CycleState(), pod, snapshot.table, all_rows(snapshot)).tolist() == [
        False,
        False,
    ]
