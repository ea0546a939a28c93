"""PodTopologySpread: args, pre-filter state, filter, add/remove-pod extensions and queueing hints.

Cases and expectations follow upstream's ``podtopologyspread/{filtering,plugin}_test.go`` (v1.37.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _spread_kit import (
    BAR,
    FOO,
    all_rows,
    bound,
    foo_pods,
    incoming,
    match_nums,
    node,
    plugin_for,
    pre_filter_state,
    snapshot_of,
    spread,
    zn,
)

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, QueueingHint, Resource
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.framework.selectors import LabelSelector
from kopf_scheduler.framework.status import SKIP, Status, unresolvable, unschedulable
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    Args,
)
from kopf_scheduler.plugins.pod_topology_spread.filtering import NO_DOMAIN_MIN
from kopf_scheduler.plugins.registry import new_registry

AB_XY = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
A2_B1_Y2 = foo_pods(
    ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-y1", "node-y"), ("p-y2", "node-y")
)
A2_B1_Y4 = A2_B1_Y2 + foo_pods(("p-y3", "node-y"), ("p-y4", "node-y"))
ZONE_FOO = spread(1, "zone", selector=FOO)
NODE_FOO = spread(1, "node", selector=FOO)
NODE_BAR = spread(1, "node", selector=BAR)
ABC_FOO = [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""})]
ABC = [*ABC_FOO, node("node-c", {"node": "node-c", "bar": ""})]
ABC_BAR_PODS = [bound("p-a", "node-a", {"bar": ""}), bound("p-b", "node-b", {"bar": ""})]
ABC_BAR_PODS += [bound("p-c", "node-b", {"bar": ""}), bound("p-d", "node-c")]
ABC_TAINTED = [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})]
ABC_TAINTED += [node("node-c", {"node": "node-c", "bar": ""}, tainted=True)]


# -- args ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        pytest.param(
            {"defaultingType": "Other"},
            "defaultingType",
            'Unsupported value: "Other": supported values: "List", "System"',
            id="bad-defaulting-type",
        ),
        pytest.param(
            {"defaultConstraints": [spread(1, "zone", "ScheduleAnyway")]},
            "defaultingType",
            'Invalid value: "System": when .defaultConstraints are not empty',
            id="system-with-constraints",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(0, "zone", "ScheduleAnyway")]},
            "defaultConstraints[0].maxSkew",
            "Invalid value: 0: not in valid range (0, inf)",
            id="max-skew-zero",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, "", "ScheduleAnyway")]},
            "defaultConstraints[0].topologyKey",
            "Required value: can not be empty",
            id="empty-key",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, "-bad-", "ScheduleAnyway")]},
            "defaultConstraints[0].topologyKey",
            None,
            id="invalid-key",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, "zone", "")]},
            "defaultConstraints[0].whenUnsatisfiable",
            "Required value: can not be empty",
            id="empty-action",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, "zone", "Maybe")]},
            "defaultConstraints[0].whenUnsatisfiable",
            'Unsupported value: "Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"',
            id="bad-action",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, "zone", "ScheduleAnyway", FOO)]},
            "defaultConstraints[0].labelSelector",
            "Forbidden: constraint must not define a selector, as they deduced for each pod",
            id="selector-forbidden",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    spread(1, "zone", "ScheduleAnyway"),
                    spread(2, "zone", "ScheduleAnyway"),
                ],
            },
            "defaultConstraints[1]",
            'Duplicate value: "{zone, ScheduleAnyway}"',
            id="duplicate",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "skew": 1}
                ],
            },
            "defaultConstraints[0].skew",
            None,
            id="unknown-field",
        ),
    ],
)
def test_args_validation_names_the_field(raw: dict[str, Any], field: str, message: str | None) -> None:
    with pytest.raises(ArgsError) as info:
        decode_args(Args, raw).validate()
    assert info.value.field == field
    if message is not None:
        assert info.value.message == message


def test_args_defaults_and_list() -> None:
    assert decode_args(Args, {}) == Args((), "System")
    decode_args(Args, {}).validate()
    listed = decode_args(
        Args, {"defaultingType": "List", "defaultConstraints": [spread(1, "zone", "DoNotSchedule")]}
    )
    listed.validate()
    assert listed.default_constraints == (spread(1, "zone", "DoNotSchedule"),)


def _build_default(config: list[Any]) -> Any:
    profile = parse_profile({"schedulerName": "s", "pluginConfig": config})
    return build_framework(profile, new_registry(autoload=False), default_plugins(), client=None)  # type: ignore[arg-type]


def test_profile_args_reach_the_plugin_and_errors_name_the_path() -> None:
    listed = {"defaultingType": "List", "defaultConstraints": [spread(2, "zone", "ScheduleAnyway")]}
    framework = _build_default([{"name": "PodTopologySpread", "args": listed}])
    plugin = framework.plugins["PodTopologySpread"]
    assert not plugin.system_defaulted
    assert framework.score_weights["PodTopologySpread"] == 2
    with pytest.raises(ProfileError) as info:
        _build_default(
            [{"name": "PodTopologySpread", "args": {"defaultConstraints": [spread(1, "zone", "Nope")]}}]
        )
    assert str(info.value) == (
        "spec.pluginConfig[0].args.defaultingType: "
        'Invalid value: "System": when .defaultConstraints are not empty'
    )


# -- pre-filter ------------------------------------------------------------------------------------
PRE_FILTER_CASES = [
    (
        "clean-cluster",
        incoming(spread(5, "zone", selector={"matchLabels": {"foo": "bar"}})),
        AB_XY,
        [],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    ("one-constraint", incoming(ZONE_FOO), AB_XY, A2_B1_Y2, [{"zone1": 3, "zone2": 2}], [2]),
    ("null-selector", incoming(spread(1, "zone")), AB_XY, A2_B1_Y2, [{"zone1": 0, "zone2": 0}], [0]),
    (
        "three-zones",
        incoming(ZONE_FOO),
        [*AB_XY, zn("node-o", "zone3"), zn("node-p", "zone3")],
        A2_B1_Y2,
        [{"zone1": 3, "zone2": 2, "zone3": 0}],
        [0],
    ),
    (
        "namespace-mismatch",
        incoming(ZONE_FOO),
        AB_XY,
        [
            bound("p-a1", "node-a", {"foo": ""}),
            bound("p-a2", "node-a", {"foo": ""}, ns="ns1"),
            bound("p-b1", "node-b", {"foo": ""}),
            bound("p-y1", "node-y", {"foo": ""}, ns="ns2"),
            bound("p-y2", "node-y", {"foo": ""}),
        ],
        [{"zone1": 2, "zone2": 1}],
        [1],
    ),
    (
        "two-constraints",
        incoming(ZONE_FOO, NODE_FOO),
        AB_XY,
        A2_B1_Y4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}],
        [3, 0],
    ),
    (
        "soft-bypassed",
        incoming(
            spread(1, "zone", "ScheduleAnyway", FOO),
            ZONE_FOO,
            spread(1, "node", "ScheduleAnyway", FOO),
            NODE_FOO,
        ),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        A2_B1_Y4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "different-selectors-simple",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [bound("p-a", "node-a", {"foo": ""}), bound("p-b", "node-b", {"bar": ""})],
        [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
        [0, 0],
    ),
    (
        "different-selectors-complex",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [
            bound("p-a1", "node-a", {"foo": ""}),
            bound("p-a2", "node-a", {"foo": "", "bar": ""}),
            bound("p-b1", "node-b", {"foo": ""}),
            bound("p-y1", "node-y", {"foo": ""}),
            bound("p-y2", "node-y", {"foo": "", "bar": ""}),
            bound("p-y3", "node-y", {"foo": ""}),
            bound("p-y4", "node-y", {"foo": "", "bar": ""}),
        ],
        [{"zone1": 3, "zone2": 4}, {"node-a": 1, "node-b": 0, "node-y": 2}],
        [3, 0],
    ),
    (
        "node-affinity-excludes-node-x",
        incoming(ZONE_FOO, NODE_FOO, affinity_not_in=("node", ["node-x"])),
        AB_XY,
        A2_B1_Y4,
        [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
        [3, 1],
    ),
    (
        "affinity-policy-honored-node-selector",
        incoming(NODE_BAR, node_selector={"foo": ""}),
        ABC,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "affinity-policy-ignored-node-selector",
        incoming(spread(1, "node", selector=BAR, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}),
        ABC,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "affinity-policy-honored-node-affinity",
        incoming(NODE_BAR, affinity_in=("foo", [""])),
        ABC,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "affinity-policy-ignored-node-affinity",
        incoming(spread(1, "node", selector=BAR, nodeAffinityPolicy="Ignore"), affinity_in=("foo", [""])),
        ABC,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "taints-policy-ignored",
        incoming(NODE_BAR),
        ABC_TAINTED,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "taints-policy-honored",
        incoming(spread(1, "node", selector=BAR, nodeTaintsPolicy="Honor")),
        ABC_TAINTED,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2}],
        [1],
    ),
    (
        "taints-policy-honored-tolerated",
        incoming(spread(1, "node", selector=BAR, nodeTaintsPolicy="Honor"), tolerate_unschedulable=True),
        ABC_TAINTED,
        ABC_BAR_PODS,
        [{"node-a": 1, "node-b": 2, "node-c": 0}],
        [0],
    ),
    (
        "two-policies-zone-honor-ignore-node-ignore-ignore",
        incoming(
            ZONE_FOO, spread(1, "node", selector=FOO, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}
        ),
        [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo="")],
        foo_pods(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
        [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
        [0, 0],
    ),
    (
        "two-policies-zone-honor-honor-node-honor-ignore",
        incoming(spread(1, "zone", selector=FOO, nodeTaintsPolicy="Honor"), NODE_FOO),
        [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", tainted=True), zn("node-x", "zone2", foo="")],
        foo_pods(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
        [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
        [0, 0],
    ),
    (
        "two-policies-zone-honor-ignore-node-honor-ignore",
        incoming(ZONE_FOO, NODE_FOO, node_selector={"foo": ""}),
        [
            zn("node-a", "zone1"),
            zn("node-b", "zone1", tainted=True, foo=""),
            zn("node-x", "zone2", foo=""),
            zn("node-y", "zone2"),
        ],
        foo_pods(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        [{"zone1": 0, "zone2": 1}, {"node-b": 0, "node-x": 1}],
        [0, 0],
    ),
    (
        "two-policies-zone-ignore-ignore-node-honor-honor",
        incoming(
            spread(1, "zone", selector=FOO, nodeAffinityPolicy="Ignore"),
            spread(1, "node", selector=FOO, nodeTaintsPolicy="Honor"),
            node_selector={"foo": ""},
        ),
        [
            zn("node-a", "zone1"),
            zn("node-b", "zone1", tainted=True, foo=""),
            zn("node-x", "zone2", foo=""),
            zn("node-y", "zone2", foo=""),
        ],
        foo_pods(
            ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-x1", "node-x"), ("p-x2", "node-x"), ("p-y1", "node-y")
        ),
        [{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}],
        [2, 1],
    ),
    (
        "match-label-keys-anded-with-selector",
        incoming(spread(1, "zone", selector=FOO, matchLabelKeys=["bar"]), labels={"foo": "", "bar": "a"}),
        AB_XY,
        [
            bound("p-a1", "node-a", {"foo": ""}),
            bound("p-a2", "node-a", {"foo": "", "bar": "a"}),
            bound("p-b1", "node-b", {"foo": ""}),
            bound("p-y1", "node-y", {"foo": "", "bar": "a"}),
            bound("p-y2", "node-y", {"bar": ""}),
        ],
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "match-label-keys-anded-with-empty-selector",
        incoming(spread(1, "zone", selector={}, matchLabelKeys=["foo"]), labels={"foo": "a"}),
        AB_XY,
        [
            bound(n, on, {"foo": "a"})
            for n, on in (
                ("p-a1", "node-a"),
                ("p-a2", "node-a"),
                ("p-b1", "node-b"),
                ("p-y1", "node-y"),
                ("p-y2", "node-y"),
            )
        ],
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "match-label-keys-cannot-widen-null-selector",
        incoming(spread(1, "zone", matchLabelKeys=["bar"])),
        AB_XY,
        [bound(n, on, {"foo": "a"}) for n, on in (("p-a1", "node-a"), ("p-b1", "node-b"))],
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
    (
        "match-label-key-missing-on-pod",
        incoming(spread(1, "zone", selector=FOO, matchLabelKeys=["bar"])),
        AB_XY,
        [
            bound(n, on, {"foo": "a"})
            for n, on in (
                ("p-a1", "node-a"),
                ("p-a2", "node-a"),
                ("p-b1", "node-b"),
                ("p-y1", "node-y"),
                ("p-y2", "node-y"),
            )
        ],
        [{"zone1": 3, "zone2": 2}],
        [2],
    ),
    (
        "two-constraints-same-key",
        incoming(ZONE_FOO, spread(1, "zone", selector=BAR), labels={"foo": "", "bar": ""}),
        AB_XY,
        [
            bound("p-a1", "node-a", {"foo": "", "bar": ""}),
            bound("p-b1", "node-b", {"foo": ""}),
            bound("p-x1", "node-x", {"bar": ""}),
            bound("p-y1", "node-y", {"foo": "", "bar": ""}),
            bound("p-y2", "node-y", {"bar": ""}),
        ],
        [{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}],
        [1, 1],
    ),
    (
        "empty-selector-counts-nothing",
        incoming(spread(1, "zone", selector={})),
        AB_XY,
        A2_B1_Y2,
        [{"zone1": 0, "zone2": 0}],
        [0],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want", "mins"), [pytest.param(*c[1:], id=c[0]) for c in PRE_FILTER_CASES]
)
def test_pre_filter_counts_matching_pods_per_domain(
    pod: PodInfo, nodes: list[Any], pods: list[Any], want: list[dict[str, int]], mins: list[int]
) -> None:
    snapshot = snapshot_of(nodes, pods)
    state = CycleState()
    assert plugin_for(snapshot).pre_filter(state, pod, snapshot.node_infos) == (None, None)
    got = pre_filter_state(state)
    assert match_nums(got) == want
    assert [s.min_match for s in got.spreads] == mins


def _service_selecting(labels: dict[str, str]) -> Any:
    selector = LabelSelector.parse({"matchLabels": labels})
    return lambda pod: selector if selector is not None and selector.matches(pod.labels) else None


DEFAULTS = [spread(3, "node"), spread(2, "node", "ScheduleAnyway"), spread(5, "rack")]


@pytest.mark.parametrize(
    ("pod", "defaults", "service", "want_status", "want_constraints"),
    [
        pytest.param(
            PodInfo(bound("p", "", {"foo": "bar", "baz": "kar"})),
            DEFAULTS,
            {"foo": "bar"},
            None,
            [(3, "node"), (5, "rack")],
            id="defaults-and-a-service",
        ),
        pytest.param(
            PodInfo(bound("p", "", {"foo": "bar"})),
            [spread(3, "node")],
            {"baz": "kep"},
            SKIP,
            [],
            id="service-does-not-match",
        ),
        pytest.param(
            incoming(
                spread(1, "zone", selector={"matchLabels": {"baz": "tar"}}),
                spread(2, "planet", "ScheduleAnyway", {"matchLabels": {"fot": "rok"}}),
                labels={"foo": "bar", "baz": "tar"},
            ),
            [spread(2, "node")],
            {"foo": "bar"},
            None,
            [(1, "zone")],
            id="pod-constraints-win",
        ),
        pytest.param(
            PodInfo(bound("p", "", {"foo": "bar"})),
            [spread(2, "node", "ScheduleAnyway")],
            {"foo": "bar"},
            SKIP,
            [],
            id="only-soft-defaults",
        ),
        pytest.param(PodInfo(bound("p", "", {"foo": ""})), [], None, SKIP, [], id="nothing-specified"),
    ],
)
def test_pre_filter_default_constraints(
    pod: PodInfo,
    defaults: list[Any],
    service: dict[str, str] | None,
    want_status: Status | None,
    want_constraints: list[Any],
) -> None:
    snapshot = snapshot_of([])
    selector_of = _service_selecting(service) if service else (lambda pod: None)
    plugin = plugin_for(snapshot, Args(tuple(defaults), "List"), default_selector=selector_of)
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot.node_infos) == (None, want_status)
    if want_status is None:
        got = pre_filter_state(state)
        assert [(s.constraint.max_skew, s.constraint.topology_key) for s in got.spreads] == want_constraints
        assert all(s.min_match == NO_DOMAIN_MIN and s.domains_num == 0 for s in got.spreads)


def test_pre_filter_rejects_an_invalid_selector() -> None:
    pod = incoming(spread(1, "zone", selector={"matchExpressions": [{"key": "a", "operator": "Bad"}]}))
    snapshot = snapshot_of(AB_XY)
    with pytest.raises(ValueError, match="obtaining pod's hard topology spread constraints"):
        plugin_for(snapshot).pre_filter(CycleState(), pod, snapshot.node_infos)


# -- filter ----------------------------------------------------------------------------------------
S, U, X = None, unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH), unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
A2_B1_Y3 = A2_B1_Y2 + foo_pods(("p-y3", "node-y"))
NODES_ABC = [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
AB2_C1 = foo_pods(
    ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
)
NODES_ABXY_FOO = [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")] + [
    node("node-y", {"node": "node-y"})
]
A1_B1_Y1 = foo_pods(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y"))
ZONE_A1_B1_Y1 = foo_pods(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y"))

FILTER_CASES = [
    ("no-existing-pods", incoming(ZONE_FOO), AB_XY, [], [S, S, S, S]),
    (
        "incoming-pod-does-not-match-itself",
        incoming(spread(1, "zone", selector=BAR)),
        AB_XY,
        [],
        [S, S, S, S],
    ),
    (
        "other-namespaces-do-not-count",
        incoming(ZONE_FOO),
        AB_XY,
        [
            bound("p-a1", "node-a", {"foo": ""}, ns="ns1"),
            bound("p-b1", "node-a", {"foo": ""}, ns="ns2"),
            *foo_pods(("p-x1", "node-x"), ("p-y1", "node-y")),
        ],
        [S, S, U, U],
    ),
    (
        "null-selector-matches-nothing",
        incoming(spread(1, "zone")),
        AB_XY,
        foo_pods(("p-x1", "node-x"), ("p-y1", "node-y")),
        [S, S, S, S],
    ),
    ("zones-3-3-all-fit", incoming(ZONE_FOO), AB_XY, A2_B1_Y3, [S, S, S, S]),
    (
        "node-b-lacks-zone",
        incoming(ZONE_FOO),
        [
            zn("node-a", "zone1"),
            node("node-b", {"zon": "zone1", "node": "node-b"}),
            zn("node-x", "zone2"),
            zn("node-y", "zone2"),
        ],
        foo_pods(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        [S, X, U, U],
    ),
    (
        "no-node-has-rack",
        incoming(spread(1, "rack", selector=FOO)),
        [zn("node-a", "zone1"), zn("node-x", "zone2")],
        [],
        [X, X],
    ),
    ("nodes-2-1-0-3-only-x-fits", incoming(NODE_FOO), AB_XY, A2_B1_Y3, [U, U, S, U]),
    ("nodes-2-1-0-3-max-skew-2", incoming(spread(2, "node", selector=FOO)), AB_XY, A2_B1_Y3, [U, S, S, U]),
    (
        "nodes-2-1-0-3-pod-does-not-match-itself",
        incoming(NODE_FOO, labels={"bar": ""}),
        AB_XY,
        A2_B1_Y3,
        [U, S, S, U],
    ),
    (
        "node-affinity-counts-a-and-y-only",
        incoming(NODE_FOO, affinity_in=("node", ["node-a", "node-y"])),
        AB_XY,
        A2_B1_Y3,
        [S, S, S, U],
    ),
    (
        "terminating-pods-excluded",
        incoming(NODE_FOO),
        [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
        [bound("p-a", "node-a", {"foo": ""}, terminating=True), bound("p-b", "node-b", {"foo": ""})],
        [S, U],
    ),
    (
        "node-affinity-zones-0-2-0-1",
        incoming(ZONE_FOO, affinity_not_in=("node", ["node-b"])),
        AB_XY,
        foo_pods(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-y1", "node-y")),
        [S, S, U, U],
    ),
    (
        "min-domains-above-domains-num",
        incoming(spread(2, "node", selector=FOO, minDomains=4)),
        NODES_ABC,
        AB2_C1,
        [U, U, S],
    ),
    (
        "min-domains-below-domains-num",
        incoming(spread(2, "node", selector=FOO, minDomains=2)),
        NODES_ABC,
        AB2_C1,
        [S, S, S],
    ),
    (
        "min-domains-above-zones",
        incoming(spread(2, "zone", selector=FOO, minDomains=3)),
        AB_XY,
        ZONE_A1_B1_Y1,
        [U, U, S, S],
    ),
    (
        "min-domains-below-zones",
        incoming(spread(2, "zone", selector=FOO, minDomains=1)),
        AB_XY,
        ZONE_A1_B1_Y1,
        [S, S, S, S],
    ),
    (
        "affinity-policy-honored-node-selector",
        incoming(NODE_FOO, node_selector={"foo": ""}),
        NODES_ABXY_FOO,
        A1_B1_Y1,
        [U, U, S, S],
    ),
    (
        "affinity-policy-ignored-node-selector",
        incoming(spread(1, "node", selector=FOO, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}),
        NODES_ABXY_FOO,
        A1_B1_Y1,
        [U, U, S, U],
    ),
    (
        "affinity-policy-honored-node-affinity",
        incoming(NODE_FOO, affinity_in=("foo", [""])),
        NODES_ABXY_FOO,
        A1_B1_Y1,
        [U, U, S, S],
    ),
    (
        "affinity-policy-ignored-node-affinity",
        incoming(spread(1, "node", selector=FOO, nodeAffinityPolicy="Ignore"), affinity_in=("foo", [""])),
        NODES_ABXY_FOO,
        A1_B1_Y1,
        [U, U, S, U],
    ),
    (
        "taints-policy-honored",
        incoming(spread(1, "node", selector=FOO, nodeTaintsPolicy="Honor")),
        [*NODES_ABXY_FOO[:3], node("node-y", {"node": "node-y"}, tainted=True)],
        A1_B1_Y1,
        [U, U, S, S],
    ),
    (
        "taints-policy-ignored",
        incoming(NODE_FOO),
        [*NODES_ABXY_FOO[:3], node("node-y", {"node": "node-y"}, tainted=True)],
        A1_B1_Y1,
        [U, U, S, U],
    ),
    ("two-constraints-3-3-and-2-1-0-3", incoming(ZONE_FOO, NODE_FOO), AB_XY, A2_B1_Y3, [U, U, S, U]),
    ("two-constraints-3-4-and-2-1-0-4", incoming(ZONE_FOO, NODE_FOO), AB_XY, A2_B1_Y4, [U, U, U, U]),
    (
        "different-selectors-1-0-and-1-0-0-1",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        AB_XY,
        [bound("p-a1", "node-a", {"foo": ""}), bound("p-y1", "node-y", {"bar": ""})],
        [U, U, S, U],
    ),
    (
        "different-selectors-1-0-and-0-0-1-1",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        AB_XY,
        [
            bound("p-a1", "node-a", {"foo": ""}),
            bound("p-x1", "node-x", {"bar": ""}),
            bound("p-y1", "node-y", {"bar": ""}),
        ],
        [U, U, U, U],
    ),
    # v1.37.2 (as v1.34): an empty selector ({}) counts no existing pod, but the incoming pod matches it
    (
        "empty-selector-counts-nothing",
        incoming(spread(1, "node", selector={})),
        AB_XY,
        A2_B1_Y3,
        [S, S, S, S],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"), [pytest.param(*c[1:], id=c[0]) for c in FILTER_CASES]
)
def test_filter_judges_skew_per_node(
    pod: PodInfo, nodes: list[Any], pods: list[Any], want: list[Status | None]
) -> None:
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot)
    state = CycleState()
    assert plugin.pre_filter(state, pod, snapshot.node_infos) == (None, None)
    assert [plugin.filter(state, pod, n) for n in snapshot.node_infos] == want
    rows = all_rows(snapshot)
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == [w is None for w in want]


# -- add/remove-pod extensions ---------------------------------------------------------------------
AX = [zn("node-a", "zone1"), zn("node-x", "zone2")]
AB = [zn("node-a", "zone1"), zn("node-b", "zone1")]
ABX = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]
AFF_NODES = [zn("node-a", "zone1", foo="bar"), zn("node-b", "zone2", foo="")]
AFF_PODS = [bound("p-a2", "node-a", {"foo": ""}), bound("p-b1", "node-b", {"foo": ""})]
AFF_PODS_2 = [bound("p-a1", "node-a", {"foo": ""}), bound("p-b2", "node-b", {"foo": ""})]
TAINT_NODES = [zn("node-a", "zone1", tainted=True), zn("node-b", "zone2")]

ADD_CASES = [
    (
        "a-and-b-impact-min",
        incoming(NODE_FOO),
        AB,
        [],
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"node-a": 1, "node-b": 0}],
        [0],
    ),
    (
        "only-a-impacts-min",
        incoming(NODE_FOO),
        AB,
        foo_pods(("p-b1", "node-b")),
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"node-a": 1, "node-b": 1}],
        [1],
    ),
    (
        "other-namespace-ignored",
        incoming(NODE_FOO),
        AB,
        foo_pods(("p-b1", "node-b")),
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}, ns="ns1"),
        [{"node-a": 0, "node-b": 1}],
        [0],
    ),
    (
        "non-critical-node",
        incoming(NODE_FOO),
        AB,
        foo_pods(("p-b1", "node-b")),
        "node-b",
        bound("p-b2", "node-b", {"foo": ""}),
        [{"node-a": 0, "node-b": 2}],
        [0],
    ),
    (
        "a-and-x-impact-zone-and-node",
        incoming(ZONE_FOO, NODE_FOO),
        AX,
        [],
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
        [0, 0],
    ),
    (
        "only-a-impacts-zone-and-node",
        incoming(ZONE_FOO, NODE_FOO),
        AX,
        foo_pods(("p-x1", "node-x")),
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
        [1, 1],
    ),
    (
        "a-impacts-node-x-impacts-zone",
        incoming(ZONE_FOO, NODE_FOO),
        ABX,
        foo_pods(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
        [1, 1],
    ),
    (
        "different-selectors-a-impacts-zone",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        ABX,
        [
            bound("p-b1", "node-b", {"foo": "", "bar": ""}),
            bound("p-x1", "node-x", {"foo": "", "bar": ""}),
            bound("p-x2", "node-x", {"bar": ""}),
        ],
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}],
        [1, 0],
    ),
    (
        "different-selectors-a-impacts-both",
        incoming(ZONE_FOO, NODE_BAR, labels={"foo": "", "bar": ""}),
        ABX,
        [
            bound("p-b1", "node-b", {"bar": ""}),
            bound("p-x1", "node-x", {"foo": "", "bar": ""}),
            bound("p-x2", "node-x", {"bar": ""}),
        ],
        "node-a",
        bound("p-a1", "node-a", {"foo": "", "bar": ""}),
        [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
        [1, 1],
    ),
    (
        "node-affinity-unmatched-node",
        incoming(ZONE_FOO, affinity_not_in=("foo", ["bar"])),
        AFF_NODES,
        AFF_PODS,
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone2": 1}],
        [1],
    ),
    (
        "node-affinity-matched-node",
        incoming(ZONE_FOO),
        AFF_NODES,
        AFF_PODS_2,
        "node-b",
        bound("p-b1", "node-b", {"foo": ""}),
        [{"zone1": 1, "zone2": 2}],
        [1],
    ),
    (
        "selector-not-matched",
        incoming(ZONE_FOO),
        AFF_NODES,
        AFF_PODS_2,
        "node-b",
        bound("p-b1", "node-b", {"zone": "zone2"}),
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "taints-ignored",
        incoming(ZONE_FOO),
        TAINT_NODES,
        AFF_PODS_2,
        "node-b",
        bound("p-b1", "node-b", {"foo": ""}),
        [{"zone1": 1, "zone2": 2}],
        [1],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "on", "added", "want", "mins"),
    [pytest.param(*c[1:], id=c[0]) for c in ADD_CASES],
)
def test_add_pod_updates_counts(
    pod: PodInfo, nodes: list[Any], pods: list[Any], on: str, added: Any, want: Any, mins: list[int]
) -> None:
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot)
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.node_infos)
    node_info = snapshot.get(on)
    assert node_info is not None
    assert plugin.add_pod(state, pod, PodInfo(added), node_info) is None
    assert match_nums(pre_filter_state(state)) == want
    assert [s.min_match for s in pre_filter_state(state).spreads] == mins


REMOVE_CASES = [
    (
        "zone-min-unchanged",
        incoming(ZONE_FOO),
        ABX,
        foo_pods(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x")),
        "node-a",
        0,
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "zone-min-changed",
        incoming(ZONE_FOO),
        AB_XY,
        foo_pods(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        "node-a",
        0,
        [{"zone1": 1, "zone2": 2}],
        [1],
    ),
    (
        "irrelevant-pod",
        incoming(ZONE_FOO),
        AB_XY,
        [
            bound("p-a0", "node-a", {"bar": ""}),
            *foo_pods(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        ],
        "node-a",
        0,
        [{"zone1": 2, "zone2": 2}],
        [2],
    ),
    (
        "unmatched-affinity-node",
        incoming(ZONE_FOO, affinity_not_in=("foo", ["bar"])),
        AFF_NODES,
        AFF_PODS,
        "node-a",
        bound("p-a1", "node-a", {"foo": ""}),
        [{"zone2": 1}],
        [1],
    ),
    (
        "matched-affinity-node",
        incoming(ZONE_FOO),
        AFF_NODES,
        AFF_PODS_2,
        "node-b",
        bound("p-b1", "node-b", {"foo": ""}),
        [{"zone1": 1, "zone2": 0}],
        [0],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "on", "removed", "want", "mins"),
    [pytest.param(*c[1:], id=c[0]) for c in REMOVE_CASES],
)
def test_remove_pod_updates_counts(
    pod: PodInfo, nodes: list[Any], pods: list[Any], on: str, removed: Any, want: Any, mins: list[int]
) -> None:
    snapshot = snapshot_of(nodes, pods)
    plugin = plugin_for(snapshot)
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.node_infos)
    node_info = snapshot.get(on)
    assert node_info is not None
    victim = PodInfo(pods[removed] if isinstance(removed, int) else removed)
    assert plugin.remove_pod(state, pod, victim, node_info) is None
    assert match_nums(pre_filter_state(state)) == want
    assert [s.min_match for s in pre_filter_state(state).spreads] == mins


def test_state_clone_is_independent() -> None:
    snapshot = snapshot_of(AB, foo_pods(("p-b1", "node-b")))
    plugin = plugin_for(snapshot)
    state = CycleState()
    pod = incoming(NODE_FOO)
    plugin.pre_filter(state, pod, snapshot.node_infos)
    copy = state.clone()
    node_a = snapshot.get("node-a")
    assert node_a is not None
    plugin.add_pod(copy, pod, PodInfo(bound("p-a1", "node-a", {"foo": ""})), node_a)
    assert match_nums(pre_filter_state(state)) == [{"node-a": 0, "node-b": 1}]
    assert match_nums(pre_filter_state(copy)) == [{"node-a": 1, "node-b": 1}]


def test_counts_follow_snapshot_updates() -> None:
    """The per-node counts cached on the table are refreshed for nodes whose generation changed."""
    snapshot = snapshot_of(AB_XY, A2_B1_Y2)
    plugin = plugin_for(snapshot)
    pod = incoming(ZONE_FOO)
    plugin.pre_filter(CycleState(), pod, snapshot.node_infos)
    node_x = snapshot.get("node-x")
    assert node_x is not None
    changed = node_x.clone()
    changed.add_pod(PodInfo(bound("p-x1", "node-x", {"foo": ""})))
    changed.add_pod(PodInfo(bound("p-x2", "node-x", {"foo": ""})))
    snapshot.replace(changed)
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.node_infos)
    assert match_nums(pre_filter_state(state)) == [{"zone1": 3, "zone2": 4}]


# -- queueing hints --------------------------------------------------------------------------------
def test_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in plugin_for(snapshot_of([])).events_to_register()]
    assert events == [
        (Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
        (Resource.TARGET_POD, Action.UPDATE_POD_TOLERATION | Action.UPDATE_POD_LABEL),
        (Resource.NODE, Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT),
    ]


Q, SK = QueueingHint.QUEUE, QueueingHint.SKIP
TWO = (ZONE_FOO, NODE_FOO)


def _n(**labels: str) -> NodeInfo:
    return NodeInfo(node("node-a", labels))


@pytest.mark.parametrize(
    ("constraints", "old", "new", "want"),
    [
        pytest.param((ZONE_FOO,), _n(zone="zone1"), _n(zone="zone2"), Q, id="topology-label-changed"),
        pytest.param((ZONE_FOO,), _n(foo="bar1"), _n(foo="bar2"), SK, id="unrelated-node-unrelated-label"),
        pytest.param(
            TWO,
            _n(zone="zone1", node="node1", foo="bar"),
            _n(zone="zone1", node="node1"),
            SK,
            id="matching-node-unrelated-label",
        ),
        pytest.param((ZONE_FOO,), None, _n(foo="bar"), SK, id="add-unrelated-node"),
        pytest.param((ZONE_FOO,), None, _n(zone="zone1"), Q, id="add-related-node"),
        pytest.param((ZONE_FOO,), _n(foo="bar"), None, SK, id="delete-unrelated-node"),
        pytest.param((ZONE_FOO,), _n(zone="zone1"), None, Q, id="delete-related-node"),
        pytest.param(TWO, None, _n(zone="zone1"), SK, id="add-node-matching-one-key"),
        pytest.param(TWO, None, _n(zone="zone1", node="node1"), Q, id="add-node-matching-all-keys"),
        pytest.param(TWO, _n(zone="zone1"), _n(zone="zone1"), SK, id="update-node-matching-one-key"),
        pytest.param(
            TWO,
            _n(zone="zone1", node="node1"),
            _n(zone="zone1", node="node2"),
            Q,
            id="update-node-matching-all-keys",
        ),
        pytest.param(
            (ZONE_FOO,),
            _n(zone="zone1"),
            NodeInfo(node("node-a", {"zone": "zone1"}, tainted=True)),
            Q,
            id="taints-changed-on-matching-node",
        ),
    ],
)
def test_node_change_hint(constraints: Any, old: Any, new: Any, want: QueueingHint) -> None:
    plugin = plugin_for(snapshot_of([]))
    assert plugin._node_changed(incoming(*constraints), old, new) == want


def _p(
    name: str = "q", on: str = "fake-node", ns: str = "default", nominated: str = "", **labels: str
) -> PodInfo:
    raw = bound(name, on, labels, ns=ns)
    if nominated:
        raw["status"] = {**(raw.get("status") or {}), "nominatedNodeName": nominated}
    return PodInfo(raw)


TWO_SELECTORS = (ZONE_FOO, spread(1, "node", selector=BAR))


@pytest.mark.parametrize(
    ("constraints", "old", "new", "want"),
    [
        pytest.param((ZONE_FOO,), None, _p(foo=""), Q, id="add-matching-pod"),
        pytest.param((ZONE_FOO,), None, _p(on="", foo=""), SK, id="add-unscheduled-pod"),
        pytest.param((ZONE_FOO,), _p(on="", bar=""), _p(on="", foo=""), SK, id="update-unscheduled-pod"),
        pytest.param((ZONE_FOO,), _p(on="", foo=""), None, SK, id="delete-unscheduled-pod"),
        pytest.param((ZONE_FOO,), None, _p(ns="fake-namespace", foo=""), SK, id="add-pod-other-namespace"),
        pytest.param((ZONE_FOO,), None, _p(bar=""), SK, id="add-unmatching-pod"),
        pytest.param((ZONE_FOO,), _p(foo=""), None, Q, id="delete-matching-pod"),
        pytest.param(
            (ZONE_FOO,), _p(on="", nominated="n", bar=""), None, SK, id="delete-nominated-unmatching"
        ),
        pytest.param((ZONE_FOO,), _p(on="", nominated="n", foo=""), None, Q, id="delete-nominated-matching"),
        pytest.param((ZONE_FOO,), _p(bar=""), None, SK, id="delete-unmatching-pod"),
        pytest.param(
            (ZONE_FOO,), _p(foo="", bar="bar1"), _p(foo="", bar="bar2"), SK, id="update-unrelated-label"
        ),
        pytest.param((ZONE_FOO,), _p(), _p(foo=""), Q, id="add-matching-label"),
        pytest.param((ZONE_FOO,), _p(foo=""), _p(), Q, id="remove-matching-label"),
        pytest.param((ZONE_FOO,), _p(foo="foo1"), _p(foo="foo2"), SK, id="change-matching-label-value"),
        pytest.param(TWO_SELECTORS, _p(foo=""), _p(foo="", bar="bar2"), Q, id="multi-add-matching-label"),
        pytest.param(TWO_SELECTORS, _p(foo=""), _p(foo="", baz=""), SK, id="multi-add-unrelated-label"),
        pytest.param(TWO_SELECTORS, _p(foo="", bar=""), _p(foo="", bar="bar2"), SK, id="multi-change-value"),
    ],
)
def test_assigned_pod_change_hint(constraints: Any, old: Any, new: Any, want: QueueingHint) -> None:
    """Upstream's Test_isSchedulableAfterAssignedPodChange (v1.37)."""
    plugin = plugin_for(snapshot_of([]))
    assert plugin._assigned_pod_changed(incoming(*constraints), old, new) == want


