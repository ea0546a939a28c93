"""InterPodAffinity: args, pre-filter (and its state), filter, add/remove-pod extensions, queueing hints.

Cases and expectations follow upstream's ``interpodaffinity/{filtering,plugin}_test.go`` (v1.34).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _affinity_kit import NAMESPACES, affinity, all_rows, expr, node, plugin_for, pod, snapshot_of, term

from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import Namespace
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, error
from kopf_scheduler.plugins import inter_pod_affinity as ipa
from kopf_scheduler.plugins.inter_pod_affinity import index as index_module
from kopf_scheduler.plugins.inter_pod_affinity.plugin import _FILTER_KEY
from kopf_scheduler.plugins.inter_pod_affinity.terms import pod_terms
from kopf_scheduler.testing import make_pod

AFFINITY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH,))
ANTI = Status(Code.UNSCHEDULABLE, (ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,))
EXISTING = Status(Code.UNSCHEDULABLE, ("node(s) didn't satisfy existing pods anti-affinity rules",))
BAD_VALUE = (
    'values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty string or consist '
    "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
    "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

SEC_SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
EXISTING_POD = pod("e", SEC_SCAN, node="node1")
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}
NOT_TEAM2 = expr("team", "NotIn", "team2")
NO_TEAM = expr("team", "DoesNotExist")


def _in(key: str, topology: str, *values: str, **kw: Any) -> dict[str, Any]:
    return term(expr(key, "In", *values), topology=topology, **kw)


def _exists(key: str, topology: str) -> dict[str, Any]:
    return term(expr(key, "Exists"), topology=topology)


def _run(
    incoming: dict[str, Any], pods: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> tuple[Status | None, list[Status | None], ipa.InterPodAffinity, CycleState]:
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot, namespaces=NAMESPACES)
    state = CycleState()
    info = PodInfo(incoming)
    _, status = plugin.pre_filter(state, info, snapshot.node_infos)
    if status is not None:
        return status, [], plugin, state
    verdicts = [plugin.filter(state, info, n) for n in snapshot.node_infos]
    vector = plugin.filter_rows(state, info, snapshot.table, all_rows(snapshot))
    assert vector.tolist() == [v is None for v in verdicts]
    return None, verdicts, plugin, state


SINGLE_NODE = [
    ("no-affinity-no-pods", pod(), [], SKIP, None),
    (
        "affinity-in-matches",
        pod(labels=S1, aff=affinity([_in("service", "region", "securityscan", "value2")])),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "affinity-not-in-matches",
        pod(
            labels=S1,
            aff=affinity([term(expr("service", "NotIn", "securityscan3", "value3"), topology="region")]),
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "affinity-other-namespace",
        pod(
            labels=S1,
            aff=affinity([_in("service", "", "securityscan", "value2", namespaces=["DiffNameSpace"])]),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="ns")],
        None,
        AFFINITY,
    ),
    (
        "affinity-selector-mismatch",
        pod(labels=SEC_SCAN, aff=affinity([_in("service", "", "antivirusscan", "value2")])),
        [EXISTING_POD],
        None,
        AFFINITY,
    ),
    (
        "affinity-several-terms-match",
        pod(
            labels=S1,
            aff=affinity(
                [
                    term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
                    term(
                        expr("service", "In", "securityscan"),
                        expr("service", "NotIn", "WrongValue"),
                        topology="region",
                    ),
                ]
            ),
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "affinity-expressions-are-anded",
        pod(
            labels=S1,
            aff=affinity(
                [
                    term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
                    term(
                        expr("service", "In", "securityscan2"),
                        expr("service", "NotIn", "WrongValue"),
                        topology="region",
                    ),
                ]
            ),
        ),
        [EXISTING_POD],
        None,
        AFFINITY,
    ),
    (
        "affinity-and-anti-affinity-satisfied",
        pod(
            labels=S1,
            aff=affinity(
                [_in("service", "region", "securityscan", "value2")],
                [_in("service", "node", "antivirusscan", "value2")],
            ),
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "existing-anti-affinity-not-matching",
        pod(
            labels=S1,
            aff=affinity(
                [_in("service", "region", "securityscan", "value2")],
                [_in("service", "node", "antivirusscan", "value2")],
            ),
        ),
        [
            pod(
                "e",
                SEC_SCAN,
                node="node1",
                aff=affinity(anti=[_in("service", "node", "antivirusscan", "value2")]),
            )
        ],
        None,
        None,
    ),
    (
        "anti-affinity-violated",
        pod(
            labels=S1,
            aff=affinity(
                [_in("service", "region", "securityscan", "value2")],
                [_in("service", "zone", "securityscan", "value2")],
            ),
        ),
        [EXISTING_POD],
        None,
        ANTI,
    ),
    (
        "existing-anti-affinity-violated",
        pod(
            labels=SEC_SCAN,
            aff=affinity(
                [_in("service", "region", "securityscan", "value2")],
                [_in("service", "node", "antivirusscan", "value2")],
            ),
        ),
        [
            pod(
                "e",
                SEC_SCAN,
                node="node1",
                aff=affinity(anti=[_in("service", "zone", "securityscan", "value2")]),
            )
        ],
        None,
        EXISTING,
    ),
    (
        "own-label-matching-elsewhere-only",
        pod(
            labels=SEC_SCAN,
            aff=affinity([term(expr("service", "NotIn", "securityscan", "value2"), topology="region")]),
        ),
        [pod("e", SEC_SCAN, node="node2")],
        None,
        AFFINITY,
    ),
    (
        "existing-anti-affinity-without-own-terms",
        pod(labels=SEC_SCAN),
        [
            pod(
                "e",
                SEC_SCAN,
                node="node1",
                aff=affinity(anti=[_in("service", "zone", "securityscan", "value2")]),
            )
        ],
        None,
        EXISTING,
    ),
    (
        "existing-anti-affinity-not-matching-skips",
        pod(labels=SEC_SCAN),
        [
            pod(
                "e",
                SEC_SCAN,
                node="node1",
                aff=affinity(
                    anti=[term(expr("service", "NotIn", "securityscan", "value2"), topology="zone")]
                ),
            )
        ],
        SKIP,
        None,
    ),
    (
        "anti-affinity-matches-existing-which-repels-too",
        pod(
            labels=SEC_SCAN, aff=affinity(anti=[_exists("service", "region"), _exists("security", "region")])
        ),
        [pod("e", S1, node="node1", aff=affinity(anti=[_exists("security", "zone")]))],
        None,
        ANTI,
    ),
    (
        "symmetry-a1",
        pod(labels=SEC_SCAN, aff=affinity(anti=[_exists("service", "zone"), _exists("security", "zone")])),
        [pod("e", S1, node="node1", aff=affinity(anti=[_exists("security", "zone")]))],
        None,
        ANTI,
    ),
    (
        "symmetry-a2",
        pod(labels=S1, aff=affinity(anti=[_exists("security", "zone")])),
        [
            pod(
                "e",
                SEC_SCAN,
                node="node1",
                aff=affinity(anti=[_exists("service", "zone"), _exists("security", "zone")]),
            )
        ],
        None,
        EXISTING,
    ),
    (
        "symmetry-b1",
        pod(
            labels={"abc": "", "xyz": ""}, aff=affinity(anti=[_exists("abc", "zone"), _exists("def", "zone")])
        ),
        [
            pod(
                "e",
                {"def": "", "xyz": ""},
                node="node1",
                aff=affinity(anti=[_exists("abc", "zone"), _exists("def", "zone")]),
            )
        ],
        None,
        ANTI,
    ),
    (
        "symmetry-b2",
        pod(
            labels={"def": "", "xyz": ""}, aff=affinity(anti=[_exists("abc", "zone"), _exists("def", "zone")])
        ),
        [
            pod(
                "e",
                {"abc": "", "xyz": ""},
                node="node1",
                aff=affinity(anti=[_exists("abc", "zone"), _exists("def", "zone")]),
            )
        ],
        None,
        ANTI,
    ),
    (
        "invalid-label-value-first-term",
        pod(
            labels=SEC_SCAN,
            aff=affinity(
                [
                    _in("service", "region", "{{.bad-value.}}"),
                    _in("service", "node", "antivirusscan", "value2"),
                ]
            ),
        ),
        [],
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"parsing pod: requiredAffinityTerms: {BAD_VALUE}",)),
        None,
    ),
    (
        "invalid-label-value-second-term",
        pod(
            labels=SEC_SCAN,
            aff=affinity([_in("service", "region", "foo"), _in("service", "node", "{{.bad-value.}}")]),
        ),
        [],
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"parsing pod: requiredAffinityTerms: {BAD_VALUE}",)),
        None,
    ),
    (
        "affinity-namespace-selector-matches",
        pod(labels=S1, aff=affinity([_in("service", "region", "securityscan", "value2", ns_selector=TEAM1)])),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team1")],
        None,
        None,
    ),
    (
        "affinity-namespace-selector-mismatch",
        pod(labels=S1, aff=affinity([_in("service", "region", "securityscan", "value2", ns_selector=TEAM1)])),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team2")],
        None,
        AFFINITY,
    ),
    (
        "anti-affinity-namespace-selector-matches",
        pod(
            labels=S1,
            namespace="subteam1.team1",
            aff=affinity(anti=[_in("service", "zone", "securityscan", "value2", ns_selector=TEAM1)]),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam2.team1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity-empty-namespace-selector-matches-all",
        pod(
            labels=S1,
            namespace="subteam1.team1",
            aff=affinity(anti=[_in("service", "zone", "securityscan", "value2", ns_selector={})]),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam2.team1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity-namespace-selector-mismatch",
        pod(
            labels=S1,
            namespace="subteam1.team1",
            aff=affinity(anti=[_in("service", "zone", "securityscan", "value2", ns_selector=TEAM1)]),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team2")],
        None,
        None,
    ),
    # v1.37.2: the merged term's selector matches no namespace (mergeAffinityTermNamespacesIfNotEmpty takes
    # the term by pointer), so a selector the empty label set satisfies sees only the namespaces it picks
    (
        "anti-affinity-negative-namespace-selector-sees-only-picked-namespaces",
        pod(
            labels=S1,
            namespace="subteam1.team1",
            aff=affinity(
                anti=[_in("service", "zone", "securityscan", ns_selector={"matchExpressions": [NOT_TEAM2]})]
            ),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team2")],
        None,
        None,
    ),
    (
        "affinity-namespace-selector-picking-no-namespace-sees-none",
        pod(
            labels=S1,
            aff=affinity(
                [_in("service", "region", "securityscan", ns_selector={"matchExpressions": [NO_TEAM]})]
            ),
        ),
        [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team2")],
        None,
        AFFINITY,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "pre_filter", "expected"),
    [case[1:] for case in SINGLE_NODE],
    ids=[case[0] for case in SINGLE_NODE],
)
def test_filter_single_node(
    incoming: dict[str, Any], pods: list[dict[str, Any]], pre_filter: Status | None, expected: Status | None
) -> None:
    status, verdicts, _, _ = _run(incoming, pods, [NODE1])
    assert status == pre_filter
    if status is None:
        assert verdicts == [expected]


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def _three(
    labels_a: dict[str, str], labels_b: dict[str, str], labels_c: dict[str, str]
) -> list[dict[str, Any]]:
    return [node("nodeA", labels_a), node("nodeB", labels_b), node("nodeC", labels_c)]


def _hosts(zone_b: str = "z2", region: str = "r1") -> list[dict[str, Any]]:
    return [
        node("nodeA", {"region": region, "zone": "z1", "hostname": "nodeA"}),
        node("nodeB", {"region": region, "zone": zone_b, "hostname": "nodeB"}),
    ]


MULTIPLE_NODES = [
    (
        "same-domain-as-matching-pod",
        pod(aff=affinity([_in("foo", "region", "bar")])),
        [pod("p1", {"foo": "bar"}, node="nodeA")],
        _three(CHINA, CHINA_AZ1, INDIA),
        None,
        [None, None, AFFINITY],
    ),
    (
        "first-pod-of-a-group-with-self-affinity",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            aff=affinity([_in("foo", "zone", "bar"), _in("service", "zone", "securityscan")]),
        ),
        [pod("p1", {"foo": "bar"}, node="nodeA")],
        [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})],
        None,
        [None, None],
    ),
    (
        "first-pod-of-a-group-needs-topology-keys",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            aff=affinity([_in("foo", "zone", "bar"), _in("service", "zone", "securityscan")]),
        ),
        [pod("p1", {"foo": "bar"}, node="nodeA")],
        [
            node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        None,
        [AFFINITY, AFFINITY],
    ),
    (
        "anti-affinity-covers-the-domain",
        pod(aff=affinity(anti=[_in("foo", "region", "abc")])),
        [pod("e", {"foo": "abc"}, node="nodeA")],
        [
            node("nodeA", {"region": "r1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ],
        None,
        [ANTI, ANTI],
    ),
    (
        "anti-affinity-any-term",
        pod(aff=affinity(anti=[_in("foo", "region", "abc"), _in("service", "zone", "securityscan")])),
        [pod("e", {"foo": "abc", "service": "securityscan"}, node="nodeA")],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
        ],
        None,
        [ANTI, ANTI],
    ),
    (
        "anti-affinity-other-region-fits",
        pod(aff=affinity(anti=[_in("foo", "region", "abc")])),
        [pod("e", {"foo": "abc"}, node="nodeA")],
        _three(CHINA, CHINA_AZ1, INDIA),
        None,
        [ANTI, ANTI, None],
    ),
    (
        "anti-affinity-other-namespace-ignored",
        pod(labels={"foo": "123"}, namespace="NS1", aff=affinity(anti=[_in("foo", "region", "bar")])),
        [
            pod("e1", {"foo": "bar"}, node="nodeA", namespace="NS1"),
            pod("e2", node="nodeC", namespace="NS2", aff=affinity(anti=[_in("foo", "region", "123")])),
        ],
        _three(CHINA, CHINA_AZ1, INDIA),
        None,
        [ANTI, ANTI, None],
    ),
    (
        "existing-term-with-missing-topology-key",
        pod(labels={"foo": ""}),
        [pod("e", node="nodeA", aff=affinity(anti=[_exists("foo", "invalid-node-label")]))],
        _hosts(zone_b="z1"),
        SKIP,
        [],
    ),
    (
        "incoming-term-with-missing-topology-key",
        pod(node="nodeA", aff=affinity(anti=[_exists("foo", "invalid-node-label")])),
        [pod("e", {"foo": ""}, node="nodeA")],
        _hosts(zone_b="z1"),
        None,
        [None, None],
    ),
    (
        "violates-existing-terms-everywhere",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod("e1", node="nodeA", aff=affinity(anti=[_exists("foo", "zone")])),
            pod("e2", node="nodeA", aff=affinity(anti=[_exists("bar", "region")])),
        ],
        _hosts(),
        None,
        [EXISTING, EXISTING],
    ),
    (
        "violates-one-own-term-everywhere",
        pod(aff=affinity(anti=[_exists("foo", "zone"), _exists("bar", "region")])),
        [pod("e1", {"foo": ""}, node="nodeA"), pod("e2", {"bar": ""}, node="nodeB")],
        _hosts(),
        None,
        [ANTI, ANTI],
    ),
    (
        "existing-terms-need-selector-and-key",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(
                "e",
                node="nodeA",
                aff=affinity(anti=[_exists("foo", "invalid-node-label"), _exists("bar", "zone")]),
            )
        ],
        _hosts(),
        None,
        [EXISTING, None],
    ),
    (
        "own-terms-need-selector-and-key",
        pod(aff=affinity(anti=[_exists("foo", "invalid-node-label"), _exists("bar", "zone")])),
        [pod("podA", {"foo": "", "bar": ""}, node="nodeA")],
        _hosts(),
        None,
        [ANTI, None],
    ),
    (
        "existing-terms-all-keys-valid",
        pod(labels={"foo": "", "bar": ""}),
        [pod("e", node="nodeA", aff=affinity(anti=[_exists("foo", "region"), _exists("bar", "zone")]))],
        _hosts(),
        None,
        [EXISTING, EXISTING],
    ),
    (
        "own-terms-all-keys-valid",
        pod(aff=affinity(anti=[_exists("foo", "region"), _exists("bar", "zone")])),
        [pod("e", {"foo": "", "bar": ""}, node="nodeA")],
        _hosts(),
        None,
        [ANTI, ANTI],
    ),
    (
        "existing-terms-on-two-nodes",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod("e1", node="nodeA", aff=affinity(anti=[_exists("foo", "zone"), _exists("labelA", "zone")])),
            pod("e2", node="nodeB", aff=affinity(anti=[_exists("bar", "zone"), _exists("labelB", "zone")])),
        ],
        [*_hosts(), node("nodeC", {"region": "r1", "zone": "z3", "hostname": "nodeC"})],
        None,
        [EXISTING, EXISTING, None],
    ),
    (
        "affinity-terms-matched-by-one-pod",
        pod(aff=affinity([_exists("foo", "region"), _exists("bar", "zone")])),
        [pod("pod1", {"foo": "", "bar": ""}, node="nodeA")],
        _hosts(zone_b="z1"),
        None,
        [None, None],
    ),
    (
        "affinity-terms-matched-by-different-pods",
        pod(aff=affinity([_exists("foo", "region"), _exists("bar", "zone")])),
        [pod("pod1", {"foo": ""}, node="nodeA"), pod("pod2", {"bar": ""}, node="nodeB")],
        _hosts(),
        None,
        [AFFINITY, AFFINITY],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "pre_filter", "expected"),
    [case[1:] for case in MULTIPLE_NODES],
    ids=[case[0] for case in MULTIPLE_NODES],
)
def test_filter_multiple_nodes(
    incoming: dict[str, Any],
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pre_filter: Status | None,
    expected: list[Status | None],
) -> None:
    status, verdicts, _, _ = _run(incoming, pods, nodes)
    assert status == pre_filter
    if status is None:
        assert verdicts == expected


def test_filter_without_pre_filter_state() -> None:
    snapshot = snapshot_of([NODE1])
    plugin = plugin_for(snapshot)
    got = plugin.filter(CycleState(), PodInfo(pod()), snapshot.node_infos[0])
    assert got == error('error reading "PreFilterInterPodAffinity" from cycleState: not found')


def test_unknown_namespaces_pick_nothing_but_empty_selector_picks_all() -> None:
    nodes = [NODE1]
    existing = [pod("e", SEC_SCAN, node="node1", namespace="subteam1.team1")]
    snapshot = snapshot_of(nodes, existing)
    plugin = plugin_for(snapshot)  # no namespace lister: no namespace labels known
    for selector, expected in ((TEAM1, AFFINITY), ({}, None)):
        incoming = PodInfo(
            pod(labels=S1, aff=affinity([_in("service", "region", "securityscan", ns_selector=selector)]))
        )
        state = CycleState()
        assert plugin.pre_filter(state, incoming, snapshot.node_infos) == (None, None)
        assert plugin.filter(state, incoming, snapshot.node_infos[0]) == expected


def test_negative_namespace_selector_ignores_pods_of_namespaces_it_excludes() -> None:
    """Upstream's ``TestFastTrackInterPodAffinity`` step 3 (v1.37.2, gate off): anti-affinity to app=blocked
    in namespaces without a "team" label; the only such pod is in blue-ns (team=blue), so node-1 fits."""
    nodes = [
        node("node-1", {"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "zone-a"}),
        node("node-2", {"kubernetes.io/hostname": "node-2", "topology.kubernetes.io/zone": "zone-b"}),
    ]
    existing = [
        pod("pod-no-rules-foo", {"app": "foo"}, node="node-1"),
        pod(
            "pod-in-ns-with-team-label",
            {"app": "blocked", "team": "blue"},
            node="node-1",
            namespace="blue-ns",
        ),
        pod("pod-no-rules-bar", {"app": "bar"}, node="node-2"),
    ]
    incoming = PodInfo(
        pod(
            "pod-3",
            {"app": "baz"},
            namespace="other",
            aff=affinity(
                anti=[
                    _in(
                        "app",
                        "topology.kubernetes.io/zone",
                        "blocked",
                        ns_selector={"matchExpressions": [NO_TEAM]},
                    )
                ]
            ),
        )
    )
    snapshot = snapshot_of(nodes, existing)
    plugin = plugin_for(snapshot, namespaces={"default": {}, "other": {}, "blue-ns": {"team": "blue"}})
    state = CycleState()
    assert plugin.pre_filter(state, incoming, snapshot.node_infos) == (None, None)
    assert plugin.filter(state, incoming, snapshot.node_infos[0]) is None


# -- pre-filter state and add/remove-pod ----------------------------------------------------------------
REGION_FOO_BAR = term(expr("foo", "In", "bar"), topology="region")
COMPLEX = [
    term(expr("foo", "In", "bar", "buzz"), topology="region"),
    term(expr("service", "NotIn", "bar", "security", "test"), topology="zone"),
]
ADD_REMOVE_NODES = [
    node("nodeA", {"region": "r1", "zone": "z11"}),
    node("nodeB", {"region": "r1", "zone": "z12"}),
    node("nodeC", {"region": "r2", "zone": "z21"}),
]
ADD_REMOVE = [
    (
        "anti-affinity",
        pod("pending", {"foo": "bar"}, aff=affinity(anti=[REGION_FOO_BAR])),
        [
            pod("p1", {"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", aff=affinity(anti=[REGION_FOO_BAR])),
        ],
        pod("addedPod", {"foo": "bar"}, node="nodeB", aff=affinity(anti=[REGION_FOO_BAR])),
        {("region", "r1"): 2},
        {},
    ),
    (
        "anti-affinity-two-terms",
        pod("pending", {"foo": "bar"}, aff=affinity(anti=COMPLEX)),
        [
            pod("p1", {"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", aff=affinity(anti=[REGION_FOO_BAR])),
        ],
        pod("addedPod", {"foo": "bar"}, node="nodeA", aff=affinity(anti=COMPLEX)),
        {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
        {},
    ),
    (
        "affinity-two-terms",
        pod("pending", {"foo": "bar"}, aff=affinity(COMPLEX)),
        [
            pod("p1", {"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", aff=affinity(COMPLEX, [REGION_FOO_BAR])),
        ],
        pod("addedPod", {"foo": "bar"}, node="nodeA", aff=affinity(anti=COMPLEX)),
        {},
        {("region", "r1"): 2, ("zone", "z11"): 2},
    ),
]


def _state_of(pending: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[Any, CycleState, Any]:
    snapshot = snapshot_of(ADD_REMOVE_NODES, pods)
    plugin = plugin_for(snapshot)
    state = CycleState()
    assert plugin.pre_filter(state, PodInfo(pending), snapshot.node_infos) == (None, None)
    return plugin, state, snapshot


def _counts(found: Any) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int]]:
    return found.anti_counts.as_dict(), found.affinity_counts.as_dict(), found.existing_counts.as_dict()


@pytest.mark.parametrize(
    ("pending", "existing", "added", "want_anti", "want_affinity"),
    [case[1:] for case in ADD_REMOVE],
    ids=[case[0] for case in ADD_REMOVE],
)
def test_pre_filter_add_and_remove_pod(
    pending: dict[str, Any],
    existing: list[dict[str, Any]],
    added: dict[str, Any],
    want_anti: dict[Any, int],
    want_affinity: dict[Any, int],
) -> None:
    _, all_state, _ = _state_of(pending, [*existing, added])
    plugin, state, snapshot = _state_of(pending, existing)
    original = _counts(state.read(_FILTER_KEY).clone())
    target = snapshot.get(added["spec"]["nodeName"])
    assert plugin.add_pod(state, PodInfo(pending), PodInfo(added), target) is None
    after = _counts(state.read(_FILTER_KEY))
    assert after[0] == want_anti
    assert after[1] == want_affinity
    assert after == _counts(all_state.read(_FILTER_KEY))
    assert plugin.remove_pod(state, PodInfo(pending), PodInfo(added), target) is None
    assert _counts(state.read(_FILTER_KEY)) == original


def test_pre_filter_state_clone_is_independent() -> None:
    plugin, state, snapshot = _state_of(
        pod("pending", {"foo": "bar"}, aff=affinity(anti=[REGION_FOO_BAR])), []
    )
    clone = state.clone()
    added = PodInfo(pod("a", {"foo": "bar"}, node="nodeA"))
    plugin.add_pod(clone, PodInfo(pod("pending")), added, snapshot.get("nodeA"))
    assert clone.read(_FILTER_KEY).anti_counts.as_dict() == {("region", "r1"): 1}
    assert state.read(_FILTER_KEY).anti_counts.as_dict() == {}


def _hostname_pod(*labels: str) -> dict[str, Any]:
    return pod("normal", dict.fromkeys(labels, ""), node="nodeA")


INCOMING_COUNTS = [
    ("no-pods", [], affinity([_exists("aaa", "hostname")], [_exists("aaa", "hostname")]), {}, {}),
    (
        "no-pod-matches",
        [_hostname_pod("bbb")],
        affinity([_exists("aaa", "hostname")], [_exists("aaa", "hostname")]),
        {},
        {},
    ),
    (
        "single-term",
        [_hostname_pod("aaa")],
        affinity([_exists("aaa", "hostname")], [_exists("aaa", "hostname")]),
        {("hostname", "nodeA"): 1},
        {("hostname", "nodeA"): 1},
    ),
    (
        "one-count-per-affinity-term",
        [_hostname_pod("aaa", "bbb")],
        affinity([_exists("aaa", "hostname"), _exists("bbb", "hostname")], [_exists("aaa", "hostname")]),
        {("hostname", "nodeA"): 2},
        {("hostname", "nodeA"): 1},
    ),
    (
        "affinity-needs-all-terms",
        [_hostname_pod("aaa")],
        affinity(
            [_exists("aaa", "hostname"), _exists("bbb", "hostname")],
            [_exists("aaa", "hostname"), _exists("bbb", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "anti-affinity-partial-match-1",
        [_hostname_pod("aaa", "bbb")],
        affinity(
            [_exists("aaa", "hostname"), _exists("ccc", "hostname")],
            [_exists("aaa", "hostname"), _exists("ccc", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "anti-affinity-partial-match-2",
        [_hostname_pod("bbb")],
        affinity(
            [_exists("aaa", "hostname"), _exists("bbb", "hostname")],
            [_exists("aaa", "hostname"), _exists("bbb", "hostname")],
        ),
        {},
        {("hostname", "nodeA"): 1},
    ),
]


@pytest.mark.parametrize(
    ("pods", "aff", "want_affinity", "want_anti"),
    [case[1:] for case in INCOMING_COUNTS],
    ids=[case[0] for case in INCOMING_COUNTS],
)
def test_pre_filter_incoming_counts(
    pods: list[dict[str, Any]], aff: dict[str, Any], want_affinity: dict[Any, int], want_anti: dict[Any, int]
) -> None:
    snapshot = snapshot_of([node("nodeA", {"hostname": "nodeA"})], pods)
    plugin = plugin_for(snapshot)
    state = CycleState()
    plugin.pre_filter(state, PodInfo(pod("affi-antiaffi", aff=aff)), snapshot.node_infos)
    found = state.read(_FILTER_KEY)
    assert found.affinity_counts.as_dict() == want_affinity
    assert found.anti_counts.as_dict() == want_anti


def test_nominated_pod_is_counted_through_add_pod() -> None:
    """A pod added by the add-pod extension repels like a bound one (nominated pods, preemption)."""
    snapshot = snapshot_of([node("a", {"hostname": "a"}), node("b", {"hostname": "b"})])
    plugin = plugin_for(snapshot)
    incoming = PodInfo(
        pod("p", {"app": "x"}, aff=affinity(anti=[term(labels={"app": "x"}, topology="hostname")]))
    )
    state = CycleState()
    assert plugin.pre_filter(state, incoming, snapshot.node_infos) == (None, None)
    clone = state.clone()
    plugin.add_pod(clone, incoming, PodInfo(pod("n", {"app": "x"}, node="a")), snapshot.get("a"))
    assert plugin.filter_rows(clone, incoming, snapshot.table, all_rows(snapshot)).tolist() == [False, True]
    assert plugin.filter(clone, incoming, snapshot.get("a")) == ANTI
    assert plugin.filter(state, incoming, snapshot.get("a")) is None


def test_a_node_that_comes_costs_its_own_row_not_one_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows move when nodes come or go; the per-row counts of the nodes that stayed move with them."""
    repel = affinity(anti=[term(labels={"app": "x"}, topology="hostname")])
    names = [f"n{i}" for i in range(20)]
    snapshot = snapshot_of(
        [node(name, {"hostname": name}) for name in names],
        [pod(f"p{i}", {"app": "x"}, node=name, aff=repel) for i, name in enumerate(names[::2])],
    )
    plugin = plugin_for(snapshot)
    incoming = PodInfo(pod("p", {"app": "x"}))
    state = CycleState()
    plugin.pre_filter(state, incoming, snapshot.node_infos)
    looked_at: list[str] = []
    carried = index_module._carried
    monkeypatch.setattr(
        index_module, "_carried", lambda info: (looked_at.append(info.name), carried(info))[1]
    )
    came = NodeInfo(node("came", {"hostname": "came"}))
    came.add_pod(PodInfo(pod("q", {"app": "x"}, node="came", aff=repel)))
    snapshot.rebuild([came, *reversed(snapshot.node_infos[1:])])  # n0 gone, the rest in reverse
    state = CycleState()
    plugin.pre_filter(state, incoming, snapshot.node_infos)
    assert looked_at == ["came"]
    rejected = [n.name for n in snapshot.node_infos if plugin.filter(state, incoming, n) is not None]
    assert sorted(rejected) == sorted(["came", *names[2::2]])
    assert plugin.filter_rows(state, incoming, snapshot.table, all_rows(snapshot)).tolist() == [
        n.name not in rejected for n in snapshot.node_infos
    ]


