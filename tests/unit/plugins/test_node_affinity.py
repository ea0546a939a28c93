"""NodeAffinity: pre-filter skips and node-name results, filter reasons (pod selector and the profile's
``addedAffinity``), preferred-term scoring, requeue hints, arguments, and the vectorised forms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _node_plugins_kit import FakeHandle, all_rows, node_info, snapshot_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import QueueingHint
from kopf_scheduler.framework.interface import NodeSet, PreFilterResult
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status
from kopf_scheduler.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_POD,
    Args,
    NodeAffinity,
    new,
)
from kopf_scheduler.testing import make_node, make_pod

POD_MISMATCH = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_POD,))
ENFORCED = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match scheduler-enforced node affinity",)
)
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def name_is(*names: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    items = [{"weight": w, "preference": t} for w, t in weighted]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": items}}


def _pod(affinity: dict[str, Any] | None = None, **selector: str) -> PodInfo:
    builder = make_pod().name("p")
    if affinity is not None:
        builder.affinity(affinity)
    if selector:
        builder.node_selector(**selector)
    return PodInfo(builder.obj())


def _node(name: str = "n", **labels: str) -> dict[str, Any]:
    builder = make_node().name(name)
    for k, v in labels.items():
        builder.label(k, v)
    return builder.obj()


def _plugin(added: dict[str, Any] | None = None, snapshot: Any = None) -> NodeAffinity:
    args = decode_args(Args, {"addedAffinity": added} if added is not None else {})
    args.validate()
    return new(args, FakeHandle(snapshot))


ADDED_NODE2 = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term(fields=(name_is("node2"),))]
    }
}
ADDED_ZONE_BAR = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "In", "bar"))]}
}

CASES = [
    # (pod, node name, node labels, addedAffinity, (pre-filter result, pre-filter status), filter status)
    pytest.param(_pod(foo="bar"), "n", {}, None, (None, None), POD_MISMATCH, id="selector-missing-labels"),
    pytest.param(_pod(foo="bar"), "n", {"foo": "bar"}, None, (None, None), None, id="selector-same-labels"),
    pytest.param(
        _pod(foo="bar"), "n", {"foo": "bar", "baz": "blah"}, None, (None, None), None, id="labels-superset"
    ),
    pytest.param(
        _pod(foo="bar", baz="blah"), "n", {"foo": "bar"}, None, (None, None), POD_MISMATCH, id="labels-subset"
    ),
    pytest.param(
        _pod(required(term(expr("foo", "In", "bar", "value2")))),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        None,
        id="in",
    ),
    pytest.param(
        _pod(required(term(expr("kernel-version", "Gt", "0204")))),
        "n",
        {"kernel-version": "0206"},
        None,
        (None, None),
        None,
        id="gt",
    ),
    pytest.param(
        _pod(required(term(expr("mem-type", "NotIn", "DDR", "DDR2")))),
        "n",
        {"mem-type": "DDR3"},
        None,
        (None, None),
        None,
        id="not-in",
    ),
    pytest.param(
        _pod(required(term(expr("GPU", "Exists")))), "n", {"GPU": "K1"}, None, (None, None), None, id="exists"
    ),
    pytest.param(
        _pod(required(term(expr("foo", "In", "value1", "value2")))),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        POD_MISMATCH,
        id="in-no-match",
    ),
    pytest.param(
        _pod(required({"matchExpressions": []})),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        POD_MISMATCH,
        id="empty-term",
    ),
    pytest.param(_pod(), "n", {"foo": "bar"}, None, (None, SKIP), None, id="no-affinity-skips"),
    pytest.param(
        _pod({"nodeAffinity": {}}),
        "n",
        {"foo": "bar"},
        None,
        (None, SKIP),
        None,
        id="affinity-without-required-skips",
    ),
    pytest.param(
        _pod(required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")))),
        "n",
        {"GPU": "NVIDIA-GRID-K1"},
        None,
        (None, None),
        None,
        id="expressions-anded",
    ),
    pytest.param(
        _pod(required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")))),
        "n",
        {"GPU": "NVIDIA-GRID-K1"},
        None,
        (None, None),
        POD_MISMATCH,
        id="expressions-anded-no-match",
    ),
    pytest.param(
        _pod(
            required(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2")))
        ),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        None,
        id="terms-ored",
    ),
    pytest.param(
        _pod(required(term(expr("foo", "Exists"))), foo="bar"),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        None,
        id="affinity-and-selector",
    ),
    pytest.param(
        _pod(required(term(expr("foo", "Exists"))), foo="bar"),
        "n",
        {"foo": "barrrrrr"},
        None,
        (None, None),
        POD_MISMATCH,
        id="affinity-matches-selector-does-not",
    ),
    pytest.param(
        _pod(required(term(expr("foo", "NotIn", "invalid value: ___@#$%^")))),
        "n",
        {"foo": "bar"},
        None,
        (None, None),
        POD_MISMATCH,
        id="invalid-value-never-matches",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"),)))),
        "node1",
        {},
        None,
        (PreFilterResult(frozenset({"node1"})), None),
        None,
        id="match-fields",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"),)))),
        "node2",
        {},
        None,
        (PreFilterResult(frozenset({"node1"})), None),
        POD_MISMATCH,
        id="match-fields-other-node",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"), name_is("node2"))), term(expr("foo", "In", "bar")))),
        "node2",
        {"foo": "bar"},
        None,
        (None, None),
        None,
        id="fields-term-or-expression-term",
    ),
    pytest.param(
        _pod(required(term(expr("foo", "In", "bar"), fields=(name_is("node1"),)))),
        "node2",
        {"foo": "bar"},
        None,
        (PreFilterResult(frozenset({"node1"})), None),
        POD_MISMATCH,
        id="one-term-fields-and-expressions",
    ),
    pytest.param(
        _pod(required(term(expr("foo", "In", "bar"), fields=(name_is("node1"),)))),
        "node1",
        {"foo": "bar"},
        None,
        (PreFilterResult(frozenset({"node1"})), None),
        None,
        id="one-term-both-match",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"),)), term(expr("foo", "In", "not-match-to-bar")))),
        "node2",
        {"foo": "bar"},
        None,
        (None, None),
        POD_MISMATCH,
        id="two-terms-neither-matches",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"),)), term(fields=(name_is("node2"),)))),
        "node2",
        {},
        None,
        (PreFilterResult(frozenset({"node1", "node2"})), None),
        None,
        id="two-name-terms-union",
    ),
    pytest.param(
        _pod(required(term(fields=(name_is("node1"), name_is("node2"))))),
        "node2",
        {"foo": "bar"},
        None,
        (None, CONFLICT),
        POD_MISMATCH,
        id="conflicting-name-fields",
    ),
    pytest.param(
        _pod(required(term(expr("zone", "In", "foo")))),
        "node2",
        {"zone": "foo"},
        ADDED_NODE2,
        (None, None),
        None,
        id="added-and-pod-affinity-match",
    ),
    pytest.param(
        _pod(required(term(expr("zone", "In", "bar")))),
        "node2",
        {"zone": "foo"},
        ADDED_NODE2,
        (None, None),
        POD_MISMATCH,
        id="added-matches-pod-does-not",
    ),
    pytest.param(
        _pod(), "node2", {"zone": "foo"}, ADDED_ZONE_BAR, (None, None), ENFORCED, id="added-does-not-match"
    ),
    pytest.param(
        _pod(required(term(expr("zone", "In", "x")))),
        "node2",
        {"zone": "foo"},
        ADDED_ZONE_BAR,
        (None, None),
        ENFORCED,
        id="added-checked-first",
    ),
]


@pytest.mark.parametrize(("pod", "name", "labels", "added", "want_pre", "want"), CASES)
def test_pre_filter(
    pod: PodInfo, name: str, labels: dict[str, str], added: Any, want_pre: Any, want: Any
) -> None:
    assert _plugin(added).pre_filter(CycleState(), pod, []) == want_pre


@pytest.mark.parametrize(("pod", "name", "labels", "added", "want_pre", "want"), CASES)
@pytest.mark.parametrize("run_pre_filter", [True, False], ids=["after-pre-filter", "without-pre-filter"])
def test_filter(
    pod: PodInfo,
    name: str,
    labels: dict[str, str],
    added: Any,
    want_pre: Any,
    want: Any,
    run_pre_filter: bool,
) -> None:
    plugin, state = _plugin(added), CycleState()
    if run_pre_filter:
        plugin.pre_filter(state, pod, [])
    assert plugin.filter(state, pod, node_info(_node(name, **labels))) == want


L1, L2, L3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
L4, L5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}
AFF1 = preferred((2, term(expr("foo", "In", "bar"))))
AFF2 = preferred(
    (2, term(expr("foo", "In", "bar"))),
    (4, term(expr("key", "In", "value"))),
    (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
)


@pytest.mark.parametrize(
    ("affinity", "labels", "added", "want"),
    [
        pytest.param(AFF1, [L4, L2, L3], None, [0, 0, 0], id="no-node-matches"),
        pytest.param(AFF1, [L1, L2, L3], None, [100, 0, 0], id="one-node-matches"),
        pytest.param(AFF2, [L1, L5, L2], None, [18, 100, 36], id="different-sums"),
        pytest.param(None, [L1, L2], AFF1["nodeAffinity"], [100, 0], id="added-preferred"),
        pytest.param(
            AFF1,
            [L1, L2, L5],
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "preference": term(expr("key", "In", "value"))}
                ]
            },
            [40, 60, 100],
            id="added-and-pod-preferred",
        ),
        pytest.param(
            preferred((0, term(expr("foo", "In", "bar"))), (3, {})),
            [L1, L2],
            None,
            [0, 0],
            id="zero-weight-and-empty",
        ),
        pytest.param(
            preferred((7, term(fields=({"key": "metadata.name", "operator": "In", "values": ["n1"]},)))),
            [L1, L2],
            None,
            [0, 100],
            id="preferred-match-fields",
        ),
    ],
)
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["after-pre-score", "without-pre-score"])
def test_score(
    affinity: Any, labels: list[dict[str, str]], added: Any, want: list[int], run_pre_score: bool
) -> None:
    snapshot = snapshot_of([_node(f"n{i}", **lab) for i, lab in enumerate(labels)])
    plugin, pod, state = _plugin(added, snapshot), _pod(affinity), CycleState()
    if run_pre_score:
        assert plugin.pre_score(state, pod, NodeSet(snapshot, all_rows(snapshot))) is None
    scores = np.array([plugin.score(state, pod, n) for n in snapshot.node_infos], dtype=np.int64)
    assert plugin.normalize_score(state, pod, scores) is None
    assert scores.tolist() == want


@pytest.mark.parametrize(
    ("affinity", "added", "want_code"),
    [
        pytest.param(None, None, Code.SKIP, id="no-affinity-skips"),
        pytest.param(required(term(expr("a", "Exists"))), None, Code.SKIP, id="only-required-skips"),
        pytest.param(AFF1, None, None, id="preferred-scores"),
        pytest.param(None, AFF1["nodeAffinity"], None, id="added-preferred-scores"),
        pytest.param(
            preferred((2, term(expr("invalid key", "In", "bar")))), None, Code.ERROR, id="broken-term-errors"
        ),
    ],
)
def test_pre_score(affinity: Any, added: Any, want_code: Code | None) -> None:
    snapshot = snapshot_of([_node("n")])
    status = _plugin(added, snapshot).pre_score(
        CycleState(), _pod(affinity), NodeSet(snapshot, all_rows(snapshot))
    )
    assert (status.code if status is not None else None) == want_code
    if want_code == Code.ERROR:
        assert status is not None and "matchExpressions[0].key" in status.message()


FOO_BAR_POD = _pod(required(term(expr("foo", "In", "bar"))))


@pytest.mark.parametrize(
    ("added", "old", "new_", "want"),
    [
        pytest.param(None, None, "not-a-node", QueueingHint.QUEUE, id="wrong-new-object"),
        pytest.param(None, "not-a-node", _node(), QueueingHint.QUEUE, id="wrong-old-object"),
        pytest.param(None, None, _node(), QueueingHint.SKIP, id="added-node-does-not-match"),
        pytest.param(None, None, _node(foo="bar"), QueueingHint.QUEUE, id="added-node-matches"),
        pytest.param(None, _node(), _node(), QueueingHint.SKIP, id="unrelated-change"),
        pytest.param(None, _node(), _node(k="v"), QueueingHint.SKIP, id="unrelated-label"),
        pytest.param(None, _node(foo="bar"), _node(k="v"), QueueingHint.SKIP, id="suitable-to-unsuitable"),
        pytest.param(None, _node(), _node(foo="bar"), QueueingHint.QUEUE, id="label-makes-it-match"),
        pytest.param(None, _node(foo="bar"), _node(foo="bar", x="y"), QueueingHint.SKIP, id="matched-before"),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("foo", "In", "bar"))]
                }
            },
            None,
            _node(),
            QueueingHint.SKIP,
            id="added-affinity-does-not-match",
        ),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("foo", "In", "bar"))]
                }
            },
            None,
            _node(foo="bar"),
            QueueingHint.QUEUE,
            id="added-affinity-matches",
        ),
    ],
)
def test_node_changed_hint(added: Any, old: Any, new_: Any, want: QueueingHint) -> None:
    as_info = lambda o: NodeInfo(o) if isinstance(o, dict) else o  # noqa: E731
    assert _plugin(added).node_changed(FOO_BAR_POD, as_info(old), as_info(new_)) == want


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param({"unknown": 1}, "unknown", id="unknown-field"),
        pytest.param({"addedAffinity": []}, "addedAffinity", id="not-an-object"),
        pytest.param(
            {"addedAffinity": {"podAffinity": {}}}, "addedAffinity.podAffinity", id="unknown-affinity-field"
        ),
        pytest.param(
            {"addedAffinity": required(term(expr("foo", "Bogus", "x")))["nodeAffinity"]},
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].operator",
            id="bad-operator",
        ),
        pytest.param(
            {"addedAffinity": required(term(expr("foo", "In")))["nodeAffinity"]},
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].values",
            id="in-without-values",
        ),
        pytest.param(
            {"addedAffinity": preferred((1, term(expr("bad key!", "Exists"))))["nodeAffinity"]},
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key",
            id="bad-preferred-key",
        ),
        pytest.param(
            {
                "addedAffinity": required(
                    term(fields=({"key": "metadata.name", "operator": "In", "values": ["a", "b"]},))
                )["nodeAffinity"]
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values",
            id="field-with-two-values",
        ),
    ],
)
def test_args_rejected(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ArgsError) as caught:
        decode_args(Args, raw).validate()
    assert caught.value.field == field


def test_args_accepted() -> None:
    args = decode_args(Args, {"addedAffinity": {**ADDED_ZONE_BAR, **AFF1["nodeAffinity"]}})
    args.validate()
    assert decode_args(Args, {}).added_affinity is None


# -- vectorised forms ------------------------------------------------------------------------------------
KEYS, VALUES = ["zone", "tier", "gpu"], ["a", "b", "1", "5"]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def expressions(draw: Any) -> dict[str, Any]:
    op = draw(st.sampled_from(OPS))
    key = draw(st.sampled_from(KEYS))
    if op in ("Exists", "DoesNotExist"):
        return expr(key, op)
    if op in ("Gt", "Lt"):
        return expr(key, op, draw(st.sampled_from(["0", "3", "x"])))  # "x" makes the term invalid
    return expr(key, op, *draw(st.lists(st.sampled_from(VALUES), min_size=0, max_size=2)))  # [] is invalid


@st.composite
def terms(draw: Any, count: int) -> dict[str, Any]:
    fields = tuple(name_is(f"n{draw(st.integers(0, count))}") for _ in range(draw(st.integers(0, 1))))
    return term(*draw(st.lists(expressions(), max_size=2)), fields=fields)


@st.composite
def clusters(draw: Any) -> tuple[Any, PodInfo, Any]:
    count = draw(st.integers(1, 10))
    nodes = [
        _node(f"n{i}", **{k: draw(st.sampled_from(VALUES)) for k in KEYS if draw(st.booleans())})
        for i in range(count)
    ]
    affinity: dict[str, Any] = {"nodeAffinity": {}}
    if draw(st.booleans()):
        affinity = required(*draw(st.lists(terms(count), max_size=3)))
    if draw(st.booleans()):
        weighted = draw(st.lists(st.tuples(st.integers(0, 100), terms(count)), max_size=3))
        affinity["nodeAffinity"].update(preferred(*weighted)["nodeAffinity"])
    selector = {k: draw(st.sampled_from(VALUES)) for k in KEYS if draw(st.integers(0, 3)) == 0}
    added = None
    if draw(st.booleans()):
        added = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("tier", "Exists"))]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 4, "preference": term(expr("zone", "In", "a"))}
            ],
        }
    return snapshot_of(nodes), _pod(affinity, **selector), added


@SETTINGS
@given(clusters())
def test_vector_forms_agree(cluster: tuple[Any, PodInfo, Any]) -> None:
    snapshot, pod, added = cluster
    plugin, state = _plugin(added, snapshot), CycleState()
    rows = all_rows(snapshot)[::-1].copy()
    infos = [snapshot.node_infos[r] for r in rows]
    _, status = plugin.pre_filter(state, pod, infos)
    if status is None or status.code != Code.SKIP:
        assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == [
            plugin.filter(state, pod, n) is None for n in infos
        ]
    status = plugin.pre_score(state, pod, NodeSet(snapshot, rows))
    if status is None:
        assert plugin.score_rows(state, pod, snapshot.table, rows).tolist() == [
            plugin.score(state, pod, n) for n in infos
        ]


def test_vector_filter_sees_label_changes() -> None:
    snapshot = snapshot_of([_node("a", zone="x"), _node("b")])
    plugin, pod = _plugin(None, snapshot), _pod(zone="x")
    assert plugin.filter_rows(CycleState(), pod, snapshot.table, all_rows(snapshot)).tolist() == [True, False]
    snapshot.replace(NodeInfo(_node("b", zone="x")))
    snapshot.table.bump_labels_version()
    assert plugin.filter_rows(CycleState(), pod, snapshot.table, all_rows(snapshot)).tolist() == [True, True]