def _target(labels: dict[str, str], tolerate: bool = False) -> PodInfo:
    return incoming(labels=labels, tolerate_unschedulable=tolerate)


@pytest.mark.parametrize(
    ("policy", "old", "new", "want"),
    [
        pytest.param("Honor", _target({"foo": ""}), _target({"foo": ""}, True), Q, id="toleration-honor"),
        pytest.param("Ignore", _target({"foo": ""}), _target({"foo": ""}, True), SK, id="toleration-ignore"),
        pytest.param("Ignore", _target({}), _target({"foo": ""}), Q, id="label-matching-selector"),
        pytest.param("Ignore", _target({}), _target({"unrelated": ""}), SK, id="unrelated-label"),
    ],
)
def test_target_pod_change_hint(policy: str, old: PodInfo, new: PodInfo, want: QueueingHint) -> None:
    """Upstream's Test_isSchedulableAfterTargetPodChange (v1.37): the pending pod's own constraints decide."""
    plugin = plugin_for(snapshot_of([]))
    pod = incoming(spread(1, "zone", selector=FOO, nodeTaintsPolicy=policy), spread(1, "node", selector=BAR))
    assert plugin._target_pod_changed(pod, old, new) == want


def test_filter_rows_on_a_subset_of_rows() -> None:
    snapshot = snapshot_of(AB_XY, A2_B1_Y3)
    plugin = plugin_for(snapshot)
    pod = incoming(NODE_FOO)
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.node_infos)
    rows = np.array([3, 2], dtype=np.int64)
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == [False, True]
