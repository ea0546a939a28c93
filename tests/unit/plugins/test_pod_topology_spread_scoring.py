"""PodTopologySpread pre-score, score and normalize, and property tests proving the vectorised filter and
score agree with the per-node forms. Score cases follow upstream's ``podtopologyspread/scoring_test.go``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _spread_kit import (
    BAR,
    FOO,
    HOSTNAME,
    ZONE,
    bound,
    foo_pods,
    incoming,
    match_nums,
    node,
    plugin_for,
    pre_filter_state,
    snapshot_of,
    spread,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import LabelSelector
from kopf_scheduler.framework.status import SKIP
from kopf_scheduler.plugins.pod_topology_spread import Args
from kopf_scheduler.plugins.pod_topology_spread.constraints import (
    count_matching,
    node_included,
    required_affinity,
)
from kopf_scheduler.plugins.pod_topology_spread.plugin import _PRE_SCORE_KEY

SOFT = "ScheduleAnyway"
SYSTEM = Args((), "System")


def h(name: str, **labels: str) -> dict[str, Any]:
    return node(name, {HOSTNAME: name, **labels})


def hz(name: str, zone: str) -> dict[str, Any]:
    return node(name, {HOSTNAME: name, "zone": zone})


def selecting(labels: dict[str, str]) -> Any:
    selector = LabelSelector.parse({"matchLabels": labels})
    return lambda pod: selector if selector is not None and selector.matches(pod.labels) else None


def run_scores(
    pod: PodInfo, candidates: list[Any], failed: list[Any], pods: list[Any], args: Args = SYSTEM, **kw: Any
) -> list[int]:
    snapshot = snapshot_of(candidates + failed, pods)
    plugin = plugin_for(snapshot, args, **kw)
    state = CycleState()
    rows = np.arange(len(candidates), dtype=np.int64)
    assert plugin.pre_score(state, pod, NodeSet(snapshot, rows)) is None
    raw = np.array([plugin.score(state, pod, snapshot.node_infos[i]) for i in rows], dtype=np.int64)
    assert plugin.score_rows(state, pod, snapshot.table, rows).tolist() == raw.tolist()
    plugin.normalize_score(state, pod, raw)
    return raw.tolist()


A4_B3_C2_D1 = foo_pods(
    *[(f"p-{n}{i}", f"node-{n}") for n, k in (("a", 4), ("b", 3), ("c", 2), ("d", 1)) for i in range(k)]
)
A2_B1_D3 = foo_pods(
    ("p-a1", "node-a"),
    ("p-a2", "node-a"),
    ("p-b1", "node-b"),
    ("p-d1", "node-d"),
    ("p-d2", "node-d"),
    ("p-d3", "node-d"),
)
A4_B2_X1_Y3 = foo_pods(
    *[(f"p-{n}{i}", f"node-{n}") for n, k in (("a", 4), ("b", 2), ("x", 1), ("y", 3)) for i in range(k)]
)
ABCD = [h("node-a"), h("node-b"), h("node-c"), h("node-d")]
HOST_FOO = spread(1, HOSTNAME, SOFT, FOO)
ZONE_FOO_SOFT = spread(1, "zone", SOFT, FOO)
DIFF_PODS = [
    bound("p-a1", "node-a", {"foo": ""}),
    bound("p-b1", "node-b", {"foo": "", "bar": ""}),
    bound("p-y1", "node-y", {"foo": ""}),
    bound("p-y2", "node-y", {"bar": ""}),
]
POLICY_NODES = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-c", {"node": "node-c"}),
]
TAINT_NODES = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c"}, tainted=True),
]
POLICY_PODS = foo_pods(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-c1", "node-c"))
MLK_NODES = [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")]
MLK_PODS = [
    bound("p-a1", "node-a", {"foo": ""}),
    bound("p-b1", "node-b", {"foo": "", "bar": ""}),
    bound("p-y1", "node-c", {"foo": ""}),
    bound("p-y2", "node-c", {"bar": ""}),
]

SCORE_CASES = [
    ("no-existing-pods", incoming(HOST_FOO), [h("node-a"), h("node-b")], [], [], [100, 100], {}),
    (
        "only-one-candidate",
        incoming(HOST_FOO),
        [h("node-a")],
        [h("node-b")],
        foo_pods(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b")),
        [100],
        {},
    ),
    (
        "same-number-everywhere",
        incoming(HOST_FOO),
        [h("node-a"), h("node-b")],
        [],
        foo_pods(("p-a1", "node-a"), ("p-b1", "node-b")),
        [100, 100],
        {},
    ),
    ("nodes-2-1-0-3", incoming(HOST_FOO), ABCD, [], A2_B1_D3, [20, 60, 100, 0], {}),
    ("null-selector", incoming(spread(1, HOSTNAME, SOFT)), ABCD, [], A2_B1_D3, [100, 100, 100, 100], {}),
    (
        "nodes-2-1-0-3-max-skew-2",
        incoming(spread(2, HOSTNAME, SOFT, FOO)),
        ABCD,
        [],
        A2_B1_D3,
        [33, 66, 100, 16],
        {},
    ),
    (
        "nodes-4-3-2-1-max-skew-3",
        incoming(spread(3, HOSTNAME, SOFT, FOO)),
        ABCD,
        [],
        A4_B3_C2_D1,
        [44, 66, 77, 100],
        {},
    ),
    (
        "system-defaults-no-zones-service",
        PodInfo(bound("p", "", {"foo": ""})),
        ABCD,
        [],
        A4_B3_C2_D1,
        [44, 66, 77, 100],
        {"default_selector": selecting({"foo": ""})},
    ),
    (
        "three-of-four-candidates",
        incoming(HOST_FOO),
        [h("node-a"), h("node-b"), h("node-x")],
        [h("node-y")],
        A4_B2_X1_Y3,
        [33, 83, 100],
        {},
    ),
    (
        "candidate-without-topology-key",
        incoming(HOST_FOO),
        [h("node-a"), node("node-b", {"n": "node-b"}), h("node-x")],
        [h("node-y")],
        A4_B2_X1_Y3,
        [16, 0, 100],
        {},
    ),
    (
        "zone-three-of-four-candidates",
        incoming(ZONE_FOO_SOFT),
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")],
        [hz("node-y", "zone2")],
        A4_B2_X1_Y3,
        [75, 75, 100],
        {},
    ),
    (
        "zone-and-node-two-of-four",
        incoming(ZONE_FOO_SOFT, HOST_FOO),
        [hz("node-a", "zone1"), hz("node-x", "zone2")],
        [hz("node-b", "zone1"), hz("node-y", "zone2")],
        foo_pods(
            ("p-a1", "node-a"),
            ("p-a2", "node-a"),
            ("p-b1", "node-b"),
            ("p-x1", "node-x"),
            ("p-x2", "node-x"),
            ("p-y1", "node-y"),
            ("p-y2", "node-y"),
            ("p-y3", "node-y"),
            ("p-y4", "node-y"),
        ),
        [100, 63],
        {},
    ),
    (
        "two-zone-constraints",
        incoming(ZONE_FOO_SOFT, spread(1, "zone", SOFT, BAR), labels={"foo": "", "bar": ""}),
        [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"})],
        [node("node-b", {"zone": "zone1"}), node("node-y", {"zone": "zone2"})],
        [
            bound("p-a1", "node-a", {"foo": "", "bar": ""}),
            bound("p-a2", "node-a", {"foo": ""}),
            bound("p-b1", "node-b", {"foo": "", "bar": ""}),
            bound("p-y1", "node-y", {"foo": ""}),
            bound("p-y2", "node-y", {"foo": "", "bar": ""}),
            bound("p-y3", "node-y", {"foo": ""}),
        ],
        [85, 100],
        {},
    ),
    (
        "different-selectors",
        incoming(ZONE_FOO_SOFT, spread(1, HOSTNAME, SOFT, BAR), labels={"foo": "", "bar": ""}),
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2"), hz("node-y", "zone2")],
        [],
        DIFF_PODS,
        [60, 20, 100, 60],
        {},
    ),
    (
        "different-selectors-empty-nodes",
        incoming(ZONE_FOO_SOFT, spread(1, HOSTNAME, SOFT, BAR), labels={"foo": "", "bar": ""}),
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2"), hz("node-y", "zone2")],
        [],
        [
            bound("p-b1", "node-b", {"bar": ""}),
            bound("p-x1", "node-x", {"foo": ""}),
            bound("p-y1", "node-y", {"foo": "", "bar": ""}),
        ],
        [100, 60, 40, 0],
        {},
    ),
    (
        "different-selectors-three-of-four",
        incoming(ZONE_FOO_SOFT, spread(1, HOSTNAME, SOFT, BAR), labels={"foo": "", "bar": ""}),
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")],
        [hz("node-y", "zone2")],
        DIFF_PODS,
        [50, 25, 100],
        {},
    ),
    (
        "other-namespace",
        incoming(HOST_FOO),
        [h("node-a"), h("node-b")],
        [],
        [
            bound("p-a1", "node-a", {"foo": ""}, ns="ns1"),
            *foo_pods(("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b")),
        ],
        [100, 33],
        {},
    ),
    (
        "terminating-excluded",
        incoming(HOST_FOO),
        [h("node-a"), h("node-b")],
        [],
        [bound("p-a", "node-a", {"foo": ""}, terminating=True), bound("p-b", "node-b", {"foo": ""})],
        [100, 0],
        {},
    ),
    (
        "min-domains-no-effect",
        incoming(spread(2, "node", SOFT, FOO, minDomains=10)),
        [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        [],
        foo_pods(
            ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
        ),
        [75, 75, 100],
        {},
    ),
    (
        "affinity-policy-honored-selector",
        incoming(spread(1, "node", SOFT, FOO), node_selector={"foo": ""}),
        POLICY_NODES,
        [],
        POLICY_PODS,
        [0, 33, 100],
        {},
    ),
    (
        "affinity-policy-ignored-selector",
        incoming(spread(1, "node", SOFT, FOO, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}),
        POLICY_NODES,
        [],
        POLICY_PODS,
        [66, 100, 100],
        {},
    ),
    (
        "affinity-policy-honored-affinity",
        incoming(spread(1, "node", SOFT, FOO), affinity_in=("foo", [""])),
        POLICY_NODES,
        [],
        POLICY_PODS,
        [0, 33, 100],
        {},
    ),
    (
        "affinity-policy-ignored-affinity",
        incoming(spread(1, "node", SOFT, FOO, nodeAffinityPolicy="Ignore"), affinity_in=("foo", [""])),
        POLICY_NODES,
        [],
        POLICY_PODS,
        [66, 100, 100],
        {},
    ),
    (
        "taints-policy-honored",
        incoming(spread(1, "node", SOFT, FOO, nodeTaintsPolicy="Honor")),
        TAINT_NODES,
        [],
        POLICY_PODS,
        [0, 33, 100],
        {},
    ),
    (
        "taints-policy-ignored",
        incoming(spread(1, "node", SOFT, FOO)),
        TAINT_NODES,
        [],
        POLICY_PODS,
        [66, 100, 100],
        {},
    ),
    (
        "match-label-keys-empty-selectors",
        incoming(
            spread(1, "zone", SOFT, {}, matchLabelKeys=["foo"]),
            spread(1, HOSTNAME, SOFT, {}, matchLabelKeys=["bar"]),
            labels={"foo": "", "bar": ""},
        ),
        MLK_NODES,
        [],
        MLK_PODS,
        [60, 20, 60, 100],
        {},
    ),
    (
        "match-label-keys-with-selector",
        incoming(
            ZONE_FOO_SOFT,
            spread(1, HOSTNAME, SOFT, BAR, matchLabelKeys=["baz"]),
            labels={"foo": "", "bar": "", "baz": ""},
        ),
        MLK_NODES,
        [],
        [
            bound("p-a1", "node-a", {"foo": ""}),
            bound("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}),
            bound("p-c1", "node-c", {"foo": ""}),
            bound("p-c2", "node-c", {"bar": ""}),
            bound("p-d3", "node-c", {"bar": "", "baz": ""}),
        ],
        [60, 20, 60, 100],
        {},
    ),
]


@pytest.mark.parametrize(
    ("pod", "candidates", "failed", "pods", "want", "kw"),
    [pytest.param(*c[1:], id=c[0]) for c in SCORE_CASES],
)
def test_score_and_normalize(
    pod: PodInfo,
    candidates: list[Any],
    failed: list[Any],
    pods: list[Any],
    want: list[int],
    kw: dict[str, Any],
) -> None:
    assert run_scores(pod, candidates, failed, pods, **kw) == want


@pytest.mark.parametrize(
    ("pod", "args", "selector_of", "nodes"),
    [
        pytest.param(
            PodInfo(bound("p", "", {})),
            Args((), "List"),
            None,
            [h("node-a"), h("node-b")],
            id="no-soft-constraints",
        ),
        pytest.param(
            PodInfo(bound("p", "", {"foo": "bar", "baz": "sup"})),
            Args(({"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT},), "List"),
            lambda pod: None,
            [node("node-a", {"planet": "mars"})],
            id="owner-does-not-match",
        ),
        pytest.param(
            PodInfo(bound("p", "", {"foo": ""})),
            SYSTEM,
            None,
            [h("node-a")],
            id="system-defaults-nothing-selects",
        ),
        pytest.param(incoming(HOST_FOO), SYSTEM, None, [], id="no-nodes"),
    ],
)
def test_pre_score_skips(pod: PodInfo, args: Args, selector_of: Any, nodes: list[Any]) -> None:
    snapshot = snapshot_of(nodes)
    kw = {"default_selector": selector_of} if selector_of else {}
    plugin = plugin_for(snapshot, args, **kw)
    rows = np.arange(len(nodes), dtype=np.int64)
    assert plugin.pre_score(CycleState(), pod, NodeSet(snapshot, rows)) == SKIP


@pytest.mark.parametrize(
    ("pod", "nodes", "args", "kw", "weights", "ignored"),
    [
        pytest.param(
            incoming(ZONE_FOO_SOFT, HOST_FOO),
            [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")],
            Args((), "List"),
            {},
            [math.log(4), math.log(5)],
            [False, False, False],
            id="normal",
        ),
        pytest.param(
            incoming(ZONE_FOO_SOFT, spread(1, HOSTNAME, SOFT, BAR)),
            [hz("node-a", "zone1"), hz("node-b", "zone1"), h("node-x")],
            Args((), "List"),
            {},
            [math.log(3), math.log(4)],
            [False, False, True],
            id="node-x-lacks-zone",
        ),
        pytest.param(
            PodInfo(bound("p", "", {"foo": "tar"})),
            [
                node("node-a", {HOSTNAME: "node-a", ZONE: "mars"}),
                node("node-b", {HOSTNAME: "node-b", ZONE: "mars"}),
                h("node-c"),
                h("node-d"),
            ],
            SYSTEM,
            {"default_selector": lambda pod: LabelSelector.parse(FOO)},
            [math.log(6), math.log(4)],
            [False] * 4,
            id="system-defaults-zone-less-nodes-are-a-zone",
        ),
    ],
)
def test_pre_score_weights_and_ignored_nodes(
    pod: PodInfo, nodes: list[Any], args: Args, kw: dict[str, Any], weights: list[float], ignored: list[bool]
) -> None:
    snapshot = snapshot_of(nodes)
    plugin = plugin_for(snapshot, args, **kw)
    state = CycleState()
    assert plugin.pre_score(state, pod, NodeSet(snapshot, np.arange(len(nodes), dtype=np.int64))) is None
    got = state.read(_PRE_SCORE_KEY)
    assert [s.weight for s in got.softs] == weights
    assert got.ignored.tolist() == ignored


# -- property tests: vectorised forms agree with per-node forms -----------------------------------------
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["zone", "rack", HOSTNAME]
SELECTORS: list[dict[str, Any] | None] = [
    {"matchLabels": {"app": "a"}},
    {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    None,
    {},
]


@st.composite
def clusters(draw: Any) -> tuple[list[Any], list[Any]]:
    nodes, pods = [], []
    for i in range(draw(st.integers(1, 9))):
        name = f"n{i}"
        labels = {
            k: draw(st.sampled_from(["", "v1", "v2", "v3"]))
            for k in ("zone", "rack")
            if draw(st.integers(0, 4))
        }
        if draw(st.integers(0, 5)):
            labels[HOSTNAME] = name
        if draw(st.booleans()):
            labels["foo"] = "x"
        nodes.append(node(name, labels, tainted=draw(st.integers(0, 3)) == 0))
        for j in range(draw(st.integers(0, 3))):
            app = draw(st.sampled_from(["a", "b", None]))
            ns = draw(st.sampled_from(["default", "default", "other"]))
            pods.append(
                bound(
                    f"p{i}-{j}",
                    name,
                    {"app": app} if app else {},
                    ns=ns,
                    terminating=draw(st.integers(0, 5)) == 0,
                )
            )
    return nodes, pods


@st.composite
def spreading_pods(draw: Any, action: str) -> PodInfo:
    constraints = []
    for key in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)):
        extra: dict[str, Any] = {}
        if draw(st.booleans()):
            extra["minDomains"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            extra["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
        if draw(st.booleans()):
            extra["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
        if draw(st.integers(0, 3)) == 0:
            extra["matchLabelKeys"] = ["app"]
        constraints.append(
            spread(draw(st.integers(1, 3)), key, action, draw(st.sampled_from(SELECTORS)), **extra)
        )
    app = draw(st.sampled_from(["a", "b", None]))
    return incoming(
        *constraints,
        labels={"app": app} if app else {},
        node_selector={"foo": "x"} if draw(st.booleans()) else None,
        tolerate_unschedulable=draw(st.booleans()),
    )


def _reference_counts(pod: PodInfo, constraints: Any, infos: Any) -> list[dict[str, int]]:
    out: list[dict[str, int]] = [{} for _ in constraints]
    required = required_affinity(pod)
    for n in infos:
        if not all(c.topology_key in n.labels for c in constraints):
            continue
        for i, c in enumerate(constraints):
            if node_included(c, pod, required, n):
                value = n.labels[c.topology_key]
                out[i][value] = out[i].get(value, 0) + count_matching(
                    n.pods.values(), c.selector, pod.namespace
                )
    return out


@SETTINGS
@given(cluster=clusters(), pod=spreading_pods("DoNotSchedule"), data=st.data())
def test_filter_rows_agrees_with_filter(cluster: Any, pod: PodInfo, data: Any) -> None:
    snapshot = snapshot_of(*cluster)
    plugin = plugin_for(snapshot)
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot.node_infos) == (None, None)
    constraints = pre_filter_state(state).constraints
    assert match_nums(pre_filter_state(state)) == _reference_counts(pod, constraints, snapshot.node_infos)
    if data.draw(st.booleans()):  # a nominated pod added, or a victim removed, on some node
        target = snapshot.node_infos[data.draw(st.integers(0, len(snapshot.node_infos) - 1))]
        other = PodInfo(bound("moved", target.name, {"app": data.draw(st.sampled_from(["a", "b"]))}))
        (plugin.add_pod if data.draw(st.booleans()) else plugin.remove_pod)(state, pod, other, target)
    rows = np.arange(len(snapshot.node_infos), dtype=np.int64)
    per_node = [plugin.filter(state, pod, n) is None for n in snapshot.node_infos]
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == per_node


@SETTINGS
@given(cluster=clusters(), data=st.data())
def test_score_rows_agrees_with_score(cluster: Any, data: Any) -> None:
    snapshot = snapshot_of(*cluster)
    system = data.draw(st.booleans())
    if system and data.draw(st.booleans()):
        pod = PodInfo(bound("p", "", {"app": "a"}))
        plugin = plugin_for(
            snapshot, SYSTEM, default_selector=lambda p: LabelSelector.parse({"matchLabels": {"app": "a"}})
        )
    else:
        pod = data.draw(spreading_pods(SOFT))
        plugin = plugin_for(snapshot, SYSTEM if system else Args((), "List"))
    size = len(snapshot.node_infos)
    picked = data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=size, unique=True))
    rows = np.array(sorted(picked), dtype=np.int64)
    state = CycleState()
    assert plugin.pre_score(state, pod, NodeSet(snapshot, rows)) is None
    per_node = np.array([plugin.score(state, pod, snapshot.node_infos[r]) for r in rows], dtype=np.int64)
    vector = plugin.score_rows(state, pod, snapshot.table, rows)
    assert vector.tolist() == per_node.tolist()
    plugin.normalize_score(state, pod, vector)
    assert all(0 <= s <= 100 for s in vector.tolist())


def test_invalid_soft_selector_fails_pre_score_only() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}
    pod = incoming(spread(1, "zone", SOFT, bad))
    snapshot = snapshot_of([hz("node-a", "zone1")])
    plugin = plugin_for(snapshot)
    assert plugin.pre_filter(CycleState(), pod, snapshot.node_infos) == (None, SKIP)
    with pytest.raises(ValueError, match="obtaining pod's soft topology spread constraints"):
        plugin.pre_score(CycleState(), pod, NodeSet(snapshot, np.arange(1, dtype=np.int64)))
