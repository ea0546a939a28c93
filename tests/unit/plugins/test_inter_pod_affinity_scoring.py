"""InterPodAffinity: pre-score, score and normalize.

Cases and expectations follow upstream's ``interpodaffinity/scoring_test.go`` (v1.37.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _affinity_kit import (
    NAMESPACES,
    affinity,
    all_rows,
    expr,
    node,
    plugin_for,
    pod,
    snapshot_of,
    term,
    weighted,
)

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status
from kopf_scheduler.plugins import inter_pod_affinity as ipa

CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}


def _sec(weight: int, topology: str, value: str, **kw: Any) -> dict[str, Any]:
    return weighted(weight, term(expr("security", "In", value), topology=topology, **kw))


STAY_S1_REGION = affinity(preferred=[_sec(5, "region", "S1")])
STAY_S2_REGION = affinity(preferred=[_sec(6, "region", "S2")])
AFFINITY3 = affinity(
    preferred=[
        weighted(8, term(expr("security", "NotIn", "S1"), expr("security", "In", "S2"), topology="region")),
        weighted(2, term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region")),
    ]
)
HARD = affinity(
    [
        term(expr("security", "In", "S1", "value2"), topology="region"),
        term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
    ]
)
AWAY_S1_AZ = affinity(preferred_anti=[_sec(5, "az", "S1")])
AWAY_S2_AZ = affinity(preferred_anti=[_sec(5, "az", "S2")])
STAY_S1_AWAY_S2 = affinity(preferred=[_sec(8, "region", "S1")], preferred_anti=[_sec(5, "az", "S2")])
NS_SELECTOR = {"namespaces": ["subteam2.team2"], "ns_selector": TEAM1}
AFFINITY_NS = affinity(preferred=[_sec(5, "region", "S1", **NS_SELECTOR)])
ANTI_NS = affinity(preferred_anti=[_sec(5, "region", "S1", **NS_SELECTOR)])
NOT_TEAM1 = {"matchExpressions": [expr("team", "NotIn", "team1")]}
AFFINITY_NEGATIVE_NS = affinity(preferred=[_sec(5, "region", "S1", ns_selector=NOT_TEAM1)])
ANTI_NEGATIVE_NS = affinity(preferred_anti=[_sec(5, "region", "S1", ns_selector=NOT_TEAM1)])
INVALID = affinity(
    preferred=[weighted(8, term(expr("security", "In", "{{.bad-value.}}"), topology="region"))]
)
INVALID_ANTI = affinity(
    preferred_anti=[weighted(5, term(expr("security", "In", "{{.bad-value.}}"), topology="az"))]
)


def _nodes(*labels: dict[str, str]) -> list[dict[str, Any]]:
    return [node(f"node{i + 1}", lab) for i, lab in enumerate(labels)]


def _on(
    node_name: str, labels: dict[str, str] | None = None, aff: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    return pod(f"e-{node_name}-{id(labels)}-{id(aff)}", labels, node=node_name, aff=aff, **kw)


def _scores(
    incoming: dict[str, Any], pods: list[dict[str, Any]], nodes: list[dict[str, Any]], args: ipa.Args
) -> tuple[Status | None, list[int]]:
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot, args, namespaces=NAMESPACES)
    state = CycleState()
    info = PodInfo(incoming)
    rows = all_rows(snapshot)
    status = plugin.pre_score(state, info, NodeSet(snapshot, rows))
    if status is not None:
        return status, []
    raw = [plugin.score(state, info, n) for n in snapshot.node_infos]
    assert plugin.score_rows(state, info, snapshot.table, rows).tolist() == raw
    scores = np.asarray(raw, dtype=np.int64)
    assert plugin.normalize_score(state, info, scores) is None
    return None, scores.tolist()


M = 100
PREFERRED = [
    ("no-affinity-anywhere", pod(labels=S1), [], _nodes(CHINA, INDIA, AZ1), SKIP, []),
    (
        "affinity-topology-and-pods",
        pod(labels=S1, aff=STAY_S1_REGION),
        [_on("node1", S1), _on("node2", S2), _on("node3", S1)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [M, 0, 0],
    ),
    (
        "affinity-whole-domain",
        pod(aff=STAY_S1_REGION),
        [_on("node1", S1)],
        _nodes(CHINA, CHINA_AZ1, INDIA),
        None,
        [M, M, 0],
    ),
    (
        "affinity-more-matches-in-region",
        pod(labels=S1, aff=STAY_S2_REGION),
        [
            _on("node1", S2),
            _on("node1", S2),
            _on("node2", S2),
            _on("node3", S2),
            _on("node4", S2),
            _on("node5", S2),
        ],
        _nodes(CHINA, INDIA, CHINA, CHINA, INDIA),
        None,
        [M, 0, M, M, 0],
    ),
    (
        "affinity-operators",
        pod(labels=S1, aff=AFFINITY3),
        [_on("node1", S1), _on("node2", S2), _on("node3", S1)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [20, M, 0],
    ),
    (
        "symmetry-preferred",
        pod(labels=S2),
        [_on("node1", S1, STAY_S1_REGION), _on("node2", S2, STAY_S2_REGION)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [0, M, 0],
    ),
    (
        "symmetry-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1"),
        [_on("node1", S1, AFFINITY_NS), _on("node2", S2, STAY_S2_REGION)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [M, 0, 0],
    ),
    (
        "anti-symmetry-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1"),
        [_on("node1", S1, ANTI_NS), _on("node2", S2, STAY_S2_REGION)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [0, M, M],
    ),
    (
        "symmetry-required",
        pod(labels=S1),
        [_on("node1", S1, HARD), _on("node2", S2, HARD)],
        _nodes(CHINA, INDIA, AZ1),
        None,
        [M, M, 0],
    ),
    (
        "anti-affinity-avoid-matching-pods",
        pod(labels=S1, aff=AWAY_S1_AZ),
        [_on("node1", S1), _on("node2", S2)],
        _nodes(AZ1, CHINA),
        None,
        [0, M],
    ),
    (
        "anti-affinity-no-topology-key-wins",
        pod(labels=S1, aff=AWAY_S1_AZ),
        [_on("node1", S1), _on("node2", S1)],
        _nodes(AZ1, CHINA),
        None,
        [0, M],
    ),
    (
        "anti-affinity-fewer-matches-wins",
        pod(labels=S1, aff=AWAY_S1_AZ),
        [_on("node1", S1), _on("node1", S1), _on("node2", S2)],
        _nodes(AZ1, INDIA),
        None,
        [0, M],
    ),
    (
        "anti-symmetry",
        pod(labels=S2),
        [_on("node1", S1, AWAY_S2_AZ), _on("node2", S2, AWAY_S1_AZ)],
        _nodes(AZ1, AZ2),
        None,
        [0, M],
    ),
    (
        "affinity-and-anti-affinity",
        pod(labels=S1, aff=STAY_S1_AWAY_S2),
        [_on("node1", S1), _on("node2", S1)],
        _nodes(CHINA, AZ1),
        None,
        [M, 0],
    ),
    (
        "affinity-and-anti-affinity-same-labels",
        pod(labels=S1, aff=STAY_S1_AWAY_S2),
        [
            _on("node1", S1),
            _on("node1", S1),
            _on("node2", S1),
            _on("node3", S1),
            _on("node3", S1),
            _on("node4", S1),
            _on("node5", S1),
        ],
        _nodes(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA),
        None,
        [M, 0, M, M, 0],
    ),
    (
        "affinity-anti-affinity-and-symmetry",
        pod(labels=S1, aff=STAY_S1_AWAY_S2),
        [
            _on("node1", S1),
            _on("node2", S2),
            _on("node3", None, STAY_S1_AWAY_S2),
            _on("node4", None, AWAY_S1_AZ),
        ],
        _nodes(CHINA, AZ1, INDIA, AZ2),
        None,
        [M, 0, M, 0],
    ),
    (
        "partial-domain-with-affinity-pods",
        pod(labels=S1),
        [_on("node1", S1), _on("node2", None, STAY_S1_AWAY_S2)],
        _nodes(CHINA, CHINA),
        None,
        [0, 0],
    ),
    (
        "invalid-affinity",
        pod(aff=INVALID),
        [],
        _nodes(CHINA, CHINA),
        Status(
            Code.ERROR,
            (
                "failed to parse pod: preferredAffinityTerms: values[0][security]: Invalid value: "
                '"{{.bad-value.}}"',
            ),
        ),
        [],
    ),
    (
        "invalid-anti-affinity",
        pod(aff=INVALID_ANTI),
        [],
        _nodes(CHINA, CHINA),
        Status(
            Code.ERROR,
            (
                "failed to parse pod: preferredAntiAffinityTerms: values[0][security]: Invalid value: "
                '"{{.bad-value.}}"',
            ),
        ),
        [],
    ),
    (
        "affinity-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1", aff=AFFINITY_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team2"),
            _on("node2", S1, namespace="subteam2.team1"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [M, 0],
    ),
    (
        "affinity-namespace-selector-and-names",
        pod(labels=S1, namespace="subteam1.team1", aff=AFFINITY_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam2.team2"),
            _on("node2", S1, namespace="subteam2.team1"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [M, 0],
    ),
    (
        "anti-affinity-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1", aff=ANTI_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team2"),
            _on("node2", S1, namespace="subteam2.team1"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [0, M],
    ),
    (
        "anti-affinity-namespace-selector-and-names",
        pod(labels=S1, namespace="subteam1.team1", aff=ANTI_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam2.team2"),
            _on("node2", S1, namespace="subteam2.team1"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [0, M],
    ),
    # upstream's "(Anti)Affinity with pods correctly enforcing negative NamespaceSelector" (v1.37.2): the
    # merged term's selector matches no namespace, so NotIn team1 sees only the team2 namespaces
    (
        "affinity-negative-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1", aff=AFFINITY_NEGATIVE_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node2", S1, namespace="subteam1.team2"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [0, M],
    ),
    (
        "anti-affinity-negative-namespace-selector",
        pod(labels=S1, namespace="subteam1.team1", aff=ANTI_NEGATIVE_NS),
        [
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node1", S1, namespace="subteam1.team1"),
            _on("node2", S1, namespace="subteam1.team2"),
        ],
        _nodes(CHINA, INDIA),
        None,
        [M, 0],
    ),
    ("no-nodes", pod(labels=S2), [], [], SKIP, []),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "pre_score", "expected"),
    [c[1:] for c in PREFERRED],
    ids=[c[0] for c in PREFERRED],
)
def test_score_preferred_affinity(
    incoming: dict[str, Any],
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pre_score: Status | None,
    expected: list[int],
) -> None:
    status, scores = _scores(incoming, pods, nodes, ipa.Args())
    if pre_score is not None and pre_score.code == Code.ERROR:
        assert status is not None and status.code == Code.ERROR
        assert pre_score.reasons[0] in status.message()
        return
    assert status == pre_score
    assert scores == expected


@pytest.mark.parametrize(
    ("ignore", "pre_score", "expected"),
    [(True, SKIP, []), (False, None, [0, M])],
    ids=["ignore-preferred-terms-of-existing-pods", "consider-preferred-terms-of-existing-pods"],
)
def test_score_ignore_preferred_terms_of_existing_pods(
    ignore: bool, pre_score: Status | None, expected: list[int]
) -> None:
    pods = [_on("node1", S1, STAY_S1_AWAY_S2), _on("node2", S2, STAY_S2_REGION)]
    args = ipa.Args(ignore_preferred_terms_of_existing_pods=ignore)
    assert _scores(pod(labels=S2), pods, _nodes(CHINA, INDIA), args) == (pre_score, expected)


SERVICE_S1 = {"service": "S1"}
HARD_NS = affinity(
    [
        term(
            expr("service", "In", "S1"),
            topology="region",
            namespaces=["default", "subteam2.team2"],
            ns_selector=TEAM1,
        )
    ]
)
HARD_WEIGHT = [
    ("default-weight", "default", 1, None, [M, M, 0]),
    ("zero-weight", "default", 0, SKIP, []),
    ("no-matching-namespace", "subteam1.team2", 1, SKIP, []),
    ("matching-namespace-selector", "subteam1.team1", 1, None, [M, M, 0]),
    ("matching-namespaces", "subteam2.team2", 1, None, [M, M, 0]),
]


@pytest.mark.parametrize(
    ("namespace", "weight", "pre_score", "expected"),
    [c[1:] for c in HARD_WEIGHT],
    ids=[c[0] for c in HARD_WEIGHT],
)
def test_score_hard_pod_affinity_weight(
    namespace: str, weight: int, pre_score: Status | None, expected: list[int]
) -> None:
    pods = [_on("node1", None, HARD_NS), _on("node2", None, HARD_NS)]
    incoming = pod(labels=SERVICE_S1, namespace=namespace)
    args = ipa.Args(hard_pod_affinity_weight=weight)
    assert _scores(incoming, pods, _nodes(CHINA, INDIA, AZ1), args) == (pre_score, expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([5, 5, 5], [0, 0, 0]),
        ([-5, 0, 5], [0, 50, 100]),
        ([-8, -5, 3], [0, 27, 100]),
        ([1, 2, 3, 4], [0, 33, 66, 100]),
        ([], []),
    ],
    ids=["all-equal", "symmetric", "negative-min", "thirds-truncate", "empty"],
)
def test_normalize_score(raw: list[int], expected: list[int]) -> None:
    state = CycleState()
    incoming = PodInfo(pod(labels=S1, aff=STAY_S1_REGION))
    snapshot = snapshot_of(_nodes(CHINA), [_on("node1", S1)])
    plugin = plugin_for(snapshot)
    assert plugin.pre_score(state, incoming, NodeSet(snapshot, all_rows(snapshot))) is None
    scores = np.asarray(raw, dtype=np.int64)
    assert plugin.normalize_score(state, incoming, scores) is None
    assert scores.tolist() == expected