# -- args ----------------------------------------------------------------------------------------------
def test_args_defaults() -> None:
    args = decode_args(ipa.Args, {})
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (1, False)
    args.validate()


@pytest.mark.parametrize("weight", [0, 1, 100], ids=["zero", "one", "max"])
def test_args_valid_weights(weight: int) -> None:
    args = decode_args(
        ipa.Args, {"hardPodAffinityWeight": weight, "ignorePreferredTermsOfExistingPods": True}
    )
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (weight, True)
    assert args.validate() is None  # the bounds of [0, 100] are valid; the invalid cases follow


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        (
            {"hardPodAffinityWeight": -1},
            "hardPodAffinityWeight",
            "Invalid value: -1: not in valid range [0, 100]",
        ),
        (
            {"hardPodAffinityWeight": 101},
            "hardPodAffinityWeight",
            "Invalid value: 101: not in valid range [0, 100]",
        ),
        (
            {"hardPodAffinityWeight": 110},
            "hardPodAffinityWeight",
            "Invalid value: 110: not in valid range [0, 100]",
        ),
    ],
    ids=["negative", "just-over", "too-large"],
)
def test_args_invalid(raw: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        decode_args(ipa.Args, raw).validate()
    assert (caught.value.field, caught.value.message) == (field, message)


# -- queueing hints ------------------------------------------------------------------------------------
Q, S = QueueingHint.QUEUE, QueueingHint.SKIP
SEC_AFFINITY = affinity([_in("service", "region", "securityscan", "value2")])
SEC_ANTI = affinity(anti=[_in("service", "region", "securityscan", "value2")])
AAA_BBB = affinity([_exists("aaa", "hostname"), _exists("bbb", "hostname")])


def _p(
    uid: str,
    labels: dict[str, str],
    node_name: str = "",
    aff: dict[str, Any] | None = None,
    nominated: str = "",
) -> PodInfo:
    raw = pod(uid, labels, node=node_name, aff=aff)
    raw["metadata"]["uid"] = uid
    if nominated:
        raw["status"] = {"nominatedNodeName": nominated}
    return PodInfo(raw)


SCAN_OR_WEB = affinity(anti=[_in("service", "region", "securityscan"), _in("app", "region", "web")])
# Upstream's Test_isSchedulableAfterAssignedPodChange (v1.37), case by case.
POD_HINTS = [
    ("added-matches-affinity", SEC_AFFINITY, {}, None, _p("o", SEC_SCAN, "n"), Q),
    ("added-unscheduled", SEC_AFFINITY, {}, None, _p("o", SEC_SCAN), S),
    ("added-not-matching", SEC_AFFINITY, {}, None, _p("o", {"aaa": "a"}, "n"), S),
    ("updated-to-match", SEC_AFFINITY, {}, _p("o", {"aaa": "a"}, "n"), _p("o", SEC_SCAN, "n"), Q),
    (
        "matches-before-and-after",
        SEC_AFFINITY,
        {},
        _p("o", {"service": "value2"}, "n"),
        _p("o", SEC_SCAN, "n"),
        S,
    ),
    ("updated-unscheduled", SEC_AFFINITY, {}, _p("o", {"aaa": "a"}), _p("o", SEC_SCAN), S),
    ("updated-to-not-match", SEC_AFFINITY, {}, _p("o", SEC_SCAN, "n"), _p("o", {"aaa": "a"}, "n"), S),
    ("multi-term-to-not-match", AAA_BBB, {}, _p("o", {"aaa": "a"}, "n"), _p("o", SEC_SCAN, "n"), S),
    ("multi-term-to-match", AAA_BBB, {}, _p("o", {"aaa": "a"}, "n"), _p("o", {"aaa": "", "bbb": ""}, "n"), Q),
    (
        "updated-out-of-anti-affinity",
        SEC_ANTI,
        {},
        _p("o", SEC_SCAN, "n"),
        _p("o", {"service": "aaaa"}, "n"),
        Q,
    ),
    ("updated-into-anti-affinity", SEC_ANTI, {}, _p("o", {"service": "bbb"}, "n"), _p("o", SEC_SCAN, "n"), S),
    ("deleted-not-anti-matching", SEC_ANTI, {}, _p("o", {"aaa": "a"}, "n"), None, S),
    ("deleted-anti-matching", SEC_ANTI, {}, _p("o", SEC_SCAN, "n"), None, Q),
    ("deleted-repelling-pending", None, SEC_SCAN, _p("o", {}, "n", SEC_ANTI), None, Q),
    ("deleted-not-repelling-pending", None, {"service": "foo"}, _p("o", {}, "n", SEC_ANTI), None, S),
    (
        "deleted-neither-way",
        SEC_ANTI,
        {"service": "foo"},
        _p("o", {"service": "foo"}, "n", SEC_ANTI),
        None,
        S,
    ),
    ("deleted-nominated-not-anti-matching", SEC_ANTI, {}, _p("o", {"aaa": "a"}, nominated="n"), None, S),
    ("deleted-nominated-anti-matching", SEC_ANTI, {}, _p("o", SEC_SCAN, nominated="n"), None, Q),
    (
        "updated-out-of-one-of-two-anti-terms",
        SCAN_OR_WEB,
        {},
        _p("o", {"service": "securityscan", "app": "bar"}, "n"),
        _p("o", {"service": "foo", "app": "bar"}, "n"),
        Q,
    ),
    (
        "updated-still-in-one-of-two-anti-terms",
        SCAN_OR_WEB,
        {},
        _p("o", {"service": "securityscan", "app": "bar"}, "n"),
        _p("o", {"service": "foo", "app": "web"}, "n"),
        S,
    ),
    ("deleted-in-one-of-two-anti-terms", SCAN_OR_WEB, {}, _p("o", SEC_SCAN, "n"), None, Q),
    ("deleted-repelling-pending-on-one-term", None, SEC_SCAN, _p("o", {}, "n", SCAN_OR_WEB), None, Q),
]


@pytest.mark.parametrize(
    ("aff", "labels", "old", "new", "expected"), [c[1:] for c in POD_HINTS], ids=[c[0] for c in POD_HINTS]
)
def test_assigned_pod_change_hint(
    aff: dict[str, Any] | None,
    labels: dict[str, str],
    old: PodInfo | None,
    new: PodInfo | None,
    expected: QueueingHint,
) -> None:
    hints = {r.event: r.hint for r in plugin_for(snapshot_of([])).events_to_register()}
    hint = hints[ClusterEvent(Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE)]
    assert hint is not None
    assert hint(_p("p", labels, aff=aff), old, new) is expected


def test_target_pod_label_hint() -> None:
    """Upstream's Test_isSchedulableAfterTargetPodUpdateLabel: the pending pod's own relabelling queues."""
    hints = {r.event: r.hint for r in plugin_for(snapshot_of([])).events_to_register()}
    hint = hints[ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_LABEL)]
    assert hint is not None
    old, new = _p("p", {"foo": "bar"}), _p("p", {"foo": "baz"})
    assert hint(new, old, new) is Q


ZONE_AFFINITY = affinity([_in("service", "zone", "securityscan", "value2")])
REGION_AFFINITY = affinity([_in("service", "region", "securityscan", "value2")])
ZONE_ANTI = affinity(anti=[term(labels={"another": "label"}, topology="zone")])


def _n(**labels: str) -> NodeInfo:
    return NodeInfo(node("node-a", labels))


NODE_HINTS = [
    ("added-with-affinity-key", ZONE_AFFINITY, None, _n(zone="zone1"), Q),
    ("added-without-affinity-key", REGION_AFFINITY, None, _n(zone="zone1"), S),
    ("label-update-without-key", ZONE_AFFINITY, _n(aaa="a"), _n(aaa="b"), S),
    ("unrelated-label-update", ZONE_AFFINITY, _n(zone="zone1"), _n(zone="zone1", other="x"), S),
    ("affinity-key-value-changed", ZONE_AFFINITY, _n(zone="zone1"), _n(zone="zone2"), Q),
    ("affinity-key-gained", ZONE_AFFINITY, _n(aaa="a"), _n(zone="zone1"), Q),
    ("added-with-anti-affinity-key", ZONE_ANTI, None, _n(zone="zone1"), Q),
    ("added-without-anti-affinity-key", ZONE_ANTI, None, _n(), Q),
    ("unrelated-label-update-anti", ZONE_ANTI, _n(zone="zone1"), _n(zone="zone1", other="x"), S),
    ("anti-affinity-key-value-changed", ZONE_ANTI, _n(zone="zone1"), _n(zone="zone2"), Q),
    ("anti-affinity-key-gained", ZONE_ANTI, _n(aaa="a"), _n(zone="zone1"), S),
    ("anti-affinity-key-lost", ZONE_ANTI, _n(zone="zone1"), _n(aaa="a"), Q),
]


@pytest.mark.parametrize(
    ("aff", "old", "new", "expected"), [c[1:] for c in NODE_HINTS], ids=[c[0] for c in NODE_HINTS]
)
def test_node_change_hint(
    aff: dict[str, Any], old: NodeInfo | None, new: NodeInfo, expected: QueueingHint
) -> None:
    plugin = plugin_for(snapshot_of([]))
    hints = {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}
    hint = hints[(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL)]
    assert hint is not None
    assert hint(PodInfo(pod(aff=aff)), old, new) is expected


def test_events_registered() -> None:
    plugin = plugin_for(snapshot_of([]))
    events = {(r.event.resource, r.event.action) for r in plugin.events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.TARGET_POD, Action.UPDATE_POD_LABEL),
        (Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
        (Resource.NAMESPACE, Action.ADD | Action.UPDATE),
    }


def test_vector_filter_matches_per_node_on_subset_of_rows() -> None:
    nodes = [node(f"n{i}", {"zone": f"z{i % 2}", "hostname": f"n{i}"}) for i in range(6)]
    pods = [pod("e", {"app": "x"}, node="n1")]
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot)
    incoming = PodInfo(pod(aff=affinity(anti=[term(labels={"app": "x"}, topology="zone")])))
    state = CycleState()
    plugin.pre_filter(state, incoming, snapshot.node_infos)
    rows = np.array([5, 2, 1], dtype=np.int64)
    assert plugin.filter_rows(state, incoming, snapshot.table, rows).tolist() == [False, True, False]


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchLabels": 19284}, "matchLabels: must be an object"),
        ({"matchExpressions": {"key": "a"}}, "matchExpressions: must be a list of objects"),
    ],
    ids=["match-labels-number", "match-expressions-object"],
)
def test_selector_of_the_wrong_types_is_a_parse_error_of_the_pod(selector: Any, message: str) -> None:
    """As an invalid label value is (a file given to simulate may hold it; the API server stores none):
    the pod's terms are refused with a reason, the plugin raises nothing."""
    term = {"labelSelector": selector, "topologyKey": "zone"}
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    info = PodInfo(make_pod().name("p").affinity({"podAntiAffinity": anti}).obj())
    assert pod_terms(info).error == f"requiredAntiAffinityTerms: {message}"


def _ns(name: str, **labels: str) -> Namespace:
    return Namespace(name, labels)


TEAM1 = {"matchLabels": {"team": "team1"}}
NAMESPACE_HINTS = [
    # (id, pod affinity, pod namespace, old namespace, new namespace, expected)
    (
        "affinity-selector-now-picks-namespace",
        affinity(required=[term(labels={"app": "db"}, topology="zone", ns_selector=TEAM1)]),
        "default",
        _ns("x"),
        _ns("x", team="team1"),
        Q,
    ),
    (
        "anti-affinity-selector-no-longer-picks-namespace",
        affinity(anti=[term(labels={"app": "db"}, topology="zone", ns_selector=TEAM1)]),
        "default",
        _ns("x", team="team1"),
        _ns("x"),
        Q,
    ),
    (
        "new-namespace-picked",
        affinity(required=[term(labels={"app": "db"}, topology="zone", ns_selector=TEAM1)]),
        "default",
        None,
        _ns("x", team="team1"),
        Q,
    ),
    (
        "relabelled-but-still-picked",
        affinity(required=[term(labels={"app": "db"}, topology="zone", ns_selector=TEAM1)]),
        "default",
        _ns("x", team="team1"),
        _ns("x", team="team1", other="y"),
        S,
    ),
    (
        "pod-without-namespace-selectors",
        affinity(required=[term(labels={"app": "db"}, topology="zone")]),
        "default",
        _ns("x"),
        _ns("x", team="team1"),
        S,
    ),
    (
        "empty-selector-picks-every-namespace-anyway",
        affinity(required=[term(labels={"app": "db"}, topology="zone", ns_selector={})]),
        "default",
        _ns("x"),
        _ns("x", team="team1"),
        S,
    ),
    (
        "own-namespace-relabelled: existing pods' selectors may see it now",
        affinity(required=[term(labels={"app": "db"}, topology="zone")]),
        "x",
        _ns("x"),
        _ns("x", team="team1"),
        Q,
    ),
    ("labels-unchanged", {}, "x", _ns("x", team="team1"), _ns("x", team="team1"), S),
]


@pytest.mark.parametrize(
    ("aff", "namespace", "old", "new", "expected"),
    [c[1:] for c in NAMESPACE_HINTS],
    ids=[c[0] for c in NAMESPACE_HINTS],
)
def test_namespace_change_hint(
    aff: dict[str, Any], namespace: str, old: Namespace | None, new: Namespace, expected: QueueingHint
) -> None:
    plugin = plugin_for(snapshot_of([]))
    hints = {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}
    hint = hints[(Resource.NAMESPACE, Action.ADD | Action.UPDATE)]
    assert hint is not None
    assert hint(PodInfo(pod(namespace=namespace, aff=aff)), old, new) is expected
